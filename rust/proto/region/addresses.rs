// SPDX-License-Identifier: GPL-2.0

//! The IP addresses a node publishes in its node table entry and its address page, so
//! that its peers can map them to its node id without a node map file.
//!
//! The first [`PUBLISHED_ADDRS`] go in the node entry, where every node since the
//! addresses came reads them; the rest (up to [`PAGE_ADDRS`]: a node with many
//! interfaces, or network namespaces that publish theirs) in the node's first heap page,
//! which starts with [`ADDR_PAGE_MAGIC`] once used. A node older than the page never
//! writes the magic there, and a reader that finds none reads only the entry.
//!
//! A seqlock without read-modify-write, the entry's sequence word covering both places:
//! the owner stores an odd sequence, fences, stores the addresses, fences and stores the
//! next even sequence; a reader loads the sequence, the addresses, fences and loads the
//! sequence again, and keeps what it read only if both are the same even, nonzero value.
//! Zero is "nothing published" (nodes of the first layout version 2 never write these
//! words). Every address read is checked: a peer may write anything here, and what it
//! claims is only trusted as far as the administrator lets it (no node map loaded; see
//! `rust/config/rules.rs`).

use super::{
    Region, Span, ADDR_PAGE, ADDR_PAGE_ADDRS, ADDR_PAGE_COUNT, ADDR_PAGE_MAGIC,
    ADDR_PAGE_MAGIC_OFF, NODE_ADDRS, NODE_ADDR_SEQ, PAGE_ADDRS, PUBLISHED_ADDRS,
};
use crate::proto::region::NodeId;
use crate::proto::segment::Segment;

/// An address as published: IPv6 bytes, an IPv4 address as `::ffff:a.b.c.d`.
pub(crate) type PublishedAddr = [u8; 16];

/// The IPv4-mapped form of `a`.
pub(crate) const fn v4_mapped(a: [u8; 4]) -> PublishedAddr {
    let [a0, a1, a2, a3] = a;
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a0, a1, a2, a3]
}

/// Whether a peer may stand behind `a`: not unspecified, loopback, link-local or
/// multicast (in either family). Those name no node, or every node.
pub(crate) fn usable(a: &PublishedAddr) -> bool {
    match *a {
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a0, a1, _, _] => {
            !(a0 == 0 || a0 == 127 || a0 >= 224 || (a0 == 169 && a1 == 254))
        }
        [0xff, ..] => false,
        [0xfe, b1, ..] if b1 & 0xc0 == 0x80 => false,
        b => b != [0; 16] && b != [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    }
}

/// The two little-endian words of an address.
pub(crate) fn to_words(a: &PublishedAddr) -> [u64; 2] {
    let [b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15] = *a;
    [
        u64::from_le_bytes([b0, b1, b2, b3, b4, b5, b6, b7]),
        u64::from_le_bytes([b8, b9, b10, b11, b12, b13, b14, b15]),
    ]
}

/// The address of two little-endian words.
fn from_words(lo: u64, hi: u64) -> PublishedAddr {
    let [b0, b1, b2, b3, b4, b5, b6, b7] = lo.to_le_bytes();
    let [b8, b9, b10, b11, b12, b13, b14, b15] = hi.to_le_bytes();
    [
        b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15,
    ]
}

/// The odd sequence value that opens a rewrite of the addresses after `seq`; the even one
/// that closes it is the next. Never 0 ("nothing published") nor the largest value once
/// published.
pub(crate) const fn next_odd(seq: u64) -> u64 {
    match (seq | 1).wrapping_add(if seq & 1 == 0 { 0 } else { 2 }) {
        u64::MAX => 1,
        v => v,
    }
}

impl<S: Segment> Region<S> {
    /// Offsets of `node`'s sequence word and first address word.
    fn address_words(&self, node: NodeId) -> Option<(usize, usize)> {
        let entry = self.layout.node_entry(node)?;
        Some((
            entry.checked_add(NODE_ADDR_SEQ)?,
            entry.checked_add(NODE_ADDRS)?,
        ))
    }

    /// `node`'s address page (its first heap page), if its heap has one.
    fn address_page(&self, node: NodeId) -> Option<Span> {
        self.heap_span(node, ADDR_PAGE, 1)
    }

    /// Stores `a` at `off` as two words.
    fn store_addr(&self, off: usize, a: &PublishedAddr) {
        let [lo, hi] = to_words(a);
        self.seg.store_u64(off, lo);
        self.seg.store_u64(off.saturating_add(8), hi);
    }

