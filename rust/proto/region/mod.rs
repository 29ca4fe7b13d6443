// SPDX-License-Identifier: GPL-2.0

//! The shared region of an inter-VM fabric (one PCI BAR that every node maps).
//!
//! ```text
//! 0x000 header, line 0 (formatter, once)  u32 magic "SCIR" | u32 version | u64 size |
//!                                         u32 nodes | u32 channels | u32 mailbox slots log2
//! 0x040 header, line 1 (formatter)        u64 format word: state | formatter node | ticket
//! 0x080 claim words                       u32 claims[MAX_NODES], claim i written by node i
//! 0x100 node table: `nodes` entries of 0x140 bytes, entry i written by node i only
//!         0x00 u64 node word: state | flags | doorbell id (IVPosition) | generation
//!         0x08 u64 heartbeat counter
//!         0x10 u64 address sequence (odd while node i rewrites its addresses; 0: none)
//!         0x18 2 × 16 bytes: node i's IP addresses (IPv6, IPv4-mapped; 0: empty slot)
//!         0x40 u64 links[MAX_NODES]: links[j] = the generation of node j that node i is
//!              linked with | i's link sequence number (0: not linked)
//! page-aligned: `nodes` areas of `area_size` bytes, area i owned by node i:
//!         doorbell blocks, one per node j: counters written by node j  (see doorbell)
//!         slot areas of the mailboxes j → i, one per node j             written by node j
//!         ack areas of the mailboxes i → j, one per node j              written by node j
//!         export directory: `channels` u64 entries                      written by node i
//!         heap (page-aligned): node i's segments, which peers map and write; its
//!              first page holds node i's addresses beyond the two of its node entry
//!              (see addresses), unless node i is older than that page
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
//! - **One writer per word, and no read-modify-write between nodes.** A node writes its
//!   own claim word, node entry, directory, the doorbell blocks and mailbox slots it
//!   sends through (in the receivers' areas) and, as the receiver of a mailbox, the ack
//!   word in the sender's area; everything else it only reads. Plain aligned stores and
//!   loads with fences are all a node uses: a fabric need not make locked instructions
//!   atomic between nodes (PCIe NTB does not forward them, and QEMU's TCG does not make
//!   a one-vCPU guest's locked instructions atomic against other QEMU processes). Hence
//!   the per-sender doorbell counters ([`super::doorbell`]) and the claim words
//!   ([`Claimant`]). The one exception is the fabric manager (the host's ivshmem
//!   server, [`Region::fence_departed`]), which compare-and-exchanges the node word of
//!   a guest whose QEMU has exited, so that the guest itself can no longer store to it.
//! - **A channel number does not fit in an interrupt vector**: a sender counts the
//!   ring in its doorbell block in the receiver's area, then raises the receiver's one
//!   vector; the receiver looks at every linked sender's block (see
//!   [`super::doorbell`]). Control frames need no such mark: the receiver looks at the
//!   next slot of every linked mailbox on each interrupt or poll.
//! - **Generations**: a node's generation grows on every join, so its peers can tell a
//!   restarted node from the one they knew (see [`super::liveness`]).

mod addresses;
mod claim;
mod layout;
mod words;

// Used by the kernel's join and the host tests, not by the host library itself.
#[allow(unused_imports)]
pub(crate) use self::addresses::*;
#[allow(unused_imports)]
pub(crate) use self::claim::*;
pub(crate) use self::layout::*;
pub(crate) use self::words::*;

use super::doorbell::{self, BellError, DoorbellRx, DoorbellTx};
use super::mailbox::{self, MailboxError, MailboxPeek, MailboxRx, MailboxTx};
use super::ring::{fits, Span};
use super::segment::Segment;
use core::ops::DerefMut;

