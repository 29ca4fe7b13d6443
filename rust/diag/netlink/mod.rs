// SPDX-License-Identifier: GPL-2.0

//! The commands of the generic netlink family `af_sci` (`uapi/linux/af_sci.h`,
//! `Documentation/netlink/af_sci.yaml`): the node map and the port rules (read by anyone,
//! replaced by `CAP_NET_ADMIN`, which the family's ops demand), the socket dump and the
//! counters of the requester's network namespace.

pub(crate) mod adapter;

use crate::config::rules::{
    FallbackReason, Ip, NodeId, PortAction, PortRule, NODES_MAX, PORT_RULES_MAX,
};
use crate::control::namespaces::PublishError;
use crate::socket::proto_ops::for_each_socket;
use crate::socket::registry::SockInfo;
use crate::socket::stack::Stack;
use crate::sys::bindings;
use crate::sys::errno::errno;
use adapter::{Attr, Dump, Request, Writer};
use kernel::c_str;
use kernel::prelude::*;
use kernel::rbtree::RBTree;
use kernel::str::CStr;

// uapi numbers as the attribute and command types they are on the wire.
const CMD_NODE_GET: u8 = bindings::sci_cmd_SCI_CMD_NODE_GET as u8;
const CMD_PORT_GET: u8 = bindings::sci_cmd_SCI_CMD_PORT_GET as u8;
const CMD_SOCK_GET: u8 = bindings::sci_cmd_SCI_CMD_SOCK_GET as u8;
const CMD_STATS_GET: u8 = bindings::sci_cmd_SCI_CMD_STATS_GET as u8;
const A_NODE: u16 = bindings::sci_attr_SCI_A_NODE as u16;
const A_PORT_RULE: u16 = bindings::sci_attr_SCI_A_PORT_RULE as u16;
const A_SOCK: u16 = bindings::sci_attr_SCI_A_SOCK as u16;
const A_STATS: u16 = bindings::sci_attr_SCI_A_STATS as u16;
const A_PUBLISH: u16 = bindings::sci_attr_SCI_A_PUBLISH as u16;

/// An `EINVAL` with an extended ack message.
fn invalid(req: &Request<'_>, attr: &Attr<'_>, msg: &'static CStr) -> Error {
    req.error(Some(attr), msg);
    EINVAL
}

fn u32_of(attr: &Attr<'_>) -> Option<u32> {
    Some(u32::from_ne_bytes(attr.data().get(..4)?.try_into().ok()?))
}

fn u16_of(attr: &Attr<'_>) -> Option<u16> {
    Some(u16::from_ne_bytes(attr.data().get(..2)?.try_into().ok()?))
}

/// One `SCI_A_NODE` nest: exactly one address, and the node id.
fn parse_node(req: &Request<'_>, nest: &Attr<'_>) -> Result<(Ip, NodeId)> {
    let mut addr = None;
    let mut id = None;
    for attr in nest.nested() {
        match u32::from(attr.kind()) {
            bindings::sci_node_attr_SCI_NODE_A_ADDR4 => {
                let b: [u8; 4] = attr.data().try_into().map_err(|_| EINVAL)?;
                if addr.replace(Ip::V4(b)).is_some() {
                    return Err(invalid(req, &attr, c_str!("a node entry has one address")));
                }
            }
            bindings::sci_node_attr_SCI_NODE_A_ADDR6 => {
                let b: [u8; 16] = attr.data().try_into().map_err(|_| EINVAL)?;
                if addr.replace(Ip::V6(b).canonical()).is_some() {
                    return Err(invalid(req, &attr, c_str!("a node entry has one address")));
                }
            }
            bindings::sci_node_attr_SCI_NODE_A_ID => id = u32_of(&attr),
            _ => {}
        }
    }
    match (addr, id) {
        (Some(addr), Some(id)) => Ok((addr, id)),
        _ => Err(invalid(
            req,
            nest,
            c_str!("a node entry needs an address (ADDR4 or ADDR6) and an ID"),
        )),
    }
}

/// `SCI_CMD_NODE_SET`: replaces the node map with the request's `SCI_A_NODE` entries.
pub(crate) fn node_set(stack: &Stack, req: &Request<'_>) -> Result {
    let mut nodes = RBTree::new();
    let mut count = 0usize;
    for attr in req.attrs() {
        if attr.kind() != A_NODE {
            return Err(invalid(req, &attr, c_str!("only SCI_A_NODE belongs here")));
        }
        let (ip, id) = parse_node(req, &attr)?;
        count += 1;
        if count > NODES_MAX {
            return Err(invalid(
                req,
                &attr,
                c_str!("more than SCI_NODES_MAX entries"),
            ));
        }
        if nodes.get(&ip).is_some() {
            return Err(invalid(req, &attr, c_str!("address listed twice")));
        }
        nodes.try_create_and_insert(ip, id, GFP_KERNEL)?;
    }
    stack.nodes.replace_nodes(nodes);
    Ok(())
}

