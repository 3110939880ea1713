//! Every exit code rocgate ends with, in one table (README, "Exit codes"):
//! each command picks the row that says why it ends, never a number.
//!
//! | code | row | meaning |
//! |---|---|---|
//! | 0 | [`Exit::Pass`] | nothing fails the run; no regression; supported |
//! | 1 | [`Exit::Fail`] | a fault of the node; a regression; not supported |
//! | 2 | [`Exit::Usage`] | a usage or configuration error, before anything ran |
//! | 2 | [`Exit::NoVerdict`] | the run decides nothing: rocgate could not see the node, or failed itself in a check |
//! | 3 | [`Exit::NodeIo`] | an archive or a saved report could not be read, or a report, an archive or the output could not be written |
//! | 70 | [`Exit::Internal`] | a defect of rocgate's own stopped the command |
//! | 130 | [`Exit::Interrupted`] | a signal stopped the command (`health` ends with its own codes) |
//!
//! Usage and no verdict share 2: scripts, CI gates and Slurm's wrappers
//! read 2 as "rocgate decided nothing, fix how it was run". Input or output
//! that failed has its own number, so that a job can tell a full disk or an
//! unreadable archive (retry, fix the path) from a wrong flag. `health`
//! keeps its own three codes whatever failed.

use std::process::ExitCode;

/// Why a command ends: one row of the table above.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    /// Nothing fails the run (warnings and waived findings included); a
    /// comparison found no regression; the node's versions are supported.
    Pass,
    /// A fault of the node (or, under `--fail-on warn`, a warning; under
    /// `--strict`, a check that could not verify); a regression; a
    /// combination the matrix does not support.
    Fail,
    /// A usage or configuration error: a flag, a policy, thresholds or
    /// matrix file that cannot be used, found before anything ran.
    Usage,
    /// The run decides nothing about the node: rocgate could not see it
    /// (an `environment` finding) or a check failed for rocgate's own
    /// reason (`internal-error`).
    NoVerdict,
    /// Input or output failed: a snapshot archive or a saved report could
    /// not be read, or a report, an archive or the command's output could
    /// not be written. (A `--sysroot` directory that cannot be opened is a
    /// usage error: the path given is wrong.)
    NodeIo,
    /// A defect of rocgate's own (a document that would not serialise, a
    /// signal handler that would not install) stopped the command.
    Internal,
    /// A signal (SIGINT, SIGTERM, SIGHUP) stopped the command, as a shell
    /// reports SIGINT (128 + 2).
    Interrupted,
}

impl Exit {
    /// Every row, in the table's order.
    pub const ALL: [Exit; 7] = [
        Exit::Pass,
        Exit::Fail,
        Exit::Usage,
        Exit::NoVerdict,
        Exit::NodeIo,
        Exit::Internal,
        Exit::Interrupted,
    ];

    /// The number the process exits with.
    pub const fn code(self) -> u8 {
        match self {
            Exit::Pass => 0,
            Exit::Fail => 1,
            Exit::Usage | Exit::NoVerdict => 2,
            Exit::NodeIo => 3,
            // sysexits.h's EX_SOFTWARE: apart from every code a node or a
            // run can cause.
            Exit::Internal => 70,
            Exit::Interrupted => 130,
        }
    }

    /// What the code means, in the words of the table.
    pub const fn meaning(self) -> &'static str {
        match self {
            Exit::Pass => "nothing fails the run; no regression; supported",
            Exit::Fail => "a fault of the node; a regression; not supported",
            Exit::Usage => "a usage or configuration error, before anything ran",
            Exit::NoVerdict => {
                "no verdict: rocgate could not see the node, or failed itself in a check"
            }
            Exit::NodeIo => {
                "an archive or a saved report could not be read, or a report, an archive or the output could not be written"
            }
            Exit::Internal => "a defect of rocgate's own stopped the command",
            Exit::Interrupted => "a signal stopped the command",
        }
    }

    /// The table as every command's `--help` ends with it.
    pub fn help_table() -> String {
        let mut out = String::from("Exit codes:\n");
        for e in Exit::ALL {
            out.push_str(&format!("  {:>3}  {}\n", e.code(), e.meaning()));
        }
        out.push_str("  (README, \"Exit codes\"; `health` has its own three)");
        out
    }

    /// `health`'s codes, which schedulers act on whatever failed.
    pub fn health_help_table() -> &'static str {
        "Exit codes:\n    0  healthy (warnings pass)\n    1  unhealthy: the line names the lowest failure and every GPU it is on\n    2  unknown: no verdict (rocgate could not see the node, a usage error, an interruption); never drains\n  (an interruption under --slurm-prolog or --slurm-epilog ends 0)"
    }

    /// `Pass` when `ok`, else `Fail`: a verdict in two words.
    pub const fn pass_if(ok: bool) -> Exit {
        if ok { Exit::Pass } else { Exit::Fail }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_codes_scripts_read_stay_as_documented() {
        let codes: Vec<(Exit, u8)> = Exit::ALL.iter().map(|&e| (e, e.code())).collect();
        assert_eq!(
            codes,
            [
                (Exit::Pass, 0),
                (Exit::Fail, 1),
                (Exit::Usage, 2),
                (Exit::NoVerdict, 2),
                (Exit::NodeIo, 3),
                (Exit::Internal, 70),
                (Exit::Interrupted, 130),
            ]
        );
    }

    #[test]
    fn every_row_says_what_it_means() {
        for e in Exit::ALL {
            assert!(!e.meaning().is_empty(), "{e:?}");
        }
        assert_eq!(Exit::pass_if(true), Exit::Pass);
        assert_eq!(Exit::pass_if(false), Exit::Fail);
    }
}
