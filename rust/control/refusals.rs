// SPDX-License-Identifier: GPL-2.0

//! Destinations whose node refused an SCI connect, remembered for `refusal_ms`.
//!
//! A refusal means no `AF_SCI` socket listens there (a plain TCP server, or none at all):
//! the connect falls back to TCP. A program that connects to such a server again and
//! again (a client of a database that is not run under the preload, a health check)
//! would pay the mailbox round trip of the SCI request before every TCP connect. So the
//! refusal is remembered for a short time, and connects to the same destination fall
//! back at once (reason `peer-rejected`, as before; counted apart in the statistics).
//!
//! A destination is its node, address, port, the namespace cookie its request named and
//! whether it was for a datagram socket (the implicit connections of `socket/dgram/`
//! are refused when no `AF_SCI` datagram socket is bound there, and remembered alike).
//! A listener (or datagram socket) that opens on this node forgets this node's refusals
//! of its port at once;
//! another node's new listener is found when the memory expires. [`SLOTS`] destinations
//! are kept; a new one takes the place of the oldest.

use crate::config::rules::Ip;
use crate::fabric::NodeId;
use kernel::prelude::*;

/// Destinations remembered at once.
pub(crate) const SLOTS: usize = 64;

/// A destination an SCI connect request named.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Destination {
    /// The node the request went to.
    pub(crate) node: NodeId,
    /// The listener's address (canonical) and port.
    pub(crate) ip: Ip,
    pub(crate) port: u16,
    /// The namespace cookie the request named (0: another node's initial namespace).
    pub(crate) namespace: u64,
    /// A request for an implicit connection between datagram sockets: a UDP port and a
    /// TCP port of one number are different destinations.
    pub(crate) datagram: bool,
}

/// One remembered refusal.
#[derive(Clone, Copy)]
struct Refusal {
    what: Destination,
    /// Forgotten from this time on (`ktime_get` ns).
    until_ns: i64,
}

/// The remembered refusals (under the table's lock).
pub(crate) struct Refusals {
    /// [`SLOTS`] of them, allocated once.
    slots: KVec<Option<Refusal>>,
    /// The slot the next new destination takes (the oldest).
    next: usize,
}

impl Refusals {
    /// Nothing remembered.
    pub(crate) fn new() -> Result<Self> {
        let mut slots = KVec::with_capacity(SLOTS, GFP_KERNEL)?;
        for _ in 0..SLOTS {
            slots.push(None, GFP_KERNEL)?;
        }
        Ok(Self { slots, next: 0 })
    }

    /// `what` refused a connect at `now_ns`: remembered for `ms` (0: not at all).
    pub(crate) fn remember(&mut self, what: Destination, now_ns: i64, ms: u32) {
        if ms == 0 {
            return;
        }
        let until_ns = now_ns.saturating_add(i64::from(ms).saturating_mul(1_000_000));
        let refusal = Refusal { what, until_ns };
        if let Some(slot) = self
            .slots
            .iter_mut()
            .find(|s| s.is_some_and(|r| r.what == what))
        {
            *slot = Some(refusal);
            return;
        }
        if let Some(slot) = self.slots.get_mut(self.next) {
            *slot = Some(refusal);
        }
        self.next = (self.next + 1) % SLOTS;
    }

    /// Whether `what` refused a connect less than its memory ago.
    pub(crate) fn refused(&self, what: &Destination, now_ns: i64) -> bool {
        self.slots
            .iter()
            .flatten()
            .any(|r| r.what == *what && now_ns < r.until_ns)
    }

    /// A listener opened on `node`'s `port`: its refusals there are over.
    pub(crate) fn forget_port(&mut self, node: NodeId, port: u16) {
        for slot in self.slots.iter_mut() {
            if slot.is_some_and(|r| r.what.node == node && r.what.port == port) {
                *slot = None;
            }
        }
    }
}
