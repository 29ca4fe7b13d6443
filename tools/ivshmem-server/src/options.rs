//! Command-line options.
//!
//! Long options are the interface of this tool; the short letters of QEMU's
//! contrib/ivshmem-server (`-S -m -M -l -n -p -v -F`) are accepted too so that
//! scripts written for that server keep working.  Every bad value is rejected
//! with a message naming the option, before anything is created.

use std::ffi::OsString;
use std::path::PathBuf;

/// The protocol carries peer ids in 16 bits (the Doorbell register's high half).
pub const MAX_PEERS: u32 = 1 << 16;
/// QEMU's contrib server has the same limit; the MSI-X table could hold more,
/// but nothing needs more and every vector costs an eventfd per peer.
pub const MAX_VECTORS: u16 = 64;
/// A shared region smaller than a page cannot be mapped on its own.
const MIN_SIZE: u64 = 4096;
/// `sun_path` is 108 bytes, the terminating NUL included.
const MAX_SOCKET_PATH: usize = 107;

pub const USAGE: &str = "\
usage: ivshmem-server [OPTIONS]

Serve shared memory and interrupt eventfds to QEMU ivshmem-doorbell devices
(-chardev socket,path=SOCKET,id=ID -device ivshmem-doorbell,chardev=ID,vectors=N).
Runs in the foreground; SIGTERM, SIGINT or SIGHUP stop it and remove the socket,
the shared memory file and the pid file.

options:
  -S, --socket PATH     UNIX socket to listen on (default /tmp/ivshmem_socket)
  -M, --shm PATH        shared memory file; a bare NAME means /dev/shm/NAME
                        (default /dev/shm/ivshmem); replaced if it exists
  -m NAME               same as --shm NAME (QEMU's spelling)
  -l, --size BYTES      size of the shared memory: a power of two, at least 4K,
                        with an optional K, M or G suffix (default 4M)
  -n, --vectors N       interrupt vectors (eventfds) per peer, 1 to 64 (default 2)
      --max-peers N     refuse connections beyond N peers, 1 to 65536 (default 65536)
  -p, --pidfile PATH    write the server's pid to PATH (removed on exit)
  -v, --verbose         log every connection and disconnection on stderr
  -F, --foreground      accepted for QEMU compatibility; always the case
  -h, --help            this text
";

/// What the server is told to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub socket: PathBuf,
    pub shm: PathBuf,
    pub size: u64,
    pub vectors: u16,
    pub max_peers: u32,
    pub pidfile: Option<PathBuf>,
    pub verbose: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            socket: PathBuf::from("/tmp/ivshmem_socket"),
            shm: PathBuf::from("/dev/shm/ivshmem"),
            size: 4 << 20,
            vectors: 2,
            max_peers: MAX_PEERS,
            pidfile: None,
            verbose: false,
        }
    }
}

/// The outcome of parsing: run, or print the usage.
#[derive(Debug, PartialEq, Eq)]
pub enum Command {
    Run(Options),
    Help,
}

/// Parses the arguments after the program name.
pub fn parse<I: IntoIterator<Item = OsString>>(args: I) -> Result<Command, String> {
    let mut opts = Options::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let arg = arg
            .into_string()
            .map_err(|a| format!("argument {a:?} is not valid UTF-8"))?;
        // `--name=value` or `--name value`; short options take the next argument.
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = || -> Result<String, String> {
            match inline.clone() {
                Some(v) => Ok(v),
                None => args
                    .next()
                    .ok_or_else(|| format!("{name} needs a value"))?
                    .into_string()
                    .map_err(|v| format!("{name}: {v:?} is not valid UTF-8")),
            }
        };
        match name.as_str() {
            "-S" | "--socket" => opts.socket = socket_path(&value()?)?,
            "-M" | "--shm" | "-m" => opts.shm = shm_path(&name, &value()?)?,
            "-l" | "--size" => {
                opts.size = parse_size(&value()?).map_err(|e| format!("--size: {e}"))?
            }
            "-n" | "--vectors" => {
                opts.vectors = parse_count(&value()?, 1, MAX_VECTORS.into())
                    .map_err(|e| format!("--vectors: {e}"))? as u16
            }
            "--max-peers" => {
                opts.max_peers =
                    parse_count(&value()?, 1, MAX_PEERS).map_err(|e| format!("--max-peers: {e}"))?
            }
            "-p" | "--pidfile" => {
                let v = value()?;
                if v.is_empty() {
                    return Err("--pidfile: empty path".into());
                }
                opts.pidfile = Some(PathBuf::from(v));
            }
            "-v" | "--verbose" | "-F" | "--foreground" | "-h" | "--help" if inline.is_some() => {
                return Err(format!("{name} takes no value"));
            }
            "-v" | "--verbose" => opts.verbose = true,
            "-F" | "--foreground" => {}
            "-h" | "--help" => return Ok(Command::Help),
            _ if name.starts_with('-') => return Err(format!("unknown option {name}")),
            _ => return Err(format!("unexpected argument '{arg}'")),
        }
    }
    Ok(Command::Run(opts))
}

