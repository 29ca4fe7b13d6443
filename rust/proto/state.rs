// SPDX-License-Identifier: GPL-2.0

//! The connection state machine.
//!
//! Pure bookkeeping: events in, [`Actions`] out. The socket layer feeds it
//! local calls (`connect`, `shutdown`, `close`), mailbox answers and what it
//! sees in the peer's flag words ([`PeerWriterState`], [`PeerReaderState`]),
//! carries out the actions, and asks it what `send`, `recv` and `poll` must
//! report. It never touches memory and never fails: an event that does not
//! apply is ignored or answered with a [`SockError`] for the calling operation.
//!
//! [`PeerWriterState`]: super::queue::PeerWriterState
//! [`PeerReaderState`]: super::queue::PeerReaderState

/// Socket errors the state machine reports, with their Linux errno values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SockError {
    /// `ENOTCONN`: not connected.
    NotConn,
    /// `EPIPE`: writing is shut down or the peer is gone (with `SIGPIPE`
    /// unless `MSG_NOSIGNAL`).
    Pipe,
    /// `ECONNRESET`: the peer aborted (reported once, then EOF / `EPIPE`).
    ConnReset,
    /// `EAGAIN`: not yet (a connect in progress).
    Again,
    /// `EISCONN`: already connected.
    IsConn,
    /// `EALREADY`: a connect is already in progress.
    Already,
}

impl SockError {
    /// The positive Linux errno value.
    pub(crate) const fn errno(self) -> i32 {
        match self {
            SockError::NotConn => 107,
            SockError::Pipe => 32,
            SockError::ConnReset => 104,
            SockError::Again => 11,
            SockError::IsConn => 106,
            SockError::Already => 114,
        }
    }
}

/// The states, as the socket layer and tools name them. Derived from the
/// machine's flags by [`Connection::state`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// No SCI connection (never connected, or released).
    Closed,
    /// A connect request is out; no answer yet.
    Connecting,
    /// Both directions open.
    Established,
    /// This side is done writing (SHUT_WR or a graceful close); the peer is not.
    LocalShutWr,
    /// The peer is done writing; this side is not.
    PeerShutWr,
    /// Both sides are done writing; waiting for the last reads / the peer's
    /// close before the queues are released.
    Closing,
    /// The connection was reset (by the peer, or a protocol error).
    Aborted,
}

/// Events fed to [`Connection::handle`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// A connect request was mailed.
    ConnectSent,
    /// The listener accepted (the queues are attached).
    ConnectAccepted,
    /// The listener rejected the request.
    ConnectRejected,
    /// No answer in time.
    ConnectTimeout,
    /// `shutdown(SHUT_WR)` (or the write half of `SHUT_RDWR`).
    ShutdownWr,
    /// `shutdown(SHUT_RD)` (or the read half of `SHUT_RDWR`).
    ShutdownRd,
    /// The user closed the socket. `unread`: unread received data remained
    /// (or `SO_LINGER` with a zero timeout): abort instead of a graceful close.
    Close {
        /// Abort instead of closing gracefully.
        unread: bool,
    },
    /// The peer's producer flags say "done writing".
    PeerDoneWriting,
    /// The peer closed its socket (its producer or consumer flags say "closed").
    PeerClosed,
    /// The peer's producer flags say "abort", or a `Close(Abort)` frame came.
    PeerAbort,
    /// After a graceful close, the peer did not close in time (like TCP's
    /// `tcp_fin_timeout`).
    CloseTimeout,
    /// A queue endpoint reported a [`ProtocolError`](super::error::ProtocolError).
    ProtocolViolation,
}

/// What the socket layer must do after an event, as a bit set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Actions(u16);

impl Actions {
    /// Nothing to do.
    pub(crate) const NONE: Actions = Actions(0);
    /// Publish staged (gathered) bytes before anything else.
    pub(crate) const FLUSH: Actions = Actions(1 << 0);
    /// `Producer::set_done_writing`.
    pub(crate) const SET_DONE_WRITING: Actions = Actions(1 << 1);
    /// `Consumer::set_closed` then `Producer::set_closed` (the producer's
    /// store is the last this side makes to the peer's segment).
    pub(crate) const SET_CLOSED: Actions = Actions(1 << 2);
    /// `Producer::set_abort` (and `Consumer::set_closed`).
    pub(crate) const SET_ABORT: Actions = Actions(1 << 3);
    /// Ring the peer's doorbell.
    pub(crate) const NOTIFY_PEER: Actions = Actions(1 << 4);
    /// Wake local readers (data, EOF or error to report).
    pub(crate) const WAKE_READERS: Actions = Actions(1 << 5);
    /// Wake local writers (space, `EPIPE` or error to report; connect done).
    pub(crate) const WAKE_WRITERS: Actions = Actions(1 << 6);
    /// Stop touching the queues and free them (unexport, bump the slot
    /// generation; see the module documentation on reuse).
    pub(crate) const RELEASE: Actions = Actions(1 << 7);
    /// The SCI connect failed: fall back to the native TCP connect.
    pub(crate) const FALLBACK: Actions = Actions(1 << 8);
    /// The connection is established.
    pub(crate) const CONNECTED: Actions = Actions(1 << 9);

