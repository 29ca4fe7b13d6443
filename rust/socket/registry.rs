// SPDX-License-Identifier: GPL-2.0

//! The registry of live `AF_SCI` sockets (for the netlink socket dump) and what the dump
//! reports of each.

use crate::config::rules::{FallbackReason, Ip, NodeId};
use crate::socket::native::Native;
use crate::socket::sk::OwnSk;
use crate::sys::bindings;
use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNodeReservation};
use kernel::sync::Mutex;

struct Entries<T> {
    /// The id of the next entry; ids only grow, so a dump resumes after the last it showed.
    next_id: u64,
    tree: RBTree<u64, T>,
}

/// Memory for one registry entry, reserved where failing is still possible.
pub(crate) struct Slot<T>(RBTreeNodeReservation<u64, T>);

/// A set of entries with growing ids, visited in id order under a mutex (so visitors may
/// sleep, and an entry's owner can wait for visitors by removing it).
#[pin_data]
pub(crate) struct Registry<T> {
    #[pin]
    entries: Mutex<Entries<T>>,
}

impl<T> Registry<T> {
    /// An empty registry.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            entries <- kernel::new_mutex!(
                Entries { next_id: 1, tree: RBTree::new() },
                "sci_registry"
            ),
        })
    }

    /// Reserves memory for one entry.
    pub(crate) fn reserve() -> Result<Slot<T>> {
        Ok(Slot(RBTreeNodeReservation::new(GFP_KERNEL)?))
    }

    /// Adds `value` in a reserved slot; returns its id (never 0).
    pub(crate) fn insert(&self, slot: Slot<T>, value: T) -> u64 {
        let mut entries = self.entries.lock();
        let id = entries.next_id;
        entries.next_id += 1;
        entries.tree.insert(slot.0.into_node(id, value));
        id
    }

    /// Removes entry `id`; once this returns, no visitor sees it any more.
    pub(crate) fn remove(&self, id: u64) -> Option<T> {
        self.entries.lock().tree.remove(&id)
    }

    /// Calls `f` on each entry with an id above `after`, in id order, under the lock, until
    /// `f` returns false.
    pub(crate) fn visit_after(&self, after: u64, mut f: impl FnMut(u64, &T) -> bool) {
        let mut entries = self.entries.lock();
        let Some(first) = after.checked_add(1) else {
            return;
        };
        let mut cursor = entries.tree.cursor_lower_bound(&first);
        while let Some(c) = cursor {
            let (id, value) = c.current();
            if !f(*id, value) {
                return;
            }
            cursor = c.move_next();
        }
    }
}

/// What the socket dump reports of one `AF_SCI` socket.
pub(crate) struct SockInfo {
    /// `AF_INET` or `AF_INET6`: the native socket's family.
    pub(crate) family: u16,
    /// Local address and port, `None` while unset.
    pub(crate) local: Option<(Ip, u16)>,
    /// Peer address and port, `None` while unconnected.
    pub(crate) peer: Option<(Ip, u16)>,
    /// `enum sci_mode`.
    pub(crate) mode: u32,
    /// Why the socket is native.
    pub(crate) fallback: FallbackReason,
    /// TCP state.
    pub(crate) state: u8,
    /// Bytes waiting in the SCI receive queue (0 while native).
    pub(crate) queue_fill: u32,
    /// Recv-Q and Send-Q as `ss` shows them (of the SCI connection, else of the native
    /// socket; a listener's: the connections waiting for `accept()` and its backlog).
    pub(crate) recv_q: u32,
    pub(crate) send_q: u32,
    /// Inode number of the socket.
    pub(crate) inode: u64,
    /// Socket cookie.
    pub(crate) cookie: u64,
    /// Peer node, on the SCI data path.
    pub(crate) node: Option<NodeId>,
    /// `SOCK_STREAM` or `SOCK_DGRAM`.
    pub(crate) sock_type: u16,
    /// A datagram socket's implicit connections and datagrams over SCI.
    pub(crate) dgram: Option<DgramInfo>,
}

/// A datagram socket's implicit SCI connections and datagrams over SCI: what the dump,
/// `fdinfo` and `SCI_INFO` report (`socket/dgram/implicit.rs` counts them).
#[derive(Default, Clone, Copy)]
pub(crate) struct DgramInfo {
    /// Connections up to destinations, and from peers.
    pub(crate) implicit_out: u32,
    pub(crate) implicit_in: u32,
    /// Datagrams sent, received and dropped (at a full ring) over SCI.
    pub(crate) sent: u64,
    pub(crate) received: u64,
    pub(crate) dropped: u64,
}

impl SockInfo {
    /// What the dump reports of `own`, a socket of `sock_type` whose bytes go over its
    /// `native` socket (for `fallback`): the native socket's addresses (unset while the
    /// port is 0; a failed connect keeps the address), state and queues. A stream socket
    /// on the SCI path overrides what its connection says instead.
    pub(crate) fn of_native(
        own: &OwnSk,
        native: &Native,
        fallback: FallbackReason,
        sock_type: u32,
    ) -> Self {
        let addrs = native.addrs();
        let set = |(ip, port): (Ip, u16)| (port != 0).then_some((ip, port));
        let (recv_q, send_q) = native.queues();
        Self {
            family: addrs.family,
            local: set(addrs.local),
            peer: set(addrs.peer),
            mode: bindings::sci_mode_SCI_MODE_NATIVE,
            fallback,
            state: native.state(),
            queue_fill: 0,
            recv_q,
            send_q,
            inode: own.inode(),
            cookie: own.cookie(),
            node: None,
            sock_type: sock_type as u16,
            dgram: None,
        }
    }
}
