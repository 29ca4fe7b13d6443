// SPDX-License-Identifier: GPL-2.0

//! The `AF_SCI` family and its `proto_ops`, adapted to [`SciSock`].
//!
//! As `rust/kernel/net/phy.rs` adapts a C ops table to a Rust trait, this file turns the
//! socket layer's raw calls into calls on the safe [`SciSock`] with typed arguments, and
//! owns the only raw accesses to our own `struct sock`: the calls a datagram socket has
//! too are in `proto_ops.rs`, the stream socket's own (create, release, connect, accept, listen,
//! `read_sock`, `splice_eof`) here.

use crate::conn::Mover;
use crate::control::PendingConnect;
use crate::socket::dgram;
use crate::socket::handover;
use crate::socket::proto_ops::{self, attach_new, drop_new, parts, state_of, SockObj};
use crate::socket::registry::Registry;
use crate::socket::sk::OwnSk;
use crate::socket::sock::{Accepted, SciSock};
use crate::socket::sockaddr::SockAddr;
use crate::socket::stack::Stack;
use crate::sys::bindings;
use crate::sys::errno::{count_of, errno_of};
use crate::sys::read_actor::ReadActor;
use core::ffi::{c_int, c_uint};
use core::ptr::{self, NonNull};
use core::sync::atomic::{AtomicI32, AtomicPtr, Ordering};
use kernel::error::{to_result, Result};
use kernel::prelude::*;
use kernel::sync::{Arc, ArcBorrow};

/// The family number in use, for `sk_alloc`.
static FAMILY: AtomicI32 = AtomicI32::new(0);
/// Our `proto_ops`, installed on every `AF_SCI` socket.
static OPS: AtomicPtr<bindings::proto_ops> = AtomicPtr::new(ptr::null_mut());
/// The registered [`Family`]'s stack (from `Arc::into_raw`; the family holds that
/// reference until it is unregistered): the context of `create`, which the socket layer
/// calls without one. Every socket takes its own reference to the stack at creation;
/// nothing else reads this.
static STACK: AtomicPtr<Stack> = AtomicPtr::new(ptr::null_mut());

/// The registered family's stack, for `create`.
///
/// # Safety
///
/// Called only while the family is registered (by the socket layer's `create`, which
/// `sock_unregister` waits for).
unsafe fn registered_stack() -> Arc<Stack> {
    // SAFETY: `STACK` holds the pointer `Family::register` took from `Arc::into_raw`,
    // whose reference the family keeps until after `sock_unregister`; see the contract.
    unsafe { Arc::from(ArcBorrow::from_raw(STACK.load(Ordering::Acquire))) }
}

/// A counted reference to an `AF_SCI` sock (`sock_hold`/`sock_put`), for work a kernel
/// thread finishes on a socket's behalf (the connector). The sock and its [`SciSock`]
/// stay allocated while it lives, even after the socket was closed.
struct HeldSk(NonNull<bindings::sock>);

// SAFETY: a counted reference may be used and dropped from any process context.
unsafe impl Send for HeldSk {}
// SAFETY: what it is used for (`SciSock::connect_step`) runs under the socket's own locks,
// as concurrent socket calls do.
unsafe impl Sync for HeldSk {}

impl HeldSk {
    /// Takes a reference on `own`'s sock.
    fn new(own: &OwnSk) -> Self {
        // SAFETY: `own` is live while the caller's op runs; the reference keeps it so.
        unsafe { bindings::sci_sock_hold(own.as_ptr()) };
        Self(own.as_non_null())
    }

    /// The sock and its state.
    fn parts(&self) -> (OwnSk, &SciSock) {
        // SAFETY: the counted reference keeps the sock (and its state, dropped only in
        // `destruct`) allocated while `self` is borrowed.
        unsafe {
            (
                OwnSk::from_raw(self.0),
                state_of::<SciSock>(self.0.as_ptr()),
            )
        }
    }
}

/// The connector kthread finishes a non-blocking connect, and moves a connection whose
/// fabric path was lost onto TCP, through this reference.
impl PendingConnect for HeldSk {
    fn step(&self, finish_now: bool) -> bool {
        let (own, state) = self.parts();
        let connected = state.connect_step(&own, finish_now);
        if connected {
            arm_failover(state);
        }
        let moved = state.failover_step(&own, finish_now);
        connected && moved
    }
}

