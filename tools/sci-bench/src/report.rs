//! Column labels (what each family's sockets really were), the table and the JSON report.

use crate::args::Family;
use crate::measure::{Better, Observed};
use crate::smc;
use crate::sys::AF_SMC;
use serde::Serialize;

/// What the sockets of a family were, as a column label (`sci(native)`, `smc(fallback)`),
/// whether that is what the family's name promises, and notes explaining the label. With
/// `require_sci`, an AF_SCI column is what it promises only when every socket was in mode
/// sci.
pub fn label(
    family: Family,
    obs: &Observed,
    sci_af: Option<i32>,
    require_sci: bool,
) -> (String, bool, Vec<String>) {
    let name = family.name();
    let mut notes = Vec::new();
    if obs.sockets == 0 {
        return (name.to_string(), false, notes);
    }
    let only = |want: i32| obs.domains.keys().all(|&d| d == want);
    match family {
        Family::Tcp => (name.into(), only(libc::AF_INET), notes),
        Family::Unix => (name.into(), only(libc::AF_UNIX), notes),
        Family::Smc => {
            let fallback = obs.smc_modes.contains_key(&smc::SMC_DIAG_MODE_FALLBACK_TCP);
            if !fallback && !only(AF_SMC) {
                notes.push(format!(
                    "{name}: sockets of family {:?}, not AF_SMC",
                    obs.domains
                ));
                return (format!("{name}(not-smc)"), false, notes);
            }
            if obs.smc_missing > 0 {
                notes.push(format!(
                    "{name}: {} AF_SMC sockets were missing from smc_diag",
                    obs.smc_missing
                ));
            }
            let modes: Vec<&str> = obs.smc_modes.keys().map(|&m| smc::mode_name(m)).collect();
            if fallback {
                let reasons: Vec<String> = obs
                    .smc_reasons
                    .keys()
                    .map(|&r| smc::reason_name(r))
                    .collect();
                notes.push(format!(
                    "{name}: {} of {} AF_SMC sockets FELL BACK TO TCP (smc_diag reason {}; \
                     SO_DOMAIN then says AF_INET): the smc column measures TCP, not SMC-D",
                    obs.smc_modes[&smc::SMC_DIAG_MODE_FALLBACK_TCP],
                    obs.sockets,
                    reasons.join(", ")
                ));
                return (format!("{name}(fallback)"), false, notes);
            }
            let ok = modes == ["smcd"] && obs.smc_missing == 0;
            let label = match modes.as_slice() {
                [m] => format!("{name}({m})"),
                [] => format!("{name}(unknown)"),
                _ => format!("{name}(mixed)"),
            };
            (label, ok, notes)
        }
        Family::Sci | Family::SciPreload => {
            let Some(af) = sci_af else {
                return (format!("{name}(not-sci)"), false, notes);
            };
            if !only(af) {
                notes.push(format!(
                    "{name}: {} of {} sockets were not AF_SCI ({af}): families {:?}",
                    obs.sockets - obs.domains.get(&af).copied().unwrap_or(0),
                    obs.sockets,
                    obs.domains
                ));
                return (format!("{name}(not-sci)"), false, notes);
            }
            let modes: Vec<&str> = obs
                .sci_modes
                .keys()
                .map(|&m| match m {
                    0 => "native",
                    1 => "sci",
                    _ => "unknown",
                })
                .collect();
            let label = match modes.as_slice() {
                [m] => format!("{name}({m})"),
                _ => format!("{name}(mixed)"),
            };
            if let Some(sci) = obs.sci_modes.get(&1) {
                notes.push(format!(
                    "{name}: {sci} of {} AF_SCI sockets in mode sci: their bytes go over the \
                     SCI data path",
                    obs.sockets
                ));
            }
            if let Some(native) = obs.sci_modes.get(&0) {
                let reasons: Vec<String> = obs
                    .sci_reasons
                    .iter()
                    .filter(|(&r, _)| r != 0)
                    .map(|(&r, n)| format!("{} x{n}", sci_reason_name(r)))
                    .collect();
                notes.push(format!(
                    "{name}: {native} of {} AF_SCI sockets in mode native (fallback reasons: \
                     {}): their bytes go over each socket's native TCP socket",
                    obs.sockets,
                    reasons.join(", ")
                ));
            }
            let all_sci = modes == ["sci"];
            if require_sci && !all_sci {
                notes.push(format!(
                    "{name}: FAILED: --require-sci, but not every AF_SCI socket was in mode \
                     sci: this column did not measure the SCI data path"
                ));
            }
            (label, all_sci || !require_sci, notes)
        }
    }
}

