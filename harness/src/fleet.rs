//! Many nodes' run reports read together: a table of nodes by layers, the
//! failures counted by code, and the nodes to take out of service.
//!
//! Reports carry layers by name only, so the caller gives the order of the
//! layers it knows; a layer a report names that the caller does not know
//! goes after them, in the order it first appears.

use crate::model::Scope;
use crate::result::SavedResult;
use crate::verdict::Status;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// What one node's report says, summed up.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FleetNode {
    /// The node's host name (its report's `node.hostname`), else the
    /// report's file name.
    pub node: String,
    /// The report it was read from.
    pub file: String,
    /// Whether the run passed.
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
    /// Where it was found (`gpu3`, `node`).
    pub scope: Option<String>,
    /// That GPU's PCI address.
    pub pci_address: Option<String>,
    /// Whether the node should be drained: its report says so (the run's
    /// own decision), or, in a report that does not, it has a fault no
    /// waiver covers.
    pub drain: bool,
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
}

/// A fleet's reports, read.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Fleet {
    /// The layers, in report order.
    pub layers: Vec<String>,
    /// One entry per report, in the order given.
    pub nodes: Vec<FleetNode>,
    /// How many nodes failed with each code.
    pub codes: BTreeMap<String, usize>,
}

/// The parts of a run report the fleet view reads.
#[derive(Deserialize)]
struct Report {
    #[serde(default)]
    node: BTreeMap<String, String>,
    passed: bool,
    #[serde(default)]
    interrupted: Option<String>,
    #[serde(default)]
    first_failing_layer: Option<String>,
    #[serde(default)]
    scopes: Vec<ScopeEntry>,
    results: Vec<SavedResult>,
    /// What the run decided for schedulers, when the report carries it.
    #[serde(default)]
    decision: Option<SavedDecision>,
}

/// The part of a report's decision the fleet reads.
#[derive(Deserialize)]
struct SavedDecision {
    drain: bool,
}

#[derive(Deserialize)]
struct ScopeEntry {
    scope: String,
    #[serde(default)]
    properties: BTreeMap<String, String>,
}

impl Fleet {
    /// Reads `reports` (`(file name, JSON text)`), with `layer_order` the
    /// layers the caller knows, bottom-up. An unreadable report is an error
    /// naming its file.
    pub fn read(reports: &[(String, String)], layer_order: &[&str]) -> Result<Fleet, String> {
        let mut fleet = Fleet {
            layers: layer_order.iter().map(|l| l.to_string()).collect(),
            ..Fleet::default()
        };
        for (file, text) in reports {
            let report: Report = serde_json::from_str(text).map_err(|e| {
                format!("{file} is not a rocgate run report (`rocgate run --json`): {e}")
            })?;
            for r in &report.results {
                if !fleet.layers.contains(&r.layer) {
                    fleet.layers.push(r.layer.clone());
                }
            }
            let mut node = summarise(file, &report);
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
        Ok(fleet)
    }

    /// Whether every node passed.
    pub fn all_passed(&self) -> bool {
        self.nodes.iter().all(|n| n.passed)
    }

    /// The nodes to drain.
    pub fn to_drain(&self) -> impl Iterator<Item = &FleetNode> {
        self.nodes.iter().filter(|n| n.drain)
    }

    /// Markdown: the table, the counts per code and the nodes to drain.
    pub fn markdown(&self) -> String {
        let failed = self.nodes.iter().filter(|n| !n.passed).count();
        let mut out = format!(
            "## rocgate fleet: {failed} of {} nodes failed\n\n",
            self.nodes.len()
        );
        let mut header = vec!["node"];
        header.extend(self.layers.iter().map(String::as_str));
        header.extend(["first failing layer", "code", "GPU"]);
        let _ = writeln!(out, "| {} |", header.join(" | "));
        let _ = writeln!(out, "|{}", "---|".repeat(header.len()));
        for n in &self.nodes {
            let mut row = vec![md(&n.node)];
            row.extend(self.layers.iter().map(|l| {
                let cell = n.layers.get(l).map_or("-", String::as_str);
                match cell {
                    "fail" => "**fail**".to_string(),
                    other => other.to_string(),
                }
            }));
            row.push(n.first_failing_layer.clone().unwrap_or_default());
            row.push(
                n.code
                    .as_deref()
                    .map(|c| format!("`{c}`"))
                    .unwrap_or_default(),
            );
            row.push(n.gpu());
            let _ = writeln!(out, "| {} |", row.join(" | "));
        }
        if !self.codes.is_empty() {
            out.push_str("\n### Failures by code\n\n| code | nodes |\n|---|---|\n");
            for (code, n) in &self.codes {
                let _ = writeln!(out, "| `{code}` | {n} |");
            }
        }
        let drain: Vec<&FleetNode> = self.to_drain().collect();
        if !drain.is_empty() {
            out.push_str("\n### Nodes to drain\n\n");
            for n in drain {
                let _ = writeln!(
                    out,
                    "- {}: `{}` on {}",
                    md(&n.node),
                    n.code.as_deref().unwrap_or("?"),
                    n.gpu()
                );
            }
        }
        out
    }

    /// JSON: `{"nodes": [...], "layers": [...], "codes": {...}, "drain": [...]}`.
    pub fn json(&self) -> Result<String, String> {
        #[derive(Serialize)]
        struct Doc<'a> {
            nodes: &'a [FleetNode],
            layers: &'a [String],
            codes: &'a BTreeMap<String, usize>,
            drain: Vec<&'a str>,
        }
        serde_json::to_string_pretty(&Doc {
            nodes: &self.nodes,
            layers: &self.layers,
            codes: &self.codes,
            drain: self.to_drain().map(|n| n.node.as_str()).collect(),
        })
        .map_err(|e| format!("failed to serialise the fleet report: {e}"))
    }
}