/// `SCI_CMD_LINK_DROP`: drops the fabric link to the node the one `SCI_A_NODE` nest
/// names by its `SCI_NODE_A_ID` (an operator's way to take a link down, and the tests'
/// way to fail the fabric under a live connection).
pub(crate) fn link_drop(stack: &Stack, req: &Request<'_>) -> Result {
    let mut node = None;
    for attr in req.attrs() {
        if attr.kind() != A_NODE || node.is_some() {
            return Err(invalid(req, &attr, c_str!("one SCI_A_NODE belongs here")));
        }
        node = attr
            .nested()
            .find(|a| u32::from(a.kind()) == bindings::sci_node_attr_SCI_NODE_A_ID)
            .and_then(|a| u32_of(&a));
    }
    let node = node.and_then(|n| u16::try_from(n).ok()).ok_or(EINVAL)?;
    stack.plane.fabric().drop_link(node)
}

/// `SCI_CMD_PUBLISH_SET`: makes the requester's network namespace publish its addresses
/// (`SCI_A_PUBLISH` 1) or stop (0); see `crate::control::namespaces`.
pub(crate) fn publish_set(stack: &Stack, req: &Request<'_>) -> Result {
    let mut on = None;
    for attr in req.attrs() {
        if attr.kind() != A_PUBLISH || on.is_some() {
            return Err(invalid(
                req,
                &attr,
                c_str!("one SCI_A_PUBLISH belongs here"),
            ));
        }
        on = attr.data().first().map(|&b| b != 0);
    }
    let Some(on) = on else {
        req.error(None, c_str!("SCI_A_PUBLISH is missing"));
        return Err(EINVAL);
    };
    let (cookie, init) = req.namespace();
    stack
        .plane
        .publishing()
        .set(cookie, init, on)
        .map_err(|e| match e {
            PublishError::Initial => {
                req.error(
                    None,
                    c_str!("the initial network namespace always publishes its addresses"),
                );
                EINVAL
            }
            PublishError::Full => {
                req.error(
                    None,
                    c_str!("at most 16 network namespaces publish their addresses"),
                );
                errno(bindings::ENOSPC)
            }
        })
}

/// One `SCI_A_PORT_RULE` nest.
fn parse_port_rule(req: &Request<'_>, nest: &Attr<'_>) -> Result<PortRule> {
    let (mut action, mut low, mut high) = (None, None, None);
    for attr in nest.nested() {
        match u32::from(attr.kind()) {
            bindings::sci_port_attr_SCI_PORT_A_ACTION => {
                action = attr.data().first().copied().and_then(PortAction::from_u8)
            }
            bindings::sci_port_attr_SCI_PORT_A_LOW => low = u16_of(&attr),
            bindings::sci_port_attr_SCI_PORT_A_HIGH => high = u16_of(&attr),
            _ => {}
        }
    }
    let (Some(action), Some(low)) = (action, low) else {
        return Err(invalid(
            req,
            nest,
            c_str!("a port rule needs ACTION and LOW"),
        ));
    };
    PortRule::new(action, low, high.unwrap_or(low))
        .map_err(|_| invalid(req, nest, c_str!("a port range is 1..65535, LOW <= HIGH")))
}

/// `SCI_CMD_PORT_SET`: replaces the port rules with the request's `SCI_A_PORT_RULE`s.
pub(crate) fn port_set(stack: &Stack, req: &Request<'_>) -> Result {
    let mut rules = KVec::new();
    for attr in req.attrs() {
        if attr.kind() != A_PORT_RULE {
            return Err(invalid(
                req,
                &attr,
                c_str!("only SCI_A_PORT_RULE belongs here"),
            ));
        }
        let rule = parse_port_rule(req, &attr)?;
        if rules.len() >= PORT_RULES_MAX {
            return Err(invalid(
                req,
                &attr,
                c_str!("more than SCI_PORT_RULES_MAX rules"),
            ));
        }
        rules.push(rule, GFP_KERNEL)?;
    }
    stack.nodes.replace_ports(rules);
    Ok(())
}

fn put_ip(w: &mut Writer<'_>, ip: Ip, a4: u32, a6: u32) -> Result {
    match ip {
        Ip::V4(b) => w.put_bytes(a4 as u16, &b),
        Ip::V6(b) => w.put_bytes(a6 as u16, &b),
    }
}

/// Where [`node_dump`] is once the node map is done: positions from here count the
/// published entries, so a map that changes between rounds shifts neither part.
const PUBLISHED_FROM: u64 = 1 << 32;

