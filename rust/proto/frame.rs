// SPDX-License-Identifier: GPL-2.0

//! Control messages: fixed-size, versioned, checksummed frames.
//!
//! A frame is 128 bytes, sixteen little-endian `u64` words, so that the
//! mailbox moves it with aligned word stores, the last one (sequence number +
//! CRC) stored last:
//!
//! ```text
//! 0x00 u32 magic "SCIM"   0x04 u8 version   0x05 u8 kind   0x06 u16 flags
//! 0x08 u32 src slot       0x0c u32 src generation     (the sender's connection id)
//! 0x10 u32 dst slot       0x14 u32 dst generation     (the receiver's; NONE in a request)
//! 0x18 u16 src port       0x1a u16 dst port           (host order)
//! 0x1c u8 ring log2       0x1d u8 reason
//! 0x1e u8 src family      0x1f u8 dst family          (0 none, 4 IPv4, 6 IPv6)
//! 0x20 u64 rx area offset   (sender's receive area in its segment)
//! 0x28 u64 credit offset    (sender's credit area in its segment)
//! 0x30 u64 start cursor     (of the queue the sender receives on)
//! 0x38 16 bytes src address (the connector's IP in a request, the listener's in an accept)
//! 0x48 16 bytes dst address (the IP the connector dialled, in a request)
//! 0x58 u64 namespace        (a request's network namespace, see below)
//! 0x60 24 bytes reserved (0)
//! 0x78 u32 sequence number  0x7c u32 CRC-32 of bytes 0x00..0x7c
//! ```
//!
//! Requests and accepts carry both addresses, so that either end reports the
//! names TCP would (`getsockname`/`getpeername`) and a listener bound to one
//! address is told apart from one bound to another on the same port. An IPv4
//! address takes the first four address bytes; the rest are zero.
//!
//! The namespace of a request names the network namespace of the listener it
//! is for: 0 is the receiving node's initial namespace; any other value is a
//! namespace cookie of the receiving node, which only a connector on the same
//! node can know (a loopback connection stays inside its namespace, as TCP
//! over `lo` does).
//!
//! The flags are 0 but in a request for an implicit connection of datagram
//! sockets and in its accept, which carry [`FLAG_DATAGRAM`]: such a request is
//! served by the datagram socket bound to the destination address and port, not
//! by a listener (seed §5.1.7). A node that does not know the flag drops the
//! request as malformed, and the sender's datagrams go on over UDP.
//!
//! Version 1 frames (64 bytes, no addresses) are refused as a version
//! mismatch.

use super::cursor::{field16, field32, field8};
use super::queue::QueueParams;
use super::ring::{self, RingGeometry, CREDIT_AREA_SIZE};

/// Frame size in bytes.
pub(crate) const FRAME_SIZE: usize = 128;
/// Frame size in words.
pub(crate) const FRAME_WORDS: usize = 16;
/// The flag of a request (and its accept) for an implicit connection between
/// datagram sockets.
pub(crate) const FLAG_DATAGRAM: u16 = 1;
/// `"SCIM"` as a little-endian u32.
pub(crate) const FRAME_MAGIC: u32 = u32::from_le_bytes(*b"SCIM");
/// The frame format version this code speaks. Nodes of different versions do not
/// connect (their sockets take TCP and UDP). 3: datagram records carry the traffic class
/// (`record.rs`).
pub(crate) const FRAME_VERSION: u8 = 3;

/// Kinds of control message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FrameKind {
    /// Connector → listener: open a connection to `dst_port`, here is my
    /// receive queue.
    ConnectRequest,
    /// Listener → connector: accepted, here is my receive queue.
    Accept,
    /// Listener → connector: refused (see [`RejectReason`]); the connector
    /// falls back to TCP.
    Reject,
    /// Either side: the connection is gone (see [`CloseReason`]). Used when
    /// the queues cannot carry the news: an abandoned connect, a late accept
    /// for a slot that moved on, a peer that stopped answering.
    Close,
}