/// One report, summed up.
fn summarise(file: &str, report: &Report) -> FleetNode {
    let name = report
        .node
        .get("hostname")
        .filter(|h| !h.is_empty())
        .cloned()
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
    let scope = fault.map(|r| r.scope);
    let pci_address = scope.and_then(|s| {
        report
            .scopes
            .iter()
            .find(|e| e.scope == s.label())
            .and_then(|e| e.properties.get("pci_address").cloned())
    });
    FleetNode {
        node: name,
        file: file.to_string(),
        passed: report.passed,
        interrupted: report.interrupted.clone(),
        layers,
        first_failing_layer: report.first_failing_layer.clone(),
        code: fault.and_then(|r| r.finding.as_ref().map(|f| f.code.clone())),
        scope: scope.map(Scope::label),
        pci_address,
        drain: report
            .decision
            .as_ref()
            .map_or_else(|| stopping.clone().next().is_some(), |d| d.drain),
    }
}

fn cell_of(r: &SavedResult) -> &'static str {
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

fn md(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report(host: &str, results: serde_json::Value, first: Option<&str>) -> (String, String) {
        let passed = results
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["status"] != "fail" && r["status"] != "blocked");
        let doc = json!({
            "node": {"hostname": host},
            "passed": passed,
            "first_failing_layer": first,
            "scopes": [{"scope": "gpu3", "properties": {"pci_address": "0000:65:00.0"}}],
            "results": results,
        });
        (format!("out/{host}.json"), doc.to_string())
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
        let fleet = Fleet::read(&reports, &["pci", "firmware", "kfd"]).unwrap();
        assert!(!fleet.all_passed());
        assert_eq!(fleet.layers, ["pci", "firmware", "kfd", "rocx"]);
        let n07 = &fleet.nodes[1];
        assert_eq!(n07.node, "n07");
        assert_eq!(n07.layers["firmware"], "fail");
        assert_eq!(n07.layers["kfd"], "blocked");
        assert_eq!(n07.code.as_deref(), Some("firmware-load-failed"));
        assert_eq!(n07.pci_address.as_deref(), Some("0000:65:00.0"));
        assert!(n07.drain && !fleet.nodes[0].drain);
        assert_eq!(fleet.codes["firmware-load-failed"], 1);
        let md = fleet.markdown();
        assert!(
            md.starts_with("## rocgate fleet: 1 of 2 nodes failed"),
            "{md}"
        );
        assert!(md.contains("| n07 | pass | **fail** | blocked | pass | firmware | `firmware-load-failed` | gpu3 (0000:65:00.0) |"), "{md}");
        assert!(
            md.contains("| n01 | pass | - | pass | - |  |  |  |"),
            "{md}"
        );
        assert!(
            md.contains("- n07: `firmware-load-failed` on gpu3 (0000:65:00.0)"),
            "{md}"
        );
        let json: serde_json::Value = serde_json::from_str(&fleet.json().unwrap()).unwrap();
        assert_eq!(json["drain"], json!(["n07"]));
        assert_eq!(json["nodes"][0]["passed"], true);
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
            &[report("n02", json!([slow, waived]), Some("pci"))],
            &["pci", "kfd"],
        )
        .unwrap();
        let n = &fleet.nodes[0];
        assert_eq!(n.layers["pci"], "warn");
        assert_eq!(n.layers["kfd"], "waived");
        assert!(!n.drain);
        assert_eq!(n.code.as_deref(), Some("pcie-link-degraded"));
        // A report's own decision is what drains.
        let mut decided: serde_json::Value =
            serde_json::from_str(&report("n03", json!([]), None).1).unwrap();
        decided["decision"] = json!({"drain": true});
        let fleet = Fleet::read(&[("n03.json".into(), decided.to_string())], &[]).unwrap();
        assert!(fleet.nodes[0].drain);
    }

    #[test]
    fn a_file_that_is_not_a_report_is_named() {
        let err = Fleet::read(&[("out/x.json".into(), "{}".into())], &[]).unwrap_err();
        assert!(
            err.contains("out/x.json is not a rocgate run report"),
            "{err}"
        );
    }
}
