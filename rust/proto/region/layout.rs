// SPDX-License-Identifier: GPL-2.0

//! Where everything of a region is: the header's and node table's fixed offsets, and
//! the [`Layout`] every other place is computed from (checked against this node's own
//! mapping; see the parent module's picture).

use super::RegionError;
use crate::proto::doorbell::BellGeometry;
use crate::proto::mailbox::{MailboxGeometry, MB_ACK_SIZE};
use crate::proto::ring::CACHE_LINE;

/// A node of the fabric: its index in the node table.
pub(crate) type NodeId = u16;

/// `"SCIR"` as a little-endian u32: the region's magic.
pub(crate) const REGION_MAGIC: u32 = u32::from_le_bytes(*b"SCIR");
/// Layout version of the region (2: per-sender doorbell counters and claim words
/// instead of shared doorbell bits and a compare-and-exchanged format word).
pub(crate) const REGION_VERSION: u32 = 2;
/// Granule of segments and alignment of areas and heaps.
pub(crate) const PAGE_SIZE: usize = 4096;
/// Most nodes a region can hold (the claim words and the links of a node entry).
pub(crate) const MAX_NODES: u32 = 32;
/// Most channels a node can export.
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
/// Header: u64 format word ([`FormatWord`]), on its own line; written by the
/// formatter only.
pub(crate) const HDR_FORMAT: usize = 0x40;
/// Header: u32 claim words, one per possible node ([`MAX_NODES`]); claim `i` is
/// written by node `i` only (see [`super::claim`]).
pub(crate) const HDR_CLAIMS: usize = 0x80;
/// Offset of the node table.
pub(crate) const NODE_TABLE: usize = 0x100;
/// Size of a node table entry.
pub(crate) const NODE_ENTRY_SIZE: usize = 0x140;
/// Node entry: u64 node word ([`NodeWord`]).
pub(crate) const NODE_WORD: usize = 0x00;
/// Node entry: u64 heartbeat counter.
pub(crate) const NODE_HEARTBEAT: usize = 0x08;
/// Node entry: u64 sequence word of the published addresses (see [`super::addresses`]);
/// bytes 0x10..0x40 were unused in layout version 2, so older nodes leave them zero.
pub(crate) const NODE_ADDR_SEQ: usize = 0x10;
/// Node entry: the published addresses, [`PUBLISHED_ADDRS`] of 16 bytes each.
pub(crate) const NODE_ADDRS: usize = 0x18;
/// How many addresses a node can publish.
pub(crate) const PUBLISHED_ADDRS: usize = 2;
/// The heap page of a node's addresses beyond [`PUBLISHED_ADDRS`] (its first heap page,
/// which a node of this version never hands to a segment; see [`super::addresses`]).
pub(crate) const ADDR_PAGE: usize = 0;
/// Address page: u64 magic, [`ADDR_PAGE_MAGIC`] once the node publishes there.
pub(crate) const ADDR_PAGE_MAGIC_OFF: usize = 0x00;
/// Address page: u64 count of the addresses that follow.
pub(crate) const ADDR_PAGE_COUNT: usize = 0x08;
/// Address page: the addresses, [`PAGE_ADDRS`] of 16 bytes at most.
pub(crate) const ADDR_PAGE_ADDRS: usize = 0x10;
/// `"SCIADDRS"` as a little-endian u64: the address page's magic.
pub(crate) const ADDR_PAGE_MAGIC: u64 = u64::from_le_bytes(*b"SCIADDRS");
/// How many addresses the address page holds.
pub(crate) const PAGE_ADDRS: usize = 32;
/// How many addresses a node can publish in all.
pub(crate) const MAX_PUBLISHED: usize = PUBLISHED_ADDRS + PAGE_ADDRS;
/// Node entry: u64 links ([`LinkWord`]), one per node.
pub(crate) const NODE_LINKS: usize = 0x40;
/// Area: the doorbell blocks, one per sender, from the area's start.
pub(crate) const AREA_BELLS: usize = 0x00;

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
    pub(super) params: RegionParams,
    /// Mailbox geometry.
    pub(super) mailbox: MailboxGeometry,
    /// Node count as a usize.
    pub(super) nodes: usize,
    /// Channel count as a usize.
    pub(super) channels: usize,
    /// Shape of a doorbell block.
    pub(super) bells: BellGeometry,
    /// Offset of area 0.
    pub(super) areas: usize,
    /// Bytes of each area (a multiple of [`PAGE_SIZE`]).
    pub(super) area_size: usize,
    /// Area-relative offset of the mailbox slot areas.
    pub(super) slots: usize,
    /// Area-relative offset of the mailbox ack areas.
    pub(super) acks: usize,
    /// Area-relative offset of the export directory.
    pub(super) dir: usize,
    /// Area-relative offset of the heap (page-aligned).
    pub(super) heap: usize,
    /// Pages of each heap.
    pub(super) heap_pages: usize,
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
        let bells = BellGeometry::new(channels).map_err(|_| bad)?;
        let slots = nodes
            .checked_mul(bells.size())
            .and_then(|b| b.checked_add(AREA_BELLS))
            .and_then(|b| align_up(b, CACHE_LINE))
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
            bells,
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

    /// Shape of a doorbell block.
    pub(crate) const fn bells(&self) -> BellGeometry {
        self.bells
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
    pub(super) fn index(&self, node: NodeId) -> Option<usize> {
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

    /// Offset of the doorbell block `from` → `to` (in `to`'s area, written by `from`).
    pub(crate) fn bell_block(&self, to: NodeId, from: NodeId) -> Option<usize> {
        let j = self.index(from)?;
        self.area(to)?
            .checked_add(AREA_BELLS)?
            .checked_add(j.checked_mul(self.bells.size())?)
    }

    /// Offset of `node`'s claim word in the header (any node id below [`MAX_NODES`],
    /// whatever the node count: claims are made before a layout exists).
    pub(crate) fn claim_word(node: NodeId) -> Option<usize> {
        let i = usize::from(node);
        (i < MAX_NODES as usize).then(|| HDR_CLAIMS.saturating_add(i.saturating_mul(4)))
    }
}
