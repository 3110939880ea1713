//! How the run's interrupt flag names the signal that set it, and what a
//! process ended by force after a signal removes on its way out. The flag is
//! an `AtomicUsize` holding the signal number (0: not interrupted), shared
//! by the executor, the worker pool and the front ends that install
//! handlers.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

/// The conventional name of a signal number, for messages.
pub fn signal_name(signal: usize) -> String {
    match signal {
        1 => "SIGHUP".into(),
        2 => "SIGINT".into(),
        15 => "SIGTERM".into(),
        n => format!("signal {n}"),
    }
}

/// Paths to remove when the process is ended by force, by registration.
static REGISTERED: Mutex<Vec<(u64, PathBuf)>> = Mutex::new(Vec::new());

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A path (a directory an archive was unpacked into, a temporary file) that
/// [`remove_registered`] removes while this lives. Dropping it unregisters
/// the path; removing it in the normal course is its owner's job.
#[derive(Debug)]
pub struct Registered {
    id: u64,
}

/// Registers `path` for removal should the process be ended by force
/// (a command that did not stop after a signal).
pub fn remove_on_forced_exit(path: &Path) -> Registered {
    let id = NEXT.fetch_add(1, Ordering::SeqCst);
    REGISTERED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((id, path.to_path_buf()));
    Registered { id }
}

impl Drop for Registered {
    fn drop(&mut self) {
        REGISTERED
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(id, _)| *id != self.id);
    }
}

/// Removes every registered path (a directory with what it holds, never
/// following a link in it); for the forced exit.
pub fn remove_registered() {
    remove_paths(take_registered(|_| true));
}

/// Takes the registered paths whose id `chosen` picks out of the registry.
fn take_registered(chosen: impl Fn(u64) -> bool) -> Vec<PathBuf> {
    let mut registered = REGISTERED.lock().unwrap_or_else(PoisonError::into_inner);
    let (taken, kept) = registered.drain(..).partition(|(id, _)| chosen(*id));
    *registered = kept;
    taken.into_iter().map(|(_, p)| p).collect()
}

fn remove_paths(paths: Vec<PathBuf>) {
    for p in paths {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.is_dir() => {
                let _ = std::fs::remove_dir_all(&p);
            }
            Ok(_) => {
                let _ = std::fs::remove_file(&p);
            }
            Err(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_the_signals_a_run_stops_on_and_numbers_the_rest() {
        for (number, name) in [
            (2, "SIGINT"),
            (15, "SIGTERM"),
            (1, "SIGHUP"),
            (10, "signal 10"),
        ] {
            assert_eq!(signal_name(number), name);
        }
    }

    #[test]
    fn registered_paths_are_removed_and_dropped_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let unpacked = dir.path().join("unpacked");
        std::fs::create_dir_all(unpacked.join("sys/a")).unwrap();
        std::fs::write(unpacked.join("sys/a/f"), "x").unwrap();
        let file = dir.path().join("tmp");
        std::fs::write(&file, "x").unwrap();
        let kept = dir.path().join("kept");
        std::fs::write(&kept, "x").unwrap();
        let a = remove_on_forced_exit(&unpacked);
        let b = remove_on_forced_exit(&file);
        let dropped = remove_on_forced_exit(&kept);
        let ours = [a.id, b.id, dropped.id];
        drop(dropped);
        // Only this test's own paths: other tests of this process register
        // the temporary files of the reports they are writing meanwhile.
        remove_paths(take_registered(|id| ours.contains(&id)));
        assert!(!unpacked.exists() && !file.exists() && kept.exists());
    }
}
