//! The wire format of QEMU's ivshmem client-server protocol
//! (docs/specs/ivshmem-spec.rst): the server only ever sends, and every
//! message is one little-endian `i64`, optionally with one file descriptor
//! passed by SCM_RIGHTS.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::os::unix::net::UnixStream;

/// The first message on every connection.
pub const VERSION: i64 = 0;
/// The value that accompanies the shared memory descriptor.
pub const SHM: i64 = -1;

/// Sends one message without blocking: a client that does not drain its
/// socket is broken, and the caller disconnects it.
pub fn send(stream: &UnixStream, value: i64, fd: Option<BorrowedFd<'_>>) -> io::Result<()> {
    let mut data = value.to_le_bytes();
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: data.len(),
    };
    // Room for one cmsghdr and one int, u64-aligned as cmsghdr requires.
    let mut control = [0u64; 4];
    // SAFETY: msghdr is plain data; all-zero is a valid (empty) value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if let Some(fd) = fd {
        // SAFETY: CMSG_SPACE only computes a length.
        let space = unsafe { libc::CMSG_SPACE(size_of::<libc::c_int>() as u32) } as usize;
        assert!(space <= size_of::<[u64; 4]>());
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space;
        // SAFETY: msg_control points at `space` zeroed, aligned bytes that
        // outlive `msg`, so CMSG_FIRSTHDR returns a header inside them, and
        // CMSG_DATA the int-sized room after it that CMSG_SPACE accounted for.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast(), fd.as_raw_fd());
        }
    }
    // SAFETY: msg and everything it points to (iov, data, control) are live
    // for the duration of the call.
    let n = unsafe {
        libc::sendmsg(
            stream.as_raw_fd(),
            &msg,
            libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
        )
    };
    match n {
        n if n < 0 => Err(io::Error::last_os_error()),
        n if n as usize == data.len() => Ok(()),
        n => Err(io::Error::new(
            io::ErrorKind::WriteZero,
            format!("short send: {n} of {} bytes", data.len()),
        )),
    }
}
