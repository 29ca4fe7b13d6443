//! The system-call layer: a stream socket of any family the benchmark uses, and the few
//! socket options it reads. All of sci-bench's `unsafe` code is in this file.

use serde::{Deserialize, Serialize};
use std::io;
use std::mem::size_of;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// `AF_SMC` (include/linux/socket.h).
pub const AF_SMC: i32 = 43;
/// `SMCPROTO_SMC`: an `AF_SMC` socket that takes `sockaddr_in`.
pub const SMCPROTO_SMC: i32 = 0;
/// `SOL_SCI`, `SCI_INFO` and the AF_SCI defaults of `uapi/linux/af_sci.h`.
pub const SOL_SCI: i32 = 300;
pub const SCI_INFO: i32 = 1;
pub const AF_SCI_FAMILY_PATH: &str = "/sys/module/af_sci/parameters/family";

/// `struct sci_info` of `uapi/linux/af_sci.h`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SciInfo {
    /// `SCI_MODE_NATIVE` (0) or `SCI_MODE_SCI` (1).
    pub mode: u32,
    pub fallback_reason: u32,
    pub native_family: u32,
    pub state: u32,
}

/// The family number of the loaded af_sci module, `None` when it is not loaded.
pub fn sci_family() -> Option<i32> {
    std::fs::read_to_string(AF_SCI_FAMILY_PATH)
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

/// A CPU mask as the kernel's `sched_{get,set}affinity` take it: 1024 bits.
type CpuMask = [u64; 16];

fn get_affinity() -> io::Result<CpuMask> {
    let mut mask: CpuMask = [0; 16];
    // SAFETY: mask is live, writable storage of size_of::<CpuMask>() bytes, which is the
    // size passed; pid 0 is the calling thread.
    cvt(unsafe {
        libc::sched_getaffinity(0, size_of::<CpuMask>(), (&mut mask as *mut CpuMask).cast())
    })?;
    Ok(mask)
}

fn set_affinity(mask: &CpuMask) -> io::Result<()> {
    // SAFETY: mask is live storage of size_of::<CpuMask>() bytes, which is the size passed;
    // the kernel only reads it. pid 0 is the calling thread.
    cvt(unsafe {
        libc::sched_setaffinity(0, size_of::<CpuMask>(), (mask as *const CpuMask).cast())
    })?;
    Ok(())
}

/// The CPUs the calling thread may run on.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    let mask = get_affinity()?;
    Ok((0..mask.len() * 64)
        .filter(|&c| mask[c / 64] & (1 << (c % 64)) != 0)
        .collect())
}

/// Restricts the calling thread to one CPU until dropped, then restores its mask.
pub struct Pinned {
    saved: CpuMask,
}

impl Pinned {
    pub fn to(cpu: usize) -> io::Result<Pinned> {
        let saved = get_affinity()?;
        let mut mask: CpuMask = [0; 16];
        *mask.get_mut(cpu / 64).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("no CPU {cpu}"))
        })? |= 1 << (cpu % 64);
        set_affinity(&mask)?;
        Ok(Pinned { saved })
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        let _ = set_affinity(&self.saved);
    }
}

/// Where a listener is reached: 127.0.0.1 and a port, any IPv4 address and port (the
/// remote mode), or an abstract AF_UNIX name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Inet(u16),
    V4(SocketAddrV4),
    Abstract(Vec<u8>),
}

impl Endpoint {
    /// The port of an IPv4 endpoint, 0 for an AF_UNIX name.
    fn port(&self) -> u16 {
        match self {
            Endpoint::Inet(p) => *p,
            Endpoint::V4(a) => a.port(),
            Endpoint::Abstract(_) => 0,
        }
    }
}

fn sockaddr_in(addr: Ipv4Addr, port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(addr).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// An abstract `sockaddr_un` and its length.
fn sockaddr_un(name: &[u8]) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    let mut sun = libc::sockaddr_un {
        sun_family: libc::AF_UNIX as libc::sa_family_t,
        sun_path: [0; 108],
    };
    if name.len() + 1 > sun.sun_path.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "AF_UNIX name too long",
        ));
    }
    // sun_path[0] stays 0: the abstract namespace.
    for (dst, src) in sun.sun_path[1..].iter_mut().zip(name) {
        *dst = *src as libc::c_char;
    }
    let len = size_of::<libc::sa_family_t>() + 1 + name.len();
    Ok((sun, len as libc::socklen_t))
}

