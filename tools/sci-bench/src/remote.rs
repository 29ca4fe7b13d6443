//! The remote mode: `sci-bench serve --listen ADDR:PORT` on one machine, `sci-bench
//! --remote ADDR:PORT` on another, so that the connections cross a real link (two guests,
//! their NIC or their shared memory) instead of 127.0.0.1.
//!
//! Every connection starts with a 16-byte hello from the client, which says what the
//! server is to do with it, answered by 24 bytes from the server, which say what its
//! accepted socket is (`SO_DOMAIN`, `SCI_INFO`): both ends of every connection are
//! checked, as in the local mode. The hello and its answer are outside the timed part,
//! except in `connect+N+close`, where the client sends the hello and the request in one
//! write and the server answers with its check and the response in one write, so that a
//! connection still costs one round trip besides connect and close.

use crate::args::Family;
use crate::conn::{self, IO_TIMEOUT};
use crate::measure::{self, Net, Observed, Sample, SockCheck};
use crate::stats;
use crate::sys::{self, Endpoint, SciInfo, Sock};
use std::io;
use std::net::SocketAddrV4;
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

const MAGIC: [u8; 4] = *b"SCIB";
const HELLO_LEN: usize = 16;
const CHECK_LEN: usize = 24;
/// The largest message a client may ask the server to echo.
const MAX_MSG: u32 = 16 << 20;

/// What the server does with a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// Answers every `req`-byte message with `resp` bytes until the client closes.
    Echo = 1,
    /// Reads until the end of the stream, then sends the byte count (u64, little endian).
    Sink = 2,
    /// Reads one `req`-byte message, answers with its check and `resp` bytes in one write,
    /// then waits for the client to close.
    Once = 3,
    /// One of `resp` connections of a hot-spot test: once all of them are there, one
    /// thread answers every `req`-byte message on any of them with `req` bytes.
    Hot = 4,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Hello {
    role: Role,
    req: u32,
    resp: u32,
}

impl Hello {
    fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[..4].copy_from_slice(&MAGIC);
        b[4..8].copy_from_slice(&(self.role as u32).to_le_bytes());
        b[8..12].copy_from_slice(&self.req.to_le_bytes());
        b[12..16].copy_from_slice(&self.resp.to_le_bytes());
        b
    }

    fn decode(b: &[u8; HELLO_LEN]) -> io::Result<Hello> {
        let u = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let bad = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
        if b[..4] != MAGIC {
            return Err(bad("not a sci-bench client (bad hello)".into()));
        }
        let role = match u(4) {
            1 => Role::Echo,
            2 => Role::Sink,
            3 => Role::Once,
            4 => Role::Hot,
            r => return Err(bad(format!("unknown role {r} in the hello"))),
        };
        let (req, resp) = (u(8), u(12));
        if req == 0 && role != Role::Sink || req > MAX_MSG || resp > MAX_MSG {
            return Err(bad(format!("message sizes {req}/{resp} out of range")));
        }
        Ok(Hello { role, req, resp })
    }
}

/// The server's check of its socket as sent to the client.
fn encode_check(c: &SockCheck) -> [u8; CHECK_LEN] {
    let info = c.sci.unwrap_or_default();
    let words = [
        c.domain as u32,
        c.sci.is_some() as u32,
        info.mode,
        info.fallback_reason,
        info.native_family,
        info.state,
    ];
    let mut b = [0u8; CHECK_LEN];
    for (i, w) in words.iter().enumerate() {
        b[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
    }
    b
}

fn decode_check(b: &[u8]) -> SockCheck {
    let u = |i: usize| u32::from_le_bytes([b[i * 4], b[i * 4 + 1], b[i * 4 + 2], b[i * 4 + 3]]);
    SockCheck {
        domain: u(0) as i32,
        sci: (u(1) != 0).then(|| SciInfo {
            mode: u(2),
            fallback_reason: u(3),
            native_family: u(4),
            state: u(5),
        }),
        inode: 0,
    }
}

// --- the server ---------------------------------------------------------------------------

/// `sci-bench serve`: listens on `listen` with an AF_INET socket (`Family::Tcp`; under
/// sci-run an AF_SCI one) or an AF_SCI socket (`Family::Sci`) and serves every connection
/// in its own thread, until killed.
pub fn serve(listen: SocketAddrV4, family: Family) -> io::Result<()> {
    let sci_af = sys::sci_family();
    let net = match family {
        Family::Sci => Net::Sci(
            sci_af
                .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "af_sci is not loaded"))?,
        ),
        _ => Net::Tcp,
    };
    let l = net.socket()?;
    l.set_reuseaddr()?;
    l.bind(&Endpoint::V4(listen))?;
    l.listen(128)?;
    let domain = l.domain()?;
    eprintln!(
        "sci-bench: serving on {listen} (listener of family {domain}{})",
        if Some(domain) == sci_af {
            ", AF_SCI"
        } else {
            ""
        }
    );
    loop {
        let s = match l.accept() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("sci-bench serve: accept: {e}");
                thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        thread::spawn(move || {
            if let Err(e) = handle(&s, net, sci_af) {
                eprintln!("sci-bench serve: connection: {e}");
            }
        });
    }
}

