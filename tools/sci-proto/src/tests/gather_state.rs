//! Gathering (Nagle / TCP_NODELAY / TCP_CORK) and the connection state machine.

use proptest::prelude::*;

use crate::proto::gather::{gather_decision, is_inline, GatherDecision, GatherInput, INLINE_MAX};
use crate::proto::state::{
    Actions, Connection, Event, Readiness, RecvStatus, SendMode, SockError, State,
};

fn input(pending: u64, in_flight: u64) -> GatherInput {
    GatherInput {
        pending,
        in_flight,
        room: 1 << 20,
        mss: 1000,
        ..GatherInput::default()
    }
}

#[test]
fn inline_threshold() {
    assert!(!is_inline(0));
    assert!(is_inline(1));
    assert!(is_inline(INLINE_MAX));
    assert!(!is_inline(INLINE_MAX + 1));
}

#[test]
fn nagle_like_tcp() {
    use GatherDecision::*;
    // Nothing pending.
    assert_eq!(gather_decision(&input(0, 5)), Idle);
    // Nagle: a partial segment waits while data is in flight...
    assert_eq!(gather_decision(&input(10, 5)), Hold);
    // ...and goes when nothing is.
    assert_eq!(gather_decision(&input(10, 0)), SendNow);
    // A full segment always goes.
    assert_eq!(gather_decision(&input(1000, 5)), SendNow);
    // TCP_NODELAY: partial segments go.
    let nd = GatherInput {
        nodelay: true,
        ..input(10, 5)
    };
    assert_eq!(gather_decision(&nd), SendNow);
    // TCP_CORK beats TCP_NODELAY for partial segments, even with nothing in flight.
    let cork = GatherInput {
        cork: true,
        nodelay: true,
        ..input(10, 0)
    };
    assert_eq!(gather_decision(&cork), Hold);
    assert_eq!(
        gather_decision(&GatherInput {
            pending: 1000,
            ..cork
        }),
        SendNow
    );
    // MSG_MORE holds like cork.
    let more = GatherInput {
        more: true,
        ..input(10, 0)
    };
    assert_eq!(gather_decision(&more), Hold);
    // Forced (uncork, shutdown, timer, about to sleep) and full ring go.
    assert_eq!(
        gather_decision(&GatherInput {
            force: true,
            ..cork
        }),
        SendNow
    );
    assert_eq!(gather_decision(&GatherInput { room: 0, ..cork }), SendNow);
}

proptest! {
    #[test]
    fn gather_properties(
        pending in 0u64..3000, in_flight in 0u64..3000, room in 0u64..3000, mss in 1u64..2000,
        nodelay in any::<bool>(), cork in any::<bool>(), more in any::<bool>(), force in any::<bool>(),
    ) {
        let i = GatherInput { pending, in_flight, room, mss, nodelay, cork, more, force };
        let d = gather_decision(&i);
        prop_assert_eq!(d == GatherDecision::Idle, pending == 0);
        if pending > 0 && (force || pending >= mss || room == 0) {
            prop_assert_eq!(d, GatherDecision::SendNow);
        }
        if pending > 0 && !cork && !more && (nodelay || in_flight == 0) {
            prop_assert_eq!(d, GatherDecision::SendNow, "never hold without a reason");
        }
        // More pending never turns "send" into "hold".
        if d == GatherDecision::SendNow {
            let more_pending = GatherInput { pending: pending + 1, ..i };
            prop_assert_eq!(gather_decision(&more_pending), GatherDecision::SendNow);
        }
    }
}

fn connected() -> Connection {
    let mut c = Connection::new();
    assert_eq!(c.handle(Event::ConnectSent).actions, Actions::NONE);
    assert_eq!(c.state(), State::Connecting);
    let o = c.handle(Event::ConnectAccepted);
    assert!(o.actions.contains(Actions::CONNECTED));
    assert_eq!(c.state(), State::Established);
    c
}

