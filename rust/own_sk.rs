// SPDX-License-Identifier: GPL-2.0

//! An `AF_SCI` socket's own `struct sock` as the safe code sees it ([`OwnSk`]: errors,
//! state, buffer mirrors, waiting on its wait queue), and the few kernel services the
//! socket logic needs (signals, timeouts, module parameters, option buffers). A thin
//! wrapper: the raw accesses live here so that `sci_sock.rs` and `sci_conn.rs` have none.

use crate::bindings;
use crate::native::OptVal;
use crate::sockets::NetStats;
use core::ffi::{c_int, c_long, c_uint};
use core::ptr::{self, NonNull};
use kernel::error::{to_result, Result};
use kernel::prelude::*;
use kernel::time::Ktime;

/// A safe view of an `AF_SCI` socket's own `struct sock`.
pub(crate) struct OwnSk(pub(crate) NonNull<bindings::sock>);

impl OwnSk {
    /// The raw pointer, for the native socket's wake-up forwarding.
    pub(crate) fn as_ptr(&self) -> *mut bindings::sock {
        self.0.as_ptr()
    }

    /// The network namespace the socket lives in.
    pub(crate) fn net(&self) -> *mut bindings::net {
        // SAFETY: our sk is live while any of its ops runs.
        unsafe { bindings::sci_sock_net(self.as_ptr()) }
    }

    /// The socket's network namespace as SCI connection requests name it: its cookie,
    /// and whether it is the initial namespace.
    pub(crate) fn namespace(&self) -> (u64, bool) {
        let net = self.net();
        // SAFETY: `net` is the live namespace of a live socket; both read a field.
        unsafe {
            (
                bindings::sci_net_cookie(net),
                bindings::sci_net_is_init(net),
            )
        }
    }

    /// The counters of the socket's network namespace.
    pub(crate) fn stats(&self) -> &NetStats {
        // SAFETY: the pernet data (registered before the family, zeroed: a valid
        // `NetStats`) lives as long as the namespace, which outlives its sockets.
        unsafe { &*bindings::sci_net_generic(self.net()).cast::<NetStats>() }
    }

    /// The socket's inode number (as in `/proc/PID/fd`).
    pub(crate) fn inode(&self) -> u64 {
        // SAFETY: live sk; `sock_i_ino` reads it under `sk_callback_lock`.
        unsafe { bindings::sci_sock_ino(self.as_ptr()) }
    }

    /// The socket's cookie.
    pub(crate) fn cookie(&self) -> u64 {
        // SAFETY: live sk; the cookie is set once, atomically.
        unsafe { bindings::sci_sock_cookie(self.as_ptr()) }
    }

    /// The pending error as a positive errno, or 0, without consuming it.
    pub(crate) fn error(&self) -> c_int {
        // SAFETY: live sk; a racy int read, as `sock_error` does.
        unsafe { ptr::read_volatile(ptr::addr_of!((*self.as_ptr()).sk_err)) }
    }

    /// Sets the pending error (positive errno), as the TCP stack does on a reset.
    pub(crate) fn set_error(&self, err: c_int) {
        // SAFETY: live sk; an int store, as `tcp_reset` does.
        unsafe { ptr::write_volatile(ptr::addr_of_mut!((*self.as_ptr()).sk_err), err) }
    }

    /// Consumes the pending error (as `SO_ERROR` does), as a positive errno or 0.
    pub(crate) fn take_error(&self) -> c_int {
        // SAFETY: live sk; `sock_error` exchanges `sk_err` with 0.
        -unsafe { bindings::sci_sock_error(self.as_ptr()) }
    }

    /// Sets the TCP state reported to `SO_ACCEPTCONN` and `SCI_INFO`.
    pub(crate) fn set_state(&self, state: u32) {
        // SAFETY: live sk; a byte store.
        unsafe {
            ptr::write_volatile(
                ptr::addr_of_mut!((*self.as_ptr()).__sk_common.skc_state),
                state as u8,
            )
        }
    }

