// SPDX-License-Identifier: GPL-2.0

//! A work item of a socket: a function of its `struct sock` run later in process context,
//! for what an atomic-context caller must not do itself (sleep on a lock, finish a move).

use crate::sys::bindings;
use core::ptr::NonNull;
use kernel::prelude::*;
use kernel::types::Opaque;

/// The function a [`SkWork`] runs, with the sock it was queued for.
pub(crate) type SkWorkFn = unsafe extern "C" fn(sk: *mut bindings::sock);

/// A socket's work item, on the kernel's high-priority workqueue.
///
/// # Invariants
///
/// Its owner queues it only for a live sock that the owner's state lives in, and cancels
/// it ([`SkWork::cancel`]) in that socket's release, before the sock can go.
#[pin_data]
pub(crate) struct SkWork {
    #[pin]
    w: Opaque<bindings::sci_sk_work>,
}

// SAFETY: the work item is the kernel's, made to be queued and run from any CPU.
unsafe impl Send for SkWork {}
// SAFETY: as above; queueing and cancelling synchronise in the workqueue code.
unsafe impl Sync for SkWork {}

impl SkWork {
    /// A work item that runs `run`.
    pub(crate) fn new(run: SkWorkFn) -> impl PinInit<Self> {
        pin_init!(Self {
            // SAFETY: initialises the work item in place, before anything can queue it.
            w <- Opaque::ffi_init(move |p| unsafe { bindings::sci_sk_work_init(p, Some(run)) }),
        })
    }

    /// Queues the work for `sk` (a no-op while it is queued and has not started).
    ///
    /// # Safety
    ///
    /// `sk` is the live sock whose state holds this work item, and its release cancels
    /// the work (the type's invariants).
    pub(crate) unsafe fn queue(&self, sk: NonNull<bindings::sock>) {
        // SAFETY: an initialised work item; the caller keeps `sk` live until the work ran
        // or was cancelled.
        unsafe { bindings::sci_sk_work_queue(self.w.get(), sk.as_ptr()) }
    }

    /// Cancels the work and waits for a run under way (process context; may sleep).
    pub(crate) fn cancel(&self) {
        // SAFETY: an initialised work item.
        unsafe { bindings::sci_sk_work_cancel(self.w.get()) }
    }
}
