// SPDX-License-Identifier: GPL-2.0

//! The listening side of an `AF_SCI` stream socket: `listen(2)`, which also makes the
//! socket reachable over SCI at the address it is bound to, and `accept(2)`, which hands
//! out SCI connections and TCP connections through the same call.

use super::*;

/// The flags of an accept (`O_NONBLOCK`, ...).
fn accept_flags(arg: *mut bindings::proto_accept_arg) -> c_int {
    crate::sys::net::accept_arg_flags(arg)
}

impl SciSock {
    /// `listen(2)`.
    pub(crate) fn listen(&self, own: &OwnSk, backlog: c_int) -> Result {
        if self.conn().is_some() {
            return Err(EINVAL);
        }
        let native = self.commit(own, None)?;
        native.listen(backlog)?;
        own.set_state(bindings::TCP_LISTEN);
        let opted_out = self.opted_out.load(Ordering::Relaxed);
        if opted_out {
            self.fallback
                .store(FallbackReason::OptedOut as u32, Ordering::Relaxed);
        }
        if sci_loopback_enabled() && !opted_out && self.listen_queue.lock().is_none() {
            // Reachable over SCI too at the address it is bound to; if that address is
            // already served over SCI (SO_REUSEPORT), this socket takes TCP only.
            let plane = &self.stack.plane;
            if let Some(addr) = listen_addr(own, &native) {
                let queue = ListenQueue::new(addr, own.wake_token())?;
                let join = JoinPoint::new(
                    native,
                    own.wake_token(),
                    self.slot.hooks().saved(),
                    queue.clone(),
                )?;
                if plane.listen(queue.clone()).is_ok() {
                    *self.listen_queue.lock() = Some(queue);
                    *self.join.lock() = Some(join);
                }
            }
        }
        Ok(())
    }

    /// `accept(2)`: the next native connection; the adapter wraps it in a new socket.
    /// SCI connections and TCP connections come through the same `accept()`.
    pub(crate) fn accept(
        &self,
        own: &OwnSk,
        arg: *mut bindings::proto_accept_arg,
    ) -> Result<Accepted> {
        let native = self.native();
        self.sync_error(own, &native);
        let Some(queue) = self.listen_queue.lock().clone() else {
            return native.accept(arg).map(Accepted::Native);
        };
        let join = self.join.lock().clone();
        let nonblock = accept_flags(arg) & bindings::O_NONBLOCK as c_int != 0;
        let mut timeo = own.rcvtimeo(nonblock);
        loop {
            if let Some(conn) = queue.pop() {
                return Ok(Accepted::Sci(conn));
            }
            // Connections the kthread took while looking for a failover's TCP
            // connection come first: they arrived before what is queued now.
            if let Some(native) = join.as_ref().and_then(|j| j.pop_stash()) {
                return Ok(Accepted::Native(native));
            }
            match native.accept_nonblock(arg) {
                Err(e) if e == EAGAIN => {}
                // A failed-over SCI connection's TCP connection is its socket's, never
                // the program's (`socket/join/`).
                Ok(n) => match join.as_ref() {
                    Some(j) if j.deliver(n) => {
                        j.judge_if_due(&self.stack.plane);
                        continue;
                    }
                    _ => return Ok(Accepted::Native(n)),
                },
                Err(e) => return Err(e),
            }
            own.wait(&mut timeo, || {
                let mask = native.poll_mask(core::ptr::null_mut());
                let stopped = u32::from(native.state()) != bindings::TCP_LISTEN;
                let stashed = join.as_ref().is_some_and(|j| j.has_stash());
                Ok(!queue.is_empty() || stashed || stopped || mask & (EPOLLIN | EPOLLERR) != 0)
            })?;
        }
    }

    /// Takes an SCI connection accepted on `listener` (whose sk is `listener_own`): the new
    /// socket gets a fresh native socket of the listener's family (for its options), and
    /// the connection.
    pub(crate) fn adopt_sci(
        &self,
        own: &OwnSk,
        conn: Arc<Conn>,
        listener: &SciSock,
        listener_own: &OwnSk,
    ) -> Result {
        let native = self.slot.create(own, listener.native().family())?;
        // As a TCP socket accepted there: it has the listener's options, the native
        // socket's (TCP's, and the socket level's for a later move onto TCP) and our sk's,
        // which the socket layer reads and the calls over SCI follow.
        native.accept_options(&listener.native());
        own.inherit_options(listener_own);
        self.slot.mark_committed();
        conn.set_owner(own.wake_token());
        own.set_state(bindings::TCP_ESTABLISHED);
        self.enter_join_point(listener, &conn);
        *self.sci.lock() = Some(conn);
        self.fallback
            .store(FallbackReason::None as u32, Ordering::Relaxed);
        own.stats().socket_created();
        own.stats().sci_connection();
        Ok(())
    }
}

/// What a bound native socket is bound to, as SCI requests are matched (a stream
/// listener's, a datagram socket's); `None` for an address the SCI path does not serve
/// (link-local IPv6).
pub(crate) fn listen_addr(own: &OwnSk, native: &Native) -> Option<ListenAddr> {
    let (ip, port) = native.addrs().local;
    if is_link_local(ip) {
        return None;
    }
    let (namespace, init_ns) = own.namespace();
    Some(ListenAddr {
        ip: (!ip.is_unspecified()).then(|| ip.canonical()),
        port,
        v6: native.family() == bindings::AF_INET6 as c_int,
        v6only: native.v6only(),
        namespace,
        init_ns,
    })
}
