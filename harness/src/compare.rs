//! `rocgate compare`: what changed between two runs' JSON results — versions
//! per scope, checks that stopped passing, metrics that moved the wrong way
//! beyond a tolerance, and GPUs or checks that are gone.
//!
//! GPUs are matched by identity (PCI address, else serial), never by index:
//! when a GPU falls off the bus, every later `gpuN` shifts, and comparing by
//! index would compare different physical GPUs. A GPU, or a check, present
//! before and absent after is a regression whatever the tolerance, and so is
//! a change in the GPU count.

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
    /// Metrics worse by more than the tolerance.
    pub slower: Vec<MetricChange>,
    /// Error counters (RAS errors, retired pages) that grew, by any amount;
    /// `change` is the increase.
    pub grew: Vec<MetricChange>,
    /// The tolerance used.
    pub tolerance: f64,
}

impl Comparison {
    /// Whether the second run is worse than the first.
    pub fn regressed(&self) -> bool {
        !self.regressions.is_empty()
            || !self.slower.is_empty()
            || !self.grew.is_empty()
            || !self.gone.is_empty()
            || self.gpu_count.is_some()
    }
}

/// How a metric in `unit` is compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Direction {
    /// Bandwidth, throughput, counts of things present: a drop is worse.
    HigherIsBetter,
    /// Times: a rise is worse.
    LowerIsBetter,
    /// Error counters (`errors`, `pages`): any rise is worse, from zero too.
    Counter,
    /// Readings of the moment (`°C`, `W`): not compared.
    Reading,
}

fn direction(unit: &str) -> Direction {
    match unit {
        "ms" | "s" | "us" | "ns" => Direction::LowerIsBetter,
        "errors" | "pages" => Direction::Counter,
        "°C" | "W" => Direction::Reading,
        _ => Direction::HigherIsBetter,
    }
}

/// A scope's identity across runs: `node`, or a GPU's PCI address (its
/// serial when the address is unknown), and how to name it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Identity {
    key: String,
    label: String,
}

/// Each scope label of a results document (`gpu3`) with its identity.
fn identities(doc: &Value) -> BTreeMap<String, Identity> {
    let mut out = BTreeMap::new();
    for s in doc["scopes"].as_array().into_iter().flatten() {
        let Some(label) = s["scope"].as_str() else {
            continue;
        };
        let props = &s["properties"];
        let key = if label == "node" {
            "node".to_string()
        } else if let Some(a) = props["pci_address"].as_str() {
            format!("pci {a}")
        } else if let Some(u) = props["unique_id"].as_str() {
            format!("serial {u}")
        } else {
            label.to_string()
        };
        let name = match props["pci_address"].as_str() {
            Some(a) if label != "node" => format!("{label} ({a})"),
            _ => label.to_string(),
        };
        out.insert(label.to_string(), Identity { key, label: name });
    }
    out
}

fn identity(ids: &BTreeMap<String, Identity>, label: &str) -> Identity {
    ids.get(label).cloned().unwrap_or_else(|| Identity {
        key: label.to_string(),
        label: label.to_string(),
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
    result: &'a Value,
}

/// Results keyed by (scope identity, check id).
fn results_of(doc: &Value) -> BTreeMap<(String, String), Placed<'_>> {
    let ids = identities(doc);
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
            let who = identity(&ids, &scope);
            Some((
                (who.key, check),
                Placed {
                    id: id.to_string(),
                    scope,
                    who: who.label,
                    result: r,
                },
            ))
        })
        .collect()
}

/// GPU scopes (not the node) of a document, by identity key.
fn gpus_of(doc: &Value) -> BTreeMap<String, String> {
    identities(doc)
        .into_iter()
        .filter(|(label, _)| label != "node")
        .map(|(_, i)| (i.key, i.label))
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
    let (gb, ga) = (gpus_of(before), gpus_of(after));
    let (vb, va) = (versions_of(before), versions_of(after));
    let keys: std::collections::BTreeSet<&(String, String)> = vb.keys().chain(va.keys()).collect();
    // A GPU that came or went is reported once as such, not as every one of
    // its firmware versions turning to (none).
    let came_or_went = |k: &str| gb.contains_key(k) != ga.contains_key(k);
    for key in keys.into_iter().filter(|k| !came_or_went(&k.0)) {
        let (b, a) = (vb.get(key), va.get(key));
        if b.map(|x| &x.1) != a.map(|x| &x.1) {
            c.versions.push(VersionChange {
                scope: a.or(b).map_or_else(|| key.0.clone(), |x| x.0.clone()),
                key: key.1.clone(),
                before: b.map(|x| x.1.clone()),
                after: a.map(|x| x.1.clone()),
            });
        }
    }
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
    let (rb, ra) = (results_of(before), results_of(after));
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
            if !before.is_finite() || !after.is_finite() {
                continue;
            }
            let change_of = |change: f64| MetricChange {
                id: id.clone(),
                metric: name.clone(),
                unit: unit.clone(),
                before: *before,
                after: *after,
                change,
            };
            let kind = direction(unit);
            if kind == Direction::Counter {
                if after > before {
                    c.grew.push(change_of(after - before));
                }
                continue;
            }
            if *before == 0.0 || kind == Direction::Reading {
                continue;
            }
            let change = after / before - 1.0;
            let worse = match kind {
                Direction::LowerIsBetter => change > tolerance,
                _ => change < -tolerance,
            };
            if worse {
                c.slower.push(change_of(change));
            }
        }
    }
    c
}

