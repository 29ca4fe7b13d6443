// SPDX-License-Identifier: GPL-2.0

//! Judging a connection that reached a member of a join point while the member was not
//! moving: it comes from the port of the member's peer, so it is either that peer moving
//! onto TCP before this end saw the fabric path go, or a connect from that port that gave
//! up on its SCI answer and fell back (the answer timed out or was lost). Nothing else
//! can come from there while the peer's socket is open.
//!
//! The first bytes tell them apart: a moving peer sends its resume header as soon as its
//! connect completes (`socket/sock/failover.rs`); a program's connection starts with its
//! own bytes, or with nothing. So:
//!
//! - a resume header naming the member and its peer: the peer moved first; the member
//!   moves too (its move takes the connection);
//! - any other bytes, the end of the stream, or silence for `failover_ms` (by then a
//!   moving peer has given up its move): the peer's SCI end is gone. The member is reset,
//!   as TCP resets a connection whose peer's port opened a new one, and the connection
//!   goes to `accept()`.
//!
//! The connector kthread judges ([`Judge`]), so that a listener whose program sleeps in
//! `accept()` or `epoll_wait()` needs no call of its own for it.

use super::{now_ms, JoinPoint, Landing};
use crate::conn::once_a_second;
use crate::control::{ControlPlane, PendingConnect};
use crate::proto::resume::{ResumeHeader, RESUME_LEN, RESUME_MAGIC};
use crate::socket::native::Native;
use crate::sys::params::failover_ms;
use core::sync::atomic::{AtomicI64, Ordering};
use kernel::prelude::*;
use kernel::sync::Arc;

/// What a member's connection turned out to be.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// The member's peer, moving onto TCP.
    Join,
    /// A connection for `accept()`: the member's peer end is gone.
    Other,
    /// Not known yet (fewer bytes than a header, all of them a header's so far).
    Undecided,
}

impl Landing {
    /// Judges the connection `native` this member holds, as of `now` (ms); `finish_now`
    /// decides what is still undecided.
    fn verdict(&self, native: &Native, now: i64, finish_now: bool) -> Verdict {
        if !self.conn.peer_may_follow() {
            return Verdict::Other;
        }
        let mut first = [0u8; RESUME_LEN];
        let n = match native.recv_nowait(&mut first, true) {
            Ok(0) => return Verdict::Other,
            Ok(n) => n,
            Err(e) if e == EAGAIN => 0,
            Err(_) => return Verdict::Other,
        };
        if n == RESUME_LEN {
            return match ResumeHeader::decode(&first) {
                Ok(h) if h.to == self.conn.id && h.from == self.conn.peer_id() => Verdict::Join,
                _ => Verdict::Other,
            };
        }
        let magic = RESUME_MAGIC.to_le_bytes();
        let seen = n.min(magic.len());
        if first[..seen] != magic[..seen] {
            return Verdict::Other;
        }
        let since = self.since_ms.load(Ordering::Relaxed);
        if finish_now || now.saturating_sub(since) >= i64::from(failover_ms()) {
            return Verdict::Other;
        }
        Verdict::Undecided
    }
}

impl JoinPoint {
    /// Has the connector kthread judge the connections members hold, if that is due and
    /// not under way.
    pub(crate) fn judge_if_due(self: &Arc<Self>, plane: &ControlPlane) {
        {
            let mut g = self.inner.lock();
            if !g.judge_due || g.judging {
                return;
            }
            g.judge_due = false;
            g.judging = true;
        }
        let job = Arc::new(Judge(self.clone()), GFP_KERNEL);
        let submitted = match job {
            Ok(j) => plane.submit_connect(j),
            Err(e) => Err(e.into()),
        };
        if submitted.is_err() {
            // No memory: the next poll or accept tries again.
            let mut g = self.inner.lock();
            g.judging = false;
            g.judge_due = true;
        }
    }

    /// One pass of the judge: takes what waits in the listener's queue, judges every
    /// connection a member that is not moving holds, and acts on the verdicts. True when
    /// nothing is left to judge.
    fn judge(&self, finish_now: bool) -> bool {
        self.hunt();
        let now = now_ms();
        let mut decided: KVec<(Arc<Landing>, Verdict)> = KVec::new();
        let mut pending = false;
        {
            let mut g = self.inner.lock();
            if g.listener.is_none() {
                g.judging = false;
                return true;
            }
            for m in g.members.iter().flatten() {
                let held = m.joined.lock();
                // A member that moves takes its connection in its own move.
                let Some(native) = held.as_ref().filter(|_| !m.conn.moving()) else {
                    continue;
                };
                let verdict = m.verdict(native, now, finish_now);
                drop(held);
                if verdict == Verdict::Undecided
                    || decided.push((m.clone(), verdict), GFP_KERNEL).is_err()
                {
                    pending = true;
                }
            }
            // A connection delivered while this pass ran is judged by the next one; when
            // the thread stops, by the next job a poll or accept starts.
            pending |= core::mem::take(&mut g.judge_due);
            if finish_now {
                g.judge_due = pending;
                pending = false;
            }
            g.judging = pending;
        }
        for (m, verdict) in decided {
            match verdict {
                Verdict::Join => {
                    pr_info!(
                        "connection to node {} (channel {}): its peer moved it onto TCP first; \
                         moving this end too\n",
                        m.conn.peer_node,
                        m.conn.id.slot
                    );
                    // Held bytes are re-decided at the connector's next pass (this one).
                    let _ = m.conn.peer_lost();
                }
                _ => {
                    let Some(native) = m.take() else {
                        continue;
                    };
                    if m.conn.peer_may_follow() {
                        reset_logged(&m);
                    }
                    let _ = m.conn.peer_gone();
                    self.give_back(native);
                }
            }
        }
        !pending
    }
}

/// Logs (at most once a second) a member reset because its peer's port opened a new
/// connection: its connect gave up on an answer this node sent.
fn reset_logged(m: &Landing) {
    static LAST_LOG_MS: AtomicI64 = AtomicI64::new(i64::MIN);
    if once_a_second(&LAST_LOG_MS) {
        pr_info!(
            "connection to node {} (channel {}): its peer's port opened a new TCP connection \
             (the connect gave up on its answer); reset\n",
            m.conn.peer_node,
            m.conn.id.slot
        );
    }
}

/// The connector kthread's judging job for one join point.
struct Judge(Arc<JoinPoint>);

impl PendingConnect for Judge {
    fn step(&self, finish_now: bool) -> bool {
        self.0.judge(finish_now)
    }
}
