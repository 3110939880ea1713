//! `rocgate list`: the checks that would run.

use crate::cli::ListArgs;
use crate::ui::style::Style;
use rocgate::session::Session;
use rocgate_harness::ScopeKind;
use rocgate_suites::{RunOptions, registry};
use std::process::ExitCode;

/// Lists checks (or, with a sysroot, the test ids they expand to).
pub fn run(args: &ListArgs) -> Result<ExitCode, String> {
    let style = Style::for_stdout();
    if args.sysroot.is_some() {
        // The same opening as every other command's `--sysroot`; owns an
        // archive's unpacked directory until this returns.
        let node = crate::cli::open_sysroot(args.sysroot.as_deref())?;
        let session = Session::open(node.sysroot(), RunOptions::default())?;
        let gpus = session.select_gpus(None)?;
        let plan = session
            .plan(&gpus, args.tier)
            .map_err(|e| format!("internal error: {e}"))?;
        for inst in &plan.instances {
            outln!("{}", inst.test_id);
        }
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{}",
        style.bold(&format!(
            "{:<10}{:<9}{:<10}{:<30}{:<7}{}",
            "layer", "scope", "tier", "check", "gates", "verifies"
        ))
    );
    for c in registry().iter().filter(|c| c.tier <= args.tier) {
        let scope = match c.scope {
            ScopeKind::Node => "node",
            ScopeKind::PerGpu => "per GPU",
        };
        outln!(
            "{:<10}{:<9}{:<10}{:<30}{:<7}{}",
            c.layer.as_str(),
            scope,
            c.tier.as_str(),
            c.id,
            if c.gates { "yes" } else { "no" },
            c.summary
        );
    }
    Ok(ExitCode::SUCCESS)
}
