//! `cargo test --test host`: rocgate's checks on this machine as test trials
//! (`node.amdgpu.module_live`, `gpu3.kfd.topology_node`, ...). Filters and
//! `--list` work as with any test binary. See `rocgate::cargo_test`
//! for the `ROCGATE_*` variables.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rocgate::cargo_test::{HarnessEnv, trials};

fn main() {
    let args = libtest_mimic::Arguments::from_args();
    let trials = match HarnessEnv::from_env() {
        Ok(mut env) => {
            // Runtime checks run in workers of the rocgate binary, as with `rocgate run`.
            env.worker = Some(env!("CARGO_BIN_EXE_rocgate").into());
            trials(&env)
        }
        Err(e) => vec![libtest_mimic::Trial::test(
            "rocgate.environment",
            move || Err(e.into()),
        )],
    };
    libtest_mimic::run(&args, trials).exit();
}
