// SPDX-License-Identifier: GPL-2.0

//! Handing the file of a fallen-back `AF_SCI` socket to its native TCP socket.
//!
//! A connection that fell back carries its bytes over the native socket, and forwarding
//! each call through `AF_SCI`'s `proto_ops` costs it something on every call. So once the
//! native connection is up, the file is pointed at the native socket
//! (`file->private_data`), as `net/smc` does in `smc_switch_to_fallback`: `send`, `recv`,
//! `poll`, `setsockopt`, ... then go straight to TCP.
//!
//! What stays `AF_SCI`'s:
//! - the native socket gets a copy of TCP's `proto_ops` whose `getsockopt`/`setsockopt`
//!   answer `SOL_SCI` (`SCI_INFO`, ...) and whose `show_fdinfo` prints the `sci-*` lines,
//!   both through the `AF_SCI` socket the file was created for (its inode's), so a
//!   program, `scictl` and the tests still see what the socket is and why it fell back;
//! - `close()`: the file's inode is the `AF_SCI` socket's, so its `release` runs, takes the
//!   file back ([`take_back`]) and releases the native socket;
//! - wake-ups of the native socket are still forwarded, for `epoll` entries made before.
//!
//! What a program sees change: `SO_DOMAIN`, which the socket layer answers from the socket
//! in `private_data`, reads `AF_INET`/`AF_INET6` from then on (as on `AF_SMC`).
//! Kernel sockets (no file) are never handed over.

use crate::socket::native::Native;
use crate::socket::sk::OwnSk;
use crate::sys::bindings;
use crate::sys::net::OptVal;
use core::ffi::{c_char, c_int, c_uint};
use core::ptr;
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::prelude::*;

/// TCP's `proto_ops` (index 0: `AF_INET`, 1: `AF_INET6`), and our copies of them.
static TCP_OPS: [AtomicPtr<bindings::proto_ops>; 2] = [
    AtomicPtr::new(ptr::null_mut()),
    AtomicPtr::new(ptr::null_mut()),
];
static HANDOVER_OPS: [AtomicPtr<bindings::proto_ops>; 2] = [
    AtomicPtr::new(ptr::null_mut()),
    AtomicPtr::new(ptr::null_mut()),
];
/// The `AF_SCI` family's own `proto_ops`: a handed-over file belongs to the `AF_SCI`
/// socket that has them, whose `SOL_SCI` options and fdinfo lines go through them.
static SCI_OPS: AtomicPtr<bindings::proto_ops> = AtomicPtr::new(ptr::null_mut());

fn index(family: c_int) -> Option<usize> {
    match family as u32 {
        bindings::AF_INET => Some(0),
        bindings::AF_INET6 => Some(1),
        _ => None,
    }
}

/// The `proto_ops` tables handed-over native sockets use; owned by the registered family
/// (no `AF_SCI` socket, and so no handed-over native socket, outlives it).
pub(crate) struct Tables {
    ops: [bindings::proto_ops; 2],
}

impl Tables {
    /// Names the `AF_SCI` family's `proto_ops` (registered for as long as this lives),
    /// through which a handed-over socket reaches the socket its file belongs to.
    pub(crate) fn set_family_ops(&self, ops: *const bindings::proto_ops) {
        SCI_OPS.store(ops.cast_mut(), Ordering::Release);
    }

    /// The family's `proto_ops`.
    fn family_ops<'a>() -> Option<&'a bindings::proto_ops> {
        // SAFETY: set by the registered family to its pinned table, which outlives every
        // handed-over socket (each holds its `AF_SCI` socket, and so the module).
        unsafe { SCI_OPS.load(Ordering::Acquire).as_ref() }
    }