    /// Whether every bit of `other` is set.
    pub(crate) const fn contains(self, other: Actions) -> bool {
        self.0 & other.0 == other.0
    }

    /// Whether any bit of `other` is set.
    pub(crate) const fn intersects(self, other: Actions) -> bool {
        self.0 & other.0 != 0
    }

    /// The union.
    pub(crate) const fn with(self, other: Actions) -> Actions {
        Actions(self.0 | other.0)
    }

    /// Whether no bit is set.
    pub(crate) const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The raw bits.
    pub(crate) const fn bits(self) -> u16 {
        self.0
    }
}

/// Result of an event.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Output {
    /// What to do.
    pub(crate) actions: Actions,
    /// Error for the operation that caused the event (e.g. `shutdown` on an
    /// unconnected socket), if any.
    pub(crate) error: Option<SockError>,
}

impl Output {
    /// Just actions.
    const fn act(actions: Actions) -> Self {
        Output {
            actions,
            error: None,
        }
    }

    /// Just an error.
    const fn err(e: SockError) -> Self {
        Output {
            actions: Actions::NONE,
            error: Some(e),
        }
    }
}

/// How `send` proceeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SendMode {
    /// Write into the queue.
    Deliver,
    /// The peer closed: accept the bytes and drop them (TCP sends them into a
    /// reset); the next send fails with `EPIPE`.
    Discard,
}

/// What `recv` reports when called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RecvStatus {
    /// Read the available data.
    Data,
    /// Return 0.
    Eof,
    /// Nothing yet: `EAGAIN`, or wait.
    WouldBlock,
    /// Fail with this error.
    Error(SockError),
}

/// `poll` readiness, mapped to `EPOLL*` bits by the socket layer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Readiness {
    /// `EPOLLIN | EPOLLRDNORM`.
    pub(crate) readable: bool,
    /// `EPOLLOUT | EPOLLWRNORM`.
    pub(crate) writable: bool,
    /// `EPOLLRDHUP`.
    pub(crate) rdhup: bool,
    /// `EPOLLHUP`.
    pub(crate) hup: bool,
    /// `EPOLLERR`.
    pub(crate) error: bool,
}

/// Lifecycle phase (the flags refine `Connected`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Before any connect.
    Idle,
    /// Request out.
    Connecting,
    /// Queues attached.
    Connected,
    /// Queues released (or the attempt ended); terminal.
    Released,
}

/// One connection's state machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Connection {
    /// Lifecycle phase.
    phase: Phase,
    /// This side announced done-writing.
    local_wr_done: bool,
    /// The peer announced done-writing.
    peer_wr_done: bool,
    /// `shutdown(SHUT_RD)` was called.
    rd_shut: bool,
    /// The peer closed its socket.
    peer_closed: bool,
    /// A send after the peer closed was already discarded.
    discarded: bool,
    /// The user closed the socket.
    user_closed: bool,
    /// Reset by the peer or by a protocol error.
    aborted: bool,
    /// Error to report once (`sk_err`).
    pending_error: Option<SockError>,
}

impl Default for Connection {
    fn default() -> Self {
        Self::new()
    }
}

impl Connection {
    /// A connection that has not connected yet.
    pub(crate) const fn new() -> Self {
        Connection {
            phase: Phase::Idle,
            local_wr_done: false,
            peer_wr_done: false,
            rd_shut: false,
            peer_closed: false,
            discarded: false,
            user_closed: false,
            aborted: false,
            pending_error: None,
        }
    }

    /// A connection accepted by a listener: connected from the start.
    pub(crate) const fn accepted() -> Self {
        let mut c = Self::new();
        c.phase = Phase::Connected;
        c
    }