impl FrameKind {
    /// Wire value.
    const fn to_wire(self) -> u8 {
        match self {
            FrameKind::ConnectRequest => 1,
            FrameKind::Accept => 2,
            FrameKind::Reject => 3,
            FrameKind::Close => 4,
        }
    }

    /// Whether frames of this kind carry a queue offer and both addresses.
    pub(crate) const fn carries_offer(self) -> bool {
        matches!(self, FrameKind::ConnectRequest | FrameKind::Accept)
    }

    /// From the wire value.
    const fn from_wire(v: u8) -> Option<Self> {
        match v {
            1 => Some(FrameKind::ConnectRequest),
            2 => Some(FrameKind::Accept),
            3 => Some(FrameKind::Reject),
            4 => Some(FrameKind::Close),
            _ => None,
        }
    }
}

/// Why a connect request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RejectReason {
    /// No AF_SCI listener on that port.
    NoListener,
    /// The listener's accept queue is full.
    BacklogFull,
    /// No memory or segment space for the queues.
    NoResources,
    /// Frame version or queue layout not supported.
    Version,
    /// Refused by policy (excluded port, disabled node).
    Policy,
    /// The request's queue offer was invalid.
    BadOffer,
}

/// Why a connection is closed through the mailbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CloseReason {
    /// Orderly close.
    Graceful,
    /// Abort (RST).
    Abort,
    /// The connector gave up before the answer arrived (timeout or close).
    Abandoned,
}

/// Frame reason byte values: reject reasons 1..=6, close reasons 16..=18.
const fn reason_to_wire(kind: FrameKind, r: Reason) -> u8 {
    match (kind, r) {
        (FrameKind::Reject, Reason::Reject(r)) => match r {
            RejectReason::NoListener => 1,
            RejectReason::BacklogFull => 2,
            RejectReason::NoResources => 3,
            RejectReason::Version => 4,
            RejectReason::Policy => 5,
            RejectReason::BadOffer => 6,
        },
        (FrameKind::Close, Reason::Close(r)) => match r {
            CloseReason::Graceful => 16,
            CloseReason::Abort => 17,
            CloseReason::Abandoned => 18,
        },
        _ => 0,
    }
}

/// Decodes the reason byte for `kind`.
const fn reason_from_wire(kind: FrameKind, v: u8) -> Option<Reason> {
    match kind {
        FrameKind::ConnectRequest | FrameKind::Accept => {
            if v == 0 {
                Some(Reason::None)
            } else {
                None
            }
        }
        FrameKind::Reject => match v {
            1 => Some(Reason::Reject(RejectReason::NoListener)),
            2 => Some(Reason::Reject(RejectReason::BacklogFull)),
            3 => Some(Reason::Reject(RejectReason::NoResources)),
            4 => Some(Reason::Reject(RejectReason::Version)),
            5 => Some(Reason::Reject(RejectReason::Policy)),
            6 => Some(Reason::Reject(RejectReason::BadOffer)),
            _ => None,
        },
        FrameKind::Close => match v {
            16 => Some(Reason::Close(CloseReason::Graceful)),
            17 => Some(Reason::Close(CloseReason::Abort)),
            18 => Some(Reason::Close(CloseReason::Abandoned)),
            _ => None,
        },
    }
}

/// The reason carried by a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reason {
    /// Requests and accepts carry none.
    None,
    /// A reject's reason.
    Reject(RejectReason),
    /// A close's reason.
    Close(CloseReason),
}

/// A connection's identity on one node: its slot in the connection table and
/// the slot's generation (bumped on every reuse of the slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ConnId {
    /// Slot index.
    pub(crate) slot: u32,
    /// Generation of the slot when the connection was created.
    pub(crate) generation: u32,
}

impl ConnId {
    /// "No connection yet" (the destination of a connect request).
    pub(crate) const NONE: ConnId = ConnId {
        slot: u32::MAX,
        generation: 0,
    };

    /// Packs into a word: slot low, generation high.
    const fn pack(self) -> u64 {
        (self.slot as u64) | ((self.generation as u64) << 32)
    }

