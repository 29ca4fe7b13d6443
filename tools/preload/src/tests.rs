//! Unit tests of the shim: `socket_with` against a recording fake of the real `socket()`,
//! and the family file reader.

use super::*;
use std::cell::RefCell;
use std::ffi::CString;
use std::io::Write;

thread_local! {
    static CALLS: RefCell<Vec<(c_int, c_int, c_int)>> = const { RefCell::new(Vec::new()) };
}

/// Fake socket(): refuses family 27 with EAFNOSUPPORT, family 99 with
/// EMFILE, and "creates" fd 40 + family otherwise.
unsafe extern "C" fn fake_socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    CALLS.with(|c| c.borrow_mut().push((domain, ty, protocol)));
    match domain {
        27 => {
            set_errno(libc::EAFNOSUPPORT);
            -1
        }
        99 => {
            set_errno(libc::EMFILE);
            -1
        }
        d => 40 + d,
    }
}

/// Fake settle: every family is fine.
unsafe fn settle_ok(_fd: c_int, _domain: c_int) -> bool {
    true
}

/// Fake settle of a module without SCI_NATIVE_FAMILY.
unsafe fn settle_unsupported(_fd: c_int, _domain: c_int) -> bool {
    set_errno(libc::ENOPROTOOPT);
    false
}

#[test]
fn unsettled_inet6_socket_falls_back_to_the_original_family() {
    calls();
    // SAFETY: fakes only.
    let fd = unsafe {
        socket_with(
            loaded(42),
            fake_socket,
            settle_unsupported,
            libc::AF_INET6,
            libc::SOCK_STREAM,
            0,
        )
    };
    assert_eq!(fd, 40 + libc::AF_INET6);
    assert_eq!(
        calls(),
        vec![
            (42, libc::SOCK_STREAM, 0),
            (libc::AF_INET6, libc::SOCK_STREAM, 0)
        ]
    );
}

fn calls() -> Vec<(c_int, c_int, c_int)> {
    CALLS.with(|c| c.borrow_mut().drain(..).collect())
}

fn loaded(n: u8) -> Config {
    Config {
        debug: false,
        disabled: false,
        family: FamilyStatus::Loaded(n),
        program: ProgramState::Sci,
        dgram: false,
    }
}

fn temp_file(name: &str, contents: &[u8]) -> CString {
    let mut path = std::env::temp_dir();
    path.push(format!("sci-preload-test-{}-{name}", std::process::id()));
    std::fs::File::create(&path)
        .unwrap()
        .write_all(contents)
        .unwrap();
    CString::new(path.into_os_string().into_encoded_bytes()).unwrap()
}

#[test]
fn tcp_socket_is_created_with_the_sci_family() {
    calls();
    // SAFETY: fake_socket has socket(2)'s contract.
    let fd = unsafe {
        socket_with(
            loaded(42),
            fake_socket,
            settle_ok,
            libc::AF_INET,
            libc::SOCK_STREAM,
            0,
        )
    };
    assert_eq!(fd, 82);
    assert_eq!(calls(), vec![(42, libc::SOCK_STREAM, 0)]);
}

#[test]
fn type_flags_and_protocol_are_passed_through_unchanged() {
    calls();
    let ty = libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC;
    // SAFETY: fake_socket has socket(2)'s contract.
    unsafe {
        socket_with(
            loaded(42),
            fake_socket,
            settle_ok,
            libc::AF_INET6,
            ty,
            libc::IPPROTO_TCP,
        )
    };
    assert_eq!(calls(), vec![(42, ty, libc::IPPROTO_TCP)]);
}

#[test]
fn eafnosupport_falls_back_to_the_original_family() {
    calls();
    // SAFETY: fake_socket has socket(2)'s contract.
    let fd = unsafe {
        socket_with(
            loaded(27),
            fake_socket,
            settle_ok,
            libc::AF_INET6,
            libc::SOCK_STREAM,
            0,
        )
    };
    assert_eq!(fd, 40 + libc::AF_INET6);
    assert_eq!(
        calls(),
        vec![
            (27, libc::SOCK_STREAM, 0),
            (libc::AF_INET6, libc::SOCK_STREAM, 0)
        ]
    );
}

#[test]
fn other_errors_of_the_sci_socket_are_returned_with_errno() {
    calls();
    // SAFETY: fake_socket has socket(2)'s contract.
    let fd = unsafe {
        socket_with(
            loaded(99),
            fake_socket,
            settle_ok,
            libc::AF_INET,
            libc::SOCK_STREAM,
            0,
        )
    };
    assert_eq!(fd, -1);
    assert_eq!(errno(), libc::EMFILE);
    assert_eq!(calls(), vec![(99, libc::SOCK_STREAM, 0)]);
}

