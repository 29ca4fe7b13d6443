//! The arguments of the calls: buffers, ints behind pointers, MSG_* flags, socket addresses
//! (live peers, the thread's own listeners, odd and wrong ones) and msghdrs with their
//! iovecs and control messages, all in the thread's arena or bad on purpose.

use super::{Fuzzer, Kind, SOL_SCI, UIO_MAXIOV};
use crate::addr::{mapped, sin, sin6, PeerKind, ANY6, LO4, LO6};
use crate::mem::DATA_SIZE;

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

impl Fuzzer<'_> {
    /// Puts `bytes` at a random place of the data zone; its address.
    pub(super) fn put_data(&mut self, bytes: &[u8]) -> u64 {
        let p = self.a.data_at(&mut self.rng, bytes.len() as u64);
        self.a.put(p, bytes);
        p
    }

    /// A buffer: (pointer, length), mostly in the data zone, now and then bad.
    pub(super) fn buf(&mut self) -> (u64, u64) {
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
    pub(super) fn int_ptr(&mut self, v: u32) -> u64 {
        if self.rng.chance(1, 10) {
            return self.ctx.bad.pick(&mut self.rng);
        }
        let p = self.a.data_at(&mut self.rng, 4);
        self.a.put_u32(p, v);
        p
    }

    pub(super) fn msg_flags(&mut self) -> u64 {
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
    pub(super) fn addr(&mut self, kind: Kind, v6: bool, bind: bool) -> (u64, u64) {
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
    pub(super) fn msghdr(
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
    pub(super) fn iovecs(&mut self, at: u64, max: u64) -> (u64, u64) {
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
                    let (level, ty, data): (i32, i32, Vec<u8>) = match self.rng.below(14) {
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
                        12 => {
                            // UDP_SEGMENT: none, tiny (past 128 segments), or a packet's
                            let size = self.rng.pick(&[0u16, 1, 7, 1200, 1473, 65535]);
                            (libc::IPPROTO_UDP, 103, size.to_ne_bytes().to_vec())
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
}
