// SPDX-License-Identifier: GPL-2.0

//! Cursor arithmetic, cursor validation and the flag words.
//!
//! Cursors are `u64` counts of bytes ever written (producer) or consumed
//! (consumer), starting at an agreed start value. They are compared only by
//! wrapping differences, so even a start value near `u64::MAX` works; the ring
//! offset of a cursor is `cursor % ring_size` (the ring size is a power of two,
//! so this stays consistent across the `u64` wrap).

use super::error::ProtocolError;

/// Bits `shift..shift + 32` of a word.
#[allow(clippy::cast_possible_truncation)] // Extracting a field is the point.
pub(crate) const fn field32(w: u64, shift: u32) -> u32 {
    (w >> (shift & 63)) as u32
}

/// Bits `shift..shift + 16` of a word.
#[allow(clippy::cast_possible_truncation)] // Extracting a field is the point.
pub(crate) const fn field16(w: u64, shift: u32) -> u16 {
    (w >> (shift & 63)) as u16
}

/// Bits `shift..shift + 8` of a word.
#[allow(clippy::cast_possible_truncation)] // Extracting a field is the point.
pub(crate) const fn field8(w: u64, shift: u32) -> u8 {
    (w >> (shift & 63)) as u8
}

/// Bytes from cursor `from` to cursor `to` (wrapping).
pub(crate) const fn distance(from: u64, to: u64) -> u64 {
    to.wrapping_sub(from)
}

/// `cursor + n` (wrapping).
pub(crate) const fn advance(cursor: u64, n: u64) -> u64 {
    cursor.wrapping_add(n)
}

/// Validates a producer cursor `prod` loaded by the consumer.
///
/// `cons` is the consumer's own cursor, `prod_seen` the last producer cursor
/// it accepted, `ring_size` its own (trusted) ring size. Returns the bytes
/// available to read. The producer may never be behind `prod_seen` nor more
/// than `ring_size` bytes ahead of `cons`.
pub(crate) const fn check_producer(
    cons: u64,
    prod_seen: u64,
    prod: u64,
    ring_size: u64,
) -> Result<u64, ProtocolError> {
    let avail = distance(cons, prod);
    let adv = distance(prod_seen, prod);
    if adv > ring_size {
        // Either far ahead or (as a huge wrapping difference) behind.
        return if adv > u64::MAX / 2 {
            Err(ProtocolError::CursorBackwards)
        } else {
            Err(ProtocolError::CursorBeyondCapacity)
        };
    }
    if avail > ring_size {
        return Err(ProtocolError::CursorBeyondCapacity);
    }
    if adv > avail {
        return Err(ProtocolError::CursorBackwards);
    }
    Ok(avail)
}

/// Validates a consumer cursor `cons` loaded by the producer.
///
/// `cons_seen` is the last consumer cursor the producer accepted, `published`
/// the producer cursor it published. Returns the bytes still in flight
/// (published but not consumed). The consumer may never move backwards nor
/// beyond `published`.
pub(crate) const fn check_consumer(
    cons_seen: u64,
    cons: u64,
    published: u64,
) -> Result<u64, ProtocolError> {
    let adv = distance(cons_seen, cons);
    let limit = distance(cons_seen, published);
    if adv > limit {
        return if adv > u64::MAX / 2 {
            Err(ProtocolError::CursorBackwards)
        } else {
            Err(ProtocolError::CursorBeyondCapacity)
        };
    }
    Ok(distance(cons, published))
}

/// Flag bit: this side asks the peer for a notification (doorbell) on the
/// next change (producer: "writer wants space", consumer: "reader wants data").
pub(crate) const F_WANTS_NOTIFY: u8 = 0x01;
/// Producer flag bit: no more data will follow (SHUT_WR, FIN).
pub(crate) const F_DONE_WRITING: u8 = 0x02;
/// Flag bit: this side closed its socket; it will write nothing more to the
/// peer's segment (producer: implies done writing; consumer: will read
/// nothing more, writes now fail with EPIPE).
pub(crate) const F_CLOSED: u8 = 0x04;
/// Producer flag bit: the connection was aborted (RST).
pub(crate) const F_ABORT: u8 = 0x08;
/// Bits a producer flag word may carry; others are ignored.
pub(crate) const PRODUCER_BITS: u8 = F_WANTS_NOTIFY | F_DONE_WRITING | F_CLOSED | F_ABORT;
/// Bits a consumer flag word may carry; others are ignored.
pub(crate) const CONSUMER_BITS: u8 = F_WANTS_NOTIFY | F_CLOSED;

/// Mask of the wait token (24 bits).
pub(crate) const TOKEN_MASK: u32 = 0x00ff_ffff;

/// A flag word as stored in shared memory:
/// `generation << 32 | (token & 0xffffff) << 8 | bits`.
///
/// The generation ties the word to one connection: a word carrying another
/// generation (a late store from a previous connection that used the same
/// area, or a word not yet written) reads as "no flags". The token changes on
/// every wait request so that the peer rings the doorbell once per request,
/// not once per cursor update.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct FlagWord {
    /// Connection generation.
    pub(crate) generation: u32,
    /// Wait-request token (24 bits).
    pub(crate) token: u32,
    /// Flag bits (`F_*`).
    pub(crate) bits: u8,
}

impl FlagWord {
    /// Packs the word for a store.
    pub(crate) const fn pack(self) -> u64 {
        ((self.generation as u64) << 32)
            | (((self.token & TOKEN_MASK) as u64) << 8)
            | (self.bits as u64)
    }

    /// Unpacks a loaded word.
    pub(crate) const fn unpack(w: u64) -> Self {
        Self {
            generation: field32(w, 32),
            token: field32(w, 8) & TOKEN_MASK,
            bits: field8(w, 0),
        }
    }

    /// The peer's word as seen by a side expecting `generation`, keeping only
    /// `allowed` bits: a word of another generation reads as empty.
    pub(crate) const fn filtered(w: u64, generation: u32, allowed: u8) -> Self {
        let f = Self::unpack(w);
        if f.generation != generation {
            return Self {
                generation,
                token: 0,
                bits: 0,
            };
        }
        Self {
            generation,
            token: f.token,
            bits: f.bits & allowed,
        }
    }

    /// Whether the peer asks for a notification.
    pub(crate) const fn wants_notify(self) -> bool {
        self.bits & F_WANTS_NOTIFY != 0
    }
}

/// The next wait token after `t`.
pub(crate) const fn next_token(t: u32) -> u32 {
    t.wrapping_add(1) & TOKEN_MASK
}

/// Doorbell bookkeeping: which of the peer's wait requests was already
/// answered, so that each request gets exactly one notification.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct NotifyLatch {
    /// Token of the last request notified, if the request may still be pending.
    answered: Option<u32>,
}

impl NotifyLatch {
    /// Given the peer's current flag word, decides whether to notify now and
    /// records the answer.
    pub(crate) fn check(&mut self, peer: FlagWord) -> bool {
        if !peer.wants_notify() {
            // The request is withdrawn: a new one will need a new answer.
            self.answered = None;
            return false;
        }
        if self.answered == Some(peer.token) {
            return false;
        }
        self.answered = Some(peer.token);
        true
    }
}
