// SPDX-License-Identifier: GPL-2.0

//! A mutex that a reader in atomic context may also take, without waiting: the lock of an
//! SCI connection, which a kernel reader's `read_sock` takes from `sk_data_ready` (softirq
//! context, or bottom halves off), as TCP's softirq receive takes a socket that no process
//! owns (`bh_lock_sock` and `sock_owned_by_user`).
//!
//! Processes take the mutex and then the gate; the atomic side takes only the gate, with
//! bottom halves off, and is refused (never waits) while a process holds it. A process
//! that finds the gate taken by the atomic side spins: that side runs on another CPU (on
//! this one it ran to its end before the process resumed) and never sleeps. So the
//! process side costs a mutex and one atomic exchange, and lockdep sees the mutex (the gate
//! is a bit lock, as `bh_lock_sock` under `lock_sock` is).

use crate::sys::bindings as sci;
use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::sync::lock::{mutex::MutexBackend, Guard};
use kernel::sync::{LockClassKey, Mutex};

const FREE: u32 = 0;
const PROCESS: u32 = 1;
const ATOMIC: u32 = 2;

/// A mutex whose data an atomic-context reader may take when no process holds it;
/// [`new_gated_mutex!`] makes one.
#[pin_data]
pub(crate) struct GatedMutex<T> {
    #[pin]
    mutex: Mutex<()>,
    /// Who holds the data: nobody, the holder of `mutex`, or an atomic-context reader.
    gate: AtomicU32,
    data: UnsafeCell<T>,
}

// SAFETY: the data is reached only through a guard, which the gate makes exclusive.
unsafe impl<T: Send> Send for GatedMutex<T> {}
// SAFETY: as above: one holder at a time, from any thread.
unsafe impl<T: Send> Sync for GatedMutex<T> {}

/// Makes a [`GatedMutex`], named as `kernel::new_mutex!` names a mutex.
macro_rules! new_gated_mutex {
    ($inner:expr $(, $name:literal)? $(,)?) => {
        $crate::sys::gated_mutex::GatedMutex::new(
            $inner,
            ::kernel::optional_name!($($name)?),
            ::kernel::static_lock_class!(),
        )
    };
}
pub(crate) use new_gated_mutex;

impl<T> GatedMutex<T> {
    /// A gated mutex around `data`; `name` and `key` are lockdep's for the mutex.
    pub(crate) fn new(
        data: T,
        name: &'static CStr,
        key: &'static LockClassKey,
    ) -> impl PinInit<Self> {
        pin_init!(Self {
            mutex <- Mutex::new((), name, key),
            gate: AtomicU32::new(FREE),
            data: UnsafeCell::new(data),
        })
    }

    /// Takes the data in process context (may sleep).
    pub(crate) fn lock(&self) -> GatedGuard<'_, T> {
        let held = self.mutex.lock();
        while self
            .gate
            .compare_exchange(FREE, PROCESS, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            // SAFETY: a pause in a spin; the atomic side holds the gate briefly.
            unsafe { sci::sci_cpu_relax() };
        }
        GatedGuard {
            lock: self,
            _held: held,
        }
    }

    /// Takes the data in any context without waiting, with bottom halves off while it is
    /// held; `None` when a process (or another atomic reader) holds it.
    pub(crate) fn try_lock_atomic(&self) -> Option<AtomicGuard<'_, T>> {
        // SAFETY: paired with the enable below or in the guard's drop.
        unsafe { sci::sci_local_bh_disable() };
        if self
            .gate
            .compare_exchange(FREE, ATOMIC, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            return Some(AtomicGuard { lock: self });
        }
        // SAFETY: bottom halves were turned off above.
        unsafe { sci::sci_local_bh_enable() };
        None
    }
}

/// The data, taken in process context.
pub(crate) struct GatedGuard<'a, T> {
    lock: &'a GatedMutex<T>,
    _held: Guard<'a, (), MutexBackend>,
}

impl<T> Deref for GatedGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: the gate is ours (`PROCESS`) while the guard lives.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> DerefMut for GatedGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; the guard is borrowed mutably.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T> Drop for GatedGuard<'_, T> {
    fn drop(&mut self) {
        // The gate first: the mutex goes with the field, after this.
        self.lock.gate.store(FREE, Ordering::Release);
    }
}

/// The data, taken without waiting (bottom halves off while it lives).
pub(crate) struct AtomicGuard<'a, T> {
    lock: &'a GatedMutex<T>,
}

impl<T> Deref for AtomicGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: the gate is ours (`ATOMIC`) while the guard lives.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> DerefMut for AtomicGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; the guard is borrowed mutably.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T> Drop for AtomicGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.gate.store(FREE, Ordering::Release);
        // SAFETY: turned off when the guard was made.
        unsafe { sci::sci_local_bh_enable() };
    }
}
