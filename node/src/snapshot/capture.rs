//! Capturing a node: what a recording sysroot accessed, read again under
//! a deadline (a wedged GPU's files are stored as FIFOs, so a replay hangs
//! and times out where the node did), redacted when asked, with the kernel
//! log and the capture record, written as one tar.zst stream.

use super::MAX_FILE;
use super::layout::{self, header, place, within_root};
use super::redact::{Redactor, is_text, redact_groups};
use crate::PathUse as Use;
use crate::Sysroot;
use crate::bounded_io::{BoundedIo, DeviceRead};
use crate::facts::NodeFacts;
use crate::facts::access::Access;
use crate::facts::capture::{CAPTURE_FILE, Capture, CapturedDevice, CapturedUser};
use crate::sysroot::Kind;
use rocgate_harness::atomic::{NotWritten, Staged};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// How long a snapshot waits for one file: sysfs answers in microseconds
/// unless the GPU behind it is wedged.
const FILE_WAIT: Duration = Duration::from_secs(2);

/// What a snapshot holds, for the command to report.
#[derive(Debug, Default)]
pub struct Summary {
    /// Files written.
    pub files: usize,
    /// Directories written.
    pub dirs: usize,
    /// Symbolic links written.
    pub links: usize,
    /// Values replaced by redaction.
    pub redacted: usize,
    /// Files that did not answer (a wedged GPU's sysfs): stored as FIFOs,
    /// so that replaying the snapshot hangs and times out where the node did.
    pub hung: Vec<String>,
}

/// Reads recorded paths of a sysroot (its links resolved inside it) under
/// [`FILE_WAIT`], a wedged device's files not tried again.
struct FileReader {
    root: Sysroot,
    io: BoundedIo,
}

impl FileReader {
    fn new(root: &Sysroot) -> FileReader {
        FileReader {
            root: root.clone(),
            io: BoundedIo::new(FILE_WAIT),
        }
    }

    /// Reads `host`, a recorded path. Page-sized reads until EOF, as the
    /// facts read: a binary attribute (`gpu_vram_bad_pages`) stored from
    /// `read_to_end` would hold only its first records.
    fn read(&self, host: &str) -> DeviceRead {
        let (root, at) = (self.root.clone(), host.to_string());
        self.io
            .read_device_file(host, MAX_FILE, move || root.recorded_open(&at))
    }
}

