//! The rules of `/etc/af_sci/preload.conf` in the process (`sci-preload-rules` parses
//! and matches them): read once at load time with this program's name, and applied by
//! the interposed `connect()` and `listen()` of a program whose rules depend on the
//! address or port (`ProgramState::PerSocket`): a socket the rules keep on TCP gets
//! `setsockopt(SOL_SCI, SCI_FABRIC, 0)` before the real call, so it connects or listens
//! as its native TCP socket (reason `opted-out`), with every option it was given.
//!
//! Environment: `SCI_PRELOAD_CONF=PATH` reads the rules from PATH instead (testing aid,
//! ignored in set-user-ID programs, as `SCI_FAMILY_FILE`). A missing file holds no rule;
//! a file with an error keeps every socket on TCP (an administrator's typo must not put
//! a program they meant to exclude on the fabric), and `SCI_DEBUG` says so.
//!
//! In the calls, as in `socket()`: no allocation and no lock, only system calls that are
//! async-signal-safe; `errno` is what the real call left.

use crate::policy::{Config, FamilyStatus};
use crate::policy::{LineBuf, ProgramState};
use crate::{env_path, errno, next_symbol, read_file, set_errno, write_stderr, STATE};
use core::ffi::{c_void, CStr};
use core::fmt::Write;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use core::sync::atomic::{AtomicPtr, Ordering};
use libc::{c_int, sockaddr, socklen_t};
use sci_preload_rules::{Action, ProgramVerdict, Role, Rules};
use std::sync::OnceLock;

/// Where the rules are.
pub const RULES_PATH: &CStr = c"/etc/af_sci/preload.conf";
/// The most bytes of a rule file read (64 rules of 255 bytes).
const FILE_MAX: usize = 16 * 1024;
/// `SOL_SCI` and `SCI_FABRIC` of `uapi/linux/af_sci.h`.
const SOL_SCI: c_int = 300;
const SCI_FABRIC: c_int = 4;

/// This program's rules and name, once read.
struct Loaded {
    rules: Rules,
    comm: [u8; 16],
    comm_len: usize,
}

static LOADED: OnceLock<Loaded> = OnceLock::new();
static REAL_CONNECT: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
static REAL_LISTEN: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());

type ConnectFn = unsafe extern "C" fn(c_int, *const sockaddr, socklen_t) -> c_int;
type ListenFn = unsafe extern "C" fn(c_int, c_int) -> c_int;

/// Reads the rules and this program's name, and says what they mean for it. Called once,
/// from the library's initialisation.
pub(crate) fn load(debug: bool) -> ProgramState {
    let saved = errno();
    let state = load_inner(debug);
    set_errno(saved);
    state
}

fn load_inner(debug: bool) -> ProgramState {
    REAL_CONNECT.store(
        next_symbol(c"connect", connect as ConnectFn as *mut c_void),
        Ordering::Release,
    );
    REAL_LISTEN.store(
        next_symbol(c"listen", listen as ListenFn as *mut c_void),
        Ordering::Release,
    );
    let mut comm = [0u8; 16];
    let comm_len = read_file(c"/proc/self/comm", &mut comm)
        .map(|n| comm[..n].strip_suffix(b"\n").map_or(n, <[u8]>::len))
        .unwrap_or(0);
    let path = env_path(c"SCI_PRELOAD_CONF").unwrap_or(RULES_PATH);
    let mut text = [0u8; FILE_MAX];
    let len = match read_file(path, &mut text) {
        Ok(len) if len == FILE_MAX => {
            say(
                debug,
                format_args!(
                    "{}: longer than {FILE_MAX} bytes; sockets stay AF_INET",
                    path.to_string_lossy()
                ),
            );
            return ProgramState::BadRules;
        }
        Ok(len) => len,
        Err(libc::ENOENT | libc::ENOTDIR) => 0,
        Err(e) => {
            say(
                debug,
                format_args!(
                    "{}: cannot be read (errno {e}); sockets stay AF_INET",
                    path.to_string_lossy()
                ),
            );
            return ProgramState::BadRules;
        }
    };
    let rules = match Rules::parse(&text[..len]) {
        Ok(rules) => rules,
        Err(e) => {
            say(
                debug,
                format_args!(
                    "{}:{}: {e}; sockets stay AF_INET",
                    path.to_string_lossy(),
                    e.line
                ),
            );
            return ProgramState::BadRules;
        }
    };
    let name = &comm[..comm_len];
    let state = match rules.program_verdict(name) {
        ProgramVerdict::Sci => ProgramState::Sci,
        ProgramVerdict::PerSocket => ProgramState::PerSocket,
        ProgramVerdict::Tcp(line) => {
            say(
                debug,
                format_args!(
                    "{}:{line} keeps the sockets of '{}' AF_INET",
                    path.to_string_lossy(),
                    String::from_utf8_lossy(name)
                ),
            );
            ProgramState::Tcp
        }
    };
    let _ = LOADED.set(Loaded {
        rules,
        comm,
        comm_len,
    });
    state
}

/// One `sci-preload: ...` line on stderr under `SCI_DEBUG`.
fn say(debug: bool, what: core::fmt::Arguments<'_>) {
    if debug {
        let mut line = LineBuf::new();
        let _ = write!(line, "sci-preload: {what}");
        write_stderr(line.finish());
    }
}

