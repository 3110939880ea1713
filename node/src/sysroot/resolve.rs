//! Paths looked up inside a root directory as a chroot would: an absolute
//! link starts again at the root, `..` stops there, and nothing outside the
//! root is ever opened, read or listed. A captured node (an unpacked
//! archive, a `--sysroot` directory) holds links a kernel wrote relative to
//! its own `/sys` (`/sys/bus/pci/devices/X -> ../../../devices/...`), and
//! links anyone may have written (`vbios_version -> /etc/shadow`,
//! `-> ../../../../../../etc/shadow`): both mean a place on the captured
//! node, never one on the host reading it.
//!
//! Each component is opened relative to the descriptor of its parent with
//! `O_NOFOLLOW`, so a link is seen as a link and followed here, within the
//! root, never by the kernel; a link swapped in between two steps makes the
//! open fail instead of leading out. At most [`MAX_LINKS`] links are
//! followed per lookup, as the kernel's own limit (`fs/namei.c`,
//! `MAXSYMLINKS`, Linux 4.2 and later).

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, readlinkat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat};
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Links followed in one lookup before it fails with ELOOP.
pub(crate) const MAX_LINKS: usize = 40;

/// What kind of file an entry is, not following a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Link,
    /// A FIFO: a captured node's record of a file that did not answer.
    Fifo,
    /// A character or block device, or a socket: never opened in a capture.
    Special,
}

impl Kind {
    /// The kind of a file type as `std::fs` reports it (links not followed
    /// when it came from `symlink_metadata` or a directory entry).
    pub(crate) fn of_type(t: std::fs::FileType) -> Kind {
        use std::os::unix::fs::FileTypeExt as _;
        if t.is_symlink() {
            Kind::Link
        } else if t.is_dir() {
            Kind::Dir
        } else if t.is_file() {
            Kind::File
        } else if t.is_fifo() {
            Kind::Fifo
        } else {
            Kind::Special
        }
    }

    fn of(st: &FileStat) -> Kind {
        let t = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
        if t == SFlag::S_IFREG {
            Kind::File
        } else if t == SFlag::S_IFDIR {
            Kind::Dir
        } else if t == SFlag::S_IFLNK {
            Kind::Link
        } else if t == SFlag::S_IFIFO {
            Kind::Fifo
        } else {
            Kind::Special
        }
    }
}

/// An entry found inside a root.
#[derive(Debug)]
pub(crate) struct Found {
    /// The entry itself (an `O_PATH` descriptor: opening it had no effect
    /// on the file, as opening a device would).
    fd: OwnedFd,
    /// Its kind (a link only when the last link was not to be followed).
    pub(crate) kind: Kind,
    /// Its group.
    pub(crate) gid: u32,
    /// Its type and permission bits, as `stat` gives them.
    pub(crate) mode: u32,
    /// The device of its file system.
    pub(crate) dev: u64,
    /// Its inode, with `dev` what a reopened descriptor must match.
    ino: u64,
    /// How it was found, to look it up again where `/proc` is not mounted
    /// (a chroot, a minimal container).
    root: PathBuf,
    rel: String,
    follow_last: bool,
}

fn io(e: Errno) -> std::io::Error {
    std::io::Error::from_raw_os_error(e as i32)
}

/// Set once the kernel said it has no `openat2` (before Linux 5.6).
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// Looks `rel` (a path such as `/sys/class/drm/card0/device/vendor`) up
/// inside `root`, following links within it; the last component's link
/// too when `follow_last` says so. Errors are the kernel's (ENOENT,
/// ENOTDIR, ELOOP, EACCES).
pub(crate) fn lookup(root: &Path, rel: &str, follow_last: bool) -> std::io::Result<Found> {
    let fd = open_in(root, rel, follow_last, OFlag::O_PATH)?;
    let st = fstat(&fd).map_err(io)?;
    Ok(Found {
        fd,
        kind: Kind::of(&st),
        gid: st.st_gid,
        mode: st.st_mode,
        dev: st.st_dev,
        ino: st.st_ino,
        root: root.to_path_buf(),
        rel: rel.to_string(),
        follow_last,
    })
}

