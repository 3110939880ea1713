//! The `cargo test` front end: every planned check instance becomes a
//! libtest-mimic trial named by its test id (`gpu3.kfd.topology_node`),
//! driven by the same planner and executor as `rocgate run`.
//!
//! Environment: `ROCGATE_SYSROOT` (default `/`), `ROCGATE_TIER` (default
//! quick), `ROCGATE_EXPECT_GPUS`, `ROCGATE_REQUIRE_GPU=1`, which turns
//! "no AMD GPU on the PCI bus" from ignored trials into failures,
//! `ROCGATE_STRICT=1`, which fails the trials that could not verify, and
//! the site's policy file (`ROCGATE_CONFIG`, else
//! `/etc/rocgate/rocgate.toml`) for what these do not set: tier, expected
//! GPUs, thresholds, matrix, `fail_on`, `strict`, selection and waivers.

use crate::session::Session;
use libtest_mimic::{Completion, Failed, Trial};
use rocgate_harness::{CheckResult, ExecOptions, RunReport, SkipReason, Status, Tier};
use rocgate_node::Sysroot;
use rocgate_suites::context::RunOptions;
use std::sync::{Arc, OnceLock};

/// What the harness was asked to do.
#[derive(Clone, Debug, Default)]
pub struct HarnessEnv {
    /// The node to check (`None` = the live host).
    pub sysroot: Option<String>,
    /// The tier.
    pub tier: Tier,
    /// Expected GPU count.
    pub expect_gpus: Option<usize>,
    /// Fail instead of ignoring when the node has no AMD GPU.
    pub require_gpu: bool,
    /// Fail the trials whose checks could not verify (unverifiable skips).
    pub strict: bool,
    /// `ROCGATE_ROCM_PATH`: where to look for ROCm libraries first.
    pub rocm_path: Option<std::path::PathBuf>,
    /// The rocgate binary, to run isolated checks in worker processes
    /// (without it they run in the test process).
    pub worker: Option<std::path::PathBuf>,
    /// A warning fails its trial (`fail_on = "warn"` in the policy file).
    pub fail_on_warn: bool,
    /// The site's policy file.
    pub config: Arc<crate::config::Config>,
}

impl HarnessEnv {
    /// Reads `ROCGATE_*` variables; malformed values are reported as errors.
    pub fn from_env() -> Result<HarnessEnv, String> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let config = crate::config::Config::find(None)?;
        Ok(HarnessEnv {
            sysroot: var("ROCGATE_SYSROOT"),
            tier: match var("ROCGATE_TIER") {
                Some(t) => t.parse().map_err(|e| format!("ROCGATE_TIER: {e}"))?,
                None => config.tier().unwrap_or_default(),
            },
            expect_gpus: match var("ROCGATE_EXPECT_GPUS") {
                Some(n) => Some(
                    n.parse()
                        .map_err(|_| format!("ROCGATE_EXPECT_GPUS: '{n}' is not a count"))?,
                ),
                None => config.expect_gpus(),
            },
            require_gpu: var("ROCGATE_REQUIRE_GPU").as_deref() == Some("1"),
            strict: matches!(var("ROCGATE_STRICT").as_deref(), Some("1" | "true" | "yes"))
                || config.strict().unwrap_or(false),
            rocm_path: var("ROCGATE_ROCM_PATH").map(Into::into),
            worker: None,
            fail_on_warn: config.fail_on() == Some(crate::config::FailOn::Warn),
            config: Arc::new(config),
        })
    }
}

/// Builds the trials. The node is checked once, by the first trial that runs;
/// the others read their result from that run.
pub fn trials(env: &HarnessEnv) -> Vec<Trial> {
    let sysroot = env.sysroot.as_ref().map_or_else(Sysroot::live, Sysroot::at);
    let options = RunOptions {
        expect_gpus: env.expect_gpus,
        rocm_path: env.rocm_path.clone(),
        thresholds: env.config.thresholds(),
        matrix: env.config.matrix(),
        ..RunOptions::default()
    };
    let setup_error = |e: String| vec![Trial::test("rocgate.setup", move || Err(e.into()))];
    let session = match Session::open(sysroot, options) {
        Ok(s) => Arc::new(s),
        Err(e) => return setup_error(e.to_string()),
    };
    let policy = env
        .config
        .selection(&[], &[], &session.registry)
        .and_then(|sel| Ok((sel, session.waivers(&env.config)?)));
    let (selection, waivers) = match policy {
        Ok(p) => p,
        Err(e) => return setup_error(e),
    };
    let waivers = Arc::new(waivers);
    let gpus = session.select_gpus(None).unwrap_or_default();
    let ids: Vec<String> = match session.plan_selected(&gpus, env.tier, &selection) {
        Ok(p) => p.instances.iter().map(|i| i.test_id.clone()).collect(),
        Err(e) => return vec![Trial::test("rocgate.plan", move || Err(e.into()))],
    };
    if session.facts().pci_gpu_count() == 0 {
        let why = "no AMD GPU on the PCI bus (set ROCGATE_REQUIRE_GPU=1 to fail instead)";
        let require = env.require_gpu;
        return ids
            .into_iter()
            .map(|id| {
                Trial::ignorable_test(id, move || {
                    if require {
                        Err("no AMD GPU on the PCI bus and ROCGATE_REQUIRE_GPU=1".into())
                    } else {
                        Ok(Completion::ignored_with(why))
                    }
                })
            })
            .collect();
    }
    let report: Arc<OnceLock<RunReport>> = Arc::new(OnceLock::new());
    let tier = env.tier;
    let (strict, fail_on_warn) = (env.strict, env.fail_on_warn);
    let worker = env.worker.clone();
    let selection = Arc::new(selection);
    ids.into_iter()
        .map(|id| {
            let (session, report, gpus) = (Arc::clone(&session), Arc::clone(&report), gpus.clone());
            let (worker, selection, waivers) =
                (worker.clone(), Arc::clone(&selection), Arc::clone(&waivers));
            Trial::ignorable_test(id.clone(), move || {
                let report =
                    report.get_or_init(|| match session.plan_selected(&gpus, tier, &selection) {
                        Ok(plan) => {
                            let mut opts = ExecOptions {
                                waivers: Arc::clone(&waivers),
                                ..ExecOptions::default()
                            };
                            // A pool fails only to hand workers a user's
                            // thresholds or matrix, which this front end never
                            // takes; without one the checks run in-process.
                            if let Some(Ok(pool)) = worker
                                .as_ref()
                                .map(|p| session.worker_pool(p, Arc::clone(&opts.interrupt)))
                            {
                                opts.isolator = Some(Arc::new(pool));
                            }
                            session.run(&plan, &opts, |_| {})
                        }
                        Err(_) => unreachable_plan(tier),
                    });
                match report.results.iter().find(|r| r.test_id == id) {
                    Some(r) => outcome(r, strict, fail_on_warn),
                    None => Err(format!("{id} produced no result").into()),
                }
            })
        })
        .collect()
}

