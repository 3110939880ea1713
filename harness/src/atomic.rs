//! Writes report files without destroying what the path names.
//!
//! - A regular file, or a path where nothing exists yet, is replaced
//!   atomically: the report goes to a temporary file in the same directory
//!   that is renamed into place, so a reader never sees a half-written one.
//! - A symlink is never replaced: it is followed to its target, which is then
//!   handled by these rules (a regular target is replaced atomically in the
//!   target's directory; a dangling link's target is created there).
//! - A FIFO or a character device (`/dev/null`, `/dev/full`, a terminal) is
//!   written through: opened for writing without being created or truncated,
//!   so `--junit /dev/null` discards the report and leaves `/dev/null` alone.
//!   The open is non-blocking: a FIFO nobody reads fails at once (ENXIO)
//!   instead of hanging the run, and a reader that stops taking bytes for
//!   [`STALL_LIMIT`] ends the write with an error.
//! - What this process's own stdout or stderr already is (`/dev/stdout`
//!   with stdout redirected to a log, a pipe, a socket) is written through
//!   that stream: replacing the log would lose everything printed after the
//!   report, and a socket cannot be opened by path.
//! - A directory, a block device or a socket is refused: writing a report
//!   over a disk is never what was meant.
//!
//! Every error names the path and what to try next.

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How long a reader (of a FIFO, a terminal) may take no bytes before the
/// write gives up on it.
pub const STALL_LIMIT: Duration = Duration::from_secs(30);

/// As many links as Linux follows before ELOOP.
const MAX_LINKS: usize = 40;

/// Mode of a new report: CI reads reports as another user.
const NEW_FILE_MODE: u32 = 0o644;

/// Writes `bytes` to `path`: atomically for a regular file or a new path,
/// through for a FIFO, a character device or this process's own stdout or
/// stderr, following symlinks (see the module documentation).
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    write_within(path, bytes, STALL_LIMIT)
}

/// [`write`], giving up on a FIFO or device reader that takes no bytes for
/// `stall_limit` (short in tests).
fn write_within(path: &Path, bytes: &[u8], stall_limit: Duration) -> Result<(), String> {
    if path.as_os_str().is_empty() {
        return Err("the report path is empty; give the report a file path".to_string());
    }
    match fs::metadata(path) {
        Ok(meta) => {
            let kind = meta.file_type();
            if let Some(stream) = own_stream(&meta) {
                write_stream(stream, path, bytes)
            } else if kind.is_file() {
                // The rename must replace the file the link points at, not
                // the link.
                let target = fs::canonicalize(path).map_err(|e| {
                    format!(
                        "failed to resolve {}: {e}; give the report a plain file path",
                        path.display()
                    )
                })?;
                replace(&target, bytes, meta.permissions().mode() & 0o7777)
            } else if kind.is_fifo() || kind.is_char_device() {
                // The original path is opened, so the kernel follows links
                // itself, including /proc's magic ones (`/proc/PID/fd/N` to
                // another process's pipe).
                write_through(path, bytes, stall_limit)
            } else {
                let what = if kind.is_dir() {
                    "a directory"
                } else if kind.is_block_device() {
                    "a block device"
                } else if kind.is_socket() {
                    "a socket"
                } else {
                    "neither a file, a FIFO nor a character device"
                };
                Err(format!(
                    "{} is {what}; rocgate writes a report to a file, a FIFO or a character device: give it a file path",
                    path.display()
                ))
            }
        }
        Err(e) if e.kind() == ErrorKind::NotFound => {
            replace(&dangling_target(path)?, bytes, NEW_FILE_MODE)
        }
        Err(e) => Err(format!(
            "failed to look at {}: {e}; check the path and its directories' permissions",
            path.display()
        )),
    }
}

/// Where a report written to `path` ends up, for telling whether two paths
/// name one destination: the canonical path when it exists, else the
/// canonical directory joined with the file name a (possibly dangling)
/// symlink chain ends in, else `path` made absolute.
pub fn destination(path: &Path) -> PathBuf {
    if let Ok(p) = fs::canonicalize(path) {
        return p;
    }
    let end = dangling_target(path).unwrap_or_else(|_| path.to_path_buf());
    let absolute = std::path::absolute(&end).unwrap_or(end);
    match (absolute.parent(), absolute.file_name()) {
        (Some(dir), Some(name)) => fs::canonicalize(dir)
            .map(|d| d.join(name))
            .unwrap_or(absolute.clone()),
        _ => absolute,
    }
}

