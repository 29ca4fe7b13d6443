// SPDX-License-Identifier: GPL-2.0

//! The generic netlink family `af_sci`, adapted to the safe handlers of the parent module.
//!
//! The family's tables and policies are C statics (`genl.c`); its commands land here as
//! `extern "C"` handlers, which wrap the kernel's request, dump and message-building
//! objects in the safe types below ([`Request`], [`Dump`], [`Writer`], [`Attr`]) and call
//! the parent module. Attributes reach the handlers already validated against the family's
//! policy (strictly), so the types and lengths the policy fixes hold.

use crate::socket::stack::Stack;
use crate::socket::stats::NetStats;
use crate::sys::bindings;
use crate::sys::errno::errno;
use core::ffi::{c_int, c_long, c_void};
use core::marker::PhantomData;
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicPtr, Ordering};
use kernel::error::{to_result, Result};
use kernel::prelude::*;
use kernel::str::CStr;
use kernel::sync::{Arc, ArcBorrow};

/// One attribute of a request.
#[derive(Clone, Copy)]
pub(crate) struct Attr<'a> {
    nla: NonNull<bindings::nlattr>,
    _request: PhantomData<&'a bindings::nlattr>,
}

impl<'a> Attr<'a> {
    /// The attribute type (flags masked off).
    pub(crate) fn kind(&self) -> u16 {
        // SAFETY: a validated attribute of a live request.
        unsafe { bindings::sci_nla_type(self.nla.as_ptr()) as u16 }
    }

    /// The payload.
    pub(crate) fn data(&self) -> &'a [u8] {
        // SAFETY: the genetlink core checked that the attribute lies within the request,
        // which outlives `'a`; `nla_len` is the payload length.
        unsafe {
            let len = bindings::sci_nla_len(self.nla.as_ptr());
            let data = bindings::sci_nla_data(self.nla.as_ptr()).cast::<u8>();
            core::slice::from_raw_parts(data, len.max(0) as usize)
        }
    }

    /// The attributes nested in this one.
    pub(crate) fn nested(&self) -> AttrIter<'a> {
        let mut rem = 0;
        // SAFETY: as in `data`.
        let first = unsafe { bindings::sci_nla_first_nested(self.nla.as_ptr(), &mut rem) };
        AttrIter::new(first, rem)
    }
}

/// The attributes of a request or of a nest, in order.
pub(crate) struct AttrIter<'a> {
    next: *const bindings::nlattr,
    rem: c_int,
    _request: PhantomData<&'a bindings::nlattr>,
}

impl<'a> AttrIter<'a> {
    fn new(first: *const bindings::nlattr, rem: c_int) -> Self {
        Self {
            next: first,
            rem,
            _request: PhantomData,
        }
    }
}

impl<'a> Iterator for AttrIter<'a> {
    type Item = Attr<'a>;

    fn next(&mut self) -> Option<Attr<'a>> {
        let nla = NonNull::new(self.next.cast_mut())?;
        // SAFETY: `nla` passed `nla_ok` against `rem`, the bytes left in the request.
        self.next = unsafe { bindings::sci_nla_next(nla.as_ptr(), &mut self.rem) };
        Some(Attr {
            nla,
            _request: PhantomData,
        })
    }
}

/// Builds attributes into a message being written.
pub(crate) struct Writer<'a> {
    skb: NonNull<bindings::sk_buff>,
    _skb: PhantomData<&'a mut bindings::sk_buff>,
}

