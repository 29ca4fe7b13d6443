// SPDX-License-Identifier: GPL-2.0

//! The networking objects the socket layer passes through or queries: opaque message,
//! file, poll table and option-value arguments, poll bits, accept flags, and the routing
//! questions a connect asks (is an address this host's, which source address would TCP
//! use).

use crate::sys::bindings;
use core::ffi::c_int;
use kernel::error::{to_result, Result};
use kernel::uaccess::UserSlice;

/// Whether the IPv4 address `a` is one of this host's interfaces in namespace `net`
/// (`inet_addr_type() == RTN_LOCAL`).
pub(crate) fn addr4_is_local(net: *mut bindings::net, a: [u8; 4]) -> bool {
    // SAFETY: `net` is the namespace of a live socket; the address is passed by value.
    unsafe { bindings::sci_addr4_is_local(net, u32::from_ne_bytes(a)) }
}

/// Whether the IPv6 address `a` is one of this host's interfaces in namespace `net`
/// (`ipv6_chk_addr()`).
pub(crate) fn addr6_is_local(net: *mut bindings::net, a: [u8; 16]) -> bool {
    // SAFETY: `in6_addr` is a 16-byte union of integer arrays: any bytes are valid.
    let addr = unsafe { core::mem::transmute::<[u8; 16], bindings::in6_addr>(a) };
    // SAFETY: `net` is the namespace of a live socket; `addr` lives across the call.
    unsafe { bindings::sci_addr6_is_local(net, &addr) }
}

/// Fills `out` with addresses of the interfaces of the network namespace whose cookie is
/// `cookie` (0: the initial namespace) that another node could reach (not loopback,
/// link-local or multicast), IPv4 first as IPv4-mapped IPv6; returns how many, or `None`
/// if that namespace is gone. Cookies are never reused, so a gone one stays gone.
pub(crate) fn net_addrs(cookie: u64, out: &mut [[u8; 16]]) -> Option<usize> {
    let max = c_int::try_from(out.len()).unwrap_or(c_int::MAX);
    // SAFETY: `out` holds at least `max` 16-byte addresses and lives across the call,
    // which writes at most that many; the namespace is looked up by its cookie under RCU.
    let n = unsafe { bindings::sci_net_addrs(cookie, out.as_mut_ptr().cast(), max) };
    usize::try_from(n).ok().map(|n| n.min(out.len()))
}

/// Whether `a` (IPv4 as IPv4-mapped) is an address of an interface of the network
/// namespace whose cookie is `cookie` (0: the initial one); `None` if it is gone.
pub(crate) fn net_holds_addr(cookie: u64, a: [u8; 16]) -> Option<bool> {
    // SAFETY: `in6_addr` is a 16-byte union of integer arrays: any bytes are valid.
    let addr = unsafe { core::mem::transmute::<[u8; 16], bindings::in6_addr>(a) };
    // SAFETY: `addr` lives across the call; the namespace is looked up by its cookie
    // under RCU.
    match unsafe { bindings::sci_net_holds_addr(cookie, &addr) } {
        0 => Some(false),
        1 => Some(true),
        _ => None,
    }
}

/// The source address a TCP connect from namespace `net` to the IPv4 address `dest`
/// would use: the preferred source of the route to it (`ip_route_output_key()`).
pub(crate) fn route4_source(net: *mut bindings::net, dest: [u8; 4]) -> Result<[u8; 4]> {
    let mut src = 0u32;
    // SAFETY: `net` is the namespace of a live socket; `src` lives across the call.
    to_result(unsafe { bindings::sci_route4_source(net, u32::from_ne_bytes(dest), &mut src) })?;
    Ok(src.to_ne_bytes())
}

/// The same for the IPv6 address `dest` (`ip6_dst_lookup()`).
pub(crate) fn route6_source(net: *mut bindings::net, dest: [u8; 16]) -> Result<[u8; 16]> {
    // SAFETY: `in6_addr` is a 16-byte union of integer arrays: any bytes are valid.
    let addr = unsafe { core::mem::transmute::<[u8; 16], bindings::in6_addr>(dest) };
    let mut src = bindings::in6_addr::default();
    // SAFETY: as above; `addr` and `src` live across the call.
    to_result(unsafe { bindings::sci_route6_source(net, &addr, &mut src) })?;
    // SAFETY: any 16 bytes are a valid `[u8; 16]`.
    Ok(unsafe { core::mem::transmute::<bindings::in6_addr, [u8; 16]>(src) })
}

/// The flags (`O_NONBLOCK`, ...) of an accept.
pub(crate) fn accept_arg_flags(arg: *mut bindings::proto_accept_arg) -> c_int {
    // SAFETY: the socket layer passes a live accept argument.
    unsafe { (*arg).flags }
}

