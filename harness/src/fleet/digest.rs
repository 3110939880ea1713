//! One report reduced to what the fleet keeps of it (a [`Digest`]): the
//! node's standing, its fingerprint and the metrics the fleet compares.
//! Digests are made one report at a time, on any thread, so the fleet's
//! memory follows its number of nodes, not the bytes of their reports.

mod cursor;
mod scan;

use super::{FleetNode, FleetTerms};
use crate::document::{Document, IdentityKeys};
use crate::model::Scope;
use crate::saved_report::{self, NotRead};
use crate::verdict::{MetricKind, SkipReason, Status};
use chrono::{DateTime, FixedOffset, SecondsFormat};
use serde::Deserialize;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// The most metric samples kept of one report: a real extended run of an
/// 8-GPU node has a few hundred; a report with more is odd, and the rest
/// of it is not compared.
const MAX_SAMPLES: usize = 4096;

/// What the fleet keeps of one report.
#[derive(Clone, Debug)]
pub struct Digest {
    /// The node, summed up.
    pub node: FleetNode,
    /// The layers its results name, in the order they first appear.
    pub layers: Vec<String>,
    /// Its fingerprint: (component, value), as [`fingerprint`] reads it.
    pub fingerprint: Vec<(String, String)>,
    /// The metrics the fleet compares across nodes.
    pub samples: Samples,
}

/// Which side of the fleet's median is the bad one.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// Lower is worse: a throughput.
    Low,
    /// Higher is worse: an error counter.
    High,
}

/// What one metric is compared with: the same metric of the same GPU
/// model in the same partition mode at the same tier.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupKey {
    /// The tier it was measured at.
    pub tier: String,
    /// The GPU model (`AMD Instinct MI300X`).
    pub model: String,
    /// The partition mode (`SPX`), empty where the report does not say.
    pub partition: String,
    /// The metric, or its family for one measured between two GPUs
    /// (`p2p_gbps`).
    pub metric: String,
    /// Its unit.
    pub unit: String,
    /// The bad side.
    pub side: Side,
}

/// One metric of one scope of one report.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// What it is compared with: its index in [`Samples::groups`].
    pub group: u32,
    /// Where on the node it was measured (`gpu3`, `gpu0>gpu1`, `node`):
    /// its index in [`Samples::subjects`].
    pub subject: u32,
    /// The value.
    pub value: f64,
}

/// A report's samples, each group and subject written once: a report has
/// a few hundred samples of a few dozen groups on a few dozen subjects.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    /// The groups its samples belong to.
    pub groups: Vec<GroupKey>,
    /// Where on the node they were measured.
    pub subjects: Vec<String>,
    /// The samples.
    pub values: Vec<Sample>,
}

impl Samples {
    /// Adds `value` of `group` measured on `subject`.
    pub fn push(&mut self, group: GroupRef<'_>, subject: &str, value: f64) {
        // Looked up from the latest: a check's metrics come GPU after GPU,
        // each GPU's of the groups the one before it used.
        let g = match self.groups.iter().rposition(|k| group.is(k)) {
            Some(g) => g,
            None => {
                self.groups.push(group.owned());
                self.groups.len() - 1
            }
        };
        let s = match self.subjects.iter().rposition(|k| k == subject) {
            Some(s) => s,
            None => {
                self.subjects.push(subject.to_string());
                self.subjects.len() - 1
            }
        };
        self.values.push(Sample {
            group: g as u32,
            subject: s as u32,
            value,
        });
    }
}

/// A [`GroupKey`] of borrowed text, looked up before it is kept.
#[derive(Clone, Copy, Debug)]
pub struct GroupRef<'a> {
    /// The tier.
    pub tier: &'a str,
    /// The GPU model.
    pub model: &'a str,
    /// The partition mode.
    pub partition: &'a str,
    /// The metric or its family.
    pub metric: &'a str,
    /// Its unit.
    pub unit: &'a str,
    /// The bad side.
    pub side: Side,
}

impl GroupRef<'_> {
    fn is(&self, k: &GroupKey) -> bool {
        k.side == self.side
            && k.metric == self.metric
            && k.unit == self.unit
            && k.model == self.model
            && k.partition == self.partition
            && k.tier == self.tier
    }

    fn owned(&self) -> GroupKey {
        GroupKey {
            tier: self.tier.to_string(),
            model: self.model.to_string(),
            partition: self.partition.to_string(),
            metric: self.metric.to_string(),
            unit: self.unit.to_string(),
            side: self.side,
        }
    }
}

