//! sci-fuzz: a seeded system call fuzzer of the AF_SCI socket family.
//!
//! ```text
//! sci-fuzz [--seconds N] [--seed S] [--procs P] [--threads T] [--family F] [--hang S] [--trace]
//! ```
//!
//! The parent makes live peers first: AF_SCI listeners on 127.0.0.1, ::1 and [::] (AF_SCI
//! clients reach them over SCI), plain TCP listeners on 127.0.0.1 and ::1 (AF_SCI clients
//! fall back to TCP) and one AF_SCI listener that the fuzzer's plain TCP clients connect
//! to (peer-tcp); it forks P worker processes and then serves the listeners with accepter
//! threads that echo, read and discard, stay silent, send bursts with urgent data, or
//! close and reset at random. Each worker runs T threads that make random sequences of
//! the family's calls (socket with odd types and protocols, bind, listen, connect to the
//! peers, to closed ports and to garbage addresses, accept4, send and receive calls of
//! every kind with every MSG_* flag, iovecs and control messages good and bad, sendfile,
//! splice, options at every level, ioctls, shutdown, names, poll and epoll, fork, dup,
//! close, fcntl), with pointers into guarded scratch arenas or bad on purpose (`mem.rs`)
//! and every blocking call bounded (`ops.rs` and `ops/`). A watchdog thread per worker
//! reports a call that stays in the kernel longer than `--hang` seconds, with its kernel
//! stack.
//!
//! One seed (printed first; taken from the clock unless given) decides every choice:
//! worker K's thread T draws from `derive(seed, K, T)` (`rng.rs`). What the threads of a
//! process interleave depends on timing, so a finding reproduces with the same seed and
//! the same --procs/--threads, most reliably with `--procs 1 --threads 1`, and `--trace`
//! logs every call (arguments and result) on stderr.
//!
//! At the end the parent prints the summed report (calls per syscall, errors per errno
//! name, notes such as the peers' connections by mode, anomalies, hangs) and a last line
//! "sci-fuzz: N calls in S s, M errors, C crashes, seed S". It exits 0 when no worker
//! crashed (died of a signal), hung or saw an anomaly (a kernel-internal errno such as
//! ENOIOCTLCMD reaching user space, a receive returning more than it was asked for).
//!
//! Why not trinity: its generators build AF_IB addresses and options for family 27
//! (AF_IB's number, which AF_SCI takes by default), so almost every call it makes on such
//! a socket fails with EINVAL before it reaches af_sci's logic; this fuzzer knows the
//! family's address format (sockaddr_in/sockaddr_in6) and has live peers to connect to.

mod addr;
mod mem;
mod ops;
mod peers;
mod report;
mod rng;
mod shared;
mod sys;
mod worker;

use report::Report;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const USAGE: &str = "usage: sci-fuzz [--seconds N] [--seed S] [--procs P] [--threads T] [--family F] [--hang S] [--trace]
  --seconds N   how long the workers fuzz (default 60)
  --seed S      the run's seed (default: from the clock; printed either way)
  --procs P     worker processes (default 2)
  --threads T   fuzz threads per worker (default 4, at most 64)
  --family F    the AF_SCI family number (default: /sys/module/af_sci/parameters/family)
  --hang S      a call in the kernel for S seconds is a hang (default 30)
  --trace       log every call and its result on stderr (slow; to reproduce a finding)
";

struct Args {
    seconds: u64,
    seed: Option<u64>,
    procs: u32,
    threads: u32,
    family: Option<i32>,
    hang: u64,
    trace: bool,
}

fn parse_num(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

fn parse_args(argv: &[String]) -> Result<Option<Args>, String> {
    let mut a = Args {
        seconds: 60,
        seed: None,
        procs: 2,
        threads: 4,
        family: None,
        hang: 30,
        trace: false,
    };
    let mut it = argv.iter();
    while let Some(arg) = it.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (arg.as_str(), None),
        };
        let mut value = |what: &str| -> Result<u64, String> {
            let v = inline
                .clone()
                .or_else(|| it.next().cloned())
                .ok_or(format!("{what} wants a value"))?;
            parse_num(&v).ok_or(format!("{what}: not a number: '{v}'"))
        };
        match name {
            "--seconds" => a.seconds = value("--seconds")?,
            "--seed" => a.seed = Some(value("--seed")?),
            "--procs" => a.procs = value("--procs")? as u32,
            "--threads" => a.threads = value("--threads")? as u32,
            "--family" => a.family = Some(value("--family")? as i32),
            "--hang" => a.hang = value("--hang")?,
            "--trace" => a.trace = true,
            "-h" | "--help" => return Ok(None),
            _ => return Err(format!("unknown argument '{arg}'")),
        }
    }
    if a.procs == 0 || a.threads == 0 || a.threads as usize > shared::MAX_THREADS {
        return Err("--procs and --threads want 1 or more (threads at most 64)".into());
    }
    if a.hang == 0 {
        return Err("--hang wants 1 or more seconds".into());
    }
    Ok(Some(a))
}

