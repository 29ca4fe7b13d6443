//! One fuzz thread: a random sequence of calls on its own descriptors (and now and then on
//! sockets other threads of its process hold), every pointer argument in its scratch arena
//! or a bad pointer (`mem.rs`), every blocking call bounded (receive and send timeouts on
//! every socket it makes or accepts, non-blocking pipes, short poll and epoll timeouts,
//! SO_LINGER at most 1 s).

use crate::addr::{mapped, sin, sin6, PeerKind, ANY6, LO4, LO6};
use crate::mem::{Arena, DATA_SIZE};
use crate::report::{errno_name, is_kernel_internal, Call, Counts, Report};
use crate::rng::Rng;
use crate::shared::{Ctx, SLOTS};
use crate::sys::{self, bound_linger, bound_timeouts, now_ms, raw, Args};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// At most this many descriptors per thread; beyond, the oldest is closed.
const MAX_FDS: usize = 64;
const SOL_SCI: i32 = 300;
const SCI_INFO: i32 = 1;
const SCI_NATIVE_FAMILY: i32 = 2;
const SCI_SPIN_US: i32 = 3;
const UIO_MAXIOV: u64 = 1024;
/// The most messages a blocking `sendmmsg`/`recvmmsg` on a valid vector is given. Each of
/// its sends or receives may wait for the socket's timeout (at most 150 ms, see
/// `bound_timeouts`), so 64 of them end within 10 s, under the watchdog's 30 s. With up to
/// `UIO_MAXIOV` (what the kernel clamps any count to) a receive on a connection whose other
/// end another thread keeps writing ran for 30 s in TCP's own `recvmsg`, legitimately,
/// and was reported as a hang. Non-blocking calls and bad vectors keep every count.
const BLOCKING_VLEN_MAX: u64 = 64;

/// Every MSG_* flag of Linux 6.12, MSG_SPLICE_PAGES (kernel-internal) included.
const MSG_FLAGS: [u64; 23] = [
    0x1,         // MSG_OOB
    0x2,         // MSG_PEEK
    0x4,         // MSG_DONTROUTE
    0x8,         // MSG_CTRUNC
    0x10,        // MSG_PROXY
    0x20,        // MSG_TRUNC
    0x40,        // MSG_DONTWAIT
    0x80,        // MSG_EOR
    0x100,       // MSG_WAITALL
    0x200,       // MSG_FIN
    0x400,       // MSG_SYN
    0x800,       // MSG_CONFIRM
    0x1000,      // MSG_RST
    0x2000,      // MSG_ERRQUEUE
    0x4000,      // MSG_NOSIGNAL
    0x8000,      // MSG_MORE
    0x10000,     // MSG_WAITFORONE
    0x40000,     // MSG_BATCH
    0x200_0000,  // MSG_SOCK_DEVMEM
    0x400_0000,  // MSG_ZEROCOPY
    0x800_0000,  // MSG_SPLICE_PAGES
    0x2000_0000, // MSG_FASTOPEN
    0x4000_0000, // MSG_CMSG_CLOEXEC
];
const MSG_TRUNC: u64 = 0x20;

const EPOLL_BITS: [u64; 15] = [
    0x1,
    0x2,
    0x4,
    0x8,
    0x10,
    0x40,
    0x80,
    0x100,
    0x200,
    0x400,
    0x2000,
    1 << 28, // EPOLLEXCLUSIVE
    1 << 29, // EPOLLWAKEUP
    1 << 30, // EPOLLONESHOT
    1 << 31, // EPOLLET
];
const POLL_BITS: [u64; 12] = [
    0x1, 0x2, 0x4, 0x8, 0x10, 0x20, 0x40, 0x80, 0x100, 0x200, 0x400, 0x2000,
];

/// ioctls worth asking a socket (and any descriptor).
const IOCTLS: [u64; 27] = [
    0x541B,      // FIONREAD / SIOCINQ
    0x5411,      // TIOCOUTQ / SIOCOUTQ
    0x894B,      // SIOCOUTQNSD
    0x8905,      // SIOCATMARK
    0x5421,      // FIONBIO
    0x5452,      // FIOASYNC
    0x8906,      // SIOCGSTAMP_OLD
    0x8907,      // SIOCGSTAMPNS_OLD
    0x8010_8906, // SIOCGSTAMP_NEW
    0x8010_8907, // SIOCGSTAMPNS_NEW
    0x8901,      // FIOSETOWN
    0x8902,      // SIOCSPGRP
    0x8903,      // FIOGETOWN
    0x8904,      // SIOCGPGRP
    0x5451,      // FIOCLEX
    0x5450,      // FIONCLEX
    0x5460,      // FIOQSIZE
    0x8933,      // SIOCGIFINDEX
    0x8913,      // SIOCGIFFLAGS
    0x8921,      // SIOCGIFMTU
    0x8910,      // SIOCGIFNAME
    0x894C,      // SIOCGSKNS (a new descriptor)
    0x89E0,      // SIOCPROTOPRIVATE
    0x89E1,
    0x89EF,
    0x89F0, // SIOCDEVPRIVATE
    0x8915, // SIOCGIFADDR
];
const FIONBIO: u64 = 0x5421;
const FIOSETOWN: u64 = 0x8901;
const SIOCSPGRP: u64 = 0x8902;
const SIOCGSKNS: u64 = 0x894C;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Sci,
    Tcp,
    /// An `AF_SCI` datagram socket.
    Dgram,
    Epoll,
    PipeR,
    PipeW,
    Other,
}

impl Kind {
    fn is_sock(self) -> bool {
        matches!(self, Kind::Sci | Kind::Tcp | Kind::Dgram)
    }
}

#[derive(Clone, Copy, Debug)]
struct Fd {
    fd: i32,
    kind: Kind,
    v6: bool,
    listening: bool,
}

/// An int as a syscall argument (sign-extended, as the kernel takes the low 32 bits).
fn i(v: i32) -> u64 {
    v as i64 as u64
}

pub struct Fuzzer<'a> {
    ctx: &'a Ctx,
    t: usize,
    rng: Rng,
    a: Arena,
    fds: VecDeque<Fd>,
    counts: Counts,
    report: Report,
    memfd: i32,
    pipe: (i32, i32),
    n: u64,
}

