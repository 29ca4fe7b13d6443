//! Pure, safe decision logic of the preload shim.
//!
//! Nothing in here touches the process: no system calls, no allocation, no
//! locks. `lib.rs` feeds it what it read from the environment and sysfs and
//! acts on the answers. Everything here is covered by `cargo test`.

use core::fmt;
use libc::c_int;

/// Smallest and largest family number accepted from the sysfs file.
/// `sa_family_t` is 16 bits, but Linux keeps `AF_MAX` well below 256 and the
/// state word below stores the number in 8 bits.
pub const FAMILY_MIN: u32 = 1;
/// See [`FAMILY_MIN`].
pub const FAMILY_MAX: u32 = 255;

/// What the sysfs family file said, or why it said nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FamilyStatus {
    /// The module is loaded and registered this family number.
    Loaded(u8),
    /// The file does not exist: the af_sci module is not loaded.
    Missing,
    /// The file exists but could not be opened or read.
    Unreadable,
    /// The file was read but does not hold a number in `1..=255`.
    Invalid,
}

/// What the rules of `preload.conf` say about this program (`rules.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgramState {
    /// Its TCP sockets become `AF_SCI` (no rule, or a rule for all of it).
    Sci,
    /// Its TCP sockets become `AF_SCI`, and each connect and listen asks the rules.
    PerSocket,
    /// A rule keeps all its sockets on TCP.
    Tcp,
    /// The rule file has an error: every socket stays TCP.
    BadRules,
}

/// Everything the hot path needs, decided once per process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// `SCI_DEBUG` is set: print what the shim does on stderr.
    pub debug: bool,
    /// `SCI_DISABLE` is set: never rewrite.
    pub disabled: bool,
    /// What the family file said (`Missing` when not read because disabled).
    pub family: FamilyStatus,
    /// What the rules say about this program.
    pub program: ProgramState,
    /// UDP sockets become `AF_SCI` datagram sockets too (`SCI_DGRAM`, on unless `0`).
    pub dgram: bool,
}

const STATE_READY: u32 = 1 << 31;
const STATE_DEBUG: u32 = 1 << 8;
const STATE_DISABLED: u32 = 1 << 9;
const STATE_FAMILY_SHIFT: u32 = 10;
const STATE_FAMILY_MASK: u32 = 0b11 << STATE_FAMILY_SHIFT;
const FAMILY_LOADED: u32 = 0;
const FAMILY_MISSING: u32 = 1;
const FAMILY_UNREADABLE: u32 = 2;
const FAMILY_INVALID: u32 = 3;
const STATE_PROGRAM_SHIFT: u32 = 12;
const STATE_PROGRAM_MASK: u32 = 0b11 << STATE_PROGRAM_SHIFT;
const STATE_DGRAM: u32 = 1 << 14;

impl Config {
    /// Packs the configuration into one non-zero word, so that it can be
    /// published with a single atomic store (0 means "not initialised yet").
    pub fn encode(self) -> u32 {
        let (kind, number) = match self.family {
            FamilyStatus::Loaded(n) => (FAMILY_LOADED, u32::from(n)),
            FamilyStatus::Missing => (FAMILY_MISSING, 0),
            FamilyStatus::Unreadable => (FAMILY_UNREADABLE, 0),
            FamilyStatus::Invalid => (FAMILY_INVALID, 0),
        };
        let program = match self.program {
            ProgramState::Sci => 0,
            ProgramState::PerSocket => 1,
            ProgramState::Tcp => 2,
            ProgramState::BadRules => 3,
        };
        let mut word =
            STATE_READY | number | (kind << STATE_FAMILY_SHIFT) | (program << STATE_PROGRAM_SHIFT);
        if self.debug {
            word |= STATE_DEBUG;
        }
        if self.disabled {
            word |= STATE_DISABLED;
        }
        if self.dgram {
            word |= STATE_DGRAM;
        }
        word
    }