    /// Mirrors the native buffer sizes, which `SO_SNDBUF`/`SO_RCVBUF` read from here.
    pub(crate) fn set_buffer_sizes(&self, (snd, rcv): (c_int, c_int)) {
        // SAFETY: live sk; int stores, as `sk_setsockopt`'s WRITE_ONCE.
        unsafe {
            ptr::write_volatile(ptr::addr_of_mut!((*self.as_ptr()).sk_sndbuf), snd);
            ptr::write_volatile(ptr::addr_of_mut!((*self.as_ptr()).sk_rcvbuf), rcv);
        }
    }

    /// Mirrors `SO_REUSEADDR`/`SO_REUSEPORT`, which the socket layer refuses to set on a
    /// socket that is not `AF_INET`/`AF_INET6` but reads back from ours.
    pub(crate) fn set_reuse_flags(&self, (reuse, reuseport): (u8, u8)) {
        let sk = self.as_ptr();
        // SAFETY: live sk; the bitfields share a byte, so they change under the socket
        // lock, as `sk_setsockopt` changes them.
        unsafe {
            bindings::sci_lock_sock(sk);
            (*sk).__sk_common.set_skc_reuse(reuse);
            (*sk).__sk_common.set_skc_reuseport(reuseport);
            bindings::release_sock(sk);
        }
    }

    /// Applies a `SOL_SOCKET` option to our own sk, where `getsockopt` reads it.
    pub(crate) fn set_socket_option(&self, optname: c_int, val: OptVal, len: c_uint) -> Result {
        // SAFETY: live sk with its socket (ops run on an attached socket).
        to_result(unsafe {
            bindings::sock_setsockopt(
                (*self.as_ptr()).sk_socket,
                bindings::SOL_SOCKET as c_int,
                optname,
                val,
                len,
            )
        })
    }
}

impl OwnSk {
    /// The socket's receive timeout (`SO_RCVTIMEO`), 0 when non-blocking, in jiffies.
    pub(crate) fn rcvtimeo(&self, nonblock: bool) -> c_long {
        // SAFETY: live sk.
        unsafe { bindings::sci_sock_rcvtimeo(self.as_ptr(), nonblock) }
    }

    /// The socket's send timeout (`SO_SNDTIMEO`), 0 when non-blocking, in jiffies.
    pub(crate) fn sndtimeo(&self, nonblock: bool) -> c_long {
        // SAFETY: live sk.
        unsafe { bindings::sci_sock_sndtimeo(self.as_ptr(), nonblock) }
    }

    /// Sleeps on the socket's wait queue until `ready()` returns true (`Ok`), `timeo`
    /// jiffies pass (`EAGAIN`) or a signal arrives (`ERESTARTSYS`/`EINTR`). `ready` runs
    /// with the wait entry already queued, so a wake-up between its check and the sleep
    /// is not lost; `timeo` is updated with the time left.
    pub(crate) fn wait(
        &self,
        timeo: &mut c_long,
        mut ready: impl FnMut() -> Result<bool>,
    ) -> Result {
        let mut entry = core::mem::MaybeUninit::<bindings::wait_queue_entry>::zeroed();
        let sk = self.as_ptr();
        // SAFETY: the entry lives on this stack frame and is removed before it returns;
        // `sk` is live while its op runs.
        unsafe {
            bindings::sci_wait_init(entry.as_mut_ptr());
            bindings::sci_wait_add(sk, entry.as_mut_ptr());
        }
        let r = loop {
            match ready() {
                Ok(true) => break Ok(()),
                Err(e) => break Err(e),
                Ok(false) => {}
            }
            if *timeo == 0 {
                break Err(EAGAIN);
            }
            // SAFETY: plain queries of the current task.
            if unsafe { bindings::sci_signal_pending() } {
                // SAFETY: as above.
                break Err(kernel::error::Error::from_errno(unsafe {
                    bindings::sci_sock_intr_errno(*timeo)
                }));
            }
            // SAFETY: the entry is queued on `sk`'s wait queue.
            *timeo = unsafe { bindings::sci_wait_sleep(entry.as_mut_ptr(), *timeo) };
        };
        // SAFETY: queued above.
        unsafe { bindings::sci_wait_remove(sk, entry.as_mut_ptr()) };
        r
    }
}