impl<'a> Fuzzer<'a> {
    pub fn new(ctx: &'a Ctx, t: usize, rng: Rng, a: Arena) -> Fuzzer<'a> {
        let mut f = Fuzzer {
            ctx,
            t,
            rng,
            a,
            fds: VecDeque::new(),
            counts: Counts::default(),
            report: Report::default(),
            memfd: -1,
            pipe: (-1, -1),
            n: 0,
        };
        // A file for sendfile: 128 KiB of the arena's noise in a memfd.
        let name = f.a.data_tail(16);
        f.a.put(name, b"sci-fuzz\0");
        if let Ok(fd) = raw(
            libc::SYS_memfd_create,
            [name, libc::MFD_CLOEXEC as u64, 0, 0, 0, 0],
        ) {
            f.memfd = fd as i32;
            let _ = raw(libc::SYS_write, [fd as u64, f.a.data, 128 * 1024, 0, 0, 0]);
        }
        let p = f.a.data_tail(64);
        if raw(
            libc::SYS_pipe2,
            [p, (libc::O_NONBLOCK | libc::O_CLOEXEC) as u64, 0, 0, 0, 0],
        )
        .is_ok()
        {
            f.pipe = f.a.fd_pair(p);
        }
        f
    }

    /// Fuzzes until the deadline.
    pub fn run(&mut self) {
        // Weights of the operations, in the order of `op`.
        const WEIGHTS: [u32; 31] = [
            6,  // socket
            1,  // socketpair
            4,  // bind
            3,  // listen
            9,  // connect
            5,  // accept4
            6,  // sendmsg
            6,  // recvmsg
            8,  // sendto
            8,  // recvfrom
            2,  // sendmmsg
            2,  // recvmmsg
            2,  // sendfile
            3,  // splice
            10, // setsockopt
            8,  // getsockopt
            4,  // ioctl
            3,  // shutdown
            3,  // getsockname / getpeername
            3,  // poll
            1,  // epoll_create1
            3,  // epoll_ctl
            2,  // epoll_wait
            1,  // fork
            3,  // dup, dup2, dup3
            4,  // close
            3,  // fcntl
            4,  // read, write, readv, writev
            5,  // a connected pair of our own
            1,  // pipe2
            1,  // SCI_INFO on several sockets
        ];
        while Instant::now() < self.ctx.deadline {
            let op = self.rng.weighted(&WEIGHTS);
            self.op(op);
        }
    }

    fn op(&mut self, op: usize) {
        match op {
            0 => self.op_socket(),
            1 => self.op_socketpair(),
            2 => self.op_bind(),
            3 => self.op_listen(),
            4 => self.op_connect(),
            5 => self.op_accept(),
            6 => self.op_sendmsg(),
            7 => self.op_recvmsg(),
            8 => self.op_sendto(),
            9 => self.op_recvfrom(),
            10 => self.op_sendmmsg(),
            11 => self.op_recvmmsg(),
            12 => self.op_sendfile(),
            13 => self.op_splice(),
            14 => self.op_setsockopt(),
            15 => self.op_getsockopt(),
            16 => self.op_ioctl(),
            17 => self.op_shutdown(),
            18 => self.op_names(),
            19 => self.op_poll(),
            20 => self.op_epoll_create(),
            21 => self.op_epoll_ctl(),
            22 => self.op_epoll_wait(),
            23 => self.op_fork(),
            24 => self.op_dup(),
            25 => self.op_close(),
            26 => self.op_fcntl(),
            27 => self.op_rw(),
            28 => self.op_pair(),
            29 => self.op_pipe2(),
            _ => self.op_info_all(),
        }
    }

    /// Closes every descriptor; the thread's report.
    pub fn finish(mut self) -> Report {
        for f in std::mem::take(&mut self.fds) {
            self.unshare(f.fd);
            sys::close(f.fd);
        }
        for fd in [self.memfd, self.pipe.0, self.pipe.1] {
            if fd >= 0 {
                sys::close(fd);
            }
        }
        let mut r = self.counts.to_report();
        r.merge(&self.report);
        r
    }

    // --- the call itself ----------------------------------------------------------------

    /// Makes one counted call, visible to the watchdog while it runs.
    fn sys(&mut self, call: Call, nr: libc::c_long, a: Args) -> Result<i64, i32> {
        self.n += 1;
        let slot = &SLOTS[self.t];
        slot.call.store(call as u32, Ordering::Relaxed);
        slot.arg.store(a[0] as i64, Ordering::Relaxed);
        slot.since.store(now_ms(), Ordering::Relaxed);
        if self.ctx.trace {
            eprintln!(
                "sci-fuzz: w{}.{} #{} {}({:#x}, {:#x}, {:#x}, {:#x}, {:#x}, {:#x})",
                self.ctx.proc_index,
                self.t,
                self.n,
                call.name(),
                a[0],
                a[1],
                a[2],
                a[3],
                a[4],
                a[5]
            );
        }
        let r = raw(nr, a);
        slot.since.store(0, Ordering::Relaxed);
        if self.ctx.trace {
            match r {
                Ok(v) => eprintln!(
                    "sci-fuzz: w{}.{} #{} = {v}",
                    self.ctx.proc_index, self.t, self.n
                ),
                Err(e) => eprintln!(
                    "sci-fuzz: w{}.{} #{} = -1 {}",
                    self.ctx.proc_index,
                    self.t,
                    self.n,
                    errno_name(e)
                ),
            }
        }
        self.counts.count(call, r.err());
        if let Err(e) = r {
            if is_kernel_internal(e) {
                // The thread's signal state at once, then what its descriptors are.
                let signals = sys::signal_state();
                let fds: Vec<String> = call
                    .fd_args()
                    .iter()
                    .map(|&k| format!("fd {} is {}", a[k], sys::fd_target(a[k])))
                    .collect();
                self.anomaly(format!(
                    "{}({:#x}, {:#x}, {:#x}, {:#x}) returned the kernel-internal errno {} ({e}); \
                     {}; {signals}",
                    call.name(),
                    a[0],
                    a[1],
                    a[2],
                    a[3],
                    errno_name(e),
                    fds.join(", "),
                ));
            }
        }
        r
    }

    fn anomaly(&mut self, what: String) {
        let line = format!("worker {} thread {}: {what}", self.ctx.proc_index, self.t);
        eprintln!("sci-fuzz: ANOMALY {line}");
        // Marks the spot in the kernel's trace, when one is being recorded (fuzz-guest
        // traces the signals: was a kernel-internal errno a signal's restart gone wrong?).
        let _ = std::fs::write(
            "/sys/kernel/tracing/trace_marker",
            format!("sci-fuzz: ANOMALY {line}\n"),
        );
        if self.report.anomalies.len() < 20 {
            self.report.anomalies.push(line);
        }
    }

    // --- descriptors --------------------------------------------------------------------

    fn add_fd(&mut self, fd: i32, kind: Kind, v6: bool) {
        if fd < 0 {
            return;
        }
        // A descriptor number the kernel handed out again (one of ours closed by dup2
        // or by a fork child's copy is not: those are other processes).
        self.fds.retain(|f| f.fd != fd);
        if kind.is_sock() {
            let ms = self.rng.range(50, 150);
            bound_timeouts(fd, ms);
            if self.rng.chance(1, 5) {
                let mut s = self.ctx.shared.lock().unwrap_or_else(|e| e.into_inner());
                if s.len() < 64 {
                    s.push(fd);
                } else {
                    let k = self.rng.below(64) as usize;
                    s[k] = fd;
                }
            }
        }
        self.fds.push_back(Fd {
            fd,
            kind,
            v6,
            listening: false,
        });
        while self.fds.len() > MAX_FDS {
            let old = self.fds.pop_front().expect("not empty");
            self.unshare(old.fd);
            let _ = self.sys(Call::Close, libc::SYS_close, [old.fd as u64, 0, 0, 0, 0, 0]);
        }
    }

    fn unshare(&self, fd: i32) {
        let mut s = self.ctx.shared.lock().unwrap_or_else(|e| e.into_inner());
        s.retain(|&x| x != fd);
    }

    fn garbage_fd(&mut self) -> i32 {
        self.rng
            .pick(&[-1, -100, 1 << 20, i32::MAX, 4095, i32::MIN])
    }

    /// Any of the thread's descriptors (or a bad number now and then).
    fn any_fd(&mut self) -> i32 {
        if self.fds.is_empty() || self.rng.chance(1, 30) {
            return self.garbage_fd();
        }
        let k = self.rng.below(self.fds.len() as u64) as usize;
        self.fds[k].fd
    }

    /// A socket to work on: (fd, kind, IPv6), mostly one of the thread's own.
    fn sock(&mut self) -> (i32, Kind, bool) {
        let r = self.rng.below(100);
        if r < 3 {
            return (self.garbage_fd(), Kind::Other, false);
        }
        if r < 6 {
            let fd = self.any_fd();
            return (fd, Kind::Other, false);
        }
        if r < 14 {
            let s = self
                .ctx
                .shared
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            if !s.is_empty() {
                let fd = self.rng.pick(&s);
                return (fd, Kind::Sci, self.rng.chance(1, 2));
            }
        }
        let socks: Vec<Fd> = self
            .fds
            .iter()
            .filter(|f| f.kind.is_sock())
            .copied()
            .collect();
        if socks.is_empty() || (socks.len() < 4 && self.rng.chance(1, 4)) {
            let kind = match self.rng.below(12) {
                0 | 1 => Kind::Tcp,
                2 => Kind::Dgram,
                _ => Kind::Sci,
            };
            let v6 = self.rng.chance(1, 3);
            return (self.new_socket(kind, v6), kind, v6);
        }
        let f = socks[self.rng.below(socks.len() as u64) as usize];
        (f.fd, f.kind, f.v6)
    }

    /// A well-formed stream socket (a counted call).
    fn new_socket(&mut self, kind: Kind, v6: bool) -> i32 {
        let fam = match (kind, v6) {
            (Kind::Tcp, false) => libc::AF_INET,
            (Kind::Tcp, true) => libc::AF_INET6,
            _ => self.ctx.family,
        };
        let (mut ty, protocol) = match kind {
            Kind::Dgram => (libc::SOCK_DGRAM, libc::IPPROTO_UDP),
            _ => (libc::SOCK_STREAM, libc::IPPROTO_TCP),
        };
        if self.rng.chance(2, 5) {
            ty |= libc::SOCK_NONBLOCK;
        }
        if self.rng.chance(1, 2) {
            ty |= libc::SOCK_CLOEXEC;
        }
        let proto = if self.rng.chance(1, 2) { 0 } else { protocol };
        match self.sys(
            Call::Socket,
            libc::SYS_socket,
            [i(fam), i(ty), i(proto), 0, 0, 0],
        ) {
            Ok(fd) => {
                let fd = fd as i32;
                self.add_fd(fd, kind, v6);
                if kind != Kind::Tcp && v6 && self.rng.chance(1, 2) {
                    let p = self.a.data_at(&mut self.rng, 4);
                    self.a.put_u32(p, libc::AF_INET6 as u32);
                    let _ = self.sys(
                        Call::Setsockopt,
                        libc::SYS_setsockopt,
                        [i(fd), i(SOL_SCI), i(SCI_NATIVE_FAMILY), p, 4, 0],
                    );
                }
                fd
            }
            Err(_) => -1,
        }
    }

    fn mark_listening(&mut self, fd: i32) {
        if let Some(f) = self.fds.iter_mut().find(|f| f.fd == fd) {
            f.listening = true;
            let entry = (f.kind, f.v6);
            if let Some(port) = sys::local_port(fd) {
                let mut p = self.ctx.own_ports.lock().unwrap_or_else(|e| e.into_inner());
                let e = (port, entry.1, entry.0 == Kind::Sci);
                if p.len() < 32 {
                    p.push(e);
                } else {
                    let k = self.rng.below(32) as usize;
                    p[k] = e;
                }
            }
        }
    }

    /// After a call that may have set the receive/send timeouts or SO_LINGER of `fd` to
    /// anything (or re-created an AF_SCI socket's native socket): bounded again.
    fn rebound(&mut self, fd: i32) {
        let ms = self.rng.range(50, 150);
        bound_timeouts(fd, ms);
    }

    // --- arguments ------------------------------------------------------------------------

    /// Puts `bytes` at a random place of the data zone; its address.
    fn put_data(&mut self, bytes: &[u8]) -> u64 {
        let p = self.a.data_at(&mut self.rng, bytes.len() as u64);
        self.a.put(p, bytes);
        p
    }

    /// A buffer: (pointer, length), mostly in the data zone, now and then bad.
    fn buf(&mut self) -> (u64, u64) {
        let len = match self.rng.below(20) {
            0 => 0,
            1..=5 => self.rng.range(1, 64),
            6..=11 => self.rng.range(1, 4096),
            12..=15 => self.rng.range(4096, 65536),
            16..=17 => self.rng.range(65536, DATA_SIZE as u64),
            18 => self.rng.range(DATA_SIZE as u64, 4 << 20),
            _ => self.rng.length(1024),
        };
        if self.rng.chance(1, 12) {
            return (self.ctx.bad.pick(&mut self.rng), len);
        }
        (self.a.data_at(&mut self.rng, len), len)
    }

    /// An int placed in the data zone (for *len arguments), or a bad pointer.
    fn int_ptr(&mut self, v: u32) -> u64 {
        if self.rng.chance(1, 10) {
            return self.ctx.bad.pick(&mut self.rng);
        }
        let p = self.a.data_at(&mut self.rng, 4);
        self.a.put_u32(p, v);
        p
    }

    fn msg_flags(&mut self) -> u64 {
        if self.rng.chance(1, 20) {
            return self.rng.next_u32() as u64;
        }
        let mut f = self.rng.flags(&MSG_FLAGS, 8);
        // Usually a common mix, so that calls get past flag checks.
        if self.rng.chance(1, 2) {
            f &= 0x1 | 0x2 | 0x40 | 0x100 | 0x4000 | 0x8000;
        }
        f
    }

    /// Address bytes for connect/bind/sendto on a socket of `kind`.
    fn addr_bytes(&mut self, kind: Kind, v6: bool, bind: bool) -> Vec<u8> {
        let r = self.rng.below(100);
        let peers = &self.ctx.peers;
        let port_any = self.rng.range(1, 65535) as u16;
        if bind {
            return match r {
                0..=44 => match (v6, self.rng.below(3)) {
                    (false, 0) => sin([0; 4], 0),
                    (false, _) => sin(LO4, 0),
                    (true, 0) => sin6(ANY6, 0, 0),
                    (true, 1) => sin6(LO6, 0, 0),
                    (true, _) => sin6(mapped(LO4), 0, 0),
                },
                45..=59 => {
                    let p = peers[self.rng.below(peers.len() as u64) as usize];
                    p.address(self.rng.next_u64())
                }
                60..=69 => self.own_port_addr(v6).unwrap_or_else(|| sin(LO4, 0)),
                70..=79 => {
                    if v6 {
                        sin6(LO6, port_any, 0)
                    } else {
                        sin(LO4, port_any)
                    }
                }
                _ => self.odd_addr(port_any),
            };
        }
        match r {
            0..=59 => {
                // A live peer: AF_SCI sockets mostly to AF_SCI listeners (the SCI path),
                // some to plain TCP listeners (fallback); TCP sockets mostly to the
                // AF_SCI listener meant for them (peer-tcp).
                let want = match (kind, self.rng.below(20)) {
                    (Kind::Tcp, 0..=11) => Some(PeerKind::SciForTcp),
                    (Kind::Tcp, _) => None,
                    // Datagram sockets mostly to the datagram peers (implicit
                    // connections), some to the stream ports (refused: UDP only).
                    (Kind::Dgram, 0..=15) => Some(PeerKind::SciDgram),
                    (Kind::Dgram, _) => None,
                    (_, 0..=11) => Some(PeerKind::Sci),
                    (_, 12..=16) => Some(PeerKind::Tcp),
                    (_, _) => Some(PeerKind::SciForTcp),
                };
                let cands: Vec<_> = peers
                    .iter()
                    .filter(|p| want.map_or(true, |k| p.kind == k))
                    .copied()
                    .collect();
                let cands = if cands.is_empty() {
                    peers.clone()
                } else {
                    cands
                };
                let p = cands[self.rng.below(cands.len() as u64) as usize];
                p.address(self.rng.next_u64())
            }
            60..=71 => self.own_port_addr(v6).unwrap_or_else(|| sin(LO4, 1)),
            72..=77 => match self.rng.below(3) {
                0 => sin(LO4, 1),
                1 => sin6(LO6, 1, 0),
                _ => sin(LO4, port_any),
            },
            78..=83 => {
                let mut b = vec![0u8; 16];
                if self.rng.chance(1, 3) {
                    b.resize(28, 0);
                }
                b // AF_UNSPEC: disconnect
            }
            _ => self.odd_addr(port_any),
        }
    }

    fn own_port_addr(&mut self, v6: bool) -> Option<Vec<u8>> {
        let ports = self
            .ctx
            .own_ports
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if ports.is_empty() {
            return None;
        }
        let (port, lv6, _) = ports[self.rng.below(ports.len() as u64) as usize];
        Some(if lv6 || v6 {
            sin6(LO6, port, 0)
        } else {
            sin(LO4, port)
        })
    }

    /// Addresses that are well-formed but odd, or of the wrong family.
    fn odd_addr(&mut self, port: u16) -> Vec<u8> {
        match self.rng.below(14) {
            0 => sin([10, 255, 255, 1], port),
            1 => sin([0, 0, 0, 0], port),
            2 => sin6(ANY6, port, 0),
            3 => {
                let mut ll = [0u8; 16];
                ll[0] = 0xfe;
                ll[1] = 0x80;
                ll[15] = 1;
                sin6(ll, port, self.rng.below(4) as u32)
            }
            4 => sin([224, 0, 0, 1], port),
            5 => sin([255, 255, 255, 255], port),
            6 => sin([127, 0, 0, 2], port),
            7 => sin6(mapped([10, 0, 0, 1]), port, 0),
            8 => {
                // AF_UNIX with a path
                let mut b = vec![0u8; 110];
                b[0..2].copy_from_slice(&(libc::AF_UNIX as u16).to_ne_bytes());
                b[2..10].copy_from_slice(b"/tmp/sci");
                b
            }
            9 => {
                // the AF_SCI number itself as sa_family
                let mut b = sin(LO4, port);
                b[0..2].copy_from_slice(&(self.ctx.family as u16).to_ne_bytes());
                b
            }
            10 => {
                let mut b = sin(LO4, port);
                let f = self.rng.next_u32() as u16;
                b[0..2].copy_from_slice(&f.to_ne_bytes());
                b
            }
            11 => {
                // AF_INET6 in a sockaddr_in's length
                let mut b = sin6(LO6, port, 0);
                b.truncate(self.rng.pick(&[8, 16, 23, 24]));
                b
            }
            12 => {
                // AF_INET with a sockaddr_in6's length
                let mut b = sin(LO4, port);
                b.resize(28, 0xaa);
                b
            }
            _ => {
                let mut b = vec![0u8; self.rng.range(0, 128) as usize];
                self.rng.fill(&mut b);
                b
            }
        }
    }

    /// An address argument: (pointer, length).
    fn addr(&mut self, kind: Kind, v6: bool, bind: bool) -> (u64, u64) {
        let bytes = self.addr_bytes(kind, v6, bind);
        let p = self.put_data(&bytes);
        match self.rng.below(100) {
            0..=84 => (p, bytes.len() as u64),
            85..=92 => {
                let l = self.rng.pick(&[
                    0, 1, 2, 3, 8, 15, 16, 23, 27, 28, 29, 110, 127, 128, 129, 4096,
                ]);
                (p, l)
            }
            93..=95 => (p, self.rng.length(16)),
            96 => {
                // The read-only page holds peers' addresses every 32 bytes.
                let k = self.rng.below(4);
                (self.ctx.bad.ro + 32 * k, self.rng.pick(&[16, 28]))
            }
            _ => (
                self.ctx.bad.pick(&mut self.rng),
                self.rng.pick(&[16, 28, 0, 128]),
            ),
        }
    }

    /// A msghdr at `at` (structure zone) with its iovecs at `iov_at`; at most `max_iov`
    /// iovec entries are written. Returns the pointer to pass (sometimes misaligned or bad).
    fn msghdr(
        &mut self,
        at: u64,
        iov_at: u64,
        max_iov: u64,
        send: bool,
        kind: Kind,
        v6: bool,
    ) -> u64 {
        let (name, namelen) = match self.rng.below(20) {
            0..=14 => (0, 0),
            15..=17 => self.addr(kind, v6, false),
            18 => (self.a.data_at(&mut self.rng, 128), self.rng.length(128)),
            _ => (self.ctx.bad.pick(&mut self.rng), 16),
        };
        let (iov, iovlen) = self.iovecs(iov_at, max_iov);
        let (control, controllen) = if send {
            self.cmsgs()
        } else {
            self.recv_control()
        };
        let flags = if self.rng.chance(1, 4) {
            self.rng.next_u32()
        } else {
            0
        };
        let mut b = [0u8; 56];
        b[0..8].copy_from_slice(&name.to_ne_bytes());
        b[8..12].copy_from_slice(&(namelen as u32).to_ne_bytes());
        b[16..24].copy_from_slice(&iov.to_ne_bytes());
        b[24..32].copy_from_slice(&iovlen.to_ne_bytes());
        b[32..40].copy_from_slice(&control.to_ne_bytes());
        b[40..48].copy_from_slice(&controllen.to_ne_bytes());
        b[48..52].copy_from_slice(&flags.to_ne_bytes());
        let at = if self.rng.chance(1, 20) { at + 1 } else { at };
        self.a.put(at, &b);
        if self.rng.chance(1, 30) {
            return self.ctx.bad.pick(&mut self.rng);
        }
        at
    }

    /// iovecs at `at`: (pointer, count) with many, zero-length, NULL and bad entries now
    /// and then, and counts of 0 and beyond UIO_MAXIOV.
    fn iovecs(&mut self, at: u64, max: u64) -> (u64, u64) {
        let n = match self.rng.below(40) {
            0..=1 => 0,
            2..=17 => 1,
            18..=31 => self.rng.range(2, 8),
            32..=35 => self.rng.range(9, 64),
            36 => UIO_MAXIOV,
            37 => UIO_MAXIOV + self.rng.range(1, 60),
            38 => self.rng.next_u64() >> self.rng.below(64),
            _ => self.rng.range(65, 1000),
        };
        let write = n.min(max).min(1100);
        let mut b = Vec::with_capacity(write as usize * 16);
        for _ in 0..write {
            let len = match self.rng.below(20) {
                0..=2 => 0,
                3..=9 => self.rng.range(1, 512),
                10..=15 => self.rng.range(512, 16384),
                16..=17 => self.rng.range(16384, 131072),
                18 => self.rng.length(4096),
                _ => u64::MAX >> self.rng.below(4),
            };
            let base = match self.rng.below(20) {
                0 => 0,
                1 => self.ctx.bad.pick(&mut self.rng),
                _ => self.a.data_at(&mut self.rng, len),
            };
            b.extend_from_slice(&base.to_ne_bytes());
            b.extend_from_slice(&len.to_ne_bytes());
        }
        if !b.is_empty() {
            self.a.put(at, &b);
        }
        let p = if self.rng.chance(1, 40) {
            self.ctx.bad.pick(&mut self.rng)
        } else {
            at
        };
        (p, n)
    }

    /// Control messages for sendmsg: none mostly, garbage, or one or two crafted ones.
    fn cmsgs(&mut self) -> (u64, u64) {
        match self.rng.below(20) {
            0..=13 => (0, 0),
            14..=15 => {
                let (p, l) = self.buf();
                (p, l.min(4096))
            }
            16 => (self.ctx.bad.pick(&mut self.rng), self.rng.length(32)),
            _ => {
                let mut b = Vec::new();
                for _ in 0..self.rng.range(1, 2) {
                    let (level, ty, data): (i32, i32, Vec<u8>) = match self.rng.below(13) {
                        0 => {
                            // SCM_RIGHTS: our memfd and a socket
                            let mut d = self.memfd.to_ne_bytes().to_vec();
                            d.extend_from_slice(&self.any_fd().to_ne_bytes());
                            (libc::SOL_SOCKET, libc::SCM_RIGHTS, d)
                        }
                        1 => {
                            // SCM_CREDENTIALS: our pid, uid, gid
                            let mut d = (std::process::id() as i32).to_ne_bytes().to_vec();
                            d.extend_from_slice(&[0u8; 8]);
                            (libc::SOL_SOCKET, libc::SCM_CREDENTIALS, d)
                        }
                        2 => (
                            libc::SOL_SOCKET,
                            37,
                            self.rng.next_u32().to_ne_bytes().to_vec(),
                        ), // SO_TIMESTAMPING
                        3 => (
                            libc::SOL_SOCKET,
                            36,
                            self.rng.next_u32().to_ne_bytes().to_vec(),
                        ), // SO_MARK
                        4 => (
                            libc::SOL_SOCKET,
                            61,
                            self.rng.next_u64().to_ne_bytes().to_vec(),
                        ), // SCM_TXTIME
                        5 => (
                            libc::SOL_SOCKET,
                            12,
                            self.rng.next_u32().to_ne_bytes().to_vec(),
                        ), // SO_PRIORITY
                        6 => (
                            libc::IPPROTO_IP,
                            libc::IP_TOS,
                            vec![self.rng.next_u32() as u8],
                        ),
                        7 => (
                            libc::IPPROTO_IP,
                            libc::IP_TTL,
                            (self.rng.below(300) as i32).to_ne_bytes().to_vec(),
                        ),
                        8 => (
                            libc::IPPROTO_IPV6,
                            67,
                            (self.rng.below(300) as i32).to_ne_bytes().to_vec(),
                        ), // IPV6_TCLASS
                        9 => (
                            SOL_SCI,
                            self.rng.below(5) as i32,
                            self.rng.next_u32().to_ne_bytes().to_vec(),
                        ),
                        10 => {
                            // IP_PKTINFO: ifindex, then the source asked for (ipi_spec_dst:
                            // loopback, any or garbage), then ipi_addr
                            let mut d = (self.rng.below(4) as i32).to_ne_bytes().to_vec();
                            let garbage = self.rng.next_u32();
                            let src = self.rng.pick(&[0x7f00_0001, 0, garbage]);
                            d.extend_from_slice(&src.to_be_bytes());
                            d.extend_from_slice(&self.rng.next_u32().to_ne_bytes());
                            (libc::IPPROTO_IP, libc::IP_PKTINFO, d)
                        }
                        11 => {
                            // IPV6_PKTINFO: the source asked for (::1, IPv4-mapped
                            // loopback or any), then the interface
                            let mut d = [0u8; 16];
                            match self.rng.below(3) {
                                0 => d[15] = 1,
                                1 => d[10..].copy_from_slice(&[0xff, 0xff, 127, 0, 0, 1]),
                                _ => {}
                            }
                            let mut d = d.to_vec();
                            d.extend_from_slice(&(self.rng.below(4) as i32).to_ne_bytes());
                            (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO, d)
                        }
                        _ => (
                            self.rng.next_u32() as i32,
                            self.rng.next_u32() as i32,
                            self.rng.next_u64().to_ne_bytes().to_vec(),
                        ),
                    };
                    let mut len = 16 + data.len() as u64;
                    if self.rng.chance(1, 10) {
                        len = self.rng.pick(&[0, 8, 15, 17, 1 << 20, u64::MAX]);
                    }
                    b.extend_from_slice(&len.to_ne_bytes());
                    b.extend_from_slice(&level.to_ne_bytes());
                    b.extend_from_slice(&ty.to_ne_bytes());
                    b.extend_from_slice(&data);
                    while b.len() % 8 != 0 {
                        b.push(0);
                    }
                }
                let l = b.len() as u64;
                let p = self.put_data(&b);
                (
                    p,
                    if self.rng.chance(1, 10) {
                        self.rng.length(l)
                    } else {
                        l
                    },
                )
            }
        }
    }

    /// A control buffer for recvmsg.
    fn recv_control(&mut self) -> (u64, u64) {
        match self.rng.below(10) {
            0..=5 => (0, 0),
            6..=8 => {
                let l = self.rng.pick(&[0, 1, 16, 20, 64, 256, 4096]);
                (self.a.data_at(&mut self.rng, l), l)
            }
            _ => (self.ctx.bad.pick(&mut self.rng), 64),
        }
    }

    // --- operations -------------------------------------------------------------------------

    fn op_socket(&mut self) {
        let r = self.rng.below(100);
        if r < 60 {
            let kind = match self.rng.below(10) {
                0 | 1 => Kind::Tcp,
                2 => Kind::Dgram,
                _ => Kind::Sci,
            };
            let v6 = self.rng.chance(1, 3);
            self.new_socket(kind, v6);
            return;
        }
        // The family with odd types and protocols.
        let ty: u64 = match self.rng.below(10) {
            0 => i(libc::SOCK_DGRAM),
            1 => i(libc::SOCK_RAW),
            2 => i(libc::SOCK_SEQPACKET),
            3 => i(libc::SOCK_RDM),
            4 => 10, // SOCK_PACKET
            5 => 0,
            6 => 11,
            7 => self.rng.next_u32() as u64,
            8 => i(libc::SOCK_STREAM | (1 << self.rng.range(4, 30))),
            _ => i(libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC),
        };
        let proto = match self.rng.below(9) {
            0 => 0,
            1 => i(libc::IPPROTO_TCP),
            2 => i(libc::IPPROTO_UDP),
            3 => 262, // IPPROTO_MPTCP
            4 => 132, // IPPROTO_SCTP
            5 => 255,
            6 => u64::MAX,
            7 => i(libc::IPPROTO_TCP) | (1 << 16),
            _ => self.rng.next_u32() as u64,
        };
        if let Ok(fd) = self.sys(
            Call::Socket,
            libc::SYS_socket,
            [i(self.ctx.family), ty, proto, 0, 0, 0],
        ) {
            // A datagram socket (the family takes UDP's types) or one of another type
            // the family took after all, with timeouts bounded as the others'.
            let kind = match ty & 0xf {
                t if t == libc::SOCK_STREAM as u64 => Kind::Sci,
                t if t == libc::SOCK_DGRAM as u64 => Kind::Dgram,
                _ => {
                    let ms = self.rng.range(50, 150);
                    bound_timeouts(fd as i32, ms);
                    Kind::Other
                }
            };
            self.add_fd(fd as i32, kind, false);
        }
    }

    fn op_socketpair(&mut self) {
        let sv = if self.rng.chance(1, 5) {
            self.ctx.bad.pick(&mut self.rng)
        } else {
            self.a.data_at(&mut self.rng, 8)
        };
        let ty = i(libc::SOCK_STREAM)
            | self
                .rng
                .flags(&[libc::SOCK_NONBLOCK as u64, libc::SOCK_CLOEXEC as u64], 2);
        if self
            .sys(
                Call::Socketpair,
                libc::SYS_socketpair,
                [i(self.ctx.family), ty, 0, sv, 0, 0],
            )
            .is_ok()
        {
            let (a, b) = self.a.fd_pair(sv);
            self.add_fd(a, Kind::Sci, false);
            self.add_fd(b, Kind::Sci, false);
        }
    }

    fn op_bind(&mut self) {
        let (fd, kind, v6) = self.sock();
        let (p, l) = self.addr(kind, v6, true);
        let _ = self.sys(Call::Bind, libc::SYS_bind, [i(fd), p, l, 0, 0, 0]);
        if kind == Kind::Sci {
            self.rebound(fd);
        }
    }

    fn op_listen(&mut self) {
        let (fd, _, _) = self.sock();
        let backlog = self
            .rng
            .pick(&[0, 1, 5, 16, 128, 4096, -1, i32::MAX, i32::MIN, -100]);
        if self
            .sys(
                Call::Listen,
                libc::SYS_listen,
                [i(fd), i(backlog), 0, 0, 0, 0],
            )
            .is_ok()
        {
            self.mark_listening(fd);
        }
    }

    fn op_connect(&mut self) {
        let (fd, kind, v6) = self.sock();
        let (p, l) = self.addr(kind, v6, false);
        let _ = self.sys(Call::Connect, libc::SYS_connect, [i(fd), p, l, 0, 0, 0]);
        if kind == Kind::Sci {
            self.rebound(fd);
        }
    }

    fn op_accept(&mut self) {
        let listening: Vec<Fd> = self.fds.iter().filter(|f| f.listening).copied().collect();
        let (fd, kind, v6) = if !listening.is_empty() && self.rng.chance(4, 5) {
            let f = listening[self.rng.below(listening.len() as u64) as usize];
            (f.fd, f.kind, f.v6)
        } else {
            self.sock()
        };
        let (addr, lenp) = match self.rng.below(10) {
            0..=3 => (0, 0),
            4..=7 => {
                let l = self.rng.pick(&[0, 1, 16, 28, 128, u32::MAX, 4096]);
                (self.a.data_at(&mut self.rng, 128), self.int_ptr(l))
            }
            8 => (self.ctx.bad.pick(&mut self.rng), self.int_ptr(128)),
            _ => (
                self.a.data_at(&mut self.rng, 128),
                self.ctx.bad.pick(&mut self.rng),
            ),
        };
        let flags = match self.rng.below(10) {
            0..=2 => 0,
            3..=5 => i(libc::SOCK_NONBLOCK),
            6 => i(libc::SOCK_CLOEXEC),
            7 => i(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC),
            8 => 1 << self.rng.below(32),
            _ => self.rng.next_u32() as u64,
        };
        if let Ok(nfd) = self.sys(
            Call::Accept4,
            libc::SYS_accept4,
            [i(fd), addr, lenp, flags, 0, 0],
        ) {
            let k = if kind.is_sock() { kind } else { Kind::Sci };
            self.add_fd(nfd as i32, k, v6);
        }
    }

    fn op_sendmsg(&mut self) {
        let (fd, kind, v6) = self.sock();
        let m = self.msghdr(self.a.structs, self.a.structs + 1024, 1100, true, kind, v6);
        let flags = self.msg_flags();
        let _ = self.sys(Call::Sendmsg, libc::SYS_sendmsg, [i(fd), m, flags, 0, 0, 0]);
    }

    fn op_recvmsg(&mut self) {
        let (fd, kind, v6) = self.sock();
        let m = self.msghdr(self.a.structs, self.a.structs + 1024, 1100, false, kind, v6);
        let flags = self.msg_flags();
        let _ = self.sys(Call::Recvmsg, libc::SYS_recvmsg, [i(fd), m, flags, 0, 0, 0]);
    }

    fn op_sendto(&mut self) {
        let (fd, kind, v6) = self.sock();
        let (p, l) = self.buf();
        let flags = self.msg_flags();
        let dgram = kind == Kind::Dgram;
        let (ap, al) = if self
            .rng
            .chance(if dgram { 3 } else { 1 }, if dgram { 4 } else { 5 })
        {
            self.addr(kind, v6, false)
        } else {
            (0, 0)
        };
        let _ = self.sys(Call::Sendto, libc::SYS_sendto, [i(fd), p, l, flags, ap, al]);
        // A datagram socket's burst to the same destination, with plain flags: its
        // first datagram sets up an implicit SCI connection, the later ones take it.
        if dgram && ap != 0 && self.rng.chance(1, 2) {
            for _ in 0..self.rng.range(2, 32) {
                let flags = if self.rng.chance(1, 2) {
                    0
                } else {
                    libc::MSG_DONTWAIT as u64
                };
                let l = self.rng.range(1, 1500);
                let p = self.a.data_at(&mut self.rng, l);
                let _ = self.sys(Call::Sendto, libc::SYS_sendto, [i(fd), p, l, flags, ap, al]);
            }
        }
    }

    fn op_recvfrom(&mut self) {
        let (fd, _, _) = self.sock();
        let (p, l) = self.buf();
        let flags = self.msg_flags();
        let (ap, alp) = match self.rng.below(5) {
            0..=2 => (0, 0),
            3 => {
                let l = self.rng.pick(&[0, 1, 16, 28, 128, u32::MAX]);
                (self.a.data_at(&mut self.rng, 128), self.int_ptr(l))
            }
            _ => (self.ctx.bad.pick(&mut self.rng), self.int_ptr(128)),
        };
        if let Ok(n) = self.sys(
            Call::Recvfrom,
            libc::SYS_recvfrom,
            [i(fd), p, l, flags, ap, alp],
        ) {
            if flags & MSG_TRUNC == 0 && n as u64 > l {
                self.anomaly(format!(
                    "recvfrom(fd {fd}, len {l}, flags {flags:#x}) returned {n} > len"
                ));
            }
        }
    }

    /// Where [`Fuzzer::mmsgs`] puts its mmsghdr arrays: the structure zone's upper part.
    fn mmsg_base(&self) -> u64 {
        self.a.structs + 20480
    }

    /// An mmsghdr array at the structure zone's upper part: (pointer, vlen).
    fn mmsgs(&mut self, send: bool, kind: Kind, v6: bool) -> (u64, u64) {
        let vlen = match self.rng.below(12) {
            0 => 0,
            1..=6 => self.rng.range(1, 4),
            7 => 8,
            8 => UIO_MAXIOV,
            9 => UIO_MAXIOV + 1,
            10 => u32::MAX as u64,
            _ => self.rng.next_u32() as u64,
        };
        let base = self.mmsg_base();
        for k in 0..vlen.min(4) {
            let at = base + 64 * k;
            self.msghdr(at, self.a.structs + 1024 + 256 * k, 16, send, kind, v6);
            self.a.put_u64(at + 56, 0);
        }
        let p = if self.rng.chance(1, 20) {
            self.ctx.bad.pick(&mut self.rng)
        } else {
            base
        };
        (p, vlen)
    }

    /// `vlen` for a call on the vector at `p` with `flags`: at most [`BLOCKING_VLEN_MAX`]
    /// when the call may block on a vector the kernel can read.
    fn vlen_bound(&self, p: u64, vlen: u64, flags: u64) -> u64 {
        if p == self.mmsg_base() && flags & libc::MSG_DONTWAIT as u64 == 0 {
            vlen.min(BLOCKING_VLEN_MAX)
        } else {
            vlen
        }
    }

    fn op_sendmmsg(&mut self) {
        let (fd, kind, v6) = self.sock();
        let (p, vlen) = self.mmsgs(true, kind, v6);
        let flags = self.msg_flags();
        let vlen = self.vlen_bound(p, vlen, flags);
        let _ = self.sys(
            Call::Sendmmsg,
            libc::SYS_sendmmsg,
            [i(fd), p, vlen, flags, 0, 0],
        );
    }

    fn op_recvmmsg(&mut self) {
        let (fd, kind, v6) = self.sock();
        let (p, vlen) = self.mmsgs(false, kind, v6);
        let flags = self.msg_flags();
        let vlen = self.vlen_bound(p, vlen, flags);
        let timeout = match self.rng.below(10) {
            0..=5 => 0,
            6..=7 => {
                let mut ts = [0u8; 16];
                ts[8..16].copy_from_slice(&(self.rng.below(20_000_000) as i64).to_ne_bytes());
                self.put_data(&ts)
            }
            8 => {
                let mut ts = [0u8; 16];
                ts[0..8].copy_from_slice(&(-1i64).to_ne_bytes());
                ts[8..16].copy_from_slice(&(2_000_000_000i64).to_ne_bytes());
                self.put_data(&ts)
            }
            _ => self.ctx.bad.pick(&mut self.rng),
        };
        let _ = self.sys(
            Call::Recvmmsg,
            libc::SYS_recvmmsg,
            [i(fd), p, vlen, flags, timeout, 0],
        );
    }

    fn op_sendfile(&mut self) {
        let (out, _, _) = self.sock();
        let inp = match self.rng.below(10) {
            0..=7 => self.memfd,
            8 => self.any_fd(),
            _ => self.garbage_fd(),
        };
        let off = match self.rng.below(10) {
            0..=4 => 0,
            5..=7 => {
                let v = self
                    .rng
                    .pick(&[0u64, 1, 4095, 65536, 131071, 131072, 1 << 40, u64::MAX]);
                let p = self.a.data_at(&mut self.rng, 8);
                self.a.put_u64(p, v);
                p
            }
            _ => self.ctx.bad.pick(&mut self.rng),
        };
        let count = match self.rng.below(6) {
            0 => 0,
            1..=3 => self.rng.range(1, 131072),
            4 => 1 << 20,
            _ => self.rng.length(4096),
        };
        let _ = self.sys(
            Call::Sendfile,
            libc::SYS_sendfile,
            [i(out), i(inp), off, count, 0, 0],
        );
    }

    fn op_splice(&mut self) {
        let (s, _, _) = self.sock();
        let pipes: Vec<Fd> = self
            .fds
            .iter()
            .filter(|f| matches!(f.kind, Kind::PipeR | Kind::PipeW))
            .copied()
            .collect();
        let (r, w) = if !pipes.is_empty() && self.rng.chance(1, 4) {
            let f = pipes[self.rng.below(pipes.len() as u64) as usize];
            (f.fd, f.fd)
        } else {
            self.pipe
        };
        // SPLICE_F_NONBLOCK always: a splice waits on the pipe regardless of the pipe's
        // O_NONBLOCK, and nothing would ever fill or drain it.
        let flags = 2
            | self.rng.flags(&[1, 4, 8], 3)
            | if self.rng.chance(1, 20) {
                self.rng.next_u32() as u64 & !0xf
            } else {
                0
            };
        let off = if self.rng.chance(1, 15) {
            if self.rng.chance(1, 2) {
                self.ctx.bad.pick(&mut self.rng)
            } else {
                self.a.data_at(&mut self.rng, 8)
            }
        } else {
            0
        };
        let len = match self.rng.below(5) {
            0 => 0,
            1..=3 => self.rng.range(1, 131072),
            _ => self.rng.length(65536),
        };
        let a = if self.rng.chance(1, 2) {
            [i(s), off, i(w), 0, len, flags]
        } else {
            [i(r), 0, i(s), off, len, flags]
        };
        let _ = self.sys(Call::Splice, libc::SYS_splice, a);
    }

    /// A (level, option name) pair.
    fn opt_name(&mut self) -> (i32, i32) {
        let level = match self.rng.below(100) {
            0..=24 => libc::SOL_SOCKET,
            25..=49 => libc::IPPROTO_TCP,
            50..=61 => libc::IPPROTO_IP,
            62..=73 => libc::IPPROTO_IPV6,
            74..=89 => SOL_SCI,
            90..=94 => self.rng.range(0, 301) as i32,
            _ => {
                let g = self.rng.next_u32();
                self.rng.pick(&[-1, i32::MAX, 282, 284, 299, 301, g as i32])
            }
        };
        let typical = self.rng.chance(5, 6);
        let name = match (level, typical) {
            (libc::SOL_SOCKET, true) => self.rng.range(1, 82) as i32,
            (libc::IPPROTO_TCP, true) => self.rng.range(1, 42) as i32,
            (libc::IPPROTO_IP, true) => {
                if self.rng.chance(1, 10) {
                    self.rng.range(200, 212) as i32
                } else {
                    self.rng.range(1, 52) as i32
                }
            }
            (libc::IPPROTO_IPV6, true) => {
                let n = self.rng.range(1, 80) as i32;
                if n == 64 || n == 65 {
                    n + 2
                } else {
                    n
                }
            }
            (SOL_SCI, true) => self.rng.range(0, 5) as i32,
            _ => {
                let g = self.rng.next_u32();
                self.rng.pick(&[0, -1, i32::MAX, 1000, g as i32])
            }
        };
        (level, name)
    }

    fn opt_len(&mut self) -> u64 {
        let any = self.rng.below(512);
        self.rng.pick(&[
            0,
            1,
            2,
            3,
            4,
            4,
            4,
            8,
            8,
            12,
            16,
            16,
            24,
            32,
            64,
            128,
            256,
            4096,
            65536 + 3,
            u32::MAX as u64,
            i32::MAX as u64,
            any,
        ])
    }

    fn op_setsockopt(&mut self) {
        let (fd, _, _) = self.sock();
        let (level, name) = self.opt_name();
        let mut len = self.opt_len();
        let p = if self.rng.chance(1, 8) {
            self.ctx.bad.pick(&mut self.rng)
        } else {
            // Room for the value or a name below whatever `len` says (a 1500 s run put a
            // name at the zone's last 4 bytes: "arena write outside the arena").
            let p = self.a.data_at(&mut self.rng, len.clamp(16, 4096));
            let v: i32 = match (level, name) {
                (SOL_SCI, SCI_NATIVE_FAMILY) => self.rng.pick(&[
                    libc::AF_INET,
                    libc::AF_INET6,
                    0,
                    libc::AF_UNIX,
                    self.ctx.family,
                    -1,
                ]),
                (SOL_SCI, SCI_SPIN_US) => {
                    self.rng
                        .pick(&[-1, 0, 1, 10, 100, 10000, 10001, i32::MAX, -2])
                }
                _ => {
                    let g = self.rng.next_u32();
                    self.rng.pick(&[
                        0,
                        1,
                        1,
                        -1,
                        2,
                        5,
                        100,
                        4096,
                        65536,
                        i32::MAX,
                        i32::MIN,
                        g as i32,
                    ])
                }
            };
            if len >= 4 && len < DATA_SIZE as u64 {
                self.a.put_u32(p, v as u32);
                if len >= 8 && self.rng.chance(1, 2) {
                    let w = self.rng.pick(&[0u32, 1, 100, 1_000_000]);
                    self.a.put_u32(p + 4, w);
                }
            }
            // Strings for the options that take names.
            let s: Option<&[u8]> = match (level, name) {
                (libc::IPPROTO_TCP, 13) => {
                    Some(
                        self.rng
                            .pick(&[&b"reno\0"[..], b"cubic\0", b"bbr\0", b"\0", b"dctcp\0"]),
                    )
                }
                (libc::IPPROTO_TCP, 31) => {
                    Some(
                        self.rng
                            .pick(&[&b"tls\0"[..], b"mptcp\0", b"\0", b"espintcp\0"]),
                    )
                }
                (libc::SOL_SOCKET, 25) => {
                    Some(self.rng.pick(&[&b"lo\0"[..], b"\0", b"nonexistent\0"]))
                }
                _ => None,
            };
            if let Some(s) = s {
                if self.rng.chance(4, 5) {
                    self.a.put(p, s);
                    len = s.len() as u64;
                }
            }
            p
        };
        // Never change the timeouts or linger time of a socket other threads may be
        // blocked on (they would not see the harness bound them again).
        let bounds = level == libc::SOL_SOCKET && matches!(name, 13 | 20 | 21 | 66 | 67);
        if bounds
            && self
                .ctx
                .shared
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .contains(&fd)
        {
            return;
        }
        let _ = self.sys(
            Call::Setsockopt,
            libc::SYS_setsockopt,
            [i(fd), i(level), i(name), p, len, 0],
        );
        if bounds {
            self.rebound(fd);
            let on = self.rng.chance(1, 2);
            let secs = self.rng.below(2) as i32;
            bound_linger(fd, on, secs);
        }
    }

    fn op_getsockopt(&mut self) {
        let (fd, _, _) = self.sock();
        let (level, name) = self.opt_name();
        let len = self.opt_len();
        let p = if self.rng.chance(1, 8) {
            self.ctx.bad.pick(&mut self.rng)
        } else {
            self.a.data_at(&mut self.rng, len.min(DATA_SIZE as u64))
        };
        let lp = match self.rng.below(20) {
            0 => 0,
            1 => self.ctx.bad.ro,
            2 => self.ctx.bad.pick(&mut self.rng),
            _ => {
                let q = self.a.data_at(&mut self.rng, 4);
                self.a.put_u32(q, len as u32);
                q
            }
        };
        let _ = self.sys(
            Call::Getsockopt,
            libc::SYS_getsockopt,
            [i(fd), i(level), i(name), p, lp, 0],
        );
    }

    fn op_ioctl(&mut self) {
        let fd = if self.rng.chance(5, 6) {
            self.sock().0
        } else {
            self.any_fd()
        };
        let mut cmd = if self.rng.chance(4, 5) {
            self.rng.pick(&IOCTLS)
        } else {
            self.rng.next_u32() as u64
        };
        // Interface and routing ioctls (type 0x89) reach devices; garbage ones are
        // turned into the protocol-private range, which is the family's own.
        if (cmd >> 8) & 0xff == 0x89 && !IOCTLS.contains(&cmd) {
            cmd = 0x89E0 | (cmd & 0xf);
        }
        let arg = match self.rng.below(10) {
            0..=6 => {
                let p = self.a.data_at(&mut self.rng, 64);
                match cmd {
                    FIOSETOWN | SIOCSPGRP => {
                        let who = if self.rng.chance(1, 2) {
                            std::process::id()
                        } else {
                            0
                        };
                        self.a.put_u32(p, who);
                    }
                    FIONBIO => self.a.put_u32(p, self.rng.below(2) as u32),
                    0x8933 | 0x8913 | 0x8921 | 0x8915 if self.rng.chance(1, 2) => {
                        self.a.put(p, b"lo\0");
                    }
                    _ => {}
                }
                p
            }
            8 => self.rng.below(4),
            _ => self.ctx.bad.pick(&mut self.rng),
        };
        if let Ok(nfd) = self.sys(Call::Ioctl, libc::SYS_ioctl, [i(fd), cmd, arg, 0, 0, 0]) {
            if cmd == SIOCGSKNS && nfd > 2 {
                self.add_fd(nfd as i32, Kind::Other, false);
            }
        }
        self.keep_nonblocking(fd);
    }

    /// Pipes stay non-blocking whatever FIONBIO or F_SETFL did to them.
    fn keep_nonblocking(&mut self, fd: i32) {
        if fd == self.pipe.0
            || fd == self.pipe.1
            || self.fds.iter().any(|f| f.fd == fd && !f.kind.is_sock())
        {
            sys::set_nonblocking(fd);
        }
    }

    fn op_shutdown(&mut self) {
        let (fd, _, _) = self.sock();
        let how = {
            let g = self.rng.next_u32();
            self.rng.pick(&[0, 1, 2, 1, 2, 3, -1, i32::MAX, g as i32])
        };
        let _ = self.sys(
            Call::Shutdown,
            libc::SYS_shutdown,
            [i(fd), i(how), 0, 0, 0, 0],
        );
    }

    fn op_names(&mut self) {
        let (fd, _, _) = self.sock();
        let l = self
            .rng
            .pick(&[0, 1, 2, 15, 16, 27, 28, 128, 256, u32::MAX, i32::MAX as u32]);
        let (p, lp) = match self.rng.below(10) {
            0..=6 => (self.a.data_at(&mut self.rng, 256), self.int_ptr(l)),
            7 => (0, self.int_ptr(l)),
            8 => (self.ctx.bad.pick(&mut self.rng), self.int_ptr(l)),
            _ => (self.a.data_at(&mut self.rng, 256), self.ctx.bad.ro),
        };
        let (call, nr) = if self.rng.chance(1, 2) {
            (Call::Getsockname, libc::SYS_getsockname)
        } else {
            (Call::Getpeername, libc::SYS_getpeername)
        };
        let _ = self.sys(call, nr, [i(fd), p, lp, 0, 0, 0]);
    }

    fn op_poll(&mut self) {
        let n = self.rng.range(1, 8);
        let mut b = Vec::new();
        for _ in 0..n {
            let fd = if self.rng.chance(1, 10) {
                -1
            } else {
                self.sock().0
            };
            let ev = if self.rng.chance(1, 10) {
                self.rng.next_u32() as u16
            } else {
                self.rng.flags(&POLL_BITS, 3) as u16
            };
            b.extend_from_slice(&fd.to_ne_bytes());
            b.extend_from_slice(&ev.to_ne_bytes());
            b.extend_from_slice(&0u16.to_ne_bytes());
        }
        let at = self.a.structs + self.rng.pick(&[0, 0, 0, 2]);
        self.a.put(at, &b);
        let (p, nfds) = match self.rng.below(20) {
            0 => (self.ctx.bad.pick(&mut self.rng), n),
            1 => (at, 1 << 20),
            2 => (at, 0),
            _ => (at, n),
        };
        let timeout = self.rng.pick(&[0, 0, 1, 5, 20]);
        let _ = self.sys(Call::Poll, libc::SYS_poll, [p, nfds, timeout, 0, 0, 0]);
    }

    fn op_epoll_create(&mut self) {
        let flags = match self.rng.below(6) {
            0..=2 => 0,
            3..=4 => i(libc::EPOLL_CLOEXEC),
            _ => self.rng.next_u32() as u64,
        };
        if let Ok(fd) = self.sys(
            Call::EpollCreate1,
            libc::SYS_epoll_create1,
            [flags, 0, 0, 0, 0, 0],
        ) {
            self.add_fd(fd as i32, Kind::Epoll, false);
        }
    }

    fn epfd(&mut self) -> i32 {
        let eps: Vec<i32> = self
            .fds
            .iter()
            .filter(|f| f.kind == Kind::Epoll)
            .map(|f| f.fd)
            .collect();
        if eps.is_empty() || self.rng.chance(1, 15) {
            if eps.is_empty() && self.rng.chance(3, 4) {
                self.op_epoll_create();
                return self.fds.back().map(|f| f.fd).unwrap_or(-1);
            }
            return self.any_fd();
        }
        self.rng.pick(&eps)
    }

    fn op_epoll_ctl(&mut self) {
        let ep = self.epfd();
        let op = match self.rng.below(10) {
            0..=4 => libc::EPOLL_CTL_ADD,
            5..=6 => libc::EPOLL_CTL_MOD,
            7..=8 => libc::EPOLL_CTL_DEL,
            _ => self.rng.next_u32() as i32,
        };
        let fd = if self.rng.chance(4, 5) {
            self.sock().0
        } else {
            self.any_fd()
        };
        let events = if self.rng.chance(1, 10) {
            self.rng.next_u32() as u64
        } else {
            let mut e = self.rng.flags(&EPOLL_BITS, 3);
            if self.rng.chance(2, 3) {
                e |= 0x1 | 0x4; // EPOLLIN | EPOLLOUT: most registrations want data
            }
            e
        };
        let mut b = [0u8; 12];
        b[0..4].copy_from_slice(&(events as u32).to_ne_bytes());
        b[4..12].copy_from_slice(&(fd as u64).to_ne_bytes());
        let at = self.a.structs + 1024;
        self.a.put(at, &b);
        let p = if self.rng.chance(1, 15) {
            self.ctx.bad.pick(&mut self.rng)
        } else {
            at
        };
        let _ = self.sys(
            Call::EpollCtl,
            libc::SYS_epoll_ctl,
            [i(ep), i(op), i(fd), p, 0, 0],
        );
    }

    fn op_epoll_wait(&mut self) {
        let ep = self.epfd();
        let max = self.rng.pick(&[1, 1, 4, 16, 64, 0, -1, i32::MAX]);
        let p = if self.rng.chance(1, 15) {
            self.ctx.bad.pick(&mut self.rng)
        } else {
            self.a.data_at(&mut self.rng, 64 * 12)
        };
        let timeout = self.rng.pick(&[0, 0, 1, 10, 20]);
        let _ = self.sys(
            Call::EpollWait,
            libc::SYS_epoll_wait,
            [i(ep), p, i(max), timeout, 0, 0],
        );
    }

    fn op_fork(&mut self) {
        let mut fds = [-1i32; 8];
        let socks: Vec<i32> = self
            .fds
            .iter()
            .filter(|f| f.kind.is_sock())
            .map(|f| f.fd)
            .collect();
        if socks.is_empty() {
            return;
        }
        let n = socks.len().min(8);
        for (k, slot) in fds.iter_mut().enumerate().take(n) {
            *slot = socks[(k + self.rng.below(socks.len() as u64) as usize) % socks.len()];
        }
        let seed = self.rng.next_u64();
        let arena = self.a;
        self.n += 1;
        // SAFETY: fork in a threaded process; the child only makes raw system calls on
        // memory it owns a copy of (the arena) and ends with _exit (`fork_child`).
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            fork_child(&fds[..n], seed, arena);
        }
        if pid < 0 {
            self.counts.count(Call::Fork, Some(sys::errno()));
            return;
        }
        self.counts.count(Call::Fork, None);
        let slot = &SLOTS[self.t];
        slot.call.store(Call::ForkWait as u32, Ordering::Relaxed);
        slot.arg.store(pid as i64, Ordering::Relaxed);
        slot.since.store(now_ms(), Ordering::Relaxed);
        let mut status = 0;
        // SAFETY: `status` is a live local; `pid` is our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        slot.since.store(0, Ordering::Relaxed);
        self.counts.count(
            Call::ForkWait,
            if r < 0 { Some(sys::errno()) } else { None },
        );
        if r == pid && libc::WIFSIGNALED(status) {
            let sig = libc::WTERMSIG(status);
            if sig == libc::SIGALRM {
                self.report.note("fork-child-alarm", 1);
            } else {
                self.anomaly(format!("a fork child (pid {pid}) died of signal {sig}"));
            }
        } else {
            self.report.note("fork-children", 1);
        }
    }