    /// Unpacks a word.
    const fn unpack(w: u64) -> Self {
        ConnId {
            slot: field32(w, 0),
            generation: field32(w, 32),
        }
    }
}

/// A receive queue offered by the frame's sender (raw, unvalidated).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct QueueOffer {
    /// log2 of the ring size.
    pub(crate) ring_log2: u8,
    /// Offset of the sender's receive area in its segment.
    pub(crate) rx_area: u64,
    /// Offset of the sender's credit area (for the other direction) in its segment.
    pub(crate) credit_area: u64,
    /// Start cursor of the queue the sender receives on.
    pub(crate) start: u64,
}

/// A validated queue offer, ready for [`Producer::new`] /
/// [`Consumer::new`](super::queue::Consumer::new).
///
/// [`Producer::new`]: super::queue::Producer::new
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ValidOffer {
    /// Ring size of the offered receive queue.
    pub(crate) geometry: RingGeometry,
    /// Offset of the offered receive area in the peer's segment.
    pub(crate) rx_area: usize,
    /// Offset of the offered credit area in the peer's segment.
    pub(crate) credit_area: usize,
    /// Start cursor of the offered receive queue.
    pub(crate) start: u64,
}

impl ValidOffer {
    /// The parameters of the queue this side will *produce* into (the peer's
    /// receive queue), for a connection of `generation`.
    pub(crate) const fn params(&self, generation: u32) -> QueueParams {
        QueueParams {
            geometry: self.geometry,
            generation,
            start: self.start,
        }
    }
}

impl QueueOffer {
    /// Validates the offer against the length of the peer's segment as this
    /// side mapped it (never against anything the peer says about it): ring
    /// size in range, areas aligned, inside the segment and not overlapping.
    pub(crate) fn validate(&self, peer_seg_len: usize) -> Option<ValidOffer> {
        let geometry = RingGeometry::from_log2(self.ring_log2 as u32).ok()?;
        let rx_area = usize::try_from(self.rx_area).ok()?;
        let credit_area = usize::try_from(self.credit_area).ok()?;
        ring::check_rx_area(peer_seg_len, rx_area, geometry).ok()?;
        ring::check_credit_area(peer_seg_len, credit_area).ok()?;
        let rx_end = rx_area.checked_add(geometry.rx_area_size())?;
        let credit_end = credit_area.checked_add(CREDIT_AREA_SIZE)?;
        if rx_area < credit_end && credit_area < rx_end {
            return None;
        }
        Some(ValidOffer {
            geometry,
            rx_area,
            credit_area,
            start: self.start,
        })
    }
}

/// An IP address as a frame carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WireIp {
    /// No address (rejects and closes).
    None,
    /// An IPv4 address.
    V4([u8; 4]),
    /// An IPv6 address.
    V6([u8; 16]),
}

