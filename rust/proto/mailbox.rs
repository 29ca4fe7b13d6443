// SPDX-License-Identifier: GPL-2.0

//! The control mailbox: frames between two nodes, and sequence ageing.
//!
//! One mailbox per direction and node pair. Like a queue, its slots live in
//! the RECEIVER's segment and its acknowledgement word in the SENDER's:
//!
//! ```text
//! slot area, receiver's segment              ack area, sender's segment (64 bytes)
//! slot i at i * 128: one frame (16 words,    0x00 u64 ack: low 32 bits = the next
//!   the last = sequence + CRC, stored last)       sequence number the receiver expects
//! ```
//!
//! Frame `seq` goes to slot `seq % slots`. The sender stores every word but
//! the last, then the last (Release); the receiver polls the last word of the
//! slot it expects next (Acquire): the expected sequence number means a new
//! frame, an older one means an empty slot. The sender never has more than `slots` frames
//! unacknowledged, so a slot is never rewritten while the receiver may still
//! read it. Sequence numbers start at 1, so zeroed memory is an empty
//! mailbox.
//!
//! Sequence numbers and generations are compared by *age*, as in the seed's
//! INLINE protocol: `a` is older than `b` iff `(a - b) as i32 < 0`, which
//! stays right across the 32-bit wrap as long as the two are less than 2^31
//! apart.

use super::cursor::field32;
use super::frame::{CloseReason, ConnId, Frame, FrameError, FrameKind, Reason, FRAME_WORDS};
use super::ring::{fits, AREA_ALIGN, CACHE_LINE};
use super::segment::Segment;

/// Size of a mailbox slot (one frame).
pub(crate) const MB_SLOT_SIZE: usize = super::frame::FRAME_SIZE;
/// Size of a mailbox ack area.
pub(crate) const MB_ACK_SIZE: usize = CACHE_LINE;
/// Largest slot count: 256 (log2 8).
pub(crate) const MB_MAX_SLOTS_LOG2: u32 = 8;
/// Offset of the ack word in the ack area.
pub(crate) const MB_ACK: usize = 0;
/// First sequence number a mailbox uses.
pub(crate) const MB_FIRST_SEQ: u32 = 1;

/// How two sequence numbers (or generations) compare in age.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Age {
    /// The first is older.
    Older,
    /// Equal.
    Same,
    /// The first is newer.
    Newer,
}

/// Age of `a` relative to `b`: `a` older than `b` iff `(a - b) as i32 < 0`.
pub(crate) const fn age(a: u32, b: u32) -> Age {
    let d = a.wrapping_sub(b);
    if d == 0 {
        Age::Same
    } else if d > i32::MAX as u32 {
        Age::Older
    } else {
        Age::Newer
    }
}

/// Whether `a` is older than `b`.
pub(crate) const fn seq_older(a: u32, b: u32) -> bool {
    matches!(age(a, b), Age::Older)
}

/// The generation a connection slot gets on its next use (never 0, which
/// [`ConnId::NONE`] uses).
pub(crate) const fn next_generation(g: u32) -> u32 {
    let n = g.wrapping_add(1);
    if n == 0 {
        1
    } else {
        n
    }
}

/// Why a mailbox operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MailboxError {
    /// A placement that is misaligned or does not fit its segment, or a bad
    /// slot count.
    BadPlacement,
    /// All slots hold unacknowledged frames; retry after the receiver acks.
    Full,
    /// The peer's ack went backwards or beyond what was sent: reset the link.
    BadAck,
    /// A slot holds a sequence number newer than expected: reset the link.
    SequenceJump,
    /// A frame arrived but did not decode; its slot was consumed.
    Frame(FrameError),
}

/// A validated mailbox size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MailboxGeometry {
    /// log2 of the slot count, 0..=[`MB_MAX_SLOTS_LOG2`].
    log2: u32,
}

impl MailboxGeometry {
    /// A mailbox of `1 << log2` slots.
    pub(crate) const fn from_log2(log2: u32) -> Result<Self, MailboxError> {
        if log2 > MB_MAX_SLOTS_LOG2 {
            return Err(MailboxError::BadPlacement);
        }
        Ok(Self { log2 })
    }

