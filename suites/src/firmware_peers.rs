//! Firmware judged against the node's other GPUs: GPUs of one model that
//! run different firmware or VBIOS versions are a node half-upgraded (a
//! flash that stopped part way, a GPU swapped in from another batch).
//!
//! Each GPU's `firmware::versions` reads its own files, in its own check,
//! so a wedged GPU's file times out there and nowhere else; this pass only
//! compares what those checks learned (their `fw_*` and `vbios` facts),
//! after the run. The odd GPU's own `versions` result becomes a warning
//! naming its version and the one the others run: one cell of the ladder,
//! on the GPU that differs. A device's partitions share its firmware and
//! count once.

use crate::findings::codes;
use rocgate_harness::{CheckResult, Status};
use rocgate_node::facts::gpus::Gpu;
use std::collections::BTreeMap;

/// The check whose facts are compared.
const VERSIONS: &str = "firmware::versions";

/// Marks the `firmware::versions` results of GPUs whose firmware or VBIOS
/// differs from what most GPUs of their model run.
pub fn compare_with_peers(results: &mut [CheckResult], gpus: &[Gpu]) {
    // Model -> device address -> (the index of its first passing result,
    // its versions).
    let mut models: BTreeMap<String, BTreeMap<String, BTreeMap<String, String>>> = BTreeMap::new();
    for r in results
        .iter()
        .filter(|r| r.check == VERSIONS && r.status == Status::Pass)
    {
        let Some(gpu) = r
            .scope
            .gpu()
            .and_then(|g| gpus.iter().find(|x| x.index == g))
        else {
            continue;
        };
        let model = gpu
            .product
            .clone()
            .or_else(|| gpu.device_id.map(|d| format!("device {d:04x}")))
            .unwrap_or_default();
        let versions: BTreeMap<String, String> = r
            .facts
            .iter()
            .filter(|(k, _)| k.starts_with("fw_") || *k == "vbios")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        models
            .entry(model)
            .or_default()
            .entry(gpu.pci_address.clone())
            .or_insert(versions);
    }
    // Device address -> what differs on it.
    let mut odd: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (model, devices) in models.iter().filter(|(_, d)| d.len() > 1) {
        let mut components: Vec<&String> = devices.values().flat_map(|v| v.keys()).collect();
        components.sort();
        components.dedup();
        for component in components {
            let mut by_version: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
            for (address, versions) in devices {
                if let Some(v) = versions.get(component) {
                    by_version.entry(v).or_default().push(address);
                }
            }
            // The version most of the model's GPUs run is the node's; of
            // a tie, the first in order.
            let Some(common) = by_version
                .iter()
                .max_by(|a, b| a.1.len().cmp(&b.1.len()).then(b.0.cmp(a.0)))
                .map(|(v, _)| *v)
            else {
                continue;
            };
            let name = component.trim_start_matches("fw_").to_uppercase();
            for (version, addresses) in by_version.iter().filter(|(v, _)| **v != common) {
                for address in addresses {
                    odd.entry(address.to_string()).or_default().push(format!(
                        "{name} {version} where the other {model} GPUs run {common}"
                    ));
                }
            }
        }
    }
    for r in results
        .iter_mut()
        .filter(|r| r.check == VERSIONS && r.status == Status::Pass)
    {
        let Some(gpu) = r
            .scope
            .gpu()
            .and_then(|g| gpus.iter().find(|x| x.index == g))
        else {
            continue;
        };
        let Some(differs) = odd.get(&gpu.pci_address) else {
            continue;
        };
        let message = format!(
            "{} ({}) runs other firmware than the node's other GPUs of its model: {}",
            r.scope.label(),
            gpu.pci_address,
            differs.join("; ")
        );
        r.status = Status::Warn;
        r.message = message.clone();
        r.finding = Some(codes::FIRMWARE_DIFFERS_WITHIN_NODE.finding(message));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocgate_harness::Scope;

    fn versions(gpu: u32, mec: &str, vbios: &str) -> CheckResult {
        let mut r = CheckResult::new(
            format!("gpu{gpu}.firmware.versions"),
            VERSIONS.into(),
            crate::stack::FIRMWARE,
            Scope::Gpu(gpu),
            Status::Pass,
        );
        r.facts.insert("fw_mec".into(), mec.into());
        r.facts.insert("vbios".into(), vbios.into());
        r
    }

    fn gpus(n: u32, per_device: u32) -> Vec<Gpu> {
        let facts = crate::layers::fixture::node("mi300x-8")
            .ctx
            .facts
            .gpus
            .clone();
        (0..n)
            .map(|i| Gpu {
                index: i,
                pci_address: facts[(i / per_device) as usize].pci_address.clone(),
                ..facts[(i / per_device) as usize].clone()
            })
            .collect()
    }

    #[test]
    fn the_gpu_on_other_firmware_warns_and_names_both_versions() {
        let mut rs: Vec<CheckResult> = (0..8)
            .map(|g| versions(g, if g == 3 { "0x99" } else { "0x9a" }, "113-M3000100-102"))
            .collect();
        compare_with_peers(&mut rs, &gpus(8, 1));
        let warned: Vec<&CheckResult> = rs.iter().filter(|r| r.status == Status::Warn).collect();
        assert_eq!(warned.len(), 1);
        assert_eq!(warned[0].scope, Scope::Gpu(3));
        let f = warned[0].finding.as_ref().unwrap();
        assert_eq!(f.code, "firmware-differs-within-node");
        assert!(
            f.message
                .contains("MEC 0x99 where the other AMD Instinct MI300X GPUs run 0x9a"),
            "{}",
            f.message
        );
    }

    #[test]
    fn partitions_count_once_and_agreeing_gpus_pass() {
        // Two devices of 4 partitions each, one device on another VBIOS:
        // a tie, so the first version in order is the node's and the other
        // device's 4 partitions each say so.
        let mut rs: Vec<CheckResult> = (0..8)
            .map(|g| versions(g, "0x9a", if g < 4 { "A" } else { "B" }))
            .collect();
        compare_with_peers(&mut rs, &gpus(8, 4));
        let warned: Vec<Scope> = rs
            .iter()
            .filter(|r| r.status == Status::Warn)
            .map(|r| r.scope)
            .collect();
        assert_eq!(warned, (4..8).map(Scope::Gpu).collect::<Vec<_>>());
        let mut same: Vec<CheckResult> = (0..8).map(|g| versions(g, "0x9a", "A")).collect();
        compare_with_peers(&mut same, &gpus(8, 1));
        assert!(
            same.iter()
                .all(|r| r.status == Status::Pass && r.finding.is_none())
        );
        // A GPU whose versions were not read is compared with nothing.
        let mut one = vec![versions(0, "0x1", "A")];
        compare_with_peers(&mut one, &gpus(1, 1));
        assert_eq!(one[0].status, Status::Pass);
    }
}
