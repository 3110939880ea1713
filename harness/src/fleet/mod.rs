//! Many nodes' run reports read together: a table of nodes by layers, the
//! failures counted by code, the nodes to take out of service, what nodes
//! run that most of the fleet does not (drift), the GPUs far from their
//! siblings (outliers), and what changed since the previous fleet run.
//!
//! Reports are read one at a time ([`FleetReader`]): each is reduced to a
//! [`Digest`] of what the aggregates need, so memory follows the number
//! of nodes, not the bytes of their reports.
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

pub mod diff;
pub mod digest;
pub mod drift;
pub mod outliers;
mod render;

use crate::document::IdentityKeys;
use crate::saved_report;
use chrono::{DateTime, FixedOffset, SecondsFormat};
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;

pub use diff::FleetDiff;
pub use digest::{Digest, digest};
pub use drift::{Drift, Mixed};
pub use outliers::{MetricSpread, OutlierRule};

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
    pub layers: BTreeMap<String, &'static str>,
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
    /// The components in which it runs other than most of the fleet (and
    /// the site does not expect them mixed).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub drift: Vec<String>,
    /// The metrics in which it is far on the bad side of the fleet, with
    /// where (`gemm_tflops.fp16 gpu3`).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub outliers: Vec<String>,
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

    /// How the node stands out from the fleet, for its row: `drift AMD
    /// Instinct MI300X fw_smc`, `outlier gemm_tflops.fp16 gpu1` (the first
    /// of each, and how many more), or nothing.
    pub fn apart(&self) -> Vec<String> {
        let first = |what: &str, list: &[String]| {
            list.first().map(|f| match list.len() {
                1 => format!("{what} {f}"),
                n => format!("{what} {f} (+{} more)", n - 1),
            })
        };
        first("drift", &self.drift)
            .into_iter()
            .chain(first("outlier", &self.outliers))
            .collect()
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
        if !self.passed {
            "failed"
        } else if self.code.is_some() || !self.drift.is_empty() || !self.outliers.is_empty() {
            "warned"
        } else {
            "passed"
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
    /// The layers some node has a cell in, bottom-up (the caller's order,
    /// then any other in report order).
    pub layers: Vec<String>,
    /// One entry per report read: the failed nodes first, then those
    /// that passed with a warning, then the rest, each group in the order
    /// given.
    pub nodes: Vec<FleetNode>,
    /// How many nodes failed with each code.
    pub codes: BTreeMap<String, usize>,
    /// The reports that could not be read: their nodes are not judged.
    pub not_read: Vec<NotRead>,
    /// What nodes run that most of the fleet does not.
    pub drift: Drift,
    /// Every compared metric across the fleet, with its outliers.
    pub metrics: Vec<MetricSpread>,
    /// What changed since the previous fleet run, when one was given.
    pub since: Option<FleetDiff>,
}

/// What the caller's reports mean by their names, for the fleet: its
/// layers, who a node and its GPUs are, a GPU's model and partition mode,
/// and the node components a fingerprint holds.
#[derive(Clone, Copy, Debug)]
pub struct FleetTerms {
    /// The layers, bottom-up: a layer beside the stack none of whose
    /// results applied to a node is left out of its row, as a run's own
    /// views leave it out (`RunReport::layers`).
    pub layers: &'static [crate::model::Layer],
    /// The identity keys.
    pub keys: IdentityKeys,
    /// The scope property naming a GPU's model (`product`).
    pub model: &'static str,
    /// The one to use where that is absent (`gfx_target`).
    pub model_fallback: &'static str,
    /// The scope property naming its partition mode (`partition`).
    pub partition: &'static str,
    /// The node components (versions, else node properties) compared
    /// across the fleet (`rocm`, `kernel`, ...).
    pub node_components: &'static [&'static str],
}

/// How the fleet judges drift and outliers.
#[derive(Clone, Debug, Default)]
pub struct FleetOptions {
    /// When a value is an outlier.
    pub rule: OutlierRule,
    /// The components the site expects mixed.
    pub mixed: Mixed,
}

/// A fleet read one report at a time: [`FleetReader::add`] each report's
/// [`Digest`] (made on any thread), then [`FleetReader::finish`].
pub struct FleetReader {
    fleet: Fleet,
    as_of: DateTime<FixedOffset>,
    options: FleetOptions,
    names: HashSet<String>,
    drift: drift::DriftTally,
    metrics: outliers::MetricTally,
}

