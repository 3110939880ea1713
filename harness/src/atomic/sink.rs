//! The writers behind each destination: a temporary file renamed into
//! place, an append in place, a FIFO or device written through without
//! blocking, this process's own stream.

use super::NEW_FILE_MODE;
use super::resolve::{End, Stream, Through, changed, is_through, open_dir, same_entry};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

/// Opens (creating it with `O_EXCL` or appending) `name` in `dir` without
/// following a link.
pub(super) fn open_at(
    dir: &File,
    name: &OsStr,
    flags: nix::fcntl::OFlag,
    mode: u32,
) -> nix::Result<File> {
    use nix::fcntl::OFlag;
    nix::fcntl::openat(
        dir,
        name,
        flags | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC | OFlag::O_NOCTTY,
        nix::sys::stat::Mode::from_bits_truncate(mode),
    )
    .map(File::from)
}

/// Appends `bytes` to the regular file at `end`, or creates it.
pub(super) fn append_to(end: &End, bytes: &[u8], path: &Path) -> Result<(), String> {
    use nix::fcntl::OFlag;
    let dir = open_dir(end, path)?;
    let flags = match end.meta {
        Some(_) => OFlag::O_WRONLY | OFlag::O_APPEND,
        None => OFlag::O_WRONLY | OFlag::O_APPEND | OFlag::O_CREAT | OFlag::O_EXCL,
    };
    let mut file = open_at(&dir, &end.name, flags, NEW_FILE_MODE).map_err(|e| {
        format!(
            "failed to open {} for {}: {e}; choose another path",
            end.path().display(),
            path.display()
        )
    })?;
    let meta = file
        .metadata()
        .map_err(|e| format!("failed to look at {}: {e}", end.path().display()))?;
    let expected = end.meta.as_ref().map(|m| (m.dev(), m.ino()));
    if !meta.is_file() || expected.is_some_and(|id| id != (meta.dev(), meta.ino())) {
        return Err(changed(&end.path(), path));
    }
    file.write_all(bytes).map_err(|e| {
        format!(
            "failed to write to {}: {e}; free space there or choose another path",
            end.path().display()
        )
    })
}

/// A temporary file beside a report's path, renamed over it by
/// [`TempFile::commit`]; removed when dropped uncommitted (and should the
/// process be ended by force meanwhile).
pub(super) struct TempFile {
    end: End,
    dir: File,
    name: OsString,
    file: File,
    mode: u32,
    committed: bool,
    _registered: crate::signal::Registered,
}

impl TempFile {
    /// A new temporary file in `end`'s directory, which must be the one
    /// `end` was resolved in and still hold what it did.
    pub(super) fn create(end: &End, mode: u32, path: &Path) -> Result<TempFile, String> {
        use nix::fcntl::OFlag;
        let dir = open_dir(end, path)?;
        same_entry(&dir, end, path)?;
        let mut tries = 0u32;
        let (name, file) = loop {
            let name = temp_name(tries);
            match open_at(
                &dir,
                &name,
                OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL,
                0o600,
            ) {
                Ok(f) => break (name, f),
                Err(nix::errno::Errno::EEXIST) if tries < 100 => tries += 1,
                Err(e) => {
                    return Err(format!(
                        "failed to create a temporary file in {} for {}: {e}; the report is written beside its path and renamed into place, so that directory must exist and be writable",
                        end.dir.display(),
                        end.path().display()
                    ));
                }
            }
        };
        let registered = crate::signal::remove_on_forced_exit(&end.dir.join(&name));
        Ok(TempFile {
            end: end.clone(),
            dir,
            name,
            file,
            mode,
            committed: false,
            _registered: registered,
        })
    }

    /// The error for a failed write of the temporary file.
    fn failed(&self, e: &std::io::Error) -> String {
        format!(
            "failed to write the report for {} (temporary file {}): {e}; free space in {} or choose another path",
            self.end.path().display(),
            self.end.dir.join(&self.name).display(),
            self.end.dir.display()
        )
    }

    /// Writes the next piece.
    pub(super) fn write(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.file.write_all(bytes).map_err(|e| self.failed(&e))
    }

