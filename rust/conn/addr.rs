// SPDX-License-Identifier: GPL-2.0

//! The names of SCI connections: the socket addresses `getsockname`/`getpeername` report,
//! the IP addresses control frames carry, and the address a listener is bound to.
//!
//! An SCI connection reports exactly the names a TCP connection between the same two
//! sockets would: the connector's native socket is bound before the handshake, and the
//! request carries both IP addresses, so each end builds its names in its own socket's
//! family (an `AF_INET6` socket sees an IPv4 peer as `::ffff:a.b.c.d`, as with TCP).

use crate::config::rules::Ip;
use crate::proto::frame::WireIp;
use crate::sys::bindings;

/// A socket address as `getsockname`/`getpeername` return it.
#[derive(Clone, Copy)]
pub(crate) struct Addr {
    bytes: [u8; 28],
    len: usize,
}

impl Addr {
    /// An empty address.
    pub(crate) const EMPTY: Addr = Addr {
        bytes: [0; 28],
        len: 0,
    };

    /// An address from its bytes (at most `sockaddr_in6`).
    pub(crate) fn from_bytes(b: &[u8]) -> Self {
        let mut a = Self::EMPTY;
        let len = b.len().min(a.bytes.len());
        a.bytes[..len].copy_from_slice(&b[..len]);
        a.len = len;
        a
    }

    /// `ip:port` as a `sockaddr_in6` (`v6`, an IPv4 address mapped) or a `sockaddr_in`
    /// (an IPv4 address; an IPv6 one cannot be named so and gives an empty address).
    pub(crate) fn inet(ip: Ip, port: u16, v6: bool) -> Self {
        let mut a = Self::EMPTY;
        let port = port.to_be_bytes();
        if v6 {
            let b = match ip {
                Ip::V4([w, x, y, z]) => [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, w, x, y, z],
                Ip::V6(b) => b,
            };
            a.bytes[..2].copy_from_slice(&(bindings::AF_INET6 as u16).to_ne_bytes());
            a.bytes[2..4].copy_from_slice(&port);
            // sin6_flowinfo stays 0, and so does sin6_scope_id: scoped (link-local)
            // addresses never take the SCI path.
            a.bytes[8..24].copy_from_slice(&b);
            a.len = 28;
        } else if let Ip::V4(b) = ip.canonical() {
            a.bytes[..2].copy_from_slice(&(bindings::AF_INET as u16).to_ne_bytes());
            a.bytes[2..4].copy_from_slice(&port);
            a.bytes[4..8].copy_from_slice(&b);
            a.len = 16;
        }
        a
    }

    /// The address bytes.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }

    /// The address bytes, writable (`bind` takes a mutable pointer).
    pub(crate) fn as_mut_bytes(&mut self) -> &mut [u8] {
        &mut self.bytes[..self.len]
    }

    /// The IP address and port, if this is an `AF_INET`/`AF_INET6` address.
    pub(crate) fn ip_port(&self) -> Option<(Ip, u16)> {
        crate::config::rules::sockaddr_ip_port(self.as_bytes())
    }
}

/// The address a connection to `dest` really reaches: a connect to `0.0.0.0` or `::`
/// goes to this host's loopback address, as TCP's does.
pub(crate) fn effective_dest(dest: Ip) -> Ip {
    match dest {
        Ip::V4(_) if dest.is_unspecified() => Ip::V4([127, 0, 0, 1]),
        Ip::V6(_) if dest.is_unspecified() => {
            Ip::V6([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1])
        }
        other => other,
    }
}

/// Whether `ip` is an IPv6 link-local address: it needs a scope (an interface) that the
/// fabric cannot carry, so such connections stay on TCP.
pub(crate) fn is_link_local(ip: Ip) -> bool {
    matches!(ip.canonical(), Ip::V6([0xfe, b, ..]) if b & 0xc0 == 0x80)
}

/// `ip` as a control frame carries it (IPv4-mapped addresses as IPv4).
pub(crate) fn to_wire(ip: Ip) -> WireIp {
    match ip.canonical() {
        Ip::V4(b) => WireIp::V4(b),
        Ip::V6(b) => WireIp::V6(b),
    }
}

/// The address a control frame carries, if any.
pub(crate) fn from_wire(ip: WireIp) -> Option<Ip> {
    match ip {
        WireIp::None => None,
        WireIp::V4(b) => Some(Ip::V4(b)),
        WireIp::V6(b) => Some(Ip::V6(b)),
    }
}

/// What an `AF_SCI` listener is bound to, as SCI connection requests are matched.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct ListenAddr {
    /// The bound address (canonical), `None` for the wildcard.
    pub(crate) ip: Option<Ip>,
    /// The port.
    pub(crate) port: u16,
    /// An `AF_INET6` socket (names are reported as `sockaddr_in6`).
    pub(crate) v6: bool,
    /// `IPV6_V6ONLY`: a wildcard `AF_INET6` listener that takes no IPv4.
    pub(crate) v6only: bool,
    /// The listener's network namespace (its cookie).
    pub(crate) namespace: u64,
    /// The namespace is the initial one (reachable from other nodes).
    pub(crate) init_ns: bool,
}

impl ListenAddr {
    /// How well this listener matches a request for `dest:port` in `namespace`:
    /// `None` when it does not; otherwise the higher the better, as TCP's listener
    /// lookup ranks them (a bound address over the wildcard, an `AF_INET` wildcard over
    /// an `AF_INET6` one for IPv4).
    pub(crate) fn score(&self, dest: Ip, port: u16, namespace: u64) -> Option<u8> {
        let ns_ok = namespace == self.namespace || namespace == 0 && self.init_ns;
        if !ns_ok || port != self.port {
            return None;
        }
        let dest = dest.canonical();
        let v4 = matches!(dest, Ip::V4(_));
        match self.ip {
            Some(ip) => (ip == dest).then_some(4),
            None if !self.v6 => v4.then_some(2),
            None => (!v4 || !self.v6only).then_some(1),
        }
    }
}
