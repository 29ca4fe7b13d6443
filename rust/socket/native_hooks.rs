// SPDX-License-Identifier: GPL-2.0

//! The native socket's wake-ups forwarded to its `AF_SCI` socket: its own callbacks (data
//! ready, write space, state change, error report) are saved and replaced by forwarders
//! that call them and then wake the owner, the way `net/smc/af_smc.c` forwards those of its
//! "clcsock" after a fallback. The error the native socket reports is mirrored into the
//! owner, and kept from being reported twice.

use crate::socket::native::Native;
use crate::socket::sk::OwnSk;
use crate::sys::bindings;
use crate::sys::task::context_id;
use core::ffi::{c_int, c_void};
use core::ptr;
use core::sync::atomic::{fence, AtomicI32, AtomicPtr, AtomicUsize, Ordering};
use kernel::error::Result;

/// The saved callbacks of a native socket and the `AF_SCI` socket they now wake.
///
/// Lives inside the owning `AF_SCI` socket; the native socket's `sk_user_data` points at
/// it while the forwarding callbacks are installed. Written only under the native
/// socket's `sk_callback_lock` (write), read under it (read).
pub(crate) struct NativeHooks {
    owner: AtomicPtr<bindings::sock>,
    data_ready: AtomicUsize,
    write_space: AtomicUsize,
    state_change: AtomicUsize,
    error_report: AtomicUsize,
    /// The native `sk_err` last copied into the owner's `sk_err` (0: none pending).
    mirrored_error: AtomicI32,
    /// The context ([`context_id`]) that holds the native socket locked while it wakes
    /// the owner's reader (0: none): TCP calls `sk_data_ready` with its socket locked, and
    /// the owner's `read_sock` then reads it there, as `tcp_read_sock` under TCP's lock.
    held_by: AtomicUsize,
}

type SkCallback = unsafe extern "C" fn(*mut bindings::sock);

fn callback_to_usize(cb: Option<SkCallback>) -> usize {
    cb.map_or(0, |f| f as usize)
}

fn callback_from_usize(v: usize) -> Option<SkCallback> {
    if v == 0 {
        None
    } else {
        // SAFETY: `v` was produced by `callback_to_usize` from a valid function pointer of
        // exactly this type.
        Some(unsafe { core::mem::transmute::<usize, SkCallback>(v) })
    }
}

impl NativeHooks {
    /// Hooks that forward nowhere yet.
    pub(crate) const fn new() -> Self {
        Self {
            owner: AtomicPtr::new(ptr::null_mut()),
            data_ready: AtomicUsize::new(0),
            write_space: AtomicUsize::new(0),
            state_change: AtomicUsize::new(0),
            error_report: AtomicUsize::new(0),
            mirrored_error: AtomicI32::new(0),
            held_by: AtomicUsize::new(0),
        }
    }

    /// Whether this context holds the native socket locked and is waking the owner's
    /// reader ([`NativeHooks::wake_reader_held`], or the forwarded `sk_data_ready`).
    pub(crate) fn held_here(&self) -> bool {
        self.held_by.load(Ordering::Relaxed) == context_id()
    }

    /// Wakes `owner`'s reader with `native` (the socket these hooks serve) locked, so
    /// that its `read_sock` reads there as when TCP woke it (process context: may sleep).
    pub(crate) fn wake_reader_locked(&self, native: &Native, owner: *mut bindings::sock) {
        let sk = native.sk();
        // SAFETY: a live socket; locked and released in this call.
        unsafe { bindings::sci_lock_sock(sk) };
        self.wake_reader_held(owner);
        // SAFETY: locked above.
        unsafe { bindings::release_sock(sk) };
    }

    /// Wakes the owner's reader (`sk_data_ready`), saying that this context holds the
    /// native socket locked meanwhile (it must).
    pub(crate) fn wake_reader_held(&self, owner: *mut bindings::sock) {
        let before = self.held_by.swap(context_id(), Ordering::Relaxed);
        // SAFETY: the owner is live while its hooks are in use.
        unsafe { bindings::sci_wake_readable(owner) };
        self.held_by.store(before, Ordering::Relaxed);
    }

    /// The error copied into the owner that neither side has consumed yet, or 0.
    pub(crate) fn mirrored_error(&self) -> c_int {
        self.mirrored_error.load(Ordering::Acquire)
    }

    /// Forgets the copied error (one side consumed it).
    pub(crate) fn clear_mirrored_error(&self) {
        self.mirrored_error.store(0, Ordering::Release);
    }

