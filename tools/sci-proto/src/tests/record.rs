//! Datagram records (`record.rs`) over a real queue: whole records or none, exact
//! payloads and boundaries whatever the ring size and start cursor, drops when full,
//! peeks, and hostile headers.

use proptest::prelude::*;

use super::{stream, QueuePair, TestConsumer, TestProducer, TestSegment, CREDIT_BASE, RX_BASE};
use crate::proto::error::ProtocolError;
use crate::proto::queue::{default_publish_threshold, Look, PeerWriterState};
use crate::proto::record::{self, Record, HEADER_LEN, MAX_PAYLOAD};
use crate::proto::ring::{Span, Spans, CREDIT_BUDGET, RX_PROD_CURSOR, RX_PROD_DROPS};
use crate::proto::segment::Segment;

/// Puts one record of `data` whole, or returns false (no room, or over the reader's
/// budget: dropped and counted), as `Conn::send_datagram` does.
fn put(p: &mut TestProducer, seg: &TestSegment, data: &[u8]) -> bool {
    let size = record::size(data.len()).unwrap();
    let Some(spans) = p.reserve_within_budget(size).unwrap() else {
        p.count_drop();
        return false;
    };
    let at = record::place(spans, data.len());
    assert_eq!(at.header.total(), HEADER_LEN);
    assert_eq!(at.payload.total(), data.len());
    let pad = record::padding(data.len());
    // Where records lie 8-aligned in the segment (a start cursor that is a multiple of
    // 8), the padding always shares a word with the payload's tail, and the writer
    // stores that word as zeros before the payload; elsewhere it copies the padding.
    let aligned = at.header.first.off % 8 == 0;
    assert_eq!(at.padding_word().is_some(), aligned && !pad.is_empty());
    if let Some(off) = at.padding_word() {
        seg.store_u64(off, 0);
    }
    seg.copy_into_spans(at.header, &record::header(data.len(), 0).unwrap());
    seg.copy_into_spans(at.payload, data);
    if at.padding_word().is_none() {
        seg.copy_into_spans(at.padding, pad);
    }
    assert_eq!(
        at.header.total() + at.payload.total() + at.padding.total(),
        size
    );
    p.commit(size).unwrap();
    true
}

/// Takes (or with `peek`, looks at) the next record: its first `max` bytes and its
/// length; `None` when the queue is empty.
fn take(
    c: &mut TestConsumer,
    seg: &TestSegment,
    max: usize,
    peek: bool,
) -> Result<Option<(Vec<u8>, usize)>, ProtocolError> {
    let spans = c.readable()?;
    if spans.total() == 0 {
        return Ok(None);
    }
    let h = seg.copy_from_spans(spans, HEADER_LEN);
    let rec: Record = record::parse(h.try_into().unwrap(), spans.total() as u64)?;
    let at = record::place(spans, rec.payload);
    let data = seg.copy_from_spans(at.payload, rec.payload.min(max));
    // What the ring held there before (an older record's bytes) is gone: zeros.
    let pad = seg.copy_from_spans(at.padding, at.padding.total());
    assert_eq!(pad, record::padding(rec.payload));
    if !peek {
        c.consume_and_update(rec.size)?;
        if c.available() == 0 {
            // Drained: announced at once, as the kernel's reader does (`conn/transfer.rs`).
            c.publish()?;
        }
    }
    Ok(Some((data, rec.payload)))
}

#[test]
fn sizes_and_headers() {
    assert_eq!(record::size(0), Some(8));
    assert_eq!(record::size(1), Some(16));
    assert_eq!(record::size(8), Some(16));
    assert_eq!(record::size(9), Some(24));
    assert_eq!(
        record::size(MAX_PAYLOAD),
        Some(8 + MAX_PAYLOAD.next_multiple_of(8))
    );
    assert_eq!(record::size(MAX_PAYLOAD + 1), None);
    assert_eq!(record::header(MAX_PAYLOAD + 1, 0), None);
    for (n, tos) in [
        (0, 0),
        (1, 2),
        (7, 1),
        (8, 3),
        (9, 0xb8),
        (1500, 0xff),
        (MAX_PAYLOAD, 2),
    ] {
        let h = record::header(n, tos).unwrap();
        let size = record::size(n).unwrap();
        assert_eq!((n + record::padding(n).len()) % 8, 0);
        assert_eq!(
            record::parse(h, size as u64),
            Ok(Record {
                payload: n,
                tos,
                size
            })
        );
        assert_eq!(
            record::parse(h, size as u64 - 1),
            Err(ProtocolError::BadRecord),
            "a record longer than what was published"
        );
    }
}

