//! `scictl sockets FILTER...`: which sockets to show, in the words of `ss`'s filters.
//!
//! Every term must hold (they are joined by "and"):
//!
//! ```text
//! mode sci|native            the socket's data path
//! reason NAME                its fallback reason (none, port-excluded, ...)
//! state NAME                 its TCP state as ss names it (established, listen, ...)
//! node N                     its peer node
//! sport OP :PORT             its local port; OP is = == != < > <= >= (or eq ne lt gt le ge),
//! dport OP :PORT             its peer's port; "sport :PORT" means "sport = :PORT"
//! src ADDR[:PORT]            its local address (and port); [ADDR]:PORT for IPv6
//! dst ADDR[:PORT]            its peer's address (and port)
//! ```

use crate::model::{mode_name, reason_name, state_name, Sock};
use std::net::{IpAddr, SocketAddr};

/// How a port is compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Gt,
    Le,
    Ge,
}

impl Op {
    fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "=" | "==" | "eq" => Op::Eq,
            "!=" | "ne" | "neq" => Op::Ne,
            "<" | "lt" => Op::Lt,
            ">" | "gt" => Op::Gt,
            "<=" | "le" => Op::Le,
            ">=" | "ge" => Op::Ge,
            _ => return None,
        })
    }

    fn holds(self, a: u16, b: u16) -> bool {
        match self {
            Op::Eq => a == b,
            Op::Ne => a != b,
            Op::Lt => a < b,
            Op::Gt => a > b,
            Op::Le => a <= b,
            Op::Ge => a >= b,
        }
    }
}

/// One term of a filter.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Term {
    Mode(String),
    Reason(String),
    State(String),
    Node(u32),
    Port {
        peer: bool,
        op: Op,
        port: u16,
    },
    Addr {
        peer: bool,
        ip: IpAddr,
        port: Option<u16>,
    },
}

/// A parsed filter: the terms that must all hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter(Vec<Term>);

/// `:PORT` or `PORT`.
fn port(s: &str) -> Result<u16, String> {
    s.strip_prefix(':')
        .unwrap_or(s)
        .parse()
        .map_err(|_| format!("'{s}' is not a port (:PORT)"))
}

/// `ADDR`, `ADDR:PORT` or `[ADDR]:PORT`.
fn address(s: &str) -> Result<(IpAddr, Option<u16>), String> {
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Ok((ip, None));
    }
    if let Ok(sa) = s.parse::<SocketAddr>() {
        return Ok((sa.ip(), Some(sa.port())));
    }
    Err(format!(
        "'{s}' is not an address (ADDR, ADDR:PORT or [ADDR]:PORT)"
    ))
}

/// The ss name of a state, in lower case, and its short forms.
fn state_matches(state: u8, want: &str) -> bool {
    let name = state_name(state).to_ascii_lowercase();
    name == want || (want == "established" && name == "estab")
}

const MODES: [&str; 2] = ["sci", "native"];
const STATES: [&str; 12] = [
    "established",
    "syn-sent",
    "syn-recv",
    "fin-wait-1",
    "fin-wait-2",
    "time-wait",
    "unconn",
    "close-wait",
    "last-ack",
    "listen",
    "closing",
    "new-syn-recv",
];

impl Filter {
    /// Parses the words after `sockets`.
    pub fn parse(words: &[String]) -> Result<Filter, String> {
        let mut terms = Vec::new();
        let mut it = words.iter().map(String::as_str).peekable();
        while let Some(key) = it.next() {
            let mut value = || it.next().ok_or_else(|| format!("'{key}' needs a value"));
            let term = match key {
                "mode" => {
                    let v = value()?;
                    if !MODES.contains(&v) {
                        return Err(format!("mode is sci or native, not '{v}'"));
                    }
                    Term::Mode(v.to_owned())
                }
                "reason" => {
                    let v = value()?;
                    let known = (0..64).map(reason_name).any(|n| n == v);
                    if !known {
                        return Err(format!(
                            "'{v}' is not a fallback reason (scictl stats lists them)"
                        ));
                    }
                    Term::Reason(v.to_owned())
                }
                "state" => {
                    let v = value()?.to_ascii_lowercase();
                    let v = if v == "estab" {
                        "established".to_owned()
                    } else {
                        v
                    };
                    if !STATES.contains(&v.as_str()) {
                        return Err(format!("'{v}' is not a state ({})", STATES.join(", ")));
                    }
                    Term::State(v)
                }
                "node" => {
                    let v = value()?;
                    Term::Node(v.parse().map_err(|_| format!("'{v}' is not a node id"))?)
                }
                "sport" | "dport" => {
                    let first = value()?;
                    let (op, p) = match Op::parse(first) {
                        Some(op) => (op, value()?),
                        None => (Op::Eq, first),
                    };
                    Term::Port {
                        peer: key == "dport",
                        op,
                        port: port(p)?,
                    }
                }
                "src" | "dst" => {
                    let (ip, port) = address(value()?)?;
                    Term::Addr {
                        peer: key == "dst",
                        ip,
                        port,
                    }
                }
                "and" | "&&" => continue,
                other => {
                    return Err(format!(
                    "unknown filter '{other}' (mode, reason, state, node, sport, dport, src, dst)"
                ))
                }
            };
            terms.push(term);
        }
        Ok(Filter(terms))
    }

