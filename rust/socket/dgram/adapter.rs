// SPDX-License-Identifier: GPL-2.0

//! The `proto_ops` of `AF_SCI` datagram sockets, adapted to [`SciDgram`].
//!
//! As the stream socket's adapter (`socket/adapter.rs`), this file turns the socket
//! layer's raw calls into calls on the safe [`SciDgram`] and owns the only raw accesses to
//! a datagram socket's own `struct sock`, which comes from a `struct proto` of its own
//! (`AF_SCI-DGRAM` in `/proc/slabinfo`). The family's `create` hands `SOCK_DGRAM` sockets
//! here ([`create`]).

use super::SciDgram;
use crate::socket::native::SockAddr;
use crate::socket::sk::OwnSk;
use crate::sys::bindings;
use crate::sys::errno::{count_of, errno_of};
use crate::sys::net::{File, Msg, OptVal, PollTable};
use core::ffi::{c_char, c_int, c_uint, c_ulong, c_void};
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicI32, AtomicPtr, Ordering};
use kernel::error::{to_result, Result};
use kernel::prelude::*;

/// Our datagram `struct sock`: the kernel's, followed by the Rust state.
#[repr(C)]
struct SciDgramObj {
    sk: bindings::sock,
    state: SciDgram,
}

/// The family number, for `sk_alloc`.
static FAMILY: AtomicI32 = AtomicI32::new(0);
/// Our datagram `proto_ops`, installed on every `AF_SCI` datagram socket.
static OPS: AtomicPtr<bindings::proto_ops> = AtomicPtr::new(ptr::null_mut());

/// # Safety
///
/// `sk` is a live `AF_SCI` datagram sk (allocated by [`create`]).
unsafe fn state_of<'a>(sk: *mut bindings::sock) -> &'a SciDgram {
    // SAFETY: every AF_SCI datagram sk is a `SciDgramObj` whose state was initialised in
    // `create`.
    unsafe { &(*sk.cast::<SciDgramObj>()).state }
}

/// # Safety
///
/// `sock` is an `AF_SCI` datagram socket whose `sk` is attached (every op but a late
/// release).
unsafe fn parts<'a>(sock: *mut bindings::socket) -> (OwnSk, &'a SciDgram) {
    // SAFETY: see the function's contract.
    unsafe {
        let sk = (*sock).sk;
        (OwnSk::from_raw(NonNull::new_unchecked(sk)), state_of(sk))
    }
}

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
) -> c_int {
    // SAFETY: `sk_alloc` gives a zeroed object of `obj_size` = size of `SciDgramObj`;
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
        (*sk.as_ptr()).sk_destruct = Some(destruct);
        (*sock).ops = OPS.load(Ordering::Relaxed);
        bindings::sci_set_custom_sockopt(sock);
        let slot = ptr::addr_of_mut!((*sk.as_ptr().cast::<SciDgramObj>()).state);
        match SciDgram::new(kern).__pinned_init(slot) {
            Ok(()) => {}
            Err(never) => match never {},
        }
        let own = OwnSk::from_raw(sk);
        match state_of(sk.as_ptr()).init_native(&own) {
            Ok(()) => 0,
            Err(e) => {
                // Nothing else knows the new sk yet; the put frees it through `destruct`.
                (*sock).sk = ptr::null_mut();
                bindings::sci_sock_put(sk.as_ptr());
                e.to_errno()
            }
        }
    }
}

/// `sk_destruct` of our datagram sk: drops the Rust state.
///
/// # Safety
///
/// Called only by the socket layer, when the last reference to an `AF_SCI` datagram sk
/// is gone.
unsafe extern "C" fn destruct(sk: *mut bindings::sock) {
    // SAFETY: the last reference to our sk is gone; its state was initialised in `create`.
    unsafe { ptr::drop_in_place(ptr::addr_of_mut!((*sk.cast::<SciDgramObj>()).state)) }
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
        state_of(sk).release(&own);
        bindings::sci_lock_sock(sk);
        bindings::sci_sock_orphan(sk);
        (*sk).sk_shutdown = bindings::SHUTDOWN_MASK as u8;
        bindings::release_sock(sk);
        (*sock).sk = ptr::null_mut();
        bindings::sci_sock_put(sk);
    }
    0
}

/// `bind`.
///
/// # Safety
///
/// Called only by the socket layer, with the arguments it documents for this op on an
/// `AF_SCI` datagram socket.
unsafe extern "C" fn bind(
    sock: *mut bindings::socket,
    addr: *mut bindings::sockaddr,
    len: c_int,
) -> c_int {
    // SAFETY: an op on an attached socket.
    let (own, state) = unsafe { parts(sock) };
    errno_of(state.bind(&own, SockAddr::new(addr, len)))
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
    let (own, state) = unsafe { parts(sock) };
    errno_of(state.connect(&own, SockAddr::new(addr, len), flags))
}

/// `getname`.
///
/// # Safety
///
/// Called only by the socket layer, with the arguments it documents for this op on an
/// `AF_SCI` datagram socket.
unsafe extern "C" fn getname(
    sock: *mut bindings::socket,
    addr: *mut bindings::sockaddr,
    peer: c_int,
) -> c_int {
    // SAFETY: an op on an attached socket; `addr` is the socket layer's buffer.
    let (_, state) = unsafe { parts(sock) };
    count_of(state.getname(addr, peer))
}

/// `poll`.
///
/// # Safety
///
/// Called only by the socket layer, with the arguments it documents for this op on an
/// `AF_SCI` datagram socket.
unsafe extern "C" fn poll(file: File, sock: *mut bindings::socket, wait: PollTable) -> c_uint {
    // SAFETY: an op on an attached socket; waiters wait on our own socket's queue, which
    // the native socket's forwarded callbacks wake.
    unsafe {
        bindings::sci_sock_poll_wait(file, sock, wait);
        let (own, state) = parts(sock);
        state.poll(&own, file)
    }
}

