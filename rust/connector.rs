// SPDX-License-Identifier: GPL-2.0

//! The connector kthread (seed §5.1.4): finishes non-blocking SCI connects.
//!
//! A non-blocking `connect()` that takes the SCI path mails its connect request and
//! returns `EINPROGRESS` at once, as TCP does after sending its SYN. The socket is handed
//! to this thread, which finishes the connect in the background: when the listener's
//! answer arrives (the listener kthread kicks it) the socket becomes connected and
//! writable; on a reject or when the answer does not come in time it starts the native
//! TCP connect in the socket's place, so the program sees one connect either way.

use crate::kthread::{self, ThreadMain};
use crate::socket_adapter::HeldSk;
use kernel::prelude::*;
use kernel::sync::{CondVar, Mutex};

/// How often the thread looks at pending connects when nothing kicks it (their
/// timeouts are checked at this granularity).
const TICK_MS: u32 = 50;

/// What the thread has been given since it last looked.
struct Inbox {
    /// Handed over by `connect()`, not yet taken by the thread.
    queued: KVec<HeldSk>,
    /// An answer arrived since the last pass (a kick that came while the thread was
    /// busy is not lost).
    kicked: bool,
}

/// Sockets with a non-blocking SCI connect in progress.
#[pin_data]
pub(crate) struct Connector {
    #[pin]
    inbox: Mutex<Inbox>,
    #[pin]
    kick: CondVar,
}

impl Connector {
    /// An idle connector.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            inbox <- kernel::new_mutex!(
                Inbox { queued: KVec::new(), kicked: false },
                "Connector::inbox"
            ),
            kick <- kernel::new_condvar!("Connector::kick"),
        })
    }

    /// Hands a socket with a pending SCI connect to the thread. On `Err` (no memory) the
    /// caller finishes the connect itself.
    pub(crate) fn submit(&self, sk: HeldSk) -> Result {
        self.inbox.lock().queued.push(sk, GFP_KERNEL)?;
        self.kick.notify_one();
        Ok(())
    }

    /// Something a pending connect waits for happened (an answer arrived).
    pub(crate) fn kick(&self) {
        self.inbox.lock().kicked = true;
        self.kick.notify_one();
    }

    /// Waits (up to a tick) until a socket is submitted or kicked, and takes the newly
    /// submitted sockets.
    fn next_pass(&self) -> KVec<HeldSk> {
        let mut g = self.inbox.lock();
        if !g.kicked && g.queued.is_empty() {
            let _ = self
                .kick
                .wait_interruptible_timeout(&mut g, kernel::time::msecs_to_jiffies(TICK_MS));
        }
        g.kicked = false;
        core::mem::take(&mut g.queued)
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
            for sk in self.next_pass() {
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
