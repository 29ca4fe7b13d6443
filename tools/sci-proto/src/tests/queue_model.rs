//! Single-threaded model tests of one queue: any interleaving of writes,
//! reads, publishes and waits delivers exactly the bytes written, in order,
//! and never reports more space or data than exists.

use std::collections::VecDeque;

use proptest::prelude::*;

use super::{assert_in_ring, stream, QueuePair};
use crate::proto::error::ProtocolError;
use crate::proto::gather::INLINE_MAX;
use crate::proto::queue::{self, should_publish_consumer, PeerLines};

/// One step of the model.
#[derive(Clone, Debug)]
enum Op {
    /// Write up to `len` bytes into `writable()`; publish or only stage.
    Write { len: usize, publish: bool },
    /// Small-message path: reserve exactly `len` bytes, commit.
    Inline { len: usize },
    /// Publish what is staged.
    Publish,
    /// Read up to `len` bytes; lazily update (or only consume).
    Read { len: usize, update: bool },
    /// Reader publishes its cursor.
    ReaderPublish,
    /// Reader prepares to sleep (and, if it would not sleep, finishes).
    ReaderWait,
    /// Writer prepares to sleep for `min_free` bytes.
    WriterWait { min_free: u64 },
    /// The waiting side wakes up and withdraws its request.
    FinishWaits,
}

fn op(ring: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..=2 * ring, any::<bool>()).prop_map(|(len, publish)| Op::Write { len, publish }),
        // Exactly the free space / exactly full rings come from these sizes too.
        1 => Just(Op::Write { len: ring, publish: true }),
        2 => (0..=INLINE_MAX + 8).prop_map(|len| Op::Inline { len }),
        1 => Just(Op::Publish),
        4 => (0..=2 * ring, any::<bool>()).prop_map(|(len, update)| Op::Read { len, update }),
        1 => Just(Op::ReaderPublish),
        1 => Just(Op::ReaderWait),
        1 => (0..=ring as u64 + 2).prop_map(|min_free| Op::WriterWait { min_free }),
        1 => Just(Op::FinishWaits),
    ]
}

/// Start cursors: zero, just before the u64 wrap, anything.
fn start() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        (0u64..4096).prop_map(|d| u64::MAX - d),
        any::<u64>()
    ]
}

/// Model state alongside the real endpoints.
struct Model {
    q: QueuePair,
    seed: u64,
    /// The consumer's publish threshold (as clamped by the consumer).
    threshold: u64,
    /// Bytes written in total (stream position of the next byte).
    written: u64,
    /// Bytes published.
    published: u64,
    /// Bytes read.
    read: u64,
    /// Bytes consumed-and-published by the reader.
    reader_published: u64,
    /// Written but unread bytes, in order.
    fifo: VecDeque<u8>,
    /// The writer posted a wait request and was told to sleep (unanswered).
    writer_sleeping: bool,
    /// The writer's "wants notify" bit is set (until it finishes waiting).
    writer_flag: bool,
    /// The reader posted a wait request and was told to sleep.
    reader_sleeping: bool,
    /// Doorbells rung at the reader / writer.
    reader_bells: u64,
    writer_bells: u64,
}

impl Model {
    fn ring(&self) -> u64 {
        self.q.params.geometry.size()
    }

    /// True free space: the ring minus everything written and not yet read.
    fn true_free(&self) -> u64 {
        self.ring() - (self.written - self.read)
    }

    fn check_invariants(&mut self) {
        let p = &self.q.producer;
        let c = &self.q.consumer;
        assert!(p.free() <= self.true_free(), "writer overstates space");
        assert_eq!(p.pending(), self.written - self.published);
        assert_eq!(c.unpublished(), self.read - self.reader_published);
        assert!(
            c.available() <= self.published - self.read,
            "reader overstates data"
        );
        assert!(p.error().is_none() && c.error().is_none());
        // A doorbell's look sees, at the reader, the producer cursor move with each
        // publish and with nothing else (waits, flags, the reader's credits), and at the
        // writer, the consumer cursor move with each of the reader's publishes.
        let start = self.q.params.start;
        let rx_end = super::RX_BASE + self.q.params.geometry.rx_area_size();
        let at_reader = PeerLines::load(&*self.q.rx_seg, super::RX_BASE, rx_end);
        assert_eq!(at_reader.arrived, start.wrapping_add(self.published));
        let at_writer = PeerLines::load(&*self.q.tx_seg, 0, super::CREDIT_BASE);
        assert_eq!(at_writer.freed, start.wrapping_add(self.reader_published));
    }