    /// The current state.
    pub(crate) const fn state(&self) -> State {
        match self.phase {
            Phase::Idle | Phase::Released => State::Closed,
            Phase::Connecting => State::Connecting,
            Phase::Connected => {
                if self.aborted {
                    State::Aborted
                } else {
                    match (self.local_wr_done, self.peer_wr_done) {
                        (false, false) => State::Established,
                        (true, false) => State::LocalShutWr,
                        (false, true) => State::PeerShutWr,
                        (true, true) => State::Closing,
                    }
                }
            }
        }
    }

    /// Whether the queues were released (terminal).
    pub(crate) const fn is_released(&self) -> bool {
        matches!(self.phase, Phase::Released)
    }

    /// Whether the user closed the socket.
    pub(crate) const fn user_closed(&self) -> bool {
        self.user_closed
    }

    /// Goes to `Released` and returns `a` plus [`Actions::RELEASE`].
    fn release(&mut self, a: Actions) -> Output {
        self.phase = Phase::Released;
        Output::act(a.with(Actions::RELEASE))
    }

    /// Applies an event.
    pub(crate) fn handle(&mut self, ev: Event) -> Output {
        match self.phase {
            Phase::Idle => self.idle(ev),
            Phase::Connecting => self.connecting(ev),
            Phase::Connected => self.connected(ev),
            Phase::Released => match ev {
                Event::ShutdownWr | Event::ShutdownRd => Output::err(SockError::NotConn),
                Event::ConnectSent => Output::err(SockError::IsConn),
                _ => Output::default(),
            },
        }
    }

    /// Events before any connect.
    fn idle(&mut self, ev: Event) -> Output {
        match ev {
            Event::ConnectSent => {
                self.phase = Phase::Connecting;
                Output::default()
            }
            Event::ShutdownWr | Event::ShutdownRd => Output::err(SockError::NotConn),
            Event::Close { .. } => {
                self.user_closed = true;
                self.phase = Phase::Released;
                Output::default()
            }
            _ => Output::default(),
        }
    }

    /// Events while a connect request is out.
    fn connecting(&mut self, ev: Event) -> Output {
        match ev {
            Event::ConnectSent => Output::err(SockError::Already),
            Event::ConnectAccepted => {
                self.phase = Phase::Connected;
                Output::act(Actions::CONNECTED.with(Actions::WAKE_WRITERS))
            }
            Event::ConnectRejected | Event::ConnectTimeout => {
                self.release(Actions::FALLBACK.with(Actions::WAKE_WRITERS))
            }
            Event::Close { .. } => {
                self.user_closed = true;
                self.release(Actions::NONE)
            }
            Event::ShutdownWr => Output::err(SockError::NotConn),
            Event::ShutdownRd => {
                self.rd_shut = true;
                Output::default()
            }
            _ => Output::default(),
        }
    }

    /// Events while the queues are attached.
    fn connected(&mut self, ev: Event) -> Output {
        match ev {
            Event::ConnectSent => Output::err(SockError::IsConn),
            Event::ConnectAccepted | Event::ConnectRejected | Event::ConnectTimeout => {
                Output::default()
            }
            Event::ShutdownWr => {
                if self.aborted || self.user_closed {
                    Output::err(SockError::NotConn)
                } else if self.local_wr_done {
                    Output::default()
                } else {
                    self.local_wr_done = true;
                    Output::act(
                        Actions::FLUSH
                            .with(Actions::SET_DONE_WRITING)
                            .with(Actions::NOTIFY_PEER)
                            .with(Actions::WAKE_WRITERS),
                    )
                }
            }
            Event::ShutdownRd => {
                if self.aborted || self.user_closed {
                    Output::err(SockError::NotConn)
                } else {
                    self.rd_shut = true;
                    Output::act(Actions::WAKE_READERS)
                }
            }
            Event::Close { unread } => {
                if self.user_closed {
                    return Output::default();
                }
                self.user_closed = true;
                if self.aborted {
                    self.release(Actions::NONE)
                } else if unread {
                    self.aborted = true;
                    self.release(Actions::SET_ABORT.with(Actions::NOTIFY_PEER))
                } else {
                    self.local_wr_done = true;
                    let a = Actions::FLUSH
                        .with(Actions::SET_CLOSED)
                        .with(Actions::NOTIFY_PEER);
                    if self.peer_closed {
                        self.release(a)
                    } else {
                        Output::act(a)
                    }
                }
            }
            Event::PeerDoneWriting => {
                if self.aborted || self.peer_wr_done {
                    Output::default()
                } else {
                    self.peer_wr_done = true;
                    Output::act(Actions::WAKE_READERS)
                }
            }
            Event::PeerClosed => {
                if self.aborted || self.peer_closed {
                    return Output::default();
                }
                self.peer_closed = true;
                self.peer_wr_done = true;
                if self.user_closed {
                    self.release(Actions::NONE)
                } else {
                    Output::act(Actions::WAKE_READERS.with(Actions::WAKE_WRITERS))
                }
            }
            Event::PeerAbort => {
                if self.aborted {
                    return Output::default();
                }
                self.aborted = true;
                if self.user_closed {
                    self.release(Actions::NONE)
                } else {
                    self.pending_error = Some(SockError::ConnReset);
                    Output::act(Actions::WAKE_READERS.with(Actions::WAKE_WRITERS))
                }
            }
            Event::CloseTimeout => {
                if !self.user_closed {
                    return Output::default();
                }
                self.aborted = true;
                self.release(Actions::SET_ABORT.with(Actions::NOTIFY_PEER))
            }
            Event::ProtocolViolation => {
                if self.aborted {
                    return Output::default();
                }
                self.aborted = true;
                let a = Actions::SET_ABORT.with(Actions::NOTIFY_PEER);
                if self.user_closed {
                    self.release(a)
                } else {
                    self.pending_error = Some(SockError::ConnReset);
                    Output::act(a.with(Actions::WAKE_READERS).with(Actions::WAKE_WRITERS))
                }
            }
        }
    }