#[test]
fn hostile_headers_are_protocol_errors() {
    let mut h = record::header(100, 2).unwrap();
    h[4] ^= 1;
    assert_eq!(
        record::parse(h, 1 << 20),
        Err(ProtocolError::BadRecord),
        "complement"
    );
    // The length and traffic class of a good header, with its reserved byte set (and the
    // complement to match): a writer of another version, or garbage.
    let mut h = record::header(100, 2).unwrap();
    h[3] = 1;
    h[7] = !1;
    assert_eq!(
        record::parse(h, 1 << 20),
        Err(ProtocolError::BadRecord),
        "reserved byte"
    );
    let len = (MAX_PAYLOAD + 1) as u32;
    let mut h = [0u8; 8];
    h[..4].copy_from_slice(&len.to_le_bytes());
    h[4..].copy_from_slice(&(!len).to_le_bytes());
    assert_eq!(
        record::parse(h, u64::MAX),
        Err(ProtocolError::BadRecord),
        "too long"
    );
    assert_eq!(
        record::parse([0; 8], 8),
        Err(ProtocolError::BadRecord),
        "zeroed memory"
    );
}

#[test]
fn peek_leaves_the_record_and_truncation_discards_the_rest() {
    let mut q = QueuePair::new(10, 3, 0x1003, 0);
    let data = stream(1, 0, 300);
    assert!(put(&mut q.producer, &q.rx_seg, &data));
    assert!(put(&mut q.producer, &q.rx_seg, b"second"));
    let peeked = take(&mut q.consumer, &q.rx_seg, 10, true).unwrap().unwrap();
    assert_eq!(peeked, (data[..10].to_vec(), 300));
    // A short buffer gets the start; the rest of the datagram is gone.
    let got = take(&mut q.consumer, &q.rx_seg, 50, false)
        .unwrap()
        .unwrap();
    assert_eq!(got, (data[..50].to_vec(), 300));
    let got = take(&mut q.consumer, &q.rx_seg, 100, false)
        .unwrap()
        .unwrap();
    assert_eq!(got, (b"second".to_vec(), 6));
    assert_eq!(take(&mut q.consumer, &q.rx_seg, 100, false).unwrap(), None);
}

#[test]
fn a_full_queue_drops_whole_records() {
    // 1 KiB ring: records of 200 bytes (208 in the queue) fit four times.
    let mut q = QueuePair::new(10, 1, 5, 0);
    let mut sent = Vec::new();
    let mut dropped = 0;
    for i in 0..10u64 {
        let d = stream(i, 0, 200);
        if put(&mut q.producer, &q.rx_seg, &d) {
            sent.push(d);
        } else {
            dropped += 1;
        }
    }
    assert_eq!((sent.len(), dropped), (4, 6));
    for d in &sent {
        assert_eq!(
            take(&mut q.consumer, &q.rx_seg, 4096, false).unwrap(),
            Some((d.clone(), 200))
        );
    }
    // Room again once read.
    assert!(put(&mut q.producer, &q.rx_seg, &stream(99, 0, 200)));
}

#[test]
fn drops_reach_the_reader_once_it_read_what_came_before() {
    // 1 KiB ring: four records of 200 bytes fit, six are dropped.
    let mut q = QueuePair::new(10, 4, 77, 0);
    let sent = (0..10u64)
        .filter(|&i| put(&mut q.producer, &q.rx_seg, &stream(i, 0, 200)))
        .count();
    assert_eq!(sent, 4);
    for i in 0..4 {
        // Records wait that came before the drops: none is reported yet.
        assert_eq!(q.consumer.drops_when_empty().unwrap(), 0, "record {i}");
        assert!(take(&mut q.consumer, &q.rx_seg, 4096, false)
            .unwrap()
            .is_some());
    }
    assert_eq!(q.consumer.drops_when_empty().unwrap(), 6);
    assert_eq!(q.consumer.drops_when_empty().unwrap(), 0, "taken once");
    // One more record, then two drops behind it: they wait for it to be read.
    assert!(put(&mut q.producer, &q.rx_seg, &stream(20, 0, 900)));
    assert!(!put(&mut q.producer, &q.rx_seg, &stream(21, 0, 900)));
    assert!(!put(&mut q.producer, &q.rx_seg, &stream(22, 0, 900)));
    assert_eq!(q.consumer.drops_when_empty().unwrap(), 0);
    assert!(take(&mut q.consumer, &q.rx_seg, 4096, true)
        .unwrap()
        .is_some());
    assert_eq!(q.consumer.drops_when_empty().unwrap(), 0, "only peeked");
    assert!(take(&mut q.consumer, &q.rx_seg, 4096, false)
        .unwrap()
        .is_some());
    assert_eq!(q.consumer.drops_when_empty().unwrap(), 2);
}

