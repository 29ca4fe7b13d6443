// SPDX-License-Identifier: GPL-2.0

//! The `proto_ops` of `AF_SCI` datagram sockets, adapted to [`SciDgram`].
//!
//! The calls a stream socket has too come from `socket/proto_ops.rs`; this file has a datagram
//! socket's own: `create` (which the family's `create` hands `SOCK_DGRAM` sockets to)
//! and `connect`. A datagram socket's `struct sock` comes from a `struct proto`
//! of its own (`AF_SCI-DGRAM` in `/proc/slabinfo`).

use super::SciDgram;
use crate::socket::proto_ops::{self, attach_new, drop_new, parts, state_of, SockObj};
use crate::socket::registry::Registry;
use crate::socket::sockaddr::SockAddr;
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
    // SAFETY: `sk_alloc` gives a zeroed `SockObj<SciDgram>` (`obj_size`), which nothing else
    // knows yet; `OPS` is the family's pinned table.
    unsafe {
        let sk = bindings::sci_dgram_sk_alloc(net, FAMILY.load(Ordering::Relaxed), kern as c_int);
        let Some(sk) = NonNull::new(sk) else {
            return ENOMEM.to_errno();
        };
        let init = SciDgram::new(kern, stack);
        let own = attach_new(
            sock,
            sk,
            bindings::IPPROTO_UDP,
            OPS.load(Ordering::Relaxed),
            init,
        );
        let state = state_of::<SciDgram>(own.as_ptr());
        match state.init_native(&own) {
            Ok(()) => {
                state.register(&own, slot);
                0
            }
            Err(e) => {
                drop_new(sock, own);
                e.to_errno()
            }
        }
    }
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
