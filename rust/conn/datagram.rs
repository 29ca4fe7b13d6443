// SPDX-License-Identifier: GPL-2.0

//! Datagrams on an implicit connection (seed §5.1.7): one record per datagram in the
//! byte queue (`proto/record.rs`), written whole or not at all, read whole.
//!
//! A sender never waits: a datagram that finds no room in the peer's ring, or finds the
//! receiver's budget (its `SO_RCVBUF`) full, is dropped and counted, as UDP drops one that
//! finds the receiver's buffer full, and the count reaches the receiver, which adds it to
//! its socket's drops (`SO_RXQ_OVFL`). A receiver takes records from its ring beside its
//! native UDP socket; the socket layer merges the two and waits for either
//! (`socket/dgram/`).

use super::{proto_err, transfer::consume, Conn, Inner, Rx};
use crate::fabric::memory::{msg_iter, skip_msg_bytes, with_kvec_iter};
use crate::fabric::Fabric;
use crate::proto::error::ProtocolError;
use crate::proto::queue::{Look, PeerWriterState};
use crate::proto::record::{self, Record, HEADER_LEN};
use crate::proto::ring::Spans;
use crate::proto::segment::Segment;
use crate::proto::state::Phase;
use crate::sys::bindings;
use crate::sys::errno::errno;
use crate::sys::net::Msg;
use kernel::prelude::*;

/// What became of a datagram handed to [`Conn::send_datagram`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sent {
    /// It is in the peer's ring.
    Queued,
    /// The peer's ring had no room for it: dropped, as UDP drops it at a full receiver.
    Dropped,
    /// The connection no longer carries datagrams (the peer closed, reset or its node went
    /// down; or it is not established): the caller sends it another way.
    Gone,
}

/// What a read of a datagram found ([`Conn::recv_datagram`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Read {
    /// A datagram, taken (or peeked at).
    Got(Received),
    /// The ring was empty.
    Empty {
        /// The datagrams its writer dropped since they were last taken.
        drops: u32,
        /// The connection is over ([`Conn::datagrams_over`]).
        over: bool,
    },
}

/// A datagram a receiver took (or peeked at) from its ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Received {
    /// Bytes copied to the reader.
    pub(crate) copied: usize,
    /// The datagram's length (more than `copied` when the reader's buffer was short).
    pub(crate) len: usize,
    /// Its traffic class, as the sender's UDP would have marked it (`proto/record.rs`).
    pub(crate) tos: u8,
}