/// Takes the next record as the kernel's reader does (`Conn::recv_datagram`): one
/// [`look`](crate::proto::queue::Consumer::look), which on an empty ring also takes the
/// drops and the writer's state. `Ok(Err((drops, peer)))` when empty.
fn take_or_look(
    c: &mut TestConsumer,
    seg: &TestSegment,
) -> Result<Result<Vec<u8>, (u32, PeerWriterState)>, ProtocolError> {
    let spans = match c.look()? {
        Look::Readable(spans) => spans,
        Look::Empty { drops, peer } => return Ok(Err((drops, peer))),
    };
    assert!(spans.total() > 0);
    let h = seg.copy_from_spans(spans, HEADER_LEN);
    let rec: Record = record::parse(h.try_into().unwrap(), spans.total() as u64)?;
    let data = seg.copy_from_spans(record::place(spans, rec.payload).payload, rec.payload);
    c.consume_and_update(rec.size)?;
    if c.available() == 0 {
        c.publish()?;
    }
    Ok(Ok(data))
}

#[test]
fn one_look_finds_records_or_the_drops_and_the_end() {
    // As `drops_reach_the_reader_once_it_read_what_came_before`, read by `look`.
    let mut q = QueuePair::new(10, 4, 77, 0);
    let sent: Vec<_> = (0..10u64)
        .map(|i| stream(i, 0, 200))
        .filter(|d| put(&mut q.producer, &q.rx_seg, d))
        .collect();
    assert_eq!(sent.len(), 4);
    for d in &sent {
        assert_eq!(
            take_or_look(&mut q.consumer, &q.rx_seg).unwrap(),
            Ok(d.clone())
        );
    }
    let open = PeerWriterState::default();
    assert_eq!(
        take_or_look(&mut q.consumer, &q.rx_seg).unwrap(),
        Err((6, open))
    );
    assert_eq!(
        take_or_look(&mut q.consumer, &q.rx_seg).unwrap(),
        Err((0, open)),
        "taken once"
    );
    // A record, two drops behind it, then the writer is done: the record first, then
    // the drops and the end together.
    let last = stream(20, 0, 900);
    assert!(put(&mut q.producer, &q.rx_seg, &last));
    assert!(!put(&mut q.producer, &q.rx_seg, &stream(21, 0, 900)));
    assert!(!put(&mut q.producer, &q.rx_seg, &stream(22, 0, 900)));
    q.producer.set_done_writing().unwrap();
    assert_eq!(take_or_look(&mut q.consumer, &q.rx_seg).unwrap(), Ok(last));
    let (drops, peer) = take_or_look(&mut q.consumer, &q.rx_seg)
        .unwrap()
        .unwrap_err();
    assert_eq!(drops, 2);
    assert!(peer.done_writing, "{peer:?}");
}

#[test]
fn a_look_reads_the_records_it_saw_before_the_writers_words_again() {
    // A look that saw records reads them without loading the producer's cursor again:
    // a cursor the writer broke after they were published shows only once they are read.
    let mut q = QueuePair::new(10, 4, 77, 0);
    let sent: Vec<_> = (0..3u64).map(|i| stream(i, 0, 200)).collect();
    for d in &sent {
        assert!(put(&mut q.producer, &q.rx_seg, d));
    }
    assert_eq!(
        take_or_look(&mut q.consumer, &q.rx_seg).unwrap(),
        Ok(sent[0].clone())
    );
    q.rx_seg.poke(RX_BASE + RX_PROD_CURSOR, u64::MAX);
    for d in &sent[1..] {
        assert_eq!(
            take_or_look(&mut q.consumer, &q.rx_seg).unwrap(),
            Ok(d.clone())
        );
    }
    assert!(
        take_or_look(&mut q.consumer, &q.rx_seg).is_err(),
        "then the broken cursor"
    );
    assert!(q.consumer.error().is_some());
}

