//! The server's files and process: start over stale files, refuse a live
//! socket and bad options, and remove everything on SIGTERM/SIGINT.

mod common;

use common::{fd_size, run, Server, TempDir};
use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixListener;

#[test]
fn termination_removes_socket_memory_and_pidfile() {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let dir = TempDir::new();
        let pid = dir.path("pid");
        let mut server = Server::start(&dir, &["--pidfile", pid.to_str().unwrap()]);
        assert_eq!(
            fs::read_to_string(&pid).unwrap(),
            format!("{}\n", server.child.id())
        );
        assert!(fs::metadata(&server.socket)
            .unwrap()
            .file_type()
            .is_socket());
        assert_eq!(
            fs::metadata(&server.shm).unwrap().len(),
            4 << 20,
            "default size"
        );

        let mut a = server.connect();
        a.expect_greeting();
        a.expect_vectors(0, 2);
        let mut b = server.connect();
        b.expect_greeting();
        b.expect_vectors(0, 2);
        b.expect_vectors(1, 2);
        a.expect_vectors(1, 2);

        let st = server.stop(sig);
        assert!(st.success(), "exit status {st} after signal {sig}");
        for p in [&server.socket, &server.shm, &pid] {
            assert!(!p.exists(), "{} left behind", p.display());
        }
        // Like QEMU's server: the departures of the others, then the end.
        b.expect_plain(0);
        b.expect_eof();
        a.expect_eof();
    }
}

#[test]
fn stale_files_are_replaced() {
    let dir = TempDir::new();
    // A socket file nobody listens on, as a killed server leaves it.
    drop(UnixListener::bind(dir.path("sock")).unwrap());
    fs::write(
        dir.path("shm"),
        b"old contents of a bigger, odd-sized region",
    )
    .unwrap();
    let server = Server::start(&dir, &["--size", "8K"]);
    let mut a = server.connect();
    let (_, shm) = a.expect_greeting();
    assert_eq!(fd_size(&shm), 8192);
    assert_eq!(
        fs::read(&server.shm).unwrap(),
        vec![0; 8192],
        "stale memory kept"
    );
}

#[test]
fn a_live_socket_is_not_taken_over() {
    let dir = TempDir::new();
    let first = Server::start(&dir, &[]);
    let other_shm = dir.path("shm2");
    let out = run(&[
        "--socket",
        first.socket.to_str().unwrap(),
        "--shm",
        other_shm.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("in use by a running server"), "stderr: {err}");
    assert!(!other_shm.exists(), "a refused start created its memory");
    // The first server still works, and the check did not show up there as
    // a peer (which would have taken id 0).
    let mut a = first.connect();
    assert_eq!(a.expect_greeting().0, 0);
}

#[test]
fn a_path_that_is_not_a_socket_is_left_alone() {
    let dir = TempDir::new();
    let sock = dir.path("sock");
    fs::write(&sock, b"precious").unwrap();
    let out = run(&[
        "--socket",
        sock.to_str().unwrap(),
        "--shm",
        dir.path("shm").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a socket"));
    assert_eq!(fs::read(&sock).unwrap(), b"precious");
    assert!(!dir.path("shm").exists());
}

#[test]
fn a_bare_shm_name_lives_in_dev_shm() {
    let dir = TempDir::new();
    let name = format!("ivshmem-test-{}", std::process::id());
    let sock = dir.path("sock");
    let shm = std::path::PathBuf::from(format!("/dev/shm/{name}"));
    let mut server = Server::spawn(
        &["--socket", sock.to_str().unwrap(), "-m", &name, "-l", "16K"],
        sock.clone(),
        shm,
    );
    assert_eq!(fs::metadata(&server.shm).unwrap().len(), 16384);
    assert!(server.stop(libc::SIGTERM).success());
    assert!(!server.shm.exists());
}

#[test]
fn bad_options_are_rejected_with_a_message() {
    let dir = TempDir::new();
    let sock = dir.path("sock");
    let shm = dir.path("shm");
    let base = [
        "--socket",
        sock.to_str().unwrap(),
        "--shm",
        shm.to_str().unwrap(),
    ];
    for (extra, says) in [
        (&["--size", "3M"][..], "power of two"),
        (&["--size", "1k"], "one page"),
        (&["--size", "lots"], "not a size"),
        (&["--size"], "needs a value"),
        (&["--vectors", "0"], "--vectors"),
        (&["--vectors", "100"], "--vectors"),
        (&["--max-peers", "-1"], "--max-peers"),
        (&["--frobnicate"], "unknown option --frobnicate"),
        (&["extra"], "unexpected argument"),
    ] {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let out = run(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: stderr {err}");
        assert!(err.contains(says), "{extra:?}: stderr {err}");
        assert!(!sock.exists() && !shm.exists(), "{extra:?} created files");
    }
    let out = run(&["--help"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("--vectors"));
}

#[test]
fn an_uncreatable_memory_file_is_an_error() {
    let dir = TempDir::new();
    let shm = dir.path("no-such-dir/shm");
    let out = run(&[
        "--socket",
        dir.path("sock").to_str().unwrap(),
        "--shm",
        shm.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot create"));
    assert!(!dir.path("sock").exists());
}
