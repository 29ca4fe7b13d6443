// SPDX-License-Identifier: GPL-2.0

//! A connection end's state, and the TCP answers it gives: the decisions the kernel's
//! connection (`rust/conn/`) takes for `send`, `recv`, `poll`, `shutdown`, `close`,
//! `TCP_INFO` and the release of its memory, as pure functions of its state.
//!
//! An end's state is three parts:
//!
//! - [`Phase`]: where its set-up stands (connecting, established, or why it fell back);
//! - [`Local`]: what this end did (shut a direction, closed) and what it already
//!   reported (a reset, the `EPIPE` after the first write into a closed connection);
//! - [`Peer`]: what the peer end said, latched from its flag words (done writing, its
//!   reader closed, an abort), or what the fabric said for it (its node went down: an
//!   abort no flag will ever carry).
//!
//! The kernel keeps `Local` and `Phase` under the connection's mutex and reads `Peer`
//! from its queue endpoints, then asks these functions; the host crate tests them
//! against TCP's behaviour (`tools/sci-proto`, `tests/conn_state.rs`). Everything here
//! is plain data: no memory, no I/O.

/// Where a connection end's set-up stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Request sent, no answer yet.
    Connecting,
    /// Queues in place.
    Established,
    /// The peer refused (a full backlog, a bad offer); the socket falls back to TCP.
    Refused,
    /// The peer's node has no `AF_SCI` listener there; the socket falls back to TCP, and
    /// the destination is remembered for a while (`control/refusals.rs`).
    NoListener,
    /// The peer had no memory for the queues; the socket falls back to TCP (reason
    /// `no-memory`, as when this node has none).
    NoRoom,
    /// The peer's node went down before it answered; the socket falls back to TCP (as
    /// when no answer comes in time: reason `timeout`).
    Unanswered,
}

/// What this end did, and what it already reported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Local {
    /// `shutdown(SHUT_RD)`: nothing more is read (queued bytes still are, no wait).
    pub(crate) rcv_shut: bool,
    /// `shutdown(SHUT_WR)`: this end announced done writing.
    pub(crate) snd_shut: bool,
    /// The peer's reset was turned into the socket's pending `ECONNRESET` (once).
    pub(crate) reset_seen: bool,
    /// A write after the peer's reader closed was accepted (as TCP accepts the first,
    /// answering it with a reset): the next one fails with `EPIPE`.
    pub(crate) epipe_armed: bool,
    /// `close()` ran: nothing more is written to the peer's segment.
    pub(crate) closed: bool,
}

/// What the peer end said (latched: once seen, always set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Peer {
    /// It is done writing (`SHUT_WR` or close): after its last byte, end of stream.
    pub(crate) done_writing: bool,
    /// Its reader closed: it reads nothing more (writes here fail with `EPIPE`).
    pub(crate) reader_closed: bool,
    /// It aborted (or its node went down): a reset.
    pub(crate) abort: bool,
}

impl Peer {
    /// Nothing more will arrive: end of stream or reset.
    pub(crate) const fn finished_writing(self) -> bool {
        self.done_writing || self.abort
    }
}

impl Local {
    /// The peer's abort becomes the socket's pending `ECONNRESET` once: true when the
    /// caller must set it now.
    pub(crate) fn note_reset(&mut self, peer: Peer) -> bool {
        if peer.abort && !self.reset_seen {
            self.reset_seen = true;
            return true;
        }
        false
    }

    /// Nothing more is received: the peer finished, or this end shut reading.
    pub(crate) const fn receive_done(self, peer: Peer) -> bool {
        peer.finished_writing() || self.rcv_shut
    }

    /// Nothing more is sent: this end shut writing, the peer's reader closed, or reset.
    pub(crate) const fn send_done(self, peer: Peer) -> bool {
        self.snd_shut || peer.reader_closed || peer.abort
    }
}

/// The TCP state an end reports (`TCP_INFO`, `SCI_INFO`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TcpState {
    /// Both directions open.
    Established,
    /// This end shut writing, the peer has not.
    FinWait2,
    /// The peer is done writing, this end is not.
    CloseWait,
    /// Both done writing.
    TimeWait,
    /// Reset.
    Close,
}

/// The TCP state of an end.
pub(crate) const fn tcp_state(local: Local, peer: Peer) -> TcpState {
    match (local.snd_shut, peer.done_writing, peer.abort) {
        (_, _, true) => TcpState::Close,
        (true, true, _) => TcpState::TimeWait,
        (true, false, _) => TcpState::FinWait2,
        (false, true, _) => TcpState::CloseWait,
        (false, false, false) => TcpState::Established,
    }
}

/// What `poll` reports, mapped to `EPOLL*` bits by the caller.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Readiness {
    /// `EPOLLIN | EPOLLRDNORM`: data, end of stream, reset, or reading shut.
    pub(crate) readable: bool,
    /// `EPOLLOUT | EPOLLWRNORM`: room, or writing is over (a write would not block).
    pub(crate) writable: bool,
    /// `EPOLLRDHUP`: nothing more will arrive.
    pub(crate) rdhup: bool,
    /// `EPOLLHUP`: both directions are over.
    pub(crate) hup: bool,
    /// `EPOLLERR`.
    pub(crate) error: bool,
}

/// An end's readiness: `has_data` (bytes to read), `has_room` (room to write, as TCP's
/// `sk_stream_is_writeable` counts it), `error` (a pending socket error, or a queue that
/// broke the protocol).
pub(crate) const fn readiness(
    local: Local,
    peer: Peer,
    has_data: bool,
    has_room: bool,
    error: bool,
) -> Readiness {
    let receive_done = local.receive_done(peer);
    let send_done = local.send_done(peer);
    Readiness {
        readable: has_data || receive_done,
        writable: has_room || send_done,
        rdhup: receive_done,
        hup: receive_done && send_done,
        error,
    }
}

