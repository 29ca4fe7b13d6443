// SPDX-License-Identifier: GPL-2.0

//! The task that makes a socket call: what the call does to it beyond its return value,
//! and whether it may keep its CPU busy.

use crate::sys::bindings;

/// Sends `SIGPIPE` to the current task (a write on a connection that is shut).
pub(crate) fn send_sigpipe() {
    // SAFETY: signals the current task.
    unsafe { bindings::sci_send_sigpipe() }
}

/// Whether other tasks wait to run on this CPU: an adaptive spin gives the CPU up then (on
/// one CPU, the task being waited for may be one of them).
pub(crate) fn cpu_contended() -> bool {
    // SAFETY: reads the run queue length of the current CPU; a stale answer only makes a
    // spin shorter or longer.
    !unsafe { bindings::sci_single_task_running() }
}

/// Milliseconds counted in ticks (`jiffies`, from an arbitrary start): the cheapest clock,
/// one load, for what is timed in whole milliseconds many times a second (a datagram
/// socket's idle connections). Only differences of its values mean anything.
pub(crate) fn coarse_ms() -> i64 {
    #[cfg(target_pointer_width = "64")]
    {
        // Inline, as every datagram sent stamps its connection with it: `jiffies` is
        // 64 bits wide here and a load reads it whole (`get_jiffies_64()`).
        // SAFETY: a volatile load of the tick count, which only the timekeeper writes.
        let j = unsafe { core::ptr::read_volatile(core::ptr::addr_of!(kernel::bindings::jiffies)) };
        (j as i64).wrapping_mul(1000) / i64::from(kernel::bindings::CONFIG_HZ)
    }
    #[cfg(not(target_pointer_width = "64"))]
    // SAFETY: reads the timekeeper's last tick; no state of ours.
    unsafe {
        bindings::sci_coarse_ms()
    }
}

/// Who runs now: the task, and whether it serves a softirq or an interrupt on its stack.
/// Two calls give the same value only in the same context (or one nested in it at the
/// same level): what a lock's holder is recorded as when it cannot say so otherwise.
pub(crate) fn context_id() -> usize {
    // SAFETY: reads `current` and the preemption count; no state of ours.
    unsafe { bindings::sci_context_id() as usize }
}