    /// Keeps an error that both the native socket and its owner hold from being
    /// reported twice: once `SO_ERROR` consumed the owner's copy, the native one is
    /// dropped too. Called before an operation on the native socket.
    pub(crate) fn sync_error(&self, own: &OwnSk, native: &Native) {
        let mirrored = self.mirrored_error();
        if mirrored != 0 && own.error() == 0 {
            if native.peek_error() == mirrored {
                native.take_error();
            }
            self.clear_mirrored_error();
        }
    }

    /// After the native socket returned an error: if it was the mirrored one, it has been
    /// consumed there, so the owner's copy goes too.
    pub(crate) fn consumed<T>(&self, own: &OwnSk, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            let mirrored = self.mirrored_error();
            if mirrored != 0 && e.to_errno() == -mirrored {
                if own.error() == mirrored {
                    own.take_error();
                }
                self.clear_mirrored_error();
            }
        }
        r
    }

    /// The callbacks saved when forwarding was installed: what a connection accepted
    /// from this (listening) socket must get back, having inherited the forwarders.
    pub(crate) fn saved(&self) -> SavedCallbacks {
        SavedCallbacks([
            self.data_ready.load(Ordering::Relaxed),
            self.write_space.load(Ordering::Relaxed),
            self.state_change.load(Ordering::Relaxed),
            self.error_report.load(Ordering::Relaxed),
        ])
    }

    /// Forwards the wake-ups of `native` to `owner`, saving its callbacks here. `inherited`
    /// are the listener's saved callbacks when `native` was just accepted (it inherited the
    /// listener's forwarders, which are put back to them).
    pub(crate) fn attach(
        &self,
        native: &Native,
        owner: *mut bindings::sock,
        inherited: Option<SavedCallbacks>,
    ) {
        let sk = native.sk();
        // SAFETY: `sk` is live; callbacks are changed under the write lock, as
        // `smc_fback_replace_callbacks` does; `self` outlives the installation because the
        // owner calls `detach` before freeing it.
        unsafe {
            bindings::sci_callback_write_lock(sk);
            if let Some(saved) = inherited {
                saved.set(sk);
            }
            self.owner.store(owner, Ordering::Relaxed);
            self.data_ready
                .store(callback_to_usize((*sk).sk_data_ready), Ordering::Relaxed);
            self.write_space
                .store(callback_to_usize((*sk).sk_write_space), Ordering::Relaxed);
            self.state_change
                .store(callback_to_usize((*sk).sk_state_change), Ordering::Relaxed);
            self.error_report
                .store(callback_to_usize((*sk).sk_error_report), Ordering::Relaxed);
            (*sk).sk_data_ready = Some(forward_data_ready);
            (*sk).sk_write_space = Some(forward_write_space);
            (*sk).sk_state_change = Some(forward_state_change);
            (*sk).sk_error_report = Some(forward_error_report);
            (*owner).__sk_common.skc_state = (*sk).__sk_common.skc_state;
            bindings::sci_set_user_data(sk, ptr::from_ref(self).cast_mut().cast::<c_void>());
            bindings::sci_callback_write_unlock(sk);
        }
    }

    /// Puts the saved callbacks of `native` back; after this returns no forwarder touches
    /// `self`.
    pub(crate) fn detach(&self, native: &Native) {
        let sk = native.sk();
        // SAFETY: `sk` is live; see `attach`.
        unsafe {
            bindings::sci_callback_write_lock(sk);
            if bindings::sci_user_data(sk) == ptr::from_ref(self).cast_mut().cast::<c_void>() {
                self.saved().set(sk);
                bindings::sci_set_user_data(sk, ptr::null_mut());
            }
            bindings::sci_callback_write_unlock(sk);
        }
    }
}

/// A native socket's own callbacks (data ready, write space, state change, error
/// report), as saved in [`NativeHooks`].
#[derive(Clone, Copy)]
pub(crate) struct SavedCallbacks([usize; 4]);

impl SavedCallbacks {
    /// Puts back the callbacks a just-accepted socket should have had: it inherited the
    /// listener's forwarders, whose originals these are.
    pub(crate) fn restore(self, native: &Native) {
        let sk = native.sk();
        // SAFETY: `sk` is live; callbacks are changed under the write lock.
        unsafe {
            bindings::sci_callback_write_lock(sk);
            self.set(sk);
            bindings::sci_callback_write_unlock(sk);
        }
    }