/// An empty report, for a plan that failed the second time it was built
/// (it succeeded moments before; every trial then says it has no result).
fn unreachable_plan(tier: Tier) -> RunReport {
    RunReport::new(tier, Vec::new())
}

/// A result as a trial outcome: blocked and skipped are ignored with their
/// reason, so `cargo test` shows one failure at the broken layer; a
/// warning passes; a waived result is ignored with its waiver; under
/// `strict`, a check that could not verify fails.
pub fn outcome(r: &CheckResult, strict: bool, fail_on_warn: bool) -> Result<Completion, Failed> {
    match r.status {
        _ if r.waived() => Ok(Completion::ignored_with(format!(
            "waived ({}): {}",
            r.waiver.as_ref().map_or("", |w| w.reason.as_str()),
            r.message
        ))),
        Status::Pass => Ok(Completion::Completed),
        Status::Warn if !fail_on_warn => Ok(Completion::Completed),
        Status::Skipped if strict && r.skip_reason == Some(SkipReason::Unverifiable) => {
            Err(format!("could not verify (ROCGATE_STRICT=1): {}", r.message).into())
        }
        Status::Skipped => Ok(Completion::ignored_with(match r.skip_reason {
            Some(reason) => format!("{reason}: {}", r.message),
            None => r.message.clone(),
        })),
        Status::Blocked => Ok(Completion::ignored_with(&r.message)),
        Status::Fail | Status::Warn | Status::Timeout | Status::Crash => {
            let mut text = format!("{}: {}", r.status, r.message);
            if let Some(f) = &r.finding {
                text.push_str(&format!("\ncode: {}\nnext step: {}", f.code, f.next_step));
            }
            if !r.output.is_empty() {
                text.push_str(&format!("\n{}", r.output));
            }
            Err(text.into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use libtest_mimic::Arguments;

    fn run(env: &HarnessEnv) -> libtest_mimic::Conclusion {
        // The nested harness writes its own report; keep it out of this one's.
        let log = tempfile::NamedTempFile::new().unwrap();
        let args = Arguments {
            quiet: true,
            test_threads: Some(4),
            logfile: Some(log.path().display().to_string()),
            ..Arguments::default()
        };
        libtest_mimic::run(&args, trials(env))
    }

    fn node(name: &str) -> (tempfile::TempDir, HarnessEnv) {
        let dir = tempfile::tempdir().unwrap();
        let s = rocgate_fixtures::scenario(name).unwrap();
        s.spec.write(&dir.path().join("n")).unwrap();
        let env = HarnessEnv {
            sysroot: Some(dir.path().join("n").display().to_string()),
            ..HarnessEnv::default()
        };
        (dir, env)
    }

    #[test]
    fn healthy_node_passes_every_trial() {
        let (_d, env) = node("mi300x-8");
        let c = run(&env);
        assert_eq!(c.num_failed, 0);
        assert!(c.num_passed > 100, "{}", c.num_passed);
    }

    #[test]
    fn broken_node_fails_once_and_ignores_what_it_blocks() {
        let (_d, env) = node("amdgpu-not-loaded");
        let c = run(&env);
        assert_eq!(c.num_failed, 1, "only node.amdgpu.module_live fails");
        assert!(c.num_ignored > 8);
    }

    #[test]
    fn no_gpu_is_ignored_unless_required() {
        let (_d, env) = node("no-amd-gpu");
        let c = run(&env);
        assert_eq!(c.num_failed, 0);
        assert!(c.num_ignored > 0);
        let strict = run(&HarnessEnv {
            require_gpu: true,
            ..env
        });
        assert!(strict.num_failed > 0);
    }

    #[test]
    fn strict_fails_the_trials_that_could_not_verify() {
        let (dir, env) = node("mi300x-8");
        // Without a kernel log the firmware log checks cannot look.
        std::fs::remove_file(dir.path().join("n/var/log/kern.log")).unwrap();
        let lenient = run(&env);
        assert_eq!(lenient.num_failed, 0);
        let strict = run(&HarnessEnv {
            strict: true,
            ..env
        });
        // node.firmware.kernel_log, and each GPU's init_errors, load_errors,
        // gpu_events and bus_events.
        assert_eq!(strict.num_failed, 1 + 4 * 8);
    }
}