    fn op_dup(&mut self) {
        if self.fds.is_empty() {
            return;
        }
        let k = self.rng.below(self.fds.len() as u64) as usize;
        let old = self.fds[k];
        match self.rng.below(3) {
            0 => {
                if let Ok(fd) = self.sys(Call::Dup, libc::SYS_dup, [i(old.fd), 0, 0, 0, 0, 0]) {
                    self.add_fd(fd as i32, old.kind, old.v6);
                }
            }
            r => {
                // Onto one of our own descriptors (or itself, or a bad number).
                let new = match self.rng.below(10) {
                    0 => old.fd,
                    1 => self.garbage_fd(),
                    _ => self.fds[self.rng.below(self.fds.len() as u64) as usize].fd,
                };
                let res = if r == 1 {
                    self.sys(Call::Dup2, libc::SYS_dup2, [i(old.fd), i(new), 0, 0, 0, 0])
                } else {
                    let flags = {
                        let g = self.rng.next_u32();
                        self.rng.pick(&[0, libc::O_CLOEXEC as u64, g as u64])
                    };
                    self.sys(
                        Call::Dup3,
                        libc::SYS_dup3,
                        [i(old.fd), i(new), flags, 0, 0, 0],
                    )
                };
                if res.is_ok() {
                    if let Some(f) = self.fds.iter_mut().find(|f| f.fd == new) {
                        f.kind = old.kind;
                        f.v6 = old.v6;
                        f.listening = old.listening;
                    }
                }
            }
        }
    }

