// SPDX-License-Identifier: GPL-2.0

//! An `AF_SCI` datagram socket (`SOCK_DGRAM`; the seed's §5.1.7).
//!
//! It owns a native UDP socket ([`Native`] of [`NativeKind::Udp`]), which holds its port
//! and carries its datagrams: every operation is forwarded and the native socket's
//! wake-ups are forwarded back, so the program sees UDP exactly (the port space, plain
//! peers, multicast and broadcast, ICMP errors, control messages, drops on a full
//! receive buffer). As a stream socket's, the native socket is born `AF_INET` and is
//! re-created as `AF_INET6` by `SCI_NATIVE_FAMILY` or by the first IPv6 address given to
//! bind, connect or send ([`NativeSlot`]); the first bind, connect or send commits it.
//!
//! Datagrams to a node of the fabric over an implicit SCI connection are the next step
//! of this socket (`Documentation/af_sci.rst`, "Datagram sockets"): they will leave in
//! its `sendmsg` and arrive in its `recvmsg` beside the native ones.

pub(crate) mod adapter;

use crate::config::rules::FallbackReason;
use crate::socket::native::{Native, NativeKind, SockAddr};
use crate::socket::native_slot::NativeSlot;
use crate::socket::proto_ops::{Membership, Registered, SocketOps};
use crate::socket::registry::{Slot, SockInfo};
use crate::socket::sk::OwnSk;
use crate::socket::stack::Stack;
use crate::sys::bindings;
use crate::sys::errno::errno;
use crate::sys::net::{int_optval, put_option, sci_info_bytes, File, Msg, OptVal, EPOLLERR};
use core::ffi::{c_char, c_int, c_uint, c_ulong, c_void};
use kernel::fmt;
use kernel::prelude::*;
use kernel::str::CString;
use kernel::sync::Arc;

/// The state of one `AF_SCI` datagram socket (lives inside its `struct sock`).
#[pin_data]
pub(crate) struct SciDgram {
    /// Its native UDP socket; final once bound, connected or sent from.
    #[pin]
    slot: NativeSlot,
    /// Its entry in the socket registry.
    registry: Membership,
    /// What the socket reaches below it: the registry.
    stack: Arc<Stack>,
}

impl SciDgram {
    /// A socket without its native socket yet, over `stack`; `kern` for kernel-created
    /// sockets.
    pub(crate) fn new(kern: bool, stack: Arc<Stack>) -> impl PinInit<Self> {
        pin_init!(Self {
            slot <- NativeSlot::new(NativeKind::Udp, kern),
            registry: Membership::new(),
            stack,
        })
    }

    /// Enters the socket in the registry (`scictl sockets --udp`), in `slot`.
    pub(crate) fn register(&self, own: &OwnSk, slot: Slot<Registered>) {
        self.registry.join::<Self>(&self.stack, own, slot);
    }

    /// Creates the native socket of a new socket (born `AF_INET`).
    pub(crate) fn init_native(&self, own: &OwnSk) -> Result {
        self.slot.create(own, bindings::AF_INET as c_int)?;
        own.stats().socket_created();
        Ok(())
    }

    /// The native socket in use.
    pub(crate) fn native(&self) -> Native {
        self.slot.native()
    }

    /// `connect(2)`: sets (or with `AF_UNSPEC` clears) the default destination. A
    /// connect binds an unbound socket even when it fails, so it commits.
    pub(crate) fn connect(&self, own: &OwnSk, addr: SockAddr, flags: c_int) -> Result {
        let native = if addr.family() == Some(bindings::AF_UNSPEC as u16) {
            self.native()
        } else {
            self.slot.commit(own, Some(&addr))?
        };
        self.slot.hooks().sync_error(own, &native);
        let r = native.connect(addr, flags);
        own.set_state(u32::from(native.state()));
        self.slot.hooks().consumed(own, r)
    }