    fn step(&mut self, op: &Op) {
        let geom = self.q.params.geometry;
        match *op {
            Op::Write { len, publish } => {
                let spans = self.q.producer.writable().unwrap();
                assert_in_ring(spans, geom);
                // All free space is offered once the cursor is fresh: the
                // lazy consumer update may hide space, never invent it.
                assert_eq!(spans.total() as u64, self.q.producer.free());
                let n = len.min(spans.total());
                let data = stream(self.seed, self.written, n);
                self.q.rx_seg.copy_into_spans(spans, &data);
                self.fifo.extend(&data);
                self.written += n as u64;
                if publish {
                    let bell = self.q.producer.commit(n).unwrap();
                    self.after_publish(bell, n);
                } else {
                    self.q.producer.stage(n).unwrap();
                }
                // Staging more than offered is refused, and changes nothing.
                let too_much = self.q.producer.free() as usize + 1;
                assert_eq!(self.q.producer.stage(too_much), Err(ProtocolError::Overrun));
            }
            Op::Inline { len } => {
                let free_before = self.q.producer.refresh().unwrap();
                match self.q.producer.reserve(len).unwrap() {
                    Some(spans) => {
                        assert!(len as u64 <= free_before);
                        assert_eq!(spans.total(), len);
                        assert_in_ring(spans, geom);
                        let data = stream(self.seed, self.written, len);
                        self.q.rx_seg.copy_into_spans(spans, &data);
                        self.fifo.extend(&data);
                        self.written += len as u64;
                        let bell = self.q.producer.commit(len).unwrap();
                        self.after_publish(bell, len);
                    }
                    None => assert!(len as u64 > free_before),
                }
            }
            Op::Publish => {
                let n = self.written - self.published;
                let bell = self.q.producer.publish().unwrap();
                self.after_publish(bell, n as usize);
            }
            Op::Read { len, update } => {
                let spans = self.q.consumer.readable().unwrap();
                assert_in_ring(spans, geom);
                assert_eq!(
                    spans.total() as u64,
                    self.published - self.read,
                    "a fresh reader sees exactly what was published"
                );
                let n = len.min(spans.total());
                let got = self.q.rx_seg.copy_from_spans(spans, n);
                let want: Vec<u8> = self.fifo.drain(..n).collect();
                assert_eq!(got, want, "bytes delivered in order");
                self.read += n as u64;
                let writer_waiting = self.writer_sleeping;
                let writer_flag = self.writer_flag;
                let free_view_before = self.ring() - (self.published - self.reader_published);
                let unpublished = self.read - self.reader_published;
                if update {
                    let bell = self.q.consumer.consume_and_update(n).unwrap();
                    let published_now = self.q.consumer.unpublished() == 0;
                    if published_now {
                        self.reader_published = self.read;
                    }
                    // The lazy update follows the documented rule.
                    let expect = should_publish_consumer(
                        unpublished,
                        self.threshold,
                        writer_flag,
                        free_view_before,
                    );
                    assert_eq!(published_now && unpublished > 0, expect);
                    if writer_waiting && n > 0 {
                        // A sleeping writer is never left waiting for freed space.
                        assert!(published_now);
                        assert!(bell, "the sleeping writer gets its doorbell");
                    }
                    if bell {
                        assert!(writer_waiting, "doorbell nobody asked for");
                        self.writer_bells += 1;
                        self.writer_sleeping = false;
                    }
                } else {
                    self.q.consumer.consume(n).unwrap();
                }
                assert_eq!(
                    self.q
                        .consumer
                        .consume(1 + self.q.consumer.available() as usize),
                    Err(ProtocolError::Overrun)
                );
            }
            Op::ReaderPublish => {
                let bell = self.q.consumer.publish().unwrap();
                self.reader_published = self.read;
                if bell {
                    assert!(self.writer_sleeping, "doorbell nobody asked for");
                    self.writer_bells += 1;
                    self.writer_sleeping = false;
                }
            }
            Op::ReaderWait => {
                let d = self.q.consumer.prepare_wait().unwrap();
                // Before sleeping, everything consumed is announced.
                assert_eq!(self.q.consumer.unpublished(), 0);
                self.reader_published = self.read;
                if d.notify_peer {
                    assert!(self.writer_sleeping, "doorbell nobody asked for");
                    self.writer_bells += 1;
                    self.writer_sleeping = false;
                }
                assert_eq!(d.sleep, self.published == self.read);
                if d.sleep {
                    self.reader_sleeping = true;
                } else {
                    self.q.consumer.finish_wait();
                }
            }
            Op::WriterWait { min_free } => {
                let d = self.q.producer.prepare_wait(min_free).unwrap();
                let want = min_free.clamp(1, self.ring());
                assert_eq!(d.sleep, self.q.producer.free() < want);
                // The writer's fresh view equals what the reader announced.
                assert_eq!(
                    self.q.producer.free(),
                    self.ring() - (self.written - self.reader_published)
                );
                if d.sleep {
                    self.writer_sleeping = true;
                    self.writer_flag = true;
                } else {
                    self.q.producer.finish_wait();
                    self.writer_sleeping = false;
                    self.writer_flag = false;
                }
            }
            Op::FinishWaits => {
                self.q.producer.finish_wait();
                self.q.consumer.finish_wait();
                self.writer_sleeping = false;
                self.writer_flag = false;
                self.reader_sleeping = false;
            }
        }
        self.check_invariants();
    }

