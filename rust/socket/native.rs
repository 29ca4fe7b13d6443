// SPDX-License-Identifier: GPL-2.0

//! The native socket: the kernel TCP socket (`AF_INET` or `AF_INET6`) that every
//! `AF_SCI` stream socket owns, or the UDP socket of a datagram socket. It holds the port,
//! talks to plain TCP (UDP) peers and carries the bytes of a connection that is not (or no
//! longer) on the SCI data path.
//!
//! This is a thin wrapper: each method forwards to the native socket's own `proto_ops`
//! (what only a UDP socket is asked is in `native_udp.rs`); the native socket's wake-up
//! callbacks are forwarded to the owning `AF_SCI` socket by `native_hooks.rs`.

use crate::config::rules::Ip;
use crate::socket::sockaddr::SockAddr;
use crate::sys::bindings;
use crate::sys::errno::{count_result, errno};
use crate::sys::net::{File, Msg, OptVal};
use crate::sys::read_actor::ReadActor;
use crate::sys::zerocopy::ZeroCopyNote;
use core::ffi::{c_char, c_int, c_uint, c_ulong, c_void};
use core::ptr::{self, NonNull};
use kernel::error::{to_result, Result};

/// At most this many connections of a listener's accept queue are looked at
/// ([`Native::queued_peers`]).
pub(crate) const QUEUED_PEERS_MAX: usize = 32;

/// The addresses of a native socket, for the socket dump (zero while unset).
pub(crate) struct NativeAddrs {
    /// `AF_INET` or `AF_INET6`.
    pub(crate) family: u16,
    /// Local address and port.
    pub(crate) local: (Ip, u16),
    /// Peer address and port.
    pub(crate) peer: (Ip, u16),
}

/// `TCP_NODELAY` and `TCP_CORK` of a native socket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Nagle {
    /// `TCP_NODELAY` is set.
    pub(crate) nodelay: bool,
    /// `TCP_CORK` is set.
    pub(crate) cork: bool,
}

/// The protocol of a native socket: an `AF_SCI` stream socket owns a TCP socket, a
/// datagram socket a UDP one.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum NativeKind {
    /// `SOCK_STREAM`, `IPPROTO_TCP`.
    Tcp,
    /// `SOCK_DGRAM`, `IPPROTO_UDP`.
    Udp,
}

/// A handle to a live native socket.
///
/// Invariant: the owning `AF_SCI` socket keeps the native socket alive (it releases it
/// only in its own `release`, after which no handle is used).
#[derive(Clone, Copy)]
pub(crate) struct Native(NonNull<bindings::socket>);

// SAFETY: a native socket is a kernel socket, usable from any thread; its own locking
// (lock_sock) serialises what needs it.
unsafe impl Send for Native {}
// SAFETY: as above.
unsafe impl Sync for Native {}

impl Native {
    /// Creates a native socket of `kind` (TCP or UDP) and `family` in `net`; `kern` is the
    /// owning socket's.
    ///
    /// Not `sock_create_kern` for user sockets: a kernel socket holds no reference on its
    /// namespace, and a closed TCP connection's timers (FIN_WAIT, TIME_WAIT) outlive the
    /// `AF_SCI` socket that held one (the problem `net/smc` fixes by taking it by hand).
    /// Created as the user's, it is also charged and checked as the user's TCP (UDP)
    /// socket.
    pub(crate) fn create(
        net: *mut bindings::net,
        family: c_int,
        kind: NativeKind,
        kern: bool,
    ) -> Result<Self> {
        let (ty, protocol) = match kind {
            NativeKind::Tcp => (bindings::sock_type_SOCK_STREAM, bindings::IPPROTO_TCP),
            NativeKind::Udp => (bindings::sock_type_SOCK_DGRAM, bindings::IPPROTO_UDP),
        };
        let mut sock: *mut bindings::socket = ptr::null_mut();
        // SAFETY: `net` is the namespace of the AF_SCI socket being created or used, alive
        // for the call; on success `sock` is a new socket we own.
        to_result(unsafe {
            bindings::__sock_create(
                net,
                family,
                ty as c_int,
                protocol as c_int,
                &mut sock,
                kern as c_int,
            )
        })?;
        NonNull::new(sock)
            .map(Self)
            .ok_or(kernel::error::code::ENOMEM)
    }