/// `rel` looked up inside `root` as [`lookup`] does, its last component
/// opened with `open` (`O_PATH` to find it, `O_RDONLY` to read it).
fn open_in(root: &Path, rel: &str, follow_last: bool, open: OFlag) -> std::io::Result<OwnedFd> {
    let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    // The root itself is the caller's choice: a link to it is followed.
    let root_fd = nix::fcntl::open(root, flags, Mode::empty()).map_err(io)?;
    match in_kernel(&root_fd, rel, follow_last, open) {
        Some(found) => found,
        None => walk(root_fd, rel, follow_last, open),
    }
}

/// The device of `root`'s file system when it is one of the local disk or
/// memory file systems, whose reads do not hang; `None` for a network or
/// FUSE file system (or anything else), whose reads may.
pub(crate) fn local_device(root: &Path) -> Option<u64> {
    use nix::sys::statfs::{
        BTRFS_SUPER_MAGIC, EXT4_SUPER_MAGIC, F2FS_SUPER_MAGIC, OVERLAYFS_SUPER_MAGIC, TMPFS_MAGIC,
        XFS_SUPER_MAGIC, statfs,
    };
    let kind = statfs(root).ok()?.filesystem_type();
    // ext2, ext3 and ext4 share one magic number.
    let local = [
        EXT4_SUPER_MAGIC,
        XFS_SUPER_MAGIC,
        BTRFS_SUPER_MAGIC,
        TMPFS_MAGIC,
        OVERLAYFS_SUPER_MAGIC,
        F2FS_SUPER_MAGIC,
    ]
    .contains(&kind);
    local.then(|| nix::sys::stat::stat(root).ok().map(|st| st.st_dev))?
}

/// The lookup in one call: `openat2` with `RESOLVE_IN_ROOT` (Linux 5.6,
/// `fs/namei.c`) scopes absolute links and `..` to the root exactly as
/// [`walk`] does. `None` where the kernel lacks it or a seccomp filter
/// refuses it (EPERM, as older container runtimes answer unknown calls).
fn in_kernel(
    root: &OwnedFd,
    rel: &str,
    follow_last: bool,
    open: OFlag,
) -> Option<std::io::Result<OwnedFd>> {
    use nix::fcntl::{OpenHow, ResolveFlag, openat2};
    if NO_OPENAT2.load(Ordering::Relaxed) {
        return None;
    }
    let rel = rel.trim_start_matches('/');
    let path = if rel.is_empty() { "." } else { rel };
    let mut flags = open | OFlag::O_CLOEXEC;
    if !follow_last {
        flags |= OFlag::O_NOFOLLOW;
    }
    let how = OpenHow::new()
        .flags(flags)
        .resolve(ResolveFlag::RESOLVE_IN_ROOT | ResolveFlag::RESOLVE_NO_MAGICLINKS);
    // EAGAIN: a rename raced a `..`; the kernel asks for a retry.
    for _ in 0..3 {
        match openat2(root, path, how) {
            Ok(fd) => return Some(Ok(fd)),
            Err(Errno::EAGAIN) => {}
            Err(Errno::ENOSYS) => {
                NO_OPENAT2.store(true, Ordering::Relaxed);
                return None;
            }
            Err(Errno::EPERM) => return None,
            Err(e) => return Some(Err(io(e))),
        }
    }
    None
}

