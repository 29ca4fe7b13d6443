//! The attributes of the `af_sci` generic netlink family (`uapi/linux/af_sci.h`,
//! `Documentation/netlink/af_sci.yaml`) as `netlink-packet-core` NLAs.

use netlink_packet_core::{
    emit_u16, emit_u32, emit_u64, parse_u16, parse_u32, parse_u64, parse_u8, DecodeError,
    DefaultNla, Emitable, Nla, NlaBuffer, NlasIterator, Parseable, NLA_F_NESTED,
};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `SCI_GENL_NAME`, `SCI_GENL_VERSION`.
pub const FAMILY_NAME: &str = "af_sci";
pub const FAMILY_VERSION: u8 = 1;

/// `enum sci_cmd`.
pub mod cmd {
    pub const NODE_GET: u8 = 1;
    pub const NODE_SET: u8 = 2;
    pub const PORT_GET: u8 = 3;
    pub const PORT_SET: u8 = 4;
    pub const SOCK_GET: u8 = 5;
    pub const STATS_GET: u8 = 6;
    pub const LINK_DROP: u8 = 7;
    pub const PUBLISH_SET: u8 = 8;
}

/// `enum sci_attr`.
pub mod a {
    pub const NODE: u16 = 1;
    pub const PORT_RULE: u16 = 2;
    pub const SOCK: u16 = 3;
    pub const STATS: u16 = 4;
    pub const PUBLISH: u16 = 5;
}

/// `enum sci_node_attr`.
pub mod node_a {
    pub const ADDR4: u16 = 1;
    pub const ADDR6: u16 = 2;
    pub const ID: u16 = 3;
    pub const SOURCE: u16 = 4;
}

/// `enum sci_node_source`.
pub mod node_source {
    pub const FILE: u8 = 0;
    pub const FABRIC: u8 = 1;
}

/// `enum sci_port_attr`.
pub mod port_a {
    pub const ACTION: u16 = 1;
    pub const LOW: u16 = 2;
    pub const HIGH: u16 = 3;
}

/// `enum sci_sock_attr`.
pub mod sock_a {
    #[allow(dead_code)] // padding only, never decoded
    pub const PAD: u16 = 1;
    pub const FAMILY: u16 = 2;
    pub const LOCAL_ADDR4: u16 = 3;
    pub const LOCAL_ADDR6: u16 = 4;
    pub const LOCAL_PORT: u16 = 5;
    pub const PEER_ADDR4: u16 = 6;
    pub const PEER_ADDR6: u16 = 7;
    pub const PEER_PORT: u16 = 8;
    pub const MODE: u16 = 9;
    pub const FALLBACK: u16 = 10;
    pub const STATE: u16 = 11;
    pub const QUEUE_FILL: u16 = 12;
    pub const INODE: u16 = 13;
    pub const COOKIE: u16 = 14;
    pub const NODE: u16 = 15;
    pub const RECV_Q: u16 = 16;
    pub const SEND_Q: u16 = 17;
    pub const TYPE: u16 = 18;
    pub const IMPLICIT_OUT: u16 = 19;
    pub const IMPLICIT_IN: u16 = 20;
    pub const DGRAM_SENT: u16 = 21;
    pub const DGRAM_RECEIVED: u16 = 22;
    pub const DGRAM_DROPPED: u16 = 23;
}

/// `enum sci_stats_attr`.
pub mod stats_a {
    #[allow(dead_code)] // padding only, never decoded
    pub const PAD: u16 = 1;
    pub const SOCKETS: u16 = 2;
    pub const SCI_CONNECTIONS: u16 = 3;
    pub const FALLBACK: u16 = 4;
    pub const REFUSALS_REMEMBERED: u16 = 5;
    pub const IMPLICIT_CONNECTIONS: u16 = 6;
    pub const DGRAM_SENT: u16 = 7;
    pub const DGRAM_RECEIVED: u16 = 8;
    pub const DGRAM_DROPPED: u16 = 9;
    pub const READ_SOCK_LENT: u16 = 10;
    pub const READ_SOCK_COPIED: u16 = 11;
    pub const READ_SOCK_KEPT: u16 = 12;
    pub const DIRECT_RECEIVED: u16 = 13;
    pub const READ_SOCK_DEFERRED: u16 = 14;
}

