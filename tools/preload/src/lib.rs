//! sci-preload: an `LD_PRELOAD` shim that makes TCP sockets AF_SCI sockets.
//!
//! The shim exports `socket()`. A call for a TCP socket
//! (`AF_INET`/`AF_INET6`, `SOCK_STREAM` with optional `SOCK_NONBLOCK` /
//! `SOCK_CLOEXEC`, protocol 0 or `IPPROTO_TCP`) is passed to the real
//! `socket()` with the domain replaced by the AF_SCI family number that the
//! loaded af_sci module publishes in `/sys/module/af_sci/parameters/family`.
//! AF_SCI sockets take `sockaddr_in`/`sockaddr_in6` and behave like TCP, so
//! the program does not notice. Every other call is passed on untouched.
//!
//! Environment (read once, when the library is loaded):
//! - `SCI_DISABLE=1`: never rewrite.
//! - `SCI_DGRAM=0`: UDP sockets (`SOCK_DGRAM`, protocol 0 or `IPPROTO_UDP`) stay UDP.
//!   By default (unset, or any other value but empty) they become `AF_SCI` datagram
//!   sockets too, whose datagrams to other `AF_SCI` datagram sockets take implicit SCI
//!   connections (`Documentation/af_sci.rst`, "Datagram sockets"). A rule of
//!   `preload.conf` that keeps a whole program on TCP keeps its UDP sockets too.
//! - `SCI_DEBUG=1`: one stderr line per rewritten socket, and one per process
//!   when sockets stay as they are (module not loaded, disabled, …).
//! - `SCI_FAMILY_FILE=PATH`: testing aid, read the family number from PATH
//!   instead of sysfs. Ignored in set-user-ID/set-group-ID programs.
//! - `SCI_PRELOAD_CONF=PATH`: testing aid, the rules of `/etc/af_sci/preload.conf`
//!   from PATH instead (`rules.rs`: which programs, addresses and ports stay TCP).
//!
//! Safety in arbitrary processes: the real `socket` is looked up and the
//! environment and family file are read once, from an ELF constructor (or the
//! first `socket()` call if some other constructor calls it earlier). After
//! that the hot path is an atomic load plus the real call: no allocation, no
//! locks, only async-signal-safe calls (`socket`, `write`), so it may run in
//! signal handlers and in many threads at once. `errno` is what the real
//! call left.
//!
//! The pure decision logic lives in [`policy`] and is unit tested.
//!
//! Do not link this crate into a program (as a dependency of another
//! workspace member): outside of its own unit tests it defines `socket`, which
//! would then interpose that program's own socket calls.

pub mod policy;
mod rules;

use core::ffi::{c_void, CStr};
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, Ordering};
use libc::c_int;
use policy::{Config, FamilyStatus, LineBuf, ProgramState};

/// Where the loaded af_sci module publishes its family number
/// (`AF_SCI_FAMILY_PATH` of `uapi/linux/af_sci.h`).
pub const FAMILY_PATH: &CStr = c"/sys/module/af_sci/parameters/family";

/// Signature of `socket(2)`.
pub type SocketFn = unsafe extern "C" fn(c_int, c_int, c_int) -> c_int;

/// The next `socket` in symbol lookup order (libc's), or null before init /
/// when it could not be found (then the raw system call is used).
static REAL_SOCKET: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());

/// [`Config::encode`]d configuration; 0 until initialised.
static STATE: AtomicU32 = AtomicU32::new(0);

/// Set once the per-process "sockets stay as they are" line was printed.
static NOTICE_DONE: AtomicBool = AtomicBool::new(false);

/// Reads the calling thread's `errno`.
fn errno() -> c_int {
    // SAFETY: __errno_location() always returns a valid pointer to the calling
    // thread's errno.
    unsafe { *libc::__errno_location() }
}

/// Sets the calling thread's `errno`.
fn set_errno(value: c_int) {
    // SAFETY: as in errno(); the location is writable and thread-local.
    unsafe { *libc::__errno_location() = value }
}

