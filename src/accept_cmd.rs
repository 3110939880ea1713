//! `rocgate accept`: a new node's acceptance. The tiers in order (quick,
//! standard, extended, burn-in), each a `rocgate run` of its own whose
//! reports (JSON, JUnit, HTML) are kept, stopping at the first tier that
//! does not pass; then the node's snapshot; all in one archive named by the
//! node and the date, with a record of what ran (`accept.json`), which a
//! fleet keeps as the node's acceptance evidence and `compare`s later runs
//! against.
//!
//! Each tier runs as a child process of this binary with the same node
//! arguments, its output on this terminal: Ctrl-C reaches it as it would a
//! `run` (the burn-in reports what it measured), and the archive keeps what
//! was written.

use crate::cli::AcceptArgs;
use crate::error::{Error, Result};
use rocgate::exit::Exit;
use rocgate_harness::Tier;
use serde::Serialize;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The tiers acceptance runs, in order.
const TIERS: [Tier; 4] = [Tier::Quick, Tier::Standard, Tier::Extended, Tier::Burnin];

/// One tier's run, as the record keeps it.
#[derive(Debug, Serialize)]
struct TierRun {
    tier: Tier,
    /// The run's exit code (`None`: it died on a signal).
    exit_code: Option<i32>,
    /// The decision its JSON report gives (`healthy`, `unhealthy`,
    /// `unknown`), when it wrote one.
    health: Option<String>,
    /// Its reports in the archive.
    reports: Vec<String>,
}

/// What `accept.json` says.
#[derive(Debug, Serialize)]
struct Record {
    schema_version: u32,
    node: String,
    rocgate_version: &'static str,
    started_at: String,
    finished_at: String,
    burnin_duration_s: f64,
    /// Every tier passed.
    accepted: bool,
    /// The tier that did not pass, when one did not.
    stopped_at: Option<Tier>,
    tiers: Vec<TierRun>,
    /// The node's snapshot in the archive, when it was taken.
    snapshot: Option<String>,
    /// Why there is no snapshot.
    #[serde(skip_serializing_if = "Option::is_none")]
    snapshot_error: Option<String>,
}

/// Runs the acceptance and writes its archive.
///
/// Exit: 0 when every tier passed; 1 when a tier found a fault; 130 when
/// interrupted; 2 when a tier could not judge the node; 3 when the archive
/// could not be written.
pub fn run(args: &AcceptArgs) -> Result<Exit> {
    // Caught, so that Ctrl-C ends the tier's run (which reports) and not
    // this process before it archives.
    let interrupt = crate::signals::interrupt_flag()?;
    // The archive's directory is known good before an hour of tiers runs.
    if !args.out.is_dir() {
        return Err(Error::usage(format!(
            "--out {}: not a directory; give the directory the acceptance archive goes to",
            args.out.display()
        )));
    }
    let program = std::env::current_exe()
        .map_err(|e| Error::internal(format!("cannot find rocgate's own binary: {e}")))?;
    let work = tempfile::tempdir()
        .map_err(|e| Error::node_io(format!("failed to create a working directory: {e}")))?;
    let started = chrono::Utc::now();
    let duration = args
        .duration
        .unwrap_or(rocgate_suites::layers::hip::burnin::DEFAULT_DURATION);
    let mut runs = Vec::new();
    let mut stopped_at = None;
    let mut node = args.node.node_name.clone();
    for tier in TIERS {
        if interrupt.load(std::sync::atomic::Ordering::SeqCst) != 0 {
            stopped_at = Some(tier);
            break;
        }
        out!("\n== rocgate accept: {tier} tier ==\n");
        let names: Vec<String> = ["json", "xml", "html"]
            .iter()
            .map(|ext| format!("{tier}.{ext}"))
            .collect();
        let mut cmd = std::process::Command::new(&program);
        // Strict: a check that could not look does not pass an acceptance.
        cmd.arg("run")
            .arg("--strict")
            .arg("--tier")
            .arg(tier.as_str());
        if tier == Tier::Burnin {
            cmd.arg("--duration")
                .arg(format!("{}s", duration.as_secs()));
        }
        for (flag, name) in ["--json", "--junit", "--html"].iter().zip(&names) {
            cmd.arg(flag).arg(work.path().join(name));
        }
        cmd.args(args.run_argv());
        let status = cmd.status().map_err(|e| {
            Error::internal(format!("failed to start `{} run`: {e}", program.display()))
        })?;
        let report = read_report(&work.path().join(&names[0]));
        if node.is_none() {
            node = report
                .as_ref()
                .and_then(|r| r["node"]["hostname"].as_str().map(str::to_string));
        }
        let written: Vec<String> = names
            .iter()
            .filter(|n| work.path().join(n).exists())
            .cloned()
            .collect();
        runs.push(TierRun {
            tier,
            exit_code: status.code(),
            health: report
                .as_ref()
                .and_then(|r| r["decision"]["health"].as_str().map(str::to_string)),
            reports: written,
        });
        if status.code() != Some(0) {
            stopped_at = Some(tier);
            break;
        }
    }
    let (snapshot, snapshot_error) = match snapshot(&program, args, work.path()) {
        Ok(name) => (Some(name), None),
        Err(why) => (None, Some(why)),
    };
    let node = node.unwrap_or_else(|| "node".to_string());
    let finished = chrono::Utc::now();
    let record = Record {
        schema_version: 1,
        node: node.clone(),
        rocgate_version: env!("CARGO_PKG_VERSION"),
        started_at: started.to_rfc3339(),
        finished_at: finished.to_rfc3339(),
        burnin_duration_s: duration.as_secs_f64(),
        accepted: stopped_at.is_none(),
        stopped_at,
        tiers: runs,
        snapshot,
        snapshot_error,
    };
    let text = serde_json::to_string_pretty(&record)
        .map_err(|e| Error::internal(format!("internal error: the acceptance record: {e}")))?;
    std::fs::write(work.path().join("accept.json"), text)
        .map_err(|e| Error::node_io(format!("failed to write the acceptance record: {e}")))?;
    let archive = args.out.join(format!(
        "rocgate-accept-{}-{}.tar.zst",
        safe_name(&node),
        started.format("%Y%m%dT%H%M%SZ")
    ));
    if let Err(e) = pack(work.path(), &archive) {
        // The reports outlive a failed archive: an hour of evidence.
        let kept = work.keep();
        return Err(Error::node_io(format!(
            "{e}; the reports are kept in {}",
            kept.display()
        )));
    }
    let last = record.tiers.last();
    let line = match (&record.stopped_at, last) {
        (None, _) => format!(
            "ACCEPTED: every tier passed on {node} (quick, standard, extended, burn-in of {})",
            crate::ui::span_text(duration.as_secs_f64())
        ),
        (Some(t), Some(run)) if run.tier != *t => {
            format!("NOT ACCEPTED: interrupted before the {t} tier on {node}")
        }
        (Some(t), Some(run)) => format!(
            "NOT ACCEPTED: the {t} tier {} on {node}; the tiers above it did not run",
            match run.exit_code {
                Some(1) => "found a fault".to_string(),
                Some(130) => "was interrupted".to_string(),
                Some(c) => format!("could not judge the node (exit {c})"),
                None => "died on a signal".to_string(),
            }
        ),
        (Some(t), None) => format!("NOT ACCEPTED: the {t} tier did not run"),
    };
    out!("\n{line}\nArchive: {}\n", archive.display());
    Ok(match (record.stopped_at, last.and_then(|r| r.exit_code)) {
        (None, _) => Exit::Pass,
        _ if interrupt.load(std::sync::atomic::Ordering::SeqCst) != 0 => Exit::Interrupted,
        (Some(_), Some(1)) => Exit::Fail,
        (Some(_), Some(130)) => Exit::Interrupted,
        _ => Exit::NoVerdict,
    })
}