    /// Copies TCP's tables and publishes the copies. A family the kernel cannot create
    /// (no IPv6) gets none; its sockets are simply never handed over.
    pub(crate) fn new() -> Result<KBox<Self>> {
        let mut tables = KBox::new(
            Self {
                ops: [
                    bindings::proto_ops::default(),
                    bindings::proto_ops::default(),
                ],
            },
            GFP_KERNEL,
        )?;
        for family in [bindings::AF_INET, bindings::AF_INET6] {
            let i = index(family as c_int).unwrap_or(0);
            // SAFETY: creates and releases a probe socket in the initial namespace; the
            // table it returns is a static of the kernel's (inet_stream_ops or
            // inet6_stream_ops), valid for as long as the kernel runs.
            let tcp = unsafe { bindings::sci_tcp_ops(family as c_int) };
            if tcp.is_null() {
                continue;
            }
            // SAFETY: `tcp` is a valid, never-freed table (above).
            let mut ops = unsafe { *tcp };
            ops.getsockopt = Some(getsockopt);
            ops.setsockopt = Some(setsockopt);
            ops.show_fdinfo = Some(show_fdinfo);
            tables.ops[i] = ops;
            TCP_OPS[i].store(tcp.cast_mut(), Ordering::Release);
            HANDOVER_OPS[i].store(ptr::from_mut(&mut tables.ops[i]), Ordering::Release);
        }
        Ok(tables)
    }
}

impl Drop for Tables {
    fn drop(&mut self) {
        for i in 0..2 {
            HANDOVER_OPS[i].store(ptr::null_mut(), Ordering::Release);
            TCP_OPS[i].store(ptr::null_mut(), Ordering::Release);
        }
    }
}

/// Points the file of `own`'s socket at `native`, whose connection carries the bytes.
/// False (nothing changed) for a socket without a file, one already handed over, or a
/// family without tables.
pub(crate) fn hand_over(own: &OwnSk, native: Native) -> bool {
    let Some(i) = index(native.family()) else {
        return false;
    };
    let ops = HANDOVER_OPS[i].load(Ordering::Acquire);
    if ops.is_null() {
        return false;
    }
    let sk = own.as_ptr();
    let n = native.as_ptr();
    // The socket lock serialises this with `sock_fasync` (which takes it on the socket in
    // `private_data`), so every fasync entry moves with the file. Whoever read the old
    // `private_data` keeps calling `AF_SCI`'s ops, which keep forwarding.
    // SAFETY: `own` is live for the call, and its socket and file with it (the caller
    // runs in one of the socket's ops, under a file reference); the native socket is
    // owned by `own`; its `ops` and `file` are written once, here.
    unsafe {
        let sock = (*sk).sk_socket;
        if sock.is_null() || (*sock).file.is_null() {
            return false;
        }
        bindings::sci_lock_sock(sk);
        let file = (*sock).file;
        let free = (*n).file.is_null() && (*file).private_data == sock.cast();
        if free {
            (*n).wq.fasync_list = (*sock).wq.fasync_list;
            (*sock).wq.fasync_list = ptr::null_mut();
            bindings::sci_sock_set_fasync((*n).sk, !(*n).wq.fasync_list.is_null());
            ptr::write_volatile(ptr::addr_of_mut!((*n).ops), ops.cast_const());
            (*n).file = file;
            ptr::write_volatile(ptr::addr_of_mut!((*file).private_data), n.cast());
        }
        bindings::release_sock(sk);
        free
    }
}

/// Undoes [`hand_over`] before `own` releases `native`: the file points at `own`'s socket
/// again, and the native socket is a plain kernel TCP socket (no file, TCP's ops), which
/// `sock_release` frees as such.
pub(crate) fn take_back(own: &OwnSk, native: Native) {
    let n = native.as_ptr();
    // SAFETY: called from `own`'s release, when the file is being closed: no call runs on
    // either socket any more. Both are live until their release.
    unsafe {
        let file = (*n).file;
        if file.is_null() {
            return;
        }
        let sock = (*own.as_ptr()).sk_socket;
        if !sock.is_null() {
            ptr::write_volatile(ptr::addr_of_mut!((*file).private_data), sock.cast());
            (*sock).wq.fasync_list = (*n).wq.fasync_list;
        }
        (*n).wq.fasync_list = ptr::null_mut();
        (*n).file = ptr::null_mut();
        if let Some(i) = index(native.family()) {
            let tcp = TCP_OPS[i].load(Ordering::Acquire);
            if !tcp.is_null() {
                (*n).ops = tcp.cast_const();
            }
        }
    }
}

