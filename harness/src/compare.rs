//! `rocgate compare`: what changed between two runs' JSON results — versions
//! per scope, checks that stopped passing, throughputs that fell by more
//! than their tolerance and their spread, error counters that grew, and
//! GPUs or checks that are gone.
//!
//! GPUs are matched by identity (PCI address, else serial), never by index:
//! when a GPU falls off the bus or KFD numbers the GPUs in another order,
//! `gpuN` names another GPU, and comparing by index would compare different
//! physical GPUs. A metric between two GPUs (`p2p_gbps.gpu6>gpu5`) is
//! matched by both GPUs' identities, from the pair it names (`between`, or
//! in older reports its name). Only when a report does not say who a GPU is
//! are both runs matched by index, and the comparison says so. A GPU, a
//! check, or a measurement present before and absent after (removed, or
//! written as `null`) while its check still passes is a regression whatever
//! the tolerance, and so is a change in the GPU count.
//!
//! Metrics say what they measure ([`MetricKind`]), so this module holds no
//! table of units or names: a throughput regressed only when its drop
//! exceeds both its family's tolerance and the spread each run saw over its
//! repetitions (a drop inside the noise of one run is not a change); a
//! counter regressed on any growth; durations, readings and counts are
//! never compared (they follow the host's load, the moment, or a check
//! that judges them).

use crate::markdown::{cell as md, code as md_code};
use crate::verdict::{MetricKind, Spread};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// The tolerated relative drop of a throughput, per metric family (the
/// metric's name before its first `.`: `gemm_tflops` of
/// `gemm_tflops.fp16`), with a default for the others.
#[derive(Clone, Debug, PartialEq)]
pub struct Tolerances {
    /// For families not named in `families`.
    pub default: f64,
    /// Per family.
    pub families: BTreeMap<String, f64>,
}

impl Tolerances {
    /// `tolerance` for every family.
    pub fn flat(tolerance: f64) -> Tolerances {
        Tolerances {
            default: tolerance,
            families: BTreeMap::new(),
        }
    }

    /// The tolerance of `metric`'s family.
    pub fn of(&self, metric: &str) -> f64 {
        let family = metric.split('.').next().unwrap_or(metric);
        self.families.get(family).copied().unwrap_or(self.default)
    }
}

impl Default for Tolerances {
    fn default() -> Self {
        Tolerances::flat(0.05)
    }
}

/// A version that changed.
#[derive(Clone, Debug, PartialEq)]
pub struct VersionChange {
    /// `node` or `gpu3`.
    pub scope: String,
    /// `amdgpu`, `fw_mec`, `hip_runtime_version`.
    pub key: String,
    /// Before (None: absent).
    pub before: Option<String>,
    /// After.
    pub after: Option<String>,
    /// Why it is absent after, when the check that read it before did not
    /// pass this time (`blocked by node.amdgpu.module_live`,
    /// `node.hip.runtime failed`): it was not read, which says nothing of
    /// the version itself.
    pub not_read: Option<String>,
}

/// A check that passed before and does not now.
#[derive(Clone, Debug, PartialEq)]
pub struct StatusChange {
    /// Test id.
    pub id: String,
    /// Status before.
    pub before: String,
    /// Status after.
    pub after: String,
    /// The message after.
    pub message: String,
    /// The check whose failure blocked this one after, when it was blocked.
    pub blocked_by: Option<String>,
}

/// A metric that got worse: a throughput beyond its tolerance and spread,
/// or a counter that grew.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricChange {
    /// Test id.
    pub id: String,
    /// Metric name.
    pub metric: String,
    /// The GPU it was measured on (its PCI address, else its serial), or
    /// the pair (`0000:46:00.0 > 0000:a6:00.0`); None on the node.
    pub on: Option<String>,
    /// Unit.
    pub unit: String,
    /// Before: the median of its repetitions, else the value.
    pub before: f64,
    /// After, likewise.
    pub after: f64,
    /// A throughput's relative change (after/before - 1); a counter's
    /// increase.
    pub change: f64,
    /// The tolerance it was judged with (throughputs).
    pub tolerance: f64,
    /// How far apart the repetitions were before (max - min), if measured.
    pub spread_before: Option<f64>,
    /// Likewise after.
    pub spread_after: Option<f64>,
}

/// A measurement the first run took and the second did not, while its
/// check still passed: a check that passes without measuring proves
/// nothing of what it measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Missing {
    /// Test id (after).
    pub id: String,
    /// Metric name (before).
    pub metric: String,
    /// The GPU or pair it was measured on, as [`MetricChange::on`].
    pub on: Option<String>,
    /// Unit.
    pub unit: String,
    /// Its value before.
    pub before: f64,
    /// Whether the second run wrote it with no value (`null`) rather than
    /// leaving it out.
    pub null: bool,
}

/// Something present in the first run and absent from the second.
#[derive(Clone, Debug, PartialEq)]
pub struct Gone {
    /// What: `GPU 0000:65:00.0` or a test id.
    pub what: String,
    /// What it was before: a check's status, or `gpu3` for a GPU.
    pub before: String,
}

/// The differences between two runs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Comparison {
    /// GPUs and checks present before and absent after.
    pub gone: Vec<Gone>,
    /// The GPU count before and after, when it changed.
    pub gpu_count: Option<(usize, usize)>,
    /// Versions that changed, per scope.
    pub versions: Vec<VersionChange>,
    /// Checks that went from pass to anything else.
    pub regressions: Vec<StatusChange>,
    /// Checks that went from anything else to pass.
    pub fixed: Vec<StatusChange>,
    /// Throughputs that fell by more than their tolerance and spread.
    pub slower: Vec<MetricChange>,
    /// Error counters (RAS errors, retired pages) that grew, by any amount;
    /// `change` is the increase.
    pub grew: Vec<MetricChange>,
    /// Measurements of the first run missing from the second while their
    /// checks still passed.
    pub missing: Vec<Missing>,
    /// Why GPUs were matched by index rather than identity, when they were
    /// (a report that does not say who its GPUs are).
    pub by_index: Option<String>,
    /// Metrics in both runs that were judged (throughputs and counters).
    pub judged: usize,
    /// Metrics in both runs that are never compared (durations, readings,
    /// counts) or were not finite.
    pub not_judged: usize,
    /// The tolerances used.
    pub tolerances: Tolerances,
}

impl Comparison {
    /// Whether the second run is worse than the first.
    pub fn regressed(&self) -> bool {
        !self.regressions.is_empty()
            || !self.slower.is_empty()
            || !self.grew.is_empty()
            || !self.missing.is_empty()
            || !self.gone.is_empty()
            || self.gpu_count.is_some()
    }
}

/// One run's measurement of a metric: its value and, when it was repeated,
/// how the repetitions spread.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measured {
    /// The value the check reported.
    pub value: f64,
    /// Its repetitions' spread, if any.
    pub spread: Option<Spread>,
}

impl Measured {
    /// What is compared: the median of the repetitions, else the value.
    pub fn centre(&self) -> f64 {
        self.spread.map_or(self.value, |s| s.median)
    }

    fn width(&self) -> Option<f64> {
        self.spread.map(|s| s.width())
    }
}

