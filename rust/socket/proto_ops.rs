// SPDX-License-Identifier: GPL-2.0

//! The `proto_ops` that stream and datagram `AF_SCI` sockets share, adapted to the
//! [`SocketOps`] trait their states implement.
//!
//! As `rust/kernel/net/phy.rs` adapts `struct phy_driver` to a trait, each function here is
//! generic over the state behind the socket's `struct sock` ([`SockObj`]): the stream
//! socket's [`SciSock`](super::sock::SciSock) and the datagram socket's
//! [`SciDgram`](super::dgram::SciDgram). What only one kind has (create, connect,
//! accept, listen, `read_sock`) stays in its own adapter, which fills the rest of its
//! table from [`shared`].

use crate::socket::registry::{Registry, Slot, SockInfo};
use crate::socket::sk::{OwnSk, SkRef};
use crate::socket::sockaddr::SockAddr;
use crate::sys::bindings;
use crate::sys::errno::{count_of, errno_of};
use crate::sys::net::{File, Msg, OptVal, PollTable};
use core::ffi::{c_char, c_int, c_uint, c_ulong, c_void};
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::prelude::*;
use kernel::str::CString;

/// What the socket layer's shared calls do on an `AF_SCI` socket's state.
pub(crate) trait SocketOps {
    /// `bind(2)`.
    fn bind(&self, own: &OwnSk, addr: SockAddr) -> Result;
    /// `getsockname(2)` / `getpeername(2)` into the socket layer's `sockaddr_storage`:
    /// the address length.
    fn getname(&self, addr: *mut bindings::sockaddr, peer: c_int) -> Result<c_int>;
    /// `poll(2)`, `select(2)`, `epoll(7)` (the wait is registered by the adapter).
    fn poll(&self, own: &OwnSk, file: File) -> c_uint;
    /// `ioctl(2)`.
    fn ioctl(&self, cmd: c_uint, arg: c_ulong) -> Result<c_int>;
    /// `SIOCGSTAMP` and friends.
    fn gettstamp(&self, stamp: *mut c_void, timeval: bool, time32: bool) -> Result<c_int>;
    /// `shutdown(2)`.
    fn shutdown(&self, own: &OwnSk, how: c_int) -> Result;
    /// `setsockopt(2)` at every level (`SOCK_CUSTOM_SOCKOPT`: `SOL_SOCKET` too).
    fn setsockopt(
        &self,
        own: &OwnSk,
        level: c_int,
        name: c_int,
        val: OptVal,
        len: c_uint,
    ) -> Result;
    /// `getsockopt(2)` at every level but `SOL_SOCKET`, with the caller's user pointers.
    fn getsockopt(&self, level: c_int, name: c_int, val: *mut c_char, len: *mut c_int) -> Result;
    /// `sendmsg(2)` and every kernel sender: bytes sent.
    fn sendmsg(&self, own: &OwnSk, msg: Msg, len: usize) -> Result<c_int>;
    /// `recvmsg(2)` and every kernel receiver: bytes received.
    fn recvmsg(&self, own: &OwnSk, msg: Msg, len: usize, flags: c_int) -> Result<c_int>;
    /// The lines the socket adds to `/proc/PID/fdinfo/FD`.
    fn fdinfo(&self) -> Result<CString>;
    /// What the netlink socket dump (`scictl sockets`) reports of the socket.
    fn diag(&self, own: &OwnSk) -> SockInfo;
    /// `close(2)`: out of the registry first, then its connections and native socket.
    fn release(&self, own: &OwnSk);
}

/// An entry of the socket registry: a socket, and how the dump reads its state.
pub(crate) struct Registered {
    sk: SkRef,
    /// [`info_of`] for the socket's kind of state.
    info: fn(&OwnSk) -> SockInfo,
}

impl Registered {
    /// The entry of `own`, whose state is a `T`.
    pub(crate) fn new<T: SocketOps>(own: &OwnSk) -> Self {
        Self {
            sk: SkRef::new(own),
            info: info_of::<T>,
        }
    }
}

/// A socket's place in its stack's registry: the id its entry got (0 until it joined).
pub(crate) struct Membership(AtomicU64);

impl Membership {
    /// Not in the registry yet.
    pub(crate) const fn new() -> Self {
        Self(AtomicU64::new(0))
    }

