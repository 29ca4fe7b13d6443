// SPDX-License-Identifier: GPL-2.0

//! The datagram sockets implicit connections can reach (seed §5.1.7): the second
//! listener table. A datagram socket is entered once its native UDP socket is bound
//! (by `bind`, or by the first send or connect); a request with the datagram flag
//! (`proto/frame.rs`) is served by the best match for its destination address, port and
//! namespace, as a listener is for a stream request, and the new end is handed to the
//! socket with no `accept()`.
//!
//! The socket layer implements [`DatagramPort`]; the control plane holds the entries and
//! sweeps them, so an implicit connection idle for `dgram_idle_ms` ends even when its
//! socket makes no more calls.

use super::bound::Bound;
use super::Plane;
use crate::conn::Conn;
use kernel::sync::Arc;

/// Datagram sockets reachable over SCI at once (more are UDP only).
pub(super) const MAX_PORTS: usize = 1024;

/// A datagram socket implicit connections reach (the socket layer's).
pub(crate) trait DatagramPort: Send + Sync {
    /// Takes the new implicit connection `conn` (established, its peer's address in
    /// `conn.peer`); `Err` gives it back when the socket closed, takes no datagrams from
    /// that peer (connected elsewhere, or wants control messages the fabric cannot give)
    /// or holds as many as it may. Called before the accept is sent, so before the
    /// peer can write a datagram into `conn`.
    fn attach(&self, plane: &Plane<'_>, conn: Arc<Conn>) -> core::result::Result<(), Arc<Conn>>;
    /// The listener kthread's periodic look: ends the connections idle longer than the
    /// limit (by the port's own clock) and frees those whose peer ended.
    fn sweep(&self, plane: &Plane<'_>);
}

/// The table of datagram sockets, by the address each is bound to.
pub(crate) type DatagramPorts = Bound<Arc<dyn DatagramPort>>;

/// Whether `a` and `b` are the same socket (the data pointers: two `dyn` pointers to one
/// object may carry different vtable pointers).
pub(super) fn same_port(a: &Arc<dyn DatagramPort>, b: &Arc<dyn DatagramPort>) -> bool {
    core::ptr::eq(
        (&**a as *const dyn DatagramPort).cast::<u8>(),
        (&**b as *const dyn DatagramPort).cast::<u8>(),
    )
}
