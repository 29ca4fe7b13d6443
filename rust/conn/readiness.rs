// SPDX-License-Identifier: GPL-2.0

//! What a poller and the queue-size calls see of a connection: the poll mask (which
//! leaves wait requests behind, so the peer's next change rings the doorbell), the TCP
//! state it stands for, and the bytes waiting each way (`FIONREAD`, `SIOCOUTQ`,
//! `SIOCOUTQNSD`).

use super::{peer_of, peer_of_opt, Caller, Conn, Inner, Rx};
use crate::fabric::Fabric;
use crate::proto::state::{self, Local, Peer, TcpState};
use crate::sys::bindings;
use crate::sys::net::{
    EPOLLERR, EPOLLHUP, EPOLLIN, EPOLLOUT, EPOLLRDHUP, EPOLLRDNORM, EPOLLWRNORM,
};
use core::ffi::c_int;

impl Conn {
    /// The poll mask of an established (or connecting) connection, posting wait
    /// requests for what is not ready so the peer's next change rings the doorbell.
    pub(crate) fn poll(&self, fabric: &dyn Fabric, own: &impl Caller) -> u32 {
        let mut g = self.inner.lock();
        let peer_id = g.peer_id;
        let Inner { tx, rx, local, .. } = &mut *g;
        let (Some(tx), Some(rx)) = (tx.as_mut(), rx.as_mut()) else {
            return 0;
        };
        let mut ring = false;
        // Readable at `SO_RCVLOWAT`'s bytes, as TCP's `tcp_epollin_ready()` (an end of
        // stream counts: `receive_done` below).
        let lowat = own.rcvlowat() as u64;
        let readable = |rx: &mut Rx| rx.refresh().map(|avail| avail >= lowat);
        // A poller always leaves a fresh wait request behind, readable or not: the next
        // arrival then rings once, as every TCP segment wakes the socket, so an
        // edge-triggered epoll sees each arrival.
        let mut has_data = readable(rx).unwrap_or(true);
        if let Ok(d) = rx.prepare_wait() {
            ring |= d.notify_peer;
            has_data |= !d.sleep && (lowat <= 1 || rx.available() >= lowat);
        }
        let peer = peer_of(tx, rx);
        if local.note_reset(peer) {
            own.set_error(bindings::ECONNRESET as c_int);
        }
        let broken = rx.error().is_some() || tx.error().is_some();
        // Room as TCP's `sk_stream_is_writeable` counts it: half the ring free; short of
        // it, a wait request asks to hear when it is.
        let size = tx.params().geometry.size();
        let mut has_room =
            local.send_done(peer) || tx.refresh().map(|free| free * 2 >= size).unwrap_or(true);
        if !has_room {
            own.note_no_room();
            if let Ok(d) = tx.prepare_wait(size / 2) {
                ring |= d.notify_peer;
                has_room = !d.sleep;
            }
        }
        let r = state::readiness(*local, peer, has_data, has_room, own.error() != 0 || broken);
        let mut mask = 0;
        if r.readable {
            mask |= EPOLLIN | EPOLLRDNORM;
        }
        if r.rdhup {
            mask |= EPOLLRDHUP;
        }
        if r.writable {
            mask |= EPOLLOUT | EPOLLWRNORM;
        }
        if r.hup {
            mask |= EPOLLHUP;
        }
        if r.error {
            mask |= EPOLLERR;
        }
        drop(g);
        if ring {
            self.notify_peer(fabric, peer_id);
        }
        mask
    }

    /// The TCP state this connection end is in, for `TCP_INFO` and `SCI_INFO`.
    pub(crate) fn tcp_state(&self) -> u32 {
        let mut g = self.inner.lock();
        let Inner { tx, rx, local, .. } = &mut *g;
        tcp_state_of(*local, peer_of_opt(tx.as_mut(), rx.as_mut()))
    }

    /// Bytes ready to read (`FIONREAD`).
    pub(crate) fn inq(&self) -> u64 {
        let mut g = self.inner.lock();
        g.rx.as_mut().and_then(|rx| rx.refresh().ok()).unwrap_or(0)
    }

    /// `TCP_INQ`'s hint after a read: the bytes left to read, and one more once the peer
    /// is done writing, as TCP counts its FIN in `tcp_inq_hint()` (a reader told 0 knows
    /// that more is to come).
    pub(crate) fn inq_hint(&self) -> u64 {
        let mut g = self.inner.lock();
        g.rx.as_mut().map_or(0, |rx| {
            rx.refresh().unwrap_or(0) + u64::from(rx.peer().done_writing)
        })
    }

    /// Bytes written and not yet in the peer's receive queue (`SIOCOUTQ`).
    ///
    /// TCP has two buffers where SCI has one ring: the peer's receive queue and our send
    /// queue. The ring's first half stands for the peer's receive queue (bytes there count
    /// as delivered, as acknowledged bytes do in TCP); what fills it beyond that, and what
    /// gathering holds back, counts as queued here. So a reader that lags a little shows
    /// 0, as on TCP, and a full pipe shows the backlog.
    pub(crate) fn outq(&self) -> u64 {
        let mut g = self.inner.lock();
        g.tx.as_mut().map_or(0, |tx| {
            let _ = tx.refresh();
            let receive_queue = tx.params().geometry.size() / 2;
            tx.pending() + tx.in_flight().saturating_sub(receive_queue)
        })
    }

    /// Bytes written and not yet sent at all (`SIOCOUTQNSD`): held back by gathering.
    pub(crate) fn unsent(&self) -> u64 {
        let g = self.inner.lock();
        g.tx.as_ref().map_or(0, |tx| tx.pending())
    }
}

/// The TCP state (`TCP_*`) of an end that did `local` and heard `peer`.
pub(super) fn tcp_state_of(local: Local, peer: Peer) -> u32 {
    match state::tcp_state(local, peer) {
        TcpState::Close => bindings::TCP_CLOSE,
        TcpState::TimeWait => bindings::TCP_TIME_WAIT,
        TcpState::FinWait2 => bindings::TCP_FIN_WAIT2,
        TcpState::CloseWait => bindings::TCP_CLOSE_WAIT,
        TcpState::Established => bindings::TCP_ESTABLISHED,
    }
}
