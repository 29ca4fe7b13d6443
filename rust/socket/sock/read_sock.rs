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

use super::failover::Stage;
use super::*;
use crate::sys::read_actor::ReadActor;

impl SciSock {
    /// `read_sock`: the ring's bytes fed to the actor, then (once the connection fell back
    /// or moved onto TCP) the native socket's; never blocks.
    pub(crate) fn read_sock(&self, own: &OwnSk, actor: &mut ReadActor) -> Result<c_int> {
        let mut copied = 0;
        if let Some(conn) = self.conn() {
            copied = conn.read_sock(self.stack.plane.fabric(), own, actor)?;
            if !conn.moving() {
                self.sync_read_state(own, &conn);
                return Ok(copied);
            }
            match self.failover_stage() {
                // The rest comes over TCP once the ring is drained.
                Some(Stage::Resumed) | None if conn.drained() => {
                    self.finish_move_if_drained(own, &conn)
                }
                // The move's end (or its failure) wakes the reader through
                // `sk_state_change`, which tells it to read first (`sci_wake_state`).
                _ => return Ok(copied),
            }
            if !actor.wants_more() {
                return Ok(copied);
            }
        }
        let native = self.native();
        native.copy_alloc_flags_from(own.as_ptr());
        match native.read_sock(actor) {
            n if n >= 0 => Ok(copied + n),
            _ if copied > 0 => Ok(copied),
            err => Err(Error::from_errno(err)),
        }
    }

    /// Once the ring is empty, `sk_state` says what TCP's would (`TCP_CLOSE_WAIT` after
    /// the peer's end of stream, `TCP_CLOSE` after a reset), and a change is signalled.
    fn sync_read_state(&self, own: &OwnSk, conn: &Conn) {
        if conn.inq() != 0 {
            return;
        }
        let state = self.sci_tcp_state(conn);
        if state != own.state() {
            own.set_state(state);
            own.wake(Wake::State);
        }
    }
}