#[test]
fn udp_socket_is_passed_through_once() {
    calls();
    // SAFETY: fake_socket has socket(2)'s contract.
    let fd = unsafe {
        socket_with(
            loaded(42),
            fake_socket,
            settle_ok,
            libc::AF_INET,
            libc::SOCK_DGRAM,
            0,
        )
    };
    assert_eq!(fd, 40 + libc::AF_INET);
    assert_eq!(calls(), vec![(libc::AF_INET, libc::SOCK_DGRAM, 0)]);
}

#[test]
fn udp_socket_becomes_a_datagram_socket_with_sci_dgram() {
    calls();
    let cfg = Config {
        dgram: true,
        ..loaded(42)
    };
    let ty = libc::SOCK_DGRAM | libc::SOCK_NONBLOCK;
    // SAFETY: fake_socket has socket(2)'s contract.
    let fd = unsafe { socket_with(cfg, fake_socket, settle_ok, libc::AF_INET6, ty, 0) };
    assert_eq!(fd, 40 + 42);
    assert_eq!(calls(), vec![(42, ty, 0)]);
    // Raw and UDP-Lite sockets stay as they are.
    // SAFETY: as above.
    unsafe {
        socket_with(
            cfg,
            fake_socket,
            settle_ok,
            libc::AF_INET,
            libc::SOCK_DGRAM,
            136,
        );
        socket_with(
            cfg,
            fake_socket,
            settle_ok,
            libc::AF_INET,
            libc::SOCK_RAW,
            0,
        );
    }
    assert_eq!(
        calls(),
        vec![
            (libc::AF_INET, libc::SOCK_DGRAM, 136),
            (libc::AF_INET, libc::SOCK_RAW, 0)
        ]
    );
}

#[test]
fn disabled_or_unloaded_config_passes_tcp_through() {
    for cfg in [
        Config {
            debug: false,
            disabled: true,
            family: FamilyStatus::Loaded(42),
            program: ProgramState::Sci,
            dgram: false,
        },
        Config {
            debug: false,
            disabled: false,
            family: FamilyStatus::Missing,
            program: ProgramState::Sci,
            dgram: false,
        },
        Config {
            debug: false,
            disabled: false,
            family: FamilyStatus::Invalid,
            program: ProgramState::Sci,
            dgram: false,
        },
    ] {
        calls();
        // SAFETY: fake_socket has socket(2)'s contract.
        unsafe {
            socket_with(
                cfg,
                fake_socket,
                settle_ok,
                libc::AF_INET,
                libc::SOCK_STREAM,
                0,
            )
        };
        assert_eq!(
            calls(),
            vec![(libc::AF_INET, libc::SOCK_STREAM, 0)],
            "{cfg:?}"
        );
    }
}

#[test]
fn family_file_with_number_and_newline_is_loaded() {
    let p = temp_file("ok", b"27\n");
    assert_eq!(read_family_file(&p), FamilyStatus::Loaded(27));
    std::fs::remove_file(p.to_str().unwrap()).unwrap();
}

#[test]
fn family_file_with_garbage_or_too_long_text_is_invalid() {
    let g = temp_file("garbage", b"AF_SCI\n");
    assert_eq!(read_family_file(&g), FamilyStatus::Invalid);
    let l = temp_file("long", b"0000000000000000000000000000027\n");
    assert_eq!(read_family_file(&l), FamilyStatus::Invalid);
    std::fs::remove_file(g.to_str().unwrap()).unwrap();
    std::fs::remove_file(l.to_str().unwrap()).unwrap();
}

#[test]
fn missing_family_file_means_not_loaded_and_keeps_errno() {
    set_errno(1234);
    assert_eq!(
        read_family_file(c"/nonexistent/sci-preload/family"),
        FamilyStatus::Missing
    );
    assert_eq!(errno(), 1234);
}

#[test]
fn directory_as_family_file_is_unreadable() {
    assert_eq!(read_family_file(c"/"), FamilyStatus::Unreadable);
}

#[test]
fn raw_socket_creates_a_real_tcp_socket() {
    // SAFETY: raw_socket has socket(2)'s contract.
    let fd = unsafe { raw_socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0, "errno {}", errno());
    // SAFETY: fd was just created and is closed once.
    unsafe { libc::close(fd) };
}
