// SPDX-License-Identifier: GPL-2.0

//! The module-wide SCI control plane, reachable from socket ops, fabric callbacks and
//! kernel threads (a thin wrapper around one static pointer).

use crate::control::ControlPlane;
use core::ptr;
use core::sync::atomic::{AtomicPtr, Ordering};

static PLANE: AtomicPtr<ControlPlane> = AtomicPtr::new(ptr::null_mut());

/// Makes `plane` reachable. It must stay alive and pinned until [`uninstall`].
pub(crate) fn install(plane: &ControlPlane) {
    PLANE.store(ptr::from_ref(plane).cast_mut(), Ordering::Release);
}

/// Makes the plane unreachable again (module exit, before the plane is dropped; no
/// socket exists any more then, and the threads are stopped).
pub(crate) fn uninstall() {
    PLANE.store(ptr::null_mut(), Ordering::Release);
}

/// The installed control plane, if any.
pub(crate) fn plane() -> Option<&'static ControlPlane> {
    let p = PLANE.load(Ordering::Acquire);
    // SAFETY: `install` stores a pinned plane that lives until `uninstall`, which runs
    // only when no socket, fabric callback or thread can call this any more.
    unsafe { p.as_ref() }
}
