//! Command-line arguments.

use crate::error::Result;
use crate::output::Output;
use clap::{Args, Parser, Subcommand, ValueEnum};
use rocgate_harness::Tier;
use rocgate_node::Sysroot;
use rocgate_node::snapshot::Opened;
use std::path::{Path, PathBuf};

/// Opens a `--sysroot` argument (every command's, `list` included, so all
/// accept and refuse the same archives): `/` without one, a directory as
/// it is, an archive unpacked for as long as the returned value lives.
pub fn open_sysroot(arg: Option<&Path>) -> Result<Opened> {
    let Some(path) = arg else {
        return Ok(Opened::plain(Sysroot::live()));
    };
    if !rocgate_node::snapshot::is_archive(path) {
        return Ok(rocgate_node::snapshot::open(path, &|| false)?);
    }
    // Caught from here on, so that a signal ends the command through its
    // normal return, which removes the unpacked directory; an unpack in
    // progress stops at the next entry.
    let interrupt = crate::signals::interrupt_flag()?;
    rocgate_node::snapshot::open(path, &|| {
        interrupt.load(std::sync::atomic::Ordering::SeqCst) != 0
    })
    .map_err(Into::into)
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
    /// Run the checks bottom-up, per GPU in parallel, and report.
    #[command(after_help = rocgate::exit::Exit::help_table())]
    Run(RunArgs),
    /// Find the first broken layer, its likely cause and the next step.
    #[command(after_help = rocgate::exit::Exit::help_table())]
    Doctor(DoctorArgs),
    /// One-line health verdict for schedulers and monitoring (exit 0
    /// healthy, 1 unhealthy, 2 unknown); drains and resumes a Slurm node
    /// with --slurm.
    #[command(after_help = rocgate::exit::Exit::health_help_table())]
    Health(HealthArgs),
    /// Read many nodes' reports together.
    #[command(after_help = rocgate::exit::Exit::help_table())]
    Fleet(FleetArgs),
    /// Show what the node has: GPUs, partitions, driver, kernel.
    #[command(after_help = rocgate::exit::Exit::help_table())]
    Inventory(InventoryArgs),
    /// List the checks that would run.
    #[command(after_help = rocgate::exit::Exit::help_table())]
    List(ListArgs),
    /// Check the node's versions against the compatibility matrix, or print
    /// the built-in one.
    #[command(after_help = rocgate::exit::Exit::help_table())]
    Matrix(MatrixArgs),
    /// Print the built-in thresholds (floors and compare tolerances), to
    /// copy and edit as a site's `--thresholds` file.
    #[command(after_help = rocgate::exit::Exit::help_table())]
    Thresholds(ThresholdsArgs),
    /// Accept a new node: the tiers in order up to a burn-in (stopping at
    /// the first that fails), every report and the node's snapshot in one
    /// archive named by node and date.
    #[command(after_help = rocgate::exit::Exit::help_table())]
    Accept(AcceptArgs),
    /// Capture what the node layers read into one archive that `--sysroot`
    /// accepts, for diagnosis elsewhere.
    #[command(after_help = rocgate::exit::Exit::help_table())]
    Snapshot(SnapshotArgs),
    /// Compare two runs' JSON results: version changes, checks that stopped
    /// passing, throughputs that fell beyond their tolerance and spread,
    /// error counters that grew (exit 1 on a regression).
    #[command(after_help = rocgate::exit::Exit::help_table())]
    Compare(CompareArgs),
    /// The finding codes rocgate reports: layer, severity, category, meaning
    /// and next step.
    #[command(after_help = rocgate::exit::Exit::help_table())]
    Codes(CodesArgs),
    /// Print a shell's completion script (bash, zsh, fish, elvish,
    /// powershell) for `rocgate`.
    Completions(CompletionsArgs),
    /// Print the man page (roff): rocgate(1), or rocgate-COMMAND(1).
    Man(ManArgs),
    /// Print the JSON Schema (draft 2020-12) of a JSON document rocgate
    /// writes, to validate reports with any JSON Schema tool.
    Schema(SchemaArgs),
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
    /// How far back the kernel log's GPU and PCIe events are judged:
    /// `boot`, `last-run` (since the last run in the history) or a window
    /// such as `15m`, `24h`, `7d`; default `boot`, for `health` `last-run`.
    /// Events before it are reported as history (a warning), not as faults.
    #[arg(long, value_name = "WINDOW")]
    pub since: Option<rocgate_suites::gpu_events::Since>,
    /// Where the node's last runs are kept (`off`: nowhere); default
    /// /var/lib/rocgate/history for root, else
    /// $XDG_STATE_HOME/rocgate/history; a --sysroot replay keeps none
    /// unless this names a directory.
    #[arg(long, env = "ROCGATE_HISTORY_DIR", value_name = "DIR")]
    pub history_dir: Option<PathBuf>,
}