/// `FIONREAD`/`SIOCINQ` on x86 and most architectures.
pub(crate) const SIOCINQ: core::ffi::c_uint = 0x541b;

/// Answers an `ioctl` whose argument `arg` points to an `int` (`SIOCINQ`, `SIOCOUTQ`):
/// `value`, capped at `INT_MAX`.
pub(crate) fn put_ioctl_int(arg: core::ffi::c_ulong, value: u64) -> Result<c_int> {
    let value = c_int::try_from(value).unwrap_or(c_int::MAX);
    UserSlice::new(arg as usize, core::mem::size_of::<c_int>())
        .writer()
        .write(&value)?;
    Ok(0)
}

/// What the control messages of a datagram to send ask of its path, when the fabric path
/// can carry all of them (at most one of each kind: the source, the traffic class, the
/// segment size).
#[derive(Clone, Copy, Default)]
pub(crate) struct SendAsks {
    /// `IP_PKTINFO` or `IPV6_PKTINFO`: the source address (the first 4 bytes when `v4`;
    /// all zero: any) and the interface (0: any), as `(addr, v4, ifindex)`.
    pub(crate) source: Option<([u8; 16], bool, i32)>,
    /// `IP_TOS` (`true`) or `IPV6_TCLASS` (`false`): the traffic class.
    pub(crate) tos: Option<(u8, bool)>,
    /// `UDP_SEGMENT`: the segment size (0: none).
    pub(crate) segment: Option<u16>,
}

/// What control messages a message to send carries: `None` when it carries one the fabric
/// path does not (`IP_TTL`, two of a kind, malformed, ...), which UDP then takes.
pub(crate) fn send_asks(msg: Msg) -> Option<SendAsks> {
    let mut ask = bindings::sci_send_control::default();
    // SAFETY: the socket layer passes a live message (the helper refuses control messages
    // still in user memory); `ask` lives across the call.
    match unsafe { bindings::sci_msg_send_control(msg, &mut ask) } {
        0 => Some(SendAsks::default()),
        1 => Some(SendAsks {
            source: (ask.has_source != 0).then_some((ask.addr, ask.v4 != 0, ask.ifindex)),
            tos: u8::try_from(ask.tos).ok().map(|t| (t, ask.tos_v4 != 0)),
            segment: (ask.has_gso != 0).then_some(ask.gso_size),
        }),
        _ => None,
    }
}

/// The interface that UDP names in the packet information of a datagram to the local
/// address `addr` (4 bytes: IPv4, else 16) of namespace `net`: loopback when the sender is
/// on this machine (`loopback`), else the device that has the address (0 when none has it).
pub(crate) fn local_ifindex(net: *mut bindings::net, addr: &[u8], loopback: bool) -> i32 {
    let (a, v4) = c_addr(addr);
    // SAFETY: `net` is the namespace of a live socket; `a` holds 16 bytes and lives across
    // the call.
    unsafe { bindings::sci_local_ifindex(net, a.as_ptr(), v4, loopback) }
}

/// An address (4 bytes: IPv4, else 16) as the C helpers take it: 16 bytes with IPv4 in the
/// first 4, and whether it is IPv4.
pub(crate) fn c_addr(addr: &[u8]) -> ([u8; 16], bool) {
    let mut a = [0u8; 16];
    let n = addr.len().min(16);
    a[..n].copy_from_slice(&addr[..n]);
    (a, n == 4)
}

/// Gives a received datagram's source address (`addr`, a `sockaddr_in`/`sockaddr_in6`)
/// to a caller that asked for it (`msg_name`).
pub(crate) fn set_msg_name(msg: Msg, addr: &[u8]) {
    // SAFETY: the socket layer passes a live message whose `msg_name`, when set, has room
    // for a `sockaddr_storage`; the helper checks the length against it.
    unsafe { bindings::sci_msg_set_name(msg, addr.as_ptr().cast(), addr.len() as c_int) }
}

/// Adds `flags` (`MSG_TRUNC`) to a received message's flags.
pub(crate) fn set_msg_flags(msg: Msg, flags: u32) {
    // SAFETY: the socket layer passes a live message.
    unsafe { bindings::sci_msg_set_flags(msg, flags as c_int) }
}

/// Whether a read's message has room for control messages (`recvmsg` with `msg_control`).
pub(crate) fn msg_has_control(msg: Msg) -> bool {
    // SAFETY: the socket layer passes a live message.
    unsafe { (*msg).msg_controllen > 0 }
}

