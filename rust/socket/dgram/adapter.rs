// SPDX-License-Identifier: GPL-2.0

//! The `proto_ops` of `AF_SCI` datagram sockets, adapted to [`SciDgram`].
//!
//! The calls a stream socket has too come from `socket/proto_ops.rs`; this file has a datagram
//! socket's own: `create` (which the family's `create` hands `SOCK_DGRAM` sockets to),
//! `release` and `connect`. A datagram socket's `struct sock` comes from a `struct proto`
//! of its own (`AF_SCI-DGRAM` in `/proc/slabinfo`).

use super::SciDgram;
use crate::socket::native::SockAddr;
use crate::socket::proto_ops::{self, destruct, parts, state_of, state_slot, SockObj};
use crate::socket::registry::Registry;
use crate::socket::sk::OwnSk;
use crate::socket::stack::Stack;
use crate::sys::bindings;
use crate::sys::errno::errno_of;
use core::ffi::{c_int, c_uint};
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicI32, AtomicPtr, Ordering};
use kernel::error::{to_result, Result};
use kernel::prelude::*;
use kernel::sync::Arc;

/// The family number, for `sk_alloc`.
static FAMILY: AtomicI32 = AtomicI32::new(0);
/// Our datagram `proto_ops`, installed on every `AF_SCI` datagram socket.
static OPS: AtomicPtr<bindings::proto_ops> = AtomicPtr::new(ptr::null_mut());

/// Creates the sk and native UDP socket of a new `AF_SCI` datagram socket; the family's
/// `create` checked the type and protocol.
///
/// # Safety
///
/// Called only from the family's `create`, with its arguments: `sock` is a new socket
/// without an sk.
pub(crate) unsafe fn create(
    net: *mut bindings::net,
    sock: *mut bindings::socket,
    kern: bool,
    stack: Arc<Stack>,
) -> c_int {
    let slot = match Registry::reserve() {
        Ok(slot) => slot,
        Err(e) => return e.to_errno(),
    };
    // SAFETY: `sk_alloc` gives a zeroed object of `obj_size` = size of `SockObj<SciDgram>`;
    // `sock_init_data` attaches it to `sock`; the state is initialised in place before any
    // op can run, and dropped only in `destruct`.
    unsafe {
        let sk = bindings::sci_dgram_sk_alloc(net, FAMILY.load(Ordering::Relaxed), kern as c_int);
        let Some(sk) = NonNull::new(sk) else {
            return ENOMEM.to_errno();
        };
        bindings::sock_init_data(sock, sk.as_ptr());
        bindings::sci_sk_set_default_callbacks(sk.as_ptr());
        (*sk.as_ptr()).sk_protocol = bindings::IPPROTO_UDP as u16;
        (*sk.as_ptr()).sk_destruct = Some(destruct::<SciDgram>);
        (*sock).ops = OPS.load(Ordering::Relaxed);
        bindings::sci_set_custom_sockopt(sock);
        match SciDgram::new(kern, stack).__pinned_init(state_slot::<SciDgram>(sk.as_ptr())) {
            Ok(()) => {}
            Err(never) => match never {},
        }
        let own = OwnSk::from_raw(sk);
        let state = state_of::<SciDgram>(sk.as_ptr());
        match state.init_native(&own) {
            Ok(()) => {
                state.register(&own, slot);
                0
            }
            Err(e) => {
                // Nothing else knows the new sk yet; the put frees it through `destruct`.
                (*sock).sk = ptr::null_mut();
                bindings::sci_sock_put(sk.as_ptr());
                e.to_errno()
            }
        }
    }
}

/// `release`.
///
/// # Safety
///
/// Called only by the socket layer, with the arguments it documents for this op on an
/// `AF_SCI` datagram socket.
unsafe extern "C" fn release(sock: *mut bindings::socket) -> c_int {
    // SAFETY: release runs once, with no other op in flight on this socket.
    unsafe {
        let sk = (*sock).sk;
        if sk.is_null() {
            return 0;
        }
        let own = OwnSk::from_raw(NonNull::new_unchecked(sk));
        state_of::<SciDgram>(sk).release(&own);
        bindings::sci_lock_sock(sk);
        bindings::sci_sock_orphan(sk);
        (*sk).sk_shutdown = bindings::SHUTDOWN_MASK as u8;
        bindings::release_sock(sk);
        (*sock).sk = ptr::null_mut();
        bindings::sci_sock_put(sk);
    }
    0
}

/// `connect`.
///
/// # Safety
///
/// Called only by the socket layer, with the arguments it documents for this op on an
/// `AF_SCI` datagram socket.
unsafe extern "C" fn connect(
    sock: *mut bindings::socket,
    addr: *mut bindings::sockaddr,
    len: c_int,
    flags: c_int,
) -> c_int {
    // SAFETY: an op on an attached socket.
    let (own, state) = unsafe { parts::<SciDgram>(sock) };
    errno_of(state.connect(&own, SockAddr::new(addr, len), flags))
}

/// The `proto_ops` of `AF_SCI` datagram sockets of family `number`, owned by `owner`.
/// `listen` and `accept` are UDP's: `EOPNOTSUPP`. No `splice_read`: `sock_splice_read`
/// then reads through the file (our recvmsg).
pub(crate) fn ops(number: c_int, owner: *mut bindings::module) -> bindings::proto_ops {
    bindings::proto_ops {
        release: Some(release),
        connect: Some(connect),
        accept: Some(bindings::sock_no_accept),
        listen: Some(bindings::sock_no_listen),
        ..proto_ops::shared::<SciDgram>(number, owner)
    }
}

/// The registered datagram `struct proto` and `proto_ops` (registered by the family:
/// `socket/adapter.rs`); unregistered on drop.
pub(crate) struct DgramProto(());

impl DgramProto {
    /// Registers the datagram `struct proto` and publishes `ops` (pinned by the family,
    /// which outlives this) and the family number for `create`.
    pub(crate) fn register(number: c_int, ops: &bindings::proto_ops) -> Result<Self> {
        FAMILY.store(number, Ordering::Relaxed);
        OPS.store(ptr::from_ref(ops).cast_mut(), Ordering::Relaxed);
        // SAFETY: registers our static datagram proto (obj_size = our sk object).
        to_result(unsafe {
            bindings::sci_dgram_proto_register(core::mem::size_of::<SockObj<SciDgram>>() as c_uint)
        })?;
        Ok(Self(()))
    }
}

impl Drop for DgramProto {
    fn drop(&mut self) {
        // SAFETY: registered in `register`; no datagram socket is left (each holds a
        // module reference), and the family is unregistered first.
        unsafe { bindings::sci_dgram_proto_unregister() };
    }
}
