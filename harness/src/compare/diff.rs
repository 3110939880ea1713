//! Two results documents matched scope by scope (by GPU identity, else by
//! index) and check by check, and their differences found.

use super::model::*;
use super::read::{Compared, Report};
use crate::document::IdentityKeys;
use crate::verdict::MetricKind;
use std::collections::{BTreeMap, BTreeSet};

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
fn unidentified(doc: &Report, ids: &Identities) -> Vec<String> {
    let mut labels: BTreeSet<String> = ids.keys().cloned().collect();
    labels.extend(doc.results.iter().filter_map(|r| r.scope.clone()));
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

/// Each scope label of a results document (`gpu3`) with its identity: the
/// address the suites name it by, else its serial, else its label.
fn identities(doc: &Report, keys: &IdentityKeys) -> Identities {
    let mut out = BTreeMap::new();
    for s in &doc.scopes {
        let label = s.scope.as_str();
        let (key, id) = if label == "node" {
            ("node".to_string(), None)
        } else if let Some(a) = s.get(keys.address) {
            (format!("pci {a}"), Some(a.to_string()))
        } else if let Some(u) = s.get(keys.serial) {
            (format!("serial {u}"), Some(format!("serial {u}")))
        } else {
            (label.to_string(), None)
        };
        let name = match s.get(keys.address) {
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

/// Versions keyed by (scope identity, component), with the scope's name;
/// `ids` are the document's own identities.
fn versions_of(doc: &Report, ids: &Identities) -> BTreeMap<(String, String), (String, String)> {
    let mut out = BTreeMap::new();
    for (scope, kv) in &doc.versions {
        let who = identity(ids, scope);
        for (k, v) in kv {
            out.insert((who.key.clone(), k.clone()), (who.label.clone(), v.clone()));
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
    result: &'a Compared,
}

/// A document's results keyed by (scope identity, check id).
type Results<'a> = BTreeMap<(String, String), Placed<'a>>;

/// Results keyed by (scope identity, check id).
fn results_of<'a>(doc: &'a Report, ids: &Identities) -> Results<'a> {
    doc.results
        .iter()
        .filter_map(|r| {
            let id = r.id.as_deref()?;
            let scope = r
                .scope
                .clone()
                .or_else(|| id.split('.').next().map(str::to_string))?;
            let check = r
                .check
                .clone()
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
fn metrics_of(r: &Compared, ids: &Identities) -> BTreeMap<String, MetricOf> {
    let mut out = BTreeMap::new();
    for m in &r.metrics {
        let name = m.name.as_str();
        // A report older than `between` names the pair only in the metric's
        // name: `p2p_gbps.gpu6>gpu5`, both scopes of this run.
        let named = || {
            let (_, pair) = name.rsplit_once('.')?;
            let (from, to) = pair.split_once('>')?;
            (ids.contains_key(from) && ids.contains_key(to)).then_some((from, to))
        };
        let pair = m
            .between
            .as_ref()
            .map(|(from, to)| (from.as_str(), to.as_str()))
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
                unit: m.unit.clone(),
                kind: m.kind,
                measured: m.value.map(|value| Measured {
                    value,
                    spread: m.spread,
                }),
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
    match r.status() {
        "pass" | "warn" => None,
        "blocked" => Some(match &r.blocked_by {
            Some(root) => format!("blocked by {root}"),
            None => format!("{} blocked", p.id),
        }),
        "fail" => Some(format!("{} failed", p.id)),
        "timeout" => Some(format!("{} timed out", p.id)),
        "crash" => Some(format!("{} crashed", p.id)),
        other => Some(format!("{} {other}", p.id)),
    }
}

/// Compares two run reports, read in the suites' `terms`.
pub fn compare(
    before: &Report,
    after: &Report,
    tolerances: &Tolerances,
    terms: &Terms,
) -> Comparison {
    let keys = &terms.identity;
    let mut c = Comparison {
        tolerances: tolerances.clone(),
        ..Comparison::default()
    };
    let own = (identities(before, keys), identities(after, keys));
    let (mut ib, mut ia) = own.clone();
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
            "{} have no {} or {}: GPUs are matched by index (gpuN), which names another GPU when KFD numbers them differently",
            runs.join(" and "),
            keys.address,
            keys.serial
        ));
        (ib, ia) = (by_label(&ib), by_label(&ia));
    }
    let (gb, ga) = (gpus_of(&ib), gpus_of(&ia));
    let (rb, ra) = (results_of(before, &ib), results_of(after, &ia));
    versions(&mut c, (before, after), &own, (&gb, &ga), (&rb, &ra));
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
                    before: b.status().to_string(),
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
        let (sb, sa) = (b.status(), a.status());
        let change = StatusChange {
            id: id.clone(),
            before: sb.to_string(),
            after: sa.to_string(),
            message: a.message.clone(),
            blocked_by: (sa == "blocked").then(|| a.blocked_by.clone()).flatten(),
        };
        if sb == "pass" && sa != "pass" {
            c.regressions.push(change);
        } else if sb != "pass" && sa == "pass" {
            c.fixed.push(change);
        }
        let check = CheckMetrics {
            id: &id,
            gpu: pa.gpu.as_deref(),
            before: metrics_of(b, &ib),
            after: metrics_of(a, &ia),
        };
        metrics(&mut c, &check, terms);
        if matches!(sa, "pass" | "warn") {
            missing(&mut c, &check);
        }
    }
    c
}

/// Version changes between the runs, saying which absent ones were not read.
fn versions(
    c: &mut Comparison,
    (before, after): (&Report, &Report),
    (ib, ia): &(Identities, Identities),
    (gb, ga): (&BTreeMap<String, String>, &BTreeMap<String, String>),
    (rb, ra): (&Results<'_>, &Results<'_>),
) {
    let (vb, va) = (versions_of(before, ib), versions_of(after, ia));
    // Which check read each version before: one whose facts hold it, in
    // the version's scope if one there does.
    let mut reader: BTreeMap<(String, String), (String, String)> = BTreeMap::new();
    let mut anywhere: BTreeMap<String, (String, String)> = BTreeMap::new();
    for ((scope, check), p) in rb {
        for fact in p.result.facts.keys() {
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

/// One check's metrics in both runs, keyed so that the runs match.
struct CheckMetrics<'a> {
    /// The check's test id.
    id: &'a str,
    /// The GPU the check ran on, for a metric that names no scope.
    gpu: Option<&'a str>,
    /// The metrics of the first run.
    before: BTreeMap<String, MetricOf>,
    /// The metrics of the second run.
    after: BTreeMap<String, MetricOf>,
}

/// Judges the metrics of one check in both runs.
fn metrics(c: &mut Comparison, check: &CheckMetrics, terms: &Terms) {
    let CheckMetrics { id, gpu, .. } = *check;
    for (key, before) in &check.before {
        let Some(after) = check.after.get(key) else {
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
            .unwrap_or_else(|| (terms.kind_of_unit)(&before.unit));
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
fn missing(c: &mut Comparison, check: &CheckMetrics) {
    let CheckMetrics { id, gpu, .. } = *check;
    for (key, before) in &check.before {
        let Some(value) = before.measured.map(|m| m.centre()) else {
            continue;
        };
        let after = check.after.get(key);
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
