// SPDX-License-Identifier: GPL-2.0

//! The resume header: the first bytes each end of a failed-over connection writes on
//! the TCP connection that carries it on (`Documentation/af_sci.rst`, "Failover").
//!
//! When the fabric path of an established connection is lost while the peer is still
//! reachable over IP, both ends move it onto a TCP connection between the same addresses
//! and ports. Each end's receive ring is in its own segment, which it can still read; so
//! each end only has to learn how far the peer wrote into it. Each end stops writing into
//! the peer's ring, then sends this header: the bytes it wrote into the peer's ring over
//! the connection's life, staged (held back by gathering) or published alike. The
//! receiver reads its ring up to exactly there, then reads the TCP stream: every byte once,
//! in order. The header is 32 bytes, little-endian:
//!
//! ```text
//! 0x00 u32 magic "SCIR"    0x04 u16 version (1)      0x06 u16 flags (0)
//! 0x08 u32 sender's slot   0x0c u32 sender's generation     (the writer's connection id)
//! 0x10 u32 receiver's slot 0x14 u32 receiver's generation   (the reader's connection id)
//! 0x18 u64 bytes written into the receiver's ring since the connection began
//! ```
//!
//! Only ends of an SCI connection exchange it, on a TCP connection that exists for that
//! purpose alone: a plain TCP peer never sees it. A header that names other connection ids,
//! or claims more bytes than the ring can hold beyond what was read, resets the connection.

use super::cursor;
use super::frame::ConnId;

/// Size of the header in bytes.
pub(crate) const RESUME_LEN: usize = 32;
/// `"SCIR"` as a little-endian u32.
pub(crate) const RESUME_MAGIC: u32 = u32::from_le_bytes(*b"SCIR");
/// The header version this code speaks.
pub(crate) const RESUME_VERSION: u16 = 1;

/// What one end tells the other when the connection moves to TCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ResumeHeader {
    /// The writing end's connection id.
    pub(crate) from: ConnId,
    /// The reading end's connection id.
    pub(crate) to: ConnId,
    /// Bytes the writing end put into the reading end's ring, since the connection began.
    pub(crate) written: u64,
}

/// Why a resume header is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ResumeError {
    /// Not a resume header (magic), or a version or flags this code does not speak.
    Format,
    /// It names other connection ends than this one and its peer.
    OtherConnection,
    /// It claims bytes this end cannot hold: behind what was already read, or more
    /// than a ring beyond it.
    Impossible,
}

/// Reads a little-endian word at `off` (in range by construction).
fn word<const N: usize>(b: &[u8; RESUME_LEN], off: usize) -> [u8; N] {
    let mut w = [0u8; N];
    if let Some(src) = b.get(off..off.saturating_add(N)) {
        w.copy_from_slice(src);
    }
    w
}

impl ResumeHeader {
    /// The header's bytes.
    pub(crate) fn encode(&self) -> [u8; RESUME_LEN] {
        let mut b = [0u8; RESUME_LEN];
        let fields: [(usize, &[u8]); 7] = [
            (0x00, &RESUME_MAGIC.to_le_bytes()),
            (0x04, &RESUME_VERSION.to_le_bytes()),
            (0x08, &self.from.slot.to_le_bytes()),
            (0x0c, &self.from.generation.to_le_bytes()),
            (0x10, &self.to.slot.to_le_bytes()),
            (0x14, &self.to.generation.to_le_bytes()),
            (0x18, &self.written.to_le_bytes()),
        ];
        for (off, bytes) in fields {
            if let Some(dst) = b.get_mut(off..off.saturating_add(bytes.len())) {
                dst.copy_from_slice(bytes);
            }
        }
        b
    }

    /// Parses a header; checks only its format (see [`ResumeHeader::check`]).
    pub(crate) fn decode(b: &[u8; RESUME_LEN]) -> Result<Self, ResumeError> {
        let magic = u32::from_le_bytes(word(b, 0x00));
        let version = u16::from_le_bytes(word(b, 0x04));
        let flags = u16::from_le_bytes(word(b, 0x06));
        if magic != RESUME_MAGIC || version != RESUME_VERSION || flags != 0 {
            return Err(ResumeError::Format);
        }
        // Ids sit at 8-aligned offsets: the generation follows at `off | 4`.
        let id = |off: usize| ConnId {
            slot: u32::from_le_bytes(word(b, off)),
            generation: u32::from_le_bytes(word(b, off | 4)),
        };
        Ok(Self {
            from: id(0x08),
            to: id(0x10),
            written: u64::from_le_bytes(word(b, 0x18)),
        })
    }

    /// Checks a peer's header at the reading end `me`, whose peer end is `peer`, whose
    /// ring (of `ring_size` bytes, started at cursor `start`) was read up to `consumed`
    /// and whose producer cursor was last seen at `prod_seen`. Returns the producer
    /// cursor to read up to.
    pub(crate) fn check(
        &self,
        me: ConnId,
        peer: ConnId,
        (start, consumed, prod_seen, ring_size): (u64, u64, u64, u64),
    ) -> Result<u64, ResumeError> {
        if self.to != me || self.from != peer {
            return Err(ResumeError::OtherConnection);
        }
        let end = cursor::advance(start, self.written);
        cursor::check_producer(consumed, prod_seen, end, ring_size)
            .map(|_| end)
            .map_err(|_| ResumeError::Impossible)
    }
}
