//! Writes report files without destroying what the path names.
//!
//! - A regular file, or a path where nothing exists yet, is replaced
//!   atomically: the report goes to a temporary file in the same directory
//!   that is renamed into place, so a reader never sees a half-written one.
//!   ([`append`], for GitHub's job summary, appends to it in place instead.)
//! - A symlink is never replaced: it is followed to its target, which is then
//!   handled by these rules (a regular target is replaced atomically in the
//!   target's directory; a dangling link's target is created there).
//! - A symlink another user planted is not followed. rocgate resolves links
//!   itself and renames over what they lead to, so the kernel's
//!   `fs.protected_symlinks` cannot guard the path; rocgate applies that
//!   rule to every link on the way instead: a link in a sticky
//!   world-writable directory (`/tmp`) is followed only when it belongs to
//!   rocgate's effective user or to the directory's owner. Otherwise
//!   `--json /tmp/x.json`, planted as a link to `/etc/shadow`, would make
//!   root replace that file.
//! - What was decided on is what is written: the directory and the file are
//!   opened without following links (`O_NOFOLLOW`) and checked (`fstat`) to
//!   be the ones the path was resolved to, so a link swapped in meanwhile is
//!   refused.
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
use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
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

/// Appends `bytes` to `path` (GitHub's job summary, which every step of a
/// job adds to): to the end of a regular file in place, to a new file where
/// nothing exists yet, through a FIFO or a character device; links are
/// followed by the same rules as [`write`]'s.
pub fn append(path: &Path, bytes: &[u8]) -> Result<(), String> {
    match decide(path)? {
        Destination::Stream(stream) => write_stream(stream, path, bytes),
        Destination::File(end) => append_to(&end, bytes, path),
        Destination::New(end) => append_to(&end, bytes, path),
        Destination::Through(through) => write_through(path, &through, bytes, STALL_LIMIT),
    }
}

/// [`write`], giving up on a FIFO or device reader that takes no bytes for
/// `stall_limit` (short in tests).
fn write_within(path: &Path, bytes: &[u8], stall_limit: Duration) -> Result<(), String> {
    match decide(path)? {
        Destination::Stream(stream) => write_stream(stream, path, bytes),
        Destination::File(end) => {
            let mode = end
                .meta
                .as_ref()
                .map_or(NEW_FILE_MODE, |m| m.mode() & 0o7777);
            replace(&end, bytes, mode, path)
        }
        Destination::New(end) => replace(&end, bytes, NEW_FILE_MODE, path),
        Destination::Through(through) => write_through(path, &through, bytes, stall_limit),
    }
}

/// Where the bytes for a report path go.
enum Destination {
    /// This process's own stdout or stderr.
    Stream(Stream),
    /// An existing regular file.
    File(End),
    /// A file to create.
    New(End),
    /// A FIFO or a character device, written through.
    Through(Through),
}

/// A FIFO or character device to open, and what it must turn out to be.
struct Through {
    /// The path to open: the resolved one, or (for a link the kernel alone
    /// can follow, `/proc/PID/fd/N` to a pipe) the one given.
    open: PathBuf,
    /// Whether the path to open is the resolved one, whose last component
    /// is then no link (opened with `O_NOFOLLOW`).
    resolved: bool,
    /// Device and inode it had when it was looked at.
    id: (u64, u64),
}

/// The end of a report path once every link on it was followed.
struct End {
    /// The directory the report goes into, links resolved.
    dir: PathBuf,
    /// That directory's device and inode when it was looked at.
    dir_id: (u64, u64),
    /// The file's name in `dir`.
    name: OsString,
    /// What `dir/name` is (never a link), `None` when nothing is there.
    meta: Option<fs::Metadata>,
}

impl End {
    fn path(&self) -> PathBuf {
        self.dir.join(&self.name)
    }
}

