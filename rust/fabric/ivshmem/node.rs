// SPDX-License-Identifier: GPL-2.0

//! A node's life in the shared region: format or join, and leave.
//!
//! **Who formats.** Whoever finds the region blank (no valid header: fresh zeroed
//! memory, or bytes that are not ours) claims it through the header's claim words
//! ([`crate::proto::region::Claimant`]: plain stores and loads, no read-modify-write),
//! so of nodes starting together exactly one formats; the others wait for the format
//! word to say "ready" and join. A claim that does not complete within
//! [`CLAIM_EXPIRE_MS`] (its node died while formatting) is taken over the same way. A
//! region that already holds a valid header is joined as it is, whoever formatted it and
//! whatever its parameters; one formatted by an incompatible layout version is refused
//! (a node of that version may be using it).
//!
//! **Joining.** The node's id must be inside the node table. If its entry says "up" the
//! node watches the entry's heartbeat for a timeout first: if it moves, another live
//! node has this id and the join fails with `EADDRINUSE`. Otherwise the node takes the
//! next generation, initializes its area (empty mailboxes, zeroed doorbell blocks, empty
//! directory, no links) under the state "joining", publishes its IP addresses, waits
//! until no live peer is still linked with an older generation of it (at most three
//! timeouts; a peer that is alive but never lets go is logged and ignored), and says
//! "up". Its poller then heartbeats and links with its peers.

use super::now_ms;
use crate::fabric::memory::SegMem;
use crate::proto::liveness::{holds_old_link, LivenessParams, PeerTracker, PeerView};
use crate::proto::region::{
    default_params, format, next_node_generation, read_header, ClaimOutcome, Claimant, HeaderState,
    LinkWord, NodeId, NodeState, NodeWord, PublishedAddr, Region,
};
use crate::sys::bindings;
use crate::sys::errno::errno;
use kernel::prelude::*;
use kernel::sync::Arc;

/// How long a formatter may take before its claim can be taken over.
const CLAIM_EXPIRE_MS: u64 = 1000;
/// How long a joining node waits for the region to be formatted.
const FORMAT_WAIT_MS: u64 = 3000;
/// Poll interval while waiting.
const WAIT_STEP_MS: u32 = 20;

/// The region as this node joined it.
pub(super) struct Joined {
    /// The region.
    pub(super) region: Region<Arc<SegMem>>,
    /// This node's generation.
    pub(super) generation: u32,
}

/// The region's header, formatting it (`nodes` nodes) if it is blank.
fn layout(whole: &Arc<SegMem>, me: NodeId, nodes: u32) -> Result<Region<Arc<SegMem>>> {
    let start = now_ms();
    // The seed tells a later claim of this node from an earlier one.
    let mut claimant = Claimant::new(me, (start as u32) ^ (u32::from(me) << 20));
    let size = crate::proto::segment::Segment::len(whole) as u64;
    let mut stuck: Option<(u64, u64)> = None;
    loop {
        let now = now_ms();
        let seen = match read_header(whole) {
            HeaderState::Ready(layout) => {
                return Region::new(whole.clone(), layout).map_err(|_| EINVAL)
            }
            HeaderState::Unusable(e) => {
                pr_err!(
                    "ivshmem: the shared region is formatted by an incompatible af_sci ({:?}); not joining\n",
                    e
                );
                return Err(errno(bindings::EPROTO));
            }
            HeaderState::Blank(seen) => Some(seen),
            HeaderState::Formatting(fw) => {
                let w = fw.pack();
                match stuck {
                    Some((old, since)) if old == w => {
                        (now.saturating_sub(since) > CLAIM_EXPIRE_MS).then_some(w)
                    }
                    _ => {
                        stuck = Some((w, now));
                        None
                    }
                }
            }
        };
        let mut wait_ms = WAIT_STEP_MS;
        if let Some(seen) = seen {
            let ticket = match claimant.attempt(whole, seen, now, CLAIM_EXPIRE_MS) {
                ClaimOutcome::Won(ticket) => Some(ticket),
                ClaimOutcome::Contended => {
                    wait_ms = claimant.backoff_ms();
                    None
                }
                ClaimOutcome::Moved => None,
            };
            if let Some(ticket) = ticket {
                let params = default_params(size, nodes);
                let formatted = format(whole.clone(), params, me, ticket);
                claimant.withdraw(whole);
                let region = formatted.map_err(|e| {
                    pr_err!(
                        "ivshmem: cannot format the shared region ({:?}): {} KiB for {} nodes\n",
                        e,
                        size / 1024,
                        params.nodes
                    );
                    EINVAL
                })?;
                pr_info!(
                    "ivshmem: formatted the shared region: {} nodes, {} channels, {} KiB heap per node\n",
                    region.layout().nodes(),
                    region.layout().channels(),
                    region.layout().heap_pages() * 4
                );
                return Ok(region);
            }
        }
        if now.saturating_sub(start) > FORMAT_WAIT_MS {
            pr_err!("ivshmem: the shared region never became ready\n");
            return Err(errno(bindings::ETIMEDOUT));
        }
        crate::sys::kthread::sleep_ms(wait_ms);
    }
}