/// One node entry message; false if it did not fit.
fn put_node(d: &mut Dump<'_>, ip: Ip, id: NodeId, source: u32) -> bool {
    d.message(CMD_NODE_GET, |w| {
        w.nest(A_NODE, |w| {
            put_ip(
                w,
                ip,
                bindings::sci_node_attr_SCI_NODE_A_ADDR4,
                bindings::sci_node_attr_SCI_NODE_A_ADDR6,
            )?;
            w.put_u32(bindings::sci_node_attr_SCI_NODE_A_ID as u16, id)?;
            w.put_u8(
                bindings::sci_node_attr_SCI_NODE_A_SOURCE as u16,
                source as u8,
            )
        })
    })
}

/// `SCI_CMD_NODE_GET`: one `SCI_A_NODE` per message: the node map in address order,
/// then the addresses the fabric's reachable nodes published (shown whether or not a
/// map is loaded: `scictl nodes` says which are in use).
pub(crate) fn node_dump(stack: &Stack, d: &mut Dump<'_>) -> Result {
    let mut start = d.position();
    if start < PUBLISHED_FROM {
        let mut done = 0u64;
        let mut full = false;
        stack.nodes.visit_nodes(start as usize, |ip, id| {
            let written = put_node(d, ip, id, bindings::sci_node_source_SCI_NODE_SOURCE_FILE);
            done += u64::from(written);
            full = !written;
            written
        });
        if full {
            d.set_position(start + done);
            return Ok(());
        }
        start = PUBLISHED_FROM;
    }
    let mut done = 0u64;
    stack
        .plane
        .fabric()
        .visit_published((start - PUBLISHED_FROM) as usize, &mut |ip, id| {
            let written = put_node(
                d,
                ip,
                id.into(),
                bindings::sci_node_source_SCI_NODE_SOURCE_FABRIC,
            );
            done += u64::from(written);
            written
        });
    d.set_position(start + done);
    Ok(())
}

/// `SCI_CMD_PORT_GET`: one `SCI_A_PORT_RULE` per message, in the order they were set.
pub(crate) fn port_dump(stack: &Stack, d: &mut Dump<'_>) -> Result {
    let start = d.position();
    let mut done = 0u64;
    stack.nodes.visit_ports(start as usize, |rule| {
        let written = d.message(CMD_PORT_GET, |w| {
            w.nest(A_PORT_RULE, |w| {
                w.put_u8(
                    bindings::sci_port_attr_SCI_PORT_A_ACTION as u16,
                    rule.action().as_u8(),
                )?;
                w.put_u16(bindings::sci_port_attr_SCI_PORT_A_LOW as u16, rule.low())?;
                w.put_u16(bindings::sci_port_attr_SCI_PORT_A_HIGH as u16, rule.high())
            })
        });
        done += u64::from(written);
        written
    });
    d.set_position(start + done);
    Ok(())
}

fn put_sock(w: &mut Writer<'_>, s: &SockInfo) -> Result {
    use bindings::*;
    let pad = sci_sock_attr_SCI_SOCK_A_PAD as u16;
    w.put_u16(sci_sock_attr_SCI_SOCK_A_FAMILY as u16, s.family)?;
    if let Some((ip, port)) = s.local {
        put_ip(
            w,
            ip,
            sci_sock_attr_SCI_SOCK_A_LOCAL_ADDR4,
            sci_sock_attr_SCI_SOCK_A_LOCAL_ADDR6,
        )?;
        w.put_u16(sci_sock_attr_SCI_SOCK_A_LOCAL_PORT as u16, port)?;
    }
    if let Some((ip, port)) = s.peer {
        put_ip(
            w,
            ip,
            sci_sock_attr_SCI_SOCK_A_PEER_ADDR4,
            sci_sock_attr_SCI_SOCK_A_PEER_ADDR6,
        )?;
        w.put_u16(sci_sock_attr_SCI_SOCK_A_PEER_PORT as u16, port)?;
    }
    w.put_u32(sci_sock_attr_SCI_SOCK_A_MODE as u16, s.mode)?;
    w.put_u32(
        sci_sock_attr_SCI_SOCK_A_FALLBACK as u16,
        s.fallback.as_u32(),
    )?;
    w.put_u8(sci_sock_attr_SCI_SOCK_A_STATE as u16, s.state)?;
    w.put_u32(sci_sock_attr_SCI_SOCK_A_QUEUE_FILL as u16, s.queue_fill)?;
    w.put_u32(sci_sock_attr_SCI_SOCK_A_RECV_Q as u16, s.recv_q)?;
    w.put_u32(sci_sock_attr_SCI_SOCK_A_SEND_Q as u16, s.send_q)?;
    w.put_u16(sci_sock_attr_SCI_SOCK_A_TYPE as u16, s.sock_type)?;
    w.put_u64(sci_sock_attr_SCI_SOCK_A_INODE as u16, s.inode, pad)?;
    w.put_u64(sci_sock_attr_SCI_SOCK_A_COOKIE as u16, s.cookie, pad)?;
    if let Some(node) = s.node {
        w.put_u32(sci_sock_attr_SCI_SOCK_A_NODE as u16, node)?;
    }
    if let Some(d) = &s.dgram {
        w.put_u32(sci_sock_attr_SCI_SOCK_A_IMPLICIT_OUT as u16, d.implicit_out)?;
        w.put_u32(sci_sock_attr_SCI_SOCK_A_IMPLICIT_IN as u16, d.implicit_in)?;
        w.put_u64(sci_sock_attr_SCI_SOCK_A_DGRAM_SENT as u16, d.sent, pad)?;
        w.put_u64(
            sci_sock_attr_SCI_SOCK_A_DGRAM_RECEIVED as u16,
            d.received,
            pad,
        )?;
        w.put_u64(
            sci_sock_attr_SCI_SOCK_A_DGRAM_DROPPED as u16,
            d.dropped,
            pad,
        )?;
    }
    Ok(())
}

