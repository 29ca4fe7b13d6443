// SPDX-License-Identifier: GPL-2.0

//! The native socket an `AF_SCI` socket owns, stream or datagram, through its changes.
//!
//! It is born `AF_INET` ([`EarlyOptions`] says why) and may be re-created as `AF_INET6`
//! once, before the socket commits; a stream socket's may be replaced once more by a
//! failover's joined TCP connection. A replaced native socket is kept until release, as a
//! racing call may still hold it. The slot also holds the callbacks saved when the native
//! socket's wake-ups were pointed at the `AF_SCI` socket ([`NativeHooks`]).

use crate::socket::early_options::EarlyOptions;
use crate::socket::native::{Native, NativeKind};
use crate::socket::native_hooks::{NativeHooks, SavedCallbacks};
use crate::socket::sk::OwnSk;
use crate::socket::sockaddr::SockAddr;
use crate::sys::bindings;
use crate::sys::errno::errno;
use crate::sys::net::OptVal;
use core::ffi::{c_int, c_uint};
use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use kernel::prelude::*;
use kernel::sync::Mutex;

/// An `AF_SCI` socket's native socket, with what may change it.
#[pin_data]
pub(crate) struct NativeSlot {
    /// Until the socket commits, the native socket may be re-created as `AF_INET6`.
    #[pin]
    config: Mutex<EarlyOptions>,
    /// `config` says committed: what every later send would find under its lock, read
    /// without it.
    committed: AtomicBool,
    /// The native socket in use; set at creation, replaced by a family switch or a
    /// failover.
    native: AtomicPtr<bindings::socket>,
    /// The native socket last replaced, kept until release.
    retired: AtomicPtr<bindings::socket>,
    /// Saved callbacks of the native socket in use.
    hooks: NativeHooks,
    kind: NativeKind,
    kern: bool,
}

impl NativeSlot {
    /// An empty slot for native sockets of `kind`; `kern` for kernel-created sockets.
    pub(crate) fn new(kind: NativeKind, kern: bool) -> impl PinInit<Self> {
        pin_init!(Self {
            config <- kernel::new_mutex!(EarlyOptions::new(), "NativeSlot::config"),
            committed: AtomicBool::new(false),
            native: AtomicPtr::new(ptr::null_mut()),
            retired: AtomicPtr::new(ptr::null_mut()),
            hooks: NativeHooks::new(),
            kind,
            kern,
        })
    }

    /// The saved callbacks (and the error mirrored into the owner).
    pub(crate) fn hooks(&self) -> &NativeHooks {
        &self.hooks
    }

    /// Creates the native socket of `family` and installs it.
    pub(crate) fn create(&self, own: &OwnSk, family: c_int) -> Result<Native> {
        let native = Native::create(own.net(), family, self.kind, self.kern)?;
        self.install(own, native, None);
        Ok(native)
    }

    /// Points `native`'s wake-ups at `own` and makes it the one in use. `inherited` are
    /// the listener's saved callbacks when `native` was just accepted.
    pub(crate) fn install(&self, own: &OwnSk, native: Native, inherited: Option<SavedCallbacks>) {
        self.hooks.attach(&native, own.as_ptr(), inherited);
        own.set_buffer_sizes(native.buffer_sizes());
        self.native.store(native.as_ptr(), Ordering::Release);
    }

    /// The native socket in use.
    pub(crate) fn native(&self) -> Native {
        // Set at creation before the socket is reachable, and never cleared before
        // `release`.
        Native::from_ptr(self.native.load(Ordering::Acquire))
            .expect("AF_SCI socket without native socket")
    }

    /// Makes `new` the native socket in place of the one in use (a failover's joined
    /// connection), which is kept until release.
    pub(crate) fn replace(&self, own: &OwnSk, new: Native) {
        let old = self.native();
        self.hooks.detach(&old);
        self.install(own, new, None);
        if let Some(prev) = Native::from_ptr(self.retired.swap(old.as_ptr(), Ordering::AcqRel)) {
            prev.release();
        }
    }

