// SPDX-License-Identifier: GPL-2.0

//! A connection's part in a direct receive (`fabric/direct.rs`): one copy for large
//! transfers when both ends are in this kernel.
//!
//! The reader posts what is left of its buffer right before it sleeps on an empty ring,
//! and takes it back as soon as it wakes, before it looks at the ring again; the writer
//! fills a posted buffer only while the ring is empty. So every byte a direct fill
//! delivers follows every byte the reader took from the ring, and precedes every byte
//! the writer puts into the ring after it. `MSG_PEEK`, non-blocking calls, kernel
//! callers (their buffers are not user memory) and connections between machines always
//! use the ring.
//!
//! What the ring path promises holds here too: a `recv` that a signal or its timeout
//! ends returns what a fill delivered (the fill is a copy in progress, waited out);
//! `MSG_WAITALL` goes on after a partial fill; a writer that faults on its own buffer
//! delivers what it copied and reports it as a short send.

use super::Tx;
use crate::fabric::memory::SegMem;
use crate::sys::bindings;
use crate::sys::params::{direct_min, DIRECT_MAX};
use crate::sys::pinned::PinnedBuf;

/// Reader: posts the next `left` bytes of its buffer `iter` (at most [`DIRECT_MAX`]) in
/// its segment `seg` for the writer to fill, when the buffer is large enough
/// (`direct_min`), the writer's sends have been too, and the segment has a slot (both
/// ends in this kernel). True when it posted: the caller then must call [`take_back`]
/// after its wait, before anything else touches `iter`.
pub(super) fn post(seg: &SegMem, left: usize, iter: *mut bindings::iov_iter) -> bool {
    let min = direct_min();
    let Some(slot) = seg.direct() else {
        return false;
    };
    if min == 0 || left < min || !slot.large_sends() {
        return false;
    }
    let Some(buf) = PinnedBuf::pin(iter, left.min(DIRECT_MAX)) else {
        return false;
    };
    if buf.len() < min {
        // Only the first of several buffers (`readv`) is pinned, and it is small.
        buf.give_back(0, iter);
        return false;
    }
    match slot.post(buf) {
        Ok(()) => true,
        Err(buf) => {
            // Another reader of this socket has a buffer posted.
            buf.give_back(0, iter);
            false
        }
    }
}

/// Reader: whether the buffer it posted in `seg` was filled (its wait is over).
pub(super) fn filled(seg: &SegMem) -> bool {
    seg.direct().is_some_and(|slot| slot.taken())
}

/// Reader: takes back the buffer it posted in `seg` ([`post`]) and moves `iter` to just
/// past what the writer filled; returns the bytes filled.
pub(super) fn take_back(seg: &SegMem, iter: *mut bindings::iov_iter) -> usize {
    let Some((buf, n)) = seg.direct().and_then(|slot| slot.take_back()) else {
        return 0;
    };
    buf.give_back(n, iter);
    n
}

/// Writer: tells the reader's slot whether this send (`len` bytes) is large, so the
/// reader posts buffers only while sends are.
pub(super) fn note_send(peer_seg: &SegMem, len: usize) {
    if let Some(slot) = peer_seg.direct() {
        let min = direct_min();
        slot.note_send(min != 0 && len >= min);
    }
}

/// Writer: copies up to `want` bytes from `iter` straight into the buffer the reader
/// posted in `peer_seg`, if one is posted and the ring `tx` is empty (every byte written
/// before was read, none is held back). Returns `(copied, tried)` (`copied < tried`: a
/// fault in the writer's buffer), `None` when the bytes must go through the ring.
/// Called under the connection's lock, with `tx` refreshed.
pub(super) fn send(
    peer_seg: &SegMem,
    tx: &Tx,
    want: usize,
    iter: *mut bindings::iov_iter,
) -> Option<(usize, usize)> {
    if want == 0 || tx.unconsumed() != 0 {
        return None;
    }
    let slot = peer_seg.direct()?;
    let mut buf = slot.claim()?;
    let tried = want.min(buf.len());
    let copied = buf.fill(tried, iter);
    slot.fill_done(buf, copied);
    Some((copied, tried))
}
