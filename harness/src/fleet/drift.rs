//! Drift: what each node runs (its fingerprint) against what most of the
//! fleet runs, per component, naming the nodes that differ with both
//! values. A node that differs is a warning unless the site expects the
//! component mixed (a rolling upgrade).

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Serialize;
use std::collections::HashMap;

/// The fleet's fingerprints, gathered one node at a time: each distinct
/// component and value is kept once, each node as indices into them.
#[derive(Default)]
pub(super) struct DriftTally {
    components: Vec<String>,
    component_ids: HashMap<String, u32>,
    values: Vec<String>,
    value_ids: HashMap<String, u32>,
    /// Per component, how many nodes have each value.
    counts: Vec<HashMap<u32, u32>>,
    /// Per node (in the order added), its (component, value).
    nodes: Vec<Vec<(u32, u32)>>,
}

/// The id of `name` among `names` (its index), added when new: what a
/// fleet holds many times (a component, a metric's group, a GPU's label)
/// is kept once.
pub(super) fn intern<K: std::hash::Hash + Eq + Clone>(
    names: &mut Vec<K>,
    ids: &mut HashMap<K, u32>,
    name: K,
) -> u32 {
    if let Some(&id) = ids.get(&name) {
        return id;
    }
    let id = names.len() as u32;
    names.push(name.clone());
    ids.insert(name, id);
    id
}

impl DriftTally {
    /// Adds the next node's fingerprint.
    pub(super) fn add(&mut self, fingerprint: Vec<(String, String)>) {
        let mut node = Vec::with_capacity(fingerprint.len());
        for (component, value) in fingerprint {
            let c = intern(&mut self.components, &mut self.component_ids, component);
            let v = intern(&mut self.values, &mut self.value_ids, value);
            if self.counts.len() <= c as usize {
                self.counts.resize_with(c as usize + 1, HashMap::new);
            }
            *self.counts[c as usize].entry(v).or_default() += 1;
            node.push((c, v));
        }
        node.shrink_to_fit();
        self.nodes.push(node);
    }

    /// The drift: for every component with more than one value among the
    /// nodes that report it, the majority and the nodes that differ
    /// (`names` are the nodes' names, in the order they were added). Also
    /// returns, per node, the components in which it differs unexpectedly.
    pub(super) fn finish(self, names: &[&str], mixed: &Mixed) -> (Drift, Vec<Vec<String>>) {
        let mut per_node: Vec<Vec<String>> = vec![Vec::new(); self.nodes.len()];
        let majority: Vec<(u32, u32)> = self
            .counts
            .iter()
            .map(|counts| {
                // Most nodes; a tie goes to the value first in text order,
                // so the report is the same whatever order nodes came in.
                counts
                    .iter()
                    .map(|(&v, &n)| (v, n))
                    .max_by(|a, b| {
                        a.1.cmp(&b.1)
                            .then_with(|| self.values[b.0 as usize].cmp(&self.values[a.0 as usize]))
                    })
                    .unwrap_or((u32::MAX, 0))
            })
            .collect();
        let mut components: Vec<ComponentDrift> = Vec::new();
        let mut index: HashMap<u32, usize> = HashMap::new();
        for (n, node) in self.nodes.iter().enumerate() {
            for &(c, v) in node {
                let (top, _) = majority[c as usize];
                if v == top {
                    continue;
                }
                let name = &self.components[c as usize];
                let expected = mixed.expects(name);
                let at = *index.entry(c).or_insert_with(|| {
                    let counts = &self.counts[c as usize];
                    components.push(ComponentDrift {
                        component: name.clone(),
                        majority: self.values[top as usize].clone(),
                        majority_nodes: majority[c as usize].1 as usize,
                        nodes: counts.values().map(|&k| k as usize).sum(),
                        values: counts.len(),
                        expected,
                        differ: Vec::new(),
                    });
                    components.len() - 1
                });
                components[at].differ.push(NodeValue {
                    node: names.get(n).copied().unwrap_or("?").to_string(),
                    value: self.values[v as usize].clone(),
                });
                if !expected {
                    per_node[n].push(name.clone());
                }
            }
        }
        components.sort_by(|a, b| a.component.cmp(&b.component));
        let drift = Drift {
            components: self.components.len(),
            differing: components,
        };
        (drift, per_node)
    }
}

