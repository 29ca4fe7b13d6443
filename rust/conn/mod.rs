// SPDX-License-Identifier: GPL-2.0

//! An SCI connection: two unidirectional message queues in shared memory.
//!
//! Each end owns one fabric segment holding its *receive area* (the ring the peer writes
//! into) at offset 0 and the *credit area* of its outgoing queue right after it (where
//! the peer's consumer publishes its cursor). Both queues use the connector's connection
//! generation and start cursor, so every area is initialised by its owner before the peer
//! learns of it (see `control/handshake.rs`). Bytes go from the caller's `iov_iter` straight into
//! the peer's ring and out of the own ring into the reader's `iov_iter`: one copy each way.
//!
//! Waiting follows the seed's poll-then-sleep: a side that must wait posts a wait request
//! (`prepare_wait`), re-checks, and sleeps on its socket's wait queue; the peer rings the
//! doorbell only when asked, and the doorbell wakes the socket's readers or writers by what
//! changed (`bell.rs`, with the sweep that stands in for a lost doorbell).
//!
//! Small writes are gathered as TCP does (Nagle, `TCP_CORK`, `MSG_MORE`): see `nagle.rs`.
//! `send` and `recv` themselves are in `transfer.rs` (with `direct.rs`: one copy for
//! large transfers within this kernel), a lost fabric path in `moving.rs`,
//! the datagrams of an implicit connection in `datagram.rs`, the poll mask and queue
//! sizes in `readiness.rs`; this file holds the connection's state, setup and teardown.

pub(crate) mod addr;
mod bell;
mod datagram;
mod direct;
mod moving;
mod nagle;
mod read_sock;
mod readiness;
mod transfer;

pub(crate) use datagram::{Read, Received, Sent};
pub(crate) use moving::Mover;
pub(crate) use nagle::{Gathering, HeldSlots};
pub(crate) use read_sock::ReadSock;

use crate::conn::addr::Addr;
use crate::fabric::memory::SegMem;
use crate::fabric::{Fabric, NodeId};
use crate::proto::frame::{ConnId, QueueOffer, RejectReason, ValidOffer};
use crate::proto::queue::{self, Consumer, Producer, QueueParams};
use crate::proto::resume::ResumeHeader;
use crate::proto::ring::CREDIT_AREA_SIZE;
use crate::proto::spin::SpinHistory;
pub(crate) use crate::proto::spin::SpinSetting;
use crate::proto::state::{self, Local, Peer, PeerEnd};
pub(crate) use crate::proto::state::{Phase, Release};
use crate::sys::bindings;
use crate::sys::errno::errno;
use crate::sys::gated_mutex::{new_gated_mutex, GatedMutex};
use crate::sys::read_actor::Lent;
use crate::sys::spinlock_bh::{new_spinlock_bh, SpinLockBh};
use crate::sys::wake::{wake_sk, Wake};
use core::ffi::{c_int, c_long};
use core::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, Ordering};
use kernel::prelude::*;
use kernel::sync::{Arc, SpinLock};
use kernel::time::Ktime;

/// Connection ends a node can hold at once: slots of its connection table, and the
/// doorbell channels of its fabric.
pub(crate) const MAX_CONNS: usize = 1024;

