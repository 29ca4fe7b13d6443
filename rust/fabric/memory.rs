// SPDX-License-Identifier: GPL-2.0

//! The bytes of a fabric segment, local or mapped from a peer.
//!
//! A thin wrapper: the only raw memory access of the data path. Words go through
//! [`Segment`] (Acquire loads, Release stores, the protocol core's contract); payload
//! bytes are copied between a caller's `iov_iter` and a [`Span`] of the segment, one copy
//! each way, straight into or out of the peer's ring.

use crate::bindings;
use crate::proto::ring::Span;
use crate::proto::segment::Segment;
use core::ptr::NonNull;
use core::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use kernel::prelude::*;

/// A segment's memory: `len` bytes at `ptr`, 8-byte aligned, valid while this lives.
pub(crate) struct SegMem {
    ptr: NonNull<u8>,
    len: usize,
    /// Backing store of a segment this kernel allocated (the loopback fabric); `None`
    /// for memory owned by a device mapping.
    _owned: Option<KVVec<u64>>,
}

// SAFETY: the memory is plain shared memory, accessed with atomics or copies that the
// protocol orders; it is valid from any thread while the `SegMem` lives.
unsafe impl Send for SegMem {}
// SAFETY: as above.
unsafe impl Sync for SegMem {}

impl SegMem {
    /// Allocates `len` zeroed bytes (rounded up to whole words) in kernel memory.
    pub(crate) fn alloc(len: usize) -> Result<Self> {
        let words = len.div_ceil(8);
        let mut buf = KVVec::<u64>::from_elem(0, words, GFP_KERNEL)?;
        let ptr = NonNull::new(buf.as_mut_ptr().cast::<u8>()).ok_or(ENOMEM)?;
        Ok(Self {
            ptr,
            len: words * 8,
            _owned: Some(buf),
        })
    }

    fn word_ptr(&self, off: usize, width: usize) -> Option<*mut u8> {
        let end = off.checked_add(width)?;
        if end > self.len || off % width != 0 {
            return None;
        }
        // SAFETY: `off + width <= len`, inside the allocation.
        Some(unsafe { self.ptr.as_ptr().add(off) })
    }

    fn span_ptr(&self, span: Span) -> Option<*mut u8> {
        let end = span.off.checked_add(span.len)?;
        if end > self.len {
            return None;
        }
        // SAFETY: `off + len <= len`, inside the allocation.
        Some(unsafe { self.ptr.as_ptr().add(span.off) })
    }

    /// Copies up to `span.len` bytes from `iter` into the segment; returns the count
    /// copied (short on a fault in user memory). An out-of-segment span copies nothing.
    pub(crate) fn copy_from_iter(&self, span: Span, iter: *mut bindings::iov_iter) -> usize {
        match self.span_ptr(span) {
            // SAFETY: the span lies inside the segment; `iter` is the caller's live
            // iterator; a peer may write the same bytes concurrently, which only
            // garbles data it owns.
            Some(p) => unsafe { bindings::_copy_from_iter(p.cast(), span.len, iter) },
            None => 0,
        }
    }

    /// Copies up to `span.len` bytes of the segment into `iter`; returns the count.
    pub(crate) fn copy_to_iter(&self, span: Span, iter: *mut bindings::iov_iter) -> usize {
        match self.span_ptr(span) {
            // SAFETY: as in `copy_from_iter`.
            Some(p) => unsafe { bindings::_copy_to_iter(p.cast_const().cast(), span.len, iter) },
            None => 0,
        }
    }
}

/// Runs `f` with an `iov_iter` over the kernel buffer `buf` (`dest`: data is copied into
/// `buf`), as a kernel user of a socket builds one.
pub(crate) fn with_kvec_iter<R>(
    buf: &mut [u8],
    dest: bool,
    f: impl FnOnce(*mut bindings::iov_iter) -> R,
) -> R {
    let kvec = bindings::kvec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut iter = core::mem::MaybeUninit::<bindings::iov_iter>::zeroed();
    let direction = if dest {
        bindings::ITER_DEST
    } else {
        bindings::ITER_SOURCE
    };
    // SAFETY: `iov_iter_kvec` initialises `iter` over `kvec`, which points at `buf`; both
    // outlive every use of the iterator inside `f`.
    unsafe { bindings::iov_iter_kvec(iter.as_mut_ptr(), direction, &kvec, 1, buf.len()) };
    f(iter.as_mut_ptr())
}

/// The data iterator of a message handed to `sendmsg`/`recvmsg`.
pub(crate) fn msg_iter(msg: *mut bindings::msghdr) -> *mut bindings::iov_iter {
    // SAFETY: the socket layer passes a live message; this only takes a field's address.
    unsafe { core::ptr::addr_of_mut!((*msg).msg_iter) }
}

/// The flags of a message handed to `sendmsg` (`MSG_DONTWAIT`, `MSG_NOSIGNAL`, ...).
pub(crate) fn msg_flags(msg: *mut bindings::msghdr) -> core::ffi::c_uint {
    // SAFETY: the socket layer passes a live message.
    unsafe { (*msg).msg_flags }
}

impl Segment for SegMem {
    fn len(&self) -> usize {
        self.len
    }

    fn load_u64(&self, off: usize) -> u64 {
        match self.word_ptr(off, 8) {
            // SAFETY: in bounds and 8-aligned (the base is word-aligned); the word is
            // only ever accessed atomically.
            Some(p) => unsafe { AtomicU64::from_ptr(p.cast()) }.load(Ordering::Acquire),
            None => 0,
        }
    }

    fn store_u64(&self, off: usize, v: u64) {
        if let Some(p) = self.word_ptr(off, 8) {
            // SAFETY: as in `load_u64`.
            unsafe { AtomicU64::from_ptr(p.cast()) }.store(v, Ordering::Release);
        }
    }

    fn load_u32(&self, off: usize) -> u32 {
        match self.word_ptr(off, 4) {
            // SAFETY: in bounds and 4-aligned; accessed atomically only.
            Some(p) => unsafe { AtomicU32::from_ptr(p.cast()) }.load(Ordering::Acquire),
            None => 0,
        }
    }

    fn store_u32(&self, off: usize, v: u32) {
        if let Some(p) = self.word_ptr(off, 4) {
            // SAFETY: as in `load_u32`.
            unsafe { AtomicU32::from_ptr(p.cast()) }.store(v, Ordering::Release);
        }
    }

    fn fence(&self) {
        fence(Ordering::SeqCst);
    }
}