/// `SCI_CMD_SOCK_GET`: the `AF_SCI` sockets of the requester's namespace, one
/// `SCI_A_SOCK` per message, oldest first.
pub(crate) fn sock_dump(stack: &Stack, d: &mut Dump<'_>) -> Result {
    let mut last = d.position();
    let net = d.net();
    for_each_socket(&stack.sockets, net, last, |id, info| {
        let written = d.message(CMD_SOCK_GET, |w| w.nest(A_SOCK, |w| put_sock(w, info)));
        if written {
            last = id;
        }
        written
    });
    d.set_position(last);
    Ok(())
}

/// `SCI_CMD_STATS_GET`: the counters of the requester's namespace.
pub(crate) fn stats_get(stack: &Stack, req: &Request<'_>) -> Result {
    use bindings::*;
    let stats = req.stats().snapshot();
    let (cookie, init) = req.namespace();
    let publishes = stack.plane.publishing().publishes(cookie, init);
    req.reply(CMD_STATS_GET, |w| {
        w.put_u8(A_PUBLISH, u8::from(publishes))?;
        w.nest(A_STATS, |w| {
            let pad = sci_stats_attr_SCI_STATS_A_PAD as u16;
            w.put_u64(
                sci_stats_attr_SCI_STATS_A_SOCKETS as u16,
                stats.sockets,
                pad,
            )?;
            w.put_u64(
                sci_stats_attr_SCI_STATS_A_SCI_CONNECTIONS as u16,
                stats.sci_connections,
                pad,
            )?;
            w.put_u64(
                sci_stats_attr_SCI_STATS_A_REFUSALS_REMEMBERED as u16,
                stats.refusals_remembered,
                pad,
            )?;
            for (attr, v) in [
                (
                    sci_stats_attr_SCI_STATS_A_IMPLICIT_CONNECTIONS,
                    stats.implicit_connections,
                ),
                (sci_stats_attr_SCI_STATS_A_DGRAM_SENT, stats.dgram_sent),
                (
                    sci_stats_attr_SCI_STATS_A_DGRAM_RECEIVED,
                    stats.dgram_received,
                ),
                (
                    sci_stats_attr_SCI_STATS_A_DGRAM_DROPPED,
                    stats.dgram_dropped,
                ),
                (
                    sci_stats_attr_SCI_STATS_A_READ_SOCK_LENT,
                    stats.read_sock_lent,
                ),
                (
                    sci_stats_attr_SCI_STATS_A_READ_SOCK_COPIED,
                    stats.read_sock_copied,
                ),
                (
                    sci_stats_attr_SCI_STATS_A_READ_SOCK_KEPT,
                    stats.read_sock_kept,
                ),
                (
                    sci_stats_attr_SCI_STATS_A_DIRECT_RECEIVED,
                    stats.direct_received,
                ),
                (
                    sci_stats_attr_SCI_STATS_A_READ_SOCK_DEFERRED,
                    stats.read_sock_deferred,
                ),
            ] {
                w.put_u64(attr as u16, v, pad)?;
            }
            for (reason, count) in FallbackReason::ALL.iter().zip(stats.fallbacks) {
                if *reason == FallbackReason::None {
                    continue;
                }
                w.nest(sci_stats_attr_SCI_STATS_A_FALLBACK as u16, |w| {
                    w.put_u32(
                        sci_fallback_attr_SCI_FALLBACK_A_REASON as u16,
                        reason.as_u32(),
                    )?;
                    w.put_u64(
                        sci_fallback_attr_SCI_FALLBACK_A_COUNT as u16,
                        count,
                        sci_fallback_attr_SCI_FALLBACK_A_PAD as u16,
                    )
                })?;
            }
            Ok(())
        })
    })
}
