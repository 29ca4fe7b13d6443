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
//! Datagrams to a node of the fabric go over implicit SCI connections once the socket is
//! bound ([`implicit`]): they leave in its `sendmsg` and arrive in its `recvmsg` beside the
//! native ones, and `poll` reports both.

pub(crate) mod adapter;
pub(crate) mod implicit;
mod inbound;

use crate::config::rules::{FallbackReason, Ip};
use crate::fabric::memory::msg_flags;
use crate::socket::native::{Native, NativeKind};
use crate::socket::native_slot::NativeSlot;
use crate::socket::proto_ops::{Membership, Registered, SocketOps};
use crate::socket::registry::{DgramInfo, Slot, SockInfo};
use crate::socket::sk::OwnSk;
use crate::socket::sock::listen_addr;
use crate::socket::sockaddr::SockAddr;
use crate::socket::stack::Stack;
use crate::sys::bindings;
use crate::sys::errno::errno;
use crate::sys::net::{
    int_optval, put_ioctl_int, put_option, sci_info_bytes, send_asks, set_msg_flags, set_msg_name,
    File, Msg, OptVal, EPOLLERR, EPOLLIN, EPOLLRDNORM, SIOCINQ,
};
use crate::sys::params::sci_loopback_enabled;
use core::ffi::{c_char, c_int, c_uint, c_ulong, c_void};
use core::sync::atomic::{AtomicBool, Ordering};
use implicit::{udp_max_payload, Endpoint, Outgoing, Peeked, SourceAsk};
use kernel::fmt;
use kernel::prelude::*;
use kernel::str::CString;
use kernel::sync::{Arc, SpinLock};

/// The state of one `AF_SCI` datagram socket (lives inside its `struct sock`).
#[pin_data]
pub(crate) struct SciDgram {
    /// Its native UDP socket; final once bound, connected or sent from.
    #[pin]
    slot: NativeSlot,
    /// Its entry in the socket registry.
    registry: Membership,
    /// What the socket reaches below it: the registry, the control plane, the node map.
    stack: Arc<Stack>,
    /// Its implicit connections, once its native socket is bound.
    #[pin]
    endpoint: SpinLock<Option<Arc<Endpoint>>>,
    /// `SCI_FABRIC` 0: no implicit connection.
    opted_out: AtomicBool,
}

impl SciDgram {
    /// A socket without its native socket yet, over `stack`; `kern` for kernel-created
    /// sockets.
    pub(crate) fn new(kern: bool, stack: Arc<Stack>) -> impl PinInit<Self> {
        pin_init!(Self {
            slot <- NativeSlot::new(NativeKind::Udp, kern),
            registry: Membership::new(),
            stack,
            endpoint <- kernel::new_spinlock!(None, "SciDgram::endpoint"),
            opted_out: AtomicBool::new(false),
        })
    }

    /// Enters the socket in the registry (`scictl sockets --udp`), in `slot`.
    pub(crate) fn register(&self, own: &OwnSk, slot: Slot<Registered>) {
        self.registry.join::<Self>(&self.stack.sockets, own, slot);
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
        // A connect binds an unbound socket; a disconnect may unbind one that was bound by
        // a send. A connected socket takes datagrams from its peer only.
        if let Some(ep) = self.endpoint_for(own, &native) {
            let (ip, port) = native.addrs().peer;
            ep.connected(&self.stack.plane.plane(), (port != 0).then_some((ip, port)));
        }
        self.slot.hooks().consumed(own, r)
    }

    /// The socket's endpoint over the fabric.
    fn endpoint(&self) -> Option<Arc<Endpoint>> {
        self.endpoint.lock().clone()
    }

