//! Safe directory writing: entries created beneath one directory, never
//! through a symbolic link, whatever links earlier entries made.

use nix::errno::Errno;
use std::path::{Path, PathBuf};

/// Creates entries under one root directory without ever following a
/// symbolic link: every parent is opened component by component with
/// `O_NOFOLLOW` relative to its own parent, and every entry is created
/// relative to its parent's descriptor, so a link the archive created
/// earlier (`up -> ..`, `evil -> /etc`) can be created and later read, but
/// nothing is ever written through it.
pub(super) struct SafeDir {
    root: std::os::fd::OwnedFd,
}

/// What sits at a name, not following links.
#[derive(Debug, PartialEq, Eq)]
enum Existing {
    Nothing,
    Dir,
    Other,
}

impl SafeDir {
    /// Entries under `dir`, an existing directory.
    pub(super) fn new(dir: &Path) -> Result<SafeDir, String> {
        let root = std::fs::File::open(dir)
            .map_err(|e| format!("failed to open {}: {e}", dir.display()))?;
        Ok(SafeDir { root: root.into() })
    }

    /// The directory that will hold the last of `parts`, with the name it
    /// gets there. Missing parents are created when `create` says so.
    fn parent<'p>(
        &self,
        parts: &'p [std::ffi::OsString],
        shown: &str,
        create: bool,
    ) -> Result<(std::os::fd::OwnedFd, &'p std::ffi::OsStr), String> {
        use nix::fcntl::{OFlag, openat};
        use nix::sys::stat::Mode;
        let Some((leaf, parents)) = parts.split_last() else {
            return Err(format!("entry `{shown}` names the archive's root"));
        };
        let mut dir = self
            .root
            .try_clone()
            .map_err(|e| format!("failed to unpack `{shown}`: {e}"))?;
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        for (i, part) in parents.iter().enumerate() {
            let mut opened = openat(&dir, part.as_os_str(), flags, Mode::empty());
            if matches!(opened, Err(Errno::ENOENT)) && create {
                match nix::sys::stat::mkdirat(
                    &dir,
                    part.as_os_str(),
                    Mode::from_bits_truncate(0o755),
                ) {
                    Ok(()) | Err(Errno::EEXIST) => {}
                    Err(e) => return Err(format!("failed to unpack `{shown}`: {e}")),
                }
                opened = openat(&dir, part.as_os_str(), flags, Mode::empty());
            }
            dir = match opened {
                Ok(fd) => fd,
                Err(Errno::ENOENT) => {
                    return Err(format!(
                        "entry `{shown}` refers to `{}`, which the archive does not hold",
                        Path::new(&parts[..=i].iter().collect::<PathBuf>()).display()
                    ));
                }
                Err(Errno::ELOOP | Errno::ENOTDIR) => {
                    let what = match nix::sys::stat::fstatat(
                        &dir,
                        part.as_os_str(),
                        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
                    ) {
                        Ok(st)
                            if nix::sys::stat::SFlag::from_bits_truncate(st.st_mode)
                                & nix::sys::stat::SFlag::S_IFMT
                                == nix::sys::stat::SFlag::S_IFLNK =>
                        {
                            "a symbolic link"
                        }
                        _ => "not a directory",
                    };
                    return Err(format!(
                        "entry `{shown}` lies beneath `{}`, which is {what}; unpacking never writes through a link",
                        parts[..=i].iter().collect::<PathBuf>().display()
                    ));
                }
                Err(e) => return Err(format!("failed to unpack `{shown}`: {e}")),
            };
        }
        Ok((dir, leaf.as_os_str()))
    }

    /// What sits at `name` in `dir`.
    fn existing(dir: &std::os::fd::OwnedFd, name: &std::ffi::OsStr) -> Result<Existing, Errno> {
        use nix::sys::stat::SFlag;
        match nix::sys::stat::fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR => {
                Ok(Existing::Dir)
            }
            Ok(_) => Ok(Existing::Other),
            Err(Errno::ENOENT) => Ok(Existing::Nothing),
            Err(e) => Err(e),
        }
    }

    /// Makes room for a non-directory entry: a later entry replaces an
    /// earlier one of the same name (unlinking never follows a link), but
    /// never a directory.
    fn clear(
        dir: &std::os::fd::OwnedFd,
        name: &std::ffi::OsStr,
        shown: &str,
    ) -> Result<(), String> {
        match Self::existing(dir, name) {
            Ok(Existing::Nothing) => Ok(()),
            Ok(Existing::Dir) => Err(format!(
                "entry `{shown}` would replace a directory the archive already made"
            )),
            Ok(Existing::Other) => {
                nix::unistd::unlinkat(dir, name, nix::unistd::UnlinkatFlags::NoRemoveDir)
                    .map_err(|e| format!("failed to unpack `{shown}`: {e}"))
            }
            Err(e) => Err(format!("failed to unpack `{shown}`: {e}")),
        }
    }

    /// Creates the directory `parts` (and its missing parents).
    pub(super) fn dir(&self, parts: &[std::ffi::OsString], shown: &str) -> Result<(), String> {
        if parts.is_empty() {
            return Ok(()); // `./`: the root exists.
        }
        let (dir, name) = self.parent(parts, shown, true)?;
        match Self::existing(&dir, name) {
            Ok(Existing::Dir) => return Ok(()),
            Ok(Existing::Other) => Self::clear(&dir, name, shown)?,
            Ok(Existing::Nothing) => {}
            Err(e) => return Err(format!("failed to unpack `{shown}`: {e}")),
        }
        nix::sys::stat::mkdirat(&dir, name, nix::sys::stat::Mode::from_bits_truncate(0o755))
            .map_err(|e| format!("failed to unpack `{shown}`: {e}"))
    }

    /// Creates the regular file `parts`, replacing what was there.
    pub(super) fn file(
        &self,
        parts: &[std::ffi::OsString],
        shown: &str,
    ) -> Result<std::fs::File, String> {
        use nix::fcntl::{OFlag, openat};
        let (dir, name) = self.parent(parts, shown, true)?;
        Self::clear(&dir, name, shown)?;
        // O_EXCL: the name was just cleared; nothing may be reused.
        let fd = openat(
            &dir,
            name,
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::from_bits_truncate(0o644),
        )
        .map_err(|e| format!("failed to unpack `{shown}`: {e}"))?;
        Ok(std::fs::File::from(fd))
    }

    /// Creates the symbolic link `parts` to `target`, never followed here.
    pub(super) fn symlink(
        &self,
        parts: &[std::ffi::OsString],
        target: &[u8],
        shown: &str,
    ) -> Result<(), String> {
        use std::os::unix::ffi::OsStrExt;
        if target.is_empty() || target.contains(&0) {
            return Err(format!(
                "symbolic link `{shown}` has an empty or malformed target"
            ));
        }
        let (dir, name) = self.parent(parts, shown, true)?;
        Self::clear(&dir, name, shown)?;
        nix::unistd::symlinkat(std::ffi::OsStr::from_bytes(target), &dir, name)
            .map_err(|e| format!("failed to unpack `{shown}`: {e}"))
    }

    /// Creates the FIFO `parts` (a file that did not answer).
    pub(super) fn fifo(&self, parts: &[std::ffi::OsString], shown: &str) -> Result<(), String> {
        let (dir, name) = self.parent(parts, shown, true)?;
        Self::clear(&dir, name, shown)?;
        nix::unistd::mkfifoat(&dir, name, nix::sys::stat::Mode::from_bits_truncate(0o644))
            .map_err(|e| format!("failed to unpack `{shown}`: {e}"))
    }

    /// A hard link to an entry already unpacked: its target is looked up
    /// inside the root, not following links, and may not be a directory.
    pub(super) fn hard_link(
        &self,
        parts: &[std::ffi::OsString],
        target: &[std::ffi::OsString],
        shown: &str,
    ) -> Result<(), String> {
        if parts == target {
            return Err(format!("hard link `{shown}` links to itself"));
        }
        let target_shown = target.iter().collect::<PathBuf>().display().to_string();
        let (from_dir, from_name) = self.parent(target, &target_shown, false)?;
        match Self::existing(&from_dir, from_name) {
            Ok(Existing::Other) => {}
            Ok(Existing::Dir) => {
                return Err(format!(
                    "hard link `{shown}` points at the directory `{target_shown}`"
                ));
            }
            Ok(Existing::Nothing) => {
                return Err(format!(
                    "hard link `{shown}` points at `{target_shown}`, which the archive does not hold"
                ));
            }
            Err(e) => return Err(format!("failed to unpack `{shown}`: {e}")),
        }
        let (dir, name) = self.parent(parts, shown, true)?;
        Self::clear(&dir, name, shown)?;
        // No AT_SYMLINK_FOLLOW: a link to a symbolic link links the link
        // itself, never what it points at.
        nix::unistd::linkat(
            &from_dir,
            from_name,
            &dir,
            name,
            nix::fcntl::AtFlags::empty(),
        )
        .map_err(|e| format!("failed to unpack `{shown}`: {e}"))
    }
}
