//! rocgate's layer suites.
//!
//! [`stack`] names the ROCm layers and their order; [`context`] opens a node
//! (its facts, read by `rocgate-node`, the run's options, thresholds and
//! matrix); [`layers`] holds one module per layer whose checks turn those
//! facts and the vendor libraries' answers into verdicts with findings, from
//! the catalogue in [`findings`]; [`explain`] names the causes behind a
//! run's crashes and hangs.

pub mod compat;
pub mod config_file;
pub mod context;
pub mod explain;
pub mod findings;
pub mod hangs;
pub mod layers;
pub mod reference;
pub mod runtime;
pub mod stack;
pub mod thresholds;
pub mod vendor_messages;
pub mod worker_env;

pub use context::{NodeContext, RunOptions};
pub use layers::registry;

#[cfg(test)]
mod tests {
    /// The suites are a library of checks: the front ends' machinery (test
    /// harnesses, archives, the command line) lives with the front ends.
    #[test]
    fn the_suites_hold_no_front_end() {
        let manifest = include_str!("../Cargo.toml");
        let deps = manifest
            .split("[dependencies]")
            .nth(1)
            .and_then(|rest| rest.split("\n[").next())
            .unwrap_or_default();
        for front_end in ["libtest-mimic", "tar", "zstd", "clap", "rocgate-fixtures"] {
            assert!(
                !deps
                    .lines()
                    .any(|l| l.starts_with(&format!("{front_end}."))),
                "{front_end} in {deps}"
            );
        }
    }
}
