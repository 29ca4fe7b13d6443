// SPDX-License-Identifier: GPL-2.0

//! Small-message fast path and gathering (Nagle / `TCP_NODELAY` / `TCP_CORK`).
//!
//! Bytes a writer copies into the peer's ring are *staged*; publishing the
//! producer cursor is what sends them. Gathering is therefore free: holding
//! small writes back means not storing the cursor yet, and the next write
//! appends behind them in the same ring (the seed's SHORT-message gathering
//! without its intermediate send buffer).

/// Largest write that takes the small-message fast path (the seed's INLINE
/// protocol): reserve exactly its length ([`Producer::reserve`]), one copy
/// (split in two at the ring's end at most), one cursor store.
///
/// [`Producer::reserve`]: super::queue::Producer::reserve
pub(crate) const INLINE_MAX: usize = 256;

/// Whether a write of `len` bytes takes the small-message fast path.
pub(crate) const fn is_inline(len: usize) -> bool {
    len != 0 && len <= INLINE_MAX
}

/// What the gathering decision looks at.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct GatherInput {
    /// Bytes staged and not yet published ([`Producer::pending`](super::queue::Producer::pending)).
    pub(crate) pending: u64,
    /// Bytes published and not yet consumed by the peer
    /// ([`Producer::in_flight`](super::queue::Producer::in_flight)): TCP's unacknowledged data.
    pub(crate) in_flight: u64,
    /// Free ring space left after the staged bytes.
    pub(crate) room: u64,
    /// The "full segment" size: pending bytes at or above it are sent at once
    /// (TCP's MSS; for a ring, e.g. a quarter of it or 64 KiB).
    pub(crate) mss: u64,
    /// `TCP_NODELAY` is set.
    pub(crate) nodelay: bool,
    /// `TCP_CORK` is set.
    pub(crate) cork: bool,
    /// The current `sendmsg` carries `MSG_MORE`.
    pub(crate) more: bool,
    /// Send regardless: uncork, shutdown/close, the cork or Nagle timer fired,
    /// or the writer is about to sleep (never sleep on held data).
    pub(crate) force: bool,
}

/// The gathering decision.
///
/// On [`Hold`](GatherDecision::Hold) with data in flight the writer posts a
/// wait request ([`Producer::request_notify`]) so that the reader's next
/// consumer-cursor publish rings its doorbell; the doorbell handler re-runs
/// the decision (TCP's ACK clock). Without that, a write-write-read
/// application would stall.
///
/// [`Producer::request_notify`]: super::queue::Producer::request_notify
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GatherDecision {
    /// Nothing is pending.
    Idle,
    /// Publish the staged bytes now.
    SendNow,
    /// Keep gathering; the caller arms a timer (cork: 200 ms as in TCP) or
    /// waits for the in-flight data to be consumed.
    Hold,
}

/// Send now or hold, like `tcp_nagle_check`/`tcp_nagle_test`:
///
/// - nothing pending: idle;
/// - forced, a full segment pending, or no room to gather more: send;
/// - corked or `MSG_MORE`: hold a partial segment;
/// - `TCP_NODELAY`: send;
/// - Nagle: hold a partial segment while earlier data is still in flight,
///   send when nothing is.
pub(crate) const fn gather_decision(i: &GatherInput) -> GatherDecision {
    if i.pending == 0 {
        return GatherDecision::Idle;
    }
    if i.force || i.pending >= i.mss || i.room == 0 {
        return GatherDecision::SendNow;
    }
    if i.cork || i.more {
        return GatherDecision::Hold;
    }
    if i.nodelay || i.in_flight == 0 {
        return GatherDecision::SendNow;
    }
    GatherDecision::Hold
}
