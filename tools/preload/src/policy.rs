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
mod tests {
    use super::*;

    const TCP: c_int = libc::SOCK_STREAM;

    fn cfg(family: FamilyStatus) -> Config {
        Config {
            debug: false,
            disabled: false,
            family,
            program: ProgramState::Sci,
            dgram: false,
        }
    }

    // --- is_udp_socket -----------------------------------------------------

    #[test]
    fn inet_datagram_sockets_of_protocol_0_or_udp_are_udp() {
        let dgram = libc::SOCK_DGRAM;
        assert!(is_udp_socket(libc::AF_INET, dgram, 0));
        assert!(is_udp_socket(
            libc::AF_INET6,
            dgram | libc::SOCK_CLOEXEC,
            libc::IPPROTO_UDP
        ));
        assert!(!is_udp_socket(libc::AF_INET, dgram, libc::IPPROTO_UDPLITE));
        assert!(!is_udp_socket(libc::AF_UNIX, dgram, 0));
        assert!(!is_udp_socket(libc::AF_INET, TCP, 0));
    }

    #[test]
    fn udp_sockets_are_rewritten_only_with_sci_dgram() {
        let c = cfg(FamilyStatus::Loaded(27));
        assert_eq!(
            target_family(&c, libc::AF_INET, libc::SOCK_DGRAM, 0),
            Err(Keep::NotTcp)
        );
        let c = Config { dgram: true, ..c };
        assert_eq!(
            target_family(&c, libc::AF_INET, libc::SOCK_DGRAM, 0),
            Ok(27)
        );
        let c = Config {
            program: ProgramState::Tcp,
            ..c
        };
        assert_eq!(
            target_family(&c, libc::AF_INET6, libc::SOCK_DGRAM, 0),
            Err(Keep::Rule)
        );
    }

    // --- is_tcp_socket -----------------------------------------------------

    #[test]
    fn inet_and_inet6_stream_sockets_are_tcp() {
        assert!(is_tcp_socket(libc::AF_INET, TCP, 0));
        assert!(is_tcp_socket(libc::AF_INET6, TCP, 0));
        assert!(is_tcp_socket(libc::AF_INET, TCP, libc::IPPROTO_TCP));
        assert!(is_tcp_socket(libc::AF_INET6, TCP, libc::IPPROTO_TCP));
    }

    #[test]
    fn nonblock_and_cloexec_flags_do_not_hide_a_stream_socket() {
        assert!(is_tcp_socket(libc::AF_INET, TCP | libc::SOCK_NONBLOCK, 0));
        assert!(is_tcp_socket(libc::AF_INET, TCP | libc::SOCK_CLOEXEC, 0));
        assert!(is_tcp_socket(
            libc::AF_INET6,
            TCP | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            6
        ));
    }

    #[test]
    fn udp_raw_and_seqpacket_sockets_are_not_tcp() {
        assert!(!is_tcp_socket(libc::AF_INET, libc::SOCK_DGRAM, 0));
        assert!(!is_tcp_socket(
            libc::AF_INET6,
            libc::SOCK_DGRAM,
            libc::IPPROTO_UDP
        ));
        assert!(!is_tcp_socket(
            libc::AF_INET,
            libc::SOCK_RAW,
            libc::IPPROTO_TCP
        ));
        assert!(!is_tcp_socket(libc::AF_INET, libc::SOCK_SEQPACKET, 0));
    }

    #[test]
    fn stream_sockets_with_other_protocols_are_not_tcp() {
        // MPTCP and SCTP stream sockets must stay what they are.
        assert!(!is_tcp_socket(libc::AF_INET, TCP, libc::IPPROTO_MPTCP));
        assert!(!is_tcp_socket(libc::AF_INET6, TCP, libc::IPPROTO_SCTP));
        assert!(!is_tcp_socket(libc::AF_INET, TCP, libc::IPPROTO_UDP));
    }

    #[test]
    fn other_families_are_not_tcp() {
        assert!(!is_tcp_socket(libc::AF_UNIX, TCP, 0));
        assert!(!is_tcp_socket(libc::AF_NETLINK, libc::SOCK_RAW, 0));
        assert!(!is_tcp_socket(libc::AF_PACKET, TCP, 0));
        assert!(!is_tcp_socket(27, TCP, 0));
    }

    #[test]
    fn unknown_type_flags_are_not_masked_away() {
        // Only SOCK_NONBLOCK and SOCK_CLOEXEC are ignored.
        assert!(!is_tcp_socket(libc::AF_INET, TCP | 0x100, 0));
    }