/// Hot-spot connections waiting for the rest of their group (`Role::Hot`), and when the
/// first came. A group still incomplete after [`IO_TIMEOUT`] (its client failed) is
/// dropped when the next connection comes.
static HOT: Mutex<Option<(Instant, Vec<Sock>)>> = Mutex::new(None);

fn handle(s: &Sock, net: Net, sci_af: Option<i32>) -> io::Result<()> {
    s.set_nodelay()?;
    s.set_timeouts(IO_TIMEOUT)?;
    let mut h = [0u8; HELLO_LEN];
    if !s.recv_exact(&mut h)? {
        return Ok(());
    }
    let hello = Hello::decode(&h)?;
    let check = encode_check(&conn::check(s, net, sci_af)?);
    let (req, resp) = (hello.req as usize, hello.resp as usize);
    match hello.role {
        Role::Echo => {
            s.send_all(&check)?;
            conn::echo(s, req, resp)
        }
        Role::Sink => {
            s.send_all(&check)?;
            let mut buf = vec![0u8; 1 << 20];
            let mut total = 0u64;
            loop {
                let n = s.recv_some(&mut buf)?;
                if n == 0 {
                    break;
                }
                total += n as u64;
            }
            s.send_all(&total.to_le_bytes())
        }
        Role::Once => {
            let mut buf = vec![0u8; req];
            if !s.recv_exact(&mut buf)? {
                return Ok(());
            }
            let mut out = check.to_vec();
            out.resize(CHECK_LEN + resp, 0x5a);
            s.send_all(&out)?;
            // Wait for the client to close first (its side takes the TIME_WAIT).
            let mut rest = [0u8; 64];
            while s.recv_some(&mut rest)? > 0 {}
            Ok(())
        }
        Role::Hot => {
            s.send_all(&check)?;
            let s = s.try_clone()?;
            let group = {
                let mut g = HOT.lock().unwrap_or_else(|e| e.into_inner());
                if g.as_ref().is_some_and(|(t0, _)| t0.elapsed() > IO_TIMEOUT) {
                    *g = None;
                }
                let (_, socks) = g.get_or_insert_with(|| (Instant::now(), Vec::new()));
                socks.push(s);
                if socks.len() < resp {
                    return Ok(());
                }
                g.take().map(|(_, socks)| socks).unwrap_or_default()
            };
            crate::concurrent::serve_hot(group, req)
        }
    }
}

// --- the client ---------------------------------------------------------------------------

/// Connects to the server, sends the hello and reads the server's check; returns the
/// socket and the checks of both ends.
fn open(
    net: Net,
    sci_af: Option<i32>,
    addr: SocketAddrV4,
    hello: Hello,
) -> io::Result<(Sock, [SockCheck; 2])> {
    let c = conn::connect(net, &Endpoint::V4(addr))?;
    c.set_timeouts(IO_TIMEOUT)?;
    c.send_all(&hello.encode())?;
    let mut r = [0u8; CHECK_LEN];
    c.recv_all(&mut r)?;
    let mine = conn::check(&c, net, sci_af)?;
    Ok((c, [mine, decode_check(&r)]))
}

fn observed(checks: &[SockCheck]) -> Observed {
    let mut o = Observed::default();
    for c in checks {
        o.add(c);
    }
    o
}

fn size32(n: usize) -> io::Result<u32> {
    u32::try_from(n)
        .ok()
        .filter(|&n| n <= MAX_MSG)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "message too large"))
}