impl Conn {
    /// Puts `len` bytes of `msg` into the peer's ring as one record with traffic class
    /// `tos`, or drops them when there is no room; either way the bytes are consumed from
    /// `msg` (the next segment of a `UDP_SEGMENT` send follows them). A fault in the
    /// caller's buffer is `EFAULT`, with nothing queued; `Sent::Gone` consumes nothing.
    pub(crate) fn send_datagram(
        &self,
        fabric: &dyn Fabric,
        msg: Msg,
        len: usize,
        tos: u8,
    ) -> Result<Sent> {
        let size = record::size(len).ok_or_else(|| errno(bindings::EMSGSIZE))?;
        let header = record::header(len, tos).ok_or_else(|| errno(bindings::EMSGSIZE))?;
        let mut g = self.inner.lock();
        let peer_id = g.peer_id;
        let Inner {
            phase,
            tx,
            rx,
            peer_seg,
            local,
            ..
        } = &mut *g;
        let (Phase::Established, Some(tx), Some(rx), Some(peer_seg)) =
            (*phase, tx.as_mut(), rx.as_mut(), peer_seg.as_ref())
        else {
            return Ok(Sent::Gone);
        };
        if local.closed
            || tx.peer().closed
            || {
                let w = rx.peer();
                w.done_writing || w.abort
            }
            || tx.error().is_some()
        {
            return Ok(Sent::Gone);
        }
        let Some(spans) = tx.reserve_within_budget(size).map_err(proto_err)? else {
            tx.count_drop();
            skip_msg_bytes(msg, len);
            return Ok(Sent::Dropped);
        };
        let at = record::place(spans, len);
        let pad = record::padding(len);
        // The padding's zeros first, as a word the payload's copy then partly overwrites.
        let pad_word = at.padding_word();
        if let Some(off) = pad_word {
            peer_seg.store_u64(off, 0);
        }
        let mut copied = 0;
        for span in at.payload.iter() {
            let got = peer_seg.copy_from_iter(span, msg_iter(msg));
            copied += got;
            if got < span.len {
                // Nothing is published: the bytes written stay beyond the cursor.
                return Err(EFAULT);
            }
        }
        let put = |bytes: &[u8], spans: Spans| {
            let mut buf = [0u8; HEADER_LEN];
            let n = bytes.len().min(HEADER_LEN);
            buf[..n].copy_from_slice(&bytes[..n]);
            with_kvec_iter(&mut buf[..n], false, |iter| {
                spans
                    .iter()
                    .map(|s| peer_seg.copy_from_iter(s, iter))
                    .sum::<usize>()
            })
        };
        let head = match header_word(at.header) {
            Some(off) => {
                peer_seg.store_u64(off, u64::from_ne_bytes(header));
                HEADER_LEN
            }
            None => put(&header, at.header),
        };
        let framing = head
            + match pad_word {
                _ if pad.is_empty() => 0,
                Some(_) => pad.len(),
                None => put(pad, at.padding),
            };
        if copied != len || framing != size - len {
            return Err(EFAULT);
        }
        let ring = tx.commit(size).map_err(proto_err)?;
        drop(g);
        if ring {
            self.notify_peer(fabric, peer_id);
        }
        Ok(Sent::Queued)
    }

    /// The record at the head of this end's ring, if one is there, and the ring's
    /// readable spans (a bad record is a protocol error, which aborts the connection).
    fn head_record(&self, g: &mut Inner) -> Result<Option<(Record, Spans)>> {
        let Some(rx) = g.rx.as_mut() else {
            return Ok(None);
        };
        let spans = rx.readable().map_err(proto_err)?;
        if spans.total() == 0 {
            return Ok(None);
        }
        self.record_at(rx, spans).map(|r| Some((r, spans)))
    }

    /// The record at the start of `spans`, the ring's readable spans (not empty).
    fn record_at(&self, rx: &mut Rx, spans: Spans) -> Result<Record> {
        let head = spans.truncate(HEADER_LEN);
        let h = match header_word(head) {
            Some(off) => self.seg.load_u64(off).to_ne_bytes(),
            // Only if records were not 8-aligned in the segment (a start cursor that is not
            // a multiple of 8: an older module's): a copy that may span the ring's end.
            None => {
                let mut h = [0u8; HEADER_LEN];
                let got = with_kvec_iter(&mut h, true, |iter| {
                    head.iter()
                        .map(|s| self.seg.copy_to_iter(s, iter))
                        .sum::<usize>()
                });
                if got != HEADER_LEN {
                    return Err(errno(bindings::EPROTO));
                }
                h
            }
        };
        record::parse(h, spans.total() as u64).map_err(|e| proto_err(rx.fail_with(e)))
    }