    /// Enters `own`, whose state is a `T`, in `sockets` (its stack's registry), in `slot`
    /// (reserved where failing was still possible).
    pub(crate) fn join<T: SocketOps>(
        &self,
        sockets: &Registry<Registered>,
        own: &OwnSk,
        slot: Slot<Registered>,
    ) {
        let id = sockets.insert(slot, Registered::new::<T>(own));
        self.0.store(id, Ordering::Relaxed);
    }

    /// Leaves `sockets`: once this returns, no dump looks at the socket.
    pub(crate) fn leave(&self, sockets: &Registry<Registered>) {
        sockets.remove(self.0.load(Ordering::Relaxed));
    }
}

/// What the dump reports of a registered sk whose state is a `T`: only ever called
/// through the [`Registered`] entry that [`Registered::new`] paired with that sk.
fn info_of<T: SocketOps>(own: &OwnSk) -> SockInfo {
    // SAFETY: `Registered::new::<T>` stored this function with an sk whose state is a `T`;
    // a registered sk is live and its state initialised: `release` removes it from the
    // registry, under the lock the visit holds, before the sk can be freed.
    unsafe { state_of::<T>(own.as_ptr()) }.diag(own)
}

/// Calls `f` on every `AF_SCI` socket in `sockets` (a stack's registry) of namespace `net`
/// whose registry id is above `after`, in id order, until it returns false (the socket
/// dump).
pub(crate) fn for_each_socket(
    sockets: &Registry<Registered>,
    net: *mut bindings::net,
    after: u64,
    mut f: impl FnMut(u64, &SockInfo) -> bool,
) {
    sockets.visit_after(after, |id, entry| {
        let own = entry.sk.own();
        if own.net() != net {
            return true;
        }
        f(id, &(entry.info)(&own))
    });
}

/// An `AF_SCI` `struct sock`: the kernel's, followed by the Rust state (`proto.obj_size`
/// is the size of this).
#[repr(C)]
pub(crate) struct SockObj<T> {
    sk: bindings::sock,
    state: T,
}

/// Where the state of a just-allocated sk goes, to be initialised in place.
///
/// # Safety
///
/// `sk` was allocated with the `obj_size` of `SockObj<T>`.
pub(crate) unsafe fn state_slot<T>(sk: *mut bindings::sock) -> *mut T {
    // SAFETY: see the function's contract; only an address is computed.
    unsafe { ptr::addr_of_mut!((*sk.cast::<SockObj<T>>()).state) }
}

/// The state of a live sk.
///
/// # Safety
///
/// `sk` is a live `SockObj<T>` whose state was initialised (and is dropped only in
/// [`destruct`]).
pub(crate) unsafe fn state_of<'a, T>(sk: *mut bindings::sock) -> &'a T {
    // SAFETY: see the function's contract.
    unsafe { &(*sk.cast::<SockObj<T>>()).state }
}

/// The sk and state of a socket.
///
/// # Safety
///
/// `sock` is an `AF_SCI` socket of state `T` whose `sk` is attached (every op but a late
/// release).
pub(crate) unsafe fn parts<'a, T>(sock: *mut bindings::socket) -> (OwnSk, &'a T) {
    // SAFETY: see the function's contract.
    unsafe {
        let sk = (*sock).sk;
        (OwnSk::from_raw(NonNull::new_unchecked(sk)), state_of(sk))
    }
}

/// Attaches the fresh `sk` (a zeroed `SockObj<T>`, just allocated) to `sock` with `ops`
/// and `protocol`, and initialises its state in place with `init`.
///
/// # Safety
///
/// `sock` is a socket being created or accepted, without an sk yet; `sk` was allocated
/// with the `obj_size` of `SockObj<T>` and nothing else references it; `ops` outlives every
/// socket that uses it.
pub(crate) unsafe fn attach_new<T>(
    sock: *mut bindings::socket,
    sk: NonNull<bindings::sock>,
    protocol: u32,
    ops: *mut bindings::proto_ops,
    init: impl PinInit<T>,
) -> OwnSk {
    // SAFETY: `sock_init_data` attaches `sk` to `sock`; the state is initialised in place
    // before any op can run, and dropped only in `destruct`.
    unsafe {
        bindings::sock_init_data(sock, sk.as_ptr());
        bindings::sci_sk_set_default_callbacks(sk.as_ptr());
        (*sk.as_ptr()).sk_protocol = protocol as u16;
        (*sk.as_ptr()).sk_destruct = Some(destruct::<T>);
        (*sock).ops = ops;
        bindings::sci_sock_set_flags(sock);
        match init.__pinned_init(state_slot::<T>(sk.as_ptr())) {
            Ok(()) => OwnSk::from_raw(sk),
            Err(never) => match never {},
        }
    }
}

