// SPDX-License-Identifier: GPL-2.0

//! The native socket's UDP side: what a datagram socket (`socket/dgram/`) asks of the UDP
//! socket it owns beyond its `proto_ops` — which control messages its reader wants, the
//! ones a datagram over SCI gets, how it sends (corked, segmented, its traffic class),
//! whether a read finds something, and its drop counter and receive buffer, which
//! datagrams over SCI share with UDP's.

use crate::socket::native::Native;
use crate::sys::bindings;
use crate::sys::net::Msg;
use core::ffi::c_int;

impl Native {
    /// A UDP socket whose reader asked for control messages (`IP_PKTINFO`, timestamps,
    /// ...): datagrams from an implicit SCI connection carry none, so it takes none.
    pub(crate) fn wants_cmsg(&self) -> bool {
        // SAFETY: `sk` is live; the helper reads option bits, as `udp_recvmsg` does.
        unsafe { bindings::sci_udp_wants_cmsg(self.sk()) }
    }

    /// Adds to a datagram received over SCI the control messages this UDP socket's reader
    /// asked for of the IP header, as UDP would give them: the packet information of a
    /// datagram addressed to `to` (a `sockaddr_in` or `sockaddr_in6`), which is also the
    /// address a reply goes from, sent from this machine (`loopback`) or another; then its
    /// traffic class `tos`. The helper looks at `to` only when its reader asked for one of
    /// them: a read takes no time over an address nobody asked for.
    pub(crate) fn put_ip_cmsgs(&self, msg: Msg, to: &[u8], loopback: bool, tos: u8) {
        // SAFETY: `sk` is live and `msg` is the message being received; `to` holds
        // `to.len()` bytes across the call, which the helper reads no further than;
        // `put_cmsg` checks the caller's room.
        unsafe {
            bindings::sci_udp_put_ip_cmsgs(
                self.sk(),
                msg,
                to.as_ptr().cast(),
                to.len() as c_int,
                loopback,
                tos,
            )
        }
    }

    /// A UDP socket that sends each datagram as given (not corked).
    pub(crate) fn sends_plain(&self) -> bool {
        // SAFETY: `sk` is live; the helper reads option bits and the pending word.
        unsafe { bindings::sci_udp_sends_plain(self.sk()) }
    }

    /// A UDP socket that holds a datagram to an IPv4 (`v4`) or IPv6 destination to the
    /// route's MTU (`IP_PMTUDISC_DO`, `IPV6_DONTFRAG`, ...): a longer one is `EMSGSIZE`.
    pub(crate) fn keeps_df(&self, v4: bool) -> bool {
        // SAFETY: `sk` is live; the helper reads option bits.
        unsafe { bindings::sci_udp_keeps_df(self.sk(), v4) }
    }

    /// What this UDP socket puts on a datagram to an IPv4 (`v4`) or IPv6 destination whose
    /// message names none: its traffic class (`IP_TOS`, `IPV6_TCLASS`), and its segment
    /// size (0: one datagram), `asked` by the message's `UDP_SEGMENT` or else its own
    /// option; `None` when UDP would refuse to segment it (no checksums).
    pub(crate) fn send_params(&self, v4: bool, asked: Option<u16>) -> Option<(u8, usize)> {
        let mut tos = 0;
        let asked = asked.map_or(-1, i32::from);
        // SAFETY: `sk` is live; the helper reads option bits into `tos`, which lives across
        // the call.
        let segment = unsafe { bindings::sci_udp_send_params(self.sk(), v4, asked, &mut tos) };
        usize::try_from(segment).ok().map(|s| (tos, s))
    }

    /// A UDP socket that a read finds something in now (a datagram, or an error).
    pub(crate) fn readable(&self) -> bool {
        // SAFETY: `sk` is live; the helper reads queue heads locklessly, as poll does.
        unsafe { bindings::sci_udp_readable(self.sk()) }
    }

    /// Adds `n` datagrams a sender over SCI dropped at this socket's ring to its drops,
    /// which UDP counts for its own (`/proc/net/udp`, `SO_RXQ_OVFL`).
    pub(crate) fn add_drops(&self, n: u32) {
        if n != 0 {
            // SAFETY: `sk` is live; the helper adds to an atomic counter.
            unsafe { bindings::sci_udp_add_drops(self.sk(), n) }
        }
    }

    /// Adds to a datagram received over SCI the drop count (`SO_RXQ_OVFL`) when this UDP
    /// socket's reader asked for it and something was dropped, as UDP gives it.
    pub(crate) fn put_drops(&self, msg: Msg) {
        // SAFETY: `sk` is live and `msg` is the message being received; `put_cmsg` checks
        // the caller's room.
        unsafe { bindings::sci_udp_put_drops(self.sk(), msg) }
    }

    /// Whether datagrams this UDP socket sent are still in this machine: queued for the
    /// device or handed to it and not yet released (UDP's send queue, as `ss` shows it).
    pub(crate) fn sends_in_flight(&self) -> bool {
        self.queues().1 != 0
    }

    /// The receive buffer (`SO_RCVBUF`, as the kernel doubled it): what a sender over SCI
    /// may let wait in each ring of this socket, as UDP bounds its queue by it.
    pub(crate) fn rcvbuf(&self) -> u32 {
        u32::try_from(self.buffer_sizes().1).unwrap_or(0)
    }
}
