//! rocgate end to end: the real `rocgate` binary run on synthetic nodes
//! (written by the fixture builder into temporary directories) and, for the
//! runtime layers, with the fake ROCm libraries simulating their GPUs. One
//! test binary, one module per behaviour; `util` is the one way to write a
//! node, run rocgate, run it with the fakes and wedge a file.
//!
//! Tests run on libtest's threads in parallel: each works in its own
//! temporary directory and gives its environment to the rocgate it starts,
//! never to this process.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../util/mod.rs"]
mod util;

/// Snapshot archives as hostile input, their limits, cleanup and replays.
mod archives;
/// Each check fails when the thing it checks is broken.
mod breaks;
/// The burn-in tier: sustained load, its telemetry and its gates.
mod burnin;
/// `rocgate compare`: regressions named, noise and identity changes not.
mod compare;
/// What each crate may depend on.
mod crate_rules;
/// `rocgate doctor`: the right code and layer, what stops the stack first.
mod doctor;
/// One source of driver rows: the release the reports name is the one the
/// compat check judges.
mod driver_rows;
/// The extended tier's peer-to-peer copies and memory test.
mod extended_tier;
/// The fake ROCm libraries behave as real ROCm releases do.
mod fidelity;
/// The README demo trees under fixtures/nodes are what the builder writes.
mod fixture_trees;
/// `rocgate health` lines, Slurm, the textfile and `fleet report`.
mod fleet;
/// The fleet's drift, outliers, baselines, node lists and diff.
mod fleet_spread;
/// GitHub Actions: the job summary and annotations.
mod github;
/// Insta snapshots of doctor, run and inventory output and the fleet page.
mod golden_outputs;
/// RAS counts, retired pages and the system layer's advice.
mod gpu_health;
/// Files, GPUs and collectives that do not answer.
mod hangs;
/// `rocgate health` as schedulers run it.
mod health;
/// PCIe ACS and IOMMU groups on a stock host.
mod host_isolation;
/// Flags, policy, thresholds and matrix files a user gives.
mod inputs;
/// SIGINT, SIGTERM and SIGKILL during every kind of command.
mod interrupts;
/// The end of a run at a terminal's width, and next steps that paste.
mod layout;
/// XGMI and PCIe peer links and partitions.
mod links;
/// One code explained, the built-in files, exit codes in `--help`,
/// completions and the man page.
mod lookup;
/// The rocblas, miopen and rccl layers.
mod math;
/// The search that narrows a failed all-reduce to its GPUs.
mod narrowing;
/// The RDMA cards beside the GPUs: ports, rates, RoCE, firmware, affinity.
mod network;
/// Node files damaged, garbled or unreadable.
mod parsers;
/// The PCIe link a GPU reaches the host through.
mod pci_links;
/// What a run prints while it goes: a line per check in a CI log, the
/// hung check named while it hangs, live lines on a terminal.
mod progress;
/// amdgpu's RAS as the driver behaves.
mod ras;
/// Report files and terminal output under hostile inputs.
mod reports;
/// `rocgate run`: gating, exit codes, GPU selection, report structure.
mod run;
/// The hsa and hip layers with faults injected into the fakes.
mod runtime;
/// What could not look is unverifiable, never a pass.
mod unverifiable;
/// A GPU that falls off the bus during a run.
mod vanish;
/// The verdict a CI job or scheduler acts on.
mod verdicts;
/// Version coherence across layers and reports.
mod versions;
