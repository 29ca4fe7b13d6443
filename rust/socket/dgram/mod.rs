// SPDX-License-Identifier: GPL-2.0

//! An `AF_SCI` datagram socket (`SOCK_DGRAM`; the seed's §5.1.7).
//!
//! It owns a native UDP socket ([`Native`] of [`NativeKind::Udp`]), which holds its port
//! and carries its datagrams: every operation is forwarded and the native socket's
//! wake-ups are forwarded back, so the program sees UDP exactly (the port space, plain
//! peers, multicast and broadcast, ICMP errors, control messages, drops on a full
//! receive buffer). As a stream socket's, the native socket is born `AF_INET` and is
//! re-created as `AF_INET6` by `SCI_NATIVE_FAMILY` or by the first IPv6 address given to
//! bind, connect or send ([`EarlyOptions`]); the first bind, connect or send commits it.
//!
//! Datagrams to a node of the fabric over an implicit SCI connection are the next step
//! of this socket (`Documentation/af_sci.rst`, "Datagram sockets"): they will leave in
//! [`SciDgram::sendmsg`] and arrive in [`SciDgram::recvmsg`] beside the native ones.

pub(crate) mod adapter;

use crate::config::rules::{FallbackReason, Ip};
use crate::socket::early_options::EarlyOptions;
use crate::socket::native::{Native, NativeHooks, NativeKind, SockAddr};
use crate::socket::proto_ops::{Registered, SocketOps};
use crate::socket::registry::{Slot, SockInfo};
use crate::socket::sk::OwnSk;
use crate::socket::stack::Stack;
use crate::sys::bindings;
use crate::sys::errno::errno;
use crate::sys::net::{int_optval, put_option, File, Msg, OptVal, EPOLLERR};
use core::ffi::{c_char, c_int, c_uint, c_ulong, c_void};
use core::ptr;
use core::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use kernel::fmt;
use kernel::prelude::*;
use kernel::str::CString;
use kernel::sync::{Arc, Mutex};

/// The state of one `AF_SCI` datagram socket (lives inside its `struct sock`).
#[pin_data]
pub(crate) struct SciDgram {
    /// Until the first bind, connect or send, the native socket may be re-created as
    /// `AF_INET6`.
    #[pin]
    config: Mutex<EarlyOptions>,
    /// The native UDP socket in use; set at creation, replaced at most once (family
    /// switch).
    native: AtomicPtr<bindings::socket>,
    /// The native socket a family switch replaced, kept until release because a racing
    /// call may still hold it.
    retired: AtomicPtr<bindings::socket>,
    /// Saved callbacks of the native socket in use.
    hooks: NativeHooks,
    kern: bool,
    /// Id in the module's socket registry (0 until registered).
    registry_id: AtomicU64,
    /// What the socket reaches below it: the registry.
    stack: Arc<Stack>,
}

impl SciDgram {
    /// A socket without its native socket yet, over `stack`; `kern` for kernel-created
    /// sockets.
    pub(crate) fn new(kern: bool, stack: Arc<Stack>) -> impl PinInit<Self> {
        pin_init!(Self {
            config <- kernel::new_mutex!(EarlyOptions::new(), "SciDgram::config"),
            native: AtomicPtr::new(ptr::null_mut()),
            retired: AtomicPtr::new(ptr::null_mut()),
            hooks: NativeHooks::new(),
            kern,
            registry_id: AtomicU64::new(0),
            stack,
        })
    }

    /// Enters the socket in the registry (`scictl sockets --udp`), in `slot`.
    pub(crate) fn register(&self, own: &OwnSk, slot: Slot<Registered>) {
        let id = self
            .stack
            .sockets
            .insert(slot, Registered::new::<Self>(own));
        self.registry_id.store(id, Ordering::Relaxed);
    }

    /// Creates the native socket of a new socket (born `AF_INET`).
    pub(crate) fn init_native(&self, own: &OwnSk) -> Result {
        let native = Native::create_of(
            own.net(),
            bindings::AF_INET as c_int,
            NativeKind::Udp,
            self.kern,
        )?;
        self.install(own, native);
        own.stats().socket_created();
        Ok(())
    }

    fn install(&self, own: &OwnSk, native: Native) {
        native.attach(&self.hooks, own.as_ptr(), None);
        own.set_buffer_sizes(native.buffer_sizes());
        self.native.store(native.as_ptr(), Ordering::Release);
    }

    /// The native socket in use.
    pub(crate) fn native(&self) -> Native {
        // Set in `init_native` before the socket is reachable, and never cleared before
        // `release`.
        Native::from_ptr(self.native.load(Ordering::Acquire))
            .expect("AF_SCI datagram socket without native socket")
    }

