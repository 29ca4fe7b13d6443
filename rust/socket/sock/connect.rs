// SPDX-License-Identifier: GPL-2.0

//! `connect(2)` of an `AF_SCI` socket: the connect-time decision (node map and port rules),
//! the SCI handshake, and the fallback to the native TCP connect.
//!
//! A blocking connect runs the handshake in the caller: the request is mailed and the
//! caller sleeps until the listener's answer arrives (or one second passes). A
//! non-blocking connect mails the request and returns `EINPROGRESS`, as TCP does after its
//! SYN; the connector kthread (`control/connector.rs`) finishes it. Either way, a reject or a
//! timeout falls back to the native TCP connect from the same bound address, so the
//! program sees a single connect. Within this node the listener's answer comes before the
//! request's mailing returns (`Plane::send_control`), so neither kind of connect waits.

use super::*;
use crate::config::host::route_source;
use crate::control::{Destination, PendingConnect};
use crate::sys::params::CONNECT_TIMEOUT_MS;
use kernel::time::Ktime;

/// A non-blocking SCI connect in progress.
pub(super) struct ConnectAttempt {
    /// The connection end waiting for the listener's answer.
    conn: Arc<Conn>,
    /// The address `connect()` was given, for the native connect of a fallback.
    addr: Addr,
    /// When to give up waiting for the answer (`ktime_get` nanoseconds).
    deadline_ns: i64,
}

/// How a connect attempt goes on after the decision.
enum Path {
    /// Connected over SCI.
    Sci,
    /// The SCI request is out; the connector kthread finishes the connect.
    Pending,
    /// The native TCP connect follows (the reason recorded).
    Native,
}

impl SciSock {
    /// `connect(2)`, blocking or not (`flags` holds `O_NONBLOCK`). A connection the node
    /// map sends to a node the fabric reaches (by default: an address of this node over
    /// the loopback fabric) tries the SCI path first; any failure there falls back to the
    /// native TCP connect, from the same bound address and port.
    ///
    /// `hold` gives a counted reference to this socket for the connector kthread, which
    /// finishes a non-blocking SCI connect (the family's adapter knows how to make one).
    pub(crate) fn connect(
        &self,
        own: &OwnSk,
        addr: SockAddr,
        flags: c_int,
        hold: &dyn Fn() -> Result<Arc<dyn PendingConnect>>,
    ) -> Result {
        if addr.family() == Some(bindings::AF_UNSPEC as u16) {
            // As TCP's disconnect: the connection (or the attempt) is aborted, the peer
            // sees a reset, and the socket may connect again.
            self.cancel_pending(own);
            let conn = self.sci.lock().take();
            if let Some(conn) = conn {
                let plane = &self.stack.plane;
                conn.close(plane.fabric(), true);
                plane.free_conn(&conn);
                own.set_state(bindings::TCP_CLOSE);
                return Ok(());
            }
        }
        if self.connecting.load(Ordering::Acquire) {
            // As TCP in SYN_SENT.
            return Err(errno(bindings::EALREADY));
        }
        if self.conn().is_some() {
            return if self.inprogress.swap(false, Ordering::AcqRel) {
                Ok(())
            } else {
                Err(errno(bindings::EISCONN))
            };
        }
        let native = self.commit(own, Some(&addr))?;
        // A new attempt (not the repeated call of a non-blocking connect in progress)
        // decides its path by the node map and the port rules.
        if u32::from(native.state()) == bindings::TCP_CLOSE && !native.connect_started() {
            if let Some((dest, port)) = addr.ip_port() {
                let nonblock = flags & bindings::O_NONBLOCK as c_int != 0;
                match self.choose_path(own, &native, &addr, (dest, port), nonblock, hold) {
                    Path::Sci if nonblock => {
                        // As TCP: a non-blocking connect reports EINPROGRESS even when
                        // it completed at once; POLLOUT and SO_ERROR 0 tell the rest.
                        self.inprogress.store(true, Ordering::Release);
                        return Err(errno(bindings::EINPROGRESS));
                    }
                    Path::Sci => return Ok(()),
                    Path::Pending => return Err(errno(bindings::EINPROGRESS)),
                    Path::Native => {}
                }
            }
        }
        self.sync_error(own, &native);
        let r = native.connect(addr, flags);
        if r.is_ok() {
            self.hand_over_if_connected(own, &native);
        }
        self.consumed(own, r)
    }