impl NodeArgs {
    /// These arguments as a command line gives them, for a child rocgate.
    pub fn argv(&self) -> Vec<std::ffi::OsString> {
        let mut argv: Vec<std::ffi::OsString> = Vec::new();
        let paths = [
            ("--sysroot", &self.sysroot),
            ("--rocm-path", &self.rocm_path),
            ("--thresholds", &self.thresholds),
            ("--matrix", &self.matrix),
            ("--config", &self.config),
            ("--host-root", &self.host_root),
            ("--history-dir", &self.history_dir),
        ];
        for (flag, value) in paths {
            if let Some(v) = value {
                argv.extend([flag.into(), v.clone().into_os_string()]);
            }
        }
        if let Some(n) = &self.node_name {
            argv.extend(["--node-name".into(), n.into()]);
        }
        if let Some(s) = &self.since {
            argv.extend(["--since".into(), s.to_string().into()]);
        }
        argv
    }

    /// Opens the node: `/`, a directory, or a snapshot archive unpacked
    /// into a temporary directory that the returned value removes when
    /// dropped (keep it until the command is done).
    pub fn open(&self) -> Result<Opened> {
        open_sysroot(self.sysroot.as_deref())
    }

    /// The sysroot of a worker process: its parent passes the directory it
    /// unpacked an archive into, never the archive, so the worker neither
    /// unpacks it again nor removes the parent's directory.
    pub fn worker_sysroot(&self) -> Result<Sysroot> {
        match &self.sysroot {
            None => Ok(Sysroot::live()),
            Some(p) if rocgate_node::snapshot::is_archive(p) => Err(format!(
                "__worker --sysroot {}: a worker takes the directory its parent unpacked, not an archive",
                p.display()
            )
            .into()),
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
            burnin: None,
            gpu_holders: rocgate_suites::context::GpuHolders::default(),
            since: self.since_or(rocgate_suites::gpu_events::Since::Boot),
        }
    }

    /// `--since`, else `default`, with `last-run` resolved against the
    /// node's history.
    pub fn since_or(
        &self,
        default: rocgate_suites::gpu_events::Since,
    ) -> rocgate_suites::gpu_events::Since {
        crate::history::resolve(
            self.since.unwrap_or(default),
            self.history(self.sysroot.is_none()).as_ref(),
        )
    }

    /// The node's history, as these arguments and the node (`live`) say.
    pub fn history(&self, live: bool) -> Option<crate::history::History> {
        crate::history::History::locate(self.history_dir.as_deref(), live)
    }