/// Whether a throughput (higher is better) regressed from `before` to
/// `after`: its drop exceeds `tolerance` of its value before, and the
/// spread (max - min) of each run that measured one. A drop that one run's
/// own repetitions span is noise, whatever its size.
pub fn throughput_regressed(before: &Measured, after: &Measured, tolerance: f64) -> bool {
    let (b, a) = (before.centre(), after.centre());
    if !(b.is_finite() && a.is_finite()) || b <= 0.0 {
        return false;
    }
    let drop = b - a;
    drop > tolerance * b
        && [before.width(), after.width()]
            .into_iter()
            .flatten()
            .all(|w| drop > w)
}

/// A scope's identity across runs: `node`, or a GPU's PCI address (its
/// serial when the address is unknown), and how to name it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Identity {
    key: String,
    label: String,
    /// The address or serial alone, for a GPU.
    id: Option<String>,
}

type Identities = BTreeMap<String, Identity>;

/// The GPU labels a document's results or scopes name that its scopes do
/// not identify (no PCI address, no serial).
fn unidentified(doc: &Value, ids: &Identities) -> Vec<String> {
    let mut labels: BTreeSet<String> = ids.keys().cloned().collect();
    for r in doc["results"].as_array().into_iter().flatten() {
        if let Some(s) = r["scope"].as_str() {
            labels.insert(s.to_string());
        }
    }
    labels
        .into_iter()
        .filter(|l| l.starts_with("gpu"))
        .filter(|l| ids.get(l).is_none_or(|i| i.id.is_none()))
        .collect()
}

/// Every scope of `ids` keyed by its label alone, for runs matched by index.
fn by_label(ids: &Identities) -> Identities {
    ids.iter()
        .map(|(label, i)| {
            let key = label.clone();
            (label.clone(), Identity { key, ..i.clone() })
        })
        .collect()
}

/// Each scope label of a results document (`gpu3`) with its identity.
fn identities(doc: &Value) -> Identities {
    let mut out = BTreeMap::new();
    for s in doc["scopes"].as_array().into_iter().flatten() {
        let Some(label) = s["scope"].as_str() else {
            continue;
        };
        let props = &s["properties"];
        let (key, id) = if label == "node" {
            ("node".to_string(), None)
        } else if let Some(a) = props["pci_address"].as_str() {
            (format!("pci {a}"), Some(a.to_string()))
        } else if let Some(u) = props["unique_id"].as_str() {
            (format!("serial {u}"), Some(format!("serial {u}")))
        } else {
            (label.to_string(), None)
        };
        let name = match props["pci_address"].as_str() {
            Some(a) if label != "node" => format!("{label} ({a})"),
            _ => label.to_string(),
        };
        out.insert(
            label.to_string(),
            Identity {
                key,
                label: name,
                id,
            },
        );
    }
    out
}

fn identity(ids: &Identities, label: &str) -> Identity {
    ids.get(label).cloned().unwrap_or_else(|| Identity {
        key: label.to_string(),
        label: label.to_string(),
        id: None,
    })
}

/// Versions keyed by (scope identity, component), with the scope's name.
fn versions_of(doc: &Value) -> BTreeMap<(String, String), (String, String)> {
    let ids = identities(doc);
    let mut out = BTreeMap::new();
    if let Some(scopes) = doc["versions"].as_object() {
        for (scope, kv) in scopes {
            let who = identity(&ids, scope);
            for (k, v) in kv.as_object().into_iter().flatten() {
                if let Some(v) = v.as_str() {
                    out.insert(
                        (who.key.clone(), k.clone()),
                        (who.label.clone(), v.to_string()),
                    );
                }
            }
        }
    }
    out
}

/// A result, where it ran in its document.
struct Placed<'a> {
    /// Its test id in that run (`gpu3.hip.memcpy`).
    id: String,
    /// The scope label in that run (`gpu3`).
    scope: String,
    /// The scope's name with its identity (`gpu3 (0000:65:00.0)`).
    who: String,
    /// The GPU's address or serial alone.
    gpu: Option<String>,
    result: &'a Value,
}

/// A document's results keyed by (scope identity, check id).
type Results<'a> = BTreeMap<(String, String), Placed<'a>>;

/// Results keyed by (scope identity, check id).
fn results_of<'a>(doc: &'a Value, ids: &Identities) -> Results<'a> {
    doc["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let id = r["id"].as_str()?;
            let scope = r["scope"]
                .as_str()
                .map(str::to_string)
                .or_else(|| id.split('.').next().map(str::to_string))?;
            let check = r["check"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| id.split_once('.').map_or(id, |(_, c)| c).to_string());
            let who = identity(ids, &scope);
            Some((
                (who.key, check),
                Placed {
                    id: id.to_string(),
                    scope,
                    who: who.label,
                    gpu: who.id,
                    result: r,
                },
            ))
        })
        .collect()
}

/// GPU scopes (not the node) of a document, by identity key.
fn gpus_of(ids: &Identities) -> BTreeMap<String, String> {
    ids.iter()
        .filter(|(label, _)| *label != "node")
        .map(|(_, i)| (i.key.clone(), i.label.clone()))
        .collect()
}

/// Checks that `doc` is a rocgate results document (schema 1); names `what`
/// and, when it is not, what its schema_version is
/// ([`crate::saved_report::check_schema`]).
pub fn validate(doc: &Value, what: &str) -> Result<(), String> {
    crate::saved_report::check_schema(doc, what)
}

/// A metric as a results document holds it.
struct MetricOf {
    /// The name to show (this run's).
    name: String,
    unit: String,
    /// The kind the report states (None in older reports).
    kind: Option<MetricKind>,
    /// None: written with no value (`null`, as older rocgate wrote NaN).
    measured: Option<Measured>,
    /// The pair's identities, for a metric between two scopes.
    on: Option<String>,
}

/// A result's metrics keyed so that runs match: by name, or for a metric
/// between two scopes by its family and the pair's identities (a pair's
/// name holds scope indices, which shift when a GPU goes).
fn metrics_of(r: &Value, ids: &Identities) -> BTreeMap<String, MetricOf> {
    let mut out = BTreeMap::new();
    for m in r["metrics"].as_array().into_iter().flatten() {
        let Some(name) = m["name"].as_str() else {
            continue;
        };
        let value = m["value"].as_f64();
        let unit = m["unit"].as_str().unwrap_or("").to_string();
        let kind = serde_json::from_value::<MetricKind>(m["kind"].clone()).ok();
        let spread = serde_json::from_value::<Spread>(m["spread"].clone()).ok();
        // A report older than `between` names the pair only in the metric's
        // name: `p2p_gbps.gpu6>gpu5`, both scopes of this run.
        let named = || {
            let (_, pair) = name.rsplit_once('.')?;
            let (from, to) = pair.split_once('>')?;
            (ids.contains_key(from) && ids.contains_key(to)).then_some((from, to))
        };
        let pair = m["between"]
            .as_array()
            .and_then(|p| Some((p.first()?.as_str()?, p.get(1)?.as_str()?)))
            .or_else(named);
        let (key, on) = match pair {
            Some((from, to)) => {
                let (f, t) = (identity(ids, from), identity(ids, to));
                let family = name.strip_suffix(&format!(".{from}>{to}")).unwrap_or(name);
                let show = |i: &Identity, label: &str| i.id.clone().unwrap_or(label.to_string());
                (
                    format!("{family}.{}>{}", f.key, t.key),
                    Some(format!("{} > {}", show(&f, from), show(&t, to))),
                )
            }
            None => (name.to_string(), None),
        };
        out.insert(
            key,
            MetricOf {
                name: name.to_string(),
                unit,
                kind,
                measured: value.map(|value| Measured { value, spread }),
                on,
            },
        );
    }
    out
}