    /// The connect-time decision for a new connection attempt to `dest:port`.
    fn choose_path(
        &self,
        own: &OwnSk,
        native: &Native,
        addr: &SockAddr,
        (dest, port): (Ip, u16),
        nonblock: bool,
        hold: &dyn Fn() -> Result<Arc<dyn PendingConnect>>,
    ) -> Path {
        let decision = if self.opted_out.load(Ordering::Relaxed) {
            Decision::Native(FallbackReason::OptedOut)
        } else {
            self.stack.decide(own.net(), dest, port)
        };
        let started = match decision {
            Decision::Sci(node) => self.try_sci(own, native, (dest, port), node),
            Decision::Native(reason) => Err(reason),
        };
        let settled = match started {
            // Within this node the answer came with the request: settle here.
            Ok(conn) if conn.phase() != Phase::Connecting => self.settle(own, conn),
            Ok(conn) if nonblock => match self.hand_to_connector(own, addr, conn, hold) {
                Ok(()) => return Path::Pending,
                // The connector cannot take it: finish here.
                Err(conn) => self.await_answer(own, conn),
            },
            Ok(conn) => self.await_answer(own, conn),
            Err(reason) => Err(reason),
        };
        match settled {
            Ok(()) => Path::Sci,
            Err(reason) => {
                self.fall_back(own, reason);
                Path::Native
            }
        }
    }

    /// Starts the SCI connect to `dest:port` on `node`, or says why it is not possible.
    /// The fabric must reach `node` (the loopback fabric reaches this node only, and only
    /// while `sci_loopback` is on; an inter-VM fabric reaches the nodes that joined its
    /// region and are alive).
    fn try_sci(
        &self,
        own: &OwnSk,
        native: &Native,
        (dest, port): (Ip, u16),
        node: NodeId,
    ) -> core::result::Result<Arc<Conn>, FallbackReason> {
        let plane = &self.stack.plane;
        let node = u16::try_from(node).map_err(|_| FallbackReason::NoFabric)?;
        let local = node == plane.fabric().local_node();
        // Scoped IPv6 addresses need an interface the fabric cannot name.
        if !plane.fabric().reaches(node)
            || (local && !sci_loopback_enabled())
            || is_link_local(dest)
        {
            return Err(FallbackReason::NoFabric);
        }
        let dest = if local { effective_dest(dest) } else { dest };
        // No AF_SCI listener there a moment ago: TCP at once (`control/refusals.rs`).
        if plane.refused_lately(&self.destination(own, node, (dest, port))) {
            own.stats().refusal_remembered();
            return Err(FallbackReason::PeerRejected);
        }
        self.send_request(own, native, node, local, (dest, port))
    }

    /// The destination an SCI connect request to `dest:port` on `node` names: its
    /// listener's address and port, in this socket's namespace on this node and in the
    /// initial one on another.
    fn destination(
        &self,
        own: &OwnSk,
        node: crate::fabric::NodeId,
        (dest, port): (Ip, u16),
    ) -> Destination {
        let local = node == self.stack.plane.fabric().local_node();
        Destination {
            node,
            ip: dest.canonical(),
            port,
            namespace: if local { own.namespace().0 } else { 0 },
            datagram: false,
        }
    }

