// SPDX-License-Identifier: GPL-2.0

//! The ivshmem backend's load-time self-test (`fabric_selftest=1` with a device present),
//! through the real BAR in one guest:
//!
//! - the queue test of [`crate::fabric::queue_selftest`] on segments from this node's heap,
//!   each side mapping the other's segment *through the export directory*, as a peer
//!   does (so the stream crosses the device mapping both ways);
//! - doorbells through the region: the channel's counter in this node's own doorbell
//!   block, then its own interrupt (MSI-X, `Doorbell` written with its own
//!   `IVPosition`) or the poller; the right channel must arrive within a second;
//! - control frames through this node's own mailbox in the region, more than it has
//!   slots, so that the sender meets a full mailbox and the acks free it;
//! - unexport withdraws the directory entry; a segment for another node that does not
//!   fit the heap is refused; a segment for this node itself is kernel memory, never
//!   published.
//!
//! The segments are made for a pretend other node (this node's id plus one), since
//! this node's own connections never use the heap.

use super::{Ivshmem, PAGE_SIZE};
use crate::fabric::memory::SegMem;
use crate::fabric::queue_selftest::{check, streams, STREAM_BYTES};
use crate::fabric::{Fabric, FabricEvents, NodeId, NodeLoss};
use crate::proto::frame::{CloseReason, ConnId, Frame, FRAME_SIZE, FRAME_WORDS};
use crate::sys::kthread::sleep_ms;
use crate::sys::params::FabricParams;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;

/// Channels of the test fabric.
const CHANNELS: usize = 8;
/// Frames sent through the own mailbox (more than its slots).
const FRAMES: u32 = 40;

/// What the test fabric delivered.
pub(super) struct Seen {
    doorbells: AtomicU32,
    /// The last channel rung.
    channel: AtomicU32,
    frames: AtomicU32,
    /// Sum of the delivered frames' source slots (each frame names its index).
    slot_sum: AtomicU64,
    node_downs: AtomicU32,
    /// The last frame delivered, word by word (the peer test's accept).
    last: [AtomicU64; FRAME_WORDS],
}

impl Seen {
    /// The last frame delivered, if it decodes.
    pub(super) fn last_frame(&self) -> Option<Frame> {
        let mut words = [0u64; FRAME_WORDS];
        for (w, a) in words.iter_mut().zip(self.last.iter()) {
            *w = a.load(Ordering::Acquire);
        }
        Frame::decode(&words).ok()
    }

    /// Frames delivered so far.
    pub(super) fn frames(&self) -> u32 {
        self.frames.load(Ordering::Acquire)
    }
}

impl FabricEvents for Seen {
    fn control(&self, _from: NodeId, frame: [u8; FRAME_SIZE]) {
        let words = crate::proto::frame::bytes_to_words(&frame);
        for (a, w) in self.last.iter().zip(words.iter()) {
            a.store(*w, Ordering::Release);
        }
        if let Ok(f) = Frame::decode_bytes(&frame) {
            self.slot_sum
                .fetch_add(u64::from(f.src.slot), Ordering::Relaxed);
            self.frames.fetch_add(1, Ordering::Release);
        }
    }

    fn doorbell(&self, channel: u32) {
        self.channel.store(channel, Ordering::Relaxed);
        self.doorbells.fetch_add(1, Ordering::Release);
    }

    fn node_down(&self, _node: NodeId, _loss: NodeLoss) {
        self.node_downs.fetch_add(1, Ordering::Relaxed);
    }

    fn memory_going(&self) {}

    /// A test fabric publishes no address.
    fn local_addresses(&self, _out: &mut [[u8; 16]]) -> usize {
        0
    }
}

/// Delivers to [`SEEN`] (the fabric takes its events as an `Arc`).
struct SeenEvents;

impl FabricEvents for SeenEvents {
    fn control(&self, from: NodeId, frame: [u8; FRAME_SIZE]) {
        SEEN.control(from, frame)
    }

    fn doorbell(&self, channel: u32) {
        SEEN.doorbell(channel)
    }

    fn node_down(&self, node: NodeId, loss: NodeLoss) {
        SEEN.node_down(node, loss)
    }

    fn memory_going(&self) {}

    /// A test fabric publishes no address.
    fn local_addresses(&self, _out: &mut [[u8; 16]]) -> usize {
        0
    }
}

/// What the test fabric delivered (one self-test runs at a time: at module load).
pub(super) static SEEN: Seen = Seen {
    doorbells: AtomicU32::new(0),
    channel: AtomicU32::new(0),
    frames: AtomicU32::new(0),
    slot_sum: AtomicU64::new(0),
    node_downs: AtomicU32::new(0),
    last: [const { AtomicU64::new(0) }; FRAME_WORDS],
};

/// Waits up to a second for `cond`.
pub(super) fn eventually(cond: impl Fn() -> bool) -> bool {
    within_ms(1000, cond)
}

/// Waits up to `ms` milliseconds for `cond` (in 10 ms steps).
pub(super) fn within_ms(ms: u32, cond: impl Fn() -> bool) -> bool {
    for _ in 0..ms / 10 {
        if cond() {
            return true;
        }
        sleep_ms(10);
    }
    cond()
}

impl Ivshmem {
    /// Maps this node's own export of `channel` the way a peer does: through the
    /// directory in the region (a new mapping of the BAR, not the exported `Arc`).
    fn map_via_directory(&self, channel: u32) -> Result<Arc<SegMem>> {
        let s = self.attached().ok_or(ENODEV)?;
        let (span, _) = s.region.lookup(s.me, channel).ok_or(ENOENT)?;
        SegMem::device(&s.dev.mem, span.off, span.len, None, None)
    }
}

