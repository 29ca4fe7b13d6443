// SPDX-License-Identifier: GPL-2.0

//! Connect-time decisions of af_sci, without I/O: port rules, node map lookups and the
//! fallback reasons.
//!
//! Plain `core` Rust (no `std`, no `alloc`, no kernel crate, no `unsafe`, no panics),
//! compiled into `af_sci.ko` (`rust/config/node_map.rs` holds the tables, under a lock) and into
//! the host crate `tools/sci-config`, where `cargo test -p sci-config` tests it and
//! `scictl` uses the same types to check its configuration files.
//!
//! The rules, in order, for a connection to `address:port`:
//!
//! 1. the port matches an `exclude` rule: native, [`FallbackReason::PortExcluded`];
//! 2. `include` rules exist and the port matches none of them: the same;
//! 3. the address is in the node map: SCI to that node;
//! 4. the node map is empty (not configured) and the address is one of this node's own
//!    (loopback, unspecified, or an address of a local interface): SCI to the local node
//!    (the fabric's node id, [`LOCAL_NODE`] without a fabric);
//! 5. the node map is empty and a node the fabric reaches published the address: SCI to
//!    that node;
//! 6. otherwise native, [`FallbackReason::NotMapped`].
//!
//! A loaded node map is authoritative: published addresses are not consulted at all
//! then. A peer can publish any address (as a host can answer any ARP request), so
//! only an administrator who loads no map trusts the peers' word.
//!
//! IPv4-mapped IPv6 addresses (`::ffff:a.b.c.d`) are matched as the IPv4 address.

// The items are `pub` for the host crate; in the module they are crate-internal.
#![allow(unreachable_pub)]

/// A node id on the fabric.
pub type NodeId = u32;

/// The node id of this node while no fabric assigns one.
pub const LOCAL_NODE: NodeId = 0;

/// At most this many node map entries (`SCI_NODES_MAX`).
pub const NODES_MAX: usize = 1024;
/// At most this many port rules (`SCI_PORT_RULES_MAX`).
pub const PORT_RULES_MAX: usize = 64;

/// An IP address, as the bytes of its network representation.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Hash)]
pub enum Ip {
    /// An IPv4 address.
    V4([u8; 4]),
    /// An IPv6 address.
    V6([u8; 16]),
}

impl Ip {
    /// The address as it is matched: an IPv4-mapped IPv6 address becomes IPv4.
    pub fn canonical(self) -> Self {
        // As one word: a pattern over the bytes (the sixteen, or the last four) has the
        // compiler move the address byte by byte, 30 to 45 instructions of a datagram's send.
        match self {
            Ip::V6(b) => {
                let w = u128::from_be_bytes(b);
                // The mapped IPv4 address is the low 32 bits.
                #[allow(clippy::cast_possible_truncation)]
                let v4 = w as u32;
                if w >> 32 == 0xffff {
                    Ip::V4(v4.to_be_bytes())
                } else {
                    self
                }
            }
            other => other,
        }
    }

    /// The address's bytes: 4 of IPv4, 16 of IPv6.
    pub fn octets(&self) -> &[u8] {
        match self {
            Ip::V4(b) => b,
            Ip::V6(b) => b,
        }
    }

    /// The address as IPv6 bytes: an IPv4 address IPv4-mapped (`::ffff:a.b.c.d`).
    pub fn v6_bytes(self) -> [u8; 16] {
        match self {
            Ip::V4([a, b, c, d]) => [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d],
            Ip::V6(b) => b,
        }
    }

    /// `127.0.0.0/8` or `::1`.
    pub fn is_loopback(&self) -> bool {
        match self.canonical() {
            Ip::V4([a, ..]) => a == 127,
            Ip::V6(b) => b == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        }
    }

    /// `0.0.0.0` or `::` (a connect to it reaches this node).
    pub fn is_unspecified(&self) -> bool {
        match self.canonical() {
            Ip::V4(b) => b == [0; 4],
            Ip::V6(b) => b == [0; 16],
        }
    }
}