/// What a connection needs of the socket that calls it: its timeouts, its waits on its
/// own wait queue, its pending error and whether anyone watches it. The socket layer's
/// wrapper of its `struct sock` implements it; a connection never reaches the socket
/// layer otherwise.
pub(crate) trait Caller {
    /// The receive timeout (`SO_RCVTIMEO`), 0 when non-blocking, in jiffies.
    fn rcvtimeo(&self, nonblock: bool) -> c_long;
    /// The send timeout (`SO_SNDTIMEO`), 0 when non-blocking, in jiffies.
    fn sndtimeo(&self, nonblock: bool) -> c_long;
    /// Polls `ready` for up to `spin_us` microseconds before the caller sleeps: true as
    /// soon as it returns true (false too when a signal or the scheduler interrupts it).
    fn spin(&self, spin_us: u32, ready: impl FnMut() -> bool) -> bool;
    /// Sleeps on the socket's wait queue until `ready` returns true, `timeo` jiffies
    /// pass (`EAGAIN`) or a signal comes; `ready` runs with the wait entry queued. Also
    /// returns the microseconds its last sleep took from the wake-up to the caller
    /// running again (0: no wake-up ended one), which adaptive spinning weighs.
    fn wait_measured(
        &self,
        timeo: &mut c_long,
        ready: impl FnMut() -> Result<bool>,
    ) -> (Result, u32);
    /// `SO_RCVLOWAT` (at least 1): the bytes a blocking receive waits for, and that poll
    /// reports readable at, as TCP counts them (`sock_rcvlowat()`, `tcp_epollin_ready()`).
    fn rcvlowat(&self) -> usize;
    /// `SO_PEEK_OFF`: how many unread bytes a `MSG_PEEK` skips (0 when unset).
    fn peek_offset(&self) -> usize;
    /// Moves `SO_PEEK_OFF`, when set, as TCP does: forward over `bytes` a peek
    /// returned, back over `bytes` a read consumed (not below 0).
    fn peek_offset_moved(&self, peeked: bool, bytes: usize);
    /// The pending error (positive errno or 0), not consumed.
    fn error(&self) -> c_int;
    /// Sets the pending error (positive errno), as TCP does on a reset.
    fn set_error(&self, err: c_int);
    /// Consumes the pending error (positive errno or 0).
    fn take_error(&self) -> c_int;
    /// Whether poll, select, epoll or `O_ASYNC` watches the socket.
    fn watched(&self) -> bool;
    /// A writer (or poll) found no room: the next space the peer frees wakes writers
    /// (`SOCK_NOSPACE`). Called before the last look at the ring that precedes a sleep,
    /// an `EAGAIN` or a poll's "not writable", so that space freed after it is told.
    fn note_no_room(&self);
    /// A `recv` got `bytes` filled directly by the writer (`direct.rs`), for the
    /// socket's counters.
    fn received_directly(&self, bytes: usize);
}

/// log2 of the ring each end receives into (256 KiB: about what a TCP socket buffers on
/// loopback, so a program that writes before it reads behaves as on TCP).
pub(crate) const RING_LOG2: u32 = 18;

type Tx = Producer<Arc<SegMem>, Arc<SegMem>>;
type Rx = Consumer<Arc<SegMem>, Arc<SegMem>>;

/// The mutable part of a connection, under `Conn::inner`.
struct Inner {
    phase: Phase,
    peer_id: ConnId,
    tx: Option<Tx>,
    rx: Option<Rx>,
    /// The peer's segment (its receive area is where `tx` writes).
    peer_seg: Option<Arc<SegMem>>,
    /// What this end did, and what it already reported.
    local: Local,
    /// Bytes staged in the peer's ring and held back by gathering.
    held: nagle::Held,
    /// No end on the peer's node ever learned of this end (its request was rejected,
    /// or this end was dropped before the answer went out): none wrote, or will write,
    /// into its segment.
    never_shared: bool,
    /// The fabric or the peer's node reset the connection ([`Conn::peer_lost`],
    /// [`Conn::peer_gone`]): the peer end said nothing of its own about the segment.
    peer_lost: bool,
    /// Of those, the peer end is gone: its node said so ([`Conn::peer_gone`]), or it had
    /// closed when the fabric path was lost. It does not move onto TCP.
    peer_gone: bool,
    /// The fabric path was lost and the socket moves the connection onto TCP: nothing
    /// more is written into the peer's ring; what is in this end's ring is still read.
    moving: bool,
    /// An implicit connection of datagram sockets: it has no byte stream to carry over to
    /// TCP, so a lost fabric path resets it (its datagrams go over UDP again).
    never_moves: bool,
    /// How the recent waits of blocking sends and of blocking receives ended: whether
    /// the next one spins (`proto/spin.rs`).
    spin_send: SpinHistory,
    spin_recv: SpinHistory,
    /// Ring bytes a kernel reader kept after `read_sock` lent them in place: the receive
    /// queue holds the writer off them until it lets go (`read_sock.rs`).
    lent: Option<Arc<Lent>>,
    /// The sweep found a doorbell due: how many doorbells had come then
    /// ([`Conn::sweep`]).
    due_at: Option<u32>,
}

