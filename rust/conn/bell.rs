// SPDX-License-Identifier: GPL-2.0

//! A connection end's doorbell: which sides of its socket a doorbell wakes, and the
//! sweep that stands in for a doorbell lost on the way.

use super::{read_sock, Conn};
use crate::fabric::memory::SegMem;
use crate::fabric::Fabric;
use crate::proto::queue::{bell_wakes, BellWakes, PeerLines, Writers};
use crate::sys::wake::{wake_sk, Wake};
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// What the doorbells of one connection end have seen (read and changed without a lock:
/// doorbells run in atomic context).
pub(super) struct Seen {
    /// The peer's lines in this end's segment at the last look ([`PeerLines`]), a word
    /// each: two looks at once (a doorbell and the sweep) each take the changes they
    /// swapped out, so every change wakes its side once.
    arrived: AtomicU64,
    writer_flags: AtomicU64,
    freed: AtomicU64,
    reader_flags: AtomicU64,
    /// The direct fills of this end's posted receive buffer at the last look (a fill
    /// moves no line: `fabric/direct.rs`).
    fills: AtomicU64,
    /// Doorbells that came (wrapping): the sweep's proof that one did.
    rung: AtomicU32,
}

impl Seen {
    /// The lines as the connection end's segment `seg` was set up, its receive area
    /// `rx_size` bytes long.
    pub(super) fn new(seg: &SegMem, rx_size: usize) -> Self {
        let l = PeerLines::load(seg, 0, rx_size);
        Self {
            arrived: AtomicU64::new(l.arrived),
            writer_flags: AtomicU64::new(l.writer_flags),
            freed: AtomicU64::new(l.freed),
            reader_flags: AtomicU64::new(l.reader_flags),
            fills: AtomicU64::new(fills_in(seg)),
            rung: AtomicU32::new(0),
        }
    }

    /// Looks at the lines in `seg` (its receive area `rx_size` bytes long): what they were
    /// at the last look, and are now.
    fn look(&self, seg: &SegMem, rx_size: usize) -> (PeerLines, PeerLines) {
        let now = PeerLines::load(seg, 0, rx_size);
        let before = PeerLines {
            arrived: self.arrived.swap(now.arrived, Ordering::AcqRel),
            writer_flags: self.writer_flags.swap(now.writer_flags, Ordering::AcqRel),
            freed: self.freed.swap(now.freed, Ordering::AcqRel),
            reader_flags: self.reader_flags.swap(now.reader_flags, Ordering::AcqRel),
        };
        (before, now)
    }

    /// Whether the peer's writer filled a receive buffer this end posted in `seg` since
    /// the last look.
    fn filled(&self, seg: &SegMem) -> bool {
        let now = fills_in(seg);
        self.fills.swap(now, Ordering::AcqRel) != now
    }

    /// Whether the producer cursor in `seg` moved since the last look: all an implicit
    /// connection's doorbell asks (one load, one swap per datagram).
    fn arrived(&self, seg: &SegMem) -> bool {
        let now = PeerLines::arrived_at(seg, 0);
        self.arrived.swap(now, Ordering::AcqRel) != now
    }
}

/// The direct fills of the receive buffers posted in `seg` so far (none on a device's
/// segment, which has no slot).
fn fills_in(seg: &SegMem) -> u64 {
    seg.direct().map_or(0, |d| d.fills())
}

impl Conn {
    /// A doorbell for this connection: the peer moved a cursor or a flag (safe in atomic
    /// context). Returns true when bytes held back wait for the reader (Nagle's ACK
    /// clock): the caller kicks the connector kthread, which re-decides.
    ///
    /// Bytes wake readers and space the writers that ran out of room, as TCP's segments
    /// and ACKs do, and the peer's end of stream, close or abort every waiter, as TCP's
    /// FIN and reset do ([`bell_wakes`]). An implicit connection wakes its datagram socket
    /// only when a datagram came: its state and its credits are nothing the socket
    /// reports (a sender never waits), and a wake while a UDP datagram waits unread would
    /// give an edge-triggered epoll an edge that UDP never gives (the sender's close rings
    /// this doorbell too).
    #[must_use]
    pub(crate) fn doorbell(&self) -> bool {
        self.bell.rung.fetch_add(1, Ordering::Relaxed);
        let w = if self.carries_datagrams.load(Ordering::Relaxed) {
            BellWakes {
                readable: self.bell.arrived(&self.seg),
                writers: Writers::None,
                state: false,
            }
        } else {
            let filled = self.bell.filled(&self.seg);
            let (before, now) = self
                .bell
                .look(&self.seg, self.params.geometry.rx_area_size());
            bell_wakes(before, now, filled)
        };
        let owner = self.owner.lock();
        if w.state {
            wake_sk(*owner, Wake::State);
        }
        if w.readable {
            wake_sk(*owner, Wake::Readable);
        }
        match w.writers {
            Writers::All => wake_sk(*owner, Wake::Writable),
            Writers::OutOfRoom => wake_sk(*owner, Wake::Space),
            Writers::None => {}
        }
        drop(owner);
        self.slots.doorbell(self.id.slot)
    }

    /// The sweep's look at this connection: if a doorbell it asked for is overdue (the
    /// peer moved a cursor or a flag after this end posted a wait request, and no
    /// doorbell came), treat it as arrived; if a kernel reader let go of ring bytes it
    /// kept, the writer learns of the space. Returns what [`Conn::doorbell`] returns.
    ///
    /// Overdue means due at two sweeps in a row with no doorbell in between. A doorbell
    /// is due from the peer's cursor store until this end looks at the ring again, and
    /// the doorbell that store brings may be on its way: a wake of the sweep's own in
    /// that window, landing after an edge-triggered epoll took the doorbell's edge,
    /// would report the same arrival twice (TCP reports each segment once). A lost
    /// doorbell costs two sweep periods at most.
    #[must_use]
    pub(crate) fn sweep(&self, fabric: &dyn Fabric) -> bool {
        let mut g = self.inner.lock();
        let peer_id = g.peer_id;
        let freed = read_sock::settle_lent(&mut g);
        let closed = g.local.closed;
        let due = !closed
            && (g.rx.as_ref().is_some_and(|rx| rx.wake_due())
                || g.tx.as_ref().is_some_and(|tx| tx.wake_due()));
        let rung = self.bell.rung.load(Ordering::Relaxed);
        let overdue = due && g.due_at == Some(rung);
        g.due_at = (due && !overdue).then_some(rung);
        drop(g);
        if freed {
            self.notify_peer(fabric, peer_id);
        }
        overdue && self.doorbell()
    }
}
