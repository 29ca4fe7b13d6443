//! One fuzz thread: a random sequence of calls on its own descriptors (and now and then on
//! sockets other threads of its process hold), every pointer argument in its scratch arena
//! or a bad pointer (`mem.rs`), every blocking call bounded (receive and send timeouts on
//! every socket it makes or accepts, non-blocking pipes, short poll and epoll timeouts,
//! SO_LINGER at most 1 s).
//!
//! This file holds the thread's state, the call itself and the bookkeeping of its
//! descriptors; the operations and the arguments they build are in `ops/`, one concept each.

mod args;
mod events;
mod options;
mod process;
mod sockets;
mod transfer;

use crate::mem::Arena;
use crate::report::{errno_name, is_kernel_internal, Call, Counts, Report};
use crate::rng::Rng;
use crate::shared::{Ctx, SLOTS};
use crate::sys::{self, bound_timeouts, now_ms, raw, Args};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// At most this many descriptors per thread; beyond, the oldest is closed.
const MAX_FDS: usize = 64;
const SOL_SCI: i32 = 300;
const SCI_NATIVE_FAMILY: i32 = 2;
const UIO_MAXIOV: u64 = 1024;

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
}