    fn op_close(&mut self) {
        if self.fds.is_empty() || self.rng.chance(1, 20) {
            let fd = self.garbage_fd();
            let _ = self.sys(Call::Close, libc::SYS_close, [i(fd), 0, 0, 0, 0, 0]);
            return;
        }
        let k = self.rng.below(self.fds.len() as u64) as usize;
        let f = self.fds.remove(k).expect("index in range");
        self.unshare(f.fd);
        let _ = self.sys(Call::Close, libc::SYS_close, [i(f.fd), 0, 0, 0, 0, 0]);
    }

    fn op_fcntl(&mut self) {
        let fd = if self.rng.chance(5, 6) {
            self.sock().0
        } else {
            self.any_fd()
        };
        let (cmd, arg) = match self.rng.below(10) {
            0 => (libc::F_GETFL, 0),
            1..=4 => {
                // O_NONBLOCK toggles, now and then O_ASYNC and odd bits
                let mut fl = self.rng.pick(&[0, libc::O_NONBLOCK]) as u64;
                if self.rng.chance(1, 5) {
                    fl |= self.rng.pick(&[
                        libc::O_ASYNC,
                        libc::O_APPEND,
                        libc::O_DIRECT,
                        libc::O_NOATIME,
                    ]) as u64;
                }
                (libc::F_SETFL, fl)
            }
            5 => (libc::F_SETFD, self.rng.below(2)),
            6 => (libc::F_GETFD, 0),
            7 => (
                libc::F_SETOWN,
                if self.rng.chance(1, 2) {
                    std::process::id() as u64
                } else {
                    0
                },
            ),
            8 => (libc::F_GETOWN, 0),
            _ => (libc::F_DUPFD_CLOEXEC, self.rng.pick(&[0, 100, 1000])),
        };
        if let Ok(r) = self.sys(Call::Fcntl, libc::SYS_fcntl, [i(fd), i(cmd), arg, 0, 0, 0]) {
            if cmd == libc::F_DUPFD_CLOEXEC {
                let (kind, v6) = self
                    .fds
                    .iter()
                    .find(|f| f.fd == fd)
                    .map(|f| (f.kind, f.v6))
                    .unwrap_or((Kind::Other, false));
                self.add_fd(r as i32, kind, v6);
            }
        }
        self.keep_nonblocking(fd);
    }