    /// Rebuilds a handle from a pointer stored by the owner.
    pub(crate) fn from_ptr(sock: *mut bindings::socket) -> Option<Self> {
        NonNull::new(sock).map(Self)
    }

    /// The raw pointer, for storing in the owner.
    pub(crate) fn as_ptr(self) -> *mut bindings::socket {
        self.0.as_ptr()
    }

    fn ops(&self) -> &bindings::proto_ops {
        // SAFETY: a live socket has a valid, static `ops` table (invariant).
        unsafe { &*(*self.0.as_ptr()).ops }
    }

    /// The native socket's `struct sock` (also for the UDP side, `native_udp.rs`).
    pub(super) fn sk(&self) -> *mut bindings::sock {
        // SAFETY: a live, created socket always has its `sk` (invariant).
        unsafe { (*self.0.as_ptr()).sk }
    }

    /// Releases the native socket (closes the TCP connection as `close()` would).
    pub(crate) fn release(self) {
        // SAFETY: the owner calls this once, last (invariant).
        unsafe { bindings::sock_release(self.0.as_ptr()) }
    }

    /// `AF_INET` or `AF_INET6`.
    pub(crate) fn family(&self) -> c_int {
        // SAFETY: `sk` is live (invariant).
        unsafe { (*self.sk()).__sk_common.skc_family as c_int }
    }