fn opt(v: &Option<String>) -> &str {
    v.as_deref().unwrap_or("(none)")
}

/// Appends `title: N` and the `lines`, indented.
fn text_list(out: &mut String, title: &str, lines: impl ExactSizeIterator<Item = String>) {
    let _ = writeln!(out, "{title}: {}", lines.len());
    for line in lines {
        let _ = writeln!(out, "  {line}");
    }
}

/// Plain text for a terminal.
pub fn render_text(c: &Comparison) -> String {
    let mut out = String::new();
    if let Some((b, a)) = c.gpu_count {
        let _ = writeln!(out, "GPU count changed: {b} -> {a}");
    }
    if !c.gone.is_empty() {
        text_list(
            &mut out,
            "Gone since the first run",
            c.gone
                .iter()
                .map(|g| format!("{} (was {})", g.what, g.before)),
        );
    }
    text_list(
        &mut out,
        "Versions changed",
        c.versions.iter().map(|v| {
            format!(
                "{:<6} {:<24} {} -> {}",
                v.scope,
                v.key,
                opt(&v.before),
                opt(&v.after)
            )
        }),
    );
    text_list(
        &mut out,
        "Checks that stopped passing",
        c.regressions
            .iter()
            .map(|r| format!("{} {} -> {}: {}", r.id, r.before, r.after, r.message)),
    );
    text_list(
        &mut out,
        &format!("Metrics worse by more than {:.0}%", c.tolerance * 100.0),
        c.slower.iter().map(|m| {
            format!(
                "{} {} {:.3} -> {:.3} {} ({:+.1}%)",
                m.id,
                m.metric,
                m.before,
                m.after,
                m.unit,
                m.change * 100.0
            )
        }),
    );
    text_list(
        &mut out,
        "Error counters that grew",
        c.grew.iter().map(|m| {
            format!(
                "{} {} {} -> {} {} (+{})",
                m.id, m.metric, m.before, m.after, m.unit, m.change
            )
        }),
    );
    if !c.fixed.is_empty() {
        text_list(
            &mut out,
            "Checks that now pass",
            c.fixed
                .iter()
                .map(|r| format!("{} {} -> pass", r.id, r.before)),
        );
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

/// A change as a row of the markdown report.
trait MarkdownRow {
    /// The columns' names.
    const HEADER: &'static [&'static str];
    /// This change's cells, escaped for a table.
    fn cells(&self) -> Vec<String>;
}

impl MarkdownRow for Gone {
    const HEADER: &'static [&'static str] = &["what", "before"];
    fn cells(&self) -> Vec<String> {
        vec![md(&self.what), self.before.clone()]
    }
}

impl MarkdownRow for VersionChange {
    const HEADER: &'static [&'static str] = &["scope", "component", "before", "after"];
    fn cells(&self) -> Vec<String> {
        let (before, after) = (md(opt(&self.before)), md(opt(&self.after)));
        vec![self.scope.clone(), self.key.clone(), before, after]
    }
}

impl MarkdownRow for StatusChange {
    const HEADER: &'static [&'static str] = &["check", "before", "after", "message"];
    fn cells(&self) -> Vec<String> {
        let id = format!("`{}`", self.id);
        let after = format!("**{}**", self.after);
        vec![id, self.before.to_string(), after, md(&self.message)]
    }
}

impl MarkdownRow for MetricChange {
    const HEADER: &'static [&'static str] = &["check", "metric", "before", "after", "change"];
    fn cells(&self) -> Vec<String> {
        let value = |v: f64| format!("{v:.3} {}", self.unit);
        let change = format!("**{:+.1}%**", self.change * 100.0);
        let id = format!("`{}`", self.id);
        vec![
            id,
            self.metric.clone(),
            value(self.before),
            value(self.after),
            change,
        ]
    }
}

