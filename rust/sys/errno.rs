// SPDX-License-Identifier: GPL-2.0

//! Kernel errors from the bindings' errno constants and from C return values.

use core::ffi::c_int;
use kernel::error::{Error, Result};

/// The kernel `Error` of a positive errno constant from the bindings (`bindings::EAGAIN`).
pub(crate) fn errno(e: u32) -> Error {
    Error::from_errno(-(e as c_int))
}

/// Turns a C return value that is a count or a negative errno into a `Result`.
pub(crate) fn count_result(ret: c_int) -> Result<c_int> {
    if ret < 0 {
        Err(Error::from_errno(ret))
    } else {
        Ok(ret)
    }
}

/// What an op that returns 0 or a negative errno hands back to C (`proto_ops`).
pub(crate) fn errno_of(r: Result) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// What an op that returns a count or a negative errno hands back to C (`proto_ops`).
pub(crate) fn count_of(r: Result<c_int>) -> c_int {
    r.unwrap_or_else(|e| e.to_errno())
}
