//! A hostile peer: arbitrary header contents (cursors, flags, sizes,
//! generations) written between the honest side's calls. Every accessor call
//! stays inside the segment (the test segment asserts it), every call returns
//! a value or an error, never panics, and does a bounded amount of work.

use std::sync::atomic::Ordering;

use proptest::prelude::*;

use super::{assert_in_ring, QueuePair, TestSegment, CREDIT_BASE, RX_BASE};
use crate::proto::cursor::{FlagWord, F_ABORT, F_CLOSED, F_DONE_WRITING, F_WANTS_NOTIFY};
use crate::proto::error::ProtocolError;
use crate::proto::frame::{QueueOffer, FRAME_WORDS};
use crate::proto::mailbox::{self, MailboxGeometry, MailboxRx, MailboxTx};
use crate::proto::queue;
use crate::proto::ring::{
    RingGeometry, CREDIT_CONS_CURSOR, CREDIT_CONS_FLAGS, RX_PROD_CURSOR, RX_PROD_FLAGS,
};
use crate::proto::state::{self, Local, Peer};

/// Where the hostile peer writes.
#[derive(Clone, Debug)]
enum Target {
    /// A word of the receive area header (offset 0..0x80, 8-aligned).
    RxHeader(usize),
    /// The producer cursor.
    ProdCursor,
    /// The producer flag word.
    ProdFlags,
    /// The consumer cursor (in the sender's credit area).
    ConsCursor,
    /// The consumer flag word.
    ConsFlags,
}

/// What it writes.
#[derive(Clone, Debug)]
enum Value {
    /// Anything.
    Raw(u64),
    /// Relative to the honest reader's cursor.
    NearConsumed(i64),
    /// Relative to the honest writer's published cursor.
    NearPublished(i64),
    /// A flag word with the right or a wrong generation.
    Flags {
        right_gen: bool,
        generation: u32,
        token: u32,
        bits: u8,
    },
}

#[derive(Clone, Debug)]
enum Step {
    Poke(Target, Value),
    Read(usize),
    Write(usize),
    Inline(usize),
    ReaderWait,
    WriterWait(u64),
    Finish,
    ReaderPublish,
    Peer,
    Eof,
    SetFlags(u8),
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        1 => (0usize..16).prop_map(|i| Target::RxHeader(i * 8)),
        3 => Just(Target::ProdCursor),
        2 => Just(Target::ProdFlags),
        3 => Just(Target::ConsCursor),
        2 => Just(Target::ConsFlags),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        1 => any::<u64>().prop_map(Value::Raw),
        1 => prop_oneof![Just(0u64), Just(u64::MAX), Just(1 << 63), Just(u64::MAX / 2)].prop_map(Value::Raw),
        3 => (-1200i64..1200).prop_map(Value::NearConsumed),
        3 => (-1200i64..1200).prop_map(Value::NearPublished),
        2 => (any::<bool>(), any::<u32>(), any::<u32>(), any::<u8>()).prop_map(
            |(right_gen, generation, token, bits)| Value::Flags { right_gen, generation, token, bits }
        ),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (target(), value()).prop_map(|(t, v)| Step::Poke(t, v)),
        3 => (0usize..1200).prop_map(Step::Read),
        3 => (0usize..1200).prop_map(Step::Write),
        1 => (0usize..300).prop_map(Step::Inline),
        1 => Just(Step::ReaderWait),
        1 => (0u64..2000).prop_map(Step::WriterWait),
        1 => Just(Step::Finish),
        1 => Just(Step::ReaderPublish),
        1 => Just(Step::Peer),
        1 => Just(Step::Eof),
        1 => any::<u8>().prop_map(Step::SetFlags),
    ]
}

/// Accessor calls one API call may make at most (no call loops).
const MAX_ACCESSES_PER_CALL: usize = 16;

/// Runs `f` and checks it stayed within the access budget on both segments.
fn bounded<T>(rs: &TestSegment, ts: &TestSegment, f: impl FnOnce() -> T) -> T {
    let before = rs.accesses.load(Ordering::Relaxed) + ts.accesses.load(Ordering::Relaxed);
    let r = f();
    let after = rs.accesses.load(Ordering::Relaxed) + ts.accesses.load(Ordering::Relaxed);
    assert!(
        after - before <= MAX_ACCESSES_PER_CALL,
        "one call made {} accesses",
        after - before
    );
    r
}

