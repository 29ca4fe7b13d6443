// SPDX-License-Identifier: GPL-2.0

//! Failover: an established SCI connection whose fabric path is lost while the peer is
//! still reachable over IP moves onto a TCP connection between the same addresses and
//! ports, and goes on with every byte delivered once, in order.
//!
//! The TCP connection is opened only when it is needed, from the ports the connection
//! already has (a standing TCP connection per SCI connection would cost a TCP handshake
//! on every connect, `Documentation/af_sci.rst` "Failover"): the connecting end's native
//! socket is bound to the connection's address and port and was never connected, so it
//! connects to the listener's address; the accepting end finds that connection at its
//! listener (`socket/join/`). The connecting end sends its resume header first
//! (`proto/resume.rs`: how far it wrote into the other's ring); the accepting end takes
//! the TCP connection as the connection's only if it starts with that header (else it is
//! a connection for `accept()`, such as a fallback connect from the same port whose SCI
//! attempt this end had accepted), then answers with its own. Each end reads its own ring
//! up to where the peer's header says, then the TCP stream. Sends wait until the headers
//! crossed, then go over TCP. Once the ring is read to its end the SCI connection is
//! freed and the socket is a fallen-back socket (reason `failover`) like any other.
//!
//! The connector kthread drives the move ([`SciSock::failover_step`]); the socket's calls
//! wait for it. A move not done within `failover_ms` resets the connection, as the loss
//! of a peer that is gone from both paths always did.

use super::*;
use crate::control::PendingConnect;
use crate::proto::resume::{ResumeHeader, RESUME_LEN};
use crate::socket::join::{JoinPoint, Landing};
use crate::sys::params::failover_ms;
use crate::sys::zerocopy::ZeroCopyNote;
use kernel::time::Ktime;

/// Where a move onto TCP stands.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Stage {
    /// Waiting for the TCP connection: the connecting end's connect, the accepting end's
    /// join.
    Joining,
    /// TCP is up; the resume headers cross.
    Greeting,
    /// Carried on over TCP: this end's ring is read to its end, then the TCP stream.
    Resumed,
    /// It could not move in time, or the peer's header was refused: reset.
    Failed,
}

impl Stage {
    /// `SciSock::stage_now`'s value for `stage`.
    pub(super) const fn to_u8(stage: Option<Stage>) -> u8 {
        match stage {
            None => 0,
            Some(Stage::Joining) => 1,
            Some(Stage::Greeting) => 2,
            Some(Stage::Resumed) => 3,
            Some(Stage::Failed) => 4,
        }
    }

    fn from_u8(v: u8) -> Option<Stage> {
        match v {
            1 => Some(Stage::Joining),
            2 => Some(Stage::Greeting),
            3 => Some(Stage::Resumed),
            4 => Some(Stage::Failed),
            _ => None,
        }
    }
}

/// A socket's failover state.
pub(super) struct Failover {
    /// The accepting end: its listener's join point and its landing there.
    origin: Option<(Arc<JoinPoint>, Arc<Landing>)>,
    /// The move under way, if any.
    stage: Option<Stage>,
    /// When the fabric path was lost, and when the move gives up (`ktime_get` ns).
    began_ns: i64,
    deadline_ns: i64,
    /// The connecting end started its TCP connect.
    dialled: bool,
    /// The accepting end's TCP connection, until its first bytes show it is this
    /// connection's.
    joined: Option<Native>,
    /// The socket is being released: no step touches its native socket any more.
    closed: bool,
    /// Why the move failed, for the log.
    why: &'static str,
    /// Bytes of this end's header sent, and of the peer's received.
    sent: usize,
    got: [u8; RESUME_LEN],
    got_len: usize,
}

impl Failover {
    /// No move under way, and no listener (a connecting end, until accepted).
    pub(super) const fn new() -> Self {
        Self {
            origin: None,
            stage: None,
            began_ns: 0,
            deadline_ns: 0,
            dialled: false,
            joined: None,
            closed: false,
            why: "",
            sent: 0,
            got: [0; RESUME_LEN],
            got_len: 0,
        }
    }
}

/// Why a move fails when this end's header cannot go out.
const HEADER_NOT_SENT: &str = "this end's header could not be sent";

fn now_ns() -> i64 {
    Ktime::ktime_get().to_ns()
}

