//! What the kernel reports, decoded from the netlink attributes (node map, port rules,
//! sockets, counters), and the attributes `scictl load` sends; `output.rs` prints it.

use crate::attrs::{self, FallbackAttr, NodeAttr, PortAttr, SciAttr, SockAttr, StatsAttr};
use crate::config::NodeEntry;
use sci_config::rules::{FallbackReason, PortAction, PortRule};
use std::net::{IpAddr, SocketAddr};

/// Where a node map entry the kernel reports comes from (`enum sci_node_source`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeSource {
    /// The administrator's node map (`scictl load`).
    File,
    /// Published by a node the fabric reaches; used only while no node map is loaded.
    Fabric,
}

/// A node map entry as `scictl nodes` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeRow {
    pub entry: NodeEntry,
    pub source: NodeSource,
}

/// Decodes a node map dump (an entry without a source is the file's, as older modules
/// report only those).
pub fn nodes(replies: &[Vec<SciAttr>]) -> Vec<NodeRow> {
    let mut out = Vec::new();
    for attrs in replies.iter().flatten() {
        if let SciAttr::Node(node) = attrs {
            let (mut addr, mut id, mut source) = (None, None, Some(NodeSource::File));
            for a in node {
                match a {
                    NodeAttr::Addr(v) => addr = Some(*v),
                    NodeAttr::Id(v) => id = Some(*v),
                    NodeAttr::Source(attrs::node_source::FILE) => source = Some(NodeSource::File),
                    NodeAttr::Source(attrs::node_source::FABRIC) => {
                        source = Some(NodeSource::Fabric)
                    }
                    NodeAttr::Source(_) => source = None,
                    NodeAttr::Other(_) => {}
                }
            }
            if let (Some(addr), Some(node), Some(source)) = (addr, id, source) {
                out.push(NodeRow {
                    entry: NodeEntry { addr, node },
                    source,
                });
            }
        }
    }
    out
}

/// Decodes a port rule dump.
pub fn ports(replies: &[Vec<SciAttr>]) -> Vec<PortRule> {
    let mut out = Vec::new();
    for attrs in replies.iter().flatten() {
        if let SciAttr::PortRule(rule) = attrs {
            let (mut action, mut low, mut high) = (None, None, None);
            for a in rule {
                match a {
                    PortAttr::Action(v) => action = PortAction::from_u8(*v),
                    PortAttr::Low(v) => low = Some(*v),
                    PortAttr::High(v) => high = Some(*v),
                    PortAttr::Other(_) => {}
                }
            }
            if let (Some(action), Some(low)) = (action, low) {
                if let Ok(rule) = PortRule::new(action, low, high.unwrap_or(low)) {
                    out.push(rule);
                }
            }
        }
    }
    out
}

/// The `sci_mode` values.
const MODE_SCI: u32 = 1;

/// One `AF_SCI` socket.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Sock {
    pub family: u16,
    pub local: Option<SocketAddr>,
    pub peer: Option<SocketAddr>,
    pub mode: u32,
    pub fallback: u32,
    pub state: u8,
    pub queue_fill: u32,
    pub inode: u64,
    pub cookie: u64,
    pub node: Option<u32>,
    /// Recv-Q and Send-Q as `ss` shows them.
    pub recv_q: u32,
    pub send_q: u32,
    /// `SOCK_STREAM` or `SOCK_DGRAM` (0: a module without datagram sockets, stream).
    pub sock_type: u16,
    /// A datagram socket's implicit SCI connections and datagrams over SCI.
    pub dgram: Option<DgramCounts>,
}

/// A datagram socket's implicit SCI connections (up to destinations, from peers) and
/// the datagrams it sent, received and dropped (at a full ring) over SCI.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct DgramCounts {
    pub implicit_out: u32,
    pub implicit_in: u32,
    pub sent: u64,
    pub received: u64,
    pub dropped: u64,
}

/// `SOCK_DGRAM`.
const SOCK_DGRAM: u16 = 2;

impl Sock {
    /// A datagram socket (`scictl sockets --udp`).
    pub fn is_dgram(&self) -> bool {
        self.sock_type == SOCK_DGRAM
    }
}

