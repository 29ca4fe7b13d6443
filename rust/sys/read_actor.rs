// SPDX-License-Identifier: GPL-2.0

//! `proto_ops.read_sock`'s reader: a kernel user's actor (`iscsi_tcp`'s receive, a
//! strparser, ...) fed socket buffers, as `tcp_read_sock` feeds it.
//!
//! An actor takes `struct sk_buff`s and may keep a reference to one, so every chunk is a
//! socket buffer of its own, allocated without sleeping (an actor may hold an atomic
//! mapping between calls) and put after the actor ran. Where the bytes are in kernel
//! pages the buffer's frags are those pages ([`ReadActor::lend`]: no copy), and a
//! [`Lent`] says when the actor let go of them; otherwise they are copied into fresh
//! pages ([`ReadActor::feed`]). Bytes the actor did not use stay where they were: the
//! caller consumes only what it used.

use crate::sys::bindings;
use core::ffi::{c_int, c_void};
use core::mem::MaybeUninit;
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicBool, Ordering};
use kernel::error::to_result;
use kernel::prelude::*;
use kernel::sync::Arc;

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

    /// Hands the actor the `len` bytes at `addr` in place: its socket buffer's frags are
    /// the pages they are in (`vmalloc`'d kernel memory, or device memory mapped with
    /// `struct page`s; at most `MAX_SKB_FRAGS` pages), which hold a reference each, so
    /// that they outlive the memory's owner.
    /// `None` when they cannot be lent (other memory, too many pages, no memory for the
    /// buffer): copy them instead ([`feed`](Self::feed)). Otherwise how many the actor
    /// used (or its own error, as it gave it), and, if it kept the buffer after it
    /// returned, the [`Lent`] that says when it lets go: the bytes must not change until
    /// then, whatever the actor returned.
    pub(crate) fn lend(
        &mut self,
        addr: NonNull<u8>,
        len: usize,
    ) -> Option<(Result<usize>, Option<Arc<Lent>>)> {
        let lent = Arc::new(
            Lent {
                released: AtomicBool::new(false),
            },
            GFP_ATOMIC,
        )
        .ok()?;
        let ctx = lent.clone().into_raw();
        let mut fed = false;
        // `ctx` is a counted reference that `lent_released` takes back once, if the helper
        // fed the actor (`fed`).
        // SAFETY: `desc`, `actor` and `sk` are valid for the call (see `new`); `addr` is
        // valid for `len` bytes (the caller's) and the helper takes page references.
        let used = unsafe {
            bindings::sci_read_lend(
                self.desc,
                self.actor,
                self.sk,
                addr.as_ptr().cast_const().cast(),
                len,
                Some(lent_released),
                ctx.cast_mut().cast(),
                &mut fed,
            )
        };
        if !fed {
            // SAFETY: the helper did not keep `ctx` (it fed nothing): the reference is ours.
            drop(unsafe { Arc::from_raw(ctx) });
            return None;
        }
        let kept = (!lent.released()).then_some(lent);
        let used = if used < 0 {
            Err(Error::from_errno(used))
        } else {
            Ok((used as usize).min(len))
        };
        Some((used, kept))
    }

    /// Passes the actor on to another socket's `read_sock` (a native TCP socket's) without
    /// sleeping: under the socket's spinlock if no process owns it (`-EAGAIN` if one does),
    /// or, with `held`, as it is (the caller's context holds it locked). What it returned.
    pub(crate) fn read_sock_of_nowait(&mut self, sock: *mut bindings::socket, held: bool) -> c_int {
        // SAFETY: the caller's native socket is live while it reads; `desc` and `actor` are
        // valid for the call (see `new`); with `held` the caller's context holds the socket
        // locked (`NativeHooks::held_here`).
        unsafe {
            if held {
                bindings::sci_native_read_sock_held(sock, self.desc, self.actor)
            } else {
                bindings::sci_native_read_sock_try(sock, self.desc, self.actor)
            }
        }
    }
}

/// Bytes a kernel reader was handed in place ([`ReadActor::lend`]) and kept after its actor
/// returned (a reference to the socket buffer; a clone gets copies of the pages): whether
/// it let go of them since.
pub(crate) struct Lent {
    released: AtomicBool,
}

impl Lent {
    /// The last reference to the socket buffer's data went: the bytes may change now.
    pub(crate) fn released(&self) -> bool {
        self.released.load(Ordering::Acquire)
    }
}

/// The lent buffer's completion (`sci_lend_complete`, in any context): takes back the
/// reference [`ReadActor::lend`] gave away.
///
/// # Safety
///
/// `ctx` is a reference `lend` gave the helper, passed back once.
unsafe extern "C" fn lent_released(ctx: *mut c_void) {
    // SAFETY: `ctx` is the `Arc::into_raw` of a `Lent` that `lend` gave the helper, which
    // calls this once for it.
    let lent = unsafe { Arc::from_raw(ctx.cast_const().cast::<Lent>()) };
    lent.released.store(true, Ordering::Release);
}

/// Waits until every buffer lent to a kernel reader was let go and no completion runs any
/// more: the module's code, and the device memory's pages, must outlive them (module
/// unload, after the last socket; an ivshmem device's removal).
pub(crate) fn drain_lends() {
    // SAFETY: no lock is held; the helper sleeps until the count drops to 0.
    unsafe { bindings::sci_read_lends_drain() };
}
