// SPDX-License-Identifier: GPL-2.0

//! An `AF_SCI` stream socket.
//!
//! Every `AF_SCI` socket owns a native TCP socket ([`Native`]) and, until the SCI data
//! path exists, carries all its bytes over it: each operation is forwarded, and the
//! native socket's wake-ups are forwarded back, so the program sees TCP exactly.
//!
//! The native socket is born `AF_INET`: `socket(2)` does not tell the family which
//! address family a program wants. `SCI_NATIVE_FAMILY` (set by the preload for programs
//! that asked for `AF_INET6`) or else the first IPv6 address given to bind/connect
//! re-creates it as `AF_INET6`, replaying the options set so far. After the first bind,
//! connect or listen the native socket never changes.

mod connect;
mod failover;
mod listen;
mod options;
mod read_sock;

pub(crate) use listen::listen_addr;

use crate::config::rules::{Decision, FallbackReason, Ip, NodeId};
use crate::conn::addr::{effective_dest, is_link_local, to_wire, Addr, ListenAddr};
use crate::conn::{Conn, Gathering, Phase, SpinSetting};
use crate::control::ListenQueue;
use crate::fabric::memory::msg_flags;
use crate::proto::frame::Frame;
use crate::socket::handover;
use crate::socket::join::JoinPoint;
use crate::socket::native::{Native, NativeKind};
use crate::socket::native_slot::NativeSlot;
use crate::socket::proto_ops::{Membership, Registered, SocketOps};
use crate::socket::registry::{Slot, SockInfo};
use crate::socket::sk::OwnSk;
use crate::socket::sockaddr::{put_name, SockAddr};
use crate::socket::stack::Stack;
use crate::sys::bindings;
use crate::sys::errno::errno;
use crate::sys::net::{
    msg_has_control, msg_wants_inq, put_ioctl_int, put_tcp_inq, set_msg_inq, File, Msg, OptVal,
    EPOLLERR, EPOLLIN, EPOLLRDNORM, SIOCINQ,
};
use crate::sys::params::{connect_timeout, default_spin_us, sci_loopback_enabled, SPIN_US_MAX};
use crate::sys::sk_work::{SkWork, SkWorkFn};
use crate::sys::spinlock_bh::{new_spinlock_bh, SpinLockBh};
use crate::sys::wake::Wake;
use core::ffi::{c_char, c_int, c_long, c_uint};
use core::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU8, Ordering};
use kernel::fmt;
use kernel::prelude::*;
use kernel::str::CString;
use kernel::sync::{Arc, Mutex, SpinLock};

/// `SIOCOUTQ` (`TIOCOUTQ`) on x86 and most architectures.
const SIOCOUTQ: c_uint = 0x5411;

// The reasons of the protocol core are the uapi's.
const _: () = {
    use bindings::*;
    assert!(FallbackReason::None as u32 == sci_fallback_reason_SCI_FALLBACK_NONE);
    assert!(FallbackReason::NoFabric as u32 == sci_fallback_reason_SCI_FALLBACK_NO_FABRIC);
    assert!(FallbackReason::NotMapped as u32 == sci_fallback_reason_SCI_FALLBACK_NOT_MAPPED);
    assert!(FallbackReason::PortExcluded as u32 == sci_fallback_reason_SCI_FALLBACK_PORT_EXCLUDED);
    assert!(FallbackReason::PeerRejected as u32 == sci_fallback_reason_SCI_FALLBACK_PEER_REJECTED);
    assert!(FallbackReason::NoMemory as u32 == sci_fallback_reason_SCI_FALLBACK_NO_MEMORY);
    assert!(FallbackReason::Timeout as u32 == sci_fallback_reason_SCI_FALLBACK_TIMEOUT);
    assert!(FallbackReason::PeerTcp as u32 == sci_fallback_reason_SCI_FALLBACK_PEER_TCP);
    assert!(FallbackReason::Failover as u32 == sci_fallback_reason_SCI_FALLBACK_FAILOVER);
    assert!(FallbackReason::OptedOut as u32 == sci_fallback_reason_SCI_FALLBACK_OPTED_OUT);
    assert!(FallbackReason::COUNT as u32 == sci_fallback_reason___SCI_FALLBACK_MAX);
};