/// Whether every socket of `obs` was AF_SCI in mode sci (`--require-sci`).
pub fn all_sci(obs: &Observed) -> bool {
    obs.sockets > 0 && obs.sci_modes.keys().eq([1u32].iter()) && obs.sci_modes[&1] == obs.sockets
}

/// "mode sci x3, native x1 (peer-rejected x1)": the modes of `obs`'s AF_SCI sockets.
pub fn sci_summary(obs: &Observed) -> String {
    let modes: Vec<String> = obs
        .sci_modes
        .iter()
        .map(|(&m, n)| {
            let name = match m {
                0 => "native",
                1 => "sci",
                _ => "unknown",
            };
            format!("{name} x{n}")
        })
        .collect();
    let reasons: Vec<String> = obs
        .sci_reasons
        .iter()
        .filter(|(&r, _)| r != 0)
        .map(|(&r, n)| format!("{} x{n}", sci_reason_name(r)))
        .collect();
    let other = obs.sockets - obs.sci_modes.values().sum::<u64>();
    let mut out = format!("mode {}", modes.join(", "));
    if other > 0 {
        out.push_str(&format!(", {other} not AF_SCI"));
    }
    if !reasons.is_empty() {
        out.push_str(&format!("; fallback reasons: {}", reasons.join(", ")));
    }
    out
}

/// The names tools print for `enum sci_fallback_reason` (uapi/linux/af_sci.h).
pub fn sci_reason_name(r: u32) -> String {
    const NAMES: [&str; 9] = [
        "none",
        "no-fabric",
        "not-mapped",
        "port-excluded",
        "peer-rejected",
        "no-memory",
        "timeout",
        "peer-tcp",
        "failover",
    ];
    NAMES
        .get(r as usize)
        .map_or_else(|| format!("reason-{r}"), |n| n.to_string())
}

/// Formats a measured value with 3 to 4 significant digits.
pub fn fmt_value(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v >= 1000.0 {
        format!("{v:.0}")
    } else if v >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// One family's column.
#[derive(Clone, Debug, Serialize)]
pub struct Column {
    pub family: &'static str,
    pub label: String,
    /// False when the family could not be measured (see `unavailable`).
    pub measured: bool,
    pub unavailable: Option<String>,
    /// Its sockets were what the family name says (AF_SCI, SMC-D, ...).
    pub verified: bool,
    pub observed: Observed,
}

/// One line of the table: a metric of a measurement, with each family's value.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    pub test: String,
    pub metric: String,
    pub unit: String,
    pub better: Better,
    /// Per column: the median of the repetitions, `None` when not measured.
    pub median: Vec<Option<f64>>,
    /// Per column: value / tcp's value.
    pub ratio: Vec<Option<f64>>,
    /// Per column: every repetition.
    pub reps: Vec<Vec<f64>>,
    /// Per column: the error of a failed run, if any.
    pub errors: Vec<Option<String>>,
}

impl Row {
    /// Fills `ratio` from `median`, relative to column `base` (tcp).
    pub fn compute_ratios(&mut self, base: Option<usize>) {
        let b = base.and_then(|i| self.median[i]).filter(|b| *b > 0.0);
        self.ratio = self
            .median
            .iter()
            .map(|v| match (v, b) {
                (Some(v), Some(b)) => Some(v / b),
                _ => None,
            })
            .collect();
    }

    pub fn title(&self) -> String {
        if self.metric.is_empty() {
            self.test.clone()
        } else {
            format!("{} {}", self.test, self.metric)
        }
    }
}