/// Runs the ivshmem self-test if an ivshmem device is present.
pub(crate) fn run(params: &FabricParams) -> Result {
    let fabric = match Ivshmem::open(Arc::new(SeenEvents, GFP_KERNEL)?, params, CHANNELS) {
        Ok(f) => f,
        Err(e) if e == ENODEV => return Ok(()),
        Err(e) => {
            pr_err!("ivshmem self-test: cannot open the fabric ({:?})\n", e);
            return Err(e);
        }
    };
    let s = fabric.attached().ok_or(ENODEV)?;
    let me = s.me;
    let other = me.wrapping_add(1);

    // Queues over heap segments, each mapped through the directory.
    let ring = streams(&*fabric, other, &SEEN.doorbells, &|ch| {
        fabric.map_via_directory(ch)
    })?;

    // A segment lands in the heap and is published.
    let seg = fabric.create_segment(3, 10000, other)?;
    let (span, _) = s.region.lookup(me, 3).ok_or(EIO)?;
    check(
        span.len == 3 * PAGE_SIZE && crate::proto::segment::Segment::len(&seg) == span.len,
        "a heap segment has the wrong size in the directory",
    )?;
    fabric.unexport(3);
    check(
        s.region.lookup(me, 3).is_none() && fabric.map_segment(me, 3).is_err(),
        "an unexported heap segment is still published",
    )?;
    drop(seg);

    // Larger than the heap: refused for another node, which could not map kernel
    // memory; for this node itself, kernel memory, not published, mappable locally (as
    // every segment of its own connections is, whatever its size).
    let (_, heap_pages) = s.heap.usage();
    check(
        fabric
            .create_segment(4, (heap_pages + 1) * PAGE_SIZE, other)
            .err()
            == Some(ENOMEM),
        "an oversized segment for another node was not refused",
    )?;
    let big = fabric.create_segment(4, (heap_pages + 1) * PAGE_SIZE, me)?;
    check(
        s.region.lookup(me, 4).is_none() && fabric.map_segment(me, 4).is_ok(),
        "a segment for this node itself is not kernel memory",
    )?;
    let (used_before, _) = s.heap.usage();
    let small = fabric.create_segment(5, PAGE_SIZE, me)?;
    check(
        s.region.lookup(me, 5).is_none() && s.heap.usage().0 == used_before,
        "a small segment for this node itself came from the shared heap",
    )?;
    fabric.unexport(5);
    drop(small);
    fabric.unexport(4);
    drop(big);

    // Doorbells through the region and the interrupt (or the poller).
    let me_peer = s.peer(me).ok_or(EIO)?;
    for ch in [5u32, 6, 7] {
        let before = SEEN.doorbells.load(Ordering::Acquire);
        s.ring_channel(me_peer, ch);
        check(
            eventually(|| SEEN.doorbells.load(Ordering::Acquire) > before),
            "a doorbell through the region never arrived",
        )?;
        check(
            SEEN.channel.load(Ordering::Relaxed) == ch,
            "a doorbell arrived for the wrong channel",
        )?;
    }

    // Frames through the own mailbox, past its slot count.
    let mut sent = 0u32;
    let mut full = 0u32;
    let mut want = 0u64;
    while sent < FRAMES {
        let f = Frame::close(
            ConnId {
                slot: sent,
                generation: 1,
            },
            ConnId {
                slot: 0,
                generation: 1,
            },
            CloseReason::Graceful,
        );
        match s.send_frame(me_peer, &f.encode_bytes()) {
            Ok(()) => {
                want += u64::from(sent);
                sent += 1;
            }
            Err(e) if e == EAGAIN => {
                full += 1;
                let before = SEEN.frames.load(Ordering::Acquire);
                check(
                    eventually(|| SEEN.frames.load(Ordering::Acquire) > before),
                    "a full mailbox never drained",
                )?;
            }
            Err(e) => {
                pr_err!("ivshmem self-test: sending a frame failed ({:?})\n", e);
                return Err(EIO);
            }
        }
    }
    check(
        eventually(|| SEEN.frames.load(Ordering::Acquire) >= FRAMES),
        "frames through the mailbox were lost",
    )?;
    check(
        SEEN.slot_sum.load(Ordering::Relaxed) == want,
        "frames through the mailbox arrived corrupted",
    )?;
    let irqs = s.irqs.load(Ordering::Relaxed);
    check(
        !s.interrupts || irqs > 0,
        "the doorbell device never interrupted",
    )?;
    pr_info!(
        "ivshmem self-test passed: node {}, {} KiB each way through a {} B ring over the BAR, {} doorbells, {} frames ({} times full), {} interrupts ({})\n",
        me,
        STREAM_BYTES / 1024,
        ring,
        SEEN.doorbells.load(Ordering::Relaxed),
        SEEN.frames.load(Ordering::Relaxed),
        full,
        irqs,
        if s.interrupts { "MSI-X" } else { "polled" }
    );
    if params.test_peer >= 0 {
        let peer = NodeId::try_from(params.test_peer).map_err(|_| EINVAL)?;
        let port = u16::try_from(params.test_port).map_err(|_| EINVAL)?;
        super::peer_test::run(&fabric, peer, port, params.test_hold)?;
    }
    Ok(())
}
