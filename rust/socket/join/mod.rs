// SPDX-License-Identifier: GPL-2.0

//! Where the TCP connection of a failed-over SCI connection meets the socket it belongs
//! to, at the listening end (`sock/failover.rs`).
//!
//! When an SCI connection's fabric path is lost, its connecting end opens a TCP
//! connection from the same address and port to the listener's address. It arrives in
//! the queue of the listening socket's native TCP listener, like any connection. Every
//! SCI connection accepted on a listener is a *member* of the listener's join point; a
//! TCP connection that comes from a member's peer address and port is that member's (the
//! peer's socket holds that port while it is open, so no other connection can come from
//! there) and is handed to it, never to `accept()`. An SCI connection still waiting in the
//! listener's queue for `accept()` becomes a member as soon as a TCP connection from its
//! peer arrives (its peer may move before the program accepts it), and its socket finds
//! that landing when `accept()` takes it. Once the peer's socket is gone, its
//! port is free at once (its native socket never connected: no `TIME_WAIT`), and a new
//! connection from it is the program's: the peer's close stores its closed flag into the
//! member's memory before the port is free, so a member whose peer closed takes nothing
//! (unless this end lost the fabric path too: the close may then be the move's).
//! Either `accept()` finds a join first, or the connector kthread looks for it when a
//! member fails over ([`JoinPoint::hunt`]); connections the kthread takes that are not
//! joins wait here for `accept()`, in order.
//!
//! One case cannot be told at once: a connect that gave up waiting for its SCI answer
//! (it timed out, or the answer was lost) falls back to TCP from its port while the
//! listener's end, answered, is a member here. A member that holds a connection while it
//! is not moving has it judged by its first bytes ([`judge`]): a resume header naming the
//! member is its peer moving first (the member moves too), anything else shows the
//! peer's end is gone (the member is reset, as TCP resets a connection whose peer's port
//! opened a new one) and the connection goes to `accept()`.

mod judge;

use crate::config::rules::Ip;
use crate::conn::Conn;
use crate::control::ListenQueue;
use crate::socket::native::{Native, QUEUED_PEERS_MAX};
use crate::socket::native_hooks::SavedCallbacks;
use crate::sys::params::failover_ms;
use crate::sys::wake::{wake_sk, Wake};
use core::sync::atomic::{AtomicI64, Ordering};
use kernel::prelude::*;
use kernel::sync::{Arc, Mutex};

/// One SCI connection accepted on a listener: where its TCP connection lands.
#[pin_data(PinnedDrop)]
pub(crate) struct Landing {
    /// The peer's address and port (canonical IP).
    peer: (Ip, u16),
    /// The member's SCI connection: whether its peer's socket is still there.
    conn: Arc<Conn>,
    /// The TCP connection that arrived for it, until its socket takes it.
    #[pin]
    joined: Mutex<Option<Native>>,
    /// When that connection arrived (ms), for [`judge`].
    since_ms: AtomicI64,
}

impl Landing {
    /// Whether a TCP connection from the peer's address and port may be this member's
    /// (see the module's doc).
    fn awaits(&self, peer: (Ip, u16)) -> bool {
        self.peer == peer && self.conn.peer_may_follow()
    }

    /// Takes the TCP connection that arrived, if any.
    pub(crate) fn take(&self) -> Option<Native> {
        self.joined.lock().take()
    }
}

#[pinned_drop]
impl PinnedDrop for Landing {
    fn drop(self: Pin<&mut Self>) {
        // Arrived after its socket stopped waiting (or was closed): closed as TCP closes
        // a connection nobody accepted.
        if let Some(native) = self.joined.lock().take() {
            native.release();
        }
    }
}

/// What a join point holds, under its lock.
struct Inner {
    /// The listening native socket; `None` once the listening socket is closed.
    listener: Option<Native>,
    /// The listening `AF_SCI` socket, to wake when a connection waits in `stash`.
    wake: usize,
    /// The listening native socket's own callbacks, which its accepted connections
    /// inherit as forwarders and must get back.
    saved: SavedCallbacks,
    /// Connections the kthread took while looking for a join, for `accept()` (oldest
    /// first; taken ones leave holes until all are taken: 6.12's `KVec` cannot remove).
    stash: KVec<Option<Native>>,
    /// The SCI connections accepted here that are still open (a closed one leaves a hole
    /// the next one fills).
    members: KVec<Option<Arc<Landing>>>,
    /// Peers of members that closed lately, and until when (ms): the peer may not have
    /// seen the close before its fabric path went, and move onto TCP; its TCP connection
    /// is dropped (the peer resets), never given to `accept()`.
    left: KVec<Option<((Ip, u16), i64)>>,
    /// A member that is not moving got a connection (or one waits in the listener's
    /// queue for such a member): it is to be judged ([`judge`]).
    judge_due: bool,
    /// The connector kthread is judging.
    judging: bool,
}

/// How long a closed member's peer may still arrive (ms), beyond `failover_ms`.
const LEFT_GRACE_MS: i64 = 2000;

fn now_ms() -> i64 {
    kernel::time::Ktime::ktime_get().to_ms()
}

