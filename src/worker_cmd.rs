//! Worker processes: `rocgate __worker --scope gpu3` serves the isolated
//! checks of one scope; the parent side builds the pool that starts them.
//! A worker discovers the node again when it starts, later than its parent
//! did: it finds its GPU by the identity the parent saw (`--gpu-identity`),
//! not by index, and a GPU it no longer finds is the node's fault
//! (`gpu-vanished`), not rocgate's.

use crate::cli::WorkerArgs;
use crate::error::{Error, Result, ResultExt};
use rocgate::exit::Exit;
use rocgate::session::Session;
use rocgate_harness::Scope;
use rocgate_harness::isolate::{self, Isolator};
use rocgate_suites::context::GpuIdentity;
use rocgate_suites::worker_env;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

/// Serves requests until stdin closes.
pub fn run(args: &WorkerArgs) -> Result<Exit> {
    isolate::die_with_parent();
    let scope = args
        .scope
        .parse::<rocgate_harness::Scope>()
        .map_err(|e| e.to_string())
        .context("__worker --scope")?;
    let identity = args
        .gpu_identity
        .as_deref()
        .map(str::parse::<GpuIdentity>)
        .transpose()
        .map_err(|e| e.to_string())
        .context("__worker --gpu-identity")?;
    let config = args
        .worker_config
        .as_deref()
        .map(rocgate_suites::context::WorkerConfig::load)
        .transpose()
        // The parent wrote it: one it cannot read is rocgate's own defect.
        .internal()?;
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
    let resolved = session.ctx.resolve(scope, identity.as_ref());
    if let Ok(mine @ Scope::Gpu(_)) = resolved {
        see_only(&session, mine)?;
    }
    let resolve = |asked: Scope| {
        if asked == scope {
            resolved.clone()
        } else {
            Ok(asked)
        }
    };
    // A worker that cannot talk to its parent is rocgate's own trouble.
    isolate::serve(&session.registry, &*session.ctx, &resolve)
        .map_err(|e| e.to_string())
        .internal()
        .context(format!("worker for {}", args.scope))?;
    Ok(Exit::Pass)
}

/// Set in a worker that started itself again to see its GPU by the node's
/// new numbering, so that it does so at most once.
const RENUMBERED: &str = "ROCGATE_WORKER_RENUMBERED";

/// Makes this worker see `mine`, its GPU as numbered now: the parent gave
/// it `ROCR_VISIBLE_DEVICES` by the GPU's ordinal when the run started,
/// which names another GPU once one below it went away. ROCr reads the
/// variable when it initialises, in this process; rocgate sets no variable
/// in a running process (other threads may read the environment), so the
/// worker starts itself again with it set, before any vendor library is
/// loaded. Returns only when nothing needs to change or it already did.
fn see_only(session: &Session, mine: Scope) -> Result<()> {
    use std::os::unix::process::CommandExt;
    let changes = worker_env::worker_env(&session.ctx.facts, mine);
    let current = std::env::var(worker_env::ROCR_FILTER).ok();
    let differs = changes.iter().any(|c| match c {
        worker_env::EnvChange::Set(k, v) => {
            *k == worker_env::ROCR_FILTER && current.as_deref() != Some(v.as_str())
        }
        worker_env::EnvChange::Remove(_) => false,
    });
    if !differs || std::env::var_os(RENUMBERED).is_some() {
        return Ok(());
    }
    let program = std::env::current_exe().map_err(|e| {
        Error::internal(format!(
            "worker for {mine}: failed to find rocgate's own executable: {e}"
        ))
    })?;
    let mut cmd = std::process::Command::new(program);
    cmd.args(std::env::args_os().skip(1)).env(RENUMBERED, "1");
    worker_env::apply(&mut cmd, &changes);
    let e = cmd.exec();
    Err(Error::internal(format!(
        "worker for {mine}: failed to start again to see its GPU as renumbered: {e}"
    )))
}

/// The isolator for a run: workers of this very binary, unless the runtime
/// layers are disabled (a sysroot without --rocm-path), when their checks
/// only report that and need no process.
pub fn isolator(
    session: &Session,
    interrupt: &Arc<AtomicUsize>,
) -> Result<Option<Arc<dyn Isolator>>> {
    if session.ctx.runtime.disabled.is_some() {
        return Ok(None);
    }
    pool(session, interrupt).map(Some)
}

/// The pool that runs isolated checks in workers of this very binary.
pub fn pool(session: &Session, interrupt: &Arc<AtomicUsize>) -> Result<Arc<dyn Isolator>> {
    let program = std::env::current_exe().map_err(|e| {
        Error::internal(format!(
            "failed to find rocgate's own executable to start workers: {e}"
        ))
    })?;
    Ok(Arc::new(
        session
            .worker_pool(&program, Arc::clone(interrupt))
            .internal()?,
    ))
}

/// Executor threads: enough for every GPU's chain to wait on its worker at
/// once, plus the node's.
pub fn threads(gpus: usize) -> usize {
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    cpus.max(gpus + 1).min(256)
}
