//! One run against one node: open the sysroot, select GPUs, plan, execute.
//! The CLI and the `cargo test` harness both go through here.

use crate::context::{NodeContext, RunOptions};
use crate::facts::NodeFacts;
use rocgate_harness::isolate::WorkerPool;
use rocgate_harness::{
    Check, Event, ExecOptions, Plan, PlanError, RunReport, Sysroot, Tier, execute, plan,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Time a timed-out worker gets between SIGTERM and SIGKILL.
pub const WORKER_KILL_GRACE: Duration = Duration::from_secs(1);

/// A node opened for checking.
pub struct Session {
    /// What the checks read.
    pub ctx: Arc<NodeContext>,
    /// The checks.
    pub registry: Vec<Check<NodeContext>>,
}

impl Session {
    /// Opens the node at `sysroot`. Errors are configuration errors (a
    /// sysroot that does not exist, a malformed capture record).
    pub fn open(sysroot: Sysroot, options: RunOptions) -> Result<Session, String> {
        if !sysroot.root().is_dir() {
            let why = if sysroot.root().exists() {
                "not a directory or a `rocgate snapshot` archive"
            } else {
                "it does not exist"
            };
            return Err(format!(
                "failed to open sysroot {}: {why}",
                sysroot.root().display()
            ));
        }
        let facts = NodeFacts::discover(sysroot);
        if let Err(e) = &facts.capture {
            return Err(e.clone());
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
        let thresholds = match &options.thresholds {
            Some(path) => crate::thresholds::Thresholds::load(path)?,
            None => crate::thresholds::Thresholds::builtin()?,
        };
        let matrix = match &options.matrix {
            Some(path) => crate::compat::Matrix::load(path)?,
            None => crate::compat::Matrix::builtin()?,
        };
        Ok(Session {
            ctx: Arc::new(NodeContext {
                facts,
                options,
                runtime,
                thresholds,
                matrix,
            }),
            registry: crate::registry(),
        })
    }

    /// The node's facts.
    pub fn facts(&self) -> &NodeFacts {
        &self.ctx.facts
    }

    /// Resolves `--gpus`: inventory indices (`0,3`) or PCI addresses
    /// (`0000:05:00.0`, `05:00.0`; a device's address selects all its
    /// partitions). `None` selects every GPU.
    pub fn select_gpus(&self, selector: Option<&str>) -> Result<Vec<u32>, String> {
        crate::facts::gpus::select(
            &self.facts().gpus,
            selector.or(self.ctx.options.gpus.as_deref()),
        )
    }

    /// Plans the registry at `tier` over `gpus`.
    pub fn plan(&self, gpus: &[u32], tier: Tier) -> Result<Plan<'_, NodeContext>, PlanError> {
        plan(&self.registry, gpus, tier)
    }

    /// Executes `plan` and assembles the report.
    pub fn run(
        &self,
        plan: &Plan<'_, NodeContext>,
        opts: &ExecOptions,
        on_event: impl FnMut(Event<'_>),
    ) -> RunReport {
        let started_at = chrono::Local::now();
        let start = Instant::now();
        let mut results = execute(plan, Arc::clone(&self.ctx), opts, on_event);
        // A library that ended its process left only its words behind.
        for r in results
            .iter_mut()
            .filter(|r| r.status.is_fault() && r.finding.is_none())
        {
            r.finding = crate::vendor_messages::explain(&r.output);
        }
        let isolated: Vec<&str> = self
            .registry
            .iter()
            .filter(|c| c.isolated)
            .map(|c| c.id)
            .collect();
        crate::hangs::name_wedged_gpus(&mut results, &isolated, &self.facts().gpus);
        let signal = opts.interrupt.load(std::sync::atomic::Ordering::SeqCst);
        RunReport {
            tier: plan.tier,
            started_at,
            duration: start.elapsed(),
            results,
            scopes: self
                .ctx
                .scope_infos()
                .into_iter()
                .filter(|(s, _)| s.gpu().is_some_and(|g| plan.gpus.contains(&g)))
                .collect(),
            interrupted: (signal != 0).then(|| rocgate_harness::exec::signal_name(signal)),
            strict: false,
        }
    }

    /// Worker processes for isolated checks: `program __worker --scope S`
    /// with this session's node and options.
    pub fn worker_pool(
        &self,
        program: &std::path::Path,
        interrupt: Arc<std::sync::atomic::AtomicUsize>,
    ) -> WorkerPool {
        let program = program.to_path_buf();
        let sysroot = self.facts().sysroot.clone();
        let options = self.ctx.options.clone();
        let user_rocr = std::env::var("ROCR_VISIBLE_DEVICES").ok();
        let ctx = Arc::clone(&self.ctx);
        WorkerPool::new(
            Box::new(move |scope| {
                let mut cmd = std::process::Command::new(&program);
                cmd.arg("__worker").arg("--scope").arg(scope.label());
                if !sysroot.is_live() {
                    cmd.arg("--sysroot").arg(sysroot.root());
                }
                if let Some(p) = &options.rocm_path {
                    cmd.arg("--rocm-path").arg(p);
                }
                if let Some(n) = options.expect_gpus {
                    cmd.arg("--expect-gpus").arg(n.to_string());
                }
                if let Some(t) = &options.thresholds {
                    cmd.arg("--thresholds").arg(t);
                }
                if let Some(g) = &options.gpus {
                    cmd.arg("--gpus").arg(g);
                }
                if let Some(m) = &options.matrix {
                    cmd.arg("--matrix").arg(m);
                }
                crate::worker_env::apply(
                    &mut cmd,
                    &crate::worker_env::worker_env(&ctx.facts, scope, user_rocr.as_deref()),
                );
                cmd
            }),
            interrupt,
            WORKER_KILL_GRACE,
        )
    }

    /// Every scope's component versions: the node's (kernel, OS, driver,
    /// ROCm, and the runtime libraries its checks loaded) and each GPU's
    /// (VBIOS, firmware per IP, as the firmware layer read them under its
    /// timeout: a GPU whose sysfs hung has none).
    pub fn versions(&self, report: &RunReport) -> BTreeMap<String, BTreeMap<String, String>> {
        let facts = self.facts();
        let mut out = BTreeMap::new();
        let mut node = crate::versions::node_versions(facts);
        for r in report
            .results
            .iter()
            .filter(|r| r.scope == rocgate_harness::Scope::Node)
        {
            node.extend(r.facts.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        crate::versions::add_loaded_rocm(&mut node);
        out.insert("node".to_string(), node);
        for &g in &report
            .scopes
            .iter()
            .filter_map(|(s, _)| s.gpu())
            .collect::<Vec<_>>()
        {
            let learned = report.scope_info(rocgate_harness::Scope::Gpu(g));
            let versions = learned
                .properties
                .into_iter()
                .filter(|(k, _)| k.starts_with("fw_") || k == "vbios")
                .collect();
            out.insert(format!("gpu{g}"), versions);
        }
        out
    }

    /// Node-wide properties for reports: tool, sysroot, kernel, driver.
    pub fn node_properties(&self, tier: Tier) -> Vec<(String, String)> {
        let f = self.facts();
        let mut p = vec![
            (
                "rocgate_version".to_string(),
                env!("CARGO_PKG_VERSION").to_string(),
            ),
            ("tier".to_string(), tier.to_string()),
            ("sysroot".to_string(), f.sysroot.to_string()),
        ];
        if f.sysroot.is_live() {
            if let Ok(Some(h)) = f.sysroot.read_opt("/proc/sys/kernel/hostname") {
                p.push(("hostname".into(), h));
            }
        }
        if let Ok(k) = &f.kernel_release {
            p.push(("kernel".into(), k.clone()));
        }
        match (&f.amdgpu.version, &f.amdgpu.srcversion) {
            (Some(v), _) => p.push(("amdgpu_version".into(), format!("{v} (dkms)"))),
            (None, Some(s)) => p.push(("amdgpu_version".into(), format!("inbox (srcversion {s})"))),
            _ => {}
        }
        let v = crate::versions::node_versions(f);
        for key in ["os", "amdgpu_release", "rocm"] {
            if let Some(x) = v.get(key) {
                p.push((key.to_string(), x.clone()));
            }
        }
        p.push(("pci_gpus".into(), f.pci_gpu_count().to_string()));
        p.push(("gpus".into(), f.gpus.len().to_string()));
        p
    }
}
