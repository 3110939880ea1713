//! SIGINT/SIGTERM stop the run: no new check starts and the reports are
//! still written.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

/// The process's one interrupt flag, once registered.
static FLAG: Mutex<Option<Arc<AtomicUsize>>> = Mutex::new(None);

/// Registers SIGINT, SIGTERM and SIGHUP to store their number in the
/// returned flag. The flag is the process's one: every caller gets the same,
/// so a signal caught while an archive was unpacking still stops the run.
pub fn interrupt_flag() -> Result<Arc<AtomicUsize>, String> {
    let mut slot = FLAG.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(flag) = slot.as_ref() {
        return Ok(Arc::clone(flag));
    }
    let flag = Arc::new(AtomicUsize::new(0));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        let number = usize::try_from(sig).unwrap_or(2);
        signal_hook::flag::register_usize(sig, Arc::clone(&flag), number)
            .map_err(|e| format!("failed to install the signal handler for signal {sig}: {e}"))?;
    }
    *slot = Some(Arc::clone(&flag));
    Ok(flag)
}

/// The signal that interrupted the process (0 for none, or when no handler
/// was registered, in which case a signal ends the process outright).
pub fn received() -> usize {
    FLAG.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .map_or(0, |f| f.load(Ordering::SeqCst))
}
