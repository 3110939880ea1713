//! Writing a run's reports (JUnit, JSON, Prometheus textfile, HTML) where
//! `ReportArgs` says: each through the atomic writer, one failure not
//! stopping the others.

use crate::cli::ReportArgs;
use rocgate::session::Session;
use rocgate_harness::doctor::{self, Diagnosis};
use rocgate_harness::prom::{self, PromContext};
use rocgate_harness::{RunReport, atomic, json, junit};
use rocgate_suites::stack::IDENTITY;
use std::collections::BTreeMap;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;

/// A report a run writes: each is a rendering of the run as [`Presented`]
/// shows it, asked for by its own flag of [`ReportArgs`]. This table is the
/// one list of formats: the writer, the distinct-path check and the flags'
/// names all go through it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// JUnit XML for CI.
    Junit,
    /// The JSON results document ([`rocgate_harness::document`]).
    Json,
    /// A Prometheus textfile for node_exporter.
    Prom,
    /// A self-contained HTML page.
    Html,
}

impl Format {
    /// Every format, in the order a run writes them.
    pub const ALL: [Format; 4] = [Format::Junit, Format::Json, Format::Prom, Format::Html];

    /// The flag that asks for it.
    pub fn flag(self) -> &'static str {
        match self {
            Format::Junit => "--junit",
            Format::Json => "--json",
            Format::Prom => "--prom",
            Format::Html => "--html",
        }
    }

    /// Its name, in a message saying it was not written.
    fn name(self) -> &'static str {
        match self {
            Format::Junit => "JUnit",
            Format::Json => "JSON",
            Format::Prom => "Prometheus",
            Format::Html => "HTML",
        }
    }

    /// How the line naming the file written starts (aligned).
    fn label(self) -> &'static str {
        match self {
            Format::Junit => "JUnit:",
            Format::Json => "JSON: ",
            Format::Prom => "Prom: ",
            Format::Html => "HTML: ",
        }
    }

    /// Where `args` asks for it, if they do.
    pub fn path(self, args: &ReportArgs) -> Option<&Path> {
        match self {
            Format::Junit => args.junit.as_deref(),
            Format::Json => args.json.as_deref(),
            Format::Prom => args.prom.as_deref(),
            Format::Html => args.html.as_deref(),
        }
    }

    /// The run in this format, as `source` writes it to `path` (a textfile
    /// keeps the last success of the one it replaces).
    fn render(self, shown: &Presented<'_>, source: Source, path: &Path) -> Result<String, String> {
        let report = shown.report;
        match self {
            Format::Junit => junit::render(report, &shown.node, &IDENTITY),
            Format::Json => json_text(shown),
            Format::Prom => Ok(textfile(source, path, &shown.node, report)),
            Format::Html => Ok(crate::html::run_page(shown)),
        }
    }
}

/// Refuses one destination for two reports: the second write would replace
/// the first (or, in a FIFO, run into it), and the run would claim both.
/// Paths are compared where they lead (`./r` and `r`, a symlink and its
/// target). A character device is exempt: each report is written through
/// to it and neither replaces the other (`--junit /dev/null --json /dev/null`).
pub fn distinct_paths(args: &ReportArgs) -> Result<(), String> {
    let given: Vec<(&str, &Path)> = Format::ALL
        .iter()
        .filter_map(|f| f.path(args).map(|p| (f.flag(), p)))
        .collect();
    for (i, (flag_a, a)) in given.iter().enumerate() {
        for (flag_b, b) in &given[i + 1..] {
            if prints(a) && prints(b) {
                return Err(format!(
                    "{flag_a} - and {flag_b} - both print to stdout; give one of them a file"
                ));
            }
            let dest = atomic::destination(a);
            let char_device =
                std::fs::metadata(&dest).is_ok_and(|m| m.file_type().is_char_device());
            if dest == atomic::destination(b) && !char_device {
                return Err(format!(
                    "{flag_a} {} and {flag_b} {} name the same file; give each report its own path",
                    a.display(),
                    b.display()
                ));
            }
        }
    }
    Ok(())
}

/// Whether a report flag's value is `-`: the report is printed on stdout
/// (and what rocgate prints for people goes to stderr).
pub fn prints(path: &Path) -> bool {
    path.as_os_str() == crate::output::STDOUT
}

/// Whether `args` print a report on stdout.
pub fn claims_stdout(args: &ReportArgs) -> bool {
    Format::ALL.iter().any(|f| f.path(args).is_some_and(prints))
}

