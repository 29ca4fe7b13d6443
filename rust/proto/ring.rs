// SPDX-License-Identifier: GPL-2.0

//! Ring geometry, area layout and span arithmetic.
//!
//! A queue has two areas (offsets relative to the area's base, which must be
//! [`AREA_ALIGN`]-aligned inside its segment):
//!
//! ```text
//! receive area, in the RECEIVER's segment           credit area, in the SENDER's segment
//! 0x00 u32 magic "SCIQ"   ┐ line 0: written once     0x00 u64 consumer cursor ┐ line 0: written by
//! 0x04 u32 version        │ by the receiver at       0x08 u64 consumer flags  │ the receiver
//! 0x08 u64 ring size      │ creation, never again    0x10 u64 budget          │ (remote stores)
//! 0x10 u64 generation     │                          0x18 .. 0x40 reserved    ┘
//! 0x18 u64 start cursor   ┘
//! 0x40 u64 producer cursor ┐ line 1: written by the sender (remote stores)
//! 0x48 u64 producer flags  │
//! 0x50 u64 drops           ┘
//! 0x80 ring data, ring size bytes (written by the sender)
//! ```
//!
//! The budget and drop words serve datagram queues (`record.rs`) and came after the
//! first layout: each is `generation << 32 | value`, zero until its writer stores one,
//! so a peer that knows neither leaves them zero and the queue works as before (no
//! budget, no drops reported).

use super::error::ProtocolError;

/// Cache line size the layout is built around; each side's written fields sit
/// on their own line.
pub(crate) const CACHE_LINE: usize = 64;

/// Alignment required of every area's base offset inside its segment.
pub(crate) const AREA_ALIGN: usize = CACHE_LINE;

/// Smallest ring: 64 bytes (tests use tiny rings to exercise wrap-around; the
/// kernel picks far larger ones).
pub(crate) const MIN_RING_LOG2: u32 = 6;

/// Largest ring: 1 GiB.
pub(crate) const MAX_RING_LOG2: u32 = 30;

/// `"SCIQ"` as a little-endian u32: the receive area's magic.
pub(crate) const QUEUE_MAGIC: u32 = u32::from_le_bytes(*b"SCIQ");

/// Layout version of the queue areas.
pub(crate) const QUEUE_VERSION: u32 = 1;

/// Receive area: u32 magic ([`QUEUE_MAGIC`]).
pub(crate) const RX_MAGIC: usize = 0x00;
/// Receive area: u32 layout version ([`QUEUE_VERSION`]).
pub(crate) const RX_VERSION: usize = 0x04;
/// Receive area: u64 ring size in bytes (informative: the receiver trusts its own copy).
pub(crate) const RX_RING_SIZE: usize = 0x08;
/// Receive area: u64 connection generation (low 32 bits).
pub(crate) const RX_GENERATION: usize = 0x10;
/// Receive area: u64 start cursor both cursors began at.
pub(crate) const RX_START: usize = 0x18;
/// Receive area: u64 producer cursor (sender's line).
pub(crate) const RX_PROD_CURSOR: usize = 0x40;
/// Receive area: u64 producer flag word (sender's line), see [`FlagWord`](super::cursor::FlagWord).
pub(crate) const RX_PROD_FLAGS: usize = 0x48;
/// Receive area: u64 datagrams the sender dropped at a full ring, a running count
/// (sender's line; `generation << 32 | count`).
pub(crate) const RX_PROD_DROPS: usize = 0x50;
/// Receive area: first byte of the ring data (128-aligned, like SCI's stream buffers).
pub(crate) const RX_DATA: usize = 0x80;

/// Credit area: u64 consumer cursor (receiver's line).
pub(crate) const CREDIT_CONS_CURSOR: usize = 0x00;
/// Credit area: u64 consumer flag word (receiver's line).
pub(crate) const CREDIT_CONS_FLAGS: usize = 0x08;
/// Credit area: u64 the bytes the reader lets wait in the ring, a datagram receiver's
/// `SO_RCVBUF` (receiver's line; `generation << 32 | bytes`, 0 bytes: the whole ring).
pub(crate) const CREDIT_BUDGET: usize = 0x10;
/// Size of a credit area.
pub(crate) const CREDIT_AREA_SIZE: usize = CACHE_LINE;

/// A validated ring size: a power of two in
/// [`MIN_RING_LOG2`]..=[`MAX_RING_LOG2`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RingGeometry {
    /// log2 of the ring size, always within bounds.
    log2: u32,
}

impl RingGeometry {
    /// Geometry of a ring of `1 << log2` bytes.
    pub(crate) const fn from_log2(log2: u32) -> Result<Self, ProtocolError> {
        if log2 < MIN_RING_LOG2 || log2 > MAX_RING_LOG2 {
            return Err(ProtocolError::BadRingSize);
        }
        Ok(Self { log2 })
    }

    /// Geometry of a ring of `size` bytes.
    pub(crate) const fn from_size(size: u64) -> Result<Self, ProtocolError> {
        if !size.is_power_of_two() {
            return Err(ProtocolError::BadRingSize);
        }
        Self::from_log2(size.trailing_zeros())
    }