/// Reads the report in `bytes` (from `file`) into what the fleet keeps of
/// it; reports' ages are counted to `as_of`.
pub fn digest(
    file: &str,
    bytes: &[u8],
    terms: &FleetTerms,
    as_of: DateTime<FixedOffset>,
) -> Result<Digest, NotRead> {
    // The scan reads a report as rocgate writes it; serde reads any other,
    // or says why it is not a report.
    let scanned = std::str::from_utf8(bytes)
        .ok()
        .map(|text| scan::report(text, terms));
    let report = match scanned {
        Some(Ok(report)) => report,
        _ => Report::of(saved_report::parse_bytes::<Saved<'_>, SavedDecision>(
            bytes, file,
        )?),
    };
    Ok(reduce(file, &report, terms, as_of))
}

fn reduce(
    file: &str,
    report: &Report<'_>,
    terms: &FleetTerms,
    as_of: DateTime<FixedOffset>,
) -> Digest {
    let cells = cells(report, terms);
    let models = models(report, terms);
    Digest {
        layers: cells.iter().map(|(l, _)| l.to_string()).collect(),
        node: summarise(file, report, cells, &terms.keys, as_of),
        fingerprint: fingerprint(report, &models, terms),
        samples: samples(report, &models),
    }
}

/// Each GPU scope's model and partition mode, by label.
type Models<'a> = BTreeMap<&'a str, (&'a str, &'a str)>;

/// Reads each GPU scope's model (or its fallback) and partition mode
/// from its properties.
fn models<'a>(report: &'a Report<'_>, terms: &FleetTerms) -> Models<'a> {
    report
        .scopes
        .iter()
        .filter(|e| e.scope.starts_with("gpu"))
        .map(|e| {
            let model = e
                .get(terms.model)
                .or_else(|| e.get(terms.model_fallback))
                .unwrap_or("unknown GPU");
            (
                e.scope.as_ref(),
                (model, e.get(terms.partition).unwrap_or("")),
            )
        })
        .collect()
}

/// What a node runs, as the fleet compares it: the rocgate that wrote the
/// report, the node components the caller names (from the node's versions,
/// else its properties), the GPU count, models and partition modes, and per
/// GPU model every version its GPUs report (firmware, VBIOS), the distinct
/// values of a model's GPUs joined (`a, b` when a node's GPUs differ).
fn fingerprint(
    report: &Report<'_>,
    models: &Models<'_>,
    terms: &FleetTerms,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if !report.tool.is_empty() {
        out.push(("rocgate".to_string(), report.tool.to_string()));
    }
    let node_versions = report.versions.get("node");
    for &c in terms.node_components {
        let value = node_versions
            .and_then(|v| v.get(c))
            .or_else(|| report.node.get(c))
            .filter(|v| !v.is_empty());
        if let Some(v) = value {
            out.push((c.to_string(), v.to_string()));
        }
    }
    if !models.is_empty() {
        out.push(("gpus".to_string(), models.len().to_string()));
        let join = |set: BTreeSet<&str>| set.into_iter().collect::<Vec<_>>().join(", ");
        out.push((
            "gpu models".to_string(),
            join(models.values().map(|(m, _)| *m).collect()),
        ));
        let partitions: BTreeSet<&str> = models
            .values()
            .map(|(_, p)| *p)
            .filter(|p| !p.is_empty())
            .collect();
        if !partitions.is_empty() {
            out.push(("partition".to_string(), join(partitions)));
        }
    }
    let mut per_model: BTreeMap<(&str, &str), BTreeSet<&str>> = BTreeMap::new();
    for (scope, versions) in &report.versions {
        let Some((model, _)) = models.get(scope.as_ref()) else {
            continue;
        };
        for (k, v) in versions {
            per_model.entry((model, k)).or_default().insert(v);
        }
    }
    for ((model, k), values) in per_model {
        let values: Vec<&str> = values.into_iter().collect();
        out.push((format!("{model} {k}"), values.join(", ")));
    }
    out
}

