//! Which sides of a socket a doorbell wakes, from what changed in the peer's lines.

use crate::proto::cursor::{FlagWord, F_ABORT, F_CLOSED, F_DONE_WRITING, F_WANTS_NOTIFY};
use crate::proto::queue::{bell_wakes, PeerLines, Writers};

const fn flags(token: u32, bits: u8) -> u64 {
    FlagWord {
        generation: 3,
        token,
        bits,
    }
    .pack()
}

const BEFORE: PeerLines = PeerLines {
    arrived: 100,
    writer_flags: flags(5, 0),
    freed: 200,
    reader_flags: flags(6, 0),
};

/// Writers woken only if one ran out of room (`SOCK_NOSPACE`), or all of them.
const ROOM: Writers = Writers::OutOfRoom;
const ALL: Writers = Writers::All;
const NONE: Writers = Writers::None;

fn wakes(change: impl FnOnce(&mut PeerLines)) -> (bool, Writers) {
    wakes_filled(false, change)
}

/// The same, with the peer's writer having filled a posted receive buffer (`filled`).
fn wakes_filled(filled: bool, change: impl FnOnce(&mut PeerLines)) -> (bool, Writers) {
    let mut now = BEFORE;
    change(&mut now);
    let w = bell_wakes(BEFORE, now, filled);
    (w.readable, w.writers)
}

#[test]
fn bytes_wake_readers_space_writers() {
    // An arrival is not space: an EPOLLIN watch hears of it, write_space does not run.
    assert_eq!(wakes(|l| l.arrived += 14), (true, NONE));
    // Space is not an arrival, and wakes only a writer that ran out of room.
    assert_eq!(wakes(|l| l.freed += 4096), (false, ROOM));
    // Both moved before the look (an answer to a request the peer consumed): readers,
    // and writers only if one ran out of room, as an ACK with data tells TCP's.
    assert_eq!(
        wakes(|l| {
            l.arrived += 1;
            l.freed += 1;
        }),
        (true, ROOM)
    );
}

#[test]
fn flags_wake_both_sides() {
    // An end of stream, a close or an abort, with bytes or space or neither.
    for bit in [F_DONE_WRITING, F_CLOSED, F_ABORT] {
        assert_eq!(wakes(|l| l.writer_flags = flags(5, bit)), (true, ALL));
        assert_eq!(wakes(|l| l.reader_flags = flags(6, bit)), (true, ALL));
        assert_eq!(
            wakes(|l| {
                l.arrived += 1;
                l.writer_flags = flags(5, bit);
            }),
            (true, ALL)
        );
        assert_eq!(
            wakes(|l| {
                l.freed += 1;
                l.reader_flags = flags(6, bit);
            }),
            (true, ALL)
        );
    }
}

#[test]
fn flags_wake_every_waiter() {
    // An end of stream, a close or an abort reaches a watch for POLLRDHUP, EPOLLHUP or
    // EPOLLERR alone (the state callback, as TCP's FIN and reset): io_uring's poll for
    // POLLRDHUP slept through the peer's close without it (sock_semantics uring_poll).
    for bit in [F_DONE_WRITING, F_CLOSED, F_ABORT] {
        for writer in [false, true] {
            let mut now = BEFORE;
            if writer {
                now.writer_flags = flags(5, bit);
            } else {
                now.reader_flags = flags(6, bit);
            }
            assert!(bell_wakes(BEFORE, now, false).state, "bit {bit:#x}");
        }
    }
    // Bytes, space, a fill, a wait request or nothing seen are no state change.
    let mut now = BEFORE;
    now.arrived += 1;
    now.freed += 1;
    now.writer_flags = flags(7, F_WANTS_NOTIFY);
    assert!(!bell_wakes(BEFORE, now, true).state);
    assert!(!bell_wakes(BEFORE, BEFORE, false).state);
}

#[test]
fn wait_requests_are_not_news() {
    // The peer posting or withdrawing a wait request (a new token, the bit) says when to
    // ring it, nothing the socket reports: bytes still wake readers alone, space writers
    // out of room.
    let posted = |token| flags(token, F_WANTS_NOTIFY);
    assert_eq!(
        wakes(|l| {
            l.arrived += 1;
            l.writer_flags = posted(7);
        }),
        (true, NONE)
    );
    assert_eq!(
        wakes(|l| {
            l.freed += 1;
            l.reader_flags = posted(8);
            l.writer_flags = flags(9, 0);
        }),
        (false, ROOM)
    );
    // A request alone: nothing this end can see moved, so both (never a wake too few).
    assert_eq!(wakes(|l| l.reader_flags = posted(8)), (true, ALL));
}

#[test]
fn nothing_seen_wakes_both_sides() {
    // A concurrent look may have taken the change: a doorbell that shows nothing must
    // not leave a waiter asleep.
    assert_eq!(wakes(|_| {}), (true, ALL));
}

#[test]
fn a_direct_fill_wakes_readers() {
    // A fill of the reader's posted buffer moves no line; alone it wakes the reader.
    assert_eq!(wakes_filled(true, |_| {}), (true, NONE));
    // The answer of a ping-pong filled directly, after the peer consumed the request:
    // space moved in the same look, and space alone wakes no reader. Before the fill
    // counted, this left a 16 KiB ping-pong's reader asleep (sci-bench, 60 s timeout).
    assert_eq!(wakes_filled(true, |l| l.freed += 16384), (true, ROOM));
    assert_eq!(
        wakes_filled(true, |l| l.reader_flags = flags(6, F_CLOSED)),
        (true, ALL)
    );
}

#[test]
fn every_change_wakes_its_side() {
    // Whatever moved, the side it concerns is woken (a wake too few is a hang).
    for bits in 0u32..32 {
        let (r, w) = wakes_filled(bits & 16 != 0, |l| {
            if bits & 1 != 0 {
                l.arrived += 1;
            }
            if bits & 2 != 0 {
                l.freed += 1;
            }
            if bits & 4 != 0 {
                l.writer_flags = flags(5, F_DONE_WRITING);
            }
            if bits & 8 != 0 {
                l.reader_flags = flags(6, F_CLOSED);
            }
        });
        let flags = bits & 12 != 0;
        assert!(r || !(bits & 17 != 0 || flags), "bits {bits:#x}");
        // Space reaches a writer that ran out of room; news reaches every writer.
        assert!(w != NONE || bits & 2 == 0, "bits {bits:#x}");
        assert!(w == ALL || !flags, "bits {bits:#x}");
        assert!(r || w != NONE, "bits {bits:#x}: a doorbell wakes someone");
    }
}
