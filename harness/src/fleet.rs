//! Many nodes' run reports read together: a table of nodes by layers, the
//! failures counted by code, and the nodes to take out of service.
//!
//! Reports carry layers by name only, so the caller gives the order of the
//! layers it knows; a layer a report names that the caller does not know
//! goes after them, in the order it first appears.
//!
//! A node is judged by its report's results, and by its `passed` and its
//! decision only where they agree with them: a report that says `passed:
//! true` over a failing check is counted failed and flagged, never taken
//! at its word. A report that cannot be read (too large, not JSON, another
//! schema) is listed as not read, naming its file and why, and the rest of
//! the fleet is still reported.

use crate::document::{Document, IdentityKeys};
use crate::markdown;
use crate::model::Scope;
use crate::saved_report;
use crate::verdict::{SkipReason, Status};
use chrono::{DateTime, FixedOffset, SecondsFormat};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// What one node's report says, summed up.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct FleetNode {
    /// The node's host name (its report's `node.hostname`), else the
    /// report's file name.
    pub node: String,
    /// The report it was read from.
    pub file: String,
    /// Whether the run passed: its results, its `passed` and its decision
    /// all say so.
    pub passed: bool,
    /// Why the run stopped early, if it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<String>,
    /// Per layer: `fail` (a failure, timeout or crash), `blocked`, `warn`
    /// (warnings only), `waived` (faults or warnings the site waived),
    /// `pass` or `skip`.
    pub layers: BTreeMap<String, String>,
    /// The lowest layer with a fault.
    pub first_failing_layer: Option<String>,
    /// The finding code of the fault that stops the stack lowest.
    pub code: Option<String>,
    /// Where it was found (`gpu3`, `node`): the GPU a node-wide check's
    /// finding blames (an all-reduce narrowed to one GPU), else the
    /// check's own scope.
    pub scope: Option<String>,
    /// That GPU's PCI address.
    pub pci_address: Option<String>,
    /// Whether the node should be drained: its report says so (the run's
    /// own decision), or, in a report that does not or whose decision its
    /// results contradict, it has a fault no waiver covers.
    pub drain: bool,
    /// How the report contradicts itself, when its `passed` or its
    /// decision disagrees with its results.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disagrees: Option<String>,
    /// How many GPU scopes the run tested (partitions count one each).
    pub gpus: usize,
    /// How many devices those are, when partitions make them fewer (by
    /// distinct serial number): 8 for an 8-GPU node in CPX mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub devices: Option<usize>,
    /// The tier the node was run at (`quick`, `standard`, ...).
    pub tier: String,
    /// The rocgate that wrote the report (`rocgate 0.1.0`).
    pub tool: String,
    /// When the run ended (RFC 3339), if its report says when it started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// How old the report was at [`Fleet::as_of`], in seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub age_s: Option<i64>,
    /// The node's own HTML page, as a link from the fleet page, when it
    /// sits beside its JSON report.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page: Option<String>,
}

impl FleetNode {
    /// Where the fault was found, as people read it: `gpu3 (0000:65:00.0)`,
    /// `node`, or empty when the node has none.
    pub fn gpu(&self) -> String {
        match (&self.scope, &self.pci_address) {
            (Some(s), Some(a)) => format!("{s} ({a})"),
            (Some(s), None) => s.clone(),
            _ => String::new(),
        }
    }

    /// The GPU count as people read it: `8`, or `64 (8 devices)` when
    /// partitioned.
    pub fn gpu_count(&self) -> String {
        match self.devices {
            Some(d) => format!("{} ({d} devices)", self.gpus),
            None => self.gpus.to_string(),
        }
    }

    /// The report's age, short: `45 s`, `12 min`, `3.5 h`, `2 d`; empty
    /// when unknown.
    pub fn age(&self) -> String {
        let Some(s) = self.age_s else {
            return String::new();
        };
        match s {
            s if s < 0 => "in the future".to_string(),
            s if s < 120 => format!("{s} s"),
            s if s < 2 * 3600 => format!("{} min", s / 60),
            s if s < 48 * 3600 => format!("{:.1} h", s as f64 / 3600.0),
            s => format!("{} d", s / 86_400),
        }
    }