    /// The endpoint for the address the native socket is bound to now: made (and entered
    /// in the control plane's table) at the first bind, send or connect; made again when a
    /// disconnect unbound the socket and a send bound it elsewhere. `None` while unbound,
    /// with the SCI path off, or without memory (the socket is then UDP only).
    fn endpoint_for(&self, own: &OwnSk, native: &Native) -> Option<Arc<Endpoint>> {
        let addr = listen_addr(own, native).filter(|a| a.port != 0);
        let old = self.endpoint();
        if old.as_ref().map(|e| Some(e.addr)) == Some(addr) {
            return old;
        }
        if old.is_some() {
            self.close_endpoint();
        }
        let addr =
            addr.filter(|_| sci_loopback_enabled() && !self.opted_out.load(Ordering::Relaxed))?;
        let ep = Endpoint::new(own.wake_token(), *native, addr).ok()?;
        // Another socket bound to the same address (SO_REUSEPORT) is the one reached; this
        // one still sends over the fabric.
        let _ = self.stack.plane.bind_datagram(addr, ep.clone());
        *self.endpoint.lock() = Some(ep.clone());
        Some(ep)
    }

    /// `setsockopt(SOL_SCI, ...)`: `SCI_NATIVE_FAMILY` before the socket is committed;
    /// `SCI_FABRIC` at any time (0 keeps the socket on UDP: its implicit connections end,
    /// and none is made while it stays 0). The stream socket's `SCI_SPIN_US` has no
    /// meaning here (`ENOPROTOOPT`).
    fn set_sci_option(&self, own: &OwnSk, optname: c_int, val: OptVal, len: c_uint) -> Result {
        let value = match optname as u32 {
            bindings::SCI_NATIVE_FAMILY | bindings::SCI_FABRIC => int_optval(val, len)?,
            _ => return Err(errno(bindings::ENOPROTOOPT)),
        };
        if optname as u32 == bindings::SCI_NATIVE_FAMILY {
            return self.slot.set_family(own, value);
        }
        if value != 0 && value != 1 {
            return Err(EINVAL);
        }
        self.opted_out.store(value == 0, Ordering::Relaxed);
        if value == 0 {
            self.close_endpoint();
        }
        Ok(())
    }

    /// Ends the socket's endpoint, if it has one: out of the control plane's table, its
    /// implicit connections ended (taken out of the spinlock first: closing sleeps).
    fn close_endpoint(&self) {
        let ep = self.endpoint.lock().take();
        if let Some(ep) = ep {
            ep.close(&self.stack);
        }
    }

    /// The socket's implicit connections and datagrams over SCI (none without an
    /// endpoint).
    fn counts(&self) -> DgramInfo {
        self.endpoint().map(|ep| ep.counts()).unwrap_or_default()
    }

    /// How the socket's datagrams go, by its counts `c`: over SCI (true, reason none)
    /// while an implicit connection is up, else natively with the reason (`no-fabric`,
    /// or `opted-out` after `SCI_FABRIC` 0). `SCI_INFO`, fdinfo and the registry's dump
    /// all say this.
    fn path(&self, c: &DgramInfo) -> (bool, FallbackReason) {
        if c.implicit_out + c.implicit_in > 0 {
            (true, FallbackReason::None)
        } else if self.opted_out.load(Ordering::Relaxed) {
            (false, FallbackReason::OptedOut)
        } else {
            (false, FallbackReason::NoFabric)
        }
    }

    /// `struct sci_info` as bytes: mode sci while an implicit connection is up, else
    /// native (reason `no-fabric`, or `opted-out` after `SCI_FABRIC` 0), in the native
    /// socket's state (`TCP_ESTABLISHED` when connected, as UDP keeps it, else
    /// `TCP_CLOSE`).
    fn info(&self) -> [u8; 16] {
        let native = self.native();
        let (sci, reason) = self.path(&self.counts());
        sci_info_bytes([
            sci_mode(sci),
            reason.as_u32(),
            native.family() as u32,
            u32::from(native.state()),
        ])
    }