/// Decodes a socket dump.
pub fn sockets(replies: &[Vec<SciAttr>]) -> Vec<Sock> {
    let mut out = Vec::new();
    for attrs in replies.iter().flatten() {
        if let SciAttr::Sock(attrs) = attrs {
            let mut s = Sock::default();
            let (mut laddr, mut lport, mut paddr, mut pport) = (None, 0, None, 0);
            for a in attrs {
                match a {
                    SockAttr::Family(v) => s.family = *v,
                    SockAttr::LocalAddr(v) => laddr = Some(*v),
                    SockAttr::LocalPort(v) => lport = *v,
                    SockAttr::PeerAddr(v) => paddr = Some(*v),
                    SockAttr::PeerPort(v) => pport = *v,
                    SockAttr::Mode(v) => s.mode = *v,
                    SockAttr::Fallback(v) => s.fallback = *v,
                    SockAttr::State(v) => s.state = *v,
                    SockAttr::Type(v) => s.sock_type = *v,
                    SockAttr::QueueFill(v) => s.queue_fill = *v,
                    SockAttr::Inode(v) => s.inode = *v,
                    SockAttr::Cookie(v) => s.cookie = *v,
                    SockAttr::Node(v) => s.node = Some(*v),
                    SockAttr::RecvQ(v) => s.recv_q = *v,
                    SockAttr::SendQ(v) => s.send_q = *v,
                    SockAttr::ImplicitOut(v) => {
                        s.dgram.get_or_insert_with(Default::default).implicit_out = *v
                    }
                    SockAttr::ImplicitIn(v) => {
                        s.dgram.get_or_insert_with(Default::default).implicit_in = *v
                    }
                    SockAttr::DgramSent(v) => {
                        s.dgram.get_or_insert_with(Default::default).sent = *v
                    }
                    SockAttr::DgramReceived(v) => {
                        s.dgram.get_or_insert_with(Default::default).received = *v
                    }
                    SockAttr::DgramDropped(v) => {
                        s.dgram.get_or_insert_with(Default::default).dropped = *v
                    }
                    SockAttr::Other(_) => {}
                }
            }
            s.local = laddr.map(|a| SocketAddr::new(a, lport));
            s.peer = paddr.map(|a| SocketAddr::new(a, pport));
            out.push(s);
        }
    }
    out
}

/// The counters of the caller's network namespace.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Stats {
    pub sockets: u64,
    pub sci_connections: u64,
    /// (reason, count), in the kernel's order.
    pub fallbacks: Vec<(u32, u64)>,
    /// Of the peer-rejected fallbacks, those that asked no peer (a remembered refusal).
    pub refusals_remembered: u64,
    /// Datagram sockets' implicit connections that came up; datagrams sent, received
    /// and dropped (a full ring, at the sender) over SCI.
    pub implicit_connections: u64,
    pub dgram_sent: u64,
    pub dgram_received: u64,
    pub dgram_dropped: u64,
    /// Bytes kernel readers' (`read_sock`) actors used in place (the ring's own pages)
    /// and copied into fresh socket buffers first; times a kernel reader kept a lent
    /// buffer after its actor returned.
    pub read_sock_lent: u64,
    pub read_sock_copied: u64,
    pub read_sock_kept: u64,
    /// Bytes writers copied straight into readers' posted buffers (one copy, loopback
    /// fabric).
    pub direct_received: u64,
    pub read_sock_deferred: u64,
    /// Whether the namespace publishes its addresses in the fabric's node table (always
    /// in the initial namespace); `None` from a module that does not say.
    pub publishes: Option<bool>,
}

/// Decodes a `SCI_CMD_STATS_GET` reply.
pub fn stats(attrs: &[SciAttr]) -> Stats {
    let mut out = Stats::default();
    for attr in attrs {
        let attrs = match attr {
            SciAttr::Stats(attrs) => attrs,
            SciAttr::Publish(v) => {
                out.publishes = Some(*v != 0);
                continue;
            }
            _ => continue,
        };
        for a in attrs {
            match a {
                StatsAttr::Sockets(v) => out.sockets = *v,
                StatsAttr::SciConnections(v) => out.sci_connections = *v,
                StatsAttr::RefusalsRemembered(v) => out.refusals_remembered = *v,
                StatsAttr::ImplicitConnections(v) => out.implicit_connections = *v,
                StatsAttr::DgramSent(v) => out.dgram_sent = *v,
                StatsAttr::DgramReceived(v) => out.dgram_received = *v,
                StatsAttr::DgramDropped(v) => out.dgram_dropped = *v,
                StatsAttr::ReadSockLent(v) => out.read_sock_lent = *v,
                StatsAttr::ReadSockCopied(v) => out.read_sock_copied = *v,
                StatsAttr::ReadSockKept(v) => out.read_sock_kept = *v,
                StatsAttr::DirectReceived(v) => out.direct_received = *v,
                StatsAttr::ReadSockDeferred(v) => out.read_sock_deferred = *v,
                StatsAttr::Fallback(f) => {
                    let reason = f.iter().find_map(|a| match a {
                        FallbackAttr::Reason(r) => Some(*r),
                        _ => None,
                    });
                    let count = f.iter().find_map(|a| match a {
                        FallbackAttr::Count(c) => Some(*c),
                        _ => None,
                    });
                    if let (Some(r), Some(c)) = (reason, count) {
                        out.fallbacks.push((r, c));
                    }
                }
                StatsAttr::Other(_) => {}
            }
        }
    }
    out
}