impl WireIp {
    /// The family byte and the 16 address bytes.
    const fn to_wire(self) -> (u8, [u8; 16]) {
        match self {
            WireIp::None => (0, [0; 16]),
            WireIp::V4([a, b, c, d]) => (4, [a, b, c, d, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            WireIp::V6(b) => (6, b),
        }
    }

    /// From the family byte and the address bytes: `None` for an unknown
    /// family or bytes that do not belong to it (non-zero padding).
    fn from_wire(family: u8, b: [u8; 16]) -> Option<Self> {
        let [a0, a1, a2, a3, rest @ ..] = b;
        match family {
            0 if b == [0; 16] => Some(WireIp::None),
            4 if rest == [0; 12] => Some(WireIp::V4([a0, a1, a2, a3])),
            6 => Some(WireIp::V6(b)),
            _ => None,
        }
    }

    /// Two little-endian words of the address bytes.
    fn words(b: [u8; 16]) -> [u64; 2] {
        let [b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15] = b;
        [
            u64::from_le_bytes([b0, b1, b2, b3, b4, b5, b6, b7]),
            u64::from_le_bytes([b8, b9, b10, b11, b12, b13, b14, b15]),
        ]
    }

    /// The address bytes of two little-endian words.
    fn bytes(lo: u64, hi: u64) -> [u8; 16] {
        let [b0, b1, b2, b3, b4, b5, b6, b7] = lo.to_le_bytes();
        let [b8, b9, b10, b11, b12, b13, b14, b15] = hi.to_le_bytes();
        [
            b0, b1, b2, b3, b4, b5, b6, b7, b8, b9, b10, b11, b12, b13, b14, b15,
        ]
    }
}

/// A decoded (or to-be-encoded) control message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Frame {
    /// Message kind.
    pub(crate) kind: FrameKind,
    /// Mailbox sequence number (set by the mailbox on send).
    pub(crate) seq: u32,
    /// The sender's connection id.
    pub(crate) src: ConnId,
    /// The receiver's connection id ([`ConnId::NONE`] in a request).
    pub(crate) dst: ConnId,
    /// Connector's (source) TCP port.
    pub(crate) src_port: u16,
    /// Listener's (destination) TCP port.
    pub(crate) dst_port: u16,
    /// The sender's IP address (requests and accepts).
    pub(crate) src_ip: WireIp,
    /// The receiver's IP address (requests and accepts).
    pub(crate) dst_ip: WireIp,
    /// The listener's network namespace (requests; 0 otherwise).
    pub(crate) namespace: u64,
    /// Reject/close reason.
    pub(crate) reason: Reason,
    /// The sender's receive queue (requests and accepts; zero otherwise).
    pub(crate) offer: QueueOffer,
    /// A request (or its accept) for an implicit connection between datagram
    /// sockets ([`FLAG_DATAGRAM`]).
    pub(crate) datagram: bool,
}

/// Why a frame was refused by [`Frame::decode`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FrameError {
    /// Not a frame (bad magic): garbage or zeroed memory.
    BadMagic,
    /// A frame of another version; a listener answers it with
    /// [`RejectReason::Version`] when it can.
    Version(u8),
    /// Checksum mismatch: torn or corrupted.
    BadChecksum,
    /// Unknown kind, bad reason, non-zero reserved bits, or fields that do not
    /// belong to the kind.
    Malformed,
}

/// CRC-32 (IEEE, reflected) of `bytes`, continuing from `crc`.
fn crc32_update(mut crc: u32, bytes: &[u8]) -> u32 {
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xedb8_8320 & mask);
        }
    }
    crc
}

/// CRC of a frame's bytes before the CRC field (every word but the last, and
/// the sequence number).
fn frame_crc(words: &[u64; FRAME_WORDS]) -> u32 {
    let mut crc = !0u32;
    let (body, last) = words.split_at(FRAME_WORDS.saturating_sub(1));
    for w in body {
        crc = crc32_update(crc, &w.to_le_bytes());
    }
    for w in last {
        crc = crc32_update(crc, &field32(*w, 0).to_le_bytes());
    }
    !crc
}

impl Frame {
    /// A frame of `kind` with every other field zero / none.
    pub(crate) const fn new(kind: FrameKind) -> Self {
        Frame {
            kind,
            seq: 0,
            src: ConnId::NONE,
            dst: ConnId::NONE,
            src_port: 0,
            dst_port: 0,
            src_ip: WireIp::None,
            dst_ip: WireIp::None,
            namespace: 0,
            reason: Reason::None,
            offer: QueueOffer {
                ring_log2: 0,
                rx_area: 0,
                credit_area: 0,
                start: 0,
            },
            datagram: false,
        }
    }

    /// A connect request from `src` (at `src_ip:src_port`) to the listener
    /// on `dst_ip:dst_port` in `namespace`, offering the connector's receive
    /// queue.
    pub(crate) const fn connect_request(
        src: ConnId,
        (src_ip, src_port): (WireIp, u16),
        (dst_ip, dst_port, namespace): (WireIp, u16, u64),
        offer: QueueOffer,
    ) -> Self {
        let mut f = Frame::new(FrameKind::ConnectRequest);
        f.namespace = namespace;
        f.src = src;
        f.src_ip = src_ip;
        f.src_port = src_port;
        f.dst_ip = dst_ip;
        f.dst_port = dst_port;
        f.offer = offer;
        f
    }

