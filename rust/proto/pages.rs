// SPDX-License-Identifier: GPL-2.0

//! The page allocator of a node's heap in the shared region.
//!
//! Only the owning node allocates from its heap, so the allocator's state is private
//! memory (a bitmap, one bit per page, set = in use) that the caller owns and locks;
//! nothing of it lives in the region where a peer could touch it. First fit: segments
//! are few and large (one per connection end), and a heap is at most a few thousand
//! pages, so a linear scan costs less than a connection setup's mailbox round trip.

/// Bitmap words needed for `pages` pages.
pub(crate) const fn bitmap_words(pages: usize) -> usize {
    pages.div_ceil(64)
}

/// Whether page `i` is in use (pages beyond the bitmap count as used).
fn used(bitmap: &[u64], i: usize) -> bool {
    match bitmap.get(i / 64) {
        Some(w) => w & (1u64 << (i % 64)) != 0,
        None => true,
    }
}

/// Sets or clears page `i`.
fn mark(bitmap: &mut [u64], i: usize, in_use: bool) {
    if let Some(w) = bitmap.get_mut(i / 64) {
        let bit = 1u64 << (i % 64);
        if in_use {
            *w |= bit;
        } else {
            *w &= !bit;
        }
    }
}

/// Allocates `n` contiguous pages among the first `total` pages of `bitmap`; returns the
/// first page. `None` if `n` is 0 or no run is free.
pub(crate) fn alloc(bitmap: &mut [u64], total: usize, n: usize) -> Option<usize> {
    let total = total.min(bitmap.len().saturating_mul(64));
    if n == 0 || n > total {
        return None;
    }
    let mut start = 0usize;
    let mut run = 0usize;
    let mut i = 0usize;
    while i < total {
        if used(bitmap, i) {
            run = 0;
            start = i.saturating_add(1);
        } else {
            run = run.saturating_add(1);
            if run == n {
                for p in start..start.saturating_add(n) {
                    mark(bitmap, p, true);
                }
                return Some(start);
            }
        }
        i = i.saturating_add(1);
    }
    None
}

/// Takes page `i` for good, before any allocation (a page with a fixed use).
pub(crate) fn reserve(bitmap: &mut [u64], i: usize) {
    mark(bitmap, i, true);
}

/// Frees pages `first..first + n` (pages beyond the bitmap are ignored).
pub(crate) fn free(bitmap: &mut [u64], first: usize, n: usize) {
    for p in first..first.saturating_add(n) {
        mark(bitmap, p, false);
    }
}

/// Pages in use among the first `total`.
pub(crate) fn in_use(bitmap: &[u64], total: usize) -> usize {
    (0..total).filter(|&i| used(bitmap, i)).count()
}