    /// Re-creates the (uncommitted) native socket as `family`, replaying the options. A
    /// socket switches at most once (`EINVAL` after that): one is enough for the one
    /// real case, `AF_INET` to `AF_INET6`.
    fn switch_family(
        &self,
        own: &OwnSk,
        config: &mut EarlyOptions,
        family: c_int,
    ) -> Result<Native> {
        let old = self.native();
        if config.committed() || old.family() == family {
            return Ok(old);
        }
        if !self.retired.load(Ordering::Acquire).is_null() {
            return Err(EINVAL);
        }
        let new = config.recreate(own.net(), family, self.kind, self.kern)?;
        self.hooks.detach(&old);
        self.install(own, new, None);
        self.retired.store(old.as_ptr(), Ordering::Release);
        Ok(new)
    }

    /// The native socket to use for `addr`: re-created as `AF_INET6` for the first IPv6
    /// address of an uncommitted socket.
    fn native_for(
        &self,
        own: &OwnSk,
        config: &mut EarlyOptions,
        addr: Option<&SockAddr>,
    ) -> Result<Native> {
        match addr.and_then(SockAddr::wanted_family) {
            Some(family) => self.switch_family(own, config, family),
            None => Ok(self.native()),
        }
    }

    /// Settles the family for `addr` and commits the socket to it.
    pub(crate) fn commit(&self, own: &OwnSk, addr: Option<&SockAddr>) -> Result<Native> {
        // Committed, the family is settled whatever `addr` is (`switch_family`).
        if self.committed.load(Ordering::Acquire) {
            return Ok(self.native());
        }
        let mut config = self.config.lock();
        let native = self.native_for(own, &mut config, addr)?;
        self.settle(&mut config);
        Ok(native)
    }

    /// Commits the socket to the native socket it has (an accepted socket's).
    pub(crate) fn mark_committed(&self) {
        self.settle(&mut self.config.lock());
    }

    /// Commits the socket, under `config`'s lock.
    fn settle(&self, config: &mut EarlyOptions) {
        config.commit();
        self.committed.store(true, Ordering::Release);
    }

    /// `bind(2)`. A failed bind leaves the socket uncommitted, as TCP and UDP let a
    /// program try again.
    pub(crate) fn bind(&self, own: &OwnSk, addr: SockAddr) -> Result {
        let mut config = self.config.lock();
        let native = self.native_for(own, &mut config, Some(&addr))?;
        native.bind(addr)?;
        self.settle(&mut config);
        Ok(())
    }

    /// `setsockopt(2)` at every level but `SOL_SCI`: `SOL_SOCKET` goes to both sockets
    /// (the socket layer reads it back from ours; ours only mirrors what the native one
    /// accepted), every other level to the native socket; recorded while uncommitted.
    /// Returns the native socket it went to.
    pub(crate) fn setsockopt(
        &self,
        own: &OwnSk,
        level: c_int,
        optname: c_int,
        val: OptVal,
        len: c_uint,
    ) -> Result<Native> {
        let mut config = self.config.lock();
        let native = self.native();
        if level == bindings::SOL_SOCKET as c_int {
            native.set_socket_option(optname, val, len)?;
            let _ = own.set_socket_option(optname, val, len);
            own.set_buffer_sizes(native.buffer_sizes());
            own.set_reuse_flags(native.reuse_flags());
            own.set_zerocopy(native.zerocopy());
        } else {
            native.set_option(level, optname, val, len)?;
        }
        config.record(level, optname, val, len)?;
        Ok(native)
    }

    /// `SCI_NATIVE_FAMILY`: `family` for the native socket, before the socket is
    /// committed (`EISCONN` after, unless it already is that family).
    pub(crate) fn set_family(&self, own: &OwnSk, family: c_int) -> Result {
        if family != bindings::AF_INET as c_int && family != bindings::AF_INET6 as c_int {
            return Err(errno(bindings::EAFNOSUPPORT));
        }
        let mut config = self.config.lock();
        if config.committed() && self.native().family() != family {
            return Err(errno(bindings::EISCONN));
        }
        self.switch_family(own, &mut config, family).map(|_| ())
    }

    /// Closes the native socket (as `close()` would) and the one it replaced.
    pub(crate) fn release(&self) {
        let native = self.native();
        self.hooks.detach(&native);
        self.native.store(ptr::null_mut(), Ordering::Release);
        native.release();
        if let Some(old) = Native::from_ptr(self.retired.swap(ptr::null_mut(), Ordering::AcqRel)) {
            old.release();
        }
    }
}