    /// Binds the native socket and mails the SCI connect request to the listener of
    /// `dest:port` on `node`. The native socket is bound to the source address TCP would
    /// use (for an address of this node, that address itself; for another node's, the
    /// preferred source of the route to it) and an ephemeral port from the TCP port space,
    /// so that the names read as with TCP and a fallback connects from the same address.
    fn send_request(
        &self,
        own: &OwnSk,
        native: &Native,
        node: crate::fabric::NodeId,
        local: bool,
        (dest, port): (Ip, u16),
    ) -> core::result::Result<Arc<Conn>, FallbackReason> {
        let no_fabric = |_| FallbackReason::NoFabric;
        let plane = &self.stack.plane;
        let v6 = native.family() == bindings::AF_INET6 as c_int;
        let source = || {
            if local {
                Ok(dest)
            } else {
                route_source(own.net(), dest).map_err(no_fabric)
            }
        };
        let (local_ip, src_port) = match native.addrs().local {
            (_, 0) => {
                let mut bound = Addr::inet(source()?, 0, v6);
                let src = bound.as_mut_bytes();
                native
                    .bind(SockAddr::new(src.as_mut_ptr().cast(), src.len() as c_int))
                    .map_err(no_fabric)?;
                native.addrs().local
            }
            // Bound to the wildcard address by the program: the source address is the one
            // TCP would choose.
            (ip, port) if ip.is_unspecified() => (source()?, port),
            bound => bound,
        };
        // Another node's listeners are matched in its initial namespace (cookie 0): our
        // namespace cookies mean nothing there.
        let namespace = if local { own.namespace().0 } else { 0 };
        let conn = plane
            .new_conn(
                node,
                Addr::inet(local_ip, src_port, v6),
                Addr::inet(dest, port, v6),
            )
            .map_err(|e| {
                if e == ENOMEM {
                    FallbackReason::NoMemory
                } else {
                    FallbackReason::NoFabric
                }
            })?;
        conn.set_owner(own.wake_token());
        let request = Frame::connect_request(
            conn.id,
            (to_wire(local_ip), src_port),
            (to_wire(dest), port, namespace),
            conn.offer(),
        )
        .encode_bytes();
        if plane.send_control(node, &request).is_err() {
            self.abandon(&conn);
            return Err(FallbackReason::NoFabric);
        }
        Ok(conn)
    }

    /// A blocking connect: waits for the listener's answer (at most a second).
    fn await_answer(
        &self,
        own: &OwnSk,
        conn: Arc<Conn>,
    ) -> core::result::Result<(), FallbackReason> {
        let mut timeo = connect_timeout();
        // A signal cuts the wait short: the attempt then counts as timed out.
        let _ = own.wait(&mut timeo, || Ok(conn.phase() != Phase::Connecting));
        self.settle(own, conn)
    }

    /// Ends an SCI connect attempt by its answer: connected, or the reason to fall back
    /// (the connection end is gone then).
    fn settle(&self, own: &OwnSk, conn: Arc<Conn>) -> core::result::Result<(), FallbackReason> {
        match conn.phase() {
            Phase::Established => {
                own.set_state(bindings::TCP_ESTABLISHED);
                *self.sci.lock() = Some(conn);
                self.fallback
                    .store(FallbackReason::None as u32, Ordering::Relaxed);
                own.stats().sci_connection();
                Ok(())
            }
            phase => {
                self.abandon(&conn);
                if phase == Phase::NoListener {
                    if let Some(dest) = conn.peer.ip_port() {
                        let what = self.destination(own, conn.peer_node, dest);
                        self.stack.plane.remember_refusal(what);
                    }
                }
                Err(match phase {
                    Phase::Refused | Phase::NoListener => FallbackReason::PeerRejected,
                    Phase::NoRoom => FallbackReason::NoMemory,
                    // No answer in time, the node went down first, or a signal cut the
                    // wait short.
                    _ => FallbackReason::Timeout,
                })
            }
        }
    }

    /// Gives up an SCI connection end that never carried bytes.
    fn abandon(&self, conn: &Conn) {
        {
            let plane = &self.stack.plane;
            conn.close(plane.fabric(), true);
            plane.free_conn(conn);
        }
    }