    /// Takes the next datagram (with `peek`, copies it and leaves it) into `msg`, at most
    /// `len` bytes of it, or finds the ring empty and learns what a reader learns there:
    /// the drops ([`Conn::datagram_drops`]) and whether the connection is over
    /// ([`Conn::datagrams_over`]). One look at the ring, under one lock. `watched`: a
    /// poller watches the socket, so the next arrival must ring even if this read leaves
    /// records behind.
    pub(crate) fn recv_datagram(
        &self,
        fabric: &dyn Fabric,
        msg: Msg,
        len: usize,
        peek: bool,
        watched: bool,
    ) -> Result<Read> {
        let mut g = self.inner.lock();
        let peer_id = g.peer_id;
        let Some(rx) = g.rx.as_mut() else {
            return Ok(Read::Empty {
                drops: 0,
                over: over(&mut g),
            });
        };
        // Records an earlier look saw, which this look takes without loading the writer's
        // cursor again (`Consumer::look`).
        let known = rx.available() > 0;
        let spans = match rx.look().map_err(proto_err)? {
            Look::Readable(spans) => spans,
            Look::Empty { drops, peer } => {
                // The writer's state as `over` would load it: before the empty ring.
                return Ok(Read::Empty {
                    drops,
                    over: over_given(&mut g, |_| Ok(Some(peer))),
                });
            }
        };
        let rec = self.record_at(rx, spans)?;
        if known && rx.available() == rec.size as u64 {
            // The last record an earlier look knew of: whether more came is looked at now,
            // as a look that loads the cursor would, so that a ring still being written
            // posts no wait request when this one is taken (`consume`). A look that just
            // loaded it needs no second load.
            rx.refresh().map_err(proto_err)?;
        }
        rx.finish_wait();
        let at = record::place(spans, rec.payload).payload.truncate(len);
        let mut copied = 0;
        for span in at.iter() {
            let got = self.seg.copy_to_iter(span, msg_iter(msg));
            copied += got;
            if got < span.len {
                // The datagram stays for the next read, as UDP leaves it on a fault.
                return Err(EFAULT);
            }
        }
        let ring = !peek && consume(rx, rec.size, watched).map_err(proto_err)?;
        drop(g);
        if ring {
            self.notify_peer(fabric, peer_id);
        }
        Ok(Read::Got(Received {
            copied,
            len: rec.payload,
            tos: rec.tos,
        }))
    }

    /// The datagrams the peer dropped for want of room since the last call, once this
    /// end's ring is read empty (0 before: see [`Consumer::drops_when_empty`]).
    ///
    /// [`Consumer::drops_when_empty`]: crate::proto::queue::Consumer::drops_when_empty
    pub(crate) fn datagram_drops(&self) -> u32 {
        drops_of(&mut self.inner.lock())
    }

    /// Discards the datagrams waiting in this end's ring (its socket ends the connection
    /// with them unread) and returns how many. At most a ring's worth: a peer that keeps
    /// writing does not keep the caller here.
    pub(crate) fn discard_datagrams(&self) -> u32 {
        let mut g = self.inner.lock();
        let Some(ring) = g.rx.as_ref().map(|rx| rx.params().geometry.size_usize()) else {
            return 0;
        };
        let (mut n, mut bytes) = (0u32, 0usize);
        while let Ok(Some((rec, _))) = self.head_record(&mut g) {
            let Some(rx) = g.rx.as_mut() else {
                break;
            };
            if bytes >= ring || rx.consume(rec.size).is_err() {
                break;
            }
            bytes = bytes.saturating_add(rec.size);
            n = n.saturating_add(1);
        }
        n
    }

    /// Lets the peer queue at most `bytes` of datagrams in this end's ring (the receiving
    /// socket's `SO_RCVBUF`), as UDP bounds what waits by it.
    pub(crate) fn set_datagram_budget(&self, bytes: u32) {
        if let Some(rx) = self.inner.lock().rx.as_mut() {
            rx.set_budget(bytes);
        }
    }

    /// The length of the datagram at the head of this end's ring (`FIONREAD`), if any.
    pub(crate) fn next_datagram_len(&self) -> Option<usize> {
        let mut g = self.inner.lock();
        self.head_record(&mut g)
            .ok()
            .flatten()
            .map(|(r, _)| r.payload)
    }

    /// Withdraws this end's wait request: a reader about to spin sees the next datagram
    /// itself, so the writer need ring no doorbell for it (the reader posts a request
    /// again before it sleeps: [`Conn::datagram_ready`]).
    pub(crate) fn withdraw_datagram_wait(&self) {
        if let Some(rx) = self.inner.lock().rx.as_mut() {
            rx.finish_wait();
        }
    }

