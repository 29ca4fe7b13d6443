// SPDX-License-Identifier: GPL-2.0

//! A reader's receive buffer with its pages pinned (`c/pages.c`), so that a writer in
//! this kernel can copy straight into it from another task (the loopback fabric's direct
//! receive, `fabric/direct.rs`).
//!
//! Pinning advances the reader's iterator over the pinned bytes; [`PinnedBuf::give_back`]
//! moves it back over the bytes nobody filled, so the reader's `recvmsg` accounts for
//! exactly what arrived. The pages stay valid while pinned even if the reader's task
//! exits meanwhile, so a writer may be copying while the reader is killed.

use crate::sys::bindings;
use core::ptr::NonNull;

/// Pinned pages of part of a reader's buffer; unpinned when dropped.
pub(crate) struct PinnedBuf {
    ptr: NonNull<bindings::sci_pinned>,
    len: usize,
}

// SAFETY: the pinned pages belong to no task: any thread may fill or unpin them.
unsafe impl Send for PinnedBuf {}

impl PinnedBuf {
    /// Pins up to `max` bytes of the destination iterator `iter` from where it stands,
    /// advancing it over them. `None` (the iterator unchanged) when nothing could be
    /// pinned: a kernel caller's buffer (only user memory is pinned), a fault on the
    /// first page, no memory.
    pub(crate) fn pin(iter: *mut bindings::iov_iter, max: usize) -> Option<Self> {
        let mut len = 0usize;
        // SAFETY: `iter` is the caller's live `recvmsg` iterator; the helper checks its
        // kind and direction and writes `len`.
        let p = unsafe { bindings::sci_pin_iter(iter, max, &mut len) };
        Some(Self {
            ptr: NonNull::new(p)?,
            len,
        })
    }

    /// Bytes pinned.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Copies up to `len` bytes from the source iterator `from` into the buffer, from
    /// its start; returns the count copied (short on a fault in `from`'s memory).
    pub(crate) fn fill(&mut self, len: usize, from: *mut bindings::iov_iter) -> usize {
        // SAFETY: `ptr` is pinned and owned by `self`; `from` is the writer's live
        // iterator; the helper bounds the copy by the pinned length.
        unsafe { bindings::sci_pinned_fill(self.ptr.as_ptr(), len, from) }
    }

    /// Unpins the buffer, moving the reader's iterator `iter` (the one it was pinned
    /// from, not used since) back over the bytes past the first `used`.
    pub(crate) fn give_back(self, used: usize, iter: *mut bindings::iov_iter) {
        let unused = self.len.saturating_sub(used);
        if unused > 0 {
            // SAFETY: `iter` was advanced over `len` bytes by `pin` and not moved since
            // (the reader waits while the buffer is out); reverting fewer is in range.
            unsafe { bindings::sci_iter_revert(iter, unused) };
        }
    }
}

impl Drop for PinnedBuf {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `sci_pin_iter` and is freed only here.
        unsafe { bindings::sci_pinned_free(self.ptr.as_ptr()) };
    }
}
