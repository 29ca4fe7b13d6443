// SPDX-License-Identifier: GPL-2.0

//! The SCI control plane of this node (seed §5.1.4): the connection table, the listeners
//! SCI connection requests can reach, the handshake, and the two kernel threads that
//! serve them: the listener (the inbound mailbox, and a sweep of the table every 100 ms)
//! and the connector (non-blocking connects, held bytes).
//!
//! Connection setup never touches the TCP byte stream: the connector allocates a slot and
//! its segment (initialising both of its areas with its generation and start cursor),
//! then mails a connect request; the listener kthread of the target node finds the
//! listening socket by address, port and namespace, sets up the server end, answers with
//! an accept carrying its queue offer and queues the connection for `accept()`; the
//! connector's node routes the answer to the waiting slot ([`handshake`]). Within this node
//! the connecting caller serves the request and its answer itself
//! ([`Plane::send_control`]). No listener, a full backlog or a bad offer is a reject, and
//! the socket falls back to its native TCP connect.
//!
//! Ownership: the plane owns the fabric, the [`Table`] and the threads. The fabric
//! delivers its events to the table; the threads hold the table and the fabric; what
//! needs both is done through a [`Plane`] view of them. Nothing here reaches the socket
//! layer: a non-blocking connect is handed over as a [`PendingConnect`], which the
//! socket layer implements.

mod bound;
pub(crate) mod connector;
mod datagram_ports;
mod handshake;
mod inbox;
mod listen_queue;
pub(crate) mod namespaces;
mod refusals;
mod table;

pub(crate) use connector::PendingConnect;
pub(crate) use datagram_ports::DatagramPort;
pub(crate) use listen_queue::ListenQueue;
pub(crate) use refusals::Destination;

use crate::conn::addr::{Addr, ListenAddr};
use crate::conn::{Conn, Release, MAX_CONNS, RING_LOG2};
use crate::fabric::{Fabric, FabricEvents, NodeId};
use crate::proto::frame::{ConnId, FRAME_SIZE};
use crate::proto::queue::{connect_start, QueueParams};
use crate::proto::ring::RingGeometry;
use crate::sys::kthread::{self, SharedMain, SharedThread};
use crate::sys::params::{hold_frames_for_test, refusal_ms, FabricParams};
use core::sync::atomic::Ordering;
use kernel::prelude::*;
use kernel::sync::Arc;
use kernel::time::Ktime;
use table::{Slot, Table, GRACE_MS, SWEEP_MS};

/// The control plane (one per module).
pub(crate) struct ControlPlane {
    /// Dropped first: stops the listener kthread.
    _listener: SharedThread<ListenerThread>,
    /// Dropped next: stops the connector kthread.
    _connector: SharedThread<ConnectorThread>,
    parts: Parts,
}

/// What the plane and both its kthreads share: the table and the fabric.
#[derive(Clone)]
struct Parts {
    table: Arc<Table>,
    fabric: Arc<dyn Fabric>,
}

impl Parts {
    fn plane(&self) -> Plane<'_> {
        Plane {
            table: &self.table,
            fabric: &*self.fabric,
        }
    }
}

/// The table and the fabric, as the plane's operations need them.
pub(crate) struct Plane<'a> {
    table: &'a Table,
    fabric: &'a dyn Fabric,
}

/// The listener kthread's body: serves the inbound mailbox and sweeps the table.
struct ListenerThread(Parts);

impl SharedMain for ListenerThread {
    fn main(&self) {
        let plane = self.0.plane();
        while !kthread::should_stop() {
            match plane.table.dequeue() {
                Some((from, bytes)) => plane.handle(from, &bytes),
                None => plane.table.wait_for_frames(),
            }
            plane.sweep();
        }
    }
}

/// The connector kthread's body (see [`connector`]).
struct ConnectorThread(Parts);

impl SharedMain for ConnectorThread {
    fn main(&self) {
        let plane = self.0.plane();
        plane.table.connector.run(&plane);
    }
}

