// SPDX-License-Identifier: GPL-2.0

//! Module-wide state shared by the sockets and the netlink family: the node map, the
//! registry of live `AF_SCI` sockets (for the netlink socket dump), and the counters each
//! network namespace keeps.

use crate::node_map::rules::{FallbackReason, Ip, NodeId};
use crate::node_map::NodeMap;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::prelude::*;
use kernel::rbtree::{RBTree, RBTreeNodeReservation};
use kernel::sync::Mutex;

/// The state the module's sockets and netlink handlers share, alive from before the
/// family is registered until after it is unregistered (see `socket_adapter::globals`).
#[pin_data]
pub(crate) struct Globals {
    /// Node map and port rules, for the connect-time decision.
    #[pin]
    pub(crate) nodes: NodeMap,
    /// Every live `AF_SCI` socket.
    #[pin]
    pub(crate) sockets: Registry<crate::socket_adapter::SkRef>,
}

impl Globals {
    /// Empty node map, no port rules, no sockets.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            nodes <- NodeMap::new(),
            sockets <- Registry::new(),
        })
    }
}

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

/// The counters of one network namespace: its `net_generic` data, a C
/// `struct sci_net_stats` (zeroed at creation; all-zero is a valid value of this type).
#[repr(C)]
pub(crate) struct NetStats {
    sockets: AtomicU64,
    sci_connections: AtomicU64,
    fallbacks: [AtomicU64; FallbackReason::COUNT],
}

const _: () = {
    use core::mem::{align_of, size_of};
    assert!(size_of::<NetStats>() == size_of::<crate::bindings::sci_net_stats>());
    assert!(align_of::<NetStats>() <= align_of::<crate::bindings::sci_net_stats>());
};

/// The counters at one moment.
pub(crate) struct StatsSnapshot {
    /// `AF_SCI` sockets created (`socket()` and `accept()`).
    pub(crate) sockets: u64,
    /// Connections that went over SCI.
    pub(crate) sci_connections: u64,
    /// Connections that fell back, per reason (indexed by the reason's value).
    pub(crate) fallbacks: [u64; FallbackReason::COUNT],
}

impl NetStats {
    /// One more `AF_SCI` socket.
    pub(crate) fn socket_created(&self) {
        self.sockets.fetch_add(1, Ordering::Relaxed);
    }

    /// One more connection over SCI.
    pub(crate) fn sci_connection(&self) {
        self.sci_connections.fetch_add(1, Ordering::Relaxed);
    }

    /// One more connection that fell back for `reason`.
    pub(crate) fn fallback(&self, reason: FallbackReason) {
        if let Some(counter) = self.fallbacks.get(reason.as_u32() as usize) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The counters now.
    pub(crate) fn snapshot(&self) -> StatsSnapshot {
        let mut fallbacks = [0; FallbackReason::COUNT];
        for (out, counter) in fallbacks.iter_mut().zip(&self.fallbacks) {
            *out = counter.load(Ordering::Relaxed);
        }
        StatsSnapshot {
            sockets: self.sockets.load(Ordering::Relaxed),
            sci_connections: self.sci_connections.load(Ordering::Relaxed),
            fallbacks,
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
    /// Inode number of the socket.
    pub(crate) inode: u64,
    /// Socket cookie.
    pub(crate) cookie: u64,
    /// Peer node, on the SCI data path.
    pub(crate) node: Option<NodeId>,
}