/// What writing to `path` means: which stream or file, by the rules of
/// the module documentation (the sticky-directory rule included).
fn decide(path: &Path) -> Result<Destination, String> {
    if path.as_os_str().is_empty() {
        return Err("the report path is empty; give the report a file path".to_string());
    }
    if path.as_os_str().as_bytes().ends_with(b"/") {
        return Err(format!(
            "{} ends in /, so it names a directory; give the report a file path",
            path.display()
        ));
    }
    // What the kernel finds there, following every link (/proc's magic
    // ones included).
    let followed = fs::metadata(path);
    if let Some(stream) = followed.as_ref().ok().and_then(own_stream) {
        return Ok(Destination::Stream(stream));
    }
    // Every link on the way is checked here, whatever is at the end.
    let end = resolve(path)?;
    let refuse = |meta: &fs::Metadata| {
        let kind = meta.file_type();
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
    };
    match (&end.meta, followed) {
        (Some(meta), _) if meta.is_file() => Ok(Destination::File(end)),
        (Some(meta), _) if is_through(meta) => Ok(Destination::Through(Through {
            open: end.path(),
            resolved: true,
            id: (meta.dev(), meta.ino()),
        })),
        (Some(meta), _) => refuse(meta),
        // Nothing at the resolved end, yet the kernel finds a FIFO or a
        // device: a magic link (`/proc/self/fd/3` to a pipe), which only
        // the kernel can follow; the links before it were checked above.
        (None, Ok(meta)) if is_through(&meta) => Ok(Destination::Through(Through {
            open: path.to_path_buf(),
            resolved: false,
            id: (meta.dev(), meta.ino()),
        })),
        (None, Ok(meta)) if meta.is_file() => Err(format!(
            "{} leads to a file rocgate cannot name (a link only the kernel can follow); give the report a plain file path",
            path.display()
        )),
        (None, Ok(meta)) => refuse(&meta),
        (None, Err(e)) if e.kind() == ErrorKind::NotFound => Ok(Destination::New(end)),
        (None, Err(e)) => Err(format!(
            "failed to look at {}: {e}; check the path and its directories' permissions",
            path.display()
        )),
    }
}

/// Whether `meta` is a FIFO or a character device: written through.
fn is_through(meta: &fs::Metadata) -> bool {
    let kind = meta.file_type();
    kind.is_fifo() || kind.is_char_device()
}

/// Follows `path` to its end as the kernel's path walk would, one component
/// at a time, refusing any link the sticky-directory rule forbids.
fn resolve(path: &Path) -> Result<End, String> {
    let mut at = if path.is_absolute() {
        PathBuf::from("/")
    } else {
        std::env::current_dir().map_err(|e| {
            format!(
                "failed to find the current directory for {}: {e}; give the report an absolute path",
                path.display()
            )
        })?
    };
    // Components still to walk, the next one last.
    let mut todo: Vec<OsString> = components(path);
    let mut links = 0;
    while let Some(part) = todo.pop() {
        if part == ".." {
            // `at` holds no link, so its parent is the one `..` leads to.
            at.pop();
            continue;
        }
        let here = at.join(&part);
        let last = todo.is_empty();
        match fs::symlink_metadata(&here) {
            Ok(meta) if meta.file_type().is_symlink() => {
                links += 1;
                if links > MAX_LINKS {
                    return Err(format!(
                        "{} goes through more than {MAX_LINKS} symlinks; give the report a plain file path",
                        path.display()
                    ));
                }
                may_follow(&here, &meta, &at, path)?;
                let target = fs::read_link(&here).map_err(|e| {
                    format!(
                        "failed to read the symlink {}: {e}; give the report a plain file path",
                        here.display()
                    )
                })?;
                if target.is_absolute() {
                    at = PathBuf::from("/");
                }
                todo.extend(components(&target));
            }
            Ok(meta) if last => {
                let dir_id = dir_id(&at)?;
                return Ok(End {
                    dir: at,
                    dir_id,
                    name: part,
                    meta: Some(meta),
                });
            }
            Ok(meta) if meta.is_dir() => at = here,
            Ok(_) => {
                return Err(format!(
                    "{} is not a directory, so {} cannot be written; give the report a file path",
                    here.display(),
                    path.display()
                ));
            }
            Err(e) if e.kind() == ErrorKind::NotFound && last => {
                let dir_id = dir_id(&at)?;
                return Ok(End {
                    dir: at,
                    dir_id,
                    name: part,
                    meta: None,
                });
            }
            Err(e) => {
                return Err(format!(
                    "failed to look at {} for {}: {e}; the report is written beside its path and renamed into place, so that directory must exist and be writable",
                    here.display(),
                    path.display()
                ));
            }
        }
    }
    // The path ended in `/`, `.` or `..`: a directory.
    Err(format!(
        "{} is a directory; rocgate writes a report to a file, a FIFO or a character device: give it a file path",
        path.display()
    ))
}

