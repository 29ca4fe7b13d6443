//! Gathering (Nagle, TCP_NODELAY, TCP_CORK, MSG_MORE): the decision to send or hold.

use proptest::prelude::*;

use crate::proto::gather::{gather_decision, is_inline, GatherDecision, GatherInput, INLINE_MAX};

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