    fn after_publish(&mut self, bell: bool, n: usize) {
        self.published = self.written;
        if self.reader_sleeping && n > 0 {
            assert!(bell, "a sleeping reader gets its doorbell");
        }
        if bell {
            // A doorbell only answers a posted, unanswered request.
            assert!(self.reader_sleeping, "doorbell nobody asked for");
            self.reader_bells += 1;
            self.reader_sleeping = false;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn interleavings_deliver_in_order(
        log2 in 6u32..=9,
        threshold in prop_oneof![Just(None), (0u64..=600).prop_map(Some)],
        start in start(),
        generation in any::<u32>(),
        seed in any::<u64>(),
        ops in proptest::collection::vec(op(512), 1..200),
    ) {
        let ring = 1u64 << log2;
        let threshold = threshold.unwrap_or_else(|| {
            queue::default_publish_threshold(crate::proto::ring::RingGeometry::from_log2(log2).unwrap())
        });
        let q = QueuePair::new(log2, generation, start, threshold);
        let mut m = Model {
            q,
            seed,
            threshold: threshold.clamp(1, ring),
            written: 0,
            published: 0,
            read: 0,
            reader_published: 0,
            fifo: VecDeque::new(),
            writer_sleeping: false,
            writer_flag: false,
            reader_sleeping: false,
            reader_bells: 0,
            writer_bells: 0,
        };
        for op in &ops {
            m.step(op);
        }
        // Drain: publish, read everything, and check nothing is lost.
        m.step(&Op::FinishWaits);
        m.step(&Op::Publish);
        m.step(&Op::Read { len: usize::MAX, update: true });
        prop_assert_eq!(m.read, m.written);
        prop_assert!(m.fifo.is_empty());
        let _ = (m.reader_bells, m.writer_bells);
    }

    #[test]
    fn any_threshold_never_strands_a_writer(
        log2 in 6u32..=8,
        threshold in 0u64..=300,
        start in start(),
        chunks in proptest::collection::vec((1usize..=300, 1usize..=300), 1..60),
    ) {
        // Writer fills what it can, then waits; the reader reads in random
        // chunks with lazy updates. Whenever the writer waits, the reader's
        // next consumption (or its own wait) must publish and ring.
        let mut q = QueuePair::new(log2, 7, start, threshold);
        let mut written = 0u64;
        let mut read = 0u64;
        for (w, r) in chunks {
            let spans = q.producer.writable().unwrap();
            let n = w.min(spans.total());
            q.rx_seg.copy_into_spans(spans, &stream(1, written, n));
            q.producer.commit(n).unwrap();
            written += n as u64;
            let d = q.producer.prepare_wait(1).unwrap();
            let spans = q.consumer.readable().unwrap();
            let k = r.min(spans.total());
            prop_assert_eq!(q.rx_seg.copy_from_spans(spans, k), stream(1, read, k));
            read += k as u64;
            let bell = q.consumer.consume_and_update(k).unwrap();
            if d.sleep && k > 0 {
                prop_assert!(bell);
                prop_assert!(q.producer.refresh().unwrap() > 0, "space was announced");
            }
            if !d.sleep || bell {
                q.producer.finish_wait();
            }
            if q.consumer.available() == 0 {
                let rd = q.consumer.prepare_wait().unwrap();
                prop_assert_eq!(q.consumer.unpublished(), 0);
                q.consumer.finish_wait();
                let _ = rd;
                q.producer.finish_wait();
            }
        }
    }
}

#[test]
fn should_publish_rule() {
    // Nothing to publish: never.
    assert!(!should_publish_consumer(0, 1, true, 0));
    // Below the threshold, writer not waiting, writer has room: hold.
    assert!(!should_publish_consumer(10, 64, false, 5));
    // Threshold reached.
    assert!(should_publish_consumer(64, 64, false, 5));
    // Writer asked.
    assert!(should_publish_consumer(1, 64, true, 5));
    // Writer's view is full.
    assert!(should_publish_consumer(1, 64, false, 0));
}

#[test]
fn exactly_full_and_wrap() {
    let mut q = QueuePair::new(6, 1, u64::MAX - 10, 16);
    // Fill exactly.
    let s = q.producer.writable().unwrap();
    assert_eq!(s.total(), 64);
    q.rx_seg.copy_into_spans(s, &stream(3, 0, 64));
    q.producer.commit(64).unwrap();
    assert!(q.producer.writable().unwrap().is_empty());
    assert_eq!(q.producer.reserve(1).unwrap(), None);
    assert_eq!(q.producer.reserve(0).unwrap().map(|s| s.total()), Some(0));
    // Read 10 (crossing nothing yet), lazily: writer's view stays full → publish.
    let s = q.consumer.readable().unwrap();
    assert_eq!(s.total(), 64);
    assert_eq!(q.rx_seg.copy_from_spans(s, 10), stream(3, 0, 10));
    q.consumer.consume_and_update(10).unwrap();
    assert_eq!(
        q.consumer.unpublished(),
        0,
        "writer saw a full ring: publish"
    );
    assert_eq!(q.producer.writable().unwrap().total(), 10);
    // The producer cursor crosses u64::MAX here; spans wrap around the ring.
    let s = q.producer.writable().unwrap();
    q.rx_seg.copy_into_spans(s, &stream(3, 64, 10));
    q.producer.commit(10).unwrap();
    let s = q.consumer.readable().unwrap();
    assert_eq!(s.total(), 64);
    assert_eq!(q.rx_seg.copy_from_spans(s, 64), stream(3, 10, 64));
}

#[test]
fn consumer_attach_checks_header() {
    let q = QueuePair::new(6, 5, 0, 16);
    let other = |log2: u32, generation: u32, start: u64| {
        let params = queue::QueueParams {
            geometry: crate::proto::ring::RingGeometry::from_log2(log2).unwrap(),
            generation,
            start,
        };
        queue::Consumer::new(
            q.rx_seg.clone(),
            super::RX_BASE,
            q.tx_seg.clone(),
            super::CREDIT_BASE,
            params,
            1,
        )
        .map(|_| ())
    };
    assert_eq!(other(6, 5, 0), Ok(()));
    assert_eq!(other(7, 5, 0), Err(ProtocolError::HeaderMismatch));
    assert_eq!(other(6, 6, 0), Err(ProtocolError::HeaderMismatch));
    assert_eq!(other(6, 5, 1), Err(ProtocolError::HeaderMismatch));
    assert_eq!(other(20, 5, 0), Err(ProtocolError::BadPlacement));
}

#[test]
fn producer_side_header_check() {
    let q = QueuePair::new(6, 5, 7, 16);
    let params = |log2: u32, generation: u32, start: u64| queue::QueueParams {
        geometry: crate::proto::ring::RingGeometry::from_log2(log2).unwrap(),
        generation,
        start,
    };
    let matches = |p| queue::rx_area_matches(&q.rx_seg, super::RX_BASE, p);
    assert!(matches(params(6, 5, 7)));
    assert!(!matches(params(6, 4, 7)), "a segment of another generation");
    assert!(!matches(params(6, 5, 8)), "another start cursor");
    assert!(!matches(params(7, 5, 7)), "another ring size");
    assert!(!matches(params(30, 5, 7)), "an area that does not fit");
    assert!(!queue::rx_area_matches(
        &q.rx_seg,
        super::RX_BASE + 8,
        params(6, 5, 7)
    ));
}

/// A connecting end's start cursor names the end: ends that differ in node, channel or
/// generation start apart, so a late setup frame that maps a channel another connection
/// holds now finds another start in its receive area. The case that made make test's
/// churn lose an echo (Documentation/af_sci.rst, Robustness): the end that gave up was
/// channel 1, generation 2; a listener's end took channel 1 and receives with its
/// client's generation, also 2 (channel 0's), and its client's start.
#[test]
fn connect_start_names_the_end() {
    let mut seen = std::collections::HashSet::new();
    for node in [0u16, 1, 2, 31, 255, 0x1fff] {
        for channel in [0u32, 1, 2, 1023, 0xffff] {
            for generation in [1u32, 2, 3, 0x1_0000, u32::MAX] {
                let start = queue::connect_start(node, channel, generation);
                assert!(
                    seen.insert(start),
                    "node {node}, channel {channel}, generation {generation}"
                );
                assert_eq!(start % 8, 0, "records lie in whole words");
            }
        }
    }
    let gave_up = queue::connect_start(0, 1, 2);
    let listener_end = QueuePair::new(6, 2, queue::connect_start(0, 0, 2), 16);
    let late = queue::QueueParams {
        geometry: listener_end.params.geometry,
        generation: 2,
        start: gave_up,
    };
    assert!(queue::rx_area_matches(
        &listener_end.rx_seg,
        super::RX_BASE,
        listener_end.params
    ));
    assert!(
        !queue::rx_area_matches(&listener_end.rx_seg, super::RX_BASE, late),
        "the late request's end must not take the listener end's ring for its own"
    );
}

/// A peer node declared dead never stores its abort flag: the consumer latches it
/// locally. Reads then end (no sleeping), queued data is still readable, and the
/// latch survives the peer's (stale) flag word.
#[test]
fn latched_peer_abort_ends_the_wait() {
    let mut q = QueuePair::new(8, 9, 1000, 64);
    let spans = q.producer.writable().unwrap().truncate(10);
    q.rx_seg.copy_into_spans(spans, &[7u8; 10]);
    q.producer.commit(10).unwrap();
    assert!(!q.consumer.peer().abort);
    q.consumer.latch_peer_abort();
    assert!(q.consumer.peer().abort);
    assert_eq!(
        q.consumer.refresh().unwrap(),
        10,
        "queued bytes stay readable"
    );
    q.consumer.consume_and_update(10).unwrap();
    let d = q.consumer.prepare_wait().unwrap();
    assert!(!d.sleep, "a reader of a dead peer must not sleep");
    q.consumer.finish_wait();
    assert!(q.consumer.peer().abort);
}

/// A doorbell lost on its way: the side that posted a wait request can tell, from
/// loads only, that the peer moved a cursor or a flag it was not woken for
/// (`wake_due`), so the kernel's sweep wakes it; nothing is due without a request, or
/// once the side has looked.
#[test]
fn a_lost_doorbell_is_seen_as_due() {
    let mut q = QueuePair::new(8, 9, 1000, 64);
    // Reader: nothing to read, a request posted, the writer's doorbell lost.
    assert!(q.consumer.prepare_wait().unwrap().sleep);
    assert!(!q.consumer.wake_due(), "nothing moved yet");
    let spans = q.producer.writable().unwrap().truncate(10);
    q.rx_seg.copy_into_spans(spans, &[1u8; 10]);
    assert!(q.producer.commit(10).unwrap(), "the writer owes a doorbell");
    assert!(q.consumer.wake_due(), "data arrived under a posted request");
    q.consumer.finish_wait();
    assert!(!q.consumer.wake_due(), "no request, nothing due");
    // It looks (as the woken reader does): nothing due until the next change.
    assert!(!q.consumer.prepare_wait().unwrap().sleep);
    assert!(!q.consumer.wake_due(), "the reader has seen these bytes");
    q.producer.set_done_writing().unwrap();
    assert!(q.consumer.wake_due(), "the writer's end of stream is due");
    q.consumer.refresh().unwrap();
    assert!(!q.consumer.wake_due());

    // Writer: a full ring, a request posted, the reader's doorbell lost.
    let mut q = QueuePair::new(6, 3, 50, 64);
    let free = q.producer.writable().unwrap().total();
    q.producer.commit(free).unwrap();
    assert!(q.producer.prepare_wait(1).unwrap().sleep);
    assert!(!q.producer.wake_due());
    q.consumer.refresh().unwrap();
    q.consumer.consume(8).unwrap();
    q.consumer.publish().unwrap();
    assert!(q.producer.wake_due(), "space freed under a posted request");
    q.producer.refresh().unwrap();
    assert!(!q.producer.wake_due(), "the writer has seen the space");
    q.consumer.set_closed();
    assert!(q.producer.wake_due(), "the reader's close is due");
}

/// A writer that publishes its last bytes and its done flag between a reader's look at
/// the empty ring and its look at the flags: the reader must read those bytes, not end
/// the stream (the kernel's `recv` once returned end of stream here; a half-closed
/// connection lost its whole request).
#[test]
fn done_flag_after_an_empty_look_is_not_the_end() {
    let mut q = QueuePair::new(8, 3, 500, 64);
    assert_eq!(
        q.consumer.refresh().unwrap(),
        0,
        "the reader finds the ring empty"
    );
    let spans = q.producer.writable().unwrap().truncate(20);
    q.rx_seg.copy_into_spans(spans, &stream(5, 0, 20));
    q.producer.commit(20).unwrap();
    q.producer.set_done_writing().unwrap();
    assert!(q.consumer.peer().done_writing, "the flag is there");
    assert_eq!(
        q.consumer.peer_when_empty().unwrap(),
        None,
        "bytes came before the flag: read them first"
    );
    let s = q.consumer.readable().unwrap();
    assert_eq!(q.rx_seg.copy_from_spans(s, 20), stream(5, 0, 20));
    q.consumer.consume_and_update(20).unwrap();
    let end = q.consumer.peer_when_empty().unwrap();
    assert!(
        end.is_some_and(|p| p.done_writing),
        "now the stream ends: {end:?}"
    );
}

/// A peek at an offset (`SO_PEEK_OFF`) waits for a byte past the bytes it skips: it
/// sleeps with bytes queued as long as none lies past them, is rung at the writer's next
/// publish, and the end of stream still ends its wait.
#[test]
fn a_peek_past_queued_bytes_waits_for_more() {
    let mut q = QueuePair::new(8, 3, 500, 64);
    let spans = q.producer.writable().unwrap().truncate(20);
    q.rx_seg.copy_into_spans(spans, &stream(6, 0, 20));
    q.producer.commit(20).unwrap();
    let d = q.consumer.prepare_wait_past(20).unwrap();
    assert!(d.sleep, "20 bytes queued, none past the 20 skipped");
    assert!(!q.consumer.prepare_wait_past(19).unwrap().sleep);
    assert_eq!(q.consumer.peer_when_none_past(19).unwrap(), None);
    assert!(q.consumer.peer_when_none_past(20).unwrap().is_some());
    assert!(q.consumer.prepare_wait_past(20).unwrap().sleep);
    let spans = q.producer.writable().unwrap().truncate(5);
    q.rx_seg.copy_into_spans(spans, &stream(6, 20, 5));
    assert!(
        q.producer.commit(5).unwrap(),
        "the writer owes the peeker a doorbell"
    );
    q.consumer.finish_wait();
    assert!(!q.consumer.prepare_wait_past(20).unwrap().sleep);
    let (_, past) = q.consumer.readable().unwrap().split_at(20);
    assert_eq!(q.rx_seg.copy_from_spans(past, 5), stream(6, 20, 5));
    q.consumer.finish_wait();
    q.producer.set_done_writing().unwrap();
    assert!(
        !q.consumer.prepare_wait_past(25).unwrap().sleep,
        "the end wakes it"
    );
    assert!(q
        .consumer
        .peer_when_none_past(25)
        .unwrap()
        .is_some_and(|p| p.done_writing));
}

/// `read_sock` lends a kernel reader the ring's own pages; a reader that keeps them after
/// its actor returned holds the writer off them: the consumer cursor is announced up to
/// the hold and no further (by `publish`, the wait and the close alike) until it is let go.
#[test]
fn a_hold_keeps_the_writer_off_lent_bytes() {
    let mut q = QueuePair::new(6, 1, u64::MAX - 10, 1);
    let s = q.producer.writable().unwrap();
    q.rx_seg.copy_into_spans(s, &stream(5, 0, 40));
    q.producer.commit(40).unwrap();
    assert_eq!(q.consumer.readable().unwrap().total(), 40);
    // 8 read and announced as usual; then 20 lent and kept, and 12 read behind them.
    q.consumer.consume_and_update(8).unwrap();
    let lent_at = q.consumer.consumed_cursor();
    q.consumer.hold_from(lent_at).unwrap();
    assert!(q.consumer.holding());
    q.consumer.consume_and_update(20).unwrap();
    q.consumer.consume_and_update(12).unwrap();
    assert_eq!(q.consumer.available(), 0);
    // A later hold does not move the earlier one.
    let later = q.consumer.consumed_cursor();
    q.consumer.hold_from(later).unwrap();
    q.consumer.publish().unwrap();
    q.consumer.prepare_wait().unwrap();
    q.consumer.finish_wait();
    q.producer.refresh().unwrap();
    assert_eq!(
        q.producer.free(),
        64 - 32,
        "only the 8 bytes before the hold are free"
    );
    // The writer fills what it may; none of it lands on the lent bytes.
    let s = q.producer.writable().unwrap();
    assert_eq!(s.total(), 32);
    q.rx_seg.copy_into_spans(s, &stream(5, 40, 32));
    q.producer.commit(32).unwrap();
    assert_eq!(q.consumer.readable().unwrap().total(), 32);
    // Let go: the cursor goes all the way.
    q.consumer.release_hold();
    assert!(!q.consumer.holding());
    q.consumer.publish().unwrap();
    q.producer.refresh().unwrap();
    assert_eq!(q.producer.free(), 64 - 32);
    assert_eq!(
        q.rx_seg.copy_from_spans(q.consumer.readable().unwrap(), 32),
        stream(5, 40, 32)
    );
    // A hold past what the writer published is refused.
    let past = q.consumer.consumed_cursor().wrapping_add(33);
    assert_eq!(q.consumer.hold_from(past), Err(ProtocolError::Overrun));
}

/// A reader that closes while it holds lent bytes announces its cursor only up to the
/// hold: a writer that has not seen the close yet may still write.
#[test]
fn a_close_does_not_announce_past_a_hold() {
    let mut q = QueuePair::new(6, 1, 0, 64);
    let s = q.producer.writable().unwrap();
    q.rx_seg.copy_into_spans(s, &stream(6, 0, 30));
    q.producer.commit(30).unwrap();
    q.consumer.readable().unwrap();
    q.consumer.consume(10).unwrap();
    let at = q.consumer.consumed_cursor();
    q.consumer.hold_from(at).unwrap();
    q.consumer.consume(20).unwrap();
    q.consumer.set_closed();
    q.producer.refresh().unwrap();
    assert_eq!(q.producer.free(), 64 - 20);
}
