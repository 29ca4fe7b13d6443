// SPDX-License-Identifier: GPL-2.0

//! The shared-memory accessor: the only way the protocol core touches a segment.
//!
//! The core never copies payload bytes itself. It hands the caller [`Span`]s
//! (segment offsets) and the caller copies with whatever primitive fits (in the
//! kernel: `copy_from_iter`/`copy_to_iter` straight between a user `iov_iter` and
//! the mapped ring). Everything the core reads or writes itself is an aligned
//! 8-byte (or 4-byte) word, through this trait.
//!
//! [`Span`]: super::ring::Span

/// A mapped shared-memory segment, local or remote.
///
/// Contract for implementations (the kernel's fabric wrapper and the host test
/// harness):
///
/// - every offset the core passes satisfies `off + width <= len()` and is aligned
///   to the access width: the core validates every placement against `len()`
///   once, when an endpoint is created, and derives all later offsets from
///   constants. An implementation should still bounds-check (it is cheap) and
///   must not trust anything else about the offsets' origin;
/// - the accesses are single-copy atomic for their width (no tearing);
/// - loads have Acquire and stores Release semantics (`smp_load_acquire` /
///   `smp_store_release`); for a remote mapping a store may be posted;
/// - [`Segment::fence`] is a full barrier: every store issued before it
///   (through any segment) is visible to the peer before any load issued after it
///   (`smp_mb()`, plus whatever flush the fabric needs for posted remote writes).
///   The wake-up protocol depends on it (a store-load ordering, like Dekker's).
pub(crate) trait Segment {
    /// Length of the segment in bytes.
    fn len(&self) -> usize;

    /// Whether the segment has no bytes at all.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Loads the 8-byte word at `off` (8-aligned) with Acquire ordering.
    fn load_u64(&self, off: usize) -> u64;

    /// Stores `v` into the 8-byte word at `off` (8-aligned) with Release ordering.
    fn store_u64(&self, off: usize, v: u64);

    /// Loads the 4-byte word at `off` (4-aligned) with Acquire ordering.
    fn load_u32(&self, off: usize) -> u32;

    /// Stores `v` into the 4-byte word at `off` (4-aligned) with Release ordering.
    fn store_u32(&self, off: usize, v: u32);

    /// Full memory barrier ordering earlier stores before later loads.
    fn fence(&self);
}

/// Any pointer to a segment is a segment: a reference, the kernel's `Arc` of a mapping,
/// a test harness's `Arc`. One delegating impl serves them all.
impl<P> Segment for P
where
    P: core::ops::Deref,
    P::Target: Segment,
{
    #[inline]
    fn len(&self) -> usize {
        (**self).len()
    }

    #[inline]
    fn load_u64(&self, off: usize) -> u64 {
        (**self).load_u64(off)
    }

    #[inline]
    fn store_u64(&self, off: usize, v: u64) {
        (**self).store_u64(off, v)
    }

    #[inline]
    fn load_u32(&self, off: usize) -> u32 {
        (**self).load_u32(off)
    }

    #[inline]
    fn store_u32(&self, off: usize, v: u32) {
        (**self).store_u32(off, v)
    }

    #[inline]
    fn fence(&self) {
        (**self).fence()
    }
}