    // --- target_family -----------------------------------------------------

    #[test]
    fn tcp_socket_is_rewritten_to_the_loaded_family() {
        let c = cfg(FamilyStatus::Loaded(27));
        assert_eq!(target_family(&c, libc::AF_INET, TCP, 0), Ok(27));
        assert_eq!(
            target_family(&c, libc::AF_INET6, TCP | libc::SOCK_CLOEXEC, 6),
            Ok(27)
        );
    }

    #[test]
    fn non_tcp_socket_is_kept_silently_even_when_loaded() {
        let c = cfg(FamilyStatus::Loaded(27));
        assert_eq!(
            target_family(&c, libc::AF_INET, libc::SOCK_DGRAM, 0),
            Err(Keep::NotTcp)
        );
        assert_eq!(Keep::NotTcp.notice(), None);
    }

    #[test]
    fn the_rules_keep_a_program_on_tcp_or_let_it_through() {
        let with = |program| Config {
            program,
            ..cfg(FamilyStatus::Loaded(27))
        };
        assert_eq!(
            target_family(&with(ProgramState::Tcp), libc::AF_INET, TCP, 0),
            Err(Keep::Rule)
        );
        assert_eq!(
            target_family(&with(ProgramState::BadRules), libc::AF_INET6, TCP, 0),
            Err(Keep::BadRules)
        );
        for program in [ProgramState::Sci, ProgramState::PerSocket] {
            assert_eq!(target_family(&with(program), libc::AF_INET, TCP, 0), Ok(27));
        }
        assert!(Keep::Rule.notice().unwrap().contains("preload.conf"));
        assert!(Keep::BadRules
            .notice()
            .unwrap()
            .contains("scictl load --check"));
    }

    #[test]
    fn disable_wins_over_a_loaded_module() {
        let c = Config {
            debug: true,
            disabled: true,
            family: FamilyStatus::Loaded(27),
            program: ProgramState::Sci,
            dgram: true,
        };
        assert_eq!(
            target_family(&c, libc::AF_INET, TCP, 0),
            Err(Keep::Disabled)
        );
    }

    #[test]
    fn missing_family_file_keeps_sockets_and_says_not_loaded() {
        let c = cfg(FamilyStatus::Missing);
        assert_eq!(
            target_family(&c, libc::AF_INET, TCP, 0),
            Err(Keep::NotLoaded)
        );
        assert_eq!(
            Keep::NotLoaded.notice(),
            Some("sci-preload: af_sci module not loaded; sockets stay AF_INET\n")
        );
    }

    #[test]
    fn unreadable_or_invalid_family_file_keeps_sockets() {
        assert_eq!(
            target_family(&cfg(FamilyStatus::Unreadable), libc::AF_INET, TCP, 0),
            Err(Keep::Unreadable)
        );
        assert_eq!(
            target_family(&cfg(FamilyStatus::Invalid), libc::AF_INET6, TCP, 0),
            Err(Keep::Invalid)
        );
    }

    #[test]
    fn every_keep_reason_but_not_tcp_has_a_single_line_notice() {
        for k in [
            Keep::Disabled,
            Keep::NotLoaded,
            Keep::Unreadable,
            Keep::Invalid,
        ] {
            let n = k.notice().expect("notice");
            assert!(n.starts_with("sci-preload: "), "{n:?}");
            assert!(n.ends_with('\n'), "{n:?}");
            assert_eq!(n.matches('\n').count(), 1, "{n:?}");
        }
    }

    // --- parse_family ------------------------------------------------------

    #[test]
    fn parse_family_accepts_kernel_format_with_newline() {
        assert_eq!(parse_family(b"27\n"), Some(27));
        assert_eq!(parse_family(b"10\n"), Some(10));
    }

    #[test]
    fn parse_family_accepts_number_without_newline() {
        assert_eq!(parse_family(b"27"), Some(27));
    }

    #[test]
    fn parse_family_accepts_range_bounds() {
        assert_eq!(parse_family(b"1\n"), Some(1));
        assert_eq!(parse_family(b"255\n"), Some(255));
    }

    #[test]
    fn parse_family_rejects_out_of_range_values() {
        assert_eq!(parse_family(b"0\n"), None);
        assert_eq!(parse_family(b"256\n"), None);
        assert_eq!(parse_family(b"65535\n"), None);
        assert_eq!(parse_family(b"4294967296\n"), None);
        assert_eq!(parse_family(b"99999999999999999999\n"), None);
    }