/// The state of one `AF_SCI` socket (lives inside its `struct sock`).
#[pin_data]
pub(crate) struct SciSock {
    /// Its native TCP socket; final once bound, connecting, connected or listening.
    #[pin]
    slot: NativeSlot,
    kern: bool,
    /// The SCI connection carrying this socket's bytes, when it has one. Taken with
    /// bottom halves off: a kernel reader's `read_sock` looks at it in atomic context.
    #[pin]
    sci: SpinLockBh<Option<Arc<Conn>>>,
    /// SCI connections waiting for `accept()`, when listening over SCI too.
    #[pin]
    listen_queue: SpinLock<Option<Arc<ListenQueue>>>,
    /// Where the TCP connections of this listener's failed-over SCI connections arrive
    /// (with `listen_queue`).
    #[pin]
    join: SpinLock<Option<Arc<JoinPoint>>>,
    /// A move of the SCI connection onto TCP (`sock/failover.rs`).
    #[pin]
    failover: Mutex<failover::Failover>,
    /// `failover`'s stage, for who may not sleep (`Stage::to_u8`).
    stage_now: AtomicU8,
    /// What a kernel reader's `read_sock` could not do without sleeping, done later in
    /// process context (`sock/read_sock.rs`); cancelled in `release`.
    #[pin]
    read_work: SkWork,
    /// What `read_work` is to do (`sock/read_sock.rs`, `LATER_*`).
    read_later: AtomicU8,
    /// A non-blocking SCI connect reported `EINPROGRESS`: the next connect returns 0.
    inprogress: AtomicBool,
    /// A non-blocking SCI connect waiting for its answer (the connector finishes it).
    #[pin]
    pending: Mutex<Option<connect::ConnectAttempt>>,
    /// `pending` is set: what poll, send and receive look at without sleeping.
    connecting: AtomicBool,
    /// Why the socket is native (`enum sci_fallback_reason`), decided at connect/accept.
    fallback: AtomicU32,
    /// Its entry in the socket registry.
    registry: Membership,
    /// `SCI_SPIN_US`, or [`SPIN_DEFAULT`] to follow the module parameter.
    spin_us: AtomicU32,
    /// `SCI_FABRIC` 0: the socket stays on its native TCP socket (connect and listen).
    opted_out: AtomicBool,
    /// The file went to the native socket (`handover.rs`): the program's calls go
    /// straight to TCP; only kernel users and calls already under way still come here.
    handed_over: AtomicBool,
    /// What the socket reaches below it: the control plane, the node map, the registry.
    stack: Arc<Stack>,
}

/// `SciSock::spin_us` when the socket follows the `spin_us` module parameter.
const SPIN_DEFAULT: u32 = u32::MAX;

/// What `accept()` found.
pub(crate) enum Accepted {
    /// A plain TCP connection.
    Native(Native),
    /// An SCI connection.
    Sci(Arc<Conn>),
}

impl SciSock {
    /// A socket without its native socket yet, over `stack`; `kern` for kernel-created
    /// sockets.
    pub(crate) fn new(kern: bool, stack: Arc<Stack>, read_again: SkWorkFn) -> impl PinInit<Self> {
        pin_init!(Self {
            slot <- NativeSlot::new(NativeKind::Tcp, kern),
            kern,
            sci <- new_spinlock_bh!(None, "SciSock::sci"),
            listen_queue <- kernel::new_spinlock!(None, "SciSock::listen_queue"),
            join <- kernel::new_spinlock!(None, "SciSock::join"),
            failover <- kernel::new_mutex!(failover::Failover::new(), "SciSock::failover"),
            stage_now: AtomicU8::new(failover::Stage::to_u8(None)),
            read_work <- SkWork::new(read_again),
            read_later: AtomicU8::new(0),
            inprogress: AtomicBool::new(false),
            pending <- kernel::new_mutex!(None, "SciSock::pending"),
            connecting: AtomicBool::new(false),
            fallback: AtomicU32::new(FallbackReason::NoFabric as u32),
            registry: Membership::new(),
            spin_us: AtomicU32::new(SPIN_DEFAULT),
            opted_out: AtomicBool::new(false),
            handed_over: AtomicBool::new(false),
            stack,
        })
    }

