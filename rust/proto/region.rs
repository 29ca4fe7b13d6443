// SPDX-License-Identifier: GPL-2.0

//! The shared region of an inter-VM fabric (one PCI BAR that every node maps).
//!
//! ```text
//! 0x000 header, line 0 (formatter, once)  u32 magic "SCIR" | u32 version | u64 size |
//!                                         u32 nodes | u32 channels | u32 mailbox slots log2
//! 0x040 header, line 1                    u64 format word: state | formatter node | ticket
//! 0x100 node table: `nodes` entries of 0x140 bytes, entry i written by node i only
//!         0x00 u64 node word: state | flags | doorbell id (IVPosition) | generation
//!         0x08 u64 heartbeat counter
//!         0x40 u64 links[MAX_NODES]: links[j] = the generation of node j that node i is
//!              linked with | i's link sequence number (0: not linked)
//! page-aligned: `nodes` areas of `area_size` bytes, area i owned by node i:
//!         0x00 u64 mail pending (bit j: node j sent a control frame)   ┐ written by peers
//!         0x08 u64 doorbell summary (bit w: word w of the bitmap)      │ (atomic OR; the
//!         0x40 channel bitmap, `channels` bits                         ┘ owner swaps to 0)
//!         slot areas of the mailboxes j → i, one per node j            written by node j
//!         ack areas of the mailboxes i → j, one per node j             written by node j
//!         export directory: `channels` u64 entries                     written by node i
//!         heap (page-aligned): node i's segments, which peers map and write
//! ```
//!
//! Why it looks like this:
//!
//! - **Nothing a peer writes is trusted.** Every place in the region is a function of the
//!   header's four parameters, which [`Layout::new`] checks against the length of the
//!   mapping this node made itself; there are no stored pointers to follow. A node's area
//!   is `areas + i * area_size`, not a pointer in its node entry that a peer could bend.
//!   An export directory entry names pages *inside its owner's heap*, checked by
//!   [`Region::lookup`]. So a peer writing garbage anywhere can break its own
//!   connections, never make this node touch memory outside the region.
//! - **One writer per word**, as in the queues: a node writes its own node entry, its own
//!   directory and, as the receiver of a mailbox, the ack word in the sender's area. The
//!   only words with several writers are the doorbell bits (peers OR bits in, the owner
//!   swaps them out) and the format word (compare-and-exchange), which need
//!   [`SharedWords`]. ivshmem's BAR is host RAM shared between the QEMU processes,
//!   coherent for atomics; a non-coherent fabric (PCIe NTB) would replace these two with
//!   per-sender words.
//! - **A channel number does not fit in an interrupt vector**: a sender sets the channel's
//!   bit in the receiver's bitmap and the bitmap word's bit in the summary, then rings the
//!   receiver's one vector; the receiver swaps the summary, then each marked bitmap word,
//!   to zero. A bit set between the two swaps is found on the next interrupt or poll.
//! - **Generations**: a node's generation grows on every join, so its peers can tell a
//!   restarted node from the one they knew (see [`super::liveness`]).

use super::cursor::{field16, field32, field8};
use super::mailbox::{self, MailboxError, MailboxGeometry, MailboxRx, MailboxTx, MB_ACK_SIZE};
use super::ring::{clamp_to_usize, fits, Span, CACHE_LINE};
use super::segment::Segment;

/// A node of the fabric: its index in the node table.
pub(crate) type NodeId = u16;

/// `"SCIR"` as a little-endian u32: the region's magic.
pub(crate) const REGION_MAGIC: u32 = u32::from_le_bytes(*b"SCIR");
/// Layout version of the region.
pub(crate) const REGION_VERSION: u32 = 1;
/// Granule of segments and alignment of areas and heaps.
pub(crate) const PAGE_SIZE: usize = 4096;
/// Most nodes a region can hold (the width of the mail-pending word and of the links).
pub(crate) const MAX_NODES: u32 = 32;
/// Most channels a node can export (64 bitmap words, one summary word).
pub(crate) const MAX_CHANNELS: u32 = 4096;
/// Largest segment and heap, in pages (a directory entry holds 24-bit page numbers).
pub(crate) const MAX_PAGES: usize = 1 << 24;