/// Frees a socket's sk after a failed create or accept (the put frees it through
/// [`destruct`]).
///
/// # Safety
///
/// `sock` holds a fresh sk from [`attach_new`] that nothing else references.
pub(crate) unsafe fn drop_new(sock: *mut bindings::socket, own: OwnSk) {
    // SAFETY: see the function's contract.
    unsafe {
        (*sock).sk = ptr::null_mut();
        bindings::sci_sock_put(own.as_ptr());
    }
}

/// `sk_destruct` of our sks: drops the Rust state.
///
/// # Safety
///
/// Called only by the socket layer, when the last reference to a `SockObj<T>` whose state
/// was initialised is gone.
pub(crate) unsafe extern "C" fn destruct<T>(sk: *mut bindings::sock) {
    // SAFETY: the last reference to our sk is gone; its state was initialised.
    unsafe { ptr::drop_in_place(state_slot::<T>(sk)) }
}

/// `release`: the state lets go of what it holds, then the sk is orphaned and our
/// reference put (the last put frees it through [`destruct`]).
///
/// # Safety
///
/// Called only by the socket layer, once, with no other op in flight on this socket of
/// state `T`.
unsafe extern "C" fn release<T: SocketOps>(sock: *mut bindings::socket) -> c_int {
    // SAFETY: see the function's contract; `sk` is live until the put below.
    unsafe {
        let sk = (*sock).sk;
        if sk.is_null() {
            return 0;
        }
        let own = OwnSk::from_raw(NonNull::new_unchecked(sk));
        state_of::<T>(sk).release(&own);
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
/// `AF_SCI` socket of state `T`.
unsafe extern "C" fn bind<T: SocketOps>(
    sock: *mut bindings::socket,
    addr: *mut bindings::sockaddr,
    len: c_int,
) -> c_int {
    // SAFETY: an op on an attached socket.
    let (own, state) = unsafe { parts::<T>(sock) };
    errno_of(state.bind(&own, SockAddr::new(addr, len)))
}

/// `getname`.
///
/// # Safety
///
/// As [`bind`]'s.
unsafe extern "C" fn getname<T: SocketOps>(
    sock: *mut bindings::socket,
    addr: *mut bindings::sockaddr,
    peer: c_int,
) -> c_int {
    // SAFETY: an op on an attached socket; `addr` is the socket layer's buffer.
    let (_, state) = unsafe { parts::<T>(sock) };
    count_of(state.getname(addr, peer))
}

/// `poll`.
///
/// # Safety
///
/// As [`bind`]'s.
unsafe extern "C" fn poll<T: SocketOps>(
    file: File,
    sock: *mut bindings::socket,
    wait: PollTable,
) -> c_uint {
    // SAFETY: an op on an attached socket; waiters wait on our own socket's queue, which
    // the native socket's forwarded callbacks (and the SCI path) wake.
    unsafe {
        bindings::sci_sock_poll_wait(file, sock, wait);
        let (own, state) = parts::<T>(sock);
        state.poll(&own, file)
    }
}

/// `ioctl`.
///
/// # Safety
///
/// As [`bind`]'s.
unsafe extern "C" fn ioctl<T: SocketOps>(
    sock: *mut bindings::socket,
    cmd: c_uint,
    arg: c_ulong,
) -> c_int {
    // SAFETY: an op on an attached socket.
    let (_, state) = unsafe { parts::<T>(sock) };
    count_of(state.ioctl(cmd, arg))
}

/// `gettstamp`.
///
/// # Safety
///
/// As [`bind`]'s.
unsafe extern "C" fn gettstamp<T: SocketOps>(
    sock: *mut bindings::socket,
    stamp: *mut c_void,
    timeval: bool,
    time32: bool,
) -> c_int {
    // SAFETY: an op on an attached socket; `stamp` is the caller's user pointer.
    let (_, state) = unsafe { parts::<T>(sock) };
    count_of(state.gettstamp(stamp, timeval, time32))
}

/// `shutdown`.
///
/// # Safety
///
/// As [`bind`]'s.
unsafe extern "C" fn shutdown<T: SocketOps>(sock: *mut bindings::socket, how: c_int) -> c_int {
    // SAFETY: an op on an attached socket.
    let (own, state) = unsafe { parts::<T>(sock) };
    errno_of(state.shutdown(&own, how))
}

/// `setsockopt`.
///
/// # Safety
///
/// As [`bind`]'s.
unsafe extern "C" fn setsockopt<T: SocketOps>(
    sock: *mut bindings::socket,
    level: c_int,
    optname: c_int,
    val: OptVal,
    len: c_uint,
) -> c_int {
    // SAFETY: an op on an attached socket.
    let (own, state) = unsafe { parts::<T>(sock) };
    errno_of(state.setsockopt(&own, level, optname, val, len))
}

/// `getsockopt`.
///
/// # Safety
///
/// As [`bind`]'s.
unsafe extern "C" fn getsockopt<T: SocketOps>(
    sock: *mut bindings::socket,
    level: c_int,
    optname: c_int,
    val: *mut c_char,
    len: *mut c_int,
) -> c_int {
    // SAFETY: an op on an attached socket; `val`/`len` are user pointers.
    let (_, state) = unsafe { parts::<T>(sock) };
    errno_of(state.getsockopt(level, optname, val, len))
}

/// `sendmsg`.
///
/// # Safety
///
/// As [`bind`]'s.
unsafe extern "C" fn sendmsg<T: SocketOps>(
    sock: *mut bindings::socket,
    msg: Msg,
    len: usize,
) -> c_int {
    // SAFETY: an op on an attached socket.
    let (own, state) = unsafe { parts::<T>(sock) };
    count_of(state.sendmsg(&own, msg, len))
}

/// `recvmsg`.
///
/// # Safety
///
/// As [`bind`]'s.
unsafe extern "C" fn recvmsg<T: SocketOps>(
    sock: *mut bindings::socket,
    msg: Msg,
    len: usize,
    flags: c_int,
) -> c_int {
    // SAFETY: an op on an attached socket.
    let (own, state) = unsafe { parts::<T>(sock) };
    count_of(state.recvmsg(&own, msg, len, flags))
}

/// `show_fdinfo`.
///
/// # Safety
///
/// As [`bind`]'s; `m` is the fdinfo seq_file being written.
unsafe extern "C" fn show_fdinfo<T: SocketOps>(
    m: *mut bindings::seq_file,
    sock: *mut bindings::socket,
) {
    // SAFETY: an op on an attached socket; `m` is live for the call.
    unsafe {
        let (_, state) = parts::<T>(sock);
        if let Ok(text) = state.fdinfo() {
            bindings::__seq_puts(m, text.as_char_ptr().cast());
        }
    }
}

/// The shared part of the `proto_ops` of family `number`'s sockets of state `T`, owned by
/// `owner`; every other op is `None` until the kind's adapter sets it.
pub(crate) fn shared<T: SocketOps>(
    number: c_int,
    owner: *mut bindings::module,
) -> bindings::proto_ops {
    bindings::proto_ops {
        family: number,
        owner,
        release: Some(release::<T>),
        bind: Some(bind::<T>),
        getname: Some(getname::<T>),
        poll: Some(poll::<T>),
        ioctl: Some(ioctl::<T>),
        gettstamp: Some(gettstamp::<T>),
        shutdown: Some(shutdown::<T>),
        setsockopt: Some(setsockopt::<T>),
        getsockopt: Some(getsockopt::<T>),
        sendmsg: Some(sendmsg::<T>),
        recvmsg: Some(recvmsg::<T>),
        socketpair: Some(bindings::sock_no_socketpair),
        mmap: Some(bindings::sock_no_mmap),
        // `setsockopt(SO_PEEK_OFF)` reached the native socket first; this keeps our
        // copy, which `getsockopt` reads.
        set_peek_off: Some(bindings::sk_set_peek_off),
        show_fdinfo: Some(show_fdinfo::<T>),
        ..Default::default()
    }
}