/// The metrics the fleet compares: throughputs (lower is worse) and error
/// counters (higher is worse) of every result; readings, durations and
/// counts are not compared (they follow the moment and the host).
fn samples(report: &Report<'_>, models: &Models<'_>) -> Samples {
    let joined = |set: BTreeSet<&str>| set.into_iter().collect::<Vec<_>>().join(", ");
    // A node-wide measurement belongs to every model the node has.
    let node_model = joined(models.values().map(|(m, _)| *m).collect());
    let node_partition = joined(models.values().map(|(_, p)| *p).collect());
    let mut out = Samples::default();
    let mut scope = String::new();
    let mut pair = String::new();
    let mut labelled = None;
    for r in &report.results {
        for m in &r.metrics {
            let side = match m.kind {
                Some(MetricKind::Throughput) => Side::Low,
                Some(MetricKind::Counter) => Side::High,
                _ => continue,
            };
            if !m.value.is_finite() || out.values.len() >= MAX_SAMPLES {
                continue;
            }
            if labelled != Some(r.scope) {
                scope.clear();
                let _ = write!(scope, "{}", r.scope);
                labelled = Some(r.scope);
            }
            let (subject, metric, on): (&str, &str, &str) = match &m.between {
                Some((from, to)) => {
                    pair.clear();
                    let _ = write!(pair, "{from}>{to}");
                    let family = m
                        .name
                        .strip_suffix(pair.as_str())
                        .and_then(|f| f.strip_suffix('.'))
                        .unwrap_or(&m.name);
                    (pair.as_str(), family, from)
                }
                None => (scope.as_str(), &m.name, scope.as_str()),
            };
            let (model, partition) = match models.get(on) {
                Some((m, p)) => (*m, *p),
                None => (node_model.as_str(), node_partition.as_str()),
            };
            let group = GroupRef {
                tier: &report.tier,
                model,
                partition,
                metric,
                unit: &m.unit,
                side,
            };
            out.push(group, subject, m.value);
        }
    }
    out
}

/// A run report as the fleet reads it: of its results what judges the
/// node and the metrics the fleet compares, nothing of facts, series or
/// messages; a metric written oddly (a `null` reading) is left out, and
/// never costs the node its place in the fleet. Its text is borrowed from
/// the report's bytes (as [`scan`] reads them) or taken from the
/// [`Document`] serde read: a fleet of 100,000 reports copies none of
/// their strings.
struct Report<'a> {
    tool: Cow<'a, str>,
    tier: Cow<'a, str>,
    started_at: Cow<'a, str>,
    duration_ms: f64,
    interrupted: Option<Cow<'a, str>>,
    passed: bool,
    strict: bool,
    fail_on: Option<Cow<'a, str>>,
    decision: Option<SavedDecision>,
    first_failing_layer: Option<Cow<'a, str>>,
    node: Texts<'a>,
    versions: BTreeMap<Cow<'a, str>, Texts<'a>>,
    scopes: Vec<Entry<'a>>,
    results: Vec<Saved<'a>>,
}

/// An object's text values, by key.
type Texts<'a> = BTreeMap<Cow<'a, str>, Cow<'a, str>>;

/// A scope and its properties.
struct Entry<'a> {
    scope: Cow<'a, str>,
    properties: Texts<'a>,
}

impl Entry<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.properties.get(key).map(Cow::as_ref)
    }
}

fn texts<'a>(map: BTreeMap<String, String>) -> Texts<'a> {
    map.into_iter()
        .map(|(k, v)| (Cow::Owned(k), Cow::Owned(v)))
        .collect()
}

impl<'a> Report<'a> {
    /// The report serde read.
    fn of(doc: Document<Saved<'a>, SavedDecision>) -> Report<'a> {
        Report {
            tool: doc.tool.into(),
            tier: doc.tier.into(),
            started_at: doc.started_at.into(),
            duration_ms: doc.duration_ms,
            interrupted: doc.interrupted.map(Cow::Owned),
            passed: doc.passed,
            strict: doc.strict,
            fail_on: doc.fail_on.map(Cow::Owned),
            decision: doc.decision,
            first_failing_layer: doc.first_failing_layer.map(Cow::Owned),
            node: texts(doc.node),
            versions: doc
                .versions
                .into_iter()
                .map(|(scope, v)| (Cow::Owned(scope), texts(v)))
                .collect(),
            scopes: doc
                .scopes
                .into_iter()
                .map(|e| Entry {
                    scope: e.scope.into(),
                    properties: texts(e.properties),
                })
                .collect(),
            results: doc.results,
        }
    }
}

/// The part of a result the fleet reads; its text borrowed from the
/// report's bytes where they allow.
#[derive(Deserialize)]
struct Saved<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(borrow)]
    layer: Cow<'a, str>,
    scope: Scope,
    status: Status,
    #[serde(borrow, default)]
    finding: Option<SavedFinding<'a>>,
    #[serde(default)]
    skip_reason: Option<SkipReason>,
    #[serde(default)]
    waiver: Option<SavedWaiver>,
    #[serde(borrow, default, deserialize_with = "crate::loose::metrics_of")]
    metrics: Vec<crate::loose::SavedMetric<'a>>,
}