    /// The site's policy file, if there is one.
    pub fn config(&self) -> Result<rocgate::config::Config> {
        Ok(rocgate::config::Config::find(self.config.as_deref())?)
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

/// The burn-in's `--duration`: a span from 5 s to 7 days. Under a minute is
/// a smoke test of the burn-in itself, not a burn-in.
fn burnin_duration(text: &str) -> std::result::Result<std::time::Duration, String> {
    let d = rocgate_suites::gpu_events::span(text)?;
    if d < std::time::Duration::from_secs(5) || d > std::time::Duration::from_secs(7 * 86_400) {
        return Err(format!("{text:?}: give a duration from 5s to 7d"));
    }
    Ok(d)
}

/// Which checks run on which GPUs.
#[derive(Debug, Args)]
pub struct SelectArgs {
    /// How deep to go: passive (files only: safe beside running jobs),
    /// quick (default), standard, extended or burnin (sustained load for
    /// --duration); `rocgate list --tiers` says what each runs.
    #[arg(long)]
    pub tier: Option<Tier>,
    /// How long the burn-in tier loads every GPU: `90s`, `30m` (default),
    /// `24h`, up to `7d`.
    #[arg(long, value_name = "SPAN", value_parser = burnin_duration)]
    pub duration: Option<std::time::Duration>,
    /// GPUs to check: inventory indices (0,3), PCI addresses (0000:05:00.0)
    /// or serials (0x1d2a3f4000000000, as `rocgate inventory` prints them).
    #[arg(long, value_name = "LIST")]
    pub gpus: Option<String>,
    /// Fail the GPU count check when fewer than N GPUs are on the PCI bus.
    #[arg(long, value_name = "N")]
    pub expect_gpus: Option<usize>,
    #[command(flatten)]
    pub checks: ChecksArgs,
}

impl SelectArgs {
    /// How long sustained checks run beyond their own time at `tier`: the
    /// burn-in's `--duration` (default 30 min) in the burn-in tier; a
    /// `--duration` for another tier is a usage error, not ignored.
    pub fn sustain(&self, tier: Tier) -> Result<std::time::Duration> {
        match (tier, self.duration) {
            (Tier::Burnin, d) => {
                Ok(d.unwrap_or(rocgate_suites::layers::hip::burnin::DEFAULT_DURATION))
            }
            (_, None) => Ok(std::time::Duration::ZERO),
            (other, Some(_)) => Err(crate::error::Error::usage(format!(
                "--duration is how long the burn-in tier loads the GPUs; the {other} tier has none (add --tier burnin)"
            ))),
        }
    }
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
    ) -> Result<rocgate_harness::Plan<'s, rocgate_suites::NodeContext>> {
        let selection = config.selection(&self.only, &self.skip, &session.registry)?;
        Ok(session.plan_selected(gpus, tier, &selection)?)
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
    /// How progress shows on stderr while the run goes: `auto` draws live
    /// lines per GPU on a terminal and prints a line per finished check
    /// anywhere else (a CI log); `none` prints nothing until the end, as
    /// `--quiet` does.
    #[arg(long, value_enum, value_name = "HOW", default_value_t)]
    pub progress: crate::ui::progress::ProgressMode,
    /// With progress as lines: the longest silence while checks run before
    /// a line names them, in seconds, so CI no-output timeouts see life.
    #[arg(long, value_name = "SECONDS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub heartbeat: u64,
    /// Inside GitHub Actions (GITHUB_ACTIONS=true), do not write the job
    /// summary or the `::error`/`::warning` annotations.
    #[arg(long)]
    pub no_github: bool,
}

/// Where a run's reports go.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Write JUnit XML here: a file is replaced atomically, a FIFO or
    /// character device is written through, a symlink is followed; `-`
    /// prints it on stdout alone (`run` then prints its own output on
    /// stderr), and `/dev/stdout` joins rocgate's own output.
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
    /// A thresholds file whose floors come from the healthy fleet: per GPU
    /// model, partition mode and metric, the fleet's median less a margin
    /// of its spread, each row saying how many nodes it came from; give it
    /// to `rocgate run --thresholds`.
    Baseline(FleetBaselineArgs),
}

/// The reports a fleet command reads, and how it judges drift and
/// outliers.
#[derive(Debug, Args)]
pub struct FleetReadArgs {
    /// Run reports, or directories of them (every `*.json` inside).
    #[arg(required = true, value_name = "FILE|DIR")]
    pub inputs: Vec<PathBuf>,
    /// A value is an outlier when it lies more than K robust standard
    /// deviations (1.4826 MAD) on its metric's bad side of the healthy
    /// nodes' median (default 4, or the policy file's `[fleet]
    /// outlier_mads`) ...
    #[arg(long, value_name = "K", value_parser = positive)]
    pub outlier_mads: Option<f64>,
    /// ... and at least this share of the median from it (default 0.05:
    /// 5% slower; `[fleet] outlier_shortfall`).
    #[arg(long, value_name = "SHARE", value_parser = below_one)]
    pub outlier_shortfall: Option<f64>,
    /// A component the site expects mixed across the fleet (a rolling
    /// upgrade), as the drift table names it or a glob: `rocm`, `"*
    /// vbios"`. Nodes that differ in it are listed, not warned of.
    /// Repeatable; added to the policy file's `[fleet] mixed`.
    #[arg(long = "mixed", value_name = "COMPONENT")]
    pub mixed: Vec<String>,
    /// The site's policy file (its `[fleet]` table); else ROCGATE_CONFIG,
    /// else /etc/rocgate/rocgate.toml when it exists.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

/// A positive, finite number.
fn positive(value: &str) -> std::result::Result<f64, String> {
    match value.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("{value:?} is not a positive number: give e.g. 4")),
    }
}

