// SPDX-License-Identifier: GPL-2.0

//! Producer and consumer endpoints of one unidirectional queue.
//!
//! The producer holds the receiver's segment (remote: ring + producer line) and
//! its own credit area (local); the consumer holds its own receive area (local)
//! and the sender's credit area (remote). Each endpoint only ever *stores* to
//! the remote segment and *loads* from the local one.

use super::cursor::FlagWord;
use super::error::ProtocolError;
use super::ring::{
    self, RingGeometry, Spans, CREDIT_BUDGET, CREDIT_CONS_CURSOR, CREDIT_CONS_FLAGS, QUEUE_MAGIC,
    QUEUE_VERSION, RX_GENERATION, RX_MAGIC, RX_PROD_CURSOR, RX_PROD_DROPS, RX_PROD_FLAGS,
    RX_RING_SIZE, RX_START, RX_VERSION,
};
use super::segment::Segment;

mod consumer;
mod peer_lines;
mod producer;

pub(crate) use consumer::Consumer;
pub(crate) use peer_lines::{bell_wakes, BellWakes, PeerLines, Writers};
pub(crate) use producer::Producer;

/// What both ends of one queue agree on (exchanged through the control
/// mailbox; each side validates the peer's values before use).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct QueueParams {
    /// Ring size, fixed by the receiver that allocated the ring.
    pub(crate) geometry: RingGeometry,
    /// Connection generation carried in every flag word.
    pub(crate) generation: u32,
    /// Value both cursors start at.
    pub(crate) start: u64,
}

/// Default consumer-update threshold: a quarter of the ring.
pub(crate) const fn default_publish_threshold(geom: RingGeometry) -> u64 {
    geom.size() / 4
}

/// `n` as a `u64` (saturating on a hypothetical 128-bit `usize`).
fn to_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// Offset of `field` inside an area at `base` (the area was validated to fit,
/// so this never saturates in practice).
const fn at(base: usize, field: usize) -> usize {
    base.saturating_add(field)
}

/// A budget or drop word (`ring.rs`): `value` tagged with the queue's generation.
const fn tagged(generation: u32, value: u32) -> u64 {
    (generation as u64) << 32 | value as u64
}

/// The value of a budget or drop word, or `None` when its tag is not `generation` (a
/// peer that never stored one, a stale store of an older connection, or a forged one).
const fn untagged(word: u64, generation: u32) -> Option<u32> {
    if (word >> 32) as u32 == generation {
        Some((word & 0xffff_ffff) as u32)
    } else {
        None
    }
}

/// Initializes a receive area (header and producer line) in the receiver's own
/// segment, before offering it to the peer. The ring bytes themselves should
/// come from zeroed memory (they are exposed to the peer).
pub(crate) fn init_rx_area<S: Segment>(
    seg: &S,
    base: usize,
    params: QueueParams,
) -> Result<(), ProtocolError> {
    ring::check_rx_area(seg.len(), base, params.geometry)?;
    seg.store_u32(at(base, RX_MAGIC), QUEUE_MAGIC);
    seg.store_u32(at(base, RX_VERSION), QUEUE_VERSION);
    seg.store_u64(at(base, RX_RING_SIZE), params.geometry.size());
    seg.store_u64(at(base, RX_GENERATION), u64::from(params.generation));
    seg.store_u64(at(base, RX_START), params.start);
    seg.store_u64(at(base, RX_PROD_CURSOR), params.start);
    let flags = FlagWord {
        generation: params.generation,
        token: 0,
        bits: 0,
    };
    seg.store_u64(at(base, RX_PROD_FLAGS), flags.pack());
    seg.store_u64(at(base, RX_PROD_DROPS), 0);
    Ok(())
}

/// The start cursor of a connection's queues, set by its connecting end: a function of
/// who that end is (its node, its channel and the channel's generation), different for
/// any two ends whose nodes are below 2^13 (a region has at most 32) and whose channels
/// are below 2^16. A multiple of 8, so that a datagram record's header and its padding
/// lie in whole words of the ring (`record.rs`), which a writer stores and a reader
/// loads as words.
///
/// A setup frame names a channel, and the receiver maps whatever that channel holds
/// when the frame is served: a late frame may find another connection there. A
/// connecting end that took the channel since has a newer generation; a listener's end
/// that took it receives with *its* client's generation and start, which another client
/// can share only in part. With the start naming the whole end, the receive area's start
/// ([`rx_area_matches`]) tells the late frame it is not its own. (Cursors wrap: any
/// start is a valid one.)
pub(crate) const fn connect_start(node: u16, channel: u32, generation: u32) -> u64 {
    ((generation as u64) << 32)
        | (((channel & 0xffff) as u64) << 16)
        | ((node as u64 & 0x1fff) << 3)
}