    /// Re-creates the (uncommitted) native socket as `family`, replaying the options; at
    /// most once, as a stream socket's (`EINVAL` after that).
    fn switch_family(
        &self,
        own: &OwnSk,
        config: &mut EarlyOptions,
        family: c_int,
    ) -> Result<Native> {
        let old = self.native();
        if config.committed() || old.family() == family {
            return Ok(old);
        }
        if !self.retired.load(Ordering::Acquire).is_null() {
            return Err(EINVAL);
        }
        let new = config.recreate(own.net(), family, NativeKind::Udp, self.kern)?;
        old.detach(&self.hooks);
        self.install(own, new);
        self.retired.store(old.as_ptr(), Ordering::Release);
        Ok(new)
    }

    /// The native socket to use for `addr`: re-created as `AF_INET6` for the first IPv6
    /// address of an uncommitted socket.
    fn native_for(
        &self,
        own: &OwnSk,
        config: &mut EarlyOptions,
        addr: Option<&SockAddr>,
    ) -> Result<Native> {
        match addr.and_then(SockAddr::wanted_family) {
            Some(family) => self.switch_family(own, config, family),
            None => Ok(self.native()),
        }
    }

    /// The native socket for `addr`, committed from now on.
    fn commit(&self, own: &OwnSk, addr: Option<&SockAddr>) -> Result<Native> {
        let mut config = self.config.lock();
        let native = self.native_for(own, &mut config, addr)?;
        config.commit();
        Ok(native)
    }

    /// `connect(2)`: sets (or with `AF_UNSPEC` clears) the default destination. A
    /// connect binds an unbound socket even when it fails, so it commits.
    pub(crate) fn connect(&self, own: &OwnSk, addr: SockAddr, flags: c_int) -> Result {
        let native = if addr.family() == Some(bindings::AF_UNSPEC as u16) {
            self.native()
        } else {
            self.commit(own, Some(&addr))?
        };
        self.hooks.sync_error(own, &native);
        let r = native.connect(addr, flags);
        own.set_state(u32::from(native.state()));
        self.hooks.consumed(own, r)
    }

    /// `setsockopt(SOL_SCI, SCI_NATIVE_FAMILY)` before the socket is committed; the
    /// stream socket's other `SOL_SCI` options have no meaning here (`ENOPROTOOPT`).
    fn set_sci_option(&self, own: &OwnSk, optname: c_int, val: OptVal, len: c_uint) -> Result {
        if optname != bindings::SCI_NATIVE_FAMILY as c_int {
            return Err(errno(bindings::ENOPROTOOPT));
        }
        let family = int_optval(val, len)?;
        if family != bindings::AF_INET as c_int && family != bindings::AF_INET6 as c_int {
            return Err(errno(bindings::EAFNOSUPPORT));
        }
        let mut config = self.config.lock();
        if config.committed() && self.native().family() != family {
            return Err(errno(bindings::EISCONN));
        }
        self.switch_family(own, &mut config, family).map(|_| ())
    }

    /// `struct sci_info` as bytes: every datagram goes over the native socket (mode
    /// native, reason `no-fabric`), in the native socket's state (`TCP_ESTABLISHED` when
    /// connected, as UDP keeps it, else `TCP_CLOSE`).
    fn info(&self) -> [u8; 16] {
        let native = self.native();
        let fields = [
            bindings::sci_mode_SCI_MODE_NATIVE,
            FallbackReason::NoFabric.as_u32(),
            native.family() as u32,
            u32::from(native.state()),
        ];
        let mut out = [0u8; 16];
        for (chunk, v) in out.chunks_exact_mut(4).zip(fields) {
            chunk.copy_from_slice(&v.to_ne_bytes());
        }
        out
    }

    /// `close(2)`: the native socket closes (and its queued datagrams go with it).
    pub(crate) fn release(&self, own: &OwnSk) {
        // First out of the registry: once removed, no dump looks at the socket.
        self.stack
            .sockets
            .remove(self.registry_id.load(Ordering::Relaxed));
        let native = self.native();
        native.detach(&self.hooks);
        self.native.store(ptr::null_mut(), Ordering::Release);
        native.release();
        if let Some(old) = Native::from_ptr(self.retired.swap(ptr::null_mut(), Ordering::AcqRel)) {
            old.release();
        }
        own.set_state(bindings::TCP_CLOSE);
    }
}

/// The calls of the socket layer, forwarded to the native UDP socket (`proto_ops.rs`).
impl SocketOps for SciDgram {
    /// `bind(2)`. A failed bind leaves the socket uncommitted, as UDP lets a program try
    /// again.
    fn bind(&self, own: &OwnSk, addr: SockAddr) -> Result {
        let mut config = self.config.lock();
        let native = self.native_for(own, &mut config, Some(&addr))?;
        native.bind(addr)?;
        config.commit();
        Ok(())
    }

    /// `sendmsg(2)`, `sendto(2)`, `sendmmsg(2)` and kernel senders. A send binds an
    /// unbound socket, so it commits.
    fn sendmsg(&self, own: &OwnSk, msg: Msg, len: usize) -> Result<c_int> {
        let native = self.commit(own, SockAddr::of_msg(msg).as_ref())?;
        self.hooks.sync_error(own, &native);
        native.copy_alloc_flags_from(own.as_ptr());
        let r = native.sendmsg(msg, len);
        self.hooks.consumed(own, r)
    }

