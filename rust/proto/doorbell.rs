// SPDX-License-Identifier: GPL-2.0

//! Doorbells between nodes of a shared region, with no word that two nodes
//! read-modify-write.
//!
//! A connection's doorbell tells its receiving node "look at channel `c`" (the
//! connection's slot). Every sender `j` has its own *doorbell block* in the
//! receiver's area, which only `j` writes:
//!
//! ```text
//! doorbell block j → i (in i's area, written by node j only)
//! 0x00                  u32 group counters[groups]   group g = channels 64g..64g+63
//! align_up(4 * groups)  u32 channel counters[channels]
//! ```
//!
//! To ring channel `c` the sender increments its own copy of `c`'s counter and
//! stores it, then its copy of `c`'s group counter, then fences and raises the
//! receiver's interrupt (if it takes them). The receiver remembers the last value
//! it saw of every counter: a group counter that moved sends it to the group's 64
//! channel counters, and each channel whose counter moved has rung.
//!
//! Why counters: the earlier bitmap (the sender ORs a bit in, the receiver swaps the
//! word to zero) needs both nodes' read-modify-writes on one word to be atomic
//! against each other. PCIe NTB does not forward locked transactions, and QEMU's TCG
//! does not make a one-vCPU guest's locked instructions atomic against another
//! process, so a sender's bit could be erased by the receiver's swap and the
//! connection was never rung again (a server asleep in `epoll_wait` with a request
//! in its ring). A counter changes only by its sender's stores, so no ring is ever
//! erased. Two rings the receiver sees as one change are fine: a doorbell only tells
//! a connection to look at its queues.
//!
//! The sender keeps its counters in private memory (it only ever stores to the
//! receiver's area, as the queues do); the receiver reads only its own area. Both
//! restart at zero when the two nodes (re)link: the receiver zeroes the block
//! before it publishes its link, and the sender starts ringing only once the link
//! is returned.
//!
//! Ordering: the channel counter is stored before its group counter, and the
//! receiver loads the group counter before the channel counters, so a group change
//! it sees comes with the channel change that caused it. A receiver that reads a
//! channel counter newer than the group counter it read takes the ring early, and
//! the group change it finds at its next look leads to no channel (harmless).
//!
//! The counters' storage is the caller's (`B`: a `Vec` on the host, a `KVec` in the
//! kernel), [`BellGeometry::words`] `u32`s per endpoint: this core does not allocate.

use super::ring::{fits, CACHE_LINE};
use super::segment::Segment;
use core::ops::DerefMut;

/// Channels per group (one group counter covers them).
pub(crate) const GROUP_CHANNELS: usize = 64;

/// Where the counters of one doorbell block are, for a node with `channels`
/// channels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BellGeometry {
    /// Channels of the receiving node (a multiple of [`GROUP_CHANNELS`]).
    channels: usize,
    /// Group counters (`channels / 64`).
    groups: usize,
    /// Block-relative offset of the channel counters.
    counters: usize,
    /// Bytes of the block (a multiple of [`CACHE_LINE`]).
    size: usize,
}

/// Why a doorbell endpoint cannot be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BellError {
    /// The channel count is 0 or not a multiple of 64, or the block would not fit.
    BadGeometry,
    /// The block does not lie inside the segment, or is not 64-aligned.
    BadPlacement,
    /// The caller's counter storage is shorter than [`BellGeometry::words`].
    ShortStorage,
}

/// `v` rounded up to a multiple of [`CACHE_LINE`], if it fits.
fn line_up(v: usize) -> Option<usize> {
    v.checked_add(CACHE_LINE - 1).map(|x| x & !(CACHE_LINE - 1))
}

impl BellGeometry {
    /// The geometry for a node with `channels` channels.
    pub(crate) fn new(channels: usize) -> Result<Self, BellError> {
        if channels == 0 || channels % GROUP_CHANNELS != 0 {
            return Err(BellError::BadGeometry);
        }
        let groups = channels / GROUP_CHANNELS;
        let counters = groups
            .checked_mul(4)
            .and_then(line_up)
            .ok_or(BellError::BadGeometry)?;
        let size = channels
            .checked_mul(4)
            .and_then(|c| c.checked_add(counters))
            .and_then(line_up)
            .ok_or(BellError::BadGeometry)?;
        Ok(Self {
            channels,
            groups,
            counters,
            size,
        })
    }

    /// Bytes of one block.
    pub(crate) const fn size(&self) -> usize {
        self.size
    }

    /// Channels a block covers.
    pub(crate) const fn channels(&self) -> usize {
        self.channels
    }

    /// `u32`s of counter storage an endpoint needs (one per channel and group).
    pub(crate) const fn words(&self) -> usize {
        self.channels.saturating_add(self.groups)
    }

    /// Block-relative offset of group counter `g`.
    const fn group_off(&self, g: usize) -> usize {
        g.saturating_mul(4)
    }

    /// Block-relative offset of channel counter `c`.
    const fn channel_off(&self, c: usize) -> usize {
        self.counters.saturating_add(c.saturating_mul(4))
    }

    /// Checks that a block at `base` lies inside a segment of `len` bytes.
    fn check(&self, len: usize, base: usize) -> Result<(), BellError> {
        if base % CACHE_LINE != 0 || !fits(len, base, self.size) {
            return Err(BellError::BadPlacement);
        }
        Ok(())
    }
}

