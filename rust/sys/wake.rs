// SPDX-License-Identifier: GPL-2.0

//! Waking an `AF_SCI` socket's waiters by the address of its `struct sock`: what a
//! connection or a listen queue, which keep that address while the socket owns them, do
//! when the peer or the fabric moved something.

use crate::sys::bindings;

/// How a connection wakes the socket that owns it.
#[derive(Clone, Copy)]
pub(crate) enum Wake {
    /// Data or end of stream to read.
    Readable,
    /// Space to write, or news every writer must hear of.
    Writable,
    /// Space to write, told only to a writer that found no room since the last wake
    /// (`SOCK_NOSPACE`, which such a writer sets: `sci_note_no_room`), as TCP tells of space
    /// an ACK freed.
    Space,
    /// A state change (connected, closed, reset).
    State,
}

/// Wakes the waiters of the `AF_SCI` sk at `sk` (an address stored by its connection
/// while the socket owns it; see `conn::Conn::set_owner`).
pub(crate) fn wake_sk(sk: usize, what: Wake) {
    let sk = sk as *mut bindings::sock;
    if sk.is_null() {
        return;
    }
    // SAFETY: the connection clears the address under its owner lock before the socket
    // is released, and calls this under the same lock, so `sk` is live.
    unsafe {
        match what {
            Wake::Readable => bindings::sci_wake_readable(sk),
            Wake::Writable => bindings::sci_wake_writable(sk),
            Wake::Space => bindings::sci_wake_space(sk),
            Wake::State => bindings::sci_wake_state(sk),
        }
    }
}
