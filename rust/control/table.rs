// SPDX-License-Identifier: GPL-2.0

//! The connection table of this node and what the fabric's events and the control
//! plane's kthreads share with it: the slots (whose index is a connection's doorbell
//! channel), the listeners SCI requests can reach, the inbox of control frames, the
//! pending non-blocking connects and the record of held bytes.
//!
//! The fabric delivers its events here ([`FabricEvents`]: a frame arrived, a doorbell
//! rang, a node went down). The table holds no reference to the fabric, so the fabric
//! can hold one to the table without a cycle; what needs both is
//! [`Plane`](super::Plane).

use super::bound::Bound;
use super::connector::Connector;
use super::datagram_ports::{DatagramPorts, MAX_PORTS};
use super::inbox::{Dropped, Inbox};
use super::listen_queue::ListenQueue;
use super::namespaces::Publishing;
use super::refusals::Refusals;
use crate::config::rules::Ip;
use crate::conn::{once_a_second, Conn, HeldSlots, MAX_CONNS};
use crate::fabric::memory::SegMem;
use crate::fabric::{FabricEvents, NodeId, NodeLoss};
use crate::proto::frame::{ConnId, FRAME_SIZE};
use crate::sys::params::hold_frames_for_test;
use crate::sys::spinlock_bh::{new_spinlock_bh, SpinLockBh};
use core::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use kernel::prelude::*;
use kernel::sync::{Arc, CondVar, SpinLock};

/// Listening sockets reachable over SCI at once.
const MAX_LISTENERS: usize = 256;
/// A slot of the connection table (its index is the connection's doorbell channel and
/// the channel its segment is exported under).
pub(super) enum Slot {
    /// Free for a new connection.
    Free,
    /// Taken by a connection being created (its segment may already be exported).
    Reserved,
    /// Held by a connection.
    Used(Arc<Conn>),
    /// Left by a closed connection to another node whose segment the peer end may still
    /// store into: it stays exported, its memory allocated, until the peer end closes
    /// too, or (`until_ms`, `ktime_get` milliseconds) until a grace period ends (see
    /// [`Plane::free_conn`](super::Plane::free_conn)).
    Closing {
        conn: Arc<Conn>,
        until_ms: Option<i64>,
    },
}
/// How long a closed connection whose peer end's state is not known keeps its segment
/// exported (ms), before its pages wait out the fabric's quarantine: the peer node may
/// take our answer to its connect on its own time, and the program may have accepted
/// and closed this end before that.
pub(super) const GRACE_MS: i64 = 1000;
/// How often the listener kthread sweeps the table (ms): overdue doorbells, and closing
/// slots whose peer finished (also looked at as soon as a closing slot's doorbell rings).
pub(super) const SWEEP_MS: i64 = 100;

/// The table (see the module doc).
#[pin_data]
pub(crate) struct Table {
    /// The connection slots. This lock and the inbox's are taken with bottom halves
    /// off: a doorbell looks its channel up here in softirq context.
    #[pin]
    pub(super) conns: SpinLockBh<KVec<(u32, Slot)>>,
    /// The listening sockets SCI requests reach.
    #[pin]
    listeners: Bound<Arc<ListenQueue>>,
    #[pin]
    inbox: SpinLockBh<Inbox>,
    #[pin]
    inbox_ready: CondVar,
    /// Non-blocking connects in progress, finished by the connector kthread.
    #[pin]
    pub(super) connector: Connector,
    /// Which connections hold bytes back (each connection has a reference).
    pub(super) held: Arc<HeldSlots>,
    /// Slots in [`Slot::Used`] (the listener kthread sweeps them only when there are).
    pub(super) used: AtomicUsize,
    /// Slots in [`Slot::Closing`] (likewise).
    pub(super) closing: AtomicUsize,
    /// A closing slot's doorbell rang: look at the closing slots now.
    pub(super) reclaim_now: AtomicBool,
    /// When the listener kthread last swept the table (`ktime_get` ms).
    pub(super) last_sweep_ms: AtomicI64,
    /// Destinations that refused an SCI connect lately.
    #[pin]
    pub(super) refusals: SpinLock<Refusals>,
    /// The datagram sockets implicit connections reach.
    #[pin]
    pub(super) datagram_ports: DatagramPorts,
    /// The network namespaces that publish their addresses beside the initial one.
    #[pin]
    pub(super) publishing: Publishing,
}

/// What the fabric delivers.
impl FabricEvents for Table {
    fn control(&self, from: NodeId, frame: [u8; FRAME_SIZE]) {
        self.enqueue(from, frame);
    }

    fn doorbell(&self, channel: u32) {
        Table::doorbell(self, channel);
    }

    fn node_down(&self, node: NodeId, loss: NodeLoss) {
        Table::node_down(self, node, loss);
    }

    fn memory_going(&self) {
        Table::memory_going(self);
    }

