//! sci-bench: loopback benchmarks of TCP, AF_UNIX, AF_SMC and AF_SCI (directly and through
//! the preload), with every socket checked to be what its column says; with `--remote`
//! against a `sci-bench serve` on another machine (TCP, AF_SCI, the preload).
//! See Documentation/benchmarks.rst.

mod args;
mod bench;
mod concurrent;
mod conn;
mod measure;
mod remote;
mod report;
mod smc;
mod stats;
mod sys;
mod worker;

use args::{Command, Family, RunOpts};
use measure::{Net, Observed, Sample, Test};
use report::{Column, Report, Row};
use std::io::{self, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let cmd = match args::parse(&argv) {
        Ok(c) => c,
        Err(e) => {
            eprint!("{e}");
            return ExitCode::from(2);
        }
    };
    let result = match cmd {
        Command::Help(text) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Command::Worker => worker::serve().map(|()| true),
        Command::Serve { listen, family } => remote::serve(listen, family).map(|()| true),
        Command::SmcSetup { eid, list } => smc_setup(&eid, list).map(|()| true),
        Command::Run(o) => run(&o),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("sci-bench: {e}");
            ExitCode::from(1)
        }
    }
}

fn smc_setup(eid: &str, list: bool) -> io::Result<()> {
    match smc::add_ueid(eid)? {
        smc::UeidOutcome::Added => println!("smc-setup: user EID {eid} added"),
        smc::UeidOutcome::AlreadySet => println!("smc-setup: user EID {eid} was already set"),
    }
    if list {
        for e in smc::list_ueids()? {
            println!("ueid: {e}");
        }
    }
    Ok(())
}

/// How a family is measured.
enum Runner {
    InProcess(Net),
    Preload(Box<worker::Worker>),
}

struct Fam {
    family: Family,
    runner: Option<Runner>,
    unavailable: Option<String>,
    observed: Observed,
}

/// Whether `net` sockets can be created here.
fn probe(net: Net) -> Result<(), String> {
    let (domain, proto) = match net {
        Net::Smc => (sys::AF_SMC, sys::SMCPROTO_SMC),
        Net::Sci(af) => (af, 0),
        Net::Tcp => (libc::AF_INET, 0),
        Net::Unix => (libc::AF_UNIX, 0),
    };
    sys::Sock::new(domain, proto)
        .map(drop)
        .map_err(|e| format!("socket({domain}, SOCK_STREAM, {proto}): {e}"))
}

fn setup_family(family: Family, sci_af: Option<i32>, o: &RunOpts) -> Fam {
    let runner = match family {
        Family::Tcp => Ok(Runner::InProcess(Net::Tcp)),
        Family::Unix => Ok(Runner::InProcess(Net::Unix)),
        Family::Smc => probe(Net::Smc)
            .map(|()| Runner::InProcess(Net::Smc))
            .map_err(|e| format!("{e}: no AF_SMC in this kernel")),
        Family::Sci => match sci_af {
            None => Err("af_sci is not loaded".to_string()),
            Some(af) => probe(Net::Sci(af)).map(|()| Runner::InProcess(Net::Sci(af))),
        },
        Family::SciPreload => match sci_af {
            None => Err("af_sci is not loaded".to_string()),
            Some(_) => worker::Worker::spawn(o.sci_run.as_deref())
                .map(|w| Runner::Preload(Box::new(w)))
                .map_err(|e| format!("cannot start the preloaded child: {e}")),
        },
    };
    let (runner, unavailable) = match runner {
        Ok(r) => (Some(r), None),
        Err(e) => (None, Some(e)),
    };
    Fam {
        family,
        runner,
        unavailable,
        observed: Observed::default(),
    }
}