fn echo_conn(
    net: Net,
    sci_af: Option<i32>,
    addr: SocketAddrV4,
    req: usize,
    resp: usize,
) -> io::Result<(Sock, [SockCheck; 2])> {
    open(net, sci_af, addr, echo_hello(req, resp)?)
}

/// The hello of a connection the server answers `req` bytes with `resp` bytes on.
fn echo_hello(req: usize, resp: usize) -> io::Result<Hello> {
    Ok(Hello {
        role: Role::Echo,
        req: size32(req)?,
        resp: size32(resp)?,
    })
}

fn pingpong(
    net: Net,
    sci_af: Option<i32>,
    addr: SocketAddrV4,
    size: usize,
    dur: Duration,
) -> io::Result<Sample> {
    let (c, checks) = echo_conn(net, sci_af, addr, size, size)?;
    let (_, _, mut lat) = conn::transact(&c, size, size, dur / 10, dur, true)?;
    let (med, p99) =
        stats::latency_us(&mut lat).ok_or_else(|| io::Error::other("no round trip measured"))?;
    Ok(Sample {
        values: vec![med, p99],
        observed: observed(&checks),
    })
}

fn rr(
    net: Net,
    sci_af: Option<i32>,
    addr: SocketAddrV4,
    req: usize,
    resp: usize,
    dur: Duration,
) -> io::Result<Sample> {
    let (c, checks) = echo_conn(net, sci_af, addr, req, resp)?;
    let (n, elapsed, _) = conn::transact(&c, req, resp, dur / 10, dur, false)?;
    Ok(Sample {
        values: vec![n as f64 / elapsed.as_secs_f64()],
        observed: observed(&checks),
    })
}

fn stream(
    net: Net,
    sci_af: Option<i32>,
    addr: SocketAddrV4,
    size: usize,
    dur: Duration,
) -> io::Result<Sample> {
    let hello = Hello {
        role: Role::Sink,
        req: 0,
        resp: 0,
    };
    let (c, checks) = open(net, sci_af, addr, hello)?;
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
    if got != sent {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("sent {sent} bytes, the server received {got}"),
        ));
    }
    Ok(Sample {
        values: vec![got as f64 / elapsed.as_secs_f64() / 1e6],
        observed: observed(&checks),
    })
}

fn crr(
    net: Net,
    sci_af: Option<i32>,
    addr: SocketAddrV4,
    size: usize,
    dur: Duration,
) -> io::Result<Sample> {
    let hello = Hello {
        role: Role::Once,
        req: size32(size)?,
        resp: size32(size)?,
    };
    let mut req = hello.encode().to_vec();
    req.resize(HELLO_LEN + size, 0xa5);
    let mut resp = vec![0u8; CHECK_LEN + size];
    let mut obs = Observed::default();
    let mut active = Duration::ZERO;
    let mut n = 0u64;
    let started = Instant::now();
    // As in the local mode: checking is not counted; stop after `dur` of counted time, or
    // 4 x `dur` of wall time when checking is slow.
    while active < dur && started.elapsed() < dur * 4 {
        let t0 = Instant::now();
        let c = conn::connect(net, &Endpoint::V4(addr))?;
        c.set_timeouts(IO_TIMEOUT)?;
        c.send_all(&req)?;
        c.recv_all(&mut resp)?;
        let t1 = Instant::now();
        let checks = [conn::check(&c, net, sci_af)?, decode_check(&resp)];
        obs.merge(&observed(&checks));
        let t2 = Instant::now();
        drop(c);
        active += (t1 - t0) + t2.elapsed();
        n += 1;
    }
    Ok(Sample {
        values: vec![n as f64 / active.as_secs_f64()],
        observed: obs,
    })
}

/// `streams` connections, each served by its own server thread, doing ping-pong at once.
fn multi(
    net: Net,
    sci_af: Option<i32>,
    addr: SocketAddrV4,
    streams: usize,
    size: usize,
    dur: Duration,
) -> io::Result<Sample> {
    concurrent(net, sci_af, addr, echo_hello(size, size)?, streams, dur)
}

/// The hot-spot test against the server: `clients` connections of one group, served
/// there by one thread.
fn hotspot(
    net: Net,
    sci_af: Option<i32>,
    addr: SocketAddrV4,
    clients: usize,
    size: usize,
    dur: Duration,
) -> io::Result<Sample> {
    let hello = Hello {
        role: Role::Hot,
        req: size32(size)?,
        resp: size32(clients)?,
    };
    concurrent(net, sci_af, addr, hello, clients, dur)
}

