//! Every host path is read through a sysroot: `/` on a live node, or a
//! directory holding a captured or synthetic node.

//!
//! A captured node's links are resolved inside its root, as a chroot would
//! ([`resolve`]): nothing outside the root is ever read through one. Its
//! FIFOs, devices and sockets are files that did not answer: never opened.

mod resolve;

use crate::bounded_io::{BoundedIo, READ_DEADLINE};
pub use resolve::Kind;
use std::collections::BTreeMap;
use std::fmt;
use std::io::ErrorKind;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Files larger than this are not sysfs attributes; reads stop here.
const MAX_ATTRIBUTE_BYTES: u64 = 1 << 20;

/// A root through which host paths are read.
#[derive(Clone, Debug)]
pub struct Sysroot {
    root: PathBuf,
    /// What to call the root in messages (a snapshot's archive rather than
    /// the directory it was unpacked into).
    label: Option<String>,
    /// Host paths accessed so far and how, when recording (for snapshots
    /// and for measuring what a run reads).
    recorder: Option<Arc<Mutex<BTreeMap<String, PathUse>>>>,
    /// Deadline-bounded reads, shared by every clone, so a file that did
    /// not answer is remembered for the whole run.
    io: Arc<BoundedIo>,
    /// Where the host's own root is mounted (a host path, `/host`) when
    /// rocgate runs in a container: [`HOST_ONLY`] paths are read there.
    host_root: Option<String>,
    /// The device of the root's file system when it is a local one
    /// ([`resolve::local_device`]), found on first use.
    local: Arc<std::sync::OnceLock<Option<u64>>>,
}

/// Host paths a container holds its image's copy of, not the host's: the
/// OS, the kernel's modules and DKMS builds, the package records, module
/// settings, firmware files and logs. (`/sys`, `/proc` and `/dev` are the
/// host kernel's in a container too; `/opt/rocm` and `/etc/group` are the
/// image's, which is what a GPU job in it uses.)
pub const HOST_ONLY: &[&str] = &[
    "/etc/os-release",
    "/usr/lib/os-release",
    "/lib/modules",
    "/usr/lib/modules",
    "/var/lib/dkms",
    "/var/lib/dpkg",
    "/var/lib/rpm",
    "/etc/modprobe.d",
    "/lib/modprobe.d",
    "/usr/lib/modprobe.d",
    "/lib/firmware",
    "/usr/lib/firmware",
    "/var/log",
];

/// Whether `host` is one of [`HOST_ONLY`] or below one.
fn is_host_only(host: &str) -> bool {
    HOST_ONLY.iter().any(|p| {
        host.strip_prefix(p)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    })
}

/// How a recorded host path was used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PathUse {
    /// Tested for existence.
    Probed,
    /// Read as a file.
    Read,
    /// Listed as a directory.
    Listed,
    /// Read as a symbolic link.
    Linked,
}

/// A recorded path as found in a sysroot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// What it is.
    pub kind: Kind,
    /// Its group.
    pub gid: u32,
    /// Its mode (type and permission bits).
    pub mode: u32,
}

impl PartialEq for Sysroot {
    fn eq(&self, other: &Self) -> bool {
        self.root == other.root
    }
}

impl Eq for Sysroot {}

/// Why a host file could not be read; its `Display` names the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadError {
    /// The file as it exists on this machine (sysroot included).
    pub path: PathBuf,
    /// What went wrong.
    pub kind: ReadErrorKind,
}

/// The kinds of read failure a check distinguishes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReadErrorKind {
    /// The file does not exist.
    NotFound,
    /// EACCES or EPERM (a device cgroup gives EPERM).
    PermissionDenied,
    /// The contents are not UTF-8.
    NotUtf8,
    /// The contents do not have the expected format.
    Malformed(String),
    /// Any other I/O error, with the OS's text.
    Io(String),
    /// The file did not answer within the read deadline (a wedged device),
    /// or is a FIFO standing in for such a file in a captured node; holds
    /// how long it was waited for (zero in a capture).
    TimedOut(Duration),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let p = self.path.display();
        match &self.kind {
            ReadErrorKind::NotFound => write!(f, "{p} does not exist"),
            ReadErrorKind::PermissionDenied => write!(f, "failed to read {p}: permission denied"),
            ReadErrorKind::NotUtf8 => write!(f, "failed to parse {p}: contents are not UTF-8 text"),
            ReadErrorKind::Malformed(why) => write!(f, "failed to parse {p}: {why}"),
            ReadErrorKind::Io(why) => write!(f, "failed to read {p}: {why}"),
            ReadErrorKind::TimedOut(d) if d.is_zero() => write!(
                f,
                "{p} did not answer when the node was captured (a wedged device?; the capture holds a FIFO, a device or a socket in its place, which is never opened); not read again in this run"
            ),
            ReadErrorKind::TimedOut(d) => write!(
                f,
                "{p} did not answer within {:.0} s (a wedged device?); not read again in this run",
                d.as_secs_f64()
            ),
        }
    }
}

