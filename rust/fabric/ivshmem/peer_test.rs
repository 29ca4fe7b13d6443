// SPDX-License-Identifier: GPL-2.0

//! Test only (`fabric_selftest=1 ivshmem_test_peer=N`): a minimal SCI client inside the
//! self-test that connects to an `AF_SCI` listener on another guest over the ivshmem
//! fabric, before this kernel's own connect path can reach other nodes.
//!
//! It does what a connecting socket does, by hand: a segment with its receive and credit
//! areas exported under a channel, a connect request through the peer's mailbox, the
//! peer's segment mapped through its export directory when the accept arrives, then
//! [`PAYLOAD`] patterned bytes pushed into the peer's ring and a reply read from its own.
//! The peer's listener (a plain `AF_SCI` socket) sees an ordinary SCI connection. The
//! client then holds the connection open for `ivshmem_test_hold` seconds, or until the
//! peer closes, so that a test can kill this guest under an open connection and check
//! that the peer's socket is reset.

use super::region_selftest::{within_ms, SEEN};
use super::Ivshmem;
use crate::fabric::memory::{with_kvec_iter, SegMem};
use crate::fabric::queue_selftest::check;
use crate::fabric::{Fabric, NodeId};
use crate::proto::frame::{ConnId, Frame, FrameKind, QueueOffer, WireIp};
use crate::proto::queue::{self, Consumer, Producer, QueueParams};
use crate::proto::ring::{RingGeometry, CREDIT_AREA_SIZE};
use crate::proto::segment::Segment;
use crate::sys::kthread::sleep_ms;
use crate::sys::params::CONNECT_TIMEOUT_MS;
use kernel::prelude::*;
use kernel::sync::Arc;

/// Bytes sent to the peer.
const PAYLOAD: usize = 256 * 1024;
/// The reply expected.
const REPLY: &[u8] = b"ok";
/// This client's ring (64 KiB).
const RING_LOG2: u32 = 16;
/// The channel (connection slot) it uses.
const CHANNEL: u32 = 1;

/// The byte at `off` of the payload (the peer checks the same pattern).
pub(super) fn pattern(off: usize) -> u8 {
    (off % 251) as u8
}

fn fail(what: &str) -> Error {
    pr_err!("ivshmem peer test failed: {}\n", what);
    EIO
}