    fn local_addresses(&self, out: &mut [[u8; 16]]) -> usize {
        self.publishing.addresses(out)
    }
}

impl Table {
    /// An empty table.
    pub(super) fn new() -> Result<impl PinInit<Self, Error>> {
        let mut conns = KVec::with_capacity(MAX_CONNS, GFP_KERNEL)?;
        for _ in 0..MAX_CONNS {
            conns.push((1u32, Slot::Free), GFP_KERNEL)?;
        }
        let listeners = Bound::new(MAX_LISTENERS)?;
        let inbox = Inbox::new()?;
        let held = Arc::new(HeldSlots::new(), GFP_KERNEL)?;
        let refusals = Refusals::new()?;
        let datagram_ports = DatagramPorts::new(MAX_PORTS)?;
        Ok(try_pin_init!(Self {
            conns <- new_spinlock_bh!(conns, "control::Table::conns"),
            listeners <- listeners,
            inbox <- new_spinlock_bh!(inbox, "control::Table::inbox"),
            inbox_ready <- kernel::new_condvar!("control::Table::inbox_ready"),
            connector <- Connector::new(),
            held,
            used: AtomicUsize::new(0),
            closing: AtomicUsize::new(0),
            reclaim_now: AtomicBool::new(false),
            last_sweep_ms: AtomicI64::new(0),
            refusals <- kernel::new_spinlock!(refusals, "control::Table::refusals"),
            datagram_ports <- datagram_ports,
            publishing <- Publishing::new(),
        }? Error))
    }

    /// This node's id, once the fabric is open: its own frames always find room.
    pub(super) fn set_own_node(&self, own: NodeId) {
        self.inbox.lock().set_own(own);
    }

