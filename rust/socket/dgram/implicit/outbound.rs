// SPDX-License-Identifier: GPL-2.0

//! The outbound side of a datagram socket's implicit connections: one per destination
//! (address and port), started by the first datagram to it (which goes over UDP, as
//! every one does until the peer's node answers), then carrying its datagrams one record
//! each; a destination that does not answer in time, or refuses, is given up and stays
//! UDP's for a while (`control/refusals.rs`).

use super::{end, now_ms, Endpoint};
use crate::config::rules::{Decision, Ip};
use crate::conn::addr::{effective_dest, is_link_local, to_wire, Addr};
use crate::conn::{Conn, Phase, Sent};
use crate::control::{Destination, Plane};
use crate::fabric::NodeId;
use crate::proto::frame::Frame;
use crate::proto::record::MAX_PAYLOAD;
use crate::socket::native::Native;
use crate::socket::sk::OwnSk;
use crate::socket::stack::Stack;
use crate::sys::net::{local_ifindex, Msg};
use crate::sys::params::{dgram_answer_ms_for_test, sci_loopback_enabled};
use crate::sys::percpu_counters::HotCounter;
use core::ffi::c_int;
use core::sync::atomic::Ordering;
use kernel::prelude::*;
use kernel::sync::Arc;

/// The longest datagram to an IPv4 destination: 65535 less the IPv4 and UDP headers.
const MAX_PAYLOAD_V4: usize = 65507;

/// The longest datagram UDP sends to an IPv4 (`v4`) or IPv6 destination (longer ones are
/// `EMSGSIZE`).
pub(crate) const fn udp_max_payload(v4: bool) -> usize {
    if v4 {
        MAX_PAYLOAD_V4
    } else {
        MAX_PAYLOAD
    }
}
/// How long an outbound connection waits for the peer node's answer (ms) before the
/// destination is given up for now (its datagrams went over UDP meanwhile), and how long
/// from its start the answered connection follows those datagrams at most.
const ANSWER_MS: i64 = 1000;

/// [`ANSWER_MS`], or what the `test_dgram_answer_ms` module parameter says instead.
pub(super) fn answer_ms() -> i64 {
    dgram_answer_ms_for_test().map_or(ANSWER_MS, i64::from)
}
/// Datagrams sent over UDP to a destination while its connection came up, past which the
/// first one over SCI no longer waits for them to leave this machine: a sender that sent
/// that many is flooding, and may keep a busy device's queue full for long.
const FOLLOW_MAX: u32 = 64;

/// An implicit connection to one destination.
pub(super) struct Outbound {
    /// The destination as the sender names it (canonical address, port).
    dest: (Ip, u16),
    /// The destination as the request named it (`0.0.0.0` there is a loopback address), as
    /// a refusal is remembered.
    what: Destination,
    pub(super) conn: Arc<Conn>,
    /// Taken by a datagram: answered by the peer's node, and no longer following the
    /// datagrams sent over UDP meanwhile (else still starting, until `since_ms +
    /// answer_ms()`).
    pub(super) up: bool,
    /// When it was set up, then when it last carried a datagram (ms).
    pub(super) since_ms: i64,
    /// Datagrams that went to the destination over UDP while it came up.
    over_udp: u32,
}

impl Outbound {
    /// Whether a datagram to the destination, its connection answered, still goes over
    /// UDP after those sent there while it came up: while the socket has datagrams in this
    /// machine (queued for the device or not yet released by it), which the first over
    /// SCI would overtake on their way out, and a receiver that takes a stream's first
    /// packet as its start (as RTP's jitter buffers do) would then drop the ones before
    /// it. Not for a flood ([`FOLLOW_MAX`]), nor past `answer_ms()` from the start.
    fn follows_udp(&self, now: i64, native: &Native) -> bool {
        self.over_udp < FOLLOW_MAX && now - self.since_ms < answer_ms() && native.sends_in_flight()
    }

    /// What fdinfo says of it while it is still starting (`None` once up).
    pub(super) fn starting(&self) -> Option<Starting> {
        (!self.up).then(|| Starting {
            node: self.what.node,
            port: self.dest.1,
            answered: self.conn.phase() == Phase::Established,
            over_udp: self.over_udp,
        })
    }
}

