// SPDX-License-Identifier: GPL-2.0

//! The inbox of control frames waiting for the listener kthread, shared fairly.
//!
//! Frames arrive from the fabric (in interrupt or poller context) faster than the
//! kthread may take them: a peer node can flood its mailbox with forged frames, and a
//! debug kernel takes long over each. A frame that finds no room is dropped (its sender's
//! connect times out and falls back), so one node must not be able to take all the room:
//! a remote node holds at most [`NODE_SHARE`] frames, and the last [`OWN_RESERVE`] places
//! are kept for this node's own frames (its connections to itself). An honest node's
//! burst gets what the whole inbox used to hold (256 frames).

use crate::config::rules::NODES_MAX;
use crate::fabric::NodeId;
use crate::proto::frame::FRAME_SIZE;
use kernel::alloc::KVVec;
use kernel::prelude::*;

/// Frames the inbox holds.
const FRAMES: usize = 1024;
/// The most frames of one remote node queued at once.
const NODE_SHARE: u16 = 256;
/// Places only this node's own frames may take.
const OWN_RESERVE: usize = 256;

/// A ring of inbound frames with a count per sending node.
pub(super) struct Inbox {
    frames: KVVec<(NodeId, [u8; FRAME_SIZE])>,
    head: usize,
    len: usize,
    /// Frames queued per node (ids from [`NODES_MAX`] on share the last counter).
    queued: KVec<u16>,
    /// This node's id (its frames come straight from its own sends).
    own: NodeId,
}

/// Why [`Inbox::push`] dropped a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Dropped {
    /// The inbox is full (for a remote node: all but the places kept for this node's).
    Full,
    /// The sending node holds its share already.
    OverShare,
}

impl Inbox {
    /// An empty inbox.
    pub(super) fn new() -> Result<Self> {
        let mut frames = KVVec::with_capacity(FRAMES, GFP_KERNEL)?;
        for _ in 0..FRAMES {
            frames.push((0, [0u8; FRAME_SIZE]), GFP_KERNEL)?;
        }
        let mut queued = KVec::with_capacity(NODES_MAX + 1, GFP_KERNEL)?;
        for _ in 0..=NODES_MAX {
            queued.push(0u16, GFP_KERNEL)?;
        }
        Ok(Self {
            frames,
            head: 0,
            len: 0,
            queued,
            own: NodeId::MAX,
        })
    }

    /// Sets this node's id (the fabric's, once it is open).
    pub(super) fn set_own(&mut self, own: NodeId) {
        self.own = own;
    }

    fn counter(&mut self, node: NodeId) -> &mut u16 {
        let i = usize::from(node).min(NODES_MAX);
        &mut self.queued.as_mut_slice()[i]
    }

    /// Queues `frame` from `from`, unless the rules above drop it.
    pub(super) fn push(&mut self, from: NodeId, frame: [u8; FRAME_SIZE]) -> Result<(), Dropped> {
        if from == self.own {
            if self.len == FRAMES {
                return Err(Dropped::Full);
            }
        } else {
            if self.len >= FRAMES - OWN_RESERVE {
                return Err(Dropped::Full);
            }
            if *self.counter(from) >= NODE_SHARE {
                return Err(Dropped::OverShare);
            }
        }
        let tail = (self.head + self.len) % FRAMES;
        self.frames.as_mut_slice()[tail] = (from, frame);
        self.len += 1;
        *self.counter(from) += 1;
        Ok(())
    }

    /// The oldest frame, and who sent it.
    pub(super) fn pop(&mut self) -> Option<(NodeId, [u8; FRAME_SIZE])> {
        if self.len == 0 {
            return None;
        }
        let item = self.frames.as_slice()[self.head];
        self.head = (self.head + 1) % FRAMES;
        self.len -= 1;
        let c = self.counter(item.0);
        *c = c.saturating_sub(1);
        Some(item)
    }

    /// Whether no frame waits.
    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }
}