    fn op_rw(&mut self) {
        let fd = if self.rng.chance(6, 7) {
            self.sock().0
        } else {
            self.any_fd()
        };
        match self.rng.below(4) {
            0 => {
                let (p, l) = self.buf();
                if let Ok(n) = self.sys(Call::Read, libc::SYS_read, [i(fd), p, l, 0, 0, 0]) {
                    if n as u64 > l {
                        self.anomaly(format!("read(fd {fd}, len {l}) returned {n} > len"));
                    }
                }
            }
            1 => {
                let (p, l) = self.buf();
                let _ = self.sys(Call::Write, libc::SYS_write, [i(fd), p, l, 0, 0, 0]);
            }
            2 => {
                let (iov, n) = self.iovecs(self.a.structs + 1024, 1100);
                let _ = self.sys(Call::Readv, libc::SYS_readv, [i(fd), iov, n, 0, 0, 0]);
            }
            _ => {
                let (iov, n) = self.iovecs(self.a.structs + 1024, 1100);
                let _ = self.sys(Call::Writev, libc::SYS_writev, [i(fd), iov, n, 0, 0, 0]);
            }
        }
    }

    /// A listener, a client connected to it and the accepted end, all the thread's own
    /// (AF_SCI mostly, IPv4 or IPv6, the client now and then a plain TCP socket).
    fn op_pair(&mut self) {
        let v6 = self.rng.chance(1, 3);
        let l = self.new_socket(Kind::Sci, v6);
        if l < 0 {
            return;
        }
        let addr = if v6 { sin6(LO6, 0, 0) } else { sin(LO4, 0) };
        let p = self.put_data(&addr);
        if self
            .sys(
                Call::Bind,
                libc::SYS_bind,
                [i(l), p, addr.len() as u64, 0, 0, 0],
            )
            .is_err()
        {
            return;
        }
        self.rebound(l);
        if self
            .sys(Call::Listen, libc::SYS_listen, [i(l), 8, 0, 0, 0, 0])
            .is_err()
        {
            return;
        }
        self.mark_listening(l);
        let Some(port) = sys::local_port(l) else {
            return;
        };
        let ck = if self.rng.chance(1, 5) {
            Kind::Tcp
        } else {
            Kind::Sci
        };
        let c = self.new_socket(ck, v6);
        if c < 0 {
            return;
        }
        let addr = if v6 {
            sin6(LO6, port, 0)
        } else {
            sin(LO4, port)
        };
        let p = self.put_data(&addr);
        let _ = self.sys(
            Call::Connect,
            libc::SYS_connect,
            [i(c), p, addr.len() as u64, 0, 0, 0],
        );
        self.rebound(c);
        let flags = if self.rng.chance(1, 2) {
            i(libc::SOCK_NONBLOCK)
        } else {
            0
        };
        if let Ok(a) = self.sys(Call::Accept4, libc::SYS_accept4, [i(l), 0, 0, flags, 0, 0]) {
            self.add_fd(a as i32, Kind::Sci, v6);
        }
    }