fn run_one(
    f: &mut Fam,
    sci_af: Option<i32>,
    test: &Test,
    dur: Duration,
    pin: Option<usize>,
    remote: Option<std::net::SocketAddrV4>,
) -> io::Result<Sample> {
    match f.runner.as_mut() {
        Some(Runner::InProcess(net)) => bench::run(*net, sci_af, test, dur, pin, remote),
        Some(Runner::Preload(w)) => w.run(test, dur, pin, remote),
        None => Err(io::Error::new(io::ErrorKind::Unsupported, "not available")),
    }
}

fn run(o: &RunOpts) -> io::Result<bool> {
    let started = Instant::now();
    let sci_af = sys::sci_family();
    let mut notes: Vec<String> = Vec::new();
    let allowed = sys::allowed_cpus()?;
    let pin = o.pin.resolve(&allowed);
    let mode = if o.remote.is_empty() {
        "local".to_string()
    } else {
        let servers: Vec<String> = o
            .families
            .iter()
            .filter_map(|&f| o.remote_for(f).map(|a| format!("{}={a}", f.name())))
            .collect();
        notes.push(format!(
            "remote mode: the servers are 'sci-bench serve' at {}; each reports its accepted \
             socket's SO_DOMAIN and SCI_INFO, counted with the client's",
            servers.join(", ")
        ));
        format!("remote: {}", servers.join(", "))
    };
    if o.require_sci {
        notes.push(
            "--require-sci: a run with an AF_SCI socket not in mode sci is left out, and its \
             column fails"
                .to_string(),
        );
    }
    notes.push(match pin {
        Some(cpu) => format!(
            "single-connection tests: client and server pinned to CPU {cpu} (of {}); the \
             multi-stream and hot-spot tests use all",
            allowed.len()
        ),
        None => format!(
            "no pinning: the scheduler places every thread ({} CPUs)",
            allowed.len()
        ),
    });
    if o.smc_setup && o.families.contains(&Family::Smc) {
        match smc::add_ueid(smc::DEFAULT_UEID) {
            Ok(_) => notes.push(format!(
                "smc: user EID {} set, so AF_SMC may use its loopback device",
                smc::DEFAULT_UEID
            )),
            Err(e) => notes.push(format!("smc: could not set a user EID: {e}")),
        }
    }
    let mut fams: Vec<Fam> = o
        .families
        .iter()
        .map(|&f| setup_family(f, sci_af, o))
        .collect();
    for f in &fams {
        if let Some(Runner::Preload(w)) = &f.runner {
            notes.push(format!("sci-preload: child started as: {}", w.how));
        }
    }
    let tests = o.measurements();
    let runs = tests.len() * o.repeat * fams.iter().filter(|f| f.runner.is_some()).count();
    eprintln!(
        "sci-bench: {} profile, {} measurements x {} repetitions x {} families, {:.2} s each \
         (about {:.0} s)",
        if o.full { "full" } else { "quick" },
        tests.len(),
        o.repeat,
        fams.iter().filter(|f| f.runner.is_some()).count(),
        o.time.as_secs_f64(),
        runs as f64 * o.time.as_secs_f64() * 1.3
    );
    let tcp_col = fams.iter().position(|f| f.family == Family::Tcp);
    let mut rows: Vec<Row> = Vec::new();
    for (ti, test) in tests.iter().enumerate() {
        let t0 = Instant::now();
        let metrics = test.metrics();
        let mut reps: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); fams.len()]; metrics.len()];
        let mut errors: Vec<Option<String>> = vec![None; fams.len()];
        // Repetitions outermost, families innermost, and each repetition starts with the
        // next family: a drift of the machine's speed, or a cost of going first, affects
        // every family alike.
        let nf = fams.len();
        for rep in 0..o.repeat {
            for fi in (0..nf).map(|k| (k + rep) % nf) {
                let f = &mut fams[fi];
                if f.runner.is_none() {
                    continue;
                }
                let remote = o.remote_for(f.family);
                let sci_col = matches!(f.family, Family::Sci | Family::SciPreload);
                match run_one(f, sci_af, test, o.time, pin, remote) {
                    // --require-sci: a run with a socket not on the SCI path is not counted
                    // (its sockets still are, so the label says what they were).
                    Ok(s) if o.require_sci && sci_col && !report::all_sci(&s.observed) => {
                        let e = format!(
                            "run {} not counted: not every socket in mode sci ({})",
                            rep + 1,
                            report::sci_summary(&s.observed)
                        );
                        eprintln!("sci-bench: {} {}: {e}", f.family.name(), test.name());
                        notes.push(format!("{}: {}: {e}", f.family.name(), test.name()));
                        f.observed.merge(&s.observed);
                        errors[fi] = Some(e);
                    }
                    Ok(s) => {
                        for (mi, v) in s.values.iter().enumerate() {
                            reps[mi][fi].push(*v);
                        }
                        f.observed.merge(&s.observed);
                    }
                    Err(e) => {
                        if errors[fi].is_none() {
                            eprintln!("sci-bench: {} {}: {e}", f.family.name(), test.name());
                        }
                        errors[fi] = Some(e.to_string());
                    }
                }
            }
        }
        for (mi, m) in metrics.iter().enumerate() {
            let mut row = Row {
                test: test.name(),
                metric: m.name.to_string(),
                unit: m.unit.to_string(),
                better: m.better,
                median: reps[mi].iter().map(|r| stats::median(r)).collect(),
                ratio: Vec::new(),
                reps: reps[mi].clone(),
                errors: errors.clone(),
            };
            row.compute_ratios(tcp_col);
            rows.push(row);
        }
        eprintln!(
            "sci-bench: [{:2}/{}] {} ({:.1} s)",
            ti + 1,
            tests.len(),
            test.name(),
            t0.elapsed().as_secs_f64()
        );
    }

    let mut ok = true;
    let mut columns = Vec::new();
    for f in &mut fams {
        let measured = f.runner.is_some();
        let (label, verified, mut fnotes) = if measured {
            report::label(f.family, &f.observed, sci_af, o.require_sci)
        } else {
            (f.family.name().to_string(), false, Vec::new())
        };
        if let Some(u) = &f.unavailable {
            fnotes.push(format!("{}: not measured: {u}", f.family.name()));
        }
        ok &= measured && verified;
        notes.append(&mut fnotes);
        columns.push(Column {
            family: f.family.name(),
            label,
            measured,
            unavailable: f.unavailable.clone(),
            verified,
            observed: f.observed.clone(),
        });
        f.runner = None; // ends the preloaded child
    }
    let failed = rows.iter().any(|r| r.errors.iter().any(Option::is_some));
    ok &= !failed;

    let total = started.elapsed().as_secs_f64();
    let mut out = String::new();
    out.push_str(&format!(
        "sci-bench ({} profile{}): median of {} repetitions of {:.2} s; [ratio to tcp]\n",
        if o.full { "full" } else { "quick" },
        if o.remote.is_empty() {
            String::new()
        } else {
            format!(", {mode}")
        },
        o.repeat,
        o.time.as_secs_f64()
    ));
    out.push_str(&format!("{}\n\n", report::RATIO_NOTE));
    out.push_str(&report::table(&columns, &rows));
    out.push('\n');
    for n in &notes {
        out.push_str(&format!("note: {n}\n"));
    }
    if failed {
        out.push_str("note: some runs failed (cells 'error', messages above)\n");
    }
    out.push_str(&format!("sci-bench: finished in {total:.0} s\n"));
    io::stdout().write_all(out.as_bytes())?;

    if let Some(path) = &o.json {
        let rep = Report {
            profile: if o.full { "full" } else { "quick" },
            mode,
            repeat: o.repeat,
            seconds_per_run: o.time.as_secs_f64(),
            sci_family: sci_af,
            pinned_cpu: pin,
            note: report::RATIO_NOTE,
            columns,
            rows,
            notes,
            total_seconds: total,
        };
        std::fs::write(path, serde_json::to_string_pretty(&rep)? + "\n")
            .map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))?;
    }
    Ok(ok || !o.strict)
}