/// Header: u32 magic.
pub(crate) const HDR_MAGIC: usize = 0x00;
/// Header: u32 layout version.
pub(crate) const HDR_VERSION: usize = 0x04;
/// Header: u64 region size in bytes.
pub(crate) const HDR_SIZE: usize = 0x08;
/// Header: u32 node count.
pub(crate) const HDR_NODES: usize = 0x10;
/// Header: u32 channels per node.
pub(crate) const HDR_CHANNELS: usize = 0x14;
/// Header: u32 log2 of the mailbox slot count.
pub(crate) const HDR_MB_LOG2: usize = 0x18;
/// Header: u64 format word ([`FormatWord`]), on its own line.
pub(crate) const HDR_FORMAT: usize = 0x40;
/// Offset of the node table.
pub(crate) const NODE_TABLE: usize = 0x100;
/// Size of a node table entry.
pub(crate) const NODE_ENTRY_SIZE: usize = 0x140;
/// Node entry: u64 node word ([`NodeWord`]).
pub(crate) const NODE_WORD: usize = 0x00;
/// Node entry: u64 heartbeat counter.
pub(crate) const NODE_HEARTBEAT: usize = 0x08;
/// Node entry: u64 links ([`LinkWord`]), one per node.
pub(crate) const NODE_LINKS: usize = 0x40;
/// Area: u64 mail pending, bit j for sender j.
pub(crate) const AREA_MAIL: usize = 0x00;
/// Area: u64 doorbell summary, bit w for bitmap word w.
pub(crate) const AREA_SUMMARY: usize = 0x08;
/// Area: the channel bitmap.
pub(crate) const AREA_BITMAP: usize = CACHE_LINE;

/// Atomic read-modify-write on shared words, beyond what [`Segment`] offers: what the
/// doorbell bits and the format word need.
///
/// Same contract as [`Segment`] (bounds- and alignment-checked by the implementation,
/// a bad offset loads 0 / stores nothing), plus: each operation is one atomic RMW that
/// is coherent with the other nodes' RMWs on the same word, with full-barrier ordering.
pub(crate) trait SharedWords: Segment {
    /// Atomically ORs `v` into the word at `off`; returns the old value.
    fn fetch_or_u64(&self, off: usize, v: u64) -> u64;

    /// Atomically replaces the word at `off` with `v`; returns the old value.
    fn swap_u64(&self, off: usize, v: u64) -> u64;

    /// Atomically replaces the word at `off` with `new` if it holds `current`; returns
    /// `Ok(current)` on success, else `Err(actual)`.
    fn compare_exchange_u64(&self, off: usize, current: u64, new: u64) -> Result<u64, u64>;
}

/// Any pointer to shared words is shared words (as for [`Segment`]).
impl<P> SharedWords for P
where
    P: core::ops::Deref,
    P::Target: SharedWords,
{
    fn fetch_or_u64(&self, off: usize, v: u64) -> u64 {
        (**self).fetch_or_u64(off, v)
    }

    fn swap_u64(&self, off: usize, v: u64) -> u64 {
        (**self).swap_u64(off, v)
    }

    fn compare_exchange_u64(&self, off: usize, current: u64, new: u64) -> Result<u64, u64> {
        (**self).compare_exchange_u64(off, current, new)
    }
}

/// Why a region cannot be used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RegionError {
    /// The magic is not ours: the region was never formatted (or holds something else).
    NotFormatted,
    /// Formatted by an incompatible layout version.
    Version,
    /// The header's parameters are out of range or do not fit the mapping.
    BadParams,
    /// A node id outside the node table.
    NoSuchNode,
    /// A mailbox could not be placed (cannot happen for a valid layout).
    Mailbox,
    /// Another node took the formatting over (this node's claim had expired).
    ClaimLost,
}

