//! Running a helper program (`rpm`, `journalctl`, `scontrol`) so that it
//! cannot hang rocgate: its standard output and error are read while it
//! runs (a child that fills a pipe would otherwise stall until the
//! deadline), it runs in a process group of its own, and at the deadline
//! the whole group is killed (a wrapper script's children die with it).

use std::fmt;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use wait_timeout::ChildExt;

/// What a program that ended within its deadline said.
#[derive(Debug)]
pub struct Finished {
    /// How it exited.
    pub status: ExitStatus,
    /// Its standard output, up to the limit asked for.
    pub stdout: Vec<u8>,
    /// Its standard error, up to the limit asked for.
    pub stderr: Vec<u8>,
}

impl Finished {
    /// Standard output as text (invalid UTF-8 replaced).
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// Standard error as text (invalid UTF-8 replaced).
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

/// Why a program gave no [`Finished`]; each names the command as run.
#[derive(Debug)]
pub enum SubprocessError {
    /// It could not be started (not installed, not on PATH, not
    /// executable).
    Spawn {
        /// The command line, `rpm -q amdgpu-dkms`.
        command: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// Waiting for it failed.
    Wait {
        /// The command line.
        command: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// It (or a child holding its output open) did not finish within the
    /// deadline, and its process group was killed.
    TimedOut {
        /// The command line.
        command: String,
        /// The deadline it was given.
        after: Duration,
    },
}

impl fmt::Display for SubprocessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SubprocessError::Spawn { command, source } => write!(
                f,
                "{command} could not start: {source} (is it installed and on PATH?)"
            ),
            SubprocessError::Wait { command, source } => {
                write!(f, "{command}: waiting for it failed: {source}")
            }
            SubprocessError::TimedOut { command, after } => write!(
                f,
                "{command} did not finish within {:.1} s and was killed (what it waits on may be unreachable or wedged)",
                after.as_secs_f64()
            ),
        }
    }
}

impl std::error::Error for SubprocessError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SubprocessError::Spawn { source, .. } | SubprocessError::Wait { source, .. } => {
                Some(source)
            }
            SubprocessError::TimedOut { .. } => None,
        }
    }
}

