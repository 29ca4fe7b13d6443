//! The measurements. Each one starts a server thread on a fresh listener (127.0.0.1 and a
//! free port, or an abstract AF_UNIX name), connects to it from the calling thread, checks
//! what every socket really is, and then runs for the given time. In the remote mode
//! (`crate::remote`) the server is `sci-bench serve` on another machine.

use crate::concurrent;
use crate::remote;
use crate::smc;
use crate::stats;
use crate::sys::{self, Endpoint, Sock};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// The families measured in-process (`sci-preload` is `Tcp` run in a preloaded child).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Net {
    Tcp,
    Unix,
    Smc,
    /// AF_SCI with the loaded module's family number.
    Sci(i32),
}

impl Net {
    pub(crate) fn socket(self) -> io::Result<Sock> {
        match self {
            Net::Tcp => Sock::new(libc::AF_INET, 0),
            Net::Unix => Sock::new(libc::AF_UNIX, 0),
            Net::Smc => Sock::new(sys::AF_SMC, sys::SMCPROTO_SMC),
            Net::Sci(af) => Sock::new(af, 0),
        }
    }

    fn is_inet(self) -> bool {
        !matches!(self, Net::Unix)
    }
}

/// One measurement.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Test {
    /// Ping-pong: `size` bytes each way, one outstanding; latency per round trip.
    PingPong { size: usize },
    /// One-way stream of `size`-byte writes; MB/s.
    Stream { size: usize },
    /// Request-response: `req` bytes in, `resp` bytes back, one outstanding; trans/s.
    Rr { req: usize, resp: usize },
    /// connect + one `size`-byte exchange + close, one at a time; conn/s.
    Crr { size: usize },
    /// `streams` concurrent ping-pong connections of `size` bytes; aggregate trans/s.
    Multi { streams: usize, size: usize },
    /// AZ-SDP's hot-spot test: `clients` ping-pong connections of `size` bytes at once,
    /// all served by one server thread (an epoll loop); aggregate trans/s.
    HotSpot { clients: usize, size: usize },
}

/// Which way a metric is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    Lower,
    Higher,
}

/// One number a test reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Metric {
    pub name: &'static str,
    pub unit: &'static str,
    pub better: Better,
}

/// "14 B", "4 KiB", "1 MiB".
pub fn fmt_size(n: usize) -> String {
    if n >= 1 << 20 && n % (1 << 20) == 0 {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n % (1 << 10) == 0 {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} B")
    }
}

impl Test {
    pub fn name(&self) -> String {
        match self {
            Test::PingPong { size } => format!("ping-pong {}", fmt_size(*size)),
            Test::Stream { size } => format!("stream {} writes", fmt_size(*size)),
            Test::Rr { req, resp } => format!("req-resp {}/{}", fmt_size(*req), fmt_size(*resp)),
            Test::Crr { size } => format!("connect+{}+close", fmt_size(*size)),
            Test::Multi { streams, size } => {
                format!("{streams} streams ping-pong {}", fmt_size(*size))
            }
            Test::HotSpot { clients, size } => {
                format!("hot-spot {clients} clients {}", fmt_size(*size))
            }
        }
    }

    pub fn metrics(&self) -> Vec<Metric> {
        let m = |name, unit, better| Metric { name, unit, better };
        match self {
            Test::PingPong { .. } => vec![
                m("median", "us", Better::Lower),
                m("p99", "us", Better::Lower),
            ],
            Test::Stream { .. } => vec![m("", "MB/s", Better::Higher)],
            Test::Rr { .. } | Test::Multi { .. } | Test::HotSpot { .. } => {
                vec![m("", "trans/s", Better::Higher)]
            }
            Test::Crr { .. } => vec![m("", "conn/s", Better::Higher)],
        }
    }
}

/// What the kernel said about one socket.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SockCheck {
    pub domain: i32,
    pub sci: Option<sys::SciInfo>,
    /// Set for `Net::Smc` sockets only.
    pub inode: u64,
}

/// What was seen of the sockets of a family: counts per `SO_DOMAIN`, per AF_SCI mode and
/// fallback reason, per `smc_diag` mode and fallback reason.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observed {
    pub sockets: u64,
    pub domains: BTreeMap<i32, u64>,
    pub sci_modes: BTreeMap<u32, u64>,
    pub sci_reasons: BTreeMap<u32, u64>,
    pub smc_modes: BTreeMap<u8, u64>,
    pub smc_reasons: BTreeMap<u32, u64>,
    /// AF_SMC sockets that smc_diag did not list.
    pub smc_missing: u64,
}

