//! The context every check of the suites reads: the node's facts and the
//! run's options.

use crate::facts::NodeFacts;
use crate::facts::gpus::Gpu;
use crate::findings::codes;
use rocgate_harness::{Scope, ScopeInfo, Verdict};

/// Options that change what checks expect.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// `--expect-gpus N`: fail the GPU count check when fewer are present.
    pub expect_gpus: Option<usize>,
    /// `--rocm-path DIR`: look for ROCm libraries in DIR/lib first.
    pub rocm_path: Option<std::path::PathBuf>,
    /// `--thresholds FILE`: floors and tolerances instead of the built-in ones.
    pub thresholds: Option<std::path::PathBuf>,
    /// `--matrix FILE`: the compatibility matrix instead of the built-in one.
    pub matrix: Option<std::path::PathBuf>,
    /// `--gpus LIST`: the GPUs the run covers (node checks over several GPUs,
    /// such as all-reduce, use these).
    pub gpus: Option<String>,
    /// Keep the runtime layers off, for this reason (they skip saying so).
    pub runtime_off: Option<String>,
}

/// What checks read.
#[derive(Debug)]
pub struct NodeContext {
    /// The node.
    pub facts: NodeFacts,
    /// The run's options.
    pub options: RunOptions,
    /// The ROCm libraries, opened on first use (in worker processes).
    pub runtime: crate::runtime::Runtime,
    /// Floors and tolerances.
    pub thresholds: crate::thresholds::Thresholds,
    /// The compatibility matrix.
    pub matrix: crate::compat::Matrix,
}

impl NodeContext {
    /// The GPU a per-GPU scope refers to; a verdict to return when there is
    /// none (a planning defect, reported rather than panicking).
    pub fn gpu(&self, scope: Scope) -> Result<&Gpu, Verdict> {
        scope.gpu().and_then(|i| self.facts.gpu(i)).ok_or_else(|| {
            Verdict::fail(
                codes::INTERNAL_ERROR.finding(format!("scope {scope} names no GPU of this node")),
            )
        })
    }

    /// The GPUs the run covers (`--gpus`, else all), as inventory indices.
    pub fn selected_gpus(&self) -> Vec<u32> {
        crate::facts::gpus::select(&self.facts.gpus, self.options.gpus.as_deref())
            .unwrap_or_default()
    }

    /// Identity properties of each GPU scope, for reports.
    pub fn scope_infos(&self) -> Vec<(Scope, ScopeInfo)> {
        self.facts
            .gpus
            .iter()
            .map(|g| {
                let mut info = ScopeInfo::default();
                info.push("pci_address", g.pci_address.clone());
                if let Some(p) = &g.product {
                    info.push("product", p.clone());
                }
                if let Some(t) = &g.gfx_target {
                    info.push("gfx_target", t.clone());
                }
                if let Some(u) = g.kfd.as_ref().and_then(|k| k.unique_id).filter(|&u| u != 0) {
                    info.push("unique_id", format!("0x{u:016x}"));
                }
                if let Some(k) = &g.kfd {
                    info.push("kfd_node", k.id.to_string());
                }
                (Scope::Gpu(g.index), info)
            })
            .collect()
    }
}