/// The lookup component by component, for kernels without `openat2`.
fn walk(root_fd: OwnedFd, rel: &str, follow_last: bool, open: OFlag) -> std::io::Result<OwnedFd> {
    let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    let mut stack: Vec<OwnedFd> = vec![root_fd];
    let mut pending: Vec<OsString> = components(rel.as_bytes());
    let mut hops = 0usize;
    while let Some(part) = pending.pop() {
        if part == "." {
            continue;
        }
        if part == ".." {
            // `..` of the root is the root, as in a chroot.
            if stack.len() > 1 {
                stack.pop();
            }
            continue;
        }
        let Some(top) = stack.last() else {
            return Err(io(Errno::ENOENT));
        };
        let last = pending.is_empty();
        if !last {
            // The common case first: a directory, in one call.
            match openat(
                top,
                part.as_os_str(),
                flags | OFlag::O_NOFOLLOW,
                Mode::empty(),
            ) {
                Ok(fd) => {
                    stack.push(fd);
                    continue;
                }
                Err(Errno::ENOTDIR | Errno::ELOOP) => {}
                Err(e) => return Err(io(e)),
            }
        }
        let st = fstatat(top, part.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW).map_err(io)?;
        let kind = Kind::of(&st);
        if kind == Kind::Link && (!last || follow_last) {
            hops += 1;
            if hops > MAX_LINKS {
                return Err(io(Errno::ELOOP));
            }
            let target = readlinkat(top, part.as_os_str()).map_err(io)?;
            let bytes = target.as_bytes();
            if bytes.starts_with(b"/") {
                stack.truncate(1);
            }
            pending.extend(components(bytes));
            continue;
        }
        if !last {
            return Err(io(Errno::ENOTDIR));
        }
        return openat(
            top,
            part.as_os_str(),
            open | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(io);
    }
    // The path ended at a directory: the one on top.
    let top = stack.pop().ok_or_else(|| io(Errno::ENOENT))?;
    if open.contains(OFlag::O_PATH) {
        Ok(top)
    } else {
        openat(&top, ".", open | OFlag::O_CLOEXEC, Mode::empty()).map_err(io)
    }
}

/// The components of `path`, last first (so that `pop` takes the next).
fn components(path: &[u8]) -> Vec<OsString> {
    path.split(|&b| b == b'/')
        .filter(|p| !p.is_empty())
        .rev()
        .map(|p| OsStr::from_bytes(p).to_os_string())
        .collect()
}

impl Found {
    /// The descriptor's own /proc entry: opening it reopens exactly the
    /// file that was looked up, with no second lookup to race.
    fn proc_path(&self) -> String {
        format!("/proc/self/fd/{}", self.fd.as_raw_fd())
    }

    /// Opens the entry for reading, without blocking in `open` (the caller
    /// refuses FIFOs and devices first; the flag keeps one from blocking
    /// all the same).
    pub(crate) fn open(&self) -> std::io::Result<std::fs::File> {
        let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY | OFlag::O_CLOEXEC;
        match nix::fcntl::open(self.proc_path().as_str(), flags, Mode::empty()) {
            Ok(fd) => Ok(std::fs::File::from(fd)),
            // No /proc (a chroot, a minimal container): the entry is looked
            // up again, opened for reading, and must be the one found.
            Err(Errno::ENOENT) => self.reopen(flags),
            Err(e) => Err(io(e)),
        }
    }

    /// The entry looked up again inside its root and opened with `flags`;
    /// an entry that is no longer the one first found (swapped meanwhile)
    /// is refused.
    fn reopen(&self, flags: OFlag) -> std::io::Result<std::fs::File> {
        let again = lookup(&self.root, &self.rel, self.follow_last)?;
        if (again.dev, again.ino) != (self.dev, self.ino) || again.kind != self.kind {
            return Err(io(Errno::ESTALE));
        }
        let file = std::fs::File::from(open_in(&self.root, &self.rel, self.follow_last, flags)?);
        let st = fstat(&file).map_err(io)?;
        if (st.st_dev, st.st_ino) != (self.dev, self.ino) {
            return Err(io(Errno::ESTALE));
        }
        Ok(file)
    }

    /// The names of the directory's entries and their kinds (links not
    /// followed), unsorted.
    pub(crate) fn list(&self) -> std::io::Result<Vec<(OsString, Kind)>> {
        if self.kind != Kind::Dir {
            return Err(io(Errno::ENOTDIR));
        }
        let mut out = Vec::new();
        let names: Vec<OsString> = match std::fs::read_dir(self.proc_path()) {
            Ok(dir) => dir
                .map(|e| e.map(|e| e.file_name()))
                .collect::<std::io::Result<_>>()?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
                let dir = nix::dir::Dir::from_fd(self.reopen(flags)?.into()).map_err(io)?;
                dir.into_iter()
                    .filter_map(|e| e.ok())
                    .map(|e| OsStr::from_bytes(e.file_name().to_bytes()).to_os_string())
                    .filter(|n| n != "." && n != "..")
                    .collect()
            }
            Err(e) => return Err(e),
        };
        for name in names {
            let kind = fstatat(&self.fd, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW)
                .map(|st| Kind::of(&st))
                .map_err(io)?;
            out.push((name, kind));
        }
        Ok(out)
    }

    /// The target of the link the entry is.
    pub(crate) fn read_link(&self) -> std::io::Result<PathBuf> {
        if self.kind != Kind::Link {
            return Err(io(Errno::EINVAL));
        }
        // An empty path reads the link the descriptor is (Linux 2.6.39).
        readlinkat(&self.fd, "").map(PathBuf::from).map_err(io)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn read(root: &Path, rel: &str) -> std::io::Result<String> {
        let f = lookup(root, rel, true)?;
        let mut s = String::new();
        std::io::Read::read_to_string(&mut f.open()?, &mut s)?;
        Ok(s)
    }

    #[test]
    fn an_entry_reopened_without_proc_is_the_one_found() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        std::fs::create_dir_all(r.join("sys/d")).unwrap();
        std::fs::write(r.join("sys/d/f"), "x\n").unwrap();
        symlink("/sys/d/f", r.join("sys/link")).unwrap();
        symlink("../../../../etc/hostname", r.join("sys/out")).unwrap();
        std::fs::write(r.join("etc-hostname-stand-in"), "").unwrap();
        let flags = OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        for rel in ["/sys/d/f", "/sys/link"] {
            let found = lookup(r, rel, true).unwrap();
            let mut text = String::new();
            std::io::Read::read_to_string(&mut found.reopen(flags).unwrap(), &mut text).unwrap();
            assert_eq!(text, "x\n", "{rel}");
        }
        // A link out of the root stays inside it, reopened or not.
        assert!(lookup(r, "/sys/out", true).is_err());
        // An entry swapped after it was found is refused.
        let found = lookup(r, "/sys/d/f", true).unwrap();
        std::fs::remove_file(r.join("sys/d/f")).unwrap();
        std::fs::write(r.join("sys/d/f"), "y\n").unwrap();
        assert!(found.reopen(flags).is_err());
        let dir = lookup(r, "/sys/d", true).unwrap();
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        assert!(dir.reopen(flags).is_ok());
    }

    #[test]
    fn the_walk_agrees_with_the_kernel() {
        let outer = tempfile::tempdir().unwrap();
        let root = outer.path().join("root");
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/f"), "x").unwrap();
        symlink("/a/b", root.join("abs")).unwrap();
        symlink("../../../../a", root.join("a/b/up")).unwrap();
        symlink("self", root.join("self")).unwrap();
        for (rel, follow) in [
            ("/abs/f", true),
            ("/a/b/up/b/f", true),
            ("/abs", false),
            ("/self", true),
            ("/abs/../b/f", true),
            ("/missing", true),
            ("/", true),
        ] {
            let kernel = in_kernel(
                &nix::fcntl::open(&root, OFlag::O_PATH | OFlag::O_DIRECTORY, Mode::empty())
                    .unwrap(),
                rel,
                follow,
                OFlag::O_PATH,
            );
            let Some(kernel) = kernel else {
                return; // no openat2 here: only the walk is used
            };
            let walked = walk(
                nix::fcntl::open(&root, OFlag::O_PATH | OFlag::O_DIRECTORY, Mode::empty()).unwrap(),
                rel,
                follow,
                OFlag::O_PATH,
            );
            let ino = |r: std::io::Result<OwnedFd>| {
                r.map(|fd| fstat(&fd).unwrap().st_ino)
                    .map_err(|e| e.raw_os_error())
            };
            assert_eq!(ino(kernel), ino(walked), "{rel}");
        }
    }

    #[test]
    fn links_resolve_inside_the_root_as_in_a_chroot() {
        let outer = tempfile::tempdir().unwrap();
        std::fs::write(outer.path().join("secret"), "host").unwrap();
        let root = outer.path().join("root");
        std::fs::create_dir_all(root.join("sys/devices/pci0000:00/0000:05:00.0")).unwrap();
        std::fs::create_dir_all(root.join("sys/bus/pci/devices")).unwrap();
        std::fs::write(
            root.join("sys/devices/pci0000:00/0000:05:00.0/vendor"),
            "0x1002",
        )
        .unwrap();
        std::fs::write(root.join("secret"), "inside").unwrap();
        symlink(
            "../../../devices/pci0000:00/0000:05:00.0",
            root.join("sys/bus/pci/devices/0000:05:00.0"),
        )
        .unwrap();
        let dev = root.join("sys/devices/pci0000:00/0000:05:00.0");
        symlink(outer.path().join("secret"), dev.join("absolute")).unwrap();
        symlink("../../../../../../../../../secret", dev.join("escape")).unwrap();
        symlink("/", dev.join("top")).unwrap();
        symlink("loop", dev.join("loop")).unwrap();
        std::fs::hard_link(dev.join("escape"), dev.join("hard")).unwrap();
        let gpu = "/sys/bus/pci/devices/0000:05:00.0";
        assert_eq!(read(&root, &format!("{gpu}/vendor")).unwrap(), "0x1002");
        // The link's `..` is the target's parent, as the kernel resolves it.
        assert_eq!(
            read(&root, &format!("{gpu}/../0000:05:00.0/vendor")).unwrap(),
            "0x1002"
        );
        // An absolute link names a path of the captured node: it starts at
        // the root, so the host's file of that name is not reached.
        let abs = lookup(&root, &format!("{gpu}/absolute"), true).unwrap_err();
        assert_eq!(abs.kind(), std::io::ErrorKind::NotFound);
        assert_eq!(read(&root, &format!("{gpu}/escape")).unwrap(), "inside");
        assert_eq!(read(&root, &format!("{gpu}/hard")).unwrap(), "inside");
        assert_eq!(read(&root, &format!("{gpu}/top/secret")).unwrap(), "inside");
        assert_eq!(read(&root, "/../../secret").unwrap(), "inside");
        let looped = lookup(&root, &format!("{gpu}/loop"), true).unwrap_err();
        assert_eq!(looped.raw_os_error(), Some(Errno::ELOOP as i32));
        // Not following the last link: the link itself.
        let link = lookup(&root, &format!("{gpu}/escape"), false).unwrap();
        assert_eq!(link.kind, Kind::Link);
        assert_eq!(
            link.read_link().unwrap(),
            Path::new("../../../../../../../../../secret")
        );
        assert_eq!(lookup(&root, "/", true).unwrap().kind, Kind::Dir);
        let names: Vec<_> = lookup(&root, gpu, true)
            .unwrap()
            .list()
            .unwrap()
            .into_iter()
            .map(|(n, k)| (n.to_string_lossy().into_owned(), k))
            .filter(|(n, _)| n == "vendor" || n == "top")
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(names.contains(&("top".to_string(), Kind::Link)));
        let not_dir = lookup(&root, &format!("{gpu}/vendor/x"), true).unwrap_err();
        assert_eq!(not_dir.raw_os_error(), Some(Errno::ENOTDIR as i32));
    }
}
