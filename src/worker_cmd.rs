//! Worker processes: `rocgate __worker --scope gpu3` serves the isolated
//! checks of one scope; the parent side builds the pool that starts them.

use crate::cli::WorkerArgs;
use rocgate::session::Session;
use rocgate_harness::isolate::{self, Isolator};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

/// Serves requests until stdin closes.
pub fn run(args: &WorkerArgs) -> Result<ExitCode, String> {
    isolate::die_with_parent();
    args.scope
        .parse::<rocgate_harness::Scope>()
        .map_err(|e| format!("__worker --scope: {e}"))?;
    let config = args
        .worker_config
        .as_deref()
        .map(rocgate_suites::context::WorkerConfig::load)
        .transpose()?;
    let session = Session::open_configured(
        args.node.worker_sysroot()?,
        // The parent read the site's policy; a worker serves what it is sent.
        args.node.options(
            &rocgate::config::Config::default(),
            args.expect_gpus,
            args.gpus.as_deref(),
        ),
        config,
    )?;
    isolate::serve(&session.registry, &*session.ctx)
        .map_err(|e| format!("worker for {}: {e}", args.scope))?;
    Ok(ExitCode::SUCCESS)
}

/// The isolator for a run: workers of this very binary, unless the runtime
/// layers are disabled (a sysroot without --rocm-path), when their checks
/// only report that and need no process.
pub fn isolator(
    session: &Session,
    interrupt: &Arc<AtomicUsize>,
) -> Result<Option<Arc<dyn Isolator>>, String> {
    if session.ctx.runtime.disabled.is_some() {
        return Ok(None);
    }
    pool(session, interrupt).map(Some)
}

/// The pool that runs isolated checks in workers of this very binary.
pub fn pool(session: &Session, interrupt: &Arc<AtomicUsize>) -> Result<Arc<dyn Isolator>, String> {
    let program = std::env::current_exe()
        .map_err(|e| format!("failed to find rocgate's own executable to start workers: {e}"))?;
    Ok(Arc::new(
        session.worker_pool(&program, Arc::clone(interrupt))?,
    ))
}

/// Executor threads: enough for every GPU's chain to wait on its worker at
/// once, plus the node's.
pub fn threads(gpus: usize) -> usize {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    cpus.max(gpus + 1).min(256)
}