/// Converts a libc return value to `io::Result`.
fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// A stream socket (`SOCK_STREAM | SOCK_CLOEXEC`) of any family, closed on drop.
#[derive(Debug)]
pub struct Sock {
    fd: OwnedFd,
}

impl Sock {
    /// Takes ownership of a descriptor that socket() or accept4() just returned.
    fn from_new_fd(fd: libc::c_int) -> Sock {
        // SAFETY: callers pass a descriptor the kernel has just created for this call,
        // which nothing else owns or will close.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Sock { fd }
    }

    /// Another descriptor of the same socket (`dup`): the socket stays open until both
    /// are dropped.
    pub fn try_clone(&self) -> io::Result<Sock> {
        Ok(Sock {
            fd: self.fd.try_clone()?,
        })
    }

    /// `socket(domain, SOCK_STREAM | SOCK_CLOEXEC, protocol)`.
    pub fn new(domain: i32, protocol: i32) -> io::Result<Sock> {
        let ty = libc::SOCK_STREAM | libc::SOCK_CLOEXEC;
        // SAFETY: socket() takes no pointers.
        let fd = cvt(unsafe { libc::socket(domain, ty, protocol) })?;
        Ok(Sock::from_new_fd(fd))
    }

    fn raw(&self) -> libc::c_int {
        self.fd.as_raw_fd()
    }

    fn with_addr<T>(
        ep: &Endpoint,
        f: impl FnOnce(*const libc::sockaddr, libc::socklen_t) -> T,
    ) -> io::Result<T> {
        match ep {
            Endpoint::Inet(_) | Endpoint::V4(_) => {
                let sa = match ep {
                    Endpoint::V4(a) => sockaddr_in(*a.ip(), a.port()),
                    _ => sockaddr_in(Ipv4Addr::LOCALHOST, ep.port()),
                };
                Ok(f(
                    (&sa as *const libc::sockaddr_in).cast(),
                    size_of::<libc::sockaddr_in>() as libc::socklen_t,
                ))
            }
            Endpoint::Abstract(name) => {
                let (sun, len) = sockaddr_un(name)?;
                Ok(f((&sun as *const libc::sockaddr_un).cast(), len))
            }
        }
    }

    pub fn bind(&self, ep: &Endpoint) -> io::Result<()> {
        let fd = self.raw();
        // SAFETY: with_addr passes a pointer to a live, initialised sockaddr of the given
        // length; bind() does not keep it.
        cvt(Self::with_addr(ep, |sa, len| unsafe {
            libc::bind(fd, sa, len)
        })?)?;
        Ok(())
    }