/// `enum sci_fallback_attr`.
pub mod fallback_a {
    #[allow(dead_code)] // padding only, never decoded
    pub const PAD: u16 = 1;
    pub const REASON: u16 = 2;
    pub const COUNT: u16 = 3;
}

/// Parses the NLAs of a buffer with `T`'s parser.
pub fn parse_nlas<T>(buf: &[u8]) -> Result<Vec<T>, DecodeError>
where
    T: for<'a> Parseable<NlaBuffer<&'a [u8]>>,
{
    NlasIterator::new(buf)
        .map(|nla| nla.and_then(|nla| T::parse(&nla)))
        .collect()
}

fn emit_nested<T: Nla>(attrs: &[T], buffer: &mut [u8]) {
    attrs.emit(buffer)
}

fn nested_len<T: Nla>(attrs: &[T]) -> usize {
    attrs.buffer_len()
}

fn ipv4(payload: &[u8]) -> Result<Ipv4Addr, DecodeError> {
    let b: [u8; 4] = payload
        .try_into()
        .map_err(|_| DecodeError::from(format!("IPv4 address of {} bytes", payload.len())))?;
    Ok(Ipv4Addr::from(b))
}

fn ipv6(payload: &[u8]) -> Result<Ipv6Addr, DecodeError> {
    let b: [u8; 16] = payload
        .try_into()
        .map_err(|_| DecodeError::from(format!("IPv6 address of {} bytes", payload.len())))?;
    Ok(Ipv6Addr::from(b))
}

/// A node map entry's attributes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeAttr {
    Addr(IpAddr),
    Id(u32),
    Source(u8),
    Other(DefaultNla),
}

impl Nla for NodeAttr {
    fn value_len(&self) -> usize {
        match self {
            NodeAttr::Addr(IpAddr::V4(_)) => 4,
            NodeAttr::Addr(IpAddr::V6(_)) => 16,
            NodeAttr::Id(_) => 4,
            NodeAttr::Source(_) => 1,
            NodeAttr::Other(nla) => nla.value_len(),
        }
    }

    fn kind(&self) -> u16 {
        match self {
            NodeAttr::Addr(IpAddr::V4(_)) => node_a::ADDR4,
            NodeAttr::Addr(IpAddr::V6(_)) => node_a::ADDR6,
            NodeAttr::Id(_) => node_a::ID,
            NodeAttr::Source(_) => node_a::SOURCE,
            NodeAttr::Other(nla) => nla.kind(),
        }
    }

    fn emit_value(&self, buffer: &mut [u8]) {
        match self {
            NodeAttr::Addr(IpAddr::V4(a)) => buffer[..4].copy_from_slice(&a.octets()),
            NodeAttr::Addr(IpAddr::V6(a)) => buffer[..16].copy_from_slice(&a.octets()),
            NodeAttr::Id(id) => emit_u32(buffer, *id).unwrap_or_default(),
            NodeAttr::Source(v) => buffer[0] = *v,
            NodeAttr::Other(nla) => nla.emit_value(buffer),
        }
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Parseable<NlaBuffer<&'a T>> for NodeAttr {
    fn parse(buf: &NlaBuffer<&'a T>) -> Result<Self, DecodeError> {
        let payload = buf.value();
        Ok(match buf.kind() {
            node_a::ADDR4 => NodeAttr::Addr(IpAddr::V4(ipv4(payload)?)),
            node_a::ADDR6 => NodeAttr::Addr(IpAddr::V6(ipv6(payload)?)),
            node_a::ID => NodeAttr::Id(parse_u32(payload)?),
            node_a::SOURCE => NodeAttr::Source(parse_u8(payload)?),
            _ => NodeAttr::Other(DefaultNla::parse(buf)?),
        })
    }
}

/// A port rule's attributes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortAttr {
    Action(u8),
    Low(u16),
    High(u16),
    Other(DefaultNla),
}

