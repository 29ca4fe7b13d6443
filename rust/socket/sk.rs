// SPDX-License-Identifier: GPL-2.0

//! An `AF_SCI` socket's own `struct sock` as the safe code sees it ([`OwnSk`]: errors,
//! state, buffer mirrors, waiting on its wait queue), and the few kernel services the
//! socket logic needs (signals, timeouts, module parameters, option buffers). A thin
//! wrapper: the raw accesses live here so that `sock.rs` and the connection layer have none.

use crate::conn::Caller;
use crate::socket::stats::NetStats;
use crate::sys::bindings;
use crate::sys::net::{Msg, OptVal};
use crate::sys::percpu_counters::HotCounter;
use crate::sys::sk_work::SkWork;
use crate::sys::wake::{wake_sk, Wake};
use core::ffi::{c_int, c_long, c_uint};
use core::ptr::{self, NonNull};
use kernel::error::{to_result, Result};
use kernel::prelude::*;
use kernel::time::Ktime;

/// A safe view of an `AF_SCI` socket's own `struct sock`.
///
/// # Invariants
///
/// The pointer is an `AF_SCI` sock (allocated by the socket adapter, so its wait queue,
/// namespace and pernet counters are set up) that stays live while the view is used: the
/// socket op, the counted reference (`HeldSk`) or the registry visit that made the view
/// keeps it so. A view is never stored beyond that.
pub(crate) struct OwnSk(NonNull<bindings::sock>);

/// A registered `AF_SCI` sock, for the socket registry: it is removed from the registry
/// in `release`, before the sock can be freed.
pub(crate) struct SkRef(NonNull<bindings::sock>);

// SAFETY: only a pointer, dereferenced under the registry's lock while the sock is live.
unsafe impl Send for SkRef {}

impl SkRef {
    /// A registry entry for `own`.
    pub(crate) fn new(own: &OwnSk) -> Self {
        Self(own.0)
    }

    /// The sock, for a visit under the registry's lock (while it is registered, it is live).
    pub(crate) fn own(&self) -> OwnSk {
        OwnSk(self.0)
    }
}

impl OwnSk {
    /// A view of `sk`.
    ///
    /// # Safety
    ///
    /// `sk` is an `AF_SCI` sock that stays live while the view is used (the type's
    /// invariants).
    pub(crate) unsafe fn from_raw(sk: NonNull<bindings::sock>) -> Self {
        // INVARIANT: the caller's contract.
        Self(sk)
    }

