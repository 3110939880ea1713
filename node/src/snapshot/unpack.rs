//! The hostile-safe unpacker: a tar stream from anywhere is unpacked into
//! one directory or refused, naming what is wrong. Nothing lands outside
//! the directory or is written through a link (see `safe_dir`), device
//! nodes are refused, and sizes, entry counts and extension headers are
//! bounded before their data is read.

use super::MAX_FILE;
use super::safe_dir::SafeDir;
use std::io::{Read, Write};
use std::path::Path;

/// How much an archive may unpack to. A snapshot holds sysfs, /proc and
/// /etc files that the writer caps at [`super::MAX_FILE`] each, a few thousand of
/// them on the largest nodes; an archive far beyond that is damaged or
/// hostile (a few KB of zstd can hold GiBs of zeros), and is refused
/// before it fills the disk.
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    /// Bytes in one entry.
    pub(super) file: u64,
    /// Bytes in all entries together.
    pub(super) total: u64,
    /// Entries, extension headers included.
    pub(super) entries: u64,
}

/// The limits `--sysroot` applies.
pub(super) const LIMITS: Limits = Limits {
    file: MAX_FILE,
    total: 1 << 30,
    entries: 200_000,
};

/// Largest GNU long name or pax extension header: Linux paths stop at 4 KiB.
const MAX_META: u64 = 64 << 10;

/// A byte count for messages (`65536 bytes` stays exact below 1 MiB;
/// `16 MiB`, `2.0 GiB` above).
fn human(bytes: u64) -> String {
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    if bytes >= GIB && bytes % GIB == 0 {
        format!("{} GiB", bytes / GIB)
    } else if bytes >= GIB {
        format!("{:.1} GiB", bytes as f64 / GIB as f64)
    } else if bytes >= MIB && bytes % MIB == 0 {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= MIB {
        format!("{:.1} MiB", bytes as f64 / MIB as f64)
    } else {
        format!("{bytes} bytes")
    }
}

/// Why unpacking stopped.
#[derive(Debug)]
pub(super) enum Refusal {
    /// The archive is damaged, hostile or too large; says what is wrong.
    Invalid(String),
    /// `stop` said so.
    Interrupted,
}

impl From<String> for Refusal {
    fn from(why: String) -> Refusal {
        Refusal::Invalid(why)
    }
}

/// An entry's name for messages: lossy, and cut short (a long name is up to
/// [`MAX_META`] bytes).
fn shown_name(name: &[u8]) -> String {
    let text = String::from_utf8_lossy(name);
    match text.char_indices().nth(200) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text.into_owned(),
    }
}

/// The components of an entry's name, which must stay inside the root: no
/// absolute names, no `..`, no NUL. Empty for the root itself (`./`).
fn components(name: &[u8]) -> Result<Vec<std::ffi::OsString>, String> {
    use std::os::unix::ffi::OsStrExt;
    let shown = shown_name(name);
    if name.is_empty() {
        return Err("an entry has no name".into());
    }
    if name.contains(&0) {
        return Err(format!("entry `{shown}` has a NUL byte in its name"));
    }
    let mut parts = Vec::new();
    for c in Path::new(std::ffi::OsStr::from_bytes(name)).components() {
        match c {
            std::path::Component::Normal(s) => parts.push(s.to_os_string()),
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                return Err(format!(
                    "entry `{shown}` climbs out with `..`; nothing may land outside the unpacked directory"
                ));
            }
            std::path::Component::RootDir | std::path::Component::Prefix(_) => {
                return Err(format!(
                    "entry `{shown}` has an absolute name; nothing may land outside the unpacked directory"
                ));
            }
        }
    }
    Ok(parts)
}

/// Unpacks the tar stream `input` into `dir`: see [`walk`].
#[cfg(test)]
fn unpack<R: Read>(
    input: R,
    dir: &Path,
    limits: Limits,
    stop: &dyn Fn() -> bool,
) -> Result<u64, Refusal> {
    walk(input, Some(dir), limits, stop)
}

