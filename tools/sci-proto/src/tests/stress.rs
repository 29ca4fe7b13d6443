//! Two threads standing in for two nodes: one producer, one consumer, one
//! shared segment pair, many MB of checksummed data in random chunks, with the
//! notify-requested protocol modelled by a doorbell (mutex + condvar) and
//! counted. A lost wake-up shows as a doorbell wait that times out.

use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::Duration;

use super::{stream_byte, QueuePair, TestConsumer, TestProducer, TestSegment, XorShift};
use crate::proto::gather::{gather_decision, GatherDecision, GatherInput, INLINE_MAX};
use crate::proto::queue;
use crate::proto::ring::RingGeometry;

/// A doorbell: ringing increments a counter and wakes sleepers.
#[derive(Default)]
pub(crate) struct Doorbell {
    rung: Mutex<u64>,
    cv: Condvar,
}

impl Doorbell {
    /// The current count (take it *before* posting a wait request).
    fn ticket(&self) -> u64 {
        *self.rung.lock().unwrap()
    }

    /// Rings.
    fn ring(&self) {
        *self.rung.lock().unwrap() += 1;
        self.cv.notify_all();
    }

    /// Sleeps until the count moves past `ticket`. A wait of more than 20 s
    /// is a lost wake-up (the peer is busy-looping through its work, never
    /// idle that long).
    fn wait(&self, ticket: u64, who: &str) {
        let g = self.rung.lock().unwrap();
        let (g, timeout) = self
            .cv
            .wait_timeout_while(g, Duration::from_secs(20), |n| *n == ticket)
            .unwrap();
        drop(g);
        assert!(
            !timeout.timed_out(),
            "{who}: lost wake-up (no doorbell in 20 s)"
        );
    }
}

