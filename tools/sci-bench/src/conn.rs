//! The connections the measurements make: listen, connect and accept on a family, with
//! a check of what every socket really is, and the exchanges the tests time.

use crate::measure::{Net, Observed, SockCheck};
use crate::sys::{Endpoint, Sock};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

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
pub(crate) fn accept(l: &Sock, net: Net) -> io::Result<Sock> {
    let s = l.accept()?;
    if net.is_inet() {
        s.set_nodelay()?;
    }
    Ok(s)
}

/// Checks a server's socket and hands the result to the client thread (which counts
/// it); an error also ends the server.
pub(crate) fn send_check(
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
pub(crate) fn echo_pair(
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
