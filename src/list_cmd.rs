//! `rocgate list`: the checks that would run, with their tier, timeout and
//! what a failure of each keeps from running.

use crate::cli::ListArgs;
use crate::error::Result;
use crate::output::Output;
use crate::ui::style::Style;
use rocgate::config::Config;
use rocgate::exit::Exit;
use rocgate::session::Session;
use rocgate_harness::{Check, Scope, ScopeKind, Tier};
use rocgate_suites::{NodeContext, RunOptions, registry};
use std::time::Duration;

/// What each tier is for, shallowest first.
const TIERS: [(Tier, &str); 5] = [
    (
        Tier::Passive,
        "files only (sysfs, RAS counters, thermals, kernel log, versions, host settings, the RDMA cards beside the GPUs): no vendor library, no worker, no device opened; safe beside running jobs",
    ),
    (
        Tier::Quick,
        "+ device access, the HSA and HIP runtimes up to a kernel per GPU: seconds",
    ),
    (
        Tier::Standard,
        "+ rocBLAS and MIOpen correctness, an all-reduce across the GPUs",
    ),
    (
        Tier::Extended,
        "+ performance floors, peer-to-peer matrix, a device-memory test, HBM bandwidth",
    ),
    (
        Tier::Burnin,
        "+ every GPU under sustained load for --duration (default 30 min): its integer kernel, HBM triads and rocBLAS GEMMs, the all-reduce looping across the GPUs; results compared across iterations and GPUs, telemetry sampled each second and judged",
    ),
];

/// Lists checks (or, with a sysroot, the test ids they expand to).
pub fn run(args: &ListArgs) -> Result<Exit> {
    let mut out = String::new();
    list(args, &mut out)?;
    Output::Stdout.text(&out)?;
    Ok(Exit::Pass)
}

/// Writes the listing `args` asks for to `out`.
fn list(args: &ListArgs, out: &mut String) -> Result<()> {
    use std::fmt::Write as _;
    let style = Style::for_stdout();
    let config = Config::find(args.config.as_deref())?;
    let registry = registry();
    if args.tiers {
        let _ = writeln!(
            out,
            "{}",
            style.bold(&format!(
                "{:<10}{:>10}  {:>9}  what it runs",
                "tier", "checks", "typical"
            ))
        );
        for (tier, what) in TIERS {
            let n = registry.iter().filter(|c| c.tier <= tier).count();
            let typical = typical_run(&registry, tier);
            let _ = writeln!(
                out,
                "{:<10}{n:>10}  {:>9}  {what}",
                tier.as_str(),
                format!("~{}", seconds(typical))
            );
        }
        let _ = writeln!(
            out,
            "\ntypical: an estimate for a healthy 8x MI300X node, from each check's own work (its `typical` time), the GPUs checked side by side; not yet measured on one. The burn-in's is its default --duration plus its set-up."
        );
        return Ok(());
    }
    let tier = args.tier.or(config.tier()).unwrap_or_default();
    let selection = config.selection(&args.checks.only, &args.checks.skip, &registry)?;
    if args.sysroot.is_some() {
        // The same opening as every other command's `--sysroot`; owns an
        // archive's unpacked directory until this returns.
        let node = crate::cli::open_sysroot(args.sysroot.as_deref())?;
        let session = Session::open(node.sysroot(), RunOptions::default())?;
        let gpus = session.select_gpus(None)?;
        let plan = session.plan_selected(&gpus, tier, &selection)?;
        for inst in &plan.instances {
            let _ = match &inst.excluded {
                Some(why) => writeln!(out, "{}  (skipped: {why})", inst.test_id),
                None => writeln!(out, "{}", inst.test_id),
            };
        }
        return Ok(());
    }
    let show_selection = !selection.is_everything();
    let _ = writeln!(
        out,
        "{}",
        style.bold(&format!(
            "{:<10}{:<9}{:<10}{:>8}  {:<13}{:<30}{}",
            "layer", "scope", "tier", "timeout", "on failure", "check", "verifies"
        ))
    );
    for c in registry.iter().filter(|c| c.tier <= tier) {
        let scope = match c.scope {
            ScopeKind::Node => "node",
            ScopeKind::PerGpu => "per GPU",
        };
        let left_out = selection
            .excludes(c.id, c.layer)
            .filter(|_| show_selection)
            .map_or_else(String::new, |why| format!("  [{why}]"));
        // A sustained check's timeout is the burn-in's duration plus its own.
        let timeout = if c.sustained {
            format!("dur+{}s", c.timeout.as_secs_f64())
        } else {
            format!("{}s", c.timeout.as_secs_f64())
        };
        let _ = writeln!(
            out,
            "{:<10}{:<9}{:<10}{:>8}  {:<13}{:<30}{}{left_out}",
            c.layer.as_str(),
            scope,
            c.tier.as_str(),
            timeout,
            on_failure(c),
            c.id,
            c.summary
        );
    }
    Ok(())
}

/// What a failure of `c` keeps from running: the layers above it (in its
/// scope; a node check's in every scope), or nothing.
fn on_failure(c: &Check<NodeContext>) -> &'static str {
    match (c.gates, c.scope) {
        (false, _) => "blocks none",
        (true, ScopeKind::Node) => "blocks above",
        (true, ScopeKind::PerGpu) => "blocks GPU's",
    }
}

/// How long `tier` usually takes: every check's typical time, the node's
/// after each other and the GPUs' side by side (one GPU's sum), the same
/// for any number of GPUs.
fn typical_run(registry: &[Check<NodeContext>], tier: Tier) -> Duration {
    // A sustained check lasts the burn-in's default duration.
    let opts = rocgate_harness::ExecOptions {
        sustain: rocgate_suites::layers::hip::burnin::DEFAULT_DURATION,
        ..rocgate_harness::ExecOptions::default()
    };
    let instances = registry.iter().filter(|c| c.tier <= tier).map(|c| {
        let scope = match c.scope {
            ScopeKind::Node => Scope::Node,
            _ => Scope::Gpu(0),
        };
        (scope, opts.typical_of(c), c.sustained)
    });
    rocgate_harness::plan::typical_wall_time(instances)
}

/// A duration as the tier table shows it: `0.4 s`, `12 s`, `3 min`.
fn seconds(d: Duration) -> String {
    match d.as_secs_f64() {
        s if s < 10.0 => format!("{s:.1} s"),
        s if s < 120.0 => format!("{s:.0} s"),
        s => format!("{:.0} min", s / 60.0),
    }
}