/// Connects to `port` on node `peer`, sends the payload, reads the reply, holds the
/// connection up to `hold_s` seconds, closes it.
pub(super) fn run(fabric: &Ivshmem, peer: NodeId, port: u16, hold_s: u32) -> Result {
    // The peer links after a few heartbeats; two guests under TCG on a busy host can take
    // far longer than real hardware, so the waits here are generous (a test's two guests
    // are given minutes; a hang is what these bound, not speed).
    check(
        within_ms(30_000, || fabric.reaches(peer)),
        "the peer node never became reachable (30 s)",
    )?;
    let geometry = RingGeometry::from_log2(RING_LOG2).map_err(|_| EINVAL)?;
    let generation = 0x5c1_0001;
    let params = QueueParams {
        geometry,
        generation,
        start: 1 << 33,
    };
    let rx_size = geometry.rx_area_size();
    let seg = fabric.create_segment(CHANNEL, rx_size + CREDIT_AREA_SIZE, peer)?;
    queue::init_rx_area(&*seg, 0, params).map_err(|_| EINVAL)?;
    queue::init_credit_area(&*seg, rx_size, params).map_err(|_| EINVAL)?;
    let id = ConnId {
        slot: CHANNEL,
        generation,
    };
    let offer = QueueOffer {
        ring_log2: RING_LOG2 as u8,
        rx_area: 0,
        credit_area: rx_size as u64,
        start: params.start,
    };
    let before = SEEN.frames();
    // The listener binds the wildcard address; the namespace cookie 0 is the peer's
    // initial network namespace.
    let loopback = WireIp::V4([127, 0, 0, 1]);
    let request =
        Frame::connect_request(id, (loopback, 40000), (loopback, port, 0), offer).encode_bytes();
    fabric.send_control(peer, &request)?;
    // As long as a real connect waits for its answer.
    check(
        within_ms(CONNECT_TIMEOUT_MS, || SEEN.frames() > before),
        "no answer to the connect request within the connect timeout",
    )?;
    let answer = SEEN.last_frame().ok_or_else(|| fail("a bad answer"))?;
    if answer.kind != FrameKind::Accept || answer.dst != id {
        pr_err!(
            "ivshmem peer test: node {} port {} answered {:?} ({:?})\n",
            peer,
            port,
            answer.kind,
            answer.reason
        );
        return Err(EIO);
    }
    let peer_seg: Arc<SegMem> = fabric.map_segment(peer, answer.src.slot)?;
    let theirs = answer
        .offer
        .validate(Segment::len(&peer_seg))
        .ok_or_else(|| fail("a bad queue offer"))?;
    let tx_params = theirs.params(generation);
    check(tx_params.start == params.start, "a different start cursor")?;
    let mut tx = Producer::new(
        peer_seg.clone(),
        theirs.rx_area,
        seg.clone(),
        rx_size,
        tx_params,
    )
    .map_err(|_| fail("the peer's receive area"))?;
    let mut rx = Consumer::new(
        seg.clone(),
        0,
        peer_seg.clone(),
        theirs.credit_area,
        params,
        queue::default_publish_threshold(geometry),
    )
    .map_err(|_| fail("our receive area"))?;
    let slot = answer.src.slot;
    pr_info!(
        "ivshmem peer test: connected to node {} port {} (its slot {})\n",
        peer,
        port,
        slot
    );

    // Push the payload.
    let mut buf = KVec::from_elem(0u8, 16384, GFP_KERNEL)?;
    let mut sent = 0;
    let mut idle = 0;
    while sent < PAYLOAD {
        tx.refresh().map_err(|_| fail("the peer's cursor"))?;
        let spans = tx
            .writable()
            .map_err(|_| fail("writable"))?
            .truncate((PAYLOAD - sent).min(buf.len()));
        let n = spans.total();
        if n == 0 {
            idle += 1;
            check(idle < 5000, "the peer stopped reading")?;
            if tx.prepare_wait(1).map(|d| d.notify_peer).unwrap_or(false) {
                fabric.notify(peer, slot);
            }
            sleep_ms(1);
            tx.finish_wait();
            continue;
        }
        idle = 0;
        for (i, b) in buf.as_mut_slice()[..n].iter_mut().enumerate() {
            *b = pattern(sent + i);
        }
        let mut copied = 0;
        with_kvec_iter(&mut buf.as_mut_slice()[..n], false, |iter| {
            for span in spans.iter() {
                copied += peer_seg.copy_from_iter(span, iter);
            }
        });
        check(copied == n, "a short copy into the peer's ring")?;
        if tx.commit(n).map_err(|_| fail("commit"))? {
            fabric.notify(peer, slot);
        }
        sent += n;
    }
    fabric.notify(peer, slot);

    // Read the reply.
    let mut got = KVec::new();
    for _ in 0..5000 {
        let avail = rx
            .refresh()
            .map_err(|_| fail("the peer's producer cursor"))?;
        if avail > 0 {
            let spans = rx.readable().map_err(|_| fail("readable"))?;
            let n = spans.total().min(64);
            let mut tmp = [0u8; 64];
            with_kvec_iter(&mut tmp[..n], true, |iter| {
                for span in spans.truncate(n).iter() {
                    seg.copy_to_iter(span, iter);
                }
            });
            got.extend_from_slice(&tmp[..n], GFP_KERNEL)?;
            if rx.consume_and_update(n).map_err(|_| fail("consume"))? {
                fabric.notify(peer, slot);
            }
        }
        if got.len() >= REPLY.len() || rx.peer().done_writing {
            break;
        }
        sleep_ms(1);
    }
    check(&got[..] == REPLY, "the reply did not arrive intact")?;
    pr_info!(
        "ivshmem peer test: sent {} KiB, got the reply; holding the connection for up to {} s\n",
        PAYLOAD / 1024,
        hold_s
    );

    // Hold until the peer closes (or the time is up; or this guest is killed).
    for _ in 0..hold_s.saturating_mul(20) {
        let p = rx.peer();
        if p.done_writing || p.abort || tx.peer().closed {
            break;
        }
        sleep_ms(50);
    }
    let p = rx.peer();
    let _ = tx.set_closed();
    rx.set_closed();
    fabric.notify(peer, slot);
    fabric.unexport(CHANNEL);
    pr_info!(
        "ivshmem peer test passed: the connection to node {} ended ({})\n",
        peer,
        if p.abort {
            "peer aborted"
        } else if p.done_writing {
            "peer closed"
        } else {
            "closed by us"
        }
    );
    Ok(())
}