impl Nla for PortAttr {
    fn value_len(&self) -> usize {
        match self {
            PortAttr::Action(_) => 1,
            PortAttr::Low(_) | PortAttr::High(_) => 2,
            PortAttr::Other(nla) => nla.value_len(),
        }
    }

    fn kind(&self) -> u16 {
        match self {
            PortAttr::Action(_) => port_a::ACTION,
            PortAttr::Low(_) => port_a::LOW,
            PortAttr::High(_) => port_a::HIGH,
            PortAttr::Other(nla) => nla.kind(),
        }
    }

    fn emit_value(&self, buffer: &mut [u8]) {
        match self {
            PortAttr::Action(v) => buffer[0] = *v,
            PortAttr::Low(v) | PortAttr::High(v) => emit_u16(buffer, *v).unwrap_or_default(),
            PortAttr::Other(nla) => nla.emit_value(buffer),
        }
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Parseable<NlaBuffer<&'a T>> for PortAttr {
    fn parse(buf: &NlaBuffer<&'a T>) -> Result<Self, DecodeError> {
        let payload = buf.value();
        Ok(match buf.kind() {
            port_a::ACTION => PortAttr::Action(parse_u8(payload)?),
            port_a::LOW => PortAttr::Low(parse_u16(payload)?),
            port_a::HIGH => PortAttr::High(parse_u16(payload)?),
            _ => PortAttr::Other(DefaultNla::parse(buf)?),
        })
    }
}

/// A socket's attributes (replies only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SockAttr {
    Family(u16),
    LocalAddr(IpAddr),
    LocalPort(u16),
    PeerAddr(IpAddr),
    PeerPort(u16),
    Mode(u32),
    Fallback(u32),
    State(u8),
    QueueFill(u32),
    Inode(u64),
    Cookie(u64),
    Node(u32),
    RecvQ(u32),
    SendQ(u32),
    /// `SOCK_STREAM` or `SOCK_DGRAM`.
    Type(u16),
    /// A datagram socket's implicit connections (to destinations, from peers) and its
    /// datagrams sent, received and dropped over SCI.
    ImplicitOut(u32),
    ImplicitIn(u32),
    DgramSent(u64),
    DgramReceived(u64),
    DgramDropped(u64),
    Other(DefaultNla),
}

impl Nla for SockAttr {
    fn value_len(&self) -> usize {
        match self {
            SockAttr::Family(_) | SockAttr::LocalPort(_) | SockAttr::PeerPort(_) => 2,
            SockAttr::Type(_) => 2,
            SockAttr::LocalAddr(IpAddr::V4(_)) | SockAttr::PeerAddr(IpAddr::V4(_)) => 4,
            SockAttr::LocalAddr(IpAddr::V6(_)) | SockAttr::PeerAddr(IpAddr::V6(_)) => 16,
            SockAttr::Mode(_) | SockAttr::Fallback(_) | SockAttr::QueueFill(_) => 4,
            SockAttr::Node(_) | SockAttr::RecvQ(_) | SockAttr::SendQ(_) => 4,
            SockAttr::ImplicitOut(_) | SockAttr::ImplicitIn(_) => 4,
            SockAttr::State(_) => 1,
            SockAttr::Inode(_) | SockAttr::Cookie(_) => 8,
            SockAttr::DgramSent(_) | SockAttr::DgramReceived(_) | SockAttr::DgramDropped(_) => 8,
            SockAttr::Other(nla) => nla.value_len(),
        }
    }

