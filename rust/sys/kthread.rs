// SPDX-License-Identifier: GPL-2.0

//! Kernel threads, as the seed's listener and connector threads are (a thin wrapper
//! around `kthread_run` / `kthread_stop`, which 6.12's Rust bindings lack).

use crate::sys::bindings;
use core::ffi::{c_int, c_void};
use core::ptr::NonNull;
use kernel::error::from_err_ptr;
use kernel::prelude::*;
use kernel::sync::Arc;

/// The body of a kernel thread: runs until [`should_stop`] says so, then returns.
/// A running kernel thread; dropping it stops it and waits for it to return.
struct KThread(NonNull<bindings::task_struct>);

// SAFETY: a task pointer may be used (stopped) from any thread.
unsafe impl Send for KThread {}
// SAFETY: as above; `&KThread` allows nothing.
unsafe impl Sync for KThread {}

impl Drop for KThread {
    fn drop(&mut self) {
        // SAFETY: the thread was started by `SharedThread::run` and only returns once asked to stop,
        // so the task is alive for `kthread_stop`, which waits for it.
        unsafe { bindings::sci_kthread_stop(self.0.as_ptr()) };
    }
}

/// The body of a kernel thread, whose state is shared through an `Arc` (the control
/// plane's listener and connector, a fabric backend's poller).
pub(crate) trait SharedMain: Send + Sync + 'static {
    /// The thread's main loop: runs until [`should_stop`] says so.
    fn main(&self);
}

/// A running kernel thread over shared state: dropping it stops the thread, waits for
/// it, then drops its reference to the state.
pub(crate) struct SharedThread<T: SharedMain> {
    /// Dropped first: stops the thread.
    _thread: KThread,
    /// Outlives the thread.
    _body: Arc<T>,
}

/// # Safety
///
/// `data` points to the `T` of the [`SharedThread`] that started this thread, which
/// outlives it.
unsafe extern "C" fn shared_trampoline<T: SharedMain>(data: *mut c_void) -> c_int {
    // SAFETY: see the function's contract.
    let body = unsafe { &*data.cast_const().cast::<T>() };
    body.main();
    0
}

impl<T: SharedMain> SharedThread<T> {
    /// Starts a kernel thread named `name` running `body.main()`.
    pub(crate) fn run(body: Arc<T>, name: &'static CStr) -> Result<Self> {
        let data = core::ptr::from_ref::<T>(&body).cast_mut().cast::<c_void>();
        // SAFETY: the trampoline matches `T`; `body` is kept alive in the returned value
        // until after the thread stopped; `name` is 'static.
        let task = from_err_ptr(unsafe {
            bindings::sci_kthread_run(
                Some(shared_trampoline::<T>),
                data,
                name.as_char_ptr().cast(),
            )
        })?;
        let thread = NonNull::new(task).map(KThread).ok_or(ENOMEM)?;
        Ok(Self {
            _thread: thread,
            _body: body,
        })
    }
}

/// Whether the current kernel thread has been asked to stop.
pub(crate) fn should_stop() -> bool {
    // SAFETY: called from a thread started by `KThread::run`.
    unsafe { bindings::sci_kthread_should_stop() }
}

/// Sleeps for up to `jiffies` (at least one), returning early when the thread is asked
/// to stop (`kthread_stop` wakes it).
pub(crate) fn sleep(jiffies: core::ffi::c_long) {
    // SAFETY: called from a kernel thread; sleeping interruptibly is always allowed there.
    unsafe { bindings::schedule_timeout_interruptible(jiffies.max(1)) };
}

/// The calling kernel thread runs as a threaded interrupt handler does (`SCHED_FIFO` at
/// the lowest priority): before every normal task, for work that stands in for an
/// interrupt and always sleeps again soon.
pub(crate) fn run_as_interrupt_thread() {
    // SAFETY: changes the policy of the current task, a kernel thread.
    unsafe { bindings::sci_sched_current_fifo_low() };
}

/// Sleeps `us` to twice `us` microseconds on an hrtimer: far less than a jiffy, for a
/// thread that polls while there is work.
pub(crate) fn sleep_us(us: u32) {
    let us = core::ffi::c_ulong::from(us.max(1));
    // SAFETY: called from a kernel thread, which may sleep.
    unsafe { bindings::sci_usleep_range(us, 2 * us) };
}

/// Sleeps `ms` milliseconds (uninterruptibly: for short waits in process context, such
/// as module init polling shared memory).
pub(crate) fn sleep_ms(ms: u32) {
    // SAFETY: `msleep` may be called from any sleepable context.
    unsafe { bindings::msleep(ms) };
}