#[test]
fn connect_outcomes() {
    let mut c = Connection::new();
    assert_eq!(c.state(), State::Closed);
    assert_eq!(c.send_check(), Err(SockError::Pipe));
    assert_eq!(c.recv_check(false), RecvStatus::Error(SockError::NotConn));
    assert_eq!(c.handle(Event::ShutdownWr).error, Some(SockError::NotConn));
    c.handle(Event::ConnectSent);
    assert_eq!(c.handle(Event::ConnectSent).error, Some(SockError::Already));
    assert_eq!(c.send_check(), Err(SockError::Again));
    assert_eq!(c.recv_check(false), RecvStatus::WouldBlock);
    assert_eq!(c.poll(false, true), Readiness::default());

    for ev in [Event::ConnectRejected, Event::ConnectTimeout] {
        let mut c = Connection::new();
        c.handle(Event::ConnectSent);
        let o = c.handle(ev);
        assert!(o.actions.contains(Actions::FALLBACK.with(Actions::RELEASE)));
        assert_eq!(c.state(), State::Closed);
        assert!(c.is_released());
        // A late accept changes nothing.
        assert!(c.handle(Event::ConnectAccepted).actions.is_empty());
    }

    let mut c = Connection::new();
    c.handle(Event::ConnectSent);
    let o = c.handle(Event::Close { unread: false });
    assert_eq!(o.actions, Actions::RELEASE);
    assert!(c.user_closed());

    let mut c = connected();
    assert_eq!(c.handle(Event::ConnectSent).error, Some(SockError::IsConn));
}

#[test]
fn shutdown_write_then_peer() {
    let mut c = connected();
    assert_eq!(c.send_check(), Ok(SendMode::Deliver));
    assert_eq!(c.recv_check(false), RecvStatus::WouldBlock);
    let o = c.handle(Event::ShutdownWr);
    assert!(o.actions.contains(
        Actions::FLUSH
            .with(Actions::SET_DONE_WRITING)
            .with(Actions::NOTIFY_PEER)
            .with(Actions::WAKE_WRITERS)
    ));
    assert_eq!(c.state(), State::LocalShutWr);
    assert!(c.handle(Event::ShutdownWr).actions.is_empty(), "idempotent");
    assert_eq!(c.send_check(), Err(SockError::Pipe));
    assert_eq!(c.recv_check(true), RecvStatus::Data);
    let p = c.poll(false, false);
    assert!(p.writable && !p.readable && !p.hup);
    let o = c.handle(Event::PeerDoneWriting);
    assert_eq!(o.actions, Actions::WAKE_READERS);
    assert_eq!(c.state(), State::Closing);
    assert_eq!(c.recv_check(true), RecvStatus::Data, "data before EOF");
    assert_eq!(c.recv_check(false), RecvStatus::Eof);
    let p = c.poll(false, false);
    assert!(p.readable && p.rdhup && p.hup && p.writable && !p.error);
    // Graceful close: not released until the peer closed too.
    let o = c.handle(Event::Close { unread: false });
    assert!(o
        .actions
        .contains(Actions::SET_CLOSED.with(Actions::NOTIFY_PEER)));
    assert!(!o
        .actions
        .intersects(Actions::RELEASE.with(Actions::SET_ABORT)));
    let o = c.handle(Event::PeerClosed);
    assert_eq!(o.actions, Actions::RELEASE);
    assert_eq!(c.state(), State::Closed);
}

#[test]
fn peer_first_then_close() {
    let mut c = connected();
    c.handle(Event::PeerDoneWriting);
    assert_eq!(c.state(), State::PeerShutWr);
    assert_eq!(c.recv_check(false), RecvStatus::Eof);
    assert_eq!(
        c.send_check(),
        Ok(SendMode::Deliver),
        "half-close: still writing"
    );
    let p = c.poll(false, true);
    assert!(p.readable && p.rdhup && p.writable && !p.hup);
    // The peer closes: the next send is swallowed, then EPIPE (as TCP: the
    // first send after the peer's close hits a reset).
    let o = c.handle(Event::PeerClosed);
    assert!(o.actions.contains(Actions::WAKE_WRITERS));
    assert_eq!(c.send_check(), Ok(SendMode::Discard));
    assert_eq!(c.send_check(), Err(SockError::Pipe));
    // Our close: the peer is gone already, release at once.
    let o = c.handle(Event::Close { unread: false });
    assert!(o
        .actions
        .contains(Actions::SET_CLOSED.with(Actions::RELEASE)));
    assert!(c.is_released());
}

#[test]
fn close_with_unread_data_aborts() {
    let mut c = connected();
    let o = c.handle(Event::Close { unread: true });
    assert_eq!(
        o.actions,
        Actions::SET_ABORT
            .with(Actions::NOTIFY_PEER)
            .with(Actions::RELEASE)
    );
    assert!(c.is_released());
    assert!(c.handle(Event::Close { unread: false }).actions.is_empty());
}