    #[test]
    fn parse_family_rejects_empty_text() {
        assert_eq!(parse_family(b""), None);
        assert_eq!(parse_family(b"\n"), None);
    }

    #[test]
    fn parse_family_rejects_signs_spaces_and_garbage() {
        for text in [
            &b"-27\n"[..],
            b"+27\n",
            b" 27\n",
            b"27 \n",
            b"27\n\n",
            b"27\r\n",
            b"0x1b\n",
            b"27abc",
            b"twenty-seven\n",
            b"2\x007\n",
            b"\xff\xfe",
        ] {
            assert_eq!(parse_family(text), None, "{text:?}");
        }
    }

    #[test]
    fn parse_family_tolerates_leading_zeros() {
        assert_eq!(parse_family(b"027\n"), Some(27));
    }

    // --- env_flag ----------------------------------------------------------

    #[test]
    fn env_flag_is_on_for_one_and_other_non_empty_values() {
        assert!(env_flag(Some(b"1")));
        assert!(env_flag(Some(b"yes")));
    }

    #[test]
    fn env_flag_is_off_when_unset_empty_or_zero() {
        assert!(!env_flag(None));
        assert!(!env_flag(Some(b"")));
        assert!(!env_flag(Some(b"0")));
    }

    // --- Config encoding ---------------------------------------------------

    #[test]
    fn config_round_trips_through_its_state_word() {
        for family in [
            FamilyStatus::Loaded(1),
            FamilyStatus::Loaded(27),
            FamilyStatus::Loaded(255),
            FamilyStatus::Missing,
            FamilyStatus::Unreadable,
            FamilyStatus::Invalid,
        ] {
            for debug in [false, true] {
                for disabled in [false, true] {
                    for program in [
                        ProgramState::Sci,
                        ProgramState::PerSocket,
                        ProgramState::Tcp,
                        ProgramState::BadRules,
                    ] {
                        for dgram in [false, true] {
                            let c = Config {
                                debug,
                                disabled,
                                family,
                                program,
                                dgram,
                            };
                            let word = c.encode();
                            assert_ne!(word, 0, "{c:?}");
                            assert_eq!(Config::decode(word), Some(c));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn zero_state_word_means_not_initialised() {
        assert_eq!(Config::decode(0), None);
    }

    // --- debug lines ---------------------------------------------------------

    #[test]
    fn rewritten_line_names_fd_and_both_families() {
        let mut b = LineBuf::new();
        rewritten_line(&mut b, 5, libc::AF_INET, 27);
        assert_eq!(
            b.finish(),
            b"sci-preload: fd 5: family 2 (AF_INET) -> 27 (AF_SCI)\n"
        );
    }

    #[test]
    fn fallback_line_names_fd_and_kept_family() {
        let mut b = LineBuf::new();
        fallback_line(&mut b, 7, libc::AF_INET6, 27);
        let line = core::str::from_utf8(b.finish()).unwrap();
        assert!(line.contains("fd 7: family 10 (AF_INET6) kept"), "{line}");
        assert_eq!(line.matches('\n').count(), 1);
    }

    #[test]
    fn failed_line_names_errno() {
        let mut b = LineBuf::new();
        failed_line(&mut b, libc::AF_INET, 27, libc::EMFILE);
        let line = core::str::from_utf8(b.finish()).unwrap();
        assert!(
            line.ends_with(&format!("errno {}\n", libc::EMFILE)),
            "{line}"
        );
    }

    #[test]
    fn line_buf_truncates_long_text_and_still_ends_in_newline() {
        use core::fmt::Write;
        let mut b = LineBuf::new();
        for _ in 0..100 {
            b.write_str("0123456789").unwrap();
        }
        assert_eq!(b.as_bytes().len(), LineBuf::CAPACITY);
        let line = b.finish();
        assert_eq!(line.len(), LineBuf::CAPACITY);
        assert_eq!(line.last(), Some(&b'\n'));
    }

    #[test]
    fn line_buf_finish_adds_exactly_one_newline() {
        use core::fmt::Write;
        let mut b = LineBuf::new();
        b.write_str("x\n").unwrap();
        assert_eq!(b.finish(), b"x\n");
        let mut e = LineBuf::new();
        assert_eq!(e.finish(), b"\n");
    }
}
