//! Command-line arguments.

use clap::{Args, Parser, Subcommand};
use rocgate_harness::Tier;
use rocgate_node::Sysroot;
use rocgate_node::snapshot::Opened;
use std::path::{Path, PathBuf};

/// Opens a `--sysroot` argument (every command's, `list` included, so all
/// accept and refuse the same archives): `/` without one, a directory as
/// it is, an archive unpacked for as long as the returned value lives.
pub fn open_sysroot(arg: Option<&Path>) -> Result<Opened, String> {
    let Some(path) = arg else {
        return Ok(Opened::plain(Sysroot::live()));
    };
    if !rocgate_node::snapshot::is_archive(path) {
        return rocgate_node::snapshot::open(path, &|| false);
    }
    // Caught from here on, so that a signal ends the command through its
    // normal return, which removes the unpacked directory; an unpack in
    // progress stops at the next entry.
    let interrupt = crate::signals::interrupt_flag()?;
    rocgate_node::snapshot::open(path, &|| {
        interrupt.load(std::sync::atomic::Ordering::SeqCst) != 0
    })
}

/// Layer-by-layer validation of AMD ROCm GPU nodes for CI.
#[derive(Debug, Parser)]
#[command(name = "rocgate", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// rocgate's commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the checks bottom-up and report (exit 0 all passed, 1 a failure,
    /// 2 usage error or a report not written, 130 interrupted).
    Run(RunArgs),
    /// Find the first broken layer, its likely cause and the next step.
    Doctor(DoctorArgs),
    /// One-line health verdict for schedulers and monitoring (exit 0
    /// healthy, 1 unhealthy, 2 unknown); drains and resumes a Slurm node
    /// with --slurm.
    Health(HealthArgs),
    /// Read many nodes' reports together.
    Fleet(FleetArgs),
    /// Show what the node has: GPUs, partitions, driver, kernel.
    Inventory(InventoryArgs),
    /// List the checks that would run.
    List(ListArgs),
    /// Check the node's versions against the compatibility matrix.
    Matrix(MatrixArgs),
    /// Capture what the node layers read into one archive that `--sysroot`
    /// accepts, for diagnosis elsewhere.
    Snapshot(SnapshotArgs),
    /// Compare two runs' JSON results: version changes, checks that stopped
    /// passing, throughputs that fell beyond their tolerance and spread,
    /// error counters that grew (exit 1 on a regression).
    Compare(CompareArgs),
    /// The finding codes rocgate reports: layer, severity, category, meaning
    /// and next step.
    Codes(CodesArgs),
    /// Internal: serve isolated checks for one scope over stdin/stdout.
    #[command(name = "__worker", hide = true)]
    Worker(WorkerArgs),
}

/// Where the node is.
#[derive(Debug, Args)]
pub struct NodeArgs {
    /// Read the node from this directory or `rocgate snapshot` archive (a captured or synthetic node) instead of `/`.
    #[arg(long, value_name = "DIR")]
    pub sysroot: Option<PathBuf>,
    /// Look for ROCm libraries in DIR/lib first (then ROCM_PATH, /opt/rocm, the system loader).
    #[arg(long, value_name = "DIR")]
    pub rocm_path: Option<PathBuf>,
    /// Performance floors and tolerances (TOML) instead of the built-in ones.
    #[arg(long, value_name = "FILE")]
    pub thresholds: Option<PathBuf>,
    /// Compatibility matrix (TOML) instead of the built-in one.
    #[arg(long, value_name = "FILE")]
    pub matrix: Option<PathBuf>,
    /// The site's policy file (TOML: tier, expected GPUs, thresholds,
    /// matrix, timeouts, fail_on, strict, selection, waivers); else
    /// ROCGATE_CONFIG, else /etc/rocgate/rocgate.toml when it exists.
    /// Flags win over the file.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The node's name in every report (JSON `node.hostname`, JUnit suite
    /// names and `hostname`, Prometheus, drain reasons), instead of the
    /// host name; in Kubernetes, the pod's `spec.nodeName`.
    #[arg(long, env = "ROCGATE_NODE_NAME", value_name = "NAME")]
    pub node_name: Option<String>,
    /// Where the host's root filesystem is mounted when rocgate runs in a
    /// container (`-v /:/host:ro`): the host's OS, kernel modules, DKMS and
    /// package records are read there. Default: /host inside a container
    /// when it exists.
    #[arg(long, value_name = "DIR")]
    pub host_root: Option<PathBuf>,
}