    /// The address at `off`, if usable.
    fn load_addr(&self, off: usize) -> Option<PublishedAddr> {
        let a = from_words(
            self.seg.load_u64(off),
            self.seg.load_u64(off.saturating_add(8)),
        );
        usable(&a).then_some(a)
    }

    /// Publishes `addrs` (unusable ones are left out; the first [`MAX_PUBLISHED`]
    /// usable ones are kept) as node `me`'s addresses. Only `me` calls it for its own
    /// entry, and only a node whose first heap page is its address page (never handed
    /// to a segment).
    ///
    /// [`MAX_PUBLISHED`]: super::MAX_PUBLISHED
    pub(crate) fn publish_addresses(&self, me: NodeId, addrs: &[PublishedAddr]) {
        let Some((seq_off, addr_off)) = self.address_words(me) else {
            return;
        };
        let odd = next_odd(self.seg.load_u64(seq_off));
        self.seg.store_u64(seq_off, odd);
        self.seg.fence();
        let mut usable_addrs = addrs.iter().filter(|a| usable(a));
        for slot in 0..PUBLISHED_ADDRS {
            let off = slot.saturating_mul(16).saturating_add(addr_off);
            self.store_addr(off, usable_addrs.next().unwrap_or(&[0; 16]));
        }
        if let Some(page) = self.address_page(me) {
            let mut count = 0u64;
            for (slot, a) in usable_addrs.take(PAGE_ADDRS).enumerate() {
                let off = slot.saturating_mul(16).saturating_add(ADDR_PAGE_ADDRS);
                self.store_addr(page.off.saturating_add(off), a);
                count = count.saturating_add(1);
            }
            self.seg
                .store_u64(page.off.saturating_add(ADDR_PAGE_COUNT), count);
            self.seg.store_u64(
                page.off.saturating_add(ADDR_PAGE_MAGIC_OFF),
                ADDR_PAGE_MAGIC,
            );
        }
        self.seg.fence();
        self.seg.store_u64(seq_off, odd.wrapping_add(1));
    }

    /// The addresses `node` published in its node entry, checked ([`usable`]; an empty
    /// or unusable slot is `None`), or `None` if it published nothing or was rewriting
    /// them as they were read (try again).
    pub(crate) fn published_addresses(
        &self,
        node: NodeId,
    ) -> Option<[Option<PublishedAddr>; PUBLISHED_ADDRS]> {
        let (seq_off, addr_off) = self.address_words(node)?;
        let seq = self.seg.load_u64(seq_off);
        if seq == 0 || seq & 1 != 0 {
            return None;
        }
        let mut out = [None; PUBLISHED_ADDRS];
        for (slot, a) in out.iter_mut().enumerate() {
            *a = self.load_addr(slot.saturating_mul(16).saturating_add(addr_off));
        }
        self.seg.fence();
        (self.seg.load_u64(seq_off) == seq).then_some(out)
    }

    /// Every usable address `node` published, its node entry's and its address page's,
    /// into `out` (at most its length); how many, or `None` if it published nothing or
    /// was rewriting them as they were read (try again). A page without the magic, or
    /// with a count beyond [`PAGE_ADDRS`], holds nothing.
    pub(crate) fn read_published(&self, node: NodeId, out: &mut [PublishedAddr]) -> Option<usize> {
        let (seq_off, addr_off) = self.address_words(node)?;
        let seq = self.seg.load_u64(seq_off);
        if seq == 0 || seq & 1 != 0 {
            return None;
        }
        let entry =
            (0..PUBLISHED_ADDRS).map(|slot| slot.saturating_mul(16).saturating_add(addr_off));
        let page = self
            .address_page(node)
            .filter(|p| {
                self.seg.load_u64(p.off.saturating_add(ADDR_PAGE_MAGIC_OFF)) == ADDR_PAGE_MAGIC
            })
            .map_or((0, 0), |p| {
                let count = self.seg.load_u64(p.off.saturating_add(ADDR_PAGE_COUNT));
                let count = usize::try_from(count).unwrap_or(usize::MAX);
                (p.off, if count <= PAGE_ADDRS { count } else { 0 })
            });
        let in_page = (0..page.1).map(|slot| {
            slot.saturating_mul(16)
                .saturating_add(ADDR_PAGE_ADDRS)
                .saturating_add(page.0)
        });
        let mut n = 0usize;
        for a in entry.chain(in_page).filter_map(|off| self.load_addr(off)) {
            let Some(slot) = out.get_mut(n) else { break };
            *slot = a;
            n = n.saturating_add(1);
        }
        self.seg.fence();
        (self.seg.load_u64(seq_off) == seq).then_some(n)
    }
}