/// Whether a read's caller wants the bytes left after it in the message (`msg_inq`), as
/// io_uring's receives do (`IORING_CQE_F_SOCK_NONEMPTY`, and whether a multishot receive
/// tries again at once).
pub(crate) fn msg_wants_inq(msg: Msg) -> bool {
    // SAFETY: the socket layer passes a live message.
    unsafe { (*msg).msg_get_inq() }
}

/// Tells a read's caller that wants it ([`msg_wants_inq`]) how many bytes are left.
pub(crate) fn set_msg_inq(msg: Msg, inq: u64) {
    let inq = c_int::try_from(inq).unwrap_or(c_int::MAX);
    // SAFETY: the socket layer passes a live message.
    unsafe { (*msg).msg_inq = inq }
}

/// Puts `TCP_INQ`'s control message, the bytes left to read (`TCP_CM_INQ`), into a read's
/// message (nothing when it has no room, as `put_cmsg` does).
pub(crate) fn put_tcp_inq(msg: Msg, inq: u64) {
    let inq = c_int::try_from(inq).unwrap_or(c_int::MAX);
    // SAFETY: the socket layer passes a live message; `put_cmsg` checks its room.
    unsafe { bindings::sci_tcp_put_inq(msg, inq) }
}

/// Opaque arguments that are passed through to the native socket unchanged.
pub(crate) type Msg = *mut bindings::msghdr;
/// A `struct file` of a socket (only ever passed through).
pub(crate) type File = *mut bindings::file;
/// A `poll_table` (only ever passed through).
pub(crate) type PollTable = *mut bindings::poll_table_struct;
/// An option value, user or kernel memory.
pub(crate) type OptVal = bindings::sockptr_t;

// Poll bits, as in `include/uapi/linux/eventpoll.h` (bindgen cannot read them: they are
// `__poll_t` casts).
pub(crate) const EPOLLIN: u32 = 0x1;
pub(crate) const EPOLLOUT: u32 = 0x4;
pub(crate) const EPOLLERR: u32 = 0x8;
pub(crate) const EPOLLHUP: u32 = 0x10;
pub(crate) const EPOLLRDNORM: u32 = 0x40;
pub(crate) const EPOLLWRNORM: u32 = 0x100;
pub(crate) const EPOLLRDHUP: u32 = 0x2000;

/// Builds an option value in kernel memory, for replaying a recorded option.
pub(crate) fn kernel_optval(buf: &mut [u8]) -> OptVal {
    // SAFETY: builds a tagged pointer; the buffer outlives the call it is passed to.
    unsafe { bindings::sci_kernel_sockptr(buf.as_mut_ptr().cast()) }
}

/// Writes an option's `value` to a `getsockopt(2)` caller's buffer `val` and its length to
/// `len` (user pointers): `EINVAL` when the caller's buffer is shorter (as `SOL_SCI`
/// options are fixed-size).
pub(crate) fn put_option(value: &[u8], val: *mut core::ffi::c_char, len: *mut c_int) -> Result {
    let mut len_reader = UserSlice::new(len as usize, core::mem::size_of::<c_int>()).reader();
    let user_len = len_reader.read::<c_int>()?;
    if user_len < 0 || (user_len as usize) < value.len() {
        return Err(kernel::error::code::EINVAL);
    }
    UserSlice::new(val as usize, value.len())
        .writer()
        .write_slice(value)?;
    UserSlice::new(len as usize, core::mem::size_of::<c_int>())
        .writer()
        .write(&(value.len() as c_int))
}

/// `struct sci_info` (`SOL_SCI`/`SCI_INFO`) as bytes: four native-endian `__u32`, mode,
/// fallback reason, native family and state.
pub(crate) fn sci_info_bytes(fields: [u32; 4]) -> [u8; 16] {
    let mut out = [0u8; 16];
    for (chunk, v) in out.chunks_exact_mut(4).zip(fields) {
        chunk.copy_from_slice(&v.to_ne_bytes());
    }
    out
}

/// An `int` option value (`EINVAL` when `len` is shorter).
pub(crate) fn int_optval(val: OptVal, len: core::ffi::c_uint) -> Result<c_int> {
    if (len as usize) < core::mem::size_of::<c_int>() {
        return Err(kernel::error::code::EINVAL);
    }
    let mut bytes = [0u8; core::mem::size_of::<c_int>()];
    copy_optval(&mut bytes, val)?;
    Ok(c_int::from_ne_bytes(bytes))
}

/// Copies `dst.len()` bytes of an option value (user or kernel memory).
pub(crate) fn copy_optval(dst: &mut [u8], src: OptVal) -> Result {
    // SAFETY: `dst` is a valid buffer of its length; `src` is checked by copy_from_sockptr.
    to_result(unsafe { bindings::sci_copy_from_sockptr(dst.as_mut_ptr().cast(), src, dst.len()) })
}