    /// Inverse of [`Config::encode`]; `None` for the "not initialised" word.
    pub fn decode(word: u32) -> Option<Config> {
        if word & STATE_READY == 0 {
            return None;
        }
        let number = (word & 0xff) as u8;
        let family = match (word & STATE_FAMILY_MASK) >> STATE_FAMILY_SHIFT {
            FAMILY_LOADED => FamilyStatus::Loaded(number),
            FAMILY_MISSING => FamilyStatus::Missing,
            FAMILY_UNREADABLE => FamilyStatus::Unreadable,
            _ => FamilyStatus::Invalid,
        };
        let program = match (word & STATE_PROGRAM_MASK) >> STATE_PROGRAM_SHIFT {
            0 => ProgramState::Sci,
            1 => ProgramState::PerSocket,
            2 => ProgramState::Tcp,
            _ => ProgramState::BadRules,
        };
        Some(Config {
            debug: word & STATE_DEBUG != 0,
            disabled: word & STATE_DISABLED != 0,
            family,
            program,
            dgram: word & STATE_DGRAM != 0,
        })
    }
}

/// Is this `socket(domain, type, protocol)` call a TCP socket that AF_SCI
/// can stand in for?
pub fn is_tcp_socket(domain: c_int, ty: c_int, protocol: c_int) -> bool {
    let inet = domain == libc::AF_INET || domain == libc::AF_INET6;
    let stream = ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) == libc::SOCK_STREAM;
    let tcp = protocol == 0 || protocol == libc::IPPROTO_TCP;
    inet && stream && tcp
}

/// Is this `socket(domain, type, protocol)` call a UDP socket that an `AF_SCI` datagram
/// socket can stand in for?
pub fn is_udp_socket(domain: c_int, ty: c_int, protocol: c_int) -> bool {
    let inet = domain == libc::AF_INET || domain == libc::AF_INET6;
    let dgram = ty & !(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC) == libc::SOCK_DGRAM;
    let udp = protocol == 0 || protocol == libc::IPPROTO_UDP;
    inet && dgram && udp
}

/// Why a socket call is left as it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    /// Not a TCP socket (nor, with `SCI_DGRAM`, a UDP one): nothing to do, nothing to say.
    NotTcp,
    /// `SCI_DISABLE` is set.
    Disabled,
    /// The af_sci module is not loaded.
    NotLoaded,
    /// The family file could not be read.
    Unreadable,
    /// The family file holds garbage.
    Invalid,
    /// A rule of `preload.conf` keeps this program's sockets on TCP.
    Rule,
    /// `preload.conf` has an error.
    BadRules,
}

impl Keep {
    /// The one-per-process line printed under `SCI_DEBUG` for this reason,
    /// or `None` when the reason is not worth a line.
    pub fn notice(self) -> Option<&'static str> {
        match self {
            Keep::NotTcp => None,
            Keep::Disabled => Some("sci-preload: disabled by SCI_DISABLE; sockets stay AF_INET\n"),
            Keep::NotLoaded => {
                Some("sci-preload: af_sci module not loaded; sockets stay AF_INET\n")
            }
            Keep::Unreadable => {
                Some("sci-preload: cannot read the af_sci family file; sockets stay AF_INET\n")
            }
            Keep::Invalid => Some(
                "sci-preload: af_sci family file holds no valid family; sockets stay AF_INET\n",
            ),
            Keep::Rule => Some(
                "sci-preload: a rule of preload.conf keeps this program's sockets AF_INET\n",
            ),
            Keep::BadRules => Some(
                "sci-preload: preload.conf has an error (scictl load --check names it); sockets stay AF_INET\n",
            ),
        }
    }
}

/// The family to create this socket with, or why the call is left alone.
pub fn target_family(
    cfg: &Config,
    domain: c_int,
    ty: c_int,
    protocol: c_int,
) -> Result<c_int, Keep> {
    let udp = cfg.dgram && is_udp_socket(domain, ty, protocol);
    if !is_tcp_socket(domain, ty, protocol) && !udp {
        return Err(Keep::NotTcp);
    }
    if cfg.disabled {
        return Err(Keep::Disabled);
    }
    match cfg.family {
        FamilyStatus::Loaded(_) if cfg.program == ProgramState::Tcp => Err(Keep::Rule),
        FamilyStatus::Loaded(_) if cfg.program == ProgramState::BadRules => Err(Keep::BadRules),
        FamilyStatus::Loaded(n) => Ok(c_int::from(n)),
        FamilyStatus::Missing => Err(Keep::NotLoaded),
        FamilyStatus::Unreadable => Err(Keep::Unreadable),
        FamilyStatus::Invalid => Err(Keep::Invalid),
    }
}