    /// Where the node stands, as the fleet orders and filters it:
    /// `failed`, `warned` (passed with a warning) or `passed`.
    pub fn standing(&self) -> &'static str {
        match (self.passed, &self.code) {
            (false, _) => "failed",
            (true, Some(_)) => "warned",
            (true, None) => "passed",
        }
    }
}

/// A report the fleet could not read, and why.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct NotRead {
    /// The file.
    pub file: String,
    /// Why it was not read (what it is, what was expected).
    pub why: String,
}

/// A fleet's reports, read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Fleet {
    /// The time report ages are counted to (RFC 3339).
    pub as_of: String,
    /// The layers, in report order.
    pub layers: Vec<String>,
    /// One entry per report read: the failed nodes first, then those
    /// that passed with a warning, then the rest, each group in the order
    /// given.
    pub nodes: Vec<FleetNode>,
    /// How many nodes failed with each code.
    pub codes: BTreeMap<String, usize>,
    /// The reports that could not be read: their nodes are not judged.
    pub not_read: Vec<NotRead>,
}

/// A run report as the fleet view reads it: of its results only what
/// judges the node, nothing of metrics, facts or durations, so a value
/// written oddly there (a `null` reading) does not cost the node its place
/// in the fleet.
type Report = Document<Saved, SavedDecision>;

/// The part of a result the fleet reads.
#[derive(Deserialize)]
struct Saved {
    id: String,
    layer: String,
    scope: Scope,
    status: Status,
    #[serde(default)]
    finding: Option<SavedFinding>,
    #[serde(default)]
    skip_reason: Option<SkipReason>,
    #[serde(default)]
    waiver: Option<SavedWaiver>,
}

#[derive(Deserialize)]
struct SavedFinding {
    code: String,
    #[serde(default)]
    blames: Option<Scope>,
}

#[derive(Deserialize)]
struct SavedWaiver {
    #[serde(default)]
    expired: bool,
}

impl Saved {
    fn waived(&self) -> bool {
        self.waiver.as_ref().is_some_and(|w| !w.expired)
    }

    /// A fault no waiver covers (as `CheckResult::is_fault`).
    fn is_fault(&self) -> bool {
        self.status.is_fault() && !self.waived()
    }

    fn is_warning(&self) -> bool {
        self.status == Status::Warn && !self.waived()
    }

    fn is_unverified(&self) -> bool {
        self.status == Status::Skipped
            && self.skip_reason == Some(SkipReason::Unverifiable)
            && !self.waived()
    }

    /// Whether it fails its run, as `RunReport::fails_run` decides.
    fn fails(&self, report: &Report) -> bool {
        self.is_fault()
            || (self.status == Status::Blocked && !self.waived())
            || (report.fail_on.as_deref() == Some("warn") && self.is_warning())
            || (report.strict && self.is_unverified())
    }
}

/// The part of a report's decision the fleet reads.
#[derive(Deserialize)]
struct SavedDecision {
    drain: bool,
    /// The exit code `rocgate run` ended with (0 when it passed).
    #[serde(default)]
    exit_code: Option<i64>,
}

/// A report given to the fleet: its file and its parsed JSON, or why it
/// could not be read.
pub type Input = (String, Result<Value, saved_report::NotRead>);

