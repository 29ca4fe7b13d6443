// SPDX-License-Identifier: GPL-2.0

//! The datagram sockets implicit connections can reach (seed §5.1.7): the second
//! listener table. A datagram socket is entered once its native UDP socket is bound
//! (by `bind`, or by the first send or connect); a request with the datagram flag
//! (`proto/frame.rs`) is served by the best match for its destination address, port and
//! namespace, as a listener is for a stream request, and the new end is handed to the
//! socket with no `accept()`.
//!
//! The socket layer implements [`DatagramPort`]; the control plane holds the entries and
//! sweeps them, so an implicit connection idle for `dgram_idle_ms` ends even when its
//! socket makes no more calls.

use super::Plane;
use crate::config::rules::Ip;
use crate::conn::addr::ListenAddr;
use crate::conn::Conn;
use crate::sys::bindings;
use crate::sys::errno::errno;
use core::sync::atomic::{AtomicUsize, Ordering};
use kernel::prelude::*;
use kernel::sync::{Arc, SpinLock};

/// Datagram sockets reachable over SCI at once (more are UDP only).
const MAX_PORTS: usize = 1024;

/// A datagram socket implicit connections reach (the socket layer's).
pub(crate) trait DatagramPort: Send + Sync {
    /// Takes the new implicit connection `conn` (established, its peer's address in
    /// `conn.peer`); `Err` gives it back when the socket closed, takes no datagrams from
    /// that peer (connected elsewhere, or wants control messages the fabric cannot give)
    /// or holds as many as it may.
    fn attach(&self, conn: Arc<Conn>) -> core::result::Result<(), Arc<Conn>>;
    /// The listener kthread's periodic look: ends the connections idle longer than the
    /// limit and frees those whose peer ended.
    fn sweep(&self, plane: &Plane<'_>, now_ms: i64);
}

/// One entry: what the socket is bound to, and the socket.
type Entry = (ListenAddr, Arc<dyn DatagramPort>);

/// The table of datagram sockets.
#[pin_data]
pub(crate) struct DatagramPorts {
    #[pin]
    entries: SpinLock<KVec<Option<Entry>>>,
    /// Entries in use (the sweep skips an empty table).
    used: AtomicUsize,
}

impl DatagramPorts {
    /// An empty table, its room allocated.
    pub(super) fn new() -> Result<impl PinInit<Self, Error>> {
        let mut entries = KVec::with_capacity(MAX_PORTS, GFP_KERNEL)?;
        for _ in 0..MAX_PORTS {
            entries.push(None, GFP_KERNEL)?;
        }
        Ok(try_pin_init!(Self {
            entries <- kernel::new_spinlock!(entries, "control::DatagramPorts"),
            used: AtomicUsize::new(0),
        }? Error))
    }

    /// Enters `port`, bound to `addr`. Two sockets bound to one address
    /// (`SO_REUSEADDR`/`SO_REUSEPORT`): the first is reached, the others take UDP only.
    pub(super) fn add(&self, addr: ListenAddr, port: Arc<dyn DatagramPort>) -> Result {
        let mut g = self.entries.lock();
        if g.iter().flatten().any(|(a, _)| *a == addr) {
            return Err(errno(bindings::EADDRINUSE));
        }
        let slot = g
            .as_mut_slice()
            .iter_mut()
            .find(|e| e.is_none())
            .ok_or(ENOSPC)?;
        *slot = Some((addr, port));
        self.used.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Removes `port` (dropped outside the lock).
    pub(super) fn remove(&self, port: &Arc<dyn DatagramPort>) {
        let old = {
            let mut g = self.entries.lock();
            g.as_mut_slice()
                .iter_mut()
                .find(|e| e.as_ref().is_some_and(|(_, p)| Arc::ptr_eq(p, port)))
                .and_then(Option::take)
        };
        if old.is_some() {
            self.used.fetch_sub(1, Ordering::Relaxed);
        }
        drop(old);
    }

    /// The socket a request for `dest:port` in `namespace` reaches: the best match.
    pub(super) fn find(
        &self,
        dest: Ip,
        port: u16,
        namespace: u64,
    ) -> Option<(ListenAddr, Arc<dyn DatagramPort>)> {
        let g = self.entries.lock();
        g.iter()
            .flatten()
            .filter_map(|(a, p)| Some((a.score(dest, port, namespace)?, a, p)))
            .max_by_key(|(score, _, _)| *score)
            .map(|(_, a, p)| (*a, p.clone()))
    }

    /// Every entry's socket, for the sweep to look at outside the lock (nothing
    /// allocated when there is none).
    pub(super) fn all(&self) -> KVec<Arc<dyn DatagramPort>> {
        let n = self.used.load(Ordering::Relaxed);
        if n == 0 {
            return KVec::new();
        }
        let mut out = KVec::with_capacity(MAX_PORTS.min(n + 16), GFP_KERNEL).unwrap_or_default();
        let g = self.entries.lock();
        for (_, p) in g.iter().flatten() {
            if out.push(p.clone(), GFP_ATOMIC).is_err() {
                break;
            }
        }
        out
    }
}
