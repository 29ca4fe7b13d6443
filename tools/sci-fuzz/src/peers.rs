//! The live peers the workers connect to: listeners made by the parent before it forks
//! the workers, served afterwards by accepter threads in the parent. Each accepted
//! connection gets a behaviour at random (echo, read and discard, close at once, reset,
//! stay silent for a while, send a burst with urgent data), so the workers' connected
//! sockets have peers that talk, drain, stall and go away. The datagram peers (AF_SCI
//! datagram sockets) echo some datagrams to their sender, drop others and now and then
//! leave their queue unread, so the workers' datagram sockets get implicit SCI
//! connections whose rings carry, fill and end.

use crate::addr::{sin, sin6, Peer, PeerKind, ANY6, LO4, LO6};
use crate::report::{errno_name, Report};
use crate::rng::Rng;
use crate::sys::{self, bound_linger, now_ms, raw, setsockopt_int};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

pub struct Listener {
    pub fd: i32,
    pub peer: Peer,
}

/// Makes the listeners. One that cannot be made is left out with a message (with
/// `--family` naming another family, for a dry run of the fuzzer itself, some cannot);
/// an error when none could.
pub fn listen_all(family: i32) -> Result<Vec<Listener>, String> {
    let specs: [(&'static str, PeerKind, i32, Vec<u8>); 8] = [
        ("sci4", PeerKind::Sci, family, sin(LO4, 0)),
        ("sci6", PeerKind::Sci, family, sin6(LO6, 0, 0)),
        ("sci-any6", PeerKind::Sci, family, sin6(ANY6, 0, 0)),
        ("tcp4", PeerKind::Tcp, libc::AF_INET, sin(LO4, 0)),
        ("tcp6", PeerKind::Tcp, libc::AF_INET6, sin6(LO6, 0, 0)),
        ("sci-for-tcp", PeerKind::SciForTcp, family, sin(LO4, 0)),
        ("sci-dgram4", PeerKind::SciDgram, family, sin(LO4, 0)),
        (
            "sci-dgram-any6",
            PeerKind::SciDgram,
            family,
            sin6(ANY6, 0, 0),
        ),
    ];
    let mut out = Vec::new();
    for (name, kind, fam, addr) in specs {
        match listen_one(fam, &addr, kind == PeerKind::SciDgram) {
            Ok((fd, port)) => out.push(Listener {
                fd,
                peer: Peer {
                    name,
                    kind,
                    v6: addr.len() == 28,
                    wildcard: addr == sin6(ANY6, 0, 0),
                    port,
                },
            }),
            Err(e) => println!("sci-fuzz: peer {name} left out: {e}"),
        }
    }
    if out.is_empty() {
        return Err("no listener could be made".into());
    }
    Ok(out)
}

/// A listener, or with `dgram` a bound datagram socket.
fn listen_one(fam: i32, addr: &[u8], dgram: bool) -> Result<(i32, u16), String> {
    let ty = if dgram {
        libc::SOCK_DGRAM
    } else {
        libc::SOCK_STREAM
    };
    let fd = raw(
        libc::SYS_socket,
        [fam as u64, (ty | libc::SOCK_CLOEXEC) as u64, 0, 0, 0, 0],
    )
    .map_err(|e| format!("socket({fam}, {ty}): {}", errno_name(e)))? as i32;
    let done = (|| {
        let _ = setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1);
        sys::bind_bytes(fd, addr).map_err(|e| format!("bind: {}", errno_name(e)))?;
        if !dgram {
            raw(libc::SYS_listen, [fd as u64, 1024, 0, 0, 0, 0])
                .map_err(|e| format!("listen: {}", errno_name(e)))?;
        }
        sys::local_port(fd).ok_or("getsockname failed".to_string())
    })();
    match done {
        Ok(port) => Ok((fd, port)),
        Err(e) => {
            sys::close(fd);
            Err(e)
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Echo,
    Discard,
    Silent,
    Burst,
}

struct Conn {
    fd: i32,
    mode: Mode,
    /// When it is closed (ms, `now_ms` clock).
    until: u64,
}

/// A running accepter thread: what it is doing right now, for a hang report.
pub struct PeerThread {
    pub handle: JoinHandle<Report>,
    pub busy_since: Arc<AtomicU64>,
}

/// Starts `n` accepter threads sharing out the listeners; they run until `stop`.
pub fn start(
    listeners: &[Listener],
    n: usize,
    seed: u64,
    stop: Arc<AtomicBool>,
) -> Vec<PeerThread> {
    let mut threads = Vec::new();
    for t in 0..n {
        let mine: Vec<(i32, Peer)> = listeners
            .iter()
            .enumerate()
            .filter(|(i, _)| i % n == t)
            .map(|(_, l)| (l.fd, l.peer))
            .collect();
        let stop = stop.clone();
        let busy = Arc::new(AtomicU64::new(0));
        let busy2 = busy.clone();
        let rng = Rng::new(crate::rng::derive(seed, u32::MAX - 1, t as u32));
        let handle = std::thread::Builder::new()
            .name(format!("peer{t}"))
            .spawn(move || serve(mine, rng, &stop, &busy2))
            .expect("spawn a peer thread");
        threads.push(PeerThread {
            handle,
            busy_since: busy,
        });
    }
    threads
}

/// The epoll event's bytes: events, then the fd as data.
fn ev(events: u32, fd: i32) -> libc::epoll_event {
    libc::epoll_event {
        events,
        u64: fd as u64,
    }
}

fn epoll_ctl(ep: i32, op: i32, fd: i32, events: u32) {
    let mut e = ev(events, fd);
    // SAFETY: `e` is a live local epoll_event the kernel reads.
    unsafe { libc::epoll_ctl(ep, op, fd, &mut e) };
}

fn serve(listeners: Vec<(i32, Peer)>, mut rng: Rng, stop: &AtomicBool, busy: &AtomicU64) -> Report {
    let mut report = Report::default();
    // SAFETY: epoll_create1 takes no pointers.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    for &(fd, _) in &listeners {
        sys::set_nonblocking(fd);
        epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, libc::EPOLLIN as u32);
    }
    let mut conns: VecDeque<Conn> = VecDeque::new();
    let mut buf = vec![0u8; 65536];
    let mut events = vec![ev(0, 0); 64];
    while !stop.load(Ordering::Relaxed) {
        busy.store(now_ms(), Ordering::Relaxed);
        // SAFETY: `events` has room for 64 events.
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), 64, 20) };
        let now = now_ms();
        for e in events.iter().take(n.max(0) as usize) {
            let fd = e.u64 as i32;
            if let Some(&(_, peer)) = listeners.iter().find(|(l, _)| *l == fd) {
                if peer.kind == PeerKind::SciDgram {
                    datagrams(fd, &mut buf, &mut rng, &mut report);
                    continue;
                }
                for _ in 0..16 {
                    // SAFETY: no address wanted (NULL, NULL).
                    let c = unsafe {
                        libc::accept4(
                            fd,
                            std::ptr::null_mut(),
                            std::ptr::null_mut(),
                            libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                        )
                    };
                    if c < 0 {
                        break;
                    }
                    report.note(&format!("peer-accepted-{}", peer.name), 1);
                    if peer.kind != PeerKind::Tcp {
                        // SCI_INFO: which path the accepted connection took.
                        match sys::getsockopt_bytes(c, 300, 1, 16) {
                            Ok(b) if b.len() >= 8 => {
                                let mode = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]);
                                let why = u32::from_ne_bytes([b[4], b[5], b[6], b[7]]);
                                let m = if mode == 1 {
                                    "sci".to_string()
                                } else {
                                    format!("native-{why}")
                                };
                                report.note(&format!("peer-mode-{m}"), 1);
                            }
                            _ => report.note("peer-mode-unknown", 1),
                        }
                    }
                    accepted(c, ep, &mut rng, now, &mut conns, &mut report);
                }
                continue;
            }
            let Some(i) = conns.iter().position(|c| c.fd == fd) else {
                continue;
            };
            if !service(&mut conns[i], e.events, &mut buf, &mut rng) {
                let c = conns.remove(i).expect("index found above");
                sys::close(c.fd);
            }
        }
        // Expired connections, and the oldest beyond the cap.
        let mut i = 0;
        while i < conns.len() {
            if conns[i].until <= now || conns.len() > 400 {
                let c = conns.remove(i).expect("index in range");
                if rng.chance(1, 4) {
                    bound_linger(c.fd, true, 0); // reset
                }
                sys::close(c.fd);
            } else {
                i += 1;
            }
        }
    }
    busy.store(0, Ordering::Relaxed);
    for c in conns {
        sys::close(c.fd);
    }
    for (fd, peer) in listeners {
        if peer.kind == PeerKind::SciDgram {
            // What came over SCI (its fdinfo): the datagram peers' rings were used.
            report.note("peer-dgram-over-sci", over_sci(fd));
        }
        sys::close(fd);
    }
    sys::close(ep);
    report
}

