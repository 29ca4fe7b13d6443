// SPDX-License-Identifier: GPL-2.0

//! The end of an attachment: the module unloads ([`Attachment::quit`]: no connection is
//! left, nobody is waited for), or the device is removed ([`Attachment::leave`]).
//!
//! When the device is hot-unplugged (QEMU's `device_del`, a PCIe surprise-removal on real
//! hardware) its memory goes with it, and with it the receive rings of this node's
//! connections with other nodes, which their moves onto TCP still read.
//! [`Attachment::leave`] therefore runs while the device is still there:
//!
//! 1. this node's node word says "down" and its links end, as on unload; every peer sees
//!    it at its next tick, moves its connections with this node onto TCP, revokes its
//!    mappings and only then drops its link to this node: from then on it stores nothing
//!    into this node's memory;
//! 2. this node waits until every peer it was linked with dropped that link (or stopped
//!    beating), at most the liveness timeout and three ticks;
//! 3. it reports every such peer down
//!    ([`FabricEvents::node_down`](crate::fabric::FabricEvents::node_down)): with
//!    [`NodeLoss::Lost`] if the peer let go (its connections move onto TCP), with
//!    [`NodeLoss::Corrupted`] if it did not (a live peer that may still write into the
//!    rings: no copy could vouch for their bytes, so they reset);
//! 4. the layer above copies the rings it still reads into kernel memory
//!    ([`FabricEvents::memory_going`](crate::fabric::FabricEvents::memory_going),
//!    [`SegMem::rehome`](crate::fabric::memory::SegMem::rehome));
//! 5. the mapping is retired ([`crate::fabric::memory::DeviceMem::retire`]): nothing
//!    touches the device's addresses again.

use super::Attachment;
use crate::fabric::ivshmem::{node, now_ms, TICK_MS};
use crate::fabric::NodeLoss;
use crate::proto::liveness::{holds_link, PeerView};
use crate::sys::kthread;
use core::sync::atomic::Ordering;
use kernel::prelude::*;

/// How often a leaving node looks whether its peers let go.
const LEAVE_STEP_MS: u32 = 10;

impl Attachment {
    /// Leaves the region for good, without waiting for anyone (the module unloads: no
    /// connection is left).
    pub(in crate::fabric::ivshmem) fn quit(&self) {
        self.leaving.store(true, Ordering::Release);
        self.dev.free_irq();
        drop(self.polling.lock());
        node::leave(&self.region, self.me, self.word);
        self.log_left("left");
    }

    /// The device is being removed and is still there until this returns: leave so that
    /// no byte a connection still needs goes with it (see this file's doc). Process
    /// context; takes up to the liveness timeout.
    pub(in crate::fabric::ivshmem) fn leave(&self) {
        self.leaving.store(true, Ordering::Release);
        self.dev.free_irq();
        // A poll that runs finishes; later ones see `leaving`.
        drop(self.polling.lock());
        let mut linked = KVec::with_capacity(self.peers.len(), GFP_KERNEL).unwrap_or_default();
        for peer in self.peers.iter().filter(|p| p.id != self.me) {
            if peer.reachable.load(Ordering::Acquire)
                && linked.push(peer.clone(), GFP_KERNEL).is_err()
            {
                // No memory to track it: it resets below like a peer that did not let go.
                pr_warn!(
                    "ivshmem: node {} leaving: cannot track node {}\n",
                    self.me,
                    peer.id
                );
            }
        }
        node::leave(&self.region, self.me, self.word);
        let start = now_ms();
        let until = start
            .saturating_add(self.liveness.timeout_ms)
            .saturating_add(3 * TICK_MS);
        let mut holding = KVec::from_elem(true, linked.len(), GFP_KERNEL).unwrap_or_default();
        loop {
            let now = now_ms();
            let mut any = false;
            for (peer, held) in linked.iter().zip(holding.iter_mut()) {
                if *held {
                    let view = PeerView::read(&self.region, self.me, peer.id);
                    let live = peer.link.lock().tracker.watch(now, &view, self.liveness);
                    *held = holds_link(&view, self.generation, live);
                }
                any |= *held;
            }
            if !any || now >= until {
                break;
            }
            kthread::sleep_ms(LEAVE_STEP_MS);
        }
        let waited = now_ms().saturating_sub(start);
        for (i, peer) in linked.iter().enumerate() {
            let let_go =
                holding.get(i).is_some_and(|h| !*h) && !peer.corrupt.load(Ordering::Acquire);
            peer.unlink(self.me, &self.region, self.generation);
            let loss = if let_go {
                NodeLoss::Lost
            } else {
                NodeLoss::Corrupted
            };
            pr_info!(
                "ivshmem: node {} leaving (device removed): node {} {} after {} ms; {}\n",
                self.me,
                peer.id,
                if let_go { "let go" } else { "did not let go" },
                waited,
                match loss {
                    NodeLoss::Lost => "moving or resetting its connections",
                    NodeLoss::Corrupted => "resetting its connections",
                }
            );
            self.events.node_down(peer.id, loss);
        }
        // What the moves still read goes into kernel memory, then nothing touches the
        // device's memory again.
        self.events.memory_going();
        self.dev.mem.retire();
        self.log_left("left (device removed)");
    }

    fn log_left(&self, how: &str) {
        pr_info!(
            "ivshmem: node {} {} (polls {}, interrupts {}, frames {}, doorbells {})\n",
            self.me,
            how,
            self.polls.load(Ordering::Relaxed),
            self.irqs.load(Ordering::Relaxed),
            self.frames.load(Ordering::Relaxed),
            self.doorbells.load(Ordering::Relaxed)
        );
    }
}
