//! Ring geometry, spans, cursor validation and flag words.

use proptest::prelude::*;

use crate::proto::cursor::{
    check_consumer, check_producer, FlagWord, NotifyLatch, F_ABORT, F_WANTS_NOTIFY, PRODUCER_BITS,
    TOKEN_MASK,
};
use crate::proto::error::ProtocolError;
use crate::proto::ring::{
    self, RingGeometry, Span, Spans, CACHE_LINE, CREDIT_CONS_CURSOR, CREDIT_CONS_FLAGS,
    MAX_RING_LOG2, MIN_RING_LOG2, RX_DATA, RX_GENERATION, RX_MAGIC, RX_PROD_CURSOR, RX_PROD_FLAGS,
    RX_RING_SIZE, RX_START, RX_VERSION,
};

#[test]
fn layout_lines_and_alignment() {
    // Receiver-written header line, sender-written producer line, data: each
    // on its own cache line(s), every u64 field 8-aligned.
    for off in [
        RX_RING_SIZE,
        RX_GENERATION,
        RX_START,
        RX_PROD_CURSOR,
        RX_PROD_FLAGS,
    ] {
        assert_eq!(off % 8, 0);
    }
    assert_eq!(RX_MAGIC % 4, 0);
    assert_eq!(RX_VERSION % 4, 0);
    for off in [RX_MAGIC, RX_VERSION, RX_RING_SIZE, RX_GENERATION, RX_START] {
        assert_eq!(off / CACHE_LINE, 0, "receiver's fields on line 0");
    }
    for off in [RX_PROD_CURSOR, RX_PROD_FLAGS] {
        assert_eq!(off / CACHE_LINE, 1, "sender's fields on line 1");
    }
    assert_eq!(RX_DATA % 128, 0);
    const _: () = assert!(RX_DATA >= 2 * CACHE_LINE);
    for off in [CREDIT_CONS_CURSOR, CREDIT_CONS_FLAGS] {
        assert_eq!(off % 8, 0);
        assert_eq!(off / CACHE_LINE, 0);
    }
}

#[test]
fn geometry_bounds() {
    assert_eq!(
        RingGeometry::from_log2(MIN_RING_LOG2 - 1),
        Err(ProtocolError::BadRingSize)
    );
    assert_eq!(
        RingGeometry::from_log2(MAX_RING_LOG2 + 1),
        Err(ProtocolError::BadRingSize)
    );
    assert_eq!(RingGeometry::from_size(0), Err(ProtocolError::BadRingSize));
    assert_eq!(RingGeometry::from_size(96), Err(ProtocolError::BadRingSize));
    assert_eq!(
        RingGeometry::from_size(u64::MAX),
        Err(ProtocolError::BadRingSize)
    );
    assert_eq!(
        RingGeometry::from_size(1 << 63),
        Err(ProtocolError::BadRingSize)
    );
    let g = RingGeometry::from_size(4096).unwrap();
    assert_eq!(g.log2(), 12);
    assert_eq!(g.size(), 4096);
    assert_eq!(g.index(4096 * 7 + 5), 5);
    assert_eq!(g.index(u64::MAX), 4095);
}

#[test]
fn placement_checks() {
    let g = RingGeometry::from_log2(6).unwrap();
    let need = g.rx_area_size();
    assert!(ring::check_rx_area(need, 0, g).is_ok());
    assert!(ring::check_rx_area(need - 1, 0, g).is_err());
    assert!(ring::check_rx_area(need + 64, 64, g).is_ok());
    assert!(ring::check_rx_area(need + 64, 8, g).is_err(), "misaligned");
    assert!(ring::check_rx_area(usize::MAX, usize::MAX - 63, g).is_err());
    assert!(ring::check_credit_area(64, 0).is_ok());
    assert!(ring::check_credit_area(63, 0).is_err());
    assert!(ring::check_credit_area(usize::MAX, usize::MAX & !63).is_err());
}