/// Writes `bytes` to stderr with one `write(2)`, leaving `errno` as it was.
/// Async-signal-safe; errors are ignored (a debug line is not worth failing
/// a socket call for).
fn write_stderr(bytes: &[u8]) {
    let saved = errno();
    // SAFETY: bytes is a valid, initialised buffer of bytes.len() bytes for the
    // duration of the call; write() does not keep the pointer.
    unsafe {
        libc::write(libc::STDERR_FILENO, bytes.as_ptr().cast(), bytes.len());
    }
    set_errno(saved);
}

/// Reads a boolean environment variable through libc's `getenv` (off when unset).
fn getenv_flag(name: &CStr) -> bool {
    getenv_flag_or(name, false)
}

/// Reads a boolean environment variable through libc's `getenv`, `default` when unset.
fn getenv_flag_or(name: &CStr, default: bool) -> bool {
    // SAFETY: name is NUL-terminated. getenv returns null or a pointer to a
    // NUL-terminated string in the environment, which we only read right away.
    let value = unsafe { libc::getenv(name.as_ptr()) };
    if value.is_null() {
        return default;
    }
    // SAFETY: value is non-null and points to a NUL-terminated string (above).
    let bytes = unsafe { CStr::from_ptr(value) }.to_bytes();
    policy::env_flag(Some(bytes))
}

/// True when the process runs with elevated privileges (set-user-ID etc.), in
/// which case testing overrides from the environment are ignored.
fn secure_mode() -> bool {
    // SAFETY: getauxval has no preconditions; it returns 0 for unknown types.
    unsafe { libc::getauxval(libc::AT_SECURE) != 0 }
}

/// The path a testing-aid variable names (`SCI_FAMILY_FILE`, `SCI_PRELOAD_CONF`), or
/// `None` when it is unset, empty, or the process runs in secure mode.
fn env_path(name: &CStr) -> Option<&'static CStr> {
    if secure_mode() {
        return None;
    }
    // SAFETY: the name is NUL-terminated; getenv returns null or a NUL-terminated
    // string of the environment, which lives as long as the process leaves it.
    let value = unsafe { libc::getenv(name.as_ptr()) };
    if value.is_null() {
        return None;
    }
    // SAFETY: non-null and NUL-terminated (above).
    let path = unsafe { CStr::from_ptr(value) };
    (!path.is_empty()).then_some(path)
}

/// Reads up to `buf.len()` bytes of `path` with raw `open`/`read`/`close`
/// (async-signal-safe, no allocation): how many (`buf.len()` when the file is
/// longer), or the `errno` of the `open` or `read` that failed.
fn read_file(path: &CStr, buf: &mut [u8]) -> Result<usize, c_int> {
    // SAFETY: path is NUL-terminated; open() does not keep the pointer.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOCTTY,
        )
    };
    if fd < 0 {
        return Err(errno());
    }
    let mut len = 0usize;
    let mut failed = None;
    while len < buf.len() {
        let rest = &mut buf[len..];
        // SAFETY: rest is a valid writable buffer of rest.len() bytes; fd is
        // an open descriptor owned by this function.
        let n = unsafe { libc::read(fd, rest.as_mut_ptr().cast(), rest.len()) };
        if n > 0 {
            len += n as usize;
        } else if n == 0 {
            break;
        } else if errno() != libc::EINTR {
            failed = Some(errno());
            break;
        }
    }
    // SAFETY: fd was opened above and is closed exactly once.
    unsafe {
        libc::close(fd);
    }
    failed.map_or(Ok(len), Err)
}

