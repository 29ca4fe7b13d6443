// SPDX-License-Identifier: GPL-2.0

//! Peer liveness and the link protocol between two nodes of a shared region.
//!
//! Every node bumps a heartbeat counter in its node entry on a fixed tick. A node
//! watches each peer with a [`PeerTracker`]: a peer is *alive* while its node word says
//! "up" and its heartbeat keeps changing; it is *dead* once the heartbeat stood still for
//! `timeout_ms` of this node's *watch* **and** for `min_ticks` of this node's own
//! observations. The watch is the time between this node's observations, each gap
//! counted as at most two ticks: a node that was not running itself cannot tell a silent
//! peer from a peer that was stalled with it (a loaded host stops both guests' vCPUs at
//! once), so its own stall does not count against the peer, and it does not declare
//! everybody dead on its first look back.
//!
//! Two nodes talk (map each other's segments, send frames, ring doorbells) only while
//! they are *linked* both ways: node i links with node j's generation g by resetting its
//! halves of their mailboxes and publishing the link word `links[j] = (g, seq)` in its own
//! entry (`seq` is i's link sequence number, new for every link); j does the same. A link
//! ends ("down") when the peer stops beating, leaves, comes back with a new generation,
//! or changes the link word it showed us (it dropped or remade its link). The node then
//! revokes its mappings of the peer, resets the connections to it, and only then
//! publishes `links[j] = 0`.
//!
//! A link is never remade while the other side may still hold the old one: after a
//! down, the tracker waits until the peer's link word differs from the one it showed
//! during the old link (the peer went through its own down), or the peer changed
//! generation. A link the peer does not return within two timeouts is dropped and
//! remade (a new word), so a peer waiting for our old word to change is never stuck. A node declared dead while merely stalled therefore finds its link gone
//! when it wakes up, goes through its own down, and both relink cleanly. And a node
//! rejoining with a new generation waits until no live peer still links to its old
//! generation before it hands out memory of its area ([`holds_old_link`]), so no stale
//! store from a peer lands in a new segment.

use super::region::{LinkWord, NodeId, NodeState, NodeWord, Region};
use super::segment::Segment;

/// What a node sees of a peer in one look at the region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PeerView {
    /// The peer's node word (`None`: unreadable).
    pub(crate) word: Option<NodeWord>,
    /// The peer's heartbeat counter.
    pub(crate) heartbeat: u64,
    /// The peer's link word for us.
    pub(crate) link_to_me: LinkWord,
}

impl PeerView {
    /// What `me` sees of `peer` in one look at `region`.
    pub(crate) fn read<S: Segment>(region: &Region<S>, me: NodeId, peer: NodeId) -> Self {
        Self {
            word: region.node_word(peer),
            heartbeat: region.heartbeat(peer),
            link_to_me: region.link(peer, me),
        }
    }

    /// The peer's generation if it says it is up.
    fn up_generation(&self) -> Option<u32> {
        match self.word {
            Some(w) if w.state == NodeState::Up && w.generation != 0 => Some(w.generation),
            _ => None,
        }
    }
}

/// Timing of the liveness check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LivenessParams {
    /// A heartbeat that stood still this long (ms) is dead...
    pub(crate) timeout_ms: u64,
    /// ...if it also stood still for this many of our own observations.
    pub(crate) min_ticks: u32,
    /// The period of our observations (ms): a gap between two counts as at most two.
    pub(crate) tick_ms: u64,
}

/// How a peer's heartbeat looks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Liveness {
    /// Up and beating.
    Alive,
    /// Not known yet: up, but no beat seen since we started watching this generation.
    Unknown,
    /// Not up, or its heartbeat stood still past the timeout.
    Dead,
}

/// What the node must do about a peer after an observation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PeerAction {
    /// Nothing.
    None,
    /// The link with the peer's generation `g` ended: revoke the peer's mappings, reset
    /// the connections to it, drop the mailboxes, then publish `links[peer] = 0`.
    Down(u32),
    /// Link with the peer's generation `g`: reset this node's halves of the mailboxes,
    /// then publish `links[peer] = g`.
    Link(u32),
}

