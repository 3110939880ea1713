//! `rocgate compare`: what changed between two runs' JSON results — versions
//! per scope, checks that stopped passing, metrics that moved the wrong way
//! beyond a tolerance.

use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;

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
}

/// A metric that got worse beyond the tolerance.
#[derive(Clone, Debug, PartialEq)]
pub struct MetricChange {
    /// Test id.
    pub id: String,
    /// Metric name.
    pub metric: String,
    /// Unit.
    pub unit: String,
    /// Before.
    pub before: f64,
    /// After.
    pub after: f64,
    /// Relative change (after/before - 1).
    pub change: f64,
}

/// The differences between two runs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Comparison {
    /// Versions that changed, per scope.
    pub versions: Vec<VersionChange>,
    /// Checks that went from pass to anything else.
    pub regressions: Vec<StatusChange>,
    /// Checks that went from anything else to pass.
    pub fixed: Vec<StatusChange>,
    /// Metrics worse by more than the tolerance.
    pub slower: Vec<MetricChange>,
    /// The tolerance used.
    pub tolerance: f64,
}

impl Comparison {
    /// Whether the second run is worse than the first.
    pub fn regressed(&self) -> bool {
        !self.regressions.is_empty() || !self.slower.is_empty()
    }
}

/// Whether larger values of a metric in `unit` are better.
fn higher_is_better(unit: &str) -> bool {
    !matches!(unit, "ms" | "s" | "us" | "ns")
}

fn versions_of(doc: &Value) -> BTreeMap<(String, String), String> {
    let mut out = BTreeMap::new();
    if let Some(scopes) = doc["versions"].as_object() {
        for (scope, kv) in scopes {
            for (k, v) in kv.as_object().into_iter().flatten() {
                if let Some(v) = v.as_str() {
                    out.insert((scope.clone(), k.clone()), v.to_string());
                }
            }
        }
    }
    out
}