    fn kind(&self) -> u16 {
        match self {
            SockAttr::Family(_) => sock_a::FAMILY,
            SockAttr::LocalAddr(IpAddr::V4(_)) => sock_a::LOCAL_ADDR4,
            SockAttr::LocalAddr(IpAddr::V6(_)) => sock_a::LOCAL_ADDR6,
            SockAttr::LocalPort(_) => sock_a::LOCAL_PORT,
            SockAttr::PeerAddr(IpAddr::V4(_)) => sock_a::PEER_ADDR4,
            SockAttr::PeerAddr(IpAddr::V6(_)) => sock_a::PEER_ADDR6,
            SockAttr::PeerPort(_) => sock_a::PEER_PORT,
            SockAttr::Mode(_) => sock_a::MODE,
            SockAttr::Fallback(_) => sock_a::FALLBACK,
            SockAttr::State(_) => sock_a::STATE,
            SockAttr::QueueFill(_) => sock_a::QUEUE_FILL,
            SockAttr::Inode(_) => sock_a::INODE,
            SockAttr::Cookie(_) => sock_a::COOKIE,
            SockAttr::Node(_) => sock_a::NODE,
            SockAttr::RecvQ(_) => sock_a::RECV_Q,
            SockAttr::SendQ(_) => sock_a::SEND_Q,
            SockAttr::Type(_) => sock_a::TYPE,
            SockAttr::ImplicitOut(_) => sock_a::IMPLICIT_OUT,
            SockAttr::ImplicitIn(_) => sock_a::IMPLICIT_IN,
            SockAttr::DgramSent(_) => sock_a::DGRAM_SENT,
            SockAttr::DgramReceived(_) => sock_a::DGRAM_RECEIVED,
            SockAttr::DgramDropped(_) => sock_a::DGRAM_DROPPED,
            SockAttr::Other(nla) => nla.kind(),
        }
    }

    fn emit_value(&self, buffer: &mut [u8]) {
        match self {
            SockAttr::Family(v)
            | SockAttr::LocalPort(v)
            | SockAttr::PeerPort(v)
            | SockAttr::Type(v) => emit_u16(buffer, *v).unwrap_or_default(),
            SockAttr::LocalAddr(IpAddr::V4(a)) | SockAttr::PeerAddr(IpAddr::V4(a)) => {
                buffer[..4].copy_from_slice(&a.octets())
            }
            SockAttr::LocalAddr(IpAddr::V6(a)) | SockAttr::PeerAddr(IpAddr::V6(a)) => {
                buffer[..16].copy_from_slice(&a.octets())
            }
            SockAttr::Mode(v) | SockAttr::Fallback(v) | SockAttr::QueueFill(v) => {
                emit_u32(buffer, *v).unwrap_or_default()
            }
            SockAttr::Node(v) | SockAttr::RecvQ(v) | SockAttr::SendQ(v) => {
                emit_u32(buffer, *v).unwrap_or_default()
            }
            SockAttr::ImplicitOut(v) | SockAttr::ImplicitIn(v) => {
                emit_u32(buffer, *v).unwrap_or_default()
            }
            SockAttr::State(v) => buffer[0] = *v,
            SockAttr::Inode(v) | SockAttr::Cookie(v) => emit_u64(buffer, *v).unwrap_or_default(),
            SockAttr::DgramSent(v) | SockAttr::DgramReceived(v) | SockAttr::DgramDropped(v) => {
                emit_u64(buffer, *v).unwrap_or_default()
            }
            SockAttr::Other(nla) => nla.emit_value(buffer),
        }
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Parseable<NlaBuffer<&'a T>> for SockAttr {
    fn parse(buf: &NlaBuffer<&'a T>) -> Result<Self, DecodeError> {
        let p = buf.value();
        Ok(match buf.kind() {
            sock_a::FAMILY => SockAttr::Family(parse_u16(p)?),
            sock_a::LOCAL_ADDR4 => SockAttr::LocalAddr(IpAddr::V4(ipv4(p)?)),
            sock_a::LOCAL_ADDR6 => SockAttr::LocalAddr(IpAddr::V6(ipv6(p)?)),
            sock_a::LOCAL_PORT => SockAttr::LocalPort(parse_u16(p)?),
            sock_a::PEER_ADDR4 => SockAttr::PeerAddr(IpAddr::V4(ipv4(p)?)),
            sock_a::PEER_ADDR6 => SockAttr::PeerAddr(IpAddr::V6(ipv6(p)?)),
            sock_a::PEER_PORT => SockAttr::PeerPort(parse_u16(p)?),
            sock_a::MODE => SockAttr::Mode(parse_u32(p)?),
            sock_a::FALLBACK => SockAttr::Fallback(parse_u32(p)?),
            sock_a::STATE => SockAttr::State(parse_u8(p)?),
            sock_a::QUEUE_FILL => SockAttr::QueueFill(parse_u32(p)?),
            sock_a::INODE => SockAttr::Inode(parse_u64(p)?),
            sock_a::COOKIE => SockAttr::Cookie(parse_u64(p)?),
            sock_a::NODE => SockAttr::Node(parse_u32(p)?),
            sock_a::RECV_Q => SockAttr::RecvQ(parse_u32(p)?),
            sock_a::SEND_Q => SockAttr::SendQ(parse_u32(p)?),
            sock_a::TYPE => SockAttr::Type(parse_u16(p)?),
            sock_a::IMPLICIT_OUT => SockAttr::ImplicitOut(parse_u32(p)?),
            sock_a::IMPLICIT_IN => SockAttr::ImplicitIn(parse_u32(p)?),
            sock_a::DGRAM_SENT => SockAttr::DgramSent(parse_u64(p)?),
            sock_a::DGRAM_RECEIVED => SockAttr::DgramReceived(parse_u64(p)?),
            sock_a::DGRAM_DROPPED => SockAttr::DgramDropped(parse_u64(p)?),
            _ => SockAttr::Other(DefaultNla::parse(buf)?),
        })
    }
}

/// One fallback counter's attributes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FallbackAttr {
    Reason(u32),
    Count(u64),
    Other(DefaultNla),
}