/// The components a site expects mixed across its fleet, as globs
/// (`rocm`, `* fw_*`): nodes that differ in them are listed, not warned of.
#[derive(Clone, Debug, Default)]
pub struct Mixed {
    set: Option<GlobSet>,
}

impl Mixed {
    /// From `patterns`; a pattern that is not a glob is an error naming it.
    pub fn new(patterns: &[String]) -> Result<Mixed, String> {
        if patterns.is_empty() {
            return Ok(Mixed::default());
        }
        let mut b = GlobSetBuilder::new();
        for p in patterns {
            b.add(Glob::new(p).map_err(|e| {
                format!("the mixed component {p:?} is not a glob ({e}): write a component name as the fleet report shows it, e.g. rocm or \"* vbios\"")
            })?);
        }
        b.build()
            .map(|set| Mixed { set: Some(set) })
            .map_err(|e| format!("failed to build the mixed components' globs: {e}"))
    }

    fn expects(&self, component: &str) -> bool {
        self.set.as_ref().is_some_and(|s| s.is_match(component))
    }
}

/// The fleet's drift.
#[derive(Clone, Debug, Default, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Drift {
    /// How many components were compared.
    pub components: usize,
    /// The components whose value is not the same on every node, by name.
    pub differing: Vec<ComponentDrift>,
}

impl Drift {
    /// The components whose differing nodes are warned of (not expected
    /// mixed).
    pub fn unexpected(&self) -> impl Iterator<Item = &ComponentDrift> {
        self.differing.iter().filter(|c| !c.expected)
    }
}

/// One component that differs across the fleet.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ComponentDrift {
    /// What it is (`rocm`, `AMD Instinct MI300X fw_smc`).
    pub component: String,
    /// The value most nodes have.
    pub majority: String,
    /// How many nodes have it.
    pub majority_nodes: usize,
    /// How many nodes report the component at all.
    pub nodes: usize,
    /// How many distinct values there are.
    pub values: usize,
    /// Whether the site expects it mixed (its nodes are not warned of).
    pub expected: bool,
    /// The nodes that differ from the majority, with their value.
    pub differ: Vec<NodeValue>,
}

/// A node and its value.
#[derive(Clone, Debug, PartialEq, Serialize, schemars::JsonSchema)]
pub struct NodeValue {
    /// The node.
    pub node: String,
    /// Its value.
    pub value: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn the_node_that_differs_is_named_with_both_values_and_an_expected_mix_is_not_warned_of() {
        let mut t = DriftTally::default();
        for i in 0..5 {
            let fw = if i == 3 { "0x00553f00" } else { "0x00553e00" };
            let rocm = if i < 2 { "7.1.1" } else { "7.0.2" };
            t.add(fp(&[
                ("rocm", rocm),
                ("MI300X fw_smc", fw),
                ("kernel", "6.8"),
            ]));
        }
        // A node that does not report a component is not drift.
        t.add(fp(&[("kernel", "6.8")]));
        let mixed = Mixed::new(&["roc*".to_string()]).unwrap();
        let names = ["n0", "n1", "n2", "n3", "n4", "n5"];
        let (drift, per_node) = t.finish(&names, &mixed);
        assert_eq!(drift.components, 3);
        let names: Vec<&str> = drift
            .differing
            .iter()
            .map(|c| c.component.as_str())
            .collect();
        assert_eq!(names, ["MI300X fw_smc", "rocm"]);
        let fw = &drift.differing[0];
        assert_eq!(
            (fw.majority.as_str(), fw.majority_nodes, fw.nodes),
            ("0x00553e00", 4, 5)
        );
        assert_eq!(
            fw.differ,
            [NodeValue {
                node: "n3".into(),
                value: "0x00553f00".into()
            }]
        );
        assert!(!fw.expected && drift.differing[1].expected);
        assert_eq!(drift.unexpected().count(), 1);
        assert_eq!(per_node[3], ["MI300X fw_smc"]);
        assert!(per_node[0].is_empty(), "an expected mix warns no node");
        assert!(Mixed::new(&["[".to_string()]).is_err());
    }

    #[test]
    fn a_tie_goes_to_the_same_value_whatever_the_order() {
        for order in [["a", "b"], ["b", "a"]] {
            let mut t = DriftTally::default();
            for v in order {
                t.add(fp(&[("os", v)]));
            }
            let (drift, _) = t.finish(&["x", "y"], &Mixed::default());
            assert_eq!(drift.differing[0].majority, "a");
        }
    }
}