/// A share from 0 to below 1.
fn below_one(value: &str) -> std::result::Result<f64, String> {
    match value.parse::<f64>() {
        Ok(v) if (0.0..1.0).contains(&v) => Ok(v),
        _ => Err(format!(
            "{value:?} is not a share from 0 to below 1: give e.g. 0.05 for 5%"
        )),
    }
}

/// `rocgate fleet baseline`.
#[derive(Debug, Args)]
pub struct FleetBaselineArgs {
    #[command(flatten)]
    pub read: FleetReadArgs,
    /// Where to write the thresholds file (`-`: stdout).
    #[arg(long, value_name = "FILE", value_parser = Output::parse)]
    pub out: Output,
    /// Each floor is the healthy nodes' median less K robust standard
    /// deviations (1.4826 MAD) ...
    #[arg(long, value_name = "K", default_value_t = 4.0, value_parser = positive)]
    pub mads: f64,
    /// ... and at least this share below it (DCGM's floors sit near 0.75x
    /// measured, Azure's MI300X ones about 5% below), whichever is lower.
    #[arg(long, value_name = "SHARE", default_value_t = 0.05, value_parser = below_one)]
    pub min_margin: f64,
    /// The least number of healthy nodes a floor is made from.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub min_nodes: usize,
}

/// `rocgate fleet report`.
#[derive(Debug, Args)]
pub struct FleetReportArgs {
    #[command(flatten)]
    pub read: FleetReadArgs,
    /// markdown (for people and CI job summaries), json, or html (one
    /// self-contained page).
    #[arg(long, value_enum, default_value_t = FleetFormat::Markdown)]
    pub format: FleetFormat,
    /// Where to write it (`-`: stdout). The HTML page links each node's
    /// own page (`NODE.html` beside `NODE.json`) relative to this file.
    #[arg(long, value_name = "FILE", default_value = crate::output::STDOUT, value_parser = Output::parse)]
    pub out: Output,
    /// Count report ages to this time (RFC 3339, `2026-12-01T12:00:00Z`)
    /// rather than to now.
    #[arg(long, value_name = "TIME", value_parser = parse_time)]
    pub as_of: Option<chrono::DateTime<chrono::FixedOffset>>,
    /// The previous fleet run's reports (a directory or files): the report
    /// adds the nodes that newly fail, recover, drift or became outliers.
    #[arg(long, value_name = "DIR")]
    pub previous: Vec<PathBuf>,
    /// Write the names of the nodes that passed, one per line, to FILE
    /// (for `sbatch --nodelist`).
    #[arg(long, value_name = "FILE")]
    pub passing: Option<PathBuf>,
    /// Write the names of the nodes that failed or whose report could not
    /// be read (by the file's stem), one per line, to FILE (for `srun
    /// --exclude`).
    #[arg(long, value_name = "FILE")]
    pub failing: Option<PathBuf>,
}

/// An RFC 3339 time, or what it should look like.
fn parse_time(value: &str) -> std::result::Result<chrono::DateTime<chrono::FixedOffset>, String> {
    chrono::DateTime::parse_from_rfc3339(value).map_err(|e| {
        format!("{value:?} is not an RFC 3339 time ({e}): write it as 2026-12-01T12:00:00Z")
    })
}