    /// What a datagram of `len` bytes that may take the fabric asks of it (its destination,
    /// the source and the traffic class), and the size of the segments it is sent in (0:
    /// one datagram, `UDP_SEGMENT`): sent as given (no control message but the packet
    /// information, the traffic class and the segment size; no corking; no flag that
    /// changes its path), to an address UDP would take from this socket, in segments UDP
    /// would take (else `None`: UDP sends it, or reports the error it finds).
    fn fabric_destination(
        &self,
        native: &Native,
        msg: Msg,
        len: usize,
    ) -> Option<(Outgoing, usize)> {
        let odd = bindings::MSG_MORE
            | bindings::MSG_OOB
            | bindings::MSG_CONFIRM
            | bindings::MSG_PROBE
            | bindings::MSG_FASTOPEN
            | bindings::MSG_ZEROCOPY;
        if msg_flags(msg) & odd != 0 || !native.sends_plain() {
            return None;
        }
        let asks = send_asks(msg)?;
        let source = asks.source.map(|(addr, v4, ifindex)| SourceAsk {
            ip: if v4 {
                Ip::V4([addr[0], addr[1], addr[2], addr[3]])
            } else {
                Ip::V6(addr)
            },
            ifindex,
        });
        let (ip, port) = match SockAddr::of_msg(msg) {
            Some(addr) => {
                let family = u32::from(addr.family()?);
                let v6 = native.family() == bindings::AF_INET6 as c_int;
                // As UDP takes it: IPv4 names on an IPv4 socket, either on an IPv6 one.
                if family != bindings::AF_INET && !(v6 && family == bindings::AF_INET6) {
                    return None;
                }
                addr.ip_port()?
            }
            None => {
                let peer = native.addrs().peer;
                (peer.1 != 0).then_some(peer)?
            }
        };
        if port == 0 {
            return None;
        }
        // An IPv4-mapped destination is IPv4's: UDP sends it with the IPv4 options.
        let v4 = matches!(ip.canonical(), Ip::V4(_));
        let (own_tos, segment) = native.send_params(v4, asks.segment)?;
        let tos = match asks.tos {
            None => own_tos,
            Some((tos, as_v4)) if as_v4 == v4 => tos,
            // The other family's option, which UDP ignores: left to it.
            Some(_) => return None,
        };
        if segment != 0 && !segments_fit(segment, len, v4) {
            return None;
        }
        // One that UDP would hold to the route's MTU, which it knows and this path does not.
        if segment == 0 && !packet_fits(len, v4) && native.keeps_df(v4) {
            return None;
        }
        let out = Outgoing {
            dest: (ip, port),
            source,
            tos,
        };
        Some((out, segment))
    }

    /// Sends `len` bytes of `msg` over `out`'s implicit connection, one datagram per
    /// `segment` bytes (0: one datagram), as `UDP_SEGMENT` splits them: `None` sends the
    /// whole over UDP (no connection up). A connection that ends after some segments
    /// leaves the rest to UDP ([`Self::send_native`]), which segments them as asked; a fault in the caller's
    /// buffer stops the send at that segment (`EFAULT`), where UDP would send none.
    fn send_fabric(
        &self,
        (own, ep, native): (&OwnSk, &Endpoint, &Native),
        (out, segment): (Outgoing, usize),
        msg: Msg,
        len: usize,
    ) -> Option<Result<c_int>> {
        if segment == 0 || len <= segment {
            return ep.send(&self.stack, own, &out, msg, len);
        }
        let mut sent = 0;
        while sent < len {
            let n = segment.min(len - sent);
            match ep.send(&self.stack, own, &out, msg, n) {
                Some(Ok(_)) => sent += n,
                Some(Err(e)) => return Some(Err(e)),
                None if sent == 0 => return None,
                None => {
                    return Some(
                        self.send_native(own, native, msg, len - sent)
                            .map(|_| len as c_int),
                    )
                }
            }
        }
        Some(Ok(len as c_int))
    }

