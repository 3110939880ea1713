//! Snapshot archives as hostile input: what `--sysroot ARCHIVE` unpacks
//! stays inside its temporary directory, within its limits, and is removed
//! when the command ends; `snapshot --out` replaces its target whole; every
//! command takes the same archives; a replay reads what the node had.

use crate::util::{
    FakeRun, HANG_GUARD, Tmp, assert_has, names_in, node, on_sysroot, result, rocgate_in, snapshot,
    snapshot_with, snapshotted,
};
use rocgate_fixtures::hostile::raw_tar_header;
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A zstd-compressed tar of `(kind, name, link, data)` entries.
fn archive(dir: &Path, file: &str, entries: &[(tar::EntryType, &str, &str, &[u8])]) -> PathBuf {
    archive_with(dir, file, |b| {
        for (kind, name, link, data) in entries {
            b.append(&raw_tar_header(*kind, name, link, data.len() as u64), *data)
                .unwrap();
        }
    })
}

/// Where a test archive is written as it is built.
type ArchiveBuilder = tar::Builder<zstd::Encoder<'static, std::fs::File>>;

/// A zstd-compressed tar at `dir/file` holding what `fill` appends.
fn archive_with(dir: &Path, file: &str, fill: impl FnOnce(&mut ArchiveBuilder)) -> PathBuf {
    let path = dir.join(file);
    let enc = zstd::Encoder::new(std::fs::File::create(&path).unwrap(), 1).unwrap();
    let mut b = tar::Builder::new(enc);
    fill(&mut b);
    b.into_inner().unwrap().finish().unwrap();
    path
}

/// Runs rocgate with `args` on `archive` in a TMPDIR of its own; asserts it
/// refused the archive (exit code 2) and left nothing behind; returns its
/// stderr. `case` names the archive in a failure.
#[track_caller]
fn refused(case: &str, args: &[&str], archive: &Path) -> String {
    let tmp = Tmp::new();
    let (code, stdout, err) = rocgate_in(&tmp, args, archive);
    assert_eq!(code, Some(3), "{case}: {stdout}{err}");
    assert!(tmp.left().is_empty(), "{case}: {:?}", tmp.left());
    err
}

use tar::EntryType::{Directory, Fifo, Link, Regular, Symlink};

// Nothing is created outside the unpacked directory.

#[test]
fn an_archive_cannot_create_anything_through_its_own_links() {
    let work = tempfile::tempdir().unwrap();
    // `up -> ..` is the unpack directory's parent: TMPDIR.
    let up = archive(
        work.path(),
        "up.tar.zst",
        &[(Symlink, "up", "..", b""), (Fifo, "up/x", "", b"")],
    );
    let err = refused("up", &["doctor"], &up);
    assert_has(&err, "up.tar.zst");
    assert_has(&err, "`up/x` lies beneath `up`, which is a symbolic link");

    // A link to an absolute directory, then entries of every kind beneath it.
    let victim = tempfile::tempdir().unwrap();
    let target = victim.path().display().to_string();
    for (kind, name, link) in [
        (Fifo, "evil/sub/x", ""),
        (Directory, "evil/sub", ""),
        (Regular, "evil/file", ""),
        (Symlink, "evil/link", "/"),
        (Link, "evil/hard", "a"),
    ] {
        let evil = archive(
            work.path(),
            "evil.tar.zst",
            &[
                (Regular, "a", "", b"1"),
                (Symlink, "evil", &target, b""),
                (kind, name, link, b""),
            ],
        );
        let err = refused(name, &["inventory"], &evil);
        assert!(err.contains("which is a symbolic link"), "{name}: {err}");
        let inside: Vec<_> = std::fs::read_dir(victim.path()).unwrap().collect();
        assert!(inside.is_empty(), "{name} was written through the link");
    }
}

#[test]
fn device_nodes_and_escaping_names_are_refused() {
    let work = tempfile::tempdir().unwrap();
    for (kind, name, link, says) in [
        (tar::EntryType::Char, "dev/kfd", "", "device node"),
        (Regular, "../x", "", "climbs out"),
        (Regular, "/x", "", "absolute name"),
        (Link, "h", "../../etc/passwd", "climbs out"),
    ] {
        let a = archive(work.path(), "bad.tar.zst", &[(kind, name, link, b"")]);
        let err = refused(name, &["doctor"], &a);
        assert!(
            err.contains(says) && err.contains("bad.tar.zst"),
            "{name}: {err}"
        );
    }
}