impl OwnSk {
    /// Polls `ready()` for up to `spin_us` microseconds before a caller sleeps (the
    /// seed's poll-then-sleep): true as soon as it returns true, false when the time is
    /// up, a signal is pending or the scheduler wants the CPU back.
    pub(crate) fn spin(&self, spin_us: u32, mut ready: impl FnMut() -> bool) -> bool {
        if spin_us == 0 {
            return false;
        }
        let end = Ktime::ktime_get()
            .to_ns()
            .saturating_add(i64::from(spin_us) * 1000);
        loop {
            if ready() {
                return true;
            }
            // SAFETY: plain queries of the current task.
            let stop = unsafe { bindings::sci_signal_pending() || bindings::sci_need_resched() };
            if stop || Ktime::ktime_get().to_ns() >= end {
                return false;
            }
            // SAFETY: a CPU pause.
            unsafe { bindings::sci_cpu_relax() };
        }
    }

    /// `SO_LINGER` with a zero timeout is set: close aborts the connection.
    pub(crate) fn linger_zero(&self) -> bool {
        // SAFETY: live sk.
        unsafe { bindings::sci_linger_zero(self.as_ptr()) }
    }

    /// Whether poll, select, epoll or `O_ASYNC` watches the socket (or a call sleeps on
    /// it): someone who wants to hear of every arrival, as TCP tells them.
    pub(crate) fn watched(&self) -> bool {
        // SAFETY: live sk; reads its wait queue under RCU and a flag bit.
        unsafe { bindings::sci_sock_watched(self.as_ptr()) }
    }

    /// Wakes the socket's waiters (poll, epoll, blocking calls).
    pub(crate) fn wake(&self, what: Wake) {
        wake_sk(self.wake_token(), what);
    }

    /// The sk's address, to be woken by a connection or listen queue (see [`wake_sk`]).
    pub(crate) fn wake_token(&self) -> usize {
        self.as_ptr() as usize
    }
}

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
/// it sleeps, for sockets that did not set `SCI_SPIN_US`.
pub(crate) fn default_spin_us() -> u32 {
    // SAFETY: reads a module parameter.
    let v = unsafe { bindings::sci_spin_us_param() };
    u32::try_from(v).unwrap_or(0).min(SPIN_US_MAX)
}

/// Whether the `sci_loopback` module parameter enables the SCI data path.
pub(crate) fn sci_loopback_enabled() -> bool {
    // SAFETY: reads a module parameter.
    unsafe { bindings::sci_loopback_param() }
}

/// Sends `SIGPIPE` to the current task (a write on a connection that is shut).
pub(crate) fn send_sigpipe() {
    // SAFETY: signals the current task.
    unsafe { bindings::sci_send_sigpipe() }
}

/// How a connection wakes the socket that owns it.
#[derive(Clone, Copy)]
pub(crate) enum Wake {
    /// Data or end of stream to read.
    Readable,
    /// Space to write.
    Writable,
    /// A state change (connected, closed, reset).
    State,
}

/// Wakes the waiters of the `AF_SCI` sk at `sk` (an address stored by its connection
/// while the socket owns it; see `sci_conn::Conn::set_owner`).
pub(crate) fn wake_sk(sk: usize, what: Wake) {
    let sk = sk as *mut bindings::sock;
    if sk.is_null() {
        return;
    }
    // SAFETY: the connection clears the address under its owner lock before the socket
    // is released, and calls this under the same lock, so `sk` is live.
    unsafe {
        match what {
            Wake::Readable => bindings::sci_wake_readable(sk),
            Wake::Writable => bindings::sci_wake_writable(sk),
            Wake::State => bindings::sci_wake_state(sk),
        }
    }
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

/// Builds an option value in kernel memory, for replaying a recorded option.
pub(crate) fn kernel_optval(buf: &mut [u8]) -> OptVal {
    // SAFETY: builds a tagged pointer; the buffer outlives the call it is passed to.
    unsafe { bindings::sci_kernel_sockptr(buf.as_mut_ptr().cast()) }
}

/// Copies `dst.len()` bytes of an option value (user or kernel memory).
pub(crate) fn copy_optval(dst: &mut [u8], src: OptVal) -> Result {
    // SAFETY: `dst` is a valid buffer of its length; `src` is checked by copy_from_sockptr.
    to_result(unsafe { bindings::sci_copy_from_sockptr(dst.as_mut_ptr().cast(), src, dst.len()) })
}