/// A finished run with what the reports people read show beside its
/// results: the doctor's summary, the node's properties (host name, kernel,
/// driver, ROCm) and each scope's component versions.
pub struct Presented<'a> {
    /// The run.
    pub report: &'a RunReport,
    /// Its doctor's summary.
    pub diagnosis: Diagnosis,
    /// The node's properties, as every report lists them.
    pub node: Vec<(String, String)>,
    /// Each scope's component versions.
    pub versions: BTreeMap<String, BTreeMap<String, String>>,
    /// What the run means for those who act on it.
    pub decision: rocgate::decision::Decision,
}

impl<'a> Presented<'a> {
    /// `report` of the node `session` opened.
    pub fn of(session: &Session, report: &'a RunReport) -> Self {
        Presented {
            report,
            diagnosis: doctor::diagnose(report),
            node: session.node_properties(report.tier),
            versions: session.versions(report),
            decision: rocgate::decision::decide(report),
        }
    }
}

/// The run's JSON report, as `--json` writes it.
pub fn json_text(shown: &Presented<'_>) -> Result<String, String> {
    let tool = format!("rocgate {}", env!("CARGO_PKG_VERSION"));
    json::render(
        shown.report,
        &json::JsonContext {
            tool: &tool,
            node_properties: &shown.node,
            versions: &shown.versions,
            decision: serde_json::to_value(&shown.decision).ok(),
        },
    )
}

/// Keeps the run in the node's history, if it has one; a history that
/// cannot be written is said, and the run's verdict stands.
pub fn keep_in_history(history: Option<&crate::history::History>, shown: &Presented<'_>) {
    let Some(history) = history else { return };
    let kept = json_text(shown).and_then(|text| {
        let started = shown.report.started_at.to_rfc3339();
        let passed = shown.decision.exit() == rocgate::exit::Exit::Pass;
        history.record(&text, &started, passed)
    });
    if let Err(e) = kept {
        errln!("rocgate: {e}");
    }
}

/// The command whose run the reports are of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// `rocgate health`.
    Health,
    /// `rocgate run`.
    Run,
}

impl Source {
    /// The command's name, as the `source` label of its textfile's series.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Health => "health",
            Source::Run => "run",
        }
    }
}

/// Writes every report asked for of the run `shown`; one that cannot be
/// written does not stop the others. Returns the lines naming the reports
/// written and the errors of those that were not.
pub fn write(
    source: Source,
    args: &ReportArgs,
    shown: &Presented<'_>,
) -> (Vec<String>, Vec<String>) {
    let mut written = Vec::new();
    let mut failed = Vec::new();
    for format in Format::ALL {
        let Some(path) = format.path(args) else {
            continue;
        };
        let to_stdout = prints(path);
        let put = |t: String| {
            if !to_stdout {
                return atomic::write(path, t.as_bytes()).map_err(|e| e.to_string());
            }
            let out = crate::output::Output::Stdout;
            match format {
                Format::Json => out.json(t.trim_end()),
                _ => out.text(&t),
            }
            .map_err(|e| e.to_string())
        };
        match format.render(shown, source, path).and_then(put) {
            Ok(()) if to_stdout => written.push(format!("{} stdout", format.label())),
            Ok(()) => written.push(format!("{} {}", format.label(), path.display())),
            Err(e) => failed.push(format!(
                "{} report not written to {}: {e}",
                format.name(),
                path.display()
            )),
        }
    }
    (written, failed)
}

/// The largest earlier textfile read for its last success: far above any
/// rocgate writes (a few hundred KiB on 64 partitions).
const PREVIOUS_TEXTFILE_LIMIT: u64 = 16 << 20;

/// The node property `key` (`hostname`, `kernel`) among `props`, as the
/// session lists them for every report.
pub fn node_property<'a>(props: &'a [(String, String)], key: &str) -> Option<&'a str> {
    props
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// The labels every series of `source`'s textfile carries, so that two
/// textfiles in one collector directory never export one series twice
/// (node_exporter refuses the scrape: "collected before with the same name
/// and label values"): health's (whatever tier it chose, one job's series)
/// and each tier of run's (a nightly extended run beside an hourly quick
/// one).
pub fn source_labels(source: Source, report: &RunReport) -> Vec<(&'static str, String)> {
    match source {
        Source::Health => vec![("source", source.as_str().to_string())],
        Source::Run => vec![
            ("source", source.as_str().to_string()),
            ("tier", report.tier.to_string()),
        ],
    }
}