/// Compare-and-exchange on a shared word: what the fabric manager (a host process,
/// with real atomics, acting for a guest that is gone) needs, and nothing in a guest
/// uses. The kernel's segments do not implement it, so no code path of the module can
/// read-modify-write shared memory.
///
/// Same contract as [`Segment`] (bounds- and alignment-checked by the implementation,
/// a bad offset loads 0 / stores nothing), plus: the operation is atomic against
/// every other access to the word, with full-barrier ordering.
pub(crate) trait SharedWords: Segment {
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
    /// A doorbell block could not be placed, or its counter storage is too short.
    Doorbell,
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

impl<S: Segment> Region<S> {
    /// The region mapped by `seg` with a layout [`read_header`] returned.
    pub(crate) fn new(seg: S, layout: Layout) -> Result<Self, RegionError> {
        // The layout was checked against some mapping: check it against this one.
        let layout = Layout::new(layout.params, seg.len())?;
        Ok(Self { seg, layout })
    }

    /// A region whose layout was just checked against `seg` (by [`format`]).
    fn from_parts(seg: S, layout: Layout) -> Self {
        Self { seg, layout }
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

    /// Initializes `me`'s area and links when it joins (before it says "up"): zeroed
    /// doorbell blocks, empty mailboxes from every node (acks at the first sequence
    /// number), an empty directory, no links.
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
            self.reset_inbound(me, peer)?;
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

    /// Resets what `me` receives from `peer` before (re)linking: the doorbell block
    /// `peer` → `me` zeroed, the slot area of `peer` → `me` emptied, the ack word of
    /// `me` → `peer` at the first sequence. `peer` writes to the block and the slots
    /// again only once `me` has published its link.
    pub(crate) fn reset_inbound(&self, me: NodeId, peer: NodeId) -> Result<(), RegionError> {
        let bells = self
            .layout
            .bell_block(me, peer)
            .ok_or(RegionError::NoSuchNode)?;
        doorbell::init_block(&self.seg, bells, self.layout.bells).map_err(bell_err)?;
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
    /// The ringing end of the doorbells `me` → `peer` (its block in `peer`'s area),
    /// counting in `counts` ([`super::doorbell::BellGeometry::words`] long).
    pub(crate) fn doorbell_tx<B: DerefMut<Target = [u32]>>(
        &self,
        me: NodeId,
        peer: NodeId,
        counts: B,
    ) -> Result<DoorbellTx<S, B>, RegionError> {
        let base = self
            .layout
            .bell_block(peer, me)
            .ok_or(RegionError::NoSuchNode)?;
        DoorbellTx::new(self.seg.clone(), base, self.layout.bells, counts).map_err(bell_err)
    }

    /// The receiving end of the doorbells `peer` → `me` (the block in `me`'s area),
    /// remembering in `seen` ([`super::doorbell::BellGeometry::words`] long).
    pub(crate) fn doorbell_rx<B: DerefMut<Target = [u32]>>(
        &self,
        me: NodeId,
        peer: NodeId,
        seen: B,
    ) -> Result<DoorbellRx<S, B>, RegionError> {
        let base = self
            .layout
            .bell_block(me, peer)
            .ok_or(RegionError::NoSuchNode)?;
        DoorbellRx::new(self.seg.clone(), base, self.layout.bells, seen).map_err(bell_err)
    }

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

    /// A look at the mailbox `peer` → `me` that needs no lock ([`MailboxPeek`]): the slots
    /// [`Region::mailbox_rx`] polls.
    pub(crate) fn mailbox_peek(
        &self,
        me: NodeId,
        peer: NodeId,
    ) -> Result<MailboxPeek<S>, RegionError> {
        let slots = self
            .layout
            .mb_slots(me, peer)
            .ok_or(RegionError::NoSuchNode)?;
        MailboxPeek::new(self.seg.clone(), slots, self.layout.mailbox).map_err(mb_err)
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
}

/// A mailbox placement error as a region error.
fn mb_err(_: MailboxError) -> RegionError {
    RegionError::Mailbox
}

/// A doorbell placement error as a region error.
fn bell_err(_: BellError) -> RegionError {
    RegionError::Doorbell
}
