//! The configuration files `scictl load` reads.
//!
//! `nodes.conf`: one `ADDRESS NODEID` per line (an IPv4 or IPv6 address, a decimal node
//! id); `ports.conf`: one `include|exclude PORT[-PORT]` per line. In both, `#` starts a
//! comment and blank lines are ignored.

use sci_config::rules::{Ip, PortAction, PortRule, NODES_MAX, PORT_RULES_MAX};
use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;

/// A configuration error, with where it was found.
#[derive(Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub file: String,
    pub line: usize,
    pub msg: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.file, self.msg)
        } else {
            write!(f, "{}:{}: {}", self.file, self.line, self.msg)
        }
    }
}

/// A node map entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeEntry {
    pub addr: IpAddr,
    pub node: u32,
}

/// The `Ip` the module matches for `addr` (IPv4-mapped IPv6 addresses as IPv4).
pub fn rules_ip(addr: IpAddr) -> Ip {
    match addr {
        IpAddr::V4(a) => Ip::V4(a.octets()),
        IpAddr::V6(a) => Ip::V6(a.octets()).canonical(),
    }
}

/// The address the module stores for `addr`.
pub fn canonical(addr: IpAddr) -> IpAddr {
    match rules_ip(addr) {
        Ip::V4(b) => IpAddr::from(b),
        Ip::V6(b) => IpAddr::from(b),
    }
}

/// The meaningful lines of a file: (line number, words), comments and blanks removed.
fn lines(text: &str) -> impl Iterator<Item = (usize, Vec<&str>)> {
    text.lines().enumerate().filter_map(|(i, line)| {
        let line = line.split('#').next().unwrap_or("");
        let words: Vec<&str> = line.split_whitespace().collect();
        (!words.is_empty()).then_some((i + 1, words))
    })
}

/// Parses `nodes.conf` (`file` names it in errors).
pub fn parse_nodes(file: &str, text: &str) -> Result<Vec<NodeEntry>, ConfigError> {
    let err = |line, msg: String| ConfigError {
        file: file.to_owned(),
        line,
        msg,
    };
    let mut out = Vec::new();
    let mut seen: HashMap<IpAddr, usize> = HashMap::new();
    for (line, words) in lines(text) {
        let [addr, node] = words[..] else {
            return Err(err(
                line,
                format!("expected 'ADDRESS NODEID', found '{}'", words.join(" ")),
            ));
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| err(line, format!("'{addr}' is not an IPv4 or IPv6 address")))?;
        let node: u32 = node.parse().map_err(|_| {
            err(
                line,
                format!(
                    "'{node}' is not a node id (a number from 0 to {})",
                    u32::MAX
                ),
            )
        })?;
        let addr = canonical(addr);
        if let Some(first) = seen.insert(addr, line) {
            return Err(err(
                line,
                format!("{addr} is already mapped on line {first}"),
            ));
        }
        if out.len() == NODES_MAX {
            return Err(err(line, format!("more than {NODES_MAX} entries")));
        }
        out.push(NodeEntry { addr, node });
    }
    Ok(out)
}

/// Parses `PORT` or `PORT-PORT`.
fn parse_range(s: &str) -> Result<(u16, u16), String> {
    let port = |p: &str| {
        p.parse::<u16>()
            .ok()
            .filter(|&p| p != 0)
            .ok_or_else(|| format!("'{p}' is not a port (1-65535)"))
    };
    match s.split_once('-') {
        Some((low, high)) => Ok((port(low)?, port(high)?)),
        None => port(s).map(|p| (p, p)),
    }
}

/// Parses `ports.conf` (`file` names it in errors).
pub fn parse_ports(file: &str, text: &str) -> Result<Vec<PortRule>, ConfigError> {
    let err = |line, msg: String| ConfigError {
        file: file.to_owned(),
        line,
        msg,
    };
    let mut out = Vec::new();
    for (line, words) in lines(text) {
        let [action, range] = words[..] else {
            return Err(err(
                line,
                format!(
                    "expected 'include|exclude PORT[-PORT]', found '{}'",
                    words.join(" ")
                ),
            ));
        };
        let action = PortAction::from_name(action).ok_or_else(|| {
            err(
                line,
                format!("'{action}' is neither 'include' nor 'exclude'"),
            )
        })?;
        let (low, high) = parse_range(range).map_err(|m| err(line, m))?;
        let rule = PortRule::new(action, low, high)
            .map_err(|e| err(line, format!("{range}: {}", e.message())))?;
        if out.len() == PORT_RULES_MAX {
            return Err(err(line, format!("more than {PORT_RULES_MAX} rules")));
        }
        out.push(rule);
    }
    Ok(out)
}

