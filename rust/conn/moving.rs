// SPDX-License-Identifier: GPL-2.0

//! A connection whose fabric path is lost: reset, or moved onto TCP by its socket.
//!
//! The peer's node going down ([`Conn::peer_lost`]) leaves the peer end alive on the
//! other path, so an established connection stops writing into the peer's ring and asks
//! its socket, through [`Mover`], to carry it on over TCP (`socket/sock/failover.rs`);
//! what is in this end's own ring is still read, up to where the peer's resume header
//! says. A peer end its node reports gone ([`Conn::peer_gone`]) is reset, never moved.

use super::*;

/// What a connection asks of its socket when the fabric path to the peer is lost while
/// the connection is established: to move it onto TCP (`socket/sock/failover.rs`). The
/// socket layer implements it; it holds no reference to the socket (that would keep the
/// socket alive through its own connection): the connection names its owner (the token
/// it wakes), which is live while the owner lock holds it. A connection never reaches
/// the socket layer otherwise.
pub(crate) trait Mover: Send + Sync {
    /// Takes a reference on the owner `sk` (called under the owner lock: atomic context).
    fn hold(&self, sk: usize);
    /// Starts moving the connection of `sk`, whose reference [`Mover::hold`] took and
    /// this call owns (process context). False when the socket will not (failover turned
    /// off, no memory): the connection then resets, as one whose peer died does.
    fn start(&self, sk: usize) -> bool;
}

impl Conn {
    /// The peer's node went down (the fabric stopped hearing from it): an established
    /// connection whose socket can move it goes on over TCP ([`Mover`]); any other is
    /// reset as if the peer had aborted (`ECONNRESET`, then `EPIPE`), and a connect still
    /// waiting for its answer falls back to TCP. Returns what [`Conn::doorbell`] returns.
    ///
    /// An established connection that has no mover yet (it waits in a listener's queue
    /// for `accept()`) is marked moving too: its socket starts the move when it takes it
    /// ([`Conn::set_mover`]).
    #[must_use]
    pub(crate) fn peer_lost(&self) -> bool {
        self.lose_peer(true)
    }

    /// The peer's node said the peer end is gone (a `Close` frame: its connector gave up
    /// before the answer arrived, or its end went away without its queues), or its node
    /// went down with the region corrupted (no ring can vouch for its bytes). Nothing
    /// is carried over TCP: the connection is reset as if the peer had aborted, never
    /// moved. Returns what [`Conn::doorbell`] returns.
    #[must_use]
    pub(crate) fn peer_gone(&self) -> bool {
        self.lose_peer(false)
    }

    /// [`Conn::peer_lost`] and [`Conn::peer_gone`]: with `may_move`, an established
    /// connection with a live peer end moves onto TCP instead of being reset.
    fn lose_peer(&self, may_move: bool) -> bool {
        let mut g = self.inner.lock();
        if may_move && g.moving {
            // Moving already (its peer moved first, or the link went twice): the move
            // goes on; it is not a reset.
            return false;
        }
        // A connection whose path was lost before and that is not moving now was reset
        // (its move failed, or it could not move): it stays reset, a second loss of the
        // link does not start another move (its socket's failover said "failed" already,
        // and the connection would stay marked moving with nobody moving it).
        let reset_before = g.peer_lost;
        g.peer_lost = true;
        g.peer_gone |= !may_move;
        if g.phase == Phase::Connecting {
            g.phase = Phase::Unanswered;
        }
        // A peer that closed its end already (both flags in this end's own memory) said
        // all it will say: the connection ends as closed, what is in the ring is read.
        let Inner { tx, rx, .. } = &mut *g;
        let peer_done = match (tx.as_mut(), rx.as_mut()) {
            (Some(tx), Some(rx)) => tx.peer().closed && rx.peer().closed,
            _ => false,
        };
        if peer_done {
            // It will not move either: nothing from its port is this connection's.
            g.peer_gone = true;
            drop(g);
            if may_move {
                pr_info!(
                    "connection to node {} (channel {}): its peer had closed; not moved\n",
                    self.peer_node,
                    self.id.slot
                );
            }
            self.wake(Wake::State);
            return self.doorbell();
        }
        let movable = may_move
            && !g.never_moves
            && !reset_before
            && g.phase == Phase::Established
            && !g.local.closed
            && !g.moving;
        // Under `inner`, as `set_mover` reads `moving`: one of the two starts the move.
        let mover = self.mover.lock().clone().filter(|_| movable);
        if movable {
            g.moving = true;
            if mover.is_none() {
                pr_info!(
                    "connection to node {} (channel {}) lost its fabric path before accept()\n",
                    self.peer_node,
                    self.id.slot
                );
            }
        } else if let Some(rx) = g.rx.as_mut() {
            rx.latch_peer_abort();
        }
        drop(g);
        if let Some(mover) = mover {
            self.start_mover(&*mover);
        }
        self.wake(Wake::State);
        self.doorbell()
    }

    /// Marks an implicit connection of datagram sockets, which never moves onto TCP: a
    /// lost fabric path resets it. One that started moving already (its path was lost
    /// while it was being set up) is reset now.
    pub(crate) fn never_move(&self) {
        self.carries_datagrams.store(true, Ordering::Relaxed);
        let mut g = self.inner.lock();
        g.never_moves = true;
        let moving = g.moving;
        drop(g);
        if moving {
            self.stop_moving();
        }
    }

