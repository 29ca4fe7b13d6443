//! The server's files and process: start over stale files, refuse a live
//! socket and bad options, and remove everything on SIGTERM/SIGINT.

mod common;

use common::{fd_size, run, run_traced, Client, Server, TempDir};
use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

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

/// Clients wait for the socket file and connect at once (QEMU started by
/// selftests/harness/vm-pair, this harness): the file must not exist before the
/// server listens, or the connection is refused.  strace holds the server's
/// listen() for 2 s, so that a file created before it (at bind(), which
/// precedes listen()) refuses the connection below every time, rather than
/// now and then on a loaded host.
#[test]
fn the_socket_appears_only_once_the_server_listens() {
    const DELAY: Duration = Duration::from_secs(2);
    let dir = TempDir::new();
    let started = Instant::now();
    let inject = format!("inject=listen:delay_enter={}", DELAY.as_micros());
    let server = Server::start_traced(&dir, &["-e", "trace=listen", "-e", &inject], &[]);
    let stream = UnixStream::connect(&server.socket).unwrap_or_else(|e| {
        panic!("the socket file exists, but connecting to it fails ({e}): it appeared before the server listened")
    });
    let mut a = Client { stream };
    assert_eq!(a.expect_greeting().0, 0);
    assert!(
        started.elapsed() >= DELAY,
        "strace did not delay listen(): this test proved nothing"
    );
}

/// The files in `dir`, sorted.
fn files(dir: &TempDir) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// The socket is bound under a temporary name and renamed into place: a
/// failure on the way leaves neither name behind (nor the other files).
#[test]
fn a_start_that_fails_at_listen_or_rename_leaves_no_file() {
    for inject in ["listen:error=ENOMEM", "renameat2:error=EACCES"] {
        let dir = TempDir::new();
        let (sock, shm, pid) = (dir.path("sock"), dir.path("shm"), dir.path("pid"));
        let out = run_traced(
            &["-e", &format!("inject={inject}")],
            &[
                "--socket",
                sock.to_str().unwrap(),
                "--shm",
                shm.to_str().unwrap(),
                "--pidfile",
                pid.to_str().unwrap(),
            ],
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{inject}: stderr {err}");
        assert!(err.contains("cannot listen on"), "{inject}: stderr {err}");
        assert_eq!(files(&dir), Vec::<String>::new(), "{inject}: left behind");
    }
}

/// A socket that appears at the path while the server starts (another
/// server starting at the same moment: both found the path free) is not
/// replaced, as bind() on the path itself would refuse it: the server's
/// listen() is held until the test has put its own socket there.
#[test]
fn a_socket_created_meanwhile_is_not_replaced() {
    let dir = TempDir::new();
    let (sock, shm, pid) = (dir.path("sock"), dir.path("shm"), dir.path("pid"));
    std::thread::scope(|s| {
        let server = s.spawn(|| {
            run_traced(
                &["-e", "inject=listen:delay_enter=2000000"],
                &[
                    "--socket",
                    sock.to_str().unwrap(),
                    "--shm",
                    shm.to_str().unwrap(),
                    "--pidfile",
                    pid.to_str().unwrap(),
                ],
            )
        });
        // The pid file is written after the check for a live socket and
        // before bind(), so the server is between the two now.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !pid.exists() {
            assert!(!server.is_finished(), "the server exited early");
            assert!(Instant::now() < deadline, "no pid file");
            std::thread::sleep(Duration::from_millis(10));
        }
        let other = UnixListener::bind(&sock).unwrap();
        let out = server.join().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "stderr {err}");
        assert!(
            err.contains("cannot listen on") && err.contains("File exists"),
            "stderr {err}"
        );
        assert_eq!(files(&dir), ["sock"], "a file left behind or removed");
        // Still the test's socket.
        let _c = UnixStream::connect(&sock).unwrap();
        assert!(other.accept().is_ok());
    });
}

/// On file systems without renameat2's RENAME_NOREPLACE (EINVAL), the socket
/// is hard-linked into place instead, and the temporary name removed.
#[test]
fn without_rename_noreplace_the_socket_is_linked_into_place() {
    let dir = TempDir::new();
    let mut server = Server::start_traced(&dir, &["-e", "inject=renameat2:error=EINVAL"], &[]);
    let mut a = server.connect();
    assert_eq!(a.expect_greeting().0, 0);
    assert_eq!(files(&dir), ["pid", "shm", "sock", "sock.log"]);
    assert!(server.stop(libc::SIGTERM).success());
    assert_eq!(files(&dir), ["sock.log"]);
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
