//! The context every check of the suites reads: the node's facts and the
//! run's options.

use crate::findings::codes;
use rocgate_harness::{Scope, ScopeInfo, Verdict};
use rocgate_node::Sysroot;
use rocgate_node::facts::NodeFacts;
use rocgate_node::facts::gpus::Gpu;

/// The configuration a worker process gets from its parent, parsed once by
/// the parent: a `--thresholds <(...)` pipe can be read only once, and a
/// file edited mid-run must not give workers other floors than the report.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct WorkerConfig {
    /// Floors and tolerances.
    pub thresholds: crate::thresholds::Thresholds,
    /// Where they came from (for messages).
    pub thresholds_origin: String,
    /// The compatibility matrix.
    pub matrix: crate::compat_matrix::Matrix,
    /// Where it came from.
    pub matrix_origin: String,
    /// The burn-in's duration (`--duration`), which the parent read.
    #[serde(default)]
    pub burnin: Option<std::time::Duration>,
}

/// Why a node's context could not be opened; each kind its own, so a
/// caller knows it without reading the text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// The `--sysroot` given is not a directory that can be listed (a
    /// usage error: another path is needed).
    #[error("{0}")]
    Sysroot(String),
    /// The capture record of a snapshot is damaged: the node's files were
    /// not read.
    #[error("{0}")]
    Capture(String),
    /// A thresholds or matrix file cannot be used.
    #[error(transparent)]
    Config(#[from] crate::config_file::ConfigError),
}

impl WorkerConfig {
    /// Reads the file a parent wrote for its workers (the front end's
    /// worker pool).
    pub fn load(path: &std::path::Path) -> Result<WorkerConfig, String> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            format!(
                "failed to read the worker configuration {}: {e}",
                path.display()
            )
        })?;
        serde_json::from_str(&text).map_err(|e| {
            format!(
                "the worker configuration {} is damaged ({e}); run rocgate again",
                path.display()
            )
        })
    }
}

/// What tells one GPU from another across two discoveries of the node: its
/// PCI address (a partition's own, from KFD's location_id) and, when KFD
/// reports them, its `gpu_id` and `unique_id`. Indices do not: they count
/// the GPUs present, so they shift when one goes away. Written as
/// `0000:05:00.0,gpu_id=1234,unique_id=0x...` on a worker's command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuIdentity {
    /// The PCI address.
    pub pci_address: String,
    /// KFD's `gpu_id`, when non-zero.
    pub gpu_id: Option<u64>,
    /// KFD's `unique_id`, when non-zero: shared by one device's partitions
    /// on kernels up to 2025, each partition's own since; either way the
    /// same for one partition across discoveries, so matching holds.
    pub unique_id: Option<u64>,
}

impl GpuIdentity {
    /// The identity of `gpu` as discovered.
    pub fn of(gpu: &Gpu) -> GpuIdentity {
        let kfd = gpu.kfd.as_ref();
        GpuIdentity {
            pci_address: gpu.pci_address.clone(),
            gpu_id: kfd.and_then(|k| k.gpu_id).filter(|&v| v != 0),
            unique_id: kfd.and_then(|k| k.unique_id).filter(|&v| v != 0),
        }
    }

    /// Whether `gpu` is this GPU: the same address, and the same KFD ids
    /// where both discoveries have them (a different device re-enumerated
    /// at the address is not the same GPU).
    pub fn matches(&self, gpu: &Gpu) -> bool {
        let now = GpuIdentity::of(gpu);
        let agrees = |a: Option<u64>, b: Option<u64>| a.zip(b).is_none_or(|(a, b)| a == b);
        now.pci_address.eq_ignore_ascii_case(&self.pci_address)
            && agrees(now.gpu_id, self.gpu_id)
            && agrees(now.unique_id, self.unique_id)
    }
}

impl std::fmt::Display for GpuIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.pci_address)?;
        if let Some(v) = self.gpu_id {
            write!(f, ",gpu_id={v}")?;
        }
        if let Some(v) = self.unique_id {
            write!(f, ",unique_id=0x{v:x}")?;
        }
        Ok(())
    }
}

impl std::str::FromStr for GpuIdentity {
    type Err = String;