impl Observed {
    pub fn merge(&mut self, o: &Observed) {
        self.sockets += o.sockets;
        for (k, v) in &o.domains {
            *self.domains.entry(*k).or_default() += v;
        }
        for (k, v) in &o.sci_modes {
            *self.sci_modes.entry(*k).or_default() += v;
        }
        for (k, v) in &o.sci_reasons {
            *self.sci_reasons.entry(*k).or_default() += v;
        }
        for (k, v) in &o.smc_modes {
            *self.smc_modes.entry(*k).or_default() += v;
        }
        for (k, v) in &o.smc_reasons {
            *self.smc_reasons.entry(*k).or_default() += v;
        }
        self.smc_missing += o.smc_missing;
    }

    pub(crate) fn add(&mut self, c: &SockCheck) {
        self.sockets += 1;
        *self.domains.entry(c.domain).or_default() += 1;
        if let Some(info) = c.sci {
            *self.sci_modes.entry(info.mode).or_default() += 1;
            *self.sci_reasons.entry(info.fallback_reason).or_default() += 1;
        }
    }

    /// Counts every socket of `checks` and looks the AF_SMC ones up in `smc_diag`.
    pub(crate) fn add_checked(&mut self, checks: &[SockCheck]) -> io::Result<()> {
        for c in checks {
            self.add(c);
        }
        self.add_smc(checks)
    }

    /// Looks the AF_SMC sockets among `checks` up in `smc_diag`.
    fn add_smc(&mut self, checks: &[SockCheck]) -> io::Result<()> {
        let smc: Vec<&SockCheck> = checks.iter().filter(|c| c.inode != 0).collect();
        if smc.is_empty() {
            return Ok(());
        }
        let entries = smc::diag_dump()?;
        for c in smc {
            match entries.iter().find(|e| e.inode == c.inode) {
                Some(e) => {
                    *self.smc_modes.entry(e.mode).or_default() += 1;
                    if e.mode == smc::SMC_DIAG_MODE_FALLBACK_TCP {
                        *self.smc_reasons.entry(e.fallback_reason).or_default() += 1;
                    }
                }
                None => self.smc_missing += 1,
            }
        }
        Ok(())
    }
}

/// The result of one run of one test on one family.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// One value per [`Test::metrics`] entry.
    pub values: Vec<f64>,
    pub observed: Observed,
}

/// Checks a socket: `SO_DOMAIN`, `SCI_INFO` when it is AF_SCI, and for `Net::Smc` its
/// inode, to look it up in `smc_diag` (a connection that fell back to TCP has its file
/// switched to the TCP socket, so `SO_DOMAIN` then says AF_INET; `smc_diag` says why).
/// An AF_SCI connection that fell back hands its file to its TCP socket the same way;
/// `SCI_INFO`, which only AF_SCI sockets answer, still tells it, and it counts as AF_SCI.
pub(crate) fn check(s: &Sock, net: Net, sci_af: Option<i32>) -> io::Result<SockCheck> {
    let mut domain = s.domain()?;
    let sci = match sci_af {
        Some(af) if domain == af => Some(s.sci_info()?),
        Some(af) if domain == libc::AF_INET || domain == libc::AF_INET6 => {
            let info = s.sci_info().ok();
            if info.is_some() {
                domain = af;
            }
            info
        }
        _ => None,
    };
    let inode = if net == Net::Smc { s.inode()? } else { 0 };
    Ok(SockCheck { domain, sci, inode })
}

/// Unique abstract AF_UNIX names within the process.
static UNIX_SEQ: AtomicU64 = AtomicU64::new(0);

