//! The `sci-preload` family: the tcp code path, run in a child process started under the
//! preload (`sci-run sci-bench worker`), so that what is measured is an unmodified program's
//! path. The parent sends one JSON line per run; the child answers with one JSON line.

use crate::bench;
use crate::measure::{Net, Sample, Test};
use crate::sys;
use serde::{Deserialize, Serialize};
use std::io::{self, BufRead, BufReader, Write};
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

#[derive(Debug, Serialize, Deserialize)]
struct Request {
    test: Test,
    nanos: u64,
    pin: Option<usize>,
    /// The `sci-bench serve` to measure against (the remote mode).
    remote: Option<SocketAddrV4>,
}

#[derive(Debug, Serialize, Deserialize)]
enum Reply {
    Hello { ld_preload: Option<String> },
    Ok(Sample),
    Err(String),
}

fn write_line<T: Serialize>(w: &mut impl Write, v: &T) -> io::Result<()> {
    let mut s = serde_json::to_string(v)?;
    s.push('\n');
    w.write_all(s.as_bytes())?;
    w.flush()
}

/// The child: answers requests from stdin until it is closed.
pub fn serve() -> io::Result<()> {
    let sci_af = sys::sci_family();
    let mut out = io::stdout().lock();
    write_line(
        &mut out,
        &Reply::Hello {
            ld_preload: std::env::var("LD_PRELOAD").ok(),
        },
    )?;
    for line in io::stdin().lock().lines() {
        let req: Request = serde_json::from_str(&line?)?;
        let dur = Duration::from_nanos(req.nanos);
        let reply = match bench::run(Net::Tcp, sci_af, &req.test, dur, req.pin, req.remote) {
            Ok(s) => Reply::Ok(s),
            Err(e) => Reply::Err(e.to_string()),
        };
        write_line(&mut out, &reply)?;
    }
    Ok(())
}

/// The parent's handle on the child.
pub struct Worker {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// How the child was started, for the notes.
    pub how: String,
}

/// Where `sci-run` is: the given path, else `tools/sci-run` seen from
/// `tools/target/<profile>/sci-bench`.
fn find_sci_run(exe: &Path, given: Option<&str>) -> Option<PathBuf> {
    if let Some(p) = given {
        return Some(PathBuf::from(p));
    }
    let p = exe.parent()?.parent()?.parent()?.join("sci-run");
    p.is_file().then_some(p)
}

/// `$SCI_PRELOAD_LIB`, else `libsci_preload.so` next to this binary, else in /usr/local/lib.
fn find_preload_lib(exe: &Path) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("SCI_PRELOAD_LIB") {
        return Some(PathBuf::from(p));
    }
    [
        exe.parent()?.join("libsci_preload.so"),
        PathBuf::from("/usr/local/lib/libsci_preload.so"),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

impl Worker {
    pub fn spawn(sci_run: Option<&str>) -> io::Result<Worker> {
        let exe = std::env::current_exe()?.canonicalize()?;
        let mut cmd;
        let how;
        if let Some(run) = find_sci_run(&exe, sci_run) {
            cmd = Command::new(&run);
            cmd.arg(&exe);
            how = format!("{} {} worker --family tcp", run.display(), exe.display());
        } else if let Some(lib) = find_preload_lib(&exe) {
            cmd = Command::new(&exe);
            cmd.env("LD_PRELOAD", &lib);
            how = format!(
                "LD_PRELOAD={} {} worker --family tcp",
                lib.display(),
                exe.display()
            );
        } else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "neither sci-run nor libsci_preload.so found (build tools/, or --sci-run PATH)",
            ));
        }
        cmd.args(["worker", "--family", "tcp"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = cmd.spawn()?;
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut w = Worker {
            child,
            stdin,
            stdout,
            how,
        };
        match w.read()? {
            Reply::Hello {
                ld_preload: Some(p),
            } if p.contains("libsci_preload") => Ok(w),
            Reply::Hello { ld_preload } => Err(io::Error::other(format!(
                "the child runs without the preload (LD_PRELOAD={ld_preload:?})"
            ))),
            r => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("unexpected first line from the child: {r:?}"),
            )),
        }
    }

    fn read(&mut self) -> io::Result<Reply> {
        let mut line = String::new();
        if self.stdout.read_line(&mut line)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the sci-preload child exited",
            ));
        }
        Ok(serde_json::from_str(&line)?)
    }

    /// Runs `test` in the child (against `remote`, a `sci-bench serve`, if given).
    pub fn run(
        &mut self,
        test: &Test,
        dur: Duration,
        pin: Option<usize>,
        remote: Option<SocketAddrV4>,
    ) -> io::Result<Sample> {
        let stdin = self
            .stdin
            .as_mut()
            .ok_or_else(|| io::Error::new(io::ErrorKind::BrokenPipe, "child closed"))?;
        write_line(
            stdin,
            &Request {
                test: test.clone(),
                nanos: dur.as_nanos() as u64,
                pin,
                remote,
            },
        )?;
        match self.read()? {
            Reply::Ok(s) => Ok(s),
            Reply::Err(e) => Err(io::Error::other(e)),
            r => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("unexpected reply: {r:?}"),
            )),
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Closing stdin ends the child's loop.
        self.stdin.take();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_roundtrip() {
        let mut buf = Vec::new();
        write_line(
            &mut buf,
            &Request {
                test: Test::Rr {
                    req: 64,
                    resp: 1024,
                },
                nanos: 5,
                pin: Some(1),
                remote: Some("10.0.0.2:7102".parse().unwrap()),
            },
        )
        .unwrap();
        let line = String::from_utf8(buf).unwrap();
        assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
        let r: Request = serde_json::from_str(&line).unwrap();
        assert_eq!(r.remote, Some("10.0.0.2:7102".parse().unwrap()));
        assert_eq!(
            r.test,
            Test::Rr {
                req: 64,
                resp: 1024
            }
        );
        let mut buf = Vec::new();
        write_line(
            &mut buf,
            &Reply::Ok(Sample {
                values: vec![1.5],
                ..Default::default()
            }),
        )
        .unwrap();
        match serde_json::from_slice::<Reply>(&buf).unwrap() {
            Reply::Ok(s) => assert_eq!(s.values, [1.5]),
            r => panic!("{r:?}"),
        }
    }

    #[test]
    fn sci_run_next_to_the_workspace() {
        let dir = std::env::temp_dir().join(format!("sci-bench-find-{}", std::process::id()));
        let rel = dir.join("target/release");
        std::fs::create_dir_all(&rel).unwrap();
        let exe = rel.join("sci-bench");
        assert_eq!(find_sci_run(&exe, None), None);
        std::fs::write(dir.join("sci-run"), "").unwrap();
        assert_eq!(find_sci_run(&exe, None), Some(dir.join("sci-run")));
        assert_eq!(find_sci_run(&exe, Some("/x")), Some(PathBuf::from("/x")));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
