//! The planner: expands checks over scopes, adds gating edges and orders the
//! instances so that every dependency comes first.

use crate::check::Check;
use crate::model::{Scope, ScopeKind, Tier};
use std::collections::{BTreeSet, HashMap};
use thiserror::Error;

/// One check in one scope, with the instances it waits for.
#[derive(Clone, Debug)]
pub struct Instance {
    /// Index of the check in the registry.
    pub check: usize,
    /// Where it runs.
    pub scope: Scope,
    /// `<scope>.<layer>.<name>`.
    pub test_id: String,
    /// Instances (indices into `Plan::instances`) that gate this one.
    pub deps: Vec<usize>,
}

/// An ordered set of check instances over a registry.
pub struct Plan<'r, C> {
    /// The checks the instances refer to.
    pub registry: &'r [Check<C>],
    /// Instances in an order where every dependency precedes its dependents.
    pub instances: Vec<Instance>,
    /// The GPU scopes in the plan.
    pub gpus: Vec<u32>,
    /// The tier planned.
    pub tier: Tier,
}

impl<C> Plan<'_, C> {
    /// The check an instance runs.
    pub fn check(&self, instance: &Instance) -> &Check<C> {
        &self.registry[instance.check]
    }
}

/// Why a registry cannot be planned (a defect in the suites, not user input).
#[derive(Debug, Error, PartialEq, Eq)]
pub enum PlanError {
    /// A check names a dependency that is not in the registry.
    #[error("check {check} depends on {dep}, which is not a registered check")]
    UnknownDependency {
        /// The declaring check.
        check: String,
        /// The missing id.
        dep: String,
    },
    /// Two checks share an id.
    #[error("two checks are registered as {0}")]
    DuplicateId(String),
    /// The dependencies form a cycle.
    #[error("checks depend on each other in a cycle: {0}")]
    Cycle(String),
}

/// Plans `registry` at `tier` over the GPU scopes `gpus`.
pub fn plan<'r, C>(
    registry: &'r [Check<C>],
    gpus: &[u32],
    tier: Tier,
) -> Result<Plan<'r, C>, PlanError> {
    let mut by_id: HashMap<&str, usize> = HashMap::new();
    for (i, c) in registry.iter().enumerate() {
        if by_id.insert(c.id, i).is_some() {
            return Err(PlanError::DuplicateId(c.id.to_string()));
        }
    }
    for c in registry {
        for dep in c.deps {
            if !by_id.contains_key(dep) {
                return Err(PlanError::UnknownDependency {
                    check: c.id.to_string(),
                    dep: (*dep).to_string(),
                });
            }
        }
    }

    // Expand: node instances first, then each GPU's; registry order within.
    let mut instances = Vec::new();
    let scopes: Vec<Scope> = std::iter::once(Scope::Node)
        .chain(gpus.iter().map(|&g| Scope::Gpu(g)))
        .collect();
    for &scope in &scopes {
        for (ci, c) in registry.iter().enumerate() {
            let applies = matches!(
                (c.scope, scope),
                (ScopeKind::Node, Scope::Node) | (ScopeKind::PerGpu, Scope::Gpu(_))
            );
            if applies && c.tier <= tier {
                instances.push(Instance {
                    check: ci,
                    scope,
                    test_id: c.test_id(scope),
                    deps: Vec::new(),
                });
            }
        }
    }
    let index: HashMap<(usize, Scope), usize> = instances
        .iter()
        .enumerate()
        .map(|(i, inst)| ((inst.check, inst.scope), i))
        .collect();

    for i in 0..instances.len() {
        let (ci, scope) = (instances[i].check, instances[i].scope);
        let me = &registry[ci];
        let mut deps = BTreeSet::new();
        // Implicit gating: lower-layer gating checks of the same scope and of the node.
        for (j, other) in instances.iter().enumerate() {
            let oc = &registry[other.check];
            if oc.gates
                && oc.layer < me.layer
                && (other.scope == scope || other.scope == Scope::Node)
            {
                deps.insert(j);
            }
        }
        // Explicit dependencies, resolved to the node, the same GPU, or (for a
        // node check depending on a per-GPU check) every GPU.
        for dep in me.deps {
            let di = by_id[dep];
            match (registry[di].scope, scope) {
                (ScopeKind::Node, _) => deps.extend(index.get(&(di, Scope::Node))),
                (ScopeKind::PerGpu, Scope::Gpu(_)) => deps.extend(index.get(&(di, scope))),
                (ScopeKind::PerGpu, Scope::Node) => {
                    deps.extend(gpus.iter().filter_map(|&g| index.get(&(di, Scope::Gpu(g)))));
                }
            }
        }
        deps.remove(&i);
        instances[i].deps = deps.into_iter().collect();
    }

    let order = topological_order(&instances)?;
    // Renumber dependencies into the new order.
    let mut new_pos = vec![0; instances.len()];
    for (pos, &old) in order.iter().enumerate() {
        new_pos[old] = pos;
    }
    let ordered = order
        .iter()
        .map(|&old| {
            let mut inst = instances[old].clone();
            inst.deps = inst.deps.iter().map(|&d| new_pos[d]).collect();
            inst.deps.sort_unstable();
            inst
        })
        .collect();
    Ok(Plan {
        registry,
        instances: ordered,
        gpus: gpus.to_vec(),
        tier,
    })
}