// Limits on what an archive may unpack to: entry size, total size, entry
// count.

#[test]
fn a_huge_entry_is_refused_from_its_header() {
    let work = tempfile::tempdir().unwrap();
    let path = work.path().join("bomb.tar.zst");
    // A header announcing 2 GiB of zeros, and only 1 MiB of them: were the
    // data read, the archive would be found truncated instead.
    let mut enc = zstd::Encoder::new(std::fs::File::create(&path).unwrap(), 1).unwrap();
    enc.write_all(raw_tar_header(Regular, "sys/zeros", "", 2 << 30).as_bytes())
        .unwrap();
    enc.write_all(&vec![0u8; 1 << 20]).unwrap();
    enc.finish().unwrap();
    let err = refused("bomb", &["doctor"], &path);
    assert_has(&err, "bomb.tar.zst");
    assert_has(
        &err,
        "entry `sys/zeros` holds 2 GiB, over the 16 MiB limit for one file",
    );
}

#[test]
fn an_archive_over_the_total_size_is_refused() {
    let work = tempfile::tempdir().unwrap();
    // 65 files of 16 MiB (each within the per-file limit) under one name,
    // so the unpacked directory never holds more than one of them.
    let zeros = vec![0u8; 16 << 20];
    let path = archive_with(work.path(), "big.tar.zst", |b| {
        for _ in 0..65 {
            let h = raw_tar_header(Regular, "sys/f", "", zeros.len() as u64);
            b.append(&h, zeros.as_slice()).unwrap();
        }
    });
    let err = refused("big", &["matrix", "check"], &path);
    assert_has(
        &err,
        "more than 1 GiB, the limit for a whole snapshot (at entry `sys/f`)",
    );
}

#[test]
fn an_archive_over_the_entry_count_is_refused() {
    let work = tempfile::tempdir().unwrap();
    // One directory, named again and again: cheap to unpack, many entries.
    let h = raw_tar_header(Directory, "d", "", 0);
    let path = archive_with(work.path(), "many.tar.zst", |b| {
        for _ in 0..200_001 {
            b.append(&h, std::io::empty()).unwrap();
        }
    });
    let err = refused("many", &["inventory"], &path);
    assert_has(&err, "more than 200000 entries, the limit for a snapshot");
}

// The unpacked directory is removed when the command ends, whichever way
// it ends.

#[test]
fn the_unpacked_directory_is_removed_on_success_and_on_error() {
    let (n, archive) = snapshotted("mi300x-8");
    let tmp = Tmp::new();
    for cmd in [
        &["doctor"][..],
        &["run"][..],
        &["inventory", "--json"][..],
        &["matrix", "check"][..],
        &["list"][..],
    ] {
        let (code, out, err) = rocgate_in(&tmp, cmd, &archive);
        assert!(matches!(code, Some(0 | 1)), "{cmd:?}: {out}{err}");
        assert!(
            tmp.unpacked_left().is_empty(),
            "{cmd:?} left {:?}",
            tmp.left()
        );
    }
    // An error after unpacking (a thresholds file that does not exist).
    let (code, _, err) = rocgate_in(
        &tmp,
        &["doctor", "--thresholds", "/nonexistent.toml"],
        &archive,
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(tmp.unpacked_left().is_empty(), "{:?}", tmp.left());
    // A snapshot of a snapshot.
    let again = n.root.with_extension("again.tar.zst");
    let out = on_sysroot(&["snapshot"], &archive)
        .arg("--out")
        .arg(&again)
        .env("TMPDIR", tmp.path())
        .timeout(HANG_GUARD)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(tmp.unpacked_left().is_empty(), "{:?}", tmp.left());
}

#[test]
fn workers_use_the_unpacked_directory_and_it_is_removed_after() {
    let (n, archive) = snapshotted("mi300x-8");
    let tmp = Tmp::new();
    let tmp_dir = tmp.path().display().to_string();
    let fake_node = n.root.display().to_string();
    // The runtime layers run in worker processes, started with the
    // directory the parent unpacked (a worker given an archive refuses it).
    // The fake ROCm libraries read the node's tree itself, not the archive.
    let (code, out, json, _) = FakeRun::on(&archive)
        .env("TMPDIR", &tmp_dir)
        .env("ROCGATE_FAKE_NODE", &fake_node)
        .run();
    assert_eq!(code, 0, "{out}");
    assert_eq!(result(&json, "gpu0.hip.vector_add")["status"], "pass");
    assert_eq!(result(&json, "gpu7.hsa.queue")["status"], "pass");
    assert!(tmp.unpacked_left().is_empty(), "{:?}", tmp.left());
    // A worker is never handed an archive to unpack on its own.
    let w = on_sysroot(&["__worker", "--scope", "node"], &archive)
        .env("TMPDIR", tmp.path())
        .timeout(HANG_GUARD)
        .output()
        .unwrap();
    assert_eq!(w.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&w.stderr).contains("not an archive"));
    assert!(tmp.left().is_empty(), "{:?}", tmp.left());
}