    /// The same request, for an implicit connection between datagram sockets.
    pub(crate) const fn for_datagrams(mut self) -> Self {
        self.datagram = true;
        self
    }

    /// The answer to `request`: accepted by the listener's connection `src`,
    /// offering the listener's receive queue.
    pub(crate) const fn accept(request: &Frame, src: ConnId, offer: QueueOffer) -> Self {
        let mut f = Frame::new(FrameKind::Accept);
        f.src = src;
        f.dst = request.src;
        f.src_port = request.dst_port;
        f.dst_port = request.src_port;
        f.src_ip = request.dst_ip;
        f.dst_ip = request.src_ip;
        f.offer = offer;
        f.datagram = request.datagram;
        f
    }

    /// The refusal of `request`, sent by the listener node (`src` may be any
    /// id of the listener's node that is not [`ConnId::NONE`]).
    pub(crate) const fn reject(request: &Frame, src: ConnId, reason: RejectReason) -> Self {
        let mut f = Frame::new(FrameKind::Reject);
        f.src = src;
        f.dst = request.src;
        f.src_port = request.dst_port;
        f.dst_port = request.src_port;
        f.reason = Reason::Reject(reason);
        f
    }

    /// A close of the connection `src` (local) ↔ `dst` (peer).
    pub(crate) const fn close(src: ConnId, dst: ConnId, reason: CloseReason) -> Self {
        let mut f = Frame::new(FrameKind::Close);
        f.src = src;
        f.dst = dst;
        f.reason = Reason::Close(reason);
        f
    }

    /// Encodes into sixteen little-endian words (checksum included). A frame
    /// built by the constructors above decodes back to itself (with `seq`);
    /// the offer and addresses of a reject or close are not encoded, and
    /// neither is the destination of a connect request.
    pub(crate) fn encode(&self) -> [u64; FRAME_WORDS] {
        let carries_offer = self.kind.carries_offer();
        let (offer, src_ip, dst_ip) = if carries_offer {
            (self.offer, self.src_ip, self.dst_ip)
        } else {
            (QueueOffer::default(), WireIp::None, WireIp::None)
        };
        let (dst, namespace) = if self.kind == FrameKind::ConnectRequest {
            (ConnId::NONE, self.namespace)
        } else {
            (self.dst, 0)
        };
        let (src_family, src_addr) = src_ip.to_wire();
        let (dst_family, dst_addr) = dst_ip.to_wire();
        let [src_lo, src_hi] = WireIp::words(src_addr);
        let [dst_lo, dst_hi] = WireIp::words(dst_addr);
        let flags = if self.datagram && carries_offer {
            FLAG_DATAGRAM
        } else {
            0
        };
        let w0 = (FRAME_MAGIC as u64)
            | ((FRAME_VERSION as u64) << 32)
            | ((self.kind.to_wire() as u64) << 40)
            | ((flags as u64) << 48);
        let w3 = (self.src_port as u64)
            | ((self.dst_port as u64) << 16)
            | ((offer.ring_log2 as u64) << 32)
            | ((reason_to_wire(self.kind, self.reason) as u64) << 40)
            | ((src_family as u64) << 48)
            | ((dst_family as u64) << 56);
        let mut words = [
            w0,
            self.src.pack(),
            dst.pack(),
            w3,
            offer.rx_area,
            offer.credit_area,
            offer.start,
            src_lo,
            src_hi,
            dst_lo,
            dst_hi,
            namespace,
            0,
            0,
            0,
            self.seq as u64,
        ];
        let crc = frame_crc(&words);
        if let Some(last) = words.last_mut() {
            *last = (self.seq as u64) | ((crc as u64) << 32);
        }
        words
    }

    /// Encodes into bytes.
    pub(crate) fn encode_bytes(&self) -> [u8; FRAME_SIZE] {
        words_to_bytes(&self.encode())
    }