    /// Sets who moves the connection onto TCP when its fabric path is lost; if it was
    /// lost already (while it waited for `accept()`), the move starts now.
    pub(crate) fn set_mover(&self, mover: Option<Arc<dyn Mover>>) {
        let g = self.inner.lock();
        let start = mover.clone().filter(|_| g.moving);
        let old = core::mem::replace(&mut *self.mover.lock(), mover);
        drop(g);
        drop(old);
        if let Some(mover) = start {
            self.start_mover(&*mover);
        }
    }

    /// Asks `mover` to move this connection, holding its owner while it starts; with no
    /// owner left (it closed) or no move, the connection resets.
    fn start_mover(&self, mover: &dyn Mover) {
        let sk = {
            let owner = self.owner.lock();
            if *owner != 0 {
                mover.hold(*owner);
            }
            *owner
        };
        let why = if sk == 0 {
            "its socket is closing"
        } else if !mover.start(sk) {
            "its socket did not start the move (failover off, or no memory)"
        } else {
            return;
        };
        pr_info!(
            "connection to node {} (channel {}) not moved onto TCP: {}; reset\n",
            self.peer_node,
            self.id.slot,
            why
        );
        self.stop_moving();
    }

    /// Whether the peer end may still come over TCP, from its address and port: its
    /// node did not report it gone ([`Conn::peer_gone`]), and either this end lost the
    /// fabric path to it (a close the peer made during its move is the move's) or the
    /// peer's socket is still open. A closed peer's port is free for another connection
    /// at once; its close stores its reader's closed flag into this end's memory first.
    pub(crate) fn peer_may_follow(&self) -> bool {
        let mut g = self.inner.lock();
        if g.peer_gone {
            return false;
        }
        g.peer_lost || !g.tx.as_mut().is_some_and(|tx| tx.peer().closed)
    }

    /// Whether the fabric path to the peer was lost ([`Conn::peer_lost`]).
    pub(crate) fn peer_was_lost(&self) -> bool {
        let g = self.inner.lock();
        g.peer_lost && !g.peer_gone
    }

    /// Whether someone moves the connection onto TCP when its fabric path is lost.
    pub(crate) fn has_mover(&self) -> bool {
        self.mover.lock().is_some()
    }

    /// Whether the connection is moving (or moved) onto TCP.
    pub(crate) fn moving(&self) -> bool {
        self.inner.lock().moving
    }

    /// The move failed (no TCP path to the peer in time, or its resume header was
    /// refused): the connection resets, as one whose peer died.
    pub(crate) fn stop_moving(&self) {
        let mut g = self.inner.lock();
        g.moving = false;
        if let Some(rx) = g.rx.as_mut() {
            rx.latch_peer_abort();
        }
        drop(g);
        self.wake(Wake::State);
        self.wake(Wake::Readable);
        self.wake(Wake::Writable);
    }

    /// This node's fabric memory is going away (its device is being removed): a moving
    /// connection copies its segment (its ring, which the move still reads, and the
    /// peer's flags) into kernel memory, under its lock, so no read of it is under way;
    /// any other is left on the device, which it no longer reads (it was reset, or it
    /// closed and waits for its slot). A copy that finds no memory resets the
    /// connection. True when the connection is moving and was copied.
    pub(crate) fn rehome_if_moving(&self) -> bool {
        let g = self.inner.lock();
        if !g.moving {
            return false;
        }
        let copied = self.seg.rehome();
        drop(g);
        if let Err(e) = copied {
            pr_info!(
                "connection to node {} (channel {}): no memory to keep its ring ({:?}); reset\n",
                self.peer_node,
                self.id.slot,
                e
            );
            self.stop_moving();
            return false;
        }
        true
    }

    /// What this end tells the peer in its resume header: the two ends' ids and the
    /// bytes it wrote into the peer's ring (held back by gathering or not). `None` when
    /// the connection is not moving.
    pub(crate) fn resume_header(&self) -> Option<ResumeHeader> {
        let g = self.inner.lock();
        let tx = g.tx.as_ref().filter(|_| g.moving)?;
        Some(ResumeHeader {
            from: self.id,
            to: g.peer_id,
            written: tx.written(),
        })
    }

    /// Takes the peer's resume header: this end's ring is read up to where the peer
    /// says it wrote, and the rest of the stream comes over TCP.
    pub(crate) fn resume(&self, header: &ResumeHeader) -> Result {
        let mut g = self.inner.lock();
        let peer_id = g.peer_id;
        let rx = g.rx.as_mut().ok_or(errno(bindings::ENOTCONN))?;
        let end = header
            .check(self.id, peer_id, rx.resume_view())
            .map_err(proto_err)?;
        rx.freeze(end).map_err(proto_err)?;
        drop(g);
        self.wake(Wake::Readable);
        Ok(())
    }

    /// Whether the ring of a moved connection holds nothing more: what follows comes
    /// over TCP.
    pub(crate) fn drained(&self) -> bool {
        let g = self.inner.lock();
        g.rx.as_ref()
            .is_some_and(|rx| rx.frozen() && rx.available() == 0)
    }

    /// Whether this end's ring has bytes to read (a moving connection's poll).
    pub(crate) fn ring_readable(&self) -> bool {
        let mut g = self.inner.lock();
        g.rx.as_mut()
            .is_some_and(|rx| rx.refresh().is_ok_and(|n| n > 0))
    }

    /// `shutdown(2)` calls made on this end (read, write), to make again on the TCP
    /// connection that carries it on.
    pub(crate) fn local_shutdown(&self) -> (bool, bool) {
        let g = self.inner.lock();
        (g.local.rcv_shut, g.local.snd_shut)
    }
}