/// How a connection whose fabric path is lost asks its socket to move it onto TCP; the
/// move is handed to the connector kthread. It holds no reference: the connection passes
/// its owner's sk, on which it took one.
struct SkMover;

impl Mover for SkMover {
    fn hold(&self, sk: usize) {
        // SAFETY: the connection calls this under its owner lock, which holds `sk` only
        // while that `AF_SCI` sock is live (cleared before its release).
        unsafe { bindings::sci_sock_hold(sk as *mut bindings::sock) };
    }

    fn start(&self, sk: usize) -> bool {
        let Some(sk) = NonNull::new(sk as *mut bindings::sock) else {
            return false;
        };
        // The reference `hold` took is this one's: it keeps the sock while the move
        // starts, and goes at the end; the job takes its own.
        let held = HeldSk(sk);
        let (own, state) = held.parts();
        state.start_failover(|| {
            let job: Arc<dyn PendingConnect> = Arc::new(HeldSk::new(&own), GFP_KERNEL)?;
            Ok(job)
        })
    }
}

/// Gives the socket's SCI connection, once it has one, a way to reach the socket when its
/// fabric path is lost (no reference: see [`SkMover`]).
fn arm_failover(state: &SciSock) {
    let Some(conn) = state.conn() else {
        return;
    };
    if conn.has_mover() {
        return;
    }
    // Without memory for it, the connection resets if its fabric path is lost.
    if let Ok(mover) = Arc::new(SkMover, GFP_KERNEL) {
        let mover: Arc<dyn Mover> = mover;
        conn.set_mover(Some(mover));
    }
}

impl Drop for HeldSk {
    fn drop(&mut self) {
        // SAFETY: drops the reference `new` took; the last put frees the sock through
        // `destruct`, in the process context every `HeldSk` is dropped in.
        unsafe { bindings::sci_sock_put(self.0.as_ptr()) };
    }
}

/// Allocates our sk for `sock` and initialises its Rust state.
///
/// # Safety
///
/// `sock` is a socket being created or accepted, without an sk yet.
unsafe fn new_sk(
    net: *mut bindings::net,
    sock: *mut bindings::socket,
    kern: bool,
    stack: Arc<Stack>,
) -> Result<OwnSk> {
    // SAFETY: `sk_alloc` gives a zeroed `SockObj<SciSock>` (`proto.obj_size`), which
    // nothing else knows yet; `OPS` is the family's pinned table.
    unsafe {
        let sk = bindings::sci_sk_alloc(net, FAMILY.load(Ordering::Relaxed), kern as c_int);
        let sk = NonNull::new(sk).ok_or(ENOMEM)?;
        let init = SciSock::new(kern, stack, read_again);
        Ok(attach_new(
            sock,
            sk,
            bindings::IPPROTO_TCP,
            OPS.load(Ordering::Relaxed),
            init,
        ))
    }
}

/// `net_proto_family.create`: a new `AF_SCI` socket, a stream socket here or a datagram
/// socket (`socket/dgram/`).
///
/// # Safety
///
/// Called only by the socket layer, with the arguments it documents for this op on an `AF_SCI` socket.
unsafe extern "C" fn create(
    net: *mut bindings::net,
    sock: *mut bindings::socket,
    protocol: c_int,
    kern: c_int,
) -> c_int {
    // SAFETY: the socket layer passes a new socket without sk.
    let ty = unsafe { (*sock).type_ } as u32;
    if ty == bindings::sock_type_SOCK_DGRAM {
        if protocol != 0 && protocol != bindings::IPPROTO_UDP as c_int {
            return -(bindings::EPROTONOSUPPORT as c_int);
        }
        // SAFETY: `create`'s own arguments; the socket layer calls `create` only while the
        // family is registered.
        return unsafe { dgram::adapter::create(net, sock, kern != 0, registered_stack()) };
    }
    if ty != bindings::sock_type_SOCK_STREAM {
        return -(bindings::ESOCKTNOSUPPORT as c_int);
    }
    if protocol != 0 && protocol != bindings::IPPROTO_TCP as c_int {
        return -(bindings::EPROTONOSUPPORT as c_int);
    }
    let slot = match Registry::reserve() {
        Ok(slot) => slot,
        Err(e) => return e.to_errno(),
    };
    // SAFETY: the socket layer calls `create` only while the family is registered.
    let stack = unsafe { registered_stack() };
    // SAFETY: as above.
    let own = match unsafe { new_sk(net, sock, kern != 0, stack) } {
        Ok(own) => own,
        Err(e) => return e.to_errno(),
    };
    // SAFETY: `own` was just initialised.
    let state = unsafe { state_of::<SciSock>(own.as_ptr()) };
    match state.init_native(&own) {
        Ok(()) => {
            state.register(&own, slot);
            0
        }
        Err(e) => {
            // SAFETY: nothing else knows the new sk yet.
            unsafe { drop_new(sock, own) };
            e.to_errno()
        }
    }
}