impl SciSock {
    /// An SCI connection accepted on `listener`'s join point: registered there, so that
    /// its TCP connection finds it if it ever fails over.
    pub(super) fn enter_join_point(&self, listener: &SciSock, conn: &Arc<Conn>) {
        let Some(point) = listener.join.lock().clone() else {
            return;
        };
        let Some(peer) = conn.peer.ip_port() else {
            return;
        };
        // Without a landing the connection cannot fail over; it still works.
        if let Ok(landing) = point.enter(peer, conn.clone()) {
            self.failover.lock().origin = Some((point, landing));
        }
    }

    /// The socket closes: its landing goes, and a TCP connection it had not taken yet;
    /// a move under way stops here (it ran under this lock, so release, which comes
    /// next, finds the native socket it left).
    pub(super) fn leave_join_point(&self) {
        let lost_before = self.conn().is_some_and(|c| c.peer_was_lost());
        let (origin, joined, lost) = {
            let mut f = self.failover.lock();
            f.closed = true;
            (
                f.origin.take(),
                f.joined.take(),
                lost_before || f.stage.is_some(),
            )
        };
        if let Some((point, landing)) = origin {
            point.leave(&landing, lost);
        }
        if let Some(joined) = joined {
            joined.release();
        }
    }

    /// Where a move onto TCP stands (`None`: none under way); never sleeps (a kernel
    /// reader's `read_sock` asks in atomic context).
    pub(super) fn failover_stage(&self) -> Option<Stage> {
        Stage::from_u8(self.stage_now.load(Ordering::Acquire))
    }

    /// Sets the stage of the move `f` (this socket's, locked), and its lock-free copy.
    fn set_stage(&self, f: &mut Failover, stage: Option<Stage>) {
        f.stage = stage;
        self.stage_now.store(Stage::to_u8(stage), Ordering::Release);
    }

    /// The TCP state of a socket with the SCI connection `conn` (`TCP_INFO`, `SCI_INFO`):
    /// once the connection moved, its TCP connection's (a FIN the peer sent after the
    /// move is only there), as `poll` reports it.
    pub(super) fn sci_tcp_state(&self, conn: &Conn) -> u32 {
        match self.failover_stage() {
            Some(Stage::Resumed) => u32::from(self.native().state()),
            _ => conn.tcp_state(),
        }
    }

    /// The fabric path of this socket's SCI connection was lost (`conn::Mover`): starts
    /// the move, which `job` hands to the connector kthread. False when failover is off
    /// or cannot start (the connection then resets).
    pub(crate) fn start_failover(
        &self,
        job: impl FnOnce() -> Result<Arc<dyn PendingConnect>>,
    ) -> bool {
        let ms = failover_ms();
        if ms == 0 {
            return false;
        }
        {
            let mut f = self.failover.lock();
            // A move under way goes on; one that failed stays failed (the connection is
            // reset: it must not stay marked moving with nobody moving it).
            if f.stage == Some(Stage::Failed) {
                return false;
            }
            if f.stage.is_some() || f.closed {
                return true;
            }
            let now = now_ns();
            self.set_stage(&mut f, Some(Stage::Joining));
            f.began_ns = now;
            f.deadline_ns = now.saturating_add(i64::from(ms) * 1_000_000);
        }
        if job()
            .and_then(|j| self.stack.plane.submit_connect(j))
            .is_err()
        {
            self.set_stage(&mut self.failover.lock(), None);
            return false;
        }
        if let Some(conn) = self.conn() {
            pr_info!(
                "connection to node {} (channel {}) lost its fabric path; moving it onto TCP\n",
                conn.peer_node,
                conn.id.slot
            );
        }
        true
    }