/// The `AF_SCI` socket whose file native `sock` holds.
///
/// # Safety
///
/// `sock` is a live native socket in one of its ops, called through the file (which keeps
/// the `AF_SCI` socket alive).
unsafe fn owner(sock: *mut bindings::socket) -> Option<*mut bindings::socket> {
    // SAFETY: see the function's contract; `file` is set only while handed over.
    unsafe {
        let file = (*sock).file;
        if file.is_null() {
            return None;
        }
        let owner = bindings::sci_file_socket(file);
        let ours = Tables::family_ops().is_some_and(|ops| ptr::eq((*owner).ops, ops));
        (ours && !(*owner).sk.is_null()).then_some(owner)
    }
}

/// TCP's table for native `sock`.
///
/// # Safety
///
/// `sock` is a live native socket.
unsafe fn tcp_ops<'a>(sock: *mut bindings::socket) -> Option<&'a bindings::proto_ops> {
    // SAFETY: a live socket has its sk; the tables are the kernel's statics.
    unsafe {
        let i = index((*(*sock).sk).__sk_common.skc_family.into())?;
        TCP_OPS[i].load(Ordering::Acquire).as_ref()
    }
}

/// `getsockopt` of a handed-over native socket: `SOL_SCI` is the `AF_SCI` socket's.
///
/// # Safety
///
/// Called only by the socket layer, with the arguments it documents for this op.
unsafe extern "C" fn getsockopt(
    sock: *mut bindings::socket,
    level: c_int,
    optname: c_int,
    val: *mut c_char,
    len: *mut c_int,
) -> c_int {
    // SAFETY: an op on a live native socket, through its file.
    unsafe {
        if level == bindings::SOL_SCI as c_int {
            return match owner(sock) {
                Some(owner) => match Tables::family_ops().and_then(|ops| ops.getsockopt) {
                    Some(f) => f(owner, level, optname, val, len),
                    None => -(bindings::ENOPROTOOPT as c_int),
                },
                None => -(bindings::ENOPROTOOPT as c_int),
            };
        }
        match tcp_ops(sock).and_then(|ops| ops.getsockopt) {
            Some(f) => f(sock, level, optname, val, len),
            None => -(bindings::EOPNOTSUPP as c_int),
        }
    }
}

/// `setsockopt` of a handed-over native socket: `SOL_SCI` is the `AF_SCI` socket's.
///
/// # Safety
///
/// Called only by the socket layer, with the arguments it documents for this op.
unsafe extern "C" fn setsockopt(
    sock: *mut bindings::socket,
    level: c_int,
    optname: c_int,
    val: OptVal,
    len: c_uint,
) -> c_int {
    // SAFETY: an op on a live native socket, through its file.
    unsafe {
        if level == bindings::SOL_SCI as c_int {
            return match owner(sock) {
                Some(owner) => match Tables::family_ops().and_then(|ops| ops.setsockopt) {
                    Some(f) => f(owner, level, optname, val, len),
                    None => -(bindings::ENOPROTOOPT as c_int),
                },
                None => -(bindings::ENOPROTOOPT as c_int),
            };
        }
        match tcp_ops(sock).and_then(|ops| ops.setsockopt) {
            Some(f) => f(sock, level, optname, val, len),
            None => -(bindings::ENOPROTOOPT as c_int),
        }
    }
}

/// `show_fdinfo` of a handed-over native socket: the `AF_SCI` socket's lines.
///
/// # Safety
///
/// Called only by the socket layer, with the arguments it documents for this op.
unsafe extern "C" fn show_fdinfo(m: *mut bindings::seq_file, sock: *mut bindings::socket) {
    // SAFETY: an op on a live native socket, through its file; `m` is its fdinfo file.
    unsafe {
        if let (Some(owner), Some(f)) = (
            owner(sock),
            Tables::family_ops().and_then(|ops| ops.show_fdinfo),
        ) {
            f(m, owner);
        }
    }
}