pub(crate) fn listen(net: Net, backlog: i32) -> io::Result<(Sock, Endpoint)> {
    let l = net.socket()?;
    let ep = if net.is_inet() {
        l.set_reuseaddr()?;
        l.bind(&Endpoint::Inet(0))?;
        Endpoint::Inet(l.local_port()?)
    } else {
        let name = format!(
            "sci-bench.{}.{}",
            std::process::id(),
            UNIX_SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let ep = Endpoint::Abstract(name.into_bytes());
        l.bind(&ep)?;
        ep
    };
    l.listen(backlog)?;
    Ok((l, ep))
}

/// Client side of a connection: connect, TCP_NODELAY for the TCP-like families.
pub(crate) fn connect(net: Net, ep: &Endpoint) -> io::Result<Sock> {
    let s = net.socket()?;
    s.connect(ep)?;
    if net.is_inet() {
        s.set_nodelay()?;
    }
    Ok(s)
}

/// How long a blocked send/recv of a long-lived connection may wait before the run fails.
pub(crate) const IO_TIMEOUT: Duration = Duration::from_secs(60);

/// Accepts one connection and reports its check through `tx`.
pub(crate) fn accept_checked(
    l: &Sock,
    net: Net,
    sci_af: Option<i32>,
    tx: &mpsc::Sender<io::Result<SockCheck>>,
) -> io::Result<Sock> {
    let s = accept(l, net)?;
    send_check(&s, net, sci_af, tx)?;
    Ok(s)
}

/// Server side of a connection: accept, TCP_NODELAY for the TCP-like families.
fn accept(l: &Sock, net: Net) -> io::Result<Sock> {
    let s = l.accept()?;
    if net.is_inet() {
        s.set_nodelay()?;
    }
    Ok(s)
}

/// Checks a server's socket and hands the result to the client thread (which counts
/// it); an error also ends the server.
fn send_check(
    s: &Sock,
    net: Net,
    sci_af: Option<i32>,
    tx: &mpsc::Sender<io::Result<SockCheck>>,
) -> io::Result<()> {
    let c = check(s, net, sci_af);
    let err = c
        .as_ref()
        .err()
        .map(|e| io::Error::new(e.kind(), e.to_string()));
    let _ = tx.send(c);
    match err {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

pub(crate) fn recv_check(rx: &mpsc::Receiver<io::Result<SockCheck>>) -> io::Result<SockCheck> {
    rx.recv_timeout(IO_TIMEOUT)
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "server did not accept"))?
}

pub(crate) fn join(h: thread::JoinHandle<io::Result<()>>) -> io::Result<()> {
    h.join()
        .map_err(|_| io::Error::other("server thread panicked"))?
}

/// Echoes `size`-byte messages until the peer closes.
pub(crate) fn echo(s: &Sock, req: usize, resp: usize) -> io::Result<()> {
    let mut rbuf = vec![0u8; req];
    let wbuf = vec![0x5au8; resp];
    while s.recv_exact(&mut rbuf)? {
        s.send_all(&wbuf)?;
    }
    Ok(())
}

/// One connection with a server thread answering `req` bytes with `resp` bytes; returns the
/// client socket, the observations and the server thread.
fn echo_pair(
    net: Net,
    sci_af: Option<i32>,
    req: usize,
    resp: usize,
) -> io::Result<(Sock, Observed, thread::JoinHandle<io::Result<()>>)> {
    let (l, ep) = listen(net, 8)?;
    let (tx, rx) = mpsc::channel();
    let srv = thread::spawn(move || {
        let s = accept_checked(&l, net, sci_af, &tx)?;
        drop(l);
        echo(&s, req, resp)
    });
    let c = connect(net, &ep)?;
    c.set_timeouts(IO_TIMEOUT)?;
    let checks = [check(&c, net, sci_af)?, recv_check(&rx)?];
    let mut obs = Observed::default();
    obs.add_checked(&checks)?;
    Ok((c, obs, srv))
}

/// Runs transactions (send `req`, receive `resp`) on `c` for `warmup` then `dur`; returns the
/// duration of each measured transaction in ns when `record`, else only their count.
pub(crate) fn transact(
    c: &Sock,
    req: usize,
    resp: usize,
    warmup: Duration,
    dur: Duration,
    record: bool,
) -> io::Result<(u64, Duration, Vec<u64>)> {
    let wbuf = vec![0xa5u8; req];
    let mut rbuf = vec![0u8; resp];
    let start = Instant::now();
    while start.elapsed() < warmup {
        c.send_all(&wbuf)?;
        c.recv_all(&mut rbuf)?;
    }
    let mut lat = Vec::new();
    if record {
        lat.reserve(1 << 16);
    }
    let t0 = Instant::now();
    let end = t0 + dur;
    let mut n = 0u64;
    let mut t = t0;
    loop {
        c.send_all(&wbuf)?;
        c.recv_all(&mut rbuf)?;
        let now = Instant::now();
        if record {
            lat.push((now - t).as_nanos() as u64);
        }
        n += 1;
        t = now;
        if now >= end {
            break;
        }
    }
    Ok((n, t - t0, lat))
}

fn pingpong(net: Net, sci_af: Option<i32>, size: usize, dur: Duration) -> io::Result<Sample> {
    let (c, observed, srv) = echo_pair(net, sci_af, size, size)?;
    let (_, _, mut lat) = transact(&c, size, size, dur / 10, dur, true)?;
    drop(c);
    join(srv)?;
    let (med, p99) =
        stats::latency_us(&mut lat).ok_or_else(|| io::Error::other("no round trip measured"))?;
    Ok(Sample {
        values: vec![med, p99],
        observed,
    })
}

fn rr(net: Net, sci_af: Option<i32>, req: usize, resp: usize, dur: Duration) -> io::Result<Sample> {
    let (c, observed, srv) = echo_pair(net, sci_af, req, resp)?;
    let (n, elapsed, _) = transact(&c, req, resp, dur / 10, dur, false)?;
    drop(c);
    join(srv)?;
    Ok(Sample {
        values: vec![n as f64 / elapsed.as_secs_f64()],
        observed,
    })
}

fn stream(net: Net, sci_af: Option<i32>, size: usize, dur: Duration) -> io::Result<Sample> {
    let (l, ep) = listen(net, 8)?;
    let (tx, rx) = mpsc::channel();
    let srv = thread::spawn(move || {
        let s = accept_checked(&l, net, sci_af, &tx)?;
        drop(l);
        let mut buf = vec![0u8; size.max(64 << 10)];
        let mut total = 0u64;
        loop {
            let n = s.recv_some(&mut buf)?;
            if n == 0 {
                break;
            }
            total += n as u64;
        }
        s.send_all(&total.to_le_bytes())
    });
    let c = connect(net, &ep)?;
    c.set_timeouts(IO_TIMEOUT)?;
    let checks = [check(&c, net, sci_af)?, recv_check(&rx)?];
    let mut observed = Observed::default();
    observed.add_checked(&checks)?;
    let buf = vec![0xa5u8; size];
    let t0 = Instant::now();
    let end = t0 + dur;
    let mut sent = 0u64;
    while Instant::now() < end {
        c.send_all(&buf)?;
        sent += size as u64;
    }
    c.shutdown_write()?;
    let mut ack = [0u8; 8];
    c.recv_all(&mut ack)?;
    let elapsed = t0.elapsed();
    let got = u64::from_le_bytes(ack);
    join(srv)?;
    if got != sent {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("sent {sent} bytes, the server received {got}"),
        ));
    }
    Ok(Sample {
        values: vec![got as f64 / elapsed.as_secs_f64() / 1e6],
        observed,
    })
}