    /// Whether `s` passes every term.
    pub fn matches(&self, s: &Sock) -> bool {
        self.0.iter().all(|t| match t {
            Term::Mode(m) => mode_name(s.mode) == m,
            Term::Reason(r) => reason_name(s.fallback) == *r,
            Term::State(want) => state_matches(s.state, want),
            Term::Node(n) => s.node == Some(*n),
            Term::Port { peer, op, port } => {
                let end = if *peer { s.peer } else { s.local };
                end.is_some_and(|a| op.holds(a.port(), *port))
            }
            Term::Addr { peer, ip, port } => {
                let end = if *peer { s.peer } else { s.local };
                end.is_some_and(|a| a.ip() == *ip && port.map_or(true, |p| a.port() == p))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(s: &str) -> Result<Filter, String> {
        Filter::parse(&s.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
    }

    fn sock(local: &str, peer: Option<&str>, mode: u32, state: u8) -> Sock {
        Sock {
            local: Some(local.parse().unwrap()),
            peer: peer.map(|p| p.parse().unwrap()),
            mode,
            state,
            node: peer.map(|_| 1),
            ..Sock::default()
        }
    }

    #[test]
    fn terms_as_ss_writes_them() {
        let conn = sock("10.0.0.1:40000", Some("10.0.0.2:6379"), 1, 1);
        let listener = sock("0.0.0.0:6379", None, 0, 10);
        for (text, conn_in, listener_in) in [
            ("", true, true),
            ("mode sci", true, false),
            ("mode native", false, true),
            ("state established", true, false),
            ("state estab", true, false),
            ("state listen", false, true),
            ("dport = :6379", true, false),
            ("dport :6379", true, false),
            ("dport eq :6379", true, false),
            ("dport != :6379", false, false),
            ("sport = :6379", false, true),
            ("sport > :1024", true, true),
            ("sport le :6379", false, true),
            ("dst 10.0.0.2", true, false),
            ("dst 10.0.0.2:6379", true, false),
            ("dst 10.0.0.2:6380", false, false),
            ("src 0.0.0.0", false, true),
            ("node 1", true, false),
            ("mode sci and dport = :6379", true, false),
            ("mode sci dport = :6380", false, false),
            ("reason none", true, true),
        ] {
            let filter = f(text).unwrap();
            assert_eq!(filter.matches(&conn), conn_in, "{text}: the connection");
            assert_eq!(
                filter.matches(&listener),
                listener_in,
                "{text}: the listener"
            );
        }
        let v6 = sock("[::1]:5000", Some("[::1]:6000"), 1, 1);
        assert!(f("dst [::1]:6000").unwrap().matches(&v6));
        assert!(f("src ::1").unwrap().matches(&v6));
    }

    #[test]
    fn errors_name_the_word() {
        for (text, says) in [
            ("mode tcp", "mode is sci or native, not 'tcp'"),
            ("state open", "'open' is not a state"),
            ("dport = :http", "':http' is not a port"),
            ("dport", "'dport' needs a value"),
            ("dst nowhere", "'nowhere' is not an address"),
            ("node x", "'x' is not a node id"),
            ("reason bogus", "'bogus' is not a fallback reason"),
            ("colour red", "unknown filter 'colour'"),
        ] {
            let e = f(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }
}