    /// Queues a frame for the listener kthread; one that finds no room is dropped (its
    /// sender's connect times out and falls back), and said so at most once a second.
    pub(super) fn enqueue(&self, from: NodeId, frame: [u8; FRAME_SIZE]) {
        static LAST_DROP_MS: AtomicI64 = AtomicI64::new(i64::MIN);
        let pushed = self.inbox.lock().push(from, frame);
        match pushed {
            Ok(()) => self.inbox_ready.notify_one(),
            Err(why) => {
                if once_a_second(&LAST_DROP_MS) {
                    pr_info!(
                        "control frames from node {} dropped: {}\n",
                        from,
                        match why {
                            Dropped::Full => "the inbox is full",
                            Dropped::OverShare => "that node has its share of the inbox waiting",
                        }
                    );
                }
            }
        }
    }
    /// The oldest frame waiting (none while a test holds them: `test_hold_frames`).
    pub(super) fn dequeue(&self) -> Option<(NodeId, [u8; FRAME_SIZE])> {
        if hold_frames_for_test() {
            return None;
        }
        self.inbox.lock().pop()
    }
    /// Sleeps until a frame comes (or a held one may be served), a closing slot's
    /// doorbell rings, or the next sweep is due.
    pub(super) fn wait_for_frames(&self) {
        let mut g = self.inbox.lock();
        let nothing = g.is_empty() || hold_frames_for_test();
        if nothing && !self.reclaim_now.load(Ordering::Acquire) {
            let _ = self.inbox_ready.wait_interruptible_timeout(
                &mut g,
                kernel::time::msecs_to_jiffies(SWEEP_MS as u32),
            );
        }
    }
    /// A doorbell for `channel` (maybe in softirq context: only wakes, and takes only
    /// `SpinLockBh` locks). A connection's wakes its socket; a closing slot's (its peer
    /// end closed, or moved) has the listener kthread look at the closing slots.
    pub(super) fn doorbell(&self, channel: u32) {
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
            Rung::Conn(conn) => {
                if conn.doorbell() {
                    self.connector.kick();
                }
            }
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
    pub(super) fn conn_by_id(&self, id: ConnId) -> Option<Arc<Conn>> {
        let g = self.conns.lock();
        match g.as_slice().get(id.slot as usize) {
            Some((generation, Slot::Used(c))) if *generation == id.generation => Some(c.clone()),
            _ => None,
        }
    }
    /// Whether an open connection of this node is established with its peer end in
    /// `node`'s channel `slot`: that channel is then that end's until ours closes (a
    /// closed peer end's slot waits for ours, `Plane::free_conn`), so a frame naming it
    /// for a new connection is forged or stale.
    pub(super) fn peer_slot_held(&self, node: NodeId, slot: u32) -> bool {
        // One pass under the lock with the lock-free hint, then each candidate's mutex
        // outside it: a flood of forged frames costs the listener kthread one walk each.
        let mut candidates = KVec::new();
        {
            let g = self.conns.lock();
            for (_, s) in g.iter() {
                if let Slot::Used(c) = s {
                    if c.peer_node == node
                        && c.may_hold_peer_slot(slot)
                        && candidates.push(c.clone(), GFP_ATOMIC).is_err()
                    {
                        // No memory for the list: say held, the request is refused.
                        return true;
                    }
                }
            }
        }
        candidates
            .iter()
            .any(|c: &Arc<Conn>| c.holds_peer_slot(slot))
    }

    /// This node's connection `id`, if it still holds its slot and `seg` (mapped from
    /// that slot) is its segment: the end a frame between two of this node's own ends
    /// names, checked exactly. Within this node a closed end's slot is free at once
    /// (`Plane::free_conn`), so a late frame's slot may hold another connection already,
    /// and a receive area's generation does not tell them apart: a listener's end takes
    /// its client's generation, and two slots' generations may be equal. (Another node's
    /// slot is not reused that soon: an end that never took its answer stays exported
    /// for `GRACE_MS`, then its pages wait out the fabric's quarantine.)
    pub(super) fn own_end(&self, id: ConnId, seg: &Arc<SegMem>) -> Option<Arc<Conn>> {
        self.conn_by_id(id).filter(|c| c.owns_segment(seg))
    }
    /// The connection `id`, open or closing, if its slot still holds that generation.
    pub(super) fn conn_or_closing_by_id(&self, id: ConnId) -> Option<Arc<Conn>> {
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
    /// The fabric reported `node` down: every established connection to it moves onto
    /// TCP, unless the region was corrupted (then, as every other connection, it is reset:
    /// its peer is treated as having aborted); a connect still waiting for the node's
    /// answer falls back to TCP, and closing slots waiting for it are freed at the next
    /// sweep.
    pub(super) fn node_down(&self, node: NodeId, loss: NodeLoss) {
        let lost = self.conns_where(|c| c.peer_node == node);
        // Outside the table's lock: resetting takes each connection's mutex.
        for conn in lost.iter() {
            let kick = match loss {
                NodeLoss::Lost => conn.peer_lost(),
                NodeLoss::Corrupted => conn.peer_gone(),
            };
            if kick {
                self.connector.kick();
            }
        }
        if loss == NodeLoss::Corrupted {
            pr_info!(
                "node {} down with its region corrupted: its {} connections reset, not moved\n",
                node,
                lost.len()
            );
            return;
        }
        pr_info!(
            "node {} down: {} of its connections moving onto TCP, of {}\n",
            node,
            lost.iter().filter(|c| c.moving()).count(),
            lost.len()
        );
    }
    /// The connections of used and closing slots that `keep` selects (taken under the
    /// table's lock, to be worked on outside it).
    fn conns_where(&self, keep: impl Fn(&Conn) -> bool) -> KVec<Arc<Conn>> {
        // Room for every slot up front: nothing is allocated under the spinlock.
        let mut out = KVec::with_capacity(MAX_CONNS, GFP_KERNEL).unwrap_or_default();
        let g = self.conns.lock();
        for conn in g.iter().filter_map(|(_, s)| match s {
            Slot::Used(c) | Slot::Closing { conn: c, .. } => Some(c),
            _ => None,
        }) {
            if keep(conn) && out.push(conn.clone(), GFP_ATOMIC).is_err() {
                break;
            }
        }
        out
    }

    /// This node's fabric memory is about to go: every connection moving onto TCP copies
    /// what it still reads into kernel memory ([`Conn::rehome_if_moving`]).
    pub(super) fn memory_going(&self) {
        let all = self.conns_where(|_| true);
        let moving = all.iter().filter(|c| c.rehome_if_moving()).count();
        pr_info!(
            "fabric memory going away: {} moving connections keep their rings in kernel memory, of {}\n",
            moving,
            all.len()
        );
    }

    /// Makes a reserved slot free again.
    pub(super) fn set_free(&self, slot: usize) {
        if let Some(entry) = self.conns.lock().as_mut_slice().get_mut(slot) {
            entry.1 = Slot::Free;
        }
    }
    /// Makes a listening socket reachable for SCI connection requests to its address.
    /// One listener per address (`SO_REUSEPORT` siblings after the first take TCP only).
    pub(crate) fn listen(&self, queue: Arc<ListenQueue>) -> Result {
        self.listeners.add(queue.addr, queue)
    }
    /// The listener a request for `dest:port` in `namespace` reaches: the best match, as
    /// TCP's listener lookup picks it.
    pub(super) fn listener(&self, dest: Ip, port: u16, namespace: u64) -> Option<Arc<ListenQueue>> {
        self.listeners.find(dest, port, namespace).map(|(_, q)| q)
    }

    /// Makes a listening socket unreachable for SCI connection requests (its queued
    /// connections are the caller's to abort).
    pub(super) fn unlisten(&self, queue: &ListenQueue) {
        self.listeners.remove(|q| core::ptr::eq(&**q, queue));
    }
}