impl ControlPlane {
    /// The control plane over the fabric `params` choose, with its threads started.
    pub(crate) fn new(params: &FabricParams) -> Result<Self> {
        let table = Arc::pin_init(Table::new()?, GFP_KERNEL)?;
        let events: Arc<dyn FabricEvents> = table.clone();
        let fabric = crate::fabric::select::open(events, params, MAX_CONNS)?;
        table.set_own_node(fabric.local_node());
        let parts = Parts { table, fabric };
        let listener = SharedThread::run(
            Arc::new(ListenerThread(parts.clone()), GFP_KERNEL)?,
            kernel::c_str!("sci_listener"),
        )?;
        let connector = SharedThread::run(
            Arc::new(ConnectorThread(parts.clone()), GFP_KERNEL)?,
            kernel::c_str!("sci_connector"),
        )?;
        Ok(Self {
            _listener: listener,
            _connector: connector,
            parts,
        })
    }

    /// The plane's operations (a datagram socket ends its implicit connections with them).
    pub(crate) fn plane(&self) -> Plane<'_> {
        self.parts.plane()
    }

    /// The network namespaces that publish their addresses beside the initial one.
    pub(crate) fn publishing(&self) -> &namespaces::Publishing {
        &self.parts.table.publishing
    }

    /// The fabric this node is on.
    pub(crate) fn fabric(&self) -> &dyn Fabric {
        &*self.parts.fabric
    }

    /// Makes a listening socket reachable for SCI connection requests to its address.
    pub(crate) fn listen(&self, queue: Arc<ListenQueue>) -> Result {
        let port = queue.addr.port;
        self.parts.table.listen(queue)?;
        // Connects to this port may find an SCI listener now.
        let node = self.parts.fabric.local_node();
        self.parts.table.refusals.lock().forget_port(node, port);
        Ok(())
    }

    /// Whether `what` refused an SCI connect less than `refusal_ms` ago: a connect to it
    /// falls back at once ([`refusals`]).
    pub(crate) fn refused_lately(&self, what: &Destination) -> bool {
        let now = Ktime::ktime_get().to_ns();
        self.parts.table.refusals.lock().refused(what, now)
    }

    /// `what` refused an SCI connect: remembered for `refusal_ms`.
    pub(crate) fn remember_refusal(&self, what: Destination) {
        let now = Ktime::ktime_get().to_ns();
        self.parts
            .table
            .refusals
            .lock()
            .remember(what, now, refusal_ms());
    }

    /// See [`Plane::send_control`].
    pub(crate) fn send_control(&self, node: NodeId, frame: &[u8; FRAME_SIZE]) -> Result {
        self.plane().send_control(node, frame)
    }

    /// Hands a socket with a pending SCI connect to the connector kthread. On `Err` (no
    /// memory) the caller finishes the connect itself.
    pub(crate) fn submit_connect(&self, pending: Arc<dyn PendingConnect>) -> Result {
        self.parts.table.connector.submit(pending)
    }

    /// A connecting end (see [`Plane::new_conn`]).
    pub(crate) fn new_conn(&self, peer_node: NodeId, local: Addr, peer: Addr) -> Result<Arc<Conn>> {
        self.plane().new_conn(peer_node, None, local, peer)
    }

    /// See [`Plane::free_conn`].
    pub(crate) fn free_conn(&self, conn: &Conn) {
        self.plane().free_conn(conn)
    }

    /// See [`Plane::unlisten`].
    pub(crate) fn unlisten(&self, queue: &ListenQueue) {
        self.plane().unlisten(queue)
    }

    /// Makes a bound datagram socket reachable for implicit connections to `addr`
    /// (`datagram_ports.rs`); `EADDRINUSE` when another socket bound there is.
    pub(crate) fn bind_datagram(&self, addr: ListenAddr, port: Arc<dyn DatagramPort>) -> Result {
        self.parts.table.datagram_ports.add(addr, port)?;
        let node = self.parts.fabric.local_node();
        self.parts
            .table
            .refusals
            .lock()
            .forget_port(node, addr.port);
        Ok(())
    }

    /// Makes a datagram socket unreachable (its connections are its own to end).
    pub(crate) fn unbind_datagram(&self, port: &Arc<dyn DatagramPort>) {
        self.parts
            .table
            .datagram_ports
            .remove(|p| datagram_ports::same_port(p, port))
    }
}