impl std::error::Error for ReadError {}

impl ReadError {
    /// A format error in `path`.
    pub fn malformed(path: impl Into<PathBuf>, why: impl Into<String>) -> Self {
        ReadError {
            path: path.into(),
            kind: ReadErrorKind::Malformed(why.into()),
        }
    }

    /// Whether the file is simply absent.
    pub fn is_not_found(&self) -> bool {
        self.kind == ReadErrorKind::NotFound
    }

    /// Whether the file did not answer.
    pub fn is_timeout(&self) -> bool {
        matches!(self.kind, ReadErrorKind::TimedOut(_))
    }

    fn from_io(path: PathBuf, e: &std::io::Error) -> Self {
        let kind = match e.kind() {
            ErrorKind::NotFound => ReadErrorKind::NotFound,
            ErrorKind::PermissionDenied => ReadErrorKind::PermissionDenied,
            _ if e.raw_os_error() == Some(1) => ReadErrorKind::PermissionDenied,
            _ if e.raw_os_error() == Some(20) => ReadErrorKind::NotFound, // ENOTDIR: a parent is a file
            _ => ReadErrorKind::Io(e.to_string()),
        };
        ReadError { path, kind }
    }
}

impl Sysroot {
    /// The live host.
    pub fn live() -> Self {
        Sysroot::at("/")
    }

    /// A captured or synthetic node rooted at `dir`.
    pub fn at(dir: impl Into<PathBuf>) -> Self {
        Sysroot {
            root: dir.into(),
            label: None,
            recorder: None,
            io: Arc::new(BoundedIo::new(READ_DEADLINE)),
            host_root: None,
            local: Arc::new(std::sync::OnceLock::new()),
        }
    }

    /// This sysroot reading the host's own files ([`HOST_ONLY`]) under
    /// `host_root`, a host path (`/host`, where a container mounts the
    /// host's `/`).
    #[must_use]
    pub fn with_host_root(mut self, host_root: &str) -> Self {
        let trimmed = host_root.trim_end_matches('/');
        self.host_root = Some(if trimmed.starts_with('/') {
            trimmed.to_string()
        } else {
            format!("/{trimmed}")
        });
        self
    }

    /// Where the host's root is mounted, when rocgate reads one.
    pub fn host_root(&self) -> Option<&str> {
        self.host_root.as_deref()
    }

    /// The image's own copy of `host` (a [`HOST_ONLY`] path such as
    /// `/etc/os-release`), read past the host root; `None` when absent or
    /// unreadable. Bounded like every read.
    pub fn read_image_opt(&self, host: &str) -> Option<String> {
        let bare = Sysroot {
            host_root: None,
            ..self.clone()
        };
        bare.read_opt(host).ok().flatten()
    }

    /// The host paths that did not answer so far, sorted.
    pub fn timed_out(&self) -> Vec<String> {
        self.io.wedged()
    }