/// `PORT` or `LOW-HIGH`, as `ports.conf` writes it.
pub fn range_text(rule: &PortRule) -> String {
    if rule.low() == rule.high() {
        rule.low().to_string()
    } else {
        format!("{}-{}", rule.low(), rule.high())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_with_comments_and_both_families() {
        let text = "# the cluster\n\n10.0.0.1 1\n  fd00::2   2  # node two\n::ffff:10.0.0.3 3\n";
        let nodes = parse_nodes("nodes.conf", text).unwrap();
        assert_eq!(
            nodes,
            vec![
                NodeEntry {
                    addr: "10.0.0.1".parse().unwrap(),
                    node: 1
                },
                NodeEntry {
                    addr: "fd00::2".parse().unwrap(),
                    node: 2
                },
                NodeEntry {
                    addr: "10.0.0.3".parse().unwrap(),
                    node: 3
                },
            ]
        );
        assert_eq!(parse_nodes("n", "").unwrap(), vec![]);
        assert_eq!(parse_nodes("n", "# nothing\n   \n").unwrap(), vec![]);
    }

    #[test]
    fn node_errors_name_file_and_line() {
        let e = parse_nodes("nodes.conf", "10.0.0.1 1\n10.0.0.300 2\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert_eq!(
            e.to_string(),
            "nodes.conf:2: '10.0.0.300' is not an IPv4 or IPv6 address"
        );
        let e = parse_nodes("n", "10.0.0.1\n").unwrap_err();
        assert!(e.msg.contains("expected 'ADDRESS NODEID'"), "{e}");
        let e = parse_nodes("n", "10.0.0.1 1 2\n").unwrap_err();
        assert!(e.msg.contains("expected 'ADDRESS NODEID'"), "{e}");
        let e = parse_nodes("n", "10.0.0.1 -1\n").unwrap_err();
        assert!(e.msg.contains("not a node id"), "{e}");
        let e = parse_nodes("n", "10.0.0.1 x\n").unwrap_err();
        assert!(e.msg.contains("'x' is not a node id"), "{e}");
    }

    #[test]
    fn duplicate_addresses_are_refused_also_as_mapped_ipv6() {
        let e = parse_nodes("n", "10.0.0.1 1\n# x\n::ffff:10.0.0.1 2\n").unwrap_err();
        assert_eq!(e.to_string(), "n:3: 10.0.0.1 is already mapped on line 1");
    }

    #[test]
    fn too_many_nodes() {
        let text: String = (0..=NODES_MAX)
            .map(|i| format!("10.1.{}.{} 1\n", i / 256, i % 256))
            .collect();
        let e = parse_nodes("n", &text).unwrap_err();
        assert_eq!(e.line, NODES_MAX + 1);
        let ok: String = text
            .lines()
            .take(NODES_MAX)
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(parse_nodes("n", &ok).unwrap().len(), NODES_MAX);
    }

    #[test]
    fn ports() {
        let text = "include 5000-5999\nexclude 22 # ssh\n\ninclude 80\n";
        let rules = parse_ports("ports.conf", text).unwrap();
        assert_eq!(rules.len(), 3);
        assert_eq!(rules[0].action(), PortAction::Include);
        assert_eq!((rules[0].low(), rules[0].high()), (5000, 5999));
        assert_eq!(rules[1].action(), PortAction::Exclude);
        assert_eq!((rules[1].low(), rules[1].high()), (22, 22));
        assert_eq!(range_text(&rules[0]), "5000-5999");
        assert_eq!(range_text(&rules[1]), "22");
    }

    #[test]
    fn port_errors() {
        let cases = [
            ("allow 80\n", "'allow' is neither 'include' nor 'exclude'"),
            ("include 0\n", "'0' is not a port (1-65535)"),
            ("include 70000\n", "'70000' is not a port (1-65535)"),
            (
                "include 90-80\n",
                "90-80: the range's first port is above its last",
            ),
            ("include\n", "expected 'include|exclude PORT[-PORT]'"),
            ("include 80-\n", "'' is not a port (1-65535)"),
            ("include 1-2-3\n", "'2-3' is not a port (1-65535)"),
        ];
        for (text, want) in cases {
            let e = parse_ports("p", text).unwrap_err();
            assert!(e.to_string().contains(want), "{text:?}: {e}");
            assert_eq!(e.line, 1);
        }
        let text: String = (1..=PORT_RULES_MAX + 1)
            .map(|p| format!("exclude {p}\n"))
            .collect();
        assert!(parse_ports("p", &text)
            .unwrap_err()
            .msg
            .contains("more than"));
    }
}