impl Fleet {
    /// Reads `reports`, with `layer_order` the layers the caller knows,
    /// bottom-up. A report that could not be read, is of another schema or
    /// is not a run report is listed in [`Fleet::not_read`], naming its
    /// file; the others are read all the same. `keys` name the properties
    /// that say who the node and its GPUs are; reports' ages are counted
    /// to `as_of`.
    pub fn read(
        reports: Vec<Input>,
        layer_order: &[&str],
        keys: &IdentityKeys,
        as_of: DateTime<FixedOffset>,
    ) -> Fleet {
        let mut fleet = Fleet {
            as_of: as_of.to_rfc3339_opts(SecondsFormat::Secs, true),
            layers: layer_order.iter().map(|l| l.to_string()).collect(),
            ..Fleet::default()
        };
        for (file, doc) in reports {
            let report =
                doc.and_then(|doc| saved_report::parse::<Saved, SavedDecision>(doc, &file));
            let report = match report {
                Ok(r) => r,
                Err(saved_report::NotRead(why)) => {
                    fleet.not_read.push(NotRead { file, why });
                    continue;
                }
            };
            for r in &report.results {
                if !fleet.layers.contains(&r.layer) {
                    fleet.layers.push(r.layer.clone());
                }
            }
            let mut node = summarise(&file, &report, keys, as_of);
            // Two reports of one host name (a node run twice, copied
            // fixtures) stay apart by their files.
            if fleet.nodes.iter().any(|n: &FleetNode| n.node == node.node) {
                node.node = format!("{} ({file})", node.node);
            }
            if let Some(code) = node.code.as_ref().filter(|_| !node.passed) {
                *fleet.codes.entry(code.clone()).or_default() += 1;
            }
            fleet.nodes.push(node);
        }
        // What needs a person first: a stable sort keeps the given order
        // within each group.
        fleet.nodes.sort_by_key(|n| match n.standing() {
            "failed" => 0,
            "warned" => 1,
            _ => 2,
        });
        fleet
    }

    /// Whether every node read passed (reports not read say nothing).
    pub fn all_passed(&self) -> bool {
        self.nodes.iter().all(|n| n.passed)
    }

    /// How `rocgate fleet report` ends: 1 when a node failed (a fault
    /// found is found, whatever else could not be read), else 2 when a
    /// report could not be read (not every node was judged), else 0.
    pub fn exit_code(&self) -> u8 {
        if !self.all_passed() {
            1
        } else if !self.not_read.is_empty() {
            2
        } else {
            0
        }
    }

    /// The nodes to drain.
    pub fn to_drain(&self) -> impl Iterator<Item = &FleetNode> {
        self.nodes.iter().filter(|n| n.drain)
    }

    /// The nodes whose reports contradict themselves.
    pub fn disagreeing(&self) -> impl Iterator<Item = (&FleetNode, &str)> {
        self.nodes
            .iter()
            .filter_map(|n| n.disagrees.as_deref().map(|d| (n, d)))
    }

    /// How many nodes passed with each warning code (counted apart from
    /// [`Fleet::codes`], the failures).
    pub fn warning_codes(&self) -> BTreeMap<&str, usize> {
        let mut codes = BTreeMap::new();
        for n in self.nodes.iter().filter(|n| n.standing() == "warned") {
            if let Some(code) = &n.code {
                *codes.entry(code.as_str()).or_default() += 1;
            }
        }
        codes
    }