/// Extension headers read so far that describe the next entry: a GNU long
/// name or link target, pax attributes.
#[derive(Default)]
struct Pending {
    long_name: Option<Vec<u8>>,
    long_link: Option<Vec<u8>>,
    pax: Option<Vec<u8>>,
}

impl Pending {
    /// Reads the extension header `entry` (the `seen`th), bounded by
    /// [`MAX_META`].
    fn read<R: Read>(&mut self, entry: &mut tar::Entry<'_, R>, seen: u64) -> Result<(), String> {
        use tar::EntryType;
        let size = entry.size();
        if size > MAX_META {
            return Err(format!(
                "extension header {} holds {}, over the {} limit for names and attributes",
                seen,
                human(size),
                human(MAX_META)
            ));
        }
        let mut bytes = Vec::new();
        entry
            .read_to_end(&mut bytes)
            .map_err(|e| format!("it is damaged at entry {seen}: {e}"))?;
        match entry.header().entry_type() {
            EntryType::GNULongName => self.long_name = Some(trim_nul(bytes)),
            EntryType::GNULongLink => self.long_link = Some(trim_nul(bytes)),
            EntryType::XHeader => self.pax = Some(bytes),
            // Global pax attributes describe no entry a snapshot needs.
            _ => {}
        }
        Ok(())
    }

    /// The name and link target of `entry`, its header's unless the
    /// pending extension headers say otherwise; consumes them.
    fn names<R: Read>(
        &mut self,
        entry: &tar::Entry<'_, R>,
    ) -> Result<(Vec<u8>, Option<Vec<u8>>), String> {
        let mut name = match self.long_name.take() {
            Some(n) => n,
            None => entry.path_bytes().into_owned(),
        };
        let mut link = match self.long_link.take() {
            Some(l) => Some(l),
            None => entry.link_name_bytes().map(std::borrow::Cow::into_owned),
        };
        let Some(attrs) = self.pax.take() else {
            return Ok((name, link));
        };
        for ext in tar::PaxExtensions::new(&attrs) {
            let ext = ext.map_err(|e| {
                format!(
                    "the pax attributes of `{}` are malformed: {e}",
                    shown_name(&name)
                )
            })?;
            match ext.key_bytes() {
                b"path" => name = ext.value_bytes().to_vec(),
                b"linkpath" => link = Some(ext.value_bytes().to_vec()),
                // The raw reader reads the header's size; a pax size
                // that disagrees would make the two readings differ.
                b"size" if ext.value_bytes() != entry.size().to_string().as_bytes() => {
                    return Err(format!(
                        "the pax attributes of `{}` give it another size than its header",
                        shown_name(&name)
                    ));
                }
                _ => {}
            }
        }
        Ok((name, link))
    }

    fn is_empty(&self) -> bool {
        self.long_name.is_none() && self.long_link.is_none() && self.pax.is_none()
    }
}

/// Whether an entry of `kind` is an extension header rather than an entry.
fn is_extension(kind: tar::EntryType) -> bool {
    use tar::EntryType;
    matches!(
        kind,
        EntryType::GNULongName
            | EntryType::GNULongLink
            | EntryType::XHeader
            | EntryType::XGlobalHeader
    )
}

/// Refuses an entry of a kind a snapshot never holds.
fn check_kind(kind: tar::EntryType, shown: &str) -> Result<(), String> {
    use tar::EntryType;
    match kind {
        EntryType::Regular
        | EntryType::Continuous
        | EntryType::Directory
        | EntryType::Symlink
        | EntryType::Link
        | EntryType::Fifo => Ok(()),
        EntryType::Char | EntryType::Block => Err(format!(
            "entry `{shown}` is a device node; a snapshot stores device files as plain files and never needs one"
        )),
        other => Err(format!(
            "entry `{shown}` is of a kind a snapshot never holds ({other:?})"
        )),
    }
}

