// SPDX-License-Identifier: GPL-2.0

//! Gathering small writes on an SCI connection (Nagle, `TCP_CORK`, `MSG_MORE`), as TCP does.
//!
//! A write copies its bytes into the peer's ring and *stages* them; publishing the producer
//! cursor is what sends them, so holding bytes back costs nothing (`proto::gather`). After
//! each write [`gather_decision`] says whether to publish now or hold. Held bytes go out:
//!
//! - with the next write that decides to send (a full segment, a full ring, ...);
//! - when the reader consumed what was in flight (Nagle's ACK clock): the holding writer
//!   posted a wait request, so the reader's cursor publish rings this end's doorbell; the
//!   doorbell may run in atomic context and only kicks the connector kthread, which
//!   re-decides ([`tick`]);
//! - when held too long, checked on the connector's tick: 200 ms corked (TCP's cork
//!   ceiling), 40 ms by Nagle (about TCP's delayed ACK, so a reader that does not read
//!   stalls nobody for longer than over TCP);
//! - before a writer sleeps or returns `EAGAIN`, on uncork or `TCP_NODELAY`, on shutdown
//!   and close ([`flush`]).
//!
//! Which connections hold bytes, and which of them wait for the reader, are bitmaps of
//! connection slots: the doorbell and the connector read them without a lock, and a node
//! where nothing is held scans nothing.

use super::Tx;
use super::MAX_CONNS;
use crate::proto::error::ProtocolError;
use crate::proto::gather::{gather_decision, GatherDecision, GatherInput};
use core::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use kernel::time::Ktime;

/// The largest "segment" (TCP's MSS): held bytes reaching it are sent at once, so large
/// writes never wait. A quarter of the ring when that is smaller.
const MSS_MAX: u64 = 64 << 10;
/// How long corked bytes (`TCP_CORK`, `MSG_MORE`) may be held: TCP's 200 ms ceiling.
const CORK_LIMIT_MS: i64 = 200;
/// How long Nagle may hold bytes while earlier ones are unconsumed (TCP's delayed ACK).
const NAGLE_LIMIT_MS: i64 = 40;

/// What the socket says about gathering, for one write.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Gathering {
    /// `TCP_NODELAY` is set.
    pub(crate) nodelay: bool,
    /// `TCP_CORK` is set.
    pub(crate) cork: bool,
    /// This write carries `MSG_MORE`.
    pub(crate) more: bool,
}

impl Gathering {
    /// Held for a cork (timed by the cork ceiling) rather than by Nagle.
    fn corked(self) -> bool {
        self.cork || self.more
    }
}

/// The held bytes of one connection (under `Conn::inner`).
#[derive(Default)]
pub(super) struct Held {
    /// When the oldest held byte was written (ms of the monotonic clock); `None` when
    /// nothing is held.
    since: Option<i64>,
    /// How the last write that held asked to gather (the connector re-decides with it).
    how: Gathering,
}

impl Held {
    /// Whether bytes are held back.
    pub(super) fn holding(&self) -> bool {
        self.since.is_some()
    }
}

const WORDS: usize = MAX_CONNS.div_ceil(64);

/// A set of connection slots, one bit each, read and changed without a lock (the
/// doorbell runs in atomic context).
struct SlotSet {
    bits: [AtomicU64; WORDS],
    count: AtomicUsize,
}

impl SlotSet {
    const fn new() -> Self {
        Self {
            bits: [const { AtomicU64::new(0) }; WORDS],
            count: AtomicUsize::new(0),
        }
    }

    fn bit(&self, slot: u32) -> Option<(&AtomicU64, u64)> {
        let word = self.bits.get(slot as usize / 64)?;
        Some((word, 1 << (slot % 64)))
    }

    fn set(&self, slot: u32, member: bool) {
        let Some((word, mask)) = self.bit(slot) else {
            return;
        };
        if member {
            if word.fetch_or(mask, Ordering::SeqCst) & mask == 0 {
                self.count.fetch_add(1, Ordering::SeqCst);
            }
        } else if word.fetch_and(!mask, Ordering::SeqCst) & mask != 0 {
            self.count.fetch_sub(1, Ordering::SeqCst);
        }
    }

    fn contains(&self, slot: u32) -> bool {
        self.bit(slot)
            .is_some_and(|(word, mask)| word.load(Ordering::SeqCst) & mask != 0)
    }

    fn is_empty(&self) -> bool {
        self.count.load(Ordering::SeqCst) == 0
    }

    /// Empties the set, calling `f` for each slot that was in it.
    fn take_each(&self, mut f: impl FnMut(u32)) {
        if self.is_empty() {
            return;
        }
        for (i, word) in self.bits.iter().enumerate() {
            let mut bits = word.swap(0, Ordering::SeqCst);
            self.count
                .fetch_sub(bits.count_ones() as usize, Ordering::SeqCst);
            while bits != 0 {
                f((i * 64) as u32 + bits.trailing_zeros());
                bits &= bits - 1;
            }
        }
    }

    fn for_each(&self, mut f: impl FnMut(u32)) {
        for (i, word) in self.bits.iter().enumerate() {
            let mut bits = word.load(Ordering::SeqCst);
            while bits != 0 {
                f((i * 64) as u32 + bits.trailing_zeros());
                bits &= bits - 1;
            }
        }
    }
}

