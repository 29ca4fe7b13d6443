// SPDX-License-Identifier: GPL-2.0

//! The implicit SCI connections of one datagram socket (seed §5.1.7, "Implicit
//! Connections for Datagram Sockets").
//!
//! Once its native UDP socket is bound, a datagram socket has an [`Endpoint`], entered in
//! the control plane's table of datagram ports under the address it is bound to. Its
//! connections go two ways:
//!
//! - **outbound**, one per destination (address and port) it sends to on a node of the
//!   fabric that the node map and port rules allow. The first datagram to a destination
//!   goes over UDP and mails a connect request with the datagram flag; datagrams sent
//!   meanwhile go over UDP too (none waits). Once the peer's node answered, the next ones
//!   go into the connection's ring, one record each (`conn/datagram.rs`); one that finds
//!   the ring full, or the receiver's `SO_RCVBUF` worth of datagrams waiting there, is
//!   dropped and counted, as UDP drops one at a full receive buffer, and the receiving
//!   socket adds the count to its own drops once it read the ring empty. No
//!   datagram socket bound there: the refusal is remembered as a stream connect's is
//!   (`control/refusals.rs`), and the destination stays UDP;
//! - **inbound**: the peer node's requests, served by the listener kthread, which hands
//!   the new end here with no `accept()`; `recvmsg` takes from them and from the native
//!   socket, and `poll` reports both.
//!
//! Ordering: a sender keeps to UDP until the datagrams it sent there while the connection
//! was being set up have left this machine (unless it floods: `outbound.rs`), and the
//! receiver reads its native socket first while a new connection settles; one still on
//! its way between the machines may yet be overtaken by the first over SCI, which UDP
//! allows. After that, one path per destination keeps them in order, which is more than
//! UDP promises.
//!
//! A connection without a datagram for `dgram_idle_ms` is ended by its sender (the
//! listener kthread's sweep); the receiver reads what is left in the ring, then lets it
//! go. A peer that closes its socket or whose node goes down ends it too, and the next
//! datagram goes over UDP.
//!
//! The sending side is in `implicit/outbound.rs`; this file holds the endpoint, its
//! receiving side and what the control plane asks of it.

mod outbound;

use crate::config::rules::Ip;
use crate::conn::addr::ListenAddr;
use crate::conn::{Conn, Ends, Read, Received};
use crate::control::{DatagramPort, Plane};
use crate::proto::spin::{SpinHistory, SpinSetting};
use crate::socket::dgram::inbound::{Inbound, MAX_IN};
use crate::socket::native::Native;
use crate::socket::registry::DgramInfo;
use crate::socket::sk::OwnSk;
use crate::socket::stack::Stack;
use crate::sys::net::Msg;
use crate::sys::params::{default_spin_us, dgram_idle_ms};
use crate::sys::percpu_counters::HotCounter;
use crate::sys::task::{coarse_ms, cpu_contended};
use core::mem::ManuallyDrop;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use kernel::prelude::*;
use kernel::sync::{Arc, Mutex};
use outbound::{answer_ms, Outbound, Starting};
pub(crate) use outbound::{udp_max_payload, Outgoing, SourceAsk};

/// Destinations a socket reaches over SCI at once (others take UDP).
const MAX_OUT: usize = 16;
/// Inbound connections [`Endpoint::with_inbound`] looks at without clearing room for
/// [`MAX_IN`].
const FEW_IN: usize = 4;
/// Now, for the connections' idle and answer times (ms, at tick resolution: a connection
/// lasts at most a tick longer than its idle time).
fn now_ms() -> i64 {
    coarse_ms()
}

/// The connections, under the endpoint's mutex.
struct Conns {
    /// The socket closed: nothing more is set up or taken.
    closed: bool,
    out: [Option<Outbound>; MAX_OUT],
    /// The connections from peers (round robin for reads).
    inbound: Inbound,
    /// A connection was attached and the native socket has not been found empty since:
    /// reads take the native socket's datagrams first, which were sent over UDP before
    /// the connection came up.
    settling: bool,
    /// How the recent spins of blocking reads ended (`proto/spin.rs`).
    spin: SpinHistory,
}

/// Where a read last peeked at a datagram.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Peeked {
    /// Nowhere (the last read took its datagram).
    Nothing = 0,
    /// The native socket.
    Native = 1,
    /// An implicit connection's ring (the one the next read starts at).
    Ring = 2,
}

impl Peeked {
    fn from_u8(v: u8) -> Self {
        match v {
            1 => Self::Native,
            2 => Self::Ring,
            _ => Self::Nothing,
        }
    }
}