/// Refuses an entry whose header claims more than `limits` allow, `total`
/// bytes having been unpacked before it. Every entry's data counts, read or
/// skipped: a directory header claiming 2 GiB would otherwise be streamed
/// past in full.
fn check_size(shown: &str, size: u64, total: u64, limits: Limits) -> Result<(), String> {
    if size > limits.file {
        return Err(format!(
            "entry `{shown}` holds {}, over the {} limit for one file (rocgate snapshot stores none larger)",
            human(size),
            human(limits.file)
        ));
    }
    if total.saturating_add(size) > limits.total {
        return Err(format!(
            "its entries add up to more than {}, the limit for a whole snapshot (at entry `{shown}`)",
            human(limits.total)
        ));
    }
    Ok(())
}

/// Reads the tar stream `input`, unpacking it into `dir` when given (else
/// checking its headers only): refuses anything that would land outside
/// `dir` or write through a link, device nodes and other entries a snapshot
/// never holds, and archives beyond `limits` (checked on each header before
/// its data is read, and on the bytes as they stream). FIFOs, which stand
/// for files that did not answer, are recreated as FIFOs. Returns the
/// number of entries (at least one).
pub(super) fn walk<R: Read>(
    input: R,
    dir: Option<&Path>,
    limits: Limits,
    stop: &dyn Fn() -> bool,
) -> Result<u64, Refusal> {
    let writer = dir.map(SafeDir::new).transpose()?;
    let mut archive = tar::Archive::new(input);
    // Raw: the tar crate would read a GNU long name or pax header of any
    // size into memory; here they are bounded like everything else.
    let entries = archive
        .entries()
        .map_err(|e| format!("failed to read the archive: {e}"))?
        .raw(true);
    let mut pending = Pending::default();
    let (mut seen, mut made, mut total) = (0u64, 0u64, 0u64);
    for entry in entries {
        if stop() {
            return Err(Refusal::Interrupted);
        }
        let mut entry = entry.map_err(|e| {
            if seen == 0 {
                format!("it does not start with a tar header ({e})")
            } else {
                format!("it is damaged after {seen} entries: {e}")
            }
        })?;
        seen += 1;
        if seen > limits.entries {
            return Err(format!(
                "it holds more than {} entries, the limit for a snapshot",
                limits.entries
            )
            .into());
        }
        let kind = entry.header().entry_type();
        let size = entry.size();
        if is_extension(kind) {
            pending.read(&mut entry, seen)?;
            total += size;
            continue;
        }
        let (name, link) = pending.names(&entry)?;
        let shown = shown_name(&name);
        check_size(&shown, size, total, limits)?;
        let parts = components(&name)?;
        check_kind(kind, &shown)?;
        let link_parts = if kind == tar::EntryType::Link {
            Some(
                components(link.as_deref().unwrap_or_default())
                    .map_err(|e| format!("hard link `{shown}`: {e}"))?,
            )
        } else {
            None
        };
        let Some(writer) = &writer else {
            // Headers only: the data is skipped (counted as the header says).
            total += size;
            made += 1;
            continue;
        };
        let target = Target {
            parts: &parts,
            link,
            link_parts,
            shown: &shown,
        };
        total += create(writer, &mut entry, &target, total, limits, stop)?;
        made += 1;
    }
    if !pending.is_empty() {
        return Err(
            "it ends with a long name or pax header that describes no entry"
                .to_string()
                .into(),
        );
    }
    if made == 0 {
        return Err("it holds no entries".to_string().into());
    }
    Ok(made)
}

/// Where one entry goes, and what a link entry leads to.
struct Target<'a> {
    parts: &'a [std::ffi::OsString],
    /// A symbolic link's target as written, or a hard link's name.
    link: Option<Vec<u8>>,
    /// A hard link's target, inside the root.
    link_parts: Option<Vec<std::ffi::OsString>>,
    shown: &'a str,
}