/// Whether the receive area at `base` in a peer's segment was set up for the
/// queue described by `params` (magic, version, ring size, generation, start).
///
/// A connection setup maps the peer's segment by its channel (slot); if the
/// peer's slot moved on to a newer connection since the frame was sent, the
/// mapped segment belongs to that one, and its header says so. Checking it
/// before producing into the ring keeps a late frame from wiring two
/// unrelated connections together.
pub(crate) fn rx_area_matches<S: Segment>(seg: &S, base: usize, params: QueueParams) -> bool {
    ring::check_rx_area(seg.len(), base, params.geometry).is_ok()
        && seg.load_u32(at(base, RX_MAGIC)) == QUEUE_MAGIC
        && seg.load_u32(at(base, RX_VERSION)) == QUEUE_VERSION
        && seg.load_u64(at(base, RX_RING_SIZE)) == params.geometry.size()
        && seg.load_u64(at(base, RX_GENERATION)) == u64::from(params.generation)
        && seg.load_u64(at(base, RX_START)) == params.start
}

/// Initializes a credit area in the sender's own segment, before offering it
/// to the peer.
pub(crate) fn init_credit_area<S: Segment>(
    seg: &S,
    base: usize,
    params: QueueParams,
) -> Result<(), ProtocolError> {
    ring::check_credit_area(seg.len(), base)?;
    seg.store_u64(at(base, CREDIT_CONS_CURSOR), params.start);
    let flags = FlagWord {
        generation: params.generation,
        token: 0,
        bits: 0,
    };
    seg.store_u64(at(base, CREDIT_CONS_FLAGS), flags.pack());
    seg.store_u64(at(base, CREDIT_BUDGET), 0);
    Ok(())
}

/// Whether a consumer with `unpublished` consumed-but-unannounced bytes should
/// publish its cursor now (the lazy consumer update).
///
/// Publish when there is something to publish and any of: at least
/// `threshold` bytes accumulated; the writer asked for a notification; the
/// writer's view of the ring (`writer_view_free` = ring size minus what the
/// consumer knows was published and not yet announced as consumed) is full.
/// Together with the unconditional publish before the reader sleeps
/// ([`Consumer::prepare_wait`]) this means a writer blocked on a full ring is
/// always woken while its reader still reads.
pub(crate) const fn should_publish_consumer(
    unpublished: u64,
    threshold: u64,
    writer_wants_notify: bool,
    writer_view_free: u64,
) -> bool {
    unpublished != 0 && (unpublished >= threshold || writer_wants_notify || writer_view_free == 0)
}

/// The peer's flags as seen by a consumer (latched: once seen, always set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PeerWriterState {
    /// The peer will write no more data (SHUT_WR or close).
    pub(crate) done_writing: bool,
    /// The peer closed its socket and writes nothing more to this segment.
    pub(crate) closed: bool,
    /// The peer aborted the connection.
    pub(crate) abort: bool,
}

/// The peer's flags as seen by a producer (latched).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PeerReaderState {
    /// The peer closed its socket: it reads nothing more (writes get EPIPE).
    pub(crate) closed: bool,
}

/// What a datagram reader found in its ring ([`Consumer::look`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Look {
    /// Records wait, in these spans.
    Readable(Spans),
    /// Nothing waits.
    Empty {
        /// The datagrams the writer dropped since they were last taken.
        drops: u32,
        /// The writer's state, loaded before the ring was found empty.
        peer: PeerWriterState,
    },
}

/// Outcome of a `prepare_wait` call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct WaitDecision {
    /// Nothing changed after the request was posted: sleep until notified (or
    /// a timeout / signal), then call `finish_wait` and retry.
    pub(crate) sleep: bool,
    /// Ring the peer's doorbell (a cursor update the peer asked for was made
    /// on the way).
    pub(crate) notify_peer: bool,
}
