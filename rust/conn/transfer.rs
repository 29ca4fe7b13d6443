// SPDX-License-Identifier: GPL-2.0

//! Moving bytes on an established connection: `send` copies from the caller's message
//! straight into the peer's ring, `recv` from the own ring into the reader's message
//! (one copy each way); a blocking call that must wait spins first as its socket's setting
//! and the direction's recent waits say (`proto/spin.rs`), then posts a wait request and
//! sleeps until the doorbell wakes it.
//!
//! When both ends are in this kernel, a reader waiting with a large buffer may have it
//! filled by the writer directly, one copy in all (`direct.rs`).
//!
//! A large transfer goes a quarter of the ring at a time ([`pass_limit`]), each quarter
//! published as it is done: the peer copies one quarter while this side copies the next,
//! instead of both taking turns on the whole ring.

use super::{direct, nagle, partial, proto_err, Caller, Conn, Gathering, Inner, Rx, SpinSetting};
use crate::fabric::memory::msg_iter;
use crate::fabric::Fabric;
use crate::proto::error::ProtocolError;
use crate::proto::queue::PeerWriterState;
use crate::proto::spin::SpinHistory;
use crate::proto::state::{self, Local, Peer, RecvEnd, SendEnd};
use crate::sys::bindings;
use crate::sys::errno::errno;
use crate::sys::net::Msg;
use crate::sys::params::widen_wait_race_for_test;
use crate::sys::task::{cpu_contended, send_sigpipe};
use core::ffi::c_int;
use kernel::prelude::*;

/// The most one pass of `send` or `recv` copies before it publishes: the peer's
/// consumer publishes every quarter of the ring too (`default_publish_threshold`).
fn pass_limit(ring_size: u64) -> usize {
    usize::try_from(ring_size / 4).unwrap_or(usize::MAX).max(1)
}