/// FNV-1a over a byte stream.
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn add(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Counters reported by one run.
#[derive(Debug, Default)]
struct Stats {
    bytes: u64,
    writer_sleeps: u64,
    reader_sleeps: u64,
    bells_to_reader: u64,
    bells_to_writer: u64,
    writer_wait_requests: u64,
    reader_wait_requests: u64,
    checksum: u64,
}

/// Writer side: random chunk sizes (small ones through the inline path),
/// optional Nagle-style gathering, blocking when the ring is full.
#[allow(clippy::too_many_arguments)]
fn writer(
    mut p: TestProducer,
    seg: Arc<TestSegment>,
    total: u64,
    seed: u64,
    max_chunk: u64,
    gathering: bool,
    my_bell: Arc<Doorbell>,
    peer_bell: Arc<Doorbell>,
) -> Stats {
    let mut rng = XorShift(seed | 1);
    let mut st = Stats::default();
    let mut sum = Fnv::new();
    let mut pos = 0u64;
    let mut buf = Vec::new();
    let mss = p.params().geometry.size() / 4;
    while pos < total {
        let want = if rng.next() % 4 == 0 {
            rng.range(1, INLINE_MAX as u64)
        } else {
            rng.range(1, max_chunk)
        }
        .min(total - pos) as usize;
        // Copy what fits.
        let spans = if want <= INLINE_MAX {
            p.reserve(want).unwrap()
        } else {
            let s = p.writable().unwrap();
            if s.is_empty() {
                None
            } else {
                Some(s.truncate(want))
            }
        };
        let Some(spans) = spans else {
            // Full: never sleep on held data, then wait for space.
            if p.publish().unwrap() {
                peer_bell.ring();
                st.bells_to_reader += 1;
            }
            let ticket = my_bell.ticket();
            st.writer_wait_requests += 1;
            let d = p.prepare_wait(want.min(INLINE_MAX) as u64).unwrap();
            if d.sleep {
                st.writer_sleeps += 1;
                my_bell.wait(ticket, "writer");
            }
            p.finish_wait();
            continue;
        };
        let n = spans.total();
        buf.clear();
        buf.extend((0..n as u64).map(|i| stream_byte(seed, pos + i)));
        sum.add(&buf);
        seg.copy_into_spans(spans, &buf);
        pos += n as u64;
        p.stage(n).unwrap();
        let send = if gathering {
            let input = GatherInput {
                pending: p.pending(),
                in_flight: p.in_flight(),
                room: p.free(),
                mss,
                nodelay: false,
                cork: false,
                more: false,
                force: pos == total,
            };
            gather_decision(&input) == GatherDecision::SendNow
        } else {
            true
        };
        if send && p.publish().unwrap() {
            peer_bell.ring();
            st.bells_to_reader += 1;
        }
    }
    p.set_done_writing().unwrap();
    // Flag changes that end a stream always ring.
    peer_bell.ring();
    st.bells_to_reader += 1;
    st.bytes = pos;
    st.checksum = sum.0;
    st
}

/// Reader side: random read sizes, lazy consumer updates, blocking when empty.
fn reader(
    mut c: TestConsumer,
    seg: Arc<TestSegment>,
    seed: u64,
    max_chunk: u64,
    my_bell: Arc<Doorbell>,
    peer_bell: Arc<Doorbell>,
) -> Stats {
    let mut rng = XorShift(seed.rotate_left(17) | 1);
    let mut st = Stats::default();
    let mut sum = Fnv::new();
    let mut pos = 0u64;
    loop {
        let spans = c.readable().unwrap();
        if spans.is_empty() {
            if c.at_eof().unwrap() {
                break;
            }
            let ticket = my_bell.ticket();
            st.reader_wait_requests += 1;
            let d = c.prepare_wait().unwrap();
            if d.notify_peer {
                peer_bell.ring();
                st.bells_to_writer += 1;
            }
            if d.sleep {
                st.reader_sleeps += 1;
                my_bell.wait(ticket, "reader");
            }
            c.finish_wait();
            continue;
        }
        let n = (rng.range(1, max_chunk) as usize).min(spans.total());
        let got = seg.copy_from_spans(spans, n);
        for (i, &b) in got.iter().enumerate() {
            let want = stream_byte(seed, pos + i as u64);
            assert_eq!(b, want, "byte {} corrupted", pos + i as u64);
        }
        sum.add(&got);
        pos += n as u64;
        if c.consume_and_update(n).unwrap() {
            peer_bell.ring();
            st.bells_to_writer += 1;
        }
    }
    assert!(c.peer().done_writing);
    st.bytes = pos;
    st.checksum = sum.0;
    st
}

/// Runs one producer/consumer pair to completion.
fn run(log2: u32, total: u64, seed: u64, max_w: u64, max_r: u64, gathering: bool) {
    let geometry = RingGeometry::from_log2(log2).unwrap();
    let q = QueuePair::new(
        log2,
        seed as u32,
        seed.wrapping_mul(0x1234_5678_9abc_def1),
        queue::default_publish_threshold(geometry),
    );
    let reader_bell = Arc::new(Doorbell::default());
    let writer_bell = Arc::new(Doorbell::default());
    let (rb, wb) = (reader_bell.clone(), writer_bell.clone());
    let (wseg, rseg) = (q.rx_seg.clone(), q.rx_seg.clone());
    let (p, c) = (q.producer, q.consumer);
    let w = thread::spawn(move || writer(p, wseg, total, seed, max_w, gathering, wb, rb));
    let (rb, wb) = (reader_bell, writer_bell);
    let r = thread::spawn(move || reader(c, rseg, seed, max_r, rb, wb));
    let ws = w.join().unwrap();
    let rs = r.join().unwrap();
    assert_eq!(ws.bytes, total);
    assert_eq!(rs.bytes, total);
    assert_eq!(ws.checksum, rs.checksum);
    // Notify only when asked: one doorbell per wait request at most (plus
    // the final "done writing" ring).
    assert!(
        ws.bells_to_reader <= rs.reader_wait_requests + 1,
        "writer rang {} times for {} reader requests",
        ws.bells_to_reader,
        rs.reader_wait_requests
    );
    assert!(
        rs.bells_to_writer <= ws.writer_wait_requests,
        "reader rang {} times for {} writer requests",
        rs.bells_to_writer,
        ws.writer_wait_requests
    );
    std::eprintln!(
        "ring 2^{log2} gathering={gathering}: {} bytes; writer slept {} ({} requests, {} bells in), reader slept {} ({} requests, {} bells in)",
        total,
        ws.writer_sleeps,
        ws.writer_wait_requests,
        rs.bells_to_writer,
        rs.reader_sleeps,
        rs.reader_wait_requests,
        ws.bells_to_reader,
    );
}

/// Megabytes per run: `SCI_PROTO_STRESS_MB`, default 16.
fn megabytes() -> u64 {
    std::env::var("SCI_PROTO_STRESS_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16)
}

#[test]
fn two_threads_small_ring_small_chunks() {
    // A 256-byte ring forces constant wrap-around and full/empty waits.
    run(8, megabytes() << 18, 0x5eed_0001, 300, 300, false);
}

#[test]
fn two_threads_large_ring_large_chunks() {
    run(16, megabytes() << 20, 0x5eed_0002, 40_000, 70_000, false);
}

#[test]
fn two_threads_gathering() {
    run(12, megabytes() << 19, 0x5eed_0003, 2_000, 5_000, true);
}

/// Stages and gathers 2 × 10 bytes (Nagle on, `mss` bytes a segment);
/// returns the doorbells rung.
fn send_two(
    tx: &mut TestProducer,
    seg: &TestSegment,
    sent: &mut u64,
    peer: &Doorbell,
    mss: u64,
) -> u64 {
    let mut bells = 0;
    for _ in 0..2 {
        let spans = tx.reserve(10).unwrap().expect("ring has room");
        let data: Vec<u8> = (0..10).map(|i| stream_byte(7, *sent + i)).collect();
        seg.copy_into_spans(spans, &data);
        tx.stage(10).unwrap();
        *sent += 10;
        tx.refresh().unwrap();
        bells += gather_step(tx, peer, mss);
    }
    bells
}

/// Runs the gathering decision on held bytes (after a send, or as the
/// doorbell handler): publish, or hold and post a wait request so that the
/// peer's consumption rings us. Returns the doorbells rung.
fn gather_step(tx: &mut TestProducer, peer: &Doorbell, mss: u64) -> u64 {
    let decide = |tx: &TestProducer| {
        gather_decision(&GatherInput {
            pending: tx.pending(),
            in_flight: tx.in_flight(),
            room: tx.free(),
            mss,
            ..GatherInput::default()
        })
    };
    let mut d = decide(tx);
    if d == GatherDecision::Hold {
        // Post the request, then re-decide on the fresh cursor it read.
        tx.request_notify().unwrap();
        d = decide(tx);
    }
    match d {
        GatherDecision::Hold => 0,
        GatherDecision::Idle | GatherDecision::SendNow => {
            tx.finish_wait();
            if tx.publish().unwrap() {
                peer.ring();
                1
            } else {
                0
            }
        }
    }
}

/// Receives `n` bytes of stream 7 at `*got`, sleeping on `me` when empty and
/// acting as the doorbell handler for `tx`'s held bytes on every wake-up.
#[allow(clippy::too_many_arguments)]
fn receive(
    rx: &mut TestConsumer,
    seg: &TestSegment,
    got: &mut u64,
    n: u64,
    tx: &mut TestProducer,
    me: &Doorbell,
    peer: &Doorbell,
    mss: u64,
) -> u64 {
    let mut bells = 0;
    let want = *got + n;
    while *got < want {
        let spans = rx.readable().unwrap();
        if !spans.is_empty() {
            let k = spans.total().min((want - *got) as usize);
            let bytes = seg.copy_from_spans(spans, k);
            for (i, &b) in bytes.iter().enumerate() {
                assert_eq!(b, stream_byte(7, *got + i as u64));
            }
            *got += k as u64;
            if rx.consume_and_update(k).unwrap() {
                peer.ring();
                bells += 1;
            }
            continue;
        }
        let ticket = me.ticket();
        let d = rx.prepare_wait().unwrap();
        if d.notify_peer {
            peer.ring();
            bells += 1;
        }
        let held = tx.pending();
        bells += gather_step(tx, peer, mss);
        let flushed = held > 0 && tx.pending() == 0;
        if d.sleep && !flushed {
            me.wait(ticket, "ping-pong side");
        }
        rx.finish_wait();
    }
    bells
}

#[test]
fn two_threads_ping_pong_with_nagle() {
    // Write-write-read over two queues with Nagle on both sides: the second
    // small write is held while the first is in flight; the held bytes must
    // go out once the peer consumes the first (its cursor publish rings the
    // writer, whose doorbell handler re-runs the gathering decision).
    // Without the request_notify on hold this test hangs.
    const ROUNDS: u64 = 2_000;
    const MSS: u64 = 512;
    let make = |g: u32| QueuePair::new(10, g, 0, 256);
    let ab = make(1); // A → B
    let ba = make(2); // B → A
    let bell_a = Arc::new(Doorbell::default());
    let bell_b = Arc::new(Doorbell::default());

    let (mut a_tx, mut a_rx) = (ab.producer, ba.consumer);
    let (mut b_tx, mut b_rx) = (ba.producer, ab.consumer);
    let (a_tx_seg, a_rx_seg) = (ab.rx_seg.clone(), ba.rx_seg.clone());
    let (b_tx_seg, b_rx_seg) = (ba.rx_seg.clone(), ab.rx_seg.clone());
    let (a_me, a_peer) = (bell_a.clone(), bell_b.clone());
    let (b_me, b_peer) = (bell_b, bell_a);

    let a = thread::spawn(move || {
        let (mut sent, mut got, mut bells) = (0, 0, 0);
        for _ in 0..ROUNDS {
            bells += send_two(&mut a_tx, &a_tx_seg, &mut sent, &a_peer, MSS);
            bells += receive(
                &mut a_rx, &a_rx_seg, &mut got, 20, &mut a_tx, &a_me, &a_peer, MSS,
            );
        }
        assert_eq!(a_tx.pending(), 0);
        bells
    });
    let b = thread::spawn(move || {
        let (mut sent, mut got, mut bells) = (0, 0, 0);
        for _ in 0..ROUNDS {
            bells += receive(
                &mut b_rx, &b_rx_seg, &mut got, 20, &mut b_tx, &b_me, &b_peer, MSS,
            );
            bells += send_two(&mut b_tx, &b_tx_seg, &mut sent, &b_peer, MSS);
        }
        // The last answer may be held: closing flushes it.
        b_tx.set_done_writing().unwrap();
        b_peer.ring();
        bells
    });
    let bells_b = b.join().unwrap();
    let bells_a = a.join().unwrap();
    std::eprintln!("ping-pong with Nagle: {ROUNDS} rounds, doorbells A {bells_a}, B {bells_b}");
}
