// SPDX-License-Identifier: GPL-2.0

//! `read_sock` on an SCI connection: a kernel user's actor (`iscsi_tcp`) reads the ring as
//! `tcp_read_sock` lets it read TCP's receive queue, without blocking, one socket buffer
//! at a time, and only what the actor used is consumed.
//!
//! Nothing here sleeps, as nothing in `tcp_read_sock` does: the reader may call it from
//! its `sk_data_ready`, in softirq context or with bottom halves off, and `iscsi_tcp`'s
//! actor keeps a page mapped with `kmap_atomic` from one call to the next. So the
//! connection's lock is taken without waiting ([`try_lock_atomic`](crate::sys::gated_mutex::GatedMutex::try_lock_atomic)), once,
//! before the first call, and everything the caller needs afterwards is read under it.
//! When a process holds the lock the read does not happen ([`ReadSock::Held`]), as TCP's
//! softirq receive leaves a socket a process owns to its backlog: the caller reads later.
//!
//! Where the ring's memory has `struct page`s (the loopback fabric's kernel memory, the
//! ivshmem BAR with its `ZONE_DEVICE` pages), the actor is handed its bytes in place: its
//! socket buffer's frags are the ring's pages, so the one copy is the actor's own, as from
//! TCP's receive queue. An actor may keep the buffer after it returned (`skb_get`; a
//! clone gets copies of the pages); the bytes then count as read, but the receive queue
//! announces its cursor only up to them (`Consumer::hold_from`) until the buffer's last
//! reference goes, which the next `read_sock` or the sweep (every 100 ms) notices
//! ([`settle_lent`]). While one buffer is kept, later bytes are copied, so at most one
//! hold is out per connection. Memory without pages is copied into fresh socket buffers.

use super::readiness::tcp_state_of;
use super::transfer::{consume, heard};
use super::{peer_of_opt, proto_err, Caller, Conn, Inner};
use crate::fabric::Fabric;
use crate::proto::ring::Span;
use crate::sys::bindings;
use crate::sys::errno::errno;
use crate::sys::params::widen_wait_race_for_test;
use crate::sys::read_actor::{ReadActor, CHUNK};
use core::ffi::c_int;
use kernel::prelude::*;

/// What a `read_sock` did.
pub(crate) enum ReadSock {
    /// A process holds the connection: nothing was read; read again once it let go.
    Held,
    /// The connection moves onto TCP and its ring is read to its end: nothing was read
    /// here, the rest comes over TCP once the move is finished.
    MovedAway,
    /// The ring was read.
    Read(ReadEnd),
}

/// Where a `read_sock` left the connection.
pub(crate) struct ReadEnd {
    /// Bytes the actor used.
    pub(crate) used: c_int,
    /// The ring is empty and the connection is not moving: the TCP state this end is in
    /// now (`TCP_*`), as a reader learns it after reading.
    pub(crate) state_if_empty: Option<u32>,
    /// The connection moves onto TCP, and the ring is read to its end: the rest comes
    /// over the TCP connection.
    pub(crate) moved_and_drained: bool,
    /// Of `used`, the bytes the actor was handed in place (the rest were copied).
    pub(crate) lent: usize,
    /// The actor kept a buffer it was lent.
    pub(crate) kept: bool,
    /// Bytes kept coming while the ring was looked at: the reader must read again
    /// (woken as by an arrival), since they rang no doorbell.
    pub(crate) come_back: bool,
}

/// If the kernel reader let go of the ring bytes it kept, lets the writer have them:
/// whether to ring the peer's doorbell (the cursor was announced and it waits).
pub(super) fn settle_lent(inner: &mut Inner) -> bool {
    if !inner.lent.as_ref().is_some_and(|l| l.released()) {
        return false;
    }
    inner.lent = None;
    let Some(rx) = inner.rx.as_mut() else {
        return false;
    };
    rx.release_hold();
    rx.publish().unwrap_or(false)
}

impl Conn {
    /// Rings the peer's doorbell, which a `read_sock` found due (process context).
    pub(crate) fn ring_peer(&self, fabric: &dyn Fabric) {
        let peer_id = self.inner.lock().peer_id;
        self.notify_peer(fabric, peer_id);
    }

