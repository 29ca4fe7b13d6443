// SPDX-License-Identifier: GPL-2.0

//! The node map (IP address → node id) and the port rules, module-wide, and the decision
//! a connect takes from them: try SCI to a node, or fall back to the native TCP connect
//! for a reason. The matching itself is the I/O-free [`super::rules`] (shared with the host crate
//! `tools/sci-config`); this file holds the tables behind a mutex. They change only
//! through the netlink family (`SCI_CMD_NODE_SET`, `SCI_CMD_PORT_SET`), as a whole.

use crate::config::host::addr_is_local;
use crate::config::rules::{self, Decision, Ip, NodeId, PortRule};
use crate::sys::bindings;
use kernel::prelude::*;
use kernel::rbtree::RBTree;
use kernel::sync::Mutex;

struct Tables {
    nodes: RBTree<Ip, NodeId>,
    ports: KVec<PortRule>,
}

/// The node map and the port rules.
#[pin_data]
pub(crate) struct NodeMap {
    #[pin]
    tables: Mutex<Tables>,
}

impl NodeMap {
    /// No nodes (the local node's own addresses map to the local node), no port rules.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            tables <- kernel::new_mutex!(
                Tables { nodes: RBTree::new(), ports: KVec::new() },
                "sci_node_map"
            ),
        })
    }

    /// The decision for a connection to `dest:port` from namespace `net`, on a node
    /// whose id on its fabric is `local_node`; `published` finds the node that published
    /// an address (asked only while no map is loaded).
    pub(crate) fn decide(
        &self,
        net: *mut bindings::net,
        dest: Ip,
        port: u16,
        local_node: NodeId,
        published: impl FnOnce(Ip) -> Option<NodeId>,
    ) -> Decision {
        let tables = self.tables.lock();
        let map_empty = tables.nodes.iter().next().is_none();
        rules::decide(
            &tables.ports,
            dest,
            port,
            local_node,
            map_empty,
            |ip| tables.nodes.get(&ip).copied(),
            |ip| addr_is_local(net, ip),
            published,
        )
    }

    /// Replaces the whole node map (the old one is freed after the lock is released).
    pub(crate) fn replace_nodes(&self, nodes: RBTree<Ip, NodeId>) {
        let old = core::mem::replace(&mut self.tables.lock().nodes, nodes);
        drop(old);
    }

    /// Replaces all port rules.
    pub(crate) fn replace_ports(&self, ports: KVec<PortRule>) {
        let old = core::mem::replace(&mut self.tables.lock().ports, ports);
        drop(old);
    }

    /// Calls `f` on the node map entries from the `skip`th on, in address order, under the
    /// lock, until it returns false.
    pub(crate) fn visit_nodes(&self, skip: usize, mut f: impl FnMut(Ip, NodeId) -> bool) {
        let tables = self.tables.lock();
        for (ip, node) in tables.nodes.iter().skip(skip) {
            if !f(*ip, *node) {
                return;
            }
        }
    }

    /// Calls `f` on the port rules from the `skip`th on, in the order they were given,
    /// under the lock, until it returns false.
    pub(crate) fn visit_ports(&self, skip: usize, mut f: impl FnMut(&PortRule) -> bool) {
        let tables = self.tables.lock();
        for rule in tables.ports.iter().skip(skip) {
            if !f(rule) {
                return;
            }
        }
    }
}
