//! The rules of `/etc/af_sci/preload.conf`: which sockets of which programs the preload
//! turns into `AF_SCI`, after libsdp's `libsdp.conf`.
//!
//! ```text
//! # ACTION  PROGRAM  [ROLE  [ADDRESS[/PREFIX]  [PORT[-PORT]]]]
//! tcp  sshd                               # sshd's sockets stay TCP
//! tcp  *        connect  10.1.0.0/16  5432  # nobody's connects there use the fabric
//! sci  redis-*                            # every other socket of redis-... may
//! ```
//!
//! - ACTION: `sci` (the socket is `AF_SCI`: the fabric where the node map and port rules
//!   allow it) or `tcp` (it stays on TCP).
//! - PROGRAM: the program's name as `/proc/PID/comm` has it (at most 15 bytes), `*`, or a
//!   name ending in `*` (any name that starts so).
//! - ROLE: `connect`, `listen` or `*` (the default).
//! - ADDRESS: the address connected to or listened on, IPv4 or IPv6 with an optional
//!   `/PREFIX`, or `*` (the default). An IPv4-mapped IPv6 address is matched as IPv4.
//! - PORT: a port, a range `LOW-HIGH`, or `*` (the default).
//!
//! The first rule that matches decides; a socket no rule matches is `AF_SCI`. `#` starts
//! a comment. Both the preload (in every process it is loaded into: nothing here
//! allocates or panics on any input) and `scictl load --check` use this crate.
#![no_std]

use core::fmt;
use core::net::{IpAddr, Ipv6Addr};

/// The most rules a file may hold.
pub const RULES_MAX: usize = 64;
/// The longest program name (`TASK_COMM_LEN` - 1).
pub const NAME_MAX: usize = 15;

/// What a rule does with the sockets it matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// `AF_SCI`.
    Sci,
    /// TCP.
    Tcp,
}

/// What the socket does with the address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Connect,
    Listen,
}

/// Which programs a rule is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Program {
    name: [u8; NAME_MAX],
    len: u8,
    /// `name*`: any name that starts with `name` (`*` alone: every program).
    prefix: bool,
}

impl Program {
    fn matches(&self, comm: &[u8]) -> bool {
        let name = &self.name[..usize::from(self.len)];
        if self.prefix {
            comm.starts_with(name)
        } else {
            comm == name
        }
    }

    fn any(&self) -> bool {
        self.prefix && self.len == 0
    }
}

/// An address range: an IPv6 address (IPv4 mapped) and a prefix length over it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Net {
    addr: u128,
    prefix: u8,
}

impl Net {
    fn matches(&self, ip: IpAddr) -> bool {
        let ip = u128::from(mapped(ip));
        let mask = if self.prefix == 0 {
            0
        } else {
            u128::MAX << (128 - u32::from(self.prefix))
        };
        ip & mask == self.addr & mask
    }
}

/// IPv4 addresses as IPv4-mapped IPv6 ones, so that one comparison serves both.
fn mapped(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(v6, |v4| v4.to_ipv6_mapped()),
    }
}

/// One rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    pub action: Action,
    program: Program,
    /// `None`: both roles.
    role: Option<Role>,
    /// `None`: every address.
    net: Option<Net>,
    ports: (u16, u16),
    /// Its line in the file (from 1).
    pub line: u32,
}

impl Rule {
    /// Whether the rule is for the program `comm`.
    pub fn applies_to(&self, comm: &[u8]) -> bool {
        self.program.matches(comm)
    }

    /// Whether the rule leaves role, address and port open: it decides for a whole
    /// program.
    fn whole_program(&self) -> bool {
        self.role.is_none() && self.net.is_none() && self.ports == (0, u16::MAX)
    }

    fn matches(&self, role: Role, ip: IpAddr, port: u16) -> bool {
        self.role.map_or(true, |r| r == role)
            && self.net.map_or(true, |n| n.matches(ip))
            && (self.ports.0..=self.ports.1).contains(&port)
    }
}

/// What is wrong with a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The first word is not `sci` or `tcp`.
    Action,
    /// No program.
    NoProgram,
    /// A program name longer than 15 bytes, or with a `*` elsewhere than at its end.
    Program,
    /// Not `connect`, `listen` or `*`.
    Role,
    /// Not an address, `ADDRESS/PREFIX` or `*`.
    Address,
    /// Not a port, `LOW-HIGH` or `*`.
    Port,
    /// More than five words.
    TooLong,
    /// More than [`RULES_MAX`] rules.
    TooMany,
    /// Not UTF-8.
    Text,
}

