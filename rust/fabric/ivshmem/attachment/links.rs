// SPDX-License-Identifier: GPL-2.0

//! The liveness tick: the heartbeat, and for every other node of the region a look at its
//! words that links with it, keeps the link, or ends it and reports the node down.

use super::{Attachment, Peer, DOORBELL_ON};
use crate::fabric::NodeLoss;
use crate::proto::liveness::{PeerAction, PeerView};
use crate::proto::region::LinkWord;
use core::sync::atomic::Ordering;
use kernel::prelude::*;

impl Attachment {
    /// One liveness tick: heartbeat, then a look at every peer.
    pub(super) fn tick(&self, now: u64) {
        let beat = self.beat.fetch_add(1, Ordering::Relaxed) + 1;
        self.region.set_heartbeat(self.me, beat);
        if self.region.node_word(self.me) != Some(self.word)
            && !self.word_changed.swap(true, Ordering::Relaxed)
        {
            // Someone else wrote this node's word: the fabric manager (the ivshmem
            // server) marking it down because it took this guest for gone, or a peer
            // writing garbage. Peers no longer link with it; reloading the module rejoins.
            pr_info!(
                "ivshmem: node {} found its node word changed by another party (marked down by the ivshmem server, or overwritten); peers will not link with it until af_sci is loaded again\n",
                self.me
            );
        }
        for peer in self.peers.iter() {
            if peer.id != self.me {
                self.tick_peer(peer, now);
            }
        }
        self.published
            .lock()
            .republish(&self.region, self.me, &*self.events, now);
    }

    fn tick_peer(&self, peer: &Peer, now: u64) {
        let view = PeerView::read(&self.region, self.me, peer.id);
        if let Some(w) = view.word {
            let on = if w.doorbell { DOORBELL_ON } else { 0 };
            peer.doorbell
                .store(u32::from(w.doorbell_id) | on, Ordering::Release);
        }
        let was_reachable = peer.reachable.load(Ordering::Acquire);
        let mut link = peer.link.lock();
        let mut action = link
            .tracker
            .observe(now, &view, self.generation, self.liveness);
        if action == PeerAction::None && peer.broken.swap(false, Ordering::AcqRel) {
            if let Some(g) = link.tracker.unlink(&view, self.generation) {
                action = PeerAction::Down(g);
            }
        }
        let (last_beat, still_ms) = (link.tracker.last_beat_ms(), link.tracker.still_ms());
        let down = match action {
            PeerAction::None => None,
            PeerAction::Down(g) => {
                peer.cut(&mut link);
                Some(g)
            }
            PeerAction::Link(g) => {
                // What the peer writes here starts afresh, before the link is published;
                // so does what this node writes there (the peer resets it on its side).
                let _ = self.region.reset_inbound(self.me, peer.id);
                peer.bell_rx.lock().reset();
                peer.bell_tx.lock().reset();
                peer.corrupt.store(false, Ordering::Release);
                link.tx = self.region.mailbox_tx(self.me, peer.id).ok();
                peer.open_rx(&mut link, self.region.mailbox_rx(self.me, peer.id).ok());
                self.region
                    .set_link(self.me, peer.id, link.tracker.link_word());
                pr_info!(
                    "ivshmem: node {} linked with node {} (generation {})\n",
                    self.me,
                    peer.id,
                    g
                );
                None
            }
        };
        peer.reachable
            .store(link.tracker.reachable(), Ordering::Release);
        drop(link);
        if let (Some(g), false) = (down, was_reachable) {
            // Never linked both ways: nothing of the peer's was used. Usually a link the
            // peer did not return in time, remade at the next tick.
            pr_info!(
                "ivshmem: link with node {} (generation {}) dropped before it was returned\n",
                peer.id,
                g
            );
            self.region.set_link(self.me, peer.id, LinkWord::NONE);
        } else if let Some(g) = down {
            // The last heartbeat seen, on this node's monotonic clock (CLOCK_MONOTONIC
            // in ms): tests measure how soon after it the connections failed.
            let silent_ms = now.saturating_sub(last_beat);
            let loss = if peer.corrupt.swap(false, Ordering::AcqRel) || view.word.is_none() {
                NodeLoss::Corrupted
            } else {
                NodeLoss::Lost
            };
            pr_info!(
                "ivshmem: node {} (generation {}) is down, last heartbeat seen at {} ms ({} ms ago, {} ms of them watched; {}); {}\n",
                peer.id,
                g,
                last_beat,
                silent_ms,
                still_ms,
                down_cause(&view, g, still_ms >= self.liveness.timeout_ms),
                match loss {
                    NodeLoss::Lost => "moving or resetting its connections",
                    NodeLoss::Corrupted => "resetting its connections",
                }
            );
            self.events.node_down(peer.id, loss);
            // Only now may the peer relink: its old mappings and connections are gone.
            self.region.set_link(self.me, peer.id, LinkWord::NONE);
        }
    }
}

/// Why the link with a peer's generation `g` ended, as its last view shows (for the
/// log); `timed_out`: its heartbeat stood still for the timeout.
fn down_cause(view: &PeerView, g: u32, timed_out: bool) -> &'static str {
    use crate::proto::region::NodeState;
    match view.word {
        None => "its node word is unreadable",
        Some(w) if w.generation != g && w.state == NodeState::Up => {
            "it came back as a new generation"
        }
        Some(w) if w.generation != g => "it is rejoining",
        Some(w) => match w.state {
            NodeState::Up if timed_out => "heartbeat timeout",
            // Alive, but it dropped or remade its link: usually it counted this node down.
            NodeState::Up => "it ended the link",
            NodeState::Down => "it left or was marked down",
            NodeState::Joining => "it is rejoining",
            NodeState::Absent => "its entry was cleared",
        },
    }
}