    pub fn connect(&self, ep: &Endpoint) -> io::Result<()> {
        let fd = self.raw();
        loop {
            // SAFETY: as in bind(); connect() does not keep the pointer.
            let ret = Self::with_addr(ep, |sa, len| unsafe { libc::connect(fd, sa, len) })?;
            match cvt(ret) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => return r.map(drop),
            }
        }
    }

    pub fn listen(&self, backlog: i32) -> io::Result<()> {
        // SAFETY: listen() takes no pointers.
        cvt(unsafe { libc::listen(self.raw(), backlog) })?;
        Ok(())
    }

    pub fn accept(&self) -> io::Result<Sock> {
        loop {
            // SAFETY: null address pointers are allowed; a non-negative result is a new
            // descriptor owned by nobody else.
            let ret = unsafe {
                libc::accept4(
                    self.raw(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_CLOEXEC,
                )
            };
            match cvt(ret) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
                Ok(fd) => return Ok(Sock::from_new_fd(fd)),
            }
        }
    }

    /// The local port of a socket bound to an IPv4 address.
    pub fn local_port(&self) -> io::Result<u16> {
        let mut sa = sockaddr_in(Ipv4Addr::UNSPECIFIED, 0);
        let mut len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let ptr: *mut libc::sockaddr = (&mut sa as *mut libc::sockaddr_in).cast();
        // SAFETY: ptr and len point to live storage of len bytes; the kernel writes at
        // most len bytes and updates len.
        cvt(unsafe { libc::getsockname(self.raw(), ptr, &mut len) })?;
        if sa.sin_family != libc::AF_INET as libc::sa_family_t {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "not an IPv4 socket",
            ));
        }
        Ok(u16::from_be(sa.sin_port))
    }

    fn getsockopt<T: Copy + Default>(&self, level: i32, name: i32) -> io::Result<T> {
        let mut value = T::default();
        let mut len = size_of::<T>() as libc::socklen_t;
        // SAFETY: value is live storage of len bytes; the kernel writes at most len bytes.
        // T is a plain integer or #[repr(C)] struct of integers, valid for any bytes.
        cvt(unsafe {
            libc::getsockopt(
                self.raw(),
                level,
                name,
                (&mut value as *mut T).cast(),
                &mut len,
            )
        })?;
        if len as usize != size_of::<T>() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("getsockopt({level}, {name}) returned {len} bytes"),
            ));
        }
        Ok(value)
    }

    fn setsockopt<T: Copy>(&self, level: i32, name: i32, value: T) -> io::Result<()> {
        // SAFETY: value is live for the call and size_of::<T>() bytes long.
        cvt(unsafe {
            libc::setsockopt(
                self.raw(),
                level,
                name,
                (&value as *const T).cast(),
                size_of::<T>() as libc::socklen_t,
            )
        })?;
        Ok(())
    }

    /// `SO_DOMAIN`: the family the kernel says the socket is of.
    pub fn domain(&self) -> io::Result<i32> {
        self.getsockopt::<libc::c_int>(libc::SOL_SOCKET, libc::SO_DOMAIN)
    }

    /// `getsockopt(SOL_SCI, SCI_INFO)`.
    pub fn sci_info(&self) -> io::Result<SciInfo> {
        self.getsockopt::<SciInfo>(SOL_SCI, SCI_INFO)
    }

    pub fn set_nodelay(&self) -> io::Result<()> {
        self.setsockopt::<libc::c_int>(libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)
    }

    pub fn set_reuseaddr(&self) -> io::Result<()> {
        self.setsockopt::<libc::c_int>(libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)
    }

    /// `SO_RCVTIMEO` and `SO_SNDTIMEO`, so that a broken peer ends a run instead of
    /// hanging it.
    pub fn set_timeouts(&self, timeout: Duration) -> io::Result<()> {
        let tv = libc::timeval {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_usec: timeout.subsec_micros() as libc::suseconds_t,
        };
        self.setsockopt(libc::SOL_SOCKET, libc::SO_RCVTIMEO, tv)?;
        self.setsockopt(libc::SOL_SOCKET, libc::SO_SNDTIMEO, tv)
    }

    /// The socket's inode number (what `smc_diag` reports as `diag_inode`).
    pub fn inode(&self) -> io::Result<u64> {
        let meta = std::fs::metadata(format!("/proc/self/fd/{}", self.raw()));
        match meta {
            Ok(m) => Ok(std::os::unix::fs::MetadataExt::ino(&m)),
            Err(e) => Err(e),
        }
    }

    /// Sends all of `buf` (`MSG_NOSIGNAL`: a closed peer is an error, not a signal).
    pub fn send_all(&self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            // SAFETY: buf is a live slice of buf.len() bytes; send() does not keep it.
            let n = unsafe {
                libc::send(
                    self.raw(),
                    buf.as_ptr().cast(),
                    buf.len(),
                    libc::MSG_NOSIGNAL,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            buf = &buf[n as usize..];
        }
        Ok(())
    }

    /// One `recv()`: the number of bytes read, 0 at end of stream.
    pub fn recv_some(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            // SAFETY: buf is a live, writable slice of buf.len() bytes.
            let n = unsafe { libc::recv(self.raw(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// Fills `buf`. `Ok(false)` when the stream ended before the first byte,
    /// `UnexpectedEof` when it ended in the middle.
    pub fn recv_exact(&self, buf: &mut [u8]) -> io::Result<bool> {
        let mut got = 0;
        while got < buf.len() {
            let n = self.recv_some(&mut buf[got..])?;
            if n == 0 {
                if got == 0 {
                    return Ok(false);
                }
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("stream ended after {got} of {} bytes", buf.len()),
                ));
            }
            got += n;
        }
        Ok(true)
    }

    /// Like [`Sock::recv_exact`], but the end of the stream is an error too.
    pub fn recv_all(&self, buf: &mut [u8]) -> io::Result<()> {
        if self.recv_exact(buf)? {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "peer closed the connection",
            ))
        }
    }

    pub fn shutdown_write(&self) -> io::Result<()> {
        // SAFETY: shutdown() takes no pointers.
        cvt(unsafe { libc::shutdown(self.raw(), libc::SHUT_WR) })?;
        Ok(())
    }
}