/// Zeroes the doorbell block at `base` (the receiver, before it links with the
/// block's sender).
pub(crate) fn init_block<S: Segment>(
    seg: &S,
    base: usize,
    geom: BellGeometry,
) -> Result<(), BellError> {
    geom.check(seg.len(), base)?;
    let mut off = 0;
    while off < geom.size {
        seg.store_u64(base.saturating_add(off), 0);
        off = off.saturating_add(8);
    }
    Ok(())
}

/// Checks an endpoint's placement (a block at `base` in a segment of `len` bytes) and
/// its counter storage, and zeroes the storage: what both endpoints start from.
fn prepare<B: DerefMut<Target = [u32]>>(
    len: usize,
    base: usize,
    geom: BellGeometry,
    mut store: B,
) -> Result<B, BellError> {
    geom.check(len, base)?;
    if store.len() < geom.words() {
        return Err(BellError::ShortStorage);
    }
    store.fill(0);
    Ok(store)
}

/// Counter storage of an endpoint: channel counters first, then group counters.
fn split<B: DerefMut<Target = [u32]>>(
    store: &mut B,
    geom: BellGeometry,
) -> (&mut [u32], &mut [u32]) {
    let all: &mut [u32] = store;
    let (channels, rest) = all.split_at_mut(geom.channels.min(all.len()));
    let groups = rest.len().min(geom.groups);
    (channels, rest.split_at_mut(groups).0)
}

/// The ringing end: node `j`'s block in a receiver's area.
#[derive(Debug)]
pub(crate) struct DoorbellTx<S: Segment, B> {
    /// The segment holding the receiver's area (stores only).
    seg: S,
    /// Offset of the block.
    base: usize,
    /// The block's shape.
    geom: BellGeometry,
    /// The counters as last stored (channels, then groups).
    counts: B,
}

impl<S: Segment, B: DerefMut<Target = [u32]>> DoorbellTx<S, B> {
    /// The sender of the block at `base` in `seg`, counting in `counts` (at least
    /// [`BellGeometry::words`] long; zeroed here, as the receiver zeroes the block).
    pub(crate) fn new(
        seg: S,
        base: usize,
        geom: BellGeometry,
        counts: B,
    ) -> Result<Self, BellError> {
        let counts = prepare(seg.len(), base, geom, counts)?;
        Ok(Self {
            seg,
            base,
            geom,
            counts,
        })
    }

    /// Starts counting from zero again (the receiver zeroed the block on relinking).
    pub(crate) fn reset(&mut self) {
        self.counts.fill(0);
    }

    /// Rings `channel`: its counter, then its group's (the caller then raises the
    /// receiver's interrupt, if it takes them). `false` if there is no such channel.
    pub(crate) fn ring(&mut self, channel: u32) -> bool {
        let Ok(c) = usize::try_from(channel) else {
            return false;
        };
        let g = c / GROUP_CHANNELS;
        let geom = self.geom;
        let (channels, groups) = split(&mut self.counts, geom);
        let (Some(cc), Some(gc)) = (channels.get_mut(c), groups.get_mut(g)) else {
            return false;
        };
        *cc = cc.wrapping_add(1);
        *gc = gc.wrapping_add(1);
        let (cv, gv) = (*cc, *gc);
        self.seg
            .store_u32(self.base.saturating_add(geom.channel_off(c)), cv);
        self.seg
            .store_u32(self.base.saturating_add(geom.group_off(g)), gv);
        self.seg.fence();
        true
    }
}

/// The receiving end: the block one sender writes in this node's area.
#[derive(Debug)]
pub(crate) struct DoorbellRx<S: Segment, B> {
    /// The segment holding this node's area (loads only).
    seg: S,
    /// Offset of the block.
    base: usize,
    /// The block's shape.
    geom: BellGeometry,
    /// The counters as last seen (channels, then groups).
    seen: B,
}

impl<S: Segment, B: DerefMut<Target = [u32]>> DoorbellRx<S, B> {
    /// The receiver of the block at `base` in `seg`, remembering in `seen` (at least
    /// [`BellGeometry::words`] long; zeroed here: call it after [`init_block`]).
    pub(crate) fn new(seg: S, base: usize, geom: BellGeometry, seen: B) -> Result<Self, BellError> {
        let seen = prepare(seg.len(), base, geom, seen)?;
        Ok(Self {
            seg,
            base,
            geom,
            seen,
        })
    }

    /// Zeroes the block and forgets what was seen (before relinking with its sender).
    pub(crate) fn reset(&mut self) {
        let _ = init_block(&self.seg, self.base, self.geom);
        self.seen.fill(0);
    }

    /// Calls `rung` for every channel whose counter moved since the last look (at
    /// most once per channel per call; channels in increasing order).
    pub(crate) fn take(&mut self, mut rung: impl FnMut(u32)) {
        let geom = self.geom;
        let (seg, base) = (&self.seg, self.base);
        let (channels, groups) = split(&mut self.seen, geom);
        for (g, last_g) in groups.iter_mut().enumerate() {
            let now_g = seg.load_u32(base.saturating_add(geom.group_off(g)));
            if now_g == *last_g {
                continue;
            }
            *last_g = now_g;
            let first = g.saturating_mul(GROUP_CHANNELS);
            let end = first.saturating_add(GROUP_CHANNELS).min(channels.len());
            for c in first..end {
                let now_c = seg.load_u32(base.saturating_add(geom.channel_off(c)));
                let Some(last_c) = channels.get_mut(c) else {
                    break;
                };
                if now_c != *last_c {
                    *last_c = now_c;
                    rung(u32::try_from(c).unwrap_or(u32::MAX));
                }
            }
        }
    }
}