impl NodeArgs {
    /// Opens the node: `/`, a directory, or a snapshot archive unpacked
    /// into a temporary directory that the returned value removes when
    /// dropped (keep it until the command is done).
    pub fn open(&self) -> Result<Opened, String> {
        open_sysroot(self.sysroot.as_deref())
    }

    /// The sysroot of a worker process: its parent passes the directory it
    /// unpacked an archive into, never the archive, so the worker neither
    /// unpacks it again nor removes the parent's directory.
    pub fn worker_sysroot(&self) -> Result<Sysroot, String> {
        match &self.sysroot {
            None => Ok(Sysroot::live()),
            Some(p) if rocgate_node::snapshot::is_archive(p) => Err(format!(
                "__worker --sysroot {}: a worker takes the directory its parent unpacked, not an archive",
                p.display()
            )),
            Some(p) => Ok(Sysroot::at(p)),
        }
    }

    /// Run options for this node; the policy file gives the thresholds
    /// and matrix the flags do not.
    pub fn options(
        &self,
        config: &rocgate::config::Config,
        expect_gpus: Option<usize>,
        gpus: Option<&str>,
    ) -> rocgate_suites::RunOptions {
        rocgate_suites::RunOptions {
            expect_gpus: expect_gpus.or(config.expect_gpus()),
            rocm_path: self.rocm_path.clone(),
            thresholds: self.thresholds.clone().or_else(|| config.thresholds()),
            matrix: self.matrix.clone().or_else(|| config.matrix()),
            gpus: gpus.map(str::to_string),
            runtime_off: None,
            node_name: self.node_name.clone().filter(|n| !n.trim().is_empty()),
            host_root: self.host_root.clone(),
        }
    }

    /// The site's policy file, if there is one.
    pub fn config(&self) -> Result<rocgate::config::Config, String> {
        rocgate::config::Config::find(self.config.as_deref())
    }
}

/// `rocgate __worker` (started by rocgate itself).
#[derive(Debug, Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    pub node: NodeArgs,
    /// The scope this worker serves (`node`, `gpu3`).
    #[arg(long)]
    pub scope: String,
    /// As for `run`.
    #[arg(long)]
    pub expect_gpus: Option<usize>,
    /// As for `run`.
    #[arg(long)]
    pub gpus: Option<String>,
    /// The thresholds and matrix as the parent parsed them (JSON written
    /// by the parent), instead of re-reading the user's files.
    #[arg(long, value_name = "FILE")]
    pub worker_config: Option<PathBuf>,
    /// The identity of the GPU a GPU scope names, as the parent discovered
    /// it (`ADDRESS[,gpu_id=N][,unique_id=0xN]`): the worker checks the GPU
    /// that holds it now, whatever its index.
    #[arg(long, value_name = "ID")]
    pub gpu_identity: Option<String>,
}

/// Which checks run on which GPUs.
#[derive(Debug, Args)]
pub struct SelectArgs {
    /// How deep to go: passive (files only: safe beside running jobs),
    /// quick (default), standard or extended.
    #[arg(long)]
    pub tier: Option<Tier>,
    /// GPUs to check: inventory indices (0,3) or PCI addresses (0000:05:00.0).
    #[arg(long, value_name = "LIST")]
    pub gpus: Option<String>,
    /// Fail the GPU count check when fewer than N GPUs are on the PCI bus.
    #[arg(long, value_name = "N")]
    pub expect_gpus: Option<usize>,
    #[command(flatten)]
    pub checks: ChecksArgs,
}

