//! ivshmem-server: the host side of QEMU's ivshmem-doorbell device.
//!
//! Debian ships QEMU without contrib/ivshmem-server; this is a replacement
//! speaking the same protocol (docs/specs/ivshmem-spec.rst in QEMU): it owns
//! the shared memory file and one eventfd per vector and peer, and passes
//! them to the QEMU processes that connect to its UNIX socket.
//!
//! ```text
//! ivshmem-server [--socket PATH] [--shm PATH] [--size BYTES] [--vectors N]
//!                [--max-peers N] [--pidfile PATH] [--verbose]
//! ```
//!
//! The socket file appears only once the server accepts connections (it is
//! bound under a temporary name and renamed when it listens: see
//! `listener`), so a script may wait for the file and then start QEMU.
//!
//! See `tools/man/ivshmem-server.8`.

mod listener;
mod options;
mod peer;
mod pidfile;
mod protocol;
mod server;
mod shm;
mod signals;

use options::Command;
use std::process::ExitCode;

fn main() -> ExitCode {
    let opts = match options::parse(std::env::args_os().skip(1)) {
        Ok(Command::Run(o)) => o,
        Ok(Command::Help) => {
            print!("{}", options::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("ivshmem-server: {e}\n(ivshmem-server --help for usage)");
            return ExitCode::from(2);
        }
    };
    match run(&opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ivshmem-server: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Creates everything, serves, and lets the destructors remove the socket,
/// the shared memory and the pid file, in the reverse order of creation.
fn run(opts: &options::Options) -> std::io::Result<()> {
    // Before anything exists, so that a signal during start-up is not lost
    // and cannot leave files behind.
    let stop = signals::termination_fd()?;
    listener::clear_stale(&opts.socket)?;
    let shm = shm::SharedMemory::create(&opts.shm, opts.size)?;
    let _pidfile = opts
        .pidfile
        .as_deref()
        .map(pidfile::PidFile::create)
        .transpose()?;
    // Last: once the socket file exists, the server accepts clients (the file
    // appears only when the socket listens).
    let listener = listener::Listener::bind(&opts.socket)?;
    if opts.verbose {
        eprintln!(
            "ivshmem-server: listening on {}, {} bytes at {}, {} vectors per peer",
            opts.socket.display(),
            opts.size,
            opts.shm.display(),
            opts.vectors
        );
    }
    let mut server =
        server::Server::new(listener, shm, opts.vectors, opts.max_peers, opts.verbose)?;
    server.run(&stop)
}
