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

mod layout;
mod words;

pub(crate) use self::layout::*;
pub(crate) use self::words::*;

use super::mailbox::{self, MailboxError, MailboxRx, MailboxTx};
use super::ring::{clamp_to_usize, fits, Span};
use super::segment::Segment;

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