impl Conn {
    /// `sendmsg`: copies from the message straight into the peer's ring; gathering (`how`)
    /// decides when the bytes are published. A blocking send that finds the ring full
    /// spins first as `spin` says.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn send(
        &self,
        fabric: &dyn Fabric,
        own: &impl Caller,
        msg: Msg,
        len: usize,
        flags: c_int,
        how: Gathering,
        (nonblock, spin): (bool, SpinSetting),
    ) -> Result<c_int> {
        let iter = msg_iter(msg);
        let nosignal = flags & bindings::MSG_NOSIGNAL as c_int != 0;
        let mut sent = 0usize;
        let mut timeo = own.sndtimeo(nonblock);
        loop {
            let mut g = self.inner.lock();
            let peer_id = g.peer_id;
            if g.moving {
                // The socket carries on over TCP from here (`Conn::moving`).
                return partial(sent, errno(bindings::ENOTCONN));
            }
            let Inner {
                tx,
                rx,
                peer_seg,
                local,
                held,
                ..
            } = &mut *g;
            let (Some(tx), Some(peer_seg)) = (tx.as_mut(), peer_seg.as_ref()) else {
                return Err(errno(bindings::ENOTCONN));
            };
            let peer = Peer {
                reader_closed: tx.peer().closed,
                abort: rx.as_mut().is_some_and(|rx| rx.peer().abort),
                ..Peer::default()
            };
            match state::send_end(local, peer, sent) {
                SendEnd::Open => {}
                SendEnd::Sent(n) => return Ok(n as c_int),
                // As TCP: the first write after the peer closed still "succeeds" (TCP
                // answers it with a reset); the next one fails.
                SendEnd::Accepted => return Ok(len as c_int),
                end => {
                    if end == SendEnd::PendingError {
                        if local.note_reset(peer) {
                            own.set_error(bindings::ECONNRESET as c_int);
                        }
                        let err = own.take_error();
                        if err != 0 {
                            return Err(errno(err as u32));
                        }
                    }
                    drop(g);
                    if !nosignal {
                        send_sigpipe();
                    }
                    return Err(errno(bindings::EPIPE));
                }
            }
            if len == 0 {
                return Ok(0);
            }
            if sent == 0 {
                direct::note_send(peer_seg, len);
            }
            // A wait request posted for a Nagle hold stays: its doorbell sends the bytes.
            if !held.holding() {
                tx.finish_wait();
            }
            tx.refresh().map_err(proto_err)?;
            // The reader waits with a large buffer on an empty ring: straight into it.
            if let Some((copied, tried)) = direct::send(peer_seg, tx, len - sent, iter) {
                drop(g);
                self.notify_peer(fabric, peer_id);
                sent += copied;
                if copied < tried {
                    return partial(sent, EFAULT);
                }
                if sent == len {
                    return Ok(sent as c_int);
                }
                continue;
            }
            let pass = (len - sent).min(pass_limit(tx.params().geometry.size()));
            let spans = tx.writable().map_err(proto_err)?.truncate(pass);
            let n = spans.total();
            if n > 0 {
                let mut copied = 0;
                for span in spans.iter() {
                    let got = peer_seg.copy_from_iter(span, iter);
                    copied += got;
                    if got < span.len {
                        break;
                    }
                }
                tx.stage(copied).map_err(proto_err)?;
                // A fault publishes what was written before it; a full ring always does.
                let ring = nagle::decide(&self.slots, tx, held, self.id.slot, how, copied < n)
                    .map_err(proto_err)?;
                drop(g);
                if ring {
                    self.notify_peer(fabric, peer_id);
                }
                sent += copied;
                if copied < n {
                    // A fault in the user's buffer: report what was sent, or EFAULT.
                    return partial(sent, EFAULT);
                }
                if sent == len {
                    return Ok(sent as c_int);
                }
                continue;
            }
            // Never wait (or report EAGAIN) with bytes held back.
            let flushed = nagle::flush(&self.slots, tx, held, self.id.slot).map_err(proto_err)?;
            if nonblock || timeo == 0 {
                // Full and not waiting: ask to hear when space frees up (epoll). Space the
                // reader freed before the request was posted rings no doorbell, and would
                // wake no edge-triggered epoll: write into it now instead of saying EAGAIN.
                let size = tx.params().geometry.size();
                own.note_no_room();
                widen_wait_race_for_test();
                let (ring, room) = match tx.prepare_wait(size / 2) {
                    Ok(d) => (d.notify_peer, !d.sleep),
                    Err(_) => (false, false),
                };
                drop(g);
                if ring || flushed {
                    self.notify_peer(fabric, peer_id);
                }
                if room {
                    continue;
                }
                return partial(sent, EAGAIN);
            }
            drop(g);
            if flushed {
                self.notify_peer(fabric, peer_id);
            }
            if self.spin_first(own, spin, |i| &mut i.spin_send, || self.send_ready()) {
                continue;
            }
            let (r, wake_us) = own.wait_measured(&mut timeo, || {
                let mut g = self.inner.lock();
                let peer_id = g.peer_id;
                let aborted = g.moving || g.rx.as_mut().is_some_and(|rx| rx.peer().abort);
                let Some(tx) = g.tx.as_mut() else {
                    return Ok(true);
                };
                own.note_no_room();
                let d = tx.prepare_wait(1).map_err(proto_err)?;
                drop(g);
                if d.notify_peer {
                    self.notify_peer(fabric, peer_id);
                }
                Ok(!d.sleep || aborted)
            });
            self.sleep_cost(spin, |i| &mut i.spin_send, wake_us);
            if let Err(e) = r {
                return partial(sent, e);
            }
        }
    }

    /// The spinning phase of a wait: polls `ready` for as long as `setting` and the
    /// direction's recent waits (`history`) say, and records how an adaptive spin ended;
    /// true when it became ready. A fixed setting needs no history, so it takes no lock
    /// (`spin_us=0` costs a wait nothing).
    fn spin_first(
        &self,
        own: &impl Caller,
        setting: SpinSetting,
        history: impl Fn(&mut Inner) -> &mut SpinHistory,
        ready: impl FnMut() -> bool,
    ) -> bool {
        if let SpinSetting::Fixed(us) = setting {
            return own.spin(us, ready);
        }
        let us = history(&mut self.inner.lock()).plan(setting, cpu_contended());
        if us == 0 {
            return false;
        }
        let hit = own.spin(us, ready);
        history(&mut self.inner.lock()).record(hit);
        hit
    }

    /// Records what a sleep after the spin cost (`wake_us` from its wake-up to running
    /// again, 0: no wake-up ended it) in the direction's history, which sizes the next
    /// adaptive spins ([`SpinHistory::budget`]).
    fn sleep_cost(
        &self,
        setting: SpinSetting,
        history: impl Fn(&mut Inner) -> &mut SpinHistory,
        wake_us: u32,
    ) {
        if setting == SpinSetting::Adaptive && wake_us != 0 {
            history(&mut self.inner.lock()).record_wake(wake_us);
        }
    }

    /// Whether a blocking send would make progress now: ring space, or the connection
    /// ended. Posts no wait request (the spinning phase of a wait).
    fn send_ready(&self) -> bool {
        let mut g = self.inner.lock();
        let Inner {
            tx,
            rx,
            local,
            moving,
            ..
        } = &mut *g;
        let Some(tx) = tx.as_mut() else {
            return true;
        };
        *moving
            || local.snd_shut
            || tx.refresh().map_or(true, |free| free > 0)
            || tx.peer().closed
            || rx.as_mut().is_some_and(|rx| rx.peer().abort)
    }

    /// Whether a blocking receive would make progress now: data past the first `skip`
    /// bytes (a peek's offset), end of stream or reset.
    fn recv_ready(&self, skip: usize) -> bool {
        let mut g = self.inner.lock();
        let shut = g.local.rcv_shut || g.moving;
        let Some(rx) = g.rx.as_mut() else {
            return true;
        };
        if shut || rx.refresh().map_or(true, |avail| avail > skip as u64) {
            return true;
        }
        let peer = rx.peer();
        peer.done_writing || peer.abort
    }

    /// `recvmsg`: copies out of this end's ring into the message. A blocking receive that
    /// finds the ring empty spins first as `spin` says.
    pub(crate) fn recv(
        &self,
        fabric: &dyn Fabric,
        own: &impl Caller,
        msg: Msg,
        len: usize,
        flags: c_int,
        (nonblock, spin): (bool, SpinSetting),
    ) -> Result<c_int> {
        let flags = flags as u32;
        if flags & bindings::MSG_OOB != 0 {
            return Err(EINVAL);
        }
        let peek = flags & bindings::MSG_PEEK != 0;
        // A peek starts `SO_PEEK_OFF` bytes in, as TCP's (read once: a peek returns after
        // its one pass).
        let skip = if peek { own.peek_offset() } else { 0 };
        // What a blocking receive waits for, as TCP's `sock_rcvlowat()`: all of it with
        // `MSG_WAITALL`, else `SO_RCVLOWAT`'s bytes (1 by default) or all asked if fewer.
        let target = if flags & bindings::MSG_WAITALL != 0 && !peek {
            len
        } else {
            own.rcvlowat().min(len)
        };
        let iter = msg_iter(msg);
        let mut copied = 0usize;
        let mut timeo = own.rcvtimeo(nonblock);
        loop {
            let mut g = self.inner.lock();
            let peer_id = g.peer_id;
            // After SHUT_RD, queued data is still delivered, but nothing waits (as TCP).
            let Inner {
                rx, local, moving, ..
            } = &mut *g;
            let Some(rx) = rx.as_mut() else {
                return Err(errno(bindings::ENOTCONN));
            };
            rx.finish_wait();
            rx.refresh().map_err(proto_err)?;
            // MSG_PEEK shows all there is at once: it publishes nothing.
            let left = len - copied;
            let pass = if peek {
                left
            } else {
                left.min(pass_limit(rx.params().geometry.size()))
            };
            let (_, past) = rx.readable().map_err(proto_err)?.split_at(skip);
            let spans = past.truncate(pass);
            let n = spans.total();
            if n > 0 {
                let mut got = 0;
                for span in spans.iter() {
                    let c = self.seg.copy_to_iter(span, iter);
                    got += c;
                    if c < span.len {
                        break;
                    }
                }
                let ring = !peek && consume(rx, got, own.watched()).map_err(proto_err)?;
                drop(g);
                if ring {
                    self.notify_peer(fabric, peer_id);
                }
                own.peek_offset_moved(peek, got);
                copied += got;
                if got < n {
                    return partial(copied, EFAULT);
                }
                // A pass cut short by its limit goes on with what else is there.
                let cut = n == pass && pass < left;
                if copied == len || peek || (copied >= target && !cut) {
                    return Ok(copied as c_int);
                }
                continue;
            }
            if *moving {
                // The ring is empty (for now, or for good once frozen): the socket waits
                // for the move and reads the rest over TCP (`Conn::moving`). A peek past
                // what the ring still holds cannot see TCP's bytes until the ring is
                // read: it says try again.
                let e = if rx.available() > 0 {
                    EAGAIN
                } else {
                    errno(bindings::ENOTCONN)
                };
                return partial(copied, e);
            }
            // Flags first, then the ring once more (`peer_when_empty`), when the ring
            // looked empty; a zero-length read only looks at the flags.
            let w = if copied < len {
                match rx.peer_when_none_past(skip as u64).map_err(proto_err)? {
                    Some(w) => w,
                    None => continue,
                }
            } else {
                rx.peer()
            };
            let peer = heard(local, w, own);
            match state::recv_end(*local, peer, copied, len, target) {
                RecvEnd::Wait => {}
                RecvEnd::Return(n) => return Ok(n as c_int),
                RecvEnd::PendingError => {
                    let err = own.take_error();
                    return if err != 0 {
                        Err(errno(err as u32))
                    } else {
                        Ok(0)
                    };
                }
            }
            if timeo == 0 {
                // Empty and not waiting: ask to hear of the next byte (epoll). A byte that
                // came before the request was posted rings no doorbell, and would wake no
                // edge-triggered epoll: read it now instead of saying EAGAIN.
                widen_wait_race_for_test();
                let (ring, came) = match rx.prepare_wait_past(skip as u64) {
                    Ok(d) => (d.notify_peer, rx.available() > skip as u64),
                    Err(_) => (false, false),
                };
                drop(g);
                if ring {
                    self.notify_peer(fabric, peer_id);
                }
                if came {
                    continue;
                }
                return partial(copied, EAGAIN);
            }
            drop(g);
            if self.spin_first(own, spin, |i| &mut i.spin_recv, || self.recv_ready(skip)) {
                continue;
            }
            // A large buffer may be filled by the writer directly while this waits.
            let posted = !peek && direct::post(&self.seg, len - copied, iter);
            let (r, wake_us) = own.wait_measured(&mut timeo, || {
                if posted && direct::filled(&self.seg) {
                    return Ok(true);
                }
                let mut g = self.inner.lock();
                let peer_id = g.peer_id;
                if g.local.rcv_shut || g.moving {
                    return Ok(true);
                }
                let Some(rx) = g.rx.as_mut() else {
                    return Ok(true);
                };
                let d = rx.prepare_wait_past(skip as u64).map_err(proto_err)?;
                let peer = rx.peer();
                drop(g);
                if d.notify_peer {
                    self.notify_peer(fabric, peer_id);
                }
                Ok(!d.sleep || peer.done_writing || peer.abort)
            });
            self.sleep_cost(spin, |i| &mut i.spin_recv, wake_us);
            if posted {
                // Before anything else reads the ring or gives up: what a fill delivered
                // comes first, and is the caller's even if a signal ended the wait.
                let got = direct::take_back(&self.seg, iter);
                if got > 0 {
                    own.received_directly(got);
                    own.peek_offset_moved(false, got);
                    copied += got;
                    if copied >= target {
                        return Ok(copied as c_int);
                    }
                }
            }
            if let Err(e) = r {
                return partial(copied, e);
            }
        }
    }
}

