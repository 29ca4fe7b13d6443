//! Command line.

use crate::measure::Test;
use clap::error::ErrorKind;
use clap::{ArgAction, Args, Parser, Subcommand};
use std::net::SocketAddrV4;
use std::time::Duration;

/// What `sci-bench --help` says after the options.
const AFTER_HELP: &str = "\
Every measurement starts a server thread on 127.0.0.1 (a free port) or an abstract
AF_UNIX name and a client in the same process, runs for --time seconds, and is repeated
--repeat times; the table shows the median of the repetitions and its ratio to tcp.
With --remote, the client connects to 'sci-bench serve' servers instead (one per family,
e.g. a plain one for tcp and one under sci-run for sci-preload); only tcp, sci and
sci-preload can be measured that way, and the server reports what its accepted socket
was (SO_DOMAIN, SCI_INFO), so both ends of every connection are checked.

Families (--families, default all):
  tcp          AF_INET stream sockets
  unix         AF_UNIX stream sockets
  smc          AF_SMC (SMCPROTO_SMC, sockaddr_in); every connection is checked with
               smc_diag, a fallback to TCP shows as smc(fallback)
  sci          AF_SCI directly (socket(N, SOCK_STREAM, 0), N from
               /sys/module/af_sci/parameters/family)
  sci-preload  the tcp code path in a child process run under the preload
               (sci-run sci-bench worker), so the unmodified path is measured
Tests (--tests, default all):
  pingpong     ping-pong latency, median and p99 per round trip (us)
  stream       one-way throughput of N-byte writes (MB/s, 1 MB = 10^6 bytes)
  rr           64 B request, 1 KiB response, one outstanding (transactions/s)
  crr          connect + one 14 B exchange + close (connections/s)
  multi        N concurrent 64 B ping-pong streams (aggregate transactions/s)
  hotspot      N clients doing 64 B ping-pong against one server thread (an epoll
               loop): AZ-SDP's hot-spot test (aggregate transactions/s)

See sci-bench(1).";

/// The families of the table, in column order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Family {
    Tcp,
    Unix,
    Smc,
    Sci,
    SciPreload,
}

pub const ALL_FAMILIES: [Family; 5] = [
    Family::Tcp,
    Family::Unix,
    Family::Smc,
    Family::Sci,
    Family::SciPreload,
];

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Tcp => "tcp",
            Family::Unix => "unix",
            Family::Smc => "smc",
            Family::Sci => "sci",
            Family::SciPreload => "sci-preload",
        }
    }

    pub fn parse(s: &str) -> Option<Family> {
        ALL_FAMILIES.iter().copied().find(|f| f.name() == s)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TestKind {
    PingPong,
    Stream,
    Rr,
    Crr,
    Multi,
    HotSpot,
}

const ALL_TESTS: [(TestKind, &str); 6] = [
    (TestKind::PingPong, "pingpong"),
    (TestKind::Stream, "stream"),
    (TestKind::Rr, "rr"),
    (TestKind::Crr, "crr"),
    (TestKind::Multi, "multi"),
    (TestKind::HotSpot, "hotspot"),
];

/// `--pin`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pin {
    /// The last CPU the process may use.
    One,
    Cpu(usize),
    None,
}

impl Pin {
    fn parse(s: &str) -> Option<Pin> {
        match s {
            "one" => Some(Pin::One),
            "none" => Some(Pin::None),
            n => n.parse().ok().filter(|&c| c < 1024).map(Pin::Cpu),
        }
    }