fn accepted(
    c: i32,
    ep: i32,
    rng: &mut Rng,
    now: u64,
    conns: &mut VecDeque<Conn>,
    report: &mut Report,
) {
    match rng.below(10) {
        0 => {
            report.note("peer-close-at-once", 1);
            sys::close(c);
            return;
        }
        1 => {
            report.note("peer-reset-at-once", 1);
            bound_linger(c, true, 0);
            sys::close(c);
            return;
        }
        _ => {}
    }
    let mode = match rng.below(8) {
        0..=2 => Mode::Echo,
        3..=4 => Mode::Discard,
        5 => Mode::Silent,
        _ => Mode::Burst,
    };
    let until = now + rng.range(50, 5000);
    if mode == Mode::Burst {
        let mut data = vec![0u8; rng.range(1, 200_000) as usize];
        rng.fill(&mut data);
        // SAFETY: `data` is a live buffer of its length; the socket is non-blocking.
        unsafe {
            libc::send(
                c,
                data.as_ptr() as *const libc::c_void,
                data.len(),
                libc::MSG_NOSIGNAL,
            );
            if rng.chance(1, 2) {
                libc::send(
                    c,
                    data.as_ptr() as *const libc::c_void,
                    1,
                    libc::MSG_OOB | libc::MSG_NOSIGNAL,
                );
            }
            if rng.chance(1, 3) {
                libc::shutdown(c, libc::SHUT_WR);
            }
        }
    }
    if mode != Mode::Silent {
        epoll_ctl(
            ep,
            libc::EPOLL_CTL_ADD,
            c,
            (libc::EPOLLIN | libc::EPOLLRDHUP) as u32,
        );
    }
    conns.push_back(Conn { fd: c, mode, until });
}

