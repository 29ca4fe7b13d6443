// SPDX-License-Identifier: GPL-2.0

//! The SCI handshake, as `net/smc/smc_clc.c` holds SMC's: a connect request (served by
//! the listener kthread of the listener's node), its accept or reject, and the close of
//! an end whose connector gave up. Every frame comes through the control mailbox, never
//! through the TCP byte stream; every answer is checked against the memory it names
//! before a connection is built on it.

use super::{DatagramPort, ListenQueue, Plane};
use crate::conn::addr::{self, Addr};
use crate::conn::{once_a_second, Conn, Phase};
use crate::fabric::NodeId;
use crate::proto::frame::{
    CloseReason, ConnId, Frame, FrameKind, Reason, RejectReason, FRAME_SIZE,
};
use crate::proto::queue;
use crate::sys::bindings;
use crate::sys::errno::errno;
use core::sync::atomic::AtomicI64;
use kernel::prelude::*;
use kernel::sync::Arc;

impl Plane<'_> {
    /// Serves one inbound control frame (listener kthread; a frame from this node, in the
    /// context that sent it: [`Plane::send_control`]).
    pub(super) fn handle(&self, from: NodeId, bytes: &[u8; FRAME_SIZE]) {
        let Ok(frame) = Frame::decode_bytes(bytes) else {
            return;
        };
        match frame.kind {
            FrameKind::Accept => {
                match self.table.conn_by_id(frame.dst) {
                    // Only the node the request went to answers it: an accept from
                    // another node (a liar guessing slot and generation) would wire this
                    // connect to that node's memory.
                    Some(conn) if conn.peer_node != from => {}
                    // An accept naming an established connection and the very end it is
                    // connected to is forged (each end is answered once): telling that end
                    // "abandoned", as below, would have the peer's node reset it, and our
                    // connection would end with the peer's close, a clean EOF (make test's
                    // hostile run, frames). Any other end named is told, as below: only
                    // an end whose peer is the named connection of ours takes it.
                    Some(conn)
                        if conn.phase() == Phase::Established && conn.peer_id() == frame.src => {}
                    Some(conn) if conn.phase() == Phase::Connecting => {
                        if let Err(why) = self.take_accept(from, &frame, &conn) {
                            accept_refused(why);
                            conn.refuse();
                            self.abandon_peer_end(from, &frame);
                        }
                        self.table.connector.answer_arrived();
                    }
                    // The connect gave up first (timeout, signal, close) or moved on: the
                    // listener's end, maybe queued for accept() already, must not wait
                    // for a peer that will never come.
                    _ => self.abandon_peer_end(from, &frame),
                }
            }
            FrameKind::Reject => {
                // Only a connect still waiting for its answer, from the node it asked:
                // a reject naming an established connection (or one with another node)
                // would mark it as never shared, and its segment would go back to the
                // heap at close while its peer end still stores into it.
                if let Some(conn) = self.table.conn_by_id(frame.dst) {
                    if conn.peer_node == from && conn.phase() == Phase::Connecting {
                        // (A reject decodes with a reject's reason; any other is a refusal.)
                        let why = match frame.reason {
                            Reason::Reject(why) => why,
                            _ => RejectReason::Policy,
                        };
                        conn.rejected(why);
                        self.table.connector.answer_arrived();
                    }
                }
            }
            FrameKind::Close => {
                // Only the peer end itself, on its node, may close a connection this way.
                // A closing slot waiting for that end to close is freed at the next sweep.
                if let Some(conn) = self.table.conn_or_closing_by_id(frame.dst) {
                    if conn.peer_node == from && conn.peer_id() == frame.src {
                        if conn.peer_gone() {
                            self.table.connector.kick();
                        }
                    }
                }
            }
            FrameKind::ConnectRequest => self.serve_request(from, &frame),
        }
    }
    /// Builds an SCI connection end from the listener's answer, once every part of it
    /// checks out: its segment maps, its offer fits it, and its receive area is the one
    /// set up for this connection (generation and start), not a stale one.
    fn take_accept(
        &self,
        from: NodeId,
        frame: &Frame,
        conn: &Conn,
    ) -> core::result::Result<(), AcceptRefused> {
        // Within this node a segment that does not map is an end that went first (its
        // listener closed): nobody's fault, as `EndGone` below.
        let local = from == self.fabric.local_node();
        let seg = self
            .fabric()
            .map_segment(from, frame.src.slot)
            .map_err(|e| {
                if local {
                    AcceptRefused::EndGone
                } else {
                    AcceptRefused::NoSegment(e)
                }
            })?;
        // Within this node the listener's end is in our own table: it must still be the
        // end that answered us (its slot may hold another connection now; see
        // `Table::own_end`).
        if local
            && !self
                .table
                .own_end(frame.src, &seg)
                .is_some_and(|end| end.peer_id() == conn.id)
        {
            return Err(AcceptRefused::EndGone);
        }
        let len = crate::proto::segment::Segment::len(&seg);
        let offer = frame.offer.validate(len).ok_or(AcceptRefused::BadOffer)?;
        // The listener's receive area uses our generation.
        let params = offer.params(frame.dst.generation);
        if !queue::rx_area_matches(&seg, offer.rx_area, params) {
            return Err(AcceptRefused::StaleArea);
        }
        // A forged answer may name the segment of another of our connections with this
        // node, whose receive area it found set up with the same generation by chance:
        // a second end writing into that ring would end the other connection. (Looked
        // at last: it walks the table, and a flood of forged frames must not hold up the
        // listener kthread. Within this node no one forges, and a closed end's slot is
        // free at once.)
        if from != self.fabric.local_node() && self.table.peer_slot_held(from, frame.src.slot) {
            return Err(AcceptRefused::PeerSlotHeld);
        }
        conn.establish(frame.src, offer, seg)
            .map_err(AcceptRefused::Establish)
    }
    /// Tells the listener's node that its end `frame.src` has no connector any more, so
    /// it is reset (`ECONNRESET` after `accept()`, as a TCP client's RST would do).
    fn abandon_peer_end(&self, from: NodeId, frame: &Frame) {
        let close = Frame::close(frame.dst, frame.src, CloseReason::Abandoned);
        let _ = self.send_control(from, &close.encode_bytes());
    }
    fn reject(&self, from: NodeId, request: &Frame, reason: RejectReason) {
        let src = ConnId {
            slot: 0,
            generation: 0,
        };
        let _ = self.send_control(from, &Frame::reject(request, src, reason).encode_bytes());
    }
    fn serve_request(&self, from: NodeId, request: &Frame) {
        let (Some(src_ip), Some(dst_ip)) = (
            addr::from_wire(request.src_ip),
            addr::from_wire(request.dst_ip),
        ) else {
            return self.reject(from, request, RejectReason::BadOffer);
        };
        // Namespace cookies are this kernel's: another node can only name our initial
        // namespace (0); a cookie from it would match a namespace by accident. Its
        // request is served where the destination address is (the initial namespace,
        // or a namespace that publishes its addresses: `namespaces`).
        let namespace = if from == self.fabric.local_node() {
            request.namespace
        } else if request.namespace == 0 {
            self.table.publishing.serving(dst_ip)
        } else {
            return self.reject(from, request, RejectReason::NoListener);
        };
        let target = if request.datagram {
            self.table
                .datagram_ports
                .find(dst_ip, request.dst_port, namespace)
                .map(|(addr, port)| (addr.v6, Target::Port(port)))
        } else {
            self.table
                .listener(dst_ip, request.dst_port, namespace)
                .map(|queue| (queue.addr.v6, Target::Listener(queue)))
        };
        let Some((v6, target)) = target else {
            return self.reject(from, request, RejectReason::NoListener);
        };
        let Ok(client_seg) = self.fabric.map_segment(from, request.src.slot) else {
            return self.reject(from, request, RejectReason::BadOffer);
        };
        // The segment exported under the requester's slot must be the one this request
        // offered (not a newer connection's, if the request is late).
        let Some(offer) = request
            .offer
            .validate(crate::proto::segment::Segment::len(&client_seg))
            .filter(|o| {
                queue::rx_area_matches(&client_seg, o.rx_area, o.params(request.src.generation))
            })
        else {
            return self.reject(from, request, RejectReason::BadOffer);
        };
        // Within this node the requester's end is in our own table, and it must still be
        // waiting there with this segment: a connect that gave up frees its slot at once,
        // and the slot's next connection may be a listener's end whose receive area passes
        // the check above (`Table::own_end`). Wired to it, the late request's end would
        // write into that connection's ring, and its reset would end a stranger's
        // connection (under load, a lost echo in thousands of connections). Nobody waits
        // for this answer.
        if from == self.fabric.local_node()
            && !self
                .table
                .own_end(request.src, &client_seg)
                .is_some_and(|end| end.phase() == Phase::Connecting)
        {
            return;
        }
        // A requester's channel is new: one that is the peer end of an open connection
        // of ours (a forged request naming it with its generation) would get a second
        // end writing into that connection's ring. (Last, as in `take_accept`: it walks
        // the table. Within this node no one forges.)
        if from != self.fabric.local_node() && self.table.peer_slot_held(from, request.src.slot) {
            return self.reject(from, request, RejectReason::BadOffer);
        }
        let local = Addr::inet(dst_ip, request.dst_port, v6);
        let peer = Addr::inet(src_ip, request.src_port, v6);
        let client = Some((request.src.generation, offer.start));
        let conn = match self.new_conn(from, client, local, peer) {
            Ok(conn) => conn,
            Err(_) => return self.reject(from, request, RejectReason::NoResources),
        };
        if conn.establish(request.src, offer, client_seg).is_err() {
            conn.set_never_shared();
            self.free_conn(&conn);
            return self.reject(from, request, RejectReason::BadOffer);
        }
        let accept = Frame::accept(request, conn.id, conn.offer()).encode_bytes();
        let taken = match target {
            Target::Listener(queue) => queue.push(conn),
            // A datagram socket takes its end at once: no accept().
            Target::Port(port) => port.attach(self, conn),
        };
        if let Err(conn) = taken {
            conn.set_never_shared();
            self.free_conn(&conn);
            return self.reject(from, request, RejectReason::BacklogFull);
        }
        if crate::sys::params::drop_answer_for_test() {
            return;
        }
        let _ = self.send_control(from, &accept);
    }
}

