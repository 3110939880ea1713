//! rocgate against the real programs and systems it meets, each of which
//! needs more than cargo: a browser (`html`, and `layout` through chromedriver), the JUnit readers CI systems
//! use (`junit_consumers`), Slurm, Kubernetes' schemas, node_exporter and
//! GitHub Actions' matching (`deploy`), the container image's parser and
//! libraries (`container`), a JSON Schema validator (`schema`), strace (`passive`), FUSE with sysfs semantics
//! (`sysfs`) and Debian's real ROCm runtime (`real_rocm`).
//!
//! A libtest-mimic harness (`harness = false`): a trial whose tool is
//! missing is a failure under `CI=true` and ignored with the reason
//! elsewhere, which libtest's `#[test]` cannot say. Each trial's kind is its
//! module, so `cargo test --test tools sysfs` runs the sysfs trials.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../util/mod.rs"]
mod util;

mod container;
mod deploy;
mod html;
mod junit_consumers;
mod layout;
mod passive;
mod real_rocm;
mod schema;
mod sysfs;

use libtest_mimic::{Arguments, Trial};

/// A module's name, the kind its trials show, and its trials.
type Module = (&'static str, fn() -> Vec<Trial>);

fn main() {
    let modules: [Module; 9] = [
        ("container", container::trials),
        ("deploy", deploy::trials),
        ("html", html::trials),
        ("junit_consumers", junit_consumers::trials),
        ("layout", layout::trials),
        ("passive", passive::trials),
        ("real_rocm", real_rocm::trials),
        ("schema", schema::trials),
        ("sysfs", sysfs::trials),
    ];
    let trials = modules
        .into_iter()
        .flat_map(|(kind, trials)| trials().into_iter().map(move |t| t.with_kind(kind)))
        .collect();
    libtest_mimic::run(&Arguments::from_args(), trials).exit();
}