/// An outbound implicit connection not yet taken by a datagram, as fdinfo names it
/// (`sci-implicit-starting:`): where it goes, whether the peer's node answered, and how
/// many datagrams went to its destination over UDP meanwhile. An answered one that is
/// still starting follows those datagrams (`Outbound::follows_udp`).
pub(crate) struct Starting {
    node: NodeId,
    port: u16,
    answered: bool,
    over_udp: u32,
}

impl core::fmt::Display for Starting {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let state = if self.answered { "answered" } else { "waiting" };
        writeln!(
            f,
            "sci-implicit-starting:\tnode {} port {} {state} over-udp {}",
            self.node, self.port, self.over_udp
        )
    }
}

/// A datagram to send over an implicit connection: where to, and what its sender's UDP
/// would have put in its IP header.
#[derive(Clone, Copy)]
pub(crate) struct Outgoing {
    /// The destination (address, port).
    pub(crate) dest: (Ip, u16),
    /// The source its packet information asks for, if any.
    pub(crate) source: Option<SourceAsk>,
    /// Its traffic class (`IP_TOS`, `IPV6_TCLASS`), which the receiver may ask for.
    pub(crate) tos: u8,
}

/// The source a datagram to send asks for with `IP_PKTINFO`/`IPV6_PKTINFO`.
#[derive(Clone, Copy)]
pub(crate) struct SourceAsk {
    /// The address (unspecified: any).
    pub(crate) ip: Ip,
    /// The interface (0: any).
    pub(crate) ifindex: i32,
}

