//! `rocgate snapshot --out FILE`: capture what the node layers read.

use crate::cli::SnapshotArgs;
use crate::error::{Error, Result};
use rocgate::exit::Exit;
use rocgate::session::Session;
use rocgate_harness::{ExecOptions, Tier};
use rocgate_node::Sysroot;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Runs the node layers on a recording sysroot, then archives what they read.
pub fn run(args: &SnapshotArgs) -> Result<Exit> {
    // Caught from the start: a signal stops the checks and abandons the
    // archive (its temporary file removed, `--out` untouched) through the
    // normal return, which also removes an unpacked `--sysroot` archive.
    let interrupt = crate::signals::interrupt_flag()?;
    let stop = || interrupt.load(Ordering::SeqCst) != 0;
    let node = args.node.open()?;
    let recording = Sysroot::recording(node.sysroot().root());
    let mut options = args.node.options(&args.node.config()?, None, None);
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
        .map_err(|e| Error::internal(format!("internal error: {e}")))?;
    let exec = ExecOptions {
        interrupt: Arc::clone(&interrupt),
        ..ExecOptions::default()
    };
    let report = session.run(&plan, &exec, |_| {});
    if stop() {
        return Err(Error::node_io(format!(
            "interrupted: {} not written",
            args.out.display()
        )));
    }
    // The checks read each GPU's firmware files under their timeouts; what
    // the other commands read beyond the checks (versions, inventory, the
    // matrix check) the capture reads itself, so that they replay the same.
    let summary = rocgate_node::snapshot::write(session.facts(), &args.out, args.redact, &stop)?;
    outln!(
        "wrote {}: {} files, {} directories, {} links from {} checks{}",
        args.out.display(),
        summary.files,
        summary.dirs,
        summary.links,
        report.results.len(),
        if args.redact {
            format!(
                "; {} values redacted (serials, host and user names, addresses, group members)",
                summary.redacted
            )
        } else {
            String::new()
        }
    );
    if !summary.hung.is_empty() {
        outln!(
            "{} not answer (a wedged GPU?); stored as hung, so a replay times out where this node did: {}",
            match summary.hung.len() {
                1 => "1 file did".to_string(),
                n => format!("{n} files did"),
            },
            summary.hung.join(", ")
        );
    }
    outln!(
        "diagnose it anywhere with: rocgate doctor --sysroot {}",
        args.out.display()
    );
    Ok(Exit::Pass)
}