impl FleetReader {
    /// A fleet of no report yet, with `layer_order` the layers the caller
    /// knows, bottom-up; reports' ages are counted to `as_of`.
    pub fn new(layer_order: &[&str], as_of: DateTime<FixedOffset>, options: FleetOptions) -> Self {
        FleetReader {
            fleet: Fleet {
                as_of: as_of.to_rfc3339_opts(SecondsFormat::Secs, true),
                layers: layer_order.iter().map(|l| l.to_string()).collect(),
                ..Fleet::default()
            },
            as_of,
            options,
            names: HashSet::new(),
            drift: drift::DriftTally::default(),
            metrics: outliers::MetricTally::default(),
        }
    }

    /// The time reports' ages are counted to, for [`digest`].
    pub fn as_of(&self) -> DateTime<FixedOffset> {
        self.as_of
    }

    /// Adds the next report: its digest, or why it was not read (listed in
    /// [`Fleet::not_read`], naming its file).
    pub fn add(&mut self, file: String, report: Result<Digest, saved_report::NotRead>) {
        let digest = match report {
            Ok(d) => d,
            Err(saved_report::NotRead(why)) => {
                self.fleet.not_read.push(NotRead { file, why });
                return;
            }
        };
        for layer in digest.layers {
            if !self.fleet.layers.contains(&layer) {
                self.fleet.layers.push(layer);
            }
        }
        let mut node = digest.node;
        // Two reports of one host name (a node run twice, copied
        // fixtures) stay apart by their files.
        if !self.names.insert(node.node.clone()) {
            node.node = format!("{} ({file})", node.node);
            self.names.insert(node.node.clone());
        }
        if let Some(code) = node.code.as_ref().filter(|_| !node.passed) {
            *self.fleet.codes.entry(code.clone()).or_default() += 1;
        }
        let index = self.fleet.nodes.len() as u32;
        self.drift.add(digest.fingerprint);
        self.metrics.add(index, node.passed, digest.samples);
        self.fleet.nodes.push(node);
    }

    /// The fleet: its drift and outliers found, the failed nodes first.
    pub fn finish(self) -> Fleet {
        let mut fleet = self.fleet;
        let names: Vec<String> = fleet.nodes.iter().map(|n| n.node.clone()).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let (drift, drifting) = self.drift.finish(&names, &self.options.mixed);
        let (metrics, outlying) = self.metrics.finish(&names, &self.options.rule);
        for ((node, d), o) in fleet.nodes.iter_mut().zip(drifting).zip(outlying) {
            node.drift = d;
            node.outliers = o;
        }
        fleet.drift = drift;
        fleet.metrics = metrics;
        // A layer no node has a cell in (one beside the stack that applied
        // nowhere, one no tier run reached) is no column.
        let nodes = &fleet.nodes;
        fleet
            .layers
            .retain(|l| nodes.iter().any(|n| n.layers.contains_key(l)));
        // What needs a person first: a stable sort keeps the given order
        // within each group.
        fleet.nodes.sort_by_key(|n| match n.standing() {
            "failed" => 0,
            "warned" => 1,
            _ => 2,
        });
        fleet
    }
}

/// A report given to the fleet: its file and its digest, or why it could
/// not be read.
pub type Input = (String, Result<Digest, saved_report::NotRead>);

impl Fleet {
    /// Reads `reports` (each a file and its digest, or why it was not
    /// read) as [`FleetReader`] does, in one call.
    pub fn read(
        reports: impl IntoIterator<Item = Input>,
        layer_order: &[&str],
        as_of: DateTime<FixedOffset>,
        options: FleetOptions,
    ) -> Fleet {
        let mut reader = FleetReader::new(layer_order, as_of, options);
        for (file, report) in reports {
            reader.add(file, report);
        }
        reader.finish()
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
            .filter(|n| n.standing() == "warned")
            .count()
    }

    /// The nodes that passed (with or without warnings), by name: a list
    /// for `sbatch --nodelist`.
    pub fn passing(&self) -> impl Iterator<Item = &str> {
        self.nodes
            .iter()
            .filter(|n| n.passed)
            .map(|n| n.node.as_str())
    }

