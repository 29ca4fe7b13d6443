//! The readiness operations: poll on a few sockets, and epoll instances with sockets and
//! other descriptors added, changed and removed, and waited on (short timeouts always).

use super::{i, Fuzzer, Kind};
use crate::report::Call;

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

impl Fuzzer<'_> {
    pub(super) fn op_poll(&mut self) {
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

    pub(super) fn op_epoll_create(&mut self) {
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

    pub(super) fn op_epoll_ctl(&mut self) {
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

    pub(super) fn op_epoll_wait(&mut self) {
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
}
