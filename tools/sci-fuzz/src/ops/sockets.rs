//! The operations that make, connect and take apart sockets: socket, socketpair, bind,
//! listen, connect, accept4, a connected pair of the thread's own, shutdown and the names.

use super::{i, Fd, Fuzzer, Kind};
use crate::addr::{sin, sin6, LO4, LO6};
use crate::report::Call;
use crate::sys::{self, bound_timeouts};

impl Fuzzer<'_> {
    pub(super) fn op_socket(&mut self) {
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

    pub(super) fn op_socketpair(&mut self) {
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

    pub(super) fn op_bind(&mut self) {
        let (fd, kind, v6) = self.sock();
        let (p, l) = self.addr(kind, v6, true);
        let _ = self.sys(Call::Bind, libc::SYS_bind, [i(fd), p, l, 0, 0, 0]);
        if kind == Kind::Sci {
            self.rebound(fd);
        }
    }

    pub(super) fn op_listen(&mut self) {
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

    pub(super) fn op_connect(&mut self) {
        let (fd, kind, v6) = self.sock();
        let (p, l) = self.addr(kind, v6, false);
        let _ = self.sys(Call::Connect, libc::SYS_connect, [i(fd), p, l, 0, 0, 0]);
        if kind == Kind::Sci {
            self.rebound(fd);
        }
    }

    pub(super) fn op_accept(&mut self) {
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

    pub(super) fn op_shutdown(&mut self) {
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

    pub(super) fn op_names(&mut self) {
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

    /// A listener, a client connected to it and the accepted end, all the thread's own
    /// (AF_SCI mostly, IPv4 or IPv6, the client now and then a plain TCP socket).
    pub(super) fn op_pair(&mut self) {
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
}