/// The parameters a formatter chooses; everything else follows from them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RegionParams {
    /// Bytes of the region the layout covers.
    pub(crate) size: u64,
    /// Node table entries (1..=[`MAX_NODES`]).
    pub(crate) nodes: u32,
    /// Channels each node can export (a multiple of 64, 64..=[`MAX_CHANNELS`]).
    pub(crate) channels: u32,
    /// log2 of the slots of each mailbox (0..=[`mailbox::MB_MAX_SLOTS_LOG2`]).
    pub(crate) mb_log2: u32,
}

/// The places of everything in a region, computed from validated parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    /// The parameters.
    params: RegionParams,
    /// Mailbox geometry.
    mailbox: MailboxGeometry,
    /// Node count as a usize.
    nodes: usize,
    /// Channel count as a usize.
    channels: usize,
    /// Offset of area 0.
    areas: usize,
    /// Bytes of each area (a multiple of [`PAGE_SIZE`]).
    area_size: usize,
    /// Area-relative offset of the mailbox slot areas.
    slots: usize,
    /// Area-relative offset of the mailbox ack areas.
    acks: usize,
    /// Area-relative offset of the export directory.
    dir: usize,
    /// Area-relative offset of the heap (page-aligned).
    heap: usize,
    /// Pages of each heap.
    heap_pages: usize,
}

/// `v` rounded up to a multiple of `align` (a power of two), if it fits.
fn align_up(v: usize, align: usize) -> Option<usize> {
    let mask = align.wrapping_sub(1);
    v.checked_add(mask).map(|x| x & !mask)
}

/// `v` rounded down to a multiple of `align` (a power of two).
const fn align_down(v: usize, align: usize) -> usize {
    v & !align.wrapping_sub(1)
}

impl Layout {
    /// The layout for `params` in a mapping of `map_len` bytes, or why there is none:
    /// the parameters must be in range and the whole layout, with at least one heap page
    /// per node, must fit in both `params.size` and `map_len`.
    pub(crate) fn new(params: RegionParams, map_len: usize) -> Result<Self, RegionError> {
        let bad = RegionError::BadParams;
        if params.nodes == 0
            || params.nodes > MAX_NODES
            || params.channels == 0
            || params.channels > MAX_CHANNELS
            || params.channels % 64 != 0
        {
            return Err(bad);
        }
        let mailbox = MailboxGeometry::from_log2(params.mb_log2).map_err(|_| bad)?;
        let size = usize::try_from(params.size).map_err(|_| bad)?;
        if size > map_len {
            return Err(bad);
        }
        let nodes = usize::try_from(params.nodes).map_err(|_| bad)?;
        let channels = usize::try_from(params.channels).map_err(|_| bad)?;
        let table_end = nodes
            .checked_mul(NODE_ENTRY_SIZE)
            .and_then(|t| t.checked_add(NODE_TABLE))
            .ok_or(bad)?;
        let areas = align_up(table_end, PAGE_SIZE).ok_or(bad)?;
        let per_area = size
            .checked_sub(areas)
            .and_then(|s| s.checked_div(nodes))
            .ok_or(bad)?;
        let area_size = align_down(per_area, PAGE_SIZE);
        let slots = align_up(
            AREA_BITMAP.checked_add(channels / 8).ok_or(bad)?,
            CACHE_LINE,
        )
        .ok_or(bad)?;
        let acks = nodes
            .checked_mul(mailbox.area_size())
            .and_then(|s| s.checked_add(slots))
            .ok_or(bad)?;
        let dir = nodes
            .checked_mul(MB_ACK_SIZE)
            .and_then(|a| a.checked_add(acks))
            .ok_or(bad)?;
        let dir_end = channels
            .checked_mul(8)
            .and_then(|d| d.checked_add(dir))
            .ok_or(bad)?;
        let heap = align_up(dir_end, PAGE_SIZE).ok_or(bad)?;
        let heap_pages = area_size.checked_sub(heap).ok_or(bad)? / PAGE_SIZE;
        if heap_pages == 0 || heap_pages > MAX_PAGES {
            return Err(bad);
        }
        Ok(Self {
            params,
            mailbox,
            nodes,
            channels,
            areas,
            area_size,
            slots,
            acks,
            dir,
            heap,
            heap_pages,
        })
    }