#[test]
fn spans_examples() {
    let g = RingGeometry::from_log2(6).unwrap(); // 64 bytes
    let s = g.spans(1000, 0, 64);
    assert_eq!(s.first, Span { off: 1000, len: 64 });
    assert_eq!(s.second.len, 0);
    let s = g.spans(1000, 60, 10);
    assert_eq!(s.first, Span { off: 1060, len: 4 });
    assert_eq!(s.second, Span { off: 1000, len: 6 });
    let s = g.spans(1000, 64 * 3, 0);
    assert!(s.is_empty());
    // Clamped to the ring size.
    assert_eq!(g.spans(0, 5, u64::MAX).total(), 64);
    let t = g.spans(1000, 60, 10).truncate(5);
    assert_eq!(t.first.len, 4);
    assert_eq!(t.second.len, 1);
    assert_eq!(t.iter().count(), 2);
    assert_eq!(Spans::default().iter().count(), 0);
}

proptest! {
    #[test]
    fn spans_cover_exactly(log2 in MIN_RING_LOG2..=12u32, cursor in any::<u64>(), len in 0u64..=5000, base in 0usize..4096) {
        let g = RingGeometry::from_log2(log2).unwrap();
        let s = g.spans(base, cursor, len);
        let want = len.min(g.size()) as usize;
        prop_assert_eq!(s.total(), want);
        prop_assert_eq!(s.first.off, base + g.index(cursor));
        prop_assert!(s.first.off + s.first.len <= base + g.size_usize());
        if s.second.len != 0 {
            prop_assert_eq!(s.first.off + s.first.len, base + g.size_usize());
            prop_assert_eq!(s.second.off, base);
            prop_assert!(s.second.len <= g.index(cursor));
        }
        let cut = (len as usize) / 2;
        prop_assert_eq!(s.truncate(cut).total(), cut.min(want));
    }

    #[test]
    fn producer_check_matches_model(cons in any::<u64>(), seen_ahead in 0u64..=256, delta in -600i64..600, log2 in 6u32..=8) {
        let size = 1u64 << log2;
        let seen_ahead = seen_ahead.min(size);
        let prod_seen = cons.wrapping_add(seen_ahead);
        let prod = prod_seen.wrapping_add(delta as u64);
        let r = check_producer(cons, prod_seen, prod, size);
        let valid = delta >= 0 && seen_ahead + delta as u64 <= size;
        if valid {
            prop_assert_eq!(r, Ok(seen_ahead + delta as u64));
        } else {
            prop_assert!(r.is_err());
            if delta < 0 {
                prop_assert_eq!(r, Err(ProtocolError::CursorBackwards));
            } else {
                prop_assert_eq!(r, Err(ProtocolError::CursorBeyondCapacity));
            }
        }
    }

    #[test]
    fn consumer_check_matches_model(seen in any::<u64>(), inflight in 0u64..=4096, delta in -5000i64..5000) {
        let published = seen.wrapping_add(inflight);
        let cons = seen.wrapping_add(delta as u64);
        let r = check_consumer(seen, cons, published);
        if delta >= 0 && delta as u64 <= inflight {
            prop_assert_eq!(r, Ok(inflight - delta as u64));
        } else if delta < 0 {
            prop_assert_eq!(r, Err(ProtocolError::CursorBackwards));
        } else {
            prop_assert_eq!(r, Err(ProtocolError::CursorBeyondCapacity));
        }
    }

    #[test]
    fn flag_word_roundtrip(generation in any::<u32>(), token in any::<u32>(), bits in any::<u8>()) {
        let w = FlagWord { generation, token: token & TOKEN_MASK, bits };
        prop_assert_eq!(FlagWord::unpack(w.pack()), w);
        let f = FlagWord::filtered(w.pack(), generation, PRODUCER_BITS);
        prop_assert_eq!(f.bits, bits & PRODUCER_BITS);
        let other = FlagWord::filtered(w.pack(), generation.wrapping_add(1), PRODUCER_BITS);
        prop_assert_eq!(other.bits, 0);
    }
}

#[test]
fn notify_latch_once_per_request() {
    let mut l = NotifyLatch::default();
    let req = |token, bits| FlagWord {
        generation: 1,
        token,
        bits,
    };
    assert!(!l.check(req(0, 0)));
    assert!(l.check(req(1, F_WANTS_NOTIFY)));
    assert!(
        !l.check(req(1, F_WANTS_NOTIFY)),
        "same request: one doorbell"
    );
    assert!(l.check(req(2, F_WANTS_NOTIFY)), "new request");
    assert!(!l.check(req(2, F_ABORT)), "withdrawn");
    assert!(
        l.check(req(2, F_WANTS_NOTIFY)),
        "re-posted after a withdrawal seen: answer again"
    );
}
