//! Many scopes said once: GPU ranges (`gpu0..gpu7`) and versions that
//! agree across GPUs folded into one row, so an 8-GPU node (or 64 CPX
//! partitions) reads as one line where the GPUs agree and stands out where
//! one does not. The GitHub summary and the HTML page fold alike.

use rocgate_harness::Scope;
use std::collections::BTreeMap;

/// One row of the folded versions table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionRow {
    /// Who has this version: `node`, `gpu3`, `gpu0..gpu7 (all 8)`.
    pub scopes: String,
    /// The component (`vbios`, `firmware.smc`).
    pub component: String,
    /// Its version.
    pub version: String,
    /// Whether the GPUs disagree on this component (this row is one of
    /// several values).
    pub differs: bool,
}

/// Scopes as few words as they can be: `node, gpu0..gpu3, gpu5`.
pub fn scope_ranges(scopes: &[Scope]) -> String {
    let mut gpus: Vec<u32> = scopes.iter().filter_map(|s| s.gpu()).collect();
    gpus.sort_unstable();
    gpus.dedup();
    let mut parts: Vec<String> = Vec::new();
    if scopes.contains(&Scope::Node) {
        parts.push("node".into());
    }
    let mut i = 0;
    while i < gpus.len() {
        let mut j = i;
        while j + 1 < gpus.len() && gpus[j + 1] == gpus[j] + 1 {
            j += 1;
        }
        parts.push(match j - i {
            0 => format!("gpu{}", gpus[i]),
            1 => format!("gpu{}, gpu{}", gpus[i], gpus[j]),
            _ => format!("gpu{}..gpu{}", gpus[i], gpus[j]),
        });
        i = j + 1;
    }
    parts.join(", ")
}

/// The versions table's rows: the node's components as they are; each GPU
/// component once for the GPUs that agree (`gpu0..gpu7 (all 8)`), and,
/// when they do not, a row per value with `differs` set.
pub fn folded_versions(versions: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<VersionRow> {
    let mut rows = Vec::new();
    let mut per_component: BTreeMap<&str, BTreeMap<&str, Vec<Scope>>> = BTreeMap::new();
    let mut gpu_count = 0;
    for (scope, components) in versions {
        let Some(gpu) = scope
            .strip_prefix("gpu")
            .and_then(|g| g.parse::<u32>().ok())
        else {
            for (k, v) in components {
                rows.push(VersionRow {
                    scopes: scope.clone(),
                    component: k.clone(),
                    version: v.clone(),
                    differs: false,
                });
            }
            continue;
        };
        gpu_count += 1;
        for (k, v) in components {
            per_component
                .entry(k)
                .or_default()
                .entry(v)
                .or_default()
                .push(Scope::Gpu(gpu));
        }
    }
    for (component, values) in per_component {
        let differs = values.len() > 1;
        for (value, scopes) in values {
            let who = if !differs && scopes.len() == gpu_count && gpu_count > 1 {
                format!("{} (all {gpu_count})", scope_ranges(&scopes))
            } else {
                scope_ranges(&scopes)
            };
            rows.push(VersionRow {
                scopes: who,
                component: component.to_string(),
                version: value.to_string(),
                differs,
            });
        }
    }
    rows
}