/// `AF_INET` on Linux.
pub const AF_INET: u16 = 2;
/// `AF_INET6` on Linux.
pub const AF_INET6: u16 = 10;

/// The address and port of a `struct sockaddr_in` or `sockaddr_in6` given as its bytes
/// (family in native byte order, port and address in network order), if the bytes hold
/// one completely: 16 bytes for `AF_INET`, 24 (`SIN6_LEN_RFC2133`) for `AF_INET6`, as
/// TCP's connect requires.
pub fn sockaddr_ip_port(bytes: &[u8]) -> Option<(Ip, u16)> {
    let family = u16::from_ne_bytes([*bytes.first()?, *bytes.get(1)?]);
    let port = u16::from_be_bytes([*bytes.get(2)?, *bytes.get(3)?]);
    match family {
        AF_INET if bytes.len() >= 16 => {
            let addr: [u8; 4] = bytes.get(4..8)?.try_into().ok()?;
            Some((Ip::V4(addr), port))
        }
        AF_INET6 if bytes.len() >= 24 => {
            let addr: [u8; 16] = bytes.get(8..24)?.try_into().ok()?;
            Some((Ip::V6(addr), port))
        }
        _ => None,
    }
}

/// What a port rule does.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PortAction {
    /// Once any include rule exists, only included ports use SCI (`SCI_PORT_INCLUDE`).
    Include = 1,
    /// These ports never use SCI (`SCI_PORT_EXCLUDE`); wins over include.
    Exclude = 2,
}

impl PortAction {
    /// From the `SCI_PORT_A_ACTION` value.
    pub fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(PortAction::Include),
            2 => Some(PortAction::Exclude),
            _ => None,
        }
    }

    /// The `SCI_PORT_A_ACTION` value.
    pub fn as_u8(self) -> u8 {
        self as u8
    }

    /// `include` or `exclude`, as in `ports.conf`.
    pub fn name(self) -> &'static str {
        match self {
            PortAction::Include => "include",
            PortAction::Exclude => "exclude",
        }
    }

    /// From its name.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "include" => Some(PortAction::Include),
            "exclude" => Some(PortAction::Exclude),
            _ => None,
        }
    }
}

/// Why a port rule is refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RuleError {
    /// Port 0 is not a destination port.
    PortZero,
    /// The range's first port is above its last.
    Reversed,
}

impl RuleError {
    /// A message for people.
    pub fn message(self) -> &'static str {
        match self {
            RuleError::PortZero => "port 0 is not a valid destination port",
            RuleError::Reversed => "the range's first port is above its last",
        }
    }
}

/// A port rule: destination ports `low..=high`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct PortRule {
    action: PortAction,
    low: u16,
    high: u16,
}

impl PortRule {
    /// A rule for ports `low..=high` (`1 <= low <= high`).
    pub fn new(action: PortAction, low: u16, high: u16) -> Result<Self, RuleError> {
        if low == 0 {
            return Err(RuleError::PortZero);
        }
        if low > high {
            return Err(RuleError::Reversed);
        }
        Ok(Self { action, low, high })
    }

    /// Include or exclude.
    pub fn action(&self) -> PortAction {
        self.action
    }

    /// The first port.
    pub fn low(&self) -> u16 {
        self.low
    }

    /// The last port.
    pub fn high(&self) -> u16 {
        self.high
    }

    /// Whether `port` is in the range.
    pub fn contains(&self, port: u16) -> bool {
        self.low <= port && port <= self.high
    }
}

/// Whether `rules` let a connection to `port` use SCI: no exclude rule matches, and if
/// there are include rules, one of them matches.
pub fn port_allowed(rules: &[PortRule], port: u16) -> bool {
    let mut includes = false;
    let mut included = false;
    for rule in rules {
        match rule.action {
            PortAction::Exclude if rule.contains(port) => return false,
            PortAction::Exclude => {}
            PortAction::Include => {
                includes = true;
                included |= rule.contains(port);
            }
        }
    }
    !includes || included
}

