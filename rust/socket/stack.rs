// SPDX-License-Identifier: GPL-2.0

//! What every `AF_SCI` socket reaches below the socket layer: the control plane (and
//! through it the fabric), the node map and port rules, and the registry of sockets the
//! netlink family dumps. The module builds one at load; the family adapter hands a
//! reference to every socket it creates, and the netlink family gets its own. Nothing
//! looks it up.

use crate::config::node_map::NodeMap;
use crate::config::rules::{Decision, Ip, NodeId};
use crate::control::ControlPlane;
use crate::socket::proto_ops::Registered;
use crate::socket::registry::Registry;
use crate::sys::bindings;
use crate::sys::params::FabricParams;
use kernel::prelude::*;

/// The module's state below the socket layer (see the module doc).
#[pin_data]
pub(crate) struct Stack {
    /// The control plane, and through it the fabric.
    pub(crate) plane: ControlPlane,
    /// The node map and the port rules.
    #[pin]
    pub(crate) nodes: NodeMap,
    /// Every live `AF_SCI` socket.
    #[pin]
    pub(crate) sockets: Registry<Registered>,
}

impl Stack {
    /// The control plane over the fabric `params` choose, an empty node map, no port
    /// rules, no sockets.
    pub(crate) fn new(params: &FabricParams) -> Result<impl PinInit<Self, Error>> {
        let plane = ControlPlane::new(params)?;
        Ok(try_pin_init!(Self {
            plane,
            nodes <- NodeMap::new(),
            sockets <- Registry::new(),
        }? Error))
    }

    /// The connect-time decision for `dest:port` in namespace `net`.
    /// With no node map loaded, the addresses the fabric's reachable nodes published
    /// stand in for one.
    pub(crate) fn decide(&self, net: *mut bindings::net, dest: Ip, port: u16) -> Decision {
        let fabric = self.plane.fabric();
        let local = fabric.local_node();
        self.nodes.decide(net, dest, port, local.into(), |ip| {
            fabric.node_with_address(ip).map(NodeId::from)
        })
    }
}