    /// The CPU to pin to, given the CPUs the process may use.
    pub fn resolve(self, allowed: &[usize]) -> Option<usize> {
        match self {
            Pin::One => allowed.last().copied(),
            Pin::Cpu(c) => Some(c),
            Pin::None => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct RunOpts {
    pub families: Vec<Family>,
    pub tests: Vec<TestKind>,
    pub full: bool,
    pub repeat: usize,
    pub time: Duration,
    pub streams: Vec<usize>,
    pub pin: Pin,
    pub json: Option<String>,
    pub smc_setup: bool,
    pub sci_run: Option<String>,
    pub strict: bool,
    /// `--remote`: per family (`None`: every family without its own) a server address.
    pub remote: Vec<(Option<Family>, SocketAddrV4)>,
    pub require_sci: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// `--help` or `--version`: the text to print.
    Help(String),
    Run(RunOpts),
    SmcSetup {
        eid: String,
        list: bool,
    },
    Worker,
    Serve {
        listen: SocketAddrV4,
        family: Family,
    },
}

/// Loopback socket benchmarks: TCP, AF_UNIX, AF_SMC, AF_SCI directly and through the preload.
#[derive(Debug, Parser)]
#[command(
    name = "sci-bench",
    version,
    after_help = AFTER_HELP,
    args_conflicts_with_subcommands = true,
    args_override_self = true
)]
struct Cli {
    #[command(subcommand)]
    sub: Option<Sub>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
enum Sub {
    /// Add a user EID so that AF_SMC uses its loopback device (needs CAP_NET_ADMIN).
    SmcSetup {
        /// The EID to add.
        #[arg(long, value_name = "NAME", default_value = crate::smc::DEFAULT_UEID, value_parser = eid)]
        eid: String,
        /// Show the kernel's EID table afterwards.
        #[arg(long)]
        list: bool,
    },
    /// The server of the remote mode, on another machine: answers every test of a client
    /// run with --remote; one thread per connection, until killed.
    Serve {
        /// Where to listen.
        #[arg(long, value_name = "ADDR:PORT", value_parser = addr4)]
        listen: SocketAddrV4,
        /// tcp (AF_INET; under sci-run it becomes AF_SCI) or sci (AF_SCI directly).
        #[arg(long, value_name = "F", default_value = "tcp", value_parser = serve_family)]
        family: Family,
    },
    /// Internal: the sci-preload child (always the tcp code path).
    #[command(hide = true)]
    Worker {
        #[arg(long, value_parser = ["tcp"])]
        family: Option<String>,
    },
}

/// The options of a run.
#[derive(Debug, Args)]
struct RunArgs {
    /// Comma-separated families (see below) [default: all; with --remote: tcp,sci-preload].
    #[arg(long, value_name = "LIST", value_parser = families)]
    families: Option<Listed<Family>>,
    /// Comma-separated tests (see below) [default: all].
    #[arg(long, value_name = "LIST", value_parser = tests)]
    tests: Option<Listed<TestKind>>,
    /// More sizes and stream counts (default: the quick profile).
    #[arg(long, overrides_with = "quick")]
    full: bool,
    /// The quick profile (the default).
    #[arg(long, overrides_with = "full")]
    quick: bool,
    /// Repetitions of each measurement.
    #[arg(long, value_name = "R", default_value_t = 5, value_parser = repeat)]
    repeat: usize,
    /// Seconds per repetition [default: 0.5 quick, 1 full].
    #[arg(long, value_name = "S", value_parser = seconds)]
    time: Option<Duration>,
    /// Stream counts of 'multi', client counts of 'hotspot' [default: 4; full 2,4,8].
    #[arg(long, value_name = "LIST", value_parser = streams)]
    streams: Option<Listed<usize>>,
    /// Where single-connection tests run client and server: 'one' (both threads on the
    /// last CPU this process may use), a CPU number, or 'none' (the scheduler decides).
    /// 'multi' is never pinned. Under QEMU TCG a wakeup across vCPUs costs milliseconds
    /// of emulator noise; pinned, the numbers are the software path's.
    #[arg(long, value_name = "WHERE", default_value = "one", value_parser = pin)]
    pin: Pin,
    /// Also write every number (all repetitions) as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<String>,
    /// Add the user EID (as smc-setup) before measuring.
    #[arg(long)]
    smc_setup: bool,
    /// sci-run script used to start the sci-preload child (default: ../../sci-run from
    /// this binary, else LD_PRELOAD with libsci_preload.so next to this binary or
    /// $SCI_PRELOAD_LIB).
    #[arg(long, value_name = "PATH")]
    sci_run: Option<String>,
    /// Exit with status 1 when a family could not be measured or is not what its name
    /// says (AF_SMC fell back, a socket was not AF_SCI).
    #[arg(long)]
    strict: bool,
    /// Remote mode: measure against 'sci-bench serve' at ADDR:PORT, for FAMILY or
    /// (without FAMILY=) for every family that has no address of its own; repeatable.
    #[arg(long, value_name = "[FAMILY=]ADDR:PORT", value_parser = remote_addr, action = ArgAction::Append)]
    remote: Vec<(Option<Family>, SocketAddrV4)>,
    /// The sci and sci-preload columns count as what they claim only when every AF_SCI
    /// socket (with --remote: of both ends) was in mode sci; a run with a socket that
    /// was not is left out of the medians (a note says why) and is a failure under
    /// --strict.
    #[arg(long)]
    require_sci: bool,
}

/// `--remote`'s value: `ADDR:PORT` (IPv4) or `FAMILY=ADDR:PORT`.
fn remote_addr(v: &str) -> Result<(Option<Family>, SocketAddrV4), String> {
    let (fam, addr) = match v.split_once('=') {
        Some((f, a)) => (
            Some(Family::parse(f).ok_or_else(|| format!("unknown family '{f}'"))?),
            a,
        ),
        None => (None, v),
    };
    Ok((fam, addr4(addr)?))
}

fn addr4(v: &str) -> Result<SocketAddrV4, String> {
    v.parse()
        .map_err(|_| format!("'{v}' is not an IPv4 ADDR:PORT"))
}

fn serve_family(v: &str) -> Result<Family, String> {
    match Family::parse(v) {
        Some(f @ (Family::Tcp | Family::Sci)) => Ok(f),
        _ => Err(format!("--family is tcp or sci, not '{v}'")),
    }
}

fn eid(v: &str) -> Result<String, String> {
    crate::smc::encode_eid(v)?;
    Ok(v.to_string())
}

/// A comma-separated list as one option's value (clap would take a `Vec` for repeats).
#[derive(Clone, Debug)]
struct Listed<T>(Vec<T>);

fn list<T>(value: &str, what: &str, parse: impl Fn(&str) -> Option<T>) -> Result<Vec<T>, String> {
    let mut out = Vec::new();
    for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        out.push(parse(item).ok_or_else(|| format!("unknown {what} '{item}'"))?);
    }
    if out.is_empty() {
        return Err(format!("empty list of {what}s"));
    }
    Ok(out)
}

fn families(v: &str) -> Result<Listed<Family>, String> {
    let mut f = list(v, "family", Family::parse)?;
    f.sort();
    f.dedup();
    Ok(Listed(f))
}

fn tests(v: &str) -> Result<Listed<TestKind>, String> {
    list(v, "test", |s| {
        ALL_TESTS.iter().find(|t| t.1 == s).map(|t| t.0)
    })
    .map(Listed)
}

fn streams(v: &str) -> Result<Listed<usize>, String> {
    list(v, "stream count", |s| {
        s.parse().ok().filter(|n| (1..=256).contains(n))
    })
    .map(Listed)
}

fn repeat(v: &str) -> Result<usize, String> {
    v.parse()
        .ok()
        .filter(|r| *r >= 1)
        .ok_or_else(|| "a positive number".to_string())
}

fn seconds(v: &str) -> Result<Duration, String> {
    v.parse()
        .ok()
        .filter(|t: &f64| *t > 0.0 && *t <= 3600.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| "a number of seconds (at most 3600)".to_string())
}

fn pin(v: &str) -> Result<Pin, String> {
    Pin::parse(v).ok_or_else(|| format!("'one', 'none' or a CPU, not '{v}'"))
}

/// Parses the arguments (without the program name). A usage error is clap's message.
pub fn parse(args: &[String]) -> Result<Command, String> {
    let cli = match Cli::try_parse_from(
        std::iter::once("sci-bench").chain(args.iter().map(String::as_str)),
    ) {
        Ok(cli) => cli,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            return Ok(Command::Help(e.render().to_string()))
        }
        Err(e) => return Err(e.render().to_string()),
    };
    let a = match cli.sub {
        Some(Sub::SmcSetup { eid, list }) => return Ok(Command::SmcSetup { eid, list }),
        Some(Sub::Serve { listen, family }) => return Ok(Command::Serve { listen, family }),
        Some(Sub::Worker { .. }) => return Ok(Command::Worker),
        None => cli.run,
    };
    let full = a.full;
    let mut o = RunOpts {
        families: a
            .families
            .clone()
            .map_or_else(|| ALL_FAMILIES.to_vec(), |l| l.0),
        tests: a
            .tests
            .map_or_else(|| ALL_TESTS.iter().map(|t| t.0).collect(), |l| l.0),
        full,
        repeat: a.repeat,
        time: a
            .time
            .unwrap_or(Duration::from_millis(if full { 1000 } else { 500 })),
        streams: a
            .streams
            .map_or_else(|| if full { vec![2, 4, 8] } else { vec![4] }, |l| l.0),
        pin: a.pin,
        json: a.json,
        smc_setup: a.smc_setup,
        sci_run: a.sci_run,
        strict: a.strict,
        remote: a.remote,
        require_sci: a.require_sci,
    };
    if !o.remote.is_empty() {
        if a.families.is_none() {
            o.families = vec![Family::Tcp, Family::SciPreload];
        }
        for &f in &o.families {
            if !matches!(f, Family::Tcp | Family::Sci | Family::SciPreload) {
                return Err(format!(
                    "--remote: family {} cannot be measured remotely (tcp, sci, sci-preload)",
                    f.name()
                ));
            }
            if o.remote_for(f).is_none() {
                return Err(format!(
                    "--remote: no server address for family {}",
                    f.name()
                ));
            }
        }
    }
    Ok(Command::Run(o))
}