/// One node's view of one peer: heartbeat watch and link state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PeerTracker {
    /// The generation whose heartbeat is watched (0: none yet).
    watched: u32,
    /// Its last heartbeat value.
    last_beat: u64,
    /// When it last changed (ms).
    last_change_ms: u64,
    /// When we last observed it (ms).
    last_seen_ms: u64,
    /// How long it stood still in our watch (ms): the gaps between our observations
    /// since it last changed, each at most two ticks.
    still_ms: u64,
    /// Our observations since it last changed.
    still_ticks: u32,
    /// Changes seen since watching started (the first sight is not one).
    changes: u32,
    /// The peer's generation this node is linked with.
    linked: Option<u32>,
    /// When that link was made (ms).
    linked_ms: u64,
    /// The peer's link word for us, once seen linked back to our generation during
    /// this link.
    back: Option<LinkWord>,
    /// After a down: the peer generation, and its link word for us that must change
    /// before we relink.
    wait_unlink: Option<(u32, LinkWord)>,
    /// Our link sequence number (the last one used).
    seq: u32,
    /// Linked both ways as of the last observation.
    reachable: bool,
}

impl PeerTracker {
    /// A tracker that knows nothing yet.
    pub(crate) const fn new() -> Self {
        Self {
            watched: 0,
            last_beat: 0,
            last_change_ms: 0,
            last_seen_ms: 0,
            still_ms: 0,
            still_ticks: 0,
            changes: 0,
            linked: None,
            linked_ms: 0,
            back: None,
            wait_unlink: None,
            seq: 0,
            reachable: false,
        }
    }

    /// Updates the heartbeat watch with `view` taken at `now_ms`.
    pub(crate) fn watch(&mut self, now_ms: u64, view: &PeerView, p: LivenessParams) -> Liveness {
        let gap = now_ms
            .saturating_sub(self.last_seen_ms)
            .min(p.tick_ms.saturating_mul(2));
        self.last_seen_ms = now_ms;
        let Some(generation) = view.up_generation() else {
            self.watched = 0;
            return Liveness::Dead;
        };
        if generation != self.watched {
            self.watched = generation;
            self.last_beat = view.heartbeat;
            self.last_change_ms = now_ms;
            self.still_ms = 0;
            self.still_ticks = 0;
            self.changes = 0;
        } else if view.heartbeat != self.last_beat {
            self.last_beat = view.heartbeat;
            self.last_change_ms = now_ms;
            self.still_ms = 0;
            self.still_ticks = 0;
            self.changes = self.changes.saturating_add(1);
        } else {
            self.still_ms = self.still_ms.saturating_add(gap);
            self.still_ticks = self.still_ticks.saturating_add(1);
        }
        if self.still_ms >= p.timeout_ms && self.still_ticks >= p.min_ticks {
            Liveness::Dead
        } else if self.changes == 0 {
            Liveness::Unknown
        } else {
            Liveness::Alive
        }
    }