    fn op_pipe2(&mut self) {
        let p = if self.rng.chance(1, 10) {
            self.ctx.bad.pick(&mut self.rng)
        } else {
            self.a.data_at(&mut self.rng, 8)
        };
        // Always O_NONBLOCK: nothing may wait on a pipe forever.
        let flags = i(libc::O_NONBLOCK)
            | self
                .rng
                .flags(&[libc::O_CLOEXEC as u64, libc::O_DIRECT as u64], 2);
        if self
            .sys(Call::Pipe2, libc::SYS_pipe2, [p, flags, 0, 0, 0, 0])
            .is_ok()
        {
            let (r, w) = self.a.fd_pair(p);
            self.add_fd(r, Kind::PipeR, false);
            self.add_fd(w, Kind::PipeW, false);
        }
    }

    /// SCI_INFO with a well-formed buffer on up to 8 AF_SCI sockets of the thread: the
    /// option answers on each (handed over or not).
    fn op_info_all(&mut self) {
        let socks: Vec<i32> = self
            .fds
            .iter()
            .filter(|f| matches!(f.kind, Kind::Sci | Kind::Dgram))
            .map(|f| f.fd)
            .collect();
        let skip = self.rng.below(socks.len() as u64 + 1) as usize;
        for fd in socks.into_iter().skip(skip).take(8) {
            let p = self.a.data_at(&mut self.rng, 16);
            let lp = self.a.data_at(&mut self.rng, 4);
            self.a.put_u32(lp, 16);
            let _ = self.sys(
                Call::Getsockopt,
                libc::SYS_getsockopt,
                [i(fd), i(SOL_SCI), i(SCI_INFO), p, lp, 0],
            );
        }
    }
}