/// Kahn's algorithm, taking the lowest original index first so that the order
/// stays close to registry order (node first, then GPUs).
fn topological_order(instances: &[Instance]) -> Result<Vec<usize>, PlanError> {
    let n = instances.len();
    let mut indegree = vec![0usize; n];
    let mut dependents = vec![Vec::new(); n];
    for (i, inst) in instances.iter().enumerate() {
        indegree[i] = inst.deps.len();
        for &d in &inst.deps {
            dependents[d].push(i);
        }
    }
    let mut ready: BTreeSet<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &d in &dependents[i] {
            indegree[d] -= 1;
            if indegree[d] == 0 {
                ready.insert(d);
            }
        }
    }
    if order.len() < n {
        let stuck: Vec<_> = (0..n)
            .filter(|&i| indegree[i] > 0)
            .take(6)
            .map(|i| instances[i].test_id.as_str())
            .collect();
        return Err(PlanError::Cycle(stuck.join(", ")));
    }
    Ok(order)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Layer;
    use crate::verdict::Verdict;
    use std::time::Duration;

    fn check(
        id: &'static str,
        layer: Layer,
        scope: ScopeKind,
        deps: &'static [&'static str],
    ) -> Check<()> {
        Check {
            id,
            layer,
            scope,
            tier: Tier::Quick,
            deps,
            gates: true,
            timeout: Duration::from_secs(1),
            isolated: false,
            summary: "",
            run: |_, _| Ok(Verdict::pass("ok")),
        }
    }

    fn ids(p: &Plan<'_, ()>, deps: &[usize]) -> Vec<String> {
        deps.iter()
            .map(|&d| p.instances[d].test_id.clone())
            .collect()
    }

    #[test]
    fn per_gpu_checks_wait_for_lower_node_and_same_gpu_checks() {
        let reg = vec![
            check("pci::present", Layer::Pci, ScopeKind::Node, &[]),
            check("amdgpu::module", Layer::Amdgpu, ScopeKind::Node, &[]),
            check(
                "firmware::versions",
                Layer::Firmware,
                ScopeKind::PerGpu,
                &["amdgpu::module"],
            ),
            check("kfd::node", Layer::Kfd, ScopeKind::PerGpu, &[]),
        ];
        let p = plan(&reg, &[0, 1], Tier::Quick).unwrap();
        assert_eq!(p.instances.len(), 6);
        let kfd1 = p
            .instances
            .iter()
            .find(|i| i.test_id == "gpu1.kfd.node")
            .unwrap();
        assert_eq!(
            ids(&p, &kfd1.deps),
            [
                "node.pci.present",
                "node.amdgpu.module",
                "gpu1.firmware.versions"
            ]
        );
        let fw0 = p
            .instances
            .iter()
            .find(|i| i.test_id == "gpu0.firmware.versions")
            .unwrap();
        assert_eq!(
            ids(&p, &fw0.deps),
            ["node.pci.present", "node.amdgpu.module"]
        );
        // Every dependency precedes its dependent.
        for (i, inst) in p.instances.iter().enumerate() {
            assert!(inst.deps.iter().all(|&d| d < i), "{}", inst.test_id);
        }
    }

    #[test]
    fn non_gating_checks_add_no_implicit_edges() {
        let mut count = check("pci::count", Layer::Pci, ScopeKind::Node, &[]);
        count.gates = false;
        let reg = vec![
            count,
            check("kfd::node", Layer::Kfd, ScopeKind::PerGpu, &[]),
        ];
        let p = plan(&reg, &[0], Tier::Quick).unwrap();
        assert!(p.instances.iter().all(|i| i.deps.is_empty()));
    }

    #[test]
    fn tier_filters_and_unknown_deps_and_cycles_are_reported() {
        let mut slow = check("hip::stress", Layer::Hip, ScopeKind::PerGpu, &[]);
        slow.tier = Tier::Extended;
        let reg = vec![
            check("pci::present", Layer::Pci, ScopeKind::Node, &[]),
            slow,
        ];
        assert_eq!(plan(&reg, &[0], Tier::Quick).unwrap().instances.len(), 1);
        assert_eq!(plan(&reg, &[0], Tier::Extended).unwrap().instances.len(), 2);

        let bad = vec![check("a::x", Layer::Pci, ScopeKind::Node, &["b::y"])];
        assert!(matches!(
            plan(&bad, &[], Tier::Quick),
            Err(PlanError::UnknownDependency { .. })
        ));

        let cyc = vec![
            check("pci::a", Layer::Pci, ScopeKind::Node, &["kfd::b"]),
            check("kfd::b", Layer::Kfd, ScopeKind::Node, &[]),
        ];
        assert!(matches!(
            plan(&cyc, &[], Tier::Quick),
            Err(PlanError::Cycle(_))
        ));

        let dup = vec![
            check("a::x", Layer::Pci, ScopeKind::Node, &[]),
            check("a::x", Layer::Kfd, ScopeKind::Node, &[]),
        ];
        assert_eq!(
            plan(&dup, &[], Tier::Quick).err(),
            Some(PlanError::DuplicateId("a::x".into()))
        );
    }

    #[test]
    fn node_check_depending_on_per_gpu_check_waits_for_every_gpu() {
        let reg = vec![
            check("hip::smoke", Layer::Hip, ScopeKind::PerGpu, &[]),
            check(
                "rccl::allreduce",
                Layer::Rccl,
                ScopeKind::Node,
                &["hip::smoke"],
            ),
        ];
        let p = plan(&reg, &[0, 1, 2], Tier::Quick).unwrap();
        let rccl = p
            .instances
            .iter()
            .find(|i| i.test_id == "node.rccl.allreduce")
            .unwrap();
        assert_eq!(rccl.deps.len(), 3);
    }
}
