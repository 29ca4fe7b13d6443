// SPDX-License-Identifier: GPL-2.0

//! The module's parameters (`c/params.c` declares them with `module_param`), read through
//! its getters, and the fixed limits that go with them.

use crate::sys::bindings;
use core::ffi::c_long;
use kernel::prelude::*;

/// How long an SCI connect waits for the listener's answer before falling back to TCP
/// (milliseconds). A live node answers at once; this only bounds the wait for a node that
/// stopped answering (a loaded listener thread may take a while for a burst of connects).
pub(crate) const CONNECT_TIMEOUT_MS: u32 = 5000;

/// [`CONNECT_TIMEOUT_MS`] in jiffies.
pub(crate) fn connect_timeout() -> c_long {
    // SAFETY: a pure conversion.
    unsafe { bindings::sci_msecs_to_jiffies(CONNECT_TIMEOUT_MS) }
}

/// Largest spin a socket may ask for (`SCI_SPIN_US`), in microseconds.
pub(crate) const SPIN_US_MAX: u32 = 10_000;

/// The `spin_us` module parameter: microseconds a blocking send or receive polls before
/// it sleeps, for sockets that did not set `SCI_SPIN_US`; `None` (any negative value, -1
/// the default) when it spins adaptively (`proto/spin.rs`).
pub(crate) fn default_spin_us() -> Option<u32> {
    // SAFETY: reads a module parameter.
    let v = unsafe { bindings::sci_spin_us_param() };
    u32::try_from(v).ok().map(|us| us.min(SPIN_US_MAX))
}

/// The `failover_ms` module parameter: how long an SCI connection whose fabric path was
/// lost may take to move onto TCP (`socket/sock/failover.rs`); 0 when failover is off.
pub(crate) fn failover_ms() -> u32 {
    // SAFETY: reads a module parameter.
    unsafe { bindings::sci_failover_ms_param() }
}

/// The `refusal_ms` module parameter: how long a destination that refused an SCI connect
/// is remembered (`control/refusals.rs`); 0 when never.
pub(crate) fn refusal_ms() -> u32 {
    // SAFETY: reads a module parameter.
    unsafe { bindings::sci_refusal_ms_param() }
}

/// The `direct_min` module parameter: the smallest receive buffer, in bytes, that a
/// blocked reader on the loopback fabric posts for the writer to fill directly
/// (`fabric/direct.rs`), once the writer's sends are that large too; 0 when never.
pub(crate) fn direct_min() -> usize {
    // SAFETY: reads a module parameter.
    unsafe { bindings::sci_direct_min_param() as usize }
}

/// The most of a reader's buffer one direct receive pins (4 MiB): a larger `recv`
/// returns after that much, as one over TCP returns what has arrived.
pub(crate) const DIRECT_MAX: usize = 4 << 20;

/// The `dgram_idle_ms` module parameter: how long an implicit connection between datagram
/// sockets lasts without a datagram (`socket/dgram/implicit.rs`).
pub(crate) fn dgram_idle_ms() -> u32 {
    // SAFETY: reads a module parameter.
    unsafe { bindings::sci_dgram_idle_ms_param() }
}

/// Whether the `sci_loopback` module parameter enables the SCI data path.
pub(crate) fn sci_loopback_enabled() -> bool {
    // SAFETY: a volatile load of a module parameter's `bool`, as `READ_ONCE` reads it
    // (the parameter's writes store 0 or 1 only).
    unsafe { core::ptr::read_volatile(core::ptr::addr_of!(bindings::sci_loopback_on)) }
}

/// Whether the `fabric_selftest` module parameter asks for the load-time self-test.
pub(crate) fn fabric_selftest_requested() -> bool {
    // SAFETY: reads a module parameter.
    unsafe { bindings::sci_fabric_selftest_param() }
}

/// The fabric's module parameters.
pub(crate) struct FabricParams {
    /// `fabric`: "auto", "loopback" or "ivshmem".
    pub(crate) fabric: &'static CStr,
    /// `node_id`: this node's id on the ivshmem fabric, -1 for the device's.
    pub(crate) node_id: i32,
    /// `ivshmem_nodes`: node table size when this node formats the region.
    pub(crate) nodes: u32,
    /// `ivshmem_timeout_ms`: heartbeat timeout.
    pub(crate) timeout_ms: u32,
    /// Test only: `ivshmem_test_peer` (-1: none), `ivshmem_test_port`,
    /// `ivshmem_test_hold` (seconds).
    pub(crate) test_peer: i32,
    /// See `test_peer`.
    pub(crate) test_port: i32,
    /// See `test_peer`.
    pub(crate) test_hold: u32,
}

/// Reads the fabric's module parameters (read-only after load).
pub(crate) fn fabric_params() -> FabricParams {
    // SAFETY: reads read-only module parameters; a `charp` parameter is NULL or a
    // NUL-terminated string that lives until the module is unloaded.
    unsafe {
        let p = bindings::sci_fabric_param();
        let (mut test_peer, mut test_port, mut test_hold) = (-1, 0, 0);
        bindings::sci_ivshmem_test_params(&mut test_peer, &mut test_port, &mut test_hold);
        FabricParams {
            fabric: if p.is_null() {
                kernel::c_str!("auto")
            } else {
                CStr::from_char_ptr(p.cast())
            },
            node_id: bindings::sci_node_id_param(),
            nodes: bindings::sci_ivshmem_nodes_param(),
            timeout_ms: bindings::sci_ivshmem_timeout_param(),
            test_peer,
            test_port,
            test_hold,
        }
    }
}

/// Test only: whether the `test_hold_frames` module parameter asks the listener kthread to
/// leave inbound control frames unserved for now (`selftests/guest/sci_late_request.py`).
pub(crate) fn hold_frames_for_test() -> bool {
    // SAFETY: reads a module parameter.
    unsafe { bindings::sci_test_hold_frames() }
}

/// Test only: a reader that found its ring empty (or a non-blocking writer that found it
/// full) waits as long as the `test_wait_race_us` module parameter says before posting its
/// wait request, so that a byte sent (or space freed) meanwhile rings no doorbell
/// (`sci_kselftest.ko`, `selftests/guest/sci_limits.py wait-race`).
pub(crate) fn widen_wait_race_for_test() {
    // SAFETY: reads a module parameter; busy-waits at most 5 ms, safe in atomic context.
    unsafe { bindings::sci_test_wait_race() }
}

/// Test only: the `test_dgram_answer_ms` module parameter, which stands in for the
/// answer window of an implicit datagram connection when nonzero (ms;
/// `socket/dgram/implicit/outbound.rs`).
pub(crate) fn dgram_answer_ms_for_test() -> Option<u32> {
    // SAFETY: reads a module parameter.
    let ms = unsafe { bindings::sci_test_dgram_answer_ms() };
    (ms != 0).then_some(ms)
}

/// Test only: whether the `test_read_sock_busy` module parameter asks this `read_sock` to
/// find its socket held (it counts down; `selftests/guest/iscsi-sci`).
pub(crate) fn read_sock_busy_for_test() -> bool {
    // SAFETY: reads and decrements a module parameter atomically.
    unsafe { bindings::sci_take_read_sock_busy() }
}

/// Test only: whether the `test_drop_answers` module parameter asks to drop this connect
/// answer (it counts down; `selftests/guest/sci_lost_answer.py`).
pub(crate) fn drop_answer_for_test() -> bool {
    // SAFETY: reads and decrements a module parameter atomically.
    unsafe { bindings::sci_take_drop_answer() }
}