/// A line that could not be read: where, what, and the word (as far as it goes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Error<'a> {
    pub line: u32,
    pub kind: ErrorKind,
    pub word: &'a str,
}

impl fmt::Display for Error<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = self.word;
        match self.kind {
            ErrorKind::Action => write!(f, "'{w}' is not an action (sci or tcp)"),
            ErrorKind::NoProgram => write!(f, "a rule needs a program (a name, name* or *)"),
            ErrorKind::Program => write!(
                f,
                "'{w}' is not a program (a name of at most {NAME_MAX} bytes, name* or *)"
            ),
            ErrorKind::Role => write!(f, "'{w}' is not a role (connect, listen or *)"),
            ErrorKind::Address => write!(f, "'{w}' is not an address (ADDRESS[/PREFIX] or *)"),
            ErrorKind::Port => write!(f, "'{w}' is not a port (PORT, LOW-HIGH or *)"),
            ErrorKind::TooLong => write!(
                f,
                "'{w}' is one word too many (ACTION PROGRAM [ROLE [ADDRESS [PORT]]])"
            ),
            ErrorKind::TooMany => write!(f, "more than {RULES_MAX} rules"),
            ErrorKind::Text => write!(f, "the line is not UTF-8 text"),
        }
    }
}

/// What the preload does for a program, before any of its sockets connects or listens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgramVerdict {
    /// Its TCP sockets become `AF_SCI`, whatever they connect to or listen on.
    Sci,
    /// Its sockets stay TCP (the rule of this line).
    Tcp(u32),
    /// Its TCP sockets become `AF_SCI`; each connect and listen asks [`Rules::decide`].
    PerSocket,
}

/// The rules of a file, in order.
#[derive(Clone, Copy, Debug)]
pub struct Rules {
    rules: [Rule; RULES_MAX],
    len: usize,
}

const NO_RULE: Rule = Rule {
    action: Action::Sci,
    program: Program {
        name: [0; NAME_MAX],
        len: 0,
        prefix: true,
    },
    role: None,
    net: None,
    ports: (0, u16::MAX),
    line: 0,
};

impl Default for Rules {
    fn default() -> Self {
        Rules {
            rules: [NO_RULE; RULES_MAX],
            len: 0,
        }
    }
}

fn action(w: &str) -> Option<Action> {
    match w {
        "sci" => Some(Action::Sci),
        "tcp" => Some(Action::Tcp),
        _ => None,
    }
}

fn program(w: &str) -> Option<Program> {
    let (name, prefix) = match w.strip_suffix('*') {
        Some(n) => (n, true),
        None => (w, false),
    };
    if name.len() > NAME_MAX || name.contains('*') || (!prefix && name.is_empty()) {
        return None;
    }
    let mut out = Program {
        name: [0; NAME_MAX],
        len: name.len() as u8,
        prefix,
    };
    out.name[..name.len()].copy_from_slice(name.as_bytes());
    Some(out)
}

fn role(w: &str) -> Option<Option<Role>> {
    match w {
        "connect" => Some(Some(Role::Connect)),
        "listen" => Some(Some(Role::Listen)),
        "*" => Some(None),
        _ => None,
    }
}

fn net(w: &str) -> Option<Option<Net>> {
    if w == "*" {
        return Some(None);
    }
    let (addr, prefix) = match w.split_once('/') {
        Some((a, p)) => (a, Some(p.parse::<u8>().ok()?)),
        None => (w, None),
    };
    let ip: IpAddr = addr.parse().ok()?;
    let v4 = ip.is_ipv4();
    let prefix = match (prefix, v4) {
        (Some(p), true) if p <= 32 => p + 96,
        (Some(p), false) if p <= 128 => p,
        (None, _) => 128,
        _ => return None,
    };
    Some(Some(Net {
        addr: u128::from(mapped(ip)),
        prefix,
    }))
}

fn ports(w: &str) -> Option<(u16, u16)> {
    if w == "*" {
        return Some((0, u16::MAX));
    }
    let (lo, hi) = match w.split_once('-') {
        Some((l, h)) => (l.parse().ok()?, h.parse().ok()?),
        None => {
            let p = w.parse().ok()?;
            (p, p)
        }
    };
    (lo <= hi).then_some((lo, hi))
}