impl Nla for FallbackAttr {
    fn value_len(&self) -> usize {
        match self {
            FallbackAttr::Reason(_) => 4,
            FallbackAttr::Count(_) => 8,
            FallbackAttr::Other(nla) => nla.value_len(),
        }
    }

    fn kind(&self) -> u16 {
        match self {
            FallbackAttr::Reason(_) => fallback_a::REASON,
            FallbackAttr::Count(_) => fallback_a::COUNT,
            FallbackAttr::Other(nla) => nla.kind(),
        }
    }

    fn emit_value(&self, buffer: &mut [u8]) {
        match self {
            FallbackAttr::Reason(v) => emit_u32(buffer, *v).unwrap_or_default(),
            FallbackAttr::Count(v) => emit_u64(buffer, *v).unwrap_or_default(),
            FallbackAttr::Other(nla) => nla.emit_value(buffer),
        }
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Parseable<NlaBuffer<&'a T>> for FallbackAttr {
    fn parse(buf: &NlaBuffer<&'a T>) -> Result<Self, DecodeError> {
        let p = buf.value();
        Ok(match buf.kind() {
            fallback_a::REASON => FallbackAttr::Reason(parse_u32(p)?),
            fallback_a::COUNT => FallbackAttr::Count(parse_u64(p)?),
            _ => FallbackAttr::Other(DefaultNla::parse(buf)?),
        })
    }
}

/// The counters' attributes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StatsAttr {
    Sockets(u64),
    SciConnections(u64),
    Fallback(Vec<FallbackAttr>),
    RefusalsRemembered(u64),
    /// Datagram sockets' implicit connections that came up, and datagrams sent,
    /// received and dropped over SCI.
    ImplicitConnections(u64),
    DgramSent(u64),
    DgramReceived(u64),
    DgramDropped(u64),
    /// Bytes kernel readers (`read_sock`) used in place and copied, and the times they
    /// kept a lent buffer.
    ReadSockLent(u64),
    ReadSockCopied(u64),
    ReadSockKept(u64),
    /// Bytes writers copied straight into readers' posted buffers (loopback fabric).
    DirectReceived(u64),
    /// Reads kernel readers left to the socket's work item.
    ReadSockDeferred(u64),
    Other(DefaultNla),
}

