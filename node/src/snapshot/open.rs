//! Opening a `--sysroot` argument: a directory as it is, a snapshot
//! archive unpacked into a temporary directory that is locked while it is
//! used and removed when the command ends (or by the next command, should
//! this one be killed outright).

use super::unpack::{LIMITS, Refusal, walk};
use crate::Sysroot;
use nix::errno::Errno;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

/// Whether `path` is a snapshot archive rather than a sysroot directory:
/// any regular file (through links) is taken for one, and must then be a
/// valid archive.
pub fn is_archive(path: &Path) -> bool {
    path.is_file()
}

/// A `--sysroot` argument opened for reading. For an archive it owns the
/// temporary directory the archive was unpacked into, which is removed when
/// this is dropped: the command keeps it until it is done (its worker
/// processes get the directory, never the archive).
#[derive(Debug)]
pub struct Opened {
    sysroot: Sysroot,
    /// Held, not read: dropping it removes the unpacked directory.
    _unpacked: Option<Unpacked>,
}

/// Names of the directories archives are unpacked into, in the temporary
/// directory: `rocgate-snapshot-PID-XXXXXX`, PID the process that made it.
const UNPACK_PREFIX: &str = "rocgate-snapshot-";

/// A directory an archive was unpacked into, removed when this is dropped.
/// While it lives the directory is locked (`flock`), and registered for
/// removal should a signal end the process by force; a directory left by a
/// process killed outright (SIGKILL) is unlocked, and the next unpack
/// removes it ([`sweep_stale`]).
#[derive(Debug)]
pub struct Unpacked {
    // Fields drop in order: the directory is removed before its lock is
    // released and its registration dropped.
    dir: tempfile::TempDir,
    _lock: Option<nix::fcntl::Flock<std::fs::File>>,
    _registered: rocgate_harness::signal::Registered,
}