#[test]
fn a_wait_takes_the_drops_only_from_an_empty_ring() {
    let mut q = QueuePair::new(10, 4, 77, 0);
    let sent = (0..6u64)
        .filter(|&i| put(&mut q.producer, &q.rx_seg, &stream(i, 0, 200)))
        .count();
    assert_eq!(sent, 4);
    let (d, drops) = q.consumer.prepare_datagram_wait().unwrap();
    assert!(!d.sleep);
    assert_eq!(drops, 0, "records wait that came before the drops");
    q.consumer.finish_wait();
    while take(&mut q.consumer, &q.rx_seg, 4096, false)
        .unwrap()
        .is_some()
    {}
    let (d, drops) = q.consumer.prepare_datagram_wait().unwrap();
    assert!(d.sleep);
    assert_eq!(drops, 2);
    assert!(!q.consumer.wake_due(), "nothing came since");
    assert!(put(&mut q.producer, &q.rx_seg, &stream(9, 0, 200)));
    assert!(
        q.consumer.wake_due(),
        "the wait request asks for the doorbell"
    );
    q.consumer.finish_wait();
    let (d, drops) = q.consumer.prepare_datagram_wait().unwrap();
    assert!(!d.sleep);
    assert_eq!(drops, 0, "taken once");
}

#[test]
fn a_drop_count_of_another_connection_is_no_drop() {
    let mut q = QueuePair::new(10, 4, 77, 0);
    // A stale or forged word: another generation.
    q.rx_seg.poke(RX_BASE + RX_PROD_DROPS, 5 << 32 | 1000);
    assert_eq!(q.consumer.drops_when_empty().unwrap(), 0);
    // The writer's own count wraps around u32 and is still taken as a difference.
    q.rx_seg
        .poke(RX_BASE + RX_PROD_DROPS, 4 << 32 | 0xffff_fff0);
    assert_eq!(q.consumer.drops_when_empty().unwrap(), 0xffff_fff0);
    q.rx_seg.poke(RX_BASE + RX_PROD_DROPS, 4 << 32 | 3);
    assert_eq!(q.consumer.drops_when_empty().unwrap(), 0x13);
}

#[test]
fn a_budget_bounds_what_waits() {
    // 4 KiB ring, the reader lets 1000 bytes wait: records of 200 bytes (208 in the
    // ring) are taken while what waits is within the budget (0, 208, .., 832): five.
    let mut q = QueuePair::new(12, 2, 3, default_publish_threshold_of(12));
    q.consumer.set_budget(1000);
    let sent = (0..10u64)
        .filter(|&i| put(&mut q.producer, &q.rx_seg, &stream(i, 0, 200)))
        .count();
    assert_eq!(sent, 5);
    // One read publishes nothing (a quarter of the budget is 250 bytes): still full.
    assert!(take(&mut q.consumer, &q.rx_seg, 4096, false)
        .unwrap()
        .is_some());
    assert!(!put(&mut q.producer, &q.rx_seg, &stream(30, 0, 200)));
    // Two reads publish the cursor: 624 bytes wait, room for two more (to 1040).
    assert!(take(&mut q.consumer, &q.rx_seg, 4096, false)
        .unwrap()
        .is_some());
    assert!(put(&mut q.producer, &q.rx_seg, &stream(31, 0, 200)));
    assert!(put(&mut q.producer, &q.rx_seg, &stream(32, 0, 200)));
    assert!(!put(&mut q.producer, &q.rx_seg, &stream(33, 0, 200)));
    // Read to the end: the drops, then the whole budget again.
    while take(&mut q.consumer, &q.rx_seg, 4096, false)
        .unwrap()
        .is_some()
    {}
    assert_eq!(q.consumer.drops_when_empty().unwrap(), 5 + 1 + 1);
    let sent = (0..10u64)
        .filter(|&i| put(&mut q.producer, &q.rx_seg, &stream(40 + i, 0, 200)))
        .count();
    assert_eq!(sent, 5);
    // A tiny budget still takes one; none (0) is the whole ring.
    while take(&mut q.consumer, &q.rx_seg, 4096, false)
        .unwrap()
        .is_some()
    {}
    q.consumer.set_budget(1);
    assert!(put(&mut q.producer, &q.rx_seg, &stream(50, 0, 200)));
    assert!(!put(&mut q.producer, &q.rx_seg, &stream(51, 0, 200)));
    while take(&mut q.consumer, &q.rx_seg, 4096, false)
        .unwrap()
        .is_some()
    {}
    q.consumer.set_budget(0);
    let sent = (0..30u64)
        .filter(|&i| put(&mut q.producer, &q.rx_seg, &stream(60 + i, 0, 200)))
        .count();
    assert_eq!(sent, 4096 / 208);
}

