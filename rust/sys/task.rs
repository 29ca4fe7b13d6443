// SPDX-License-Identifier: GPL-2.0

//! What a socket call does to the task that made it, beyond its return value.

use crate::sys::bindings;

/// Sends `SIGPIPE` to the current task (a write on a connection that is shut).
pub(crate) fn send_sigpipe() {
    // SAFETY: signals the current task.
    unsafe { bindings::sci_send_sigpipe() }
}