/// The names `path` walks through, the first one last (`.` left out).
fn components(path: &Path) -> Vec<OsString> {
    let mut parts: Vec<OsString> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect();
    parts.reverse();
    parts
}

/// Device and inode of the directory `dir`.
fn dir_id(dir: &Path) -> Result<(u64, u64), String> {
    fs::metadata(dir)
        .map(|m| (m.dev(), m.ino()))
        .map_err(|e| format!("failed to look at {}: {e}; check the path", dir.display()))
}

/// The kernel's `fs.protected_symlinks` rule (Linux fs/namei.c,
/// `may_follow_link`, unchanged since 3.6): a symlink may be followed when
/// its owner is the follower, when its directory is not both sticky and
/// world-writable, or when the link and the directory have one owner.
/// The follower is the effective user, as for the kernel's fsuid.
fn may_follow(link: &Path, meta: &fs::Metadata, dir: &Path, path: &Path) -> Result<(), String> {
    let euid = nix::unistd::geteuid().as_raw();
    if meta.uid() == euid {
        return Ok(());
    }
    let dir_meta = fs::metadata(dir)
        .map_err(|e| format!("failed to look at {}: {e}; check the path", dir.display()))?;
    let sticky_and_open = nix::libc::S_ISVTX | nix::libc::S_IWOTH;
    if dir_meta.mode() & sticky_and_open != sticky_and_open || dir_meta.uid() == meta.uid() {
        return Ok(());
    }
    Err(format!(
        "refusing to follow the symlink {} for {}: it belongs to uid {}, neither rocgate's (uid {euid}) nor its directory's owner's (uid {}), in a sticky world-writable directory, where another user may have planted it to make rocgate overwrite what it points at (the kernel's fs.protected_symlinks rule); remove the link or give the report a path in a directory of yours",
        link.display(),
        path.display(),
        meta.uid(),
        dir_meta.uid()
    ))
}

/// Opens `end`'s directory without following a link and checks it is the
/// one `end` was resolved in.
fn open_dir(end: &End, path: &Path) -> Result<File, String> {
    let dir = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_DIRECTORY | nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
        .open(&end.dir)
        .map_err(|e| {
            format!(
                "failed to open the directory {} for {}: {e}; that directory must exist and be writable",
                end.dir.display(),
                path.display()
            )
        })?;
    let meta = dir
        .metadata()
        .map_err(|e| format!("failed to look at the directory {}: {e}", end.dir.display()))?;
    if (meta.dev(), meta.ino()) != end.dir_id {
        return Err(changed(&end.dir, path));
    }
    Ok(dir)
}

/// The error for a path that changed while rocgate wrote to it.
fn changed(what: &Path, path: &Path) -> String {
    format!(
        "{} changed while rocgate wrote {} (a link or another file swapped in); nothing was written: give the report a path in a directory of yours",
        what.display(),
        path.display()
    )
}

/// Checks that `dir/name` is (still) what `end` found there: the same file,
/// or nothing.
fn same_entry(dir: &File, end: &End, path: &Path) -> Result<(), String> {
    let now = nix::sys::stat::fstatat(
        dir,
        end.name.as_os_str(),
        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
    );
    let same = match (&end.meta, now) {
        (Some(m), Ok(st)) => {
            (st.st_dev, st.st_ino) == (m.dev(), m.ino())
                && st.st_mode & nix::libc::S_IFMT == nix::libc::S_IFREG
        }
        (None, Err(nix::errno::Errno::ENOENT)) => true,
        _ => false,
    };
    if same {
        Ok(())
    } else {
        Err(changed(&end.path(), path))
    }
}