fn family_from_sysfs() -> Result<i32, String> {
    let path = "/sys/module/af_sci/parameters/family";
    let s = std::fs::read_to_string(path)
        .map_err(|e| format!("{path}: {e} (is af_sci loaded? or give --family)"))?;
    s.trim()
        .parse()
        .map_err(|_| format!("{path}: not a number: {s:?}"))
}

fn ignore(sig: i32) {
    // SAFETY: setting a signal's disposition to SIG_IGN installs no handler code.
    unsafe { libc::signal(sig, libc::SIG_IGN) };
}

struct Child {
    index: u32,
    pid: i32,
    pipe: i32,
    text: Vec<u8>,
    status: Option<i32>,
    eof: bool,
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = match parse_args(&argv) {
        Ok(Some(a)) => a,
        Ok(None) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("sci-fuzz: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let seed = args.seed.unwrap_or_else(|| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        rng::mix(t.as_nanos() as u64 ^ std::process::id() as u64) >> 16
    });
    println!("sci-fuzz: seed {seed}");
    let family = match args.family.map(Ok).unwrap_or_else(family_from_sysfs) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("sci-fuzz: {e}");
            return ExitCode::from(2);
        }
    };
    let repro = format!(
        "sci-fuzz --seed {seed} --procs {} --threads {} --seconds {} --family {family}",
        args.procs, args.threads, args.seconds
    );
    println!(
        "sci-fuzz: family {family}, {} worker processes x {} threads, {} s, hang after {} s",
        args.procs, args.threads, args.seconds, args.hang
    );
    // Signals the fuzzed calls can provoke: EPIPE instead of SIGPIPE, and no SIGIO death
    // for an O_ASYNC socket (SIGURG is ignored by default).
    ignore(libc::SIGPIPE);
    ignore(libc::SIGIO);
    // Room for descriptors (each thread keeps at most 64, plus what the peers hold).
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a live local rlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            lim.rlim_cur = lim.rlim_max.min(65536);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
    let _ = sys::now_ms();

    let listeners = match peers::listen_all(family) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("sci-fuzz: cannot set up the peers: {e}");
            return ExitCode::from(2);
        }
    };
    let peer_list: Vec<addr::Peer> = listeners.iter().map(|l| l.peer).collect();
    for p in &peer_list {
        println!(
            "sci-fuzz: peer {} ({:?}) listening on {}port {}",
            p.name,
            p.kind,
            if p.wildcard {
                "[::] "
            } else if p.v6 {
                "[::1] "
            } else {
                "127.0.0.1 "
            },
            p.port
        );
    }
    use std::io::Write;
    let _ = std::io::stdout().flush();

    // The workers, forked while this process has no other thread.
    let start = Instant::now();
    let mut children = Vec::new();
    for k in 0..args.procs {
        let mut p = [0i32; 2];
        // SAFETY: `p` is a live local array of two ints.
        if unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            eprintln!("sci-fuzz: pipe2: {}", std::io::Error::last_os_error());
            return ExitCode::from(2);
        }
        // SAFETY: this process has a single thread here, so the child may run Rust code.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            sys::close(p[0]);
            for l in &listeners {
                sys::close(l.fd);
            }
            for c in &children {
                let c: &Child = c;
                sys::close(c.pipe);
            }
            worker::run(
                worker::Opts {
                    seed,
                    proc_index: k,
                    threads: args.threads,
                    seconds: args.seconds,
                    hang_s: args.hang,
                    family,
                    trace: args.trace,
                    peers: peer_list.clone(),
                },
                p[1],
            );
        }
        if pid < 0 {
            eprintln!("sci-fuzz: fork: {}", std::io::Error::last_os_error());
            return ExitCode::from(2);
        }
        sys::close(p[1]);
        sys::set_nonblocking(p[0]);
        children.push(Child {
            index: k,
            pid,
            pipe: p[0],
            text: Vec::new(),
            status: None,
            eof: false,
        });
    }

    let stop = Arc::new(AtomicBool::new(false));
    let peer_threads = peers::start(&listeners, 2, seed, stop.clone());

    // Wait for the workers, reading their reports as they come; a worker that is not
    // gone long after the end is hung in the kernel.
    let limit = Duration::from_secs(args.seconds + args.hang + 30);
    let mut failed = false;
    let mut crashes = 0u64;
    let mut report = Report::default();
    loop {
        for c in children.iter_mut().filter(|c| !c.eof) {
            let mut buf = [0u8; 4096];
            loop {
                // SAFETY: `buf` is a live local buffer of its length.
                let n =
                    unsafe { libc::read(c.pipe, buf.as_mut_ptr() as *mut libc::c_void, buf.len()) };
                if n > 0 {
                    c.text.extend_from_slice(&buf[..n as usize]);
                    continue;
                }
                if n == 0 {
                    c.eof = true;
                }
                break;
            }
        }
        for c in children.iter_mut().filter(|c| c.status.is_none()) {
            let mut st = 0;
            // SAFETY: `st` is a live local; `c.pid` is our child.
            if unsafe { libc::waitpid(c.pid, &mut st, libc::WNOHANG) } == c.pid {
                c.status = Some(st);
            }
        }
        if children.iter().all(|c| c.status.is_some() && c.eof) {
            break;
        }
        if start.elapsed() > limit {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let elapsed = start.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);

    for c in &children {
        let r = Report::parse(&String::from_utf8_lossy(&c.text));
        report.merge(&r);
        match c.status {
            None => {
                failed = true;
                println!(
                    "sci-fuzz: worker {} (pid {}) did not exit {} s after the end: hung; reproduce with: {repro}",
                    c.index,
                    c.pid,
                    args.hang + 30
                );
                report
                    .hangs
                    .push(format!("worker {} did not exit", c.index));
                if let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", c.pid)) {
                    for t in tasks.flatten() {
                        let tid: i32 = t.file_name().to_string_lossy().parse().unwrap_or(0);
                        println!("sci-fuzz: worker {} task {tid} kernel stack:", c.index);
                        for l in sys::kernel_stack(c.pid, tid).lines() {
                            println!("sci-fuzz:   {l}");
                        }
                    }
                }
            }
            Some(st) if libc::WIFSIGNALED(st) => {
                failed = true;
                crashes += 1;
                println!(
                    "sci-fuzz: worker {} died of signal {}; reproduce with: {repro}",
                    c.index,
                    libc::WTERMSIG(st)
                );
            }
            Some(st) if libc::WEXITSTATUS(st) == 3 => {
                failed = true;
                println!("sci-fuzz: worker {} hung; reproduce with: {repro}", c.index);
            }
            Some(st) if libc::WEXITSTATUS(st) != 0 => {
                failed = true;
                println!(
                    "sci-fuzz: worker {} exited with status {}",
                    c.index,
                    libc::WEXITSTATUS(st)
                );
            }
            Some(_) => {}
        }
    }

    // The peers: stopped, and joined unless one of them is stuck in the kernel.
    let peer_deadline = Instant::now() + Duration::from_secs(args.hang);
    for (t, p) in peer_threads.into_iter().enumerate() {
        while !p.handle.is_finished() && Instant::now() < peer_deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if p.handle.is_finished() {
            if let Ok(r) = p.handle.join() {
                report.merge(&r);
            }
        } else {
            failed = true;
            let since = p.busy_since.load(Ordering::Relaxed);
            let line = format!(
                "peer thread {t} did not stop (busy since {} ms)",
                sys::now_ms().saturating_sub(since)
            );
            println!("sci-fuzz: {line}");
            report.hangs.push(line);
        }
    }
    if !report.anomalies.is_empty() {
        failed = true;
    }
    if !report.hangs.is_empty() {
        failed = true;
    }

    report.print();
    println!(
        "sci-fuzz: {} hangs, {} anomalies",
        report.hangs.len(),
        report.anomalies.len()
    );
    println!(
        "sci-fuzz: {} calls in {:.0} s, {} errors, {crashes} crashes, seed {seed}",
        report.total_calls(),
        elapsed,
        report.total_errors()
    );
    let _ = std::io::stdout().flush();
    if failed {
        // A stuck worker or peer thread would keep a normal exit waiting.
        // SAFETY: _exit ends the process; stdout was flushed above.
        unsafe { libc::_exit(1) };
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Result<Option<Args>, String> {
        parse_args(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn arguments() {
        let a = args("--seconds 5 --seed=0x10 --procs 3 --threads 2 --family 40 --trace")
            .unwrap()
            .unwrap();
        assert_eq!(
            (a.seconds, a.seed, a.procs, a.threads, a.family, a.trace),
            (5, Some(16), 3, 2, Some(40), true)
        );
        assert!(args("--threads 0").is_err());
        assert!(args("--bogus").is_err());
        assert!(args("--seed").is_err());
        assert!(args("--help").unwrap().is_none());
    }
}