    /// `setsockopt(SOL_SCI, SCI_NATIVE_FAMILY)` before the socket is committed; the
    /// stream socket's other `SOL_SCI` options have no meaning here (`ENOPROTOOPT`).
    fn set_sci_option(&self, own: &OwnSk, optname: c_int, val: OptVal, len: c_uint) -> Result {
        if optname != bindings::SCI_NATIVE_FAMILY as c_int {
            return Err(errno(bindings::ENOPROTOOPT));
        }
        self.slot.set_family(own, int_optval(val, len)?)
    }

    /// `struct sci_info` as bytes: every datagram goes over the native socket (mode
    /// native, reason `no-fabric`), in the native socket's state (`TCP_ESTABLISHED` when
    /// connected, as UDP keeps it, else `TCP_CLOSE`).
    fn info(&self) -> [u8; 16] {
        let native = self.native();
        sci_info_bytes([
            bindings::sci_mode_SCI_MODE_NATIVE,
            FallbackReason::NoFabric.as_u32(),
            native.family() as u32,
            u32::from(native.state()),
        ])
    }
}

/// The calls of the socket layer, forwarded to the native UDP socket (`proto_ops.rs`).
impl SocketOps for SciDgram {
    /// `bind(2)`. A failed bind leaves the socket uncommitted, as UDP lets a program try
    /// again.
    fn bind(&self, own: &OwnSk, addr: SockAddr) -> Result {
        self.slot.bind(own, addr)
    }

    /// `sendmsg(2)`, `sendto(2)`, `sendmmsg(2)` and kernel senders. A send binds an
    /// unbound socket, so it commits.
    fn sendmsg(&self, own: &OwnSk, msg: Msg, len: usize) -> Result<c_int> {
        let native = self.slot.commit(own, SockAddr::of_msg(msg).as_ref())?;
        self.slot.hooks().sync_error(own, &native);
        native.copy_alloc_flags_from(own.as_ptr());
        let r = native.sendmsg(msg, len);
        self.slot.hooks().consumed(own, r)
    }

    /// `recvmsg(2)`, `recvfrom(2)`, `recvmmsg(2)` and kernel receivers.
    fn recvmsg(&self, own: &OwnSk, msg: Msg, len: usize, flags: c_int) -> Result<c_int> {
        let native = self.native();
        self.slot.hooks().sync_error(own, &native);
        let r = native.recvmsg(msg, len, flags);
        self.slot.hooks().consumed(own, r)
    }

    /// `poll(2)`, `select(2)`, `epoll(7)`: the native socket's mask.
    fn poll(&self, own: &OwnSk, file: File) -> c_uint {
        let native = self.native();
        self.slot.hooks().sync_error(own, &native);
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
        self.slot.hooks().sync_error(own, &native);
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
        self.slot
            .setsockopt(own, level, optname, val, len)
            .map(|_| ())
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

    fn diag(&self, own: &OwnSk) -> SockInfo {
        SockInfo::of_native(
            own,
            &self.native(),
            FallbackReason::NoFabric,
            bindings::sock_type_SOCK_DGRAM,
        )
    }

    /// The lines this socket adds to `/proc/PID/fdinfo/FD` (as a stream socket's, with
    /// its type).
    fn fdinfo(&self) -> Result<CString> {
        let family = self.native().family_name();
        let reason = FallbackReason::NoFabric.name();
        CString::try_from_fmt(fmt!(
            "sci-mode:\tnative\nsci-fallback:\t{reason}\nsci-native-family:\t{family}\n\
             sci-type:\tdgram\n"
        ))
    }

    /// `close(2)`: the native socket closes (and its queued datagrams go with it).
    fn release(&self, own: &OwnSk) {
        // First out of the registry: once removed, no dump looks at the socket.
        self.registry.leave(&self.stack);
        self.slot.release();
        own.set_state(bindings::TCP_CLOSE);
    }
}