    /// # Safety
    ///
    /// `sk` is live and its callback lock is held for writing.
    unsafe fn set(self, sk: *mut bindings::sock) {
        let Self([r, w, s, e]) = self;
        // SAFETY: see the function's contract.
        unsafe {
            (*sk).sk_data_ready = callback_from_usize(r);
            (*sk).sk_write_space = callback_from_usize(w);
            (*sk).sk_state_change = callback_from_usize(s);
            (*sk).sk_error_report = callback_from_usize(e);
        }
    }
}

/// Runs `f` with the hooks of native `sk`, under its callback lock, if they are installed.
///
/// # Safety
///
/// `sk` is a live socket whose callbacks were installed by [`NativeHooks::attach`].
unsafe fn with_hooks(sk: *mut bindings::sock, f: impl FnOnce(&NativeHooks)) {
    // SAFETY: `sk` is live (caller); the lock pins `sk_user_data` and the hooks it points
    // to, which `NativeHooks::detach` clears under the write lock before they are freed.
    unsafe {
        bindings::sci_callback_read_lock(sk);
        let hooks = bindings::sci_user_data(sk).cast::<NativeHooks>();
        if let Some(hooks) = hooks.as_ref() {
            f(hooks);
        }
        bindings::sci_callback_read_unlock(sk);
    }
}

/// Forwards `sk_data_ready` of a native socket to its owner.
///
/// # Safety
///
/// Called by the network stack with a live native socket whose callbacks
/// `NativeHooks::attach` installed.
unsafe extern "C" fn forward_data_ready(sk: *mut bindings::sock) {
    // SAFETY: called by the network stack with a live native socket; hooks only run
    // while installed.
    unsafe {
        with_hooks(sk, |h| {
            if let Some(cb) = callback_from_usize(h.data_ready.load(Ordering::Relaxed)) {
                cb(sk);
            }
            // TCP calls this with `sk` locked: bottom-half locked in its softirq receive,
            // owned while a process releases it and its backlog is received.
            h.wake_reader_held(h.owner.load(Ordering::Relaxed));
        })
    }
}

/// Forwards `sk_write_space` of a native socket to its owner.
///
/// # Safety
///
/// Called by the network stack with a live native socket whose callbacks
/// `NativeHooks::attach` installed.
unsafe extern "C" fn forward_write_space(sk: *mut bindings::sock) {
    // SAFETY: as in `forward_data_ready`.
    unsafe {
        with_hooks(sk, |h| {
            if let Some(cb) = callback_from_usize(h.write_space.load(Ordering::Relaxed)) {
                cb(sk);
            }
            bindings::sci_wake_writable(h.owner.load(Ordering::Relaxed));
        })
    }
}

/// Forwards `sk_state_change` of a native socket to its owner.
///
/// # Safety
///
/// Called by the network stack with a live native socket whose callbacks
/// `NativeHooks::attach` installed.
unsafe extern "C" fn forward_state_change(sk: *mut bindings::sock) {
    // SAFETY: as in `forward_data_ready`; the owner is alive while the hooks are
    // installed, and mirroring `sk_state` keeps SO_ACCEPTCONN and SCI_INFO truthful.
    unsafe {
        with_hooks(sk, |h| {
            if let Some(cb) = callback_from_usize(h.state_change.load(Ordering::Relaxed)) {
                cb(sk);
            }
            let owner = h.owner.load(Ordering::Relaxed);
            (*owner).__sk_common.skc_state = (*sk).__sk_common.skc_state;
            bindings::sci_wake_state(owner);
        })
    }
}

/// Forwards `sk_error_report` of a native socket to its owner.
///
/// # Safety
///
/// Called by the network stack with a live native socket whose callbacks
/// `NativeHooks::attach` installed.
unsafe extern "C" fn forward_error_report(sk: *mut bindings::sock) {
    // SAFETY: as in `forward_data_ready`. The error is copied, not moved: a blocking call
    // on the native socket still reads it, and `SO_ERROR` (which reads the owner) sees it
    // too; `SciSock::sync_error` keeps the two from reporting it twice.
    unsafe {
        with_hooks(sk, |h| {
            if let Some(cb) = callback_from_usize(h.error_report.load(Ordering::Relaxed)) {
                cb(sk);
            }
            let owner = h.owner.load(Ordering::Relaxed);
            let err = ptr::read_volatile(ptr::addr_of!((*sk).sk_err));
            if err != 0 {
                // smp_wmb(): the native state change (`tcp_done`) before our copy of the
                // error, which `SciSock::poll` reads first.
                fence(Ordering::Release);
                ptr::write_volatile(ptr::addr_of_mut!((*owner).sk_err), err);
                h.mirrored_error.store(err, Ordering::Release);
            }
            bindings::sci_wake_error(owner);
        })
    }
}