#[test]
fn a_budget_of_another_connection_is_none() {
    let mut q = QueuePair::new(12, 2, 3, 0);
    q.tx_seg.poke(CREDIT_BASE + CREDIT_BUDGET, 9 << 32 | 1);
    let sent = (0..30u64)
        .filter(|&i| put(&mut q.producer, &q.rx_seg, &stream(i, 0, 200)))
        .count();
    assert_eq!(sent, 4096 / 208);
}

#[test]
fn a_stopped_reader_takes_what_was_queued_and_nothing_after() {
    let mut q = QueuePair::new(12, 6, 11, 0);
    let before: Vec<_> = (0..3u64).map(|i| stream(i, 0, 100)).collect();
    for d in &before {
        assert!(put(&mut q.producer, &q.rx_seg, d));
    }
    q.consumer.stop_at_published().unwrap();
    // The writer goes on (it has not heard yet): none of it is read.
    assert!(put(&mut q.producer, &q.rx_seg, &stream(7, 0, 100)));
    for d in &before {
        assert_eq!(
            take(&mut q.consumer, &q.rx_seg, 4096, false).unwrap(),
            Some((d.clone(), 100))
        );
    }
    assert_eq!(take(&mut q.consumer, &q.rx_seg, 4096, false).unwrap(), None);
    assert_eq!(q.consumer.drops_when_empty().unwrap(), 0);
}

/// The default consumer-update threshold of a `1 << log2` ring.
fn default_publish_threshold_of(log2: u32) -> u64 {
    default_publish_threshold(crate::proto::ring::RingGeometry::from_log2(log2).unwrap())
}

/// The parts of a placement as the ranges they cover, in order (empty ones left out).
fn parts(at: record::Placement) -> [Vec<(usize, usize)>; 3] {
    [at.header, at.payload, at.padding].map(|s| s.iter().map(|p| (p.off, p.len)).collect())
}

proptest! {
    /// `place`'s shortcut for a record in one piece of the ring gives the parts that
    /// cutting the spans gives, for a writer's reservation and a reader's longer spans.
    #[test]
    fn place_in_one_piece_is_place_cut(
        off in 0usize..1 << 20,
        extra in 0usize..64,
        second in (0usize..1 << 20, 0usize..4096),
        payload in prop_oneof![0usize..3000, Just(MAX_PAYLOAD)],
        short in 0usize..16,
    ) {
        let size = record::size(payload).unwrap();
        // One piece as long as the record or longer; and one too short, with the rest
        // wrapped.
        for first_len in [size + extra, size.saturating_sub(short + 1)] {
            let spans = Spans {
                first: Span { off, len: first_len },
                second: Span { off: second.0, len: second.1 },
            };
            prop_assert_eq!(parts(record::place(spans, payload)), parts(record::place_cut(spans, payload)));
        }
    }

    /// Any sequence of datagrams through any ring from any start cursor arrives as the
    /// same datagrams, in order, none torn; what found no room is dropped whole.
    #[test]
    fn records_keep_their_boundaries(
        log2 in 6u32..13,
        start in any::<u64>(),
        lens in proptest::collection::vec(0usize..3000, 1..60),
        read_every in 1usize..5,
    ) {
        let mut q = QueuePair::new(log2, 9, start, 0);
        let mut expect = std::collections::VecDeque::new();
        for (i, &len) in lens.iter().enumerate() {
            let d = stream(i as u64, start, len);
            if put(&mut q.producer, &q.rx_seg, &d) {
                expect.push_back(d);
            } else {
                prop_assert!(record::size(len).unwrap() as u64 > q.producer.free());
            }
            if i % read_every == 0 {
                if let Some((got, n)) = take(&mut q.consumer, &q.rx_seg, usize::MAX, false).unwrap() {
                    let want = expect.pop_front().unwrap();
                    prop_assert_eq!(n, want.len());
                    prop_assert_eq!(got, want);
                }
            }
        }
        while let Some((got, _)) = take(&mut q.consumer, &q.rx_seg, usize::MAX, false).unwrap() {
            prop_assert_eq!(got, expect.pop_front().unwrap());
        }
        prop_assert!(expect.is_empty());
    }
}
