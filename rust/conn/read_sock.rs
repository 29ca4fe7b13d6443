// SPDX-License-Identifier: GPL-2.0

//! `read_sock` on an SCI connection: a kernel user's actor (`iscsi_tcp`) reads the ring as
//! `tcp_read_sock` lets it read TCP's receive queue, without blocking, one socket buffer
//! at a time, and only what the actor used is consumed.

use super::transfer::consume;
use super::{proto_err, Caller, Conn, Inner};
use crate::fabric::Fabric;
use crate::proto::state::Peer;
use crate::sys::bindings;
use crate::sys::errno::errno;
use crate::sys::read_actor::ReadActor;
use core::ffi::c_int;
use kernel::prelude::*;

impl Conn {
    /// Feeds the ring's bytes to `actor` until the ring is empty, the actor uses less than
    /// it was given or wants no more; never blocks. Returns the bytes used (an error only
    /// when none were: the actor's, or `ENOMEM`). A peer's reset is recorded on `own` (as
    /// `recv` records it) when the ring is empty; the caller reads the state after.
    pub(crate) fn read_sock(
        &self,
        fabric: &dyn Fabric,
        own: &impl Caller,
        actor: &mut ReadActor,
    ) -> Result<c_int> {
        let mut copied = 0usize;
        loop {
            let mut g = self.inner.lock();
            let peer_id = g.peer_id;
            let Inner { rx, local, .. } = &mut *g;
            let Some(rx) = rx.as_mut() else {
                return if copied > 0 {
                    Ok(copied as c_int)
                } else {
                    Err(errno(bindings::ENOTCONN))
                };
            };
            rx.finish_wait();
            rx.refresh().map_err(proto_err)?;
            let spans = rx.readable().map_err(proto_err)?;
            let Some(span) = spans.iter().find(|s| s.len > 0) else {
                // Empty: flags once more (`peer_when_empty`), then ask to hear of the next
                // byte, as the reader's next sk_data_ready depends on it.
                let Some(w) = rx.peer_when_empty().map_err(proto_err)? else {
                    continue;
                };
                let peer = Peer {
                    done_writing: w.done_writing,
                    abort: w.abort,
                    ..Peer::default()
                };
                if local.note_reset(peer) {
                    own.set_error(bindings::ECONNRESET as c_int);
                }
                let ring = rx.prepare_wait().map(|d| d.notify_peer).unwrap_or(false);
                drop(g);
                if ring {
                    self.notify_peer(fabric, peer_id);
                }
                return Ok(copied as c_int);
            };
            let fed = actor.feed(span.len, |iter| self.seg.copy_to_iter(span, iter));
            let used = match fed {
                Ok(used) => used,
                Err(e) if copied == 0 => return Err(e),
                Err(_) => 0,
            };
            let ring = used > 0 && consume(rx, used, true).map_err(proto_err)?;
            drop(g);
            if ring {
                self.notify_peer(fabric, peer_id);
            }
            copied += used;
            if used < span.len.min(crate::sys::read_actor::CHUNK) || !actor.wants_more() {
                return Ok(copied as c_int);
            }
        }
    }
}
