//! The node's own history: the last runs' JSON reports, kept in a state
//! directory so that `doctor` can say what changed since the node last
//! passed and `--since last-run` can judge only what is new.
//!
//! Bounded: at most [`KEEP`] reports and [`MAX_BYTES`] in all, the oldest
//! dropped first. Written by `run` and `health` on the live node only (a
//! `--sysroot` replay records nothing unless `--history-dir` names a
//! directory), and never in the way of a run: a directory that cannot be
//! written is said on stderr, and the run's verdict stands.

use rocgate_harness::compare;
use rocgate_harness::saved_report;
use rocgate_suites::gpu_events::Since;
use std::path::{Path, PathBuf};

/// How many reports are kept.
pub const KEEP: usize = 20;

/// How many bytes of reports are kept in all.
pub const MAX_BYTES: u64 = 128 << 20;

/// `--history-dir` (or `ROCGATE_HISTORY_DIR`) value that turns history off.
pub const OFF: &str = "off";

/// The system's state directory for rocgate, when it runs as root.
const SYSTEM_DIR: &str = "/var/lib/rocgate/history";

/// A history directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct History {
    dir: PathBuf,
}

/// One report the history holds.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Its file.
    pub path: PathBuf,
    /// The report.
    pub report: compare::Report,
}

impl History {
    /// The history a command uses: the directory given (`off`: none), else,
    /// on the live node, `/var/lib/rocgate/history` for root and
    /// `$XDG_STATE_HOME/rocgate/history` (`~/.local/state/...`) for others;
    /// none for a `--sysroot` replay.
    pub fn locate(given: Option<&Path>, live: bool) -> Option<History> {
        if let Some(dir) = given {
            return (dir.as_os_str() != OFF && !dir.as_os_str().is_empty()).then(|| History {
                dir: dir.to_path_buf(),
            });
        }
        if !live {
            return None;
        }
        if nix::unistd::geteuid().is_root() {
            return Some(History {
                dir: PathBuf::from(SYSTEM_DIR),
            });
        }
        let state = std::env::var_os("XDG_STATE_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))?;
        Some(History {
            dir: state.join("rocgate/history"),
        })
    }

    /// Adds a run's report (`json`, as `--json` writes it) and drops the
    /// oldest beyond the bounds. `Err` says why it could not be kept.
    pub fn record(&self, json: &str, started_at: &str, passed: bool) -> Result<PathBuf, String> {
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| format!("history {} not created: {e}", self.dir.display()))?;
        // Names sort by time: the RFC 3339 start, its separators made
        // file-name safe.
        let stamp: String = started_at
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let name = format!("run-{stamp}-{}.json", if passed { "pass" } else { "fail" });
        let path = self.dir.join(name);
        rocgate_harness::atomic::write(&path, json.as_bytes())
            .map_err(|e| format!("history report {} not written: {e}", path.display()))?;
        self.prune();
        Ok(path)
    }

    /// The reports' files, oldest first.
    fn files(&self) -> Vec<(PathBuf, u64)> {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return Vec::new();
        };
        let mut files: Vec<(PathBuf, u64)> = entries
            .filter_map(Result::ok)
            .filter(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                name.starts_with("run-") && name.ends_with(".json")
            })
            .filter_map(|e| {
                let meta = e.metadata().ok().filter(std::fs::Metadata::is_file)?;
                Some((e.path(), meta.len()))
            })
            .collect();
        files.sort();
        files
    }

    /// Drops the oldest reports beyond [`KEEP`] and [`MAX_BYTES`].
    fn prune(&self) {
        let files = self.files();
        let mut kept_bytes = 0u64;
        let mut kept = 0usize;
        for (path, len) in files.iter().rev() {
            kept_bytes = kept_bytes.saturating_add(*len);
            kept += 1;
            if kept > KEEP || (kept > 1 && kept_bytes > MAX_BYTES) {
                // Best effort: a file that will not go stays until next time.
                let _ = std::fs::remove_file(path);
            }
        }
    }

    /// The newest report that `keep` accepts, read as a saved report (a
    /// damaged file is passed over).
    fn newest(&self, keep: impl Fn(&Path) -> bool) -> Option<Entry> {
        self.files()
            .into_iter()
            .rev()
            .filter(|(p, _)| keep(p))
            .find_map(|(path, _)| {
                let report = saved_report::open(&path).ok()?;
                Some(Entry { path, report })
            })
    }

    /// The last run that passed.
    pub fn last_healthy(&self) -> Option<Entry> {
        self.newest(|p| p.to_string_lossy().ends_with("-pass.json"))
            .filter(|e| e.report.passed)
    }

    /// The last run.
    pub fn last(&self) -> Option<Entry> {
        self.newest(|_| true)
    }
}

/// `since` with `last-run` made the time since the last run `history`
/// holds began; since boot when there is none (a first run judges all).
pub fn resolve(since: Since, history: Option<&History>) -> Since {
    if since != Since::LastRun {
        return since;
    }
    let Some(started) = history
        .and_then(History::last)
        .and_then(|e| chrono::DateTime::parse_from_rfc3339(&e.report.started_at).ok())
    else {
        return Since::Boot;
    };
    let ago = chrono::Utc::now().signed_duration_since(started);
    match ago.to_std() {
        Ok(d) => Since::Last(std::time::Duration::from_secs(d.as_secs().max(1))),
        // A last run in the future (a clock set back): judge everything.
        Err(_) => Since::Boot,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(passed: bool, started_at: &str) -> String {
        serde_json::json!({
            "schema_version": saved_report::SCHEMA_VERSION,
            "tool": "rocgate 0.1.0",
            "tier": "quick",
            "started_at": started_at,
            "duration_ms": 1.0,
            "passed": passed,
            "results": [],
        })
        .to_string()
    }

    #[test]
    fn keeps_the_newest_within_its_bounds_and_finds_the_last_pass() {
        let dir = tempfile::tempdir().unwrap();
        let h = History::locate(Some(dir.path()), false).unwrap();
        for day in 1..=25 {
            let at = format!("2026-11-{day:02}T03:12:00+00:00");
            h.record(&report(day != 25, &at), &at, day != 25).unwrap();
        }
        assert_eq!(h.files().len(), KEEP);
        let healthy = h.last_healthy().unwrap();
        assert_eq!(healthy.report.started_at, "2026-11-24T03:12:00+00:00");
        assert!(!h.last().unwrap().report.passed);
        // The oldest went first.
        assert!(
            h.files()[0]
                .0
                .to_string_lossy()
                .contains("2026-11-06T03-12-00-00-00")
        );
    }

    #[test]
    fn off_and_replays_keep_nothing_and_a_damaged_file_is_passed_over() {
        assert_eq!(History::locate(Some(Path::new("off")), true), None);
        assert_eq!(History::locate(None, false), None);
        let dir = tempfile::tempdir().unwrap();
        let h = History::locate(Some(dir.path()), false).unwrap();
        h.record(
            &report(true, "2026-11-01T00:00:00Z"),
            "2026-11-01T00:00:00Z",
            true,
        )
        .unwrap();
        std::fs::write(dir.path().join("run-2026-11-02T00-00-00Z-pass.json"), "{").unwrap();
        assert_eq!(
            h.last_healthy().unwrap().report.started_at,
            "2026-11-01T00:00:00Z"
        );
    }
}
