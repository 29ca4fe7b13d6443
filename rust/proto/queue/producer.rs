// SPDX-License-Identifier: GPL-2.0

//! The sending end of a queue: it copies into the receiver's ring and publishes its
//! cursor there, and reads the receiver's consumer cursor, budget and flags from its own
//! credit area.

use super::{at, tagged, to_u64, untagged, PeerReaderState, QueueParams, WaitDecision};
use crate::proto::cursor::{
    self, FlagWord, NotifyLatch, CONSUMER_BITS, F_ABORT, F_CLOSED, F_DONE_WRITING, F_WANTS_NOTIFY,
};
use crate::proto::error::ProtocolError;
use crate::proto::ring::{
    self, Spans, CREDIT_BUDGET, CREDIT_CONS_CURSOR, CREDIT_CONS_FLAGS, RX_DATA, RX_PROD_CURSOR,
    RX_PROD_DROPS, RX_PROD_FLAGS,
};
use crate::proto::segment::Segment;

/// The sending end of a queue.
#[derive(Debug)]
pub(crate) struct Producer<R: Segment, L: Segment> {
    /// The receiver's segment holding the receive area (remote: stores only).
    ring: R,
    /// Base of the receive area in `ring`.
    ring_base: usize,
    /// This side's segment holding the credit area (local: loads only).
    credit: L,
    /// Base of the credit area in `credit`.
    credit_base: usize,
    /// The agreed parameters.
    params: QueueParams,
    /// Cursor up to which bytes were copied into the ring (staged).
    staged: u64,
    /// Cursor last stored to the peer (published).
    published: u64,
    /// Last validated consumer cursor.
    cons_seen: u64,
    /// This side's flag word as last stored.
    own: FlagWord,
    /// Latched peer flags.
    peer: PeerReaderState,
    /// One doorbell per reader wait request.
    latch: NotifyLatch,
    /// Datagrams dropped at a full ring (or over the reader's budget), as last stored.
    drops: u32,
    /// First protocol error seen, latched.
    error: Option<ProtocolError>,
}

impl<R: Segment, L: Segment> Producer<R, L> {
    /// Creates the producer of a queue whose receive area is at `ring_base` in
    /// the peer's segment `ring` and whose credit area (already initialized
    /// with [`init_credit_area`]) is at `credit_base` in the own segment
    /// `credit`. Reads nothing remote.
    pub(crate) fn new(
        ring: R,
        ring_base: usize,
        credit: L,
        credit_base: usize,
        params: QueueParams,
    ) -> Result<Self, ProtocolError> {
        ring::check_rx_area(ring.len(), ring_base, params.geometry)?;
        ring::check_credit_area(credit.len(), credit_base)?;
        Ok(Self {
            ring,
            ring_base,
            credit,
            credit_base,
            params,
            staged: params.start,
            published: params.start,
            cons_seen: params.start,
            own: FlagWord {
                generation: params.generation,
                token: 0,
                bits: 0,
            },
            peer: PeerReaderState::default(),
            latch: NotifyLatch::default(),
            drops: 0,
            error: None,
        })
    }

    /// The agreed parameters.
    pub(crate) fn params(&self) -> QueueParams {
        self.params
    }

    /// The latched protocol error, if any.
    pub(crate) fn error(&self) -> Option<ProtocolError> {
        self.error
    }

    /// Returns the latched error, if any.
    fn check(&self) -> Result<(), ProtocolError> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Latches `e` and returns it.
    fn fail(&mut self, e: ProtocolError) -> ProtocolError {
        if self.error.is_none() {
            self.error = Some(e);
        }
        e
    }

    /// Free bytes by the last known consumer cursor (no memory access).
    pub(crate) fn free(&self) -> u64 {
        self.params
            .geometry
            .size()
            .saturating_sub(cursor::distance(self.cons_seen, self.staged))
    }

    /// Bytes copied into the ring since the queue began, staged or published: what this
    /// side tells the reader in a resume header (`resume.rs`).
    pub(crate) fn written(&self) -> u64 {
        cursor::distance(self.params.start, self.staged)
    }

    /// Bytes staged but not yet published (held back by gathering).
    pub(crate) fn pending(&self) -> u64 {
        cursor::distance(self.published, self.staged)
    }

    /// Bytes published but not yet known to be consumed (Nagle's "in flight").
    pub(crate) fn in_flight(&self) -> u64 {
        cursor::distance(self.cons_seen, self.published)
    }

    /// Bytes staged and not yet known to be consumed (SIOCOUTQ).
    pub(crate) fn unconsumed(&self) -> u64 {
        cursor::distance(self.cons_seen, self.staged)
    }

    /// The published producer cursor.
    pub(crate) fn published_cursor(&self) -> u64 {
        self.published
    }