/// Opens (creating it with `O_EXCL` or appending) `name` in `dir` without
/// following a link.
fn open_at(dir: &File, name: &OsStr, flags: nix::fcntl::OFlag, mode: u32) -> nix::Result<File> {
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
fn append_to(end: &End, bytes: &[u8], path: &Path) -> Result<(), String> {
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

/// Writes a temporary file beside `end` and renames it over `end`'s name.
fn replace(end: &End, bytes: &[u8], mode: u32, path: &Path) -> Result<(), String> {
    use nix::fcntl::OFlag;
    let dir = open_dir(end, path)?;
    same_entry(&dir, end, path)?;
    let target = end.path();
    let mut tries = 0u32;
    let (tmp_name, mut tmp) = loop {
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
                    target.display()
                ));
            }
        }
    };
    let remove = || {
        let _ = nix::unistd::unlinkat(
            &dir,
            tmp_name.as_os_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
    };
    // A temp file starts out private; the report gets the mode of the file
    // it replaces, or one CI's other users can read.
    if let Err(e) = tmp
        .write_all(bytes)
        .and_then(|()| tmp.set_permissions(fs::Permissions::from_mode(mode)))
        .and_then(|()| tmp.sync_all())
    {
        remove();
        return Err(format!(
            "failed to write the report for {} (temporary file {}): {e}; free space in {} or choose another path",
            target.display(),
            end.dir.join(&tmp_name).display(),
            end.dir.display()
        ));
    }
    // Renaming replaces the entry itself, never what a link there leads to.
    if let Err(e) = nix::fcntl::renameat(&dir, tmp_name.as_os_str(), &dir, end.name.as_os_str()) {
        remove();
        return Err(format!(
            "failed to move the report into {}: {e}; choose another path",
            target.display()
        ));
    }
    Ok(())
}

