// SPDX-License-Identifier: GPL-2.0

//! Kernel memory for segments, kept for reuse.
//!
//! Every loopback connection end allocates a segment the size of its ring (about
//! 260 KiB) and frees it when the connection goes: a `vmalloc` of 65 pages, zeroing all
//! of them, and a `vfree`, for a connection that may carry 14 bytes. The loopback fabric
//! keeps up to [`POOL_MAX`] freed buffers instead. A buffer given back has the chunks it
//! was written in zeroed (its segment marks each chunk it writes, [`PooledBuf::wrote`]; a
//! chunk is a page, or a 128th of a larger buffer), so a reused buffer is as zeroed as a
//! new one, and a short connection costs a page or two of zeroing instead of the whole
//! ring (its bytes start anywhere in the ring, so "as far as the highest offset written"
//! was most of it). A buffer whose pages were lent to a kernel reader (`read_sock`, which
//! may keep them past the connection) is freed, not reused.
//!
//! The pool holds at most `POOL_MAX` buffers (about 4 MiB), freed with the fabric.

use crate::sys::spinlock_bh::{new_spinlock_bh, SpinLockBh};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;

/// Freed buffers kept at most.
pub(crate) const POOL_MAX: usize = 16;

/// Chunks a buffer's written marks cover (the bits of [`Dirty`]).
const CHUNKS: usize = 128;
/// The smallest chunk: a page.
const MIN_CHUNK_SHIFT: u32 = 12;

/// Which chunks of a buffer may have been written, one bit each.
struct Dirty {
    bits: [AtomicU64; CHUNKS / 64],
    /// A chunk is `1 << shift` bytes.
    shift: u32,
}

impl Dirty {
    /// No chunk written, for a buffer of `len` bytes.
    fn new(len: usize) -> Self {
        let mut shift = MIN_CHUNK_SHIFT;
        while len > CHUNKS << shift {
            shift += 1;
        }
        Self {
            bits: [const { AtomicU64::new(0) }; CHUNKS / 64],
            shift,
        }
    }

    /// Marks the chunks of the `len` bytes at `off` (`len` > 0).
    fn mark(&self, off: usize, len: usize) {
        let first = off >> self.shift;
        let last = ((off + len - 1) >> self.shift).min(CHUNKS - 1);
        for chunk in first..=last {
            let (word, bit) = (&self.bits[chunk / 64], 1u64 << (chunk % 64));
            // A chunk marked already (most writes): no atomic write.
            if word.load(Ordering::Relaxed) & bit == 0 {
                word.fetch_or(bit, Ordering::Relaxed);
            }
        }
    }

    /// Zeroes the marked chunks of `buf`.
    fn zero(&mut self, buf: &mut [u64]) {
        let words_per_chunk = 1usize << (self.shift - 3);
        for (i, word) in self.bits.iter_mut().enumerate() {
            let mut bits = *word.get_mut();
            while bits != 0 {
                let chunk = i * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let start = (chunk * words_per_chunk).min(buf.len());
                let end = (start + words_per_chunk).min(buf.len());
                buf[start..end].fill(0);
            }
        }
    }
}

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
            dirty: Dirty::new(buf.len() * 8),
            buf: Some(buf),
            pool: self.clone(),
            lent: AtomicBool::new(false),
        })
    }

    /// Keeps `buf`, its `dirty` chunks zeroed, if there is room; frees it otherwise.
    fn give_back(&self, mut buf: VVec<u64>, dirty: &mut Dirty) {
        dirty.zero(buf.as_mut_slice());
        let mut free = self.free.lock();
        if let Some(slot) = free.iter_mut().find(|b| b.is_none()) {
            *slot = Some(buf);
            return;
        }
        drop(free);
        // Full: `buf` is freed here, outside the lock.
    }
}

/// A buffer from a [`SegPool`], back to it (its written chunks zeroed) when dropped.
pub(crate) struct PooledBuf {
    buf: Option<VVec<u64>>,
    pool: Arc<SegPool>,
    /// The chunks that may have been written.
    dirty: Dirty,
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

    /// Records that the `len` bytes at offset `off` may have been written.
    pub(crate) fn wrote(&self, off: usize, len: usize) {
        if len != 0 {
            self.dirty.mark(off, len);
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
            self.pool.give_back(buf, &mut self.dirty);
        }
    }
}