// `snapshot --out` replaces its target whole; every command takes the same
// archives and refuses files that are not one.

#[test]
fn snapshot_replaces_its_target_instead_of_writing_into_it() {
    let n = node("mi300x-8");
    let work = tempfile::tempdir().unwrap();
    // Another name for the target's file: writing into the target would
    // change it too; replacing the target leaves it alone.
    let other = work.path().join("other");
    std::fs::write(&other, "precious").unwrap();
    let out = work.path().join("node.tar.zst");
    std::fs::hard_link(&other, &out).unwrap();
    snapshot(&n.root, &out);
    assert_eq!(std::fs::read_to_string(&other).unwrap(), "precious");
    let tmp = Tmp::new();
    let (code, _, err) = rocgate_in(&tmp, &["doctor"], &out);
    assert_eq!(code, Some(0), "{err}");
    // Nothing else left beside it: no temporary file.
    assert_eq!(names_in(work.path()), ["node.tar.zst", "other"]);
}

#[test]
fn a_file_that_is_not_an_archive_is_an_error_for_every_command() {
    let work = tempfile::tempdir().unwrap();
    let empty = work.path().join("empty.tar.zst");
    std::fs::write(&empty, "").unwrap();
    let text = work.path().join("notes.txt");
    std::fs::write(&text, "this is not a snapshot\n").unwrap();
    let no_entries = work.path().join("nothing.tar");
    std::fs::write(&no_entries, vec![0u8; 1024]).unwrap();
    let empty_zstd = work.path().join("nothing.tar.zst");
    zstd::Encoder::new(std::fs::File::create(&empty_zstd).unwrap(), 1)
        .unwrap()
        .finish()
        .unwrap();
    let garbage_zstd = work.path().join("garbage.tar.zst");
    let mut bytes = vec![0x28, 0xb5, 0x2f, 0xfd];
    bytes.extend_from_slice(b"not really zstd at all");
    std::fs::write(&garbage_zstd, bytes).unwrap();
    let out = work.path().join("out.tar.zst");
    let out = out.to_str().unwrap();
    for (file, says) in [
        (&empty, "is empty (0 bytes)"),
        (&text, "does not start with a tar header"),
        (&no_entries, "holds no entries"),
        (&empty_zstd, "holds no entries"),
        (&garbage_zstd, "zstd"),
    ] {
        for cmd in [
            &["run"][..],
            &["doctor"][..],
            &["inventory"][..],
            &["list"][..],
            &["matrix", "check"][..],
            &["snapshot", "--out", out][..],
        ] {
            let err = refused(&format!("{cmd:?} {}", file.display()), cmd, file);
            assert!(
                err.contains(&file.display().to_string()) && err.contains(says),
                "{cmd:?}: {err}"
            );
        }
    }
    assert!(!Path::new(out).exists());
}

#[test]
fn list_takes_an_archive_like_the_other_commands() {
    let (n, archive) = snapshotted("mi300x-8-cpx");
    let tmp = Tmp::new();
    let (c1, direct, e1) = rocgate_in(&tmp, &["list"], &n.root);
    let (c2, replayed, e2) = rocgate_in(&tmp, &["list"], &archive);
    assert_eq!((c1, c2), (Some(0), Some(0)), "{e1}{e2}");
    assert_has(&direct, "gpu63.kfd.topology_node");
    assert_eq!(direct, replayed);
}

// A snapshot holds what every command reads, inventory included: a replay
// gives the same results as the node.

