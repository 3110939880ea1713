use super::resolve::*;
use super::sink::*;
use super::*;
use rocgate_fixtures::hostile::{char_device, is_char_device, is_symlink};
use std::fs::{self, OpenOptions};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt, symlink};
use std::time::Instant;

/// What writing a regular file or a new path does, from its resolved
/// end: a temporary file renamed over it.
fn replace(end: &End, bytes: &[u8], mode: u32, path: &Path) -> Result<(), String> {
    let mut temp = TempFile::create(end, mode, path)?;
    temp.write(bytes)?;
    temp.commit(path)
}

#[test]
fn writes_and_replaces() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("r.xml");
    write(&p, b"one").unwrap();
    write(&p, b"two").unwrap();
    assert_eq!(fs::read(&p).unwrap(), b"two");
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    let err = write(&dir.path().join("missing/r.xml"), b"x")
        .unwrap_err()
        .0;
    assert!(err.contains("missing"), "{err}");
    let err = write(Path::new(""), b"x").unwrap_err().0;
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
    let err = write(&full, b"report").unwrap_err().0;
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
    let err = write(&looped, b"x").unwrap_err().0;
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
    let err = write(&fifo, b"x").unwrap_err().0;
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
    let err = write_within(&fifo, &big, Duration::from_millis(200))
        .unwrap_err()
        .0;
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
    let err = write(dir.path(), b"x").unwrap_err().0;
    assert!(err.contains("is a directory"), "{err}");
    // Any block device will do: it is refused before it is opened.
    let block = fs::read_dir("/dev")
        .unwrap()
        .flatten()
        .find(|e| e.file_type().is_ok_and(|t| t.is_block_device()));
    if let Some(block) = block {
        let err = write(&block.path(), b"x").unwrap_err().0;
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
        let err = result.unwrap_err().0;
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
    let err = write(&through.join("victim"), b"x").unwrap_err().0;
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
    assert!(
        append(dir.path(), b"x")
            .unwrap_err()
            .0
            .contains("directory")
    );
    assert!(append(&dir.path().join("missing/s.md"), b"x").is_err());
    let full = char_device(dir.path(), "full", 7);
    let err = append(&full, b"x").unwrap_err().0;
    assert!(err.contains("No space left"), "{err}");
    let (_d, fifo) = fifo();
    let err = append(&fifo, b"x").unwrap_err().0;
    assert!(err.contains("nothing is reading"), "{err}");
    let err = write(&dir.path().join("sub/"), b"x").unwrap_err().0;
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
            .0
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

#[test]
fn a_staged_write_replaces_only_when_committed() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("node.tar.zst");
    fs::write(&p, "previous").unwrap();
    let mut staged = Staged::create(&p).unwrap();
    staged.write_all(b"half").unwrap();
    drop(staged);
    assert_eq!(fs::read_to_string(&p).unwrap(), "previous");
    let mut staged = Staged::create(&p).unwrap();
    staged.write_all(b"one, ").unwrap();
    staged.write_bytes(b"two").unwrap();
    staged.commit().unwrap();
    assert_eq!(fs::read_to_string(&p).unwrap(), "one, two");
    // No temporary file left, committed or not.
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    // A FIFO nobody reads fails when the write starts, not at its end.
    let (_fifo_dir, fifo) = fifo();
    let err = Staged::create(&fifo).err().unwrap().0;
    assert!(err.contains("nothing is reading it"), "{err}");
}