    /// Number of slots.
    pub(crate) const fn slots(self) -> u32 {
        1u32 << self.log2
    }

    /// Bytes of the slot area.
    pub(crate) const fn area_size(self) -> usize {
        MB_SLOT_SIZE << self.log2
    }

    /// Offset of the slot for `seq` in an area at `base`.
    const fn slot_off(self, base: usize, seq: u32) -> usize {
        let idx = (seq & (self.slots().wrapping_sub(1))) as usize;
        base.saturating_add(idx.saturating_mul(MB_SLOT_SIZE))
    }

    /// Checks a slot area at `base` in a segment of `seg_len` bytes.
    fn check_slots(self, seg_len: usize, base: usize) -> Result<(), MailboxError> {
        if base % AREA_ALIGN != 0 || !fits(seg_len, base, self.area_size()) {
            return Err(MailboxError::BadPlacement);
        }
        Ok(())
    }
}

/// Checks an ack area at `base` in a segment of `seg_len` bytes.
fn check_ack(seg_len: usize, base: usize) -> Result<(), MailboxError> {
    if base % AREA_ALIGN != 0 || !fits(seg_len, base, MB_ACK_SIZE) {
        return Err(MailboxError::BadPlacement);
    }
    Ok(())
}

/// Offset of word `i` of the frame in the slot at `off`.
const fn word_off(off: usize, i: usize) -> usize {
    off.saturating_add(i.saturating_mul(8))
}

/// Zeroes a slot area in the receiver's own segment (before announcing it).
pub(crate) fn init_slots<S: Segment>(
    seg: &S,
    base: usize,
    geom: MailboxGeometry,
) -> Result<(), MailboxError> {
    geom.check_slots(seg.len(), base)?;
    let words = geom.area_size() / 8;
    for i in 0..words {
        seg.store_u64(word_off(base, i), 0);
    }
    Ok(())
}

/// Initializes an ack area in the sender's own segment (before announcing it).
pub(crate) fn init_ack<S: Segment>(seg: &S, base: usize) -> Result<(), MailboxError> {
    check_ack(seg.len(), base)?;
    seg.store_u64(base.saturating_add(MB_ACK), u64::from(MB_FIRST_SEQ));
    Ok(())
}

/// The sending end of a mailbox.
#[derive(Debug)]
pub(crate) struct MailboxTx<R: Segment, L: Segment> {
    /// Receiver's segment with the slot area (remote: stores only).
    slots: R,
    /// Base of the slot area.
    slots_base: usize,
    /// Own segment with the ack area (local: loads only).
    ack: L,
    /// Base of the ack area.
    ack_base: usize,
    /// Slot count.
    geom: MailboxGeometry,
    /// Sequence number of the next frame.
    next: u32,
    /// Last validated ack (next sequence the receiver expects).
    acked: u32,
}

impl<R: Segment, L: Segment> MailboxTx<R, L> {
    /// The sender over the peer's slot area at `slots_base` in `slots` and
    /// the own ack area (initialized with [`init_ack`]) at `ack_base` in `ack`.
    pub(crate) fn new(
        slots: R,
        slots_base: usize,
        ack: L,
        ack_base: usize,
        geom: MailboxGeometry,
    ) -> Result<Self, MailboxError> {
        geom.check_slots(slots.len(), slots_base)?;
        check_ack(ack.len(), ack_base)?;
        Ok(Self {
            slots,
            slots_base,
            ack,
            ack_base,
            geom,
            next: MB_FIRST_SEQ,
            acked: MB_FIRST_SEQ,
        })
    }

    /// Frames sent and not yet acknowledged (as of the last check).
    pub(crate) fn unacked(&self) -> u32 {
        self.next.wrapping_sub(self.acked)
    }

    /// Loads and validates the receiver's ack (local); returns the frames
    /// still unacknowledged.
    pub(crate) fn refresh(&mut self) -> Result<u32, MailboxError> {
        let ack = field32(self.ack.load_u64(self.ack_base.saturating_add(MB_ACK)), 0);
        let adv = ack.wrapping_sub(self.acked);
        if adv > self.next.wrapping_sub(self.acked) {
            return Err(MailboxError::BadAck);
        }
        self.acked = ack;
        Ok(self.unacked())
    }