impl Nla for StatsAttr {
    fn value_len(&self) -> usize {
        match self {
            StatsAttr::Sockets(_)
            | StatsAttr::SciConnections(_)
            | StatsAttr::RefusalsRemembered(_)
            | StatsAttr::ImplicitConnections(_)
            | StatsAttr::DgramSent(_)
            | StatsAttr::DgramReceived(_)
            | StatsAttr::DgramDropped(_)
            | StatsAttr::ReadSockLent(_)
            | StatsAttr::ReadSockCopied(_)
            | StatsAttr::ReadSockKept(_)
            | StatsAttr::DirectReceived(_)
            | StatsAttr::ReadSockDeferred(_) => 8,
            StatsAttr::Fallback(attrs) => nested_len(attrs),
            StatsAttr::Other(nla) => nla.value_len(),
        }
    }

    fn kind(&self) -> u16 {
        match self {
            StatsAttr::Sockets(_) => stats_a::SOCKETS,
            StatsAttr::SciConnections(_) => stats_a::SCI_CONNECTIONS,
            StatsAttr::RefusalsRemembered(_) => stats_a::REFUSALS_REMEMBERED,
            StatsAttr::ImplicitConnections(_) => stats_a::IMPLICIT_CONNECTIONS,
            StatsAttr::DgramSent(_) => stats_a::DGRAM_SENT,
            StatsAttr::DgramReceived(_) => stats_a::DGRAM_RECEIVED,
            StatsAttr::DgramDropped(_) => stats_a::DGRAM_DROPPED,
            StatsAttr::ReadSockLent(_) => stats_a::READ_SOCK_LENT,
            StatsAttr::ReadSockCopied(_) => stats_a::READ_SOCK_COPIED,
            StatsAttr::ReadSockKept(_) => stats_a::READ_SOCK_KEPT,
            StatsAttr::DirectReceived(_) => stats_a::DIRECT_RECEIVED,
            StatsAttr::ReadSockDeferred(_) => stats_a::READ_SOCK_DEFERRED,
            StatsAttr::Fallback(_) => stats_a::FALLBACK | NLA_F_NESTED,
            StatsAttr::Other(nla) => nla.kind(),
        }
    }