    /// Sends `len` bytes of `msg` over the native UDP socket, the error it reports taken
    /// as reported (`NativeHooks::consumed`).
    fn send_native(&self, own: &OwnSk, native: &Native, msg: Msg, len: usize) -> Result<c_int> {
        native.copy_alloc_flags_from(own.as_ptr());
        let r = native.sendmsg(msg, len);
        // The first send binds an unbound socket: from there on it has an endpoint.
        if r.is_ok() && self.endpoint().is_none() {
            self.endpoint_for(own, native);
        }
        self.slot.hooks().consumed(own, r)
    }

    /// `recvmsg` on a socket with implicit connections: a datagram from their rings or
    /// from the native socket, whichever is there; blocking, it waits for either.
    fn recv_merged(
        &self,
        own: &OwnSk,
        ep: &Endpoint,
        native: &Native,
        (msg, len, flags): (Msg, usize, c_int),
    ) -> Result<c_int> {
        let f = flags as u32;
        let peek = f & bindings::MSG_PEEK != 0;
        let nonblock = f & bindings::MSG_DONTWAIT != 0;
        let plane = self.stack.plane.plane();
        // The receive timeout, read once a read finds nothing (most find a datagram).
        let mut timeo = None;
        let dontwait = (f | bindings::MSG_DONTWAIT) as c_int;
        loop {
            // Datagrams in both places: the native socket's first while a new connection
            // settles (one sent over UDP before its destination's connection came up was
            // queued before any that took the connection, as a send on this machine queues
            // it before returning: the first datagrams over SCI do not overtake it), then
            // each in turn (neither starves the other).
            let peeked = ep.peeked();
            let native_first = match peeked {
                Peeked::Native => true,
                Peeked::Ring => false,
                Peeked::Nothing => native.readable() && ep.native_turn(),
            };
            for from_native in [native_first, !native_first] {
                if from_native {
                    if peeked != Peeked::Native && !native.readable() {
                        ep.took_native(None);
                        continue;
                    }
                    match native.recvmsg(msg, len, dontwait) {
                        Err(e) if e == EAGAIN => ep.took_native(None),
                        r => {
                            ep.took_native(r.is_ok().then_some(peek));
                            return r;
                        }
                    }
                } else if let Some(t) = ep.recv(&plane, own, msg, len, peek)? {
                    set_msg_name(msg, t.conn.peer.as_bytes());
                    // In UDP's order: the socket level's, then the IP header's.
                    native.put_drops(msg);
                    native.put_ip_cmsgs(msg, t.conn.local.as_bytes(), t.loopback, t.got.tos);
                    if t.got.copied < t.got.len {
                        set_msg_flags(msg, bindings::MSG_TRUNC);
                    }
                    let n = if f & bindings::MSG_TRUNC != 0 {
                        t.got.len
                    } else {
                        t.got.copied
                    };
                    return Ok(n as c_int);
                }
            }
            if peeked != Peeked::Nothing {
                // What was peeked at is gone (another reader took it): start afresh.
                ep.forget_peek();
                continue;
            }
            if native.readable() {
                continue;
            }
            let timeo = timeo.get_or_insert_with(|| own.rcvtimeo(nonblock));
            if native.read_shut() && *timeo != 0 {
                // After SHUT_RD a blocking read returns at once (UDP says 0).
                return native.recvmsg(msg, len, flags);
            }
            if *timeo == 0 {
                // Not waiting: ask the rings to ring at their next datagram (epoll).
                ep.any_ready(&plane);
                return Err(EAGAIN);
            }
            if ep.spin_before_sleep(own, || native.readable()) {
                continue;
            }
            // Before the sleep the rings are asked to ring at their next datagram; after a
            // wake-up a look that posts nothing comes first, as a datagram is most likely
            // there (the read withdraws the request it finds still posted), and only a
            // wake-up that found none posts again before sleeping on.
            let mut woken = false;
            let (r, wake_us) = own.wait_measured(timeo, || {
                let rings = (core::mem::replace(&mut woken, true) && ep.any_waiting())
                    || ep.any_ready(&plane);
                Ok(rings || native.readable() || native.read_shut())
            });
            ep.sleep_cost(wake_us);
            r?;
        }
    }
}

