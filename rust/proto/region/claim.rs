// SPDX-License-Identifier: GPL-2.0

//! Who formats a blank region, decided with plain stores and loads.
//!
//! Nodes that find the region blank (no valid header: zeroed memory, or bytes that are
//! not ours) may start together, and exactly one of them must write the header. Each
//! claimant publishes a claim in its own claim word, fences, and looks at every other
//! claim word ([`Claimant::attempt`]): it proceeds only if it sees no live claim but
//! its own, else it withdraws (stores 0) and tries again after a back-off. Of two nodes
//! that claim at once, at least one sees the other's claim (each stores, fences, then
//! loads: Dekker's store-load pattern), so at most one proceeds; the back-off, which
//! grows with the node id, lets one of them through on a later attempt.
//!
//! A claim word that holds the same non-zero value for `expire_ms` is dead (its node
//! died while claiming, or the memory held garbage) and is ignored: a live claimant
//! withdraws or finishes well within that time, and writes a new ticket on every
//! attempt. The winner marks the format word "formatting" and, once the header and the
//! node table are written, "ready" ([`format`]), then withdraws its claim. A region
//! stuck in "formatting" for `expire_ms` is claimed again the same way.
//!
//! Why not a compare-and-exchange on the format word: nothing in the region is
//! read-modify-written by two nodes (see the parent module), because fabrics do not
//! promise that such an instruction is atomic between nodes.

use super::{
    FormatState, FormatWord, Layout, NodeId, Region, RegionError, RegionParams, HDR_CHANNELS,
    HDR_FORMAT, HDR_MAGIC, HDR_MB_LOG2, HDR_NODES, HDR_SIZE, HDR_VERSION, MAX_NODES, NODE_TABLE,
    REGION_MAGIC, REGION_VERSION,
};
use crate::proto::segment::Segment;

/// Claim slots (one per possible node id).
const SLOTS: usize = MAX_NODES as usize;

/// What an attempt came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ClaimOutcome {
    /// This node formats the region now ([`format`] with this ticket).
    Won(u32),
    /// Another node claims too: withdrawn; back off for [`Claimant::backoff_ms`] and
    /// look at the header again.
    Contended,
    /// The format word moved on meanwhile (someone else formats or formatted): look at
    /// the header again.
    Moved,
}

/// A node trying to become the formatter of a region; kept across attempts (it
/// remembers for how long it has seen each other claim unchanged).
#[derive(Clone, Debug)]
pub(crate) struct Claimant {
    /// The claiming node.
    me: NodeId,
    /// The ticket of the next attempt (odd, so never 0).
    ticket: u32,
    /// Attempts made (the back-off grows with them).
    attempts: u32,
    /// Each other claim word as last seen, and since when (ms) it holds that value.
    seen: [(u32, u64); SLOTS],
}

impl Claimant {
    /// A claimant for node `me`; `seed` makes its tickets differ from an earlier run's.
    pub(crate) fn new(me: NodeId, seed: u32) -> Self {
        Self {
            me,
            ticket: seed | 1,
            attempts: 0,
            seen: [(0, 0); SLOTS],
        }
    }

    /// How long to back off after [`ClaimOutcome::Contended`] (ms): longer for higher
    /// node ids and for later attempts, so that contenders spread out.
    pub(crate) fn backoff_ms(&self) -> u32 {
        let rank = u32::from(self.me) % 8;
        let spread = self.attempts.min(8);
        10u32
            .saturating_mul(rank.saturating_add(1))
            .saturating_add(spread.saturating_mul(3))
    }

    /// One attempt on a region whose format word was `seen_format` (blank, or a
    /// formatting claim stuck for `expire_ms`), at time `now_ms`.
    pub(crate) fn attempt<S: Segment>(
        &mut self,
        seg: &S,
        seen_format: u64,
        now_ms: u64,
        expire_ms: u64,
    ) -> ClaimOutcome {
        let Some(mine) = Layout::claim_word(self.me) else {
            return ClaimOutcome::Moved;
        };
        self.attempts = self.attempts.saturating_add(1);
        let ticket = self.ticket;
        self.ticket = self.ticket.wrapping_add(2) | 1;
        seg.store_u32(mine, ticket);
        seg.fence();
        let mut contended = false;
        for (n, seen) in self.seen.iter_mut().enumerate() {
            let Ok(node) = NodeId::try_from(n) else {
                break;
            };
            if node == self.me {
                continue;
            }
            let Some(off) = Layout::claim_word(node) else {
                break;
            };
            let v = seg.load_u32(off);
            if v != seen.0 {
                *seen = (v, now_ms);
            }
            let live = now_ms.saturating_sub(seen.1) < expire_ms;
            contended |= v != 0 && live;
        }
        if contended {
            seg.store_u32(mine, 0);
            return ClaimOutcome::Contended;
        }
        if seg.load_u64(HDR_FORMAT) != seen_format {
            seg.store_u32(mine, 0);
            return ClaimOutcome::Moved;
        }
        let formatting = FormatWord {
            state: FormatState::Formatting,
            node: self.me,
            ticket,
        };
        seg.store_u64(HDR_FORMAT, formatting.pack());
        seg.fence();
        ClaimOutcome::Won(ticket)
    }

    /// Withdraws this node's claim (after [`format`] succeeded or failed).
    pub(crate) fn withdraw<S: Segment>(&self, seg: &S) {
        if let Some(mine) = Layout::claim_word(self.me) {
            seg.store_u32(mine, 0);
        }
    }
}

/// Formats the region after [`Claimant::attempt`] won with `ticket`: writes the header
/// and an empty node table, then marks it ready (stored last). Node areas are left
/// alone: each node initializes its own when it joins. Fails with
/// [`RegionError::ClaimLost`] if the format word is no longer this node's claim (it was
/// taken over as stuck while this node stood still).
pub(crate) fn format<S: Segment>(
    seg: S,
    params: RegionParams,
    node: NodeId,
    ticket: u32,
) -> Result<Region<S>, RegionError> {
    let layout = Layout::new(params, seg.len())?;
    seg.store_u32(HDR_MAGIC, REGION_MAGIC);
    seg.store_u32(HDR_VERSION, REGION_VERSION);
    seg.store_u64(HDR_SIZE, params.size);
    seg.store_u32(HDR_NODES, params.nodes);
    seg.store_u32(HDR_CHANNELS, params.channels);
    seg.store_u32(HDR_MB_LOG2, params.mb_log2);
    let table_end = layout.areas;
    let mut off = NODE_TABLE;
    while off < table_end {
        seg.store_u64(off, 0);
        off = off.saturating_add(8);
    }
    seg.fence();
    let claimed = FormatWord {
        state: FormatState::Formatting,
        node,
        ticket,
    };
    if seg.load_u64(HDR_FORMAT) != claimed.pack() {
        return Err(RegionError::ClaimLost);
    }
    let ready = FormatWord {
        state: FormatState::Ready,
        ..claimed
    };
    seg.store_u64(HDR_FORMAT, ready.pack());
    seg.fence();
    Ok(Region::from_parts(seg, layout))
}