    /// What the socket reaches below it.
    pub(crate) fn stack(&self) -> &Arc<Stack> {
        &self.stack
    }

    /// Creates the native socket of a new socket (born `AF_INET`).
    pub(crate) fn init_native(&self, own: &OwnSk) -> Result {
        self.slot.create(own, bindings::AF_INET as c_int)?;
        own.stats().socket_created();
        Ok(())
    }

    /// Takes an accepted native socket; `listener` is the accepting socket. The peer came
    /// over TCP (an SCI peer would have come through the fabric's listener).
    pub(crate) fn adopt(&self, own: &OwnSk, native: Native, listener: &SciSock) {
        self.slot.mark_committed();
        self.slot
            .install(own, native, Some(listener.slot.hooks().saved()));
        own.stats().socket_created();
        self.fall_back(own, FallbackReason::PeerTcp);
        self.hand_over_if_connected(own, &native);
    }

    /// Once this socket's bytes go over a connected native socket (a fallback, or a TCP
    /// peer), hands the file to it, so the program's calls cost what TCP's cost
    /// (`handover.rs`). Kernel sockets have no file and keep forwarding.
    fn hand_over_if_connected(&self, own: &OwnSk, native: &Native) {
        if self.kern || self.handed_over.load(Ordering::Relaxed) {
            return;
        }
        // Only a native connection puts the native socket in these states: the native
        // socket of an SCI connection is bound, never connected.
        let state = u32::from(native.state());
        if state != bindings::TCP_ESTABLISHED && state != bindings::TCP_CLOSE_WAIT {
            return;
        }
        if handover::hand_over(own, *native) {
            self.handed_over.store(true, Ordering::Relaxed);
        }
    }

    /// How a blocking send or receive spins before it sleeps: the socket's
    /// `SCI_SPIN_US`, else the `spin_us` module parameter (adaptive unless set).
    fn spin(&self) -> SpinSetting {
        match self.spin_us.load(Ordering::Relaxed) {
            SPIN_DEFAULT => default_spin_us().map_or(SpinSetting::Adaptive, SpinSetting::Fixed),
            v => SpinSetting::Fixed(v),
        }
    }

    /// Enters the socket in the registry (`scictl sockets`), in `slot`.
    pub(crate) fn register(&self, own: &OwnSk, slot: Slot<Registered>) {
        self.registry.join::<Self>(&self.stack.sockets, own, slot);
    }

    /// Why the socket is native.
    fn fallback_reason(&self) -> FallbackReason {
        FallbackReason::from_u32(self.fallback.load(Ordering::Relaxed))
            .unwrap_or(FallbackReason::NoFabric)
    }

    /// The reason to report: none on the SCI data path.
    fn reason(&self, sci: bool) -> FallbackReason {
        if sci {
            FallbackReason::None
        } else {
            self.fallback_reason()
        }
    }

    /// Records (and counts) why this connection carries its bytes natively.
    fn fall_back(&self, own: &OwnSk, reason: FallbackReason) {
        self.fallback.store(reason as u32, Ordering::Relaxed);
        own.stats().fallback(reason);
    }

    /// The native socket in use.
    pub(crate) fn native(&self) -> Native {
        self.slot.native()
    }

    /// Settles the family for `addr` and commits the socket to it.
    fn commit(&self, own: &OwnSk, addr: Option<&SockAddr>) -> Result<Native> {
        self.slot.commit(own, addr)
    }

    /// See [`NativeHooks::sync_error`](crate::socket::native_hooks::NativeHooks::sync_error).
    fn sync_error(&self, own: &OwnSk, native: &Native) {
        self.slot.hooks().sync_error(own, native);
    }

