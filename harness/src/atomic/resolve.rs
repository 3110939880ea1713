//! Resolving a report path as the kernel's path walk would, link by link
//! (the sticky-directory rule applied to each), to what writing it means.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::ErrorKind;
use std::os::fd::AsFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

/// As many links as Linux follows before ELOOP.
const MAX_LINKS: usize = 40;

/// Where the bytes for a report path go.
pub(super) enum Destination {
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
pub(super) struct Through {
    /// The path to open: the resolved one, or (for a link the kernel alone
    /// can follow, `/proc/PID/fd/N` to a pipe) the one given.
    pub(super) open: PathBuf,
    /// Whether the path to open is the resolved one, whose last component
    /// is then no link (opened with `O_NOFOLLOW`).
    pub(super) resolved: bool,
    /// Device and inode it had when it was looked at.
    pub(super) id: (u64, u64),
}

/// The end of a report path once every link on it was followed.
#[derive(Clone)]
pub(super) struct End {
    /// The directory the report goes into, links resolved.
    pub(super) dir: PathBuf,
    /// That directory's device and inode when it was looked at.
    pub(super) dir_id: (u64, u64),
    /// The file's name in `dir`.
    pub(super) name: OsString,
    /// What `dir/name` is (never a link), `None` when nothing is there.
    pub(super) meta: Option<fs::Metadata>,
}

impl End {
    pub(super) fn path(&self) -> PathBuf {
        self.dir.join(&self.name)
    }
}

/// What writing to `path` means: which stream or file, by the rules of
/// the module documentation (the sticky-directory rule included).
pub(super) fn decide(path: &Path) -> Result<Destination, String> {
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
pub(super) fn is_through(meta: &fs::Metadata) -> bool {
    let kind = meta.file_type();
    kind.is_fifo() || kind.is_char_device()
}

/// Follows `path` to its end as the kernel's path walk would, one component
/// at a time, refusing any link the sticky-directory rule forbids.
pub(super) fn resolve(path: &Path) -> Result<End, String> {
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
pub(super) fn components(path: &Path) -> Vec<OsString> {
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
pub(super) fn dir_id(dir: &Path) -> Result<(u64, u64), String> {
    fs::metadata(dir)
        .map(|m| (m.dev(), m.ino()))
        .map_err(|e| format!("failed to look at {}: {e}; check the path", dir.display()))
}

/// The kernel's `fs.protected_symlinks` rule (Linux fs/namei.c,
/// `may_follow_link`, unchanged since 3.6): a symlink may be followed when
/// its owner is the follower, when its directory is not both sticky and
/// world-writable, or when the link and the directory have one owner.
/// The follower is the effective user, as for the kernel's fsuid.
pub(super) fn may_follow(
    link: &Path,
    meta: &fs::Metadata,
    dir: &Path,
    path: &Path,
) -> Result<(), String> {
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
pub(super) fn open_dir(end: &End, path: &Path) -> Result<File, String> {
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
pub(super) fn changed(what: &Path, path: &Path) -> String {
    format!(
        "{} changed while rocgate wrote {} (a link or another file swapped in); nothing was written: give the report a path in a directory of yours",
        what.display(),
        path.display()
    )
}

/// Checks that `dir/name` is (still) what `end` found there: the same file,
/// or nothing.
pub(super) fn same_entry(dir: &File, end: &End, path: &Path) -> Result<(), String> {
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
pub(super) fn directory_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Follows the symlinks at `path` (which leads nowhere) to the path that
/// does not exist: the file a report would create. A path that is no link
/// is itself.
pub(super) fn dangling_target(path: &Path) -> Result<PathBuf, String> {
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
pub(super) enum Stream {
    Stdout,
    Stderr,
}

/// The standard stream of this process that is the file `meta` describes,
/// if any (stdout first, when both go to one place).
pub(super) fn own_stream(meta: &fs::Metadata) -> Option<Stream> {
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