/// `connect` of our `proto_ops`.
///
/// # Safety
///
/// Called only by the socket layer, with the arguments it documents for this op on an `AF_SCI` socket.
unsafe extern "C" fn connect(
    sock: *mut bindings::socket,
    addr: *mut bindings::sockaddr,
    len: c_int,
    flags: c_int,
) -> c_int {
    // SAFETY: an op on an attached socket.
    let (own, state) = unsafe { parts::<SciSock>(sock) };
    let hold = || -> Result<Arc<dyn PendingConnect>> {
        let held: Arc<dyn PendingConnect> = Arc::new(HeldSk::new(&own), GFP_KERNEL)?;
        Ok(held)
    };
    let r = state.connect(&own, SockAddr::new(addr, len), flags, &hold);
    arm_failover(state);
    errno_of(r)
}

/// `accept` of our `proto_ops`.
///
/// # Safety
///
/// Called only by the socket layer, with the arguments it documents for this op on an `AF_SCI` socket.
unsafe extern "C" fn accept(
    sock: *mut bindings::socket,
    newsock: *mut bindings::socket,
    arg: *mut bindings::proto_accept_arg,
) -> c_int {
    let slot = match Registry::reserve() {
        Ok(slot) => slot,
        Err(e) => return e.to_errno(),
    };
    // SAFETY: an op on an attached listener; `newsock` is the caller's new socket and `arg`
    // its accept arguments.
    unsafe {
        let (own, state) = parts::<SciSock>(sock);
        let accepted = match state.accept(&own, arg) {
            Ok(accepted) => accepted,
            Err(e) => return e.to_errno(),
        };
        let new_own = match new_sk(own.net(), newsock, (*arg).kern, state.stack().clone()) {
            Ok(new_own) => new_own,
            Err(e) => {
                if let Accepted::Native(native) = accepted {
                    native.release();
                }
                return e.to_errno();
            }
        };
        (*newsock).state = bindings::socket_state_SS_CONNECTED;
        let new_state = state_of::<SciSock>(new_own.as_ptr());
        match accepted {
            Accepted::Native(native) => new_state.adopt(&new_own, native, state),
            Accepted::Sci(conn) => {
                if let Err(e) = new_state.adopt_sci(&new_own, conn, state, &own) {
                    drop_new(newsock, new_own);
                    return e.to_errno();
                }
                arm_failover(new_state);
            }
        }
        new_state.register(&new_own, slot);
    }
    0
}

/// `listen` of our `proto_ops`.
///
/// # Safety
///
/// Called only by the socket layer, with the arguments it documents for this op on an `AF_SCI` socket.
unsafe extern "C" fn listen(sock: *mut bindings::socket, backlog: c_int) -> c_int {
    // SAFETY: an op on an attached socket.
    let (own, state) = unsafe { parts::<SciSock>(sock) };
    errno_of(state.listen(&own, backlog))
}