    /// The connector kthread's step of a move: true once there is nothing more to do
    /// (the connection reset, or moved and its ring read to the end, or the socket closed).
    pub(crate) fn failover_step(&self, own: &OwnSk, finish_now: bool) -> bool {
        let Some(conn) = self.conn() else {
            return true;
        };
        let mut f = self.failover.lock();
        let Some(stage) = f.stage.filter(|_| !f.closed) else {
            return true;
        };
        let late = finish_now || now_ns() >= f.deadline_ns;
        let next = match stage {
            Stage::Resumed => {
                drop(f);
                self.finish_move_if_drained(own, &conn);
                return self.conn().is_none();
            }
            Stage::Failed => return true,
            Stage::Joining | Stage::Greeting if late => {
                f.why = "too late";
                Stage::Failed
            }
            Stage::Joining => self.join_step(own, &conn, &mut f),
            Stage::Greeting => self.greet_step(own, &conn, &mut f),
        };
        let next = match next {
            // Joined: greet at once, no need to wait for the next pass.
            Stage::Greeting if stage == Stage::Joining => self.greet_step(own, &conn, &mut f),
            n => n,
        };
        if next == Stage::Failed {
            // Not this connection's after all (or too late): `accept()` gets it.
            if let (Some(joined), Some((point, _))) = (f.joined.take(), f.origin.as_ref()) {
                point.give_back(joined);
            }
        }
        if next == stage {
            return false;
        }
        if next == Stage::Failed {
            // The reset is latched before the stage says so: a call that finds the move
            // given up finds the connection reset, not still moving.
            conn.stop_moving();
        }
        self.set_stage(&mut f, Some(next));
        let stall_ms = (now_ns() - f.began_ns) / 1_000_000;
        let why = f.why;
        if next == Stage::Resumed {
            // The TCP connection goes on where the SCI one was: a side shut down there is
            // shut down here (under the lock: release waits for it).
            let (rd, wr) = conn.local_shutdown();
            let native = self.native();
            if wr {
                let _ = native.shutdown(bindings::sock_shutdown_cmd_SHUT_WR as c_int);
            }
            if rd {
                let _ = native.shutdown(bindings::sock_shutdown_cmd_SHUT_RD as c_int);
            }
        }
        drop(f);
        match next {
            Stage::Failed => {
                pr_info!(
                    "connection to node {} could not move onto TCP ({:?} for {} ms: {}); reset\n",
                    conn.peer_node,
                    stage,
                    stall_ms,
                    why
                );
            }
            Stage::Resumed => {
                pr_info!(
                    "connection to node {} moved onto TCP in {} ms\n",
                    conn.peer_node,
                    stall_ms
                );
            }
            _ => {}
        }
        own.wake(Wake::State);
        own.wake(Wake::Readable);
        own.wake(Wake::Writable);
        next == Stage::Failed
    }

    /// Waiting for the TCP connection.
    fn join_step(&self, own: &OwnSk, conn: &Conn, f: &mut Failover) -> Stage {
        if let Some((point, landing)) = f.origin.as_ref() {
            point.hunt();
            point.judge_if_due(&self.stack.plane);
            let Some(joined) = landing.take() else {
                return Stage::Joining;
            };
            f.joined = Some(joined);
            return Stage::Greeting;
        }
        let native = self.native();
        let state = u32::from(native.state());
        if state == bindings::TCP_ESTABLISHED {
            return Stage::Greeting;
        }
        if state != bindings::TCP_CLOSE || native.connect_started() {
            return Stage::Joining;
        }
        if f.dialled {
            // Refused (the listener was not there yet, or is gone): its error is the
            // move's, not the program's. Tried again until the deadline.
            let e = native.take_error();
            if e != 0 && own.error() == e {
                own.take_error();
            }
            self.slot.hooks().clear_mirrored_error();
        }
        f.dialled = true;
        let mut peer = conn.peer;
        let bytes = peer.as_mut_bytes();
        let r = native.connect(
            SockAddr::new(bytes.as_mut_ptr().cast(), bytes.len() as c_int),
            bindings::O_NONBLOCK as c_int,
        );
        match r {
            Ok(()) => Stage::Greeting,
            _ => Stage::Joining,
        }
    }

    /// The accepting end's TCP connection arrived: it becomes the socket's native
    /// socket. The one made at accept time (it carried only options) is kept until
    /// release, as a racing call may still hold it.
    fn adopt_joined(&self, own: &OwnSk, joined: Native) {
        // Every option set on the accepted socket was set on its native socket too.
        joined.inherit_options(&self.native());
        self.slot.replace(own, joined);
    }

    /// The resume headers cross: the connecting end sends its own, then reads the
    /// peer's; the accepting end reads (without taking) the first bytes of its TCP
    /// connection, takes the connection only if they are the peer's header, then answers.
    fn greet_step(&self, own: &OwnSk, conn: &Conn, f: &mut Failover) -> Stage {
        match self.greet(own, conn, f) {
            Ok(stage) => stage,
            Err(why) => {
                f.why = why;
                Stage::Failed
            }
        }
    }

