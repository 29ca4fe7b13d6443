//! The measurements. Each one starts a server thread on a fresh listener (127.0.0.1 and a
//! free port, or an abstract AF_UNIX name), connects to it from the calling thread, checks
//! what every socket really is, and then runs for the given time. In the remote mode
//! (`crate::remote`) the server is `sci-bench serve` on another machine.

use crate::concurrent;
use crate::conn::{
    accept, accept_checked, check, connect, echo_pair, join, listen, recv_check, send_check,
    transact, IO_TIMEOUT,
};
use crate::measure::{Net, Observed, Sample, Test};
use crate::remote;
use crate::stats;
use crate::sys;
use std::io;
use std::net::SocketAddrV4;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

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