/// Why a check did not read its facts this run: `blocked by ROOT`, or
/// `ID failed`; None when it passed or warned (it did read them).
fn not_read_because(placed: Option<&Placed<'_>>, check: &str) -> Option<String> {
    let Some(p) = placed else {
        return Some(format!("{check} did not run"));
    };
    let r = p.result;
    match r["status"].as_str().unwrap_or("?") {
        "pass" | "warn" => None,
        "blocked" => Some(match r["blocked_by"].as_str() {
            Some(root) => format!("blocked by {root}"),
            None => format!("{} blocked", p.id),
        }),
        "fail" => Some(format!("{} failed", p.id)),
        "timeout" => Some(format!("{} timed out", p.id)),
        "crash" => Some(format!("{} crashed", p.id)),
        other => Some(format!("{} {other}", p.id)),
    }
}

/// Compares two results documents.
pub fn compare(before: &Value, after: &Value, tolerances: &Tolerances) -> Comparison {
    let mut c = Comparison {
        tolerances: tolerances.clone(),
        ..Comparison::default()
    };
    let (mut ib, mut ia) = (identities(before), identities(after));
    // A GPU a report does not identify could be any of the other run's:
    // both runs are then matched by index, and the comparison says so.
    let (ub, ua) = (unidentified(before, &ib), unidentified(after, &ia));
    if !ub.is_empty() || !ua.is_empty() {
        let runs: Vec<String> = [("first", &ub), ("second", &ua)]
            .into_iter()
            .filter(|(_, u)| !u.is_empty())
            .map(|(run, u)| {
                let names: Vec<&str> = u.iter().map(String::as_str).collect();
                format!("{} of the {run} run", list(&names, 4))
            })
            .collect();
        c.by_index = Some(format!(
            "{} have no pci_address or unique_id: GPUs are matched by index (gpuN), which names another GPU when KFD numbers them differently",
            runs.join(" and ")
        ));
        (ib, ia) = (by_label(&ib), by_label(&ia));
    }
    let (gb, ga) = (gpus_of(&ib), gpus_of(&ia));
    let (rb, ra) = (results_of(before, &ib), results_of(after, &ia));
    versions(&mut c, before, after, (&gb, &ga), (&rb, &ra));
    if gb.len() != ga.len() {
        c.gpu_count = Some((gb.len(), ga.len()));
    }
    for (key, label) in &gb {
        if !ga.contains_key(key) {
            c.gone.push(Gone {
                what: format!(
                    "GPU {}",
                    key.trim_start_matches("pci ").trim_start_matches("serial "),
                ),
                before: label.split(' ').next().unwrap_or(label).to_string(),
            });
        }
    }
    for (key, pb) in &rb {
        let b = pb.result;
        let Some(pa) = ra.get(key) else {
            // A gone GPU's checks go with it; other checks are named.
            if !gb.contains_key(&key.0) || ga.contains_key(&key.0) {
                c.gone.push(Gone {
                    what: if pb.who == pb.scope {
                        pb.id.clone()
                    } else {
                        format!("{} on {}", pb.id, pb.who)
                    },
                    before: b["status"].as_str().unwrap_or("?").to_string(),
                });
            }
            continue;
        };
        let a = pa.result;
        // The same GPU under another index: say so.
        let id = if pa.scope == pb.scope {
            pa.id.clone()
        } else {
            format!("{} (was {})", pa.id, pb.scope)
        };
        let (sb, sa) = (
            b["status"].as_str().unwrap_or("?"),
            a["status"].as_str().unwrap_or("?"),
        );
        let change = StatusChange {
            id: id.clone(),
            before: sb.to_string(),
            after: sa.to_string(),
            message: a["message"].as_str().unwrap_or("").to_string(),
            blocked_by: (sa == "blocked")
                .then(|| a["blocked_by"].as_str().map(str::to_string))
                .flatten(),
        };
        if sb == "pass" && sa != "pass" {
            c.regressions.push(change);
        } else if sb != "pass" && sa == "pass" {
            c.fixed.push(change);
        }
        metrics(&mut c, &id, pa.gpu.as_deref(), (b, a), (&ib, &ia));
        if matches!(sa, "pass" | "warn") {
            missing(&mut c, &id, pa.gpu.as_deref(), (b, a), (&ib, &ia));
        }
    }
    c
}

/// Version changes between the runs, saying which absent ones were not read.
fn versions(
    c: &mut Comparison,
    before: &Value,
    after: &Value,
    (gb, ga): (&BTreeMap<String, String>, &BTreeMap<String, String>),
    (rb, ra): (&Results<'_>, &Results<'_>),
) {
    let (vb, va) = (versions_of(before), versions_of(after));
    // Which check read each version before: one whose facts hold it, in
    // the version's scope if one there does.
    let mut reader: BTreeMap<(String, String), (String, String)> = BTreeMap::new();
    let mut anywhere: BTreeMap<String, (String, String)> = BTreeMap::new();
    for ((scope, check), p) in rb {
        for fact in p.result["facts"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|f| f.0)
        {
            let at = (scope.clone(), check.clone());
            reader.insert((scope.clone(), fact.clone()), at.clone());
            anywhere.entry(fact.clone()).or_insert(at);
        }
    }
    let keys: BTreeSet<&(String, String)> = vb.keys().chain(va.keys()).collect();
    // A GPU that came or went is reported once as such, not as every one of
    // its firmware versions turning to (none).
    let came_or_went = |k: &str| gb.contains_key(k) != ga.contains_key(k);
    for key in keys.into_iter().filter(|k| !came_or_went(&k.0)) {
        let (b, a) = (vb.get(key), va.get(key));
        if b.map(|x| &x.1) == a.map(|x| &x.1) {
            continue;
        }
        let not_read = match (b, a) {
            (Some(_), None) => reader
                .get(key)
                .or_else(|| anywhere.get(&key.1))
                .and_then(|at| not_read_because(ra.get(at), &at.1)),
            _ => None,
        };
        c.versions.push(VersionChange {
            scope: a.or(b).map_or_else(|| key.0.clone(), |x| x.0.clone()),
            key: key.1.clone(),
            before: b.map(|x| x.1.clone()),
            after: a.map(|x| x.1.clone()),
            not_read,
        });
    }
}

