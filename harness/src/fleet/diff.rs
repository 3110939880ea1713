//! The fleet against its previous run (`fleet report --previous DIR`):
//! the nodes that newly fail, recover, drift or became outliers, and the
//! nodes that came and went.

use super::{Fleet, FleetNode};
use serde::Serialize;
use std::collections::HashMap;

/// What changed between two fleet runs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct FleetDiff {
    /// The time the previous fleet's ages were counted to.
    pub previous_as_of: String,
    /// How many nodes the previous fleet had.
    pub previous_nodes: usize,
    /// Nodes that fail now and passed then (or were not there).
    pub newly_failing: Vec<Change>,
    /// Nodes that pass now and failed then.
    pub recovered: Vec<Change>,
    /// Nodes that differ from the fleet now in a component they did not.
    pub newly_drifting: Vec<Change>,
    /// Nodes that are outliers now in a metric they were not.
    pub new_outliers: Vec<Change>,
    /// Nodes the previous fleet had and this one has not.
    pub gone: Vec<String>,
    /// Nodes this fleet has and the previous one had not.
    pub new: Vec<String>,
}

/// One node's change.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Change {
    /// The node.
    pub node: String,
    /// What it is now (a finding code, `passed`, a component, a metric).
    pub now: String,
    /// What it was (`passed`, a code, `not in the previous fleet`).
    pub before: String,
}

fn standing(n: &FleetNode) -> String {
    if n.passed {
        "passed".to_string()
    } else {
        n.code.clone().unwrap_or_else(|| "failed".to_string())
    }
}

impl FleetDiff {
    /// `now` against `previous`, node by node (by name).
    pub fn between(previous: &Fleet, now: &Fleet) -> FleetDiff {
        let before: HashMap<&str, &FleetNode> = previous
            .nodes
            .iter()
            .map(|n| (n.node.as_str(), n))
            .collect();
        let mut diff = FleetDiff {
            previous_as_of: previous.as_of.clone(),
            previous_nodes: previous.nodes.len(),
            ..FleetDiff::default()
        };
        let change = |n: &FleetNode, now: String, before: String| Change {
            node: n.node.clone(),
            now,
            before,
        };
        for n in &now.nodes {
            let Some(b) = before.get(n.node.as_str()) else {
                diff.new.push(n.node.clone());
                if !n.passed {
                    let c = change(n, standing(n), "not in the previous fleet".into());
                    diff.newly_failing.push(c);
                }
                continue;
            };
            match (b.passed, n.passed) {
                (true, false) => diff.newly_failing.push(change(n, standing(n), standing(b))),
                (false, true) => diff.recovered.push(change(n, standing(n), standing(b))),
                _ => {}
            }
            for d in n.drift.iter().filter(|d| !b.drift.contains(d)) {
                diff.newly_drifting
                    .push(change(n, d.clone(), "as the fleet".into()));
            }
            for o in n.outliers.iter().filter(|o| !b.outliers.contains(o)) {
                diff.new_outliers
                    .push(change(n, o.clone(), "within the fleet".into()));
            }
        }
        let here: std::collections::HashSet<&str> =
            now.nodes.iter().map(|n| n.node.as_str()).collect();
        diff.gone = previous
            .nodes
            .iter()
            .filter(|n| !here.contains(n.node.as_str()))
            .map(|n| n.node.clone())
            .collect();
        diff
    }

    /// Whether anything changed.
    pub fn is_empty(&self) -> bool {
        self.newly_failing.is_empty()
            && self.recovered.is_empty()
            && self.newly_drifting.is_empty()
            && self.new_outliers.is_empty()
            && self.gone.is_empty()
            && self.new.is_empty()
    }
}
