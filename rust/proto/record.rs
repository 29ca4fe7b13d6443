// SPDX-License-Identifier: GPL-2.0

//! Datagram records: how an implicit connection carries a datagram socket's messages
//! over a byte queue (seed §5.1.7, "Implicit Connections for Datagram Sockets").
//!
//! One record per datagram: an 8-byte header, then the payload, padded with zeros to a
//! multiple of 8 bytes:
//!
//! ```text
//! 0x00 u16 payload length (little endian)   0x02 u8 traffic class   0x03 u8 zero
//! 0x04 u32 the complement of the first word (!word0)
//! 0x08 payload, then 0..=7 bytes of padding
//! ```
//!
//! The traffic class is the byte UDP would have put in the IP header (IPv4's TOS,
//! IPv6's traffic class, ECN bits included), which a reader may ask for (`IP_RECVTOS`,
//! `IPV6_RECVTCLASS`): QUIC stacks read their ECN marks from it. Frame version 3 brought
//! it (`frame.rs`); before, the first word was the whole length.
//!
//! A writer puts a record whole or not at all (a [`Producer::reserve_within_budget`] of
//! its [`size`]): a datagram that finds no room, or finds the reader's budget (its
//! `SO_RCVBUF`) used up, is dropped, as UDP drops one that finds the receive buffer full,
//! and counted for the reader ([`Producer::count_drop`]); the writer never waits. A
//! reader takes a record whole (the part of a payload beyond the reader's buffer is
//! discarded: `MSG_TRUNC`) or, with `MSG_PEEK`, leaves it. The complement tells a header
//! from whatever a bad peer left at the cursor; a header that fails it, names a payload
//! longer than [`MAX_PAYLOAD`] or a record longer than the bytes published is a protocol
//! error ([`parse`]), which aborts the connection as any other.
//!
//! [`Producer::reserve_within_budget`]: super::queue::Producer::reserve_within_budget
//! [`Producer::count_drop`]: super::queue::Producer::count_drop

use super::error::ProtocolError;
use super::ring::{Span, Spans};

/// Bytes of a record's header.
pub(crate) const HEADER_LEN: usize = 8;

/// The longest payload a record carries: UDP's over IPv6 (65535 less its 8-byte header);
/// over IPv4 a datagram is shorter still (65507), and UDP refuses a longer one
/// (`EMSGSIZE`) before it reaches a queue.
pub(crate) const MAX_PAYLOAD: usize = 65527;

/// Record alignment: headers are always 8-byte aligned relative to the queue's start.
const ALIGN: usize = 8;

/// The bytes a record of `payload` bytes takes in the queue (header and padding
/// included), or `None` when the payload is longer than [`MAX_PAYLOAD`].
pub(crate) const fn size(payload: usize) -> Option<usize> {
    if payload > MAX_PAYLOAD {
        return None;
    }
    // No overflow: the payload is at most MAX_PAYLOAD.
    let padded = payload.wrapping_add(ALIGN - 1) & !(ALIGN - 1);
    Some(HEADER_LEN.wrapping_add(padded))
}

/// The header of a record of `payload` bytes with traffic class `tos`, or `None` when the
/// payload is longer than [`MAX_PAYLOAD`].
pub(crate) fn header(payload: usize, tos: u8) -> Option<[u8; HEADER_LEN]> {
    size(payload)?;
    let len = u16::try_from(payload).ok()?;
    let word = u32::from(len) | (u32::from(tos) << 16);
    let mut h = [0u8; HEADER_LEN];
    let (lo, hi) = h.split_at_mut(4);
    lo.copy_from_slice(&word.to_le_bytes());
    hi.copy_from_slice(&(!word).to_le_bytes());
    Some(h)
}

/// The padding that follows a payload of `payload` bytes (at most 7 zero bytes).
pub(crate) fn padding(payload: usize) -> &'static [u8] {
    const ZEROS: [u8; ALIGN] = [0; ALIGN];
    let pad = payload.wrapping_neg() & (ALIGN - 1);
    ZEROS.get(..pad).unwrap_or(&[])
}

