//! The planner: expands checks over scopes, adds gating edges and orders the
//! instances so that every dependency comes first.

use crate::check::Check;
use crate::model::{Layer, Scope, ScopeKind, Tier};
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;
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
    /// Why the run's selection (`--only`, `--skip`) leaves this instance
    /// out: it is reported skipped as not configured, with this reason.
    pub excluded: Option<String>,
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

    /// Marks the instances `selection` leaves out; they stay in the plan,
    /// so reports list them as skipped with the reason.
    pub fn select(&mut self, selection: &crate::policy::Selection) {
        for inst in &mut self.instances {
            let check = &self.registry[inst.check];
            inst.excluded = selection.excludes(check.id, check.layer);
        }
    }

    /// The instances that will run (not left out by the selection).
    pub fn selected(&self) -> impl Iterator<Item = &Instance> {
        self.instances.iter().filter(|i| i.excluded.is_none())
    }

    /// How long an instance usually takes: its check's typical time, none
    /// for one the selection leaves out.
    pub fn typical(&self, instance: &Instance) -> Duration {
        match instance.excluded {
            Some(_) => Duration::ZERO,
            None => self.check(instance).typical,
        }
    }
}

/// How long checks usually take together, when the GPUs run theirs side by
/// side and the node's run alone: the node's sum plus the longest GPU's;
/// and then the sustained checks, every scope's at once (the burn-in loads
/// the GPUs and the links between them together), the longest of them.
/// `instances` are each one's scope, typical time and whether it is
/// sustained ([`crate::Check::sustained`]).
pub fn typical_wall_time(instances: impl IntoIterator<Item = (Scope, Duration, bool)>) -> Duration {
    let mut per_scope: std::collections::BTreeMap<Scope, Duration> = Default::default();
    let mut sustained = Duration::ZERO;
    for (scope, typical, lasts) in instances {
        if lasts {
            sustained = sustained.max(typical);
        } else {
            *per_scope.entry(scope).or_default() += typical;
        }
    }
    let node = per_scope.remove(&Scope::Node).unwrap_or_default();
    node + per_scope.into_values().max().unwrap_or_default() + sustained
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
    /// A check of the passive tier would start a worker process: the
    /// passive tier reads files only.
    #[error("check {0} is in the passive tier but runs in a worker (it calls a vendor library)")]
    PassiveIsolated(String),
    /// Two checks' layers share a name or a rank, but not both.
    #[error(
        "layers {first} (rank {}) and {second} (rank {}) conflict: each layer needs a name and a rank of its own",
        .first.rank(),
        .second.rank()
    )]
    LayerConflict {
        /// The layer as the first check declared it.
        first: Layer,
        /// The layer as a later check declared it.
        second: Layer,
    },
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
        if c.tier == Tier::Passive && c.isolated {
            return Err(PlanError::PassiveIsolated(c.id.to_string()));
        }
        for dep in c.deps {
            if !by_id.contains_key(dep) {
                return Err(PlanError::UnknownDependency {
                    check: c.id.to_string(),
                    dep: (*dep).to_string(),
                });
            }
        }
    }

    // Layers are data from the suites, and gating follows their ranks: one
    // name at two ranks, or two names at one rank, would make the order
    // depend on which check declared the layer.
    let mut names: HashMap<&str, Layer> = HashMap::new();
    let mut ranks: HashMap<u8, Layer> = HashMap::new();
    for c in registry {
        let layer = c.layer;
        let same_name = *names.entry(layer.as_str()).or_insert(layer);
        let same_rank = *ranks.entry(layer.rank()).or_insert(layer);
        for first in [same_name, same_rank] {
            if first != layer {
                return Err(PlanError::LayerConflict {
                    first,
                    second: layer,
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
                    excluded: None,
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
        // Implicit gating: lower-layer gating checks of the same scope and
        // of the node, within the stack (a layer beside it stands alone).
        for (j, other) in instances.iter().enumerate() {
            let oc = &registry[other.check];
            if oc.gates
                && oc.layer < me.layer
                && !oc.layer.is_beside()
                && !me.layer.is_beside()
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
    use crate::model::test_stack::{self, A, B, C, D, E};

    fn check(
        id: &'static str,
        layer: Layer,
        scope: ScopeKind,
        deps: &'static [&'static str],
    ) -> Check<()> {
        Check {
            deps,
            ..test_stack::passing(id, layer, scope)
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
            check("a::present", A, ScopeKind::Node, &[]),
            check("c::module", C, ScopeKind::Node, &[]),
            check("b::versions", B, ScopeKind::PerGpu, &["c::module"]),
            check("d::node", D, ScopeKind::PerGpu, &[]),
        ];
        let p = plan(&reg, &[0, 1], Tier::Quick).unwrap();
        assert_eq!(p.instances.len(), 6);
        let d1 = p
            .instances
            .iter()
            .find(|i| i.test_id == "gpu1.d.node")
            .unwrap();
        assert_eq!(
            ids(&p, &d1.deps),
            ["node.a.present", "node.c.module", "gpu1.b.versions"]
        );
        let fw0 = p
            .instances
            .iter()
            .find(|i| i.test_id == "gpu0.b.versions")
            .unwrap();
        assert_eq!(ids(&p, &fw0.deps), ["node.a.present", "node.c.module"]);
        // Every dependency precedes its dependent.
        for (i, inst) in p.instances.iter().enumerate() {
            assert!(inst.deps.iter().all(|&d| d < i), "{}", inst.test_id);
        }
    }

    #[test]
    fn non_gating_checks_add_no_implicit_edges() {
        let mut count = check("a::count", A, ScopeKind::Node, &[]);
        count.gates = false;
        let reg = vec![count, check("d::node", D, ScopeKind::PerGpu, &[])];
        let p = plan(&reg, &[0], Tier::Quick).unwrap();
        assert!(p.instances.iter().all(|i| i.deps.is_empty()));
    }

    #[test]
    fn tier_filters_and_unknown_deps_and_cycles_are_reported() {
        let mut slow = check("d::stress", D, ScopeKind::PerGpu, &[]);
        slow.tier = Tier::Extended;
        let reg = vec![check("a::present", A, ScopeKind::Node, &[]), slow];
        assert_eq!(plan(&reg, &[0], Tier::Quick).unwrap().instances.len(), 1);
        assert_eq!(plan(&reg, &[0], Tier::Extended).unwrap().instances.len(), 2);

        let bad = vec![check("a::x", A, ScopeKind::Node, &["b::y"])];
        assert!(matches!(
            plan(&bad, &[], Tier::Quick),
            Err(PlanError::UnknownDependency { .. })
        ));

        let cyc = vec![
            check("a::a", A, ScopeKind::Node, &["d::b"]),
            check("d::b", D, ScopeKind::Node, &[]),
        ];
        assert!(matches!(
            plan(&cyc, &[], Tier::Quick),
            Err(PlanError::Cycle(_))
        ));

        let dup = vec![
            check("a::x", A, ScopeKind::Node, &[]),
            check("a::x", D, ScopeKind::Node, &[]),
        ];
        assert_eq!(
            plan(&dup, &[], Tier::Quick).err(),
            Some(PlanError::DuplicateId("a::x".into()))
        );
    }

    #[test]
    fn the_passive_tier_holds_no_worker_check_and_the_selection_marks_what_it_leaves_out() {
        let mut file = check("a::file", A, ScopeKind::Node, &[]);
        file.tier = Tier::Passive;
        let reg = vec![file.clone(), check("d::call", D, ScopeKind::PerGpu, &[])];
        let passive = plan(&reg, &[0], Tier::Passive).unwrap();
        assert_eq!(ids(&passive, &[0]), ["node.a.file"]);
        assert_eq!(passive.instances.len(), 1);
        // Quick includes what passive runs.
        assert_eq!(plan(&reg, &[0], Tier::Quick).unwrap().instances.len(), 2);
        file.isolated = true;
        assert_eq!(
            plan(&[file], &[0], Tier::Quick).err(),
            Some(PlanError::PassiveIsolated("a::file".into()))
        );

        let mut p = plan(&reg, &[0, 1], Tier::Quick).unwrap();
        let selection = crate::policy::Selection {
            skip: vec![crate::policy::CheckPattern::parse("d", &reg).unwrap()],
            ..Default::default()
        };
        p.select(&selection);
        let left_out: Vec<&str> = p
            .instances
            .iter()
            .filter(|i| i.excluded.is_some())
            .map(|i| i.test_id.as_str())
            .collect();
        assert_eq!(left_out, ["gpu0.d.call", "gpu1.d.call"]);
        assert_eq!(p.selected().count(), 1);
    }

    #[test]
    fn node_check_depending_on_per_gpu_check_waits_for_every_gpu() {
        let reg = vec![
            check("d::smoke", D, ScopeKind::PerGpu, &[]),
            check("e::allreduce", E, ScopeKind::Node, &["d::smoke"]),
        ];
        let p = plan(&reg, &[0, 1, 2], Tier::Quick).unwrap();
        let rccl = p
            .instances
            .iter()
            .find(|i| i.test_id == "node.e.allreduce")
            .unwrap();
        assert_eq!(rccl.deps.len(), 3);
    }

    #[test]
    fn gating_follows_the_rank_whatever_the_names() {
        // Names sort the other way round from ranks: the ranks decide.
        let (top, bottom) = (Layer::new("aa", 1), Layer::new("zz", 0));
        let reg = vec![
            check("aa::up", top, ScopeKind::Node, &[]),
            check("zz::down", bottom, ScopeKind::Node, &[]),
        ];
        let p = plan(&reg, &[], Tier::Quick).unwrap();
        let order: Vec<&str> = p.instances.iter().map(|i| i.test_id.as_str()).collect();
        assert_eq!(order, ["node.zz.down", "node.aa.up"]);
        assert_eq!(ids(&p, &p.instances[1].deps), ["node.zz.down"]);
    }

    #[test]
    fn a_layer_beside_the_stack_neither_waits_for_it_nor_holds_it_up() {
        let (low, aside, high) = (
            Layer::new("low", 0),
            Layer::beside("aside", 1),
            Layer::new("high", 2),
        );
        let reg = vec![
            check("low::x", low, ScopeKind::Node, &[]),
            check("aside::y", aside, ScopeKind::Node, &[]),
            check("aside::z", aside, ScopeKind::Node, &["aside::y"]),
            check("high::w", high, ScopeKind::Node, &[]),
        ];
        let p = plan(&reg, &[], Tier::Quick).unwrap();
        let deps = |id: &str| {
            let i = p.instances.iter().find(|i| i.test_id == id).unwrap();
            ids(&p, &i.deps)
        };
        assert!(deps("node.aside.y").is_empty());
        // Its own explicit dependencies hold.
        assert_eq!(deps("node.aside.z"), ["node.aside.y"]);
        assert_eq!(deps("node.high.w"), ["node.low.x"]);
    }

    #[test]
    fn a_layer_declared_two_ways_is_refused() {
        let twice = Layer::new("a", 3);
        let reg = vec![
            check("a::x", A, ScopeKind::Node, &[]),
            check("a::y", twice, ScopeKind::Node, &[]),
        ];
        let err = plan(&reg, &[], Tier::Quick).err().unwrap();
        assert_eq!(
            err,
            PlanError::LayerConflict {
                first: A,
                second: twice
            }
        );
        assert_eq!(
            err.to_string(),
            "layers a (rank 0) and a (rank 3) conflict: each layer needs a name and a rank of its own"
        );
        let shared = Layer::new("other", 1);
        let reg = vec![
            check("b::x", B, ScopeKind::Node, &[]),
            check("other::y", shared, ScopeKind::Node, &[]),
        ];
        assert_eq!(
            plan(&reg, &[], Tier::Quick).err(),
            Some(PlanError::LayerConflict {
                first: B,
                second: shared
            })
        );
    }
}