    /// Runs a read of `host` so that it cannot hang: a file that did not
    /// answer before fails at once; a FIFO is never opened, nor in a
    /// capture a device or a socket; on the live node, reads of /sys, /proc
    /// and /dev are abandoned after the deadline, and in a capture every
    /// read is (a directory on a file system that stopped answering).
    /// `read` gets the opened file.
    fn guarded<T: Send + 'static>(
        &self,
        host: &str,
        read: impl FnOnce(std::fs::File, &Path) -> Result<T, ReadError> + Send + 'static,
    ) -> Result<T, ReadError> {
        let no_answer = |waited: Duration| {
            rocgate_harness::deadline::note_no_answer(host);
            self.io.mark_wedged(host);
            ReadError {
                path: PathBuf::from(host),
                kind: ReadErrorKind::TimedOut(waited),
            }
        };
        if self.io.is_wedged(host) {
            // Told as it was the first time: waited for on the live node,
            // a stand-in in a capture.
            let waited = if self.is_live() {
                self.io.deadline()
            } else {
                Duration::ZERO
            };
            return Err(ReadError {
                path: PathBuf::from(host),
                kind: ReadErrorKind::TimedOut(waited),
            });
        }
        let (base, plain) = self.base(host);
        if plain {
            let path = self.path(host);
            if std::fs::metadata(&path).is_ok_and(|m| m.file_type().is_fifo()) {
                return Err(no_answer(Duration::ZERO));
            }
            let kernel = ["/sys/", "/proc/", "/dev/"]
                .iter()
                .any(|p| host.starts_with(p));
            let open = move || {
                let file =
                    std::fs::File::open(&path).map_err(|e| ReadError::from_io(path.clone(), &e))?;
                read(file, &path)
            };
            if self.is_live() && kernel {
                return self
                    .io
                    .run(host, open)
                    .unwrap_or_else(|| Err(no_answer(self.io.deadline())));
            }
            return open();
        }
        let shown = self.path(host);
        // On a local disk, a file of the root's own file system answers:
        // it is read here. Anything else (a network or FUSE file system, a
        // file system mounted inside the root) is read under the deadline.
        let local = *self.local.get_or_init(|| resolve::local_device(&self.root));
        if let Some(dev) = local.filter(|_| base == self.root) {
            let found = resolve::lookup(&base, host, true)
                .map_err(|e| ReadError::from_io(shown.clone(), &e))?;
            if found.dev == dev {
                return match open_found(&found, &shown) {
                    Ok(file) => read(file, &shown),
                    Err(e) if e.is_timeout() => Err(no_answer(Duration::ZERO)),
                    Err(e) => Err(e),
                };
            }
        }
        let rel = host.to_string();
        let open = move || {
            let found = resolve::lookup(&base, &rel, true)
                .map_err(|e| ReadError::from_io(shown.clone(), &e))?;
            let file = open_found(&found, &shown)?;
            read(file, &shown)
        };
        match self.io.run(host, open) {
            Some(Err(e)) if e.is_timeout() => Err(no_answer(Duration::ZERO)),
            Some(r) => r,
            None => Err(no_answer(self.io.deadline())),
        }
    }

    /// The directory that stands for `/` when `host` is looked up (the
    /// root, or the host root below it for the host's own files), and
    /// whether it is the live host's `/`, where the kernel resolves paths
    /// itself.
    fn base(&self, host: &str) -> (PathBuf, bool) {
        let base = match &self.host_root {
            Some(h) if is_host_only(host) => self.root.join(h.trim_start_matches('/')),
            _ => self.root.clone(),
        };
        let plain = base == Path::new("/");
        (base, plain)
    }

    /// Where a recorded path (host-root files already below the host root)
    /// is looked up, as [`Sysroot::base`]: the directory standing for `/`,
    /// the path below it, and whether the kernel resolves it.
    fn recorded_base(&self, at: &str) -> (PathBuf, String, bool) {
        if let Some(h) = &self.host_root {
            if let Some(rest) = at.strip_prefix(h.as_str()) {
                if is_host_only(rest) {
                    let base = self.root.join(h.trim_start_matches('/'));
                    let plain = base == Path::new("/");
                    return (base, rest.to_string(), plain);
                }
            }
        }
        (self.root.clone(), at.to_string(), self.is_live())
    }

    /// A sysroot at `dir` that messages call `label`.
    pub fn labelled(dir: impl Into<PathBuf>, label: impl Into<String>) -> Self {
        Sysroot {
            label: Some(label.into()),
            ..Sysroot::at(dir)
        }
    }

    /// Like [`Sysroot::at`], remembering every host path accessed.
    pub fn recording(dir: impl Into<PathBuf>) -> Self {
        Sysroot {
            recorder: Some(Arc::new(Mutex::new(BTreeMap::new()))),
            ..Sysroot::at(dir)
        }
    }

    /// The host paths accessed so far (empty unless recording), sorted.
    pub fn recorded(&self) -> Vec<String> {
        self.accesses().into_iter().map(|(p, _)| p).collect()
    }

    /// The host paths accessed so far and how (the strongest use wins:
    /// listed or linked over read over probed).
    pub fn accesses(&self) -> Vec<(String, PathUse)> {
        self.recorder
            .as_ref()
            .and_then(|r| {
                r.lock()
                    .ok()
                    .map(|m| m.iter().map(|(k, v)| (k.clone(), *v)).collect())
            })
            .unwrap_or_default()
    }

    /// Records an access made outside these methods (a device opened). A
    /// host file read under the host root is recorded where it was read
    /// (`/host/etc/os-release`), so a snapshot replays as a container that
    /// has the host's root mounted.
    pub fn note(&self, host: &str, how: PathUse) {
        if let Some(r) = &self.recorder {
            let at = match &self.host_root {
                Some(h) if is_host_only(host) => format!("{h}{host}"),
                _ => host.to_string(),
            };
            if let Ok(mut m) = r.lock() {
                let e = m.entry(at).or_insert(how);
                *e = (*e).max(how);
            }
        }
    }

    /// Whether this is the live host (`/`).
    pub fn is_live(&self) -> bool {
        self.root == Path::new("/")
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where host path `host` (absolute, like `/sys/class/kfd`) lives here:
    /// under the host root for the host's own files, else under the root.
    pub fn path(&self, host: &str) -> PathBuf {
        match &self.host_root {
            Some(h) if is_host_only(host) => self
                .root
                .join(h.trim_start_matches('/'))
                .join(host.trim_start_matches('/')),
            _ => self.root.join(host.trim_start_matches('/')),
        }
    }

    /// Where a path as recorded ([`Sysroot::recorded`]: host-root files
    /// already under the host root) lives here.
    pub fn recorded_path(&self, at: &str) -> PathBuf {
        self.root.join(at.trim_start_matches('/'))
    }

    /// What a recorded path ([`Sysroot::recorded`]) is here, its links
    /// resolved inside the sysroot (the last one too when `follow` says
    /// so); `None` when it is not there.
    pub fn recorded_entry(&self, at: &str, follow: bool) -> Option<Entry> {
        use std::os::unix::fs::MetadataExt;
        let (base, rel, plain) = self.recorded_base(at);
        if plain {
            let path = self.recorded_path(at);
            let meta = if follow {
                std::fs::metadata(&path)
            } else {
                std::fs::symlink_metadata(&path)
            }
            .ok()?;
            let kind = Kind::of_type(meta.file_type());
            return Some(Entry {
                kind,
                gid: meta.gid(),
                mode: meta.mode(),
            });
        }
        let found = resolve::lookup(&base, &rel, follow).ok()?;
        Some(Entry {
            kind: found.kind,
            gid: found.gid,
            mode: found.mode,
        })
    }

    /// Opens a recorded path for reading, its links resolved inside the
    /// sysroot. A FIFO, a device or a socket of a capture is refused
    /// (`WouldBlock`) rather than opened; the open itself never blocks.
    pub fn recorded_open(&self, at: &str) -> std::io::Result<std::fs::File> {
        let (base, rel, plain) = self.recorded_base(at);
        if plain {
            return std::fs::File::open(self.recorded_path(at));
        }
        let found = resolve::lookup(&base, &rel, true)?;
        if matches!(found.kind, Kind::Fifo | Kind::Special) {
            return Err(std::io::Error::from(ErrorKind::WouldBlock));
        }
        found.open()
    }

    /// The target of a recorded link as written, its parents resolved
    /// inside the sysroot.
    pub fn recorded_link(&self, at: &str) -> Option<PathBuf> {
        let (base, rel, plain) = self.recorded_base(at);
        if plain {
            return std::fs::read_link(self.recorded_path(at)).ok();
        }
        resolve::lookup(&base, &rel, false)
            .and_then(|f| f.read_link())
            .ok()
    }

    /// The entries of a recorded directory and their kinds (links not
    /// followed), its links resolved inside the sysroot.
    pub fn recorded_list(&self, at: &str) -> Option<Vec<(String, Kind)>> {
        let (base, rel, plain) = self.recorded_base(at);
        let raw = if plain {
            list_plain(&self.recorded_path(at)).ok()?
        } else {
            let found = resolve::lookup(&base, &rel, true).ok()?;
            if found.kind != Kind::Dir {
                return None;
            }
            found.list().ok()?
        };
        Some(
            raw.into_iter()
                .filter_map(|(n, k)| Some((n.into_string().ok()?, k)))
                .collect(),
        )
    }

    /// Whether `host` exists (following links).
    pub fn exists(&self, host: &str) -> bool {
        self.note(host, PathUse::Probed);
        match self.base(host) {
            (_, true) => self.path(host).exists(),
            (base, false) => resolve::lookup(&base, host, true).is_ok(),
        }
    }

    /// Errors name the host path (`/sys/...`); the sysroot is reported once,
    /// in the report, so messages read the same live, in a directory or
    /// replayed from a snapshot.
    fn hostify(e: ReadError, host: &str) -> ReadError {
        ReadError {
            path: PathBuf::from(host),
            ..e
        }
    }

    /// Reads a small text file: stops at the first NUL (captures are often
    /// NUL-padded), trims surrounding whitespace, and rejects non-UTF-8.
    pub fn read_text(&self, host: &str) -> Result<String, ReadError> {
        self.note(host, PathUse::Read);
        let bytes = self
            .guarded(host, |file, path| {
                read_bounded(file, path, MAX_ATTRIBUTE_BYTES)
            })
            .map_err(|e| Self::hostify(e, host))?;
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        let text = std::str::from_utf8(&bytes[..end]).map_err(|_| ReadError {
            path: PathBuf::from(host),
            kind: ReadErrorKind::NotUtf8,
        })?;
        Ok(text.trim().to_string())
    }

    /// Like [`Sysroot::read_text`], but an absent file is `Ok(None)`.
    pub fn read_opt(&self, host: &str) -> Result<Option<String>, ReadError> {
        match self.read_text(host) {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Reads up to `limit` bytes of a file as raw bytes.
    pub fn read_bytes(&self, host: &str, limit: u64) -> Result<Vec<u8>, ReadError> {
        self.note(host, PathUse::Read);
        self.guarded(host, move |file, path| read_bounded(file, path, limit))
            .map_err(|e| Self::hostify(e, host))
    }

    /// Reads at most the last `limit` bytes of a file (a log that may be huge).
    pub fn read_tail(&self, host: &str, limit: u64) -> Result<Vec<u8>, ReadError> {
        use std::io::{Seek, SeekFrom};
        self.note(host, PathUse::Read);
        self.guarded(host, move |mut file, path| {
            let io = |e: std::io::Error| ReadError::from_io(path.to_path_buf(), &e);
            let len = file.metadata().map_err(io)?.len();
            file.seek(SeekFrom::Start(len.saturating_sub(limit)))
                .map_err(io)?;
            crate::bounded_io::read_paged(file, limit).map_err(io)
        })
        .map_err(|e| Self::hostify(e, host))
    }

    /// The names of the entries of a directory, sorted (numerically where
    /// both names are numbers, so node `10` follows node `9`).
    pub fn list_dir(&self, host: &str) -> Result<Vec<String>, ReadError> {
        self.note(host, PathUse::Listed);
        let raw = match self.base(host) {
            (_, true) => list_plain(&self.path(host)),
            (base, false) => resolve::lookup(&base, host, true).and_then(|f| {
                if f.kind == Kind::Dir {
                    f.list()
                } else {
                    Err(std::io::Error::from_raw_os_error(20)) // ENOTDIR
                }
            }),
        }
        .map_err(|e| ReadError::from_io(PathBuf::from(host), &e))?;
        let mut names = Vec::new();
        for (name, _) in raw {
            match name.into_string() {
                Ok(name) => names.push(name),
                Err(raw) => {
                    return Err(ReadError::malformed(
                        host,
                        format!("entry {} is not UTF-8", raw.to_string_lossy()),
                    ));
                }
            }
        }
        names.sort_by(|a, b| match (a.parse::<u64>(), b.parse::<u64>()) {
            (Ok(x), Ok(y)) => x.cmp(&y),
            _ => a.cmp(b),
        });
        Ok(names)
    }

    /// As [`Sysroot::list_dir`], with `None` for a directory that does not
    /// exist (a device without that feature), apart from one that did not
    /// read.
    pub fn list_dir_if_present(&self, host: &str) -> Result<Option<Vec<String>>, ReadError> {
        match self.list_dir(host) {
            Ok(names) => Ok(Some(names)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The last component of a symbolic link's target (`amdgpu` for a
    /// `driver` link), or `None` when there is no link.
    pub fn link_name(&self, host: &str) -> Result<Option<String>, ReadError> {
        Ok(self
            .link_target(host)?
            .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned())))
    }

    /// A symbolic link's target as written (`../../../devices/pci0000:00/...`
    /// for a PCI device), or `None` when there is no link.
    pub fn link_target(&self, host: &str) -> Result<Option<PathBuf>, ReadError> {
        self.note(host, PathUse::Linked);
        let target = match self.base(host) {
            (_, true) => std::fs::read_link(self.path(host)),
            (base, false) => resolve::lookup(&base, host, false).and_then(|f| f.read_link()),
        };
        match target {
            Ok(target) => Ok(Some(target)),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) if e.kind() == ErrorKind::InvalidInput => {
                Err(ReadError::malformed(host, "expected a symbolic link"))
            }
            Err(e) => Err(ReadError::from_io(PathBuf::from(host), &e)),
        }
    }
}

impl fmt::Display for Sysroot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.label {
            Some(l) => f.write_str(l),
            None => write!(f, "{}", self.root.display()),
        }
    }
}

