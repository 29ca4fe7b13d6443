// SPDX-License-Identifier: GPL-2.0

//! The SCI connections waiting for `accept()` on one listening socket: filled by the
//! listener kthread as requests are served, emptied by `accept()`.

use crate::conn::addr::ListenAddr;
use crate::conn::Conn;
use crate::sys::wake::{wake_sk, Wake};
use kernel::prelude::*;
use kernel::sync::{Arc, SpinLock};

/// SCI connections a listener holds for `accept()` at most.
const ACCEPT_BACKLOG: usize = 128;

/// The SCI connections waiting for `accept()` on one listening socket.
#[pin_data]
pub(crate) struct ListenQueue {
    pub(super) addr: ListenAddr,
    #[pin]
    inner: SpinLock<ListenInner>,
}
struct ListenInner {
    ring: KVec<Option<Arc<Conn>>>,
    head: usize,
    len: usize,
    /// The listening sk to wake (0 once it closed).
    owner: usize,
}
impl ListenQueue {
    /// A queue for a socket listening on `addr`, waking `owner`.
    pub(crate) fn new(addr: ListenAddr, owner: usize) -> Result<Arc<Self>> {
        let mut ring = KVec::with_capacity(ACCEPT_BACKLOG, GFP_KERNEL)?;
        for _ in 0..ACCEPT_BACKLOG {
            ring.push(None, GFP_KERNEL)?;
        }
        Arc::pin_init(
            pin_init!(Self {
                addr,
                inner <- kernel::new_spinlock!(ListenInner { ring, head: 0, len: 0, owner }, "ListenQueue"),
            }),
            GFP_KERNEL,
        )
    }

    /// Takes the oldest established connection.
    pub(crate) fn pop(&self) -> Option<Arc<Conn>> {
        let mut g = self.inner.lock();
        if g.len == 0 {
            return None;
        }
        let head = g.head;
        let conn = g.ring.as_mut_slice()[head].take();
        g.head = (head + 1) % ACCEPT_BACKLOG;
        g.len -= 1;
        conn
    }

    /// A waiting connection for which `pick` holds, left in the queue (`pick` runs under
    /// the queue's spinlock: it must not sleep or take a connection's lock).
    pub(crate) fn find(&self, pick: impl Fn(&Conn) -> bool) -> Option<Arc<Conn>> {
        let g = self.inner.lock();
        (0..g.len)
            .filter_map(|i| g.ring.as_slice()[(g.head + i) % ACCEPT_BACKLOG].as_ref())
            .find(|c| pick(c))
            .cloned()
    }

    /// How many connections wait.
    pub(crate) fn len(&self) -> usize {
        self.inner.lock().len
    }

    /// Whether a connection is waiting.
    pub(crate) fn is_empty(&self) -> bool {
        self.inner.lock().len == 0
    }

    pub(super) fn push(&self, conn: Arc<Conn>) -> core::result::Result<(), Arc<Conn>> {
        let mut g = self.inner.lock();
        if g.len == ACCEPT_BACKLOG || g.owner == 0 {
            return Err(conn);
        }
        let tail = (g.head + g.len) % ACCEPT_BACKLOG;
        g.ring.as_mut_slice()[tail] = Some(conn);
        g.len += 1;
        wake_sk(g.owner, Wake::Readable);
        Ok(())
    }

    /// The listener closed: no more connections, and those still queued are returned
    /// (to be aborted) after the lock.
    pub(crate) fn close(&self) -> KVec<Arc<Conn>> {
        let mut left = KVec::new();
        while let Some(conn) = self.pop() {
            let _ = left.push(conn, GFP_KERNEL);
        }
        self.inner.lock().owner = 0;
        left
    }
}