#[test]
fn inventory_of_a_snapshot_reads_the_same_gpus() {
    for name in ["gpu-missing-from-kfd", "kfd-topology-empty", "mi300x-8"] {
        let (n, archive) = snapshotted(name);
        let tmp = Tmp::new();
        let (c1, direct, e1) = rocgate_in(&tmp, &["inventory", "--json"], &n.root);
        let (c2, replayed, e2) = rocgate_in(&tmp, &["inventory", "--json"], &archive);
        assert_eq!((c1, c2), (Some(0), Some(0)), "{name}: {e1}{e2}");
        let direct: Value = serde_json::from_str(&direct).unwrap();
        let replayed: Value = serde_json::from_str(&replayed).unwrap();
        let gpus = direct["gpus"].as_array().unwrap();
        assert!(!gpus.is_empty(), "{name}");
        assert!(
            gpus.iter().all(|g| g["vram_bytes"].as_u64().is_some()),
            "{name}: {gpus:?}"
        );
        assert_eq!(direct["gpus"], replayed["gpus"], "{name}");
        assert_eq!(direct["versions"], replayed["versions"], "{name}");
    }
}

/// A command's JSON on `root`, without the field naming the sysroot (a
/// path for a directory, the archive's name for a snapshot).
fn json_without_sysroot(tmp: &Tmp, args: &[&str], root: &Path) -> (Option<i32>, Value) {
    let (code, out, err) = rocgate_in(tmp, args, root);
    let mut v: Value = serde_json::from_str(&out)
        .unwrap_or_else(|e| panic!("{args:?} {}: {e}: {out}{err}", root.display()));
    if let Some(o) = v.as_object_mut() {
        o.remove("sysroot");
    }
    (code, v)
}

/// What a command reads beyond the checks (a directory it only lists, a
/// link it only names) is in the snapshot too: every fixture node replays
/// to the same output for every command that reads a node.
#[test]
fn every_scenario_replays_the_same_for_every_command() {
    let tmp = Tmp::new();
    let mut differ = Vec::new();
    for s in rocgate_fixtures::catalogue() {
        let (n, archive) = snapshotted(s.name);
        for cmd in [
            &["inventory", "--json"][..],
            &["doctor", "--json"][..],
            &["matrix", "check", "--json"][..],
        ] {
            let direct = json_without_sysroot(&tmp, cmd, &n.root);
            let replayed = json_without_sysroot(&tmp, cmd, &archive);
            if direct != replayed {
                differ.push(format!("{} {cmd:?}:\n  {direct:?}\n  {replayed:?}", s.name));
            }
        }
        let (_, direct, _) = rocgate_in(&tmp, &["list"], &n.root);
        let (_, replayed, _) = rocgate_in(&tmp, &["list"], &archive);
        if direct != replayed {
            differ.push(format!("{} list", s.name));
        }
    }
    assert!(differ.is_empty(), "{}", differ.join("\n"));
    assert!(tmp.unpacked_left().is_empty(), "{:?}", tmp.left());
}

// Links in a capture: resolved inside its root, as a chroot would, never
// on the host reading it.

/// Every entry of the archive at `path` with its data (for links, the target).
fn entries_of(path: &Path) -> Vec<(String, tar::EntryType, Vec<u8>)> {
    let dec = zstd::Decoder::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut a = tar::Archive::new(dec);
    let mut out = Vec::new();
    for e in a.entries().unwrap() {
        let mut e = e.unwrap();
        let name = e.path().unwrap().display().to_string();
        let kind = e.header().entry_type();
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut e, &mut data).unwrap();
        if let Some(l) = e.link_name_bytes() {
            data.extend_from_slice(&l);
        }
        out.push((name, kind, data));
    }
    out
}

/// `rel` below `root` with every link resolved, relative to `root` (the
/// fixtures' links stay inside it).
fn real_rel(root: &Path, rel: &str) -> String {
    let real = std::fs::canonicalize(root.join(rel)).unwrap();
    let root = std::fs::canonicalize(root).unwrap();
    real.strip_prefix(&root).unwrap().display().to_string()
}

/// A zstd tar of the directory `root`, links stored as links, with
/// `extra` entries appended.
fn tar_of_dir(root: &Path, out: &Path, extra: &[(tar::EntryType, &str, &str)]) {
    let enc = zstd::Encoder::new(std::fs::File::create(out).unwrap(), 1).unwrap();
    let mut b = tar::Builder::new(enc);
    b.follow_symlinks(false);
    b.append_dir_all(".", root).unwrap();
    for (kind, name, link) in extra {
        b.append(&raw_tar_header(*kind, name, link, 0), std::io::empty())
            .unwrap();
    }
    b.into_inner().unwrap().finish().unwrap();
}

