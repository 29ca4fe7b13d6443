// SPDX-License-Identifier: GPL-2.0

//! A self-test of the fabric and the protocol core inside the kernel, run at load time
//! when `fabric_selftest=1`: two endpoints on the loopback fabric, each with a segment
//! holding its receive area and credit area, push a checksummed byte stream through a
//! small ring (many wrap-arounds) in both directions, with the poll-then-sleep wait
//! protocol checked to ring the doorbell exactly when a reader asked. It exercises what
//! the data path is built from: [`SegMem`] copies from and to `iov_iter`s, the Acquire/
//! Release word accessors, the loopback backend and `proto::queue`.

use super::loopback::Loopback;
use super::memory::{with_kvec_iter, SegMem};
use super::seg_pool::SegPool;
use super::{Fabric, FabricEvents, NodeId, NodeLoss};
use crate::proto::frame::FRAME_SIZE;
use crate::proto::queue::{self, Consumer, Producer, QueueParams};
use crate::proto::ring::{RingGeometry, Span, CREDIT_AREA_SIZE};
use crate::proto::segment::Segment;
use crate::sys::bindings;
use crate::sys::errno::errno;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;

/// Ring size of the test queues: small, so the stream wraps many times.
const RING_LOG2: u32 = 12;
/// Bytes pushed through each direction.
pub(super) const STREAM_BYTES: usize = 1 << 20;
/// Channels of the test fabric.
const CHANNELS: usize = 4;

/// Counts what the test fabric delivered.
struct Counters {
    doorbells: AtomicU32,
    frames: AtomicU32,
}

impl FabricEvents for Counters {
    fn control(&self, _from: NodeId, _frame: [u8; FRAME_SIZE]) {
        self.frames.fetch_add(1, Ordering::Relaxed);
    }

    fn doorbell(&self, _channel: u32) {
        self.doorbells.fetch_add(1, Ordering::Relaxed);
    }

    fn node_down(&self, _node: NodeId, _loss: NodeLoss) {}

    fn memory_going(&self) {}

    /// A test fabric publishes no address.
    fn local_addresses(&self, _out: &mut [[u8; 16]]) -> usize {
        0
    }
}

fn pattern(stream: u8, off: usize) -> u8 {
    (off.wrapping_mul(131) ^ (off >> 11) ^ usize::from(stream).wrapping_mul(77)) as u8
}

/// A latched protocol error, as the data path will report it.
fn proto_err<E: core::fmt::Debug>(e: E, line: u32) -> Error {
    pr_err!(
        "fabric self-test failed: protocol error {:?} at queue_selftest.rs:{}\n",
        e,
        line
    );
    errno(bindings::EPROTO)
}

pub(super) fn check(cond: bool, what: &str) -> Result {
    if cond {
        Ok(())
    } else {
        pr_err!("fabric self-test failed: {}\n", what);
        Err(EIO)
    }
}

/// One endpoint: its segment holds its receive area at 0 and its credit area after it.
struct End {
    seg: Arc<SegMem>,
    credit_base: usize,
}

/// `rx` are the parameters of the queue this end receives on, `tx` of the one it sends
/// on (whose credit area it holds); `peer` is the node the segment is made for.
fn endpoint(
    fabric: &dyn Fabric,
    peer: NodeId,
    channel: u32,
    rx: QueueParams,
    tx: QueueParams,
) -> Result<End> {
    let rx_size = rx.geometry.rx_area_size();
    let seg = fabric.create_segment(channel, rx_size + CREDIT_AREA_SIZE, peer)?;
    queue::init_rx_area(&*seg, 0, rx).map_err(|_| EINVAL)?;
    queue::init_credit_area(&*seg, rx_size, tx).map_err(|_| EINVAL)?;
    Ok(End {
        seg,
        credit_base: rx_size,
    })
}