#[derive(Deserialize)]
struct SavedFinding<'a> {
    #[serde(borrow)]
    code: Cow<'a, str>,
    #[serde(default)]
    blames: Option<Scope>,
}

#[derive(Deserialize)]
struct SavedWaiver {
    #[serde(default)]
    expired: bool,
}

impl Saved<'_> {
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
    fn fails(&self, report: &Report<'_>) -> bool {
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

/// How a report's own verdicts compare with its results: whether it
/// passed by all of them, and how they disagree when they do.
fn judge(report: &Report<'_>) -> (bool, Option<String>) {
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
    report: &Report<'_>,
    cells: Vec<(&str, &'static str)>,
    keys: &IdentityKeys,
    as_of: DateTime<FixedOffset>,
) -> FleetNode {
    let name = report
        .node
        .get(keys.host)
        .map(Cow::as_ref)
        .filter(|h| !h.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| {
            std::path::Path::new(file)
                .file_stem()
                .map_or_else(|| file.to_string(), |s| s.to_string_lossy().into_owned())
        });
    let layers: BTreeMap<String, &'static str> =
        cells.into_iter().map(|(l, c)| (l.to_string(), c)).collect();
    // The fault lowest in the stack, else the lowest warning; the report's
    // own first failing layer decides which layer.
    let stopping = report.results.iter().filter(|r| r.is_fault());
    let fault = stopping
        .clone()
        .find(|r| Some(r.layer.as_ref()) == report.first_failing_layer.as_deref())
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
    let gpu_scopes: Vec<&Entry<'_>> = report
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
        interrupted: report.interrupted.as_deref().map(str::to_string),
        layers,
        // The layer of the fault found: a report that contradicts itself
        // may name a layer that only warned.
        first_failing_layer: fault
            .filter(|r| r.is_fault())
            .map(|r| r.layer.to_string())
            .or_else(|| report.first_failing_layer.as_deref().map(str::to_string)),
        code: fault.and_then(|r| r.finding.as_ref().map(|f| f.code.to_string())),
        scope: scope.map(Scope::label),
        pci_address,
        drain,
        disagrees,
        gpus: gpu_scopes.len(),
        devices: (devices < gpu_scopes.len()).then_some(devices),
        tier: report.tier.to_string(),
        tool: report.tool.to_string(),
        finished_at: finished.map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, true)),
        age_s: finished.map(|t| (as_of - t).num_seconds()),
        page: None,
        drift: Vec::new(),
        outliers: Vec::new(),
    }
}

/// Each layer the results name, in the order they first appear, with its
/// cell: the worst of its results. A layer beside the stack none of whose
/// results applied to the node (a node without RDMA cards) has none, as
/// the run's own views show it.
fn cells<'a>(report: &'a Report<'_>, terms: &FleetTerms) -> Vec<(&'a str, &'static str)> {
    // A cell, and whether any of its results applied.
    let mut cells: Vec<(&str, &'static str, bool)> = Vec::new();
    // A layer's results run together: the last one's cell is looked at first.
    let mut last = 0;
    for r in &report.results {
        if cells.get(last).is_none_or(|(l, _, _)| *l != r.layer) {
            last = match cells.iter().position(|(l, _, _)| *l == r.layer) {
                Some(i) => i,
                None => {
                    cells.push((&r.layer, "skip", false));
                    cells.len() - 1
                }
            };
        }
        let cell = &mut cells[last];
        let this = cell_of(r);
        if rank(this) > rank(cell.1) {
            cell.1 = this;
        }
        cell.2 |= r.skip_reason != Some(SkipReason::NotApplicable);
    }
    let beside = |name: &str| {
        terms
            .layers
            .iter()
            .any(|l| l.is_beside() && l.as_str() == name)
    };
    cells
        .into_iter()
        .filter(|(layer, _, applied)| *applied || !beside(layer))
        .map(|(layer, cell, _)| (layer, cell))
        .collect()
}

fn cell_of(r: &Saved<'_>) -> &'static str {
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