/// Creates `entry` (checked: of a kind a snapshot holds, within the limits
/// by its header) at `target` in `writer`'s directory; returns the bytes it
/// counts for, `total` having been unpacked before it.
fn create<R: Read>(
    writer: &SafeDir,
    entry: &mut tar::Entry<'_, R>,
    target: &Target<'_>,
    total: u64,
    limits: Limits,
    stop: &dyn Fn() -> bool,
) -> Result<u64, Refusal> {
    use tar::EntryType;
    let (parts, shown) = (target.parts, target.shown);
    match entry.header().entry_type() {
        EntryType::Regular | EntryType::Continuous => {
            let file = writer.file(parts, shown)?;
            return copy(entry, file, shown, total, limits, stop);
        }
        EntryType::Directory => writer.dir(parts, shown)?,
        EntryType::Symlink => {
            let to = target.link.clone().unwrap_or_default();
            writer.symlink(parts, &to, shown)?;
        }
        EntryType::Link => {
            let to = target.link_parts.clone().unwrap_or_default();
            writer.hard_link(parts, &to, shown)?;
        }
        _ => writer.fifo(parts, shown)?,
    }
    Ok(entry.size())
}

/// Copies a regular entry's data into `file`, counting the bytes as they
/// stream so that no reader can be talked past the limits; returns them.
fn copy<R: Read>(
    entry: &mut tar::Entry<'_, R>,
    mut file: std::fs::File,
    shown: &str,
    total: u64,
    limits: Limits,
    stop: &dyn Fn() -> bool,
) -> Result<u64, Refusal> {
    let mut buf = vec![0u8; 64 << 10];
    let mut copied = 0u64;
    loop {
        if stop() {
            return Err(Refusal::Interrupted);
        }
        let n = entry
            .read(&mut buf)
            .map_err(|e| format!("it is damaged in entry `{shown}`: {e}"))?;
        if n == 0 {
            return Ok(copied);
        }
        copied += n as u64;
        // The header was checked; the bytes are counted too.
        if copied > limits.file || total + copied > limits.total {
            return Err(format!(
                "entry `{shown}` streams more than its header said, past the limits"
            )
            .into());
        }
        file.write_all(&buf[..n])
            .map_err(|e| format!("failed to unpack `{shown}`: {e}"))?;
    }
}