/// Pushes `STREAM_BYTES` from `tx` to `rx` in odd-sized pieces, checking every byte.
fn stream(
    fabric: &dyn Fabric,
    tag: u8,
    producer: &mut Producer<Arc<SegMem>, Arc<SegMem>>,
    consumer: &mut Consumer<Arc<SegMem>, Arc<SegMem>>,
    rx_seg: &SegMem,
    tx_seg: &SegMem,
) -> Result {
    let mut out = KVec::from_elem(0u8, 3001, GFP_KERNEL)?;
    let mut inb = KVec::from_elem(0u8, 4096, GFP_KERNEL)?;
    let (mut sent, mut got) = (0usize, 0usize);
    while got < STREAM_BYTES {
        // Write as much of the next piece as fits.
        let piece = (STREAM_BYTES - sent).min(out.len());
        if piece > 0 {
            producer.refresh().map_err(|e| proto_err(e, line!()))?;
            let spans = producer
                .writable()
                .map_err(|e| proto_err(e, line!()))?
                .truncate(piece);
            let n = spans.total();
            for (i, b) in out.as_mut_slice()[..n].iter_mut().enumerate() {
                *b = pattern(tag, sent + i);
            }
            let mut copied = 0;
            with_kvec_iter(&mut out.as_mut_slice()[..n], false, |iter| {
                for span in spans.iter() {
                    copied += rx_seg.copy_from_iter(span, iter);
                }
            });
            check(copied == n, "copy into the ring was short")?;
            if producer.commit(n).map_err(|e| proto_err(e, line!()))? {
                fabric.notify(fabric.local_node(), 0);
            }
            sent += n;
        }
        // Read what arrived.
        consumer.refresh().map_err(|e| proto_err(e, line!()))?;
        let spans = consumer
            .readable()
            .map_err(|e| proto_err(e, line!()))?
            .truncate(inb.len());
        let n = spans.total();
        let mut copied = 0;
        with_kvec_iter(&mut inb.as_mut_slice()[..n], true, |iter| {
            for span in spans.iter() {
                copied += rx_seg.copy_to_iter(span, iter);
            }
        });
        check(copied == n, "copy out of the ring was short")?;
        for (i, b) in inb.as_slice()[..n].iter().enumerate() {
            check(
                *b == pattern(tag, got + i),
                "a byte arrived corrupted or out of order",
            )?;
        }
        if consumer
            .consume_and_update(n)
            .map_err(|e| proto_err(e, line!()))?
        {
            fabric.notify(fabric.local_node(), 1);
        }
        got += n;
        check(n > 0 || sent > got, "the stream stalled")?;
    }
    let _ = tx_seg;
    Ok(())
}

/// Runs the self-test; `Err(EIO)` (with the reason logged) if anything is wrong. (The
/// ivshmem backend's own self-test, `ivshmem::region_selftest`, runs after it.)
pub(crate) fn run() -> Result {
    let counters = Arc::new(
        Counters {
            doorbells: AtomicU32::new(0),
            frames: AtomicU32::new(0),
        },
        GFP_KERNEL,
    )?;
    let fabric = KBox::pin_init(Loopback::new(0, CHANNELS, counters.clone())?, GFP_KERNEL)?;
    let fabric: &dyn Fabric = &*fabric;
    let ring = streams(fabric, 0, &counters.doorbells, &|ch| {
        fabric.map_segment(0, ch)
    })?;
    pool_reuse()?;
    pr_info!(
        "fabric self-test passed: {} KiB each way through a {} B ring, {} doorbells\n",
        STREAM_BYTES / 1024,
        ring,
        counters.doorbells.load(Ordering::Relaxed)
    );
    Ok(())
}

/// A pooled segment written through the data path's own accessors, let go and taken
/// again: the same memory comes back, zeroed (`seg_pool.rs`).
fn pool_reuse() -> Result {
    let pool = SegPool::new()?;
    let len = 3 * 4096 + 100;
    let seg = SegMem::alloc_pooled(len, &pool)?;
    let mut bytes = [0xa5u8; 3000];
    let span = Span {
        off: 5000,
        len: 3000,
    };
    let copied = with_kvec_iter(&mut bytes, false, |iter| seg.copy_from_iter(span, iter));
    seg.store_u64(8, u64::MAX);
    seg.store_u32(len - 4 - len % 4, u32::MAX);
    let first = seg.first_byte();
    drop(seg);
    let again = SegMem::alloc_pooled(len, &pool)?;
    let reused = again.first_byte() == first;
    let zeroed = (0..again.len() / 8).all(|w| again.load_u64(w * 8) == 0);
    if copied != 3000 || !reused || !zeroed {
        pr_err!(
            "fabric self-test: pooled segment copied {copied}, reused {reused}, zeroed {zeroed}\n"
        );
        return Err(EIO);
    }
    Ok(())
}