    /// See [`NativeHooks::consumed`](crate::socket::native_hooks::NativeHooks::consumed).
    fn consumed<T>(&self, own: &OwnSk, r: Result<T>) -> Result<T> {
        self.slot.hooks().consumed(own, r)
    }

    /// `bind(2)`; a failed bind leaves the socket uncommitted.
    pub(crate) fn bind(&self, own: &OwnSk, addr: SockAddr) -> Result {
        self.slot.bind(own, addr)
    }

    /// The SCI connection, if this socket has one.
    pub(crate) fn conn(&self) -> Option<Arc<Conn>> {
        self.sci.lock().clone()
    }

    /// `poll(2)`, `select(2)`, `epoll(7)`: the native mask plus our pending error.
    pub(crate) fn poll(&self, own: &OwnSk, file: File) -> c_uint {
        if let Some(conn) = self.conn() {
            if conn.moving() {
                return self.poll_moved(own, &conn, file);
            }
            let mut mask = conn.poll(self.stack.plane.fabric(), own);
            // Zero-copy notifications wait in the native socket's error queue.
            if own.zerocopy() && self.native().error_queued() {
                mask |= EPOLLERR;
            }
            return mask;
        }
        if self.connecting.load(Ordering::Acquire) {
            // As TCP in SYN_SENT: nothing to report until the connect is finished.
            return 0;
        }
        let native = self.native();
        self.sync_error(own, &native);
        let (mut mask, error) = Self::native_poll(own, &native, file);
        // Out of the spinlock first: the join point's lock sleeps.
        let join = self.join.lock().clone();
        if let Some(j) = join.as_ref() {
            // Failed-over connections' TCP connections are no news for `accept()`.
            if mask & EPOLLIN != 0 && !j.queue_has_others(&native) {
                mask &= !(EPOLLIN | EPOLLRDNORM);
                j.judge_if_due(&self.stack.plane);
            }
        }
        let queued = self
            .listen_queue
            .lock()
            .as_ref()
            .is_some_and(|q| !q.is_empty());
        if queued || join.is_some_and(|j| j.has_stash()) {
            mask |= EPOLLIN | EPOLLRDNORM;
        }
        if error {
            mask |= EPOLLERR;
        }
        mask
    }

    /// The native socket's poll mask and whether we hold an error, read as one snapshot.
    ///
    /// A reset (a refused connect's RST) moves the native socket through error, state
    /// (TCP_CLOSE), shutdown and then our copy of the error; a poll that one lands in the
    /// middle of would mix the two sides and show POLLERR without the POLLOUT and POLLHUP
    /// that come with it (TCP's own poll reads its state and its shutdown apart, too).
    /// So our error is read before the native state, and the poll is taken again when
    /// the state moved while it ran.
    fn native_poll(own: &OwnSk, native: &Native, file: File) -> (c_uint, bool) {
        let mut tries = 0;
        loop {
            let state = native.state();
            let error = own.error() != 0;
            // smp_rmb(): pairs with the fence in `forward_error_report`.
            fence(Ordering::Acquire);
            let mask = native.poll_mask(file);
            fence(Ordering::Acquire);
            tries += 1;
            if native.state() == state || tries == 3 {
                return (mask, error);
            }
        }
    }

    /// `shutdown(2)`.
    pub(crate) fn shutdown(&self, own: &OwnSk, how: c_int) -> Result {
        // As TCP in SYN_SENT: a shutdown disconnects.
        self.cancel_pending(own);
        if let Some(conn) = self.conn() {
            let plane = &self.stack.plane;
            if !(0..=2).contains(&how) {
                return Err(EINVAL);
            }
            conn.shutdown(plane.fabric(), how)?;
            if conn.moving() && self.failover_stage() == Some(failover::Stage::Resumed) {
                // Moved onto TCP: the shutdown goes there too.
                let _ = self.native().shutdown(how);
            }
            return Ok(());
        }
        let native = self.native();
        if how == bindings::sock_shutdown_cmd_SHUT_RD as c_int
            || how == bindings::sock_shutdown_cmd_SHUT_RDWR as c_int
        {
            // A listener that stops listening stops taking SCI connections too.
            let queue = self.listen_queue.lock().take();
            if let Some(queue) = queue {
                self.stack.plane.unlisten(&queue);
            }
            let join = self.join.lock().take();
            if let Some(join) = join {
                join.close();
            }
        }
        self.sync_error(own, &native);
        native.shutdown(how)
    }