    /// The nodes that passed with a warning: fit for work, counted apart
    /// from the failed ones.
    pub fn warned(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| n.passed && n.code.is_some())
            .count()
    }

    /// The title: how many nodes failed, how many passed with warnings, and
    /// how many reports were not read.
    pub fn title(&self) -> String {
        let failed = self.nodes.iter().filter(|n| !n.passed).count();
        let mut title = format!(
            "rocgate fleet: {failed} of {} nodes failed",
            self.nodes.len()
        );
        let warned = self.warned();
        if warned > 0 {
            let _ = write!(title, "; {warned} passed with warnings");
        }
        if !self.not_read.is_empty() {
            let n = self.not_read.len();
            let _ = write!(
                title,
                "; {n} report{} not read",
                if n == 1 { "" } else { "s" }
            );
        }
        title
    }

    /// Markdown: the table, the counts per code, the nodes to drain, the
    /// reports that contradict themselves and those not read. Every string
    /// a report carries is escaped ([`markdown::cell`]).
    pub fn markdown(&self) -> String {
        let cell = markdown::cell;
        let mut out = format!(
            "## {}\n\nFailed nodes first; report ages as of {}.\n\n",
            self.title(),
            self.as_of
        );
        let mut header = vec!["node".to_string()];
        header.extend(self.layers.iter().map(|l| cell(l)));
        header.extend(
            [
                "first failing layer",
                "code",
                "GPU",
                "GPUs",
                "tier",
                "rocgate",
                "age",
            ]
            .map(String::from),
        );
        let _ = writeln!(out, "| {} |", header.join(" | "));
        let _ = writeln!(out, "|{}", "---|".repeat(header.len()));
        for n in &self.nodes {
            let mut row = vec![cell(&n.node)];
            row.extend(self.layers.iter().map(
                |l| match n.layers.get(l).map_or("-", String::as_str) {
                    "fail" => "**fail**".to_string(),
                    other => cell(other),
                },
            ));
            // A node that passed has no failing layer: its code is a
            // warning, and says so.
            if n.passed {
                row.push(String::new());
                row.push(
                    n.code
                        .as_deref()
                        .map(|c| format!("warn {}", markdown::code(c)))
                        .unwrap_or_default(),
                );
            } else {
                row.push(cell(n.first_failing_layer.as_deref().unwrap_or_default()));
                row.push(n.code.as_deref().map(markdown::code).unwrap_or_default());
            }
            row.push(cell(&n.gpu()));
            row.push(cell(&n.gpu_count()));
            row.push(cell(&n.tier));
            row.push(cell(n.tool.strip_prefix("rocgate ").unwrap_or(&n.tool)));
            row.push(cell(&n.age()));
            let _ = writeln!(out, "| {} |", row.join(" | "));
        }
        if !self.codes.is_empty() {
            out.push_str("\n### Failures by code\n\n| code | nodes |\n|---|---|\n");
            for (code, n) in &self.codes {
                let _ = writeln!(out, "| {} | {n} |", markdown::code(code));
            }
        }
        let warnings = self.warning_codes();
        if !warnings.is_empty() {
            out.push_str(
                "\n### Warnings by code (these nodes passed)\n\n| code | nodes |\n|---|---|\n",
            );
            for (code, n) in &warnings {
                let _ = writeln!(out, "| {} | {n} |", markdown::code(code));
            }
        }
        let drain: Vec<&FleetNode> = self.to_drain().collect();
        if !drain.is_empty() {
            out.push_str("\n### Nodes to drain\n\n");
            for n in drain {
                let _ = writeln!(
                    out,
                    "- {}: {} on {}",
                    cell(&n.node),
                    markdown::code(n.code.as_deref().unwrap_or("?")),
                    cell(&n.gpu())
                );
            }
        }
        let disagreeing: Vec<_> = self.disagreeing().collect();
        if !disagreeing.is_empty() {
            out.push_str("\n### Reports that contradict their results (counted failed)\n\n");
            for (n, why) in disagreeing {
                let _ = writeln!(
                    out,
                    "- {} ({}): {}",
                    cell(&n.node),
                    cell(&n.file),
                    cell(why)
                );
            }
        }
        if !self.not_read.is_empty() {
            out.push_str("\n### Reports not read (their nodes are not judged)\n\n");
            for r in &self.not_read {
                let _ = writeln!(out, "- {}: {}", cell(&r.file), cell(&r.why));
            }
        }
        out
    }

    /// JSON: `{"as_of", "nodes": [...], "layers": [...], "codes": {...}, "drain":
    /// [...], "not_read": [{"file", "why"}]}`.
    pub fn json(&self) -> Result<String, String> {
        serde_json::to_string_pretty(&FleetJson {
            as_of: &self.as_of,
            nodes: &self.nodes,
            layers: &self.layers,
            codes: &self.codes,
            drain: self.to_drain().map(|n| n.node.as_str()).collect(),
            not_read: &self.not_read,
        })
        .map_err(|e| format!("failed to serialise the fleet report: {e}"))
    }
}

/// `fleet report --format json` ([`Fleet::json`]).
#[derive(Serialize, schemars::JsonSchema)]
pub struct FleetJson<'a> {
    /// The time report ages are counted to (RFC 3339).
    pub as_of: &'a str,
    /// Every node read, failed ones first.
    pub nodes: &'a [FleetNode],
    /// The layers, bottom-up.
    pub layers: &'a [String],
    /// How many nodes failed with each code.
    pub codes: &'a BTreeMap<String, usize>,
    /// The nodes to drain, by name.
    pub drain: Vec<&'a str>,
    /// The reports not read, and why.
    pub not_read: &'a [NotRead],
}

