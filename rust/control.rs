// SPDX-License-Identifier: GPL-2.0

//! The SCI control plane of this node: the connection table (slots whose index is the
//! doorbell channel), the `AF_SCI` listeners that SCI connection requests can reach, the
//! inbound mailbox, and the listener kthread that serves it (seed §5.1.4).
//!
//! Connection setup never touches the TCP byte stream: the connector allocates a slot and
//! its segment (initialising both of its areas with its generation and start cursor),
//! then mails a connect request; the listener kthread of the target node finds the
//! listening socket by address, port and namespace, sets up the server end, answers with
//! an accept carrying its queue offer and queues the connection for `accept()`; the
//! connector's node routes the answer to the waiting slot (a non-blocking connect is
//! finished by the connector kthread, `connector.rs`). No listener, a full backlog or a
//! bad offer is a reject, and the socket falls back to its native TCP connect.

use crate::bindings;
use crate::conn_addr::{self, Addr, ListenAddr};
use crate::connector::{Connector, ConnectorThread};
use crate::fabric::{Fabric, FabricEvents, NodeId};
use crate::global;
use crate::kthread::{self, KThread, ThreadMain};
use crate::native::errno;
use crate::node_map::rules::Ip;
use crate::own_sk::{wake_sk, Wake};
use crate::proto::frame::{
    CloseReason, ConnId, Frame, FrameKind, Reason, RejectReason, FRAME_SIZE,
};
use crate::proto::queue::{self, QueueParams};
use crate::proto::ring::RingGeometry;
use crate::sci_conn::{once_a_second, Conn, Phase, Release, RING_LOG2};
use core::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use kernel::prelude::*;
use kernel::sync::{Arc, CondVar, SpinLock};
use kernel::time::Ktime;

/// Connections this node can hold at once (slots, and doorbell channels).
pub(crate) const MAX_CONNS: usize = 1024;
/// Listening sockets reachable over SCI at once.
const MAX_LISTENERS: usize = 256;
/// Inbound control frames waiting for the listener kthread.
const INBOX_FRAMES: usize = 256;
/// SCI connections a listener holds for `accept()` at most.
const ACCEPT_BACKLOG: usize = 128;

/// The SCI connections waiting for `accept()` on one listening socket.
#[pin_data]
pub(crate) struct ListenQueue {
    addr: ListenAddr,
    #[pin]
    inner: SpinLock<ListenInner>,
}

struct ListenInner {
    ring: KVec<Option<Arc<Conn>>>,
    head: usize,
    len: usize,
    /// The listening sk to wake (0 once it closed).
    owner: usize,
}

impl ListenQueue {
    /// A queue for a socket listening on `addr`, waking `owner`.
    pub(crate) fn new(addr: ListenAddr, owner: usize) -> Result<Arc<Self>> {
        let mut ring = KVec::with_capacity(ACCEPT_BACKLOG, GFP_KERNEL)?;
        for _ in 0..ACCEPT_BACKLOG {
            ring.push(None, GFP_KERNEL)?;
        }
        Arc::pin_init(
            pin_init!(Self {
                addr,
                inner <- kernel::new_spinlock!(ListenInner { ring, head: 0, len: 0, owner }, "ListenQueue"),
            }),
            GFP_KERNEL,
        )
    }

    /// Takes the oldest established connection.
    pub(crate) fn pop(&self) -> Option<Arc<Conn>> {
        let mut g = self.inner.lock();
        if g.len == 0 {
            return None;
        }
        let head = g.head;
        let conn = g.ring.as_mut_slice()[head].take();
        g.head = (head + 1) % ACCEPT_BACKLOG;
        g.len -= 1;
        conn
    }

    /// Whether a connection is waiting.
    pub(crate) fn is_empty(&self) -> bool {
        self.inner.lock().len == 0
    }

