//! SIGINT, SIGTERM and SIGHUP stop every command: no new check starts, the
//! reports are still written, and the exit code says interrupted (130).
//!
//! The handlers are installed when a command starts (`main`), so a signal
//! never finds the default action that would kill rocgate with its unpacked
//! archive left behind. A command polls the flag at its own safe points; one
//! blocked in a system call that does not come back (a write to a pipe
//! nobody reads, a read of a wedged device on the live node) is ended by a
//! watchdog [`GRACE`] after the signal, or at once on a second signal: it
//! removes what the command registered for removal (an unpacked archive, a
//! snapshot's temporary file: `rocgate_harness::signal`) and exits with the
//! interrupted exit code, without running exit handlers that a wedged
//! library could hang.

use crate::error::{Error, Result};
use rocgate::exit::Exit;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The process's one interrupt flag, once registered.
static FLAG: Mutex<Option<Arc<AtomicUsize>>> = Mutex::new(None);

/// The exit code of an interrupted command (128 + SIGINT, as shells
/// report), unless a command documents another.
static EXIT_CODE: AtomicU8 = AtomicU8::new(Exit::Interrupted.code());

/// How long a command may take to stop after a signal before the watchdog
/// ends it: long enough to kill the workers (1 s grace each, in parallel)
/// and write the reports.
pub const GRACE: Duration = Duration::from_secs(10);

/// The signals that stop a command.
const STOPPING: [i32; 3] = [
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGHUP,
];

/// Registers SIGINT, SIGTERM and SIGHUP to store their number in the
/// returned flag, and the watchdog. The flag is the process's one: every
/// caller gets the same, so a signal caught while an archive was unpacking
/// still stops the run. Failing to install them is rocgate's own trouble
/// ([`Exit::Internal`]).
pub fn interrupt_flag() -> Result<Arc<AtomicUsize>> {
    let mut slot = FLAG.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(flag) = slot.as_ref() {
        return Ok(Arc::clone(flag));
    }
    let flag = Arc::new(AtomicUsize::new(0));
    for sig in STOPPING {
        let number = usize::try_from(sig).unwrap_or(2);
        signal_hook::flag::register_usize(sig, Arc::clone(&flag), number).map_err(|e| {
            Error::internal(format!(
                "failed to install the signal handler for signal {sig}: {e}"
            ))
        })?;
    }
    let signals = signal_hook::iterator::Signals::new(STOPPING)
        .map_err(|e| Error::internal(format!("failed to install the signal watchdog: {e}")))?;
    std::thread::Builder::new()
        .name("rocgate-signals".into())
        .spawn(move || watch(signals))
        .map_err(|e| Error::internal(format!("failed to start the signal watchdog: {e}")))?;
    *slot = Some(Arc::clone(&flag));
    Ok(flag)
}

/// Ends the process [`GRACE`] after the first signal, or at the second.
fn watch(mut signals: signal_hook::iterator::Signals) {
    let mut first = true;
    for sig in signals.forever() {
        let number = usize::try_from(sig).unwrap_or(2);
        if first {
            first = false;
            let _ = std::thread::Builder::new()
                .name("rocgate-grace".into())
                .spawn(move || {
                    std::thread::sleep(GRACE);
                    force_exit(number, "did not stop within the grace period");
                });
        } else {
            force_exit(number, "a second signal came");
        }
    }
}

/// Removes what the command registered and exits as interrupted.
fn force_exit(signal: usize, why: &str) -> ! {
    errln!(
        "rocgate: interrupted by {} and {why}: ending now (exit {})",
        rocgate_harness::signal::signal_name(signal),
        interrupted_exit_code()
    );
    rocgate_harness::signal::remove_registered();
    // `exit` runs no Rust destructors, and the standard streams' flush at
    // exit only takes their locks when free, so a thread blocked writing
    // to stdout does not hold it up. The runtime libraries, whose exit
    // handlers could hang, are loaded only in worker processes.
    std::process::exit(i32::from(interrupted_exit_code()))
}

/// The signal that interrupted the process (0 for none, or when no handler
/// was registered, in which case a signal ends the process outright).
pub fn received() -> usize {
    FLAG.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .map_or(0, |f| f.load(Ordering::SeqCst))
}

/// The exit code of a command ended by a signal: 130 unless the command set
/// its own (see [`set_interrupted_exit_code`]).
pub fn interrupted_exit_code() -> u8 {
    EXIT_CODE.load(Ordering::SeqCst)
}

/// Sets the exit code an interrupted command ends with, for a command whose
/// caller documents other codes (a Slurm prolog).
pub fn set_interrupted_exit_code(exit: Exit) {
    EXIT_CODE.store(exit.code(), Ordering::SeqCst);
}