/// Parses the contents of `/sys/module/af_sci/parameters/family`: a decimal
/// number in `1..=255`, optionally followed by one newline (as the kernel
/// prints it). Anything else — signs, spaces, empty text, other bytes, values
/// out of range — is rejected.
pub fn parse_family(text: &[u8]) -> Option<u8> {
    let digits = text.strip_suffix(b"\n").unwrap_or(text);
    if digits.is_empty() || digits.len() > 10 {
        return None;
    }
    let mut value: u32 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u32::from(b - b'0'))?;
    }
    if (FAMILY_MIN..=FAMILY_MAX).contains(&value) {
        u8::try_from(value).ok()
    } else {
        None
    }
}

/// Interprets a boolean environment variable (`SCI_DEBUG`, `SCI_DISABLE`):
/// set to anything but the empty string or `0` means on.
pub fn env_flag(value: Option<&[u8]>) -> bool {
    matches!(value, Some(v) if !v.is_empty() && v != b"0")
}

/// Symbolic name of the families the shim rewrites, for debug lines.
pub fn family_name(domain: c_int) -> &'static str {
    match domain {
        libc::AF_INET => "AF_INET",
        libc::AF_INET6 => "AF_INET6",
        _ => "?",
    }
}

/// A fixed-size line buffer implementing `fmt::Write`, so that debug lines
/// can be formatted without allocating. Text past the capacity is dropped,
/// but the buffer always ends in a newline once [`LineBuf::finish`] is called.
pub struct LineBuf {
    buf: [u8; LineBuf::CAPACITY],
    len: usize,
}

impl LineBuf {
    /// Bytes a line may hold, newline included.
    pub const CAPACITY: usize = 192;

    /// An empty line.
    pub const fn new() -> Self {
        LineBuf {
            buf: [0; LineBuf::CAPACITY],
            len: 0,
        }
    }

    /// Makes the text end in exactly one newline (replacing the last byte if
    /// full) and returns it.
    pub fn finish(&mut self) -> &[u8] {
        if self.len == 0 || self.buf[self.len - 1] != b'\n' {
            if self.len == Self::CAPACITY {
                self.len -= 1;
            }
            self.buf[self.len] = b'\n';
            self.len += 1;
        }
        &self.buf[..self.len]
    }

    /// The text so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Default for LineBuf {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Write for LineBuf {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = Self::CAPACITY - self.len;
        let n = s.len().min(room);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// Debug line for a socket that was created as AF_SCI.
pub fn rewritten_line(out: &mut LineBuf, fd: c_int, domain: c_int, family: c_int) {
    use fmt::Write;
    let _ = write!(
        out,
        "sci-preload: fd {fd}: family {domain} ({}) -> {family} (AF_SCI)",
        family_name(domain)
    );
}

/// Debug line for a socket whose AF_SCI creation failed with
/// EAFNOSUPPORT and that was created with its own family instead.
pub fn fallback_line(out: &mut LineBuf, fd: c_int, domain: c_int, family: c_int) {
    use fmt::Write;
    let _ = write!(
        out,
        "sci-preload: family {family} (AF_SCI) not supported (module unloaded?); \
         fd {fd}: family {domain} ({}) kept",
        family_name(domain)
    );
}

/// Debug line for an AF_SCI socket call that failed for another reason
/// (the error is returned to the program as it is).
pub fn failed_line(out: &mut LineBuf, domain: c_int, family: c_int, errno: c_int) {
    use fmt::Write;
    let _ = write!(
        out,
        "sci-preload: socket(family {family} (AF_SCI), for {}) failed: errno {errno}",
        family_name(domain)
    );
}

#[cfg(test)]
mod tests;