/// A temporary file name unlikely to be taken: the process, the time and
/// the attempt.
fn temp_name(attempt: u32) -> OsString {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    OsString::from(format!(
        ".rocgate-{}-{nanos:x}-{attempt}",
        std::process::id()
    ))
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
/// does not exist: the file a report would create. A path that is no link
/// is itself.
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

/// Writes `bytes` into an existing FIFO or character device without
/// replacing it, never waiting longer than `stall_limit` for its reader.
fn write_through(
    path: &Path,
    through: &Through,
    bytes: &[u8],
    stall_limit: Duration,
) -> Result<(), String> {
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

    /// A sticky world-writable directory (as /tmp is) in a temporary one,
    /// when this test runs as root (only root can give a link to another
    /// user); `None` otherwise.
    fn sticky_dir() -> Option<(tempfile::TempDir, PathBuf)> {
        if !nix::unistd::geteuid().is_root() {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let sticky = dir.path().join("tmp");
        fs::create_dir(&sticky).unwrap();
        fs::set_permissions(&sticky, fs::Permissions::from_mode(0o1777)).unwrap();
        Some((dir, sticky))
    }

    /// A symlink at `link` to `target`, owned by `nobody` (uid 65534).
    fn planted(target: &Path, link: &Path) {
        symlink(target, link).unwrap();
        std::os::unix::fs::lchown(link, Some(65534), Some(65534)).unwrap();
    }

    #[test]
    fn another_users_link_in_a_sticky_directory_is_not_followed() {
        let Some((dir, sticky)) = sticky_dir() else {
            return;
        };
        let victim = dir.path().join("victim");
        fs::write(&victim, "precious").unwrap();
        let link = sticky.join("x.json");
        planted(&victim, &link);
        for result in [write(&link, b"report"), append(&link, b"report")] {
            let err = result.unwrap_err();
            assert!(
                err.contains(&link.display().to_string()) && err.contains("fs.protected_symlinks"),
                "{err}"
            );
        }
        assert_eq!(fs::read(&victim).unwrap(), b"precious");
        // Dangling: the file it names is not created either.
        let dangling = sticky.join("new.json");
        planted(&dir.path().join("created"), &dangling);
        assert!(write(&dangling, b"x").is_err());
        assert!(!dir.path().join("created").exists());
        // A planted link to a directory, on the way to the report.
        let through = sticky.join("d");
        planted(dir.path(), &through);
        let err = write(&through.join("victim"), b"x").unwrap_err();
        assert!(err.contains("fs.protected_symlinks"), "{err}");
        assert_eq!(fs::read(&victim).unwrap(), b"precious");
        // A device behind a planted link is not written either.
        let null = char_device(dir.path(), "null", 3);
        let to_null = sticky.join("null");
        planted(&null, &to_null);
        assert!(write(&to_null, b"x").is_err());
    }

    #[test]
    fn links_the_kernel_would_follow_are_followed() {
        let Some((dir, sticky)) = sticky_dir() else {
            return;
        };
        let target = dir.path().join("target");
        // rocgate's own link in the sticky directory.
        let own = sticky.join("own.json");
        symlink(&target, &own).unwrap();
        write(&own, b"one").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"one");
        // Another user's link in a directory that is not sticky.
        let open = dir.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();
        let theirs = open.join("theirs.json");
        planted(&target, &theirs);
        write(&theirs, b"two").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"two");
        // Another user's link in a sticky directory that user owns.
        let owned = dir.path().join("owned");
        fs::create_dir(&owned).unwrap();
        fs::set_permissions(&owned, fs::Permissions::from_mode(0o1777)).unwrap();
        std::os::unix::fs::lchown(&owned, Some(65534), Some(65534)).unwrap();
        let link = owned.join("link.json");
        planted(&target, &link);
        append(&link, b"three").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"twothree");
    }

    #[test]
    fn append_adds_to_a_file_creates_a_new_one_and_refuses_what_write_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("summary.md");
        append(&p, b"one\n").unwrap();
        append(&p, b"two\n").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"one\ntwo\n");
        let link = dir.path().join("link.md");
        symlink("summary.md", &link).unwrap();
        append(&link, b"three\n").unwrap();
        assert!(is_symlink(&link));
        assert_eq!(fs::read(&p).unwrap(), b"one\ntwo\nthree\n");
        assert!(append(dir.path(), b"x").unwrap_err().contains("directory"));
        assert!(append(&dir.path().join("missing/s.md"), b"x").is_err());
        let full = char_device(dir.path(), "full", 7);
        let err = append(&full, b"x").unwrap_err();
        assert!(err.contains("No space left"), "{err}");
        let (_d, fifo) = fifo();
        let err = append(&fifo, b"x").unwrap_err();
        assert!(err.contains("nothing is reading"), "{err}");
        let err = write(&dir.path().join("sub/"), b"x").unwrap_err();
        assert!(err.contains("directory"), "{err}");
    }

    #[test]
    fn dots_and_links_in_the_middle_of_a_path_resolve_as_the_kernel_does() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        fs::create_dir_all(a.join("deep")).unwrap();
        fs::create_dir(&b).unwrap();
        // a/deep/up -> ../../b: `up/..` is b's parent, not a/deep's.
        symlink("../../b", a.join("deep/up")).unwrap();
        write(&a.join("deep/up/r.json"), b"in b").unwrap();
        assert_eq!(fs::read(b.join("r.json")).unwrap(), b"in b");
        write(&a.join("deep/up/../a/r.json"), b"in a").unwrap();
        assert_eq!(fs::read(a.join("r.json")).unwrap(), b"in a");
        let file = dir.path().join("file");
        fs::write(&file, "").unwrap();
        assert!(
            write(&file.join("r.json"), b"x")
                .unwrap_err()
                .contains("not a directory")
        );
    }

    #[test]
    fn a_link_swapped_in_after_the_path_was_resolved_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        fs::write(&victim, "precious").unwrap();
        let p = dir.path().join("r.json");
        fs::write(&p, "old").unwrap();
        // Resolved while a file, then the file is swapped for a link.
        let end = resolve(&p).unwrap();
        fs::remove_file(&p).unwrap();
        symlink(&victim, &p).unwrap();
        let err = replace(&end, b"x", 0o644, &p).unwrap_err();
        assert!(err.contains("changed while rocgate wrote"), "{err}");
        let err = append_to(&end, b"x", &p).unwrap_err();
        assert!(err.contains(&p.display().to_string()), "{err}");
        assert_eq!(fs::read(&victim).unwrap(), b"precious");
        assert!(is_symlink(&p));
        // Nothing there when resolved, a link by the time of the write.
        let new = dir.path().join("new.json");
        let end = resolve(&new).unwrap();
        symlink(&victim, &new).unwrap();
        assert!(replace(&end, b"x", 0o644, &new).is_err());
        assert!(append_to(&end, b"x", &new).is_err());
        assert_eq!(fs::read(&victim).unwrap(), b"precious");
        // The directory swapped for a link to another.
        let sub = dir.path().join("sub");
        fs::create_dir(&sub).unwrap();
        let end = resolve(&sub.join("s.json")).unwrap();
        fs::rename(&sub, dir.path().join("moved")).unwrap();
        symlink(dir.path(), &sub).unwrap();
        let err = replace(&end, b"x", 0o644, &sub.join("s.json")).unwrap_err();
        assert!(err.contains("sub"), "{err}");
        assert!(!dir.path().join("s.json").exists());
        // No temporary file left anywhere.
        assert!(
            fs::read_dir(dir.path())
                .unwrap()
                .flatten()
                .all(|e| !e.file_name().to_string_lossy().starts_with(".rocgate-"))
        );
    }
}
