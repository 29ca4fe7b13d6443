// SPDX-License-Identifier: GPL-2.0

//! Errors of the protocol core.

/// Something the peer (or a bad placement handed in at setup) did that the
/// protocol cannot recover from.
///
/// Endpoints latch the first peer-caused error: every later call returns it
/// again, and the kernel aborts the connection. [`ProtocolError::Overrun`] is
/// the exception: it reports a caller bug and leaves the endpoint unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ProtocolError {
    /// A ring size that is not a power of two in
    /// [`MIN_RING_LOG2`](super::ring::MIN_RING_LOG2)..=[`MAX_RING_LOG2`](super::ring::MAX_RING_LOG2).
    BadRingSize,
    /// An area that is misaligned, overlaps another or does not fit in its segment.
    BadPlacement,
    /// The queue header's magic, version, ring size, generation or start cursor
    /// differs from what this side created.
    HeaderMismatch,
    /// The peer's cursor moved backwards.
    CursorBackwards,
    /// The peer's cursor claims more bytes than the ring holds, or a consumer
    /// cursor beyond what was published.
    CursorBeyondCapacity,
    /// The producer cursor moved after the peer said it was done writing.
    DataAfterDone,
    /// A datagram record's header is not one (its length fails its complement), or
    /// names more than a record carries or than the queue published (`record.rs`).
    BadRecord,
    /// The caller asked to stage or consume more bytes than were offered.
    /// A caller bug; the endpoint is unchanged.
    Overrun,
}