/// What `fleet report` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FleetFormat {
    /// A table for people and CI job summaries.
    Markdown,
    /// One JSON document for tools.
    Json,
    /// One self-contained HTML page.
    Html,
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
    /// Write the diagnosis as JSON to FILE (`-` or no FILE: print it).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = crate::output::STDOUT, value_parser = Output::parse)]
    pub json: Option<Output>,
}

/// `rocgate inventory`.
#[derive(Debug, Args)]
pub struct InventoryArgs {
    #[command(flatten)]
    pub node: NodeArgs,
    /// Write JSON to FILE (`-` or no FILE: print it).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = crate::output::STDOUT, value_parser = Output::parse)]
    pub json: Option<Output>,
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
    #[arg(long, value_enum, default_value_t = CompareFormat::Text)]
    pub format: CompareFormat,
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

/// What `compare` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CompareFormat {
    /// For a terminal or a log.
    Text,
    /// For a pull-request comment or a CI job summary.
    Markdown,
}

/// `rocgate codes`.
#[derive(Debug, Args)]
pub struct CodesArgs {
    /// One code to explain (`rocgate codes kfd-permission`), as `rustc
    /// --explain` does: what it means, its severity and layers, the next
    /// step, and what the placeholders of the step become.
    #[arg(value_name = "CODE")]
    pub code: Option<String>,
    /// text, markdown (FINDINGS.md) or json.
    #[arg(long, value_enum, default_value_t = CodesFormat::Text)]
    pub format: CodesFormat,
}

/// What `codes` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CodesFormat {
    /// One code per two lines, for a terminal.
    Text,
    /// FINDINGS.md.
    Markdown,
    /// The catalogue as JSON, for tools.
    Json,
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
// Parsed once per process: a variant's size costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
pub enum MatrixAction {
    /// The node's combination against the matrix (exit 0 supported, 1 not, 2 bad matrix).
    Check(MatrixCheckArgs),
    /// Print the built-in matrix (TOML), to copy and edit as a site's
    /// `--matrix` file.
    Show,
}

/// `rocgate completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell (`source <(rocgate completions bash)`).
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `rocgate schema`.
#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// Which document: the run report (`run --json`), `doctor --json`,
    /// `fleet report --format json`, `inventory --json`, `matrix check
    /// --json`, or `codes --format json`.
    #[arg(value_enum, required_unless_present = "out")]
    pub document: Option<SchemaDocument>,
    /// Write every document's schema into DIR (`run.schema.json`, ...)
    /// instead of printing one.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// The JSON documents rocgate writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SchemaDocument {
    /// `rocgate run --json` (schema_version 1).
    Run,
    /// `rocgate doctor --json`.
    Doctor,
    /// `rocgate fleet report --format json`.
    Fleet,
    /// `rocgate inventory --json`.
    Inventory,
    /// `rocgate matrix check --json`.
    Matrix,
    /// `rocgate codes --format json`.
    Codes,
}

/// `rocgate man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// A command's page instead of rocgate(1) (`rocgate man run`).
    pub command: Option<String>,
    /// Write every page into DIR (rocgate.1, rocgate-run.1, ...) instead of
    /// printing one, as a package installs them.
    #[arg(long, value_name = "DIR", conflicts_with = "command")]
    pub out: Option<PathBuf>,
}

/// `rocgate thresholds`.
#[derive(Debug, Args)]
pub struct ThresholdsArgs {
    /// What to do.
    #[command(subcommand)]
    pub action: ThresholdsAction,
}

/// What `rocgate thresholds` does.
#[derive(Debug, Subcommand)]
pub enum ThresholdsAction {
    /// Print the built-in thresholds (TOML).
    Show,
}

/// `rocgate matrix check`.
#[derive(Debug, Args)]
pub struct MatrixCheckArgs {
    #[command(flatten)]
    pub node: NodeArgs,
    /// Write JSON to FILE (`-` or no FILE: print it).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = crate::output::STDOUT, value_parser = Output::parse)]
    pub json: Option<Output>,
}