    /// Gives the file its mode, syncs it and renames it over the path.
    pub(super) fn commit(mut self, path: &Path) -> Result<(), String> {
        // A temp file starts out private; the report gets the mode of the
        // file it replaces, or one CI's other users can read.
        self.file
            .set_permissions(fs::Permissions::from_mode(self.mode))
            .and_then(|()| self.file.sync_all())
            .map_err(|e| self.failed(&e))?;
        same_entry(&self.dir, &self.end, path)?;
        // Renaming replaces the entry itself, never what a link there leads to.
        nix::fcntl::renameat(
            &self.dir,
            self.name.as_os_str(),
            &self.dir,
            self.end.name.as_os_str(),
        )
        .map_err(|e| {
            format!(
                "failed to move the report into {}: {e}; choose another path",
                self.end.path().display()
            )
        })?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = nix::unistd::unlinkat(
                &self.dir,
                self.name.as_os_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            );
        }
    }
}

/// A temporary file name unlikely to be taken: the process, the time and
/// the attempt.
pub(super) fn temp_name(attempt: u32) -> OsString {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    OsString::from(format!(
        ".rocgate-{}-{nanos:x}-{attempt}",
        std::process::id()
    ))
}

/// Writes `bytes` to this process's own `stream`, which `path` names.
pub(super) fn write_stream(stream: Stream, path: &Path, bytes: &[u8]) -> Result<(), String> {
    let (result, name) = match stream {
        Stream::Stdout => {
            let mut out = std::io::stdout().lock();
            (out.write_all(bytes).and_then(|()| out.flush()), "stdout")
        }
        Stream::Stderr => {
            let mut err = std::io::stderr().lock();
            (err.write_all(bytes).and_then(|()| err.flush()), "stderr")
        }
    };
    result.map_err(|e| {
        format!(
            "failed to write the report to {} (rocgate's {name}): {e}; make sure {name} is read to the end, or choose a file path",
            path.display()
        )
    })
}

/// Opens an existing FIFO or character device for writing through it,
/// without blocking (a FIFO nobody reads fails at once, ENXIO) and checks
/// it is the one `through` found.
pub(super) fn open_through(path: &Path, through: &Through) -> Result<File, String> {
    // Not a controlling terminal for rocgate; no wait for a FIFO's reader.
    let mut flags = nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY | nix::libc::O_CLOEXEC;
    if through.resolved {
        flags |= nix::libc::O_NOFOLLOW;
    }
    let file = OpenOptions::new()
        .write(true)
        .custom_flags(flags)
        .open(&through.open)
        .map_err(|e| {
            if e.raw_os_error() == Some(nix::libc::ENXIO) {
                format!(
                    "failed to open {}: nothing is reading it ({e}); start its reader before rocgate writes the report, or choose a file path",
                    path.display()
                )
            } else {
                format!(
                    "failed to open {} for writing: {e}; choose another path",
                    path.display()
                )
            }
        })?;
    let opened = file
        .metadata()
        .map_err(|e| format!("failed to look at {}: {e}", path.display()))?;
    if (opened.dev(), opened.ino()) != through.id || !is_through(&opened) {
        return Err(changed(&through.open, path));
    }
    Ok(file)
}

/// Writes `bytes` into `file` (opened by [`open_through`]), never waiting
/// longer than `stall_limit` for its reader.
pub(super) fn push_through(
    file: &File,
    path: &Path,
    bytes: &[u8],
    stall_limit: Duration,
) -> Result<(), String> {
    let mut written = 0;
    let mut progressed = Instant::now();
    while written < bytes.len() {
        match (&*file).write(&bytes[written..]) {
            Ok(0) => {
                return Err(format!(
                    "failed to write the report to {}: it took no bytes ({written} of {} written); choose another path",
                    path.display(),
                    bytes.len()
                ));
            }
            Ok(n) => {
                written += n;
                progressed = Instant::now();
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                let left = stall_limit.saturating_sub(progressed.elapsed());
                if left.is_zero() {
                    return Err(format!(
                        "failed to write the report to {}: its reader took nothing for {} s ({written} of {} bytes written); make sure the reader keeps reading, or choose a file path",
                        path.display(),
                        stall_limit.as_secs(),
                        bytes.len()
                    ));
                }
                let wait = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
                let mut fds = [PollFd::new(file.as_fd(), PollFlags::POLLOUT)];
                // An error or a signal only ends this wait; the next write
                // says what happened.
                let _ = poll(&mut fds, PollTimeout::from(wait));
            }
            Err(e) => {
                return Err(format!(
                    "failed to write the report to {}: {e} ({written} of {} bytes written); choose another path",
                    path.display(),
                    bytes.len()
                ));
            }
        }
    }
    Ok(())
}