#[test]
fn links_in_a_capture_never_read_the_host() {
    let work = tempfile::tempdir().unwrap();
    let marker = "HOST-ONLY-SECRET-31337";
    let secret = work.path().join("secret");
    std::fs::write(&secret, format!("{marker}\n")).unwrap();
    let abs = secret.display().to_string();
    let escape = format!("{}{}", "../".repeat(40), abs.trim_start_matches('/'));
    let tmp = Tmp::new();
    let vbios = "sys/bus/pci/devices/0000:05:00.0/vbios_version";
    let props = "sys/class/kfd/kfd/topology/nodes/2/properties";
    // What the host must never give: its file in any output, in any
    // archive rocgate writes.
    let leaks = |what: &str, text: &str| {
        assert!(
            !text.contains(marker),
            "{what} read the host's file:\n{text}"
        );
    };
    let check = |case: &str, sysroot: &Path| {
        for cmd in [
            &["inventory", "--json"][..],
            &["doctor", "--json"][..],
            &["run", "--json", "/dev/stdout"][..],
        ] {
            let (code, out, err) = rocgate_in(&tmp, cmd, sysroot);
            assert!(
                matches!(code, Some(0..=2)),
                "{case} {cmd:?}: {code:?} {err}"
            );
            leaks(&format!("{case} {cmd:?}"), &(out + &err));
        }
        let re = work.path().join("re.tar.zst");
        let (code, out, err) =
            rocgate_in(&tmp, &["snapshot", "--out", re.to_str().unwrap()], sysroot);
        assert_eq!(code, Some(0), "{case}: {out}{err}");
        for (name, _, data) in entries_of(&re) {
            leaks(
                &format!("{case}: snapshot entry {name}"),
                &String::from_utf8_lossy(&data),
            );
        }
        assert!(tmp.unpacked_left().is_empty(), "{case}: {:?}", tmp.left());
    };
    for (case, target) in [("absolute", abs.as_str()), ("escaping", escape.as_str())] {
        let n = node("mi300x-8");
        for rel in [vbios, props] {
            let file = n.root.join(real_rel(&n.root, rel));
            std::fs::remove_file(&file).unwrap();
            std::os::unix::fs::symlink(target, &file).unwrap();
        }
        check(&format!("{case} link in a directory"), &n.root);
        let archive = work.path().join(format!("{case}.tar.zst"));
        tar_of_dir(&n.root, &archive, &[]);
        check(&format!("{case} link in an archive"), &archive);
    }
    // A hard link to a symbolic link the archive holds is that link.
    let n = node("mi300x-8");
    let real_vbios = real_rel(&n.root, vbios);
    std::fs::remove_file(n.root.join(&real_vbios)).unwrap();
    let archive = work.path().join("hard.tar.zst");
    tar_of_dir(
        &n.root,
        &archive,
        &[(Symlink, "evil", &abs), (Link, &real_vbios, "evil")],
    );
    check("hard link to an absolute link", &archive);
}

#[test]
fn links_in_a_capture_lead_where_they_would_on_the_captured_node() {
    // An absolute link means the captured node's `/`, and `..` stops at
    // it: both find the file the capture holds, in a directory and in an
    // archive (where a real capture's relative sysfs links keep working).
    let work = tempfile::tempdir().unwrap();
    let tmp = Tmp::new();
    for (case, target) in [
        ("absolute", "/captured/vbios".to_string()),
        ("escaping", format!("{}captured/vbios", "../".repeat(30))),
    ] {
        let n = node("mi300x-8");
        rocgate_fixtures::hostile::put(&n.root, "captured/vbios", "113-INSIDE-THE-ROOT\n").unwrap();
        let file = n.root.join(real_rel(
            &n.root,
            "sys/bus/pci/devices/0000:05:00.0/vbios_version",
        ));
        std::fs::remove_file(&file).unwrap();
        std::os::unix::fs::symlink(&target, &file).unwrap();
        let archive = work.path().join(format!("{case}.tar.zst"));
        tar_of_dir(&n.root, &archive, &[]);
        for sysroot in [&n.root, &archive] {
            let (code, out, err) = rocgate_in(&tmp, &["run", "--json", "/dev/stdout"], sysroot);
            assert_eq!(code, Some(0), "{case}: {err}");
            assert!(out.contains("113-INSIDE-THE-ROOT"), "{case}: {out}");
        }
    }
}

