// SPDX-License-Identifier: GPL-2.0

//! This host's addresses as a connect sees them: whether an address is one of this host's,
//! and which source address TCP would use towards one.

use crate::config::rules::Ip;
use crate::sys::bindings;
use crate::sys::net::{addr4_is_local, addr6_is_local, route4_source, route6_source};
use kernel::error::Result;

/// Whether `ip` is an address of one of this host's interfaces in namespace `net`.
pub(crate) fn addr_is_local(net: *mut bindings::net, ip: Ip) -> bool {
    match ip {
        Ip::V4(b) => addr4_is_local(net, b),
        Ip::V6(b) => addr6_is_local(net, b),
    }
}

/// The source address a TCP connect from namespace `net` to `dest` would use.
pub(crate) fn route_source(net: *mut bindings::net, dest: Ip) -> Result<Ip> {
    Ok(match dest {
        Ip::V4(b) => Ip::V4(route4_source(net, b)?),
        Ip::V6(b) => Ip::V6(route6_source(net, b)?),
    })
}