    /// log2 of the ring size.
    pub(crate) const fn log2(self) -> u32 {
        self.log2
    }

    /// Ring size in bytes.
    pub(crate) const fn size(self) -> u64 {
        // log2 <= MAX_RING_LOG2 < 64.
        1u64 << self.log2
    }

    /// Ring size in bytes as a `usize` (at most 1 GiB, fits on every target).
    pub(crate) const fn size_usize(self) -> usize {
        1usize << self.log2
    }

    /// Ring offset of a cursor: `cursor % size`.
    pub(crate) fn index(self, cursor: u64) -> usize {
        // The masked value is below the size, which fits in usize.
        clamp_to_usize(cursor & self.size().wrapping_sub(1), self.size_usize())
    }

    /// Bytes of a receive area with this ring (header + data).
    pub(crate) const fn rx_area_size(self) -> usize {
        RX_DATA.saturating_add(self.size_usize())
    }

    /// The (at most two) contiguous spans covering `len` bytes of the ring
    /// starting at `cursor`, as offsets from the ring's first byte plus
    /// `data_base`. `len` is clamped to the ring size.
    pub(crate) fn spans(self, data_base: usize, cursor: u64, len: u64) -> Spans {
        let len = clamp_to_usize(len, self.size_usize());
        let idx = self.index(cursor);
        let to_end = self.size_usize().saturating_sub(idx);
        let first_len = if len < to_end { len } else { to_end };
        let second_len = len.saturating_sub(first_len);
        Spans {
            first: Span {
                off: data_base.saturating_add(idx),
                len: first_len,
            },
            second: Span {
                off: data_base,
                len: second_len,
            },
        }
    }
}

/// `v` as a `usize`, clamped to `max`.
pub(crate) fn clamp_to_usize(v: u64, max: usize) -> usize {
    match usize::try_from(v) {
        Ok(v) if v <= max => v,
        _ => max,
    }
}

/// Whether `[off, off + len)` lies inside a segment of `seg_len` bytes.
pub(crate) fn fits(seg_len: usize, off: usize, len: usize) -> bool {
    match off.checked_add(len) {
        Some(end) => end <= seg_len,
        None => false,
    }
}

/// Checks that a receive area for `geom` at `base` is aligned and fits in a
/// segment of `seg_len` bytes.
pub(crate) fn check_rx_area(
    seg_len: usize,
    base: usize,
    geom: RingGeometry,
) -> Result<(), ProtocolError> {
    if base % AREA_ALIGN != 0 || !fits(seg_len, base, geom.rx_area_size()) {
        return Err(ProtocolError::BadPlacement);
    }
    Ok(())
}

/// Checks that a credit area at `base` is aligned and fits in a segment of
/// `seg_len` bytes.
pub(crate) fn check_credit_area(seg_len: usize, base: usize) -> Result<(), ProtocolError> {
    if base % AREA_ALIGN != 0 || !fits(seg_len, base, CREDIT_AREA_SIZE) {
        return Err(ProtocolError::BadPlacement);
    }
    Ok(())
}

/// One contiguous range of a segment: `len` bytes at segment offset `off`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Span {
    /// Offset from the start of the segment.
    pub(crate) off: usize,
    /// Length in bytes (may be 0).
    pub(crate) len: usize,
}

/// Up to two spans: a ring region that may wrap around the ring's end.
///
/// `second` is empty unless `first` reaches the ring's end; when it is not,
/// `second` starts at the ring's first byte.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Spans {
    /// The part starting at the cursor.
    pub(crate) first: Span,
    /// The wrapped part, starting at the ring's first byte.
    pub(crate) second: Span,
}

impl Spans {
    /// Total bytes covered.
    pub(crate) fn total(&self) -> usize {
        self.first.len.saturating_add(self.second.len)
    }

    /// Whether no byte is covered.
    pub(crate) fn is_empty(&self) -> bool {
        self.total() == 0
    }

    /// The same region cut down to its first `max` bytes.
    pub(crate) fn truncate(self, max: usize) -> Spans {
        let first_len = if self.first.len < max {
            self.first.len
        } else {
            max
        };
        let rest = max.saturating_sub(first_len);
        let second_len = if self.second.len < rest {
            self.second.len
        } else {
            rest
        };
        Spans {
            first: Span {
                off: self.first.off,
                len: first_len,
            },
            second: Span {
                off: self.second.off,
                len: second_len,
            },
        }
    }

    /// The region's first `n` bytes and the rest (a record's header and its payload).
    pub(crate) fn split_at(self, n: usize) -> (Spans, Spans) {
        let head = self.truncate(n);
        let first_len = self.first.len.saturating_sub(n);
        let rest_n = n.saturating_sub(self.first.len);
        let tail = if first_len > 0 {
            Spans {
                first: Span {
                    off: self.first.off.saturating_add(n),
                    len: first_len,
                },
                second: self.second,
            }
        } else {
            Spans {
                first: Span {
                    off: self.second.off.saturating_add(rest_n),
                    len: self.second.len.saturating_sub(rest_n),
                },
                second: Span::default(),
            }
        };
        (head, tail)
    }

    /// The non-empty spans, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = Span> {
        [self.first, self.second].into_iter().filter(|s| s.len != 0)
    }
}
