//! Tests of the protocol core, and the harness they share.
//!
//! [`TestSegment`] stands in for a fabric segment: `AtomicU64` words, every
//! access checked against the segment's length and alignment (a violation
//! panics, which fails the test), plus byte copies for the payload (which the
//! core leaves to its caller).

#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

mod addresses;
mod bell_wakes;
mod conn_state;
mod frame_mailbox;
mod gather;
mod hostile;
mod liveness;
mod pages;
mod queue_model;
mod record;
mod region;
mod resume;
mod ring_cursor;
mod spin;
mod stress;

use std::sync::atomic::{fence, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::proto::queue::{self, Consumer, Producer, QueueParams};
use crate::proto::region::SharedWords;
use crate::proto::ring::{RingGeometry, Span, Spans, RX_DATA};
use crate::proto::segment::Segment;

/// A shared-memory segment for tests.
pub(crate) struct TestSegment {
    /// The memory.
    words: Box<[AtomicU64]>,
    /// Length in bytes.
    len: usize,
    /// Accessor calls made (loads, stores, fences).
    pub(crate) accesses: AtomicUsize,
}

impl TestSegment {
    /// A zeroed segment of `len` bytes (rounded up to whole words internally;
    /// `len()` reports `len`).
    pub(crate) fn new(len: usize) -> Self {
        let words = (0..len.div_ceil(8)).map(|_| AtomicU64::new(0)).collect();
        TestSegment {
            words,
            len,
            accesses: AtomicUsize::new(0),
        }
    }

    /// A shared handle to a new segment.
    pub(crate) fn shared(len: usize) -> Arc<Self> {
        Arc::new(Self::new(len))
    }

    /// Checks an access and returns the word index.
    fn check(&self, off: usize, width: usize) -> usize {
        assert!(
            off % width == 0,
            "unaligned {width}-byte access at {off:#x}"
        );
        assert!(
            off.checked_add(width).is_some_and(|end| end <= self.len),
            "access at {off:#x}+{width} beyond segment of {:#x} bytes",
            self.len
        );
        self.accesses.fetch_add(1, Ordering::Relaxed);
        off / 8
    }

    /// Checks a byte range.
    fn check_range(&self, off: usize, len: usize) {
        assert!(
            off.checked_add(len).is_some_and(|end| end <= self.len),
            "copy of {len} bytes at {off:#x} beyond segment of {:#x} bytes",
            self.len
        );
    }

    /// Copies `data` into the segment at `off` (payload bytes: relaxed, the
    /// cursor store publishes them).
    pub(crate) fn copy_in(&self, off: usize, data: &[u8]) {
        self.check_range(off, data.len());
        let mut pos = 0;
        while pos < data.len() {
            let abs = off + pos;
            let w = abs / 8;
            let b = abs % 8;
            let n = (8 - b).min(data.len() - pos);
            if n == 8 {
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(&data[pos..pos + 8]);
                self.words[w].store(u64::from_le_bytes(bytes), Ordering::Relaxed);
            } else {
                let mut val = 0u64;
                let mut mask = 0u64;
                for i in 0..n {
                    val |= u64::from(data[pos + i]) << ((b + i) * 8);
                    mask |= 0xffu64 << ((b + i) * 8);
                }
                self.words[w]
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
                        Some((old & !mask) | val)
                    })
                    .unwrap();
            }
            pos += n;
        }
    }

    /// Copies bytes out of the segment at `off` into `out`.
    pub(crate) fn copy_out(&self, off: usize, out: &mut [u8]) {
        self.check_range(off, out.len());
        let mut pos = 0;
        while pos < out.len() {
            let abs = off + pos;
            let w = abs / 8;
            let b = abs % 8;
            let n = (8 - b).min(out.len() - pos);
            let bytes = self.words[w].load(Ordering::Relaxed).to_le_bytes();
            out[pos..pos + n].copy_from_slice(&bytes[b..b + n]);
            pos += n;
        }
    }

    /// Copies `data` into `spans` in order (data.len() <= spans.total()).
    pub(crate) fn copy_into_spans(&self, spans: Spans, data: &[u8]) {
        assert!(data.len() <= spans.total());
        let first = data.len().min(spans.first.len);
        self.copy_in(spans.first.off, &data[..first]);
        if first < data.len() {
            self.copy_in(spans.second.off, &data[first..]);
        }
    }

    /// Copies the first `n` bytes covered by `spans` out.
    pub(crate) fn copy_from_spans(&self, spans: Spans, n: usize) -> Vec<u8> {
        assert!(n <= spans.total());
        let mut out = vec![0u8; n];
        let first = n.min(spans.first.len);
        self.copy_out(spans.first.off, &mut out[..first]);
        if first < n {
            self.copy_out(spans.second.off, &mut out[first..]);
        }
        out
    }

    /// Raw word store, as a hostile peer would do it (bounds-checked).
    pub(crate) fn poke(&self, off: usize, v: u64) {
        let w = self.check(off, 8);
        self.words[w].store(v, Ordering::Release);
    }
}

impl Segment for TestSegment {
    fn len(&self) -> usize {
        self.len
    }

    fn load_u64(&self, off: usize) -> u64 {
        let w = self.check(off, 8);
        self.words[w].load(Ordering::Acquire)
    }

    fn store_u64(&self, off: usize, v: u64) {
        let w = self.check(off, 8);
        self.words[w].store(v, Ordering::Release);
    }