/// A reader took `got` bytes out of `rx`: consumes them, and returns whether the writer
/// must be rung (it waits for the space, or must tell of the next arrival).
pub(super) fn consume(rx: &mut Rx, got: usize, watched: bool) -> Result<bool, ProtocolError> {
    let mut ring = rx.consume_and_update(got)?;
    if rx.available() == 0 {
        // Drained: announce the space at once (the writer's SIOCOUTQ reads 0, as after
        // TCP's prompt ACK) and ask to hear of the next byte, so an edge-triggered epoll
        // sees every arrival.
        ring |= rx.publish()?;
        ring |= rx.prepare_wait()?.notify_peer;
    } else if watched {
        // Bytes left behind, and an epoll (or poll, or O_ASYNC, or a kernel user's
        // sk_data_ready) watches: its next arrival must wake it as TCP's next segment
        // would, even if the reader does not read to EAGAIN. A wait request asks the
        // writer for that one doorbell.
        ring |= rx.prepare_wait()?.notify_peer;
    }
    Ok(ring)
}

/// What a reader that found the ring empty heard from the writer (`w`), with a reset
/// recorded on the socket as TCP records an RST (`ECONNRESET`, once).
pub(super) fn heard(local: &mut Local, w: PeerWriterState, own: &impl Caller) -> Peer {
    let peer = Peer {
        done_writing: w.done_writing,
        abort: w.abort,
        ..Peer::default()
    };
    if local.note_reset(peer) {
        own.set_error(bindings::ECONNRESET as c_int);
    }
    peer
}
