// SPDX-License-Identifier: GPL-2.0

//! This node's heap in the shared region: the pages its segments come from.
//!
//! Allocation state is private kernel memory ([`crate::proto::pages`] over a bitmap);
//! the region only shows peers the export directory. Most segments come back at once:
//! the control plane frees a connection's segment when its peer's close flags say the
//! peer stores nothing more into it. Only a segment whose peer never said so (its node
//! went down, or a connect gave up without an answer) is *quarantined* for
//! [`QUARANTINE_MS`] before its pages are handed out again, so that a late store of a
//! peer that has not yet seen the end cannot land in a new connection's memory.

use super::now_ms;
use crate::fabric::memory::SegOwner;
use crate::proto::pages;
use crate::proto::region::{DirEntry, ADDR_PAGE};
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::prelude::*;
use kernel::sync::{Arc, SpinLock};

/// How long freed pages wait before reuse.
pub(super) const QUARANTINE_MS: u64 = 2000;

/// A run of freed pages waiting out the quarantine.
#[derive(Clone, Copy)]
struct Freed {
    page: usize,
    pages: usize,
    until_ms: u64,
}

struct HeapInner {
    /// One bit per page, set = in use (or quarantined).
    bitmap: KVec<u64>,
    /// Pages of the heap.
    pages: usize,
    /// Freed runs waiting; a fixed table, so freeing never allocates.
    quarantine: KVec<Option<Freed>>,
    /// The export generation of each channel.
    export_gen: KVec<u16>,
}

/// The heap of this node's area.
#[pin_data]
pub(super) struct Heap {
    #[pin]
    inner: SpinLock<HeapInner>,
}

impl Heap {
    /// A heap of `pages` pages serving `channels` channels. Its first page is this
    /// node's address page (`ADDR_PAGE`), never handed out.
    pub(super) fn new(pages: usize, channels: usize) -> Result<Arc<Self>> {
        let mut bitmap = KVec::from_elem(0u64, pages::bitmap_words(pages), GFP_KERNEL)?;
        pages::reserve(bitmap.as_mut_slice(), ADDR_PAGE);
        let quarantine = KVec::from_elem(None, channels.saturating_mul(2), GFP_KERNEL)?;
        let export_gen = KVec::from_elem(0u16, channels, GFP_KERNEL)?;
        Arc::pin_init(
            pin_init!(Self {
                inner <- kernel::new_spinlock!(
                    HeapInner { bitmap, pages, quarantine, export_gen },
                    "ivshmem::Heap"
                ),
            }),
            GFP_KERNEL,
        )
    }

    /// Allocates `n` contiguous pages; returns the allocation, which frees them (into
    /// the quarantine) when dropped.
    pub(super) fn alloc(self: &Arc<Self>, n: usize) -> Option<Allocation> {
        let now = now_ms();
        let mut g = self.inner.lock();
        let HeapInner {
            bitmap,
            pages,
            quarantine,
            ..
        } = &mut *g;
        // Runs whose quarantine ended go back to the bitmap.
        for slot in quarantine.as_mut_slice() {
            if let Some(f) = slot.filter(|f| f.until_ms <= now) {
                *slot = None;
                pages::free(bitmap.as_mut_slice(), f.page, f.pages);
            }
        }
        let page = pages::alloc(bitmap.as_mut_slice(), *pages, n)?;
        drop(g);
        Some(Allocation {
            heap: self.clone(),
            page,
            pages: n,
            quarantine: AtomicBool::new(true),
        })
    }

    /// Frees an allocation's pages: into the quarantine, or at once when not
    /// `quarantined` (no peer ever had them).
    fn release(&self, page: usize, n: usize, quarantined: bool) {
        let until_ms = now_ms().saturating_add(QUARANTINE_MS);
        let mut g = self.inner.lock();
        let HeapInner {
            bitmap, quarantine, ..
        } = &mut *g;
        if !quarantined {
            pages::free(bitmap.as_mut_slice(), page, n);
            return;
        }
        let freed = Freed {
            page,
            pages: n,
            until_ms,
        };
        let table = quarantine.as_mut_slice();
        let slot = match table.iter().position(Option::is_none) {
            Some(i) => i,
            // Full (connections churning faster than the quarantine drains): the run
            // closest to the end of its quarantine goes back early.
            None => {
                let i = (0..table.len())
                    .min_by_key(|&i| table[i].map_or(0, |f| f.until_ms))
                    .unwrap_or(0);
                if let Some(f) = table.get_mut(i).and_then(Option::take) {
                    pages::free(bitmap.as_mut_slice(), f.page, f.pages);
                }
                i
            }
        };
        match table.get_mut(slot) {
            Some(s) => *s = Some(freed),
            None => pages::free(bitmap.as_mut_slice(), page, n),
        }
    }

    /// A new export generation for `channel` (0 if the channel does not exist).
    pub(super) fn next_export_gen(&self, channel: usize) -> u16 {
        let mut g = self.inner.lock();
        match g.export_gen.as_mut_slice().get_mut(channel) {
            Some(gen) => {
                *gen = DirEntry::next_generation(*gen);
                *gen
            }
            None => 0,
        }
    }

    /// Pages in use or quarantined, and the heap's size.
    pub(super) fn usage(&self) -> (usize, usize) {
        let g = self.inner.lock();
        (pages::in_use(g.bitmap.as_slice(), g.pages), g.pages)
    }
}

/// Pages of the heap held by a segment.
pub(super) struct Allocation {
    heap: Arc<Heap>,
    /// First page, relative to the heap.
    pub(super) page: usize,
    /// Page count.
    pub(super) pages: usize,
    /// The pages wait out the quarantine when freed (cleared for a segment no peer had
    /// or whose peer closed its end).
    quarantine: AtomicBool,
}

impl SegOwner for Allocation {
    fn peer_done(&self) {
        self.quarantine.store(false, Ordering::Relaxed);
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        self.heap.release(
            self.page,
            self.pages,
            self.quarantine.load(Ordering::Relaxed),
        );
    }
}