/// One SCI connection end.
#[pin_data]
pub(crate) struct Conn {
    /// This end's id (its slot in the connection table and the slot's generation).
    pub(crate) id: ConnId,
    /// The node of the other end.
    pub(crate) peer_node: NodeId,
    /// This end's segment (receive area, then the credit area of the outgoing queue).
    seg: Arc<SegMem>,
    /// The parameters of the queue this end receives on.
    params: QueueParams,
    /// Taken by processes, and by a kernel reader's `read_sock` in atomic context when no
    /// process holds it (`read_sock.rs`).
    #[pin]
    inner: GatedMutex<Inner>,
    /// Address of the socket to wake (an `AF_SCI` sk), 0 when none. Taken with bottom
    /// halves off: doorbells wake it in softirq context.
    #[pin]
    owner: SpinLockBh<usize>,
    /// Who moves the connection onto TCP when the fabric path is lost (none: it resets).
    #[pin]
    mover: SpinLock<Option<Arc<dyn Mover>>>,
    /// `getsockname` of the connection.
    pub(crate) local: Addr,
    /// `getpeername` of the connection.
    pub(crate) peer: Addr,
    /// The table's record of which connections hold bytes back (gathering).
    slots: Arc<HeldSlots>,
    /// The peer end's channel once established (`u32::MAX` before): read without the
    /// mutex by the table's check of a request against the connections it already has
    /// ([`Conn::may_hold_peer_slot`]), which a flood of forged frames runs per frame.
    peer_slot: AtomicU32,
    /// An implicit connection of datagram sockets ([`Conn::never_move`]), read without
    /// the mutex by its wakes (atomic context).
    carries_datagrams: AtomicBool,
    /// The peer's lines in this end's segment as the last doorbell saw them, and how
    /// many doorbells came ([`Conn::doorbell`]).
    bell: bell::Seen,
}

/// A connection's two ends as fdinfo names them ([`Conn::ends`]).
#[derive(Clone, Copy)]
pub(crate) struct Ends {
    node: NodeId,
    id: ConnId,
    peer_channel: u32,
}

impl core::fmt::Display for Ends {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "node {} channel {} generation {} peer-channel {}",
            self.node, self.id.slot, self.id.generation, self.peer_channel
        )
    }
}

/// What a send or receive that stopped early reports: the bytes it moved, if any, else
/// the error (as TCP does).
fn partial(done: usize, err: Error) -> Result<c_int> {
    if done > 0 {
        Ok(done as c_int)
    } else {
        Err(err)
    }
}

/// A protocol error (the peer broke the queue protocol, or its memory went away): the
/// call fails with `EPROTO` and the connection is aborted. Logged, at most once a second
/// (endpoints latch the error and return it on every later call): a peer's bug, a
/// scribbled region or a fabric fault is worth knowing about.
fn proto_err<E: core::fmt::Debug>(e: E) -> Error {
    static LAST_LOG_MS: AtomicI64 = AtomicI64::new(i64::MIN);
    if once_a_second(&LAST_LOG_MS) {
        pr_warn!(
            "SCI connection protocol error: {:?}; the connection is aborted\n",
            e
        );
    }
    errno(bindings::EPROTO)
}

/// Whether a log line limited to one a second (its last time in `last_ms`) may go out.
pub(crate) fn once_a_second(last_ms: &AtomicI64) -> bool {
    let now = Ktime::ktime_get().to_ms();
    let last = last_ms.load(Ordering::Relaxed);
    now.saturating_sub(last) >= 1000
        && last_ms
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
}

