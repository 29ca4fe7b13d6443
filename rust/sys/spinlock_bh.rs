// SPDX-License-Identifier: GPL-2.0

//! A spinlock taken with bottom halves off (`spin_lock_bh`), as a backend of the kernel's
//! [`Lock`]: Linux 6.12's Rust has only `spin_lock`.
//!
//! Doorbells are delivered in softirq context ([`crate::sys::pci::IrqHandler::softirq`]),
//! and every lock they take is then also taken there. Taken with bottom halves on in
//! process context, such a lock could be interrupted by the softirq on the same CPU,
//! which would spin on it forever; lockdep reports that as an inconsistent
//! `SOFTIRQ-ON-W` / `IN-SOFTIRQ-W` use. So those locks are all of this kind.

use crate::sys::bindings as sci;
use kernel::bindings;
use kernel::sync::lock::{Backend, Lock};

/// A spinlock taken with bottom halves off; [`new_spinlock_bh!`] makes one.
pub(crate) type SpinLockBh<T> = Lock<T, SpinLockBhBackend>;

/// Makes a [`SpinLockBh`], named as `kernel::new_spinlock!` names a spinlock.
macro_rules! new_spinlock_bh {
    ($inner:expr $(, $name:literal)? $(,)?) => {
        $crate::sys::spinlock_bh::SpinLockBh::new(
            $inner,
            ::kernel::optional_name!($($name)?),
            ::kernel::static_lock_class!(),
        )
    };
}
pub(crate) use new_spinlock_bh;

/// The backend: a `spinlock_t`, locked by `spin_lock_bh`.
pub(crate) struct SpinLockBhBackend;

// SAFETY: the kernel's `spinlock_t` gives mutual exclusion; `spin_lock_bh` and
// `spin_unlock_bh` pair as `lock` and `unlock` do, and `relock` (the default) locks the
// same way, so bottom halves are off exactly while the lock is held.
unsafe impl Backend for SpinLockBhBackend {
    type State = bindings::spinlock_t;
    type GuardState = ();

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut bindings::lock_class_key,
    ) {
        // SAFETY: the caller gives a `ptr` valid for writes and a `name` and `key` valid
        // for ever, as `__spin_lock_init` needs.
        unsafe { bindings::__spin_lock_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: the caller gives an initialised lock; the helper's `spinlock_t` is the
        // kernel's.
        unsafe { sci::sci_spin_lock_bh(ptr.cast()) }
    }

    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // SAFETY: the caller holds the lock, taken by `lock` with bottom halves off.
        unsafe { sci::sci_spin_unlock_bh(ptr.cast()) }
    }
}