    /// `sendmsg(2)` and kernel senders (NBD's `kernel_sendmsg` with kvec/bvec).
    pub(crate) fn sendmsg(&self, own: &OwnSk, msg: Msg, len: usize) -> Result<c_int> {
        let nonblock = msg_flags(msg) & bindings::MSG_DONTWAIT != 0;
        self.wait_connected(own, &mut own.sndtimeo(nonblock))?;
        if let Some(conn) = self.conn() {
            let note = if msg_flags(msg) & bindings::MSG_ZEROCOPY != 0 {
                self.native().zerocopy_note(msg, len)?
            } else {
                None
            };
            let mut r = self.send_sci(own, &conn, msg, len);
            if !matches!(r, Ok(n) if n as usize == len) && conn.moving() {
                // The fabric path was lost: the rest goes over TCP once the move is done,
                // under the same notification.
                let done = r.map_or(0, |n| n as usize);
                r = self.send_moved(own, &conn, msg, len, done, note.as_ref());
            }
            if let Some(note) = note {
                note.post(r.as_ref().map_or(0, |&n| n as usize));
            }
            return r;
        }
        let native = self.native();
        self.hand_over_if_connected(own, &native);
        self.sync_error(own, &native);
        native.copy_alloc_flags_from(own.as_ptr());
        let r = native.sendmsg(msg, len);
        self.consumed(own, r)
    }

    /// A send into the SCI connection's ring, as `msg`'s flags and the socket's
    /// options say.
    fn send_sci(&self, own: &OwnSk, conn: &Conn, msg: Msg, len: usize) -> Result<c_int> {
        let flags = msg_flags(msg) as c_int;
        let nonblock = flags & bindings::MSG_DONTWAIT as c_int != 0;
        // TCP_NODELAY and TCP_CORK live on the native socket (setsockopt goes there).
        let nagle = self.native().nagle();
        let how = Gathering {
            nodelay: nagle.nodelay,
            cork: nagle.cork,
            more: flags & bindings::MSG_MORE as c_int != 0,
        };
        conn.send(
            self.stack.plane.fabric(),
            own,
            msg,
            len,
            flags,
            how,
            (nonblock, self.spin()),
        )
    }

    /// `recvmsg(2)` and kernel receivers.
    pub(crate) fn recvmsg(&self, own: &OwnSk, msg: Msg, len: usize, flags: c_int) -> Result<c_int> {
        let nonblock = flags & bindings::MSG_DONTWAIT as c_int != 0;
        self.wait_connected(own, &mut own.rcvtimeo(nonblock))?;
        if let Some(conn) = self.conn() {
            let plane = &self.stack.plane;
            if flags & bindings::MSG_ERRQUEUE as c_int == 0 {
                let nonblock = flags & bindings::MSG_DONTWAIT as c_int != 0;
                let r = conn.recv(
                    plane.fabric(),
                    own,
                    msg,
                    len,
                    flags,
                    (nonblock, self.spin()),
                );
                if let Ok(n) = r {
                    // What TCP adds to a read, in its order: the timestamp of the bytes read,
                    // then the bytes left, as `TCP_INQ`'s message and for io_uring.
                    let control = msg_has_control(msg);
                    if control && n > 0 {
                        own.put_rx_timestamp(msg);
                    }
                    let cm_inq = control && self.native().recvmsg_inq();
                    let wants_inq = msg_wants_inq(msg);
                    if cm_inq || wants_inq {
                        let inq = conn.inq_hint();
                        if cm_inq {
                            put_tcp_inq(msg, inq);
                        }
                        if wants_inq {
                            set_msg_inq(msg, inq);
                        }
                    }
                }
                return match r {
                    // The ring is empty and the fabric path lost: the rest comes over TCP.
                    Err(e) if e == errno(bindings::ENOTCONN) && conn.moving() => {
                        self.recv_moved(own, &conn, msg, len, flags)
                    }
                    r => r,
                };
            }
        }
        let native = self.native();
        self.hand_over_if_connected(own, &native);
        self.sync_error(own, &native);
        native.copy_alloc_flags_from(own.as_ptr());
        let r = native.recvmsg(msg, len, flags);
        // TCP moved its peek offset; `getsockopt` reads ours.
        own.set_peek_off(native.peek_off());
        self.consumed(own, r)
    }