/// `n` connections opened with `hello`, then `hello.req`-byte ping-pong on all at once.
fn concurrent(
    net: Net,
    sci_af: Option<i32>,
    addr: SocketAddrV4,
    hello: Hello,
    n: usize,
    dur: Duration,
) -> io::Result<Sample> {
    let mut socks = Vec::new();
    let mut checks = Vec::new();
    for _ in 0..n {
        let (c, k) = open(net, sci_af, addr, hello)?;
        checks.extend(k);
        socks.push(c);
    }
    Ok(Sample {
        values: vec![crate::concurrent::rate(socks, hello.req as usize, dur)?],
        observed: observed(&checks),
    })
}

/// Runs `test` once against the server at `addr` (see [`crate::bench::run`]).
pub fn run(
    net: Net,
    sci_af: Option<i32>,
    addr: SocketAddrV4,
    test: &measure::Test,
    dur: Duration,
) -> io::Result<Sample> {
    use measure::Test;
    match *test {
        Test::PingPong { size } => pingpong(net, sci_af, addr, size, dur),
        Test::Stream { size } => stream(net, sci_af, addr, size, dur),
        Test::Rr { req, resp } => rr(net, sci_af, addr, req, resp, dur),
        Test::Crr { size } => crr(net, sci_af, addr, size, dur),
        Test::Multi { streams, size } => multi(net, sci_af, addr, streams, size, dur),
        Test::HotSpot { clients, size } => hotspot(net, sci_af, addr, clients, size, dur),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn hello_and_check_encoding() {
        let h = Hello {
            role: Role::Once,
            req: 14,
            resp: 1024,
        };
        assert_eq!(Hello::decode(&h.encode()).unwrap(), h);
        let mut bad = h.encode();
        bad[0] = b'X';
        assert!(Hello::decode(&bad).is_err());
        let mut bad = h.encode();
        bad[4] = 9;
        assert!(Hello::decode(&bad).is_err());
        let c = SockCheck {
            domain: 27,
            sci: Some(SciInfo {
                mode: 1,
                fallback_reason: 0,
                native_family: 2,
                state: 1,
            }),
            inode: 0,
        };
        assert_eq!(decode_check(&encode_check(&c)), c);
        let t = SockCheck {
            domain: libc::AF_INET,
            ..Default::default()
        };
        assert_eq!(decode_check(&encode_check(&t)), t);
    }

    /// Every test against a `serve` thread on 127.0.0.1, briefly.
    #[test]
    fn client_and_server_over_tcp() {
        // A free port: bind to 0, read it, close, and serve there.
        let port = {
            let l = Sock::new(libc::AF_INET, 0).unwrap();
            l.bind(&Endpoint::Inet(0)).unwrap();
            l.local_port().unwrap()
        };
        let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port);
        thread::spawn(move || serve(addr, Family::Tcp));
        let end = Instant::now() + Duration::from_secs(10);
        while conn::connect(Net::Tcp, &Endpoint::V4(addr)).is_err() {
            assert!(Instant::now() < end, "the server did not start");
            thread::sleep(Duration::from_millis(10));
        }
        let dur = Duration::from_millis(30);
        let tests = [
            measure::Test::PingPong { size: 14 },
            measure::Test::PingPong { size: 65536 },
            measure::Test::Stream { size: 4096 },
            measure::Test::Rr {
                req: 64,
                resp: 1024,
            },
            measure::Test::Crr { size: 14 },
            measure::Test::Multi {
                streams: 3,
                size: 64,
            },
            measure::Test::HotSpot {
                clients: 3,
                size: 64,
            },
        ];
        for t in &tests {
            let s = run(Net::Tcp, None, addr, t, dur).unwrap_or_else(|e| panic!("{t:?}: {e}"));
            assert_eq!(s.values.len(), t.metrics().len());
            assert!(s.values.iter().all(|v| v.is_finite() && *v > 0.0), "{s:?}");
            assert_eq!(
                s.observed.domains.keys().copied().collect::<Vec<_>>(),
                [libc::AF_INET]
            );
            assert!(s.observed.sockets >= 2 && s.observed.sockets % 2 == 0);
        }
    }
}
