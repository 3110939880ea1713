//! The list of every check rocgate knows, layer by layer in the stack's
//! order ([`crate::stack`]).

use super::{amdgpu, compat, firmware, hip, hsa, kfd, miopen, network, pci, rccl, rocblas, system};
use crate::context::NodeContext;
use rocgate_harness::Check;

/// Every check rocgate knows, bottom-up; within a layer, checks that find
/// causes come before checks that find their symptoms.
pub fn registry() -> Vec<Check<NodeContext>> {
    let layers: [fn() -> Vec<Check<NodeContext>>; 12] = [
        system::checks,
        pci::checks,
        firmware::checks,
        amdgpu::checks,
        kfd::checks,
        compat::checks,
        hsa::checks,
        hip::checks,
        rocblas::checks,
        miopen::checks,
        rccl::checks,
        network::checks,
    ];
    layers.into_iter().flat_map(|checks| checks()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::fixture::node;

    #[test]
    fn every_runtime_check_skips_saying_why_when_the_runtime_cannot_run() {
        // A captured node without --rocm-path: the libraries are not run.
        let n = node("mi300x-8");
        for layer in [
            hsa::checks(),
            hip::checks(),
            rocblas::checks(),
            miopen::checks(),
            rccl::checks(),
        ] {
            n.assert_skip_without_runtime(&layer);
        }
    }

    #[test]
    fn each_layer_module_lists_only_its_layer_s_checks_in_the_stack_s_order() {
        let layers: Vec<_> = [
            system::checks(),
            pci::checks(),
            firmware::checks(),
            amdgpu::checks(),
            kfd::checks(),
            compat::checks(),
            hsa::checks(),
            hip::checks(),
            rocblas::checks(),
            miopen::checks(),
            rccl::checks(),
            network::checks(),
        ]
        .into_iter()
        .map(|checks| {
            let layer = checks[0].layer;
            assert!(checks.iter().all(|c| c.layer == layer), "{layer}");
            layer
        })
        .collect();
        assert_eq!(layers, crate::stack::LAYERS);
    }

    #[test]
    fn registry_plans_without_cycles_and_ids_match_layers() {
        let reg = registry();
        let plan = rocgate_harness::plan(&reg, &[0, 1], rocgate_harness::Tier::Extended).unwrap();
        assert!(!plan.instances.is_empty());
        for c in &reg {
            assert_eq!(c.id.split("::").next(), Some(c.layer.as_str()), "{}", c.id);
            assert!(!c.summary.is_empty(), "{}", c.id);
        }
    }
}