impl Plane<'_> {
    /// The fabric this node is on.
    pub(crate) fn fabric(&self) -> &dyn Fabric {
        self.fabric
    }

    /// Sends a control frame to `node`. A frame to this node is served at once, in the
    /// caller, as the listener kthread would serve it: a connect within this node is then
    /// requested, accepted and answered before `send_control` returns, with no switch to
    /// that thread and back (two wake-ups per connection). The frames a served frame
    /// sends are served the same way, so the depth is bounded by the handshake's (request,
    /// answer, close of an abandoned end). While a test holds the inbox
    /// (`test_hold_frames`) they queue behind what it holds.
    pub(crate) fn send_control(&self, node: NodeId, frame: &[u8; FRAME_SIZE]) -> Result {
        if node == self.fabric.local_node() && !hold_frames_for_test() {
            self.handle(node, frame);
            return Ok(());
        }
        self.fabric.send_control(node, frame)
    }

    /// Whether `conn`'s peer end is on this node.
    pub(crate) fn within_node(&self, conn: &Conn) -> bool {
        conn.peer_node == self.fabric.local_node()
    }

    /// The connection in `slot` (a doorbell channel).
    pub(crate) fn conn(&self, slot: u32) -> Option<Arc<Conn>> {
        self.table.conn(slot)
    }

    /// Allocates a slot and creates a connection end in it. A listener's end receives
    /// with its client's generation and start (`client`); a connecting end's are its
    /// slot's generation and a start that names it ([`connect_start`]).
    pub(crate) fn new_conn(
        &self,
        peer_node: NodeId,
        client: Option<(u32, u64)>,
        local: Addr,
        peer: Addr,
    ) -> Result<Arc<Conn>> {
        let id = {
            let mut g = self.table.conns.lock();
            let (slot, entry) = g
                .as_mut_slice()
                .iter_mut()
                .enumerate()
                .find(|(_, (_, c))| matches!(c, Slot::Free))
                .ok_or(ENOMEM)?;
            // Reserve the slot with a new generation; the connection is stored below.
            entry.0 = entry.0.wrapping_add(1).max(1);
            entry.1 = Slot::Reserved;
            ConnId {
                slot: slot as u32,
                generation: entry.0,
            }
        };
        let geometry = RingGeometry::from_log2(RING_LOG2).map_err(|_| EINVAL)?;
        let (generation, start) = client.unwrap_or_else(|| {
            let own = connect_start(self.fabric.local_node(), id.slot, id.generation);
            (id.generation, own)
        });
        let params = QueueParams {
            geometry,
            generation,
            start,
        };
        let conn = Conn::new(
            self.fabric,
            self.table.held.clone(),
            id,
            peer_node,
            params,
            local,
            peer,
        );
        let mut g = self.table.conns.lock();
        let entry = &mut g.as_mut_slice()[id.slot as usize];
        match conn {
            Ok(conn) => {
                entry.1 = Slot::Used(conn.clone());
                self.table.used.fetch_add(1, Ordering::Relaxed);
                Ok(conn)
            }
            Err(e) => {
                drop(g);
                self.fabric.unexport(id.slot);
                self.table.conns.lock().as_mut_slice()[id.slot as usize].1 = Slot::Free;
                Err(e)
            }
        }
    }
    /// Frees a connection's slot and withdraws its segment, once no peer end can store
    /// into it any more ([`Conn::release`]):
    ///
    /// - a connection no end on another node knows of (a rejected connect, a listener's
    ///   end whose accept never went out, a connection within this node) goes at once: a
    ///   client retrying a port nobody listens on, or a full backlog, must not use up
    ///   this node's memory;
    /// - an established connection whose peer end closed goes at once, its memory
    ///   reusable at once (the peer's close flags are its last stores into it);
    /// - one whose peer end is still open stays [`Slot::Closing`] until that end closes
    ///   (its close rings this slot's doorbell), as a TCP connection's resources stay
    ///   until both ends closed: so the region holds what is open, at any rate of
    ///   connections;
    /// - one whose peer end's state is not known (its node went down; a connect that
    ///   ended without taking an answer, whose answer may still come) stays exported for
    ///   [`GRACE_MS`], and its pages then wait out the fabric's quarantine: the peer node
    ///   must find this end, closed, rather than nothing, and a late store must not land
    ///   in a new connection's memory.
    pub(crate) fn free_conn(&self, conn: &Conn) {
        let release = if self.within_node(conn) {
            Release::Now
        } else {
            conn.release()
        };
        let next = match release {
            Release::Now | Release::PeerDone => None,
            Release::WhenPeerCloses => Some(None),
            Release::Grace => Some(Some(Ktime::ktime_get().to_ms().saturating_add(GRACE_MS))),
        };
        let old = {
            let mut g = self.table.conns.lock();
            match g.as_mut_slice().get_mut(conn.id.slot as usize) {
                Some(entry)
                    if entry.0 == conn.id.generation
                        && matches!(&entry.1, Slot::Used(c) if core::ptr::eq(&**c, conn)) =>
                {
                    self.table.used.fetch_sub(1, Ordering::Relaxed);
                    Some(match next {
                        Some(until_ms) => {
                            let Slot::Used(c) = core::mem::replace(&mut entry.1, Slot::Reserved)
                            else {
                                return;
                            };
                            self.table.closing.fetch_add(1, Ordering::Relaxed);
                            core::mem::replace(&mut entry.1, Slot::Closing { conn: c, until_ms })
                        }
                        // Reserved while the segment is withdrawn outside the lock: once
                        // the slot is free, a new connection may export its segment
                        // under the same channel.
                        None => core::mem::replace(&mut entry.1, Slot::Reserved),
                    })
                }
                _ => None,
            }
        };
        if old.is_some() && next.is_none() {
            self.fabric.unexport(conn.id.slot);
            self.table.set_free(conn.id.slot as usize);
        }
    }
    /// The listener kthread's periodic look at the table (every [`SWEEP_MS`], and at
    /// once when a closing slot's doorbell rang):
    ///
    /// - every connection whose doorbell is overdue is woken ([`Conn::sweep`]): a
    ///   doorbell lost on the way, whatever the cause, costs two periods at most, never a
    ///   hang;
    /// - every closing slot whose peer end has closed, or whose grace period is over, is
    ///   freed.
    pub(super) fn sweep(&self) {
        let now = Ktime::ktime_get().to_ms();
        let kicked = self.table.reclaim_now.swap(false, Ordering::AcqRel);
        let due = now.saturating_sub(self.table.last_sweep_ms.load(Ordering::Relaxed)) >= SWEEP_MS;
        if !due && !kicked {
            return;
        }
        if due {
            self.table.last_sweep_ms.store(now, Ordering::Relaxed);
            for port in self.table.datagram_ports.all().iter() {
                port.sweep(self);
            }
        }
        let used = due && self.table.used.load(Ordering::Relaxed) != 0;
        let closing = self.table.closing.load(Ordering::Relaxed) != 0;
        if !used && !closing {
            return;
        }
        for slot in 0..MAX_CONNS {
            // One slot at a time: the table's lock is not held while looking (which
            // takes the connection's mutex).
            let (conn, until_ms) = {
                let g = self.table.conns.lock();
                match g.as_slice().get(slot) {
                    Some((_, Slot::Used(c))) if used => (c.clone(), None),
                    Some((_, Slot::Closing { conn, until_ms })) if closing => {
                        (conn.clone(), Some(*until_ms))
                    }
                    _ => continue,
                }
            };
            match until_ms {
                None => {
                    if conn.sweep(self.fabric) {
                        self.table.connector.kick();
                    }
                }
                Some(until_ms) => {
                    let free = match conn.release() {
                        Release::Now | Release::PeerDone => true,
                        Release::WhenPeerCloses => false,
                        Release::Grace => until_ms.map_or(true, |t| t <= now),
                    };
                    if free {
                        self.reclaim(slot, &conn);
                    }
                }
            }
        }
    }
    /// Frees the closing slot `slot` if it still holds `conn`: its segment withdrawn, the
    /// slot free for a new connection.
    fn reclaim(&self, slot: usize, conn: &Arc<Conn>) {
        let old = {
            let mut g = self.table.conns.lock();
            match g.as_mut_slice().get_mut(slot) {
                Some(entry) if matches!(&entry.1, Slot::Closing { conn: c, .. } if Arc::ptr_eq(c, conn)) => {
                    Some(core::mem::replace(&mut entry.1, Slot::Reserved))
                }
                _ => None,
            }
        };
        if old.is_some() {
            self.table.closing.fetch_sub(1, Ordering::Relaxed);
            self.fabric.unexport(slot as u32);
            drop(old);
            self.table.set_free(slot);
        }
    }
    /// Removes a listener; connections still queued for it are aborted.
    pub(crate) fn unlisten(&self, queue: &ListenQueue) {
        self.table.unlisten(queue);
        for conn in queue.close().iter() {
            conn.close(self.fabric, true);
            self.free_conn(conn);
        }
    }
}