    /// The sock, for a counted reference that keeps it.
    pub(crate) fn as_non_null(&self) -> NonNull<bindings::sock> {
        self.0
    }

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
        unsafe { &*bindings::sci_sk_net_generic(self.as_ptr()).cast::<NetStats>() }
    }

    /// Adds `n` to this CPU's count of `counter` in the socket's namespace (the counters
    /// bumped once a datagram or a read: `sys/percpu_counters.rs`).
    pub(crate) fn count(&self, counter: HotCounter, n: u64) {
        // SAFETY: live sk, whose namespace's counters (and their per-CPU area, allocated
        // by the namespace's `init`) outlive it; `this_cpu_add` works in any context.
        unsafe { bindings::sci_sk_hot_add(self.as_ptr(), counter as u32, n) }
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

    /// The TCP state in `sk_state`.
    pub(crate) fn state(&self) -> u32 {
        // SAFETY: live sk; a racy read of a byte is what `sk_state` readers do.
        u32::from(unsafe {
            ptr::read_volatile(ptr::addr_of!((*self.as_ptr()).__sk_common.skc_state))
        })
    }

    /// Sets the TCP state reported to `SO_ACCEPTCONN` and `SCI_INFO` (and read by kernel
    /// users, `read_sock`).
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

    /// `SO_RCVLOWAT` as set on ours (the socket layer sets it there), at least 1.
    pub(crate) fn rcvlowat(&self) -> usize {
        // SAFETY: live sk; a racy int read, as `sock_rcvlowat()` takes it.
        let v = unsafe { ptr::read_volatile(ptr::addr_of!((*self.as_ptr()).sk_rcvlowat)) };
        usize::try_from(v).unwrap_or(1).max(1)
    }

    /// `SO_PEEK_OFF` as set on ours (`set_peek_off`): -1 when unset.
    pub(crate) fn peek_off(&self) -> i32 {
        // SAFETY: live sk; a racy int read, as `sk_peek_offset()` takes it.
        unsafe { ptr::read_volatile(ptr::addr_of!((*self.as_ptr()).sk_peek_off)) }
    }

    /// Sets `SO_PEEK_OFF` on ours (-1: unset), where `getsockopt` reads it.
    pub(crate) fn set_peek_off(&self, off: i32) {
        // SAFETY: live sk; `sk_set_peek_off` is one `WRITE_ONCE`.
        unsafe { bindings::sk_set_peek_off(self.as_ptr(), off) };
    }

    /// Moves `SO_PEEK_OFF`, when set, by `delta` bytes, not below 0
    /// (`sk_peek_offset_fwd()`/`sk_peek_offset_bwd()`).
    fn move_peek_off(&self, delta: i64) {
        let off = self.peek_off();
        if off < 0 {
            return;
        }
        self.set_peek_off((i64::from(off) + delta).clamp(0, i64::from(i32::MAX)) as i32);
    }

    /// Mirrors `SO_ZEROCOPY`, which the socket layer refuses to set on a socket that is not
    /// `AF_INET`/`AF_INET6` but reads back from ours.
    pub(crate) fn set_zerocopy(&self, on: bool) {
        // SAFETY: live sk; an atomic bit of its flags.
        unsafe { bindings::sci_sock_set_zerocopy(self.as_ptr(), on) }
    }

    /// `SO_ZEROCOPY` as mirrored on ours.
    pub(crate) fn zerocopy(&self) -> bool {
        // SAFETY: live sk; an atomic bit of its flags.
        unsafe { bindings::sci_sock_zerocopy(self.as_ptr()) }
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

    /// Puts the receive timestamp a TCP read would carry into a read's message (nothing
    /// when the socket asked for none: `SO_TIMESTAMP` and its kin, which the socket layer
    /// sets on this sk). A ring holds no arrival times, so the stamp is the read's: about
    /// when the bytes arrived for a reader that waited for them, later for bytes that
    /// waited in the ring.
    pub(crate) fn put_rx_timestamp(&self, msg: Msg) {
        // SAFETY: live sk; the socket layer passes a live message, and `put_cmsg` checks
        // its room.
        unsafe { bindings::sci_tcp_put_rx_timestamp(self.as_ptr(), msg) }
    }

    /// Takes the socket-level options set on `listener` (timeouts, linger, keepalive,
    /// buffer sizes set by hand, timestamps, ...: `sci_sock_inherit_options`), as a TCP
    /// socket accepted on it has them.
    pub(crate) fn inherit_options(&self, listener: &OwnSk) {
        // SAFETY: both socks are live; process context (the helper locks `self`).
        unsafe { bindings::sci_sock_inherit_options(self.as_ptr(), listener.as_ptr()) }
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
    pub(crate) fn wait(&self, timeo: &mut c_long, ready: impl FnMut() -> Result<bool>) -> Result {
        self.wait_measured(timeo, ready).0
    }

    /// [`OwnSk::wait`], and what its last sleep cost: the microseconds from the wake-up
    /// that ended it to this task running again (0 when none did: it did not sleep, or a
    /// timeout or signal ended it). Adaptive spinning weighs a spin against it.
    pub(crate) fn wait_measured(
        &self,
        timeo: &mut c_long,
        mut ready: impl FnMut() -> Result<bool>,
    ) -> (Result, u32) {
        let mut entry = core::mem::MaybeUninit::<bindings::sci_wait>::zeroed();
        let sk = self.as_ptr();
        let mut wake_ns = 0;
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
            // SAFETY: the entry is queued on `sk`'s wait queue; the helper sets its
            // `wake_ns`, read right after.
            *timeo = unsafe { bindings::sci_wait_sleep(entry.as_mut_ptr(), *timeo) };
            // SAFETY: as above; a plain read of the entry on this stack frame.
            wake_ns = unsafe { (*entry.as_ptr()).wake_ns };
        };
        // SAFETY: queued above.
        unsafe { bindings::sci_wait_remove(sk, entry.as_mut_ptr()) };
        (r, u32::try_from(wake_ns / 1000).unwrap_or(u32::MAX))
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

    /// Queues `work`, a work item of this sock's own state (`SciSock::read_work`), for
    /// this sock.
    pub(crate) fn queue_work(&self, work: &SkWork) {
        // SAFETY: the work item lives in this sock's state, whose release cancels it
        // before the sock can go (`SciSock::release`); the sock is live now (invariant).
        unsafe { work.queue(self.0) }
    }

    /// The sk's address, to be woken by a connection or listen queue (see [`wake_sk`]).
    pub(crate) fn wake_token(&self) -> usize {
        self.as_ptr() as usize
    }
}

/// What a connection needs of its socket (see [`Caller`]): the sk wrapper's own methods.
impl Caller for OwnSk {
    fn rcvtimeo(&self, nonblock: bool) -> c_long {
        OwnSk::rcvtimeo(self, nonblock)
    }

    fn sndtimeo(&self, nonblock: bool) -> c_long {
        OwnSk::sndtimeo(self, nonblock)
    }

    fn spin(&self, spin_us: u32, ready: impl FnMut() -> bool) -> bool {
        OwnSk::spin(self, spin_us, ready)
    }

    fn wait_measured(
        &self,
        timeo: &mut c_long,
        ready: impl FnMut() -> Result<bool>,
    ) -> (Result, u32) {
        OwnSk::wait_measured(self, timeo, ready)
    }

    fn rcvlowat(&self) -> usize {
        OwnSk::rcvlowat(self)
    }

    fn peek_offset(&self) -> usize {
        usize::try_from(self.peek_off()).unwrap_or(0)
    }

    fn peek_offset_moved(&self, peeked: bool, bytes: usize) {
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        self.move_peek_off(if peeked { bytes } else { -bytes });
    }

    fn error(&self) -> c_int {
        OwnSk::error(self)
    }

    fn set_error(&self, err: c_int) {
        OwnSk::set_error(self, err)
    }

    fn take_error(&self) -> c_int {
        OwnSk::take_error(self)
    }

    fn watched(&self) -> bool {
        OwnSk::watched(self)
    }

    fn note_no_room(&self) {
        // SAFETY: live sk; sets a flag bit of its socket, if it has one.
        unsafe { bindings::sci_note_no_room(self.as_ptr()) }
    }

    fn received_directly(&self, bytes: usize) {
        self.count(HotCounter::DirectReceived, bytes as u64);
    }
}
