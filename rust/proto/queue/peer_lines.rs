// SPDX-License-Identifier: GPL-2.0

//! What a doorbell's look sees of a connection end's segment, and which sides of its
//! socket the doorbell wakes.
//!
//! The peer writes two lines into this end's segment: the producer line of the queue
//! this end receives on (cursor: bytes arrived; flags: its end of stream, close, abort)
//! and the consumer line of the queue this end sends on (cursor: space freed; flags: its
//! reader closed). A doorbell says only that something changed; comparing the lines with
//! the last doorbell's look tells what, so that, as TCP, an arrival wakes readers
//! (`sk_data_ready`) and freed space writers (`sk_write_space`), not both each time: an
//! edge-triggered `EPOLLIN` watch is not told of space, and a kernel user's
//! `write_space` (`iscsi_tcp` queues its transmit work from it) does not run per arrival.
//! Freed space, as TCP's ACKs, wakes only a writer that ran out of room. News in a flag
//! word (an end of stream, a close, an abort) also wakes every waiter whatever it watches
//! (`sk_state_change`), as TCP's FIN and reset do: a watch for `POLLRDHUP`, `EPOLLHUP` or
//! `EPOLLERR` alone (`io_uring`'s poll, `epoll`) ignores a wake-up whose events it did not
//! ask for.

use super::{at, Segment};
use crate::proto::cursor::{F_WANTS_NOTIFY, TOKEN_MASK};
use crate::proto::ring::{CREDIT_CONS_CURSOR, CREDIT_CONS_FLAGS, RX_PROD_CURSOR, RX_PROD_FLAGS};

/// The peer's words in this end's segment, loaded without the queue endpoints (a
/// doorbell's look, in atomic context). Nothing of them is trusted but whether they
/// changed: the endpoints check every word before they use it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PeerLines {
    /// The producer cursor of the receive queue.
    pub(crate) arrived: u64,
    /// The producer's flag word.
    pub(crate) writer_flags: u64,
    /// The consumer cursor of the send queue.
    pub(crate) freed: u64,
    /// The consumer's flag word.
    pub(crate) reader_flags: u64,
}

impl PeerLines {
    /// Loads the lines: the receive area at `rx_base`, the send queue's credit area at
    /// `credit_base`, both in `seg`.
    pub(crate) fn load<S: Segment>(seg: &S, rx_base: usize, credit_base: usize) -> Self {
        Self {
            arrived: Self::arrived_at(seg, rx_base),
            writer_flags: seg.load_u64(at(rx_base, RX_PROD_FLAGS)),
            freed: seg.load_u64(at(credit_base, CREDIT_CONS_CURSOR)),
            reader_flags: seg.load_u64(at(credit_base, CREDIT_CONS_FLAGS)),
        }
    }

    /// Loads the receive area's producer cursor alone (at `rx_base` in `seg`).
    pub(crate) fn arrived_at<S: Segment>(seg: &S, rx_base: usize) -> u64 {
        seg.load_u64(at(rx_base, RX_PROD_CURSOR))
    }
}

/// Which sides of the socket a doorbell wakes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BellWakes {
    /// Readers (`sk_data_ready`).
    pub(crate) readable: bool,
    /// Writers (`sk_write_space`), and which of them.
    pub(crate) writers: Writers,
    /// Every waiter, whatever events it watches (`sk_state_change`).
    pub(crate) state: bool,
}

/// Which writers a doorbell wakes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Writers {
    /// None: nothing a writer waits for changed.
    None,
    /// Only if one found no room since the last wake (`SOCK_NOSPACE`): freed space, which
    /// TCP reports the same way (`tcp_check_space`). A reader that consumes every request
    /// frees space before each answer; a kernel user's `write_space` (`iscsi_tcp` queues
    /// its transmit work from it) must not run for each of them.
    OutOfRoom,
    /// All: news in a flag word, or a doorbell that shows no change.
    All,
}

/// What of a flag word is news to the socket: all but the wait request and its token,
/// which only say when to ring the peer's doorbell (the peer posts and withdraws
/// requests around most of its waits and sends).
const fn news(flags: u64) -> u64 {
    flags & !(((TOKEN_MASK as u64) << 8) | F_WANTS_NOTIFY as u64)
}

/// The wakes of a doorbell whose look found the lines at `now`, the last look having
/// found them at `before`, and `filled` when the peer's writer filled a receive buffer
/// this end posted (a direct receive, which moves no line) since that look.
///
/// Bytes or a fill wake readers, space alone the writers that ran out of room; news in a
/// flag word wakes both (an end of stream, a close or an abort concerns either side), and
/// every other waiter through the state callback, as TCP's `tcp_fin()` and `tcp_reset()`
/// call `sk_state_change`. A
/// doorbell that finds nothing changed wakes both: a concurrent look may have taken its
/// change first; a wake too many is what the socket had before, a wake too few a hang.
/// A fill is told apart from the lines, since it may come with them: the answer to a
/// request the peer consumed frees space in the same look, and space alone wakes no
/// reader.
pub(crate) const fn bell_wakes(before: PeerLines, now: PeerLines, filled: bool) -> BellWakes {
    let data = before.arrived != now.arrived;
    let space = before.freed != now.freed;
    let flags = news(before.writer_flags) != news(now.writer_flags)
        || news(before.reader_flags) != news(now.reader_flags);
    let nothing = !data && !space && !flags && !filled;
    BellWakes {
        readable: data || filled || flags || nothing,
        writers: if flags || nothing {
            Writers::All
        } else if space {
            Writers::OutOfRoom
        } else {
            Writers::None
        },
        state: flags,
    }
}