impl Unpacked {
    /// The directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// How old an unlocked unpack directory must be before it is taken for one
/// whose process was killed: its maker locks it right after creating it.
const STALE_AFTER: Duration = Duration::from_secs(1);

/// An unlocked unpack directory whose process is still alive (its number
/// reused) is taken for stale after this.
const STALE_ALIVE_AFTER: Duration = Duration::from_secs(60);

/// Removes unpack directories of this user in `tmp` that no live rocgate
/// holds: left by a process killed with SIGKILL, which removes nothing. A
/// directory is taken for stale when its lock is free and, as its maker
/// takes the lock right after creating it, it is older than a second and
/// its process is gone (or older than a minute, the process number being
/// reused). A lock that cannot be tested counts as held.
fn sweep_stale(tmp: &Path) {
    use nix::fcntl::{Flock, FlockArg};
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    let me = nix::unistd::geteuid().as_raw();
    let now = std::time::SystemTime::now();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(UNPACK_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_dir() || meta.uid() != me {
            continue;
        }
        let changed = std::time::UNIX_EPOCH
            + Duration::from_secs(u64::try_from(meta.ctime()).unwrap_or(u64::MAX / 4));
        let age = now.duration_since(changed).unwrap_or_default();
        let gone = matches!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
            Err(Errno::ESRCH)
        );
        if age < STALE_AFTER || (!gone && age < STALE_ALIVE_AFTER) {
            continue;
        }
        let Ok(dir) = std::fs::File::open(&path) else {
            continue;
        };
        // Held while the lock is: no other sweep removes it meanwhile.
        if let Ok(_lock) = Flock::lock(dir, FlockArg::LockExclusiveNonblock) {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// A fresh, locked and registered directory to unpack into.
fn unpack_dir() -> std::io::Result<Unpacked> {
    use nix::fcntl::{Flock, FlockArg};
    let tmp = std::env::temp_dir();
    sweep_stale(&tmp);
    let dir = tempfile::Builder::new()
        .prefix(&format!("{UNPACK_PREFIX}{}-", std::process::id()))
        .tempdir_in(&tmp)?;
    let registered = rocgate_harness::signal::remove_on_forced_exit(dir.path());
    // A file system without flock: the directory is left to the normal
    // removal, and counts as held for every sweep.
    let lock = std::fs::File::open(dir.path())
        .ok()
        .and_then(|f| Flock::lock(f, FlockArg::LockExclusiveNonblock).ok());
    Ok(Unpacked {
        dir,
        _lock: lock,
        _registered: registered,
    })
}

impl Opened {
    /// A sysroot that needs no unpacking (`/` or a directory).
    pub fn plain(sysroot: Sysroot) -> Opened {
        Opened {
            sysroot,
            _unpacked: None,
        }
    }

    /// The sysroot to read the node through.
    pub fn sysroot(&self) -> Sysroot {
        self.sysroot.clone()
    }
}

/// A snapshot archive that was not opened: not readable, damaged, beyond
/// the limits, or refused for what it holds. The message names the archive
/// and what to give instead; its own type, so a caller knows the kind
/// without reading the text (rocgate exits 3 on it).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NotOpened(pub String);

/// Opens a `--sysroot` argument: a directory as it is, a snapshot archive
/// unpacked into a temporary directory that lives as long as the returned
/// value. Every command goes through here, so all accept the same archives
/// and refuse the same ones. `stop` is polled while unpacking (a signal).
pub fn open(arg: &Path, stop: &dyn Fn() -> bool) -> Result<Opened, NotOpened> {
    if !is_archive(arg) {
        return Ok(Opened::plain(Sysroot::at(arg)));
    }
    let dir = extract(arg, stop).map_err(NotOpened)?;
    Ok(Opened {
        sysroot: Sysroot::labelled(dir.path(), arg.display().to_string()),
        _unpacked: Some(dir),
    })
}

/// Unpacks a snapshot (`.tar.zst`, or a plain `.tar`) into a temporary
/// directory that lives as long as the returned guard. Errors name the
/// archive and what is wrong with it. The archive is read twice: first its
/// headers alone, so that one beyond the limits (or with an entry refused
/// from its header) is refused before anything is written, then to unpack,
/// with every check made again on what is read.
pub fn extract(path: &Path, stop: &dyn Fn() -> bool) -> Result<Unpacked, String> {
    let shown = path.display();
    let next = "give a directory or an archive written by `rocgate snapshot --out FILE` (take a new one on the node if this one is damaged)";
    let mut f = std::fs::File::open(path).map_err(|e| format!("failed to open {shown}: {e}"))?;
    let len = f
        .metadata()
        .map_err(|e| format!("failed to read {shown}: {e}"))?
        .len();
    if len == 0 {
        return Err(format!(
            "{shown} is empty (0 bytes), not a snapshot archive: {next}"
        ));
    }
    let mut head = [0u8; 4];
    let n = f
        .read(&mut head)
        .map_err(|e| format!("failed to read {shown}: {e}"))?;
    let zstd_magic = n == 4 && head == [0x28, 0xb5, 0x2f, 0xfd];
    let pass = |writer: Option<&Path>| -> Result<u64, Refusal> {
        let f = std::fs::File::open(path).map_err(|e| format!("failed to open {shown}: {e}"))?;
        if zstd_magic {
            let dec = zstd::Decoder::new(f)
                .map_err(|e| format!("failed to start decompressing {shown}: {e}"))?;
            walk(dec, writer, LIMITS, stop)
        } else {
            walk(f, writer, LIMITS, stop)
        }
    };
    let refused = |r: Refusal| match r {
        Refusal::Interrupted => format!("interrupted while unpacking {shown}"),
        Refusal::Invalid(why) => format!(
            "{shown} is not a usable snapshot archive ({}): {why}; {next}",
            if zstd_magic {
                "zstd-compressed tar"
            } else {
                "not zstd-compressed, so read as a plain tar"
            }
        ),
    };
    pass(None).map_err(refused)?;
    let dir =
        unpack_dir().map_err(|e| format!("failed to create a directory to unpack {shown}: {e}"))?;
    pass(Some(dir.path())).map_err(refused)?;
    Ok(dir)
}
