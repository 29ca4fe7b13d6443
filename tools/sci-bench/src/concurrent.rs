//! The tests of many connections at once: `multi` (N streams, a server thread each) and
//! AZ-SDP's hot-spot test (N clients against one server thread and its epoll loop), and
//! the hot-spot server and the clients' aggregate rate, which the remote mode shares.

use crate::conn::{
    accept_checked, check, connect, echo, join, listen, recv_check, transact, IO_TIMEOUT,
};
use crate::measure::{Net, Observed, Sample};
use crate::sys::{Poller, Sock};
use std::io;
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

/// `streams` connections doing `size`-byte ping-pong at once, each served by its own
/// server thread: aggregate transactions per second.
pub(crate) fn multi(
    net: Net,
    sci_af: Option<i32>,
    streams: usize,
    size: usize,
    dur: Duration,
) -> io::Result<Sample> {
    concurrent(net, sci_af, streams, size, dur, move |conns| {
        let handlers: Vec<_> = conns
            .into_iter()
            .map(|s| thread::spawn(move || echo(&s, size, size)))
            .collect();
        for h in handlers {
            join(h)?;
        }
        Ok(())
    })
}

/// AZ-SDP's hot-spot test: `clients` connections doing `size`-byte ping-pong at once
/// against one server thread, which serves them all from one epoll loop (as an event-driven
/// server does), so the server is the hot spot: aggregate transactions per second.
pub(crate) fn hotspot(
    net: Net,
    sci_af: Option<i32>,
    clients: usize,
    size: usize,
    dur: Duration,
) -> io::Result<Sample> {
    concurrent(net, sci_af, clients, size, dur, move |conns| {
        serve_hot(conns, size)
    })
}

/// `n` connections to a fresh listener doing `size`-byte ping-pong at once; a server
/// thread accepts them all and hands the accepted ends to `serve`.
fn concurrent(
    net: Net,
    sci_af: Option<i32>,
    n: usize,
    size: usize,
    dur: Duration,
    serve: impl FnOnce(Vec<Sock>) -> io::Result<()> + Send + 'static,
) -> io::Result<Sample> {
    let (l, ep) = listen(net, n as i32 + 8)?;
    let (tx, rx) = mpsc::channel();
    let srv = thread::spawn(move || -> io::Result<()> {
        let mut conns = Vec::new();
        for _ in 0..n {
            conns.push(accept_checked(&l, net, sci_af, &tx)?);
        }
        drop(l);
        serve(conns)
    });
    let mut socks = Vec::new();
    let mut checks = Vec::new();
    for _ in 0..n {
        let c = connect(net, &ep)?;
        c.set_timeouts(IO_TIMEOUT)?;
        checks.push(check(&c, net, sci_af)?);
        checks.push(recv_check(&rx)?);
        socks.push(c);
    }
    let mut observed = Observed::default();
    observed.add_checked(&checks)?;
    // The clients close their sockets when they are done; the server then ends.
    let tps = rate(socks, size, dur);
    join(srv)?;
    Ok(Sample {
        values: vec![tps?],
        observed,
    })
}

/// The hot-spot server: answers every `size`-byte request on any of `conns` with `size`
/// bytes, from one thread, until every client closed. A connection silent for
/// [`IO_TIMEOUT`] while others wait ends it with an error.
pub(crate) fn serve_hot(conns: Vec<Sock>, size: usize) -> io::Result<()> {
    let poller = Poller::new()?;
    for (i, c) in conns.iter().enumerate() {
        poller.add(c, i as u64)?;
    }
    let mut got = vec![0usize; conns.len()];
    let mut open = conns.len();
    let mut rbuf = vec![0u8; size];
    let wbuf = vec![0x5au8; size];
    let mut ready = Vec::new();
    while open > 0 {
        poller.wait(&mut ready, IO_TIMEOUT)?;
        if ready.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "hot-spot server: no client sent anything in time",
            ));
        }
        for &i in &ready {
            let (c, have) = (&conns[i as usize], &mut got[i as usize]);
            // Level-triggered: what is there now (at least one byte, or the end).
            let n = c.recv_some(&mut rbuf[*have..])?;
            if n == 0 {
                if *have != 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("hot-spot server: a client left after {have} of {size} bytes"),
                    ));
                }
                poller.remove(c)?;
                open -= 1;
                continue;
            }
            *have += n;
            if *have == size {
                *have = 0;
                c.send_all(&wbuf)?;
            }
        }
    }
    Ok(())
}

/// Ping-pong of `size` bytes on every client at once for `dur` (each warms up on its own
/// first, then all start together): transactions per second over all of them.
pub(crate) fn rate(clients: Vec<Sock>, size: usize, dur: Duration) -> io::Result<f64> {
    let barrier = Arc::new(Barrier::new(clients.len()));
    let workers: Vec<_> = clients
        .into_iter()
        .map(|c| {
            let barrier = barrier.clone();
            thread::spawn(move || -> io::Result<(u64, Duration)> {
                transact(&c, size, size, Duration::ZERO, dur / 10, false)?;
                barrier.wait();
                let (n, elapsed, _) = transact(&c, size, size, Duration::ZERO, dur, false)?;
                Ok((n, elapsed))
            })
        })
        .collect();
    let mut total = 0u64;
    let mut longest = Duration::ZERO;
    let mut first_err = None;
    for w in workers {
        match w.join() {
            Ok(Ok((n, elapsed))) => {
                total += n;
                longest = longest.max(elapsed);
            }
            Ok(Err(e)) => first_err = first_err.or(Some(e)),
            Err(_) => first_err = first_err.or(Some(io::Error::other("client panicked"))),
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(total as f64 / longest.as_secs_f64()),
    }
}