// An archive beyond the limits is refused from its headers, before
// anything is written out.
#[test]
fn limits_are_judged_on_every_header_before_anything_is_written() {
    let work = tempfile::tempdir().unwrap();
    // Its second entry cannot be written (it lies beneath a link): an
    // unpack that writes before judging the limits stops there instead.
    let h = raw_tar_header(Directory, "d", "", 0);
    let many = archive_with(work.path(), "many.tar.zst", |b| {
        b.append(&raw_tar_header(Symlink, "l", ".", 0), std::io::empty())
            .unwrap();
        b.append(&raw_tar_header(Regular, "l/f", "", 0), std::io::empty())
            .unwrap();
        for _ in 0..200_000 {
            b.append(&h, std::io::empty()).unwrap();
        }
    });
    let err = refused("many", &["inventory"], &many);
    assert_has(&err, "more than 200000 entries");
    let chunk = vec![7u8; 15 << 20];
    let big = archive_with(work.path(), "big.tar.zst", |b| {
        b.append(&raw_tar_header(Symlink, "l", ".", 0), std::io::empty())
            .unwrap();
        b.append(&raw_tar_header(Regular, "l/f", "", 0), std::io::empty())
            .unwrap();
        for i in 0..70 {
            let h = raw_tar_header(Regular, &format!("sys/f{i}"), "", chunk.len() as u64);
            b.append(&h, chunk.as_slice()).unwrap();
        }
    });
    let err = refused("big", &["doctor"], &big);
    assert_has(&err, "the limit for a whole snapshot");
}

/// A small tmpfs mounted at a fresh directory while this lives (root only).
struct SmallFs(tempfile::TempDir);

impl SmallFs {
    fn mount(size: &str) -> Option<SmallFs> {
        let dir = tempfile::tempdir().unwrap();
        let ok = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},nr_inodes=2000"),
                "tmpfs",
            ])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(SmallFs(dir))
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg(self.0.path())
            .status();
    }
}

