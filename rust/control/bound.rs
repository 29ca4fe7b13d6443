// SPDX-License-Identifier: GPL-2.0

//! A table of sockets by the address they are bound to, as connect requests find them:
//! the listeners of stream sockets (`table.rs`) and the datagram sockets implicit
//! connections reach (`datagram_ports.rs`). One entry per address; a request reaches the
//! best match, as TCP's listener lookup ranks them ([`ListenAddr::score`]).

use crate::config::rules::Ip;
use crate::conn::addr::ListenAddr;
use crate::sys::bindings;
use crate::sys::errno::errno;
use core::sync::atomic::{AtomicUsize, Ordering};
use kernel::prelude::*;
use kernel::sync::SpinLock;

/// The table (its room allocated once).
#[pin_data]
pub(crate) struct Bound<T> {
    #[pin]
    entries: SpinLock<KVec<Option<(ListenAddr, T)>>>,
    /// Entries in use (a walk skips an empty table).
    used: AtomicUsize,
}

impl<T: Clone> Bound<T> {
    /// An empty table with room for `capacity` sockets.
    pub(super) fn new(capacity: usize) -> Result<impl PinInit<Self, Error>> {
        let mut entries = KVec::with_capacity(capacity, GFP_KERNEL)?;
        for _ in 0..capacity {
            entries.push(None, GFP_KERNEL)?;
        }
        Ok(try_pin_init!(Self {
            entries <- kernel::new_spinlock!(entries, "control::Bound::entries"),
            used: AtomicUsize::new(0),
        }? Error))
    }

    /// Enters `item`, bound to `addr`: `EADDRINUSE` when a socket bound there is entered
    /// already (`SO_REUSEPORT` siblings after the first are not reached), `ENOSPC` when
    /// the table is full.
    pub(super) fn add(&self, addr: ListenAddr, item: T) -> Result {
        let mut g = self.entries.lock();
        if g.iter().flatten().any(|(a, _)| *a == addr) {
            return Err(errno(bindings::EADDRINUSE));
        }
        let slot = g
            .as_mut_slice()
            .iter_mut()
            .find(|e| e.is_none())
            .ok_or(ENOSPC)?;
        *slot = Some((addr, item));
        self.used.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Removes the entry `is` picks (dropped outside the lock).
    pub(super) fn remove(&self, is: impl Fn(&T) -> bool) {
        let old = {
            let mut g = self.entries.lock();
            g.as_mut_slice()
                .iter_mut()
                .find(|e| e.as_ref().is_some_and(|(_, item)| is(item)))
                .and_then(Option::take)
        };
        if old.is_some() {
            self.used.fetch_sub(1, Ordering::Relaxed);
        }
        drop(old);
    }

    /// The socket a request for `dest:port` in `namespace` reaches: the best match.
    pub(super) fn find(&self, dest: Ip, port: u16, namespace: u64) -> Option<(ListenAddr, T)> {
        let g = self.entries.lock();
        g.iter()
            .flatten()
            .filter_map(|(a, item)| Some((a.score(dest, port, namespace)?, a, item)))
            .max_by_key(|(score, _, _)| *score)
            .map(|(_, a, item)| (*a, item.clone()))
    }

    /// Every entry's socket, to be looked at outside the lock (nothing allocated when
    /// there is none).
    pub(super) fn all(&self) -> KVec<T> {
        let n = self.used.load(Ordering::Relaxed);
        if n == 0 {
            return KVec::new();
        }
        let mut out = KVec::with_capacity(n + 16, GFP_KERNEL).unwrap_or_default();
        let g = self.entries.lock();
        for (_, item) in g.iter().flatten() {
            if out.push(item.clone(), GFP_ATOMIC).is_err() {
                break;
            }
        }
        out
    }
}
