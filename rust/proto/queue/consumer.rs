// SPDX-License-Identifier: GPL-2.0

//! The receiving end of a queue: it reads the ring in its own receive area, and publishes
//! its consumer cursor, budget and flags in the sender's credit area.

use super::{
    at, should_publish_consumer, tagged, to_u64, untagged, Look, PeerWriterState, QueueParams,
    WaitDecision,
};
use crate::proto::cursor::{
    self, FlagWord, NotifyLatch, F_ABORT, F_CLOSED, F_DONE_WRITING, F_WANTS_NOTIFY, PRODUCER_BITS,
};
use crate::proto::error::ProtocolError;
use crate::proto::ring::{
    self, Spans, CREDIT_BUDGET, CREDIT_CONS_CURSOR, CREDIT_CONS_FLAGS, QUEUE_MAGIC, QUEUE_VERSION,
    RX_DATA, RX_GENERATION, RX_MAGIC, RX_PROD_CURSOR, RX_PROD_DROPS, RX_PROD_FLAGS, RX_RING_SIZE,
    RX_START, RX_VERSION,
};
use crate::proto::segment::Segment;

/// The receiving end of a queue.
#[derive(Debug)]
pub(crate) struct Consumer<L: Segment, R: Segment> {
    /// This side's segment holding the receive area (local: loads only,
    /// except at initialization).
    ring: L,
    /// Base of the receive area in `ring`.
    ring_base: usize,
    /// The peer's segment holding the credit area (remote: stores only).
    credit: R,
    /// Base of the credit area in `credit`.
    credit_base: usize,
    /// The agreed parameters (the ring size is this side's own).
    params: QueueParams,
    /// Consumer-update threshold in bytes (1..=ring size).
    threshold: u64,
    /// The threshold asked for at creation (a budget lowers `threshold` below it).
    lazy_threshold: u64,
    /// The producer's drop count as last taken ([`Consumer::drops_when_empty`]).
    drops_seen: u32,
    /// Cursor up to which bytes were consumed locally.
    consumed: u64,
    /// Consumer cursor last stored to the peer.
    published: u64,
    /// The bytes from this cursor on were read by a kernel reader that still holds the
    /// ring's own pages they are in ([`Consumer::hold_from`]): the consumer cursor is
    /// announced no further, so the writer cannot overwrite them. Locally they count as
    /// read.
    hold: Option<u64>,
    /// Last validated producer cursor.
    prod_seen: u64,
    /// The producer cursor when "done writing" was first seen.
    final_prod: Option<u64>,
    /// The queue moved to TCP ([`Consumer::freeze`]): `prod_seen` is final and nothing
    /// the old peer stores is read any more.
    frozen: bool,
    /// This side's flag word as last stored.
    own: FlagWord,
    /// Latched peer flags.
    peer: PeerWriterState,
    /// One doorbell per writer wait request.
    latch: NotifyLatch,
    /// First protocol error seen, latched.
    error: Option<ProtocolError>,
}