/// A fork child: a few calls on the inherited sockets, then _exit. Allocates nothing and
/// takes no lock (another thread of the parent may have held one at the fork).
fn fork_child(fds: &[i32], seed: u64, a: Arena) -> ! {
    let mut rng = Rng::new(seed);
    // An alarm ends a child that blocks too long (SIGALRM: not counted as a crash).
    let _ = raw(libc::SYS_alarm, [3, 0, 0, 0, 0, 0]);
    for _ in 0..rng.range(1, 6) {
        let fd = fds[rng.below(fds.len() as u64) as usize] as u64;
        let buf = a.data + rng.below(60_000);
        let flags = rng.pick(&[0u64, 0x40, 0x4000, 0x40 | 0x4000, 0x1, 0x2]);
        let _ = match rng.below(10) {
            0 => raw(libc::SYS_sendto, [fd, buf, rng.below(4096), flags, 0, 0]),
            1 => raw(libc::SYS_recvfrom, [fd, buf, rng.below(4096), flags, 0, 0]),
            2 => raw(libc::SYS_shutdown, [fd, rng.below(3), 0, 0, 0, 0]),
            3 => raw(libc::SYS_close, [fd, 0, 0, 0, 0, 0]),
            4 => {
                a.put(buf, &[1, 0, 0, 0, 0, 0, 0, 0]); // SO_LINGER {1, 0}: reset on close
                let _ = raw(libc::SYS_setsockopt, [fd, 1, 13, buf, 8, 0]);
                raw(libc::SYS_close, [fd, 0, 0, 0, 0, 0])
            }
            5 => {
                a.put(buf + 64, &[4, 0, 0, 0]);
                raw(
                    libc::SYS_getsockopt,
                    [fd, 1, libc::SO_ERROR as u64, buf, buf + 64, 0],
                )
            }
            6 => {
                a.put(buf, &[0u8; 16]); // AF_UNSPEC: disconnect
                raw(libc::SYS_connect, [fd, buf, 16, 0, 0, 0])
            }
            7 => match raw(
                libc::SYS_accept4,
                [fd, 0, 0, libc::SOCK_NONBLOCK as u64, 0, 0],
            ) {
                Ok(n) => raw(libc::SYS_close, [n as u64, 0, 0, 0, 0, 0]),
                Err(e) => Err(e),
            },
            8 => raw(libc::SYS_ioctl, [fd, 0x541B, buf, 0, 0, 0]),
            _ => raw(libc::SYS_write, [fd, buf, rng.below(65536), 0, 0, 0]),
        };
    }
    // SAFETY: ends the child without running the parent's atexit handlers or destructors.
    unsafe { libc::_exit(0) }
}
