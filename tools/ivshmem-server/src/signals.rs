//! Termination signals as a pollable descriptor (signalfd), so that the
//! event loop ends cleanly and the destructors remove the files.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Blocks SIGTERM, SIGINT and SIGHUP and returns a signalfd that reads them.
/// Must run before any thread is started, so that no thread gets them instead.
pub fn termination_fd() -> io::Result<OwnedFd> {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it below.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid sigset_t for these calls, and a null old-set
    // pointer is allowed by pthread_sigmask.
    let fd = unsafe {
        libc::sigemptyset(&mut set);
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            libc::sigaddset(&mut set, sig);
        }
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK)
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: signalfd returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Reads one pending signal, returning its number.
pub fn read(fd: &OwnedFd) -> io::Result<u32> {
    // SAFETY: signalfd_siginfo is plain data.
    let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
    let size = std::mem::size_of::<libc::signalfd_siginfo>();
    // SAFETY: `info` is writable for `size` bytes.
    let n = unsafe {
        libc::read(
            fd.as_raw_fd(),
            (&mut info as *mut libc::signalfd_siginfo).cast(),
            size,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(info.ssi_signo)
}