fn results_of(doc: &Value) -> BTreeMap<String, &Value> {
    doc["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| Some((r["id"].as_str()?.to_string(), r)))
        .collect()
}

/// Checks that `doc` is a rocgate results document (schema 1); names `what`.
pub fn validate(doc: &Value, what: &str) -> Result<(), String> {
    match doc["schema_version"].as_u64() {
        Some(1) if doc["results"].is_array() => Ok(()),
        Some(v) => Err(format!(
            "{what}: schema_version {v} is not supported (1 is)"
        )),
        None => Err(format!(
            "{what} is not a rocgate results file (no schema_version); write one with `rocgate run --json FILE`"
        )),
    }
}

/// Compares two results documents.
pub fn compare(before: &Value, after: &Value, tolerance: f64) -> Comparison {
    let mut c = Comparison {
        tolerance,
        ..Comparison::default()
    };
    let (vb, va) = (versions_of(before), versions_of(after));
    let keys: std::collections::BTreeSet<&(String, String)> = vb.keys().chain(va.keys()).collect();
    for key in keys {
        let (b, a) = (vb.get(key), va.get(key));
        if b != a {
            c.versions.push(VersionChange {
                scope: key.0.clone(),
                key: key.1.clone(),
                before: b.cloned(),
                after: a.cloned(),
            });
        }
    }
    let (rb, ra) = (results_of(before), results_of(after));
    for (id, b) in &rb {
        let Some(a) = ra.get(id) else { continue };
        let (sb, sa) = (
            b["status"].as_str().unwrap_or("?"),
            a["status"].as_str().unwrap_or("?"),
        );
        let change = StatusChange {
            id: id.clone(),
            before: sb.to_string(),
            after: sa.to_string(),
            message: a["message"].as_str().unwrap_or("").to_string(),
        };
        if sb == "pass" && sa != "pass" {
            c.regressions.push(change);
        } else if sb != "pass" && sa == "pass" {
            c.fixed.push(change);
        }
        let metrics = |r: &Value| -> BTreeMap<String, (f64, String)> {
            r["metrics"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|m| {
                    Some((
                        m["name"].as_str()?.to_string(),
                        (
                            m["value"].as_f64()?,
                            m["unit"].as_str().unwrap_or("").to_string(),
                        ),
                    ))
                })
                .collect()
        };
        let (mb, ma) = (metrics(b), metrics(a));
        for (name, (before, unit)) in &mb {
            let Some((after, _)) = ma.get(name) else {
                continue;
            };
            if *before == 0.0 || !before.is_finite() || !after.is_finite() {
                continue;
            }
            let change = after / before - 1.0;
            let worse = if higher_is_better(unit) {
                change < -tolerance
            } else {
                change > tolerance
            };
            if worse {
                c.slower.push(MetricChange {
                    id: id.clone(),
                    metric: name.clone(),
                    unit: unit.clone(),
                    before: *before,
                    after: *after,
                    change,
                });
            }
        }
    }
    c
}

fn opt(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("(none)")
}

/// Plain text for a terminal.
pub fn render_text(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Versions changed: {}", c.versions.len());
    for v in &c.versions {
        let _ = writeln!(
            out,
            "  {:<6} {:<24} {} -> {}",
            v.scope,
            v.key,
            opt(&v.before),
            opt(&v.after)
        );
    }
    let _ = writeln!(out, "Checks that stopped passing: {}", c.regressions.len());
    for r in &c.regressions {
        let _ = writeln!(out, "  {} {} -> {}: {}", r.id, r.before, r.after, r.message);
    }
    let _ = writeln!(
        out,
        "Metrics worse by more than {:.0}%: {}",
        c.tolerance * 100.0,
        c.slower.len()
    );
    for m in &c.slower {
        let _ = writeln!(
            out,
            "  {} {} {:.3} -> {:.3} {} ({:+.1}%)",
            m.id,
            m.metric,
            m.before,
            m.after,
            m.unit,
            m.change * 100.0
        );
    }
    if !c.fixed.is_empty() {
        let _ = writeln!(out, "Checks that now pass: {}", c.fixed.len());
        for r in &c.fixed {
            let _ = writeln!(out, "  {} {} -> pass", r.id, r.before);
        }
    }
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

fn md(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
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
    if !c.versions.is_empty() {
        out.push_str("### Versions\n\n| scope | component | before | after |\n|---|---|---|---|\n");
        for v in &c.versions {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                v.scope,
                v.key,
                md(opt(&v.before)),
                md(opt(&v.after))
            );
        }
        out.push('\n');
    }
    if !c.regressions.is_empty() {
        out.push_str("### Checks that stopped passing\n\n| check | before | after | message |\n|---|---|---|---|\n");
        for r in &c.regressions {
            let _ = writeln!(
                out,
                "| `{}` | {} | **{}** | {} |",
                r.id,
                r.before,
                r.after,
                md(&r.message)
            );
        }
        out.push('\n');
    }
    if !c.slower.is_empty() {
        let _ = write!(
            out,
            "### Metrics worse by more than {:.0}%\n\n| check | metric | before | after | change |\n|---|---|---|---|---|\n",
            c.tolerance * 100.0
        );
        for m in &c.slower {
            let _ = writeln!(
                out,
                "| `{}` | {} | {:.3} {} | {:.3} {} | **{:+.1}%** |",
                m.id,
                m.metric,
                m.before,
                m.unit,
                m.after,
                m.unit,
                m.change * 100.0
            );
        }
        out.push('\n');
    }
    if !c.fixed.is_empty() {
        let _ = writeln!(
            out,
            "{} checks now pass that did not before.",
            c.fixed.len()
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(status: &str, tflops: f64, amdgpu: &str) -> Value {
        json!({
            "schema_version": 1,
            "versions": {"node": {"amdgpu": amdgpu}, "gpu0": {"fw_mec": "0x9a"}},
            "results": [
                {"id": "gpu0.rocblas.sgemm", "status": status, "message": "m", "metrics": [{"name": "gemm_fp32_tflops", "value": tflops, "unit": "TFLOP/s"}, {"name": "t", "value": 10.0, "unit": "ms"}]},
                {"id": "node.pci.amd_gpu_present", "status": "pass", "message": "ok"}
            ]
        })
    }

    #[test]
    fn finds_version_status_and_metric_changes() {
        let c = compare(
            &doc("pass", 100.0, "6.8.5"),
            &doc("fail", 90.0, "6.10.5"),
            0.05,
        );
        assert_eq!(c.versions.len(), 1);
        assert_eq!(c.versions[0].key, "amdgpu");
        assert_eq!(c.regressions.len(), 1);
        assert_eq!(c.slower.len(), 1);
        assert!((c.slower[0].change + 0.1).abs() < 1e-9);
        assert!(c.regressed());
        let md = render_markdown(&c);
        assert!(md.contains("| node | amdgpu | 6.8.5 | 6.10.5 |"), "{md}");
        assert!(render_text(&c).contains("REGRESSED"));
    }

    #[test]
    fn small_moves_and_faster_times_are_not_regressions() {
        let mut after = doc("pass", 97.0, "6.8.5");
        after["results"][0]["metrics"][1]["value"] = json!(9.0);
        let c = compare(&doc("pass", 100.0, "6.8.5"), &after, 0.05);
        assert!(!c.regressed(), "{c:?}");
        assert!(
            validate(&json!({"x": 1}), "a.json")
                .unwrap_err()
                .contains("a.json")
        );
    }
}
