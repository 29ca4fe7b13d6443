//! A worker process: fuzz threads, each with its own seed, scratch arena and descriptors,
//! and a watchdog thread that reports a call stuck in the kernel.

use crate::addr::Peer;
use crate::mem::{Arena, BadPages};
use crate::ops::Fuzzer;
use crate::report::{Call, Report};
use crate::rng::{derive, Rng};
use crate::shared::{Ctx, MAX_THREADS, SLOTS};
use crate::sys::{self, now_ms};
use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct Opts {
    pub seed: u64,
    pub proc_index: u32,
    pub threads: u32,
    pub seconds: u64,
    pub hang_s: u64,
    pub family: i32,
    pub trace: bool,
    pub peers: Vec<Peer>,
}

/// Writes all of `text` to `fd`.
fn write_all(fd: i32, text: &str) {
    let mut b = text.as_bytes();
    while !b.is_empty() {
        // SAFETY: `b` is a live slice of its length.
        let n = unsafe { libc::write(fd, b.as_ptr() as *const libc::c_void, b.len()) };
        if n <= 0 {
            return;
        }
        b = &b[n as usize..];
    }
}

/// Runs worker `opts.proc_index` and exits the process: status 0 when every thread
/// finished, 3 when the watchdog found a hung call. The report goes to `out`.
pub fn run(opts: Opts, out: i32) -> ! {
    let mut prng = Rng::new(derive(opts.seed, opts.proc_index, u32::MAX));
    // The read-only page holds well-formed addresses of the first peers, so that a call
    // reading its address from a read-only page gets somewhere.
    let mut ro = Vec::new();
    for p in opts.peers.iter().take(4) {
        let mut a = p.address(prng.next_u64());
        a.resize(32, 0);
        ro.extend_from_slice(&a);
    }
    let bad = BadPages::new(&ro);
    let ctx = Ctx {
        family: opts.family,
        peers: opts.peers.clone(),
        proc_index: opts.proc_index,
        bad,
        deadline: Instant::now() + Duration::from_secs(opts.seconds),
        trace: opts.trace,
        shared: Mutex::new(Vec::new()),
        own_ports: Mutex::new(Vec::new()),
    };
    let ctx = &ctx;
    let threads = (opts.threads as usize).min(MAX_THREADS);
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        for (t, slot) in SLOTS.iter().enumerate().take(threads) {
            let seed = derive(opts.seed, opts.proc_index, t as u32);
            handles.push(
                std::thread::Builder::new()
                    .name(format!("fuzz{}.{t}", opts.proc_index))
                    .spawn_scoped(s, move || {
                        slot.tid.store(sys::gettid(), Ordering::Relaxed);
                        let mut rng = Rng::new(seed);
                        let arena = Arena::new(&mut rng);
                        let mut f = Fuzzer::new(ctx, t, rng, arena);
                        f.run();
                        let r = f.finish();
                        slot.done.store(true, Ordering::Release);
                        r
                    })
                    .expect("spawn a fuzz thread"),
            );
        }
        // The watchdog: a call in the kernel for longer than hang_s is a hang. The process
        // then reports it and exits at once (the stuck thread cannot be joined).
        let hang_ms = opts.hang_s * 1000;
        loop {
            std::thread::sleep(Duration::from_millis(250));
            if (0..threads).all(|t| SLOTS[t].done.load(Ordering::Acquire)) {
                break;
            }
            let now = now_ms();
            let mut hangs = Vec::new();
            for (t, slot) in SLOTS.iter().enumerate().take(threads) {
                let since = slot.since.load(Ordering::Relaxed);
                let tid = slot.tid.load(Ordering::Relaxed);
                let pid = std::process::id();
                // A thread that died in a call (an oops kills just it) is reported at once.
                let dead = since != 0
                    && !std::path::Path::new(&format!("/proc/{pid}/task/{tid}")).exists();
                if since == 0 || (!dead && now.saturating_sub(since) < hang_ms) {
                    continue;
                }
                let call = Call::from_u32(slot.call.load(Ordering::Relaxed));
                let arg = slot.arg.load(Ordering::Relaxed);
                let what = if call == Call::ForkWait {
                    format!("wait4 for its fork child {arg}")
                } else {
                    format!("{}(fd {arg})", call.name())
                };
                let pid = pid as i32;
                let line = if dead {
                    format!(
                        "worker {} thread {t} (tid {tid}) is gone, killed in {what} (an oops? see the kernel log)",
                        opts.proc_index
                    )
                } else {
                    format!(
                        "worker {} hung in {what} for {} s (thread {t}, tid {tid}, wchan {})",
                        opts.proc_index,
                        (now - since) / 1000,
                        sys::wchan(pid, tid).trim()
                    )
                };
                eprintln!("sci-fuzz: {line}");
                if !dead {
                    eprintln!("sci-fuzz: kernel stack of the hung thread (tid {tid}):");
                    for l in sys::kernel_stack(pid, tid).lines() {
                        eprintln!("sci-fuzz:   {l}");
                    }
                }
                if call == Call::ForkWait {
                    eprintln!("sci-fuzz: kernel stack of the fork child {arg}:");
                    for l in sys::kernel_stack(arg as i32, 0).lines() {
                        eprintln!("sci-fuzz:   {l}");
                    }
                }
                hangs.push(line);
            }
            if !hangs.is_empty() {
                let r = Report {
                    hangs,
                    ..Report::default()
                };
                write_all(out, &r.to_text());
                // SAFETY: _exit ends the process at once, without joining the threads
                // (one of them is stuck in the kernel) or running destructors.
                unsafe { libc::_exit(3) };
            }
        }
        let mut report = Report::default();
        for h in handles {
            match h.join() {
                Ok(r) => report.merge(&r),
                Err(_) => std::process::abort(),
            }
        }
        write_all(out, &report.to_text());
    });
    // SAFETY: every thread has been joined; _exit skips the parent's atexit handlers.
    unsafe { libc::_exit(0) }
}