    fn from_str(s: &str) -> Result<GpuIdentity, String> {
        let bad = |why: &str| {
            format!("GPU identity '{s}': {why} (want ADDRESS[,gpu_id=N][,unique_id=0xN])")
        };
        let mut parts = s.split(',');
        let pci_address = parts.next().unwrap_or_default().trim();
        if pci_address.is_empty() || pci_address.contains('=') {
            return Err(bad("no PCI address"));
        }
        let mut id = GpuIdentity {
            pci_address: pci_address.to_string(),
            gpu_id: None,
            unique_id: None,
        };
        for part in parts {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| bad("a part without '='"))?;
            let number = match value.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => value.parse(),
            }
            .map_err(|e| bad(&format!("{key}: {e}")))?;
            let slot = match key {
                "gpu_id" => &mut id.gpu_id,
                "unique_id" => &mut id.unique_id,
                _ => return Err(bad(&format!("unknown key {key}"))),
            };
            if slot.replace(number).is_some() {
                return Err(bad(&format!("{key} given twice")));
            }
        }
        Ok(id)
    }
}

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
    /// `--node-name NAME`: what reports call the node, instead of its host
    /// name (a container's host name is the pod's).
    pub node_name: Option<String>,
    /// `--host-root DIR`: where the host's root is mounted when rocgate runs
    /// in a container.
    pub host_root: Option<std::path::PathBuf>,
    /// What a process other than rocgate holding a GPU means for this run.
    pub gpu_holders: GpuHolders,
    /// `--since`: how far back the kernel log's events are judged.
    pub since: crate::gpu_events::Since,
    /// `--duration`: how long the burn-in tier loads each GPU (else
    /// [`crate::layers::hip::burnin::DEFAULT_DURATION`]).
    pub burnin: Option<std::time::Duration>,
}

/// What another process holding a GPU (its VRAM or queues, as KFD lists
/// them) means, which depends on why rocgate runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GpuHolders {
    /// A run or a health check of an idle node: worth a warning (the
    /// measurements share the GPU).
    #[default]
    Unexpected,
    /// A job is about to start on these GPUs (a Slurm prolog): a holder is
    /// a leftover that will keep the job from the GPU it was promised.
    Forbidden,
    /// Jobs run on the node (a health check of a busy node): holders are
    /// the jobs, listed but not judged.
    Expected,
}

/// `sysroot` reading the host's own files under `--host-root`, else, inside
/// a container, under `/host` when it is a directory (node_exporter's
/// convention for a read-only mount of the host's `/`).
pub fn with_host_root(sysroot: Sysroot, flag: Option<&std::path::Path>) -> Sysroot {
    let chosen = match flag {
        Some(p) => Some(p.to_string_lossy().into_owned()),
        None => (rocgate_node::facts::container::detect(&sysroot).is_some()
            && sysroot.path("/host").is_dir())
        .then(|| "/host".to_string()),
    };
    match chosen {
        Some(h) => sysroot.with_host_root(&h),
        None => sysroot,
    }
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
    pub matrix: crate::compat_matrix::Matrix,
}

