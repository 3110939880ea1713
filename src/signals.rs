//! SIGINT/SIGTERM stop the run: no new check starts and the reports are
//! still written.

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

/// Registers SIGINT, SIGTERM and SIGHUP to store their number in the
/// returned flag.
pub fn interrupt_flag() -> Result<Arc<AtomicUsize>, String> {
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
    Ok(flag)
}