    /// A non-blocking connect: the connector kthread waits for the answer. `Err` gives
    /// the connection back when the connector cannot take the socket.
    fn hand_to_connector(
        &self,
        own: &OwnSk,
        addr: &SockAddr,
        conn: Arc<Conn>,
        hold: &dyn Fn() -> Result<Arc<dyn PendingConnect>>,
    ) -> core::result::Result<(), Arc<Conn>> {
        let plane = &self.stack.plane;
        let deadline_ns = Ktime::ktime_get()
            .to_ns()
            .saturating_add(CONNECT_TIMEOUT_NS);
        let addr = Addr::from_bytes(addr.bytes().unwrap_or(&[]));
        *self.pending.lock() = Some(ConnectAttempt {
            conn,
            addr,
            deadline_ns,
        });
        own.set_state(bindings::TCP_SYN_SENT);
        self.connecting.store(true, Ordering::Release);

        let submitted = hold().and_then(|held| plane.submit_connect(held));
        if submitted.is_err() {
            self.connecting.store(false, Ordering::Release);
            own.set_state(bindings::TCP_CLOSE);
            return match self.pending.lock().take() {
                Some(p) => Err(p.conn),
                None => Ok(()),
            };
        }
        Ok(())
    }

    /// The connector kthread's step for this socket: finishes a non-blocking SCI connect
    /// whose answer arrived or whose time ran out (or any, when `force`). Returns true
    /// when nothing is pending any more (finished, or the socket was closed).
    pub(crate) fn connect_step(&self, own: &OwnSk, force: bool) -> bool {
        let mut pending = self.pending.lock();
        let Some(p) = pending.as_ref() else {
            return true;
        };
        let waiting = p.conn.phase() == Phase::Connecting;
        if waiting && !force && Ktime::ktime_get().to_ns() < p.deadline_ns {
            return false;
        }
        let Some(p) = pending.take() else {
            return true;
        };
        match self.settle(own, p.conn) {
            Ok(()) => {
                // The next connect() returns 0, as after TCP's handshake.
                self.inprogress.store(true, Ordering::Release);
            }
            Err(reason) => {
                self.fall_back(own, reason);
                own.set_state(bindings::TCP_CLOSE);
                let mut addr = p.addr;
                let bytes = addr.as_mut_bytes();
                let r = self.native().connect(
                    SockAddr::new(bytes.as_mut_ptr().cast(), bytes.len() as c_int),
                    bindings::O_NONBLOCK as c_int,
                );
                // EINPROGRESS: the native socket reports the outcome through its
                // forwarded callbacks (poll, SO_ERROR, the next connect()).
                match r {
                    Err(e) if e != errno(bindings::EINPROGRESS) => own.set_error(-e.to_errno()),
                    _ => {}
                }
            }
        }
        // Only now does the socket report its own state again (poll, send, recv): the SCI
        // connection, or the native connect started above. Before, poll would have seen
        // a closed, unconnected native socket (or the fallback's error half-reported).
        self.connecting.store(false, Ordering::Release);
        drop(pending);
        own.wake(Wake::State);
        own.wake(Wake::Writable);
        true
    }

    /// Drops a non-blocking SCI connect still in progress (close, shutdown, disconnect).
    pub(super) fn cancel_pending(&self, own: &OwnSk) {
        let p = self.pending.lock().take();
        if let Some(p) = p {
            self.abandon(&p.conn);
            self.connecting.store(false, Ordering::Release);
            own.set_state(bindings::TCP_CLOSE);
        }
    }

    /// Before a send or receive: waits while a non-blocking SCI connect is in progress
    /// (`EAGAIN` for a non-blocking call), as TCP waits in SYN_SENT.
    pub(super) fn wait_connected(&self, own: &OwnSk, timeo: &mut c_long) -> Result {
        if !self.connecting.load(Ordering::Acquire) {
            return Ok(());
        }
        own.wait(timeo, || Ok(!self.connecting.load(Ordering::Acquire)))
    }
}

/// How long an SCI connect waits for the listener's answer before falling back
/// (nanoseconds; as `connect_timeout()` for blocking connects).
const CONNECT_TIMEOUT_NS: i64 = CONNECT_TIMEOUT_MS as i64 * 1_000_000;