#[test]
fn peer_abort_reports_reset_once() {
    let mut c = connected();
    let o = c.handle(Event::PeerAbort);
    assert!(o
        .actions
        .contains(Actions::WAKE_READERS.with(Actions::WAKE_WRITERS)));
    assert_eq!(c.state(), State::Aborted);
    let p = c.poll(false, false);
    assert!(p.error && p.hup && p.readable && p.writable);
    assert!(c.has_error());
    assert_eq!(c.recv_check(true), RecvStatus::Data, "queued data first");
    assert_eq!(c.recv_check(false), RecvStatus::Error(SockError::ConnReset));
    assert_eq!(c.recv_check(false), RecvStatus::Eof);
    assert_eq!(c.send_check(), Err(SockError::Pipe));
    assert_eq!(c.handle(Event::ShutdownWr).error, Some(SockError::NotConn));
    let mut c = connected();
    c.handle(Event::PeerAbort);
    assert_eq!(c.send_check(), Err(SockError::ConnReset));
    assert_eq!(c.take_error(), None);
    let o = c.handle(Event::Close { unread: false });
    assert_eq!(
        o.actions,
        Actions::RELEASE,
        "nothing to tell a peer that aborted"
    );
}

#[test]
fn protocol_violation_and_close_timeout() {
    let mut c = connected();
    let o = c.handle(Event::ProtocolViolation);
    assert!(o
        .actions
        .contains(Actions::SET_ABORT.with(Actions::NOTIFY_PEER)));
    assert_eq!(c.take_error(), Some(SockError::ConnReset));
    assert_eq!(SockError::ConnReset.errno(), 104);
    assert_eq!(SockError::Pipe.errno(), 32);

    let mut c = connected();
    c.handle(Event::Close { unread: false });
    assert_eq!(c.state(), State::LocalShutWr);
    assert!(c
        .handle(Event::PeerDoneWriting)
        .actions
        .contains(Actions::WAKE_READERS));
    let o = c.handle(Event::CloseTimeout);
    assert!(o
        .actions
        .contains(Actions::SET_ABORT.with(Actions::RELEASE)));
    assert!(c.is_released());

    let mut c = connected();
    assert!(
        c.handle(Event::CloseTimeout).actions.is_empty(),
        "only after close"
    );
    let o = c.handle(Event::ShutdownRd);
    assert_eq!(o.actions, Actions::WAKE_READERS);
    assert_eq!(c.recv_check(false), RecvStatus::Eof);
    assert_eq!(c.recv_check(true), RecvStatus::Data);
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        Just(Event::ConnectSent),
        Just(Event::ConnectAccepted),
        Just(Event::ConnectRejected),
        Just(Event::ConnectTimeout),
        Just(Event::ShutdownWr),
        Just(Event::ShutdownRd),
        any::<bool>().prop_map(|unread| Event::Close { unread }),
        Just(Event::PeerDoneWriting),
        Just(Event::PeerClosed),
        Just(Event::PeerAbort),
        Just(Event::CloseTimeout),
        Just(Event::ProtocolViolation),
    ]
}

proptest! {
    #[test]
    fn state_machine_invariants(accepted in any::<bool>(), events in proptest::collection::vec(event(), 0..40), data in any::<bool>()) {
        let mut c = if accepted { Connection::accepted() } else { Connection::new() };
        let mut released = 0;
        let mut aborted = false;
        let mut done_writing_set = false;
        for ev in events {
            let was = c.state();
            let o = c.handle(ev);
            let a = o.actions;
            if a.contains(Actions::RELEASE) {
                released += 1;
                prop_assert!(c.is_released());
                prop_assert!(c.user_closed() || a.contains(Actions::FALLBACK));
            }
            prop_assert!(released <= 1, "released twice");
            prop_assert!(!(a.contains(Actions::SET_ABORT) && a.intersects(Actions::SET_CLOSED.with(Actions::SET_DONE_WRITING))));
            if a.contains(Actions::FALLBACK) {
                prop_assert_eq!(was, State::Connecting);
            }
            if a.contains(Actions::SET_ABORT) {
                aborted = true;
            }
            if a.intersects(Actions::SET_DONE_WRITING.with(Actions::SET_CLOSED)) {
                prop_assert!(!aborted, "no graceful flag after an abort");
                done_writing_set = true;
            }
            if c.is_released() {
                prop_assert_eq!(c.state(), State::Closed);
            }
            if done_writing_set && !c.is_released() {
                prop_assert!(matches!(c.state(), State::LocalShutWr | State::Closing | State::Aborted));
                prop_assert!(c.clone().send_check().is_err());
            }
            // Queries never panic, and errors are reported once.
            let mut probe = c;
            let _ = probe.poll(data, data);
            let first = probe.recv_check(false);
            if let RecvStatus::Error(SockError::ConnReset) = first {
                prop_assert_ne!(probe.recv_check(false), RecvStatus::Error(SockError::ConnReset));
            }
            let _ = probe.send_check();
        }
    }
}
