//! A connected client: its id, its socket and one eventfd per vector.
//!
//! The eventfds are the peer's doorbells: the peer itself gets them to wait
//! on, every other peer gets them to write to.  Dropping a Peer closes its
//! socket and the server's copies of its eventfds.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

pub struct Peer {
    pub id: u16,
    pub stream: UnixStream,
    pub vectors: Vec<OwnedFd>,
}

impl Peer {
    pub fn new(id: u16, stream: UnixStream, vectors: u16) -> io::Result<Self> {
        let vectors = (0..vectors).map(|_| eventfd()).collect::<io::Result<_>>()?;
        Ok(Peer {
            id,
            stream,
            vectors,
        })
    }
}

/// Non-blocking like QEMU's event notifiers: the flag belongs to the open
/// file, which every peer shares, and QEMU sets it anyway.
fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd takes no pointers.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: eventfd returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