/// The join point of one listening socket.
#[pin_data(PinnedDrop)]
pub(crate) struct JoinPoint {
    #[pin]
    inner: Mutex<Inner>,
    /// The listener's SCI connections waiting for `accept()`.
    queue: Arc<ListenQueue>,
}

/// Where a native connection comes from (canonical IP).
fn source(native: &Native) -> (Ip, u16) {
    let (ip, port) = native.addrs().peer;
    (ip.canonical(), port)
}

/// Whether a connection waiting in `listener`'s accept queue comes from a peer (canonical
/// IP) for which `pick` holds; true too when more wait than are looked at.
fn any_queued(listener: &Native, mut pick: impl FnMut((Ip, u16)) -> bool) -> bool {
    let mut peers = [(Ip::V4([0; 4]), 0u16); QUEUED_PEERS_MAX];
    let n = listener.queued_peers(&mut peers);
    n > peers.len() || peers.iter().take(n).any(|&peer| pick(peer))
}

impl JoinPoint {
    /// The join point of the listening `native` socket, whose `AF_SCI` socket is `wake`,
    /// whose own callbacks are `saved` and whose SCI connections wait in `queue`.
    pub(crate) fn new(
        listener: Native,
        wake: usize,
        saved: SavedCallbacks,
        queue: Arc<ListenQueue>,
    ) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                inner <- kernel::new_mutex!(
                    Inner {
                        listener: Some(listener),
                        wake,
                        saved,
                        stash: KVec::new(),
                        members: KVec::new(),
                        left: KVec::new(),
                        judge_due: false,
                        judging: false,
                    },
                    "JoinPoint::inner"
                ),
                queue,
            }),
            GFP_KERNEL,
        )
    }

    /// Registers `conn`, an SCI connection accepted here, from `peer` (or finds it
    /// registered already: a TCP connection from its peer arrived while it waited for
    /// `accept()`).
    pub(crate) fn enter(&self, peer: (Ip, u16), conn: Arc<Conn>) -> Result<Arc<Landing>> {
        Self::enter_locked(&mut self.inner.lock(), peer, conn)
    }

    fn enter_locked(g: &mut Inner, peer: (Ip, u16), conn: Arc<Conn>) -> Result<Arc<Landing>> {
        if let Some(m) = g
            .members
            .iter()
            .flatten()
            .find(|m| Arc::ptr_eq(&m.conn, &conn))
        {
            return Ok(m.clone());
        }
        let landing = Arc::pin_init(
            pin_init!(Landing {
                peer: (peer.0.canonical(), peer.1),
                conn,
                joined <- kernel::new_mutex!(None, "Landing::joined"),
                since_ms: AtomicI64::new(0),
            }),
            GFP_KERNEL,
        )?;
        if let Some(hole) = g.members.iter_mut().find(|m| m.is_none()) {
            *hole = Some(landing.clone());
        } else {
            g.members.push(Some(landing.clone()), GFP_KERNEL)?;
        }
        Ok(landing)
    }

    /// The socket of `landing` closed: what lands for it from now on is not a join. With
    /// `lost` (its fabric path was lost before it closed: its peer may still move onto
    /// TCP, not having seen the close), the peer's TCP connection is dropped for a while
    /// instead of reaching `accept()`. Only then: a closed connection's port is free, and
    /// the peer may reuse it at once for a plain TCP connection.
    ///
    /// Without `lost`, a TCP connection the member held and never took is a program's
    /// (see the module's doc) and goes to `accept()`; and the listener is woken when one
    /// from the member's peer waits in its queue, hidden from `poll()` until now.
    pub(crate) fn leave(&self, landing: &Arc<Landing>, lost: bool) {
        let mut g = self.inner.lock();
        if let Some(m) = g
            .members
            .iter_mut()
            .find(|m| m.as_ref().is_some_and(|m| Arc::ptr_eq(m, landing)))
        {
            *m = None;
        }
        if !lost {
            let mut wake = false;
            if let Some(native) = landing.take() {
                Self::stash_locked(&mut g, native);
                wake = true;
            }
            if let Some(listener) = g.listener {
                wake |= any_queued(&listener, |peer| peer == landing.peer);
            }
            if wake {
                wake_sk(g.wake, Wake::Readable);
            }
            return;
        }
        let now = now_ms();
        let until = now + i64::from(failover_ms()) + LEFT_GRACE_MS;
        for l in g.left.iter_mut() {
            if l.is_some_and(|(_, t)| t <= now) {
                *l = None;
            }
        }
        let entry = Some((landing.peer, until));
        if let Some(hole) = g.left.iter_mut().find(|l| l.is_none()) {
            *hole = entry;
        } else {
            // Without memory for it, a late peer's connection may reach `accept()`.
            let _ = g.left.push(entry, GFP_KERNEL);
        }
    }

    /// Hands `native` to the member it comes from (one still waiting for `accept()`
    /// becomes a member now); false (and `native` untouched) when it is nobody's join.
    /// One that reaches a member that is not moving is to be judged.
    fn deliver_locked(&self, g: &mut Inner, native: Native) -> bool {
        let from = source(&native);
        let member = g.members.iter().flatten().find(|m| m.awaits(from)).cloned();
        let Some(m) = member.or_else(|| self.enter_queued(g, from)) else {
            if Self::left_lately(g, from, now_ms()) {
                // A closed member's peer moving onto TCP: it resets.
                native.release();
                return true;
            }
            return false;
        };
        g.saved.restore(&native);
        m.since_ms.store(now_ms(), Ordering::Relaxed);
        let old = m.joined.lock().replace(native);
        g.judge_due |= !m.conn.moving();
        // A second connection from the same peer port cannot be a live one's join.
        if let Some(old) = old {
            old.release();
        }
        true
    }

    /// The SCI connection from `from` waiting in the listener's queue, if any, made a
    /// member (its peer moved onto TCP before the program accepted it).
    fn enter_queued(&self, g: &mut Inner, from: (Ip, u16)) -> Option<Arc<Landing>> {
        let peer_of = |c: &Conn| c.peer.ip_port().map(|(ip, port)| (ip.canonical(), port));
        let conn = self.queue.find(|c| peer_of(c) == Some(from))?;
        if !conn.peer_may_follow() {
            return None;
        }
        let landing = Self::enter_locked(g, from, conn).ok()?;
        landing.awaits(from).then_some(landing)
    }

    /// Whether `from` is the peer of a member that closed lately (as of `now`, ms).
    fn left_lately(g: &Inner, from: (Ip, u16), now: i64) -> bool {
        g.left
            .iter()
            .flatten()
            .any(|&(peer, until)| until > now && peer == from)
    }

    /// `accept()` took `native`: true when it was a join (handed to its member, or
    /// dropped as a closed member's).
    pub(crate) fn deliver(&self, native: Native) -> bool {
        self.deliver_locked(&mut self.inner.lock(), native)
    }

    /// Whether the listener's accept queue holds a connection for `accept()`, not only
    /// members' TCP connections: a listener must not poll readable for those, or a
    /// program would call `accept()` and find nothing (a blocking one would sleep).
    ///
    /// A member's connection hidden so is to be judged ([`judge`]): nothing else would
    /// take it from the queue of a listener that does not poll readable.
    pub(crate) fn queue_has_others(&self, listener: &Native) -> bool {
        let mut g = self.inner.lock();
        let now = now_ms();
        if g.members.iter().all(Option::is_none) && g.left.iter().flatten().all(|l| l.1 <= now) {
            return true;
        }
        let mut hidden = false;
        let others = any_queued(listener, |peer| {
            let member = g.members.iter().flatten().any(|m| m.awaits(peer));
            hidden |= member;
            !member && !Self::left_lately(&g, peer, now)
        });
        g.judge_due |= hidden && !others;
        others
    }

    /// The oldest connection the kthread took for `accept()`.
    pub(crate) fn pop_stash(&self) -> Option<Native> {
        let mut g = self.inner.lock();
        let first = g.stash.iter_mut().find_map(Option::take);
        if g.stash.iter().all(Option::is_none) {
            g.stash = KVec::new();
        }
        first
    }

    /// Whether connections wait for `accept()` here.
    pub(crate) fn has_stash(&self) -> bool {
        self.inner.lock().stash.iter().any(Option::is_some)
    }

    /// The connector kthread looks for a member's TCP connection: takes every queued
    /// connection from the listener, hands joins to their members and keeps the others
    /// for `accept()` (waking the listening socket).
    pub(crate) fn hunt(&self) {
        let mut g = self.inner.lock();
        let Some(listener) = g.listener else {
            return;
        };
        let mut stashed = false;
        while let Ok(native) = listener.accept_for_join() {
            if self.deliver_locked(&mut g, native) {
                continue;
            }
            Self::stash_locked(&mut g, native);
            stashed = true;
        }
        if stashed {
            wake_sk(g.wake, Wake::Readable);
        }
    }

    /// Keeps `native` for `accept()`; closed instead when the listener is gone or there
    /// is no memory to keep it (as a listener's full queue drops a connection).
    fn stash_locked(g: &mut Inner, native: Native) {
        if g.listener.is_none() || g.stash.push(Some(native), GFP_KERNEL).is_err() {
            native.release();
        }
    }

    /// A connection a member took turned out not to be its TCP connection (it did not
    /// start with the member's resume header): it goes to `accept()` after all.
    pub(crate) fn give_back(&self, native: Native) {
        let mut g = self.inner.lock();
        Self::stash_locked(&mut g, native);
        wake_sk(g.wake, Wake::Readable);
    }

    /// The listening socket is closing: no join or stash is served any more, and the
    /// connections that waited for `accept()` are closed (as TCP closes a listener's
    /// queue).
    pub(crate) fn close(&self) {
        let mut g = self.inner.lock();
        g.listener = None;
        g.wake = 0;
        for native in g.stash.iter_mut().filter_map(Option::take) {
            native.release();
        }
        g.stash = KVec::new();
    }
}

#[pinned_drop]
impl PinnedDrop for JoinPoint {
    fn drop(self: Pin<&mut Self>) {
        self.close();
    }
}