    /// `recvmsg(2)`, `recvfrom(2)`, `recvmmsg(2)` and kernel receivers.
    fn recvmsg(&self, own: &OwnSk, msg: Msg, len: usize, flags: c_int) -> Result<c_int> {
        let native = self.native();
        self.hooks.sync_error(own, &native);
        let r = native.recvmsg(msg, len, flags);
        self.hooks.consumed(own, r)
    }

    /// `poll(2)`, `select(2)`, `epoll(7)`: the native socket's mask.
    fn poll(&self, own: &OwnSk, file: File) -> c_uint {
        let native = self.native();
        self.hooks.sync_error(own, &native);
        let mut mask = native.poll_mask(file);
        if own.error() != 0 {
            mask |= EPOLLERR;
        }
        mask
    }

    /// `getsockname(2)` / `getpeername(2)`: the native socket's names.
    fn getname(&self, addr: *mut bindings::sockaddr, peer: c_int) -> Result<c_int> {
        self.native().getname(addr, peer)
    }

    /// `ioctl(2)` (`FIONREAD`: the next datagram's size, `SIOCOUTQ`, interface ioctls).
    fn ioctl(&self, cmd: c_uint, arg: c_ulong) -> Result<c_int> {
        self.native().ioctl(cmd, arg)
    }

    /// `SIOCGSTAMP` and friends.
    fn gettstamp(&self, stamp: *mut c_void, timeval: bool, time32: bool) -> Result<c_int> {
        self.native().gettstamp(stamp, timeval, time32)
    }

    /// `shutdown(2)`.
    fn shutdown(&self, own: &OwnSk, how: c_int) -> Result {
        let native = self.native();
        self.hooks.sync_error(own, &native);
        let r = native.shutdown(how);
        own.set_state(u32::from(native.state()));
        r
    }

    /// `setsockopt(2)`: `SOL_SOCKET` goes to both sockets (the socket layer reads it back
    /// from ours), every other level to the native socket, `SOL_SCI` is ours.
    fn setsockopt(
        &self,
        own: &OwnSk,
        level: c_int,
        optname: c_int,
        val: OptVal,
        len: c_uint,
    ) -> Result {
        if level == bindings::SOL_SCI as c_int {
            return self.set_sci_option(own, optname, val, len);
        }
        let mut config = self.config.lock();
        let native = self.native();
        if level == bindings::SOL_SOCKET as c_int {
            native.set_socket_option(optname, val, len)?;
            // Ours only mirrors what the native socket accepted.
            let _ = own.set_socket_option(optname, val, len);
            own.set_buffer_sizes(native.buffer_sizes());
            own.set_reuse_flags(native.reuse_flags());
        } else {
            native.set_option(level, optname, val, len)?;
        }
        config.record(level, optname, val, len)
    }

    /// `getsockopt(2)` at every level but `SOL_SOCKET` (which the socket layer answers
    /// from our sk): `SOL_SCI` here, the rest from the native socket.
    fn getsockopt(
        &self,
        level: c_int,
        optname: c_int,
        val: *mut c_char,
        len: *mut c_int,
    ) -> Result {
        if level != bindings::SOL_SCI as c_int {
            return self.native().get_option(level, optname, val, len);
        }
        match optname as u32 {
            bindings::SCI_INFO => put_option(&self.info(), val, len),
            bindings::SCI_NATIVE_FAMILY => {
                put_option(&self.native().family().to_ne_bytes(), val, len)
            }
            _ => Err(errno(bindings::ENOPROTOOPT)),
        }
    }

    /// The lines this socket adds to `/proc/PID/fdinfo/FD` (as a stream socket's, with
    /// its type).
    fn diag(&self, own: &OwnSk) -> SockInfo {
        let native = self.native();
        let addrs = native.addrs();
        // Unbound / unconnected while the port is 0.
        let set = |(ip, port): (Ip, u16)| (port != 0).then_some((ip, port));
        let (recv_q, send_q) = native.queues();
        SockInfo {
            family: addrs.family,
            local: set(addrs.local),
            peer: set(addrs.peer),
            mode: bindings::sci_mode_SCI_MODE_NATIVE,
            fallback: FallbackReason::NoFabric,
            state: native.state(),
            queue_fill: 0,
            recv_q,
            send_q,
            inode: own.inode(),
            cookie: own.cookie(),
            node: None,
            sock_type: bindings::sock_type_SOCK_DGRAM as u16,
        }
    }

    fn fdinfo(&self) -> Result<CString> {
        let family = if self.native().family() == bindings::AF_INET6 as c_int {
            "inet6"
        } else {
            "inet"
        };
        let reason = FallbackReason::NoFabric.name();
        CString::try_from_fmt(fmt!(
            "sci-mode:\tnative\nsci-fallback:\t{reason}\nsci-native-family:\t{family}\n\
             sci-type:\tdgram\n"
        ))
    }
}
