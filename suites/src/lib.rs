//! rocgate's layer suites.
//!
//! [`stack`] names the ROCm layers and their order; [`context`] opens a node
//! (its facts, read by `rocgate-node`, the run's options, thresholds and
//! matrix); [`layers`] holds one module per layer whose checks turn those
//! facts and the vendor libraries' answers into verdicts with findings, from
//! the catalogue in [`findings`]; [`explain`] names the causes behind a
//! run's crashes and hangs.

pub mod burnin_peers;
pub mod compat_matrix;
pub mod config_file;
pub mod context;
pub mod explain;
pub mod findings;
pub mod firmware_peers;
pub mod gpu_events;
pub mod hangs;
pub mod layers;
pub mod memory_peaks;
pub mod narrow;
pub mod next_steps;
pub mod reference;
pub mod resets;
pub mod runtime;
pub mod stack;
pub mod thresholds;
pub mod vendor_messages;
pub mod worker_env;

pub use context::{NodeContext, RunOptions};
pub use layers::registry;