#[test]
fn a_big_archive_is_refused_without_filling_the_disk() {
    // As root, on a 64 MiB tmpfs of 2000 inodes as TMPDIR: an unpack that
    // wrote before judging the limits would fail for want of space.
    let Some(fs) = SmallFs::mount("64m") else {
        eprintln!("ignored: cannot mount a tmpfs (needs root)");
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let chunk = vec![7u8; 15 << 20];
    let big = archive_with(work.path(), "big.tar.zst", |b| {
        for i in 0..70 {
            let h = raw_tar_header(Regular, &format!("sys/f{i}"), "", chunk.len() as u64);
            b.append(&h, chunk.as_slice()).unwrap();
        }
    });
    let h = raw_tar_header(Directory, "d", "", 0);
    let many = archive_with(work.path(), "many.tar.zst", |b| {
        for i in 0..200_001 {
            let h = if i % 2 == 0 {
                raw_tar_header(Directory, &format!("d{i}"), "", 0)
            } else {
                h.clone()
            };
            b.append(&h, std::io::empty()).unwrap();
        }
    });
    for (archive, says) in [
        (&big, "the limit for a whole snapshot"),
        (&many, "more than 200000 entries"),
    ] {
        let out = on_sysroot(&["doctor"], archive)
            .env("TMPDIR", fs.0.path())
            .timeout(HANG_GUARD)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{err}");
        assert!(err.contains(says) && !err.contains("space"), "{err}");
        assert!(names_in(fs.0.path()).is_empty());
    }
}

// `snapshot --out` takes what the reports take: a FIFO nobody reads fails
// at once, a link is followed to its target.
#[test]
fn snapshot_out_is_written_as_the_reports_are() {
    let n = node("mi300x-8");
    let work = tempfile::tempdir().unwrap();
    let fifo = work.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    let tmp = Tmp::new();
    let (code, out, err) = rocgate_in(
        &tmp,
        &["snapshot", "--out", fifo.to_str().unwrap()],
        &n.root,
    );
    assert_eq!(code, Some(3), "{out}{err}");
    assert_has(&err, "fifo");
    // Through a link, to its target; the link stays.
    let target = work.path().join("target.tar.zst");
    let link = work.path().join("link.tar.zst");
    std::fs::write(&target, "old").unwrap();
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let (code, out, err) = rocgate_in(
        &tmp,
        &["snapshot", "--out", link.to_str().unwrap()],
        &n.root,
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let (code, _, err) = rocgate_in(&tmp, &["doctor"], &target);
    assert_eq!(code, Some(0), "{err}");
    // A dangling link: its target is created.
    let later = work.path().join("later.tar.zst");
    let dangling = work.path().join("dangling.tar.zst");
    std::os::unix::fs::symlink(&later, &dangling).unwrap();
    let (code, out, err) = rocgate_in(
        &tmp,
        &["snapshot", "--out", dangling.to_str().unwrap()],
        &n.root,
    );
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(
        later.is_file()
            && std::fs::symlink_metadata(&dangling)
                .unwrap()
                .file_type()
                .is_symlink()
    );
}

// `snapshot --redact` leaves no host name (short or full), user name or
// address in any file, and keeps what checks read.
#[test]
fn a_redacted_snapshot_keeps_no_name_or_address_of_the_node() {
    let n = node("mi300x-8");
    let r = &n.root;
    std::fs::write(
        r.join("proc/sys/kernel/hostname"),
        "gpu-node-07.cluster.example.org\n",
    )
    .unwrap();
    let cmdline = "BOOT_IMAGE=/vmlinuz root=/dev/sda1 ip=10.20.30.40::10.20.30.1:255.255.255.0:gpu-node-07:eth0:none";
    std::fs::write(r.join("proc/cmdline"), format!("{cmdline}\n")).unwrap();
    let mut log = std::fs::read_to_string(r.join("var/log/kern.log")).unwrap();
    log.push_str("Dec  1 10:00:00 gpu-node-07 kernel: eth0: link up, addr 10.20.30.40 fe80::1c2:3ff:fe4d:5e6f\n");
    log.push_str("Dec  1 10:00:01 gpu-node-07 sudo: alice : TTY=pts/0 ; USER=root ; COMMAND=/usr/bin/rocgate\n");
    log.push_str("Dec  1 10:00:02 gpu-node-07 kernel: nfs: server 2a02:8071:1::5 OK\n");
    std::fs::write(r.join("var/log/kern.log"), log).unwrap();
    let capture = std::fs::read_to_string(r.join("rocgate-capture.toml")).unwrap();
    std::fs::write(
        r.join("rocgate-capture.toml"),
        capture.replace("name = \"ci\"", "name = \"alice\""),
    )
    .unwrap();
    let group = std::fs::read_to_string(r.join("etc/group")).unwrap_or_default();
    std::fs::write(
        r.join("etc/group"),
        format!("{group}render2:x:4242:alice,bob\n"),
    )
    .unwrap();
    let archive = n.root.with_extension("tar.zst");
    snapshot_with(&["snapshot", "--redact"], &n.root, &archive);
    let entries = entries_of(&archive);
    let text_of = |name: &str| {
        entries
            .iter()
            .find(|(n, _, _)| n.trim_start_matches("./") == name)
            .map(|(_, _, d)| String::from_utf8_lossy(d).into_owned())
            .unwrap_or_else(|| panic!("no {name} in the snapshot"))
    };
    for (name, _, data) in &entries {
        let text = String::from_utf8_lossy(data);
        for secret in [
            "gpu-node-07",
            "alice",
            "bob",
            "10.20.30.40",
            "10.20.30.1",
            "fe80::1c2:3ff:fe4d:5e6f",
            "2a02:8071:1::5",
        ] {
            assert!(!text.contains(secret), "{name} keeps {secret}:\n{text}");
        }
    }
    // Read by checks, so kept: group names, the root device, the netmask.
    assert!(text_of("etc/group").contains("render2:x:4242:user-"));
    assert!(text_of("proc/cmdline").contains("root=/dev/sda1"));
    assert!(text_of("proc/cmdline").contains("255.255.255.0"));
    assert!(text_of("rocgate-capture.toml").contains("name = \"user-"));
    let tmp = Tmp::new();
    let (code, _, err) = rocgate_in(&tmp, &["doctor"], &archive);
    assert_eq!(code, Some(0), "{err}");
}