/// Appends a section `title` holding a table of `rows`; nothing when there
/// are none.
fn md_table<R: MarkdownRow>(out: &mut String, title: &str, rows: &[R]) {
    if rows.is_empty() {
        return;
    }
    let _ = write!(
        out,
        "### {title}\n\n| {} |\n|{}\n",
        R::HEADER.join(" | "),
        "---|".repeat(R::HEADER.len())
    );
    for row in rows {
        let _ = writeln!(out, "| {} |", row.cells().join(" | "));
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
    if let Some((b, a)) = c.gpu_count {
        let _ = writeln!(out, "**GPU count changed: {b} -> {a}**\n");
    }
    md_table(&mut out, "Gone since the first run", &c.gone);
    md_table(&mut out, "Versions", &c.versions);
    md_table(&mut out, "Checks that stopped passing", &c.regressions);
    let worse = format!("Metrics worse by more than {:.0}%", c.tolerance * 100.0);
    md_table(&mut out, &worse, &c.slower);
    md_table(&mut out, "Error counters that grew", &c.grew);
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
    fn error_counters_regress_on_any_rise_and_readings_never_do() {
        let run = |ce: f64, temp: f64| {
            json!({"results": [{
                "id": "gpu0.amdgpu.ras_errors", "status": "pass", "message": "",
                "metrics": [
                    {"name": "ras_ce.umc", "value": ce, "unit": "errors"},
                    {"name": "temp_junction", "value": temp, "unit": "°C"}
                ]
            }]})
        };
        let c = compare(&run(0.0, 40.0), &run(3.0, 90.0), 0.05);
        assert_eq!(c.grew.len(), 1, "{c:?}");
        assert_eq!(
            (c.grew[0].before, c.grew[0].after, c.grew[0].change),
            (0.0, 3.0, 3.0)
        );
        assert!(c.slower.is_empty() && c.regressed());
        assert!(render_text(&c).contains("ras_ce.umc 0 -> 3 errors (+3)"));
        let steady = compare(&run(3.0, 90.0), &run(3.0, 40.0), 0.05);
        assert!(!steady.regressed(), "{steady:?}");
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

    /// A node of `n` GPUs on the given buses, each with a passing
    /// bandwidth check at `gbps`.
    fn node(buses: &[u32], gbps: f64) -> Value {
        let scopes: Vec<Value> = std::iter::once(json!({"scope": "node", "properties": {}}))
            .chain(buses.iter().enumerate().map(|(i, b)| {
                json!({"scope": format!("gpu{i}"), "properties": {"pci_address": format!("0000:{b:02x}:00.0")}})
            }))
            .collect();
        let results: Vec<Value> = buses
            .iter()
            .enumerate()
            .map(|(i, _)| {
                json!({"id": format!("gpu{i}.hip.memcpy"), "check": "hip::memcpy", "scope": format!("gpu{i}"),
                       "status": "pass", "message": "ok",
                       "metrics": [{"name": "h2d_bandwidth", "value": gbps, "unit": "GB/s"}]})
            })
            .collect();
        json!({"schema_version": 1, "scopes": scopes, "results": results})
    }

    #[test]
    fn gpus_are_matched_by_pci_address_not_index() {
        // 0x26 fell off the bus: gpu1 is now 0x46. By index, gpu1 would be
        // compared with another GPU; by identity, 0x26 is gone.
        let c = compare(
            &node(&[0x05, 0x26, 0x46], 50.0),
            &node(&[0x05, 0x46], 50.0),
            0.5,
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
        // itself and named with both indices.
        let mut after = node(&[0x05, 0x46], 50.0);
        after["results"][1]["metrics"][0]["value"] = json!(10.0);
        let c = compare(&node(&[0x05, 0x26, 0x46], 50.0), &after, 0.5);
        assert_eq!(c.slower.len(), 1, "{c:?}");
        assert_eq!(c.slower[0].id, "gpu1.hip.memcpy (was gpu2)");
    }

    #[test]
    fn a_check_that_disappears_is_a_regression_whatever_the_tolerance() {
        let before = node(&[0x05], 50.0);
        let mut after = before.clone();
        after["results"] = json!([]);
        let c = compare(&before, &after, 10.0);
        assert!(c.regressed());
        assert_eq!(c.gone[0].what, "gpu0.hip.memcpy on gpu0 (0000:05:00.0)");
        assert_eq!(c.gone[0].before, "pass");
    }
}