// The `nla_put` helpers fail only with `EMSGSIZE`: the message is full.
impl Writer<'_> {
    /// A `u8` attribute.
    pub(crate) fn put_u8(&mut self, kind: u16, value: u8) -> Result {
        // SAFETY: `skb` is the message being built, ours for the writer's lifetime.
        to_result(unsafe { bindings::sci_nla_put_u8(self.skb.as_ptr(), kind.into(), value) })
    }

    /// A `u16` attribute.
    pub(crate) fn put_u16(&mut self, kind: u16, value: u16) -> Result {
        // SAFETY: as in `put_u8`.
        to_result(unsafe { bindings::sci_nla_put_u16(self.skb.as_ptr(), kind.into(), value) })
    }

    /// A `u32` attribute.
    pub(crate) fn put_u32(&mut self, kind: u16, value: u32) -> Result {
        // SAFETY: as in `put_u8`.
        to_result(unsafe { bindings::sci_nla_put_u32(self.skb.as_ptr(), kind.into(), value) })
    }

    /// A `u64` attribute, aligned with a `pad` attribute where needed.
    pub(crate) fn put_u64(&mut self, kind: u16, value: u64, pad: u16) -> Result {
        // SAFETY: as in `put_u8`.
        to_result(unsafe {
            bindings::sci_nla_put_u64(self.skb.as_ptr(), kind.into(), value, pad.into())
        })
    }

    /// An attribute holding `bytes`.
    pub(crate) fn put_bytes(&mut self, kind: u16, bytes: &[u8]) -> Result {
        // SAFETY: as in `put_u8`; `nla_put` copies `bytes`.
        to_result(unsafe {
            bindings::nla_put(
                self.skb.as_ptr(),
                kind.into(),
                bytes.len() as c_int,
                bytes.as_ptr().cast::<c_void>(),
            )
        })
    }

    /// A nest of type `kind` holding what `f` writes (removed again if `f` fails).
    pub(crate) fn nest(&mut self, kind: u16, f: impl FnOnce(&mut Self) -> Result) -> Result {
        // SAFETY: as in `put_u8`.
        let nest = unsafe { bindings::sci_nla_nest_start(self.skb.as_ptr(), kind.into()) };
        if nest.is_null() {
            return Err(errno(bindings::EMSGSIZE));
        }
        let r = f(self);
        // SAFETY: `nest` was started above on this message and nothing after it is kept
        // on failure.
        unsafe {
            match r {
                Ok(()) => bindings::sci_nla_nest_end(self.skb.as_ptr(), nest),
                Err(_) => bindings::sci_nla_nest_cancel(self.skb.as_ptr(), nest),
            }
        }
        r
    }
}

/// A `do` request.
pub(crate) struct Request<'a> {
    info: NonNull<bindings::genl_info>,
    _request: PhantomData<&'a bindings::genl_info>,
}

impl<'a> Request<'a> {
    /// The request's top-level attributes, in order (repeated ones included).
    pub(crate) fn attrs(&self) -> AttrIter<'a> {
        let mut rem = 0;
        // SAFETY: `info` is the live request; its payload was validated.
        let first = unsafe { bindings::sci_genl_first_attr(self.info.as_ptr(), &mut rem) };
        AttrIter::new(first, rem)
    }

    /// Reports `msg` to the requester in the extended ack (about `attr`, if given).
    pub(crate) fn error(&self, attr: Option<&Attr<'_>>, msg: &'static CStr) {
        let nla = attr.map_or(ptr::null(), |a| a.nla.as_ptr().cast_const());
        // SAFETY: `info` is live; `msg` is static, as the extended ack keeps the pointer.
        unsafe { bindings::sci_genl_set_err_msg(self.info.as_ptr(), nla, msg.as_char_ptr().cast()) }
    }

    /// The requester's network namespace: its cookie, and whether it is the initial one.
    pub(crate) fn namespace(&self) -> (u64, bool) {
        // SAFETY: the requester's namespace is alive during the request; both read a
        // field of it.
        unsafe {
            let net = bindings::sci_genl_info_net(self.info.as_ptr());
            (
                bindings::sci_net_cookie(net),
                bindings::sci_net_is_init(net),
            )
        }
    }

    /// The counters of the requester's network namespace.
    pub(crate) fn stats(&self) -> &'a NetStats {
        // SAFETY: the pernet data of a live namespace (the requester's, alive during the
        // request) is a `NetStats` (see `Family::register`).
        unsafe {
            let net = bindings::sci_genl_info_net(self.info.as_ptr());
            &*bindings::sci_net_generic(net).cast::<NetStats>()
        }
    }

    /// Sends the reply `f` writes, as command `cmd`.
    pub(crate) fn reply(&self, cmd: u8, f: impl FnOnce(&mut Writer<'_>) -> Result) -> Result {
        // SAFETY: allocates a message we own until it is sent or freed below.
        let skb = NonNull::new(unsafe { bindings::sci_genl_new() }).ok_or(ENOMEM)?;
        // SAFETY: `skb` is ours and `info` the live request.
        let hdr = unsafe { bindings::sci_genl_put_reply(skb.as_ptr(), self.info.as_ptr(), cmd) };
        let r = if hdr.is_null() {
            Err(errno(bindings::EMSGSIZE))
        } else {
            f(&mut Writer {
                skb,
                _skb: PhantomData,
            })
        };
        if let Err(e) = r {
            // SAFETY: not sent: still ours.
            unsafe { bindings::sci_genl_free(skb.as_ptr()) };
            return Err(e);
        }
        // SAFETY: `hdr` is this message's header; the reply consumes the message.
        to_result(unsafe {
            bindings::sci_genl_end(skb.as_ptr(), hdr);
            bindings::sci_genl_reply(skb.as_ptr(), self.info.as_ptr())
        })
    }
}

/// One round of a dump: as many messages as fit in the buffer, resuming where the
/// previous round stopped.
pub(crate) struct Dump<'a> {
    skb: NonNull<bindings::sk_buff>,
    cb: NonNull<bindings::netlink_callback>,
    _dump: PhantomData<&'a mut bindings::netlink_callback>,
}