impl ChecksArgs {
    /// The plan of `session`'s checks at `tier` over `gpus`, with what this
    /// selection (else the policy file's) leaves out marked.
    pub fn plan<'s>(
        &self,
        session: &'s rocgate::session::Session,
        config: &rocgate::config::Config,
        gpus: &[u32],
        tier: Tier,
    ) -> Result<rocgate_harness::Plan<'s, rocgate_suites::NodeContext>, String> {
        let selection = config.selection(&self.only, &self.skip, &session.registry)?;
        session.plan_selected(gpus, tier, &selection)
    }
}

impl VerdictArgs {
    /// `(strict, fail_on_warn)`: the flags, else the policy file's.
    pub fn resolve(&self, config: &rocgate::config::Config) -> (bool, bool) {
        let strict = self.strict || config.strict().unwrap_or(false);
        let fail_on = self.fail_on.or(config.fail_on()).unwrap_or_default();
        (strict, fail_on == rocgate::config::FailOn::Warn)
    }
}

/// Which checks of the tier run.
#[derive(Debug, Args)]
pub struct ChecksArgs {
    /// Run only these checks: check ids (hip::memtest), globs ('hip::*')
    /// or layer names (rccl); repeatable or comma-separated. The others are
    /// reported skipped (not-configured), never left out of the reports.
    #[arg(long, value_name = "CHECKS")]
    pub only: Vec<String>,
    /// Do not run these checks (as for --only).
    #[arg(long, value_name = "CHECKS")]
    pub skip: Vec<String>,
}

/// What makes a run fail, beyond its faults.
#[derive(Debug, Args)]
pub struct VerdictArgs {
    /// `fail` (default: failures, timeouts and crashes fail the run) or
    /// `warn` (warnings fail it too).
    #[arg(long, value_name = "SEVERITY")]
    pub fail_on: Option<rocgate::config::FailOn>,
    /// Fail the run when a check could not verify what it checks (an
    /// unverifiable skip: an unreadable kernel log, no code object for a
    /// GPU, hidden KFD nodes, an unknown driver release).
    #[arg(long, env = "ROCGATE_STRICT", value_parser = boolish)]
    pub strict: bool,
}

/// `rocgate run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub node: NodeArgs,
    #[command(flatten)]
    pub select: SelectArgs,
    #[command(flatten)]
    pub reports: ReportArgs,
    /// Run every selected check even when a check below it failed.
    #[arg(long)]
    pub no_gate: bool,
    /// Multiply every check's timeout (slow or loaded nodes); 0.01 to 1000
    /// (default 1).
    #[arg(long, value_name = "FACTOR", value_parser = timeout_scale)]
    pub timeout_scale: Option<f64>,
    /// Give one check its own timeout, in seconds, instead of its scaled
    /// default (`--timeout rccl::allreduce=600`); repeatable.
    #[arg(long = "timeout", value_name = "CHECK=SECONDS")]
    pub timeouts: Vec<String>,
    #[command(flatten)]
    pub verdict: VerdictArgs,
    /// Print only the summary and failures.
    #[arg(long, short)]
    pub quiet: bool,
    /// Inside GitHub Actions (GITHUB_ACTIONS=true), do not write the job
    /// summary or the `::error`/`::warning` annotations.
    #[arg(long)]
    pub no_github: bool,
}

/// Where a run's reports go.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Write JUnit XML here: a file is replaced atomically, a FIFO or
    /// character device is written through, a symlink is followed, and
    /// `/dev/stdout` joins rocgate's own output.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Write JSON results here (as for `--junit`; not the same file, unless
    /// a character device such as `/dev/null`).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write a Prometheus textfile here for node_exporter's textfile
    /// collector (`DIR/rocgate.prom`; replaced atomically, no timestamps).
    #[arg(long, value_name = "FILE")]
    pub prom: Option<PathBuf>,
    /// Write a self-contained HTML page here (the GPUs x layers grid, the
    /// likely cause, measurements, every check's details; no script, no
    /// request to any address).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// `rocgate health`.
