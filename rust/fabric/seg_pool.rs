// SPDX-License-Identifier: GPL-2.0

//! Kernel memory for segments, kept for reuse.
//!
//! Every loopback connection end allocates a segment the size of its ring (about
//! 260 KiB) and frees it when the connection goes: a `vmalloc` of 65 pages, zeroing all
//! of them, and a `vfree`, for a connection that may carry 14 bytes. The loopback fabric
//! keeps up to [`POOL_MAX`] freed buffers instead. A buffer given back is zeroed as far as
//! it was written (its segment records the highest offset written, [`PooledBuf::wrote`]),
//! so a reused buffer is as zeroed as a new one, and a short connection costs a page or
//! two of zeroing instead of the whole ring. A buffer whose pages were lent to a kernel
//! reader (`read_sock`, which may keep them past the connection) is freed, not reused.
//!
//! The pool holds at most `POOL_MAX` buffers (about 4 MiB), freed with the fabric.

use crate::sys::spinlock_bh::{new_spinlock_bh, SpinLockBh};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;

/// Freed buffers kept at most.
pub(crate) const POOL_MAX: usize = 16;

/// Buffers kept for reuse, of any size (a fabric's segments are all of one or two).
#[pin_data]
pub(crate) struct SegPool {
    /// Zeroed buffers. Taken with bottom halves off: a segment may go (its last
    /// reference dropped) in softirq context.
    #[pin]
    free: SpinLockBh<[Option<VVec<u64>>; POOL_MAX]>,
}

impl SegPool {
    /// An empty pool.
    pub(crate) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                free <- new_spinlock_bh!(core::array::from_fn(|_| None), "SegPool::free"),
            }),
            GFP_KERNEL,
        )
    }

    /// A zeroed buffer of `words` words: a kept one of that size, else a new one.
    pub(crate) fn take(self: &Arc<Self>, words: usize) -> Result<PooledBuf> {
        let kept = self
            .free
            .lock()
            .iter_mut()
            .find(|b| b.as_ref().is_some_and(|b| b.len() == words))
            .and_then(Option::take);
        let buf = match kept {
            Some(buf) => buf,
            None => VVec::from_elem(0, words, GFP_KERNEL)?,
        };
        Ok(PooledBuf {
            buf: Some(buf),
            pool: self.clone(),
            written: AtomicUsize::new(0),
            lent: AtomicBool::new(false),
        })
    }

    /// Keeps `buf`, zeroed, if there is room; frees it otherwise.
    fn give_back(&self, mut buf: VVec<u64>, written: usize) {
        let words = written.div_ceil(8).min(buf.len());
        buf.as_mut_slice()[..words].fill(0);
        let mut free = self.free.lock();
        if let Some(slot) = free.iter_mut().find(|b| b.is_none()) {
            *slot = Some(buf);
            return;
        }
        drop(free);
        // Full: `buf` is freed here, outside the lock.
    }
}

/// A buffer from a [`SegPool`], back to it (zeroed as far as written) when dropped.
pub(crate) struct PooledBuf {
    buf: Option<VVec<u64>>,
    pool: Arc<SegPool>,
    /// Bytes from the start that may have been written.
    written: AtomicUsize,
    /// Pages were lent to a kernel reader, which may keep them after the segment goes
    /// (holding page references): the buffer is freed then, never reused.
    lent: AtomicBool,
}

impl PooledBuf {
    /// The buffer's memory and its length in bytes (valid while `self` lives; it does not
    /// move when `self` does).
    pub(crate) fn memory(&mut self) -> Option<(NonNull<u8>, usize)> {
        let buf = self.buf.as_mut()?;
        Some((NonNull::new(buf.as_mut_ptr().cast())?, buf.len() * 8))
    }

    /// Records that the bytes up to offset `end` may have been written.
    pub(crate) fn wrote(&self, end: usize) {
        if end > self.written.load(Ordering::Relaxed) {
            self.written.fetch_max(end, Ordering::Relaxed);
        }
    }

    /// Records that pages of the buffer were lent (`SegMem::lendable`).
    pub(crate) fn lent(&self) {
        if !self.lent.load(Ordering::Relaxed) {
            self.lent.store(true, Ordering::Relaxed);
        }
    }
}

impl Drop for PooledBuf {
    fn drop(&mut self) {
        if *self.lent.get_mut() {
            // Freed (`vfree`): a page a reader still holds lives on by its reference.
            return;
        }
        if let Some(buf) = self.buf.take() {
            self.pool.give_back(buf, *self.written.get_mut());
        }
    }
}