/// dpkg's status, cut to the packages of the GPU stack.
fn gpu_packages(status: &str) -> String {
    status
        .split("\n\n")
        .filter(|s| {
            s.lines()
                .next()
                .and_then(|l| l.strip_prefix("Package: "))
                .is_some_and(|p| {
                    [
                        "amdgpu",
                        "rocm",
                        "hip",
                        "hsa",
                        "rocblas",
                        "miopen",
                        "rccl",
                        "linux-firmware",
                    ]
                    .iter()
                    .any(|k| p.contains(k))
                })
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The capture record: who took the snapshot and what they could open.
fn capture_record(facts: &NodeFacts, redact: &mut Redactor) -> Capture {
    if let Some(c) = facts.capture() {
        let mut c = c.clone();
        if let Some(u) = c.user.as_mut() {
            u.name = redact.user(&u.name);
        }
        return c;
    }
    let user = facts.user.as_ref().map(|u| CapturedUser {
        name: redact.user(&u.name),
        uid: u.uid,
        groups: u.groups.clone(),
    });
    let mut paths = vec!["/dev/kfd".to_string()];
    paths.extend(
        facts
            .gpus
            .iter()
            .filter_map(|g| g.render_minor(&facts.drm))
            .map(|m| format!("/dev/dri/renderD{m}")),
    );
    paths.sort();
    paths.dedup();
    let devices = paths
        .into_iter()
        .map(|p| {
            let meta = facts.sysroot.recorded_entry(&p, true);
            let open = match facts.access(&p) {
                Access::Granted => "ok".to_string(),
                Access::Missing => "ENOENT".to_string(),
                Access::Denied { errno, .. } => errno,
                Access::Failed { error } => error,
                Access::Unknown { .. } => "unknown".to_string(),
            };
            CapturedDevice {
                gid: meta.map(|m| m.gid),
                mode: meta.map(|m| format!("{:04o}", m.mode & 0o7777)),
                path: p,
                open,
            }
        })
        .collect();
    Capture { user, devices }
}

/// Writes a snapshot of what `facts.sysroot` (a recording sysroot) has
/// accessed, plus the kernel log and the capture record, to `out`.
///
/// `out` is written as the reports are (`rocgate_harness::atomic`), the
/// tar.zst streamed into it as it is made ([`Staged`]): a regular file or
/// a new path is replaced whole by a temporary file renamed into place at
/// the end, so it is either untouched or complete, never half-written; a
/// symlink is followed to its target, never replaced; a FIFO or a character
/// device is written through, opened without blocking (a FIFO nobody reads
/// fails at once with ENXIO, before anything is read); `/dev/stdout` is
/// rocgate's own stdout. `stop` is polled between entries; when it says so
/// the snapshot is abandoned: a file is left as it was (the temporary file
/// removed), a FIFO's reader sees the stream end short.
pub fn write(
    facts: &NodeFacts,
    out: &Path,
    redact: bool,
    stop: &dyn Fn() -> bool,
) -> Result<Summary, NotWritten> {
    if std::fs::metadata(out).is_ok_and(|m| m.is_dir()) {
        return Err(NotWritten(format!(
            "failed to write {}: it is a directory; give the archive's file name (`--out {}/node.tar.zst`)",
            out.display(),
            out.display()
        )));
    }
    let not_written = |e: NotWritten| NotWritten(format!("the snapshot was not written: {e}"));
    let sink = Staged::create(out).map_err(not_written)?;
    let (sink, summary) = write_to(facts, sink, out, redact, stop)?;
    if stop() {
        // Dropped uncommitted: the temporary file goes, `out` stays.
        return Err(NotWritten(format!(
            "interrupted: {} not written",
            out.display()
        )));
    }
    sink.commit().map_err(not_written)?;
    Ok(summary)
}

/// Reads, through the recording sysroot, what the commands read of a node
/// beyond the checks' facts, so that every command replays from the
/// snapshot as it ran on the node: the node's versions (reports, inventory,
/// the matrix check), each GPU's versions and health (inventory, within
/// [`FILE_WAIT`] as inventory waits), and each GPU's VRAM size from DRM
/// (inventory, for GPUs that KFD does not list). The capture runs this
/// itself, so no command has to call readers for what they record.
fn read_beyond_checks(facts: &NodeFacts) {
    // Driver rows only name the release the files read point to.
    crate::versions::node_versions(facts, &[]);
    crate::versions::gpu_versions_within(facts, FILE_WAIT);
    crate::versions::gpu_health_within(facts, FILE_WAIT);
    for g in &facts.gpus {
        // What it read is stored; the size itself is inventory's to show.
        g.vram_bytes(&facts.sysroot);
    }
}

/// The archive being written: the tar stream, what reads the node's files,
/// the redaction, and the tally.
struct Archive<'a, W: Write> {
    tar: tar::Builder<zstd::Encoder<'static, W>>,
    root: &'a Sysroot,
    reader: FileReader,
    redactor: Redactor,
    redact: bool,
    summary: Summary,
}

/// Writes the archive into `sink` (named `out` in messages) and returns it.
fn write_to<W: Write>(
    facts: &NodeFacts,
    sink: W,
    out: &Path,
    redact: bool,
    stop: &dyn Fn() -> bool,
) -> Result<(W, Summary), String> {
    read_beyond_checks(facts);
    let root = &facts.sysroot;
    let reader = FileReader::new(root);
    let redactor = Redactor::new(facts, redact, &mut |host| match reader.read(host) {
        DeviceRead::Bytes(b) => Some(b),
        _ => None,
    });
    let enc = zstd::Encoder::new(sink, 3)
        .map_err(|e| format!("failed to start compressing {}: {e}", out.display()))?;
    let mut archive = Archive {
        tar: tar::Builder::new(enc),
        root,
        reader,
        redactor,
        redact,
        summary: Summary::default(),
    };
    let interrupted = || format!("interrupted: {} not written", out.display());
    let plan = layout::plan(root);
    let mut stored = std::collections::BTreeSet::new();
    for (host, how) in &plan.accesses {
        if stop() {
            return Err(interrupted());
        }
        let rel = host.trim_start_matches('/');
        if rel.is_empty()
            || host == "/var/log/kern.log"
            || host == CAPTURE_FILE
            || host == "/dev/kmsg"
        {
            continue;
        }
        // Two host paths that reach one file through links are stored once.
        let Some(at) = place(rel, &plan.links).filter(|at| stored.insert(at.clone())) else {
            continue;
        };
        match how {
            Use::Linked => {
                if let Some(target) = plan.links.get(&at) {
                    archive.link(&at, &within_root(&at, target))?;
                }
            }
            Use::Listed => {
                if root
                    .recorded_entry(host, true)
                    .is_some_and(|e| e.kind == Kind::Dir)
                {
                    archive.dir(&at)?;
                }
            }
            Use::Read | Use::Probed => archive.file(host, *how, &at)?,
        }
    }
    if stop() {
        return Err(interrupted());
    }
    if let Ok(log) = facts.kernel_log() {
        let text = archive.redactor.apply(log.lines.join("\n") + "\n");
        archive.regular("var/log/kern.log", text.as_bytes())?;
    }
    archive.record(facts)?;
    archive.finish()
}

impl<W: Write> Archive<'_, W> {
    /// Every write goes to the destination as it is made: an error is
    /// the destination's, and says what to do.
    fn err(e: std::io::Error) -> String {
        format!("the snapshot was not written: {e}")
    }

    fn link(&mut self, at: &str, target: &Path) -> Result<(), String> {
        let mut h = header(tar::EntryType::Symlink, 0, 0o777);
        self.tar
            .append_link(&mut h, at, target)
            .map_err(Self::err)?;
        self.summary.links += 1;
        Ok(())
    }

    fn dir(&mut self, at: &str) -> Result<(), String> {
        let mut h = header(tar::EntryType::Directory, 0, 0o755);
        self.tar
            .append_data(&mut h, at, std::io::empty())
            .map_err(Self::err)?;
        self.summary.dirs += 1;
        Ok(())
    }

    /// A file that did not answer, stored as a FIFO.
    fn hung(&mut self, host: &str, at: &str) -> Result<(), String> {
        let mut h = header(tar::EntryType::Fifo, 0, 0o644);
        self.tar
            .append_data(&mut h, at, std::io::empty())
            .map_err(Self::err)?;
        self.summary.hung.push(host.to_string());
        Ok(())
    }

    fn regular(&mut self, at: &str, bytes: &[u8]) -> Result<(), String> {
        let mut h = header(tar::EntryType::Regular, bytes.len() as u64, 0o644);
        self.tar.append_data(&mut h, at, bytes).map_err(Self::err)?;
        self.summary.files += 1;
        Ok(())
    }

    /// A read or probed path, stored at `at`: a directory, a file's
    /// content (a probed file's presence only), or a FIFO for a file that
    /// did not answer.
    fn file(&mut self, host: &str, how: Use, at: &str) -> Result<(), String> {
        let Some(meta) = self.root.recorded_entry(host, true) else {
            return Ok(());
        };
        if meta.kind == Kind::Dir {
            return self.dir(at);
        }
        // Device nodes and probed files: presence is what matters.
        let mut bytes = Vec::new();
        let hung = if meta.kind == Kind::Fifo {
            // A capture that simulates a hang (as the fixtures do) keeps it.
            true
        } else if meta.kind == Kind::Special && !self.root.is_live() {
            // A device or socket in a capture did not answer there.
            true
        } else if how == Use::Read && meta.kind == Kind::File {
            match self.reader.read(host) {
                DeviceRead::Bytes(b) => {
                    bytes = b;
                    false
                }
                DeviceRead::Failed => false,
                DeviceRead::NoAnswer => true,
            }
        } else {
            false
        };
        if hung {
            return self.hung(host, at);
        }
        if host == "/var/lib/dpkg/status" {
            bytes = gpu_packages(&String::from_utf8_lossy(&bytes)).into_bytes();
        }
        if self.redact && host == "/etc/group" {
            let mut n = 0;
            bytes = redact_groups(&String::from_utf8_lossy(&bytes), &mut n).into_bytes();
            self.redactor.count += n;
        }
        if self.redact && is_text(&bytes) {
            bytes = self
                .redactor
                .apply(String::from_utf8_lossy(&bytes).into_owned())
                .into_bytes();
        }
        self.regular(at, &bytes)
    }

    /// The capture record, last.
    fn record(&mut self, facts: &NodeFacts) -> Result<(), String> {
        let capture = capture_record(facts, &mut self.redactor);
        let record = format!(
            "# Written by rocgate {} snapshot{}: the user who took it and the device nodes they could open.\n{}",
            env!("CARGO_PKG_VERSION"),
            if self.redact {
                " (serials, host and user names, addresses and group members redacted)"
            } else {
                ""
            },
            toml::to_string(&capture)
                .map_err(|e| format!("failed to write the capture record: {e}"))?
        );
        self.regular(CAPTURE_FILE.trim_start_matches('/'), record.as_bytes())
    }

    /// Ends the tar and zstd streams; returns the sink and the tally.
    fn finish(self) -> Result<(W, Summary), String> {
        let err = |e: std::io::Error| format!("the snapshot was not written: {e}");
        let mut summary = self.summary;
        summary.redacted = self.redactor.count;
        let enc = self.tar.into_inner().map_err(err)?;
        let mut sink = enc.finish().map_err(err)?;
        sink.flush().map_err(err)?;
        Ok((sink, summary))
    }
}

#[cfg(test)]
mod tests {
    use super::super::open::{Unpacked, extract};
    use super::*;
    use rocgate_fixtures::hostile::put;
    use std::path::PathBuf;

    #[test]
    fn a_file_that_blocks_is_hung_and_the_reader_carries_on() {
        let dir = tempfile::tempdir().unwrap();
        let dev = dir.path().join("0000:46:00.0");
        std::fs::create_dir(&dev).unwrap();
        // Opening a FIFO nobody writes blocks, as a read on a wedged GPU
        // does: on the live node (paths below `/`) it is waited for.
        nix::unistd::mkfifo(
            &dev.join("hangs"),
            nix::sys::stat::Mode::from_bits_truncate(0o644),
        )
        .unwrap();
        std::fs::write(dev.join("after"), "1\n").unwrap();
        std::fs::write(dir.path().join("fine"), "ok\n").unwrap();
        let live = |p: PathBuf| p.display().to_string();
        let reader = FileReader::new(&Sysroot::live());
        assert!(matches!(
            reader.read(&live(dev.join("hangs"))),
            DeviceRead::NoAnswer
        ));
        let start = std::time::Instant::now();
        assert!(matches!(
            reader.read(&live(dev.join("after"))),
            DeviceRead::NoAnswer
        ));
        assert!(
            start.elapsed() < Duration::from_millis(100),
            "the wedged device is not retried"
        );
        match reader.read(&live(dir.path().join("fine"))) {
            DeviceRead::Bytes(b) => assert_eq!(b, b"ok\n"),
            _ => panic!("a healthy file after a hang must read"),
        }
        assert!(matches!(
            reader.read(&live(dir.path().join("missing"))),
            DeviceRead::Failed
        ));
        // In a capture the FIFO is never opened: it is hung at once, and
        // its device's other files still read.
        let reader = FileReader::new(&Sysroot::at(dir.path()));
        let start = std::time::Instant::now();
        assert!(matches!(
            reader.read("/0000:46:00.0/hangs"),
            DeviceRead::NoAnswer
        ));
        assert!(start.elapsed() < FILE_WAIT);
        assert!(matches!(
            reader.read("/0000:46:00.0/after"),
            DeviceRead::Bytes(_)
        ));
    }

    /// `facts` captured into an archive beside them (in `beside`) and
    /// unpacked again: the unpacked directory and a sysroot on it.
    fn captured(facts: &NodeFacts, beside: &Path) -> (Unpacked, Sysroot) {
        let out = beside.join("snap.tar.zst");
        write(facts, &out, false, &|| false).unwrap();
        let dir = extract(&out, &|| false).unwrap();
        let replay = Sysroot::at(dir.path());
        (dir, replay)
    }

    #[test]
    fn a_binary_config_is_stored_byte_for_byte_even_when_redacting() {
        let node = tempfile::tempdir().unwrap();
        put(node.path(), "proc/sys/kernel/hostname", "gpu-node-07\n").unwrap();
        // A bridge's config space that happens to be valid UTF-8 and to
        // hold the host name's bytes: redaction must not touch it.
        let mut config = vec![0u8; 0x1000];
        config[..4].copy_from_slice(&[0x22, 0x10, 0x2b, 0x14]);
        config[0x200..0x20b].copy_from_slice(b"gpu-node-07");
        config[0x16e] = 0x1d;
        assert!(
            std::str::from_utf8(&config).is_ok(),
            "the case redaction could break"
        );
        let dev = "sys/devices/pci0000:00/0000:00:01.1";
        std::fs::create_dir_all(node.path().join(dev)).unwrap();
        std::fs::write(node.path().join(dev).join("config"), &config).unwrap();
        std::fs::create_dir_all(node.path().join("sys/bus/pci/devices")).unwrap();
        std::os::unix::fs::symlink(
            format!("../../../{}", dev.trim_start_matches("sys/")),
            node.path().join("sys/bus/pci/devices/0000:00:01.1"),
        )
        .unwrap();
        let facts = NodeFacts::discover(Sysroot::recording(node.path()));
        let host = "/sys/bus/pci/devices/0000:00:01.1/config";
        assert_eq!(facts.sysroot.read_bytes(host, 0x1000).unwrap(), config);
        let out = node.path().join("snap.tar.zst");
        let summary = write(&facts, &out, true, &|| false).unwrap();
        assert!(summary.redacted > 0, "the host name was redacted elsewhere");
        let dir = extract(&out, &|| false).unwrap();
        let replay = Sysroot::at(dir.path());
        assert_eq!(replay.read_bytes(host, 0x1000).unwrap(), config);
        assert!(is_text(b"0x1002\n\0\0") && !is_text(&config) && !is_text(&[0xff]));
    }

    #[test]
    fn a_snapshot_stores_nothing_beneath_a_link_and_replays_through_it() {
        let node = tempfile::tempdir().unwrap();
        put(
            node.path(),
            "sys/devices/pci0000:00/0000:05:00.0/vendor",
            "0x1002\n",
        )
        .unwrap();
        std::fs::create_dir_all(node.path().join("sys/class/drm/card0")).unwrap();
        std::os::unix::fs::symlink(
            "../../../devices/pci0000:00/0000:05:00.0",
            node.path().join("sys/class/drm/card0/device"),
        )
        .unwrap();
        let facts = NodeFacts::discover(Sysroot::recording(node.path()));
        // A reader that both names the link and reads beneath it.
        facts
            .sysroot
            .link_name("/sys/class/drm/card0/device")
            .unwrap();
        facts
            .sysroot
            .read_text("/sys/class/drm/card0/device/vendor")
            .unwrap();
        let (_dir, replay) = captured(&facts, node.path());
        assert_eq!(
            replay
                .link_name("/sys/class/drm/card0/device")
                .unwrap()
                .as_deref(),
            Some("0000:05:00.0")
        );
        assert_eq!(
            replay
                .read_text("/sys/class/drm/card0/device/vendor")
                .unwrap(),
            "0x1002"
        );
        // Only the archive is left beside the node: no temporary file.
        let names: Vec<_> = std::fs::read_dir(node.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("rocgate"))
            .collect();
        assert!(names.is_empty(), "{names:?}");
    }

    #[test]
    fn a_listed_directory_replays_its_names_and_absolute_links_stay_inside() {
        let node = tempfile::tempdir().unwrap();
        let dkms = node.path().join("var/lib/dkms/amdgpu");
        std::fs::create_dir_all(dkms.join("6.16.6-2255209.24.04")).unwrap();
        std::fs::write(dkms.join("notes"), "not read").unwrap();
        put(node.path(), "opt/rocm-6.2.0/.info/version", "6.2.0-66\n").unwrap();
        // As the alternatives system lays it out: absolute, from the root.
        std::os::unix::fs::symlink("/opt/rocm-6.2.0", node.path().join("opt/rocm")).unwrap();
        let facts = NodeFacts::discover(Sysroot::recording(node.path()));
        // Readers that use only the names.
        facts.sysroot.list_dir("/var/lib/dkms/amdgpu").unwrap();
        facts.sysroot.list_dir("/opt").unwrap();
        // In a directory (not `/`) an absolute link leads out of it, so the
        // capture reads the install by its own name, as `rocm_installs` does.
        facts
            .sysroot
            .read_text("/opt/rocm-6.2.0/.info/version")
            .unwrap();
        let (dir, replay) = captured(&facts, node.path());
        assert_eq!(
            replay.list_dir("/var/lib/dkms/amdgpu").unwrap(),
            ["6.16.6-2255209.24.04", "notes"]
        );
        // What was only listed is present, not its content.
        assert_eq!(replay.read_text("/var/lib/dkms/amdgpu/notes").unwrap(), "");
        assert_eq!(
            replay.link_name("/opt/rocm").unwrap().as_deref(),
            Some("rocm-6.2.0")
        );
        // Read through the link, inside the snapshot: the replaying host
        // has no /opt/rocm-6.2.0.
        assert_eq!(
            std::fs::read_link(dir.path().join("opt/rocm")).unwrap(),
            Path::new("../opt/rocm-6.2.0")
        );
        assert_eq!(
            replay.read_text("/opt/rocm/.info/version").unwrap(),
            "6.2.0-66"
        );
    }

    #[test]
    fn an_interrupted_snapshot_leaves_the_target_untouched() {
        let node = tempfile::tempdir().unwrap();
        let facts = NodeFacts::discover(Sysroot::recording(node.path()));
        let out = node.path().join("snap.tar.zst");
        std::fs::write(&out, "previous").unwrap();
        let e = write(&facts, &out, false, &|| true).unwrap_err();
        assert!(e.0.contains("interrupted"), "{e}");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "previous");
        assert_eq!(std::fs::read_dir(node.path()).unwrap().count(), 1);
    }
}
