//! Snapshot archives as hostile input: what `--sysroot ARCHIVE` unpacks
//! stays inside its temporary directory, within its limits, and is removed
//! when the command ends; `snapshot --out` replaces its target whole; every
//! command takes the same archives; a replay reads what the node had.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{HANG_GUARD, fake_process, node, on_sysroot, result, send_signal};
use rocgate_fixtures::hostile::raw_tar_header;
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

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

/// The names in directory `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A directory the rocgate under test uses as TMPDIR, where it unpacks
/// archives; and what is left in it.
struct Tmp(tempfile::TempDir);

impl Tmp {
    fn new() -> Tmp {
        Tmp(tempfile::tempdir().unwrap())
    }

    fn path(&self) -> &Path {
        self.0.path()
    }

    fn left(&self) -> Vec<String> {
        names_in(self.path())
    }

    fn unpacked_left(&self) -> Vec<String> {
        self.left()
            .into_iter()
            .filter(|n| n.starts_with("rocgate-snapshot-"))
            .collect()
    }
}

/// Runs rocgate with `args` and TMPDIR set; returns (exit code, stdout, stderr).
fn rocgate_in(tmp: &Tmp, args: &[&str], sysroot: &Path) -> (Option<i32>, String, String) {
    let out = on_sysroot(args, sysroot)
        .env("TMPDIR", tmp.path())
        .timeout(HANG_GUARD)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Takes a snapshot of `root` into `out`.
fn snapshot(root: &Path, out: &Path) {
    let o = on_sysroot(&["snapshot"], root)
        .arg("--out")
        .arg(out)
        .timeout(HANG_GUARD)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Writes scenario `name` and takes a snapshot of it beside it; returns the
/// node and the archive.
fn snapshotted(name: &str) -> (common::Node, PathBuf) {
    let n = node(name);
    let archive = n.root.with_extension("tar.zst");
    snapshot(&n.root, &archive);
    (n, archive)
}

/// Runs rocgate with `args` on `archive` in a TMPDIR of its own; asserts it
/// refused the archive (exit code 2) and left nothing behind; returns its
/// stderr. `case` names the archive in a failure.
#[track_caller]
fn refused(case: &str, args: &[&str], archive: &Path) -> String {
    let tmp = Tmp::new();
    let (code, stdout, err) = rocgate_in(&tmp, args, archive);
    assert_eq!(code, Some(2), "{case}: {stdout}{err}");
    assert!(tmp.left().is_empty(), "{case}: {:?}", tmp.left());
    err
}

/// Whether process `pid` has a handler for SIGINT (bit 1 of SigCgt): from
/// then on a SIGINT goes through rocgate's own exit path.
fn catches_sigint(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & 0b10 != 0)
}

use tar::EntryType::{Directory, Fifo, Link, Regular, Symlink};

// 2. Nothing is created outside the unpacked directory.

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
    assert!(
        err.contains("up.tar.zst")
            && err.contains("`up/x` lies beneath `up`, which is a symbolic link"),
        "{err}"
    );

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

// 7. Limits on what an archive may unpack to.

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
    assert!(
        err.contains("bomb.tar.zst")
            && err.contains("entry `sys/zeros` holds 2 GiB, over the 16 MiB limit for one file"),
        "{err}"
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
    assert!(
        err.contains("more than 1 GiB, the limit for a whole snapshot (at entry `sys/f`)"),
        "{err}"
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
    assert!(
        err.contains("more than 200000 entries, the limit for a snapshot"),
        "{err}"
    );
}

// 8. The unpacked directory is removed when the command ends.

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
    let (code, out, json, _) = common::run_fake_env(
        &archive,
        "",
        &[],
        &[("TMPDIR", &tmp_dir), ("ROCGATE_FAKE_NODE", &fake_node)],
    );
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

#[test]
fn the_unpacked_directory_is_removed_on_sigint() {
    let (n, archive) = snapshotted("mi300x-8");
    let tmp = Tmp::new();
    let rocm = common::fake_rocm();
    // Every GPU's queue creation hangs in the vendor library, so the run is
    // still going when the signal comes.
    let mut child = fake_process(
        &["run"],
        &archive,
        &n.root,
        rocm.path(),
        "hsa_queue_create@gpu*=hang",
    )
    .env("TMPDIR", tmp.path())
    .spawn()
    .unwrap();
    let pid = child.id();
    // Signalled once it has unpacked and catches SIGINT; waits on events,
    // not on time (the guard only turns a hang into a failure).
    let start = std::time::Instant::now();
    while !catches_sigint(pid) || tmp.unpacked_left().is_empty() {
        assert!(start.elapsed() < HANG_GUARD, "rocgate never unpacked");
        assert!(child.try_wait().unwrap().is_none(), "rocgate ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(send_signal(pid, "-INT"));
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(tmp.unpacked_left().is_empty(), "{:?}", tmp.left());
}

// 16. `snapshot --out` replaces its target whole; every command takes the
// same archives and refuses files that are not one.

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
fn an_interrupted_snapshot_leaves_no_partial_archive() {
    let n = node("mi300x-8-cpx");
    let work = tempfile::tempdir().unwrap();
    let out = work.path().join("node.tar.zst");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("rocgate"))
        .args(["snapshot", "--sysroot"])
        .arg(&n.root)
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let start = std::time::Instant::now();
    while !catches_sigint(pid) && child.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < HANG_GUARD);
        std::thread::sleep(Duration::from_millis(5));
    }
    // The snapshot may have ended already: whether the signal found it is
    // no matter.
    let _ = send_signal(pid, "-INT");
    let status = child.wait().unwrap();
    // Wherever the signal landed: the archive is whole or absent, and no
    // temporary file is left.
    let names = names_in(work.path());
    assert!(names.iter().all(|n| n == "node.tar.zst"), "{names:?}");
    if out.exists() {
        let tmp = Tmp::new();
        let (code, _, err) = rocgate_in(&tmp, &["doctor"], &out);
        assert_eq!(code, Some(0), "{err}");
    } else {
        assert_eq!(status.code(), Some(130));
    }
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
    assert!(direct.contains("gpu63.kfd.topology_node"), "{direct}");
    assert_eq!(direct, replayed);
}

// 21. A snapshot holds what every command reads, inventory included.

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