    /// Decodes and validates the words read from a mailbox slot.
    pub(crate) fn decode(words: &[u64; FRAME_WORDS]) -> Result<Frame, FrameError> {
        let [w0, w1, w2, w3, w4, w5, w6, src_lo, src_hi, dst_lo, dst_hi, namespace, r1, r2, r3, last] =
            *words;
        if field32(w0, 0) != FRAME_MAGIC {
            return Err(FrameError::BadMagic);
        }
        let version = field8(w0, 32);
        if version != FRAME_VERSION {
            return Err(FrameError::Version(version));
        }
        if field32(last, 32) != frame_crc(words) {
            return Err(FrameError::BadChecksum);
        }
        if (r1 | r2 | r3) != 0 {
            return Err(FrameError::Malformed);
        }
        let kind = match FrameKind::from_wire(field8(w0, 40)) {
            Some(k) => k,
            None => return Err(FrameError::Malformed),
        };
        let datagram = match field16(w0, 48) {
            0 => false,
            FLAG_DATAGRAM if kind.carries_offer() => true,
            _ => return Err(FrameError::Malformed),
        };
        let reason = match reason_from_wire(kind, field8(w3, 40)) {
            Some(r) => r,
            None => return Err(FrameError::Malformed),
        };
        let (Some(src_ip), Some(dst_ip)) = (
            WireIp::from_wire(field8(w3, 48), WireIp::bytes(src_lo, src_hi)),
            WireIp::from_wire(field8(w3, 56), WireIp::bytes(dst_lo, dst_hi)),
        ) else {
            return Err(FrameError::Malformed);
        };
        let offer = QueueOffer {
            ring_log2: field8(w3, 32),
            rx_area: w4,
            credit_area: w5,
            start: w6,
        };
        let f = Frame {
            kind,
            seq: field32(last, 0),
            src: ConnId::unpack(w1),
            dst: ConnId::unpack(w2),
            src_port: field16(w3, 0),
            dst_port: field16(w3, 16),
            src_ip,
            dst_ip,
            namespace,
            reason,
            offer,
            datagram,
        };
        let no_offer = offer.ring_log2 == 0 && w4 == 0 && w5 == 0 && w6 == 0;
        let no_ips = src_ip == WireIp::None && dst_ip == WireIp::None;
        let both_ips = src_ip != WireIp::None && dst_ip != WireIp::None;
        let fields_fit = if kind.carries_offer() {
            both_ips
        } else {
            no_offer && no_ips
        };
        if !fields_fit {
            return Err(FrameError::Malformed);
        }
        let dst_none = f.dst.slot == ConnId::NONE.slot;
        if (kind == FrameKind::ConnectRequest) != dst_none
            || kind != FrameKind::ConnectRequest && namespace != 0
        {
            return Err(FrameError::Malformed);
        }
        if f.src.slot == ConnId::NONE.slot {
            return Err(FrameError::Malformed);
        }
        Ok(f)
    }

    /// Decodes bytes.
    pub(crate) fn decode_bytes(bytes: &[u8; FRAME_SIZE]) -> Result<Frame, FrameError> {
        Frame::decode(&bytes_to_words(bytes))
    }
}

/// Words as little-endian bytes.
pub(crate) fn words_to_bytes(words: &[u64; FRAME_WORDS]) -> [u8; FRAME_SIZE] {
    let mut out = [0u8; FRAME_SIZE];
    for (chunk, w) in out.chunks_exact_mut(8).zip(words.iter()) {
        chunk.copy_from_slice(&w.to_le_bytes());
    }
    out
}

/// Little-endian bytes as words.
pub(crate) fn bytes_to_words(bytes: &[u8; FRAME_SIZE]) -> [u64; FRAME_WORDS] {
    let mut words = [0u64; FRAME_WORDS];
    for (w, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
        let mut b = [0u8; 8];
        b.copy_from_slice(chunk);
        *w = u64::from_le_bytes(b);
    }
    words
}