impl<L: Segment, R: Segment> Consumer<L, R> {
    /// Creates the consumer of a queue whose receive area (initialized by
    /// [`init_rx_area`] with the same `params`) is at `ring_base` in the own
    /// segment `ring`, and whose credit area is at `credit_base` in the peer's
    /// segment `credit`. `threshold` is the lazy consumer-update threshold
    /// (clamped to 1..=ring size; see [`default_publish_threshold`](super::default_publish_threshold)).
    ///
    /// The header's magic, version, ring size, generation and start are
    /// checked against `params` (a peer may have scribbled on them); from then
    /// on only the local copy is used.
    pub(crate) fn new(
        ring: L,
        ring_base: usize,
        credit: R,
        credit_base: usize,
        params: QueueParams,
        threshold: u64,
    ) -> Result<Self, ProtocolError> {
        ring::check_rx_area(ring.len(), ring_base, params.geometry)?;
        ring::check_credit_area(credit.len(), credit_base)?;
        if ring.load_u32(at(ring_base, RX_MAGIC)) != QUEUE_MAGIC
            || ring.load_u32(at(ring_base, RX_VERSION)) != QUEUE_VERSION
            || ring.load_u64(at(ring_base, RX_RING_SIZE)) != params.geometry.size()
            || ring.load_u64(at(ring_base, RX_GENERATION)) != u64::from(params.generation)
            || ring.load_u64(at(ring_base, RX_START)) != params.start
        {
            return Err(ProtocolError::HeaderMismatch);
        }
        let threshold = threshold.clamp(1, params.geometry.size());
        Ok(Self {
            ring,
            ring_base,
            credit,
            credit_base,
            params,
            threshold,
            lazy_threshold: threshold,
            drops_seen: 0,
            consumed: params.start,
            published: params.start,
            hold: None,
            prod_seen: params.start,
            final_prod: None,
            frozen: false,
            own: FlagWord {
                generation: params.generation,
                token: 0,
                bits: 0,
            },
            peer: PeerWriterState::default(),
            latch: NotifyLatch::default(),
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

    /// Latches an error the caller found in what the peer wrote (a bad datagram record:
    /// `record.rs`), as if the queue had found it; returns it.
    pub(crate) fn fail_with(&mut self, e: ProtocolError) -> ProtocolError {
        self.fail(e)
    }

    /// Bytes available by the last validated producer cursor (no memory access).
    pub(crate) fn available(&self) -> u64 {
        cursor::distance(self.consumed, self.prod_seen)
    }

    /// Bytes consumed but not yet announced to the writer.
    pub(crate) fn unpublished(&self) -> u64 {
        cursor::distance(self.published, self.consumed)
    }

    /// The local consumer cursor.
    pub(crate) fn consumed_cursor(&self) -> u64 {
        self.consumed
    }

    /// Keeps the writer off the bytes from cursor `at` on, which a reader was handed in
    /// the ring itself and may still look at after [`consume`](Self::consume) counted
    /// them read: the consumer cursor is announced up to `at` and no further until
    /// [`release_hold`](Self::release_hold). `at` lies between the announced cursor and
    /// the last validated producer cursor; of two holds the earlier stays.
    pub(crate) fn hold_from(&mut self, at: u64) -> Result<(), ProtocolError> {
        self.check()?;
        let from_published = cursor::distance(self.published, at);
        if from_published > cursor::distance(self.published, self.prod_seen) {
            return Err(ProtocolError::Overrun);
        }
        match self.hold {
            Some(h) if cursor::distance(self.published, h) <= from_published => {}
            _ => self.hold = Some(at),
        }
        Ok(())
    }

    /// The reader let go of what it was handed: the consumer cursor may be announced up
    /// to where it is (at the next [`publish`](Self::publish)).
    pub(crate) fn release_hold(&mut self) {
        self.hold = None;
    }

    /// Whether bytes are held ([`hold_from`](Self::hold_from)).
    pub(crate) fn holding(&self) -> bool {
        self.hold.is_some()
    }

    /// Stores the consumer cursor to the peer as far as it may be announced
    /// ([`announceable`](Self::announceable)); whether it moved.
    fn store_cursor(&mut self) -> bool {
        let to = self.announceable();
        if to == self.published {
            return false;
        }
        self.credit
            .store_u64(at(self.credit_base, CREDIT_CONS_CURSOR), to);
        self.published = to;
        true
    }

    /// How far the consumer cursor may be announced: where it is, or the hold if that
    /// is before it.
    fn announceable(&self) -> u64 {
        match self.hold {
            Some(h)
                if cursor::distance(self.published, h)
                    < cursor::distance(self.published, self.consumed) =>
            {
                h
            }
            _ => self.consumed,
        }
    }

    /// The producer's flag word (local load), generation-filtered; none once frozen.
    fn load_peer_flags(&self) -> FlagWord {
        if self.frozen {
            return FlagWord::filtered(0, self.params.generation, PRODUCER_BITS);
        }
        FlagWord::filtered(
            self.ring.load_u64(at(self.ring_base, RX_PROD_FLAGS)),
            self.params.generation,
            PRODUCER_BITS,
        )
    }

    /// Latches the terminal bits of a producer flag word.
    fn latch_peer(&mut self, w: FlagWord) {
        if w.bits & F_DONE_WRITING != 0 {
            self.peer.done_writing = true;
        }
        if w.bits & F_CLOSED != 0 {
            self.peer.closed = true;
            self.peer.done_writing = true;
        }
        if w.bits & F_ABORT != 0 {
            self.peer.abort = true;
        }
    }

    /// Latches "the peer aborted" without a store from the peer: the fabric declared
    /// the peer's node dead, so no flag will ever come. Reads and writes then report the
    /// abort as if the peer had set it.
    pub(crate) fn latch_peer_abort(&mut self) {
        self.peer.abort = true;
    }

    /// Loads the producer flags then the producer cursor (both local),
    /// validates them and returns the bytes available.
    pub(crate) fn refresh(&mut self) -> Result<u64, ProtocolError> {
        self.check()?;
        if self.frozen {
            return Ok(self.available());
        }
        // Flags first: a "done" seen here orders the final cursor before it.
        let w = self.load_peer_flags();
        self.latch_peer(w);
        let prod = self.ring.load_u64(at(self.ring_base, RX_PROD_CURSOR));
        let avail = match cursor::check_producer(
            self.consumed,
            self.prod_seen,
            prod,
            self.params.geometry.size(),
        ) {
            Ok(a) => a,
            Err(e) => return Err(self.fail(e)),
        };
        if self.peer.done_writing {
            match self.final_prod {
                None => self.final_prod = Some(prod),
                Some(f) if f != prod => return Err(self.fail(ProtocolError::DataAfterDone)),
                Some(_) => {}
            }
        }
        self.prod_seen = prod;
        Ok(avail)
    }

    /// The ring regions holding unread data (at most two spans, segment
    /// offsets in the own segment). Copy out, then [`consume`](Self::consume).
    pub(crate) fn readable(&mut self) -> Result<Spans, ProtocolError> {
        let avail = self.refresh()?;
        Ok(self.unread_spans(avail))
    }

    /// The ring regions of the `avail` bytes from the consumer cursor on.
    fn unread_spans(&self, avail: u64) -> Spans {
        self.params
            .geometry
            .spans(at(self.ring_base, RX_DATA), self.consumed, avail)
    }

    /// Marks `n` bytes (from the spans last returned) as read. Does not
    /// publish: see [`should_publish`](Self::should_publish) and
    /// [`consume_and_update`](Self::consume_and_update).
    pub(crate) fn consume(&mut self, n: usize) -> Result<(), ProtocolError> {
        self.check()?;
        let n = to_u64(n);
        if n > self.available() {
            return Err(ProtocolError::Overrun);
        }
        self.consumed = cursor::advance(self.consumed, n);
        Ok(())
    }

    /// Where a resume header is checked against (`resume.rs`): the start cursor, the
    /// local consumer cursor, the last validated producer cursor and the ring size.
    pub(crate) fn resume_view(&self) -> (u64, u64, u64, u64) {
        (
            self.params.start,
            self.consumed,
            self.prod_seen,
            self.params.geometry.size(),
        )
    }

    /// The connection moved to TCP and the writer said how far it wrote (`end`, checked by
    /// `ResumeHeader::check`): the bytes up to there are read from the ring as before,
    /// and nothing the old writer stores is looked at again. The caller reads the rest of
    /// the stream from TCP once [`available`](Self::available) is 0.
    pub(crate) fn freeze(&mut self, end: u64) -> Result<(), ProtocolError> {
        self.check()?;
        let size = self.params.geometry.size();
        if let Err(e) = cursor::check_producer(self.consumed, self.prod_seen, end, size) {
            return Err(self.fail(e));
        }
        self.prod_seen = end;
        self.frozen = true;
        Ok(())
    }

    /// Takes what the writer published up to now and nothing after it, as
    /// [`freeze`](Self::freeze) at the producer cursor seen now: a datagram receiver that
    /// connected to another peer reads what this one queued before (as UDP delivers it)
    /// and none of what it sends after (which UDP would refuse).
    pub(crate) fn stop_at_published(&mut self) -> Result<(), ProtocolError> {
        self.refresh()?;
        self.frozen = true;
        Ok(())
    }

    /// Whether the queue was frozen (moved to TCP).
    pub(crate) fn frozen(&self) -> bool {
        self.frozen
    }

    /// The writer's view of free space, as far as this side knows.
    fn writer_view_free(&self) -> u64 {
        self.params
            .geometry
            .size()
            .saturating_sub(cursor::distance(self.published, self.prod_seen))
    }

    /// Whether to publish the consumer cursor now (loads the local producer
    /// flags): see [`should_publish_consumer`].
    pub(crate) fn should_publish(&mut self) -> bool {
        if self.check().is_err() {
            return false;
        }
        let w = self.load_peer_flags();
        self.latch_peer(w);
        should_publish_consumer(
            self.unpublished(),
            self.threshold,
            w.wants_notify(),
            self.writer_view_free(),
        )
    }

    /// Stores the consumer cursor to the peer (Release), then (after a full
    /// fence) checks whether the writer asked for a notification. Returns
    /// whether to ring the peer's doorbell. Does nothing if the cursor did not
    /// move since the last publish.
    pub(crate) fn publish(&mut self) -> Result<bool, ProtocolError> {
        self.check()?;
        if !self.store_cursor() {
            // The writer read this cursor after posting any request it has.
            return Ok(false);
        }
        self.ring.fence();
        let w = self.load_peer_flags();
        self.latch_peer(w);
        Ok(self.latch.check(w))
    }

    /// [`consume`](Self::consume) `n` bytes and publish if
    /// [`should_publish`](Self::should_publish) says so. Returns whether to
    /// ring the peer's doorbell.
    pub(crate) fn consume_and_update(&mut self, n: usize) -> Result<bool, ProtocolError> {
        self.consume(n)?;
        if self.should_publish() {
            self.publish()
        } else {
            Ok(false)
        }
    }

    /// The peer writer's latched state (loads the local producer flags).
    pub(crate) fn peer(&mut self) -> PeerWriterState {
        let w = self.load_peer_flags();
        self.latch_peer(w);
        self.peer
    }

    /// Sets the bytes the writer may let wait in the ring (a datagram receiver's
    /// `SO_RCVBUF`; 0: the whole ring) and publishes the consumer cursor at least every
    /// quarter of it, so that the writer's view of what waits stays close.
    pub(crate) fn set_budget(&mut self, bytes: u32) {
        self.threshold = match u64::from(bytes) {
            0 => self.lazy_threshold,
            b => self.lazy_threshold.min((b / 4).max(1)),
        };
        if self.error.is_none() && !self.frozen {
            self.credit.store_u64(
                at(self.credit_base, CREDIT_BUDGET),
                tagged(self.params.generation, bytes),
            );
        }
    }

    /// The datagrams the writer dropped ([`Producer::count_drop`]) since the last call,
    /// taken only when the ring is empty (0 while it holds records: read them first).
    /// The count is loaded before the ring is looked at, and the writer stores it after
    /// the records it published before the drops: so the ring found empty held them all,
    /// every drop taken here came before every record still to come, and a datagram never
    /// reports (`SO_RXQ_OVFL`) a drop that came after it. A count the writer never
    /// stored, or one of another connection, is no drop.
    pub(crate) fn drops_when_empty(&mut self) -> Result<u32, ProtocolError> {
        let word = self.drops_word();
        if self.refresh()? > 0 {
            return Ok(0);
        }
        Ok(self.take_drops(word))
    }

    /// A datagram reader's look at the ring, one load of the producer cursor for what
    /// [`readable`](Self::readable), [`drops_when_empty`](Self::drops_when_empty) and
    /// [`peer_when_empty`](Self::peer_when_empty) would find: the readable spans, or
    /// when the ring is empty the drops and the writer's state. Both were loaded before
    /// the cursor that found the ring empty (the drop count here, the flags in
    /// [`refresh`](Self::refresh)), which is the order those two need.
    ///
    /// Records an earlier look saw published and not yet read are taken as they are,
    /// without loading the writer's words again: a reader with a backlog (a flood's) reads
    /// the shared cursor once per backlog, not once per datagram. Those records were
    /// published whole and checked when seen; drops and the writer's state matter only
    /// once they are read.
    pub(crate) fn look(&mut self) -> Result<Look, ProtocolError> {
        self.check()?;
        let known = self.available();
        if known > 0 {
            return Ok(Look::Readable(self.unread_spans(known)));
        }
        let word = self.drops_word();
        let avail = self.refresh()?;
        if avail > 0 {
            return Ok(Look::Readable(self.unread_spans(avail)));
        }
        Ok(Look::Empty {
            drops: self.take_drops(word),
            peer: self.peer,
        })
    }

    /// [`prepare_wait`](Self::prepare_wait) for a datagram reader, and the drops
    /// ([`drops_when_empty`](Self::drops_when_empty)) from the same look at the ring:
    /// the drop count is loaded before the cursor `prepare_wait` loads.
    pub(crate) fn prepare_datagram_wait(&mut self) -> Result<(WaitDecision, u32), ProtocolError> {
        let word = self.drops_word();
        let decision = self.prepare_wait()?;
        let drops = if self.available() == 0 {
            self.take_drops(word)
        } else {
            0
        };
        Ok((decision, drops))
    }

    /// The writer's drop count word (local load), to be taken by
    /// [`take_drops`](Self::take_drops) if a look at the ring after this load finds it
    /// empty; none once frozen (the old writer's stores are not looked at again).
    fn drops_word(&self) -> Option<u64> {
        (!self.frozen).then(|| self.ring.load_u64(at(self.ring_base, RX_PROD_DROPS)))
    }

    /// The drops in `word` ([`drops_word`](Self::drops_word), loaded before a look that
    /// found the ring empty) since the last taken.
    fn take_drops(&mut self, word: Option<u64>) -> u32 {
        let Some(count) = word.and_then(|w| untagged(w, self.params.generation)) else {
            return 0;
        };
        let new = count.wrapping_sub(self.drops_seen);
        self.drops_seen = count;
        new
    }

    /// The peer writer's state for a reader that found the ring empty, or `None`
    /// when bytes arrived meanwhile (read them first). The flags are loaded before
    /// the cursor is looked at again: a writer publishes its last bytes before its
    /// done flag, so the flag and then an empty ring is the true end of the stream,
    /// where an empty ring seen before the flag may have missed the last bytes of a
    /// writer that finished in between (`recv` returned end of stream with bytes in
    /// the ring).
    pub(crate) fn peer_when_empty(&mut self) -> Result<Option<PeerWriterState>, ProtocolError> {
        self.peer_when_none_past(0)
    }

    /// [`peer_when_empty`](Self::peer_when_empty) for a reader that looks past the
    /// first `skip` bytes (a peek at an offset, `SO_PEEK_OFF`): `None` when bytes
    /// beyond them arrived meanwhile.
    pub(crate) fn peer_when_none_past(
        &mut self,
        skip: u64,
    ) -> Result<Option<PeerWriterState>, ProtocolError> {
        let peer = self.peer();
        if self.refresh()? > skip {
            return Ok(None);
        }
        Ok(Some(peer))
    }

    /// Whether the stream is at its end: the peer is done writing and every
    /// byte it wrote was consumed. Refreshes.
    pub(crate) fn at_eof(&mut self) -> Result<bool, ProtocolError> {
        let avail = self.refresh()?;
        Ok(avail == 0 && self.peer.done_writing)
    }

    /// Stores this side's flag word to the peer.
    fn store_flags(&mut self) {
        self.credit
            .store_u64(at(self.credit_base, CREDIT_CONS_FLAGS), self.own.pack());
    }

    /// Announces that this side reads nothing more (socket closed): publishes
    /// the cursor first (not past a hold: a writer that has not seen the flag yet
    /// may still write). After it this side writes nothing more to the peer's
    /// segment. Works even after a protocol error. The caller rings the doorbell.
    pub(crate) fn set_closed(&mut self) {
        if self.error.is_none() {
            self.store_cursor();
        }
        if self.own.bits & F_CLOSED == 0 {
            self.own.bits |= F_CLOSED;
            self.own.bits &= !F_WANTS_NOTIFY;
            self.store_flags();
        }
    }

    /// Before sleeping for data: publishes any unannounced consumption (so a
    /// writer blocked on a full ring is never left waiting for space this side
    /// already freed), posts a wait request (a new token with "wants
    /// notify"), then (after a full fence) re-reads the producer cursor and
    /// flags. Sleep only if [`WaitDecision::sleep`]; ring the peer's doorbell
    /// if [`WaitDecision::notify_peer`]; afterwards call
    /// [`finish_wait`](Self::finish_wait).
    pub(crate) fn prepare_wait(&mut self) -> Result<WaitDecision, ProtocolError> {
        self.prepare_wait_past(0)
    }

    /// [`prepare_wait`](Self::prepare_wait) for a reader that waits for a byte past the
    /// first `skip` (a peek at an offset, `SO_PEEK_OFF`): sleep only if no more than
    /// `skip` bytes are there. The writer rings once for the request, at its next
    /// publish; the reader that wakes short of its byte looks again with a new request.
    pub(crate) fn prepare_wait_past(&mut self, skip: u64) -> Result<WaitDecision, ProtocolError> {
        self.check()?;
        let notify_peer = self.publish()?;
        self.own.token = cursor::next_token(self.own.token);
        self.own.bits |= F_WANTS_NOTIFY;
        self.store_flags();
        self.ring.fence();
        let avail = self.refresh()?;
        let p = self.peer;
        Ok(WaitDecision {
            sleep: avail <= skip && !p.done_writing && !p.abort,
            notify_peer,
        })
    }

    /// Whether the doorbell this side asked for is due: a wait request is posted
    /// and the writer moved its cursor or set an ending flag since this side last
    /// looked. Loads only, changes nothing (see [`Producer::wake_due`]).
    pub(crate) fn wake_due(&self) -> bool {
        if self.own.bits & F_WANTS_NOTIFY == 0 || self.error.is_some() {
            return false;
        }
        let prod = self.ring.load_u64(at(self.ring_base, RX_PROD_CURSOR));
        let w = self.load_peer_flags();
        let p = self.peer;
        prod != self.prod_seen
            || (w.bits & F_DONE_WRITING != 0 && !p.done_writing)
            || (w.bits & F_CLOSED != 0 && !p.closed)
            || (w.bits & F_ABORT != 0 && !p.abort)
    }

    /// Withdraws the wait request after waking (or deciding not to sleep).
    pub(crate) fn finish_wait(&mut self) {
        if self.own.bits & F_WANTS_NOTIFY != 0 {
            self.own.bits &= !F_WANTS_NOTIFY;
            self.store_flags();
        }
    }
}