impl NodeContext {
    /// Opens the node at `sysroot` with `options`, or with the thresholds
    /// and matrix a worker's parent already parsed (`config`) instead of
    /// reading `options`' paths. Errors say their kind ([`OpenError`]: a
    /// sysroot that does not exist, a malformed capture record, a bad
    /// thresholds or matrix file).
    pub fn open(
        sysroot: Sysroot,
        options: RunOptions,
        config: Option<WorkerConfig>,
    ) -> Result<NodeContext, OpenError> {
        // The OS's own reason (a symlink loop, no permission) is the
        // message: "does not exist" would send the user looking elsewhere.
        let root = sysroot.root();
        let why = match std::fs::metadata(root) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Some("it does not exist".to_string())
            }
            Err(e) => Some(e.to_string()),
            Ok(m) if !m.is_dir() => {
                Some("not a directory or a `rocgate snapshot` archive".to_string())
            }
            Ok(_) => std::fs::read_dir(root)
                .err()
                .map(|e| format!("{e} (rocgate reads the node's files as the user running it)")),
        };
        if let Some(why) = why {
            return Err(OpenError::Sysroot(format!(
                "failed to open sysroot {}: {why}",
                root.display()
            )));
        }
        let sysroot = with_host_root(sysroot, options.host_root.as_deref());
        let mut facts = NodeFacts::discover(sysroot);
        if facts.sysroot.is_live() {
            // On the node itself, the install rocgate was pointed at names
            // the release; against a capture, --rocm-path is this machine's
            // libraries (the fakes), which say nothing of the node's.
            facts.rocm_dirs = options
                .rocm_path
                .iter()
                .cloned()
                .chain(std::env::var_os("ROCM_PATH").map(std::path::PathBuf::from))
                .filter(|p| p.is_absolute())
                .map(|p| p.to_string_lossy().into_owned())
                .collect();
        }
        if let Err(e) = &facts.capture {
            return Err(OpenError::Capture(e.clone()));
        }
        // The host's ROCm talks to the host's GPUs, not to a captured node's;
        // against a sysroot the runtime layers need libraries named for it.
        let runtime = if let Some(why) = &options.runtime_off {
            crate::runtime::Runtime::disabled(rocgate_harness::SkipReason::NotApplicable, why)
        } else if facts.sysroot.is_live() || options.rocm_path.is_some() {
            crate::runtime::Runtime::new(rocgate_rocm::Search {
                rocm_path: options.rocm_path.clone(),
            })
        } else {
            crate::runtime::Runtime::disabled(
                rocgate_harness::SkipReason::NotConfigured,
                "the runtime layers (hsa, hip, rocblas, miopen, rccl) run on the live node, not on a --sysroot capture (give --rocm-path to run libraries against it, as with the fake ROCm)",
            )
        };
        let mut options = options;
        if let Some(c) = &config {
            options.burnin = options.burnin.or(c.burnin);
        }
        let (thresholds, matrix) = match config {
            Some(c) => {
                let mut t = c.thresholds;
                t.origin = c.thresholds_origin;
                let mut m = c.matrix;
                m.origin = c.matrix_origin;
                (t, m)
            }
            None => (
                match &options.thresholds {
                    Some(path) => crate::thresholds::Thresholds::load(path)?,
                    None => crate::thresholds::Thresholds::builtin()?,
                },
                match &options.matrix {
                    Some(path) => crate::compat_matrix::Matrix::load(path)?,
                    None => crate::compat_matrix::Matrix::builtin()?,
                },
            ),
        };
        Ok(NodeContext {
            facts,
            options,
            runtime,
            thresholds,
            matrix,
        })
    }

    /// The GPU a per-GPU scope refers to; a verdict to return when there is
    /// none (a planning defect, reported rather than panicking).
    pub fn gpu(&self, scope: Scope) -> Result<&Gpu, Verdict> {
        scope.gpu().and_then(|i| self.facts.gpu(i)).ok_or_else(|| {
            Verdict::found(
                codes::INTERNAL_ERROR.finding(format!("scope {scope} names no GPU of this node")),
            )
        })
    }

    /// The scope a worker serves for its parent's `scope`: the parent
    /// numbered the GPUs by its own discovery, this process by a later one,
    /// and a GPU that fell off the bus in between shifts every index above
    /// it. With the identity the parent saw (`identity`), the GPU holding
    /// it now is the one checked; none holding it is the node's fault (the
    /// GPU went away during the run), never a wrong GPU tested.
    pub fn resolve(&self, scope: Scope, identity: Option<&GpuIdentity>) -> Result<Scope, Verdict> {
        let Some(id) = identity.filter(|_| scope.gpu().is_some()) else {
            return Ok(scope);
        };
        match self.facts.gpus.iter().find(|g| id.matches(g)) {
            Some(g) => Ok(Scope::Gpu(g.index)),
            None => Err(Verdict::found(codes::GPU_VANISHED.finding(format!(
                "{scope} ({}) went away during the run: rocgate found it when the run started, and the KFD topology and PCI bus no longer list it",
                id.pci_address
            )))),
        }
    }

    /// The GPUs the run covers (`--gpus`, else all), as inventory indices.
    pub fn selected_gpus(&self) -> Vec<u32> {
        rocgate_node::facts::gpus::select(&self.facts.gpus, self.options.gpus.as_deref())
            .unwrap_or_default()
    }

    /// Identity properties of each GPU scope, for reports.
    pub fn scope_infos(&self) -> Vec<(Scope, ScopeInfo)> {
        self.facts
            .gpus
            .iter()
            .map(|g| {
                let mut info = ScopeInfo::default();
                info.push(crate::stack::IDENTITY.address, g.pci_address.clone());
                if let Some(p) = &g.product {
                    info.push("product", p.clone());
                }
                if let Some(t) = &g.gfx_target {
                    info.push("gfx_target", t.clone());
                }
                if let Some(u) = g.kfd.as_ref().and_then(|k| k.unique_id).filter(|&u| u != 0) {
                    info.push(crate::stack::IDENTITY.serial, format!("0x{u:016x}"));
                }
                if let Some(k) = &g.kfd {
                    info.push("kfd_node", k.id.to_string());
                }
                // What the fleet groups a GPU's figures by: a CPX partition
                // is compared with CPX partitions only.
                if let Some(mode) = g.partition_mode() {
                    info.push("partition", mode.to_string());
                }
                (Scope::Gpu(g.index), info)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_identity_reads_back_what_it_wrote_and_refuses_the_malformed() {
        let id: GpuIdentity = "0000:05:00.0,gpu_id=1234,unique_id=0xabc"
            .parse()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(id.gpu_id, Some(1234));
        assert_eq!(id.unique_id, Some(0xabc));
        assert_eq!(id.to_string().parse::<GpuIdentity>(), Ok(id));
        for bad in [
            "",
            "gpu_id=1",
            "0000:05:00.0,gpu_id",
            "0000:05:00.0,gpu_id=x",
            "0000:05:00.0,serial=1",
            "0000:05:00.0,gpu_id=1,gpu_id=1",
        ] {
            assert!(bad.parse::<GpuIdentity>().is_err(), "{bad}");
        }
    }

    proptest! {
        #[test]
        fn any_identity_round_trips(address in "[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]", gpu_id in proptest::option::of(1u64..), unique_id in proptest::option::of(1u64..)) {
            let id = GpuIdentity { pci_address: address, gpu_id, unique_id };
            prop_assert_eq!(id.to_string().parse::<GpuIdentity>(), Ok(id));
        }

        #[test]
        fn no_text_makes_the_parser_panic(s in "\\PC*") {
            let _ = s.parse::<GpuIdentity>();
        }
    }
}