    /// [`Self::greet_step`]: the stage reached, or why the move failed.
    fn greet(&self, own: &OwnSk, conn: &Conn, f: &mut Failover) -> Result<Stage, &'static str> {
        let mine = conn.resume_header().ok_or("no header to send")?;
        let resume = |got: &[u8; RESUME_LEN]| {
            matches!(
                ResumeHeader::decode(got).map(|h| conn.resume(&h)),
                Ok(Ok(()))
            )
        };
        if let Some(joined) = f.joined {
            if !Self::fill_header(&joined, f, true)? {
                return Ok(Stage::Greeting);
            }
            if !resume(&f.got) {
                return Err("the first bytes are not the peer's header");
            }
            // It is this connection's: the header is taken off, the socket adopts it.
            let mut header = [0u8; RESUME_LEN];
            if !matches!(joined.recv_nowait(&mut header, false), Ok(RESUME_LEN)) {
                return Err("the peer's header could not be taken off");
            }
            f.joined = None;
            self.adopt_joined(own, joined);
            // A fresh connection takes 32 bytes at once; anything else is a failure.
            return match Self::send_header(&joined, &mine, f)? {
                true => Ok(Stage::Resumed),
                false => Err(HEADER_NOT_SENT),
            };
        }
        let native = self.native();
        if !Self::send_header(&native, &mine, f)? || !Self::fill_header(&native, f, false)? {
            return Ok(Stage::Greeting);
        }
        if !resume(&f.got) {
            return Err("the peer's header was refused");
        }
        Ok(Stage::Resumed)
    }

    /// Sends what is left of this end's header: true once all of it went.
    fn send_header(
        native: &Native,
        mine: &ResumeHeader,
        f: &mut Failover,
    ) -> Result<bool, &'static str> {
        let bytes = mine.encode();
        while f.sent < RESUME_LEN {
            match native.send_nowait(&bytes[f.sent..]) {
                Ok(n) if n > 0 => f.sent += n,
                Err(e) if e == EAGAIN => return Ok(false),
                _ => return Err(HEADER_NOT_SENT),
            }
        }
        Ok(true)
    }

    /// Reads the peer's header into `f.got` (with `peek`, only looks at it, all 32 bytes
    /// at once): true once it is whole.
    fn fill_header(native: &Native, f: &mut Failover, peek: bool) -> Result<bool, &'static str> {
        while f.got_len < RESUME_LEN {
            let at = if peek { 0 } else { f.got_len };
            match native.recv_nowait(&mut f.got[at..], peek) {
                Ok(n) if peek && n == RESUME_LEN => f.got_len = n,
                Ok(n) if peek && n > 0 => return Ok(false),
                Ok(n) if n > 0 => f.got_len += n,
                Err(e) if e == EAGAIN => return Ok(false),
                // The peer closed or reset before its header: it could not move.
                _ => return Err("the TCP connection ended before the peer's header"),
            }
        }
        Ok(true)
    }

    /// The ring of a moved connection is read to its end: the SCI connection goes, and
    /// the socket carries on as a fallen-back one (reason `failover`).
    pub(super) fn finish_move_if_drained(&self, own: &OwnSk, conn: &Arc<Conn>) {
        // Under the failover lock: the connector may call this while the socket is being
        // released, whose teardown of the native socket waits for the lock.
        let mut f = self.failover.lock();
        if f.closed || !conn.drained() {
            return;
        }
        let taken = {
            let mut sci = self.sci.lock();
            match sci.as_ref() {
                Some(c) if Arc::ptr_eq(c, conn) => sci.take(),
                _ => None,
            }
        };
        let Some(conn) = taken else {
            return;
        };
        let plane = &self.stack.plane;
        conn.close(plane.fabric(), false);
        plane.free_conn(&conn);
        self.set_stage(&mut f, None);
        self.fall_back(own, FallbackReason::Failover);
        // TCP's next byte is the first unread one: the peek offset reads on there (the
        // native socket kept the value set, which reads over SCI moved since).
        self.native().set_peek_off(own.peek_off());
        own.set_state(u32::from(self.native().state()));
        drop(f);
        own.wake(Wake::State);
    }

    /// Waits (up to `timeo`) until a move under way reaches TCP or fails, or bytes wait
    /// in the ring: what a call that cannot go on over SCI any more does.
    fn await_move(&self, own: &OwnSk, conn: &Conn, timeo: &mut c_long) -> Result {
        own.wait(timeo, || {
            Ok(conn.ring_readable()
                || !matches!(
                    self.failover_stage(),
                    Some(Stage::Joining | Stage::Greeting)
                ))
        })
    }

    /// A send that found the connection moving: waits for the move, then sends the rest
    /// over TCP. `done` bytes already went into the ring; `note`, the send's zero-copy
    /// notification, goes with the rest (TCP posts none of its own).
    pub(super) fn send_moved(
        &self,
        own: &OwnSk,
        conn: &Conn,
        msg: Msg,
        len: usize,
        done: usize,
        note: Option<&ZeroCopyNote>,
    ) -> Result<c_int> {
        let partial = |e: Error| if done > 0 { Ok(done as c_int) } else { Err(e) };
        let nonblock = msg_flags(msg) & bindings::MSG_DONTWAIT != 0;
        let mut timeo = own.sndtimeo(nonblock);
        loop {
            match self.failover_stage() {
                Some(Stage::Resumed) | None => break,
                Some(Stage::Failed) => {
                    // Reset: the connection says how (ECONNRESET, then EPIPE), latched
                    // before the stage said so. Straight to the connection, never
                    // through `sendmsg` again: that came back here while the
                    // connection was still marked moving, until the stack overflowed
                    // (KASAN, in the hostile run's forged generations).
                    if done > 0 {
                        return Ok(done as c_int);
                    }
                    return self.send_sci(own, conn, msg, len);
                }
                _ => {}
            }
            if let Err(e) = own.wait(&mut timeo, || {
                Ok(!matches!(
                    self.failover_stage(),
                    Some(Stage::Joining | Stage::Greeting)
                ))
            }) {
                return partial(e);
            }
        }
        let native = self.native();
        native.copy_alloc_flags_from(own.as_ptr());
        let sent = match note {
            Some(note) => note.lend(msg, || native.sendmsg(msg, len - done)),
            None => native.sendmsg(msg, len - done),
        };
        match sent {
            Ok(n) => Ok(done as c_int + n),
            Err(e) => partial(e),
        }
    }

    /// A receive that found the ring of a moving connection empty: waits for the move
    /// (or for bytes in the ring), then reads the ring to its end and then TCP.
    pub(super) fn recv_moved(
        &self,
        own: &OwnSk,
        conn: &Arc<Conn>,
        msg: Msg,
        len: usize,
        flags: c_int,
    ) -> Result<c_int> {
        let nonblock = flags & bindings::MSG_DONTWAIT as c_int != 0;
        let mut timeo = own.rcvtimeo(nonblock);
        let plane = &self.stack.plane;
        let from_ring = |own: &OwnSk| {
            let flags = flags | bindings::MSG_DONTWAIT as c_int;
            conn.recv(
                plane.fabric(),
                own,
                msg,
                len,
                flags,
                (true, SpinSetting::Fixed(0)),
            )
        };
        loop {
            match self.failover_stage() {
                // A failed move reports the reset (after what the ring still holds).
                Some(Stage::Failed) => return from_ring(own),
                // The ring's bytes first (or its protocol error).
                Some(Stage::Resumed) | None if !conn.drained() => return from_ring(own),
                Some(Stage::Resumed) | None => {
                    self.finish_move_if_drained(own, conn);
                    let native = self.native();
                    native.copy_alloc_flags_from(own.as_ptr());
                    let r = native.recvmsg(msg, len, flags);
                    own.set_peek_off(native.peek_off());
                    return r;
                }
                _ if conn.ring_readable() => match from_ring(own) {
                    Err(e) if e == errno(bindings::ENOTCONN) && conn.moving() => {}
                    r => return r,
                },
                _ => {}
            }
            self.await_move(own, conn, &mut timeo)?;
        }
    }

    /// The poll mask of a socket whose connection is moving.
    pub(super) fn poll_moved(&self, own: &OwnSk, conn: &Conn, file: File) -> c_uint {
        let mut mask = 0;
        if conn.ring_readable() {
            mask |= EPOLLIN | EPOLLRDNORM;
        }
        match self.failover_stage() {
            Some(Stage::Resumed) | None => {
                let native = self.native();
                self.sync_error(own, &native);
                mask |= Self::native_poll(own, &native, file).0;
            }
            Some(Stage::Failed) => mask |= conn.poll(self.stack.plane.fabric(), own),
            _ => {}
        }
        mask
    }
}
