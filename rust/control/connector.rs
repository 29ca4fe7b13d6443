// SPDX-License-Identifier: GPL-2.0

//! The connector kthread (seed §5.1.4): finishes non-blocking SCI connects.
//!
//! A non-blocking `connect()` that takes the SCI path mails its connect request and
//! returns `EINPROGRESS` at once, as TCP does after sending its SYN. The socket is handed
//! to this thread, which finishes the connect in the background: when the listener's
//! answer arrives (whoever serves it kicks the thread) the socket becomes connected and
//! writable; on a reject or when the answer does not come in time it starts the native
//! TCP connect in the socket's place, so the program sees one connect either way.
//!
//! It also publishes the bytes that gathering holds back once they may go (the reader
//! consumed what was in flight, or a hold ran out; `conn/nagle.rs`): a doorbell, in
//! atomic context, can only kick this thread.

use super::Plane;
use crate::sys::kthread;
use crate::sys::spinlock_bh::{new_spinlock_bh, SpinLockBh};
use core::sync::atomic::{AtomicUsize, Ordering};
use kernel::prelude::*;
use kernel::sync::{Arc, CondVar, Mutex};

/// A socket whose non-blocking SCI connect this thread finishes (the socket layer's
/// counted reference to it).
pub(crate) trait PendingConnect: Send + Sync {
    /// One step of the connect: `true` once it is finished (connected over SCI, fallen
    /// back to TCP, or the socket closed), after which the thread drops it. With
    /// `finish_now`, the step must finish it (the thread cannot keep it).
    fn step(&self, finish_now: bool) -> bool;
}

/// How often the thread looks at pending connects and held bytes when nothing kicks it
/// (their timeouts are checked at this granularity).
const TICK_MS: u32 = 50;

/// Sockets with a non-blocking SCI connect in progress, and kicks for held bytes.
#[pin_data]
pub(crate) struct Connector {
    /// Handed over by `connect()`, not yet taken by the thread.
    #[pin]
    inbox: Mutex<KVec<Arc<dyn PendingConnect>>>,
    /// Something happened since the last pass (a kick that came while the thread was
    /// busy is not lost). Taken with bottom halves off: kicks come from doorbells, which
    /// are delivered in softirq context.
    #[pin]
    kicked: SpinLockBh<bool>,
    #[pin]
    kick: CondVar,
    /// Sockets submitted and not finished yet: an answer kicks the thread only when
    /// one may be waiting for it (a blocking connect takes its own).
    connects: AtomicUsize,
}

impl Connector {
    /// An idle connector.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            inbox <- kernel::new_mutex!(KVec::new(), "Connector::inbox"),
            kicked <- new_spinlock_bh!(false, "Connector::kicked"),
            kick <- kernel::new_condvar!("Connector::kick"),
            connects: AtomicUsize::new(0),
        })
    }

    /// Hands a socket with a pending SCI connect to the thread. On `Err` (no memory) the
    /// caller finishes the connect itself.
    pub(crate) fn submit(&self, sk: Arc<dyn PendingConnect>) -> Result {
        self.inbox.lock().push(sk, GFP_KERNEL)?;
        self.connects.fetch_add(1, Ordering::AcqRel);
        self.kick();
        Ok(())
    }

    /// Something the thread waits for happened: an answer arrived, or a reader consumed
    /// bytes while later ones are held back. Safe in atomic context.
    pub(crate) fn kick(&self) {
        *self.kicked.lock() = true;
        self.kick.notify_one();
    }

    /// A connect answer (accept or reject) arrived: kicks the thread if a non-blocking
    /// connect is pending. One submitted after this look kicks the thread itself, which
    /// then sees the answer.
    pub(crate) fn answer_arrived(&self) {
        if self.connects.load(Ordering::Acquire) != 0 {
            self.kick();
        }
    }

    /// Waits (up to a tick) until a socket is submitted or kicked, and takes the newly
    /// submitted sockets.
    fn next_pass(&self) -> KVec<Arc<dyn PendingConnect>> {
        let mut kicked = self.kicked.lock();
        if !*kicked {
            let _ = self
                .kick
                .wait_interruptible_timeout(&mut kicked, kernel::time::msecs_to_jiffies(TICK_MS));
        }
        *kicked = false;
        drop(kicked);
        core::mem::take(&mut *self.inbox.lock())
    }

    /// The thread's body: one pass over the pending connects per wake-up, and over the
    /// connections whose held bytes may go.
    pub(super) fn run(&self, plane: &Plane<'_>) {
        // Slots of sockets whose connect is pending; a finished one leaves a hole that
        // the next submission fills (6.12's `KVec` cannot remove in place).
        let mut pending: KVec<Option<Arc<dyn PendingConnect>>> = KVec::new();
        while !kthread::should_stop() {
            if !pending.is_empty() && pending.iter().all(Option::is_none) {
                pending = KVec::new();
            }
            let submitted = self.next_pass();
            // A slot without a connection has no held bytes: its close released them.
            plane.table.held.tick(|slot| {
                if let Some(conn) = plane.conn(slot) {
                    conn.redecide(plane.fabric());
                }
            });
            for sk in submitted {
                if let Some(hole) = pending.iter_mut().find(|s| s.is_none()) {
                    *hole = Some(sk);
                } else if pending.reserve(1, GFP_KERNEL).is_ok() {
                    // Cannot fail: the room was reserved.
                    let _ = pending.push(Some(sk), GFP_KERNEL);
                } else {
                    // No memory to track it: finish it now (the native connect).
                    sk.step(true);
                    self.connects.fetch_sub(1, Ordering::AcqRel);
                }
            }
            // Finished (or closed) sockets are dropped here, in process context, outside
            // every lock.
            for slot in pending.iter_mut() {
                let done = slot.as_ref().is_some_and(|sk| sk.step(false));
                if done {
                    *slot = None;
                    self.connects.fetch_sub(1, Ordering::AcqRel);
                }
            }
        }
    }
}
