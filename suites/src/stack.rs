//! The ROCm stack rocgate validates, bottom-up. The engine knows a layer
//! only as a name and a rank; this is where the layers get their meaning
//! and their order, which gating, diagnoses and reports follow.

use rocgate_harness::compare::Terms;
use rocgate_harness::{Layer, MetricKind};

/// The host settings the GPUs depend on (IOMMU, NUMA balancing, huge
/// pages): it never gates, and sits below everything.
pub const SYSTEM: Layer = Layer::new("system", 0);
/// Silicon on the PCI bus.
pub const PCI: Layer = Layer::new("pci", 1);
/// Microcode loaded by amdgpu at probe.
pub const FIRMWARE: Layer = Layer::new("firmware", 2);
/// The DRM kernel driver.
pub const AMDGPU: Layer = Layer::new("amdgpu", 3);
/// The compute kernel driver (amdkfd) and its topology.
pub const KFD: Layer = Layer::new("kfd", 4);
/// Whether the node's versions (firmware, driver, kernel, OS, ROCm) are a
/// supported combination.
pub const COMPAT: Layer = Layer::new("compat", 5);
/// The ROCr/HSA runtime.
pub const HSA: Layer = Layer::new("hsa", 6);
/// The HIP runtime.
pub const HIP: Layer = Layer::new("hip", 7);
/// rocBLAS.
pub const ROCBLAS: Layer = Layer::new("rocblas", 8);
/// MIOpen.
pub const MIOPEN: Layer = Layer::new("miopen", 9);
/// RCCL collectives.
pub const RCCL: Layer = Layer::new("rccl", 10);
/// The RDMA network cards beside the GPUs (ports, firmware, PCIe links,
/// GPU-to-NIC affinity). It stands beside the stack: no GPU layer gates it
/// and it gates none, and ranked last, a node's first failing layer is a
/// GPU layer's whenever one fails.
pub const NETWORK: Layer = Layer::beside("network", 11);

/// Every layer, bottom-up: what turns a layer named in a saved report back
/// into a [`Layer`] ([`rocgate_harness::SavedResult::resolve`]).
pub const LAYERS: &[Layer] = &[
    SYSTEM, PCI, FIRMWARE, AMDGPU, KFD, COMPAT, HSA, HIP, ROCBLAS, MIOPEN, RCCL, NETWORK,
];

/// The properties that say who the node and its GPUs are, as the suites
/// write them into every report: the engine matches GPUs across runs
/// (`compare`), names nodes (`fleet`, JUnit) and labels series by them.
pub const IDENTITY: rocgate_harness::document::IdentityKeys =
    rocgate_harness::document::IdentityKeys {
        host: "hostname",
        address: "pci_address",
        serial: "unique_id",
    };

/// What the suites' reports mean by their names, for the fleet: a GPU's
/// model is its `product` (else its gfx target), its partition mode the
/// `partition` property ([`crate::context::NodeContext::scope_infos`]), and
/// a node's fingerprint holds these versions (the `versions.node` a
/// report carries): what a fleet upgrades and expects the same everywhere.
pub const FLEET: rocgate_harness::fleet::FleetTerms = rocgate_harness::fleet::FleetTerms {
    layers: LAYERS,
    keys: IDENTITY,
    model: "product",
    model_fallback: "gfx_target",
    partition: "partition",
    node_components: &[
        "rocm",
        "amdgpu_release",
        "amdgpu",
        "kernel",
        "os",
        "hip_runtime_version",
        "rocblas_version",
        "miopen_version",
        "rccl_version",
        "nic_firmware",
    ],
};

/// What the suites' reports mean by their names, for comparing two runs.
pub const TERMS: Terms = Terms {
    identity: IDENTITY,
    kind_of_unit,
};

/// The kind of a metric from a report written before metrics said their
/// kind, from the unit the suites gave it: times are durations, `errors`
/// and `pages` counters, rates (`.../s`) throughputs; anything else (a
/// count, a temperature) is not compared.
pub fn kind_of_unit(unit: &str) -> MetricKind {
    match unit {
        "ms" | "s" | "us" | "ns" => MetricKind::Duration,
        "errors" | "pages" => MetricKind::Counter,
        "°C" | "W" => MetricKind::Reading,
        u if u.ends_with("/s") => MetricKind::Throughput,
        _ => MetricKind::Count,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn units_of_older_reports_say_what_their_metrics_measure() {
        for (unit, kind) in [
            ("ms", MetricKind::Duration),
            ("GB/s", MetricKind::Throughput),
            ("TFLOP/s", MetricKind::Throughput),
            ("errors", MetricKind::Counter),
            ("pages", MetricKind::Counter),
            ("°C", MetricKind::Reading),
            ("count", MetricKind::Count),
        ] {
            assert_eq!(kind_of_unit(unit), kind, "{unit}");
        }
    }

    #[test]
    fn layers_are_listed_bottom_up_with_names_and_ranks_of_their_own() {
        for (i, l) in LAYERS.iter().enumerate() {
            assert_eq!(usize::from(l.rank()), i, "{l}");
        }
        let mut sorted = LAYERS.to_vec();
        sorted.sort();
        assert_eq!(sorted, LAYERS);
        let names: BTreeSet<&str> = LAYERS.iter().map(|l| l.as_str()).collect();
        assert_eq!(names.len(), LAYERS.len());
        assert_eq!(
            LAYERS.iter().map(|l| l.as_str()).collect::<Vec<_>>(),
            [
                "system", "pci", "firmware", "amdgpu", "kfd", "compat", "hsa", "hip", "rocblas",
                "miopen", "rccl", "network"
            ]
        );
    }

    #[test]
    fn every_check_belongs_to_a_layer_of_the_stack() {
        for c in crate::registry() {
            assert!(LAYERS.contains(&c.layer), "{}: {}", c.id, c.layer);
        }
        for code in crate::findings::codes::ALL {
            for l in code.layers {
                assert!(LAYERS.contains(l), "{}: {l}", code.code);
            }
        }
    }
}