/// The first bytes of the message that tells the connect/close server to stop.
const STOP: &[u8] = b"STOP";

fn crr(net: Net, sci_af: Option<i32>, size: usize, dur: Duration) -> io::Result<Sample> {
    let size = size.max(STOP.len());
    let (l, ep) = listen(net, 128)?;
    let (tx, rx) = mpsc::channel();
    // The server checks its socket when the client says so, after the client took its
    // time: a check is never counted, at either end (on one CPU, a check the server made
    // before answering would delay the answer).
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let srv = thread::spawn(move || -> io::Result<()> {
        let mut req = vec![0u8; size];
        let resp = vec![0x5au8; size];
        loop {
            let s = accept(&l, net)?;
            if !s.recv_exact(&mut req)? {
                continue;
            }
            if req.starts_with(STOP) {
                return Ok(());
            }
            s.send_all(&resp)?;
            if go_rx.recv_timeout(IO_TIMEOUT).is_err() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the client never asked for the check",
                ));
            }
            send_check(&s, net, sci_af, &tx)?;
            // Wait for the client to close first (its side takes the TIME_WAIT).
            let mut rest = [0u8; 64];
            while s.recv_some(&mut rest)? > 0 {}
        }
    });
    let mut req = vec![0xa5u8; size];
    req[..STOP.len()].copy_from_slice(b"ping");
    let mut resp = vec![0u8; size];
    let mut observed = Observed::default();
    let mut active = Duration::ZERO;
    let mut n = 0u64;
    let started = Instant::now();
    // The time spent checking the sockets is not counted; stop after `dur` of counted
    // time, or 4 x `dur` of wall time when checking is slow.
    while active < dur && started.elapsed() < dur * 4 {
        let t0 = Instant::now();
        let c = connect(net, &ep)?;
        c.send_all(&req)?;
        c.recv_all(&mut resp)?;
        let t1 = Instant::now();
        let own = check(&c, net, sci_af)?;
        go_tx
            .send(())
            .map_err(|_| io::Error::other("the server thread ended"))?;
        let checks = [own, recv_check(&rx)?];
        observed.add_checked(&checks)?;
        let t2 = Instant::now();
        drop(c);
        active += (t1 - t0) + t2.elapsed();
        n += 1;
    }
    let c = connect(net, &ep)?;
    let mut stop = vec![0u8; size];
    stop[..STOP.len()].copy_from_slice(STOP);
    c.send_all(&stop)?;
    drop(c);
    join(srv)?;
    Ok(Sample {
        values: vec![n as f64 / active.as_secs_f64()],
        observed,
    })
}