/// Whether a packet of `payload` bytes to an IPv4 (`v4`) or IPv6 destination, with its IP
/// and UDP headers, fits in 1500 bytes, Ethernet's MTU: the most a datagram that UDP holds
/// to the route's MTU (a segment, one with DF kept) may carry over SCI. UDP knows the
/// route's MTU (loopback's is 64 KiB) and this path does not: a longer one is left to UDP,
/// which sends or refuses it (`EMSGSIZE`).
fn packet_fits(payload: usize, v4: bool) -> bool {
    const MTU: usize = 1500;
    let headers = if v4 { 20 + 8 } else { 40 + 8 };
    headers + payload <= MTU
}

/// Whether a `UDP_SEGMENT` send of `len` bytes in segments of `segment` bytes is one UDP
/// takes without asking the route (`udp_send_skb()`): at most 128 segments
/// (`UDP_MAX_SEGMENTS`), at most UDP's longest datagram in all, and each segment's packet
/// within Ethernet's MTU ([`packet_fits`]).
fn segments_fit(segment: usize, len: usize, v4: bool) -> bool {
    const MAX_SEGMENTS: usize = 128;
    packet_fits(segment.min(len), v4)
        && len <= udp_max_payload(v4)
        && len.div_ceil(segment) <= MAX_SEGMENTS
}

/// `enum sci_mode` of a socket whose datagrams go over SCI (`sci`) or natively.
fn sci_mode(sci: bool) -> u32 {
    if sci {
        bindings::sci_mode_SCI_MODE_SCI
    } else {
        bindings::sci_mode_SCI_MODE_NATIVE
    }
}

/// The calls of the socket layer, forwarded to the native UDP socket (`proto_ops.rs`).
impl SocketOps for SciDgram {
    /// `bind(2)`. A failed bind leaves the socket uncommitted, as UDP lets a program try
    /// again.
    fn bind(&self, own: &OwnSk, addr: SockAddr) -> Result {
        self.slot.bind(own, addr)?;
        self.endpoint_for(own, &self.native());
        Ok(())
    }

    /// `sendmsg(2)`, `sendto(2)`, `sendmmsg(2)` and kernel senders. A send binds an
    /// unbound socket, so it commits.
    fn sendmsg(&self, own: &OwnSk, msg: Msg, len: usize) -> Result<c_int> {
        let native = self.slot.commit(own, SockAddr::of_msg(msg).as_ref())?;
        self.slot.hooks().sync_error(own, &native);
        if let Some(ep) = self.endpoint() {
            if let Some(out) = self.fabric_destination(&native, msg, len) {
                if let Some(r) = self.send_fabric((own, &ep, &native), out, msg, len) {
                    return r;
                }
            }
        }
        self.send_native(own, &native, msg, len)
    }

    /// `recvmsg(2)`, `recvfrom(2)`, `recvmmsg(2)` and kernel receivers.
    fn recvmsg(&self, own: &OwnSk, msg: Msg, len: usize, flags: c_int) -> Result<c_int> {
        let native = self.native();
        self.slot.hooks().sync_error(own, &native);
        let native_only = flags as u32 & (bindings::MSG_ERRQUEUE | bindings::MSG_OOB) != 0;
        let r = match self.endpoint().filter(|_| !native_only) {
            Some(ep) => self.recv_merged(own, &ep, &native, (msg, len, flags)),
            None => native.recvmsg(msg, len, flags),
        };
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
        if let Some(ep) = self.endpoint() {
            if ep.any_ready(&self.stack.plane.plane()) {
                mask |= EPOLLIN | EPOLLRDNORM;
            }
        }
        mask
    }

    /// `getsockname(2)` / `getpeername(2)`: the native socket's names.
    fn getname(&self, addr: *mut bindings::sockaddr, peer: c_int) -> Result<c_int> {
        self.native().getname(addr, peer)
    }

