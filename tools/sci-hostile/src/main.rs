//! `sci-hostile`: lies as one node of a live af_sci region toward another, for tests.
//!
//! ```text
//! sci-hostile --shm PATH --seed S --kind KIND --liar NODE [--victim NODE] [--ms DURATION]
//!             [--ports P,...] [--dgram-ports P,...] [--spare CHANNEL,...]
//! ```
//!
//! Maps the region file PATH (the ivshmem memory backend on the host: a file in
//! /dev/shm) shared, and for DURATION ms (default 3000) makes one round of lies of KIND
//! every millisecond as node LIAR toward node VICTIM (default: the other of nodes 0 and
//! 1). KIND is one of random, cursors, lengths, generations, frames, nodeword,
//! doorbells, addresses (see the library's documentation). `--ports` names the victim's listening
//! ports for forged connect requests, `--dgram-ports` its datagram sockets' ports (under
//! `frames`, half the forged requests ask for implicit connections there); `--spare` the victim's channels that belong to its
//! connections with other nodes, which the liar leaves alone. Prints one line:
//! `sci-hostile: kind=... seed=... liar=... victim=... ms=... steps=... writes=...
//! [what=count ...]`. Exits 2 on a usage error or a region that is not formatted.

use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::process::ExitCode;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use sci_hostile::{Kind, Liar};

/// The options.
struct Args {
    /// The region file.
    shm: String,
    /// The seed.
    seed: u64,
    /// The kind of lie.
    kind: Kind,
    /// The lying node.
    liar: u16,
    /// The node lied to.
    victim: Option<u16>,
    /// How long (ms).
    ms: u64,
    /// The victim's listening ports.
    ports: Vec<u16>,
    /// The victim's datagram sockets' ports.
    dgram_ports: Vec<u16>,
    /// The victim's channels not lied to.
    spare: Vec<u32>,
}

/// A number in decimal or 0x-hex.
fn number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// A comma-separated list of numbers (empty items skipped); `what` names one in an error.
fn list<T: std::str::FromStr>(s: &str, what: &str) -> Result<Vec<T>, String> {
    s.split(',')
        .filter(|v| !v.is_empty())
        .map(|v| v.parse().map_err(|_| format!("bad {what} {v}")))
        .collect()
}

/// Parses the command line.
fn parse(mut it: impl Iterator<Item = String>) -> Result<Args, String> {
    let (mut shm, mut seed, mut kind, mut liar, mut victim, mut ms) =
        (None, None, None, None, None, 3000);
    let (mut ports, mut dgram_ports, mut spare) = (Vec::new(), Vec::new(), Vec::new());
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or(format!("{arg} wants a value"));
        match arg.as_str() {
            "--shm" => shm = Some(value()?),
            "--seed" => seed = Some(number(&value()?).ok_or("--seed wants a number")?),
            "--kind" => {
                let v = value()?;
                kind = Some(Kind::parse(&v).ok_or(format!("unknown kind {v}"))?);
            }
            "--liar" => liar = Some(value()?.parse().map_err(|_| "--liar wants a node id")?),
            "--victim" => victim = Some(value()?.parse().map_err(|_| "--victim wants a node id")?),
            "--ms" => ms = value()?.parse().map_err(|_| "--ms wants milliseconds")?,
            "--ports" => ports.extend(list::<u16>(&value()?, "port")?),
            "--dgram-ports" => dgram_ports.extend(list::<u16>(&value()?, "port")?),
            "--spare" => spare.extend(list::<u32>(&value()?, "channel")?),
            "-h" | "--help" => return Err(String::new()),
            _ => return Err(format!("unknown argument {arg}")),
        }
    }
    Ok(Args {
        shm: shm.ok_or("--shm PATH is needed")?,
        seed: seed.ok_or("--seed S is needed")?,
        kind: kind.ok_or("--kind KIND is needed")?,
        liar: liar.ok_or("--liar NODE is needed")?,
        victim,
        ms,
        ports,
        dgram_ports,
        spare,
    })
}

/// The usage text.
const USAGE: &str = "usage: sci-hostile --shm PATH --seed S --kind KIND --liar NODE \
[--victim NODE] [--ms DURATION] [--ports P,...] [--dgram-ports P,...] [--spare CHANNEL,...]\n  KIND: random cursors \
lengths generations frames nodeword doorbells addresses";

/// A shared mapping of a region file, unmapped when dropped.
struct Mapping {
    /// Its address.
    addr: *mut libc::c_void,
    /// Its length in bytes.
    len: usize,
}

impl Mapping {
    /// Maps the whole file at `path`, read-write and shared.
    fn new(path: &str) -> Result<Self, String> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| format!("{path}: {e}"))?;
        let len = file.metadata().map_err(|e| format!("{path}: {e}"))?.len();
        let len = usize::try_from(len).map_err(|_| format!("{path}: too large"))?;
        if len < 4096 || len % 8 != 0 {
            return Err(format!("{path}: {len} bytes is no region"));
        }
        // SAFETY: a fresh mapping of a file this process opened; the kernel picks the
        // address, and the result is checked before use.
        let addr = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(format!("{path}: mmap: {}", std::io::Error::last_os_error()));
        }
        Ok(Self { addr, len })
    }

    /// The mapping as words. Other processes (the guests) change them at any time,
    /// which atomics allow.
    fn words(&self) -> &[AtomicU64] {
        // SAFETY: the mapping is page-aligned, `len` bytes long (a multiple of 8) and
        // lives as long as `self`; AtomicU64 has the size and alignment of u64, and
        // every access through it is atomic, so concurrent writers are fine.
        unsafe { core::slice::from_raw_parts(self.addr.cast::<AtomicU64>(), self.len / 8) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping `new` made; no reference to it outlives
        // `self` (`words` borrows it).
        unsafe {
            libc::munmap(self.addr, self.len);
        }
    }
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("sci-hostile: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let map = match Mapping::new(&args.shm) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("sci-hostile: {e}");
            return ExitCode::from(2);
        }
    };
    let victim = args.victim.unwrap_or(if args.liar == 0 { 1 } else { 0 });
    let mut liar = match Liar::new(
        map.words(),
        args.kind,
        (args.liar, victim),
        args.seed,
        args.ms,
        &args.ports,
    ) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("sci-hostile: {}: {e}", args.shm);
            return ExitCode::from(2);
        }
    };
    liar.spare(&args.spare);
    liar.datagram_ports(&args.dgram_ports);
    let start = Instant::now();
    let mut next = start;
    loop {
        let now = start.elapsed();
        let now_ms = u64::try_from(now.as_millis()).unwrap_or(u64::MAX);
        if now_ms >= args.ms {
            break;
        }
        liar.step(now_ms);
        next += Duration::from_millis(1);
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    liar.finish();
    println!("{}", liar.summary(args.ms));
    ExitCode::SUCCESS
}
