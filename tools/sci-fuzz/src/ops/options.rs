//! The operations that query and change a descriptor's settings: socket options at every
//! level (SOL_SCI's included, and SCI_INFO on many sockets at once), ioctls and fcntl.

use super::{i, Fuzzer, Kind, SCI_NATIVE_FAMILY, SOL_SCI};
use crate::mem::DATA_SIZE;
use crate::report::Call;
use crate::sys::{self, bound_linger};

const SCI_INFO: i32 = 1;
const SCI_SPIN_US: i32 = 3;

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

impl Fuzzer<'_> {
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

    pub(super) fn op_setsockopt(&mut self) {
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

    pub(super) fn op_getsockopt(&mut self) {
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

    pub(super) fn op_ioctl(&mut self) {
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

    pub(super) fn op_fcntl(&mut self) {
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

    /// SCI_INFO with a well-formed buffer on up to 8 AF_SCI sockets of the thread: the
    /// option answers on each (handed over or not).
    pub(super) fn op_info_all(&mut self) {
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