/// `read_sock` of our `proto_ops`: a kernel reader's actor (`iscsi_tcp`), called as
/// `tcp_read_sock` is, from the reader's `sk_data_ready` or with the socket locked; it
/// never sleeps (see `sock/read_sock.rs`).
///
/// # Safety
///
/// Called only by a kernel user of an `AF_SCI` socket, with the arguments the socket layer
/// documents for this op.
unsafe extern "C" fn read_sock(
    sk: *mut bindings::sock,
    desc: *mut bindings::read_descriptor_t,
    actor: bindings::sk_read_actor_t,
) -> c_int {
    // SAFETY: `sk` is an attached AF_SCI sk (its user holds the socket); `desc` and
    // `actor` are the caller's, valid for this call, which the wrapper does not outlive.
    let (own, state, mut actor) = unsafe {
        let own = OwnSk::from_raw(NonNull::new_unchecked(sk));
        (
            own,
            state_of::<SciSock>(sk),
            ReadActor::new(sk, desc, actor),
        )
    };
    count_of(state.read_sock(&own, &mut actor))
}

/// The work item of an `AF_SCI` socket (`SciSock::read_again`).
///
/// # Safety
///
/// Called by the socket's work item, queued only for a live sock and cancelled in its
/// release (`sys/sk_work.rs`).
unsafe extern "C" fn read_again(sk: *mut bindings::sock) {
    // SAFETY: the work item's contract: `sk` is a live AF_SCI sock with its state.
    let (own, state) = unsafe {
        (
            OwnSk::from_raw(NonNull::new_unchecked(sk)),
            state_of::<SciSock>(sk),
        )
    };
    state.read_again(&own);
}

/// `splice_eof` of our `proto_ops`.
///
/// # Safety
///
/// Called only by the socket layer, with the arguments it documents for this op on an `AF_SCI` socket.
unsafe extern "C" fn splice_eof(sock: *mut bindings::socket) {
    // SAFETY: an op on an attached socket.
    let (_, state) = unsafe { parts::<SciSock>(sock) };
    state.native().splice_eof();
}

/// The registered `AF_SCI` family: our `proto`, `proto_ops` and `net_proto_family`, the
/// per-namespace counters, and the stack its sockets share.
pub(crate) struct Family {
    ops: bindings::proto_ops,
    /// The `proto_ops` of datagram sockets (`socket/dgram/adapter.rs`).
    dgram_ops: bindings::proto_ops,
    /// The datagram sockets' `struct proto`; dropped after the family is unregistered.
    dgram_proto: Option<dgram::adapter::DgramProto>,
    family: bindings::net_proto_family,
    /// The pernet counters, `proto_register` and `sock_register` all succeeded: drop
    /// undoes them.
    registered: bool,
    /// The stack (from `Arc::into_raw`, released by drop), which `create` hands to new
    /// sockets through [`STACK`].
    stack: *const Stack,
    /// The `proto_ops` of native sockets that took over a file (`handover.rs`).
    _handover: KBox<handover::Tables>,
}

// SAFETY: the tables are written once before registration and only read afterwards; the
// raw pointers in them (module, functions) are valid for the module's lifetime.
unsafe impl Send for Family {}
// SAFETY: as above.
unsafe impl Sync for Family {}

impl Family {
    /// The number requested by the `family` module parameter.
    pub(crate) fn requested_number() -> c_int {
        // SAFETY: reads a module parameter.
        unsafe { bindings::sci_family_param() }
    }