impl Endpoint {
    /// Sends one datagram of `len` bytes of `msg` to `out.dest` over its implicit
    /// connection, if it has one that is up: `None` sends it over UDP (no connection yet,
    /// or none possible; the first datagram to a destination of the fabric also starts
    /// one), with nothing consumed from `msg`.
    pub(crate) fn send(
        &self,
        stack: &Stack,
        own: &OwnSk,
        out: &Outgoing,
        msg: Msg,
        len: usize,
    ) -> Option<Result<c_int>> {
        let (dest, source) = ((out.dest.0.canonical(), out.dest.1), out.source);
        // UDP's limits: an IPv4 datagram carries at most 65507 bytes (UDP refuses more
        // with EMSGSIZE, and so it goes there).
        let max = udp_max_payload(matches!(dest.0, Ip::V4(_)));
        if len > max || !sci_loopback_enabled() {
            return None;
        }
        let plane = stack.plane.plane();
        let now = now_ms();
        let mut g = self.conns.lock();
        if g.closed {
            return None;
        }
        let Some(i) = g
            .out
            .iter()
            .position(|o| o.as_ref().is_some_and(|o| o.dest == dest))
        else {
            let free = g.out.iter().position(Option::is_none)?;
            g.out[free] = self.start(stack, own, dest);
            return None;
        };
        // Once up, the send finds out whether it still is (`Sent::Gone`): no look at the
        // phase (a lock) per datagram.
        if !g.out[i].as_ref()?.up {
            let o = g.out[i].as_mut()?;
            match o.conn.phase() {
                Phase::Established if !o.follows_udp(now, &self.native) => {
                    own.stats().implicit_connection()
                }
                // Still waiting for the answer, or answered and following the datagrams
                // sent meanwhile (which `follows_udp` bounds by `answer_ms()` too).
                Phase::Established | Phase::Connecting if now - o.since_ms < answer_ms() => {
                    o.over_udp = o.over_udp.saturating_add(1);
                    return None;
                }
                phase => {
                    if let Some(o) = g.out[i].take() {
                        self.give_up(stack, &o, phase);
                    }
                    return None;
                }
            }
        }
        let o = g.out[i].as_mut()?;
        o.up = true;
        if source.is_some_and(|ask| !source_allows(own, &plane, &o.conn, ask)) {
            return None;
        }
        o.since_ms = now;
        match o.conn.send_datagram(plane.fabric(), msg, len, out.tos) {
            Ok(Sent::Queued) => {
                self.sent.fetch_add(1, Ordering::Relaxed);
                own.count(HotCounter::DgramSent, 1);
                Some(Ok(len as c_int))
            }
            Ok(Sent::Dropped) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
                own.count(HotCounter::DgramDropped, 1);
                Some(Ok(len as c_int))
            }
            Err(e) if e == EFAULT => Some(Err(e)),
            // The peer ended it (or broke the queue): UDP from here.
            Ok(Sent::Gone) | Err(_) => {
                if let Some(o) = g.out[i].take() {
                    end(&plane, &o.conn);
                }
                None
            }
        }
    }

    /// Starts an implicit connection to `dest` if the node map puts it on a node of the
    /// fabric and nothing rules it out; `None` leaves the destination to UDP.
    fn start(&self, stack: &Stack, own: &OwnSk, dest: (Ip, u16)) -> Option<Outbound> {
        let (ip, port) = dest;
        let plane = stack.plane.plane();
        let fabric = plane.fabric();
        let Decision::Sci(node) = stack.decide(own.net(), ip, port) else {
            return None;
        };
        let node = NodeId::try_from(node).ok()?;
        let local = node == fabric.local_node();
        if !fabric.reaches(node) || is_link_local(ip) {
            return None;
        }
        let ip = if local { effective_dest(ip) } else { ip };
        let namespace = if local { own.namespace().0 } else { 0 };
        let what = Destination {
            node,
            ip: ip.canonical(),
            port,
            namespace,
            datagram: true,
        };
        if stack.plane.refused_lately(&what) {
            return None;
        }
        let v6 = self.addr.v6;
        let src_ip = match self.native.addrs().local.0 {
            bound if !bound.is_unspecified() => bound,
            _ if local => ip,
            _ => crate::config::host::route_source(own.net(), ip).ok()?,
        };
        // No room in the table (or the region) or a full mailbox: UDP, and not asked
        // again on every datagram, but after `refusal_ms`.
        let Ok(conn) = stack.plane.new_conn(
            node,
            Addr::inet(src_ip, self.addr.port, v6),
            Addr::inet(ip, port, v6),
        ) else {
            stack.plane.remember_refusal(what);
            return None;
        };
        conn.never_move();
        let request = Frame::connect_request(
            conn.id,
            (to_wire(src_ip), self.addr.port),
            (to_wire(ip), port, namespace),
            conn.offer(),
        )
        .for_datagrams()
        .encode_bytes();
        // Through the fabric even to this node (not `Plane::send_control`, which would
        // serve it here): this runs under the endpoint's `conns` lock, and serving the
        // request attaches the new end to a bound datagram socket, maybe this one. The
        // listener kthread serves it, holding no socket's lock.
        if fabric.send_control(node, &request).is_err() {
            end(&plane, &conn);
            stack.plane.remember_refusal(what);
            return None;
        }
        Some(Outbound {
            dest,
            what,
            conn,
            up: false,
            since_ms: now_ms(),
            // The datagram that started it goes over UDP.
            over_udp: 1,
        })
    }

    /// Ends an outbound connection that never came up; a destination with no datagram
    /// socket bound is remembered as refused.
    fn give_up(&self, stack: &Stack, o: &Outbound, phase: Phase) {
        let plane = stack.plane.plane();
        end(&plane, &o.conn);
        if phase == Phase::NoListener {
            stack.plane.remember_refusal(o.what);
        }
    }
}

/// Whether a datagram that asks for `ask` may take `conn`: it names the connection's own
/// source address (or any) and the interface that has that address (or any), as the
/// packet information of datagrams over SCI names them ([`Native::put_ip_cmsgs`]); any
/// other source is UDP's to honour.
fn source_allows(own: &OwnSk, plane: &Plane<'_>, conn: &Conn, ask: SourceAsk) -> bool {
    let Some((src, _)) = conn.local.ip_port() else {
        return false;
    };
    let src = src.canonical();
    if !ask.ip.is_unspecified() && ask.ip.canonical() != src {
        return false;
    }
    ask.ifindex == 0
        || ask.ifindex == local_ifindex(own.net(), src.octets(), plane.within_node(conn))
}