/// A GNU long name or link without its terminating NULs.
fn trim_nul(mut bytes: Vec<u8>) -> Vec<u8> {
    while bytes.last() == Some(&0) {
        bytes.pop();
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::super::layout::header;
    use super::*;
    use proptest::prelude::*;
    use rocgate_fixtures::hostile::raw_tar_header;
    use std::os::unix::fs::FileTypeExt;

    /// One crafted tar entry: any name, even those a well-behaved writer
    /// refuses to produce (`..`, absolute).
    #[derive(Clone, Debug)]
    enum Crafted {
        Dir(String),
        File(String, Vec<u8>),
        Symlink(String, String),
        HardLink(String, String),
        Fifo(String),
        Char(String),
    }

    fn tar_of(entries: &[Crafted]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for e in entries {
            let (h, data): (tar::Header, &[u8]) = match e {
                Crafted::Dir(n) => (raw_tar_header(tar::EntryType::Directory, n, "", 0), &[]),
                Crafted::File(n, d) => (
                    raw_tar_header(tar::EntryType::Regular, n, "", d.len() as u64),
                    d.as_slice(),
                ),
                Crafted::Symlink(n, t) => (raw_tar_header(tar::EntryType::Symlink, n, t, 0), &[]),
                Crafted::HardLink(n, t) => (raw_tar_header(tar::EntryType::Link, n, t, 0), &[]),
                Crafted::Fifo(n) => (raw_tar_header(tar::EntryType::Fifo, n, "", 0), &[]),
                Crafted::Char(n) => (raw_tar_header(tar::EntryType::Char, n, "", 0), &[]),
            };
            b.append(&h, data).unwrap();
        }
        b.into_inner().unwrap()
    }

    /// Unpacks `entries` into `outer/unpack`; returns the outcome and
    /// everything in `outer` besides `unpack`.
    fn unpack_in(
        outer: &Path,
        entries: &[Crafted],
        limits: Limits,
    ) -> (Result<u64, Refusal>, Vec<String>) {
        let dir = outer.join("unpack");
        std::fs::create_dir(&dir).unwrap();
        let r = unpack(tar_of(entries).as_slice(), &dir, limits, &|| false);
        let mut others: Vec<String> = std::fs::read_dir(outer)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "unpack")
            .collect();
        others.sort();
        (r, others)
    }

    fn refusal(r: Result<u64, Refusal>) -> String {
        match r {
            Err(Refusal::Invalid(why)) => why,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn nothing_is_created_through_a_link_the_archive_made() {
        let outer = tempfile::tempdir().unwrap();
        let (r, others) = unpack_in(
            outer.path(),
            &[
                Crafted::Symlink("up".into(), "..".into()),
                Crafted::Fifo("up/x".into()),
            ],
            LIMITS,
        );
        let why = refusal(r);
        assert!(
            why.contains("`up/x` lies beneath `up`, which is a symbolic link"),
            "{why}"
        );
        assert!(others.is_empty(), "{others:?}");

        let victim = tempfile::tempdir().unwrap();
        let outer = tempfile::tempdir().unwrap();
        for last in [
            Crafted::Fifo("evil/sub/x".into()),
            Crafted::Dir("evil/sub".into()),
            Crafted::File("evil/f".into(), b"x".to_vec()),
            Crafted::Symlink("evil/l".into(), "/".into()),
            Crafted::HardLink("evil/h".into(), "a".into()),
        ] {
            let _ = std::fs::remove_dir_all(outer.path().join("unpack"));
            let (r, _) = unpack_in(
                outer.path(),
                &[
                    Crafted::File("a".into(), b"1".to_vec()),
                    Crafted::Symlink("evil".into(), victim.path().display().to_string()),
                    last.clone(),
                ],
                LIMITS,
            );
            refusal(r);
            assert_eq!(
                std::fs::read_dir(victim.path()).unwrap().count(),
                0,
                "{last:?} wrote through the link"
            );
        }
    }

    #[test]
    fn links_are_created_and_read_through_afterwards() {
        let outer = tempfile::tempdir().unwrap();
        let (r, others) = unpack_in(
            outer.path(),
            &[
                Crafted::Dir("sys/devices/0000:05:00.0/".into()),
                Crafted::File(
                    "sys/devices/0000:05:00.0/vendor".into(),
                    b"0x1002\n".to_vec(),
                ),
                Crafted::Symlink(
                    "sys/class/drm/card0/device".into(),
                    "../../../devices/0000:05:00.0".into(),
                ),
                // Pointing outside is fine to create: nothing goes through it.
                Crafted::Symlink("sys/escape".into(), "../../../..".into()),
                Crafted::HardLink(
                    "sys/vendor-again".into(),
                    "sys/devices/0000:05:00.0/vendor".into(),
                ),
                Crafted::Fifo("sys/hung".into()),
            ],
            LIMITS,
        );
        assert_eq!(r.unwrap(), 6);
        assert!(others.is_empty());
        let root = outer.path().join("unpack");
        assert_eq!(
            std::fs::read_to_string(root.join("sys/class/drm/card0/device/vendor")).unwrap(),
            "0x1002\n"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("sys/vendor-again")).unwrap(),
            "0x1002\n"
        );
        assert!(
            std::fs::symlink_metadata(root.join("sys/escape"))
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert!(
            std::fs::metadata(root.join("sys/hung"))
                .unwrap()
                .file_type()
                .is_fifo()
        );
    }

    #[test]
    fn a_later_entry_replaces_a_link_without_writing_through_it() {
        let victim = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(victim.path(), "precious").unwrap();
        let outer = tempfile::tempdir().unwrap();
        let (r, _) = unpack_in(
            outer.path(),
            &[
                Crafted::Symlink("f".into(), victim.path().display().to_string()),
                Crafted::File("f".into(), b"replaced".to_vec()),
            ],
            LIMITS,
        );
        r.unwrap();
        assert_eq!(std::fs::read_to_string(victim.path()).unwrap(), "precious");
        let f = outer.path().join("unpack/f");
        assert!(std::fs::symlink_metadata(&f).unwrap().is_file());
        assert_eq!(std::fs::read_to_string(f).unwrap(), "replaced");
    }

    #[test]
    fn escaping_names_device_nodes_and_empty_archives_are_refused() {
        for (entries, says) in [
            (vec![Crafted::File("../x".into(), vec![])], "climbs out"),
            (
                vec![Crafted::File("/tmp/x".into(), vec![])],
                "absolute name",
            ),
            (vec![Crafted::Fifo("a/../../x".into())], "climbs out"),
            (
                vec![
                    Crafted::File("a".into(), vec![]),
                    Crafted::HardLink("b".into(), "../a".into()),
                ],
                "climbs out",
            ),
            (
                vec![
                    Crafted::Symlink("up".into(), "..".into()),
                    Crafted::HardLink("b".into(), "up/x".into()),
                ],
                "symbolic link",
            ),
            (
                vec![
                    Crafted::Dir("d".into()),
                    Crafted::HardLink("b".into(), "d".into()),
                ],
                "directory",
            ),
            (
                vec![Crafted::HardLink("b".into(), "missing".into())],
                "does not hold",
            ),
            (vec![Crafted::Char("dev/kfd".into())], "device node"),
            (
                vec![Crafted::Dir("d".into()), Crafted::File("d".into(), vec![])],
                "replace a directory",
            ),
            (vec![], "no entries"),
        ] {
            let outer = tempfile::tempdir().unwrap();
            let (r, others) = unpack_in(outer.path(), &entries, LIMITS);
            let why = refusal(r);
            assert!(why.contains(says), "{entries:?}: {why}");
            assert!(others.is_empty(), "{entries:?}: {others:?}");
        }
    }

    #[test]
    fn limits_are_checked_on_headers_and_named() {
        let small = Limits {
            file: 10,
            total: 25,
            entries: 3,
        };
        let outer = tempfile::tempdir().unwrap();
        let (r, _) = unpack_in(
            outer.path(),
            &[Crafted::File("big".into(), vec![0; 11])],
            small,
        );
        let why = refusal(r);
        assert!(
            why.contains("`big` holds 11 bytes, over the 10 bytes limit for one file"),
            "{why}"
        );

        let outer = tempfile::tempdir().unwrap();
        let files: Vec<_> = (0..3)
            .map(|i| Crafted::File(format!("f{i}"), vec![0; 10]))
            .collect();
        let (r, _) = unpack_in(outer.path(), &files, small);
        let why = refusal(r);
        assert!(
            why.contains("more than 25 bytes, the limit for a whole snapshot (at entry `f2`)"),
            "{why}"
        );

        let outer = tempfile::tempdir().unwrap();
        let dirs: Vec<_> = (0..4).map(|_| Crafted::Dir("d".into())).collect();
        let (r, _) = unpack_in(outer.path(), &dirs, small);
        let why = refusal(r);
        assert!(why.contains("more than 3 entries"), "{why}");

        // A header claiming 2 GiB is refused before any of its data is
        // read: the stream behind it is not there at all.
        let h = raw_tar_header(tar::EntryType::Regular, "zeros", "", 2 << 30);
        let dir = tempfile::tempdir().unwrap();
        let why = refusal_of_header(&h, dir.path());
        assert!(
            why.contains("holds 2 GiB, over the 16 MiB limit for one file"),
            "{why}"
        );
        // Even for an entry whose data would only be skipped.
        let h = raw_tar_header(tar::EntryType::Directory, "d", "", 2 << 30);
        let why = refusal_of_header(&h, dir.path());
        assert!(why.contains("over the 16 MiB limit"), "{why}");
    }

    /// Why unpacking an archive of nothing but `h` into `dir` is refused.
    fn refusal_of_header(h: &tar::Header, dir: &Path) -> String {
        refusal(unpack(h.as_bytes().as_slice(), dir, LIMITS, &|| false))
    }

    #[test]
    fn a_long_name_header_is_bounded() {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::GNULongName);
        h.set_size(1 << 30);
        h.set_cksum();
        let dir = tempfile::tempdir().unwrap();
        let why = refusal_of_header(&h, dir.path());
        assert!(
            why.contains("holds 1 GiB, over the 65536 bytes limit for names"),
            "{why}"
        );
    }

    #[test]
    fn long_names_from_the_tar_crate_unpack() {
        let long = format!("sys/{}/file", "d".repeat(150));
        let mut b = tar::Builder::new(Vec::new());
        let mut h = header(tar::EntryType::Regular, 2, 0o644);
        b.append_data(&mut h, &long, &b"ok"[..]).unwrap();
        let mut h = header(tar::EntryType::Symlink, 0, 0o777);
        b.append_link(&mut h, "sys/link", format!("{}/file", "d".repeat(150)))
            .unwrap();
        let bytes = b.into_inner().unwrap();
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            unpack(bytes.as_slice(), dir.path(), LIMITS, &|| false).unwrap(),
            2
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join(&long)).unwrap(),
            "ok"
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("sys/link")).unwrap(),
            "ok"
        );
    }

    #[test]
    fn unpacking_stops_when_told() {
        let dir = tempfile::tempdir().unwrap();
        let bytes = tar_of(&[Crafted::Dir("d".into())]);
        assert!(matches!(
            unpack(bytes.as_slice(), dir.path(), LIMITS, &|| true),
            Err(Refusal::Interrupted)
        ));
    }

    /// Names for the property test: few components, so that entries meet
    /// (one beneath another's link); escaping ones now and then, since the
    /// first refused entry ends an unpack.
    fn name() -> impl Strategy<Value = String> {
        let part = prop_oneof![
            12 => prop::sample::select(vec!["a", "b", "up", "evil"]).prop_map(str::to_string),
            1 => Just("..".to_string()),
            1 => Just(".".to_string()),
        ];
        (
            prop::bool::weighted(0.05),
            prop::collection::vec(part, 1..4),
        )
            .prop_map(|(abs, parts)| format!("{}{}", if abs { "/" } else { "" }, parts.join("/")))
    }

    /// Stands for the test's outer directory among link targets.
    const OUTER: &str = "@OUTER";

    fn crafted() -> impl Strategy<Value = Crafted> {
        let target = prop_oneof![
            Just("..".to_string()),
            Just("../..".to_string()),
            Just("/".to_string()),
            Just(OUTER.to_string()),
            Just(format!("{OUTER}/unpack")),
            name(),
        ];
        prop_oneof![
            3 => name().prop_map(Crafted::Dir),
            3 => (name(), prop::collection::vec(any::<u8>(), 0..16))
                .prop_map(|(n, d)| Crafted::File(n, d)),
            4 => (name(), target).prop_map(|(n, t)| Crafted::Symlink(n, t)),
            1 => (name(), name()).prop_map(|(n, t)| Crafted::HardLink(n, t)),
            3 => name().prop_map(Crafted::Fifo),
            1 => name().prop_map(Crafted::Char),
        ]
    }

    proptest! {
        // Each case unpacks a small archive on disk; with names drawn from
        // four words, 128 cases meet links with entries beneath them often
        // enough, in about a second.
        #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

        #[test]
        fn nothing_lands_outside_the_unpack_dir(
            entries in prop::collection::vec(crafted(), 1..20),
        ) {
            let outer = tempfile::tempdir().unwrap();
            let here = outer.path().display().to_string();
            // Links may point at this case's own directories, where
            // anything written through them would show.
            let entries: Vec<Crafted> = entries
                .into_iter()
                .map(|e| match e {
                    Crafted::Symlink(n, t) => Crafted::Symlink(n, t.replace(OUTER, &here)),
                    other => other,
                })
                .collect();
            let (_, others) = unpack_in(outer.path(), &entries, LIMITS);
            prop_assert!(others.is_empty(), "{:?} created {:?}", entries, others);
        }
    }
}