    /// Registers family `number`; unregistered on drop.
    pub(crate) fn register(
        number: c_int,
        module: &'static ThisModule,
        stack: Arc<Stack>,
    ) -> Result<Pin<KBox<Self>>> {
        if number <= 0 || number >= bindings::NPROTO as c_int {
            pr_err!(
                "family={} is out of range (1..{})\n",
                number,
                bindings::NPROTO
            );
            return Err(EINVAL);
        }
        let owner = module.as_ptr().cast::<bindings::module>();
        let mut this = KBox::pin(
            Self {
                ops: bindings::proto_ops {
                    connect: Some(connect),
                    accept: Some(accept),
                    listen: Some(listen),
                    // No splice_read: sock_splice_read then reads through the file
                    // (copy_splice_read, read_iter, our recvmsg), which serves the SCI
                    // path and the native socket alike. Forwarding to the native
                    // socket's tcp_splice_read oopsed: it reads the O_NONBLOCK flag from
                    // `sock->file`, and the native socket of a socket not handed over
                    // is a kernel socket without a file (found by tools/sci-fuzz).
                    splice_read: None,
                    splice_eof: Some(splice_eof),
                    read_sock: Some(read_sock),
                    ..proto_ops::shared::<SciSock>(number, owner)
                },
                dgram_ops: dgram::adapter::ops(number, owner),
                dgram_proto: None,
                family: bindings::net_proto_family {
                    family: number,
                    create: Some(create),
                    owner,
                },
                registered: false,
                stack: Arc::into_raw(stack),
                _handover: handover::Tables::new()?,
            },
            GFP_KERNEL,
        )?;
        FAMILY.store(number, Ordering::Relaxed);
        OPS.store(ptr::from_ref(&this.ops).cast_mut(), Ordering::Relaxed);
        this._handover.set_family_ops(&this.ops);
        // SAFETY: registers our static pernet_operations, whose zeroed data is a valid
        // `NetStats` (same layout as `struct sci_net_stats`, see `socket/stats.rs`).
        to_result(unsafe { bindings::sci_pernet_register() })?;
        STACK.store(this.stack.cast_mut(), Ordering::Release);
        // SAFETY: registers our static proto (obj_size = our sk object).
        let ret = unsafe {
            bindings::sci_proto_register(core::mem::size_of::<SockObj<SciSock>>() as c_uint)
        };
        if ret != 0 {
            STACK.store(ptr::null_mut(), Ordering::Release);
            // SAFETY: registered just above.
            unsafe { bindings::sci_pernet_unregister() };
            return Err(kernel::error::Error::from_errno(ret));
        }
        let dgram_proto = match dgram::adapter::DgramProto::register(number, &this.dgram_ops) {
            Ok(p) => p,
            Err(e) => {
                STACK.store(ptr::null_mut(), Ordering::Release);
                // SAFETY: registered just above.
                unsafe {
                    bindings::sci_proto_unregister();
                    bindings::sci_pernet_unregister();
                }
                return Err(e);
            }
        };
        // SAFETY: only a plain field changes; the pinned tables do not move.
        unsafe { Pin::get_unchecked_mut(this.as_mut()) }.dgram_proto = Some(dgram_proto);
        // SAFETY: `this` is pinned and outlives the registration (dropped after unregister).
        let ret = unsafe { bindings::sock_register(&this.family) };
        if ret != 0 {
            STACK.store(ptr::null_mut(), Ordering::Release);
            // SAFETY: only a plain field changes; the pinned tables do not move.
            drop(
                unsafe { Pin::get_unchecked_mut(this.as_mut()) }
                    .dgram_proto
                    .take(),
            );
            // SAFETY: registered just above.
            unsafe {
                bindings::sci_proto_unregister();
                bindings::sci_pernet_unregister();
            }
            if ret == -(bindings::EEXIST as c_int) {
                pr_err!(
                    "address family {} is already registered by another protocol; load with family=<free number>\n",
                    number
                );
            }
            return Err(kernel::error::Error::from_errno(ret));
        }
        // SAFETY: only a plain field changes; the pinned tables do not move.
        unsafe { Pin::get_unchecked_mut(this.as_mut()) }.registered = true;
        Ok(this)
    }
}

impl Family {
    /// The registered family number.
    pub(crate) fn number(&self) -> c_int {
        self.family.family
    }
}

impl Drop for Family {
    fn drop(&mut self) {
        // SAFETY: `stack` came from `Arc::into_raw` in `register`; no socket can be
        // created any more once this drop ends, and every socket holds its own reference.
        let stack = unsafe { Arc::from_raw(self.stack) };
        if !self.registered {
            return;
        }
        // SAFETY: registered in `register`; `sock_unregister` waits for running creates.
        // No AF_SCI socket is left: each holds a module reference.
        unsafe { bindings::sock_unregister(self.family.family) };
        drop(self.dgram_proto.take());
        // SAFETY: as above.
        unsafe {
            bindings::sci_proto_unregister();
            bindings::sci_pernet_unregister();
        }
        STACK.store(ptr::null_mut(), Ordering::Release);
        drop(stack);
    }
}
