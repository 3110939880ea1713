//! `rocgate`: validates an AMD ROCm GPU node layer by layer and reports the
//! first broken layer, its likely cause and the next step.

/// `print!` that never panics: a closed stdout (`rocgate doctor | head`)
/// ends the output, not the command, so the reports are still written. On
/// stderr instead while a report claims stdout (`run --json -`:
/// [`ui::human_on_stderr`]), so the report stays a document of its own.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = if crate::ui::human_on_stderr() {
            write!(std::io::stderr(), $($arg)*)
        } else {
            write!(std::io::stdout(), $($arg)*)
        };
    }};
}

/// `println!` that never panics; see `out!`.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = if crate::ui::human_on_stderr() {
            writeln!(std::io::stderr(), $($arg)*)
        } else {
            writeln!(std::io::stdout(), $($arg)*)
        };
    }};
}

/// `eprintln!` that never panics on a closed stderr.
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod accept_cmd;
mod cli;
mod codes_cmd;
mod compare_cmd;
mod completions_cmd;
mod doctor_cmd;
mod error;
mod fleet_baseline;
mod fleet_cmd;
mod github;
mod health_cmd;
mod history;
mod html;
mod inventory_cmd;
mod list_cmd;
mod matrix_cmd;
mod output;
mod reports;
mod run_cmd;
mod schema_cmd;
mod signals;
mod slurm;
mod slurm_gpus;
mod snapshot_cmd;
mod ui;
mod worker_cmd;

use clap::{CommandFactory, FromArgMatches};
use rocgate::exit::Exit;
use std::process::ExitCode;

/// `rocgate --version`: the release, then which GPUs this build carries
/// kernels for and what built them (a GPU without them has its dispatch
/// checks skipped as unverifiable).
fn long_version() -> String {
    let built: Vec<&str> = rocgate_kernels::CODE_OBJECTS
        .iter()
        .map(|c| c.target)
        .collect();
    let mut text = env!("CARGO_PKG_VERSION").to_string();
    match rocgate_kernels::COMPILER {
        Some(compiler) if !built.is_empty() => text.push_str(&format!(
            "\nGPU kernels (code object v5) for {}\nbuilt by {compiler}",
            built.join(", ")
        )),
        _ => text.push_str(
            "\nno GPU kernels in this build: dispatch checks are skipped as unverifiable",
        ),
    }
    for (target, why) in rocgate_kernels::SKIPPED_TARGETS {
        text.push_str(&format!("\nno kernels for {target}: {why}"));
    }
    text
}

fn main() -> ExitCode {
    let matches = cli::Cli::command()
        .long_version(long_version())
        .get_matches();
    let cli = match cli::Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    // A health check ends with one of its documented codes (0, 1, 2; a
    // prolog's 0 or 1) even when a signal stopped it: Slurm drains a node
    // on any other, and an interrupted check is no fault of the node (the
    // code the watchdog exits with is set by the health command itself).
    let keeps_code = matches!(cli.command, cli::Command::Health(_));
    // Caught from the start, by every command but a worker (whose parent
    // ends it): a signal then always ends rocgate through its own exit
    // path, which removes what the command unpacked, instead of the default
    // action that leaves it behind.
    if !matches!(cli.command, cli::Command::Worker(_)) {
        if let Err(e) = signals::interrupt_flag() {
            errln!("rocgate: {e}");
            // Not a defect of rocgate's to Slurm: health ends 0, 1 or 2.
            let exit = if keeps_code {
                Exit::NoVerdict
            } else {
                Exit::Internal
            };
            return exit.into();
        }
    }
    let result = match cli.command {
        cli::Command::Run(args) => run_cmd::run(&args),
        cli::Command::Doctor(args) => doctor_cmd::run(&args),
        cli::Command::Health(args) => health_cmd::run(&args),
        cli::Command::Fleet(args) => fleet_cmd::run(&args),
        cli::Command::Inventory(args) => inventory_cmd::run(&args),
        cli::Command::List(args) => list_cmd::run(&args),
        cli::Command::Compare(args) => compare_cmd::run(&args),
        cli::Command::Codes(args) => codes_cmd::run(&args),
        cli::Command::Matrix(args) => matrix_cmd::run(&args),
        cli::Command::Thresholds(args) => matrix_cmd::show_thresholds(&args),
        cli::Command::Snapshot(args) => snapshot_cmd::run(&args),
        cli::Command::Accept(args) => accept_cmd::run(&args),
        cli::Command::Completions(args) => completions_cmd::completions(&args),
        cli::Command::Man(args) => completions_cmd::man(&args),
        cli::Command::Schema(args) => schema_cmd::run(&args),
        cli::Command::Worker(args) => worker_cmd::run(&args),
    };
    // The command has returned, so whatever it owned (an archive's unpacked
    // directory) is gone. A signal it caught to get here still ends it as
    // interrupted, whatever it was doing.
    let interrupted = signals::received() != 0;
    match result {
        Ok(_) if interrupted && !keeps_code => ExitCode::from(signals::interrupted_exit_code()),
        Ok(exit) => exit.into(),
        Err(e) => {
            errln!("rocgate: {e}");
            if interrupted {
                ExitCode::from(signals::interrupted_exit_code())
            } else if keeps_code {
                // Health's callers act on 0, 1 and 2 only (Slurm drains on
                // any other): whatever stopped it, it decided nothing.
                Exit::NoVerdict.into()
            } else {
                e.exit().into()
            }
        }
    }
}