    /// The nodes not to run on, by name, for `srun --exclude`: those that
    /// failed, and those whose report was not read (named by the file's
    /// stem, as `rocgate run --json NODE.json` names it), since they were
    /// not judged fit.
    pub fn failing(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .nodes
            .iter()
            .filter(|n| !n.passed)
            .map(|n| n.node.clone())
            .collect();
        out.extend(self.not_read.iter().map(|r| {
            std::path::Path::new(&r.file)
                .file_stem()
                .map_or_else(|| r.file.clone(), |s| s.to_string_lossy().into_owned())
        }));
        out
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

    /// JSON: `{"as_of", "nodes": [...], "layers": [...], "codes": {...}, "drain":
    /// [...], "passing", "failing", "drift", "metrics", "since", "not_read":
    /// [{"file", "why"}]}` ([`FleetJson`]).
    pub fn json(&self) -> Result<String, String> {
        serde_json::to_string_pretty(&FleetJson {
            as_of: &self.as_of,
            nodes: &self.nodes,
            layers: &self.layers,
            codes: &self.codes,
            drain: self.to_drain().map(|n| n.node.as_str()).collect(),
            passing: self.passing().collect(),
            failing: self.failing(),
            drift: &self.drift,
            metrics: &self.metrics,
            since: self.since.as_ref(),
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
    /// The nodes that passed, by name (`sbatch --nodelist`).
    pub passing: Vec<&'a str>,
    /// The nodes that failed or whose report was not read (`srun
    /// --exclude`).
    pub failing: Vec<String>,
    /// What nodes run that most of the fleet does not.
    pub drift: &'a Drift,
    /// Every compared metric across the fleet, with its outliers.
    pub metrics: &'a [MetricSpread],
    /// What changed since the previous fleet run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<&'a FleetDiff>,
    /// The reports not read, and why.
    pub not_read: &'a [NotRead],
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::KEYS;
    use serde_json::{Value, json};

    const TERMS: FleetTerms = FleetTerms {
        layers: &[],
        keys: KEYS,
        model: "product",
        model_fallback: "gfx_target",
        partition: "partition",
        node_components: &["rocm", "kernel"],
    };

    type Doc = (String, Result<Value, saved_report::NotRead>);

    /// The reports, each digested from its JSON as the front end's reader
    /// does from its bytes.
    fn read_fleet(reports: Vec<Doc>, layers: &[&str], as_of: DateTime<FixedOffset>) -> Fleet {
        let inputs = reports.into_iter().map(|(file, doc)| {
            let digest = doc.and_then(|d| {
                let bytes = serde_json::to_vec(&d).unwrap();
                digest(&file, &bytes, &TERMS, as_of)
            });
            (file, digest)
        });
        Fleet::read(inputs, layers, as_of, FleetOptions::default())
    }

    fn as_of() -> DateTime<FixedOffset> {
        DateTime::parse_from_rfc3339("2026-12-01T12:00:00Z").unwrap()
    }

    fn report(host: &str, results: serde_json::Value, first: Option<&str>) -> Doc {
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
        let fleet = read_fleet(reports.to_vec(), &["pci", "firmware", "kfd"], as_of());
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
        let fleet = read_fleet(vec![("n05.json".into(), Ok(doc.clone()))], &[], as_of());
        assert_eq!(fleet.nodes[0].gpu_count(), "16 (2 devices)");
        // A GPU without a serial (its init failed) is not a partition.
        let mut unnamed = doc.clone();
        unnamed["scopes"][15]["properties"] = json!({});
        unnamed["scopes"][7]["properties"] = json!({});
        unnamed["scopes"] = json!([unnamed["scopes"][7], unnamed["scopes"][15], {"scope": "gpu1", "properties": {"unique_id": "S9"}}]);
        let fleet = read_fleet(vec![("n05.json".into(), Ok(unnamed))], &[], as_of());
        assert_eq!(fleet.nodes[0].gpu_count(), "3");
        // A report that does not say when it ran has no age, not a fresh one.
        doc["started_at"] = json!("yesterday");
        let fleet = read_fleet(vec![("n05.json".into(), Ok(doc))], &[], as_of());
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
        let fleet = read_fleet(
            vec![report("n02", json!([slow, waived]), Some("pci"))],
            &["pci", "kfd"],
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
        let fleet = read_fleet(vec![("n03.json".into(), Ok(decided))], &[], as_of());
        assert!(fleet.nodes[0].drain);
    }

    #[test]
    fn a_file_that_is_not_a_report_is_named_and_the_others_are_read() {
        let fleet = read_fleet(
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
        let fleet = read_fleet(
            vec![("n04.json".into(), Ok(doc.clone()))],
            &["kfd"],
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
        let fleet = read_fleet(vec![("n04.json".into(), Ok(doc))], &["kfd"], as_of());
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
        let fleet = read_fleet(
            vec![report("n05", json!([r]), Some("rccl"))],
            &["rccl"],
            as_of(),
        );
        assert_eq!(fleet.nodes[0].gpu(), "gpu3 (0000:65:00.0)");
    }
}