/// What a `send` that finds writing over reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SendEnd {
    /// Writing is open: go on.
    Open,
    /// The bytes already sent by this call.
    Sent(usize),
    /// The socket's pending error (the reset, reported once; the caller takes it, and
    /// goes on with [`SendEnd::Pipe`] if none is pending any more).
    PendingError,
    /// Every byte "sent": the first write after the peer's reader closed, which TCP
    /// accepts and answers with a reset.
    Accepted,
    /// `EPIPE` (and `SIGPIPE` unless `MSG_NOSIGNAL`).
    Pipe,
}

/// A `send` that has sent `sent` bytes so far and looks at the connection again.
pub(crate) fn send_end(local: &mut Local, peer: Peer, sent: usize) -> SendEnd {
    if !local.send_done(peer) {
        return SendEnd::Open;
    }
    if sent > 0 {
        return SendEnd::Sent(sent);
    }
    if peer.abort {
        return SendEnd::PendingError;
    }
    if !local.snd_shut && !local.epipe_armed {
        local.epipe_armed = true;
        return SendEnd::Accepted;
    }
    SendEnd::Pipe
}

/// What a `recv` that finds no bytes (more) to read reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecvEnd {
    /// Wait for bytes (or report `EAGAIN` when not waiting).
    Wait,
    /// Return the bytes copied so far (0: end of stream).
    Return(usize),
    /// The socket's pending error when nothing was copied (a reset, reported once),
    /// else end of stream; the caller takes it.
    PendingError,
}

/// A `recv` that copied `copied` bytes of the `len` asked for, waiting for `target` of
/// them (all with `MSG_WAITALL`, else `SO_RCVLOWAT`'s, at least 1), and finds nothing
/// more to read now.
pub(crate) const fn recv_end(
    local: Local,
    peer: Peer,
    copied: usize,
    len: usize,
    target: usize,
) -> RecvEnd {
    if peer.abort {
        return if copied > 0 {
            RecvEnd::Return(copied)
        } else {
            RecvEnd::PendingError
        };
    }
    if peer.done_writing || local.rcv_shut || (copied > 0 && copied >= target) || len == 0 {
        return RecvEnd::Return(copied);
    }
    RecvEnd::Wait
}

/// What a `shutdown` does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Shutdown {
    /// Announce done writing to the peer (after the held bytes), and ring it.
    pub(crate) done_writing: bool,
}

/// `shutdown(how)` with `rd` (`SHUT_RD` or `SHUT_RDWR`) and `wr` (`SHUT_WR` or
/// `SHUT_RDWR`): `Err(())` (`ENOTCONN`) once both directions are over, as TCP in
/// `TIME_WAIT` or closed.
#[allow(clippy::result_unit_err)]
pub(crate) fn shutdown(local: &mut Local, peer: Peer, rd: bool, wr: bool) -> Result<Shutdown, ()> {
    if local.snd_shut && peer.finished_writing() {
        return Err(());
    }
    if rd {
        local.rcv_shut = true;
    }
    let done_writing = wr && !local.snd_shut;
    if wr {
        local.snd_shut = true;
    }
    Ok(Shutdown { done_writing })
}

/// How a `close` ends the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Close {
    /// The held bytes go, then "closed": the peer reads everything, then end of stream.
    Graceful,
    /// "Abort": the peer sees a reset (`ECONNRESET`); held bytes are dropped, as a
    /// reset drops TCP's send queue.
    Abort,
}

/// `close()`: an abort when asked (`SO_LINGER` with a zero timeout), when bytes were
/// left unread (as TCP sends a reset then), or when the queues are broken.
pub(crate) fn close(local: &mut Local, linger_zero: bool, unread: bool, broken: bool) -> Close {
    local.closed = true;
    if linger_zero || unread || broken {
        Close::Abort
    } else {
        Close::Graceful
    }
}

/// When the memory of a closed connection end may be used again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Release {
    /// At once: no end on another node ever had the segment.
    Now,
    /// At once: the peer end closed; its close flags, its last stores into this end's
    /// segment, are there.
    PeerDone,
    /// When the peer end closes (its close rings this end's doorbell).
    WhenPeerCloses,
    /// After a grace period: the peer end's state is not known (its node went down, or
    /// the connect ended without taking an answer), so it may still store late.
    Grace,
}

/// What the peer end said about this end's segment (for [`release`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PeerEnd {
    /// No end on the peer's node ever learned of this one (a rejected request, or an
    /// answer that never went out).
    pub(crate) never_shared: bool,
    /// The fabric reset the connection (the peer's node went down, or its end abandoned
    /// the connect): the peer end said nothing of its own.
    pub(crate) lost: bool,
    /// Its producer closed (its producer flag word in this end's receive area).
    pub(crate) writer_closed: bool,
    /// Its consumer closed (its consumer flag word in this end's credit area).
    pub(crate) reader_closed: bool,
}

/// When a closed end's segment may be used again: at once if no peer end ever had it or
/// the peer end closed both its halves; when the peer end closes if it is open; after a
/// grace period if its state is not known. `queues` says whether both queues were built.
pub(crate) const fn release(phase: Phase, queues: bool, peer: PeerEnd) -> Release {
    if peer.never_shared {
        return Release::Now;
    }
    if !matches!(phase, Phase::Established) || peer.lost || !queues {
        return Release::Grace;
    }
    if peer.writer_closed && peer.reader_closed {
        Release::PeerDone
    } else {
        Release::WhenPeerCloses
    }
}