/// The directory `path` is in; `.` for a bare file name.
fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Follows the symlinks at `path` (which leads nowhere) to the path that
/// does not exist: the file to create. A path that is no link is itself.
fn dangling_target(path: &Path) -> Result<PathBuf, String> {
    let mut p = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match fs::symlink_metadata(&p) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let target = fs::read_link(&p).map_err(|e| {
                    format!(
                        "failed to read the symlink {}: {e}; give the report a plain file path",
                        p.display()
                    )
                })?;
                p = directory_of(&p).join(target);
            }
            _ => return Ok(p),
        }
    }
    Err(format!(
        "{} is a chain of more than {MAX_LINKS} symlinks; give the report a plain file path",
        path.display()
    ))
}

/// One of this process's standard output streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stream {
    Stdout,
    Stderr,
}

/// The standard stream of this process that is the file `meta` describes,
/// if any (stdout first, when both go to one place).
fn own_stream(meta: &fs::Metadata) -> Option<Stream> {
    let same = |fd: std::os::fd::BorrowedFd<'_>| {
        // A closed stream has no file to be.
        fd.try_clone_to_owned()
            .map(File::from)
            .and_then(|f| f.metadata())
            .is_ok_and(|m| m.dev() == meta.dev() && m.ino() == meta.ino())
    };
    if same(std::io::stdout().as_fd()) {
        Some(Stream::Stdout)
    } else if same(std::io::stderr().as_fd()) {
        Some(Stream::Stderr)
    } else {
        None
    }
}