    /// `getsockname`/`getpeername`: an SCI connection's names, else the native socket's.
    pub(crate) fn getname(&self, addr: *mut bindings::sockaddr, peer: c_int) -> Result<c_int> {
        match self
            .conn()
            .map(|c| if peer != 0 { c.peer } else { c.local })
        {
            Some(name) => Ok(put_name(addr, name.as_bytes())),
            None => self.native().getname(addr, peer),
        }
    }

    /// `SIOCGSTAMP` and friends: the native socket's.
    pub(crate) fn gettstamp(
        &self,
        stamp: *mut core::ffi::c_void,
        timeval: bool,
        time32: bool,
    ) -> Result<c_int> {
        self.native().gettstamp(stamp, timeval, time32)
    }

    /// `ioctl(2)`: `SIOCINQ`/`SIOCOUTQ` answered from the queues of an SCI connection,
    /// everything else by the native socket.
    pub(crate) fn ioctl(&self, cmd: c_uint, arg: core::ffi::c_ulong) -> Result<c_int> {
        let Some(conn) = self.conn() else {
            return self.native().ioctl(cmd, arg);
        };
        let value = match cmd {
            SIOCINQ => conn.inq(),
            SIOCOUTQ => conn.outq(),
            c if c == bindings::SIOCOUTQNSD => conn.unsent(),
            _ => return self.native().ioctl(cmd, arg),
        };
        put_ioctl_int(arg, value)
    }

    /// The lines this socket adds to `/proc/PID/fdinfo/FD`, so an admin (and the tests) can
    /// see that a program's socket really is `AF_SCI`, and how it carries its bytes; an SCI
    /// connection also names its two ends (`sci-conn:`: the peer's node, this end's channel
    /// and generation, the peer end's channel), which is where each end's segment is in the
    /// region's export directories.
    pub(crate) fn fdinfo(&self) -> Result<CString> {
        let conn = self.conn();
        let family = self.native().family_name();
        let reason = self.reason(conn.is_some()).name();
        match conn {
            None => CString::try_from_fmt(fmt!(
                "sci-mode:\tnative\nsci-fallback:\t{reason}\nsci-native-family:\t{family}\n"
            )),
            Some(conn) => {
                let (recv, send) = conn.spin_histories();
                CString::try_from_fmt(fmt!(
                    "sci-mode:\tsci\nsci-fallback:\t{reason}\nsci-native-family:\t{family}\n\
                     sci-conn:\t{}\nsci-spin:\trecv {recv}; send {send}\n",
                    conn.ends()
                ))
            }
        }
    }

    /// What the netlink socket dump reports of this socket.
    pub(crate) fn diag(&self, own: &OwnSk) -> SockInfo {
        let mut info = SockInfo::of_native(
            own,
            &self.native(),
            self.fallback_reason(),
            bindings::sock_type_SOCK_STREAM,
        );
        if let Some(conn) = self.conn() {
            info.local = conn.local.ip_port().or(info.local);
            info.peer = conn.peer.ip_port();
            info.mode = bindings::sci_mode_SCI_MODE_SCI;
            info.fallback = FallbackReason::None;
            info.state = bindings::TCP_ESTABLISHED as u8;
            info.queue_fill = u32::try_from(conn.inq()).unwrap_or(u32::MAX);
            info.node = Some(conn.peer_node.into());
            info.recv_q = info.queue_fill;
            info.send_q = u32::try_from(conn.outq()).unwrap_or(u32::MAX);
        } else {
            // A listener's SCI connections waiting for accept() count as TCP's do.
            let queue = self.listen_queue.lock().clone();
            if let Some(queue) = queue {
                let waiting = u32::try_from(queue.len()).unwrap_or(u32::MAX);
                info.recv_q = info.recv_q.saturating_add(waiting);
            }
        }
        info
    }