/// A result is fine if it is a value, or an error that the endpoint latched
/// (peer-caused), or an overrun (caller side, not latched).
fn check_result<T>(r: &Result<T, ProtocolError>, latched: Option<ProtocolError>) {
    if let Err(e) = r {
        if *e != ProtocolError::Overrun {
            assert_eq!(latched, Some(*e), "a peer-caused error is latched");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 768, ..ProptestConfig::default() })]

    #[test]
    fn hostile_headers_never_escape(
        log2 in 6u32..=10,
        generation in any::<u32>(),
        start in any::<u64>(),
        threshold in 0u64..2000,
        steps in proptest::collection::vec(step(), 1..120),
    ) {
        let mut q = QueuePair::new(log2, generation, start, threshold);
        let (rs, ts) = (q.rx_seg.clone(), q.tx_seg.clone());
        let geom = q.params.geometry;
        let ring = geom.size();
        for s in steps {
            match s {
                Step::Poke(t, v) => {
                    let val = match v {
                        Value::Raw(x) => x,
                        Value::NearConsumed(d) => q.consumer.consumed_cursor().wrapping_add(d as u64),
                        Value::NearPublished(d) => q.producer.published_cursor().wrapping_add(d as u64),
                        Value::Flags { right_gen, generation: g, token, bits } => FlagWord {
                            generation: if right_gen { generation } else { g },
                            token,
                            bits,
                        }
                        .pack(),
                    };
                    match t {
                        Target::RxHeader(off) => q.rx_seg.poke(RX_BASE + off, val),
                        Target::ProdCursor => q.rx_seg.poke(RX_BASE + RX_PROD_CURSOR, val),
                        Target::ProdFlags => q.rx_seg.poke(RX_BASE + RX_PROD_FLAGS, val),
                        Target::ConsCursor => q.tx_seg.poke(CREDIT_BASE + CREDIT_CONS_CURSOR, val),
                        Target::ConsFlags => q.tx_seg.poke(CREDIT_BASE + CREDIT_CONS_FLAGS, val),
                    }
                }
                Step::Read(n) => {
                    let r = bounded(&rs, &ts, || q.consumer.readable());
                    check_result(&r, q.consumer.error());
                    if let Ok(spans) = r {
                        assert_in_ring(spans, geom);
                        prop_assert!(spans.total() as u64 <= ring);
                        let k = n.min(spans.total());
                        let _ = q.rx_seg.copy_from_spans(spans, k);
                        let r = bounded(&rs, &ts, || q.consumer.consume_and_update(k));
                        check_result(&r, q.consumer.error());
                    }
                }
                Step::Write(n) => {
                    let r = bounded(&rs, &ts, || q.producer.writable());
                    check_result(&r, q.producer.error());
                    if let Ok(spans) = r {
                        assert_in_ring(spans, geom);
                        let k = n.min(spans.total());
                        q.rx_seg.copy_into_spans(spans, &vec![0xa5; k]);
                        let r = bounded(&rs, &ts, || q.producer.commit(k));
                        check_result(&r, q.producer.error());
                    }
                }
                Step::Inline(n) => {
                    let r = bounded(&rs, &ts, || q.producer.reserve(n));
                    check_result(&r, q.producer.error());
                    if let Ok(Some(spans)) = r {
                        assert_in_ring(spans, geom);
                        prop_assert_eq!(spans.total(), n);
                        let r = bounded(&rs, &ts, || q.producer.commit(n));
                        check_result(&r, q.producer.error());
                    }
                }
                Step::ReaderWait => {
                    let r = bounded(&rs, &ts, || q.consumer.prepare_wait());
                    check_result(&r, q.consumer.error());
                }
                Step::WriterWait(m) => {
                    let r = bounded(&rs, &ts, || q.producer.prepare_wait(m));
                    check_result(&r, q.producer.error());
                }
                Step::Finish => {
                    bounded(&rs, &ts, || q.producer.finish_wait());
                    bounded(&rs, &ts, || q.consumer.finish_wait());
                }
                Step::ReaderPublish => {
                    let r = bounded(&rs, &ts, || q.consumer.publish());
                    check_result(&r, q.consumer.error());
                }
                Step::Peer => {
                    let w = bounded(&rs, &ts, || q.consumer.peer());
                    let r = bounded(&rs, &ts, || q.producer.peer());
                    // Latched: once seen, stays.
                    let w2 = q.consumer.peer();
                    prop_assert!(!w.done_writing || w2.done_writing);
                    prop_assert!(!w.abort || w2.abort);
                    prop_assert!(!r.closed || q.producer.peer().closed);
                    // The connection's decisions take whatever the peer said.
                    let peer = Peer {
                        done_writing: w.done_writing,
                        reader_closed: r.closed,
                        abort: w.abort,
                    };
                    let mut local = Local::default();
                    let _ = state::tcp_state(local, peer);
                    let _ = state::readiness(local, peer, true, false, false);
                    let _ = state::send_end(&mut local, peer, 0);
                    let _ = state::recv_end(local, peer, 0, 1, 1);
                }
                Step::Eof => {
                    let r = bounded(&rs, &ts, || q.consumer.at_eof());
                    check_result(&r, q.consumer.error());
                }
                Step::SetFlags(b) => {
                    if b & F_DONE_WRITING != 0 {
                        let r = bounded(&rs, &ts, || q.producer.set_done_writing());
                        check_result(&r, q.producer.error());
                    }
                    if b & F_CLOSED != 0 {
                        bounded(&rs, &ts, || q.consumer.set_closed());
                    }
                    if b & F_ABORT != 0 {
                        bounded(&rs, &ts, || q.producer.set_abort());
                    }
                    if b & F_WANTS_NOTIFY != 0 {
                        let r = bounded(&rs, &ts, || q.producer.request_notify());
                        check_result(&r, q.producer.error());
                    }
                }
            }
            // Cached views never exceed the ring either.
            prop_assert!(q.consumer.available() <= ring);
            prop_assert!(q.producer.free() <= ring);
            prop_assert!(q.producer.unconsumed() <= ring);
        }
    }

    #[test]
    fn hostile_header_at_attach(words in proptest::collection::vec(any::<u64>(), 16), log2 in 6u32..=8) {
        // A peer scribbled over the whole header before the receiver attached:
        // attaching fails cleanly or succeeds with its own geometry.
        let geometry = RingGeometry::from_log2(log2).unwrap();
        let params = queue::QueueParams { geometry, generation: 3, start: 0 };
        let rx = std::sync::Arc::new(TestSegment::new(RX_BASE + geometry.rx_area_size()));
        let tx = std::sync::Arc::new(TestSegment::new(CREDIT_BASE + 64));
        queue::init_rx_area(&*rx, RX_BASE, params).unwrap();
        for (i, w) in words.iter().enumerate() {
            if i % 3 == 0 {
                rx.poke(RX_BASE + i * 8, *w);
            }
        }
        let r = queue::Consumer::new(rx.clone(), RX_BASE, tx.clone(), CREDIT_BASE, params, 16);
        if let Ok(mut c) = r {
            let r = c.readable();
            if let Ok(spans) = r {
                assert_in_ring(spans, geometry);
            }
        }
    }

    #[test]
    fn hostile_offers_validate_inside(log2 in any::<u8>(), rx_area in any::<u64>(), credit in any::<u64>(), seg_len in 0usize..(1 << 20)) {
        let rx_area = if rx_area % 2 == 0 { rx_area % (1 << 21) } else { rx_area };
        let credit = if credit % 2 == 0 { credit % (1 << 21) } else { credit };
        let offer = QueueOffer { ring_log2: log2, rx_area, credit_area: credit, start: 0 };
        if let Some(v) = offer.validate(seg_len) {
            prop_assert!(v.rx_area % 64 == 0 && v.credit_area % 64 == 0);
            prop_assert!(v.rx_area + v.geometry.rx_area_size() <= seg_len);
            prop_assert!(v.credit_area + 64 <= seg_len);
            let (a0, a1) = (v.rx_area, v.rx_area + v.geometry.rx_area_size());
            let (b0, b1) = (v.credit_area, v.credit_area + 64);
            prop_assert!(a1 <= b0 || b1 <= a0, "areas overlap");
        }
    }

    #[test]
    fn hostile_mailbox(pokes in proptest::collection::vec((0usize..4 * FRAME_WORDS, any::<u64>(), any::<bool>()), 0..60), polls in 1usize..40) {
        // The receiver polls a mailbox whose slots a hostile sender fills with
        // anything (sometimes a plausible sequence number), and the sender
        // side reads a hostile ack: no panic, bounded work, errors reported.
        let geom = MailboxGeometry::from_log2(2).unwrap();
        let slots = TestSegment::new(geom.area_size());
        let acks = TestSegment::new(64);
        mailbox::init_slots(&slots, 0, geom).unwrap();
        mailbox::init_ack(&acks, 0).unwrap();
        let mut rx = MailboxRx::new(&slots, 0, &acks, 0, geom).unwrap();
        let mut tx = MailboxTx::new(&slots, 0, &acks, 0, geom).unwrap();
        for (i, (word, v, plausible)) in pokes.into_iter().enumerate() {
            let v = if plausible && word % FRAME_WORDS == FRAME_WORDS - 1 {
                (v & !0xffff_ffff) | (word / FRAME_WORDS + 1) as u64
            } else {
                v
            };
            slots.poke(word * 8, v);
            if i % 7 == 0 {
                acks.poke(0, v);
            }
            let before = slots.accesses.load(Ordering::Relaxed) + acks.accesses.load(Ordering::Relaxed);
            for _ in 0..polls.min(8) {
                let _ = rx.poll();
            }
            let _ = tx.send(&crate::proto::frame::Frame::close(
                crate::proto::frame::ConnId { slot: 1, generation: 1 },
                crate::proto::frame::ConnId { slot: 2, generation: 2 },
                crate::proto::frame::CloseReason::Graceful,
            ));
            let after = slots.accesses.load(Ordering::Relaxed) + acks.accesses.load(Ordering::Relaxed);
            prop_assert!(after - before <= 8 * 10 + 16);
        }
    }
}