/// Serves one readable connection; false when it is to be closed.
fn service(c: &mut Conn, events: u32, buf: &mut [u8], rng: &mut Rng) -> bool {
    if events & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0 {
        return false;
    }
    for _ in 0..4 {
        // SAFETY: `buf` is a live buffer of its length.
        let n = unsafe {
            libc::recv(
                c.fd,
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n == 0 {
            return false;
        }
        if n < 0 {
            return sys::errno() == libc::EAGAIN;
        }
        if c.mode == Mode::Echo {
            // SAFETY: the first `n` bytes of `buf` were just received.
            unsafe {
                libc::send(
                    c.fd,
                    buf.as_ptr() as *const libc::c_void,
                    n as usize,
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                )
            };
            if rng.chance(1, 50) {
                return false;
            }
        }
    }
    true
}

/// Serves a readable datagram peer: up to 16 datagrams, each echoed to its sender (half
/// of them), dropped, or left with the rest of the queue unread for now.
fn datagrams(fd: i32, buf: &mut [u8], rng: &mut Rng, report: &mut Report) {
    for _ in 0..16 {
        let mut from = [0u8; 28];
        let mut from_len = from.len() as libc::socklen_t;
        // SAFETY: `buf` and `from` are live buffers of the lengths given.
        let n = unsafe {
            libc::recvfrom(
                fd,
                buf.as_mut_ptr() as *mut libc::c_void,
                buf.len(),
                libc::MSG_DONTWAIT,
                from.as_mut_ptr() as *mut libc::sockaddr,
                &mut from_len,
            )
        };
        if n < 0 {
            return;
        }
        report.note("peer-dgram-received", 1);
        match rng.below(8) {
            0..=3 => {
                // SAFETY: the first `n` bytes of `buf` and `from_len` of `from` are set.
                let sent = unsafe {
                    libc::sendto(
                        fd,
                        buf.as_ptr() as *const libc::c_void,
                        n as usize,
                        libc::MSG_DONTWAIT,
                        from.as_ptr() as *const libc::sockaddr,
                        from_len,
                    )
                };
                if sent >= 0 {
                    report.note("peer-dgram-echoed", 1);
                }
            }
            4..=6 => {}
            _ => return,
        }
    }
}

/// The datagrams socket `fd` of this process received over SCI (its fdinfo).
fn over_sci(fd: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}"))
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("sci-datagrams:"))
                .and_then(|l| l.split_whitespace().nth(3).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}