/// Writes `bytes` to this process's own `stream`, which `path` names.
fn write_stream(stream: Stream, path: &Path, bytes: &[u8]) -> Result<(), String> {
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

/// Writes a temporary file beside `target` and renames it over `target`.
fn replace(target: &Path, bytes: &[u8], mode: u32) -> Result<(), String> {
    let dir = directory_of(target);
    let mut tmp = tempfile::Builder::new()
        .prefix(".rocgate-")
        .tempfile_in(dir)
        .map_err(|e| {
            format!(
                "failed to create a temporary file in {} for {}: {e}; the report is written beside its path and renamed into place, so that directory must exist and be writable",
                dir.display(),
                target.display()
            )
        })?;
    // A temp file starts out private; the report gets the mode of the file
    // it replaces, or one CI's other users can read.
    tmp.write_all(bytes)
        .and_then(|()| tmp.as_file().set_permissions(fs::Permissions::from_mode(mode)))
        .and_then(|()| tmp.as_file().sync_all())
        .map_err(|e| {
            format!(
                "failed to write the report for {} (temporary file {}): {e}; free space in {} or choose another path",
                target.display(),
                tmp.path().display(),
                dir.display()
            )
        })?;
    tmp.persist(target).map_err(|e| {
        format!(
            "failed to move the report into {}: {}; choose another path",
            target.display(),
            e.error
        )
    })?;
    Ok(())
}

/// Writes `bytes` into an existing FIFO or character device without
/// replacing it, never waiting longer than `stall_limit` for its reader.
fn write_through(path: &Path, bytes: &[u8], stall_limit: Duration) -> Result<(), String> {
    let file = OpenOptions::new()
        .write(true)
        // Not a controlling terminal for rocgate; no wait for a FIFO's reader.
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)
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
    let mut written = 0;
    let mut progressed = Instant::now();
    while written < bytes.len() {
        match (&file).write(&bytes[written..]) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use rocgate_fixtures::hostile::{char_device, is_char_device, is_symlink};
    use std::os::unix::fs::symlink;

    #[test]
    fn writes_and_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.xml");
        write(&p, b"one").unwrap();
        write(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
        let err = write(&dir.path().join("missing/r.xml"), b"x").unwrap_err();
        assert!(err.contains("missing"), "{err}");
        let err = write(Path::new(""), b"x").unwrap_err();
        assert!(err.contains("empty"), "{err}");
    }

    #[test]
    fn a_replaced_file_keeps_its_mode_and_a_new_one_is_readable() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.xml");
        write(&p, b"one").unwrap();
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o644
        );
        fs::set_permissions(&p, fs::Permissions::from_mode(0o600)).unwrap();
        write(&p, b"two").unwrap();
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn character_devices_are_written_through_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let null = char_device(dir.path(), "null", 3);
        let full = char_device(dir.path(), "full", 7);
        write(&null, b"report").unwrap();
        assert!(is_char_device(&null));
        let err = write(&full, b"report").unwrap_err();
        assert!(
            err.contains(&full.display().to_string()) && err.contains("No space left"),
            "{err}"
        );
        assert!(is_char_device(&full));
    }

    #[test]
    fn symlinks_are_followed_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("sub");
        fs::create_dir(&sub).unwrap();
        let target = sub.join("target.xml");
        fs::write(&target, "old").unwrap();
        let link = dir.path().join("link.xml");
        symlink("sub/target.xml", &link).unwrap();
        write(&link, b"new").unwrap();
        assert!(is_symlink(&link));
        assert_eq!(fs::read(&target).unwrap(), b"new");
        // No temporary file is left beside the link or the target.
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2);
        assert_eq!(fs::read_dir(&sub).unwrap().count(), 1);

        // A dangling link's target is created, through a chain of links.
        let dangling = dir.path().join("dangling.xml");
        symlink("link2.xml", &dangling).unwrap();
        symlink("sub/created.xml", dir.path().join("link2.xml")).unwrap();
        write(&dangling, b"made").unwrap();
        assert_eq!(fs::read(sub.join("created.xml")).unwrap(), b"made");
        assert!(is_symlink(&dangling));

        let null = char_device(dir.path(), "null", 3);
        let devnull = dir.path().join("null-link");
        symlink(&null, &devnull).unwrap();
        write(&devnull, b"gone").unwrap();
        assert!(is_symlink(&devnull));
        assert!(is_char_device(&null));

        let looped = dir.path().join("loop");
        symlink("loop", &looped).unwrap();
        let err = write(&looped, b"x").unwrap_err();
        assert!(err.contains("loop"), "{err}");
    }

    /// A FIFO in a temporary directory.
    fn fifo() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        (dir, fifo)
    }

    /// A reader of `fifo` that is open but reads nothing until asked.
    fn reader_of(fifo: &Path) -> fs::File {
        OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NONBLOCK)
            .open(fifo)
            .unwrap()
    }

    #[test]
    fn a_fifo_without_reader_fails_at_once_and_stays() {
        let (_dir, fifo) = fifo();
        let err = write(&fifo, b"x").unwrap_err();
        assert!(err.contains(&fifo.display().to_string()), "{err}");
        assert!(err.contains("nothing is reading"), "{err}");
        assert!(fs::metadata(&fifo).unwrap().file_type().is_fifo());
    }

    #[test]
    fn a_fifo_reader_that_stops_reading_ends_the_write() {
        let (_dir, fifo) = fifo();
        // A reader that never reads: the pipe fills and the write must stop.
        let _reader = reader_of(&fifo);
        let big = vec![b'x'; 4 << 20];
        let start = Instant::now();
        let err = write_within(&fifo, &big, Duration::from_millis(200)).unwrap_err();
        assert!(err.contains("took nothing"), "{err}");
        assert!(start.elapsed() < Duration::from_secs(20));
    }

    #[test]
    fn a_fifo_with_a_reader_gets_the_whole_report() {
        let (_dir, fifo) = fifo();
        let reader = reader_of(&fifo);
        let big: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
        let want = big.clone();
        let drain = std::thread::spawn(move || {
            let mut got = Vec::new();
            let mut buf = [0u8; 65536];
            let mut reader = reader;
            let start = Instant::now();
            while got.len() < want.len() && start.elapsed() < Duration::from_secs(60) {
                // Before the writer opens, a read finds EOF; while it
                // writes, it may find the pipe empty.
                match std::io::Read::read(&mut reader, &mut buf) {
                    Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
                    _ => std::thread::sleep(Duration::from_millis(1)),
                }
            }
            got == want
        });
        write(&fifo, &big).unwrap();
        assert!(drain.join().unwrap());
    }

    #[test]
    fn directories_and_block_devices_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = write(dir.path(), b"x").unwrap_err();
        assert!(err.contains("is a directory"), "{err}");
        // Any block device will do: it is refused before it is opened.
        let block = fs::read_dir("/dev")
            .unwrap()
            .flatten()
            .find(|e| e.file_type().is_ok_and(|t| t.is_block_device()));
        if let Some(block) = block {
            let err = write(&block.path(), b"x").unwrap_err();
            assert!(err.contains("is a block device"), "{err}");
        }
    }

    #[test]
    fn destinations_compare_through_dots_and_links() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("r.xml");
        let dotted = dir.path().join(".").join("r.xml");
        assert_eq!(destination(&a), destination(&dotted));
        fs::write(&a, "x").unwrap();
        assert_eq!(destination(&a), destination(&dotted));
        let link = dir.path().join("l.xml");
        symlink("r.xml", &link).unwrap();
        assert_eq!(destination(&a), destination(&link));
        let dangling = dir.path().join("d.xml");
        symlink("new.xml", &dangling).unwrap();
        assert_eq!(
            destination(&dangling),
            destination(&dir.path().join("new.xml"))
        );
        assert_ne!(destination(&a), destination(&dir.path().join("new.xml")));
    }
}