/// What a datagram socket is over the fabric (see the module doc).
#[pin_data]
pub(crate) struct Endpoint {
    /// The socket's wake token (its sk), which its connections' doorbells wake.
    owner: usize,
    /// The native UDP socket, bound (it outlives the endpoint's use: the socket closes
    /// the endpoint before it releases the native socket).
    native: Native,
    /// What the socket is bound to, as requests are matched.
    pub(crate) addr: ListenAddr,
    #[pin]
    conns: Mutex<Conns>,
    /// Where the last read peeked ([`Peeked`]): the next read looks there first, so that
    /// it returns the datagram peeked at. This and `rings_turn` are what reads tell each
    /// other outside `conns`, so that a read from the socket's only connection (the common
    /// case) takes that mutex once, for the connection's reference; two reads at once
    /// order their stores as they would order their turns at the mutex, either way round.
    peeked: AtomicU8,
    /// When the native socket and the rings both hold datagrams, reads take turns: true
    /// when the rings' is next (unless `Conns::settling`).
    rings_turn: AtomicBool,
    /// Datagrams sent over SCI, received over SCI, and dropped at a full peer ring.
    sent: AtomicU64,
    received: AtomicU64,
    dropped: AtomicU64,
}

/// One implicit connection as fdinfo names it (`sci-implicit-conn:`): which way it
/// carries datagrams, and its ends as a stream connection's `sci-conn:` names them.
pub(crate) struct ImplicitEnds {
    /// Datagrams go out on it (else they come in).
    outbound: bool,
    ends: Ends,
}

impl core::fmt::Display for ImplicitEnds {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let way = if self.outbound { "out" } else { "in" };
        writeln!(f, "sci-implicit-conn:\t{way} {}", self.ends)
    }
}