    /// `close(2)`: the native socket closes as TCP does (with `SO_LINGER` if set).
    pub(crate) fn release(&self, own: &OwnSk) {
        // First out of the registry: once removed, no dump looks at the socket.
        self.registry.leave(&self.stack.sockets);
        // A kernel reader let go of the socket before its release; its last deferred
        // read finishes before anything it uses goes.
        self.read_work.cancel();
        self.cancel_pending(own);
        self.leave_join_point();
        {
            let plane = &self.stack.plane;
            // Taken out first: the spinlock must not be held while closing (which sleeps).
            let conn = self.sci.lock().take();
            if let Some(conn) = conn {
                conn.close(plane.fabric(), own.linger_zero());
                plane.free_conn(&conn);
            }
            let queue = self.listen_queue.lock().take();
            if let Some(queue) = queue {
                plane.unlisten(&queue);
            }
            // Before the native listener goes: the join point stops using it.
            let join = self.join.lock().take();
            if let Some(join) = join {
                join.close();
            }
        }
        let native = self.native();
        if self.handed_over.load(Ordering::Relaxed) {
            handover::take_back(own, native);
        }
        self.slot.release();
        own.set_state(bindings::TCP_CLOSE);
    }
}

/// The calls a stream socket shares with a datagram socket (`proto_ops.rs`), answered by the
/// methods above.
impl SocketOps for SciSock {
    fn bind(&self, own: &OwnSk, addr: SockAddr) -> Result {
        SciSock::bind(self, own, addr)
    }

    fn getname(&self, addr: *mut bindings::sockaddr, peer: c_int) -> Result<c_int> {
        SciSock::getname(self, addr, peer)
    }

    fn poll(&self, own: &OwnSk, file: File) -> c_uint {
        SciSock::poll(self, own, file)
    }

    fn ioctl(&self, cmd: c_uint, arg: core::ffi::c_ulong) -> Result<c_int> {
        SciSock::ioctl(self, cmd, arg)
    }

    fn gettstamp(
        &self,
        stamp: *mut core::ffi::c_void,
        timeval: bool,
        time32: bool,
    ) -> Result<c_int> {
        SciSock::gettstamp(self, stamp, timeval, time32)
    }

    fn shutdown(&self, own: &OwnSk, how: c_int) -> Result {
        SciSock::shutdown(self, own, how)
    }

    fn setsockopt(
        &self,
        own: &OwnSk,
        level: c_int,
        name: c_int,
        val: OptVal,
        len: c_uint,
    ) -> Result {
        SciSock::setsockopt(self, own, level, name, val, len)
    }

    fn getsockopt(&self, level: c_int, name: c_int, val: *mut c_char, len: *mut c_int) -> Result {
        SciSock::getsockopt(self, level, name, val, len)
    }

    fn sendmsg(&self, own: &OwnSk, msg: Msg, len: usize) -> Result<c_int> {
        SciSock::sendmsg(self, own, msg, len)
    }

    fn recvmsg(&self, own: &OwnSk, msg: Msg, len: usize, flags: c_int) -> Result<c_int> {
        SciSock::recvmsg(self, own, msg, len, flags)
    }

    fn fdinfo(&self) -> Result<CString> {
        SciSock::fdinfo(self)
    }

    fn diag(&self, own: &OwnSk) -> SockInfo {
        SciSock::diag(self, own)
    }

    fn release(&self, own: &OwnSk) {
        SciSock::release(self, own)
    }
}
