// SPDX-License-Identifier: GPL-2.0

//! The loopback fabric: both ends of every connection are in this kernel.
//!
//! Segments are kernel memory, kept for reuse when they go (`seg_pool.rs`); "mapping" a
//! peer's segment takes another reference on the same memory; a doorbell is a direct call
//! to the control plane; a control frame is handed to the control plane's inbound queue.
//! It is the fabric behind `AF_SCI` connections to this node's own addresses, and the
//! reference for other backends.

use super::memory::SegMem;
use super::seg_pool::SegPool;
use super::{Fabric, FabricEvents, NodeId};
use crate::proto::frame::FRAME_SIZE;
use crate::sys::bindings;
use crate::sys::errno::errno;
use kernel::prelude::*;
use kernel::sync::{Arc, SpinLock};

/// The loopback backend (a single node).
#[pin_data]
pub(crate) struct Loopback {
    node: NodeId,
    /// Exported segments, indexed by channel (a connection slot).
    #[pin]
    exports: SpinLock<KVec<Option<Arc<SegMem>>>>,
    /// Segment memory kept for reuse: a short connection costs no `vmalloc`/`vfree`.
    pool: Arc<SegPool>,
    events: Arc<dyn FabricEvents>,
}

impl Loopback {
    /// A loopback fabric of node `node` with `channels` channels, delivering to `events`.
    pub(crate) fn new(
        node: NodeId,
        channels: usize,
        events: Arc<dyn FabricEvents>,
    ) -> Result<impl PinInit<Self>> {
        let mut table = KVec::with_capacity(channels, GFP_KERNEL)?;
        for _ in 0..channels {
            table.push(None, GFP_KERNEL)?;
        }
        let pool = SegPool::new()?;
        Ok(pin_init!(Self {
            node,
            exports <- kernel::new_spinlock!(table, "Loopback::exports"),
            pool,
            events,
        }))
    }
}

impl Fabric for Loopback {
    fn name(&self) -> &'static str {
        "loopback"
    }

    fn local_node(&self) -> NodeId {
        self.node
    }

    fn reaches(&self, node: NodeId) -> bool {
        node == self.node
    }

    // Every segment is this node's, and so is every peer.
    fn create_segment(&self, channel: u32, len: usize, _peer: NodeId) -> Result<Arc<SegMem>> {
        let seg = SegMem::alloc_pooled(len, &self.pool)?;
        let old = {
            let mut table = self.exports.lock();
            let slot = table
                .as_mut_slice()
                .get_mut(channel as usize)
                .ok_or(EINVAL)?;
            slot.replace(seg.clone())
        };
        // A stale export is freed outside the lock (freeing may sleep).
        drop(old);
        Ok(seg)
    }

    fn map_segment(&self, node: NodeId, channel: u32) -> Result<Arc<SegMem>> {
        if node != self.node {
            return Err(errno(bindings::EHOSTUNREACH));
        }
        let table = self.exports.lock();
        table
            .as_slice()
            .get(channel as usize)
            .and_then(Clone::clone)
            .ok_or(ENOENT)
    }

    fn unexport(&self, channel: u32) {
        let old = {
            let mut table = self.exports.lock();
            table
                .as_mut_slice()
                .get_mut(channel as usize)
                .and_then(Option::take)
        };
        drop(old);
    }

    fn notify(&self, node: NodeId, channel: u32) {
        if node == self.node {
            self.events.doorbell(channel);
        }
    }

    fn send_control(&self, node: NodeId, frame: &[u8; FRAME_SIZE]) -> Result {
        if node != self.node {
            return Err(errno(bindings::EHOSTUNREACH));
        }
        self.events.control(self.node, *frame);
        Ok(())
    }
}