/// The queue test on `fabric`: two endpoints exported under channels 1 and 2 (their
/// segments made for node `peer`), each mapping the other's segment with `map` (as a
/// peer would), a checksummed stream each way, the wait protocol checked against
/// `doorbells` (what the fabric's events count). Returns the ring size used.
pub(super) fn streams(
    fabric: &dyn Fabric,
    peer: NodeId,
    doorbells: &AtomicU32,
    map: &dyn Fn(u32) -> Result<Arc<SegMem>>,
) -> Result<u64> {
    let node = fabric.local_node();
    let geometry = RingGeometry::from_log2(RING_LOG2).map_err(|_| EINVAL)?;
    let a_params = QueueParams {
        geometry,
        generation: 7,
        start: 1 << 40,
    };
    let b_params = QueueParams {
        geometry,
        generation: 7,
        start: u64::MAX - 5000,
    };
    let a = endpoint(fabric, peer, 1, a_params, b_params)?;
    let b = endpoint(fabric, peer, 2, b_params, a_params)?;
    // Each side maps the other's segment, as a peer on another node would.
    let a_sees_b = map(2)?;
    let b_sees_a = map(1)?;
    check(
        Segment::len(&a_sees_b) == Segment::len(&b.seg),
        "a mapped segment has the wrong length",
    )?;

    let threshold = queue::default_publish_threshold(geometry);
    // a → b: the ring in b's segment, its credit area in a's.
    let mut a_tx = (Producer::new(a_sees_b.clone(), 0, a.seg.clone(), a.credit_base, b_params))
        .map_err(|e| proto_err(e, line!()))?;
    let mut b_rx = (Consumer::new(
        b.seg.clone(),
        0,
        b_sees_a.clone(),
        a.credit_base,
        b_params,
        threshold,
    ))
    .map_err(|e| proto_err(e, line!()))?;
    // b → a.
    let mut b_tx = (Producer::new(b_sees_a.clone(), 0, b.seg.clone(), b.credit_base, a_params))
        .map_err(|e| proto_err(e, line!()))?;
    let mut a_rx = (Consumer::new(
        a.seg.clone(),
        0,
        a_sees_b.clone(),
        b.credit_base,
        a_params,
        threshold,
    ))
    .map_err(|e| proto_err(e, line!()))?;

    // The wait protocol: a reader that found nothing posts a wait request; the next
    // commit must ask for exactly one doorbell.
    let before = doorbells.load(Ordering::Relaxed);
    let decision = (b_rx.prepare_wait()).map_err(|e| proto_err(e, line!()))?;
    check(
        decision.sleep,
        "a reader of an empty queue was told not to sleep",
    )?;
    let mut one = [0x5au8; 1];
    let spans = (a_tx.writable())
        .map_err(|e| proto_err(e, line!()))?
        .truncate(1);
    with_kvec_iter(&mut one, false, |iter| {
        for span in spans.iter() {
            b.seg.copy_from_iter(span, iter);
        }
    });
    let ring = (a_tx.commit(1)).map_err(|e| proto_err(e, line!()))?;
    check(
        ring,
        "a commit after a wait request did not ask for a doorbell",
    )?;
    fabric.notify(node, 2);
    check(
        doorbells.load(Ordering::Relaxed) == before + 1,
        "the doorbell did not ring once",
    )?;
    b_rx.finish_wait();
    (b_rx.refresh()).map_err(|e| proto_err(e, line!()))?;
    let spans = (b_rx.readable()).map_err(|e| proto_err(e, line!()))?;
    check(spans.total() == 1, "the byte after the wait did not arrive")?;
    (b_rx.consume_and_update(1)).map_err(|e| proto_err(e, line!()))?;

    stream(fabric, 1, &mut a_tx, &mut b_rx, &b.seg, &a.seg)?;
    stream(fabric, 2, &mut b_tx, &mut a_rx, &a.seg, &b.seg)?;
    check(
        a_tx.error().is_none() && b_rx.error().is_none(),
        "a queue latched a protocol error",
    )?;

    fabric.unexport(1);
    fabric.unexport(2);
    check(
        map(1).is_err(),
        "an unexported segment could still be mapped",
    )?;
    Ok(geometry.size())
}
