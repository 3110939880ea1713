//! What the benchmarks share: the fixture node and the fake ROCm libraries
//! they run on, and how they summarise repeated timings.

#![allow(dead_code, reason = "each benchmark uses its own part")]

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Writes fixture scenario `name` to `dir/name`; returns its root.
pub fn scenario(dir: &Path, name: &str) -> PathBuf {
    let root = dir.join(name);
    rocgate_fixtures::scenario(name)
        .expect("a scenario of the fixture catalogue")
        .spec
        .write(&root)
        .expect("write the scenario");
    root
}

/// Lays the fake ROCm libraries out under `dir/rocm`; returns that ROCm path.
/// They are built beside the rocgate binary (its dev-dependencies).
pub fn fake_rocm(dir: &Path) -> PathBuf {
    let rocm = dir.join("rocm");
    let profile = Path::new(env!("CARGO_BIN_EXE_rocgate"))
        .parent()
        .expect("the binary's directory");
    rocgate_fixtures::fake_rocm::lay_out(profile, &rocm).expect("lay out the fake ROCm");
    rocm
}

/// The median of `xs` (the upper one of an even count).
pub fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}