impl Conn {
    /// A new connection end `id` talking to `peer_node`: its segment is allocated and
    /// exported, and its own areas are initialised for `params` (the generation and
    /// start both directions use).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        fabric: &dyn Fabric,
        slots: Arc<HeldSlots>,
        id: ConnId,
        peer_node: NodeId,
        params: QueueParams,
        local: Addr,
        peer: Addr,
    ) -> Result<Arc<Self>> {
        let rx_size = params.geometry.rx_area_size();
        let seg = fabric.create_segment(id.slot, rx_size + CREDIT_AREA_SIZE, peer_node)?;
        queue::init_rx_area(&*seg, 0, params).map_err(proto_err)?;
        queue::init_credit_area(&*seg, rx_size, params).map_err(proto_err)?;
        Arc::pin_init(
            pin_init!(Self {
                id,
                peer_node,
                seg,
                params,
                inner <- new_gated_mutex!(
                    Inner {
                        phase: Phase::Connecting,
                        peer_id: ConnId::NONE,
                        tx: None,
                        rx: None,
                        peer_seg: None,
                        local: Local::default(),
                        held: nagle::Held::default(),
                        never_shared: false,
                        peer_lost: false,
                        peer_gone: false,
                        moving: false,
                        never_moves: false,
                        spin_send: SpinHistory::new(),
                        spin_recv: SpinHistory::new(),
                        lent: None,
                        due_at: None,
                    },
                    "Conn::inner"
                ),
                owner <- new_spinlock_bh!(0, "Conn::owner"),
                mover <- kernel::new_spinlock!(None, "Conn::mover"),
                local,
                peer,
                slots,
                peer_slot: AtomicU32::new(u32::MAX),
                carries_datagrams: AtomicBool::new(false),
                bell: bell::Seen::new(&*seg, rx_size),
            }),
            GFP_KERNEL,
        )
    }

    /// The queue this end offers the peer (its receive area).
    pub(crate) fn offer(&self) -> QueueOffer {
        QueueOffer {
            ring_log2: self.params.geometry.log2() as u8,
            rx_area: 0,
            credit_area: self.params.geometry.rx_area_size() as u64,
            start: self.params.start,
        }
    }

    /// Whether `seg` is this end's own segment (a channel's segment is that of whichever
    /// connection holds the slot now).
    pub(crate) fn owns_segment(&self, seg: &Arc<SegMem>) -> bool {
        Arc::ptr_eq(&self.seg, seg)
    }

    /// Where the connection stands.
    pub(crate) fn phase(&self) -> Phase {
        self.inner.lock().phase
    }

    /// The peer end's id (`ConnId::NONE` until established).
    pub(crate) fn peer_id(&self) -> ConnId {
        self.inner.lock().peer_id
    }

    /// Where this connection's two ends are, as fdinfo names them (`node N channel C
    /// generation G peer-channel P`): the peer's node, this end's channel and generation
    /// and the peer end's channel, which is where each end's segment is in the region's
    /// export directories.
    pub(crate) fn ends(&self) -> Ends {
        Ends {
            node: self.peer_node,
            id: self.id,
            peer_channel: self.peer_id().slot,
        }
    }

    /// This end's adaptive spinning, receive and send (for `fdinfo`).
    pub(crate) fn spin_histories(&self) -> (SpinHistory, SpinHistory) {
        let g = self.inner.lock();
        (g.spin_recv, g.spin_send)
    }

    /// Whether this end is established with its peer end in channel `slot` of its peer
    /// node, and that end is not known lost (a lost one's node may free its slot).
    pub(crate) fn holds_peer_slot(&self, slot: u32) -> bool {
        let g = self.inner.lock();
        g.phase == Phase::Established && !g.peer_lost && g.peer_id.slot == slot
    }

    /// A cheap first test for [`Conn::holds_peer_slot`], without the mutex: false means
    /// this end is not established with the peer end in channel `slot`.
    pub(crate) fn may_hold_peer_slot(&self, slot: u32) -> bool {
        self.peer_slot.load(Ordering::Relaxed) == slot
    }

    /// Builds the queues from the peer's validated offer and its mapped segment.
    pub(crate) fn establish(
        &self,
        peer_id: ConnId,
        offer: ValidOffer,
        peer_seg: Arc<SegMem>,
    ) -> Result {
        let rx_size = self.params.geometry.rx_area_size();
        let tx_params = offer.params(self.params.generation);
        if tx_params.start != self.params.start {
            return Err(errno(bindings::EPROTO));
        }
        let tx = Producer::new(
            peer_seg.clone(),
            offer.rx_area,
            self.seg.clone(),
            rx_size,
            tx_params,
        )
        .map_err(proto_err)?;
        let rx = Consumer::new(
            self.seg.clone(),
            0,
            peer_seg.clone(),
            offer.credit_area,
            self.params,
            queue::default_publish_threshold(self.params.geometry),
        )
        .map_err(proto_err)?;
        let mut g = self.inner.lock();
        if g.local.closed {
            // Closed while the answer was on its way (a connect that gave up): the caller
            // tells the peer, whose end must not wait for this one.
            return Err(errno(bindings::ECONNABORTED));
        }
        g.peer_id = peer_id;
        self.peer_slot.store(peer_id.slot, Ordering::Relaxed);
        // The peer's node went down while this end was being set up, after the fabric
        // reset the connections it knew of (this one is in the table already, so a later
        // down finds it): reset it now.
        let lost = peer_seg.revoked();
        g.tx = Some(tx);
        g.rx = Some(rx);
        if lost {
            if let Some(rx) = g.rx.as_mut() {
                rx.latch_peer_abort();
            }
        }
        g.peer_seg = Some(peer_seg);
        g.phase = Phase::Established;
        drop(g);
        self.wake(Wake::State);
        Ok(())
    }

    /// The peer's answer cannot be taken (its end is told to go): the socket falls back.
    pub(crate) fn refuse(&self) {
        self.inner.lock().phase = Phase::Refused;
        self.wake(Wake::State);
    }

    /// The peer's node rejected the request for `why`: the socket falls back.
    pub(crate) fn rejected(&self, why: RejectReason) {
        self.inner.lock().phase = match why {
            RejectReason::NoResources => Phase::NoRoom,
            RejectReason::NoListener => Phase::NoListener,
            _ => Phase::Refused,
        };
        self.set_never_shared();
        self.wake(Wake::State);
    }

    /// Records that no end on the peer's node knows of this one, so that its segment
    /// goes as soon as the connection is freed, with no grace period.
    pub(crate) fn set_never_shared(&self) {
        self.inner.lock().never_shared = true;
        self.seg.peer_done();
    }

    /// When this end's segment may be used again, once this end is closed (a peer end
    /// on another node stores into it until it closes too).
    pub(crate) fn release(&self) -> Release {
        let mut g = self.inner.lock();
        let phase = g.phase;
        let mut peer = PeerEnd {
            never_shared: g.never_shared,
            lost: g.peer_lost,
            ..PeerEnd::default()
        };
        let Inner { tx, rx, .. } = &mut *g;
        let queues = match (tx.as_mut(), rx.as_mut()) {
            (Some(tx), Some(rx)) => {
                peer.reader_closed = tx.peer().closed;
                peer.writer_closed = rx.peer().closed;
                true
            }
            _ => false,
        };
        drop(g);
        let release = state::release(phase, queues, peer);
        if release == Release::PeerDone {
            // Its pages need no quarantine: the peer stores nothing more.
            self.seg.peer_done();
        }
        release
    }

    /// Sets (or, with 0, clears) the socket that this connection wakes.
    pub(crate) fn set_owner(&self, sk: usize) {
        *self.owner.lock() = sk;
    }

    /// Wakes the owning socket, if any (safe in atomic context). An implicit connection
    /// wakes its datagram socket for nothing but a datagram ([`Conn::doorbell`]).
    pub(crate) fn wake(&self, what: Wake) {
        if self.carries_datagrams.load(Ordering::Relaxed) {
            return;
        }
        let owner = self.owner.lock();
        wake_sk(*owner, what);
    }

    /// Re-decides the bytes held back (the connector kthread, on a doorbell or its tick).
    pub(crate) fn redecide(&self, fabric: &dyn Fabric) {
        let mut g = self.inner.lock();
        let peer_id = g.peer_id;
        let closed = g.local.closed;
        let Inner { tx, held, .. } = &mut *g;
        let Some(tx) = tx.as_mut() else {
            return;
        };
        let ring = if closed {
            nagle::release(&self.slots, held, self.id.slot);
            false
        } else {
            nagle::redecide(&self.slots, tx, held, self.id.slot).unwrap_or_else(|_| {
                nagle::release(&self.slots, held, self.id.slot);
                false
            })
        };
        drop(g);
        if ring {
            self.notify_peer(fabric, peer_id);
        }
    }

    /// Sends what gathering holds back now (`TCP_NODELAY` set, `TCP_CORK` cleared).
    pub(crate) fn push(&self, fabric: &dyn Fabric) {
        let mut g = self.inner.lock();
        let peer_id = g.peer_id;
        let closed = g.local.closed;
        let Inner { tx, held, .. } = &mut *g;
        let Some(tx) = tx.as_mut() else {
            return;
        };
        let ring = !closed && nagle::flush(&self.slots, tx, held, self.id.slot).unwrap_or(false);
        drop(g);
        if ring {
            self.notify_peer(fabric, peer_id);
        }
    }

    fn notify_peer(&self, fabric: &dyn Fabric, peer_id: ConnId) {
        fabric.notify(self.peer_node, peer_id.slot);
    }

    /// `shutdown(2)`: `how` is `SHUT_RD`, `SHUT_WR` or `SHUT_RDWR`.
    pub(crate) fn shutdown(&self, fabric: &dyn Fabric, how: c_int) -> Result {
        let mut g = self.inner.lock();
        let peer_id = g.peer_id;
        let how = how as u32;
        let rd = how == bindings::sock_shutdown_cmd_SHUT_RD
            || how == bindings::sock_shutdown_cmd_SHUT_RDWR;
        let wr = how == bindings::sock_shutdown_cmd_SHUT_WR
            || how == bindings::sock_shutdown_cmd_SHUT_RDWR;
        let Inner {
            tx,
            rx,
            local,
            held,
            ..
        } = &mut *g;
        let peer = peer_of_opt(tx.as_mut(), rx.as_mut());
        // As TCP once both FINs passed (TIME_WAIT or closed): nothing left to shut.
        let what = state::shutdown(local, peer, rd, wr).map_err(|()| errno(bindings::ENOTCONN))?;
        let mut ring = false;
        if let (true, Some(tx)) = (what.done_writing, tx.as_mut()) {
            // Publishes the held bytes first: the peer reads them all, then EOF.
            tx.set_done_writing().map_err(proto_err)?;
            nagle::release(&self.slots, held, self.id.slot);
            ring = true;
        }
        drop(g);
        if ring {
            self.notify_peer(fabric, peer_id);
        }
        self.wake(Wake::State);
        Ok(())
    }

    /// `close(2)`: a graceful close, or an abort (the peer sees `ECONNRESET`) when data
    /// was left unread or `abort` (`SO_LINGER` with a zero timeout) asks for it.
    pub(crate) fn close(&self, fabric: &dyn Fabric, abort: bool) {
        self.set_owner(0);
        self.set_mover(None);
        let mut g = self.inner.lock();
        let peer_id = g.peer_id;
        let Inner {
            tx,
            rx,
            held,
            local,
            ..
        } = &mut *g;
        local.closed = true;
        if let (Some(tx), Some(rx)) = (tx.as_mut(), rx.as_mut()) {
            let unread = rx.refresh().map(|avail| avail > 0).unwrap_or(true);
            let broken = rx.error().is_some() || tx.error().is_some();
            // A graceful close publishes the held bytes before the flag; an abort drops
            // them (as a reset drops TCP's send queue).
            let graceful = state::close(local, abort, unread, broken) == state::Close::Graceful;
            if !graceful || tx.set_closed().is_err() {
                tx.set_abort();
            }
            nagle::release(&self.slots, held, self.id.slot);
            rx.set_closed();
            drop(g);
            self.notify_peer(fabric, peer_id);
        }
    }
}

/// What the peer end said, as the queues latched it.
fn peer_of(tx: &mut Tx, rx: &mut Rx) -> Peer {
    let w = rx.peer();
    Peer {
        done_writing: w.done_writing,
        reader_closed: tx.peer().closed,
        abort: w.abort,
    }
}

/// [`peer_of`], or nothing said while a queue is not built.
fn peer_of_opt(tx: Option<&mut Tx>, rx: Option<&mut Rx>) -> Peer {
    match (tx, rx) {
        (Some(tx), Some(rx)) => peer_of(tx, rx),
        (None, Some(rx)) => {
            let w = rx.peer();
            Peer {
                done_writing: w.done_writing,
                reader_closed: false,
                abort: w.abort,
            }
        }
        _ => Peer::default(),
    }
}