    /// Feeds the ring's bytes to `actor` until the ring is empty, the actor uses less than
    /// it was given or wants no more; never blocks or sleeps, in any context. With
    /// `may_leave`, a moving connection whose ring is read to its end is left to TCP
    /// ([`ReadSock::MovedAway`]). An error only when nothing was used (the actor's, or
    /// `ENOMEM`). A peer's reset is recorded on `own` (as `recv` records it) when the ring
    /// is empty.
    ///
    /// The peer's doorbell is not rung here: `ring_peer` says it is due, and the caller
    /// rings it ([`Conn::ring_peer`]) from process context. On this node a doorbell is
    /// delivered at once, into the peer's wake-up, whose reader may read in its
    /// `sk_data_ready` too and ring back (TCP's loopback defers its ACKs to a softirq).
    pub(crate) fn read_sock(
        &self,
        own: &impl Caller,
        actor: &mut ReadActor,
        may_leave: bool,
        ring_peer: &mut bool,
    ) -> Result<ReadSock> {
        let Some(mut g) = self.inner.try_lock_atomic() else {
            return Ok(ReadSock::Held);
        };
        if may_leave
            && g.moving
            && g.rx
                .as_ref()
                .is_some_and(|rx| rx.frozen() && rx.available() == 0)
        {
            return Ok(ReadSock::MovedAway);
        }
        let ring = ring_peer;
        *ring |= settle_lent(&mut g);
        let Inner {
            tx,
            rx,
            local,
            moving,
            lent,
            ..
        } = &mut *g;
        let Some(rx_q) = rx.as_mut() else {
            return Err(errno(bindings::ENOTCONN));
        };
        let mut used = 0usize;
        let mut used_lent = 0usize;
        let mut kept = false;
        let mut failed = None;
        let mut looks = 0;
        let mut come_back = false;
        rx_q.finish_wait();
        let empty = loop {
            rx_q.refresh().map_err(proto_err)?;
            let spans = rx_q.readable().map_err(proto_err)?;
            let Some(span) = spans.iter().find(|s| s.len > 0) else {
                // A moving connection's ring is frozen: what it shows is all there is (its
                // cursor may say more; `recv` stops here too).
                if *moving {
                    break true;
                }
                // Ask to hear of the next byte (the reader's next sk_data_ready depends on
                // it), then look once more: a byte that came before the request was
                // posted rang no doorbell, so it is read now, but only a few times over
                // (nothing here may spin: the actor may hold an atomic mapping, and a
                // lying peer could keep the cursor moving); past that the reader is told
                // to come back.
                widen_wait_race_for_test();
                *ring |= rx_q.prepare_wait().map_err(proto_err)?.notify_peer;
                if rx_q.available() == 0 {
                    break true;
                }
                rx_q.finish_wait();
                looks += 1;
                if looks > 3 {
                    come_back = true;
                    break false;
                }
                continue;
            };
            let given = span.len.min(CHUNK);
            let part = Span {
                off: span.off,
                len: given,
            };
            let at = rx_q.consumed_cursor();
            let in_place = match self.seg.lendable(part) {
                Some(addr) if lent.is_none() => actor.lend(addr, given),
                _ => None,
            };
            let fed = match in_place {
                Some((fed, keeps)) => {
                    if let Some(l) = keeps {
                        // Before the bytes count as read: nothing is announced past them.
                        rx_q.hold_from(at).map_err(proto_err)?;
                        *lent = Some(l);
                        kept = true;
                    }
                    if let Ok(n) = fed {
                        used_lent += n;
                    }
                    fed
                }
                None => actor.feed(given, |iter| self.seg.copy_to_iter(part, iter)),
            };
            let n = match fed {
                Ok(n) => n,
                Err(e) => {
                    failed = Some(e);
                    break false;
                }
            };
            if n > 0 {
                *ring |= consume(rx_q, n, true).map_err(proto_err)?;
            }
            used += n;
            if n < given || !actor.wants_more() {
                break false;
            }
        };
        let mut end = ReadEnd {
            used: used as c_int,
            state_if_empty: None,
            moved_and_drained: false,
            lent: used_lent,
            kept,
            come_back,
        };
        if empty {
            if *moving {
                *ring |= rx_q.prepare_wait().map(|d| d.notify_peer).unwrap_or(false);
            }
            heard(local, rx_q.peer(), own);
            end.moved_and_drained = *moving && rx_q.frozen() && rx_q.available() == 0;
            if !*moving {
                // A moving connection's state is the TCP connection's once it moved.
                end.state_if_empty =
                    Some(tcp_state_of(*local, peer_of_opt(tx.as_mut(), rx.as_mut())));
            }
        }
        drop(g);
        match failed {
            Some(e) if used == 0 => Err(e),
            _ => Ok(ReadSock::Read(end)),
        }
    }
}
