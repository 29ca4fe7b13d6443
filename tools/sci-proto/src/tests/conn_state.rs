//! A connection end's decisions (`proto::state`), the ones the kernel's connection
//! takes, against what TCP does: the TCP state, poll readiness, a send or receive that
//! finds a direction over, shutdown, close and the release of the end's memory.

use proptest::prelude::*;

use crate::proto::state::{
    self, Close, Local, Peer, PeerEnd, Phase, Readiness, RecvEnd, Release, SendEnd, TcpState,
};

fn peer(done_writing: bool, reader_closed: bool, abort: bool) -> Peer {
    Peer {
        done_writing,
        reader_closed,
        abort,
    }
}

/// The TCP states as `ss` shows them after the same calls on TCP.
#[test]
fn tcp_states() {
    let mut local = Local::default();
    assert_eq!(
        state::tcp_state(local, Peer::default()),
        TcpState::Established
    );
    assert_eq!(
        state::tcp_state(local, peer(true, false, false)),
        TcpState::CloseWait
    );
    local.snd_shut = true;
    assert_eq!(state::tcp_state(local, Peer::default()), TcpState::FinWait2);
    assert_eq!(
        state::tcp_state(local, peer(true, false, false)),
        TcpState::TimeWait
    );
    assert_eq!(
        state::tcp_state(local, peer(true, true, true)),
        TcpState::Close
    );
    assert_eq!(
        state::tcp_state(Local::default(), peer(false, false, true)),
        TcpState::Close
    );
}

/// A peer's reset is reported once (the socket's `ECONNRESET`), then never again.
#[test]
fn a_reset_is_reported_once() {
    let mut local = Local::default();
    assert!(!local.note_reset(Peer::default()));
    let reset = peer(false, false, true);
    assert!(local.note_reset(reset));
    assert!(!local.note_reset(reset));
    assert!(!local.note_reset(reset));
}

/// TCP accepts the first write after the peer closed (and answers it with a reset), and
/// fails the next with `EPIPE`; after `SHUT_WR`, every write fails; a reset reports the
/// pending error first; bytes already sent by the call are reported instead.
#[test]
fn sends_into_a_finished_connection() {
    let mut local = Local::default();
    assert_eq!(
        state::send_end(&mut local, Peer::default(), 0),
        SendEnd::Open
    );
    let closed = peer(true, true, false);
    assert_eq!(state::send_end(&mut local, closed, 0), SendEnd::Accepted);
    assert_eq!(state::send_end(&mut local, closed, 0), SendEnd::Pipe);
    assert_eq!(state::send_end(&mut local, closed, 0), SendEnd::Pipe);
    assert_eq!(state::send_end(&mut local, closed, 7), SendEnd::Sent(7));

    let mut shut = Local {
        snd_shut: true,
        ..Local::default()
    };
    assert_eq!(
        state::send_end(&mut shut, Peer::default(), 0),
        SendEnd::Pipe
    );

    let mut reset = Local::default();
    let aborted = peer(false, false, true);
    assert_eq!(
        state::send_end(&mut reset, aborted, 0),
        SendEnd::PendingError
    );
    assert!(!reset.epipe_armed, "a reset never accepts a write");
}

/// A receive: bytes first; then end of stream, a reset (once), or a wait; `SHUT_RD`
/// never waits; `MSG_WAITALL` waits for the rest and `SO_RCVLOWAT` for its bytes, unless
/// the stream ended.
#[test]
fn receives_at_the_end() {
    let open = Local::default();
    assert_eq!(
        state::recv_end(open, Peer::default(), 0, 10, 1),
        RecvEnd::Wait
    );
    assert_eq!(
        state::recv_end(open, Peer::default(), 4, 10, 1),
        RecvEnd::Return(4)
    );
    assert_eq!(
        state::recv_end(open, Peer::default(), 4, 10, 10),
        RecvEnd::Wait
    );
    assert_eq!(
        state::recv_end(open, Peer::default(), 0, 0, 0),
        RecvEnd::Return(0)
    );
    // SO_RCVLOWAT: a receive waits until it has that many bytes, or the stream ends.
    assert_eq!(
        state::recv_end(open, Peer::default(), 4, 10, 6),
        RecvEnd::Wait
    );
    assert_eq!(
        state::recv_end(open, Peer::default(), 6, 10, 6),
        RecvEnd::Return(6)
    );
    assert_eq!(
        state::recv_end(open, peer(true, false, false), 4, 10, 6),
        RecvEnd::Return(4)
    );
    let eof = peer(true, false, false);
    assert_eq!(state::recv_end(open, eof, 0, 10, 10), RecvEnd::Return(0));
    assert_eq!(state::recv_end(open, eof, 3, 10, 10), RecvEnd::Return(3));
    let reset = peer(false, false, true);
    assert_eq!(
        state::recv_end(open, reset, 0, 10, 1),
        RecvEnd::PendingError
    );
    assert_eq!(state::recv_end(open, reset, 2, 10, 10), RecvEnd::Return(2));
    let rd_shut = Local {
        rcv_shut: true,
        ..Local::default()
    };
    assert_eq!(
        state::recv_end(rd_shut, Peer::default(), 0, 10, 10),
        RecvEnd::Return(0)
    );
}