/// Who serves a connect request: a listener (its end waits for `accept()`), or for a
/// request with the datagram flag a bound datagram socket (`datagram_ports.rs`).
enum Target {
    Listener(Arc<ListenQueue>),
    Port(Arc<dyn DatagramPort>),
}

/// Why a listener's answer could not be taken (the connect then falls back to TCP).
enum AcceptRefused {
    /// The listener's segment is not (or no longer) exported.
    NoSegment(Error),
    /// Its offer does not fit its segment.
    BadOffer,
    /// Its receive area is not set up for this connection.
    StaleArea,
    /// Its segment is the peer end of an open connection of ours already.
    PeerSlotHeld,
    /// Within this node: the end that answered is gone (its listener closed), and its
    /// slot may be another connection's.
    EndGone,
    /// The queues could not be built on it.
    Establish(Error),
}

/// Logs (at most once a second) an answer that was refused: it means a peer whose
/// memory does not say what its frames say.
fn accept_refused(why: AcceptRefused) {
    static LAST_LOG_MS: AtomicI64 = AtomicI64::new(i64::MIN);
    // A connect that gave up as the answer came, or (within this node) an answer whose
    // end went first, is no peer's fault.
    let gave_up = matches!(&why, AcceptRefused::EndGone)
        || matches!(&why, AcceptRefused::Establish(e) if *e == errno(bindings::ECONNABORTED));
    if gave_up || !once_a_second(&LAST_LOG_MS) {
        return;
    }
    let (what, errno) = match why {
        AcceptRefused::NoSegment(e) => ("its segment does not map", e.to_errno()),
        AcceptRefused::BadOffer => ("its offer does not fit its segment", 0),
        AcceptRefused::StaleArea => ("its receive area is not this connection's", 0),
        AcceptRefused::PeerSlotHeld => ("its channel is an open connection's peer end", 0),
        AcceptRefused::EndGone => ("its end is gone", 0),
        AcceptRefused::Establish(e) => ("its queues cannot be built", e.to_errno()),
    };
    pr_warn!(
        "SCI connect: the listener's answer does not check out: {} ({}); falling back to TCP\n",
        what,
        errno
    );
}