    fn push(&self, conn: Arc<Conn>) -> core::result::Result<(), Arc<Conn>> {
        let mut g = self.inner.lock();
        if g.len == ACCEPT_BACKLOG || g.owner == 0 {
            return Err(conn);
        }
        let tail = (g.head + g.len) % ACCEPT_BACKLOG;
        g.ring.as_mut_slice()[tail] = Some(conn);
        g.len += 1;
        wake_sk(g.owner, Wake::Readable);
        Ok(())
    }

    /// The listener closed: no more connections, and those still queued are returned
    /// (to be aborted) after the lock.
    pub(crate) fn close(&self) -> KVec<Arc<Conn>> {
        let mut left = KVec::new();
        while let Some(conn) = self.pop() {
            let _ = left.push(conn, GFP_KERNEL);
        }
        self.inner.lock().owner = 0;
        left
    }
}

/// A small ring of inbound frames.
struct Inbox {
    frames: KVec<(NodeId, [u8; FRAME_SIZE])>,
    head: usize,
    len: usize,
}

/// A slot of the connection table (its index is the connection's doorbell channel and
/// the channel its segment is exported under).
enum Slot {
    /// Free for a new connection.
    Free,
    /// Taken by a connection being created (its segment may already be exported).
    Reserved,
    /// Held by a connection.
    Used(Arc<Conn>),
    /// Left by a closed connection to another node whose segment the peer end may still
    /// store into: it stays exported, its memory allocated, until the peer end closes
    /// too, or (`until_ms`, `ktime_get` milliseconds) until a grace period ends (see
    /// [`ControlPlane::free_conn`]).
    Closing {
        conn: Arc<Conn>,
        until_ms: Option<i64>,
    },
}

/// How long a closed connection whose peer end's state is not known keeps its segment
/// exported (ms), before its pages wait out the fabric's quarantine: the peer node may
/// take our answer to its connect on its own time, and the program may have accepted
/// and closed this end before that.
const GRACE_MS: i64 = 1000;

/// How often the listener kthread sweeps the table (ms): overdue doorbells, and closing
/// slots whose peer finished (also looked at as soon as a closing slot's doorbell rings).
const SWEEP_MS: i64 = 100;

/// The control plane (one per module).
#[pin_data]
pub(crate) struct ControlPlane {
    fabric: Arc<dyn Fabric>,
    #[pin]
    conns: SpinLock<KVec<(u32, Slot)>>,
    #[pin]
    listeners: SpinLock<KVec<Option<Arc<ListenQueue>>>>,
    #[pin]
    inbox: SpinLock<Inbox>,
    #[pin]
    inbox_ready: CondVar,
    /// Non-blocking connects in progress, finished by the connector kthread.
    #[pin]
    connector: Connector,
    /// Slots in [`Slot::Used`] (the listener kthread sweeps them only when there are).
    used: AtomicUsize,
    /// Slots in [`Slot::Closing`] (likewise).
    closing: AtomicUsize,
    /// A closing slot's doorbell rang: look at the closing slots now.
    reclaim_now: AtomicBool,
    /// When the listener kthread last swept the table (`ktime_get` ms).
    last_sweep_ms: AtomicI64,
}

/// Forwards fabric events to the installed control plane.
struct PlaneEvents;

static EVENTS: PlaneEvents = PlaneEvents;

impl FabricEvents for PlaneEvents {
    fn control(&self, from: NodeId, frame: [u8; FRAME_SIZE]) {
        if let Some(plane) = global::plane() {
            plane.enqueue(from, frame);
        }
    }

    fn doorbell(&self, channel: u32) {
        if let Some(plane) = global::plane() {
            plane.doorbell(channel);
        }
    }

    fn node_down(&self, node: NodeId) {
        if let Some(plane) = global::plane() {
            plane.node_down(node);
        }
    }
}

/// The listener kthread: serves the inbound mailbox.
pub(crate) struct ListenerThread;

/// The one listener thread body.
pub(crate) static LISTENER: ListenerThread = ListenerThread;

