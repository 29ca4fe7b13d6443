// SPDX-License-Identifier: GPL-2.0

//! The connector kthread (seed §5.1.4): finishes non-blocking SCI connects.
//!
//! A non-blocking `connect()` that takes the SCI path mails its connect request and
//! returns `EINPROGRESS` at once, as TCP does after sending its SYN. The socket is handed
//! to this thread, which finishes the connect in the background: when the listener's
//! answer arrives (the listener kthread kicks it) the socket becomes connected and
//! writable; on a reject or when the answer does not come in time it starts the native
//! TCP connect in the socket's place, so the program sees one connect either way.
//!
//! It also publishes the bytes that gathering holds back once they may go (the reader
//! consumed what was in flight, or a hold ran out; `sci_conn/gather.rs`): a doorbell, in
//! atomic context, can only kick this thread.

use crate::kthread::{self, ThreadMain};
use crate::socket_adapter::HeldSk;
use kernel::prelude::*;
use kernel::sync::{CondVar, Mutex, SpinLock};

/// How often the thread looks at pending connects and held bytes when nothing kicks it
/// (their timeouts are checked at this granularity).
const TICK_MS: u32 = 50;

/// Sockets with a non-blocking SCI connect in progress, and kicks for held bytes.
#[pin_data]
pub(crate) struct Connector {
    /// Handed over by `connect()`, not yet taken by the thread.
    #[pin]
    inbox: Mutex<KVec<HeldSk>>,
    /// Something happened since the last pass (a kick that came while the thread was
    /// busy is not lost). A spinlock: kicks come from atomic context.
    #[pin]
    kicked: SpinLock<bool>,
    #[pin]
    kick: CondVar,
}

impl Connector {
    /// An idle connector.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            inbox <- kernel::new_mutex!(KVec::new(), "Connector::inbox"),
            kicked <- kernel::new_spinlock!(false, "Connector::kicked"),
            kick <- kernel::new_condvar!("Connector::kick"),
        })
    }

    /// Hands a socket with a pending SCI connect to the thread. On `Err` (no memory) the
    /// caller finishes the connect itself.
    pub(crate) fn submit(&self, sk: HeldSk) -> Result {
        self.inbox.lock().push(sk, GFP_KERNEL)?;
        self.kick();
        Ok(())
    }

    /// Something the thread waits for happened: an answer arrived, or a reader consumed
    /// bytes while later ones are held back. Safe in atomic context.
    pub(crate) fn kick(&self) {
        *self.kicked.lock() = true;
        self.kick.notify_one();
    }

    /// Waits (up to a tick) until a socket is submitted or kicked, and takes the newly
    /// submitted sockets.
    fn next_pass(&self) -> KVec<HeldSk> {
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

    /// The thread's body: one pass over the pending connects per wake-up.
    fn run(&self) {
        // Slots of sockets whose connect is pending; a finished one leaves a hole that
        // the next submission fills (6.12's `KVec` cannot remove in place).
        let mut pending: KVec<Option<HeldSk>> = KVec::new();
        while !kthread::should_stop() {
            if !pending.is_empty() && pending.iter().all(Option::is_none) {
                pending = KVec::new();
            }
            let submitted = self.next_pass();
            if let Some(plane) = crate::global::plane() {
                crate::sci_conn::gather_tick(plane);
            }
            for sk in submitted {
                if let Some(hole) = pending.iter_mut().find(|s| s.is_none()) {
                    *hole = Some(sk);
                } else if pending.reserve(1, GFP_KERNEL).is_ok() {
                    // Cannot fail: the room was reserved.
                    let _ = pending.push(Some(sk), GFP_KERNEL);
                } else {
                    // No memory to track it: finish it now (the native connect).
                    let (own, state) = sk.parts();
                    state.connect_step(&own, true);
                }
            }
            // Finished (or closed) sockets are dropped here, in process context, outside
            // every lock.
            for slot in pending.iter_mut() {
                let done = slot.as_ref().is_some_and(|sk| {
                    let (own, state) = sk.parts();
                    state.connect_step(&own, false)
                });
                if done {
                    *slot = None;
                }
            }
        }
    }
}

/// The connector kthread's body.
pub(crate) struct ConnectorThread;

impl ThreadMain for ConnectorThread {
    fn main(&'static self) {
        // The thread runs between `start_threads` and the drop of its `KThread`, within
        // the control plane's lifetime.
        if let Some(plane) = crate::global::plane() {
            plane.connector().run();
        }
    }
}