/// An epoll instance (level-triggered, input only): the event loop of the hot-spot
/// server, which serves every connection from one thread.
pub struct Poller {
    fd: OwnedFd,
}

impl Poller {
    pub fn new() -> io::Result<Poller> {
        // SAFETY: epoll_create1() takes no pointers.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: a descriptor the kernel has just created for this call, owned by nothing
        // else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Poller { fd })
    }

    /// Watches `sock` for input (and its end), reported as `token`.
    pub fn add(&self, sock: &Sock, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLRDHUP) as u32,
            u64: token,
        };
        // SAFETY: ev is a live epoll_event; epoll_ctl() copies it.
        cvt(unsafe {
            libc::epoll_ctl(
                self.fd.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                sock.raw(),
                &mut ev,
            )
        })?;
        Ok(())
    }

    /// Stops watching `sock`.
    pub fn remove(&self, sock: &Sock) -> io::Result<()> {
        // SAFETY: a null event is allowed for EPOLL_CTL_DEL.
        cvt(unsafe {
            libc::epoll_ctl(
                self.fd.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                sock.raw(),
                std::ptr::null_mut(),
            )
        })?;
        Ok(())
    }

    /// Waits up to `timeout` for watched sockets with input; their tokens go into `ready`
    /// (empty after a timeout).
    pub fn wait(&self, ready: &mut Vec<u64>, timeout: Duration) -> io::Result<()> {
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 64];
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        ready.clear();
        let n = loop {
            // SAFETY: evs is a live array of evs.len() events that epoll_wait() fills.
            let n = unsafe {
                libc::epoll_wait(self.fd.as_raw_fd(), evs.as_mut_ptr(), evs.len() as i32, ms)
            };
            if n >= 0 {
                break n as usize;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        };
        ready.extend(evs[..n].iter().map(|e| e.u64));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_abstract_roundtrip() {
        let name = format!("sci-bench-test-{}", std::process::id()).into_bytes();
        let ep = Endpoint::Abstract(name);
        let l = Sock::new(libc::AF_UNIX, 0).unwrap();
        l.bind(&ep).unwrap();
        l.listen(4).unwrap();
        let c = Sock::new(libc::AF_UNIX, 0).unwrap();
        c.connect(&ep).unwrap();
        let s = l.accept().unwrap();
        assert_eq!(c.domain().unwrap(), libc::AF_UNIX);
        c.send_all(b"hello").unwrap();
        let mut buf = [0u8; 5];
        s.recv_all(&mut buf).unwrap();
        assert_eq!(&buf, b"hello");
        drop(c);
        assert!(!s.recv_exact(&mut buf).unwrap());
        assert!(s.inode().unwrap() > 0);
    }

    #[test]
    fn pinning_restores_the_mask() {
        let before = allowed_cpus().unwrap();
        assert!(!before.is_empty());
        let last = *before.last().unwrap();
        {
            let _p = Pinned::to(last).unwrap();
            assert_eq!(allowed_cpus().unwrap(), [last]);
        }
        assert_eq!(allowed_cpus().unwrap(), before);
        assert!(Pinned::to(5000).is_err());
    }

    #[test]
    fn tcp_loopback_ports() {
        let l = Sock::new(libc::AF_INET, 0).unwrap();
        l.bind(&Endpoint::Inet(0)).unwrap();
        l.listen(4).unwrap();
        let port = l.local_port().unwrap();
        assert_ne!(port, 0);
        let c = Sock::new(libc::AF_INET, 0).unwrap();
        c.connect(&Endpoint::Inet(port)).unwrap();
        c.set_nodelay().unwrap();
        assert_ne!(c.local_port().unwrap(), port);
        assert_eq!(c.domain().unwrap(), libc::AF_INET);
        // A TCP socket has no SOL_SCI options.
        assert!(c.sci_info().is_err());
    }
}