impl Rules {
    /// Reads a rule file. Nothing is allocated: a file of more than [`RULES_MAX`] rules
    /// is an error, not a longer list.
    pub fn parse(text: &[u8]) -> Result<Rules, Error<'_>> {
        let mut out = Rules::default();
        for (i, raw) in text.split(|&b| b == b'\n').enumerate() {
            let line = i as u32 + 1;
            let raw = match core::str::from_utf8(raw) {
                Ok(s) => s,
                Err(_) => {
                    return Err(Error {
                        line,
                        kind: ErrorKind::Text,
                        word: "",
                    })
                }
            };
            let content = raw.split('#').next().unwrap_or("");
            let mut words = content.split_ascii_whitespace();
            let Some(first) = words.next() else {
                continue;
            };
            let err = |kind, word| Error { line, kind, word };
            let mut rule = NO_RULE;
            rule.line = line;
            rule.action = action(first).ok_or(err(ErrorKind::Action, first))?;
            let w = words.next().ok_or(err(ErrorKind::NoProgram, ""))?;
            rule.program = program(w).ok_or(err(ErrorKind::Program, w))?;
            if let Some(w) = words.next() {
                rule.role = role(w).ok_or(err(ErrorKind::Role, w))?;
            }
            if let Some(w) = words.next() {
                rule.net = net(w).ok_or(err(ErrorKind::Address, w))?;
            }
            if let Some(w) = words.next() {
                rule.ports = ports(w).ok_or(err(ErrorKind::Port, w))?;
            }
            if let Some(w) = words.next() {
                return Err(err(ErrorKind::TooLong, w));
            }
            if out.len == RULES_MAX {
                return Err(err(ErrorKind::TooMany, ""));
            }
            out.rules[out.len] = rule;
            out.len += 1;
        }
        Ok(out)
    }

    /// The rules, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Rule> {
        self.rules[..self.len].iter()
    }

    /// What the preload does for the program `comm`, before its sockets do anything: the
    /// first of its rules decides if it leaves role, address and port open.
    pub fn program_verdict(&self, comm: &[u8]) -> ProgramVerdict {
        match self.iter().find(|r| r.program.matches(comm)) {
            None => ProgramVerdict::Sci,
            Some(r) if r.whole_program() => match r.action {
                Action::Sci => ProgramVerdict::Sci,
                Action::Tcp => ProgramVerdict::Tcp(r.line),
            },
            Some(_) => ProgramVerdict::PerSocket,
        }
    }

    /// What a socket of `comm` that connects to, or listens on, `ip:port` does: the first
    /// matching rule's action and line, or `Sci` (line 0) when none matches.
    pub fn decide(&self, comm: &[u8], role: Role, ip: IpAddr, port: u16) -> (Action, u32) {
        self.iter()
            .find(|r| r.program.matches(comm) && r.matches(role, ip, port))
            .map_or((Action::Sci, 0), |r| (r.action, r.line))
    }

    /// Whether a rule names this program other than through `*`.
    pub fn names(&self, comm: &[u8]) -> bool {
        self.iter()
            .any(|r| !r.program.any() && r.program.matches(comm))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "\
# preload.conf
tcp sshd
tcp *        connect 10.1.0.0/16  5432   # the database stays on TCP
sci redis-*
tcp *        listen  *            22
tcp curl     connect ::1          8000-8010
";

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn programs() {
        let r = Rules::parse(FILE.as_bytes()).unwrap();
        assert_eq!(r.iter().count(), 5);
        assert_eq!(r.program_verdict(b"sshd"), ProgramVerdict::Tcp(2));
        assert_eq!(r.program_verdict(b"sshd2"), ProgramVerdict::PerSocket);
        assert_eq!(
            r.program_verdict(b"redis-server"),
            ProgramVerdict::PerSocket
        );
        assert_eq!(Rules::default().program_verdict(b"x"), ProgramVerdict::Sci);
        let r = Rules::parse(b"sci redis-*\ntcp *\n").unwrap();
        assert_eq!(r.program_verdict(b"redis-server"), ProgramVerdict::Sci);
        assert_eq!(r.program_verdict(b"nginx"), ProgramVerdict::Tcp(2));
        assert!(r.names(b"redis-cli") && !r.names(b"nginx"));
    }

    #[test]
    fn sockets() {
        let r = Rules::parse(FILE.as_bytes()).unwrap();
        let c = Role::Connect;
        assert_eq!(r.decide(b"psql", c, ip("10.1.2.3"), 5432), (Action::Tcp, 3));
        assert_eq!(
            r.decide(b"psql", c, ip("::ffff:10.1.2.3"), 5432),
            (Action::Tcp, 3)
        );
        assert_eq!(r.decide(b"psql", c, ip("10.2.2.3"), 5432), (Action::Sci, 0));
        assert_eq!(r.decide(b"psql", c, ip("10.1.2.3"), 5433), (Action::Sci, 0));
        assert_eq!(
            r.decide(b"psql", Role::Listen, ip("10.1.2.3"), 5432),
            (Action::Sci, 0)
        );
        // The first match decides: redis-* is sci before the listen rule for port 22.
        assert_eq!(
            r.decide(b"redis-server", Role::Listen, ip("0.0.0.0"), 22),
            (Action::Sci, 4)
        );
        assert_eq!(
            r.decide(b"nginx", Role::Listen, ip("::"), 22),
            (Action::Tcp, 5)
        );
        assert_eq!(r.decide(b"curl", c, ip("::1"), 8005), (Action::Tcp, 6));
        assert_eq!(r.decide(b"curl", c, ip("::1"), 8011), (Action::Sci, 0));
        assert_eq!(
            r.decide(b"curl", c, ip("127.0.0.1"), 8005),
            (Action::Sci, 0)
        );
    }

    #[test]
    fn prefixes() {
        let r = Rules::parse(b"tcp * * 0.0.0.0/0\ntcp * * fd00::/8 1\n").unwrap();
        assert_eq!(
            r.decide(b"x", Role::Connect, ip("1.2.3.4"), 9),
            (Action::Tcp, 1)
        );
        assert_eq!(
            r.decide(b"x", Role::Connect, ip("fd12::1"), 1),
            (Action::Tcp, 2)
        );
        assert_eq!(
            r.decide(b"x", Role::Connect, ip("fe80::1"), 1),
            (Action::Sci, 0)
        );
        // An IPv4 prefix does not reach IPv6 addresses outside the mapped range.
        assert_eq!(
            r.decide(b"x", Role::Connect, ip("::1"), 9),
            (Action::Sci, 0)
        );
    }

    #[test]
    fn errors_name_line_and_word() {
        for (text, line, kind, word) in [
            ("tcp sshd\nuse x\n", 2, ErrorKind::Action, "use"),
            ("tcp\n", 1, ErrorKind::NoProgram, ""),
            (
                "tcp a-name-longer-than-15\n",
                1,
                ErrorKind::Program,
                "a-name-longer-than-15",
            ),
            ("tcp a*b\n", 1, ErrorKind::Program, "a*b"),
            ("tcp x conect\n", 1, ErrorKind::Role, "conect"),
            (
                "tcp x * 10.0.0.0/33\n",
                1,
                ErrorKind::Address,
                "10.0.0.0/33",
            ),
            ("tcp x * nowhere\n", 1, ErrorKind::Address, "nowhere"),
            ("tcp x * * 9-1\n", 1, ErrorKind::Port, "9-1"),
            ("tcp x * * 70000\n", 1, ErrorKind::Port, "70000"),
            ("tcp x * * 1 more\n", 1, ErrorKind::TooLong, "more"),
        ] {
            let e = Rules::parse(text.as_bytes()).unwrap_err();
            assert_eq!((e.line, e.kind, e.word), (line, kind, word), "{text:?}");
        }
        let many: [u8; 9 * (RULES_MAX + 1)] = {
            let mut b = [b'\n'; 9 * (RULES_MAX + 1)];
            for i in 0..=RULES_MAX {
                b[9 * i..9 * i + 8].copy_from_slice(b"tcp sshd");
            }
            b
        };
        let e = Rules::parse(&many).unwrap_err();
        assert_eq!((e.line, e.kind), (RULES_MAX as u32 + 1, ErrorKind::TooMany));
        assert_eq!(Rules::parse(b"\xff\n").unwrap_err().kind, ErrorKind::Text);
        assert_eq!(Rules::parse(b"").unwrap().iter().count(), 0);
    }
}