/// The command line of `command`, for messages: `rpm -q amdgpu-dkms`.
fn shown(command: &Command) -> String {
    std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|s| s.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Reads `pipe` to its end on a thread of its own, keeping the first
/// `limit` bytes and discarding the rest (still reading, so the child
/// never blocks on a full pipe); the bytes arrive on the returned channel.
fn drain(pipe: Option<impl Read + Send + 'static>, limit: usize) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::sync_channel(1);
    let Some(mut pipe) = pipe else {
        let _ = tx.send(Vec::new());
        return rx;
    };
    let spawned = std::thread::Builder::new()
        .name("rocgate-drain".into())
        .spawn(move || {
            let mut kept = Vec::new();
            let mut chunk = vec![0u8; 64 << 10];
            loop {
                match pipe.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => {
                        let room = limit.saturating_sub(kept.len()).min(n);
                        kept.extend_from_slice(&chunk[..room]);
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let _ = tx.send(kept);
        });
    // Without a thread the pipe and the sender are dropped: the run is
    // reported as not finished rather than with output missing.
    drop(spawned);
    rx
}

/// Kills `pid`'s process group (the child and whatever it started).
fn kill_group(child: &mut std::process::Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let _ = child.kill();
}

/// Runs `command` with no standard input, its output and error read while
/// it runs (each kept up to `limit` bytes), in a process group of its own;
/// kills the group and returns [`SubprocessError::TimedOut`] when it has
/// not ended, and closed its output, within `deadline`.
pub fn run(
    command: &mut Command,
    deadline: Duration,
    limit: usize,
) -> Result<Finished, SubprocessError> {
    let until = Instant::now() + deadline;
    let line = shown(command);
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|source| SubprocessError::Spawn {
            command: line.clone(),
            source,
        })?;
    let stdout = drain(child.stdout.take(), limit);
    let stderr = drain(child.stderr.take(), limit);
    let timed_out = || SubprocessError::TimedOut {
        command: line.clone(),
        after: deadline,
    };
    let status = match child.wait_timeout(deadline) {
        Ok(Some(status)) => status,
        Ok(None) => {
            kill_group(&mut child);
            let _ = child.wait();
            return Err(timed_out());
        }
        Err(source) => {
            kill_group(&mut child);
            let _ = child.wait();
            return Err(SubprocessError::Wait {
                command: line,
                source,
            });
        }
    };
    // The child has ended; a process it left behind may still hold the
    // pipes open, so their ends are waited for only until the deadline.
    let collect = |rx: &mpsc::Receiver<Vec<u8>>| {
        rx.recv_timeout(until.saturating_duration_since(Instant::now()))
            .ok()
    };
    match (collect(&stdout), collect(&stderr)) {
        (Some(stdout), Some(stderr)) => Ok(Finished {
            status,
            stdout,
            stderr,
        }),
        _ => {
            kill_group(&mut child);
            Err(timed_out())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Long enough for a loaded machine: the outcomes are asserted, never
    /// the time taken.
    const GENEROUS: Duration = Duration::from_secs(120);

    #[test]
    fn output_larger_than_a_pipe_arrives_whole() {
        let mut sh = Command::new("sh");
        sh.args([
            "-c",
            "head -c 1000000 /dev/zero; head -c 300000 /dev/zero >&2",
        ]);
        let done = run(&mut sh, GENEROUS, 4 << 20).unwrap();
        assert!(done.status.success());
        assert_eq!(done.stdout.len(), 1_000_000);
        assert_eq!(done.stderr.len(), 300_000);
    }

    #[test]
    fn output_past_the_limit_is_read_and_dropped() {
        let mut sh = Command::new("sh");
        sh.args(["-c", "head -c 1000000 /dev/zero"]);
        let done = run(&mut sh, GENEROUS, 1000).unwrap();
        // Read to the end: head was never stopped by a full pipe.
        assert!(done.status.success());
        assert_eq!(done.stdout.len(), 1000);
    }

    #[test]
    fn a_program_past_its_deadline_is_killed_and_named() {
        let mut sleep = Command::new("sleep");
        sleep.arg("1000");
        let e = run(&mut sleep, Duration::from_millis(200), 1024).unwrap_err();
        assert!(
            matches!(&e, SubprocessError::TimedOut { command, .. } if command == "sleep 1000"),
            "{e:?}"
        );
        assert!(e.to_string().contains("sleep 1000 did not finish"), "{e}");
    }

    #[test]
    fn a_child_left_holding_the_output_is_killed_with_its_group() {
        // The shell ends at once; the sleep it started keeps stdout open.
        let mut sh = Command::new("sh");
        sh.args(["-c", "sleep 1000 & exit 0"]);
        let e = run(&mut sh, Duration::from_millis(500), 1024).unwrap_err();
        assert!(matches!(e, SubprocessError::TimedOut { .. }), "{e:?}");
    }

    #[test]
    fn a_missing_program_is_a_spawn_error_naming_it() {
        let mut missing = Command::new("rocgate-no-such-program");
        missing.arg("-q");
        let e = run(&mut missing, GENEROUS, 1024).unwrap_err();
        assert!(matches!(e, SubprocessError::Spawn { .. }), "{e:?}");
        let text = e.to_string();
        assert!(
            text.contains("rocgate-no-such-program -q could not start") && text.contains("PATH"),
            "{text}"
        );
    }

    #[test]
    fn the_exit_status_and_error_output_are_kept() {
        let mut sh = Command::new("sh");
        sh.args(["-c", "echo out; echo err >&2; exit 3"]);
        let done = run(&mut sh, GENEROUS, 1024).unwrap();
        assert_eq!(done.status.code(), Some(3));
        assert_eq!(done.stdout_text(), "out\n");
        assert_eq!(done.stderr_text(), "err\n");
    }
}