/// `shutdown` as TCP: each direction once, done writing announced once, `ENOTCONN` once
/// both FINs passed.
#[test]
fn shutdowns() {
    let mut local = Local::default();
    let s = state::shutdown(&mut local, Peer::default(), false, true).unwrap();
    assert!(s.done_writing && local.snd_shut && !local.rcv_shut);
    let s = state::shutdown(&mut local, Peer::default(), true, true).unwrap();
    assert!(!s.done_writing, "done writing is announced once");
    assert!(local.rcv_shut);
    assert_eq!(
        state::shutdown(&mut local, peer(true, false, false), false, true),
        Err(())
    );
    let mut reset = Local {
        snd_shut: true,
        ..Local::default()
    };
    assert_eq!(
        state::shutdown(&mut reset, peer(false, false, true), true, false),
        Err(())
    );
    let mut rd = Local::default();
    let s = state::shutdown(&mut rd, peer(true, false, false), true, false).unwrap();
    assert!(!s.done_writing && rd.rcv_shut && !rd.snd_shut);
}

/// A close aborts (the peer sees `ECONNRESET`) with unread bytes, with `SO_LINGER` 0
/// or on a broken queue, as TCP sends a reset then; otherwise it is graceful.
#[test]
fn closes() {
    for (linger0, unread, broken) in [
        (false, false, false),
        (true, false, false),
        (false, true, false),
        (false, false, true),
    ] {
        let mut local = Local::default();
        let c = state::close(&mut local, linger0, unread, broken);
        assert!(local.closed);
        let abort = linger0 || unread || broken;
        assert_eq!(c, if abort { Close::Abort } else { Close::Graceful });
    }
}

/// When a closed end's memory goes back: at once when no peer end had it or the peer end
/// closed both halves; when it closes if it is open; after a grace period otherwise.
#[test]
fn releases() {
    let open = PeerEnd::default();
    let closed = PeerEnd {
        writer_closed: true,
        reader_closed: true,
        ..PeerEnd::default()
    };
    assert_eq!(
        state::release(Phase::Established, true, open),
        Release::WhenPeerCloses
    );
    assert_eq!(
        state::release(Phase::Established, true, closed),
        Release::PeerDone
    );
    let half = PeerEnd {
        writer_closed: true,
        ..PeerEnd::default()
    };
    assert_eq!(
        state::release(Phase::Established, true, half),
        Release::WhenPeerCloses
    );
    let lost = PeerEnd {
        lost: true,
        ..closed
    };
    assert_eq!(
        state::release(Phase::Established, true, lost),
        Release::Grace
    );
    for phase in [
        Phase::Connecting,
        Phase::Refused,
        Phase::NoListener,
        Phase::NoRoom,
        Phase::Unanswered,
    ] {
        assert_eq!(state::release(phase, false, open), Release::Grace);
    }
    let never = PeerEnd {
        never_shared: true,
        ..PeerEnd::default()
    };
    for phase in [Phase::Connecting, Phase::Established, Phase::Refused] {
        assert_eq!(state::release(phase, true, never), Release::Now);
    }
    assert_eq!(
        state::release(Phase::Established, false, closed),
        Release::Grace
    );
}

fn local_strategy() -> impl Strategy<Value = Local> {
    any::<(bool, bool, bool, bool, bool)>().prop_map(|(r, s, reset, epipe, closed)| Local {
        rcv_shut: r,
        snd_shut: s,
        reset_seen: reset,
        epipe_armed: epipe,
        closed,
    })
}

fn peer_strategy() -> impl Strategy<Value = Peer> {
    any::<(bool, bool, bool)>().prop_map(|(d, r, a)| peer(d, r, a))
}

proptest! {
    /// Readiness as TCP reports it: readable with data or once nothing more arrives
    /// (then also RDHUP); writable with room or once writing is over; HUP exactly when
    /// both directions are over; ERR as given. A reset makes every bit but ERR and the
    /// room's say the same as TCP's after a RST: readable, writable, RDHUP, HUP.
    #[test]
    fn readiness_is_tcps(local in local_strategy(), p in peer_strategy(),
                         data in any::<bool>(), room in any::<bool>(), err in any::<bool>()) {
        let r: Readiness = state::readiness(local, p, data, room, err);
        let receive_done = p.done_writing || p.abort || local.rcv_shut;
        let send_done = local.snd_shut || p.reader_closed || p.abort;
        prop_assert_eq!(r.readable, data || receive_done);
        prop_assert_eq!(r.rdhup, receive_done);
        prop_assert_eq!(r.writable, room || send_done);
        prop_assert_eq!(r.hup, receive_done && send_done);
        prop_assert_eq!(r.error, err);
        if p.abort {
            prop_assert!(r.readable && r.writable && r.rdhup && r.hup);
        }
    }

    /// Whatever the calls, a send never waits once writing is over, never reports bytes
    /// it did not send, and accepts at most one write into a closed connection.
    #[test]
    fn sends_never_wait_on_a_finished_connection(local in local_strategy(), p in peer_strategy(),
                                                 sent in 0usize..3) {
        let mut l = local;
        let first = state::send_end(&mut l, p, sent);
        let over = local.snd_shut || p.reader_closed || p.abort;
        prop_assert_eq!(first == SendEnd::Open, !over);
        if sent > 0 && over {
            prop_assert_eq!(first, SendEnd::Sent(sent));
        }
        if first == SendEnd::Accepted {
            prop_assert!(l.epipe_armed && !local.epipe_armed);
            prop_assert_ne!(state::send_end(&mut l, p, 0), SendEnd::Accepted);
        }
    }
}