    /// Takes the pending error (`SO_ERROR`, or the first failing call).
    pub(crate) fn take_error(&mut self) -> Option<SockError> {
        self.pending_error.take()
    }

    /// Whether an error is pending.
    pub(crate) const fn has_error(&self) -> bool {
        self.pending_error.is_some()
    }

    /// What a `send` may do now.
    pub(crate) fn send_check(&mut self) -> Result<SendMode, SockError> {
        match self.phase {
            Phase::Idle | Phase::Released => Err(SockError::Pipe),
            Phase::Connecting => Err(SockError::Again),
            Phase::Connected => {
                if let Some(e) = self.pending_error.take() {
                    return Err(e);
                }
                if self.aborted || self.local_wr_done || self.user_closed {
                    return Err(SockError::Pipe);
                }
                if self.peer_closed {
                    if self.discarded {
                        return Err(SockError::Pipe);
                    }
                    self.discarded = true;
                    return Ok(SendMode::Discard);
                }
                Ok(SendMode::Deliver)
            }
        }
    }

    /// What a `recv` reports now; `data_available` is whether the queue holds
    /// unread bytes (data is returned before EOF or a reset is reported, as
    /// on TCP).
    pub(crate) fn recv_check(&mut self, data_available: bool) -> RecvStatus {
        match self.phase {
            Phase::Idle => RecvStatus::Error(SockError::NotConn),
            Phase::Released => RecvStatus::Eof,
            Phase::Connecting => RecvStatus::WouldBlock,
            Phase::Connected => {
                if data_available {
                    return RecvStatus::Data;
                }
                if let Some(e) = self.pending_error.take() {
                    return RecvStatus::Error(e);
                }
                if self.aborted || self.rd_shut || self.peer_wr_done {
                    RecvStatus::Eof
                } else {
                    RecvStatus::WouldBlock
                }
            }
        }
    }

    /// `poll` readiness given whether data is available and whether there is
    /// space to write (the socket layer's write-space threshold).
    pub(crate) const fn poll(&self, data_available: bool, space_available: bool) -> Readiness {
        match self.phase {
            // A fresh TCP socket polls as EPOLLOUT | EPOLLHUP.
            Phase::Idle => Readiness {
                readable: false,
                writable: true,
                rdhup: false,
                hup: true,
                error: false,
            },
            Phase::Connecting => Readiness {
                readable: false,
                writable: false,
                rdhup: false,
                hup: false,
                error: false,
            },
            Phase::Released => Readiness {
                readable: true,
                writable: true,
                rdhup: true,
                hup: true,
                error: self.pending_error.is_some(),
            },
            Phase::Connected => {
                let rcv_shut = self.rd_shut || self.peer_wr_done || self.aborted;
                let snd_shut = self.local_wr_done || self.aborted;
                Readiness {
                    readable: data_available || rcv_shut,
                    writable: snd_shut || space_available,
                    rdhup: rcv_shut,
                    hup: rcv_shut && snd_shut,
                    error: self.pending_error.is_some(),
                }
            }
        }
    }
}