/// Judges the metrics of one check in both runs.
fn metrics(
    c: &mut Comparison,
    id: &str,
    gpu: Option<&str>,
    (b, a): (&Value, &Value),
    (ib, ia): (&Identities, &Identities),
) {
    let (mb, ma) = (metrics_of(b, ib), metrics_of(a, ia));
    for (key, before) in &mb {
        let Some(after) = ma.get(key) else {
            continue;
        };
        let (Some(mbefore), Some(mafter)) = (before.measured, after.measured) else {
            continue;
        };
        // The kind a report states, the later one's first; without one
        // (reports older than kinds), the unit's.
        let kind = after
            .kind
            .or(before.kind)
            .unwrap_or_else(|| MetricKind::from_unit(&before.unit));
        let (vb, va) = (mbefore.centre(), mafter.centre());
        if !kind.compared() || !vb.is_finite() || !va.is_finite() {
            c.not_judged += 1;
            continue;
        }
        c.judged += 1;
        let tolerance = c.tolerances.of(&before.name);
        let change = |change: f64| MetricChange {
            id: id.to_string(),
            metric: after.name.clone(),
            on: after.on.clone().or_else(|| gpu.map(str::to_string)),
            unit: after.unit.clone(),
            before: vb,
            after: va,
            change,
            tolerance,
            spread_before: mbefore.width(),
            spread_after: mafter.width(),
        };
        match kind {
            MetricKind::Counter if va > vb => c.grew.push(change(va - vb)),
            MetricKind::Throughput if throughput_regressed(&mbefore, &mafter, tolerance) => {
                c.slower.push(change(va / vb - 1.0));
            }
            _ => {}
        }
    }
}

/// The measurements of one check that the first run took (with a value)
/// and the second, whose check still passed, did not: left out, or written
/// with no value. Of every kind: a reading the check judged (a temperature)
/// that vanished proves as little as a throughput.
fn missing(
    c: &mut Comparison,
    id: &str,
    gpu: Option<&str>,
    (b, a): (&Value, &Value),
    (ib, ia): (&Identities, &Identities),
) {
    let (mb, ma) = (metrics_of(b, ib), metrics_of(a, ia));
    for (key, before) in &mb {
        let Some(value) = before.measured.map(|m| m.centre()) else {
            continue;
        };
        let after = ma.get(key);
        if after.is_some_and(|m| m.measured.is_some()) {
            continue;
        }
        c.missing.push(Missing {
            id: id.to_string(),
            metric: before.name.clone(),
            on: before.on.clone().or_else(|| gpu.map(str::to_string)),
            unit: before.unit.clone(),
            before: value,
            null: after.is_some(),
        });
    }
}

impl Missing {
    /// The metric and where it was measured.
    fn what(&self) -> String {
        match &self.on {
            Some(on) => format!("{} ({on})", self.metric),
            None => self.metric.clone(),
        }
    }

    /// How it is missing.
    fn how(&self) -> &'static str {
        if self.null {
            "missing (written with no value)"
        } else {
            "missing (not in the report)"
        }
    }
}

/// A spread's width as printed, `none` when the run measured none.
fn width_text(w: Option<f64>) -> String {
    w.map_or_else(|| "none".to_string(), |w| format!("{w:.3}"))
}

impl MetricChange {
    /// The metric and where it was measured: `gemm_tflops.fp16 (0000:65:00.0)`.
    fn what(&self) -> String {
        match &self.on {
            Some(on) => format!("{} ({on})", self.metric),
            None => self.metric.clone(),
        }
    }

    /// How the judgement was made: the tolerance and both runs' spreads.
    fn how(&self) -> String {
        format!(
            "tolerance {:.0}%, spread {} before, {} after",
            self.tolerance * 100.0,
            width_text(self.spread_before),
            width_text(self.spread_after),
        )
    }
}

fn opt(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("(none)")
}

impl VersionChange {
    /// What the version is after: its value, `(none)`, or why it was not
    /// read.
    fn after_text(&self) -> String {
        match (&self.after, &self.not_read) {
            (Some(a), _) => a.clone(),
            (None, Some(why)) => format!("not read ({why})"),
            (None, None) => "(none)".to_string(),
        }
    }
}

/// Versions not read for one reason, grouped when there are more than this
/// many (a node whose driver did not load reads no firmware version on any
/// GPU: one line says so).
const GROUP_NOT_READ: usize = 3;

/// Version changes as rows: each change, except that versions not read for
/// one reason are one row when there are many: (scope, component, before,
/// after).
fn version_rows(versions: &[VersionChange]) -> Vec<[String; 4]> {
    let mut by_reason: BTreeMap<&str, Vec<&VersionChange>> = BTreeMap::new();
    for v in versions {
        if let (None, Some(why)) = (&v.after, &v.not_read) {
            by_reason.entry(why).or_default().push(v);
        }
    }
    let grouped = |v: &VersionChange| {
        v.not_read
            .as_deref()
            .is_some_and(|why| v.after.is_none() && by_reason[why].len() > GROUP_NOT_READ)
    };
    let mut rows: Vec<[String; 4]> = versions
        .iter()
        .filter(|v| !grouped(v))
        .map(|v| {
            [
                v.scope.clone(),
                v.key.clone(),
                opt(&v.before).to_string(),
                v.after_text(),
            ]
        })
        .collect();
    for (why, vs) in by_reason.iter().filter(|(_, vs)| vs.len() > GROUP_NOT_READ) {
        let mut scopes: Vec<&str> = Vec::new();
        let mut keys: Vec<&str> = Vec::new();
        for v in vs {
            let scope = v.scope.split(' ').next().unwrap_or(&v.scope);
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
            if !keys.contains(&v.key.as_str()) {
                keys.push(&v.key);
            }
        }
        rows.push([
            list(&scopes, 4),
            format!("{} versions ({})", vs.len(), list(&keys, 6)),
            String::new(),
            format!("not read ({why})"),
        ]);
    }
    rows
}

/// Joins at most `max` items, saying how many more there were.
fn list(items: &[&str], max: usize) -> String {
    let shown = items[..items.len().min(max)].join(", ");
    if items.len() > max {
        format!("{shown} and {} more", items.len() - max)
    } else {
        shown
    }
}

/// A check that stopped passing with the checks it blocked after, or the
/// checks one root blocked when the root itself was not passing before.
struct StatusGroup<'a> {
    /// The change of the root, when it stopped passing.
    root: Option<&'a StatusChange>,
    /// The root's id, for a group without its change.
    root_id: &'a str,
    /// Checks above it that it blocked.
    blocked: usize,
}

/// Groups checks that stopped passing under the root cause that blocked
/// them: one entry per root, in the order of the changes.
fn status_groups(changes: &[StatusChange]) -> Vec<StatusGroup<'_>> {
    let mut groups: Vec<StatusGroup<'_>> = Vec::new();
    let mut blocked: BTreeMap<&str, usize> = BTreeMap::new();
    for s in changes {
        if let Some(root) = &s.blocked_by {
            *blocked.entry(root).or_default() += 1;
        }
    }
    let mut seen = BTreeSet::new();
    for s in changes.iter().filter(|s| s.blocked_by.is_none()) {
        // A check under another index (`gpu1.x.y (was gpu2)`) is blocked_by's
        // root by its id alone.
        let bare = s.id.split(' ').next().unwrap_or(&s.id);
        seen.insert(bare);
        groups.push(StatusGroup {
            root: Some(s),
            root_id: &s.id,
            blocked: blocked.get(bare).copied().unwrap_or(0),
        });
    }
    for s in changes {
        if let Some(root) = s.blocked_by.as_deref()
            && seen.insert(root)
        {
            groups.push(StatusGroup {
                root: None,
                root_id: root,
                blocked: blocked.get(root).copied().unwrap_or(0),
            });
        }
    }
    groups
}