    /// One observation of the peer by a node of generation `my_gen`: what to do.
    pub(crate) fn observe(
        &mut self,
        now_ms: u64,
        view: &PeerView,
        my_gen: u32,
        p: LivenessParams,
    ) -> PeerAction {
        let live = self.watch(now_ms, view, p);
        let generation = view.up_generation();
        let mine = my_gen != 0 && view.link_to_me.generation == my_gen;
        let action = if let Some(g) = self.linked {
            if mine && self.back.is_none() {
                self.back = Some(view.link_to_me);
            }
            let changed = self.back.is_some_and(|b| b != view.link_to_me);
            // A link the peer never returned: it may be waiting for our old link word
            // to change (it dropped a link of ours that we never saw returned, while
            // this node was stalled). Remaking the link changes the word.
            let unreturned = self.back.is_none()
                && now_ms.saturating_sub(self.linked_ms) >= p.timeout_ms.saturating_mul(2);
            if live != Liveness::Alive || generation != Some(g) || changed || unreturned {
                self.down(g, view, mine);
                PeerAction::Down(g)
            } else {
                PeerAction::None
            }
        } else {
            if let Some((g, old)) = self.wait_unlink {
                if generation != Some(g) || view.link_to_me != old {
                    self.wait_unlink = None;
                }
            }
            match generation {
                Some(g) if self.wait_unlink.is_none() && live == Liveness::Alive => {
                    self.linked = Some(g);
                    self.linked_ms = now_ms;
                    self.back = mine.then_some(view.link_to_me);
                    self.seq = self.seq.wrapping_add(1);
                    PeerAction::Link(g)
                }
                _ => PeerAction::None,
            }
        };
        self.reachable = self.linked.is_some() && self.back == Some(view.link_to_me) && mine;
        action
    }

    /// Ends the link with generation `g`: relink only once the peer's link word for us
    /// is no longer the one it showed during this link.
    fn down(&mut self, g: u32, view: &PeerView, mine: bool) {
        let old = match self.back {
            Some(b) => Some(b),
            None if mine => Some(view.link_to_me),
            None => None,
        };
        self.linked = None;
        self.back = None;
        self.reachable = false;
        self.wait_unlink = old.map(|o| (g, o));
    }

    /// The link word this node publishes for the peer: the linked generation and this
    /// link's sequence number, or [`LinkWord::NONE`].
    pub(crate) fn link_word(&self) -> LinkWord {
        match self.linked {
            Some(generation) => LinkWord {
                generation,
                seq: self.seq,
            },
            None => LinkWord::NONE,
        }
    }

    /// When (ms, as passed to [`watch`](Self::watch)) the watched heartbeat last
    /// changed.
    pub(crate) const fn last_beat_ms(&self) -> u64 {
        self.last_change_ms
    }

    /// How long (ms) the watched heartbeat has stood still in this node's watch (less
    /// than since [`last_beat_ms`](Self::last_beat_ms) when this node was stalled too).
    pub(crate) const fn still_ms(&self) -> u64 {
        self.still_ms
    }

    /// The peer's generation this node is linked with.
    pub(crate) const fn linked(&self) -> Option<u32> {
        self.linked
    }

    /// Linked both ways as of the last observation: frames, doorbells and mappings may
    /// flow.
    pub(crate) const fn reachable(&self) -> bool {
        self.reachable
    }

    /// Ends the link from this side (a peer that broke the mailbox protocol); returns
    /// the generation that was linked. Relinking waits as after any other down.
    pub(crate) fn unlink(&mut self, view: &PeerView, my_gen: u32) -> Option<u32> {
        let g = self.linked?;
        let mine = my_gen != 0 && view.link_to_me.generation == my_gen;
        self.down(g, view, mine);
        Some(g)
    }
}

/// Whether `view` shows a peer that is still linked with an older generation of a node
/// rejoining as `my_gen` and may still be alive (`live` from a [`PeerTracker::watch`]):
/// the rejoining node waits until no peer does before it uses its area.
pub(crate) fn holds_old_link(view: &PeerView, my_gen: u32, live: Liveness) -> bool {
    let g = view.link_to_me.generation;
    g != 0 && g != my_gen && live != Liveness::Dead
}

/// Whether `view` shows a peer that still holds its link with this node's generation
/// `my_gen` and may still be alive (`live` from a [`PeerTracker::watch`]): it may still
/// store into this node's memory. A node whose memory goes away (its device is removed)
/// waits until no peer does before it copies out what its connections still read.
pub(crate) fn holds_link(view: &PeerView, my_gen: u32, live: Liveness) -> bool {
    my_gen != 0 && view.link_to_me.generation == my_gen && live != Liveness::Dead
}