/// A datagram a read took from an implicit connection, and the connection: its source
/// (`peer`), and the address it was sent to (`local`), which with `loopback` (sent from
/// this machine) is its packet information ([`Native::put_ip_cmsgs`]).
pub(crate) struct Taken {
    pub(crate) got: Received,
    pub(crate) conn: Arc<Conn>,
    pub(crate) loopback: bool,
}
impl Endpoint {
    /// An endpoint for the socket `owner` whose native socket is bound to `addr`.
    pub(crate) fn new(owner: usize, native: Native, addr: ListenAddr) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                owner,
                native,
                addr,
                conns <- kernel::new_mutex!(
                    Conns {
                        closed: false,
                        out: [const { None }; MAX_OUT],
                        inbound: Inbound::new(),
                        settling: false,
                        spin: SpinHistory::new(),
                    },
                    "dgram::Endpoint::conns"
                ),
                sent: AtomicU64::new(0),
                peeked: AtomicU8::new(Peeked::Nothing as u8),
                rings_turn: AtomicBool::new(false),
                received: AtomicU64::new(0),
                dropped: AtomicU64::new(0),
            }),
            GFP_KERNEL,
        )
    }

    /// Takes the next datagram from the implicit connections (round robin), with `peek`
    /// leaving it; `None` when none waits. A datagram taken counts as received, here and
    /// in the namespace's counters, as one sent counts in [`Endpoint::send`].
    pub(crate) fn recv(
        &self,
        plane: &Plane<'_>,
        own: &OwnSk,
        msg: Msg,
        len: usize,
        peek: bool,
    ) -> Result<Option<Taken>> {
        let watched = own.watched();
        // One connection at a time, each reference taken under the lock and looked at
        // outside it (a copy to the reader's buffer may fault and wait, and the listener
        // kthread, which serves every socket, takes this lock to attach); round robin
        // from where the last read left off.
        let mut k = 0;
        loop {
            // (Not in a `while let`, whose guard would live through the body.)
            let (conn, alone) = {
                let g = self.conns.lock();
                let Some(conn) = g.inbound.nth_in_turn(k) else {
                    return Ok(None);
                };
                (conn, g.inbound.len() == 1)
            };
            match conn.recv_datagram(plane.fabric(), msg, len, peek, watched) {
                Ok(Read::Got(got)) => {
                    // The next read starts after this connection, or at it after a peek,
                    // which leaves its datagram there; with one connection, a read that
                    // took its datagram leaves that as it was.
                    if peek || !alone {
                        self.conns.lock().inbound.read_from(&conn, peek);
                    }
                    self.set_peeked(if peek { Peeked::Ring } else { Peeked::Nothing });
                    self.rings_turn.store(false, Ordering::Relaxed);
                    if !peek {
                        self.received.fetch_add(1, Ordering::Relaxed);
                        own.count(HotCounter::DgramReceived, 1);
                    }
                    return Ok(Some(Taken {
                        got,
                        loopback: plane.within_node(&conn),
                        conn,
                    }));
                }
                // Read empty: what its sender dropped meanwhile counts now; one stopped by
                // a connect to another peer and read to there ends (the next one moves
                // into its place).
                Ok(Read::Empty { drops, over }) => {
                    self.native.add_drops(drops);
                    if over && self.drop_inbound(plane, &conn) {
                        continue;
                    }
                }
                Err(e) if e == EFAULT => return Err(e),
                // A ring the peer broke: that connection ends, the others carry on.
                Err(_) => {
                    if self.drop_inbound(plane, &conn) {
                        continue;
                    }
                }
            }
            k += 1;
        }
    }

    /// Where the last read peeked.
    pub(crate) fn peeked(&self) -> Peeked {
        Peeked::from_u8(self.peeked.load(Ordering::Relaxed))
    }

    /// Sets where the last read peeked.
    fn set_peeked(&self, p: Peeked) {
        self.peeked.store(p as u8, Ordering::Relaxed);
    }

    /// Whether a read with datagrams in both places takes the native socket's first: while
    /// a new connection settles (see [`Conns::settling`]), and every other time after.
    pub(crate) fn native_turn(&self) -> bool {
        self.conns.lock().settling || !self.rings_turn.load(Ordering::Relaxed)
    }

    /// A read took the native socket's datagram (`peek`: peeked at it), or (`None`) found
    /// the native socket empty.
    pub(crate) fn took_native(&self, taken: Option<bool>) {
        match taken {
            Some(peek) => {
                self.set_peeked(if peek {
                    Peeked::Native
                } else {
                    Peeked::Nothing
                });
                self.rings_turn.store(true, Ordering::Relaxed);
            }
            None => {
                self.conns.lock().settling = false;
                let _ = self.peeked.compare_exchange(
                    Peeked::Native as u8,
                    Peeked::Nothing as u8,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
        }
    }

    /// A blocking read about to sleep spins first, as a stream socket's does
    /// (`spin_us`: adaptive unless set), while `ready` says nothing came; only a socket
    /// with implicit connections spins (a UDP-only one sleeps as UDP's). True when
    /// something came.
    pub(crate) fn spin_before_sleep(&self, own: &OwnSk, mut ready: impl FnMut() -> bool) -> bool {
        let setting = default_spin_us().map_or(SpinSetting::Adaptive, SpinSetting::Fixed);
        let us = {
            let mut g = self.conns.lock();
            if g.inbound.is_empty() {
                return false;
            }
            g.spin.plan(setting, cpu_contended())
        };
        if us == 0 {
            return false;
        }
        // The connections as they are now: a spin looks at their rings only (one lock
        // each per look, as a stream read's spin takes). One attached meanwhile armed its
        // doorbell (`attach`); the wait after the spin looks at it.
        let hit = self.with_inbound(|conns| {
            // The last read that drained a ring asked for a doorbell at its next datagram;
            // a spin that will see that datagram itself withdraws the request (as a
            // stream read does), so the writer rings none, between machines an interrupt
            // and a wake-up saved. Not while something else watches the socket (an epoll,
            // poll or another reader asleep), which needs the doorbell.
            if !own.watched() {
                for conn in conns.iter().flatten() {
                    conn.withdraw_datagram_wait();
                }
            }
            own.spin(us, || {
                ready() || conns.iter().flatten().any(|c| c.datagram_waiting())
            })
        });
        if setting == SpinSetting::Adaptive {
            self.conns.lock().spin.record(hit);
        }
        hit
    }

    /// Records what a blocking read's sleep cost (`wake_us` from its wake-up to running
    /// again, 0: no wake-up ended it), which sizes the next adaptive spins.
    pub(crate) fn sleep_cost(&self, wake_us: u32) {
        if wake_us != 0 && default_spin_us().is_none() {
            self.conns.lock().spin.record_wake(wake_us);
        }
    }

    /// Forgets a peek whose datagram another reader took.
    pub(crate) fn forget_peek(&self) {
        self.set_peeked(Peeked::Nothing);
    }

    /// Whether a datagram waits in an inbound ring; the empty ones are asked to ring the
    /// doorbell at their next datagram (poll, and a reader about to sleep).
    pub(crate) fn any_ready(&self, plane: &Plane<'_>) -> bool {
        self.with_inbound(|conns| {
            let mut ready = false;
            for conn in conns.iter().flatten() {
                // Every ring is asked, ready or not: each must ring at its next datagram.
                let (waiting, drops) = conn.datagram_ready(plane.fabric());
                ready |= waiting;
                self.native.add_drops(drops);
            }
            ready
        })
    }

    /// Whether a datagram waits in an inbound ring: a look that posts nothing (a reader
    /// woken up, which most likely finds one; else [`Endpoint::any_ready`]).
    pub(crate) fn any_waiting(&self) -> bool {
        self.with_inbound(|conns| conns.iter().flatten().any(|c| c.datagram_waiting()))
    }

    /// The socket's receive buffer changed (`SO_RCVBUF`): each ring's sender learns it.
    pub(crate) fn rcvbuf_changed(&self) {
        let budget = self.native.rcvbuf();
        self.with_inbound(|conns| {
            for conn in conns.iter().flatten() {
                conn.set_datagram_budget(budget);
            }
        });
    }

    /// The length of the next datagram in an inbound ring (`FIONREAD`), if any.
    pub(crate) fn next_len(&self) -> Option<usize> {
        let start = self.conns.lock().inbound.next();
        self.with_inbound(|conns| {
            (0..conns.len())
                .map(|k| (start + k) % conns.len())
                .find_map(|i| conns[i].as_ref().and_then(|c| c.next_datagram_len()))
        })
    }

    /// Runs `f` on references to the inbound connections, taken under the lock and looked
    /// at outside it.
    fn with_inbound<R>(&self, f: impl FnOnce(&[Option<Arc<Conn>>]) -> R) -> R {
        // This runs for every poll and every blocking read that waits, and a socket has a
        // connection or two: their references go on the stack in a few slots, where
        // [`MAX_IN`] of them would be half a KiB to clear each time.
        let g = self.conns.lock();
        if g.inbound.len() <= FEW_IN {
            let mut refs = [const { None }; FEW_IN];
            let n = g.inbound.clone_into(&mut refs);
            drop(g);
            return f(&refs[..n]);
        }
        // Only the slots filled are emptied after `f`: the array's own drop would look at
        // every slot.
        let mut refs = ManuallyDrop::new([const { None }; MAX_IN]);
        let n = g.inbound.clone_into(&mut refs[..]);
        drop(g);
        let r = f(&refs[..n]);
        refs[..n].iter_mut().for_each(|c| drop(c.take()));
        r
    }

    /// Ends the inbound connection `conn`, if it is still one of this endpoint's; true if
    /// it was.
    fn drop_inbound(&self, plane: &Plane<'_>, conn: &Arc<Conn>) -> bool {
        let taken = self.conns.lock().inbound.take(conn);
        taken.inspect(|c| end(plane, c)).is_some()
    }

    /// Ends every inbound connection (the reader asked for control messages, which
    /// datagrams over SCI do not carry). Datagrams still in their rings go with them,
    /// counted as dropped (`SO_RXQ_OVFL`, `/proc/net/udp`): lost, but not unseen.
    pub(crate) fn end_inbound(&self, plane: &Plane<'_>) {
        Self::end_inbound_of(&mut self.conns.lock(), plane, |c| {
            let discarded = c.discard_datagrams();
            self.native
                .add_drops(discarded.saturating_add(c.datagram_drops()));
            true
        });
    }

    /// Ends the inbound connections of `g` that `ends` picks.
    fn end_inbound_of(g: &mut Conns, plane: &Plane<'_>, ends: impl FnMut(&Conn) -> bool) {
        g.inbound.take_where(ends, |c| end(plane, &c));
    }

    /// The socket connected to `peer` (or, `None`, disconnected): connections from other
    /// peers stop where their peers' datagrams are now, as a connected UDP socket takes
    /// datagrams from its peer only but still delivers those queued before. Each ends
    /// once read to there (or at once when nothing waits).
    pub(crate) fn connected(&self, plane: &Plane<'_>, peer: Option<(Ip, u16)>) {
        let Some(peer) = peer else {
            return;
        };
        Self::end_inbound_of(&mut self.conns.lock(), plane, |c| {
            !from_peer(c, peer) && c.stop_datagrams()
        });
    }

    /// The socket closes: it leaves the table and every connection ends (datagrams still
    /// in its rings go with it, as a UDP socket's queue does).
    pub(crate) fn close(self: &Arc<Self>, stack: &Stack) {
        let port: Arc<dyn DatagramPort> = self.clone();
        stack.plane.unbind_datagram(&port);
        let plane = stack.plane.plane();
        let mut g = self.conns.lock();
        g.closed = true;
        for o in g.out.iter_mut().filter_map(Option::take) {
            end(&plane, &o.conn);
        }
        Self::end_inbound_of(&mut g, &plane, |_| true);
    }

    /// The ends of the connections that carry datagrams: the outbound ones that are up
    /// and the inbound ones (fdinfo).
    pub(crate) fn ends(&self) -> Result<KVec<ImplicitEnds>> {
        let out: [Option<Arc<Conn>>; MAX_OUT] = {
            let g = self.conns.lock();
            core::array::from_fn(|i| g.out[i].as_ref().filter(|o| o.up).map(|o| o.conn.clone()))
        };
        // Outside the endpoint's lock: each takes its connection's.
        self.with_inbound(|inbound| {
            let mut lines = KVec::with_capacity(MAX_OUT + MAX_IN, GFP_KERNEL)?;
            for (outbound, conns) in [(true, &out[..]), (false, inbound)] {
                for conn in conns.iter().flatten() {
                    let ends = conn.ends();
                    lines.push(ImplicitEnds { outbound, ends }, GFP_KERNEL)?;
                }
            }
            Ok(lines)
        })
    }

    /// Its outbound connections still starting (fdinfo's `sci-implicit-starting:`).
    pub(crate) fn starting(&self) -> Result<KVec<Starting>> {
        let g = self.conns.lock();
        let mut lines = KVec::new();
        for s in g.out.iter().flatten().filter_map(Outbound::starting) {
            lines.push(s, GFP_KERNEL)?;
        }
        Ok(lines)
    }

    /// The counters and open connections (`fdinfo`, `SCI_INFO` and the socket dump).
    pub(crate) fn counts(&self) -> DgramInfo {
        let g = self.conns.lock();
        DgramInfo {
            implicit_out: g.out.iter().flatten().filter(|o| o.up).count() as u32,
            implicit_in: g.inbound.len() as u32,
            sent: self.sent.load(Ordering::Relaxed),
            received: self.received.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
        }
    }
}

/// Whether `conn` comes from `peer` (the address a connected socket named).
fn from_peer(conn: &Conn, (ip, port): (Ip, u16)) -> bool {
    conn.peer
        .ip_port()
        .is_some_and(|(i, p)| p == port && i.canonical() == ip.canonical())
}

/// Ends an implicit connection: closed (gracefully: the peer reads what is in its ring
/// first) and its slot freed when the peer's state allows.
fn end(plane: &Plane<'_>, conn: &Arc<Conn>) {
    conn.close(plane.fabric(), false);
    plane.free_conn(conn);
}

/// What the control plane asks of a datagram socket.
impl DatagramPort for Endpoint {
    fn attach(&self, plane: &Plane<'_>, conn: Arc<Conn>) -> core::result::Result<(), Arc<Conn>> {
        let mut g = self.conns.lock();
        if g.closed || self.native.wants_cmsg() {
            return Err(conn);
        }
        // A connected socket takes datagrams from its peer only.
        let (peer_ip, peer_port) = self.native.addrs().peer;
        if peer_port != 0 && !from_peer(&conn, (peer_ip, peer_port)) {
            return Err(conn);
        }
        if g.inbound.push(conn.clone()).is_err() {
            return Err(conn);
        }
        conn.never_move();
        conn.set_owner(self.owner);
        // Before the answer goes out: the sender's first datagram finds the budget.
        conn.set_datagram_budget(self.native.rcvbuf());
        g.settling = true;
        drop(g);
        // The new ring rings the doorbell at its first datagram, so a reader asleep (or an
        // epoll) hears of it. The socket is not woken now: nothing arrived, and a wake
        // would report an edge to an edge-triggered epoll that UDP never reports. (A new
        // ring has dropped nothing yet.)
        conn.datagram_ready(plane.fabric());
        Ok(())
    }

    fn sweep(&self, plane: &Plane<'_>) {
        let now = now_ms();
        let idle = i64::from(dgram_idle_ms());
        let mut g = self.conns.lock();
        for slot in g.out.iter_mut() {
            let over = slot.as_ref().is_some_and(|o| {
                if o.up {
                    now - o.since_ms >= idle || o.conn.datagrams_over()
                } else {
                    // Not answered in time: the next send finds it over (the give-up
                    // there remembers a refusal; this one does not, for want of the socket).
                    now - o.since_ms >= answer_ms().max(idle)
                }
            });
            if over {
                if let Some(o) = slot.take() {
                    end(plane, &o.conn);
                }
            }
        }
        g.inbound.take_where(Conn::datagrams_over, |c| {
            // Read to its end: the drops its sender counted last count now.
            self.native.add_drops(c.datagram_drops());
            end(plane, &c);
        });
    }
}