fn blocked_text(n: usize) -> String {
    format!(
        "{n} check{} above it blocked",
        if n == 1 { "" } else { "s" }
    )
}

/// Appends `title: N` and the `lines`, indented.
fn text_list(out: &mut String, title: &str, count: usize, lines: impl Iterator<Item = String>) {
    let _ = writeln!(out, "{title}: {count}");
    for line in lines {
        let _ = writeln!(out, "  {line}");
    }
}

/// What was judged and what was not, as one sentence.
fn judged_text(c: &Comparison) -> String {
    format!(
        "Metrics judged: {} (throughputs and error counters); not judged: {} (durations, readings, counts)",
        c.judged, c.not_judged
    )
}

/// Plain text for a terminal.
pub fn render_text(c: &Comparison) -> String {
    let mut out = String::new();
    if let Some(why) = &c.by_index {
        let _ = writeln!(out, "Note: {why}");
    }
    if let Some((b, a)) = c.gpu_count {
        let _ = writeln!(out, "GPU count changed: {b} -> {a}");
    }
    if !c.gone.is_empty() {
        text_list(
            &mut out,
            "Gone since the first run",
            c.gone.len(),
            c.gone
                .iter()
                .map(|g| format!("{} (was {})", g.what, g.before)),
        );
    }
    text_list(
        &mut out,
        "Versions changed",
        c.versions.len(),
        version_rows(&c.versions).into_iter().map(|[s, k, b, a]| {
            if b.is_empty() {
                format!("{s}: {k} {a}")
            } else {
                format!("{s:<6} {k:<24} {b} -> {a}")
            }
        }),
    );
    let mut lines = Vec::new();
    for g in status_groups(&c.regressions) {
        match g.root {
            Some(r) => lines.push(format!(
                "{} {} -> {}: {}",
                r.id, r.before, r.after, r.message
            )),
            None => lines.push(format!("{} (did not pass before either)", g.root_id)),
        }
        if g.blocked > 0 {
            lines.push(format!("  {}", blocked_text(g.blocked)));
        }
    }
    text_list(
        &mut out,
        "Checks that stopped passing",
        c.regressions.len(),
        lines.into_iter(),
    );
    text_list(
        &mut out,
        "Throughputs worse beyond their tolerance and spread",
        c.slower.len(),
        c.slower.iter().map(|m| {
            format!(
                "{} {}: {:.3} -> {:.3} {} ({:+.1}%; {})",
                m.id,
                m.what(),
                m.before,
                m.after,
                m.unit,
                m.change * 100.0,
                m.how()
            )
        }),
    );
    text_list(
        &mut out,
        "Error counters that grew",
        c.grew.len(),
        c.grew.iter().map(|m| {
            format!(
                "{} {}: {} -> {} {} (+{})",
                m.id,
                m.what(),
                m.before,
                m.after,
                m.unit,
                m.change
            )
        }),
    );
    if !c.missing.is_empty() {
        text_list(
            &mut out,
            "Measurements missing while their checks pass",
            c.missing.len(),
            c.missing.iter().map(|m| {
                format!(
                    "{} {}: {} {} -> {}",
                    m.id,
                    m.what(),
                    m.before,
                    m.unit,
                    m.how()
                )
            }),
        );
    }
    if !c.fixed.is_empty() {
        text_list(
            &mut out,
            "Checks that now pass",
            c.fixed.len(),
            c.fixed
                .iter()
                .map(|r| format!("{} {} -> pass", r.id, r.before)),
        );
    }
    let _ = writeln!(out, "{}", judged_text(c));
    let _ = writeln!(
        out,
        "{}",
        if c.regressed() {
            "REGRESSED"
        } else {
            "NO REGRESSION"
        }
    );
    out
}

/// Appends a section `title` holding a table of `rows` under `header`;
/// nothing when there are no rows.
fn md_table(out: &mut String, title: &str, header: &[&str], rows: Vec<Vec<String>>) {
    if rows.is_empty() {
        return;
    }
    let _ = write!(
        out,
        "### {title}\n\n| {} |\n|{}\n",
        header.join(" | "),
        "---|".repeat(header.len())
    );
    for row in rows {
        let _ = writeln!(out, "| {} |", row.join(" | "));
    }
    out.push('\n');
}