/// A record found at a reader's cursor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Record {
    /// The datagram's length.
    pub(crate) payload: usize,
    /// Its traffic class (see the module's doc).
    pub(crate) tos: u8,
    /// The bytes the record takes in the queue ([`size`] of the payload): what the
    /// reader consumes once it took the record.
    pub(crate) size: usize,
}

/// Checks the header read at the reader's cursor against the `available` bytes the
/// queue's producer cursor published there.
pub(crate) fn parse(h: [u8; HEADER_LEN], available: u64) -> Result<Record, ProtocolError> {
    let [a, b, tos, zero, e, f, g, k] = h;
    if zero != 0 || !u32::from_le_bytes([a, b, tos, zero]) != u32::from_le_bytes([e, f, g, k]) {
        return Err(ProtocolError::BadRecord);
    }
    let payload = usize::from(u16::from_le_bytes([a, b]));
    let size = size(payload).ok_or(ProtocolError::BadRecord)?;
    if u64::try_from(size).map_or(true, |s| s > available) {
        return Err(ProtocolError::BadRecord);
    }
    Ok(Record { payload, tos, size })
}

/// Where the parts of a record go in the spans a writer reserved for it ([`size`] bytes
/// of the ring), or where they are in the spans a reader was offered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Placement {
    /// The header's 8 bytes.
    pub(crate) header: Spans,
    /// The payload.
    pub(crate) payload: Spans,
    /// The padding after it (zeros).
    pub(crate) padding: Spans,
}

impl Placement {
    /// The offset of the 8-aligned word that holds the padding and the payload's last
    /// bytes, when they share one word in one piece of the ring: a writer then stores a
    /// zero word there before it copies the payload in (which overwrites the word's first
    /// bytes), one store where copying the padding took an iterator of its own. `None`
    /// without padding, or when the word would not lie in the payload's last span and the
    /// padding's (records not 8-aligned in the segment: a start cursor that is not a
    /// multiple of 8, which a peer's older module sets): the padding is then copied.
    #[inline]
    pub(crate) fn padding_word(&self) -> Option<usize> {
        let pad = self.padding;
        if pad.second.len != 0 || pad.first.len == 0 {
            return None;
        }
        let word = pad.first.off & !(ALIGN - 1);
        let end = pad.first.off.checked_add(pad.first.len)?;
        let tail = self.payload.iter().last()?;
        // The word ends where the padding ends, and its first bytes are the payload's.
        let joined = tail.off.checked_add(tail.len) == Some(pad.first.off);
        (end % ALIGN == 0 && word < pad.first.off && joined && word >= tail.off).then_some(word)
    }
}

/// The parts of a record of `payload` bytes at the start of `spans`.
#[inline]
pub(crate) fn place(spans: Spans, payload: usize) -> Placement {
    let pad = padding(payload).len();
    // Most records lie in one piece of the ring: their parts follow one another there
    // (what [`place_cut`] computes, without its cuts).
    let first = spans.first;
    if let Some(end) = HEADER_LEN
        .checked_add(payload)
        .and_then(|n| n.checked_add(pad))
        .filter(|&n| n <= first.len)
        .and_then(|n| first.off.checked_add(n))
    {
        let one = |off: usize, len: usize| Spans {
            first: Span { off, len },
            second: Span::default(),
        };
        let body = first.off.wrapping_add(HEADER_LEN);
        return Placement {
            header: one(first.off, HEADER_LEN),
            payload: one(body, payload),
            padding: one(end.wrapping_sub(pad), pad),
        };
    }
    place_cut(spans, payload)
}

/// [`place`] by cutting `spans` part by part: a record that wraps around the ring's end
/// (or spans shorter than the record).
pub(crate) fn place_cut(spans: Spans, payload: usize) -> Placement {
    let (header, rest) = spans.split_at(HEADER_LEN);
    let (payload_spans, rest) = rest.split_at(payload);
    let padding = rest.truncate(padding(payload).len());
    Placement {
        header,
        payload: payload_spans,
        padding,
    }
}