    /// The parameters.
    pub(crate) const fn params(&self) -> RegionParams {
        self.params
    }

    /// Node count.
    pub(crate) const fn nodes(&self) -> usize {
        self.nodes
    }

    /// Channels per node.
    pub(crate) const fn channels(&self) -> usize {
        self.channels
    }

    /// Mailbox geometry.
    pub(crate) const fn mailbox(&self) -> MailboxGeometry {
        self.mailbox
    }

    /// Pages of each node's heap.
    pub(crate) const fn heap_pages(&self) -> usize {
        self.heap_pages
    }

    /// Bytes of each node's area.
    pub(crate) const fn area_size(&self) -> usize {
        self.area_size
    }

    /// Index of `node`, if it is in the table.
    fn index(&self, node: NodeId) -> Option<usize> {
        let i = usize::from(node);
        (i < self.nodes).then_some(i)
    }

    /// Offset of `node`'s entry in the node table.
    pub(crate) fn node_entry(&self, node: NodeId) -> Option<usize> {
        let i = self.index(node)?;
        NODE_TABLE.checked_add(i.checked_mul(NODE_ENTRY_SIZE)?)
    }

    /// Offset of the word in which `node` publishes its link to `peer`.
    pub(crate) fn link(&self, node: NodeId, peer: NodeId) -> Option<usize> {
        let j = self.index(peer)?;
        self.node_entry(node)?
            .checked_add(NODE_LINKS)?
            .checked_add(j.checked_mul(8)?)
    }

    /// Offset of `node`'s area.
    pub(crate) fn area(&self, node: NodeId) -> Option<usize> {
        let i = self.index(node)?;
        self.areas.checked_add(i.checked_mul(self.area_size)?)
    }

    /// Offset of the slot area of the mailbox `from` → `to` (in `to`'s area).
    pub(crate) fn mb_slots(&self, to: NodeId, from: NodeId) -> Option<usize> {
        let j = self.index(from)?;
        self.area(to)?
            .checked_add(self.slots)?
            .checked_add(j.checked_mul(self.mailbox.area_size())?)
    }

    /// Offset of the ack area of the mailbox `from` → `to` (in `from`'s area).
    pub(crate) fn mb_ack(&self, from: NodeId, to: NodeId) -> Option<usize> {
        let j = self.index(to)?;
        self.area(from)?
            .checked_add(self.acks)?
            .checked_add(j.checked_mul(MB_ACK_SIZE)?)
    }

    /// Offset of `node`'s directory entry for `channel`.
    pub(crate) fn dir_entry(&self, node: NodeId, channel: u32) -> Option<usize> {
        let c = usize::try_from(channel).ok()?;
        if c >= self.channels {
            return None;
        }
        self.area(node)?
            .checked_add(self.dir)?
            .checked_add(c.checked_mul(8)?)
    }

    /// Offset of the first page of `node`'s heap.
    pub(crate) fn heap(&self, node: NodeId) -> Option<usize> {
        self.area(node)?.checked_add(self.heap)
    }

    /// Offset of a doorbell word of `node`'s area (`AREA_MAIL`, `AREA_SUMMARY`).
    fn area_word(&self, node: NodeId, word: usize) -> Option<usize> {
        self.area(node)?.checked_add(word)
    }

    /// Offset of bitmap word `w` of `node`'s area.
    fn bitmap_word(&self, node: NodeId, w: usize) -> Option<usize> {
        if w.checked_mul(64)? >= self.channels {
            return None;
        }
        self.area(node)?
            .checked_add(AREA_BITMAP)?
            .checked_add(w.checked_mul(8)?)
    }
}

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

/// What a node finds when it looks at a region's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HeaderState {
    /// Ready: join with this layout.
    Ready(Layout),
    /// Someone is formatting it: wait (or take over a claim that does not finish).
    Formatting(FormatWord),
    /// Never formatted: claim it (the format word to compare against is given).
    Blank(u64),
    /// Formatted, but not by anything this node can join: refuse.
    Unusable(RegionError),
}

