// SPDX-License-Identifier: GPL-2.0

//! `read_sock` of an `AF_SCI` socket, for kernel readers that take a connected socket
//! from a program and read it as TCP's (`iscsi_tcp`, through
//! `kernel/patches/0002-scsi-iscsi_tcp-read-TCP-byte-streams-of-any-family.patch`).
//!
//! Such a reader installs its own `sk_data_ready`, `sk_write_space` and
//! `sk_state_change` on our sk (every wake-up goes through them, `sys/c/wait.c`), calls
//! `read_sock` when told, and learns of the end of the stream or a reset from `sk_state`
//! (`TCP_CLOSE_WAIT`, `TCP_CLOSE`) after reading, as TCP's FIN and RST reach it. So the
//! state is brought up to date here once the ring is empty, and a change is signalled.
//!
//! Nothing here sleeps, in any context: the reader may call `read_sock` from its
//! `sk_data_ready` (softirq context, or bottom halves off), as it calls `tcp_read_sock`.
//! What needs to sleep (a connection a process holds, a native socket a process owns,
//! finishing a move onto TCP) is left to the socket's work item ([`SciSock::read_again`]),
//! which does it in process context and then wakes the reader to read again, as TCP's
//! backlog is received when the process releases the socket.

use super::failover::Stage;
use super::*;
use crate::conn::ReadSock;
use crate::sys::params::read_sock_busy_for_test;
use crate::sys::percpu_counters::HotCounter;
use crate::sys::read_actor::ReadActor;

/// What `read_sock` left to [`SciSock::read_again`] (`SciSock::read_later`): read again
/// (once what it waited for is done), ring the peer's doorbell.
const LATER_READ: u8 = 1;
const LATER_RING: u8 = 2;

impl SciSock {
    /// `read_sock`: the ring's bytes fed to the actor; once the connection fell back, or
    /// moved onto TCP and its ring was read to the end, the native socket's. Never blocks
    /// or sleeps; 0 when the read is left to [`SciSock::read_again`].
    pub(crate) fn read_sock(&self, own: &OwnSk, actor: &mut ReadActor) -> Result<c_int> {
        if read_sock_busy_for_test() {
            self.later(own, LATER_READ);
            return Ok(0);
        }
        if let Some(conn) = self.conn() {
            // A move onto TCP is carried on over TCP once the ring is drained (the stage
            // is `None` again once the move is done).
            let resumed = self.move_resumed();
            let mut ring = false;
            let read = conn.read_sock(own, actor, resumed, &mut ring);
            if ring {
                self.later(own, LATER_RING);
            }
            let end = match read {
                Err(e) if e == ENOMEM => {
                    // No socket buffer for the bytes: they stay in the ring; the
                    // reader is told to come back (as TCP would retransmit).
                    self.later(own, LATER_READ);
                    return Err(e);
                }
                Err(e) => return Err(e),
                // A process holds the connection, or the move is to be finished: later.
                Ok(ReadSock::Held | ReadSock::MovedAway) => {
                    self.later(own, LATER_READ);
                    return Ok(0);
                }
                Ok(ReadSock::Read(end)) => end,
            };
            own.count(HotCounter::ReadSockLent, end.lent as u64);
            own.count(
                HotCounter::ReadSockCopied,
                (end.used as usize).saturating_sub(end.lent) as u64,
            );
            if end.kept {
                own.stats().read_sock_kept();
            }
            if (end.moved_and_drained && resumed) || end.come_back {
                // The rest is on the TCP connection, or bytes that rang no doorbell wait
                // in the ring: read again, from the top (not from here: the reader's
                // `sk_data_ready` may be what called this).
                self.later(own, LATER_READ);
            } else if let Some(state) = end.state_if_empty {
                if state != own.state() {
                    own.set_state(state);
                    own.wake(Wake::State);
                }
            }
            return Ok(end.used);
        }
        let native = self.native();
        native.copy_alloc_flags_from(own.as_ptr());
        match native.read_sock_nowait(actor, self.slot.hooks().held_here())? {
            Some(used) => Ok(used),
            None => {
                // A process owns the native socket: read once it is ours.
                self.later(own, LATER_READ);
                Ok(0)
            }
        }
    }

    /// Whether a move onto TCP, if one is under way, got as far as carrying on over TCP.
    fn move_resumed(&self) -> bool {
        matches!(self.failover_stage(), Some(Stage::Resumed) | None)
    }

    /// Leaves `what` (`LATER_*`) to [`SciSock::read_again`].
    fn later(&self, own: &OwnSk, what: u8) {
        if what & LATER_READ != 0 {
            own.stats().read_sock_deferred();
        }
        self.read_later.fetch_or(what, Ordering::AcqRel);
        own.queue_work(&self.read_work);
    }

    /// The socket's work item (process context): what `read_sock` could not do without
    /// sleeping. The peer's doorbell it found due is rung; a read it left is done by
    /// waking the reader to read again. On the SCI path it waits for the
    /// process that held the connection; a moved connection whose ring is read to its end
    /// is finished; a native socket is locked while the reader is woken, so that its
    /// `read_sock` reads it there.
    pub(crate) fn read_again(&self, own: &OwnSk) {
        let what = self.read_later.swap(0, Ordering::AcqRel);
        if what & LATER_RING != 0 {
            if let Some(conn) = self.conn() {
                conn.ring_peer(self.stack.plane.fabric());
            }
        }
        if what & LATER_READ == 0 {
            return;
        }
        if let Some(conn) = self.conn() {
            // Takes the connection's lock: its holder let go.
            if self.move_resumed() && conn.moving() && conn.drained() {
                self.finish_move_if_drained(own, &conn);
            }
        }
        if self.conn().is_some() {
            own.wake(Wake::Readable);
            return;
        }
        self.slot
            .hooks()
            .wake_reader_locked(&self.native(), own.as_ptr());
    }
}