/// Reads and parses the family file at `path`. `errno` is left as it was.
pub fn read_family_file(path: &CStr) -> FamilyStatus {
    let saved = errno();
    // One byte more than any valid text ("255\n"), so longer text is caught.
    let mut buf = [0u8; 16];
    let status = match read_file(path, &mut buf) {
        Err(libc::ENOENT | libc::ENOTDIR) => FamilyStatus::Missing,
        Err(_) => FamilyStatus::Unreadable,
        Ok(len) if len == buf.len() => FamilyStatus::Invalid,
        Ok(len) => match policy::parse_family(&buf[..len]) {
            Some(n) => FamilyStatus::Loaded(n),
            None => FamilyStatus::Invalid,
        },
    };
    set_errno(saved);
    status
}

/// The family, from `SCI_FAMILY_FILE` (testing aid, not honoured in secure
/// mode) or the sysfs path.
fn read_configured_family() -> FamilyStatus {
    read_family_file(env_path(c"SCI_FAMILY_FILE").unwrap_or(FAMILY_PATH))
}

/// The next definition of `name` in symbol lookup order (libc's), or null when
/// there is none or it is `ours` (this object is not a preload): the caller then
/// makes the raw system call.
fn next_symbol(name: &CStr, ours: *mut c_void) -> *mut c_void {
    // SAFETY: RTLD_NEXT with a NUL-terminated symbol name is a valid dlsym
    // lookup; the result is only compared and returned.
    let real = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    if real == ours {
        core::ptr::null_mut()
    } else {
        real
    }
}

/// Looks up the real `socket` and reads the configuration, then publishes
/// both. Idempotent: racing callers compute the same values.
fn init() -> Config {
    let saved = errno();
    let real = next_symbol(c"socket", socket as SocketFn as *mut c_void);
    REAL_SOCKET.store(real, Ordering::Release);

    let disabled = getenv_flag(c"SCI_DISABLE");
    let debug = getenv_flag(c"SCI_DEBUG");
    // UDP sockets too unless SCI_DGRAM=0 (or empty) says otherwise.
    let dgram = getenv_flag_or(c"SCI_DGRAM", true);
    let family = if disabled {
        FamilyStatus::Missing
    } else {
        read_configured_family()
    };
    let program = if disabled {
        ProgramState::Sci
    } else {
        rules::load(debug)
    };
    let cfg = Config {
        debug,
        disabled,
        family,
        program,
        dgram,
    };
    STATE.store(cfg.encode(), Ordering::Release);
    set_errno(saved);
    cfg
}

/// The configuration, initialising on first use.
fn config() -> Config {
    match Config::decode(STATE.load(Ordering::Acquire)) {
        Some(cfg) => cfg,
        None => init(),
    }
}

/// `socket(2)` without going through any interposed symbol.
unsafe extern "C" fn raw_socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    // SAFETY: the socket system call takes three integers and touches no
    // user memory.
    unsafe { libc::syscall(libc::SYS_socket, domain, ty, protocol) as c_int }
}

/// The real `socket` found at init, or [`raw_socket`].
fn real_socket() -> SocketFn {
    let p = REAL_SOCKET.load(Ordering::Acquire);
    if p.is_null() {
        raw_socket
    } else {
        // SAFETY: p is non-null and was returned by dlsym for "socket", whose
        // C prototype is int socket(int, int, int), i.e. SocketFn.
        unsafe { core::mem::transmute::<*mut c_void, SocketFn>(p) }
    }
}

/// Settles a new `AF_SCI` socket on the address family the program asked
/// for; on failure it has closed `fd`. Injected so tests need no module.
pub type SettleFn = unsafe fn(fd: c_int, domain: c_int) -> bool;

/// `SOL_SCI` and `SCI_NATIVE_FAMILY` of `uapi/linux/af_sci.h`.
const SOL_SCI: c_int = 300;
const SCI_NATIVE_FAMILY: c_int = 2;