/// The whole region, as one node sees it: the mapping and its layout.
#[derive(Clone, Debug)]
pub(crate) struct Region<S: Segment> {
    /// The mapping of the whole region.
    seg: S,
    /// Where everything is.
    layout: Layout,
}

/// The default parameters for a region of `size` bytes: as many nodes as asked for
/// (clamped to 1..=[`MAX_NODES`]), 1024 channels per node, 16 mailbox slots.
pub(crate) fn default_params(size: u64, nodes: u32) -> RegionParams {
    RegionParams {
        size,
        nodes: nodes.clamp(1, MAX_NODES),
        channels: 1024,
        mb_log2: 4,
    }
}

/// Reads the header of the region mapped by `seg`.
pub(crate) fn read_header<S: Segment>(seg: &S) -> HeaderState {
    let fw_raw = seg.load_u64(HDR_FORMAT);
    let fw = FormatWord::unpack(fw_raw);
    match fw.state {
        FormatState::Blank => return HeaderState::Blank(fw_raw),
        FormatState::Formatting => return HeaderState::Formatting(fw),
        FormatState::Ready => {}
    }
    if seg.load_u32(HDR_MAGIC) != REGION_MAGIC {
        // A "ready" word over foreign bytes: nobody formatted this for us.
        return HeaderState::Blank(fw_raw);
    }
    if seg.load_u32(HDR_VERSION) != REGION_VERSION {
        return HeaderState::Unusable(RegionError::Version);
    }
    let params = RegionParams {
        size: seg.load_u64(HDR_SIZE),
        nodes: seg.load_u32(HDR_NODES),
        channels: seg.load_u32(HDR_CHANNELS),
        mb_log2: seg.load_u32(HDR_MB_LOG2),
    };
    match Layout::new(params, seg.len()) {
        Ok(layout) => HeaderState::Ready(layout),
        Err(e) => HeaderState::Unusable(e),
    }
}

/// Claims the formatting of a region whose format word was `seen` (from
/// [`read_header`]): `true` if this node won and must now [`format`] it.
pub(crate) fn claim<S: SharedWords>(seg: &S, seen: u64, node: NodeId, ticket: u32) -> bool {
    let claim = FormatWord {
        state: FormatState::Formatting,
        node,
        ticket,
    };
    seg.compare_exchange_u64(HDR_FORMAT, seen, claim.pack())
        .is_ok()
}

/// Formats the region after a successful [`claim`]: writes the header and an empty node
/// table, then marks it ready (stored last). Node areas are left alone: each node
/// initializes its own when it joins.
pub(crate) fn format<S: SharedWords>(
    seg: S,
    params: RegionParams,
    node: NodeId,
    ticket: u32,
) -> Result<Region<S>, RegionError> {
    let layout = Layout::new(params, seg.len())?;
    seg.store_u32(HDR_MAGIC, REGION_MAGIC);
    seg.store_u32(HDR_VERSION, REGION_VERSION);
    seg.store_u64(HDR_SIZE, params.size);
    seg.store_u32(HDR_NODES, params.nodes);
    seg.store_u32(HDR_CHANNELS, params.channels);
    seg.store_u32(HDR_MB_LOG2, params.mb_log2);
    let table_end = layout.areas;
    let mut off = NODE_TABLE;
    while off < table_end {
        seg.store_u64(off, 0);
        off = off.saturating_add(8);
    }
    seg.fence();
    let claimed = FormatWord {
        state: FormatState::Formatting,
        node,
        ticket,
    };
    let ready = FormatWord {
        state: FormatState::Ready,
        node,
        ticket,
    };
    // Only the claimant turns its own claim into "ready"; a taken-over claim fails here.
    seg.compare_exchange_u64(HDR_FORMAT, claimed.pack(), ready.pack())
        .map_err(|_| RegionError::ClaimLost)?;
    Ok(Region { seg, layout })
}