/// A tier's JSON report, when it wrote one that reads.
fn read_report(path: &Path) -> Option<serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// Takes the node's snapshot into `dir`: its file name, or why there is none.
fn snapshot(program: &Path, args: &AcceptArgs, dir: &Path) -> std::result::Result<String, String> {
    let name = "snapshot.tar.zst";
    let mut cmd = std::process::Command::new(program);
    cmd.arg("snapshot").arg("--out").arg(dir.join(name));
    cmd.args(args.node_argv());
    match cmd.stdout(std::process::Stdio::null()).status() {
        Ok(s) if s.success() => Ok(name.to_string()),
        Ok(s) => Err(format!("`rocgate snapshot` ended with {s}")),
        Err(e) => Err(format!("`rocgate snapshot` did not start: {e}")),
    }
}

/// `name` with only what a file name may safely hold.
fn safe_name(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with('.') {
        format!("node{s}")
    } else {
        s
    }
}

/// Writes every file of `dir` into the tar.zst `archive`, atomically.
fn pack(dir: &Path, archive: &Path) -> Result<()> {
    let not_written = |e: String| Error::node_io(format!("{}: {e}", archive.display()));
    let sink =
        rocgate_harness::atomic::Staged::create(archive).map_err(|e| not_written(e.to_string()))?;
    let encoder = zstd::Encoder::new(sink, 3).map_err(|e| not_written(e.to_string()))?;
    let mut tar = tar::Builder::new(encoder);
    let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| not_written(e.to_string()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    names.sort();
    for path in names {
        let name = path.file_name().map(OsString::from).unwrap_or_default();
        tar.append_path_with_name(&path, &name)
            .map_err(|e| not_written(e.to_string()))?;
    }
    let encoder = tar.into_inner().map_err(|e| not_written(e.to_string()))?;
    let sink = encoder.finish().map_err(|e| not_written(e.to_string()))?;
    sink.commit().map_err(|e| not_written(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_name_becomes_a_safe_file_name() {
        assert_eq!(safe_name("gpu-node-17.rack3"), "gpu-node-17.rack3");
        assert_eq!(safe_name("../etc"), "node.._etc");
        assert_eq!(safe_name(""), "node");
        assert_eq!(crate::ui::span_text(1800.0), "30 min");
        assert_eq!(crate::ui::span_text(60.0), "60 s");
    }
}