/// The textfile for `report`, keeping the last success of the file it
/// replaces at `path`.
fn textfile(source: Source, path: &Path, props: &[(String, String)], report: &RunReport) -> String {
    let prop = |k: &str| node_property(props, k).unwrap_or_default().to_string();
    let labels = source_labels(source, report);
    let info: Vec<(&str, String)> = [
        ("version", prop("rocgate_version")),
        (IDENTITY.host, prop(IDENTITY.host)),
        ("kernel", prop("kernel")),
        ("amdgpu_release", prop("amdgpu_release")),
        ("rocm", prop("rocm")),
        ("tier", prop("tier")),
    ]
    .into_iter()
    // A label every series carries is not repeated in the info.
    .filter(|(k, _)| !labels.iter().any(|(l, _)| l == k))
    .collect();
    let codes: Vec<(&str, rocgate_harness::Severity)> = rocgate_suites::findings::codes::ALL
        .iter()
        .map(|c| (c.code, c.severity))
        .collect();
    // Only a regular file can hold an earlier run's figures; a FIFO must
    // not be read here, nor a file bigger than any textfile rocgate writes.
    let previous = std::fs::metadata(path)
        .ok()
        .filter(|m| m.is_file() && m.len() < PREVIOUS_TEXTFILE_LIMIT)
        .and_then(|_| std::fs::read_to_string(path).ok())
        .and_then(|t| prom::previous_success(&t));
    prom::render(
        report,
        &PromContext {
            labels: &labels,
            info: &info,
            codes: &codes,
            previous_success: previous,
            identity: &IDENTITY,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use std::path::PathBuf;

    fn args(junit: Option<&str>, json: Option<&str>) -> ReportArgs {
        ReportArgs {
            junit: junit.map(PathBuf::from),
            json: json.map(PathBuf::from),
            prom: None,
            html: None,
        }
    }

    #[test]
    fn the_format_table_gives_each_format_its_own_flag_name_and_label() {
        let unique = |f: fn(Format) -> &'static str| {
            Format::ALL
                .iter()
                .map(|&x| f(x))
                .collect::<BTreeSet<_>>()
                .len()
        };
        assert_eq!(unique(Format::flag), Format::ALL.len());
        assert_eq!(unique(Format::name), Format::ALL.len());
        assert_eq!(unique(Format::label), Format::ALL.len());
        // Every flag is one of ReportArgs', and says where it is asked for.
        let all = ReportArgs {
            junit: Some("j".into()),
            json: Some("k".into()),
            prom: Some("p".into()),
            html: Some("h".into()),
        };
        let paths: BTreeSet<_> = Format::ALL.iter().map(|f| f.path(&all)).collect();
        assert_eq!(paths.len(), Format::ALL.len());
        assert!(
            Format::ALL
                .iter()
                .all(|f| f.path(&args(None, None)).is_none())
        );
    }

    #[test]
    fn one_path_for_two_reports_is_refused_unless_a_character_device() {
        let dir = tempfile::tempdir().unwrap();
        let same = dir.path().join("r").display().to_string();
        let err = distinct_paths(&args(Some(&same), Some(&same))).unwrap_err();
        assert!(err.contains("--junit") && err.contains("--json"), "{err}");
        let via_dot = dir.path().join(".").join("r").display().to_string();
        assert!(distinct_paths(&args(Some(&same), Some(&via_dot))).is_err());
        let other = dir.path().join("s").display().to_string();
        assert_eq!(distinct_paths(&args(Some(&same), Some(&other))), Ok(()));
        assert_eq!(
            distinct_paths(&args(Some("/dev/null"), Some("/dev/null"))),
            Ok(())
        );
    }

    #[test]
    fn a_dash_prints_and_only_one_report_may_print() {
        assert!(prints(Path::new("-")));
        assert!(!prints(Path::new("./-")) && !prints(Path::new("/dev/stdout")));
        assert!(claims_stdout(&args(None, Some("-"))));
        assert!(!claims_stdout(&args(Some("j.xml"), Some("r.json"))));
        let err = distinct_paths(&args(Some("-"), Some("-"))).unwrap_err();
        assert!(err.contains("both print to stdout"), "{err}");
        assert_eq!(distinct_paths(&args(Some("-"), Some("r.json"))), Ok(()));
    }

    #[test]
    fn each_tier_of_run_has_series_of_its_own_and_health_one_set() {
        let report = RunReport::new(rocgate_harness::Tier::Extended, Vec::new());
        assert_eq!(
            source_labels(Source::Run, &report),
            [
                ("source", "run".to_string()),
                ("tier", "extended".to_string())
            ]
        );
        assert_eq!(
            source_labels(Source::Health, &report),
            [("source", "health".to_string())]
        );
        let props = [("hostname".to_string(), "n1".to_string())];
        assert_eq!(node_property(&props, "hostname"), Some("n1"));
        assert_eq!(node_property(&props, "kernel"), None);
    }
}