    fn load_u32(&self, off: usize) -> u32 {
        let w = self.check(off, 4);
        let shift = (off % 8) * 8;
        (self.words[w].load(Ordering::Acquire) >> shift) as u32
    }

    fn store_u32(&self, off: usize, v: u32) {
        let w = self.check(off, 4);
        let shift = (off % 8) * 8;
        let mask = 0xffff_ffffu64 << shift;
        self.words[w]
            .fetch_update(Ordering::Release, Ordering::Relaxed, |old| {
                Some((old & !mask) | (u64::from(v) << shift))
            })
            .unwrap();
    }

    fn fence(&self) {
        self.accesses.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
    }
}

/// The fabric manager's operation (the guests' code never read-modify-writes).
impl SharedWords for TestSegment {
    fn compare_exchange_u64(&self, off: usize, current: u64, new: u64) -> Result<u64, u64> {
        let w = self.check(off, 8);
        self.words[w].compare_exchange(current, new, Ordering::SeqCst, Ordering::SeqCst)
    }
}

/// Claims the blank region `seg` for node `me`, which nobody else claims; returns the
/// ticket to format it with.
pub(crate) fn claim_alone<S: Segment>(seg: &S, me: crate::proto::region::NodeId) -> u32 {
    use crate::proto::region::{read_header, ClaimOutcome, Claimant, HeaderState};
    let HeaderState::Blank(seen) = read_header(seg) else {
        panic!("the region is not blank");
    };
    match Claimant::new(me, 7).attempt(seg, seen, 0, 1000) {
        ClaimOutcome::Won(ticket) => ticket,
        other => panic!("an uncontended claim was {other:?}"),
    }
}

/// Where a test queue lives.
pub(crate) const RX_BASE: usize = 0x40;
/// Credit area base in the sender's segment.
pub(crate) const CREDIT_BASE: usize = 0x80;

/// Endpoints of a test queue.
pub(crate) type TestProducer = Producer<Arc<TestSegment>, Arc<TestSegment>>;
/// Endpoints of a test queue.
pub(crate) type TestConsumer = Consumer<Arc<TestSegment>, Arc<TestSegment>>;

/// One queue between two test segments.
pub(crate) struct QueuePair {
    /// The receiver's segment (receive area at [`RX_BASE`]).
    pub(crate) rx_seg: Arc<TestSegment>,
    /// The sender's segment (credit area at [`CREDIT_BASE`]).
    pub(crate) tx_seg: Arc<TestSegment>,
    /// The queue parameters.
    pub(crate) params: QueueParams,
    /// Producer.
    pub(crate) producer: TestProducer,
    /// Consumer.
    pub(crate) consumer: TestConsumer,
}

impl QueuePair {
    /// A queue with a `1 << log2` ring. The segments have slack after the
    /// areas so that an out-of-area access would not trip the bounds check by
    /// luck; [`assert_in_ring`] checks spans exactly.
    pub(crate) fn new(log2: u32, generation: u32, start: u64, threshold: u64) -> Self {
        let geometry = RingGeometry::from_log2(log2).unwrap();
        let params = QueueParams {
            geometry,
            generation,
            start,
        };
        let rx_seg = TestSegment::shared(RX_BASE + geometry.rx_area_size() + 256);
        let tx_seg = TestSegment::shared(CREDIT_BASE + 64 + 256);
        queue::init_rx_area(&*rx_seg, RX_BASE, params).unwrap();
        queue::init_credit_area(&*tx_seg, CREDIT_BASE, params).unwrap();
        let producer =
            Producer::new(rx_seg.clone(), RX_BASE, tx_seg.clone(), CREDIT_BASE, params).unwrap();
        let consumer = Consumer::new(
            rx_seg.clone(),
            RX_BASE,
            tx_seg.clone(),
            CREDIT_BASE,
            params,
            threshold,
        )
        .unwrap();
        QueuePair {
            rx_seg,
            tx_seg,
            params,
            producer,
            consumer,
        }
    }
}

/// Asserts that every span lies inside the ring data of a receive area at
/// [`RX_BASE`], and that a wrapped second span starts at the ring start.
pub(crate) fn assert_in_ring(spans: Spans, geometry: RingGeometry) {
    let ring_start = RX_BASE + RX_DATA;
    let ring_end = ring_start + geometry.size_usize();
    let check = |s: Span| {
        if s.len != 0 {
            assert!(s.off >= ring_start, "span {s:?} before the ring");
            assert!(s.off + s.len <= ring_end, "span {s:?} past the ring");
        }
    };
    check(spans.first);
    check(spans.second);
    if spans.second.len != 0 {
        assert_eq!(spans.second.off, ring_start);
        assert_eq!(spans.first.off + spans.first.len, ring_end);
    }
    assert!(spans.total() <= geometry.size_usize());
}

/// Byte `pos` of the test stream `seed` (a cheap hash: reproducible on both
/// sides without storing the stream).
pub(crate) fn stream_byte(seed: u64, pos: u64) -> u8 {
    let mut x = pos.wrapping_add(seed).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 29;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 32;
    x as u8
}

/// `len` bytes of stream `seed` starting at `pos`.
pub(crate) fn stream(seed: u64, pos: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| stream_byte(seed, pos + i))
        .collect()
}

/// A small xorshift generator for the threaded tests.
pub(crate) struct XorShift(pub(crate) u64);

impl XorShift {
    /// Next value.
    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A value in `lo..=hi`.
    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}
