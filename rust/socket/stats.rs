// SPDX-License-Identifier: GPL-2.0

//! The counters each network namespace keeps of its `AF_SCI` sockets (`scictl stats`):
//! sockets created, connections over SCI, fallbacks per reason, datagram sockets' implicit
//! connections, datagrams over SCI, the bytes kernel readers (`read_sock`) were lent or
//! copied and those filled directly into a reader's buffer. They live in the namespace's
//! `net_generic` data, a C `struct sci_net_stats`.

use crate::config::rules::FallbackReason;
use crate::sys::percpu_counters::{HotCounter, PerCpuCounters};
use core::sync::atomic::{AtomicU64, Ordering};

/// The counters of one network namespace: its `net_generic` data, a C
/// `struct sci_net_stats` (zeroed at creation; all-zero is a valid value of this type).
#[repr(C)]
pub(crate) struct NetStats {
    sockets: AtomicU64,
    sci_connections: AtomicU64,
    fallbacks: [AtomicU64; FallbackReason::COUNT],
    refusals_remembered: AtomicU64,
    implicit_connections: AtomicU64,
    read_sock_kept: AtomicU64,
    read_sock_deferred: AtomicU64,
    /// Those bumped once a datagram or a read: per CPU.
    hot: PerCpuCounters,
}

const _: () = {
    use core::mem::{align_of, size_of};
    assert!(size_of::<NetStats>() == size_of::<crate::sys::bindings::sci_net_stats>());
    assert!(align_of::<NetStats>() <= align_of::<crate::sys::bindings::sci_net_stats>());
};

/// The counters at one moment.
pub(crate) struct StatsSnapshot {
    /// `AF_SCI` sockets created (`socket()` and `accept()`).
    pub(crate) sockets: u64,
    /// Connections that went over SCI.
    pub(crate) sci_connections: u64,
    /// Connections that fell back, per reason (indexed by the reason's value).
    pub(crate) fallbacks: [u64; FallbackReason::COUNT],
    /// Of the `peer-rejected` ones, those that asked no peer (`control/refusals.rs`).
    pub(crate) refusals_remembered: u64,
    /// Implicit connections of datagram sockets that came up (not in `sci_connections`).
    pub(crate) implicit_connections: u64,
    /// Datagrams sent, received and dropped (a full ring, at the sender) over SCI.
    pub(crate) dgram_sent: u64,
    pub(crate) dgram_received: u64,
    pub(crate) dgram_dropped: u64,
    /// Bytes a kernel reader's (`read_sock`) actor used that it was handed in place: the
    /// ring's own pages as skb frags, no copy.
    pub(crate) read_sock_lent: u64,
    /// Bytes a kernel reader's actor used that were copied into fresh socket buffers first
    /// (device memory, or while an earlier lent buffer is still kept).
    pub(crate) read_sock_copied: u64,
    /// Times a kernel reader kept a lent buffer after its actor returned (the ring then
    /// holds the writer off those bytes until it lets go).
    pub(crate) read_sock_kept: u64,
    /// Bytes a writer copied straight into a reader's posted buffer (`fabric/direct.rs`).
    pub(crate) direct_received: u64,
    pub(crate) read_sock_deferred: u64,
}

impl NetStats {
    /// One more `AF_SCI` socket.
    pub(crate) fn socket_created(&self) {
        self.sockets.fetch_add(1, Ordering::Relaxed);
    }

    /// One more connection over SCI.
    pub(crate) fn sci_connection(&self) {
        self.sci_connections.fetch_add(1, Ordering::Relaxed);
    }

    /// One more connection that fell back for `reason`.
    pub(crate) fn fallback(&self, reason: FallbackReason) {
        if let Some(counter) = self.fallbacks.get(reason.as_u32() as usize) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// One more connect that fell back on a remembered refusal, asking no peer.
    pub(crate) fn refusal_remembered(&self) {
        self.refusals_remembered.fetch_add(1, Ordering::Relaxed);
    }

    /// One more implicit connection of a datagram socket up.
    pub(crate) fn implicit_connection(&self) {
        self.implicit_connections.fetch_add(1, Ordering::Relaxed);
    }

    /// One more time a kernel reader kept a lent buffer after its actor returned (the
    /// ring holds the writer off those bytes until it lets go).
    pub(crate) fn read_sock_kept(&self) {
        self.read_sock_kept.fetch_add(1, Ordering::Relaxed);
    }

    /// One more `read_sock` that left its read to the socket's work item.
    pub(crate) fn read_sock_deferred(&self) {
        self.read_sock_deferred.fetch_add(1, Ordering::Relaxed);
    }

    /// The counters now.
    pub(crate) fn snapshot(&self) -> StatsSnapshot {
        let mut fallbacks = [0; FallbackReason::COUNT];
        for (out, counter) in fallbacks.iter_mut().zip(&self.fallbacks) {
            *out = counter.load(Ordering::Relaxed);
        }
        StatsSnapshot {
            sockets: self.sockets.load(Ordering::Relaxed),
            sci_connections: self.sci_connections.load(Ordering::Relaxed),
            fallbacks,
            refusals_remembered: self.refusals_remembered.load(Ordering::Relaxed),
            implicit_connections: self.implicit_connections.load(Ordering::Relaxed),
            dgram_sent: self.hot.sum(HotCounter::DgramSent),
            dgram_received: self.hot.sum(HotCounter::DgramReceived),
            dgram_dropped: self.hot.sum(HotCounter::DgramDropped),
            read_sock_lent: self.hot.sum(HotCounter::ReadSockLent),
            read_sock_copied: self.hot.sum(HotCounter::ReadSockCopied),
            read_sock_kept: self.read_sock_kept.load(Ordering::Relaxed),
            direct_received: self.hot.sum(HotCounter::DirectReceived),
            read_sock_deferred: self.read_sock_deferred.load(Ordering::Relaxed),
        }
    }
}