fn socket_path(v: &str) -> Result<PathBuf, String> {
    if v.is_empty() {
        return Err("--socket: empty path".into());
    }
    if v.len() > MAX_SOCKET_PATH {
        return Err(format!(
            "--socket: path is {} bytes, a UNIX socket path holds at most {MAX_SOCKET_PATH}",
            v.len()
        ));
    }
    Ok(PathBuf::from(v))
}

/// A name without a slash lives in /dev/shm, as with shm_open(3).
fn shm_path(opt: &str, v: &str) -> Result<PathBuf, String> {
    if v.is_empty() || v == "/" || v.ends_with('/') {
        return Err(format!("{opt}: '{v}' is not a file name"));
    }
    if v.contains('/') {
        Ok(PathBuf::from(v))
    } else {
        Ok(PathBuf::from("/dev/shm").join(v))
    }
}

/// Parses `BYTES[K|M|G]` (binary multiples) and checks that it fits a PCI BAR.
pub fn parse_size(v: &str) -> Result<u64, String> {
    let (digits, shift) = match v.char_indices().last() {
        Some((i, 'k' | 'K')) => (&v[..i], 10),
        Some((i, 'm' | 'M')) => (&v[..i], 20),
        Some((i, 'g' | 'G')) => (&v[..i], 30),
        _ => (v, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "'{v}' is not a size (BYTES with an optional K, M or G suffix)"
        ));
    }
    let n: u64 = digits.parse().map_err(|_| format!("'{v}' is too large"))?;
    let size = n
        .checked_mul(1 << shift)
        .filter(|s| *s <= i64::MAX as u64)
        .ok_or_else(|| format!("'{v}' is too large"))?;
    if size < MIN_SIZE {
        return Err(format!("'{v}' is less than {MIN_SIZE} bytes (one page)"));
    }
    if !size.is_power_of_two() {
        return Err(format!(
            "'{v}' is not a power of two (the region is a PCI BAR, whose size must be)"
        ));
    }
    Ok(size)
}

fn parse_count(v: &str, min: u32, max: u32) -> Result<u32, String> {
    match v.parse::<u32>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!("'{v}' is not a number from {min} to {max}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Options, String> {
        match parse(args.iter().map(OsString::from))? {
            Command::Run(o) => Ok(o),
            Command::Help => Err("help".into()),
        }
    }

    #[test]
    fn defaults() {
        assert_eq!(run(&[]).unwrap(), Options::default());
    }

    #[test]
    fn long_short_and_inline_forms() {
        let o = run(&[
            "--socket",
            "/tmp/s",
            "-m",
            "foo",
            "--size=64K",
            "-n",
            "3",
            "--max-peers=2",
            "-p",
            "/tmp/pid",
            "-v",
            "-F",
        ])
        .unwrap();
        assert_eq!(o.socket, PathBuf::from("/tmp/s"));
        assert_eq!(o.shm, PathBuf::from("/dev/shm/foo"));
        assert_eq!(o.size, 64 << 10);
        assert_eq!(o.vectors, 3);
        assert_eq!(o.max_peers, 2);
        assert_eq!(o.pidfile, Some(PathBuf::from("/tmp/pid")));
        assert!(o.verbose);
        assert_eq!(run(&["--shm", "/x/y"]).unwrap().shm, PathBuf::from("/x/y"));
        assert_eq!(parse([OsString::from("-h")]), Ok(Command::Help));
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        for bad in [
            "",
            "M",
            "4MB",
            "-4M",
            "3M",
            "2048",
            "1.5M",
            "99999999999999999999",
            "9000000000G",
        ] {
            assert!(parse_size(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn bad_options() {
        for bad in [
            &["--vectors", "0"][..],
            &["--vectors", "65"],
            &["--max-peers", "0"],
            &["--max-peers", "65537"],
            &["--socket"],
            &["--socket", ""],
            &["--shm", "dir/"],
            &["--verbose=1"],
            &["--bogus"],
            &["stray"],
        ] {
            assert!(run(bad).is_err(), "{bad:?} accepted");
        }
        let long = format!("/tmp/{}", "x".repeat(200));
        assert!(run(&["--socket", &long]).unwrap_err().contains("at most"));
    }
}
