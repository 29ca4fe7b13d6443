//! Raw system calls, and the few well-formed calls the harness itself makes.

use std::time::Instant;

/// Six raw system call arguments.
pub type Args = [u64; 6];

/// A raw system call with arguments the fuzzer made up.
///
/// The caller's contract (see `mem.rs`): every argument that the kernel takes as a
/// pointer is a place in one of the calling thread's scratch arenas or one of the
/// process's bad pointers, never the address of a Rust object; the call is one of those
/// the fuzzer makes on purpose (no memory mapping calls, no signals to other processes).
pub fn raw(nr: libc::c_long, a: Args) -> Result<i64, i32> {
    // SAFETY: by the contract above the kernel can write only into the scratch arenas,
    // which Rust code reads only as raw bytes, or fail with EFAULT on a bad pointer; it
    // validates every other argument itself. File descriptors are the calling thread's
    // own (or numbers that are invalid on purpose), so no other part of the fuzzer loses
    // a descriptor it relies on.
    let r = unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]) };
    if r < 0 {
        Err(errno())
    } else {
        Ok(r)
    }
}

/// setsockopt with a well-formed value (the harness's own calls, not counted).
pub fn setsockopt_bytes(fd: i32, level: i32, name: i32, val: &[u8]) -> Result<(), i32> {
    // SAFETY: `val` is a live slice of `val.len()` bytes that the kernel only reads.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            val.as_ptr() as *const libc::c_void,
            val.len() as libc::socklen_t,
        )
    };
    ok_or_errno(r)
}

pub fn setsockopt_int(fd: i32, level: i32, name: i32, v: i32) -> Result<(), i32> {
    setsockopt_bytes(fd, level, name, &v.to_ne_bytes())
}

/// Receive and send timeouts of `ms` milliseconds, so that no call on `fd` blocks for long.
pub fn bound_timeouts(fd: i32, ms: u64) {
    let mut tv = [0u8; 16];
    tv[0..8].copy_from_slice(&((ms / 1000) as i64).to_ne_bytes());
    tv[8..16].copy_from_slice(&(((ms % 1000) * 1000) as i64).to_ne_bytes());
    let _ = setsockopt_bytes(fd, libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv);
    let _ = setsockopt_bytes(fd, libc::SOL_SOCKET, libc::SO_SNDTIMEO, &tv);
}

/// SO_LINGER with a bounded time (close blocks at most `secs` seconds).
pub fn bound_linger(fd: i32, on: bool, secs: i32) {
    let mut l = [0u8; 8];
    l[0..4].copy_from_slice(&(on as i32).to_ne_bytes());
    l[4..8].copy_from_slice(&secs.to_ne_bytes());
    let _ = setsockopt_bytes(fd, libc::SOL_SOCKET, libc::SO_LINGER, &l);
}

/// getsockopt into a local buffer; the bytes the kernel wrote.
pub fn getsockopt_bytes(fd: i32, level: i32, name: i32, len: usize) -> Result<Vec<u8>, i32> {
    let mut buf = vec![0u8; len];
    let mut l = len as libc::socklen_t;
    // SAFETY: `buf` has `l` writable bytes and `l` is a live local the kernel updates.
    let r = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            buf.as_mut_ptr() as *mut libc::c_void,
            &mut l,
        )
    };
    if r < 0 {
        return Err(errno());
    }
    buf.truncate(l as usize);
    Ok(buf)
}

/// The local port of a bound socket (getsockname into a local buffer).
pub fn local_port(fd: i32) -> Option<u16> {
    let mut ss = [0u8; 128];
    let mut len = ss.len() as libc::socklen_t;
    // SAFETY: `ss` has `len` writable bytes; `len` is a live local.
    let r = unsafe { libc::getsockname(fd, ss.as_mut_ptr() as *mut libc::sockaddr, &mut len) };
    if r < 0 || len < 4 {
        return None;
    }
    Some(u16::from_be_bytes([ss[2], ss[3]]))
}

/// bind to a well-formed address (the harness's listeners).
pub fn bind_bytes(fd: i32, addr: &[u8]) -> Result<(), i32> {
    // SAFETY: `addr` is a live slice the kernel only reads.
    let r = unsafe {
        libc::bind(
            fd,
            addr.as_ptr() as *const libc::sockaddr,
            addr.len() as libc::socklen_t,
        )
    };
    ok_or_errno(r)
}

pub fn close(fd: i32) {
    // SAFETY: closing a descriptor the caller owns.
    unsafe { libc::close(fd) };
}

/// A libc call's result: Ok, or the errno it left.
fn ok_or_errno(r: libc::c_int) -> Result<(), i32> {
    if r < 0 {
        Err(errno())
    } else {
        Ok(())
    }
}

pub fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

pub fn set_nonblocking(fd: i32) {
    // SAFETY: fcntl on a descriptor the caller owns; no pointers.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
    }
}

pub fn gettid() -> i32 {
    // SAFETY: gettid takes no arguments.
    unsafe { libc::gettid() }
}

/// Milliseconds since the first call in this process (never 0 afterwards: 0 means idle).
pub fn now_ms() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1
}

/// The kernel stack of a task, for a hang report ("(unreadable)" when it cannot be read).
pub fn kernel_stack(pid: i32, tid: i32) -> String {
    let path = if tid > 0 {
        format!("/proc/{pid}/task/{tid}/stack")
    } else {
        format!("/proc/{pid}/stack")
    };
    std::fs::read_to_string(&path).unwrap_or_else(|e| format!("(unreadable: {e})\n"))
}

pub fn wchan(pid: i32, tid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/wchan")).unwrap_or_default()
}

/// What descriptor `fd` of this process is (`socket:[N]`, `pipe:[N]`, a path), for a report.
pub fn fd_target(fd: u64) -> String {
    std::fs::read_link(format!("/proc/self/fd/{fd}"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "closed".into())
}

/// The calling thread's signal state (pending, shared pending, blocked, ignored masks),
/// read right after a call returned a kernel-internal errno such as `ERESTARTSYS`: that
/// one reaches user space only when no signal is pending at the return.
pub fn signal_state() -> String {
    let status = std::fs::read_to_string("/proc/thread-self/status").unwrap_or_default();
    status
        .lines()
        .filter(|l| {
            ["SigPnd", "ShdPnd", "SigBlk", "SigIgn"]
                .iter()
                .any(|k| l.starts_with(k))
        })
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join(", ")
}