    /// Loads and validates the consumer cursor from the local credit area;
    /// returns the free space.
    pub(crate) fn refresh(&mut self) -> Result<u64, ProtocolError> {
        self.check()?;
        let cons = self
            .credit
            .load_u64(at(self.credit_base, CREDIT_CONS_CURSOR));
        match cursor::check_consumer(self.cons_seen, cons, self.published) {
            Ok(_) => {
                self.cons_seen = cons;
                Ok(self.free())
            }
            Err(e) => Err(self.fail(e)),
        }
    }

    /// The ring regions the caller may copy into now (all free space, at most
    /// two spans, segment offsets in the peer's segment). Copy, then
    /// [`stage`](Self::stage) or [`commit`](Self::commit) what was written.
    pub(crate) fn writable(&mut self) -> Result<Spans, ProtocolError> {
        let free = self.refresh()?;
        Ok(self.spans_at_staged(free))
    }

    /// Spans of `len` bytes at the staged cursor.
    fn spans_at_staged(&self, len: u64) -> Spans {
        self.params
            .geometry
            .spans(at(self.ring_base, RX_DATA), self.staged, len)
    }

    /// All-or-nothing reservation of exactly `len` bytes (the small-message
    /// fast path: one copy, possibly split at the ring's end, then one cursor
    /// store). Returns `None` if that much space is not free.
    pub(crate) fn reserve(&mut self, len: usize) -> Result<Option<Spans>, ProtocolError> {
        self.check()?;
        let want = to_u64(len);
        if self.free() < want && self.refresh()? < want {
            return Ok(None);
        }
        Ok(Some(self.spans_at_staged(want)))
    }

    /// [`reserve`](Self::reserve) for a datagram record: `None` also when the bytes
    /// waiting in the ring exceed the reader's budget ([`Consumer::set_budget`]). UDP's
    /// rule for its receive buffer: a datagram is taken while what waits is within the
    /// budget, so a tiny budget still takes one. What waits is known by the consumer
    /// cursor, which the reader publishes at least every quarter of its budget and when
    /// it has read everything.
    pub(crate) fn reserve_within_budget(
        &mut self,
        len: usize,
    ) -> Result<Option<Spans>, ProtocolError> {
        self.check()?;
        let word = self.credit.load_u64(at(self.credit_base, CREDIT_BUDGET));
        if let Some(budget) = untagged(word, self.params.generation).filter(|&b| b != 0) {
            let budget = u64::from(budget);
            if self.unconsumed() > budget && {
                self.refresh()?;
                self.unconsumed() > budget
            } {
                return Ok(None);
            }
        }
        self.reserve(len)
    }

    /// Counts a datagram that found no room and tells the reader the running count
    /// ([`Consumer::drops_when_empty`]); the store is ordered after every record
    /// published before the drop.
    pub(crate) fn count_drop(&mut self) {
        if self.error.is_some() {
            return;
        }
        self.drops = self.drops.wrapping_add(1);
        self.ring.store_u64(
            at(self.ring_base, RX_PROD_DROPS),
            tagged(self.params.generation, self.drops),
        );
    }

    /// Marks `n` more bytes (copied into the spans last returned) as written,
    /// without publishing them yet.
    pub(crate) fn stage(&mut self, n: usize) -> Result<(), ProtocolError> {
        self.check()?;
        let n = to_u64(n);
        if n > self.free() {
            return Err(ProtocolError::Overrun);
        }
        self.staged = cursor::advance(self.staged, n);
        Ok(())
    }

    /// Publishes everything staged: stores the producer cursor (Release, after
    /// the data), then checks whether the reader asked for a notification.
    /// Returns whether to ring the peer's doorbell.
    pub(crate) fn publish(&mut self) -> Result<bool, ProtocolError> {
        self.check()?;
        if self.staged == self.published {
            return Ok(false);
        }
        self.ring
            .store_u64(at(self.ring_base, RX_PROD_CURSOR), self.staged);
        self.published = self.staged;
        self.ring.fence();
        Ok(self.reader_asks())
    }

    /// [`stage`](Self::stage) `n` bytes and [`publish`](Self::publish).
    pub(crate) fn commit(&mut self, n: usize) -> Result<bool, ProtocolError> {
        self.stage(n)?;
        self.publish()
    }

    /// Loads the peer's consumer flag word (local, generation-filtered) and
    /// latches `closed`.
    fn load_reader_flags(&mut self) -> FlagWord {
        let w = FlagWord::filtered(
            self.credit
                .load_u64(at(self.credit_base, CREDIT_CONS_FLAGS)),
            self.params.generation,
            CONSUMER_BITS,
        );
        if w.bits & F_CLOSED != 0 {
            self.peer.closed = true;
        }
        w
    }

    /// Whether the reader's current wait request still needs a doorbell.
    fn reader_asks(&mut self) -> bool {
        let w = self.load_reader_flags();
        self.latch.check(w)
    }

