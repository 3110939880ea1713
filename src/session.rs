//! One run against one node: open the sysroot, select GPUs, plan, execute.
//! The CLI and the `cargo test` harness both go through here.

use rocgate_harness::isolate::WorkerPool;
use rocgate_harness::{Check, Event, ExecOptions, Plan, PlanError, RunReport, Tier, execute, plan};
use rocgate_node::Sysroot;
use rocgate_node::facts::NodeFacts;
use rocgate_suites::context::{NodeContext, OpenError, RunOptions, WorkerConfig};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Time a timed-out worker gets between SIGTERM and SIGKILL.
pub const WORKER_KILL_GRACE: Duration = Duration::from_secs(1);

/// The longest one try of the all-reduce search may take: the search makes
/// at most 12, so a hang costs minutes, not hours.
pub const NARROW_TRY_LIMIT: Duration = Duration::from_secs(15);

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
    pub fn open(sysroot: Sysroot, options: RunOptions) -> Result<Session, OpenError> {
        Session::open_configured(sysroot, options, None)
    }

    /// [`Session::open`] with the thresholds and matrix already parsed (a
    /// worker's, from its parent) instead of read from `options`' paths.
    pub fn open_configured(
        sysroot: Sysroot,
        options: RunOptions,
        config: Option<WorkerConfig>,
    ) -> Result<Session, OpenError> {
        Ok(Session {
            ctx: Arc::new(NodeContext::open(sysroot, options, config)?),
            registry: rocgate_suites::registry(),
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
        rocgate_node::facts::gpus::select(
            &self.facts().gpus,
            selector.or(self.ctx.options.gpus.as_deref()),
        )
    }

    /// Plans the registry at `tier` over `gpus`.
    pub fn plan(&self, gpus: &[u32], tier: Tier) -> Result<Plan<'_, NodeContext>, PlanError> {
        plan(&self.registry, gpus, tier)
    }

    /// [`Session::plan`] with the checks `selection` leaves out marked, so
    /// they are reported skipped with the reason.
    pub fn plan_selected(
        &self,
        gpus: &[u32],
        tier: Tier,
        selection: &rocgate_harness::Selection,
    ) -> Result<Plan<'_, NodeContext>, String> {
        let mut p = plan(&self.registry, gpus, tier).map_err(|e| format!("internal error: {e}"))?;
        p.select(selection);
        Ok(p)
    }

    /// The site's waivers (from `config`) that apply to this node today.
    pub fn waivers(
        &self,
        config: &crate::config::Config,
    ) -> Result<rocgate_harness::Waivers, String> {
        config.waivers(
            &self.registry,
            &self.node_name().unwrap_or_default(),
            &self.facts().gpus,
            chrono::Utc::now().date_naive(),
        )
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
        rocgate_suites::explain::explain_results(&mut results, &self.registry, self.facts());
        let signal = opts.interrupt.load(std::sync::atomic::Ordering::SeqCst);
        // The deadline passed with checks that never finished.
        let cut_short = opts.deadline.is_some_and(|d| Instant::now() >= d)
            && results
                .iter()
                .any(|r| r.skip_reason == Some(rocgate_harness::SkipReason::Interrupted));
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
            interrupted: if signal != 0 {
                Some(rocgate_harness::signal::signal_name(signal))
            } else if cut_short {
                Some("time budget".to_string())
            } else {
                None
            },
            strict: false,
            fail_on_warn: false,
        }
    }

    /// When the all-reduce across the GPUs failed or timed out, runs it
    /// again on halves and pairs of them ([`rocgate_suites::narrow`]), each
    /// try in a fresh node worker that sees only those GPUs (its selection,
    /// and ROCr's `ROCR_VISIBLE_DEVICES`, so a GPU whose runtime start
    /// hangs fails only the tries that hold it) and under the check's own
    /// timeout capped at [`NARROW_TRY_LIMIT`], and names the GPU that keeps
    /// it from completing in the result's finding (`rccl-hang-isolated` for
    /// a hang; a wrong or failed all-reduce keeps its own finding, with the
    /// GPU). A failed try that a GPU reset of its GPUs' hive overlapped (new
    /// reset lines in the kernel log) is no evidence: the search waits the
    /// reset out and tries again once, or stops naming the reset. Nothing
    /// happens for fewer than three GPUs, or when the run was interrupted;
    /// a signal during the search ends it without counting the try it cut
    /// short, and the report says it was interrupted. `phase` hears of
    /// each try before it starts, with its bounds, so progress can show
    /// the search is alive.
    pub fn narrow_collectives(
        &self,
        report: &mut RunReport,
        opts: &ExecOptions,
        program: &std::path::Path,
        phase: &dyn Fn(&str),
    ) {
        use rocgate_harness::isolate::Isolator as _;
        use rocgate_suites::{narrow, resets};
        let Some(at) = report.results.iter().position(|r| {
            r.check == narrow::ALLREDUCE
                && r.scope == rocgate_harness::Scope::Node
                && r.status.is_fault()
        }) else {
            return;
        };
        let gpus: Vec<u32> = report.scopes.iter().filter_map(|(s, _)| s.gpu()).collect();
        if gpus.len() < 3 || report.interrupted.is_some() {
            return;
        }
        let Some(check) = self.registry.iter().find(|c| c.id == narrow::ALLREDUCE) else {
            return;
        };
        let per_try = opts.timeout_of(check).min(NARROW_TRY_LIMIT);
        let started = Instant::now();
        let interrupt = Arc::clone(&opts.interrupt);
        // Under a time budget (`health`) a try starts only if it can end
        // inside it; the search stops there, on the evidence it has.
        let in_time = || opts.deadline.is_none_or(|d| Instant::now() + per_try <= d);
        // `check` in a fresh node worker that sees only the GPUs of `set`.
        let tries = std::cell::Cell::new(0usize);
        let per_try_s = per_try.as_secs_f64();
        let run_on = |set: &[u32], check: &'static str| {
            self.worker_pool_selecting(program, Arc::clone(&interrupt), Some(set))
                .map(|pool| pool.run(check, rocgate_harness::Scope::Node, per_try))
        };
        let signal = || interrupt.load(std::sync::atomic::Ordering::SeqCst);
        let stopped_by = |sig: usize| {
            format!(
                "interrupted by {}",
                rocgate_harness::signal::signal_name(sig)
            )
        };
        // The kernel log, read before the first try and after each: what a
        // try's window adds says whether a reset overlapped it.
        let read_log = || rocgate_node::facts::kernel_log::read(&self.facts().sysroot);
        let (mut mark, log_unread) = match read_log() {
            Ok(l) => (resets::Mark::at(&l.lines), None),
            Err(e) => (resets::Mark::default(), Some(e)),
        };
        let remark = |mark: &mut resets::Mark| {
            if let Ok(l) = read_log() {
                *mark = resets::Mark::at(&l.lines);
            }
        };
        let overlapped = |mark: &resets::Mark, set: &[u32]| {
            read_log()
                .ok()
                .and_then(|l| resets::overlap(mark.since(&l.lines), &self.facts().gpus, set))
        };
        let as_try = |set: &[u32], verdict: Result<rocgate_harness::Verdict, String>| match verdict
        {
            Ok(v) if v.status == rocgate_harness::Status::Pass => {
                narrow::Try::new(set, true, "completed")
            }
            Ok(v) if v.status == rocgate_harness::Status::Timeout => {
                narrow::Try::new(set, false, format!("did not complete ({})", v.message))
            }
            Ok(v) => narrow::Try::new(set, false, format!("failed ({}: {})", v.status, v.message)),
            Err(e) => narrow::Try::new(set, false, format!("did not run ({e})")),
        };
        // Whether the search stopped on a reset, which the result then says.
        let reset_stopped = std::cell::Cell::new(false);
        let narrowed = narrow::narrow(&gpus, |set| {
            if signal() != 0 {
                return Err(stopped_by(signal()));
            }
            if !in_time() {
                return Err("no time was left for another try".to_string());
            }
            tries.set(tries.get() + 1);
            phase(&format!(
                "narrowing the failed all-reduce to a GPU: try {} of at most {} on {} (at most {per_try_s:.0} s)",
                tries.get(),
                narrow::MAX_TRIES,
                gpu_names(set)
            ));
            let verdict = run_on(set, narrow::ALLREDUCE);
            // A try a signal cut short says nothing of its GPUs: it is no
            // evidence, and the search ends there.
            if signal() != 0 {
                return Err(stopped_by(signal()));
            }
            let first = as_try(set, verdict);
            phase(&format!(
                "try {} on {}: {}",
                tries.get(),
                gpu_names(set),
                first.outcome
            ));
            let reset = overlapped(&mark, set);
            if first.completed || reset.is_none() {
                remark(&mut mark);
                return Ok(first);
            }
            let waiting = Instant::now();
            let reset = wait_out_reset(reset, || overlapped(&mark, set), opts, per_try);
            if signal() != 0 {
                return Err(stopped_by(signal()));
            }
            let on = gpu_names(set);
            let cut = |what: String, o: &resets::Overlap| {
                reset_stopped.set(true);
                format!(
                    "a GPU reset of {} (amdgpu resets every GPU of an XGMI hive) {what}, which says nothing of those GPUs (the try {}); read `dmesg | grep -i 'GPU reset'` and run rocgate again once the hive is back",
                    o.named(),
                    first.outcome
                )
            };
            if reset.failed {
                return Err(cut(format!("failed during the try on {on}"), &reset));
            }
            if !reset.ended {
                return Err(cut(
                    format!(
                        "overlapped the try on {on} and had not ended {:.0} s later",
                        waiting.elapsed().as_secs_f64()
                    ),
                    &reset,
                ));
            }
            if !in_time() {
                return Err(cut(
                    format!("overlapped the try on {on} and no time was left to try again"),
                    &reset,
                ));
            }
            // The reset is over: the same GPUs once more, on a hive that
            // has recovered.
            remark(&mut mark);
            phase(&format!(
                "trying {on} again after the GPU reset (at most {per_try_s:.0} s)"
            ));
            let verdict = run_on(set, narrow::ALLREDUCE);
            if signal() != 0 {
                return Err(stopped_by(signal()));
            }
            let again = as_try(set, verdict);
            if !again.completed {
                if let Some(o) = overlapped(&mark, set) {
                    return Err(cut(format!("overlapped the try on {on} and its retry"), &o));
                }
            }
            remark(&mut mark);
            Ok(narrow::Try {
                outcome: format!(
                    "{} (tried again after a GPU reset of {} cut the first try short: {})",
                    again.outcome,
                    reset.named(),
                    first.outcome
                ),
                ..again
            })
        });
        // Peer copies say whether a link is what fails: a copy that hangs
        // or fails between two GPUs names the pair.
        let copies = narrow::peer_copy_set(&gpus, &narrowed);
        let copied = if signal() != 0 {
            Err(stopped_by(signal()))
        } else if in_time() {
            phase(&format!(
                "peer copies among {} to see whether a link is what fails (at most {per_try_s:.0} s)",
                gpu_names(&copies)
            ));
            run_on(&copies, narrow::PEER_COPIES)
        } else {
            Err("the time budget ran out".to_string())
        };
        if signal() != 0 && report.interrupted.is_none() {
            report.interrupted = Some(rocgate_harness::signal::signal_name(signal()));
        }
        let mut tried = narrow::log(&narrowed);
        if let Some(e) = log_unread {
            tried.push_str(&format!(
                "\nGPU resets during the tries could not be seen: {e}"
            ));
        }
        let among: Vec<String> = copies.iter().map(|g| format!("gpu{g}")).collect();
        tried.push_str(&match copied {
            Ok(v) => format!(
                "\npeer copies among {}: {}: {}",
                among.join(","),
                v.status,
                v.message
            ),
            Err(e) => format!("\npeer copies among {}: not run: {e}", among.join(",")),
        });
        let r = &mut report.results[at];
        let timed_out = r.status == rocgate_harness::Status::Timeout;
        if let Some(f) = narrow::finding(self.facts(), &narrowed, r.finding.as_ref(), timed_out) {
            r.message = f.message.clone();
            r.finding = Some(f);
            rocgate_suites::next_steps::fill_results(std::slice::from_mut(r), self.facts());
        } else if reset_stopped.get() {
            // Inconclusive, and why: a reset the kernel log shows during the
            // search, which may also be what failed the all-reduce itself.
            let note = "; the search for the GPU behind it stopped at a GPU reset of the XGMI hive (see the output)";
            r.message.push_str(note);
            if let Some(f) = r.finding.as_mut() {
                f.message.push_str(note);
            }
        }
        r.output = if r.output.is_empty() {
            tried
        } else {
            format!("{}\n{tried}", r.output)
        };
        report.duration += started.elapsed();
    }

    /// Worker processes for isolated checks: `program __worker --scope S`
    /// with this session's node and options. A thresholds file or matrix
    /// given by the user reaches the workers as this session parsed it (a
    /// private file that lives as long as the pool), never by its path.
    pub fn worker_pool(
        &self,
        program: &std::path::Path,
        interrupt: Arc<std::sync::atomic::AtomicUsize>,
    ) -> Result<WorkerPool, String> {
        self.worker_pool_selecting(program, interrupt, None)
    }

    /// [`Session::worker_pool`] whose workers check the GPUs `gpus`
    /// (inventory indices) instead of the run's, and whose node worker sees
    /// only them: ROCr's `ROCR_VISIBLE_DEVICES` by their KFD ordinals, as a
    /// GPU's own worker sees its GPU ([`rocgate_suites::worker_env`]). The
    /// worker reads the indices against its own discovery of the node and
    /// ROCr the ordinals against KFD's topology as it is then, so a GPU
    /// that went away in between shifts both alike.
    fn worker_pool_selecting(
        &self,
        program: &std::path::Path,
        interrupt: Arc<std::sync::atomic::AtomicUsize>,
        gpus: Option<&[u32]>,
    ) -> Result<WorkerPool, String> {
        let program = program.to_path_buf();
        let sysroot = self.facts().sysroot.clone();
        let mut options = self.ctx.options.clone();
        let seeing: Option<Vec<u32>> = gpus.map(<[u32]>::to_vec);
        if let Some(set) = gpus {
            let selection: Vec<String> = set.iter().map(u32::to_string).collect();
            options.gpus = Some(selection.join(","));
        }
        let ctx = Arc::clone(&self.ctx);
        let config =
            if options.thresholds.is_some() || options.matrix.is_some() || options.burnin.is_some()
            {
                Some(self.write_worker_config()?)
            } else {
                None
            };
        Ok(WorkerPool::new(
            Box::new(move |scope| {
                let mut cmd = std::process::Command::new(&program);
                cmd.arg("__worker").arg("--scope").arg(scope.label());
                if !sysroot.is_live() {
                    cmd.arg("--sysroot").arg(sysroot.root());
                }
                if let Some(p) = &options.rocm_path {
                    cmd.arg("--rocm-path").arg(p);
                }
                if let Some(h) = &options.host_root {
                    cmd.arg("--host-root").arg(h);
                }
                if let Some(n) = options.expect_gpus {
                    cmd.arg("--expect-gpus").arg(n.to_string());
                }
                if let Some(c) = &config {
                    cmd.arg("--worker-config").arg(c.path());
                }
                if let Some(g) = &options.gpus {
                    cmd.arg("--gpus").arg(g);
                }
                // The worker discovers the node again: it finds the GPU by
                // what it is, since indices shift when a GPU goes away.
                if let Some(g) = scope.gpu().and_then(|i| ctx.facts.gpu(i)) {
                    let id = rocgate_suites::context::GpuIdentity::of(g);
                    cmd.arg("--gpu-identity").arg(id.to_string());
                }
                let env = match (&seeing, scope) {
                    (Some(set), rocgate_harness::Scope::Node) => {
                        rocgate_suites::worker_env::worker_env_seeing(&ctx.facts, set)
                    }
                    _ => rocgate_suites::worker_env::worker_env(&ctx.facts, scope),
                };
                rocgate_suites::worker_env::apply(&mut cmd, &env);
                cmd
            }),
            interrupt,
            WORKER_KILL_GRACE,
        ))
    }

    /// Writes the parsed thresholds and matrix for the workers into an
    /// anonymous in-memory file (memfd) the workers inherit and read as
    /// `/proc/self/fd/N`: nothing is written under TMPDIR, so a run killed
    /// with SIGKILL (a Slurm job past its KillWait, the OOM killer) leaves
    /// nothing behind, and the file goes when the last process holding it
    /// ends.
    fn write_worker_config(&self) -> Result<WorkerConfigFile, String> {
        let config = WorkerConfig {
            thresholds: self.ctx.thresholds.clone(),
            thresholds_origin: self.ctx.thresholds.origin.clone(),
            matrix: self.ctx.matrix.clone(),
            matrix_origin: self.ctx.matrix.origin.clone(),
            burnin: self.ctx.options.burnin,
        };
        let text = serde_json::to_string(&config)
            .map_err(|e| format!("internal error: the worker configuration: {e}"))?;
        // Not close-on-exec: the workers inherit it under the same number.
        let fd = nix::sys::memfd::memfd_create(
            "rocgate-worker-config",
            nix::sys::memfd::MFdFlags::empty(),
        )
        .map_err(|e| format!("failed to create the workers' configuration (memfd_create): {e}"))?;
        let mut file = std::fs::File::from(fd);
        std::io::Write::write_all(&mut file, text.as_bytes())
            .map_err(|e| format!("failed to write the workers' configuration: {e}"))?;
        Ok(WorkerConfigFile(file))
    }

    /// Every scope's component versions: the node's (kernel, OS, driver,
    /// ROCm, and the runtime libraries its checks loaded) and each GPU's
    /// (VBIOS, firmware per IP, as the firmware layer read them under its
    /// timeout: a GPU whose sysfs hung has none).
    pub fn versions(&self, report: &RunReport) -> BTreeMap<String, BTreeMap<String, String>> {
        let facts = self.facts();
        let mut out = BTreeMap::new();
        // The run's matrix names the driver release, as for the compat check.
        let mut node = rocgate_node::versions::node_versions(facts, &self.ctx.matrix.drivers);
        for r in report
            .results
            .iter()
            .filter(|r| r.scope == rocgate_harness::Scope::Node)
        {
            node.extend(r.facts.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        rocgate_node::versions::add_loaded_rocm(&mut node);
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

    /// What reports call the node: `--node-name` (`ROCGATE_NODE_NAME`),
    /// else its host name (under `--sysroot` too: a captured node's
    /// reports name that node).
    pub fn node_name(&self) -> Option<String> {
        self.ctx.options.node_name.clone().or_else(|| {
            match self.facts().sysroot.read_opt("/proc/sys/kernel/hostname") {
                Ok(Some(h)) if !h.trim().is_empty() => Some(h.trim().to_string()),
                _ => None,
            }
        })
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
        if let Some(name) = self.node_name() {
            p.push((rocgate_suites::stack::IDENTITY.host.into(), name));
        }
        if let Ok(k) = &f.kernel_release {
            p.push(("kernel".into(), k.clone()));
        }
        match (&f.amdgpu.version, &f.amdgpu.srcversion) {
            (Some(v), _) => p.push(("amdgpu_version".into(), format!("{v} (dkms)"))),
            (None, Some(s)) => p.push(("amdgpu_version".into(), format!("inbox (srcversion {s})"))),
            _ => {}
        }
        let v = rocgate_node::versions::node_versions(f, &self.ctx.matrix.drivers);
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

/// `gpu0,gpu3`: GPUs as the narrowing's tries name them.
fn gpu_names(set: &[u32]) -> String {
    set.iter()
        .map(|g| format!("gpu{g}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Waits until the reset `seen` overlapped a try has ended (read again with
/// `look`), at most four tries' time (a hive's GPUs reset in turn, then
/// resume: seconds to tens of seconds) and never past the run's deadline
/// less one try; returns the reset as last seen.
fn wait_out_reset(
    seen: Option<rocgate_suites::resets::Overlap>,
    look: impl Fn() -> Option<rocgate_suites::resets::Overlap>,
    opts: &ExecOptions,
    per_try: Duration,
) -> rocgate_suites::resets::Overlap {
    let mut last = seen.unwrap_or(rocgate_suites::resets::Overlap {
        devices: Vec::new(),
        trigger: None,
        ended: true,
        failed: false,
    });
    let mut until = Instant::now() + per_try * 4;
    if let Some(d) = opts.deadline {
        until = until.min(d.checked_sub(per_try).unwrap_or(d));
    }
    while !last.ended && !last.failed && Instant::now() < until {
        if opts.interrupt.load(std::sync::atomic::Ordering::SeqCst) != 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
        if let Some(now) = look() {
            last = now;
        }
    }
    last
}

/// The workers' configuration, held open while workers may start.
struct WorkerConfigFile(std::fs::File);

impl WorkerConfigFile {
    /// The name a worker opens it by: the descriptor it inherited.
    fn path(&self) -> std::path::PathBuf {
        use std::os::fd::AsRawFd;
        std::path::PathBuf::from(format!("/proc/self/fd/{}", self.0.as_raw_fd()))
    }
}

#[cfg(test)]
mod driver_rows_tests {
    use super::*;

    /// The built-in row for mi300x-8's module, and the user's: build
    /// 2255209 is release 30.20.9 in the user's matrix.
    const BUILTIN_ROW: &str = r#"releases = [["30.20.0", "2238411"], ["30.20.1", "2255209"]]"#;
    const USER_ROW: &str = r#"releases = [["30.20.0", "2238411"], ["30.20.9", "2255209"]]"#;

    #[test]
    fn reports_name_the_driver_release_the_compat_check_judges() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("node");
        rocgate_fixtures::scenario("mi300x-8")
            .unwrap()
            .spec
            .write(&root)
            .unwrap();
        // Without dpkg's record the release comes from the DKMS build,
        // through the matrix's driver rows.
        let status = root.join("var/lib/dpkg/status");
        let text = std::fs::read_to_string(&status).unwrap();
        let kept: Vec<&str> = text
            .split("\n\n")
            .filter(|s| !s.contains("Package: amdgpu-dkms"))
            .collect();
        std::fs::write(&status, kept.join("\n\n")).unwrap();
        let builtin = rocgate_suites::compat_matrix::BUILTIN;
        assert!(
            builtin.contains(BUILTIN_ROW),
            "the built-in 6.16.6 row moved"
        );
        let matrix = dir.path().join("matrix.toml");
        std::fs::write(&matrix, builtin.replace(BUILTIN_ROW, USER_ROW)).unwrap();
        let options = RunOptions {
            matrix: Some(matrix),
            ..RunOptions::default()
        };
        let session = Session::open(Sysroot::at(&root), options).unwrap();
        let props = session.node_properties(Tier::Quick);
        let release = props.iter().find(|(k, _)| k == "amdgpu_release");
        assert_eq!(
            release.map(|(_, v)| v.as_str()),
            Some("30.20.9"),
            "{props:?}"
        );
        let report = RunReport::new(Tier::Quick, Vec::new());
        assert_eq!(
            session.versions(&report)["node"]["amdgpu_release"],
            "30.20.9"
        );
        let rocgate_suites::compat_matrix::Evaluation::Checked { components, .. } =
            rocgate_suites::compat_matrix::evaluate(session.facts(), &session.ctx.matrix)
        else {
            panic!("mi300x-8's ROCm release is in the matrix");
        };
        let amdgpu = components.iter().find(|c| c.name == "amdgpu").unwrap();
        assert!(
            amdgpu.have.starts_with("30.20.9 (from DKMS build"),
            "{amdgpu:?}"
        );
    }
}