/// Why a socket carries its bytes over its native TCP socket (`enum sci_fallback_reason`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum FallbackReason {
    /// Not fallen back.
    None = 0,
    /// No SCI data path available yet for this destination.
    NoFabric = 1,
    /// The destination address is not in the node map.
    NotMapped = 2,
    /// The destination port is excluded by the port rules.
    PortExcluded = 3,
    /// The peer node's listener refused the connection.
    PeerRejected = 4,
    /// The fabric is out of memory.
    NoMemory = 5,
    /// The peer node did not answer in time.
    Timeout = 6,
    /// The accepted connection came from a plain TCP peer.
    PeerTcp = 7,
    /// An SCI connection whose fabric path was lost moved onto TCP mid-stream.
    Failover = 8,
    /// The socket asked for TCP (`SCI_FABRIC` 0: a rule of the preload's, or the program).
    OptedOut = 9,
}

impl FallbackReason {
    /// Every reason, in the order of their values.
    pub const ALL: [FallbackReason; 10] = [
        FallbackReason::None,
        FallbackReason::NoFabric,
        FallbackReason::NotMapped,
        FallbackReason::PortExcluded,
        FallbackReason::PeerRejected,
        FallbackReason::NoMemory,
        FallbackReason::Timeout,
        FallbackReason::PeerTcp,
        FallbackReason::Failover,
        FallbackReason::OptedOut,
    ];

    /// Number of reasons (`SCI_FALLBACK_MAX + 1`).
    pub const COUNT: usize = Self::ALL.len();

    /// The uapi value.
    pub fn as_u32(self) -> u32 {
        self as u32
    }

    /// From the uapi value.
    pub fn from_u32(v: u32) -> Option<Self> {
        Self::ALL.iter().copied().find(|r| r.as_u32() == v)
    }

    /// The name tools print (`port-excluded`, ...).
    pub fn name(self) -> &'static str {
        match self {
            FallbackReason::None => "none",
            FallbackReason::NoFabric => "no-fabric",
            FallbackReason::NotMapped => "not-mapped",
            FallbackReason::PortExcluded => "port-excluded",
            FallbackReason::PeerRejected => "peer-rejected",
            FallbackReason::NoMemory => "no-memory",
            FallbackReason::Timeout => "timeout",
            FallbackReason::PeerTcp => "peer-tcp",
            FallbackReason::Failover => "failover",
            FallbackReason::OptedOut => "opted-out",
        }
    }

    /// From its name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|r| r.name() == name)
    }
}

/// What a connect does.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Decision {
    /// Try SCI to this node.
    Sci(NodeId),
    /// Use the native TCP connection, for this reason.
    Native(FallbackReason),
}

/// The decision for a connection to `dest:port` (see the module documentation).
///
/// `map_empty` tells whether the node map is unconfigured, `lookup` finds an address in
/// it, `is_local` tells whether an address belongs to one of this node's interfaces (only
/// asked when the map is empty and the address is neither loopback nor unspecified),
/// `published` finds the reachable node that published an address (only asked when the
/// map is empty and the address is not this node's). All get the canonical address.
/// `local_node` is this node's id.
#[allow(clippy::too_many_arguments)]
pub fn decide(
    rules: &[PortRule],
    dest: Ip,
    port: u16,
    local_node: NodeId,
    map_empty: bool,
    lookup: impl FnOnce(Ip) -> Option<NodeId>,
    is_local: impl FnOnce(Ip) -> bool,
    published: impl FnOnce(Ip) -> Option<NodeId>,
) -> Decision {
    if !port_allowed(rules, port) {
        return Decision::Native(FallbackReason::PortExcluded);
    }
    let dest = dest.canonical();
    if !map_empty {
        return match lookup(dest) {
            Some(node) => Decision::Sci(node),
            None => Decision::Native(FallbackReason::NotMapped),
        };
    }
    if dest.is_loopback() || dest.is_unspecified() || is_local(dest) {
        return Decision::Sci(local_node);
    }
    match published(dest) {
        Some(node) => Decision::Sci(node),
        None => Decision::Native(FallbackReason::NotMapped),
    }
}