    /// The peer reader's latched state (loads the local credit flags).
    pub(crate) fn peer(&mut self) -> PeerReaderState {
        self.load_reader_flags();
        self.peer
    }

    /// Stores this side's flag word to the peer.
    fn store_flags(&mut self) {
        self.ring
            .store_u64(at(self.ring_base, RX_PROD_FLAGS), self.own.pack());
    }

    /// Announces "done writing" (SHUT_WR): publishes what is staged first, so
    /// the flag is ordered after the last byte. The caller rings the doorbell.
    pub(crate) fn set_done_writing(&mut self) -> Result<(), ProtocolError> {
        self.publish()?;
        if self.own.bits & F_DONE_WRITING == 0 {
            self.own.bits |= F_DONE_WRITING;
            self.store_flags();
        }
        Ok(())
    }

    /// Announces a graceful close (implies done writing): after this store
    /// this side writes nothing more to the peer's segment. The caller rings
    /// the doorbell.
    pub(crate) fn set_closed(&mut self) -> Result<(), ProtocolError> {
        self.publish()?;
        if self.own.bits & (F_DONE_WRITING | F_CLOSED) != F_DONE_WRITING | F_CLOSED {
            self.own.bits |= F_DONE_WRITING | F_CLOSED;
            self.own.bits &= !F_WANTS_NOTIFY;
            self.store_flags();
        }
        Ok(())
    }

    /// Announces an abort (RST). Works even after a protocol error (that is
    /// when it is needed); staged bytes are dropped. The caller rings the
    /// doorbell.
    pub(crate) fn set_abort(&mut self) {
        if self.own.bits & F_ABORT == 0 {
            self.own.bits |= F_ABORT | F_CLOSED;
            self.own.bits &= !F_WANTS_NOTIFY;
            self.store_flags();
        }
    }

    /// Before sleeping for space: posts a wait request (a new token with
    /// "wants notify"), then (after a full fence) re-reads the consumer
    /// cursor. Sleep only if [`WaitDecision::sleep`]; afterwards call
    /// [`finish_wait`](Self::finish_wait). `min_free` (clamped to 1..=ring
    /// size) is the space the writer waits for.
    pub(crate) fn prepare_wait(&mut self, min_free: u64) -> Result<WaitDecision, ProtocolError> {
        let size = self.params.geometry.size();
        let min_free = min_free.clamp(1, size);
        let free = self.request_notify()?;
        let closed = self.peer().closed;
        Ok(WaitDecision {
            sleep: free < min_free && !closed,
            notify_peer: false,
        })
    }

    /// Posts a wait request (a new token with "wants notify"), fences, and
    /// re-reads the consumer cursor; returns the free space. The reader's
    /// next cursor publish rings the doorbell. Used by
    /// [`prepare_wait`](Self::prepare_wait) and by gathering: a writer that
    /// holds staged bytes back (Nagle) posts a request so that the reader's
    /// consumption of the in-flight bytes wakes it to re-decide (TCP's ACK
    /// clock). Withdraw it with [`finish_wait`](Self::finish_wait).
    pub(crate) fn request_notify(&mut self) -> Result<u64, ProtocolError> {
        self.check()?;
        self.own.token = cursor::next_token(self.own.token);
        self.own.bits |= F_WANTS_NOTIFY;
        self.store_flags();
        self.ring.fence();
        self.refresh()
    }

    /// Whether a wait request is posted.
    pub(crate) fn notify_requested(&self) -> bool {
        self.own.bits & F_WANTS_NOTIFY != 0
    }

    /// Whether the doorbell this side asked for is due: a wait request is posted
    /// and the reader moved its cursor or closed since this side last looked. Loads
    /// only, changes nothing; the fabric's periodic sweep wakes such a writer, so that a
    /// doorbell lost on the way costs two sweep periods at most, never a hang.
    pub(crate) fn wake_due(&self) -> bool {
        if self.own.bits & F_WANTS_NOTIFY == 0 || self.error.is_some() {
            return false;
        }
        let cons = self
            .credit
            .load_u64(at(self.credit_base, CREDIT_CONS_CURSOR));
        let w = FlagWord::filtered(
            self.credit
                .load_u64(at(self.credit_base, CREDIT_CONS_FLAGS)),
            self.params.generation,
            CONSUMER_BITS,
        );
        cons != self.cons_seen || (w.bits & F_CLOSED != 0 && !self.peer.closed)
    }

    /// Withdraws the wait request after waking (or deciding not to sleep).
    pub(crate) fn finish_wait(&mut self) {
        if self.own.bits & F_WANTS_NOTIFY != 0 {
            self.own.bits &= !F_WANTS_NOTIFY;
            self.store_flags();
        }
    }
}