impl ThreadMain for ListenerThread {
    fn main(&'static self) {
        // The plane outlives this thread: the module stops the thread before it
        // uninstalls and drops the plane.
        while !kthread::should_stop() {
            let Some(plane) = global::plane() else { break };
            match plane.dequeue() {
                Some((from, bytes)) => plane.handle(from, &bytes),
                None => plane.wait_for_frames(),
            }
            plane.sweep();
        }
    }
}

impl ControlPlane {
    /// A control plane over the fabric the `fabric` parameter chooses.
    pub(crate) fn new() -> Result<impl PinInit<Self, Error>> {
        let fabric = crate::fabric::choice::open(&EVENTS, MAX_CONNS)?;
        let mut conns = KVec::with_capacity(MAX_CONNS, GFP_KERNEL)?;
        for _ in 0..MAX_CONNS {
            conns.push((1u32, Slot::Free), GFP_KERNEL)?;
        }
        let mut listeners = KVec::with_capacity(MAX_LISTENERS, GFP_KERNEL)?;
        for _ in 0..MAX_LISTENERS {
            listeners.push(None, GFP_KERNEL)?;
        }
        let mut frames = KVec::with_capacity(INBOX_FRAMES, GFP_KERNEL)?;
        for _ in 0..INBOX_FRAMES {
            frames.push((0, [0u8; FRAME_SIZE]), GFP_KERNEL)?;
        }
        Ok(try_pin_init!(Self {
            fabric,
            conns <- kernel::new_spinlock!(conns, "ControlPlane::conns"),
            listeners <- kernel::new_spinlock!(listeners, "ControlPlane::listeners"),
            inbox <- kernel::new_spinlock!(Inbox { frames, head: 0, len: 0 }, "ControlPlane::inbox"),
            inbox_ready <- kernel::new_condvar!("ControlPlane::inbox_ready"),
            connector <- Connector::new(),
            used: AtomicUsize::new(0),
            closing: AtomicUsize::new(0),
            reclaim_now: AtomicBool::new(false),
            last_sweep_ms: AtomicI64::new(0),
        }? Error))
    }

    /// Starts the listener and connector kthreads (after [`global::install`]); dropping
    /// the returned threads stops them.
    pub(crate) fn start_threads() -> Result<(KThread, KThread)> {
        let listener = KThread::run(&LISTENER, kernel::c_str!("sci_listener"))?;
        let connector = KThread::run(&ConnectorThread, kernel::c_str!("sci_connector"))?;
        Ok((listener, connector))
    }

    /// The connector, which finishes non-blocking connects.
    pub(crate) fn connector(&self) -> &Connector {
        &self.connector
    }

    /// The fabric this node is on.
    pub(crate) fn fabric(&self) -> &dyn Fabric {
        &*self.fabric
    }

    fn enqueue(&self, from: NodeId, frame: [u8; FRAME_SIZE]) {
        let mut g = self.inbox.lock();
        if g.len == INBOX_FRAMES {
            // A full inbox drops the frame: the connector times out and falls back.
            return;
        }
        let tail = (g.head + g.len) % INBOX_FRAMES;
        g.frames.as_mut_slice()[tail] = (from, frame);
        g.len += 1;
        drop(g);
        self.inbox_ready.notify_one();
    }

    fn dequeue(&self) -> Option<(NodeId, [u8; FRAME_SIZE])> {
        let mut g = self.inbox.lock();
        if g.len == 0 {
            return None;
        }
        let item = g.frames.as_slice()[g.head];
        g.head = (g.head + 1) % INBOX_FRAMES;
        g.len -= 1;
        Some(item)
    }

    fn wait_for_frames(&self) {
        let mut g = self.inbox.lock();
        if g.len == 0 && !self.reclaim_now.load(Ordering::Acquire) {
            let _ = self.inbox_ready.wait_interruptible_timeout(
                &mut g,
                kernel::time::msecs_to_jiffies(SWEEP_MS as u32),
            );
        }
    }