/// How a report's own verdicts compare with its results: whether it
/// passed by all of them, and how they disagree when they do.
fn judge(report: &Report) -> (bool, Option<String>) {
    let failing = report.results.iter().find(|r| r.fails(report));
    let by_results = report.interrupted.is_none() && failing.is_none();
    let why_fails = || match (failing, &report.interrupted) {
        (Some(r), _) => format!("{} is {}", r.id, r.status.as_str()),
        (None, Some(why)) => format!("the run was interrupted ({why})"),
        (None, None) => String::new(),
    };
    let decided = report
        .decision
        .as_ref()
        .and_then(|d| d.exit_code)
        .map(|c| c == 0);
    let mut disagrees = Vec::new();
    if report.passed != by_results {
        disagrees.push(if report.passed {
            format!("it says passed: true, but {}", why_fails())
        } else {
            "it says passed: false, but none of its results fails the run".to_string()
        });
    }
    if let Some(decided) = decided.filter(|&d| d != by_results) {
        disagrees.push(if decided {
            format!("its decision says exit 0, but {}", why_fails())
        } else {
            "its decision says the run failed, but none of its results fails it".to_string()
        });
    }
    let passed = by_results && report.passed && decided.unwrap_or(true);
    (
        passed,
        (!disagrees.is_empty()).then(|| disagrees.join("; ")),
    )
}

/// One report, summed up.
fn summarise(
    file: &str,
    report: &Report,
    keys: &IdentityKeys,
    as_of: DateTime<FixedOffset>,
) -> FleetNode {
    let name = report
        .node
        .get(keys.host)
        .map(String::as_str)
        .filter(|h| !h.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| {
            std::path::Path::new(file)
                .file_stem()
                .map_or_else(|| file.to_string(), |s| s.to_string_lossy().into_owned())
        });
    let mut layers: BTreeMap<String, String> = BTreeMap::new();
    for r in &report.results {
        let cell = layers
            .entry(r.layer.clone())
            .or_insert_with(|| "skip".into());
        let this = cell_of(r);
        if rank(this) > rank(cell) {
            *cell = this.to_string();
        }
    }
    // The fault lowest in the stack, else the lowest warning; the report's
    // own first failing layer decides which layer.
    let stopping = report.results.iter().filter(|r| r.is_fault());
    let fault = stopping
        .clone()
        .find(|r| Some(&r.layer) == report.first_failing_layer.as_ref())
        .or_else(|| stopping.clone().next())
        .or_else(|| report.results.iter().find(|r| r.is_warning()));
    // A node-wide check whose finding blames one GPU (an all-reduce
    // narrowed to it) is that GPU's fault.
    let scope = fault.map(|r| r.finding.as_ref().and_then(|f| f.blames).unwrap_or(r.scope));
    let pci_address = scope.filter(|s| s.gpu().is_some()).and_then(|s| {
        report
            .scopes
            .iter()
            .find(|e| e.scope == s.label())
            .and_then(|e| e.get(keys.address).map(str::to_string))
    });
    let (passed, disagrees) = judge(report);
    let gpu_scopes: Vec<&crate::document::ScopeEntry> = report
        .scopes
        .iter()
        .filter(|e| e.scope.starts_with("gpu"))
        .collect();
    // Partitions of one device share its serial; a GPU with none (one that
    // failed its init) is a device of its own.
    let serials: std::collections::BTreeSet<&str> = gpu_scopes
        .iter()
        .filter_map(|e| e.get(keys.serial))
        .collect();
    let devices = serials.len()
        + gpu_scopes
            .iter()
            .filter(|e| e.get(keys.serial).is_none())
            .count();
    // A report that does not say when it started has no age: it is shown
    // as unknown rather than as fresh.
    let finished = DateTime::parse_from_rfc3339(&report.started_at)
        .ok()
        .map(|t| {
            let ms = report.duration_ms;
            let ran = if ms.is_finite() && (0.0..1e13).contains(&ms) {
                chrono::Duration::milliseconds(ms as i64)
            } else {
                chrono::Duration::zero()
            };
            t + ran
        });
    let has_fault = stopping.clone().next().is_some();
    // The run's own decision drains, unless the report contradicts itself:
    // then its results do.
    let drain = match &report.decision {
        Some(d) if disagrees.is_none() => d.drain,
        _ => has_fault,
    };
    FleetNode {
        node: name,
        file: file.to_string(),
        passed,
        interrupted: report.interrupted.clone(),
        layers,
        first_failing_layer: report.first_failing_layer.clone(),
        code: fault.and_then(|r| r.finding.as_ref().map(|f| f.code.clone())),
        scope: scope.map(Scope::label),
        pci_address,
        drain,
        disagrees,
        gpus: gpu_scopes.len(),
        devices: (devices < gpu_scopes.len()).then_some(devices),
        tier: report.tier.clone(),
        tool: report.tool.clone(),
        finished_at: finished.map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true)),
        age_s: finished.map(|t| (as_of - t).num_seconds()),
        page: None,
    }
}