/// A fallback reason's name (its number if unknown to this scictl).
pub fn reason_name(reason: u32) -> String {
    FallbackReason::from_u32(reason).map_or_else(|| reason.to_string(), |r| r.name().to_owned())
}

/// A TCP state's name, as `ss` prints it (`linux/tcp.h` numbers).
pub fn state_name(state: u8) -> &'static str {
    match state {
        1 => "ESTAB",
        2 => "SYN-SENT",
        3 => "SYN-RECV",
        4 => "FIN-WAIT-1",
        5 => "FIN-WAIT-2",
        6 => "TIME-WAIT",
        7 => "UNCONN",
        8 => "CLOSE-WAIT",
        9 => "LAST-ACK",
        10 => "LISTEN",
        11 => "CLOSING",
        12 => "NEW-SYN-RECV",
        _ => "UNKNOWN",
    }
}

/// A socket's data path, as `scictl sockets` prints it.
pub fn mode_name(mode: u32) -> &'static str {
    if mode == MODE_SCI {
        "sci"
    } else {
        "native"
    }
}

/// The address a node map entry is sent with.
pub fn node_attrs(entry: &NodeEntry) -> Vec<NodeAttr> {
    let addr = match entry.addr {
        IpAddr::V6(a) => a.to_ipv4_mapped().map_or(IpAddr::V6(a), IpAddr::V4),
        v4 => v4,
    };
    vec![NodeAttr::Addr(addr), NodeAttr::Id(entry.node)]
}

/// The attributes a port rule is sent with.
pub fn port_attrs(rule: &PortRule) -> Vec<PortAttr> {
    vec![
        PortAttr::Action(rule.action().as_u8()),
        PortAttr::Low(rule.low()),
        PortAttr::High(rule.high()),
    ]
}

#[cfg(test)]
// Public for the sample sockets, which the tests in `output.rs` print.
pub mod tests {
    use super::*;
    use crate::attrs::{self, parse_nlas};
    use crate::output::{
        dgram_sockets_text, publish_json, publish_text, sockets_json, stats_json, stats_text,
    };
    use netlink_packet_core::Emitable;
    use serde_json::json;

    /// Emits attributes as the kernel would and parses them back.
    fn round_trip(attrs: Vec<SciAttr>) -> Vec<SciAttr> {
        let mut buf = vec![0u8; attrs.as_slice().buffer_len()];
        attrs.as_slice().emit(&mut buf);
        parse_nlas(&buf).unwrap()
    }

    /// Sockets as the kernel reports them (the first one in `socket_dump_decodes`).
    pub fn sample_socks() -> Vec<Sock> {
        vec![
            Sock {
                family: 2,
                local: Some("127.0.0.1:40000".parse().unwrap()),
                peer: Some("127.0.0.1:22".parse().unwrap()),
                mode: 0,
                fallback: 3,
                state: 1,
                queue_fill: 0,
                inode: 1234,
                cookie: 99,
                node: None,
                recv_q: 0,
                send_q: 0,
                sock_type: 1,
                dgram: None,
            },
            Sock {
                family: 10,
                local: Some("[::1]:8080".parse().unwrap()),
                peer: None,
                mode: 0,
                fallback: 1,
                state: 10,
                queue_fill: 0,
                inode: 5,
                cookie: 7,
                node: None,
                recv_q: 2,
                send_q: 128,
                sock_type: 1,
                dgram: None,
            },
            Sock {
                family: 2,
                local: Some("127.0.0.1:5000".parse().unwrap()),
                peer: Some("127.0.0.1:5001".parse().unwrap()),
                mode: 1,
                fallback: 0,
                state: 1,
                queue_fill: 4096,
                inode: 6,
                cookie: 8,
                node: Some(0),
                recv_q: 4096,
                send_q: 70000,
                sock_type: 1,
                dgram: None,
            },
        ]
    }