/// Opens what a lookup found for reading: a FIFO, a device or a socket is
/// a file that did not answer when the node was captured, never opened.
fn open_found(found: &resolve::Found, shown: &Path) -> Result<std::fs::File, ReadError> {
    if matches!(found.kind, Kind::Fifo | Kind::Special) {
        return Err(ReadError {
            path: shown.to_path_buf(),
            kind: ReadErrorKind::TimedOut(Duration::ZERO),
        });
    }
    found
        .open()
        .map_err(|e| ReadError::from_io(shown.to_path_buf(), &e))
}

/// The entries of a directory of the live host, as [`resolve`] lists them.
fn list_plain(path: &Path) -> std::io::Result<Vec<(std::ffi::OsString, Kind)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(path)? {
        let entry = entry?;
        let kind = Kind::of_type(entry.file_type()?);
        out.push((entry.file_name(), kind));
    }
    Ok(out)
}

/// Reads up to `limit` bytes of `file` in page-sized reads until one
/// returns 0 ([`crate::bounded_io::read_paged`]): what sysfs binary
/// attributes need, and right for every other file too.
fn read_bounded(file: std::fs::File, path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    crate::bounded_io::read_paged(file, limit)
        .map_err(|e| ReadError::from_io(path.to_path_buf(), &e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn reads_through_the_root_and_names_files_in_errors() {
        let dir = tempfile::tempdir().unwrap();
        let root = Sysroot::at(dir.path());
        fs::create_dir_all(dir.path().join("sys/a")).unwrap();
        fs::write(dir.path().join("sys/a/padded"), b"0x00000068\n\0\0\0\0").unwrap();
        fs::write(dir.path().join("sys/a/latin1"), b"caf\xe9").unwrap();
        assert_eq!(root.read_text("/sys/a/padded").unwrap(), "0x00000068");
        let e = root.read_text("/sys/a/latin1").unwrap_err();
        assert_eq!(e.kind, ReadErrorKind::NotUtf8);
        assert_eq!(
            e.to_string(),
            "failed to parse /sys/a/latin1: contents are not UTF-8 text"
        );
        assert_eq!(root.read_opt("/sys/a/none").unwrap(), None);
        assert!(
            root.read_text("/sys/a/padded/below")
                .unwrap_err()
                .is_not_found()
        );
    }

    #[test]
    fn lists_numerically_and_reads_link_names() {
        let dir = tempfile::tempdir().unwrap();
        let root = Sysroot::at(dir.path());
        for n in ["10", "9", "1"] {
            fs::create_dir_all(dir.path().join("nodes").join(n)).unwrap();
        }
        assert_eq!(root.list_dir("/nodes").unwrap(), ["1", "9", "10"]);
        std::os::unix::fs::symlink("../../bus/pci/drivers/amdgpu", dir.path().join("driver"))
            .unwrap();
        assert_eq!(
            root.link_name("/driver").unwrap().as_deref(),
            Some("amdgpu")
        );
        assert_eq!(root.link_name("/nolink").unwrap(), None);
        assert!(root.link_name("/nodes").is_err());
        assert!(root.recorded().is_empty());
        let rec = Sysroot::recording(dir.path());
        let _ = rec.list_dir("/nodes");
        let _ = rec.read_opt("/absent");
        assert_eq!(rec.recorded(), ["/absent", "/nodes"]);
    }
}
