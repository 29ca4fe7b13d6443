// SPDX-License-Identifier: GPL-2.0

//! Per-CPU counters of a network namespace (`struct sci_net_hot`, `c/genl.c`): the ones
//! bumped once a datagram or once a read, kept per CPU as the SNMP MIBs are, so that a
//! CPU sending and another receiving never bounce one cache line between them. A bump is
//! one `this_cpu_add`, no atomic, in one call with the namespace's lookup
//! (`OwnSk::count`); a read sums the CPUs (`scictl stats`).

use crate::sys::bindings;
use core::ffi::c_void;
use core::sync::atomic::{AtomicPtr, Ordering};

/// Which per-CPU counter (`enum sci_net_hot_counter`).
#[derive(Clone, Copy)]
#[repr(u32)]
pub(crate) enum HotCounter {
    DgramSent = bindings::sci_net_hot_counter_SCI_HOT_DGRAM_SENT,
    DgramReceived = bindings::sci_net_hot_counter_SCI_HOT_DGRAM_RECEIVED,
    DgramDropped = bindings::sci_net_hot_counter_SCI_HOT_DGRAM_DROPPED,
    ReadSockLent = bindings::sci_net_hot_counter_SCI_HOT_READ_SOCK_LENT,
    ReadSockCopied = bindings::sci_net_hot_counter_SCI_HOT_READ_SOCK_COPIED,
    DirectReceived = bindings::sci_net_hot_counter_SCI_HOT_DIRECT_RECEIVED,
}

/// The `struct sci_net_hot __percpu *` field of `struct sci_net_stats`. Never made in
/// Rust: it exists only inside a namespace's counters, whose `init` (`sci_net_init`)
/// allocates it before any socket of the namespace exists and whose `exit` frees it after
/// the last one is gone.
#[repr(transparent)]
pub(crate) struct PerCpuCounters(AtomicPtr<c_void>);

impl PerCpuCounters {
    /// The sum of every CPU's count of `counter`.
    pub(crate) fn sum(&self, counter: HotCounter) -> u64 {
        let hot = self.0.load(Ordering::Relaxed).cast();
        // SAFETY: the per-CPU area is live while its namespace is (see the type), and a
        // request for the counters holds its namespace.
        unsafe { bindings::sci_net_hot_sum(hot, counter as u32) }
    }
}
