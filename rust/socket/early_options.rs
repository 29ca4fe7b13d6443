// SPDX-License-Identifier: GPL-2.0

//! Options set on an `AF_SCI` socket before its native socket's family is settled.
//!
//! `socket(2)` does not tell the family whether the program wants IPv4 or IPv6, so every
//! `AF_SCI` socket (stream or datagram) is born with an `AF_INET` native socket and
//! re-creates it as `AF_INET6` at most once: for `SCI_NATIVE_FAMILY` or the first IPv6
//! address. What the program set until then is recorded here and replayed on the new
//! native socket, so the switch is invisible. After the first bind, connect, listen (or,
//! for a datagram socket, send) the native socket is final: the socket is *committed*.

use crate::socket::native::{Native, NativeKind};
use crate::sys::bindings;
use crate::sys::net::{copy_optval, kernel_optval, OptVal};
use core::ffi::{c_int, c_uint};
use kernel::prelude::*;

/// Options longer than this are applied but not replayed on a family switch.
const OPTION_VALUE_MAX: usize = 64;
/// At most this many options are remembered for a family switch.
const OPTION_RECORD_MAX: usize = 32;

/// A `setsockopt` made before the native socket's family was settled.
struct RecordedOption {
    level: c_int,
    name: c_int,
    len: usize,
    val: [u8; OPTION_VALUE_MAX],
}

/// What may change only before the socket is committed to a family.
pub(crate) struct EarlyOptions {
    /// The native socket is final.
    committed: bool,
    options: KVec<RecordedOption>,
}

impl EarlyOptions {
    /// Nothing recorded, not committed.
    pub(crate) const fn new() -> Self {
        Self {
            committed: false,
            options: KVec::new(),
        }
    }

    /// Whether the native socket is final.
    pub(crate) fn committed(&self) -> bool {
        self.committed
    }

    /// The native socket is final from now on; recorded options are no longer needed.
    pub(crate) fn commit(&mut self) {
        // Once only: every send commits, and replacing the empty list frees it again.
        if !self.committed {
            self.committed = true;
            self.options = KVec::new();
        }
    }

    /// Records an option the native socket accepted, while the socket is uncommitted
    /// (a later one of the same level and name replaces it).
    pub(crate) fn record(&mut self, level: c_int, name: c_int, val: OptVal, len: c_uint) -> Result {
        let len = len as usize;
        if self.committed || len > OPTION_VALUE_MAX || self.options.len() >= OPTION_RECORD_MAX {
            return Ok(());
        }
        let mut opt = RecordedOption {
            level,
            name,
            len,
            val: [0; OPTION_VALUE_MAX],
        };
        copy_optval(&mut opt.val[..len], val)?;
        match self
            .options
            .iter_mut()
            .find(|o| o.level == level && o.name == name)
        {
            Some(old) => *old = opt,
            None => self.options.push(opt, GFP_KERNEL)?,
        }
        Ok(())
    }

    /// A new native socket of `kind` and `family` in `net` with the recorded options
    /// applied, to replace the uncommitted one. An option the new family refuses is
    /// dropped, as it would have been refused had the program's socket been of that family
    /// from the start.
    pub(crate) fn recreate(
        &mut self,
        net: *mut bindings::net,
        family: c_int,
        kind: NativeKind,
        kern: bool,
    ) -> Result<Native> {
        let new = Native::create(net, family, kind, kern)?;
        for opt in self.options.iter_mut() {
            let val = kernel_optval(&mut opt.val[..opt.len]);
            let len = opt.len as c_uint;
            let _ = if opt.level == bindings::SOL_SOCKET as c_int {
                new.set_socket_option(opt.name, val, len)
            } else {
                new.set_option(opt.level, opt.name, val, len)
            };
        }
        Ok(new)
    }
}