fn cell_of(r: &Saved) -> &'static str {
    match r.status {
        _ if r.waived() => "waived",
        Status::Fail | Status::Timeout | Status::Crash => "fail",
        Status::Warn => "warn",
        Status::Blocked => "blocked",
        Status::Pass => "pass",
        Status::Skipped => "skip",
    }
}

/// How much a cell says: the worst result of a layer names it.
fn rank(cell: &str) -> u8 {
    match cell {
        "fail" => 5,
        "blocked" => 4,
        "warn" => 3,
        "waived" => 2,
        "pass" => 1,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::KEYS;
    use serde_json::json;

    fn as_of() -> DateTime<FixedOffset> {
        DateTime::parse_from_rfc3339("2026-12-01T12:00:00Z").unwrap()
    }

    fn report(host: &str, results: serde_json::Value, first: Option<&str>) -> Input {
        let passed = results
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["status"] != "fail" && r["status"] != "blocked");
        let doc = json!({
            "schema_version": 1,
            "tool": "rocgate 0.1.0",
            "tier": "quick",
            "started_at": "2026-12-01T09:00:00+00:00",
            "duration_ms": 60000.0,
            "node": {"hostname": host},
            "passed": passed,
            "first_failing_layer": first,
            "scopes": [{"scope": "gpu3", "properties": {"pci_address": "0000:65:00.0"}}],
            "results": results,
        });
        (format!("out/{host}.json"), Ok(doc))
    }

    fn result(
        id: &str,
        layer: &str,
        scope: &str,
        status: &str,
        code: Option<&str>,
    ) -> serde_json::Value {
        let mut r = json!({"id": id, "check": format!("{layer}::x"), "layer": layer, "scope": scope,
            "status": status, "message": "m", "duration_ms": 1.0});
        if let Some(c) = code {
            r["finding"] = json!({"code": c, "message": "m", "next_step": "n"});
        }
        r
    }

    #[test]
    fn nodes_by_layers_with_the_lowest_stopping_fault_and_the_nodes_to_drain() {
        let reports = [
            report(
                "n01",
                json!([
                    result("node.pci.a", "pci", "node", "pass", None),
                    result("gpu3.kfd.b", "kfd", "gpu3", "pass", None)
                ]),
                None,
            ),
            report(
                "n07",
                json!([
                    result("node.pci.a", "pci", "node", "pass", None),
                    result(
                        "gpu3.firmware.f",
                        "firmware",
                        "gpu3",
                        "fail",
                        Some("firmware-load-failed")
                    ),
                    result("gpu3.kfd.b", "kfd", "gpu3", "blocked", None),
                    result("gpu3.rocx.z", "rocx", "gpu3", "pass", None)
                ]),
                Some("firmware"),
            ),
        ];
        let fleet = Fleet::read(
            reports.to_vec(),
            &["pci", "firmware", "kfd"],
            &KEYS,
            as_of(),
        );
        assert!(!fleet.all_passed());
        assert_eq!(fleet.layers, ["pci", "firmware", "kfd", "rocx"]);
        // The failed node comes first, whatever order it was given in.
        let n07 = &fleet.nodes[0];
        assert_eq!(n07.node, "n07");
        assert_eq!(n07.layers["firmware"], "fail");
        assert_eq!(n07.layers["kfd"], "blocked");
        assert_eq!(n07.code.as_deref(), Some("firmware-load-failed"));
        assert_eq!(n07.pci_address.as_deref(), Some("0000:65:00.0"));
        assert!(n07.drain && !fleet.nodes[1].drain);
        assert_eq!((n07.gpus, n07.devices), (1, None));
        assert_eq!(n07.finished_at.as_deref(), Some("2026-12-01T09:01:00Z"));
        assert_eq!(n07.age_s, Some(3 * 3600 - 60));
        assert_eq!(n07.age(), "3.0 h");
        assert_eq!(fleet.codes["firmware-load-failed"], 1);
        let md = fleet.markdown();
        assert!(
            md.starts_with("## rocgate fleet: 1 of 2 nodes failed"),
            "{md}"
        );
        assert!(md.contains("| n07 | pass | **fail** | blocked | pass | firmware | `firmware-load-failed` | gpu3 (0000:65:00.0) | 1 | quick | 0.1.0 | 3.0 h |"), "{md}");
        assert!(
            md.contains("| n01 | pass | - | pass | - |  |  |  | 1 | quick | 0.1.0 | 3.0 h |"),
            "{md}"
        );
        assert!(
            md.find("| n07 |") < md.find("| n01 |"),
            "failed nodes first: {md}"
        );
        assert!(
            md.contains("- n07: `firmware-load-failed` on gpu3 (0000:65:00.0)"),
            "{md}"
        );
        let json: serde_json::Value = serde_json::from_str(&fleet.json().unwrap()).unwrap();
        assert_eq!(json["drain"], json!(["n07"]));
        assert_eq!(json["nodes"][1]["passed"], true);
        assert_eq!(json["as_of"], "2026-12-01T12:00:00Z");
    }

    #[test]
    fn ages_and_partitioned_gpu_counts_read_as_people_say_them() {
        let mut doc = report("n05", json!([]), None).1.unwrap();
        doc["scopes"] = json!((0..16)
            .map(|i| json!({"scope": format!("gpu{i}"), "properties": {"unique_id": format!("S{}", i / 8)}}))
            .chain([json!({"scope": "node", "properties": {}})])
            .collect::<Vec<_>>());
        let fleet = Fleet::read(
            vec![("n05.json".into(), Ok(doc.clone()))],
            &[],
            &KEYS,
            as_of(),
        );
        assert_eq!(fleet.nodes[0].gpu_count(), "16 (2 devices)");
        // A GPU without a serial (its init failed) is not a partition.
        let mut unnamed = doc.clone();
        unnamed["scopes"][15]["properties"] = json!({});
        unnamed["scopes"][7]["properties"] = json!({});
        unnamed["scopes"] = json!([unnamed["scopes"][7], unnamed["scopes"][15], {"scope": "gpu1", "properties": {"unique_id": "S9"}}]);
        let fleet = Fleet::read(vec![("n05.json".into(), Ok(unnamed))], &[], &KEYS, as_of());
        assert_eq!(fleet.nodes[0].gpu_count(), "3");
        // A report that does not say when it ran has no age, not a fresh one.
        doc["started_at"] = json!("yesterday");
        let fleet = Fleet::read(vec![("n05.json".into(), Ok(doc))], &[], &KEYS, as_of());
        assert_eq!(
            (fleet.nodes[0].age_s, fleet.nodes[0].age()),
            (None, String::new())
        );
        let at = |age_s| {
            FleetNode {
                age_s: Some(age_s),
                ..fleet.nodes[0].clone()
            }
            .age()
        };
        assert_eq!(
            [at(-5), at(45), at(600), at(5 * 3600), at(3 * 86_400)],
            ["in the future", "45 s", "10 min", "5.0 h", "3 d"]
        );
    }

    #[test]
    fn a_warning_passes_the_node_and_drains_nothing_and_a_waived_fault_is_marked() {
        let slow = result(
            "gpu3.pci.w",
            "pci",
            "gpu3",
            "warn",
            Some("pcie-link-degraded"),
        );
        let mut waived = result("gpu3.kfd.k", "kfd", "gpu3", "fail", Some("kfd-x"));
        waived["waiver"] = json!({"reason": "known", "source": "site.toml:3"});
        let fleet = Fleet::read(
            vec![report("n02", json!([slow, waived]), Some("pci"))],
            &["pci", "kfd"],
            &KEYS,
            as_of(),
        );
        let n = &fleet.nodes[0];
        assert_eq!(n.layers["pci"], "warn");
        assert_eq!(n.layers["kfd"], "waived");
        assert!(!n.drain);
        assert_eq!(n.code.as_deref(), Some("pcie-link-degraded"));
        // A report's own decision is what drains.
        let mut decided = report("n03", json!([]), None).1.unwrap();
        decided["decision"] = json!({"drain": true});
        let fleet = Fleet::read(vec![("n03.json".into(), Ok(decided))], &[], &KEYS, as_of());
        assert!(fleet.nodes[0].drain);
    }

    #[test]
    fn a_file_that_is_not_a_report_is_named_and_the_others_are_read() {
        let fleet = Fleet::read(
            vec![
                ("out/x.json".into(), Ok(json!({}))),
                (
                    "out/y.json".into(),
                    Err(saved_report::NotRead("failed to open out/y.json".into())),
                ),
                (
                    "out/z.json".into(),
                    Ok(json!({"schema_version": 1, "results": [1]})),
                ),
                report("n01", json!([]), None),
            ],
            &[],
            &KEYS,
            as_of(),
        );
        let why: Vec<&str> = fleet.not_read.iter().map(|r| r.why.as_str()).collect();
        assert!(
            why[0].starts_with("out/x.json is not a rocgate run report"),
            "{why:?}"
        );
        assert_eq!(why[1], "failed to open out/y.json");
        assert!(
            why[2].starts_with("out/z.json is not a rocgate run report"),
            "{why:?}"
        );
        assert_eq!(fleet.nodes.len(), 1);
        assert_eq!(fleet.exit_code(), 2);
        assert!(fleet.markdown().contains("- out/x.json: out/x.json is not"));
    }

    #[test]
    fn a_report_that_says_it_passed_over_a_failing_check_is_failed_and_flagged() {
        let mut doc = report(
            "n04",
            json!([result(
                "node.kfd.present",
                "kfd",
                "node",
                "fail",
                Some("kfd-missing")
            )]),
            Some("kfd"),
        )
        .1
        .unwrap();
        doc["passed"] = json!(true);
        let fleet = Fleet::read(
            vec![("n04.json".into(), Ok(doc.clone()))],
            &["kfd"],
            &KEYS,
            as_of(),
        );
        let n = &fleet.nodes[0];
        assert!(!n.passed && n.drain, "{n:?}");
        assert_eq!(
            n.disagrees.as_deref(),
            Some("it says passed: true, but node.kfd.present is fail")
        );
        assert_eq!(fleet.exit_code(), 1);
        assert_eq!(fleet.codes["kfd-missing"], 1);
        // A decision of exit 0 over it is contradicted too, and does not
        // keep the node in service.
        doc["decision"] = json!({"drain": false, "exit_code": 0});
        let fleet = Fleet::read(vec![("n04.json".into(), Ok(doc))], &["kfd"], &KEYS, as_of());
        let n = &fleet.nodes[0];
        assert!(!n.passed && n.drain, "{n:?}");
        assert!(
            n.disagrees
                .as_deref()
                .unwrap()
                .contains("its decision says exit 0")
        );
    }

    #[test]
    fn a_node_wide_fault_blaming_a_gpu_names_it_and_its_address() {
        let mut r = result(
            "node.rccl.all_reduce",
            "rccl",
            "node",
            "fail",
            Some("rccl-hang-isolated"),
        );
        r["finding"]["blames"] = json!("gpu3");
        let fleet = Fleet::read(
            vec![report("n05", json!([r]), Some("rccl"))],
            &["rccl"],
            &KEYS,
            as_of(),
        );
        assert_eq!(fleet.nodes[0].gpu(), "gpu3 (0000:65:00.0)");
    }
}