/// `ioctl`.
///
/// # Safety
///
/// Called only by the socket layer, with the arguments it documents for this op on an
/// `AF_SCI` datagram socket.
unsafe extern "C" fn ioctl(sock: *mut bindings::socket, cmd: c_uint, arg: c_ulong) -> c_int {
    // SAFETY: an op on an attached socket.
    let (_, state) = unsafe { parts(sock) };
    count_of(state.ioctl(cmd, arg))
}

/// `gettstamp`.
///
/// # Safety
///
/// Called only by the socket layer, with the arguments it documents for this op on an
/// `AF_SCI` datagram socket.
unsafe extern "C" fn gettstamp(
    sock: *mut bindings::socket,
    stamp: *mut c_void,
    timeval: bool,
    time32: bool,
) -> c_int {
    // SAFETY: an op on an attached socket; `stamp` is the caller's user pointer.
    let (_, state) = unsafe { parts(sock) };
    count_of(state.gettstamp(stamp, timeval, time32))
}

/// `shutdown`.
///
/// # Safety
///
/// Called only by the socket layer, with the arguments it documents for this op on an
/// `AF_SCI` datagram socket.
unsafe extern "C" fn shutdown(sock: *mut bindings::socket, how: c_int) -> c_int {
    // SAFETY: an op on an attached socket.
    let (own, state) = unsafe { parts(sock) };
    errno_of(state.shutdown(&own, how))
}

/// `setsockopt`.
///
/// # Safety
///
/// Called only by the socket layer, with the arguments it documents for this op on an
/// `AF_SCI` datagram socket.
unsafe extern "C" fn setsockopt(
    sock: *mut bindings::socket,
    level: c_int,
    optname: c_int,
    val: OptVal,
    len: c_uint,
) -> c_int {
    // SAFETY: an op on an attached socket.
    let (own, state) = unsafe { parts(sock) };
    errno_of(state.setsockopt(&own, level, optname, val, len))
}

/// `getsockopt`.
///
/// # Safety
///
/// Called only by the socket layer, with the arguments it documents for this op on an
/// `AF_SCI` datagram socket.
unsafe extern "C" fn getsockopt(
    sock: *mut bindings::socket,
    level: c_int,
    optname: c_int,
    val: *mut c_char,
    len: *mut c_int,
) -> c_int {
    // SAFETY: an op on an attached socket; `val`/`len` are user pointers.
    let (_, state) = unsafe { parts(sock) };
    errno_of(state.getsockopt(level, optname, val, len))
}

/// `sendmsg`.
///
/// # Safety
///
/// Called only by the socket layer, with the arguments it documents for this op on an
/// `AF_SCI` datagram socket.
unsafe extern "C" fn sendmsg(sock: *mut bindings::socket, msg: Msg, len: usize) -> c_int {
    // SAFETY: an op on an attached socket.
    let (own, state) = unsafe { parts(sock) };
    count_of(state.sendmsg(&own, msg, len))
}

/// `recvmsg`.
///
/// # Safety
///
/// Called only by the socket layer, with the arguments it documents for this op on an
/// `AF_SCI` datagram socket.
unsafe extern "C" fn recvmsg(
    sock: *mut bindings::socket,
    msg: Msg,
    len: usize,
    flags: c_int,
) -> c_int {
    // SAFETY: an op on an attached socket.
    let (own, state) = unsafe { parts(sock) };
    count_of(state.recvmsg(&own, msg, len, flags))
}

/// `show_fdinfo`.
///
/// # Safety
///
/// Called only by the socket layer, with the arguments it documents for this op on an
/// `AF_SCI` datagram socket.
unsafe extern "C" fn show_fdinfo(m: *mut bindings::seq_file, sock: *mut bindings::socket) {
    // SAFETY: an op on an attached socket; `m` is the fdinfo seq_file being written.
    unsafe {
        let (_, state) = parts(sock);
        if let Ok(text) = state.fdinfo() {
            bindings::__seq_puts(m, text.as_char_ptr().cast());
        }
    }
}

/// The `proto_ops` of `AF_SCI` datagram sockets of family `number`, owned by `owner`.
/// `listen` and `accept` are UDP's: `EOPNOTSUPP`. No `splice_read`: `sock_splice_read`
/// then reads through the file (our recvmsg), as UDP's own table does.
pub(crate) fn ops(number: c_int, owner: *mut bindings::module) -> bindings::proto_ops {
    bindings::proto_ops {
        family: number,
        owner,
        release: Some(release),
        bind: Some(bind),
        connect: Some(connect),
        socketpair: Some(bindings::sock_no_socketpair),
        accept: Some(bindings::sock_no_accept),
        getname: Some(getname),
        poll: Some(poll),
        ioctl: Some(ioctl),
        gettstamp: Some(gettstamp),
        listen: Some(bindings::sock_no_listen),
        shutdown: Some(shutdown),
        setsockopt: Some(setsockopt),
        getsockopt: Some(getsockopt),
        sendmsg: Some(sendmsg),
        recvmsg: Some(recvmsg),
        mmap: Some(bindings::sock_no_mmap),
        // `setsockopt(SO_PEEK_OFF)` reached the native socket first (`SciDgram::setsockopt`);
        // this keeps our copy, which `getsockopt` reads.
        set_peek_off: Some(bindings::sk_set_peek_off),
        show_fdinfo: Some(show_fdinfo),
        ..Default::default()
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
            bindings::sci_dgram_proto_register(core::mem::size_of::<SciDgramObj>() as c_uint)
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
