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
//! Nothing here may sleep once the actor ran (see `conn/read_sock.rs`): what needs a
//! sleeping lock (the failover's stage, finishing a move) happens before the first call,
//! and a reader that must come back for it is woken to read again.

use super::failover::Stage;
use super::*;
use crate::sys::read_actor::ReadActor;

impl SciSock {
    /// `read_sock`: the ring's bytes fed to the actor; once the connection fell back, or
    /// moved onto TCP and its ring was read to the end, the native socket's. Never blocks.
    pub(crate) fn read_sock(&self, own: &OwnSk, actor: &mut ReadActor) -> Result<c_int> {
        if let Some(conn) = self.conn() {
            // A move onto TCP is carried on over TCP once the ring is drained (the stage
            // is `None` again once the move is done).
            let resumed = matches!(self.failover_stage(), Some(Stage::Resumed) | None);
            if !(resumed && conn.moving() && conn.drained()) {
                let end = match conn.read_sock(self.stack.plane.fabric(), own, actor) {
                    Err(e) if e == ENOMEM => {
                        // No socket buffer for the bytes: they stay in the ring; the
                        // reader is told to come back (as TCP would retransmit).
                        own.wake(Wake::Readable);
                        return Err(e);
                    }
                    r => r?,
                };
                let stats = own.stats();
                stats.read_sock_lent(end.lent as u64);
                stats.read_sock_copied((end.used as usize).saturating_sub(end.lent) as u64);
                if end.kept {
                    stats.read_sock_kept();
                }
                if (end.moved_and_drained && resumed) || end.come_back {
                    // The rest is on the TCP connection, or bytes that rang no doorbell
                    // wait in the ring: read again, from the top.
                    own.wake(Wake::Readable);
                } else if let Some(state) = end.state_if_empty {
                    if state != own.state() {
                        own.set_state(state);
                        own.wake(Wake::State);
                    }
                }
                return Ok(end.used);
            }
            self.finish_move_if_drained(own, &conn);
        }
        let native = self.native();
        native.copy_alloc_flags_from(own.as_ptr());
        native.read_sock(actor)
    }
}
