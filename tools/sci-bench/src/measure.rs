//! What a measurement is and what it found: the families measured, the tests and the
//! numbers each reports, and what the kernel said of every socket a test used.

use crate::smc;
use crate::sys::{self, Sock};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io;

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

    /// Whether its sockets take IP addresses (all but AF_UNIX).
    pub(crate) fn is_inet(self) -> bool {
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
}