/// Which connections of a node hold bytes back: one per connection table, shared by its
/// connections (their writes and doorbells) and the connector kthread (its tick).
pub(crate) struct HeldSlots {
    /// Connections holding bytes back (the connector checks how long).
    holding: SlotSet,
    /// Connections whose Nagle hold waits for the reader to consume what is in flight:
    /// their doorbell kicks the connector.
    ack_wait: SlotSet,
    /// Connections whose doorbell rang while they waited for the reader (flush wanted).
    acked: SlotSet,
    /// When the connector next looks at how long every hold has lasted (ms).
    next_scan_ms: AtomicI64,
}

/// How often, at most, the connector looks at every hold's age.
const SCAN_MS: i64 = 20;

impl HeldSlots {
    /// Nothing held anywhere.
    pub(crate) const fn new() -> Self {
        Self {
            holding: SlotSet::new(),
            ack_wait: SlotSet::new(),
            acked: SlotSet::new(),
            next_scan_ms: AtomicI64::new(0),
        }
    }

    /// A doorbell for the connection in `slot`: if its held bytes wait for the reader,
    /// marks it for the connector and returns true (the caller kicks the connector).
    /// Safe in atomic context.
    pub(super) fn doorbell(&self, slot: u32) -> bool {
        if !self.ack_wait.contains(slot) {
            return false;
        }
        self.acked.set(slot, true);
        true
    }

    /// The connector's pass: calls `redecide` for the connections whose reader consumed
    /// what was in flight, and now and then for every hold (whose time may have run
    /// out). Nothing to do when none holds.
    pub(crate) fn tick(&self, mut redecide: impl FnMut(u32)) {
        // Those whose reader consumed at once; every hold's age now and then (a stream of
        // kicks does not keep the timeouts from being checked).
        self.acked.take_each(&mut redecide);
        if self.holding.is_empty() {
            return;
        }
        let now = now_ms();
        if now < self.next_scan_ms.load(Ordering::Relaxed) {
            return;
        }
        self.next_scan_ms.store(now + SCAN_MS, Ordering::Relaxed);
        self.holding.for_each(redecide);
    }
}

fn now_ms() -> i64 {
    Ktime::ktime_get().to_ms()
}

/// Nothing is held any more (published, or dropped by an abort).
pub(super) fn release(slots: &HeldSlots, held: &mut Held, slot: u32) {
    if held.since.take().is_some() {
        slots.ack_wait.set(slot, false);
        slots.acked.set(slot, false);
        slots.holding.set(slot, false);
    }
}

fn publish(
    slots: &HeldSlots,
    tx: &mut Tx,
    held: &mut Held,
    slot: u32,
) -> Result<bool, ProtocolError> {
    let ring = tx.publish();
    release(slots, held, slot);
    ring
}

/// Publishes the staged bytes now, or holds them (see the module doc), after a write
/// with `how` or when the connector re-decides. Returns whether to ring the peer's
/// doorbell.
pub(super) fn decide(
    slots: &HeldSlots,
    tx: &mut Tx,
    held: &mut Held,
    slot: u32,
    how: Gathering,
    force: bool,
) -> Result<bool, ProtocolError> {
    tx.refresh()?;
    let limit = if how.corked() {
        CORK_LIMIT_MS
    } else {
        NAGLE_LIMIT_MS
    };
    let expired = held.since.is_some_and(|t| now_ms() - t >= limit);
    let input = GatherInput {
        pending: tx.pending(),
        in_flight: tx.in_flight(),
        room: tx.free(),
        mss: MSS_MAX.min(tx.params().geometry.size() / 4),
        nodelay: how.nodelay,
        cork: how.cork,
        more: how.more,
        force: force || expired,
    };
    match gather_decision(&input) {
        GatherDecision::Idle => {
            release(slots, held, slot);
            Ok(false)
        }
        GatherDecision::SendNow => publish(slots, tx, held, slot),
        GatherDecision::Hold => {
            held.how = how;
            if held.since.is_none() {
                held.since = Some(now_ms());
                slots.holding.set(slot, true);
            }
            if how.corked() {
                slots.ack_wait.set(slot, false);
                return Ok(false);
            }
            // Nagle: hear when the reader has consumed what is in flight. One wait
            // request per hold: it stays posted while bytes are held (`send` leaves it),
            // and the connector, kicked by the doorbell it brings, re-decides and posts
            // the next one ([`redecide`]).
            if slots.ack_wait.contains(slot) && tx.notify_requested() {
                return Ok(false);
            }
            // Before the request, so the doorbell it brings finds the bit.
            slots.ack_wait.set(slot, true);
            // The request re-reads the consumer cursor: if everything was consumed
            // before it was posted no doorbell comes, so send now.
            tx.request_notify()?;
            if tx.in_flight() == 0 {
                return publish(slots, tx, held, slot);
            }
            Ok(false)
        }
    }
}

/// Re-decides the held bytes (the connector, on a doorbell or its tick). A doorbell used
/// up the wait request, so a hold that goes on posts a new one.
pub(super) fn redecide(
    slots: &HeldSlots,
    tx: &mut Tx,
    held: &mut Held,
    slot: u32,
) -> Result<bool, ProtocolError> {
    slots.ack_wait.set(slot, false);
    let how = held.how;
    decide(slots, tx, held, slot, how, false)
}

/// Publishes whatever is held (returns whether to ring the peer's doorbell).
pub(super) fn flush(
    slots: &HeldSlots,
    tx: &mut Tx,
    held: &mut Held,
    slot: u32,
) -> Result<bool, ProtocolError> {
    if tx.pending() == 0 {
        release(slots, held, slot);
        return Ok(false);
    }
    publish(slots, tx, held, slot)
}