/// Lays out rows of cells: the first `left` columns left-aligned, the rest right-aligned,
/// two blanks between columns, no trailing blanks.
pub fn layout(rows: &[Vec<String>], left: usize) -> String {
    let ncols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut width = vec![0; ncols];
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (i, c) in r.iter().enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            let pad = width[i] - c.chars().count();
            if i < left {
                line.push_str(c);
                line.extend(std::iter::repeat(' ').take(pad));
            } else {
                line.extend(std::iter::repeat(' ').take(pad));
                line.push_str(c);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The table: one row per metric, per family its median and, in brackets, its ratio to tcp.
pub fn table(columns: &[Column], rows: &[Row]) -> String {
    let mut cells = Vec::new();
    let mut head = vec!["measurement".to_string(), "unit".into(), "better".into()];
    head.extend(columns.iter().map(|c| c.label.clone()));
    cells.push(head);
    for r in rows {
        let mut line = vec![
            r.title(),
            r.unit.clone(),
            match r.better {
                Better::Lower => "lower".into(),
                Better::Higher => "higher".into(),
            },
        ];
        for (i, c) in columns.iter().enumerate() {
            let cell = if !c.measured {
                "n/a".to_string()
            } else if r.errors[i].is_some() && r.median[i].is_none() {
                "error".to_string()
            } else {
                match (r.median[i], r.ratio[i]) {
                    (Some(v), Some(q)) => format!("{} [{:.2}]", fmt_value(v), q),
                    (Some(v), None) => format!("{} [-]", fmt_value(v)),
                    _ => "-".into(),
                }
            };
            line.push(cell);
        }
        cells.push(line);
    }
    layout(&cells, 3)
}

/// The JSON report.
#[derive(Debug, Serialize)]
pub struct Report {
    pub profile: &'static str,
    /// "local", or "remote: FAMILY=ADDR:PORT, ..." (`--remote`).
    pub mode: String,
    pub repeat: usize,
    pub seconds_per_run: f64,
    pub sci_family: Option<i32>,
    /// The CPU single-connection tests ran on (`--pin`), `None` when not pinned.
    pub pinned_cpu: Option<usize>,
    pub note: &'static str,
    pub columns: Vec<Column>,
    pub rows: Vec<Row>,
    pub notes: Vec<String>,
    pub total_seconds: f64,
}

pub const RATIO_NOTE: &str = "ratio = family / tcp (tcp = 1.00); latency (us): lower is \
better; MB/s, trans/s, conn/s: higher is better. Under an emulated CPU (QEMU TCG) compare \
ratios within one run only.";

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn obs(domains: &[(i32, u64)]) -> Observed {
        Observed {
            sockets: domains.iter().map(|d| d.1).sum(),
            domains: domains.iter().copied().collect(),
            ..Default::default()
        }
    }

    #[test]
    fn sci_labels() {
        let mut o = obs(&[(27, 4)]);
        o.sci_modes = BTreeMap::from([(0, 4)]);
        o.sci_reasons = BTreeMap::from([(1, 4)]);
        let (l, ok, notes) = label(Family::Sci, &o, Some(27), false);
        assert_eq!(l, "sci(native)");
        assert!(ok);
        assert_eq!(
            notes[0],
            "sci: 4 of 4 AF_SCI sockets in mode native (fallback reasons: no-fabric x4): \
             their bytes go over each socket's native TCP socket"
        );
        o.sci_modes = BTreeMap::from([(1, 4)]);
        o.sci_reasons = BTreeMap::from([(0, 4)]);
        let (l, ok, notes) = label(Family::SciPreload, &o, Some(27), false);
        assert_eq!(l, "sci-preload(sci)");
        assert!(ok);
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("4 of 4 AF_SCI sockets in mode sci"));
        // --require-sci: only all-sci passes.
        assert!(label(Family::SciPreload, &o, Some(27), true).1);
        o.sci_modes = BTreeMap::from([(0, 2), (1, 2)]);
        let (l, ok, notes) = label(Family::Sci, &o, Some(27), true);
        assert_eq!(l, "sci(mixed)");
        assert!(!ok);
        assert!(notes.last().unwrap().contains("FAILED"));
        assert_eq!(label(Family::Sci, &o, Some(27), false).0, "sci(mixed)");
        // A preload that did not rewrite: the sockets are TCP.
        let (l, ok, notes) = label(
            Family::SciPreload,
            &obs(&[(2, 3), (27, 1)]),
            Some(27),
            false,
        );
        assert_eq!(l, "sci-preload(not-sci)");
        assert!(!ok);
        assert!(notes[0].contains("3 of 4"));
        assert!(!label(Family::Sci, &obs(&[(27, 1)]), None, false).1);
    }

    #[test]
    fn smc_labels() {
        let mut o = obs(&[(AF_SMC, 2)]);
        o.smc_modes = BTreeMap::from([(smc::SMC_DIAG_MODE_SMCD, 2)]);
        assert_eq!(
            label(Family::Smc, &o, None, false),
            ("smc(smcd)".into(), true, vec![])
        );
        o.smc_modes = BTreeMap::from([(smc::SMC_DIAG_MODE_FALLBACK_TCP, 2)]);
        o.smc_reasons = BTreeMap::from([(smc::SMC_CLC_DECL_NOUEID, 2)]);
        let (l, ok, notes) = label(Family::Smc, &o, None, false);
        assert_eq!(l, "smc(fallback)");
        assert!(!ok);
        assert!(notes[0].contains("NOUEID"));
        // What a fallen-back connection looks like: its file now is the TCP socket's.
        let mut f = obs(&[(libc::AF_INET, 2)]);
        f.smc_modes = BTreeMap::from([(smc::SMC_DIAG_MODE_FALLBACK_TCP, 2)]);
        assert_eq!(label(Family::Smc, &f, None, false).0, "smc(fallback)");
        // One fallback among SMC-D connections is still a fallback.
        o.smc_modes = BTreeMap::from([(1, 1), (2, 5)]);
        assert_eq!(label(Family::Smc, &o, None, false).0, "smc(fallback)");
        let mut o = obs(&[(AF_SMC, 1)]);
        o.smc_modes = BTreeMap::from([(2, 1)]);
        o.smc_missing = 1;
        assert!(!label(Family::Smc, &o, None, false).1);
        assert_eq!(
            label(Family::Smc, &obs(&[(2, 1)]), None, false).0,
            "smc(not-smc)"
        );
    }

    #[test]
    fn all_sci_and_summary() {
        let mut o = obs(&[(27, 2)]);
        o.sci_modes = BTreeMap::from([(1, 2)]);
        o.sci_reasons = BTreeMap::from([(0, 2)]);
        assert!(all_sci(&o));
        assert_eq!(sci_summary(&o), "mode sci x2");
        o.sci_modes = BTreeMap::from([(0, 1), (1, 1)]);
        o.sci_reasons = BTreeMap::from([(0, 1), (4, 1)]);
        assert!(!all_sci(&o));
        assert_eq!(
            sci_summary(&o),
            "mode native x1, sci x1; fallback reasons: peer-rejected x1"
        );
        // A TCP socket among them (a preload that did not rewrite).
        let mut t = obs(&[(2, 1), (27, 1)]);
        t.sci_modes = BTreeMap::from([(1, 1)]);
        assert!(!all_sci(&t));
        assert_eq!(sci_summary(&t), "mode sci x1, 1 not AF_SCI");
        assert!(!all_sci(&Observed::default()));
    }

    #[test]
    fn sci_reasons() {
        assert_eq!(sci_reason_name(1), "no-fabric");
        assert_eq!(sci_reason_name(7), "peer-tcp");
        assert_eq!(sci_reason_name(99), "reason-99");
    }

    #[test]
    fn values() {
        assert_eq!(fmt_value(12345.6), "12346");
        assert_eq!(fmt_value(123.456), "123.5");
        assert_eq!(fmt_value(12.345), "12.35");
        assert_eq!(fmt_value(0.4), "0.40");
        assert_eq!(fmt_value(f64::NAN), "-");
    }

    #[test]
    fn layout_aligns() {
        let t = layout(
            &[
                vec!["a".into(), "bb".into(), "c".into()],
                vec!["long".into(), "1".into(), "22".into()],
            ],
            1,
        );
        assert_eq!(t, "a     bb   c\nlong   1  22\n");
    }

    fn col(label: &str, measured: bool) -> Column {
        Column {
            family: "x",
            label: label.into(),
            measured,
            unavailable: None,
            verified: true,
            observed: Observed::default(),
        }
    }

    #[test]
    fn table_with_ratios() {
        let mut r = Row {
            test: "ping-pong 14 B".into(),
            metric: "median".into(),
            unit: "us".into(),
            better: Better::Lower,
            median: vec![Some(40.0), Some(16.8), None, None],
            ratio: vec![],
            reps: vec![vec![]; 4],
            errors: vec![None, None, Some("boom".into()), None],
        };
        r.compute_ratios(Some(0));
        assert!((r.ratio[1].unwrap() - 0.42).abs() < 1e-9);
        let t = table(
            &[
                col("tcp", true),
                col("unix", true),
                col("sci(native)", true),
                col("smc", false),
            ],
            &[r],
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with("measurement"));
        assert!(lines[0].contains("sci(native)"));
        assert!(lines[1].starts_with("ping-pong 14 B median  us"));
        assert!(lines[1].contains("40.00 [1.00]"));
        assert!(lines[1].contains("16.80 [0.42]"));
        assert!(lines[1].contains("error"));
        assert!(lines[1].ends_with("n/a"));
        // Without a tcp value there is no ratio.
        let mut r2 = Row {
            test: "t".into(),
            metric: String::new(),
            unit: "MB/s".into(),
            better: Better::Higher,
            median: vec![None, Some(5.0)],
            ratio: vec![],
            reps: vec![vec![]; 2],
            errors: vec![None, None],
        };
        r2.compute_ratios(Some(0));
        assert_eq!(r2.ratio, [None, None]);
        assert_eq!(r2.title(), "t");
        assert!(table(&[col("tcp", true), col("unix", true)], &[r2]).contains("5.00 [-]"));
    }
}