/// Markdown for a pull-request comment or a CI job summary.
pub fn render_markdown(c: &Comparison) -> String {
    let mut out = format!(
        "## rocgate: {}\n\n",
        if c.regressed() {
            "regression"
        } else {
            "no regression"
        }
    );
    if let Some(why) = &c.by_index {
        let _ = writeln!(out, "**Note:** {}\n", md(why));
    }
    if let Some((b, a)) = c.gpu_count {
        let _ = writeln!(out, "**GPU count changed: {b} -> {a}**\n");
    }
    let gone = c
        .gone
        .iter()
        .map(|g| vec![md(&g.what), md(&g.before)])
        .collect();
    md_table(
        &mut out,
        "Gone since the first run",
        &["what", "before"],
        gone,
    );
    let versions = version_rows(&c.versions)
        .into_iter()
        .map(|row| row.iter().map(|s| md(s)).collect())
        .collect();
    md_table(
        &mut out,
        "Versions",
        &["scope", "component", "before", "after"],
        versions,
    );
    let statuses = status_groups(&c.regressions)
        .into_iter()
        .map(|g| {
            let blocked = if g.blocked > 0 {
                format!("; {}", blocked_text(g.blocked))
            } else {
                String::new()
            };
            match g.root {
                Some(r) => vec![
                    md_code(&r.id),
                    md(&r.before),
                    format!("**{}**", md(&r.after)),
                    format!("{}{blocked}", md(&r.message)),
                ],
                None => vec![
                    md_code(g.root_id),
                    "not pass".to_string(),
                    "not pass".to_string(),
                    format!("did not pass before either{blocked}"),
                ],
            }
        })
        .collect();
    md_table(
        &mut out,
        "Checks that stopped passing",
        &["check", "before", "after", "message"],
        statuses,
    );
    // A metric's row: where, what, before and after, then `rest`.
    let row = |m: &MetricChange, rest: Vec<String>| {
        let value = |v: f64| format!("{v:.3} {}", md(&m.unit));
        let mut cells = vec![
            md_code(&m.id),
            md(&m.what()),
            value(m.before),
            value(m.after),
        ];
        cells.extend(rest);
        cells
    };
    let slower = c
        .slower
        .iter()
        .map(|m| row(m, vec![format!("**{:+.1}%**", m.change * 100.0), m.how()]))
        .collect();
    md_table(
        &mut out,
        "Throughputs worse beyond their tolerance and spread",
        &["check", "metric", "before", "after", "change", "decided by"],
        slower,
    );
    let grew = c
        .grew
        .iter()
        .map(|m| row(m, vec![format!("**+{}**", m.change)]))
        .collect();
    md_table(
        &mut out,
        "Error counters that grew",
        &["check", "metric", "before", "after", "change"],
        grew,
    );
    let missing = c
        .missing
        .iter()
        .map(|m| {
            vec![
                md_code(&m.id),
                md(&m.what()),
                format!("{} {}", m.before, md(&m.unit)),
                format!("**{}**", m.how()),
            ]
        })
        .collect();
    md_table(
        &mut out,
        "Measurements missing while their checks pass",
        &["check", "metric", "before", "after"],
        missing,
    );
    if !c.fixed.is_empty() {
        let _ = writeln!(
            out,
            "{} checks now pass that did not before.\n",
            c.fixed.len()
        );
    }
    let _ = writeln!(out, "{}.", judged_text(c));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn flat(t: f64) -> Tolerances {
        Tolerances::flat(t)
    }

    fn doc(status: &str, tflops: f64, amdgpu: &str) -> Value {
        json!({
            "schema_version": 1,
            "versions": {"node": {"amdgpu": amdgpu}, "gpu0": {"fw_mec": "0x9a"}},
            "results": [
                {"id": "gpu0.rocblas.gemm_throughput", "status": status, "message": "m", "metrics": [
                    {"name": "gemm_tflops.fp32", "value": tflops, "unit": "TFLOP/s", "kind": "throughput"},
                    {"name": "t", "value": 10.0, "unit": "ms", "kind": "duration"}]},
                {"id": "node.pci.amd_gpu_present", "status": "pass", "message": "ok"}
            ]
        })
    }

    fn measured(value: f64, samples: &[f64]) -> Measured {
        Measured {
            value,
            spread: Spread::of(samples),
        }
    }

    #[test]
    fn finds_version_status_and_metric_changes() {
        let c = compare(
            &doc("pass", 100.0, "6.8.5"),
            &doc("fail", 90.0, "6.10.5"),
            &flat(0.05),
        );
        assert_eq!(c.versions.len(), 1);
        assert_eq!(c.versions[0].key, "amdgpu");
        assert_eq!(c.regressions.len(), 1);
        assert_eq!(c.slower.len(), 1);
        assert!((c.slower[0].change + 0.1).abs() < 1e-9);
        assert_eq!((c.judged, c.not_judged), (1, 1));
        assert!(c.regressed());
        let md = render_markdown(&c);
        assert!(md.contains("| node | amdgpu | 6.8.5 | 6.10.5 |"), "{md}");
        assert!(
            md.contains("tolerance 5%, spread none before, none after"),
            "{md}"
        );
        let text = render_text(&c);
        assert!(text.contains("REGRESSED"), "{text}");
        assert!(text.contains("not judged: 1 (durations"), "{text}");
    }

    #[test]
    fn a_drop_regresses_only_beyond_the_tolerance_and_both_runs_spreads() {
        let before = measured(100.0, &[99.0, 100.0, 101.0]);
        // 10% down, far outside either run's spread: a regression.
        assert!(throughput_regressed(
            &before,
            &measured(90.0, &[89.5, 90.0, 90.5]),
            0.05
        ));
        // Within the tolerance: not one, however tight the spreads.
        assert!(!throughput_regressed(
            &before,
            &measured(96.0, &[96.0, 96.0]),
            0.05
        ));
        // Beyond the tolerance but inside the after run's own spread: noise.
        assert!(!throughput_regressed(
            &before,
            &measured(80.0, &[60.0, 80.0, 100.0]),
            0.05
        ));
        // Or inside the before run's.
        let wide = measured(100.0, &[70.0, 100.0, 101.0]);
        assert!(!throughput_regressed(&wide, &measured(75.0, &[75.0]), 0.05));
        // The medians are compared, not the best samples.
        let b = measured(200.0, &[100.0, 101.0, 200.0]);
        let a = measured(102.0, &[100.0, 101.0, 102.0]);
        assert!(!throughput_regressed(&b, &a, 0.05));
        // Higher is never worse; nothing is judged against zero or NaN.
        assert!(!throughput_regressed(&before, &measured(150.0, &[]), 0.05));
        assert!(!throughput_regressed(
            &measured(0.0, &[]),
            &measured(-1.0, &[]),
            0.05
        ));
        assert!(!throughput_regressed(
            &measured(f64::NAN, &[]),
            &measured(1.0, &[]),
            0.05
        ));
    }

    #[test]
    fn without_a_spread_the_value_and_the_tolerance_decide() {
        let plain = |v| measured(v, &[]);
        assert!(throughput_regressed(&plain(100.0), &plain(94.0), 0.05));
        assert!(!throughput_regressed(&plain(100.0), &plain(96.0), 0.05));
        // One run with a spread still guards against its own noise.
        assert!(!throughput_regressed(
            &plain(100.0),
            &measured(90.0, &[80.0, 90.0, 95.0]),
            0.05
        ));
    }

    #[test]
    fn tolerances_are_per_family_with_a_default() {
        let mut t = flat(0.05);
        t.families.insert("p2p_gbps".into(), 0.2);
        assert_eq!(t.of("p2p_gbps.gpu0>gpu1"), 0.2);
        assert_eq!(t.of("gemm_tflops.fp16"), 0.05);
        let run = |gbps: f64| {
            json!({"results": [{"id": "node.hip.p2p_bandwidth", "status": "pass", "message": "",
                "metrics": [{"name": "p2p_gbps.gpu0>gpu1", "value": gbps, "unit": "GB/s", "kind": "throughput", "between": ["gpu0", "gpu1"]},
                            {"name": "h2d_gbps", "value": gbps, "unit": "GB/s", "kind": "throughput"}]}]})
        };
        let c = compare(&run(50.0), &run(42.0), &t);
        assert_eq!(c.slower.len(), 1, "{c:?}");
        assert_eq!(c.slower[0].metric, "h2d_gbps");
        assert!(render_text(&c).contains("tolerance 5%"));
    }

    #[test]
    fn error_counters_regress_on_any_rise_and_readings_never_do() {
        let run = |ce: f64, temp: f64| {
            json!({"results": [{
                "id": "gpu0.amdgpu.ras_errors", "status": "pass", "message": "",
                "metrics": [
                    {"name": "ras_ce.umc", "value": ce, "unit": "errors", "kind": "counter"},
                    {"name": "temp_junction", "value": temp, "unit": "°C", "kind": "reading"}
                ]
            }]})
        };
        let c = compare(&run(0.0, 40.0), &run(3.0, 90.0), &flat(0.05));
        assert_eq!(c.grew.len(), 1, "{c:?}");
        assert_eq!(
            (c.grew[0].before, c.grew[0].after, c.grew[0].change),
            (0.0, 3.0, 3.0)
        );
        assert!(c.slower.is_empty() && c.regressed());
        assert!(render_text(&c).contains("ras_ce.umc: 0 -> 3 errors (+3)"));
        let steady = compare(&run(3.0, 90.0), &run(3.0, 40.0), &flat(0.05));
        assert!(!steady.regressed(), "{steady:?}");
    }

    #[test]
    fn durations_readings_and_counts_are_never_compared() {
        let run = |v: f64| {
            json!({"results": [{"id": "gpu0.hip.vector_add", "status": "pass", "message": "",
                "metrics": [
                    {"name": "vector_add_ms", "value": v, "unit": "ms", "kind": "duration"},
                    {"name": "gemm_fp32_tflops_256", "value": 1.0 / v, "unit": "TFLOP/s", "kind": "reading"},
                    {"name": "compute_units", "value": 1.0 / v, "unit": "count", "kind": "count"}]}]})
        };
        let c = compare(&run(1.0), &run(1000.0), &flat(0.05));
        assert!(!c.regressed(), "{c:?}");
        assert_eq!((c.judged, c.not_judged), (0, 3));
    }

    #[test]
    fn reports_without_kinds_fall_back_to_the_unit_but_never_compare_durations() {
        // A report written before metrics said their kind.
        let run = |ms: f64, gbps: f64, ce: f64| {
            json!({"results": [{"id": "gpu0.hip.memcpy", "status": "pass", "message": "",
                "metrics": [
                    {"name": "copy_ms", "value": ms, "unit": "ms"},
                    {"name": "h2d_bandwidth", "value": gbps, "unit": "GB/s"},
                    {"name": "ras_ce.umc", "value": ce, "unit": "errors"},
                    {"name": "pci_gpus", "value": 8.0 - ce, "unit": "count"}]}]})
        };
        let c = compare(&run(1.0, 50.0, 0.0), &run(100.0, 40.0, 1.0), &flat(0.05));
        assert_eq!(c.slower.len(), 1, "{c:?}");
        assert_eq!(c.slower[0].metric, "h2d_bandwidth");
        assert_eq!(c.grew.len(), 1, "{c:?}");
        assert_eq!((c.judged, c.not_judged), (2, 2));
        // A new report's kind wins over an old one's unit.
        let mut new = run(1.0, 40.0, 0.0);
        new["results"][0]["metrics"][1]["kind"] = json!("reading");
        let c = compare(&run(1.0, 50.0, 0.0), &new, &flat(0.05));
        assert!(c.slower.is_empty(), "{c:?}");
    }

    #[test]
    fn small_moves_and_faster_times_are_not_regressions() {
        let mut after = doc("pass", 97.0, "6.8.5");
        after["results"][0]["metrics"][1]["value"] = json!(9.0);
        let c = compare(&doc("pass", 100.0, "6.8.5"), &after, &flat(0.05));
        assert!(!c.regressed(), "{c:?}");
        assert!(
            validate(&json!({"x": 1}), "a.json")
                .unwrap_err()
                .contains("a.json")
        );
    }

    /// A node of `n` GPUs on the given buses, each with a passing
    /// bandwidth check at `gbps`, and peer copies from the first GPU.
    fn node(buses: &[u32], gbps: f64) -> Value {
        let scopes: Vec<Value> = std::iter::once(json!({"scope": "node", "properties": {}}))
            .chain(buses.iter().enumerate().map(|(i, b)| {
                json!({"scope": format!("gpu{i}"), "properties": {"pci_address": format!("0000:{b:02x}:00.0")}})
            }))
            .collect();
        let mut results: Vec<Value> = buses
            .iter()
            .enumerate()
            .map(|(i, _)| {
                json!({"id": format!("gpu{i}.hip.bandwidth"), "check": "hip::bandwidth", "scope": format!("gpu{i}"),
                       "status": "pass", "message": "ok",
                       "metrics": [{"name": "h2d_gbps", "value": gbps, "unit": "GB/s", "kind": "throughput"}]})
            })
            .collect();
        let pairs: Vec<Value> = (1..buses.len())
            .map(|i| {
                json!({"name": format!("p2p_gbps.gpu0>gpu{i}"), "value": gbps, "unit": "GB/s",
                       "kind": "throughput", "between": ["gpu0", format!("gpu{i}")]})
            })
            .collect();
        results.push(
            json!({"id": "node.hip.p2p_bandwidth", "check": "hip::p2p_bandwidth", "scope": "node",
                            "status": "pass", "message": "ok", "metrics": pairs}),
        );
        json!({"schema_version": 1, "scopes": scopes, "results": results})
    }

    #[test]
    fn gpus_are_matched_by_pci_address_not_index() {
        // 0x26 fell off the bus: gpu1 is now 0x46. By index, gpu1 would be
        // compared with another GPU; by identity, 0x26 is gone.
        let c = compare(
            &node(&[0x05, 0x26, 0x46], 50.0),
            &node(&[0x05, 0x46], 50.0),
            &flat(0.5),
        );
        assert!(c.regressed());
        assert_eq!(c.gpu_count, Some((3, 2)));
        assert_eq!(c.gone.len(), 1, "{c:?}");
        assert!(
            c.gone[0].what.contains("0000:26:00.0"),
            "{}",
            c.gone[0].what
        );
        assert!(c.regressions.is_empty() && c.slower.is_empty(), "{c:?}");
        assert!(render_text(&c).contains("GPU count changed: 3 -> 2"));
        // 0x46 (gpu2 before, gpu1 after) got slower: it is compared with
        // itself and named with both indices and its address.
        let mut after = node(&[0x05, 0x46], 50.0);
        after["results"][1]["metrics"][0]["value"] = json!(10.0);
        let c = compare(&node(&[0x05, 0x26, 0x46], 50.0), &after, &flat(0.5));
        assert_eq!(c.slower.len(), 1, "{c:?}");
        assert_eq!(c.slower[0].id, "gpu1.hip.bandwidth (was gpu2)");
        assert_eq!(c.slower[0].on.as_deref(), Some("0000:46:00.0"));
        // So is the link to it: gpu0>gpu1 after is gpu0>gpu2 before.
        after["results"][2]["metrics"][0]["value"] = json!(10.0);
        let c = compare(&node(&[0x05, 0x26, 0x46], 50.0), &after, &flat(0.5));
        let pair = c
            .slower
            .iter()
            .find(|m| m.metric == "p2p_gbps.gpu0>gpu1")
            .unwrap_or_else(|| panic!("{c:?}"));
        assert_eq!(pair.on.as_deref(), Some("0000:05:00.0 > 0000:46:00.0"));
    }

    #[test]
    fn a_check_that_disappears_is_a_regression_whatever_the_tolerance() {
        let before = node(&[0x05], 50.0);
        let mut after = before.clone();
        after["results"] = json!([]);
        let c = compare(&before, &after, &flat(0.99));
        assert!(c.regressed());
        let gone = c.gone.iter().find(|g| g.what.starts_with("gpu0"));
        assert_eq!(
            gone.map(|g| (g.what.as_str(), g.before.as_str())),
            Some(("gpu0.hip.bandwidth on gpu0 (0000:05:00.0)", "pass")),
            "{c:?}"
        );
    }

    #[test]
    fn a_measurement_gone_while_its_check_passes_is_a_regression() {
        let before = node(&[0x05, 0x26], 50.0);
        let mut after = before.clone();
        after["results"][0]["metrics"][0]["value"] = json!(null);
        after["results"][2]["metrics"] = json!([]);
        let c = compare(&before, &after, &flat(0.99));
        assert!(c.regressed(), "{c:?}");
        let what: Vec<(String, bool)> = c.missing.iter().map(|m| (m.what(), m.null)).collect();
        assert_eq!(
            what,
            [
                (
                    "p2p_gbps.gpu0>gpu1 (0000:05:00.0 > 0000:26:00.0)".to_string(),
                    false
                ),
                ("h2d_gbps (0000:05:00.0)".to_string(), true)
            ]
        );
        let text = render_text(&c);
        assert!(
            text.contains("gpu0.hip.bandwidth h2d_gbps (0000:05:00.0): 50 GB/s -> missing (written with no value)"),
            "{text}"
        );
        // A check that stopped passing is reported as such, not as each of
        // its measurements.
        after["results"][0]["status"] = json!("fail");
        let c = compare(&before, &after, &flat(0.99));
        assert_eq!(c.missing.len(), 1, "{c:?}");
        assert_eq!(c.regressions.len(), 1, "{c:?}");
    }

    #[test]
    fn gpus_a_report_does_not_identify_are_matched_by_index_and_it_says_so() {
        let before = node(&[0x05, 0x26], 50.0);
        let mut after = before.clone();
        after["scopes"][2]["properties"] = json!({});
        let c = compare(&before, &after, &flat(0.05));
        assert!(!c.regressed(), "{c:?}");
        let why = c.by_index.as_deref().unwrap_or_default();
        assert!(
            why.starts_with("gpu1 of the second run have no pci_address or unique_id"),
            "{why}"
        );
        assert!(render_text(&c).starts_with("Note: gpu1 of the second run"));
        // Pairs in reports older than `between` are matched by the GPUs
        // their names hold.
        let mut old = node(&[0x26, 0x05], 50.0);
        old["results"][2]["metrics"][0]
            .as_object_mut()
            .unwrap()
            .remove("between");
        old["results"][2]["metrics"][0]["value"] = json!(10.0);
        let mut reversed = node(&[0x05, 0x26], 50.0);
        reversed["results"][2]["metrics"][0]["name"] = json!("p2p_gbps.gpu1>gpu0");
        reversed["results"][2]["metrics"][0]["between"] = json!(["gpu1", "gpu0"]);
        reversed["results"][2]["metrics"][0]["value"] = json!(10.0);
        let c = compare(&old, &reversed, &flat(0.05));
        assert!(c.slower.is_empty() && c.missing.is_empty(), "{c:?}");
    }

    /// A node whose module check `module` and, above it, `n` GPU checks
    /// reading firmware versions; `loaded` says whether the module loaded.
    fn stack(n: usize, loaded: bool) -> Value {
        let mut results = vec![
            json!({"id": "node.amdgpu.module_live", "status": if loaded { "pass" } else { "fail" },
                                      "message": if loaded { "live" } else { "not loaded" }}),
        ];
        let mut versions = serde_json::Map::new();
        versions.insert("node".into(), json!({"rocm": "7.1.1"}));
        for i in 0..n {
            let mut r = json!({"id": format!("gpu{i}.firmware.versions"), "status": "pass", "message": "ok",
                               "facts": {"fw_mec": "0x9a", "vbios": "113"}});
            if loaded {
                versions.insert(format!("gpu{i}"), json!({"fw_mec": "0x9a", "vbios": "113"}));
            } else {
                r["status"] = json!("blocked");
                r["blocked_by"] = json!("node.amdgpu.module_live");
                r["facts"] = json!({});
            }
            results.push(r);
        }
        json!({"schema_version": 1, "versions": versions, "results": results})
    }

    #[test]
    fn blocked_checks_are_grouped_under_their_root_and_their_versions_not_read() {
        let c = compare(&stack(8, true), &stack(8, false), &flat(0.05));
        assert_eq!(c.regressions.len(), 9);
        let text = render_text(&c);
        assert!(
            text.contains(
                "Checks that stopped passing: 9\n  node.amdgpu.module_live pass -> fail: not loaded\n    8 checks above it blocked\n"
            ),
            "{text}"
        );
        assert!(!text.contains("gpu3.firmware.versions"), "{text}");
        // 16 versions, not read for one reason: one line.
        assert_eq!(c.versions.len(), 16);
        assert!(
            c.versions
                .iter()
                .all(|v| v.not_read.as_deref() == Some("blocked by node.amdgpu.module_live"))
        );
        assert!(
            text.contains("gpu0, gpu1, gpu2, gpu3 and 4 more: 16 versions (fw_mec, vbios) not read (blocked by node.amdgpu.module_live)"),
            "{text}"
        );
        assert!(!text.contains("(none)"), "{text}");
        let md = render_markdown(&c);
        assert!(md.contains("8 checks above it blocked"), "{md}");
        assert!(
            md.contains("not read (blocked by node.amdgpu.module_live)"),
            "{md}"
        );
        // Few versions not read are listed one by one.
        let c = compare(&stack(1, true), &stack(1, false), &flat(0.05));
        let text = render_text(&c);
        assert!(
            text.contains(
                "fw_mec                   0x9a -> not read (blocked by node.amdgpu.module_live)"
            ),
            "{text}"
        );
        assert!(text.contains("1 check above it blocked"), "{text}");
    }

    #[test]
    fn checks_blocked_by_a_root_that_failed_before_too_are_one_line() {
        let mut before = stack(3, true);
        before["results"][0]["status"] = json!("warn");
        let c = compare(&before, &stack(3, false), &flat(0.05));
        let text = render_text(&c);
        assert!(
            text.contains("node.amdgpu.module_live (did not pass before either)\n    3 checks above it blocked"),
            "{text}"
        );
    }

    proptest::proptest! {
        #[test]
        fn any_documents_compare_and_render_without_panicking(
            before in crate::compare::tests::arbitrary_doc(),
            after in crate::compare::tests::arbitrary_doc(),
            tolerance in 0.0f64..1.0,
        ) {
            let c = compare(&before, &after, &flat(tolerance));
            let _ = render_text(&c);
            let _ = render_markdown(&c);
        }
    }

    /// Results documents of a few scopes, checks and metrics with values
    /// of any kind, including ones of the wrong JSON type.
    pub(super) fn arbitrary_doc() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let value = prop_oneof![
            Just(json!(null)),
            any::<f64>().prop_map(|v| json!(v)),
            "[a-z]{0,3}".prop_map(|s| json!(s)),
            Just(json!(["gpu0", "gpu9"])),
            Just(json!({"min": 1.0, "median": "x", "max": 2.0, "samples": 2})),
            Just(json!("throughput")),
            Just(json!("counter")),
        ];
        let metric = (value.clone(), value.clone(), value.clone(), value.clone()).prop_map(
            |(v, kind, spread, between)| {
                json!({"name": "p2p_gbps.gpu0>gpu1", "value": v, "unit": "GB/s", "kind": kind,
                       "spread": spread, "between": between})
            },
        );
        let result = (
            prop::sample::select(vec!["gpu0.a.b", "node.c.d", "gpu1.a.b", "x"]),
            prop::sample::select(vec!["pass", "fail", "blocked", "skipped"]),
            value.clone(),
            prop::collection::vec(metric, 0..3),
        )
            .prop_map(|(id, status, blocked_by, metrics)| {
                json!({"id": id, "status": status, "blocked_by": blocked_by, "message": "m",
                       "metrics": metrics, "facts": {"fw": "1"}})
            });
        (prop::collection::vec(result, 0..5), value).prop_map(|(results, v)| {
            json!({"schema_version": 1, "results": results,
                   "versions": {"gpu0": {"fw": v}, "node": {"rocm": "1"}},
                   "scopes": [{"scope": "gpu0", "properties": {"pci_address": v}}, {"scope": "node"}]})
        })
    }
}