    /// A doorbell for `channel` (maybe in atomic context: only wakes). A connection's
    /// wakes its socket; a closing slot's (its peer end closed, or moved) has the
    /// listener kthread look at the closing slots.
    fn doorbell(&self, channel: u32) {
        /// What the rung channel's slot holds.
        enum Rung {
            Conn(Arc<Conn>),
            Closing,
            Nothing,
        }
        let rung = {
            let g = self.conns.lock();
            match g.as_slice().get(channel as usize) {
                Some((_, Slot::Used(c))) => Rung::Conn(c.clone()),
                Some((_, Slot::Closing { .. })) => Rung::Closing,
                _ => Rung::Nothing,
            }
        };
        match rung {
            Rung::Conn(conn) => conn.doorbell(),
            Rung::Closing => {
                self.reclaim_now.store(true, Ordering::Release);
                // Taking the inbox lock orders this against the kthread's check.
                drop(self.inbox.lock());
                self.inbox_ready.notify_one();
            }
            Rung::Nothing => {}
        }
    }

    /// The connection in `slot` (a doorbell channel).
    pub(crate) fn conn(&self, slot: u32) -> Option<Arc<Conn>> {
        let g = self.conns.lock();
        match g.as_slice().get(slot as usize) {
            Some((_, Slot::Used(c))) => Some(c.clone()),
            _ => None,
        }
    }

    /// The connection `id`, if its slot still holds that generation.
    fn conn_by_id(&self, id: ConnId) -> Option<Arc<Conn>> {
        let g = self.conns.lock();
        match g.as_slice().get(id.slot as usize) {
            Some((generation, Slot::Used(c))) if *generation == id.generation => Some(c.clone()),
            _ => None,
        }
    }

    /// The connection `id`, open or closing, if its slot still holds that generation.
    fn conn_or_closing_by_id(&self, id: ConnId) -> Option<Arc<Conn>> {
        let g = self.conns.lock();
        match g.as_slice().get(id.slot as usize) {
            Some((generation, Slot::Used(c) | Slot::Closing { conn: c, .. }))
                if *generation == id.generation =>
            {
                Some(c.clone())
            }
            _ => None,
        }
    }