    /// Sends `frame` (its `seq` is replaced) and returns its sequence number.
    /// On `Ok` the caller rings the peer's doorbell.
    pub(crate) fn send(&mut self, frame: &Frame) -> Result<u32, MailboxError> {
        if self.refresh()? >= self.geom.slots() {
            return Err(MailboxError::Full);
        }
        let mut f = *frame;
        f.seq = self.next;
        let words = f.encode();
        let off = self.geom.slot_off(self.slots_base, self.next);
        let (body, last) = words.split_at(FRAME_WORDS - 1);
        for (i, w) in body.iter().enumerate() {
            self.slots.store_u64(word_off(off, i), *w);
        }
        for w in last {
            self.slots.store_u64(word_off(off, FRAME_WORDS - 1), *w);
        }
        let seq = self.next;
        self.next = self.next.wrapping_add(1);
        Ok(seq)
    }
}

/// The receiving end of a mailbox.
#[derive(Debug)]
pub(crate) struct MailboxRx<L: Segment, R: Segment> {
    /// Own segment with the slot area (local: loads only).
    slots: L,
    /// Base of the slot area.
    slots_base: usize,
    /// Sender's segment with the ack area (remote: stores only).
    ack: R,
    /// Base of the ack area.
    ack_base: usize,
    /// Slot count.
    geom: MailboxGeometry,
    /// Sequence number expected next.
    expected: u32,
}

impl<L: Segment, R: Segment> MailboxRx<L, R> {
    /// The receiver over the own slot area (initialized with [`init_slots`])
    /// at `slots_base` in `slots` and the peer's ack area at `ack_base` in `ack`.
    pub(crate) fn new(
        slots: L,
        slots_base: usize,
        ack: R,
        ack_base: usize,
        geom: MailboxGeometry,
    ) -> Result<Self, MailboxError> {
        geom.check_slots(slots.len(), slots_base)?;
        check_ack(ack.len(), ack_base)?;
        Ok(Self {
            slots,
            slots_base,
            ack,
            ack_base,
            geom,
            expected: MB_FIRST_SEQ,
        })
    }

    /// Takes the next frame, if one arrived: `Ok(None)` when the mailbox is
    /// empty. A frame that fails to decode is consumed and reported as
    /// [`MailboxError::Frame`]; poll again for the next. One call does a
    /// bounded amount of work.
    pub(crate) fn poll(&mut self) -> Result<Option<Frame>, MailboxError> {
        let off = self.geom.slot_off(self.slots_base, self.expected);
        let last = self.slots.load_u64(word_off(off, FRAME_WORDS - 1));
        match slot_age(last, self.expected) {
            Age::Older => return Ok(None),
            Age::Newer => return Err(MailboxError::SequenceJump),
            Age::Same => {}
        }
        let mut words = [0u64; FRAME_WORDS];
        for (i, w) in words.iter_mut().enumerate() {
            *w = if i == FRAME_WORDS - 1 {
                last
            } else {
                self.slots.load_u64(word_off(off, i))
            };
        }
        self.expected = self.expected.wrapping_add(1);
        self.ack.store_u64(
            self.ack_base.saturating_add(MB_ACK),
            u64::from(self.expected),
        );
        Frame::decode(&words).map(Some).map_err(MailboxError::Frame)
    }
}

impl<L: Segment, R: Segment> MailboxRx<L, R> {
    /// The sequence number expected next (what [`MailboxPeek::frame_waiting`] is asked
    /// with).
    pub(crate) fn expected(&self) -> u32 {
        self.expected
    }
}

/// Age of the sequence number in a slot's last word against the one expected: `Same`,
/// a new frame; `Older`, an empty slot; `Newer`, a sender that broke the protocol.
fn slot_age(last: u64, expected: u32) -> Age {
    age(field32(last, 0), expected)
}

/// Whether a frame waits in a receiver's slot area, asked without the receiver: where
/// the receiver's lock may not be taken (the fabric's softirq stage decides with it
/// whether its thread must run). It reads what [`MailboxRx::poll`] reads first and
/// changes nothing; the receiver publishes the `expected` it asks with.
#[derive(Clone, Debug)]
pub(crate) struct MailboxPeek<L: Segment> {
    /// The receiver's segment with the slot area (loads only).
    slots: L,
    /// Base of the slot area.
    slots_base: usize,
    /// Slot count.
    geom: MailboxGeometry,
}

