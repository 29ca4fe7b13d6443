//! The operations on the process's descriptor table: fork (with a child that makes a few
//! calls on the inherited sockets), dup, dup2 and dup3, close and pipe2.

use super::{i, Fuzzer, Kind};
use crate::mem::Arena;
use crate::report::Call;
use crate::rng::Rng;
use crate::shared::SLOTS;
use crate::sys::{self, now_ms, raw};
use std::sync::atomic::Ordering;

impl Fuzzer<'_> {
    pub(super) fn op_fork(&mut self) {
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

    pub(super) fn op_dup(&mut self) {
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

    pub(super) fn op_close(&mut self) {
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

    pub(super) fn op_pipe2(&mut self) {
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