impl Dump<'_> {
    /// Where the previous round stopped (0 at the start), as the dump stored it.
    pub(crate) fn position(&self) -> u64 {
        // SAFETY: `cb` is the live dump; `args` are ours across its rounds.
        unsafe { *bindings::sci_genl_cb_args(self.cb.as_ptr()) as u64 }
    }

    /// Records where this round stopped.
    pub(crate) fn set_position(&mut self, position: u64) {
        // SAFETY: as in `position`.
        unsafe { *bindings::sci_genl_cb_args(self.cb.as_ptr()) = position as c_long }
    }

    /// The requester's network namespace, to compare with sockets'.
    pub(crate) fn net(&self) -> *mut bindings::net {
        // SAFETY: `cb` is the live dump.
        unsafe { bindings::sci_genl_cb_net(self.cb.as_ptr()) }
    }

    /// Adds one message of command `cmd` holding what `f` writes; false (and nothing
    /// added) when it does not fit in this round's buffer.
    pub(crate) fn message(&mut self, cmd: u8, f: impl FnOnce(&mut Writer<'_>) -> Result) -> bool {
        // SAFETY: `skb` is this round's buffer and `cb` the live dump.
        let hdr = unsafe { bindings::sci_genl_put_dump(self.skb.as_ptr(), self.cb.as_ptr(), cmd) };
        if hdr.is_null() {
            return false;
        }
        let r = f(&mut Writer {
            skb: self.skb,
            _skb: PhantomData,
        });
        // SAFETY: `hdr` is the header just put on this buffer.
        unsafe {
            match r {
                Ok(()) => bindings::sci_genl_end(self.skb.as_ptr(), hdr),
                Err(_) => bindings::sci_genl_cancel(self.skb.as_ptr(), hdr),
            }
        }
        r.is_ok()
    }

    /// Bytes written in this round: 0 ends the dump.
    fn len(&self) -> c_int {
        // SAFETY: `skb` is this round's buffer.
        unsafe { (*self.skb.as_ptr()).len as c_int }
    }
}