impl<L: Segment> MailboxPeek<L> {
    /// A look at the slot area at `slots_base` in `slots`, which a [`MailboxRx`] over the
    /// same area polls (checked as [`MailboxRx::new`] checks it).
    pub(crate) fn new(
        slots: L,
        slots_base: usize,
        geom: MailboxGeometry,
    ) -> Result<Self, MailboxError> {
        geom.check_slots(slots.len(), slots_base)?;
        Ok(Self {
            slots,
            slots_base,
            geom,
        })
    }

    /// Whether [`MailboxRx::poll`] of a receiver expecting `expected` would find
    /// something: a frame, or a sequence jump (which the receiver must see too). A stale
    /// `expected` (older than the receiver's) only makes it say yes once too often.
    pub(crate) fn frame_waiting(&self, expected: u32) -> bool {
        let off = self.geom.slot_off(self.slots_base, expected);
        let last = self.slots.load_u64(word_off(off, FRAME_WORDS - 1));
        !matches!(slot_age(last, expected), Age::Older)
    }
}

/// What the receiving node knows about the connection slot a frame names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlotView {
    /// The slot's current connection id (its current generation).
    pub(crate) local: ConnId,
    /// The peer's id, once known (set by the accept on the connector side and
    /// by the request on the listener side).
    pub(crate) peer: Option<ConnId>,
    /// A connect request from this slot awaits its accept or reject.
    pub(crate) awaiting_answer: bool,
}

/// Where a received frame goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// A connect request: to the listener kthread.
    Listener,
    /// For the connection in the named slot: hand it over.
    Deliver,
    /// For an older connection that used the slot (or a freed slot): drop it.
    /// If `answer_abandoned`, answer with a `Close(Abandoned)` to the frame's
    /// source so the peer frees its half (a late accept of an abandoned
    /// connect).
    Stale {
        /// Answer with [`CloseReason::Abandoned`].
        answer_abandoned: bool,
    },
    /// Cannot be right (a generation this node never issued, an answer
    /// nobody waits for, a close from a stranger): drop and count it.
    Bogus,
}

/// Routes `frame` given the slot its `dst.slot` names (`None`: no such slot
/// or the slot is free). This is the sequence-ageing check that keeps
/// messages for an old connection from reaching a new one in the same slot.
pub(crate) fn route(frame: &Frame, slot: Option<&SlotView>) -> Route {
    let stale_answer = frame.kind == FrameKind::Accept;
    if frame.kind == FrameKind::ConnectRequest {
        return Route::Listener;
    }
    let v = match slot {
        Some(v) if v.local.slot == frame.dst.slot => v,
        // The slot was freed: whatever this was for is gone.
        _ => {
            return Route::Stale {
                answer_abandoned: stale_answer,
            }
        }
    };
    match age(frame.dst.generation, v.local.generation) {
        Age::Older => {
            return Route::Stale {
                answer_abandoned: stale_answer,
            }
        }
        Age::Newer => return Route::Bogus,
        Age::Same => {}
    }
    match frame.kind {
        FrameKind::Accept | FrameKind::Reject => {
            if v.awaiting_answer {
                Route::Deliver
            } else {
                Route::Bogus
            }
        }
        FrameKind::Close => match v.peer {
            Some(p) if p == frame.src => Route::Deliver,
            Some(p)
                if p.slot == frame.src.slot && seq_older(frame.src.generation, p.generation) =>
            {
                Route::Stale {
                    answer_abandoned: false,
                }
            }
            // The connector abandons before our accept reached it: the close
            // names us but we never learned its id from an accept; the
            // listener side always knows the connector's id from the request.
            _ => Route::Bogus,
        },
        FrameKind::ConnectRequest => Route::Listener,
    }
}

/// Whether a `Close` frame says abort (as opposed to graceful/abandoned).
pub(crate) const fn is_abort(frame: &Frame) -> bool {
    matches!(frame.reason, Reason::Close(CloseReason::Abort))
}