impl RunOpts {
    /// The server of `family` in the remote mode: its own `--remote FAMILY=...`, else the
    /// last `--remote ADDR:PORT`; `None` in the local mode.
    pub fn remote_for(&self, family: Family) -> Option<SocketAddrV4> {
        let own = self.remote.iter().rev().find(|r| r.0 == Some(family));
        own.or_else(|| self.remote.iter().rev().find(|r| r.0.is_none()))
            .map(|r| r.1)
    }

    /// The measurements of the chosen profile, in table order.
    pub fn measurements(&self) -> Vec<Test> {
        let (pp, st): (&[usize], &[usize]) = if self.full {
            (
                &[1, 14, 64, 256, 1024, 4096, 16384, 65536],
                &[4096, 16384, 65536, 262144, 1 << 20],
            )
        } else {
            (&[1, 14, 1024, 16384, 65536], &[4096, 65536, 1 << 20])
        };
        let mut out = Vec::new();
        for kind in &self.tests {
            match kind {
                TestKind::PingPong => out.extend(pp.iter().map(|&size| Test::PingPong { size })),
                TestKind::Stream => out.extend(st.iter().map(|&size| Test::Stream { size })),
                TestKind::Rr => out.push(Test::Rr {
                    req: 64,
                    resp: 1024,
                }),
                TestKind::Crr => out.push(Test::Crr { size: 14 }),
                TestKind::Multi => out.extend(
                    self.streams
                        .iter()
                        .map(|&streams| Test::Multi { streams, size: 64 }),
                ),
                TestKind::HotSpot => out.extend(
                    self.streams
                        .iter()
                        .map(|&clients| Test::HotSpot { clients, size: 64 }),
                ),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Command, String> {
        let v: Vec<String> = s.split_whitespace().map(String::from).collect();
        parse(&v)
    }

    fn run(s: &str) -> RunOpts {
        match p(s).unwrap() {
            Command::Run(o) => o,
            c => panic!("{c:?}"),
        }
    }

    #[test]
    fn defaults() {
        let o = run("");
        assert_eq!(o.families, ALL_FAMILIES);
        assert_eq!(o.repeat, 5);
        assert_eq!(o.time, Duration::from_millis(500));
        assert_eq!(o.streams, [4]);
        assert_eq!(o.pin, Pin::One);
        assert!(!o.full && !o.strict && !o.smc_setup);
        let m = o.measurements();
        assert_eq!(m.len(), 5 + 3 + 1 + 1 + 1 + 1);
        assert_eq!(m[0], Test::PingPong { size: 1 });
        assert_eq!(m[7], Test::Stream { size: 1 << 20 });
        assert!(m.contains(&Test::Crr { size: 14 }));
        assert_eq!(
            m.last(),
            Some(&Test::HotSpot {
                clients: 4,
                size: 64
            })
        );
    }

    #[test]
    fn full_profile() {
        let o = run("--full");
        assert_eq!(o.time, Duration::from_secs(1));
        assert_eq!(o.streams, [2, 4, 8]);
        assert_eq!(o.measurements().len(), 8 + 5 + 1 + 1 + 3 + 3);
        // An explicit --time wins.
        assert_eq!(run("--full --time 0.1").time, Duration::from_millis(100));
    }

    #[test]
    fn options() {
        let o = run(
            "--families sci-preload,tcp,tcp --tests pingpong,crr --repeat 3 --time=2 \
                     --json out.json --streams 1,16 --strict --smc-setup --sci-run /x/sci-run",
        );
        assert_eq!(o.families, [Family::Tcp, Family::SciPreload]);
        assert_eq!(o.tests, [TestKind::PingPong, TestKind::Crr]);
        assert_eq!(o.repeat, 3);
        assert_eq!(o.time, Duration::from_secs(2));
        assert_eq!(o.json.as_deref(), Some("out.json"));
        assert_eq!(o.streams, [1, 16]);
        assert!(o.strict && o.smc_setup);
        assert_eq!(o.sci_run.as_deref(), Some("/x/sci-run"));
        let o = run("--tests multi --streams 1,16");
        assert_eq!(
            o.measurements(),
            [
                Test::Multi {
                    streams: 1,
                    size: 64
                },
                Test::Multi {
                    streams: 16,
                    size: 64
                }
            ]
        );
    }

    #[test]
    fn a_repeated_option_takes_its_last_value() {
        // The bench scripts pass defaults that BENCH_ARGS may repeat.
        assert_eq!(run("--streams 4,16 --streams 8").streams, [8]);
        assert_eq!(run("--repeat 3 --repeat 7").repeat, 7);
        assert!(!run("--full --quick").full);
        assert!(run("--quick --full").full);
    }

    #[test]
    fn pin() {
        assert_eq!(run("--pin none").pin, Pin::None);
        assert_eq!(run("--pin 3").pin, Pin::Cpu(3));
        assert!(p("--pin two").is_err());
        assert!(p("--pin 4096").is_err());
        assert_eq!(Pin::One.resolve(&[0, 1]), Some(1));
        assert_eq!(Pin::One.resolve(&[]), None);
        assert_eq!(Pin::Cpu(0).resolve(&[1]), Some(0));
        assert_eq!(Pin::None.resolve(&[0, 1]), None);
    }

    #[test]
    fn errors() {
        assert!(p("--families tcp,ipx").unwrap_err().contains("ipx"));
        assert!(p("--families ,").is_err());
        assert!(p("--tests nope").is_err());
        assert!(p("--repeat 0").is_err());
        assert!(p("--repeat").is_err());
        assert!(p("--time -1").is_err());
        assert!(p("--streams 0").is_err());
        assert!(p("--bogus").is_err());
        assert!(p("smc-setup --eid bad_eid").is_err());
        assert!(p("worker --family unix").is_err());
    }

    #[test]
    fn remote() {
        let o = run("--remote 10.0.0.2:7101 --remote sci-preload=10.0.0.2:7102");
        assert_eq!(o.families, [Family::Tcp, Family::SciPreload]);
        assert_eq!(
            o.remote_for(Family::Tcp),
            Some("10.0.0.2:7101".parse().unwrap())
        );
        assert_eq!(
            o.remote_for(Family::SciPreload),
            Some("10.0.0.2:7102".parse().unwrap())
        );
        assert_eq!(run("").remote_for(Family::Tcp), None);
        assert!(!o.require_sci);
        let o =
            run("--remote tcp=1.2.3.4:1 --remote sci=1.2.3.4:2 --families sci,tcp --require-sci");
        assert_eq!(o.families, [Family::Tcp, Family::Sci]);
        assert!(o.require_sci);
        // Every family needs a server; unix and smc cannot be remote.
        assert!(p("--remote tcp=1.2.3.4:1")
            .unwrap_err()
            .contains("sci-preload"));
        assert!(p("--remote 1.2.3.4:1 --families tcp,unix")
            .unwrap_err()
            .contains("unix"));
        assert!(p("--remote 1.2.3.4").is_err());
        assert!(p("--remote ipx=1.2.3.4:1").is_err());
    }

    #[test]
    fn serve() {
        assert_eq!(
            p("serve --listen 10.0.0.2:7101").unwrap(),
            Command::Serve {
                listen: "10.0.0.2:7101".parse().unwrap(),
                family: Family::Tcp
            }
        );
        assert_eq!(
            p("serve --family=sci --listen=0.0.0.0:1").unwrap(),
            Command::Serve {
                listen: "0.0.0.0:1".parse().unwrap(),
                family: Family::Sci
            }
        );
        assert!(p("serve").is_err());
        assert!(p("serve --listen 1.2.3.4:1 --family unix").is_err());
        assert!(p("serve --listen nowhere").is_err());
    }

    #[test]
    fn subcommands() {
        assert!(matches!(p("-h").unwrap(), Command::Help(h) if h.contains("--families")));
        assert!(matches!(p("smc-setup --help").unwrap(), Command::Help(h) if h.contains("--eid")));
        assert_eq!(
            p("smc-setup").unwrap(),
            Command::SmcSetup {
                eid: "SCI-BENCH".into(),
                list: false
            }
        );
        assert_eq!(
            p("smc-setup --eid my.eid --list").unwrap(),
            Command::SmcSetup {
                eid: "my.eid".into(),
                list: true
            }
        );
        assert_eq!(p("worker").unwrap(), Command::Worker);
        assert_eq!(p("worker --family tcp").unwrap(), Command::Worker);
    }
}
