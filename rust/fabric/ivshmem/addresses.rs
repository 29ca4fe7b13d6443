// SPDX-License-Identifier: GPL-2.0

//! This node's IP addresses, published in its node table entry and address page, and its
//! peers'.
//!
//! With no node map loaded, a connect to an address a linked peer published goes to that
//! peer (`rust/config/rules.rs`), so two guests need no node map file. The node publishes
//! its addresses (the initial network namespace's, IPv4, then IPv6, then those of the
//! namespaces that publish theirs; the layer above says which, through
//! [`FabricEvents::local_addresses`]) when it joins, before it says "up", and the poller
//! looks again every [`RECHECK_MS`] (addresses may come after the module: DHCP at boot,
//! `ip addr add`, a namespace that starts publishing), rewriting them only when they
//! changed. Whether an address a peer claims is believed is the administrator's decision:
//! a loaded node map is used instead, whatever peers publish.
//!
//! This file reads and writes the region; which peers are linked is the attachment's to
//! say, so the lookups take them as an iterator: the attachment and the fabric call in,
//! this file calls neither.

use crate::config::rules::Ip;
use crate::fabric::{FabricEvents, NodeId};
use crate::proto::region::{PublishedAddr, Region, MAX_PUBLISHED};
use crate::proto::segment::Segment;
use core::fmt;
use kernel::prelude::*;

/// How often the poller looks whether this node's addresses changed (ms).
pub(super) const RECHECK_MS: u64 = 1000;
/// Reads of a peer's addresses that race its rewrite before giving up for this time.
const READ_TRIES: usize = 3;

/// A node's published addresses, at most [`MAX_PUBLISHED`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct HostAddrs {
    list: [PublishedAddr; MAX_PUBLISHED],
    count: usize,
}

impl Default for HostAddrs {
    fn default() -> Self {
        Self {
            list: [[0; 16]; MAX_PUBLISHED],
            count: 0,
        }
    }
}

impl HostAddrs {
    /// The addresses this node publishes now, as the layer above lists them.
    pub(super) fn now(events: &dyn FabricEvents) -> Self {
        let mut a = Self::default();
        a.count = events.local_addresses(&mut a.list).min(MAX_PUBLISHED);
        a
    }

    /// What `node` published, read from `region` (none if it is rewriting them each time
    /// it is read).
    fn of<S: Segment>(region: &Region<S>, node: NodeId) -> Self {
        let mut a = Self::default();
        a.count = (0..READ_TRIES)
            .find_map(|_| region.read_published(node, &mut a.list))
            .unwrap_or(0);
        a
    }

    /// As a slice.
    pub(super) fn as_slice(&self) -> &[PublishedAddr] {
        self.list.get(..self.count).unwrap_or(&[])
    }
}

impl fmt::Display for HostAddrs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.count == 0 {
            return f.write_str("none");
        }
        for (i, a) in self.as_slice().iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            match to_ip(*a) {
                Ip::V4([a, b, c, d]) => write!(f, "{a}.{b}.{c}.{d}")?,
                Ip::V6(b) => {
                    for (j, pair) in b.chunks(2).enumerate() {
                        let sep = if j > 0 { ":" } else { "" };
                        let word = pair.iter().fold(0u16, |w, x| (w << 8) | u16::from(*x));
                        write!(f, "{sep}{word:x}")?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// What the poller last published, and when it looks again.
pub(super) struct Published {
    addrs: HostAddrs,
    next_ms: u64,
}

impl Published {
    /// Nothing published yet.
    pub(super) fn new() -> Self {
        Self {
            addrs: HostAddrs::default(),
            next_ms: 0,
        }
    }

    /// Notes (and logs) that node `me` published `addrs` at `now`: the next look is a
    /// [`RECHECK_MS`] later.
    pub(super) fn record(&mut self, me: NodeId, addrs: HostAddrs, now: u64) {
        pr_info!("ivshmem: node {} publishes its addresses {}\n", me, addrs);
        self.addrs = addrs;
        self.next_ms = now.saturating_add(RECHECK_MS);
    }

    /// Publishes node `me`'s addresses in `region` again if the layer above (`events`)
    /// lists others than the last look found (once every [`RECHECK_MS`], at the
    /// poller's tick).
    pub(super) fn republish<S: Segment>(
        &mut self,
        region: &Region<S>,
        me: NodeId,
        events: &dyn FabricEvents,
        now: u64,
    ) {
        if now < self.next_ms {
            return;
        }
        self.next_ms = now.saturating_add(RECHECK_MS);
        let addrs = HostAddrs::now(events);
        if addrs != self.addrs {
            region.publish_addresses(me, addrs.as_slice());
            self.record(me, addrs, now);
        }
    }
}

/// A published address as the node map matches it (IPv4-mapped becomes IPv4).
fn to_ip(a: PublishedAddr) -> Ip {
    Ip::V6(a).canonical()
}

/// The first of `peers` that published `ip` in `region` (the attachment passes its
/// linked peers in node order: the lowest id wins when several claim it).
pub(super) fn node_with_address<S: Segment>(
    region: &Region<S>,
    mut peers: impl Iterator<Item = NodeId>,
    ip: Ip,
) -> Option<NodeId> {
    let want = ip.v6_bytes();
    peers.find(|&n| HostAddrs::of(region, n).as_slice().contains(&want))
}

/// Calls `f` on the addresses `peers` published in `region`, in their order, from the
/// `skip`th on, until it returns false.
pub(super) fn visit_published<S: Segment>(
    region: &Region<S>,
    peers: impl Iterator<Item = NodeId>,
    skip: usize,
    f: &mut dyn FnMut(Ip, NodeId) -> bool,
) {
    let mut skip = skip;
    for n in peers {
        let addrs = HostAddrs::of(region, n);
        let list = addrs.as_slice();
        let Some(rest) = list.get(skip..) else {
            skip = skip.saturating_sub(list.len());
            continue;
        };
        skip = 0;
        for a in rest {
            if !f(to_ip(*a), n) {
                return;
            }
        }
    }
}