/// Who has mail and which channels rang, as one swap of the pending words found them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Pending {
    /// Bit j: node j sent a control frame.
    pub(crate) mail: u64,
    /// Bit w: bitmap word w may have bits.
    pub(crate) summary: u64,
}

impl<S: Segment> Region<S> {
    /// The region mapped by `seg` with a layout [`read_header`] returned.
    pub(crate) fn new(seg: S, layout: Layout) -> Result<Self, RegionError> {
        // The layout was checked against some mapping: check it against this one.
        let layout = Layout::new(layout.params, seg.len())?;
        Ok(Self { seg, layout })
    }

    /// The layout.
    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The mapping.
    pub(crate) fn seg(&self) -> &S {
        &self.seg
    }

    /// `node`'s node word (`None`: not in the table, or a word this code does not know).
    pub(crate) fn node_word(&self, node: NodeId) -> Option<NodeWord> {
        let off = self.layout.node_entry(node)?.checked_add(NODE_WORD)?;
        NodeWord::unpack(self.seg.load_u64(off))
    }

    /// Stores this node's word.
    pub(crate) fn set_node_word(&self, node: NodeId, w: NodeWord) {
        if let Some(off) = self.layout.node_entry(node) {
            self.seg.store_u64(off.saturating_add(NODE_WORD), w.pack());
        }
    }

    /// `node`'s heartbeat counter.
    pub(crate) fn heartbeat(&self, node: NodeId) -> u64 {
        match self.layout.node_entry(node) {
            Some(off) => self.seg.load_u64(off.saturating_add(NODE_HEARTBEAT)),
            None => 0,
        }
    }

    /// Stores this node's heartbeat counter.
    pub(crate) fn set_heartbeat(&self, node: NodeId, beat: u64) {
        if let Some(off) = self.layout.node_entry(node) {
            self.seg.store_u64(off.saturating_add(NODE_HEARTBEAT), beat);
        }
    }

    /// `node`'s link word for `peer` (see [`LinkWord`]).
    pub(crate) fn link(&self, node: NodeId, peer: NodeId) -> LinkWord {
        match self.layout.link(node, peer) {
            Some(off) => LinkWord::unpack(self.seg.load_u64(off)),
            None => LinkWord::NONE,
        }
    }

    /// Publishes this node's link word for `peer`.
    pub(crate) fn set_link(&self, node: NodeId, peer: NodeId, link: LinkWord) {
        if let Some(off) = self.layout.link(node, peer) {
            self.seg.store_u64(off, link.pack());
        }
    }

    /// What `me` sees of `peer` in one look (for [`super::liveness::PeerTracker`]).
    pub(crate) fn view(&self, me: NodeId, peer: NodeId) -> super::liveness::PeerView {
        super::liveness::PeerView {
            word: self.node_word(peer),
            heartbeat: self.heartbeat(peer),
            link_to_me: self.link(peer, me),
        }
    }

    /// Initializes `me`'s area and links when it joins (before it says "up"): no pending
    /// bits, empty mailboxes from every node (acks at the first sequence number), an
    /// empty directory, no links.
    pub(crate) fn init_area(&self, me: NodeId) -> Result<(), RegionError> {
        let area = self.layout.area(me).ok_or(RegionError::NoSuchNode)?;
        let mut off = area;
        let end = area
            .checked_add(self.layout.slots)
            .ok_or(RegionError::NoSuchNode)?;
        while off < end {
            self.seg.store_u64(off, 0);
            off = off.saturating_add(8);
        }
        for j in 0..self.layout.nodes {
            let peer = NodeId::try_from(j).map_err(|_| RegionError::NoSuchNode)?;
            self.reset_mailboxes(me, peer)?;
            self.set_link(me, peer, LinkWord::NONE);
        }
        for c in 0..self.layout.channels {
            let c = u32::try_from(c).map_err(|_| RegionError::NoSuchNode)?;
            if let Some(off) = self.layout.dir_entry(me, c) {
                self.seg.store_u64(off, 0);
            }
        }
        Ok(())
    }

