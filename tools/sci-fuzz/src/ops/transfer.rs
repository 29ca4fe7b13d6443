//! The operations that move data: the send and receive calls of every kind (sendmmsg and
//! recvmmsg with their vectors bounded when they may block), sendfile, splice, and read,
//! write, readv and writev.

use super::{i, Fd, Fuzzer, Kind, UIO_MAXIOV};
use crate::report::Call;

/// The most messages a blocking `sendmmsg`/`recvmmsg` on a valid vector is given. Each of
/// its sends or receives may wait for the socket's timeout (at most 150 ms, see
/// `bound_timeouts`), so 64 of them end within 10 s, under the watchdog's 30 s. With up to
/// `UIO_MAXIOV` (what the kernel clamps any count to) a receive on a connection whose other
/// end another thread keeps writing ran for 30 s in TCP's own `recvmsg`, legitimately,
/// and was reported as a hang. Non-blocking calls and bad vectors keep every count.
const BLOCKING_VLEN_MAX: u64 = 64;
const MSG_TRUNC: u64 = 0x20;

impl Fuzzer<'_> {
    pub(super) fn op_sendmsg(&mut self) {
        let (fd, kind, v6) = self.sock();
        let m = self.msghdr(self.a.structs, self.a.structs + 1024, 1100, true, kind, v6);
        let flags = self.msg_flags();
        let _ = self.sys(Call::Sendmsg, libc::SYS_sendmsg, [i(fd), m, flags, 0, 0, 0]);
    }

    pub(super) fn op_recvmsg(&mut self) {
        let (fd, kind, v6) = self.sock();
        let m = self.msghdr(self.a.structs, self.a.structs + 1024, 1100, false, kind, v6);
        let flags = self.msg_flags();
        let _ = self.sys(Call::Recvmsg, libc::SYS_recvmsg, [i(fd), m, flags, 0, 0, 0]);
    }

    pub(super) fn op_sendto(&mut self) {
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

    pub(super) fn op_recvfrom(&mut self) {
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

    pub(super) fn op_sendmmsg(&mut self) {
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

    pub(super) fn op_recvmmsg(&mut self) {
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

    pub(super) fn op_sendfile(&mut self) {
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

    pub(super) fn op_splice(&mut self) {
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

    pub(super) fn op_rw(&mut self) {
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
}