    /// `inet` or `inet6`, as fdinfo names the family.
    pub(crate) fn family_name(&self) -> &'static str {
        if self.family() == bindings::AF_INET6 as c_int {
            "inet6"
        } else {
            "inet"
        }
    }

    /// Whether a connect was started on this socket and its outcome not yet reported
    /// by `connect()` (`SS_CONNECTING`): the next `connect()` belongs to that attempt.
    pub(crate) fn connect_started(&self) -> bool {
        // SAFETY: the socket is live (invariant); a racy read of the state, as
        // `inet_stream_connect` itself reads it under the sock lock we do not need here.
        unsafe { (*self.0.as_ptr()).state == bindings::socket_state_SS_CONNECTING }
    }

    /// `IPV6_V6ONLY` (false for an `AF_INET` socket).
    pub(crate) fn v6only(&self) -> bool {
        // SAFETY: `sk` is live (invariant).
        unsafe { bindings::sci_sk_ipv6only(self.sk()) }
    }

    /// Recv-Q and Send-Q as `ss` shows them: a TCP listener's accept queue and backlog,
    /// else bytes received and not read, and bytes sent and not acknowledged; a UDP
    /// socket's queued memory.
    pub(crate) fn queues(&self) -> (u32, u32) {
        let (mut recv_q, mut send_q) = (0u32, 0u32);
        // SAFETY: `sk` is live; the helper only reads it (lockless, as a diag dump does).
        unsafe { bindings::sci_sock_queues(self.sk(), &mut recv_q, &mut send_q) };
        (recv_q, send_q)
    }

    /// Whether the socket was shut for reading (`SHUT_RD`).
    pub(crate) fn read_shut(&self) -> bool {
        // SAFETY: `sk` is live; the helper reads a byte, as poll does.
        unsafe { bindings::sci_sk_read_shut(self.sk()) }
    }

    /// The TCP state (`TCP_ESTABLISHED`, ...).
    pub(crate) fn state(&self) -> u8 {
        // SAFETY: `sk` is live; a racy read of a byte is what `sk_state` readers do.
        unsafe { ptr::read_volatile(ptr::addr_of!((*self.sk()).__sk_common.skc_state)) }
    }

    /// `SO_PEEK_OFF` (-1: unset), which TCP's reads move.
    pub(crate) fn peek_off(&self) -> i32 {
        // SAFETY: `sk` is live; a racy int read, as `sk_peek_offset()` takes it.
        unsafe { ptr::read_volatile(ptr::addr_of!((*self.sk()).sk_peek_off)) }
    }

    /// Sets `SO_PEEK_OFF` (-1: unset), as `setsockopt` would.
    pub(crate) fn set_peek_off(&self, off: i32) {
        // SAFETY: `sk` is live; `sk_set_peek_off` is one `WRITE_ONCE`, TCP's setter.
        unsafe { bindings::sk_set_peek_off(self.sk(), off) };
    }

    /// Takes the pending socket error (as `sock_error`), as a positive errno or 0.
    pub(crate) fn take_error(&self) -> c_int {
        // SAFETY: `sk` is live; `sock_error` reads and clears `sk_err` atomically.
        -unsafe { bindings::sci_sock_error(self.sk()) }
    }

    /// The pending socket error without consuming it, as a positive errno or 0.
    pub(crate) fn peek_error(&self) -> c_int {
        // SAFETY: `sk` is live; a racy int read, as `sock_error` does before its xchg.
        unsafe { ptr::read_volatile(ptr::addr_of!((*self.sk()).sk_err)) }
    }

    /// Its addresses, read without its lock (as `inet_diag` does).
    pub(crate) fn addrs(&self) -> NativeAddrs {
        let mut raw = bindings::sci_sock_addrs::default();
        // SAFETY: `sk` is live (invariant); `raw` is ours.
        unsafe { bindings::sci_sock_addrs(self.sk(), &mut raw) };
        let ip = |b: [u8; 16]| {
            if u32::from(raw.family) == bindings::AF_INET6 {
                Ip::V6(b)
            } else {
                Ip::V4([b[0], b[1], b[2], b[3]])
            }
        };
        NativeAddrs {
            family: raw.family,
            local: (ip(raw.local), raw.local_port),
            peer: (ip(raw.peer), raw.peer_port),
        }
    }

    /// Send and receive buffer sizes, to mirror them into the owner.
    pub(crate) fn buffer_sizes(&self) -> (c_int, c_int) {
        // SAFETY: `sk` is live; plain int reads.
        unsafe { ((*self.sk()).sk_sndbuf, (*self.sk()).sk_rcvbuf) }
    }

    /// `SO_REUSEADDR` and `SO_REUSEPORT` as the native socket holds them.
    pub(crate) fn reuse_flags(&self) -> (u8, u8) {
        // SAFETY: `sk` is live; bitfield reads of a byte only setsockopt writes.
        unsafe {
            let common = &(*self.sk()).__sk_common;
            (common.skc_reuse(), common.skc_reuseport())
        }
    }

    /// `TCP_INQ` as set on this socket (the AF_SCI socket forwards it here).
    pub(crate) fn recvmsg_inq(&self) -> bool {
        // SAFETY: `sk` is live; a lockless read of one bitfield, as `tcp_recvmsg` takes it.
        unsafe { bindings::sci_tcp_recvmsg_inq(self.sk()) }
    }

    /// `SO_ZEROCOPY` as set on this socket.
    pub(crate) fn zerocopy(&self) -> bool {
        // SAFETY: `sk` is live; an atomic bit of its flags.
        unsafe { bindings::sci_sock_zerocopy(self.sk()) }
    }

    /// Whether its error queue holds something (a zero-copy notification): `MSG_ERRQUEUE`
    /// reads it here, and `poll` reports `EPOLLERR` for it.
    pub(crate) fn error_queued(&self) -> bool {
        // SAFETY: `sk` is live; a lockless look at a queue head, as poll takes.
        unsafe { bindings::sci_sock_error_queued(self.sk()) }
    }

    /// The notification of a `MSG_ZEROCOPY` send of `len` bytes of `msg` that an SCI
    /// connection carries for this socket ([`ZeroCopyNote`]).
    pub(crate) fn zerocopy_note(&self, msg: Msg, len: usize) -> Result<Option<ZeroCopyNote>> {
        ZeroCopyNote::take(self.sk(), msg, len)
    }

    /// `TCP_NODELAY` and `TCP_CORK` as set on this socket (the AF_SCI socket forwards both
    /// here), for the gathering of an SCI connection.
    pub(crate) fn nagle(&self) -> Nagle {
        // SAFETY: `sk` is live; the shim reads one bitfield of its `tcp_sock`.
        let bits = unsafe { bindings::sci_tcp_nagle(self.sk()) };
        Nagle {
            nodelay: bits & bindings::SCI_NAGLE_OFF != 0,
            cork: bits & bindings::SCI_NAGLE_CORK != 0,
        }
    }

    /// Takes the options of `listener`, as a TCP socket accepted there has them
    /// (timeouts, linger, keepalive, buffer sizes set by hand, timestamps, `TCP_NODELAY`,
    /// ...: `sci_tcp_accept_options`): the native socket of a socket accepted over SCI.
    pub(crate) fn accept_options(&self, listener: &Native) {
        // SAFETY: both sockets are live; process context (the helper locks `self`).
        unsafe { bindings::sci_tcp_accept_options(self.sk(), listener.sk()) }
    }

    /// Takes the options set on `old`, the TCP socket this one replaces under a
    /// connection that moved onto it (timeouts, linger, keepalive, buffer sizes set by
    /// hand, timestamps, `TCP_NODELAY`, ...: `sci_tcp_inherit_options`).
    pub(crate) fn inherit_options(&self, old: &Native) {
        // SAFETY: both sockets are live; process context (the helper locks `self`).
        unsafe { bindings::sci_tcp_inherit_options(self.sk(), old.sk()) }
    }

    /// Copies the allocation context a kernel user (NBD) set on the owner.
    pub(crate) fn copy_alloc_flags_from(&self, owner: *mut bindings::sock) {
        // SAFETY: both sockets are live for the call.
        unsafe { bindings::sci_copy_alloc_flags(self.sk(), owner) }
    }

    /// `read_sock` of the native socket without sleeping ([`ReadActor::read_sock_of_nowait`]);
    /// `held`: this context holds it locked. `None` when a process owns it.
    pub(crate) fn read_sock_nowait(
        &self,
        actor: &mut ReadActor,
        held: bool,
    ) -> Result<Option<c_int>> {
        match count_result(actor.read_sock_of_nowait(self.0.as_ptr(), held)) {
            Err(e) if e == kernel::error::code::EAGAIN => Ok(None),
            r => r.map(Some),
        }
    }

    /// `bind(2)`.
    pub(crate) fn bind(&self, addr: SockAddr) -> Result {
        let f = self.ops().bind.ok_or(errno(bindings::EOPNOTSUPP))?;
        let (addr, len) = addr.raw();
        // SAFETY: forwarding the socket layer's arguments to the native socket's own op.
        to_result(unsafe { f(self.0.as_ptr(), addr, len) })
    }

    /// `connect(2)`; `flags` are the file flags (`O_NONBLOCK`).
    pub(crate) fn connect(&self, addr: SockAddr, flags: c_int) -> Result {
        let f = self.ops().connect.ok_or(errno(bindings::EOPNOTSUPP))?;
        let (addr, len) = addr.raw();
        // SAFETY: as in `bind`.
        to_result(unsafe { f(self.0.as_ptr(), addr, len, flags) })
    }

    /// `listen(2)`.
    pub(crate) fn listen(&self, backlog: c_int) -> Result {
        let f = self.ops().listen.ok_or(errno(bindings::EOPNOTSUPP))?;
        // SAFETY: as in `bind`.
        to_result(unsafe { f(self.0.as_ptr(), backlog) })
    }

    /// `accept(2)`: a new native socket for the next connection. `arg` is the caller's
    /// (flags, `kern`, and `is_empty` for io_uring), as `kernel_accept` does it.
    pub(crate) fn accept(&self, arg: *mut bindings::proto_accept_arg) -> Result<Self> {
        let f = self.ops().accept.ok_or(errno(bindings::EOPNOTSUPP))?;
        let sk = self.sk();
        let mut new: *mut bindings::socket = ptr::null_mut();
        // As `kernel_accept`: an empty socket of the listener's kind takes the connection,
        // then the listener's ops and a reference on their module.
        // SAFETY: `sk` is live; `new` is ours until returned (released on failure).
        unsafe {
            to_result(bindings::sock_create_lite(
                (*sk).__sk_common.skc_family.into(),
                (*sk).sk_type.into(),
                (*sk).sk_protocol.into(),
                &mut new,
            ))?;
            if let Err(e) = to_result(f(self.0.as_ptr(), new, arg)) {
                bindings::sock_release(new);
                return Err(e);
            }
            (*new).ops = (*self.0.as_ptr()).ops;
            bindings::sci_module_get((*(*new).ops).owner);
        }
        NonNull::new(new)
            .map(Self)
            .ok_or(kernel::error::code::ENOMEM)
    }

    /// `getsockname(2)` / `getpeername(2)`: the address length, address written to `addr`.
    pub(crate) fn getname(&self, addr: *mut bindings::sockaddr, peer: c_int) -> Result<c_int> {
        let f = self.ops().getname.ok_or(errno(bindings::EOPNOTSUPP))?;
        // SAFETY: `addr` is the socket layer's sockaddr_storage buffer.
        count_result(unsafe { f(self.0.as_ptr(), addr, peer) })
    }

    /// `accept` that never sleeps (`EAGAIN` when no connection is queued).
    pub(crate) fn accept_nonblock(&self, arg: *mut bindings::proto_accept_arg) -> Result<Self> {
        // SAFETY: `arg` is the socket layer's live accept argument; a copy is used so
        // the caller's flags stay as they were.
        let mut copy = unsafe { *arg };
        copy.flags |= bindings::O_NONBLOCK as c_int;
        let r = self.accept(&mut copy);
        // SAFETY: as above; hands back what the native accept reports (io_uring).
        unsafe { (*arg).is_empty = copy.is_empty };
        r
    }

    /// The native socket's poll mask, without registering a wait (the owner's wait
    /// queue is the one waited on; the forwarders wake it).
    pub(crate) fn poll_mask(&self, file: File) -> c_uint {
        match self.ops().poll {
            // SAFETY: a null poll table registers nothing.
            Some(f) => unsafe { f(file, self.0.as_ptr(), ptr::null_mut()) },
            None => 0,
        }
    }

    /// The peers of the connections waiting in this listening socket's accept queue,
    /// oldest first, into `out`: how many wait (`out.len() + 1` when more than fit).
    pub(crate) fn queued_peers(&self, out: &mut [(Ip, u16)]) -> usize {
        let mut raw = [bindings::sci_queued_peer::default(); QUEUED_PEERS_MAX];
        let max = out.len().min(QUEUED_PEERS_MAX);
        // SAFETY: `sk` is live; `raw` has room for `max` entries.
        let n =
            unsafe { bindings::sci_accept_queue_peers(self.sk(), raw.as_mut_ptr(), max as c_int) };
        let n = usize::try_from(n).unwrap_or(0);
        for (o, r) in out.iter_mut().zip(raw.iter()).take(n.min(max)) {
            *o = if r.v6 != 0 {
                (Ip::V6(r.addr).canonical(), r.port)
            } else {
                let [a, b, c, d, ..] = r.addr;
                (Ip::V4([a, b, c, d]), r.port)
            };
        }
        n
    }

    /// `ioctl(2)` (`FIONREAD`, `SIOCOUTQ`, interface ioctls, ...).
    pub(crate) fn ioctl(&self, cmd: c_uint, arg: c_ulong) -> Result<c_int> {
        let f = self.ops().ioctl.ok_or(kernel::error::code::ENOIOCTLCMD)?;
        // SAFETY: `arg` is the caller's user pointer, used in the caller's context.
        count_result(unsafe { f(self.0.as_ptr(), cmd, arg) })
    }

    /// `SIOCGSTAMP` and friends.
    pub(crate) fn gettstamp(
        &self,
        stamp: *mut c_void,
        timeval: bool,
        time32: bool,
    ) -> Result<c_int> {
        let f = self
            .ops()
            .gettstamp
            .ok_or(kernel::error::code::ENOIOCTLCMD)?;
        // SAFETY: `stamp` is the caller's user pointer.
        count_result(unsafe { f(self.0.as_ptr(), stamp, timeval, time32) })
    }

    /// `shutdown(2)`.
    pub(crate) fn shutdown(&self, how: c_int) -> Result {
        let f = self.ops().shutdown.ok_or(errno(bindings::EOPNOTSUPP))?;
        // SAFETY: as in `bind`.
        to_result(unsafe { f(self.0.as_ptr(), how) })
    }

    /// `setsockopt(2)` at `SOL_SOCKET`.
    pub(crate) fn set_socket_option(&self, optname: c_int, val: OptVal, len: c_uint) -> Result {
        // SAFETY: `val` is the caller's option buffer (user or kernel, as tagged).
        to_result(unsafe {
            bindings::sock_setsockopt(
                self.0.as_ptr(),
                bindings::SOL_SOCKET as c_int,
                optname,
                val,
                len,
            )
        })
    }

    /// `setsockopt(2)` at a protocol level (`SOL_TCP`, `SOL_IP`, `SOL_IPV6`).
    pub(crate) fn set_option(
        &self,
        level: c_int,
        optname: c_int,
        val: OptVal,
        len: c_uint,
    ) -> Result {
        let f = self.ops().setsockopt.ok_or(errno(bindings::ENOPROTOOPT))?;
        // SAFETY: as in `set_socket_option`.
        to_result(unsafe { f(self.0.as_ptr(), level, optname, val, len) })
    }

    /// `getsockopt(2)` at a protocol level, with the caller's user pointers.
    pub(crate) fn get_option(
        &self,
        level: c_int,
        optname: c_int,
        val: *mut c_char,
        len: *mut c_int,
    ) -> Result {
        let f = self.ops().getsockopt.ok_or(errno(bindings::ENOPROTOOPT))?;
        // SAFETY: `val` and `len` are the caller's user pointers, used in its context.
        to_result(unsafe { f(self.0.as_ptr(), level, optname, val, len) })
    }

    /// `sendmsg(2)` and every kernel sender (`kernel_sendmsg`, splice): bytes sent.
    pub(crate) fn sendmsg(&self, msg: Msg, len: usize) -> Result<c_int> {
        let f = self.ops().sendmsg.ok_or(errno(bindings::EOPNOTSUPP))?;
        // SAFETY: `msg` is the caller's message with its iterator (user, kvec or bvec).
        count_result(unsafe { f(self.0.as_ptr(), msg, len) })
    }

    /// `recvmsg(2)` and every kernel receiver: bytes received.
    pub(crate) fn recvmsg(&self, msg: Msg, len: usize, flags: c_int) -> Result<c_int> {
        let f = self.ops().recvmsg.ok_or(errno(bindings::EOPNOTSUPP))?;
        // SAFETY: as in `sendmsg`.
        count_result(unsafe { f(self.0.as_ptr(), msg, len, flags) })
    }

    /// Sends bytes without sleeping (a failover's resume header): bytes sent, `EAGAIN`.
    pub(crate) fn send_nowait(&self, buf: &[u8]) -> Result<usize> {
        // SAFETY: `buf` is valid for `len` bytes for the call; the socket is live.
        let n = unsafe {
            bindings::sci_kernel_send_nowait(self.0.as_ptr(), buf.as_ptr().cast(), buf.len())
        };
        count_result(n).map(|n| n as usize)
    }

    /// Receives (or with `peek`, looks at) bytes without sleeping (a failover's resume
    /// header): bytes received (0 at the end of the stream), `EAGAIN`.
    pub(crate) fn recv_nowait(&self, buf: &mut [u8], peek: bool) -> Result<usize> {
        // SAFETY: `buf` is valid and writable for `len` bytes for the call.
        let n = unsafe {
            bindings::sci_kernel_recv_nowait(
                self.0.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                peek,
            )
        };
        count_result(n).map(|n| n as usize)
    }

    /// An `accept` made by the kernel on the program's behalf (a failover's join): never
    /// sleeps; the connection is the program's, as if it had accepted it.
    pub(crate) fn accept_for_join(&self) -> Result<Self> {
        let mut arg = bindings::proto_accept_arg {
            flags: bindings::O_NONBLOCK as c_int,
            ..Default::default()
        };
        self.accept(&mut arg)
    }

    /// End of a splice into the socket: push what was corked.
    pub(crate) fn splice_eof(&self) {
        if let Some(f) = self.ops().splice_eof {
            // SAFETY: forwarding to the native socket's op.
            unsafe { f(self.0.as_ptr()) }
        }
    }
}