    /// Whether bytes wait in this end's ring (a spinning reader's look: posts nothing).
    pub(crate) fn datagram_waiting(&self) -> bool {
        let mut g = self.inner.lock();
        g.rx.as_mut()
            .is_some_and(|rx| rx.refresh().map_or(true, |avail| avail > 0))
    }

    /// Whether a datagram waits in this end's ring; if not, a wait request is posted so
    /// that the next one rings the doorbell (poll, and a receiver about to sleep). Also,
    /// under the same lock, the drops a reader takes from an empty ring
    /// ([`Conn::datagram_drops`]): a poll counts them as a read does.
    pub(crate) fn datagram_ready(&self, fabric: &dyn Fabric) -> (bool, u32) {
        let mut g = self.inner.lock();
        let peer_id = g.peer_id;
        let Some(rx) = g.rx.as_mut() else {
            return (false, 0);
        };
        let (ready, ring, drops) = match rx.prepare_datagram_wait() {
            Ok((d, drops)) => (!d.sleep && rx.available() > 0, d.notify_peer, drops),
            // A broken ring is "ready" (the next read finds the error and drops it), and
            // reports no drops.
            Err(_) => (true, false, 0),
        };
        drop(g);
        if ring {
            self.notify_peer(fabric, peer_id);
        }
        (ready, drops)
    }

    /// Takes the datagrams the peer queued up to now and no more (the receiving socket
    /// connected to another peer); true when none is left to read, and the connection may
    /// end at once.
    pub(crate) fn stop_datagrams(&self) -> bool {
        let mut g = self.inner.lock();
        g.rx.as_mut().map_or(true, |rx| {
            rx.stop_at_published().is_err() || rx.available() == 0
        })
    }

    /// Whether this end will carry no more datagrams either way and holds none: the peer
    /// closed or reset (or its node went down) and the ring is read, the ring broke, or
    /// it was stopped ([`Conn::stop_datagrams`]) and is read to there.
    pub(crate) fn datagrams_over(&self) -> bool {
        over(&mut self.inner.lock())
    }
}

/// Where a record's header (its spans `head`) is one aligned word, as records are 8-aligned
/// in a ring that starts 8-aligned: one load or store of it instead of a copy.
fn header_word(head: Spans) -> Option<usize> {
    head.iter()
        .next()
        .filter(|s| s.len == HEADER_LEN && s.off % HEADER_LEN == 0)
        .map(|s| s.off)
}

/// [`Conn::datagram_drops`] under the connection's lock.
fn drops_of(g: &mut Inner) -> u32 {
    // A broken ring reports none: the next read finds the error and ends it.
    g.rx.as_mut()
        .map_or(0, |rx| rx.drops_when_empty().unwrap_or(0))
}

/// [`Conn::datagrams_over`] under the connection's lock.
fn over(g: &mut Inner) -> bool {
    over_given(g, Rx::peer_when_empty)
}

/// [`over`], with the writer's state for a reader that found the ring empty (or `None`
/// when bytes arrived meanwhile) from `when_empty`.
fn over_given(
    g: &mut Inner,
    when_empty: impl FnOnce(&mut Rx) -> core::result::Result<Option<PeerWriterState>, ProtocolError>,
) -> bool {
    let Inner {
        phase,
        rx,
        local,
        moving,
        ..
    } = g;
    if local.closed
        || *moving
        || matches!(
            phase,
            Phase::Refused | Phase::NoListener | Phase::NoRoom | Phase::Unanswered
        )
    {
        return true;
    }
    let Some(rx) = rx.as_mut() else {
        return false;
    };
    if rx.error().is_some() {
        return true;
    }
    if rx.frozen() {
        return rx.available() == 0;
    }
    match when_empty(rx) {
        Ok(Some(w)) => w.done_writing || w.abort,
        Ok(None) => false,
        Err(_) => true,
    }
}