#[derive(Debug, Args)]
pub struct HealthArgs {
    #[command(flatten)]
    pub node: NodeArgs,
    #[command(flatten)]
    pub select: SelectArgs,
    /// Seconds the whole check may take (default 50: Slurm kills a health
    /// check at 60 s); checks still running then are cut short and, unless
    /// a fault was already found, the verdict is unknown.
    #[arg(long, value_name = "SECONDS", value_parser = budget)]
    pub budget: Option<f64>,
    /// The longest any one check may take, in seconds (default: a third of
    /// the budget), so that a hung GPU times out, and is named, within the
    /// budget instead of leaving the verdict unknown.
    #[arg(long, value_name = "SECONDS", value_parser = budget)]
    pub check_timeout: Option<f64>,
    /// Act as Slurm's HealthCheckProgram: drain this node (SLURMD_NODENAME,
    /// else the host name) with a `rocgate:` reason when unhealthy, resume
    /// it when healthy if rocgate drained it; never touch a reason someone
    /// else set, never drain on unknown.
    #[arg(long)]
    pub slurm: bool,
    /// Act as a Slurm prolog: check only the job's GPUs (SLURM_JOB_GPUS,
    /// Slurm's numbers, matched to GPUs by PCI bus id as Slurm numbers them;
    /// else ROCR_VISIBLE_DEVICES), call no Slurm command, exit 1 only for a
    /// node fault (a GPU the job was given that is not there included) and
    /// 0 otherwise (an unknown verdict, a signal), and say why on stderr for
    /// the job's log.
    #[arg(long, conflicts_with_all = ["slurm", "slurm_epilog", "gpus"])]
    pub slurm_prolog: bool,
    /// As `--slurm-prolog`, after the job.
    #[arg(long, conflicts_with_all = ["slurm", "gpus"])]
    pub slurm_epilog: bool,
    #[command(flatten)]
    pub verdict: VerdictArgs,
    #[command(flatten)]
    pub reports: ReportArgs,
}

/// `rocgate fleet`.
#[derive(Debug, Args)]
pub struct FleetArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: FleetAction,
}

/// `rocgate fleet` actions.
#[derive(Debug, Subcommand)]
pub enum FleetAction {
    /// Many nodes' `rocgate run --json` reports as one table: nodes by
    /// layers, failures by code, the nodes to drain (exit 0 every node
    /// passed, 1 one failed, 2 a report unreadable).
    Report(FleetReportArgs),
}

/// `rocgate fleet report`.
#[derive(Debug, Args)]
pub struct FleetReportArgs {
    /// Run reports, or directories of them (every `*.json` inside).
    #[arg(required = true, value_name = "FILE|DIR")]
    pub inputs: Vec<PathBuf>,
    /// markdown (for people and CI job summaries), json, or html (one
    /// self-contained page).
    #[arg(long, default_value = "markdown", value_parser = ["markdown", "json", "html"])]
    pub format: String,
}

/// `rocgate doctor`.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    #[command(flatten)]
    pub node: NodeArgs,
    /// Expect at least N GPUs on the PCI bus.
    #[arg(long, value_name = "N")]
    pub expect_gpus: Option<usize>,
    /// How deep to look: passive (files only), quick (to a HIP kernel,
    /// the default), standard (+ math libraries and collectives) or
    /// extended (+ performance floors).
    #[arg(long)]
    pub tier: Option<Tier>,
    #[command(flatten)]
    pub checks: ChecksArgs,
    #[command(flatten)]
    pub verdict: VerdictArgs,
    /// Print the diagnosis as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `rocgate inventory`.