/// Runs a `do` handler.
///
/// # Safety
///
/// `info` is the genetlink core's live, validated request.
unsafe fn run_do(info: *mut bindings::genl_info, f: fn(&Stack, &Request<'_>) -> Result) -> c_int {
    let Some(info) = NonNull::new(info) else {
        return EINVAL.to_errno();
    };
    let req = Request {
        info,
        _request: PhantomData,
    };
    // SAFETY: handlers run only while the family is registered (see the function's
    // contract), and the family holds its stack until it is unregistered.
    let stack = unsafe { registered_stack() };
    match f(&stack, &req) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// Runs a dump handler for one round.
///
/// # Safety
///
/// `skb` and `cb` are the genetlink core's buffer and live dump.
unsafe fn run_dump(
    skb: *mut bindings::sk_buff,
    cb: *mut bindings::netlink_callback,
    f: fn(&Stack, &mut Dump<'_>) -> Result,
) -> c_int {
    let (Some(skb), Some(cb)) = (NonNull::new(skb), NonNull::new(cb)) else {
        return EINVAL.to_errno();
    };
    let mut dump = Dump {
        skb,
        cb,
        _dump: PhantomData,
    };
    // SAFETY: as in `run_do`.
    let stack = unsafe { registered_stack() };
    match f(&stack, &mut dump) {
        Ok(()) => dump.len(),
        Err(e) => e.to_errno(),
    }
}

/// `SCI_CMD_NODE_GET`.
///
/// # Safety
///
/// Called only by the genetlink core, with a live dump.
unsafe extern "C" fn node_dump(
    skb: *mut bindings::sk_buff,
    cb: *mut bindings::netlink_callback,
) -> c_int {
    // SAFETY: see the function's contract.
    unsafe { run_dump(skb, cb, super::node_dump) }
}

/// `SCI_CMD_NODE_SET`.
///
/// # Safety
///
/// Called only by the genetlink core, with a live, validated request.
unsafe extern "C" fn node_set(
    _skb: *mut bindings::sk_buff,
    info: *mut bindings::genl_info,
) -> c_int {
    // SAFETY: see the function's contract.
    unsafe { run_do(info, super::node_set) }
}

/// `SCI_CMD_PORT_GET`.
///
/// # Safety
///
/// Called only by the genetlink core, with a live dump.
unsafe extern "C" fn port_dump(
    skb: *mut bindings::sk_buff,
    cb: *mut bindings::netlink_callback,
) -> c_int {
    // SAFETY: see the function's contract.
    unsafe { run_dump(skb, cb, super::port_dump) }
}

/// `SCI_CMD_PORT_SET`.
///
/// # Safety
///
/// Called only by the genetlink core, with a live, validated request.
unsafe extern "C" fn port_set(
    _skb: *mut bindings::sk_buff,
    info: *mut bindings::genl_info,
) -> c_int {
    // SAFETY: see the function's contract.
    unsafe { run_do(info, super::port_set) }
}

/// `SCI_CMD_SOCK_GET`.
///
/// # Safety
///
/// Called only by the genetlink core, with a live dump.
unsafe extern "C" fn sock_dump(
    skb: *mut bindings::sk_buff,
    cb: *mut bindings::netlink_callback,
) -> c_int {
    // SAFETY: see the function's contract.
    unsafe { run_dump(skb, cb, super::sock_dump) }
}

/// `SCI_CMD_STATS_GET`.
///
/// # Safety
///
/// Called only by the genetlink core, with a live, validated request.
unsafe extern "C" fn stats_get(
    _skb: *mut bindings::sk_buff,
    info: *mut bindings::genl_info,
) -> c_int {
    // SAFETY: see the function's contract.
    unsafe { run_do(info, super::stats_get) }
}

/// `SCI_CMD_LINK_DROP`.
///
/// # Safety
///
/// Called only by the genetlink core, with a live, validated request.
unsafe extern "C" fn link_drop(
    _skb: *mut bindings::sk_buff,
    info: *mut bindings::genl_info,
) -> c_int {
    // SAFETY: see the function's contract.
    unsafe { run_do(info, super::link_drop) }
}

/// `SCI_CMD_PUBLISH_SET`.
///
/// # Safety
///
/// Called only by the genetlink core, with a live, validated request.
unsafe extern "C" fn publish_set(
    _skb: *mut bindings::sk_buff,
    info: *mut bindings::genl_info,
) -> c_int {
    // SAFETY: see the function's contract.
    unsafe { run_do(info, super::publish_set) }
}

/// The handlers `genl.c` installs in the family's ops.
static HANDLERS: bindings::sci_genl_handlers = bindings::sci_genl_handlers {
    node_dump: Some(node_dump),
    node_set: Some(node_set),
    port_dump: Some(port_dump),
    port_set: Some(port_set),
    sock_dump: Some(sock_dump),
    stats_get: Some(stats_get),
    link_drop: Some(link_drop),
    publish_set: Some(publish_set),
};

/// The registered netlink family; unregistered on drop.
pub(crate) struct Family {
    /// The stack the handlers read (from `Arc::into_raw`, released by drop after the
    /// family is unregistered), published in [`STACK`] for them.
    stack: *const Stack,
}

// SAFETY: a counted reference to a `Sync` stack, released once, from any context.
unsafe impl Send for Family {}
// SAFETY: as above; `Family` itself has no other state.
unsafe impl Sync for Family {}

/// The registered family's stack: the context of the handlers, which the generic netlink
/// core calls without one.
static STACK: AtomicPtr<Stack> = AtomicPtr::new(ptr::null_mut());

/// The registered family's stack.
///
/// # Safety
///
/// Called only by a handler, while the family is registered.
unsafe fn registered_stack<'a>() -> ArcBorrow<'a, Stack> {
    // SAFETY: `STACK` holds the pointer `Family::register` took from `Arc::into_raw`,
    // whose reference the family keeps until after `sci_genl_unregister`, which returns
    // once no handler runs.
    unsafe { ArcBorrow::from_raw(STACK.load(Ordering::Acquire)) }
}

impl Family {
    /// Registers the family over `stack` (the configuration it sets, the sockets it
    /// dumps).
    pub(crate) fn register(stack: Arc<Stack>) -> Result<Self> {
        let this = Family {
            stack: Arc::into_raw(stack),
        };
        STACK.store(this.stack.cast_mut(), Ordering::Release);
        // SAFETY: `HANDLERS` is static; the family's tables are C statics.
        if let Err(e) = to_result(unsafe { bindings::sci_genl_register(&HANDLERS) }) {
            STACK.store(ptr::null_mut(), Ordering::Release);
            // SAFETY: from `Arc::into_raw` just above; never registered.
            drop(unsafe { Arc::from_raw(this.stack) });
            core::mem::forget(this);
            return Err(e);
        }
        Ok(this)
    }
}

impl Drop for Family {
    fn drop(&mut self) {
        // SAFETY: registered in `register`; returns once no handler runs any more.
        unsafe { bindings::sci_genl_unregister() };
        STACK.store(ptr::null_mut(), Ordering::Release);
        // SAFETY: from `Arc::into_raw` in `register`; no handler uses it any more.
        drop(unsafe { Arc::from_raw(self.stack) });
    }
}