    #[test]
    fn socket_dump_decodes() {
        let replies = vec![round_trip(vec![SciAttr::Sock(vec![
            SockAttr::Family(2),
            SockAttr::LocalAddr("127.0.0.1".parse().unwrap()),
            SockAttr::LocalPort(40000),
            SockAttr::PeerAddr("127.0.0.1".parse().unwrap()),
            SockAttr::PeerPort(22),
            SockAttr::Mode(0),
            SockAttr::Fallback(3),
            SockAttr::State(1),
            SockAttr::QueueFill(0),
            SockAttr::Inode(1234),
            SockAttr::Cookie(99),
            SockAttr::Type(1),
        ])])];
        assert_eq!(sockets(&replies), sample_socks()[..1]);
        assert!(!sockets(&replies)[0].is_dgram());
        let dgram = vec![round_trip(vec![SciAttr::Sock(vec![
            SockAttr::Family(2),
            SockAttr::LocalAddr("0.0.0.0".parse().unwrap()),
            SockAttr::LocalPort(5353),
            SockAttr::Mode(1),
            SockAttr::State(7),
            SockAttr::Type(2),
            SockAttr::Inode(9),
            SockAttr::ImplicitOut(1),
            SockAttr::ImplicitIn(2),
            SockAttr::DgramSent(10),
            SockAttr::DgramReceived(20),
            SockAttr::DgramDropped(3),
        ])])];
        let d = sockets(&dgram);
        assert!(d[0].is_dgram());
        assert_eq!(
            d[0].dgram,
            Some(DgramCounts {
                implicit_out: 1,
                implicit_in: 2,
                sent: 10,
                received: 20,
                dropped: 3
            })
        );
        let text = dgram_sockets_text(&d);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "STATE   RECV-Q  SEND-Q  LOCAL         PEER  MODE  REASON  OUT/IN  SENT  RECEIVED  DROPPED  INODE",
                "UNCONN  0       0       0.0.0.0:5353  *:*   sci   none    1/2     10    20        3        9"
            ]
        );
        let v = sockets_json(&d);
        assert_eq!(v[0]["type"], "dgram");
        assert_eq!(v[0]["implicit"], json!({"out": 1, "in": 2}));
        assert_eq!(
            v[0]["datagrams"],
            json!({"sent": 10, "received": 20, "dropped": 3})
        );
        // A stream socket has neither.
        assert_eq!(sockets_json(&sample_socks())[0].get("implicit"), None);
    }

    #[test]
    fn nodes_and_ports_round_trip_through_attributes() {
        let entries = crate::config::parse_nodes("n", "10.0.0.1 1\nfd00::2 2\n").unwrap();
        let mut attrs: Vec<SciAttr> = entries
            .iter()
            .map(|e| SciAttr::Node(node_attrs(e)))
            .collect();
        let mut published = node_attrs(&entries[0]);
        published.push(NodeAttr::Source(attrs::node_source::FABRIC));
        attrs.push(SciAttr::Node(published));
        let mut unknown = node_attrs(&entries[1]);
        unknown.push(NodeAttr::Source(7));
        attrs.push(SciAttr::Node(unknown));
        let rows = nodes(&[round_trip(attrs)]);
        let file = |e: &NodeEntry| NodeRow {
            entry: *e,
            source: NodeSource::File,
        };
        assert_eq!(
            rows,
            vec![
                file(&entries[0]),
                file(&entries[1]),
                NodeRow {
                    entry: entries[0],
                    source: NodeSource::Fabric
                }
            ],
            "no source is the file's; an unknown source is left out"
        );

        let rules = crate::config::parse_ports("p", "include 5000-5999\nexclude 22\n").unwrap();
        let attrs: Vec<SciAttr> = rules
            .iter()
            .map(|r| SciAttr::PortRule(port_attrs(r)))
            .collect();
        assert_eq!(ports(&[round_trip(attrs)]), rules);
    }

    #[test]
    fn nested_attributes_carry_the_nested_flag() {
        let attr = SciAttr::Node(vec![NodeAttr::Id(1)]);
        let mut buf = vec![0u8; attr.buffer_len()];
        attr.emit(&mut buf);
        let kind = u16::from_ne_bytes([buf[2], buf[3]]);
        assert_eq!(kind, attrs::a::NODE | netlink_packet_core::NLA_F_NESTED);
    }

    #[test]
    fn stats_decode_and_print() {
        let reply = round_trip(vec![SciAttr::Stats(vec![
            StatsAttr::Sockets(12),
            StatsAttr::SciConnections(2),
            StatsAttr::Fallback(vec![FallbackAttr::Reason(1), FallbackAttr::Count(3)]),
            StatsAttr::Fallback(vec![FallbackAttr::Reason(3), FallbackAttr::Count(1)]),
            StatsAttr::Fallback(vec![FallbackAttr::Reason(42), FallbackAttr::Count(5)]),
            StatsAttr::RefusalsRemembered(7),
            StatsAttr::ImplicitConnections(4),
            StatsAttr::DgramSent(100),
            StatsAttr::DgramReceived(90),
            StatsAttr::DgramDropped(2),
            StatsAttr::ReadSockLent(65536),
            StatsAttr::ReadSockCopied(4096),
            StatsAttr::ReadSockKept(3),
            StatsAttr::DirectReceived(1 << 20),
            StatsAttr::ReadSockDeferred(5),
        ])]);
        let s = stats(&reply);
        assert_eq!(
            s,
            Stats {
                sockets: 12,
                sci_connections: 2,
                fallbacks: vec![(1, 3), (3, 1), (42, 5)],
                refusals_remembered: 7,
                implicit_connections: 4,
                dgram_sent: 100,
                dgram_received: 90,
                dgram_dropped: 2,
                read_sock_lent: 65536,
                read_sock_copied: 4096,
                read_sock_kept: 3,
                direct_received: 1 << 20,
                read_sock_deferred: 5,
                publishes: None,
            }
        );
        assert_eq!(
            stats_text(&s),
            "sockets created:  12\nsci connections:  2\nfallbacks:\n  no-fabric      3\n  port-excluded  1\n  42             5\npeer-rejected at once (a remembered refusal, no peer asked):  7\nimplicit connections (datagram sockets):  4\ndatagrams over SCI:  sent 100  received 90  dropped 2\nread_sock:  65536 bytes in place, 4096 copied, 3 kept buffers, 5 reads deferred\nfilled directly (one copy):  1048576 bytes\n"
        );
        assert_eq!(
            stats_json(&s),
            json!({"sockets": 12, "sci_connections": 2,
                   "fallbacks": {"no-fabric": 3, "port-excluded": 1, "42": 5},
                   "refusals_remembered": 7, "implicit_connections": 4,
                   "datagrams": {"sent": 100, "received": 90, "dropped": 2},
                   "read_sock": {"lent": 65536, "copied": 4096, "kept": 3, "deferred": 5},
                   "direct_received": 1048576})
        );
    }

    #[test]
    fn stats_say_whether_the_namespace_publishes() {
        let counters = || SciAttr::Stats(vec![StatsAttr::Sockets(1)]);
        // After the counters or before them, as the kernel may put it.
        let on = stats(&round_trip(vec![counters(), SciAttr::Publish(1)]));
        let off = stats(&round_trip(vec![SciAttr::Publish(0), counters()]));
        assert_eq!((on.sockets, on.publishes), (1, Some(true)));
        assert_eq!((off.sockets, off.publishes), (1, Some(false)));
        assert!(stats_text(&on).ends_with("\npublishes addresses:  yes\n"));
        assert!(stats_text(&off).ends_with("\npublishes addresses:  no\n"));
        assert_eq!(stats_json(&on)["publishes"], true);
        assert_eq!(stats_json(&off)["publishes"], false);
        // An older module says nothing, and so does scictl.
        let old = stats(&round_trip(vec![counters()]));
        assert_eq!(old.publishes, None);
        assert!(!stats_text(&old).contains("publishes"));
        assert_eq!(stats_json(&old).get("publishes"), None);

        assert_eq!(
            publish_text(true),
            "this network namespace publishes its addresses\n"
        );
        assert_eq!(
            publish_text(false),
            "this network namespace does not publish its addresses \
             (scictl publish on, with CAP_NET_ADMIN, makes it)\n"
        );
        assert_eq!(publish_json(false), json!({"publishes": false}));
    }

    #[test]
    fn the_publish_attribute_is_a_plain_u8() {
        let attr = SciAttr::Publish(1);
        let mut buf = vec![0u8; attr.buffer_len()];
        attr.emit(&mut buf);
        // Length 5 (header and one byte), kind 5 without the nested flag, the value,
        // padding to 4 bytes.
        let mut want = Vec::new();
        want.extend_from_slice(&5u16.to_ne_bytes());
        want.extend_from_slice(&attrs::a::PUBLISH.to_ne_bytes());
        want.extend_from_slice(&[1, 0, 0, 0]);
        assert_eq!(buf, want);
        assert_eq!(parse_nlas::<SciAttr>(&buf).unwrap(), vec![attr]);
    }

    #[test]
    fn mapped_ipv6_nodes_are_sent_as_ipv4() {
        let e = NodeEntry {
            addr: "::ffff:10.0.0.1".parse().unwrap(),
            node: 4,
        };
        assert_eq!(
            node_attrs(&e)[0],
            NodeAttr::Addr("10.0.0.1".parse().unwrap())
        );
    }
}
