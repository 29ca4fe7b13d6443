// SPDX-License-Identifier: GPL-2.0

//! The remote-memory fabric, shaped like Dolphin's GENIF: what the SCI data path needs
//! from an interconnect and nothing more.
//!
//! A node has an id. It creates *local segments* (zeroed memory that peers may map and
//! write) exported under the id of the connection that owns them, *maps* a peer's
//! segment, rings a peer's *doorbell* on a channel, and exchanges fixed-size *control
//! frames* through a per-node mailbox. Nothing above this trait knows which backend it
//! runs on: [`loopback`] (both ends in this kernel) or [`ivshmem`] (a shared PCI BAR
//! between QEMU guests); [`select`] picks one at load time.

pub(crate) mod direct;
pub(crate) mod ivshmem;
pub(crate) mod loopback;
pub(crate) mod memory;
pub(crate) mod queue_selftest;
pub(crate) mod seg_pool;
pub(crate) mod select;

use crate::config::rules::Ip;
use crate::proto::frame::FRAME_SIZE;
use kernel::prelude::*;
use kernel::sync::Arc;
use memory::SegMem;

/// A node on the fabric.
pub(crate) type NodeId = u16;

/// What a fabric delivers to the layer above (the control plane).
pub(crate) trait FabricEvents: Send + Sync {
    /// A control frame arrived from node `from`. Called in process context.
    fn control(&self, from: NodeId, frame: [u8; FRAME_SIZE]);
    /// A doorbell rang for local `channel` (a connection slot). May be called in atomic
    /// context, softirq included (the ivshmem fabric rings from a BH work item): it must
    /// only wake, and every lock it takes must be taken with bottom halves off wherever
    /// it is taken (`SpinLockBh`).
    fn doorbell(&self, channel: u32);
    /// Node `node` went away (it stopped beating, left, or came back as a new
    /// generation): no connection to it may use the fabric any more; `loss` says
    /// whether what its region holds can still be trusted. Its mappings are already
    /// revoked. Called in process context, may sleep.
    fn node_down(&self, node: NodeId, loss: NodeLoss);
    /// This node's own fabric memory is about to go away (its device is being removed),
    /// after every peer was reported down: what connections still read from their
    /// segments (the rings their moves onto TCP drain) must be copied into kernel memory
    /// now ([`SegMem::rehome`]); once this returns, the rest reads as zeroes. Called in
    /// process context, may sleep.
    fn memory_going(&self);
    /// The addresses this node publishes (a fabric that publishes them asks now and
    /// then): IPv6 bytes, IPv4 as IPv4-mapped, those of the initial network namespace
    /// first; how many were written into `out`. Process context.
    fn local_addresses(&self, out: &mut [[u8; 16]]) -> usize;
}

/// How a node's fabric path ended, as far as the region shows.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum NodeLoss {
    /// The path is gone (heartbeat timeout, the node left or came back, the link was
    /// dropped) but every byte written into the region was written by the protocol: a
    /// connection may carry on over TCP with what its ring holds.
    Lost,
    /// The region was written outside the protocol (the node's word no longer decodes,
    /// its mailbox broke the rules): no ring can vouch for its bytes, so connections are
    /// reset rather than moved with data nobody can check.
    Corrupted,
}

/// A remote-memory interconnect.
pub(crate) trait Fabric: Send + Sync {
    /// Backend name, for logs and tools.
    fn name(&self) -> &'static str;

    /// This node's id.
    fn local_node(&self) -> NodeId;

    /// Whether `node` can be reached (mapped, notified, mailed).
    fn reaches(&self, node: NodeId) -> bool;

    /// Creates a zeroed local segment of at least `len` bytes, exported under
    /// `channel` until the returned handle is dropped. `peer` is the node that will map
    /// it: a backend whose memory for other nodes is exhausted says `ENOMEM` for another
    /// node's segment rather than hand out one that node cannot map.
    fn create_segment(&self, channel: u32, len: usize, peer: NodeId) -> Result<Arc<SegMem>>;

    /// Maps the segment `node` exported under `channel`.
    fn map_segment(&self, node: NodeId, channel: u32) -> Result<Arc<SegMem>>;

    /// Withdraws the export of `channel` (a peer can no longer map it; mappings already
    /// made stay valid until dropped).
    fn unexport(&self, channel: u32);

    /// Rings `node`'s doorbell for its `channel`.
    fn notify(&self, node: NodeId, channel: u32);

    /// Sends a control frame to `node`'s mailbox.
    fn send_control(&self, node: NodeId, frame: &[u8; FRAME_SIZE]) -> Result;

    /// Drops the link to `node` as if it had failed (an administrator's request): the
    /// node is counted down and its connections move onto TCP or reset; a backend that
    /// links again by itself does so once both nodes are still alive. `ENOTCONN` when
    /// there is no link to `node`; `EOPNOTSUPP` for a backend without links.
    fn drop_link(&self, _node: NodeId) -> Result {
        Err(crate::sys::errno::errno(crate::sys::bindings::EOPNOTSUPP))
    }

    /// The reachable node that published `ip` as its address (used only while no node
    /// map is loaded). A backend without published addresses knows none.
    fn node_with_address(&self, _ip: Ip) -> Option<NodeId> {
        None
    }

    /// Calls `f` on every address reachable nodes published, with the node, from the
    /// `skip`th on in a stable order, until it returns false (for `scictl nodes`).
    fn visit_published(&self, _skip: usize, _f: &mut dyn FnMut(Ip, NodeId) -> bool) {}
}