/// Joins the region mapped by `whole` as node `me`, announcing `word` (its doorbell
/// capability and id) and its IP addresses `addrs` once up.
pub(super) fn join(
    whole: &Arc<SegMem>,
    me: NodeId,
    word: NodeWord,
    nodes: u32,
    live: LivenessParams,
    addrs: &[PublishedAddr],
) -> Result<Joined> {
    let region = layout(whole, me, nodes)?;
    let count = region.layout().nodes();
    if usize::from(me) >= count {
        pr_err!(
            "ivshmem: node id {} is outside the region's node table ({} nodes; ivshmem_nodes= when formatting)\n",
            me,
            count
        );
        return Err(EINVAL);
    }
    let old = region.node_word(me);
    if matches!(old, Some(w) if w.state == NodeState::Up) {
        // Alive under our id? Watch its heartbeat for a timeout.
        let beat = region.heartbeat(me);
        let until = now_ms().saturating_add(live.timeout_ms.saturating_mul(2));
        while now_ms() < until {
            if region.heartbeat(me) != beat {
                pr_err!("ivshmem: node id {} is in use by a live node\n", me);
                return Err(errno(bindings::EADDRINUSE));
            }
            crate::sys::kthread::sleep_ms(WAIT_STEP_MS);
        }
    }
    let generation = next_node_generation(old.map_or(0, |w| w.generation));
    region.set_node_word(
        me,
        NodeWord {
            state: NodeState::Joining,
            generation,
            ..word
        },
    );
    region.init_area(me).map_err(|_| EINVAL)?;
    // Before "up": a peer that links with this node finds its addresses.
    region.publish_addresses(me, addrs);
    // Wait for old links to this node to go.
    let mut trackers = KVec::from_elem(PeerTracker::new(), count, GFP_KERNEL)?;
    let until = now_ms().saturating_add(live.timeout_ms.saturating_mul(3));
    loop {
        let now = now_ms();
        let mut blocking = None;
        for (p, t) in trackers.iter_mut().enumerate() {
            let peer = p as NodeId;
            if peer == me {
                continue;
            }
            let view = PeerView::read(&region, me, peer);
            let l = t.watch(now, &view, live);
            if holds_old_link(&view, generation, l) {
                blocking = Some(peer);
            }
        }
        match blocking {
            None => break,
            Some(p) if now >= until => {
                pr_warn!(
                    "ivshmem: node {} still links to an old generation of node {}; joining anyway\n",
                    p,
                    me
                );
                break;
            }
            Some(_) => crate::sys::kthread::sleep_ms(WAIT_STEP_MS),
        }
    }
    region.set_node_word(
        me,
        NodeWord {
            state: NodeState::Up,
            generation,
            ..word
        },
    );
    Ok(Joined { region, generation })
}

/// Leaves the region: links dropped, then "down" (peers reset their connections to
/// this node at their next look).
pub(super) fn leave(region: &Region<Arc<SegMem>>, me: NodeId, word: NodeWord) {
    for p in 0..region.layout().nodes() {
        region.set_link(me, p as NodeId, LinkWord::NONE);
    }
    region.set_node_word(
        me,
        NodeWord {
            state: NodeState::Down,
            ..word
        },
    );
}
