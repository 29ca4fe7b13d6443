// SPDX-License-Identifier: GPL-2.0

//! `proto_ops.read_sock`'s reader: a kernel user's actor (`iscsi_tcp`'s receive, a
//! strparser, ...) fed socket buffers, as `tcp_read_sock` feeds it.
//!
//! An actor takes `struct sk_buff`s and may keep a reference to one, so every chunk is a
//! socket buffer of its own (page frags, allocated without sleeping: an actor may hold an
//! atomic mapping between calls), filled by the caller and put after the actor ran. Bytes the actor did not use stay where they were:
//! the caller consumes only what [`ReadActor::feed`] returns.

use crate::sys::bindings;
use core::ffi::c_int;
use core::mem::MaybeUninit;
use core::ptr;
use kernel::error::to_result;
use kernel::prelude::*;

/// The most bytes one socket buffer carries (16 pages: what one TCP skb of a large
/// receive holds).
pub(crate) const CHUNK: usize = 64 * 1024;

/// The descriptor and actor a kernel user passed to `read_sock`, and the sock whose
/// allocation flags its buffers follow.
pub(crate) struct ReadActor {
    desc: *mut bindings::read_descriptor_t,
    actor: bindings::sk_read_actor_t,
    sk: *mut bindings::sock,
}

impl ReadActor {
    /// Wraps `read_sock`'s arguments.
    ///
    /// # Safety
    ///
    /// `desc` and `actor` are what the socket layer passed to `read_sock` on `sk`, and the
    /// wrapper is used only during that call.
    pub(crate) unsafe fn new(
        sk: *mut bindings::sock,
        desc: *mut bindings::read_descriptor_t,
        actor: bindings::sk_read_actor_t,
    ) -> Self {
        Self { desc, actor, sk }
    }

    /// The caller still wants bytes (`desc->count`, as `tcp_read_sock` reads it).
    pub(crate) fn wants_more(&self) -> bool {
        // SAFETY: `desc` is valid for the call (see `new`); the actor may change `count`.
        unsafe { (*self.desc).count != 0 }
    }

    /// Hands the actor up to `len` bytes that `fill` copies into a fresh socket buffer
    /// (through the iterator it is given; it returns how many it copied). Returns how many
    /// the actor used, which may be fewer; `Ok(0)` when nothing was copied. `ENOMEM` when
    /// no buffer could be allocated; the actor's own error as it gave it.
    pub(crate) fn feed(
        &mut self,
        len: usize,
        fill: impl FnOnce(*mut bindings::iov_iter) -> usize,
    ) -> Result<usize> {
        let len = len.min(CHUNK);
        let mut buf = MaybeUninit::<bindings::sci_read_buf>::zeroed();
        // SAFETY: `sk` is live for the call; the helper allocates the skb and sets the
        // iterator over its pages, which live until the skb is fed below.
        to_result(unsafe { bindings::sci_read_buf_alloc(self.sk, len, buf.as_mut_ptr()) })?;
        // SAFETY: initialised by the helper; the iterator is used only while `buf` lives.
        let iter = unsafe { ptr::addr_of_mut!((*buf.as_mut_ptr()).iter) };
        let filled = fill(iter).min(len);
        // SAFETY: the skb in `buf` is ours (the helper puts it); `desc` and `actor` are
        // valid for the call (see `new`). A zero length only puts it.
        let used =
            unsafe { bindings::sci_read_buf_feed(self.desc, self.actor, buf.as_mut_ptr(), filled) };
        if used < 0 {
            return Err(Error::from_errno(used));
        }
        Ok((used as usize).min(filled))
    }

    /// Passes the actor on to another socket's `read_sock` (a native TCP socket's), under
    /// that socket's lock: what it returned.
    pub(crate) fn read_sock_of(&mut self, sock: *mut bindings::socket) -> c_int {
        // SAFETY: the caller's native socket is live while it reads; `desc` and `actor` are
        // valid for the call (see `new`).
        unsafe { bindings::sci_native_read_sock(sock, self.desc, self.actor) }
    }
}