    /// Resets `me`'s halves of the mailboxes with `peer` before (re)linking: the slot
    /// area of `peer` → `me` emptied, the ack word of `me` → `peer` at the first sequence.
    pub(crate) fn reset_mailboxes(&self, me: NodeId, peer: NodeId) -> Result<(), RegionError> {
        let slots = self
            .layout
            .mb_slots(me, peer)
            .ok_or(RegionError::NoSuchNode)?;
        let ack = self
            .layout
            .mb_ack(me, peer)
            .ok_or(RegionError::NoSuchNode)?;
        mailbox::init_slots(&self.seg, slots, self.layout.mailbox).map_err(mb_err)?;
        mailbox::init_ack(&self.seg, ack).map_err(mb_err)?;
        Ok(())
    }

    /// Publishes `me`'s export of `channel` (directory entry `e`, or empty).
    pub(crate) fn set_export(&self, me: NodeId, channel: u32, e: Option<DirEntry>) {
        if let Some(off) = self.layout.dir_entry(me, channel) {
            self.seg
                .store_u64(off, e.and_then(DirEntry::pack).unwrap_or(0));
        }
    }

    /// The span of the region that `node` exports under `channel`, validated: it lies
    /// inside `node`'s heap whatever the entry says. `None` if nothing valid is exported.
    pub(crate) fn lookup(&self, node: NodeId, channel: u32) -> Option<(Span, u16)> {
        let e = DirEntry::unpack(self.seg.load_u64(self.layout.dir_entry(node, channel)?))?;
        let page = usize::try_from(e.page).ok()?;
        let pages = usize::try_from(e.pages).ok()?;
        if page.checked_add(pages)? > self.layout.heap_pages {
            return None;
        }
        let off = self
            .layout
            .heap(node)?
            .checked_add(page.checked_mul(PAGE_SIZE)?)?;
        let len = pages.checked_mul(PAGE_SIZE)?;
        fits(self.seg.len(), off, len).then_some((Span { off, len }, e.generation))
    }

    /// The span of `me`'s heap pages `page..page + pages` (for creating a segment).
    pub(crate) fn heap_span(&self, me: NodeId, page: usize, pages: usize) -> Option<Span> {
        if page.checked_add(pages)? > self.layout.heap_pages || pages == 0 {
            return None;
        }
        let off = self
            .layout
            .heap(me)?
            .checked_add(page.checked_mul(PAGE_SIZE)?)?;
        let len = pages.checked_mul(PAGE_SIZE)?;
        fits(self.seg.len(), off, len).then_some(Span { off, len })
    }
}

impl<S: Segment + Clone> Region<S> {
    /// The sending end of the mailbox `me` → `peer` (slots in `peer`'s area, ack in
    /// `me`'s), starting at the first sequence number.
    pub(crate) fn mailbox_tx(
        &self,
        me: NodeId,
        peer: NodeId,
    ) -> Result<MailboxTx<S, S>, RegionError> {
        let slots = self
            .layout
            .mb_slots(peer, me)
            .ok_or(RegionError::NoSuchNode)?;
        let ack = self
            .layout
            .mb_ack(me, peer)
            .ok_or(RegionError::NoSuchNode)?;
        MailboxTx::new(
            self.seg.clone(),
            slots,
            self.seg.clone(),
            ack,
            self.layout.mailbox,
        )
        .map_err(mb_err)
    }

    /// The receiving end of the mailbox `peer` → `me` (slots in `me`'s area, ack in
    /// `peer`'s), expecting the first sequence number.
    pub(crate) fn mailbox_rx(
        &self,
        me: NodeId,
        peer: NodeId,
    ) -> Result<MailboxRx<S, S>, RegionError> {
        let slots = self
            .layout
            .mb_slots(me, peer)
            .ok_or(RegionError::NoSuchNode)?;
        let ack = self
            .layout
            .mb_ack(peer, me)
            .ok_or(RegionError::NoSuchNode)?;
        MailboxRx::new(
            self.seg.clone(),
            slots,
            self.seg.clone(),
            ack,
            self.layout.mailbox,
        )
        .map_err(mb_err)
    }
}

