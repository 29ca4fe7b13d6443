// SPDX-License-Identifier: GPL-2.0

//! Socket options of an `AF_SCI` stream socket: every level but `SOL_SCI` goes to the
//! native socket (`NativeSlot::setsockopt`: `SOL_SOCKET` mirrored into ours, recorded until
//! the family is settled), and `SOL_SCI` is ours (`SCI_INFO`, `SCI_NATIVE_FAMILY`,
//! `SCI_SPIN_US`, `SCI_FABRIC`).

use super::*;
use crate::sys::net::{int_optval, put_option, sci_info_bytes};
use kernel::uaccess::UserSlice;

impl SciSock {
    /// `setsockopt(2)`: `SOL_SOCKET` goes to both sockets (the socket layer reads it back
    /// from ours), every other level to the native socket, `SOL_SCI` is ours.
    pub(crate) fn setsockopt(
        &self,
        own: &OwnSk,
        level: c_int,
        optname: c_int,
        val: OptVal,
        len: c_uint,
    ) -> Result {
        if level == bindings::SOL_SCI as c_int {
            return self.set_sci_option(own, optname, val, len);
        }
        let native = self.slot.setsockopt(own, level, optname, val, len)?;
        if level == bindings::SOL_TCP as c_int {
            self.push_if_ungathered(&native, optname);
        }
        Ok(())
    }

    /// After `TCP_NODELAY` was set or `TCP_CORK` cleared, sends what an SCI connection
    /// held back, as TCP pushes its pending frames then.
    fn push_if_ungathered(&self, native: &Native, optname: c_int) {
        let nagle = native.nagle();
        let push = (optname == bindings::TCP_NODELAY as c_int && nagle.nodelay)
            || (optname == bindings::TCP_CORK as c_int && !nagle.cork);
        if let (true, Some(conn)) = (push, self.conn()) {
            conn.push(self.stack.plane.fabric());
        }
    }

    /// `setsockopt(SOL_SCI, ...)`: `SCI_NATIVE_FAMILY` before the socket is committed,
    /// `SCI_SPIN_US` at any time, `SCI_FABRIC` before it connects or listens.
    fn set_sci_option(&self, own: &OwnSk, optname: c_int, val: OptVal, len: c_uint) -> Result {
        if optname != bindings::SCI_NATIVE_FAMILY as c_int
            && optname != bindings::SCI_SPIN_US as c_int
            && optname != bindings::SCI_FABRIC as c_int
        {
            return Err(errno(bindings::ENOPROTOOPT));
        }
        let value = int_optval(val, len)?;
        if optname == bindings::SCI_FABRIC as c_int {
            if value != 0 && value != 1 {
                return Err(EINVAL);
            }
            // Decided at connect or listen: too late once the socket did either.
            if self.conn().is_some() || own.state() != bindings::TCP_CLOSE {
                return Err(errno(bindings::EISCONN));
            }
            self.opted_out.store(value == 0, Ordering::Relaxed);
            return Ok(());
        }
        if optname == bindings::SCI_SPIN_US as c_int {
            let spin = match value {
                -1 => SPIN_DEFAULT,
                v if (0..=SPIN_US_MAX as c_int).contains(&v) => v as u32,
                _ => return Err(EINVAL),
            };
            self.spin_us.store(spin, Ordering::Relaxed);
            return Ok(());
        }
        self.slot.set_family(own, value)
    }

    /// `getsockopt(2)` at every level but `SOL_SOCKET` (which the socket layer answers
    /// from our sk): `SOL_SCI` here, the rest from the native socket.
    pub(crate) fn getsockopt(
        &self,
        level: c_int,
        optname: c_int,
        val: *mut c_char,
        len: *mut c_int,
    ) -> Result {
        if level != bindings::SOL_SCI as c_int {
            self.native().get_option(level, optname, val, len)?;
            let tcp_info =
                level == bindings::SOL_TCP as c_int && optname == bindings::TCP_INFO as c_int;
            let written = UserSlice::new(len as usize, core::mem::size_of::<c_int>())
                .reader()
                .read::<c_int>()?;
            if let (Some(conn), true) = (self.conn(), tcp_info && written >= 1) {
                // The counters are the idle native socket's; the state is the
                // connection's (`tcpi_state` is the first byte of `struct tcp_info`).
                let state = self.sci_tcp_state(&conn) as u8;
                UserSlice::new(val as usize, 1)
                    .writer()
                    .write_slice(&[state])?;
            }
            return Ok(());
        }
        let native_family;
        let spin;
        let info;
        let fabric;
        let value: &[u8] = match optname as u32 {
            bindings::SCI_INFO => {
                info = self.info();
                &info
            }
            bindings::SCI_NATIVE_FAMILY => {
                native_family = self.native().family().to_ne_bytes();
                &native_family
            }
            bindings::SCI_FABRIC => {
                fabric = c_int::from(!self.opted_out.load(Ordering::Relaxed)).to_ne_bytes();
                &fabric
            }
            bindings::SCI_SPIN_US => {
                // -1: adaptive (the module parameter's default).
                spin = match self.spin() {
                    SpinSetting::Fixed(us) => us as c_int,
                    SpinSetting::Adaptive => -1,
                }
                .to_ne_bytes();
                &spin
            }
            _ => return Err(errno(bindings::ENOPROTOOPT)),
        };
        put_option(value, val, len)
    }

    /// `struct sci_info` as bytes (four native-endian `__u32`).
    fn info(&self) -> [u8; 16] {
        let native = self.native();
        let sci = self.conn().is_some();
        sci_info_bytes([
            if sci {
                bindings::sci_mode_SCI_MODE_SCI
            } else {
                bindings::sci_mode_SCI_MODE_NATIVE
            },
            self.reason(sci).as_u32(),
            native.family() as u32,
            match self.conn() {
                Some(conn) => self.sci_tcp_state(&conn),
                None => u32::from(native.state()),
            },
        ])
    }
}
