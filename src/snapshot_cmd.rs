//! `rocgate snapshot --out FILE`: capture what the node layers read.

use crate::cli::SnapshotArgs;
use rocgate_harness::{ExecOptions, Sysroot, Tier};
use rocgate_suites::Session;
use std::process::ExitCode;

/// Runs the node layers on a recording sysroot, then archives what they read.
pub fn run(args: &SnapshotArgs) -> Result<ExitCode, String> {
    let base = args.node.sysroot()?;
    let recording = Sysroot::recording(base.root());
    let mut options = args.node.options(None, None);
    // A snapshot holds files, not libraries: the runtime layers stay off.
    options.rocm_path = None;
    options.runtime_off = Some(
        "a snapshot records files, not libraries: the runtime layers do not run while taking it"
            .into(),
    );
    let session = Session::open(recording, options)?;
    let gpus = session.select_gpus(None)?;
    let plan = session
        .plan(&gpus, Tier::Quick)
        .map_err(|e| format!("internal error: {e}"))?;
    let report = session.run(&plan, &ExecOptions::default(), |_| {});
    // The checks read each GPU's firmware files under their timeouts; the
    // node's version files are read here so the snapshot records them.
    let _ = rocgate_suites::versions::node_versions(session.facts());
    let summary = rocgate_suites::snapshot::write(session.facts(), &args.out, args.redact)?;
    outln!(
        "wrote {}: {} files, {} directories, {} links from {} checks{}",
        args.out.display(),
        summary.files,
        summary.dirs,
        summary.links,
        report.results.len(),
        if args.redact {
            format!("; {} serial/host name values redacted", summary.redacted)
        } else {
            String::new()
        }
    );
    if !summary.hung.is_empty() {
        outln!(
            "{} files did not answer within 2 s (a wedged GPU?) and are stored as hung, so a replay times out where this node did: {}",
            summary.hung.len(),
            summary.hung.join(", ")
        );
    }
    outln!(
        "diagnose it anywhere with: rocgate doctor --sysroot {}",
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}