/// Runs `test` once on `net` for `dur`. `sci_af` is the loaded AF_SCI family number (used
/// to recognise AF_SCI sockets, whatever family was asked for). With `pin`, a
/// single-connection test runs client and server on that one CPU (the server thread
/// inherits the client's mask); the multi-stream test is never pinned. With `remote`,
/// the server is the `sci-bench serve` at that address (only the client is pinned).
pub fn run(
    net: Net,
    sci_af: Option<i32>,
    test: &Test,
    dur: Duration,
    pin: Option<usize>,
    remote: Option<SocketAddrV4>,
) -> io::Result<Sample> {
    let _pinned = match (test, pin) {
        (Test::Multi { .. } | Test::HotSpot { .. }, _) | (_, None) => None,
        (_, Some(cpu)) => Some(sys::Pinned::to(cpu)?),
    };
    if let Some(addr) = remote {
        return remote::run(net, sci_af, addr, test, dur);
    }
    match *test {
        Test::PingPong { size } => pingpong(net, sci_af, size, dur),
        Test::Stream { size } => stream(net, sci_af, size, dur),
        Test::Rr { req, resp } => rr(net, sci_af, req, resp, dur),
        Test::Crr { size } => crr(net, sci_af, size, dur),
        Test::Multi { streams, size } => concurrent::multi(net, sci_af, streams, size, dur),
        Test::HotSpot { clients, size } => concurrent::hotspot(net, sci_af, clients, size, dur),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_names() {
        assert_eq!(fmt_size(1), "1 B");
        assert_eq!(fmt_size(14), "14 B");
        assert_eq!(fmt_size(1000), "1000 B");
        assert_eq!(fmt_size(4096), "4 KiB");
        assert_eq!(fmt_size(65536), "64 KiB");
        assert_eq!(fmt_size(1 << 20), "1 MiB");
        assert_eq!(Test::PingPong { size: 14 }.name(), "ping-pong 14 B");
        assert_eq!(
            Test::Rr {
                req: 64,
                resp: 1024
            }
            .name(),
            "req-resp 64 B/1 KiB"
        );
        assert_eq!(Test::Crr { size: 14 }.name(), "connect+14 B+close");
        assert_eq!(Test::PingPong { size: 1 }.metrics().len(), 2);
        assert_eq!(Test::Stream { size: 1 }.metrics()[0].better, Better::Higher);
    }

    #[test]
    fn observed_merges() {
        let mut a = Observed::default();
        a.add(&SockCheck {
            domain: 27,
            sci: Some(sys::SciInfo {
                mode: 0,
                fallback_reason: 1,
                native_family: 2,
                state: 1,
            }),
            ..Default::default()
        });
        let mut b = Observed::default();
        b.add(&SockCheck {
            domain: 2,
            ..Default::default()
        });
        b.merge(&a);
        assert_eq!(b.sockets, 2);
        assert_eq!(b.domains[&27], 1);
        assert_eq!(b.domains[&2], 1);
        assert_eq!(b.sci_modes[&0], 1);
        let json = serde_json::to_string(&b).unwrap();
        assert_eq!(serde_json::from_str::<Observed>(&json).unwrap(), b);
    }

    /// Every test on TCP and AF_UNIX loopback, briefly.
    #[test]
    fn runs_on_loopback() {
        let dur = Duration::from_millis(30);
        let tests = [
            Test::PingPong { size: 14 },
            Test::PingPong { size: 65536 },
            Test::Stream { size: 4096 },
            Test::Rr {
                req: 64,
                resp: 1024,
            },
            Test::Crr { size: 14 },
            Test::Multi {
                streams: 3,
                size: 64,
            },
            Test::HotSpot {
                clients: 3,
                size: 64,
            },
        ];
        for net in [Net::Tcp, Net::Unix] {
            for t in &tests {
                let pin = sys::allowed_cpus().unwrap().first().copied();
                let s = run(net, None, t, dur, pin, None)
                    .unwrap_or_else(|e| panic!("{net:?} {t:?}: {e}"));
                assert_eq!(s.values.len(), t.metrics().len());
                assert!(s.values.iter().all(|v| v.is_finite() && *v > 0.0), "{s:?}");
                let want = if net == Net::Tcp {
                    libc::AF_INET
                } else {
                    libc::AF_UNIX
                };
                assert_eq!(
                    s.observed.domains.keys().copied().collect::<Vec<_>>(),
                    [want]
                );
                assert!(s.observed.sockets >= 2);
            }
        }
    }
}