#[derive(Debug, Args)]
pub struct InventoryArgs {
    #[command(flatten)]
    pub node: NodeArgs,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `rocgate list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Tier to list (default quick; the policy file's tier when it has
    /// one).
    #[arg(long)]
    pub tier: Option<Tier>,
    /// List every tier with what it runs.
    #[arg(long, conflicts_with = "tier")]
    pub tiers: bool,
    #[command(flatten)]
    pub checks: ChecksArgs,
    /// The site's policy file, as for `run`.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Expand per-GPU checks over this node's GPUs and print test ids; a
    /// directory or `rocgate snapshot` archive, as for the other commands.
    #[arg(long, value_name = "DIR")]
    pub sysroot: Option<PathBuf>,
}

/// `rocgate compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Results before the change (`rocgate run --json`).
    pub before: PathBuf,
    /// Results after the change.
    pub after: PathBuf,
    /// text, or markdown for a pull-request comment or a CI job summary.
    #[arg(long, default_value = "text", value_parser = ["text", "markdown"])]
    pub format: String,
    /// How far any throughput may fall before it counts (0.05 = 5%), for
    /// every metric family alike; without it, each family's tolerance
    /// from the thresholds' `[compare]` table.
    #[arg(long)]
    pub tolerance: Option<f64>,
    /// Thresholds file (TOML) whose `[compare]` table sets the tolerances
    /// per metric family, instead of the built-in one.
    #[arg(long, value_name = "FILE")]
    pub thresholds: Option<PathBuf>,
}

/// `rocgate codes`.
#[derive(Debug, Args)]
pub struct CodesArgs {
    /// text, markdown (FINDINGS.md) or json.
    #[arg(long, default_value = "text", value_parser = ["text", "markdown", "json"])]
    pub format: String,
}

/// `rocgate matrix`.
#[derive(Debug, Args)]
pub struct MatrixArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: MatrixAction,
}

/// `rocgate matrix` actions.
#[derive(Debug, Subcommand)]
pub enum MatrixAction {
    /// The node's combination against the matrix (exit 0 supported, 1 not, 2 bad matrix).
    Check(MatrixCheckArgs),
}

/// `rocgate matrix check`.
#[derive(Debug, Args)]
pub struct MatrixCheckArgs {
    #[command(flatten)]
    pub node: NodeArgs,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `rocgate snapshot`.
#[derive(Debug, Args)]
pub struct SnapshotArgs {
    #[command(flatten)]
    pub node: NodeArgs,
    /// The archive to write (`node17.tar.zst`).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Replace serial numbers and the host name, consistently.
    #[arg(long)]
    pub redact: bool,
}

/// Parses `--budget`: seconds from 1 to a day.
/// A boolean option's value, as from its environment variable: `1`, `true`,
/// `yes`, `on` (and `y`, `t`) or `0`, `false`, `no`, `off` (`n`, `f`), any
/// case; empty (`ROCGATE_STRICT=` exported by a shell file) means unset, so
/// false, rather than an error that would fail every run (and, under a
/// Slurm prolog, drain the node).
fn boolish(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "" | "0" | "n" | "no" | "f" | "false" | "off" => Ok(false),
        "1" | "y" | "yes" | "t" | "true" | "on" => Ok(true),
        _ => Err(format!(
            "'{s}' is not a boolean: use 1/true/yes/on or 0/false/no/off (empty is unset)"
        )),
    }
}

fn budget(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    if v.is_finite() && (1.0..=86_400.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("'{s}' is out of range: use 1 to 86400 seconds"))
    }
}

/// Largest `--timeout-scale`: 1000x turns a 10 s check into almost 3 hours,
/// beyond which a timeout no longer guards anything.
const MAX_TIMEOUT_SCALE: f64 = 1000.0;

/// Parses `--timeout-scale`: a finite factor from 0.01 to 1000.
fn timeout_scale(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number"))?;
    if v.is_finite() && (0.01..=MAX_TIMEOUT_SCALE).contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "'{s}' is out of range: use a factor from 0.01 to {MAX_TIMEOUT_SCALE}"
        ))
    }
}