/// `rocgate accept`.
#[derive(Debug, Args)]
pub struct AcceptArgs {
    #[command(flatten)]
    pub node: NodeArgs,
    /// GPUs to accept (as `run --gpus`); default every GPU.
    #[arg(long, value_name = "LIST")]
    pub gpus: Option<String>,
    /// Fail when fewer than N GPUs are on the PCI bus.
    #[arg(long, value_name = "N")]
    pub expect_gpus: Option<usize>,
    /// How long the burn-in loads every GPU: `90s`, `30m` (default), `24h`.
    #[arg(long, value_name = "SPAN", value_parser = burnin_duration)]
    pub duration: Option<std::time::Duration>,
    /// The directory the archive is written to.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub out: PathBuf,
}

impl AcceptArgs {
    /// The node's arguments, as every command takes them.
    pub fn node_argv(&self) -> Vec<std::ffi::OsString> {
        self.node.argv()
    }

    /// The arguments each tier's `rocgate run` gets besides its tier and
    /// reports.
    pub fn run_argv(&self) -> Vec<std::ffi::OsString> {
        let mut argv = self.node.argv();
        if let Some(g) = &self.gpus {
            argv.extend(["--gpus".into(), g.into()]);
        }
        if let Some(n) = self.expect_gpus {
            argv.extend(["--expect-gpus".into(), n.to_string().into()]);
        }
        argv
    }
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

/// Parses `--budget`: seconds from 1 to a day.
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Parses `rocgate ARGS...`.
    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("rocgate").chain(args.iter().copied()))
    }

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn a_json_flag_prints_without_a_file_and_writes_with_one() {
        let json = |args: &[&str]| match parse(args).map(|c| c.command) {
            Ok(Command::Doctor(a)) => a.json,
            Ok(Command::Inventory(a)) => a.json,
            Ok(Command::Matrix(MatrixArgs {
                action: MatrixAction::Check(a),
            })) => a.json,
            other => panic!("{args:?}: {other:?}"),
        };
        for command in [&["doctor"][..], &["inventory"], &["matrix", "check"]] {
            let with = |extra: &[&str]| {
                let mut args = command.to_vec();
                args.extend_from_slice(extra);
                json(&args)
            };
            assert_eq!(with(&[]), None, "{command:?}");
            assert_eq!(with(&["--json"]), Some(Output::Stdout), "{command:?}");
            assert_eq!(with(&["--json", "-"]), Some(Output::Stdout), "{command:?}");
            assert_eq!(
                with(&["--json", "out.json"]),
                Some(Output::File("out.json".into())),
                "{command:?}"
            );
            assert_eq!(
                with(&["--json=out.json"]),
                Some(Output::File("out.json".into())),
                "{command:?}"
            );
            // A flag after a bare `--json` is a flag, not its file.
            assert_eq!(
                with(&["--json", "--sysroot", "/tmp/n"]),
                Some(Output::Stdout),
                "{command:?}"
            );
            assert!(parse(&[command, &["--json="]].concat()).is_err());
        }
    }

    #[test]
    fn run_and_health_keep_their_report_files() {
        let Ok(Command::Run(run)) =
            parse(&["run", "--json", "r.json", "--junit", "r.xml"]).map(|c| c.command)
        else {
            panic!("run did not parse");
        };
        assert_eq!(run.reports.json.as_deref(), Some(Path::new("r.json")));
        assert_eq!(run.reports.junit.as_deref(), Some(Path::new("r.xml")));
        // A report flag takes its file.
        assert!(parse(&["run", "--json"]).is_err());
        assert!(parse(&["health", "--prom", "x.prom", "--html", "x.html"]).is_ok());
    }

    #[test]
    fn formats_are_the_values_each_command_knows() {
        let fleet = |args: &[&str]| match parse(args).map(|c| c.command) {
            Ok(Command::Fleet(f)) => match f.action {
                FleetAction::Report(r) => Ok(r.format),
                other => panic!("{other:?}"),
            },
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e.kind()),
        };
        assert_eq!(fleet(&["fleet", "report", "d"]), Ok(FleetFormat::Markdown));
        assert_eq!(
            fleet(&["fleet", "report", "d", "--format", "json"]),
            Ok(FleetFormat::Json)
        );
        assert_eq!(
            fleet(&["fleet", "report", "d", "--format", "html"]),
            Ok(FleetFormat::Html)
        );
        assert_eq!(
            fleet(&["fleet", "report", "d", "--format", "text"]),
            Err(clap::error::ErrorKind::InvalidValue)
        );
        let compare = |args: &[&str]| match parse(args).map(|c| c.command) {
            Ok(Command::Compare(c)) => Ok(c.format),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e.kind()),
        };
        assert_eq!(compare(&["compare", "a", "b"]), Ok(CompareFormat::Text));
        assert_eq!(
            compare(&["compare", "a", "b", "--format", "markdown"]),
            Ok(CompareFormat::Markdown)
        );
        assert_eq!(
            compare(&["compare", "a", "b", "--format", "json"]),
            Err(clap::error::ErrorKind::InvalidValue)
        );
        let codes = |args: &[&str]| match parse(args).map(|c| c.command) {
            Ok(Command::Codes(c)) => Ok(c.format),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e.kind()),
        };
        assert_eq!(codes(&["codes"]), Ok(CodesFormat::Text));
        assert_eq!(
            codes(&["codes", "--format", "markdown"]),
            Ok(CodesFormat::Markdown)
        );
        assert_eq!(codes(&["codes", "--format", "json"]), Ok(CodesFormat::Json));
        assert_eq!(
            codes(&["codes", "--format", "html"]),
            Err(clap::error::ErrorKind::InvalidValue)
        );
    }

    #[test]
    fn booleans_read_as_shells_write_them() {
        for yes in ["1", "true", "YES", " on ", "y", "T"] {
            assert_eq!(boolish(yes), Ok(true), "{yes}");
        }
        for no in ["", "0", "false", "No", "OFF", "n", "f"] {
            assert_eq!(boolish(no), Ok(false), "{no}");
        }
        let e = boolish("maybe").unwrap_err();
        assert!(e.contains("'maybe' is not a boolean"), "{e}");
    }

    #[test]
    fn a_budget_is_one_second_to_a_day() {
        assert_eq!(budget("1"), Ok(1.0));
        assert_eq!(budget(" 50 "), Ok(50.0));
        assert_eq!(budget("86400"), Ok(86_400.0));
        for (text, says) in [
            ("0.5", "out of range"),
            ("86401", "out of range"),
            ("inf", "out of range"),
            ("nan", "out of range"),
            ("-5", "out of range"),
            ("fifty", "not a number of seconds"),
            ("", "not a number of seconds"),
        ] {
            let e = budget(text).unwrap_err();
            assert!(e.contains(says), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_timeout_scale_is_a_finite_factor_in_range() {
        assert_eq!(timeout_scale("0.01"), Ok(0.01));
        assert_eq!(timeout_scale("1000"), Ok(MAX_TIMEOUT_SCALE));
        for (text, says) in [
            ("0", "out of range"),
            ("0.001", "out of range"),
            ("1001", "out of range"),
            ("inf", "out of range"),
            ("NaN", "out of range"),
            ("x", "not a number"),
        ] {
            let e = timeout_scale(text).unwrap_err();
            assert!(e.contains(says), "{text:?}: {e}");
        }
    }

    #[test]
    fn the_validators_guard_the_flags_they_parse() {
        assert!(parse(&["health", "--budget", "0"]).is_err());
        assert!(parse(&["health", "--check-timeout", "100000"]).is_err());
        assert!(parse(&["run", "--timeout-scale", "2000"]).is_err());
        // `--strict` is a switch; its variable, ROCGATE_STRICT, is read by `boolish`.
        let Ok(Command::Run(run)) = parse(&["run", "--strict"]).map(|c| c.command) else {
            panic!("run did not parse");
        };
        assert!(run.verdict.strict);
        let Ok(Command::Health(h)) = parse(&["health", "--budget", "20"]).map(|c| c.command) else {
            panic!("health did not parse");
        };
        assert_eq!(h.budget, Some(20.0));
        assert!(
            parse(&["health", "--slurm-prolog", "--slurm"]).is_err(),
            "the prolog is not the health check"
        );
        assert!(parse(&["list", "--tiers", "--tier", "quick"]).is_err());
    }
}
