// SPDX-License-Identifier: GPL-2.0

//! The notification of a `MSG_ZEROCOPY` send that an SCI connection carries: TCP's, for a
//! send whose bytes it copied, posted on the native socket (where `SO_ZEROCOPY` was set
//! and where `MSG_ERRQUEUE` reads), so a program that waits for its buffers' notifications
//! before it reuses them gets every one, as over TCP.

use crate::sys::bindings;
use crate::sys::net::Msg;
use core::ptr::{self, NonNull};
use kernel::error::{to_result, Result};

/// A notification taken for a send and not posted yet; dropped unposted, it is given back
/// (the send sent nothing: TCP posts none then).
pub(crate) struct ZeroCopyNote(NonNull<bindings::ubuf_info>);

impl ZeroCopyNote {
    /// The notification of a send of `len` bytes of `msg` through the native socket `sk`
    /// (live), if the send asks for one (`MSG_ZEROCOPY` on a socket with `SO_ZEROCOPY`, and
    /// not `io_uring`'s, which brings its own); `ENOBUFS` when there is no room for one.
    pub(crate) fn take(sk: *mut bindings::sock, msg: Msg, len: usize) -> Result<Option<Self>> {
        let mut uarg = ptr::null_mut();
        // SAFETY: `sk` is live (caller) and `msg` is the live message of the send; `uarg`
        // lives across the call.
        to_result(unsafe { bindings::sci_zerocopy_begin(sk, msg, len, &mut uarg) })?;
        Ok(NonNull::new(uarg).map(Self))
    }

    /// Runs `send` with this notification as `msg`'s own (`msg_ubuf`, as `io_uring` lends
    /// its): TCP then takes references on it for the pages it sends by reference and posts
    /// no notification of its own, so a send that went partly into a ring and partly over
    /// TCP (a failover) is told of once, under one id, as TCP tells of every send.
    pub(crate) fn lend<R>(&self, msg: Msg, send: impl FnOnce() -> R) -> R {
        // SAFETY: `msg` is the live message of the send this notification was taken for,
        // whose `msg_ubuf` was empty (`take`); it is emptied again before the send returns.
        unsafe { (*msg).msg_ubuf = self.0.as_ptr() };
        let r = send();
        // SAFETY: as above.
        unsafe { (*msg).msg_ubuf = ptr::null_mut() };
        r
    }

    /// Posts the notification, as copied, if the send sent anything (`sent` bytes). A
    /// sender the notification was lent to may hold it on: it is posted when they let go.
    pub(crate) fn post(self, sent: usize) {
        let uarg = self.0;
        core::mem::forget(self);
        // SAFETY: `uarg` came from `sci_zerocopy_begin` and is ended once (not dropped).
        unsafe { bindings::sci_zerocopy_end(uarg.as_ptr(), sent > 0) }
    }
}

impl Drop for ZeroCopyNote {
    fn drop(&mut self) {
        // SAFETY: `self.0` came from `sci_zerocopy_begin` and was not posted.
        unsafe { bindings::sci_zerocopy_end(self.0.as_ptr(), false) }
    }
}
