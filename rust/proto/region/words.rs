// SPDX-License-Identifier: GPL-2.0

//! The packed words of a region: the format word, node words, link words and export
//! directory entries. Every unpack validates (a peer may write anything).

use super::NodeId;
use crate::proto::cursor::{field16, field32, field8};
use crate::proto::mailbox;

/// Where a region's formatting stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FormatState {
    /// Nobody formatted it (zeroed memory, or a word this code does not know).
    Blank,
    /// `node` claimed it with `ticket` and is writing the header.
    Formatting,
    /// The header is complete.
    Ready,
}

/// The format word: who formats, and whether it is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FormatWord {
    /// The state.
    pub(crate) state: FormatState,
    /// The formatting node.
    pub(crate) node: NodeId,
    /// The formatter's claim ticket (it tells a stuck claim from a new one).
    pub(crate) ticket: u32,
}

impl FormatWord {
    /// Packs: state (8 bits; 1 formatting, 2 ready), node (16), ticket (32).
    pub(crate) const fn pack(self) -> u64 {
        let state: u64 = match self.state {
            FormatState::Blank => 0,
            FormatState::Formatting => 1,
            FormatState::Ready => 2,
        };
        state | ((self.node as u64) << 16) | ((self.ticket as u64) << 32)
    }

    /// Unpacks; an unknown state reads as [`FormatState::Blank`].
    pub(crate) const fn unpack(w: u64) -> Self {
        let state = match field8(w, 0) {
            1 => FormatState::Formatting,
            2 => FormatState::Ready,
            _ => FormatState::Blank,
        };
        Self {
            state,
            node: field16(w, 16),
            ticket: field32(w, 32),
        }
    }
}

/// The life of a node, as its node word says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NodeState {
    /// Never joined (or the table was just formatted).
    Absent,
    /// Joining: initializing its area, waiting for old links to it to go.
    Joining,
    /// Up: heartbeating, serving its mailboxes.
    Up,
    /// Left cleanly.
    Down,
}

/// A node's own word in its node table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NodeWord {
    /// Its state.
    pub(crate) state: NodeState,
    /// It takes interrupts: ring its doorbell after setting bits.
    pub(crate) doorbell: bool,
    /// Its doorbell id (ivshmem's IVPosition), which may differ from its node id.
    pub(crate) doorbell_id: u16,
    /// Its generation (0 before its first join).
    pub(crate) generation: u32,
}

/// Node word flag: the node takes interrupts.
const NODE_F_DOORBELL: u8 = 1;

impl NodeWord {
    /// The word of a node that never joined.
    pub(crate) const ABSENT: NodeWord = NodeWord {
        state: NodeState::Absent,
        doorbell: false,
        doorbell_id: 0,
        generation: 0,
    };

    /// Packs: state (8 bits), flags (8), doorbell id (16), generation (32).
    pub(crate) const fn pack(self) -> u64 {
        let state: u64 = match self.state {
            NodeState::Absent => 0,
            NodeState::Joining => 1,
            NodeState::Up => 2,
            NodeState::Down => 3,
        };
        let flags: u64 = if self.doorbell {
            NODE_F_DOORBELL as u64
        } else {
            0
        };
        state | (flags << 8) | ((self.doorbell_id as u64) << 16) | ((self.generation as u64) << 32)
    }

    /// Unpacks; `None` for a state or flag this code does not know.
    pub(crate) const fn unpack(w: u64) -> Option<Self> {
        let state = match field8(w, 0) {
            0 => NodeState::Absent,
            1 => NodeState::Joining,
            2 => NodeState::Up,
            3 => NodeState::Down,
            _ => return None,
        };
        let flags = field8(w, 8);
        if flags & !NODE_F_DOORBELL != 0 {
            return None;
        }
        Some(Self {
            state,
            doorbell: flags & NODE_F_DOORBELL != 0,
            doorbell_id: field16(w, 16),
            generation: field32(w, 32),
        })
    }
}

/// The generation a node takes on its next join (never 0: 0 is "never joined" and
/// "not linked").
pub(crate) const fn next_node_generation(g: u32) -> u32 {
    mailbox::next_generation(g)
}

/// A link word: which generation of a peer a node is linked with, and the node's link
/// sequence number (bumped on every link it makes), so that a peer can tell a new link
/// from the one it knew even when the generation is the same.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LinkWord {
    /// The peer's generation (0: not linked).
    pub(crate) generation: u32,
    /// The linking node's link sequence number.
    pub(crate) seq: u32,
}

impl LinkWord {
    /// Not linked.
    pub(crate) const NONE: LinkWord = LinkWord {
        generation: 0,
        seq: 0,
    };

    /// Packs: generation low, sequence high.
    pub(crate) const fn pack(self) -> u64 {
        (self.generation as u64) | ((self.seq as u64) << 32)
    }

    /// Unpacks.
    pub(crate) const fn unpack(w: u64) -> Self {
        Self {
            generation: field32(w, 0),
            seq: field32(w, 32),
        }
    }
}

/// A directory entry: the pages of the owner's heap exported under a channel.
///
/// One word, so a reader never sees half an update: generation (16 bits, 0 = nothing
/// exported), length in pages (24), first page (24).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DirEntry {
    /// First page, relative to the owner's heap.
    pub(crate) page: u32,
    /// Length in pages (at least 1).
    pub(crate) pages: u32,
    /// Export generation of the channel (never 0 in a valid entry).
    pub(crate) generation: u16,
}

/// Mask of a 24-bit directory field.
const DIR_FIELD: u32 = (1 << 24) - 1;

impl DirEntry {
    /// Packs the entry, or `None` if a field is out of range.
    pub(crate) const fn pack(self) -> Option<u64> {
        if self.generation == 0
            || self.pages == 0
            || self.page > DIR_FIELD
            || self.pages > DIR_FIELD
        {
            return None;
        }
        Some((self.page as u64) | ((self.pages as u64) << 24) | ((self.generation as u64) << 48))
    }

    /// Unpacks; `None` for an empty entry.
    pub(crate) const fn unpack(w: u64) -> Option<Self> {
        let e = Self {
            page: field32(w, 0) & DIR_FIELD,
            pages: field32(w, 24) & DIR_FIELD,
            generation: field16(w, 48),
        };
        if e.generation == 0 || e.pages == 0 {
            None
        } else {
            Some(e)
        }
    }

    /// The next export generation after `g` (never 0).
    pub(crate) const fn next_generation(g: u16) -> u16 {
        let n = g.wrapping_add(1);
        if n == 0 {
            1
        } else {
            n
        }
    }
}