/// The real [`SettleFn`]: an `AF_SCI` socket is born `AF_INET`, so a program
/// that asked for `AF_INET6` gets `setsockopt(SOL_SCI, SCI_NATIVE_FAMILY)`.
///
/// # Safety
/// `fd` is a socket this call may close.
unsafe fn settle_native_family(fd: c_int, domain: c_int) -> bool {
    if domain == libc::AF_INET {
        return true;
    }
    let value: c_int = domain;
    // SAFETY: `value` is a live c_int and its size is passed with it.
    let ret = unsafe {
        libc::setsockopt(
            fd,
            SOL_SCI,
            SCI_NATIVE_FAMILY,
            core::ptr::from_ref(&value).cast(),
            core::mem::size_of::<c_int>() as libc::socklen_t,
        )
    };
    if ret == 0 {
        return true;
    }
    let err = errno();
    // SAFETY: `fd` is ours to close (contract); errno is restored for the caller.
    unsafe { libc::close(fd) };
    set_errno(err);
    false
}

/// What `socket()` does, given the configuration and the real `socket`.
///
/// # Safety
/// `real` must behave like `socket(2)` (any function with that signature and
/// no extra preconditions); `settle` like [`settle_native_family`].
pub unsafe fn socket_with(
    cfg: Config,
    real: SocketFn,
    settle: SettleFn,
    domain: c_int,
    ty: c_int,
    protocol: c_int,
) -> c_int {
    let family = match policy::target_family(&cfg, domain, ty, protocol) {
        Ok(family) => family,
        Err(keep) => {
            if cfg.debug {
                if let Some(line) = keep.notice() {
                    if !NOTICE_DONE.swap(true, Ordering::AcqRel) {
                        write_stderr(line.as_bytes());
                    }
                }
            }
            // SAFETY: real behaves like socket(2) (caller's contract).
            return unsafe { real(domain, ty, protocol) };
        }
    };

    // SAFETY: real behaves like socket(2) (caller's contract).
    let mut fd = unsafe { real(family, ty, protocol) };
    // SAFETY: `fd` is the socket just made; settle closes it on failure.
    if fd >= 0 && !unsafe { settle(fd, domain) } {
        fd = -1;
    }
    if fd >= 0 {
        if cfg.debug {
            let mut line = LineBuf::new();
            policy::rewritten_line(&mut line, fd, domain, family);
            write_stderr(line.finish());
        }
        return fd;
    }

    let err = errno();
    // EAFNOSUPPORT: no AF_SCI; ENOPROTOOPT: a module without SCI_NATIVE_FAMILY;
    // ESOCKTNOSUPPORT: a module without datagram sockets.
    if err != libc::EAFNOSUPPORT && err != libc::ENOPROTOOPT && err != libc::ESOCKTNOSUPPORT {
        if cfg.debug {
            let mut line = LineBuf::new();
            policy::failed_line(&mut line, domain, family, err);
            write_stderr(line.finish());
        }
        set_errno(err);
        return fd;
    }

    // The module went away (or never registered the family): do what the
    // program asked for, as if the shim were not there.
    // SAFETY: real behaves like socket(2) (caller's contract).
    let fd = unsafe { real(domain, ty, protocol) };
    if cfg.debug {
        let mut line = LineBuf::new();
        policy::fallback_line(&mut line, fd, domain, family);
        write_stderr(line.finish());
    }
    fd
}

/// The interposed `socket(2)`.
///
/// # Safety
/// Same contract as `socket(2)`: plain integers, no pointers.
#[cfg_attr(not(test), no_mangle)]
pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    let cfg = config();
    // SAFETY: real_socket() is libc's socket or the raw system call.
    unsafe {
        socket_with(
            cfg,
            real_socket(),
            settle_native_family,
            domain,
            ty,
            protocol,
        )
    }
}

/// ELF constructor: do the one-time work (dlsym, getenv, sysfs) at load
/// time, so that a first `socket()` from a signal handler finds it done.
#[cfg(not(test))]
extern "C" fn sci_preload_init() {
    config();
}

#[cfg(not(test))]
#[used]
#[link_section = ".init_array"]
static SCI_PRELOAD_INIT: extern "C" fn() = sci_preload_init;

#[cfg(test)]
mod tests;