    fn emit_value(&self, buffer: &mut [u8]) {
        match self {
            StatsAttr::Sockets(v)
            | StatsAttr::SciConnections(v)
            | StatsAttr::RefusalsRemembered(v)
            | StatsAttr::ImplicitConnections(v)
            | StatsAttr::DgramSent(v)
            | StatsAttr::DgramReceived(v)
            | StatsAttr::DgramDropped(v)
            | StatsAttr::ReadSockLent(v)
            | StatsAttr::ReadSockCopied(v)
            | StatsAttr::ReadSockKept(v)
            | StatsAttr::DirectReceived(v)
            | StatsAttr::ReadSockDeferred(v) => emit_u64(buffer, *v).unwrap_or_default(),
            StatsAttr::Fallback(attrs) => emit_nested(attrs, buffer),
            StatsAttr::Other(nla) => nla.emit_value(buffer),
        }
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Parseable<NlaBuffer<&'a T>> for StatsAttr {
    fn parse(buf: &NlaBuffer<&'a T>) -> Result<Self, DecodeError> {
        let p = buf.value();
        Ok(match buf.kind() {
            stats_a::SOCKETS => StatsAttr::Sockets(parse_u64(p)?),
            stats_a::SCI_CONNECTIONS => StatsAttr::SciConnections(parse_u64(p)?),
            stats_a::REFUSALS_REMEMBERED => StatsAttr::RefusalsRemembered(parse_u64(p)?),
            stats_a::IMPLICIT_CONNECTIONS => StatsAttr::ImplicitConnections(parse_u64(p)?),
            stats_a::DGRAM_SENT => StatsAttr::DgramSent(parse_u64(p)?),
            stats_a::DGRAM_RECEIVED => StatsAttr::DgramReceived(parse_u64(p)?),
            stats_a::DGRAM_DROPPED => StatsAttr::DgramDropped(parse_u64(p)?),
            stats_a::READ_SOCK_LENT => StatsAttr::ReadSockLent(parse_u64(p)?),
            stats_a::READ_SOCK_COPIED => StatsAttr::ReadSockCopied(parse_u64(p)?),
            stats_a::READ_SOCK_KEPT => StatsAttr::ReadSockKept(parse_u64(p)?),
            stats_a::DIRECT_RECEIVED => StatsAttr::DirectReceived(parse_u64(p)?),
            stats_a::READ_SOCK_DEFERRED => StatsAttr::ReadSockDeferred(parse_u64(p)?),
            stats_a::FALLBACK => StatsAttr::Fallback(parse_nlas(p)?),
            _ => StatsAttr::Other(DefaultNla::parse(buf)?),
        })
    }
}

/// The family's top-level attributes: one nested object each, but `Publish`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SciAttr {
    Node(Vec<NodeAttr>),
    PortRule(Vec<PortAttr>),
    Sock(Vec<SockAttr>),
    Stats(Vec<StatsAttr>),
    /// Whether a network namespace publishes its addresses (0 or 1: `PUBLISH_SET`
    /// requests, `STATS_GET` replies).
    Publish(u8),
    Other(DefaultNla),
}

impl Nla for SciAttr {
    fn value_len(&self) -> usize {
        match self {
            SciAttr::Node(attrs) => nested_len(attrs),
            SciAttr::PortRule(attrs) => nested_len(attrs),
            SciAttr::Sock(attrs) => nested_len(attrs),
            SciAttr::Stats(attrs) => nested_len(attrs),
            SciAttr::Publish(_) => 1,
            SciAttr::Other(nla) => nla.value_len(),
        }
    }

    fn kind(&self) -> u16 {
        match self {
            SciAttr::Node(_) => a::NODE | NLA_F_NESTED,
            SciAttr::PortRule(_) => a::PORT_RULE | NLA_F_NESTED,
            SciAttr::Sock(_) => a::SOCK | NLA_F_NESTED,
            SciAttr::Stats(_) => a::STATS | NLA_F_NESTED,
            SciAttr::Publish(_) => a::PUBLISH,
            SciAttr::Other(nla) => nla.kind(),
        }
    }

    fn emit_value(&self, buffer: &mut [u8]) {
        match self {
            SciAttr::Node(attrs) => emit_nested(attrs, buffer),
            SciAttr::PortRule(attrs) => emit_nested(attrs, buffer),
            SciAttr::Sock(attrs) => emit_nested(attrs, buffer),
            SciAttr::Stats(attrs) => emit_nested(attrs, buffer),
            SciAttr::Publish(v) => buffer[0] = *v,
            SciAttr::Other(nla) => nla.emit_value(buffer),
        }
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Parseable<NlaBuffer<&'a T>> for SciAttr {
    fn parse(buf: &NlaBuffer<&'a T>) -> Result<Self, DecodeError> {
        let p = buf.value();
        Ok(match buf.kind() {
            a::NODE => SciAttr::Node(parse_nlas(p)?),
            a::PORT_RULE => SciAttr::PortRule(parse_nlas(p)?),
            a::SOCK => SciAttr::Sock(parse_nlas(p)?),
            a::STATS => SciAttr::Stats(parse_nlas(p)?),
            a::PUBLISH => SciAttr::Publish(parse_u8(p)?),
            _ => SciAttr::Other(DefaultNla::parse(buf)?),
        })
    }
}