    /// Allocates a slot and creates a connection end in it.
    pub(crate) fn new_conn(
        &self,
        peer_node: NodeId,
        generation: Option<u32>,
        start: u64,
        local: Addr,
        peer: Addr,
    ) -> Result<Arc<Conn>> {
        let id = {
            let mut g = self.conns.lock();
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
        let params = QueueParams {
            geometry,
            generation: generation.unwrap_or(id.generation),
            start,
        };
        let conn = Conn::new(self.fabric(), id, peer_node, params, local, peer);
        let mut g = self.conns.lock();
        let entry = &mut g.as_mut_slice()[id.slot as usize];
        match conn {
            Ok(conn) => {
                entry.1 = Slot::Used(conn.clone());
                self.used.fetch_add(1, Ordering::Relaxed);
                Ok(conn)
            }
            Err(e) => {
                drop(g);
                self.fabric().unexport(id.slot);
                self.conns.lock().as_mut_slice()[id.slot as usize].1 = Slot::Free;
                Err(e)
            }
        }
    }

    /// The fabric reported `node` down: every connection to it is reset (its peer is
    /// treated as having aborted; a connect still waiting for the node's answer falls
    /// back to TCP), and closing slots waiting for it are freed at the next sweep.
    fn node_down(&self, node: NodeId) {
        // Room for every slot up front: nothing is allocated under the spinlock.
        let mut lost = KVec::with_capacity(MAX_CONNS, GFP_KERNEL).unwrap_or_default();
        {
            let g = self.conns.lock();
            for conn in g.iter().filter_map(|(_, s)| match s {
                Slot::Used(c) | Slot::Closing { conn: c, .. } => Some(c),
                _ => None,
            }) {
                if conn.peer_node == node && lost.push(conn.clone(), GFP_ATOMIC).is_err() {
                    break;
                }
            }
        }
        // Outside the table's lock: resetting takes each connection's mutex.
        for conn in lost.iter() {
            conn.peer_lost();
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
        let release = if conn.peer_node == self.fabric().local_node() {
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
            let mut g = self.conns.lock();
            match g.as_mut_slice().get_mut(conn.id.slot as usize) {
                Some(entry)
                    if entry.0 == conn.id.generation
                        && matches!(&entry.1, Slot::Used(c) if core::ptr::eq(&**c, conn)) =>
                {
                    self.used.fetch_sub(1, Ordering::Relaxed);
                    Some(match next {
                        Some(until_ms) => {
                            let Slot::Used(c) = core::mem::replace(&mut entry.1, Slot::Reserved)
                            else {
                                return;
                            };
                            self.closing.fetch_add(1, Ordering::Relaxed);
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
            self.fabric().unexport(conn.id.slot);
            self.set_free(conn.id.slot as usize);
        }
    }

    /// Makes a reserved slot free again.
    fn set_free(&self, slot: usize) {
        if let Some(entry) = self.conns.lock().as_mut_slice().get_mut(slot) {
            entry.1 = Slot::Free;
        }
    }

    /// The listener kthread's periodic look at the table (every [`SWEEP_MS`], and at
    /// once when a closing slot's doorbell rang):
    ///
    /// - every connection whose doorbell is overdue is woken ([`Conn::sweep`]): a
    ///   doorbell lost on the way, whatever the cause, costs one period, never a hang;
    /// - every closing slot whose peer end has closed, or whose grace period is over, is
    ///   freed.
    fn sweep(&self) {
        let now = Ktime::ktime_get().to_ms();
        let kicked = self.reclaim_now.swap(false, Ordering::AcqRel);
        let due = now.saturating_sub(self.last_sweep_ms.load(Ordering::Relaxed)) >= SWEEP_MS;
        if !due && !kicked {
            return;
        }
        if due {
            self.last_sweep_ms.store(now, Ordering::Relaxed);
        }
        let used = due && self.used.load(Ordering::Relaxed) != 0;
        let closing = self.closing.load(Ordering::Relaxed) != 0;
        if !used && !closing {
            return;
        }
        for slot in 0..MAX_CONNS {
            // One slot at a time: the table's lock is not held while looking (which
            // takes the connection's mutex).
            let (conn, until_ms) = {
                let g = self.conns.lock();
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
                    conn.sweep();
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
            let mut g = self.conns.lock();
            match g.as_mut_slice().get_mut(slot) {
                Some(entry) if matches!(&entry.1, Slot::Closing { conn: c, .. } if Arc::ptr_eq(c, conn)) => {
                    Some(core::mem::replace(&mut entry.1, Slot::Reserved))
                }
                _ => None,
            }
        };
        if old.is_some() {
            self.closing.fetch_sub(1, Ordering::Relaxed);
            self.fabric().unexport(slot as u32);
            drop(old);
            self.set_free(slot);
        }
    }

    /// Makes a listening socket reachable for SCI connection requests to its address.
    /// One listener per address (`SO_REUSEPORT` siblings after the first take TCP only).
    pub(crate) fn listen(&self, queue: Arc<ListenQueue>) -> Result {
        let mut g = self.listeners.lock();
        if g.iter().flatten().any(|q| q.addr == queue.addr) {
            return Err(errno(bindings::EADDRINUSE));
        }
        let slot = g
            .as_mut_slice()
            .iter_mut()
            .find(|q| q.is_none())
            .ok_or(ENOSPC)?;
        *slot = Some(queue);
        Ok(())
    }

    /// Removes a listener; connections still queued for it are aborted.
    pub(crate) fn unlisten(&self, queue: &ListenQueue) {
        let old = {
            let mut g = self.listeners.lock();
            g.as_mut_slice()
                .iter_mut()
                .find(|q| q.as_ref().is_some_and(|q| core::ptr::eq(&**q, queue)))
                .and_then(Option::take)
        };
        drop(old);
        for conn in queue.close().iter() {
            conn.close(self.fabric(), true);
            self.free_conn(conn);
        }
    }

    /// The listener a request for `dest:port` in `namespace` reaches: the best match, as
    /// TCP's listener lookup picks it.
    fn listener(&self, dest: Ip, port: u16, namespace: u64) -> Option<Arc<ListenQueue>> {
        let g = self.listeners.lock();
        g.iter()
            .flatten()
            .filter_map(|q| Some((q.addr.score(dest, port, namespace)?, q)))
            .max_by_key(|(score, _)| *score)
            .map(|(_, q)| q.clone())
    }

    /// Serves one inbound control frame (listener kthread).
    fn handle(&self, from: NodeId, bytes: &[u8; FRAME_SIZE]) {
        let Ok(frame) = Frame::decode_bytes(bytes) else {
            return;
        };
        match frame.kind {
            FrameKind::Accept => {
                match self.conn_by_id(frame.dst) {
                    Some(conn) if conn.phase() == Phase::Connecting => {
                        if let Err(why) = self.take_accept(from, &frame, &conn) {
                            accept_refused(why);
                            conn.refuse();
                            self.abandon_peer_end(from, &frame);
                        }
                        self.connector.kick();
                    }
                    // The connect gave up first (timeout, signal, close) or moved on: the
                    // listener's end, maybe queued for accept() already, must not wait
                    // for a peer that will never come.
                    _ => self.abandon_peer_end(from, &frame),
                }
            }
            FrameKind::Reject => {
                if let Some(conn) = self.conn_by_id(frame.dst) {
                    conn.rejected(frame.reason == Reason::Reject(RejectReason::NoResources));
                    self.connector.kick();
                }
            }
            FrameKind::Close => {
                // Only the peer end itself, on its node, may close a connection this way.
                // A closing slot waiting for that end to close is freed at the next sweep.
                if let Some(conn) = self.conn_or_closing_by_id(frame.dst) {
                    if conn.peer_node == from && conn.peer_id() == frame.src {
                        conn.peer_lost();
                    }
                }
            }
            FrameKind::ConnectRequest => self.serve_request(from, &frame),
        }
    }

    /// Builds an SCI connection end from the listener's answer, once every part of it
    /// checks out: its segment maps, its offer fits it, and its receive area is the one
    /// set up for this connection (generation and start), not a stale one.
    fn take_accept(
        &self,
        from: NodeId,
        frame: &Frame,
        conn: &Conn,
    ) -> core::result::Result<(), AcceptRefused> {
        let seg = self
            .fabric()
            .map_segment(from, frame.src.slot)
            .map_err(AcceptRefused::NoSegment)?;
        let len = crate::proto::segment::Segment::len(&seg);
        let offer = frame.offer.validate(len).ok_or(AcceptRefused::BadOffer)?;
        // The listener's receive area uses our generation.
        let params = offer.params(frame.dst.generation);
        if !queue::rx_area_matches(&seg, offer.rx_area, params) {
            return Err(AcceptRefused::StaleArea);
        }
        conn.establish(frame.src, offer, seg)
            .map_err(AcceptRefused::Establish)
    }

    /// Tells the listener's node that its end `frame.src` has no connector any more, so
    /// it is reset (`ECONNRESET` after `accept()`, as a TCP client's RST would do).
    fn abandon_peer_end(&self, from: NodeId, frame: &Frame) {
        let close = Frame::close(frame.dst, frame.src, CloseReason::Abandoned);
        let _ = self.fabric().send_control(from, &close.encode_bytes());
    }

    fn reject(&self, from: NodeId, request: &Frame, reason: RejectReason) {
        let src = ConnId {
            slot: 0,
            generation: 0,
        };
        let _ = self
            .fabric()
            .send_control(from, &Frame::reject(request, src, reason).encode_bytes());
    }

    fn serve_request(&self, from: NodeId, request: &Frame) {
        let (Some(src_ip), Some(dst_ip)) = (
            conn_addr::from_wire(request.src_ip),
            conn_addr::from_wire(request.dst_ip),
        ) else {
            return self.reject(from, request, RejectReason::BadOffer);
        };
        // Namespace cookies are this kernel's: another node can only name our initial
        // namespace (0); a cookie from it would match a namespace by accident.
        if from != self.fabric().local_node() && request.namespace != 0 {
            return self.reject(from, request, RejectReason::NoListener);
        }
        let Some(queue) = self.listener(dst_ip, request.dst_port, request.namespace) else {
            return self.reject(from, request, RejectReason::NoListener);
        };
        let Ok(client_seg) = self.fabric().map_segment(from, request.src.slot) else {
            return self.reject(from, request, RejectReason::BadOffer);
        };
        // The segment exported under the requester's slot must be the one this request
        // offered (not a newer connection's, if the request is late).
        let Some(offer) = request
            .offer
            .validate(crate::proto::segment::Segment::len(&client_seg))
            .filter(|o| {
                queue::rx_area_matches(&client_seg, o.rx_area, o.params(request.src.generation))
            })
        else {
            return self.reject(from, request, RejectReason::BadOffer);
        };
        let local = Addr::inet(dst_ip, request.dst_port, queue.addr.v6);
        let peer = Addr::inet(src_ip, request.src_port, queue.addr.v6);
        let conn = match self.new_conn(from, Some(request.src.generation), offer.start, local, peer)
        {
            Ok(conn) => conn,
            Err(_) => return self.reject(from, request, RejectReason::NoResources),
        };
        if conn.establish(request.src, offer, client_seg).is_err() {
            conn.set_never_shared();
            self.free_conn(&conn);
            return self.reject(from, request, RejectReason::BadOffer);
        }
        let accept = Frame::accept(request, conn.id, conn.offer()).encode_bytes();
        if let Err(conn) = queue.push(conn) {
            conn.set_never_shared();
            self.free_conn(&conn);
            return self.reject(from, request, RejectReason::BacklogFull);
        }
        let _ = self.fabric().send_control(from, &accept);
    }
}

/// Why a listener's answer could not be taken (the connect then falls back to TCP).
enum AcceptRefused {
    /// The listener's segment is not (or no longer) exported.
    NoSegment(Error),
    /// Its offer does not fit its segment.
    BadOffer,
    /// Its receive area is not set up for this connection.
    StaleArea,
    /// The queues could not be built on it.
    Establish(Error),
}

/// Logs (at most once a second) an answer that was refused: it means a peer whose
/// memory does not say what its frames say.
fn accept_refused(why: AcceptRefused) {
    static LAST_LOG_MS: AtomicI64 = AtomicI64::new(i64::MIN);
    // A connect that gave up as the answer came is no peer's fault.
    let gave_up =
        matches!(&why, AcceptRefused::Establish(e) if *e == errno(bindings::ECONNABORTED));
    if gave_up || !once_a_second(&LAST_LOG_MS) {
        return;
    }
    let (what, errno) = match why {
        AcceptRefused::NoSegment(e) => ("its segment does not map", e.to_errno()),
        AcceptRefused::BadOffer => ("its offer does not fit its segment", 0),
        AcceptRefused::StaleArea => ("its receive area is not this connection's", 0),
        AcceptRefused::Establish(e) => ("its queues cannot be built", e.to_errno()),
    };
    pr_warn!(
        "SCI connect: the listener's answer does not check out: {} ({}); falling back to TCP\n",
        what,
        errno
    );
}