/// The address and port of a `sockaddr_in`/`sockaddr_in6` of `len` bytes.
///
/// # Safety
/// `addr` is null or valid for `len` bytes.
unsafe fn ip_port(addr: *const sockaddr, len: socklen_t) -> Option<(IpAddr, u16)> {
    if addr.is_null() || (len as usize) < core::mem::size_of::<libc::sa_family_t>() {
        return None;
    }
    // SAFETY: at least the family is there (checked above); reads are unaligned-safe.
    let family = unsafe { core::ptr::read_unaligned(core::ptr::addr_of!((*addr).sa_family)) };
    match c_int::from(family) {
        libc::AF_INET if len as usize >= core::mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: `len` covers a sockaddr_in.
            let a = unsafe { core::ptr::read_unaligned(addr.cast::<libc::sockaddr_in>()) };
            let ip = Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            Some((IpAddr::V4(ip), u16::from_be(a.sin_port)))
        }
        libc::AF_INET6 if len as usize >= core::mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: `len` covers a sockaddr_in6.
            let a = unsafe { core::ptr::read_unaligned(addr.cast::<libc::sockaddr_in6>()) };
            let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
            Some((IpAddr::V6(ip), u16::from_be(a.sin6_port)))
        }
        _ => None,
    }
}

/// Whether `fd` is an `AF_SCI` socket (of the family the library rewrites to).
fn is_sci(fd: c_int, cfg: &Config) -> bool {
    let FamilyStatus::Loaded(family) = cfg.family else {
        return false;
    };
    let mut domain: c_int = 0;
    let mut len = core::mem::size_of::<c_int>() as socklen_t;
    // SAFETY: `domain` and `len` are live and sized as passed.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_DOMAIN,
            core::ptr::from_mut(&mut domain).cast(),
            &mut len,
        )
    };
    r == 0 && domain == c_int::from(family)
}

/// Before `connect()` or `listen()` on `fd` to or at `ip:port`: a socket the rules keep
/// on TCP is told so. Leaves `errno` as it was.
fn apply(fd: c_int, role: Role, (ip, port): (IpAddr, u16), cfg: &Config) {
    let Some(l) = LOADED.get() else {
        return;
    };
    let (action, line) = l.rules.decide(&l.comm[..l.comm_len], role, ip, port);
    if action != Action::Tcp || !is_sci(fd, cfg) {
        return;
    }
    let off: c_int = 0;
    // SAFETY: `off` is a live c_int and its size is passed with it.
    unsafe {
        libc::setsockopt(
            fd,
            SOL_SCI,
            SCI_FABRIC,
            core::ptr::from_ref(&off).cast(),
            core::mem::size_of::<c_int>() as socklen_t,
        );
    }
    let what = match role {
        Role::Connect => "connect to",
        Role::Listen => "listen on",
    };
    say(
        cfg.debug,
        format_args!("fd {fd}: {what} {ip} port {port} stays TCP (preload.conf:{line})"),
    );
}

/// The configuration, when this program's connects and listens ask the rules.
fn per_socket() -> Option<Config> {
    let cfg = Config::decode(STATE.load(Ordering::Acquire))?;
    (cfg.program == ProgramState::PerSocket).then_some(cfg)
}

/// The interposed `connect(2)`.
///
/// # Safety
/// Same contract as `connect(2)`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    if let Some(cfg) = per_socket() {
        let saved = errno();
        // SAFETY: the caller passes `addr` valid for `len` bytes (connect's contract).
        if let Some(dest) = unsafe { ip_port(addr, len) } {
            apply(fd, Role::Connect, dest, &cfg);
        }
        set_errno(saved);
    }
    let real = REAL_CONNECT.load(Ordering::Acquire);
    if real.is_null() {
        // SAFETY: the raw system call with the caller's arguments.
        return unsafe { libc::syscall(libc::SYS_connect, fd, addr, len) as c_int };
    }
    // SAFETY: dlsym's `connect` has connect(2)'s prototype.
    let real = unsafe { core::mem::transmute::<*mut c_void, ConnectFn>(real) };
    // SAFETY: the caller's arguments, passed on.
    unsafe { real(fd, addr, len) }
}

/// The interposed `listen(2)`.
///
/// # Safety
/// Same contract as `listen(2)`.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn listen(fd: c_int, backlog: c_int) -> c_int {
    if let Some(cfg) = per_socket() {
        let saved = errno();
        // SAFETY: a zeroed sockaddr_storage is valid; getsockname fills at most `len`.
        let mut ss: libc::sockaddr_storage = unsafe { core::mem::zeroed() };
        let mut len = core::mem::size_of::<libc::sockaddr_storage>() as socklen_t;
        // SAFETY: `ss` and `len` are live and sized as passed.
        let r = unsafe { libc::getsockname(fd, core::ptr::from_mut(&mut ss).cast(), &mut len) };
        if r == 0 {
            // SAFETY: getsockname wrote `len` bytes of `ss` (at most its size).
            if let Some(at) = unsafe { ip_port(core::ptr::from_ref(&ss).cast(), len) } {
                apply(fd, Role::Listen, at, &cfg);
            }
        }
        set_errno(saved);
    }
    let real = REAL_LISTEN.load(Ordering::Acquire);
    if real.is_null() {
        // SAFETY: the raw system call with the caller's arguments.
        return unsafe { libc::syscall(libc::SYS_listen, fd, backlog) as c_int };
    }
    // SAFETY: dlsym's `listen` has listen(2)'s prototype.
    let real = unsafe { core::mem::transmute::<*mut c_void, ListenFn>(real) };
    // SAFETY: the caller's arguments, passed on.
    unsafe { real(fd, backlog) }
}