    /// `ioctl(2)` (`FIONREAD`: the next datagram's size, `SIOCOUTQ`, interface ioctls).
    fn ioctl(&self, cmd: c_uint, arg: c_ulong) -> Result<c_int> {
        // The datagram a read takes next (as `recv_merged` chooses it).
        let next = match (cmd, self.endpoint()) {
            (SIOCINQ, Some(ep)) => {
                let native = self.native();
                if native.readable() && ep.native_turn() {
                    None
                } else {
                    ep.next_len()
                }
            }
            _ => None,
        };
        match next {
            Some(len) => put_ioctl_int(arg, len as u64),
            None => self.native().ioctl(cmd, arg),
        }
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
        self.slot.setsockopt(own, level, optname, val, len)?;
        let Some(ep) = self.endpoint() else {
            return Ok(());
        };
        // A reader that now asks for control messages a datagram over SCI cannot carry
        // (timestamps, `IP_RECVTOS`, ...) takes no more datagrams from implicit
        // connections: those it has end (their senders go on over UDP), as
        // `Endpoint::attach` refuses new ones.
        if self.native().wants_cmsg() {
            ep.end_inbound(&self.stack.plane.plane());
        } else if level == bindings::SOL_SOCKET as c_int {
            // `SO_RCVBUF` bounds what waits in the rings too.
            ep.rcvbuf_changed();
        }
        Ok(())
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
            bindings::SCI_FABRIC => {
                let on = c_int::from(!self.opted_out.load(Ordering::Relaxed));
                put_option(&on.to_ne_bytes(), val, len)
            }
            _ => Err(errno(bindings::ENOPROTOOPT)),
        }
    }

    /// The registry's dump: the native socket's, in mode sci (with no fallback reason)
    /// while an implicit connection is up.
    fn diag(&self, own: &OwnSk) -> SockInfo {
        let c = self.counts();
        let (sci, reason) = self.path(&c);
        let mut info =
            SockInfo::of_native(own, &self.native(), reason, bindings::sock_type_SOCK_DGRAM);
        info.mode = sci_mode(sci);
        info.dgram = Some(c);
        info
    }

    /// The lines this socket adds to `/proc/PID/fdinfo/FD` (as a stream socket's, with
    /// its type), one `sci-implicit-conn:` line per implicit connection, and one
    /// `sci-implicit-starting:` line per outbound one still starting.
    fn fdinfo(&self) -> Result<CString> {
        let family = self.native().family_name();
        let c = self.counts();
        let (sci, reason) = self.path(&c);
        let (mode, reason) = (if sci { "sci" } else { "native" }, reason.name());
        let (ends, starting) = match self.endpoint() {
            Some(ep) => (ep.ends()?, ep.starting()?),
            None => (KVec::new(), KVec::new()),
        };
        CString::try_from_fmt(fmt!(
            "sci-mode:\t{mode}\nsci-fallback:\t{reason}\nsci-native-family:\t{family}\n\
             sci-type:\tdgram\nsci-implicit:\tout {} in {}\n\
             sci-datagrams:\tsent {} received {} dropped {}\n{}{}",
            c.implicit_out,
            c.implicit_in,
            c.sent,
            c.received,
            c.dropped,
            Lines(&ends),
            Lines(&starting)
        ))
    }

    /// `close(2)`: the native socket closes (and its queued datagrams go with it).
    fn release(&self, own: &OwnSk) {
        // First out of the registry: once removed, no dump looks at the socket.
        self.registry.leave(&self.stack.sockets);
        // Its connections end before the native socket goes (the endpoint reads it).
        self.close_endpoint();
        self.slot.release();
        own.set_state(bindings::TCP_CLOSE);
    }
}

/// Lines one after the other (fdinfo's `sci-implicit-conn:` and `sci-implicit-starting:`
/// lines).
struct Lines<'a, T>(&'a [T]);

impl<T: core::fmt::Display> core::fmt::Display for Lines<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.0.iter().try_for_each(|line| write!(f, "{line}"))
    }
}