impl<S: SharedWords> Region<S> {
    /// For the fabric manager (the host's ivshmem server, which sees a guest's device
    /// go away the moment its QEMU exits): marks every node that is up or joining with
    /// doorbell id `doorbell_id` as down, as if it had left, so that its peers reset their
    /// connections to it at their next tick instead of after a heartbeat timeout. Only
    /// doorbell-model nodes carry an id the manager knows. One compare-and-exchange per
    /// word: a node that changed its word meanwhile (it left, or a new generation joined)
    /// is left alone. Calls `fenced` with each node marked and the word it had.
    pub(crate) fn fence_departed(
        &self,
        doorbell_id: u16,
        mut fenced: impl FnMut(NodeId, NodeWord),
    ) {
        for n in 0..self.layout.nodes() {
            let Ok(node) = NodeId::try_from(n) else {
                break;
            };
            let Some(off) = self.layout.node_entry(node) else {
                break;
            };
            let off = off.saturating_add(NODE_WORD);
            let raw = self.seg.load_u64(off);
            let Some(w) = NodeWord::unpack(raw) else {
                continue;
            };
            let live = matches!(w.state, NodeState::Up | NodeState::Joining);
            if !live || !w.doorbell || w.doorbell_id != doorbell_id {
                continue;
            }
            let down = NodeWord {
                state: NodeState::Down,
                ..w
            };
            if self.seg.compare_exchange_u64(off, raw, down.pack()).is_ok() {
                fenced(node, w);
            }
        }
    }

    /// Marks `channel` of `target` as rung (then ring `target`'s interrupt, if it takes
    /// them). `false` if the channel or node does not exist.
    pub(crate) fn ring_channel(&self, target: NodeId, channel: u32) -> bool {
        let Ok(c) = usize::try_from(channel) else {
            return false;
        };
        let w = c / 64;
        let (Some(word), Some(summary)) = (
            self.layout.bitmap_word(target, w),
            self.layout.area_word(target, AREA_SUMMARY),
        ) else {
            return false;
        };
        self.seg.fetch_or_u64(word, 1u64 << (c % 64));
        self.seg.fetch_or_u64(summary, 1u64 << (w % 64));
        true
    }

    /// Marks that `from` sent `target` a control frame.
    pub(crate) fn ring_mail(&self, target: NodeId, from: NodeId) -> bool {
        let (Some(word), Some(_)) = (
            self.layout.area_word(target, AREA_MAIL),
            self.layout.index(from),
        ) else {
            return false;
        };
        self.seg.fetch_or_u64(word, 1u64 << (u32::from(from) % 64));
        true
    }

    /// Takes `me`'s pending mail and doorbell-summary bits (swapping them to zero).
    pub(crate) fn take_pending(&self, me: NodeId) -> Pending {
        let (Some(mail), Some(summary)) = (
            self.layout.area_word(me, AREA_MAIL),
            self.layout.area_word(me, AREA_SUMMARY),
        ) else {
            return Pending::default();
        };
        Pending {
            mail: self.seg.swap_u64(mail, 0),
            summary: self.seg.swap_u64(summary, 0),
        }
    }

    /// Takes the rung channels of the bitmap words `summary` names, calling `f` for
    /// each (at most [`MAX_CHANNELS`] calls; words beyond the channel count are ignored).
    pub(crate) fn take_channels(&self, me: NodeId, summary: u64, mut f: impl FnMut(u32)) {
        let mut s = summary;
        while s != 0 {
            let w = s.trailing_zeros();
            s &= s.wrapping_sub(1);
            let Some(off) = self
                .layout
                .bitmap_word(me, clamp_to_usize(u64::from(w), 63))
            else {
                continue;
            };
            let mut bits = self.seg.swap_u64(off, 0);
            while bits != 0 {
                let b = bits.trailing_zeros();
                bits &= bits.wrapping_sub(1);
                f(w.saturating_mul(64).saturating_add(b));
            }
        }
    }
}

/// A mailbox placement error as a region error.
fn mb_err(_: MailboxError) -> RegionError {
    RegionError::Mailbox
}
