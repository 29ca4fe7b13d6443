// SPDX-License-Identifier: GPL-2.0

//! A socket address as the socket layer hands it to `proto_ops` and takes it back from
//! `getname`: the one form in which an address crosses between the C socket layer and the
//! socket ops of either kind (stream or datagram) and their native socket.

use crate::config::rules::{self, Ip};
use crate::sys::bindings;
use crate::sys::net::Msg;
use core::ffi::c_int;
use core::ptr;

/// A socket address as the socket layer hands it to `proto_ops` (already copied into
/// the kernel, at most `sizeof(struct sockaddr_storage)` bytes).
#[derive(Clone, Copy)]
pub(crate) struct SockAddr {
    ptr: *mut bindings::sockaddr,
    len: c_int,
}

impl SockAddr {
    /// Wraps an address received from the socket layer.
    pub(crate) fn new(ptr: *mut bindings::sockaddr, len: c_int) -> Self {
        Self { ptr, len }
    }

    /// The pointer and length, to hand the address on to a native socket's own op.
    pub(crate) fn raw(&self) -> (*mut bindings::sockaddr, c_int) {
        (self.ptr, self.len)
    }

    /// The address bytes (at most a `sockaddr_in6`), or `None` for no address.
    pub(crate) fn bytes(&self) -> Option<&[u8]> {
        if self.ptr.is_null() || self.len <= 0 {
            return None;
        }
        let len = (self.len as usize).min(28);
        // SAFETY: the socket layer copied `len` bytes of address into kernel memory at
        // `ptr`, valid for the duration of the op that holds this `SockAddr`.
        Some(unsafe { core::slice::from_raw_parts(self.ptr.cast::<u8>(), len) })
    }

    /// The address family, or `None` when the address is too short to hold one.
    pub(crate) fn family(&self) -> Option<u16> {
        if self.ptr.is_null() || self.len < core::mem::size_of::<u16>() as c_int {
            return None;
        }
        // SAFETY: the socket layer copied `len` (>= 2) bytes of address into kernel memory
        // at `ptr`; `sa_family` is the first field, read unaligned to be safe.
        Some(unsafe { ptr::read_unaligned(ptr::addr_of!((*self.ptr).sa_family)) })
    }

    /// The destination of a message (`msg_name`, as the socket layer copied it in);
    /// `None` when it has none.
    pub(crate) fn of_msg(msg: Msg) -> Option<Self> {
        // SAFETY: the socket layer passes a live message; `msg_name` is null or the
        // kernel copy of the caller's address, `msg_namelen` bytes long.
        let (ptr, len) = unsafe { ((*msg).msg_name, (*msg).msg_namelen) };
        (!ptr.is_null() && len > 0).then(|| Self::new(ptr.cast(), len))
    }

    /// `AF_INET6` for an IPv6 address, which re-creates an uncommitted socket's native
    /// socket in that family ([`EarlyOptions`](super::early_options::EarlyOptions)).
    pub(crate) fn wanted_family(&self) -> Option<c_int> {
        match self.family() {
            Some(f) if u32::from(f) == bindings::AF_INET6 => Some(bindings::AF_INET6 as c_int),
            _ => None,
        }
    }

    /// The IP address and port of an `AF_INET`/`AF_INET6` address long enough for TCP's
    /// connect; `None` for anything else.
    pub(crate) fn ip_port(&self) -> Option<(Ip, u16)> {
        rules::sockaddr_ip_port(self.bytes()?)
    }
}

/// Writes a socket address the module made (an SCI connection's name) into the socket
/// layer's `sockaddr_storage` buffer of `getsockname`/`getpeername`: its length.
pub(crate) fn put_name(addr: *mut bindings::sockaddr, bytes: &[u8]) -> c_int {
    let len = bytes
        .len()
        .min(core::mem::size_of::<bindings::__kernel_sockaddr_storage>());
    // SAFETY: `addr` is the socket layer's `sockaddr_storage`, which holds `len` bytes.
    unsafe { ptr::copy_nonoverlapping(bytes.as_ptr(), addr.cast::<u8>(), len) };
    len as c_int
}
