//! Snapshots: everything the node layers and the compat check read, in one
//! `.tar.zst` that `--sysroot` accepts, so a failing node can be diagnosed
//! elsewhere. Serials and the host name can be redacted consistently.

use crate::facts::NodeFacts;
use crate::facts::access::{self, Access};
use crate::facts::capture::{CAPTURE_FILE, Capture, CapturedDevice, CapturedUser};
use rocgate_harness::Access as Use;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// Largest file a snapshot copies.
const MAX_FILE: u64 = 16 << 20;

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

/// What reading one file gave.
enum Outcome {
    Bytes(Vec<u8>),
    Failed,
    Hung,
}

/// The reading thread's request and reply channels.
type ReadWorker = (
    mpsc::Sender<PathBuf>,
    mpsc::Receiver<std::io::Result<Vec<u8>>>,
);

/// Reads files on a helper thread so that a wedged GPU's sysfs cannot hang
/// the snapshot: a file that does not answer within [`FILE_WAIT`] is hung,
/// its thread is abandoned, and the PCI device it belongs to is treated as
/// wedged from then on (its other files are not tried).
struct BoundedReader {
    worker: Option<ReadWorker>,
    wedged: Vec<String>,
}

impl BoundedReader {
    fn new() -> BoundedReader {
        BoundedReader {
            worker: None,
            wedged: Vec::new(),
        }
    }

    fn spawn() -> Option<ReadWorker> {
        let (to_worker, requests) = mpsc::channel::<PathBuf>();
        let (replies, from_worker) = mpsc::channel();
        std::thread::Builder::new()
            .name("rocgate-snapshot-read".into())
            .spawn(move || {
                for path in requests {
                    let mut bytes = Vec::new();
                    let r = std::fs::File::open(&path)
                        .and_then(|f| f.take(MAX_FILE).read_to_end(&mut bytes))
                        .map(|_| bytes);
                    if replies.send(r).is_err() {
                        return;
                    }
                }
            })
            .ok()?;
        Some((to_worker, from_worker))
    }

    /// Reads `path`, the node's `host` path.
    fn read(&mut self, host: &str, path: &Path) -> Outcome {
        if self.wedged.iter().any(|w| host.starts_with(w.as_str())) {
            return Outcome::Hung;
        }
        if self.worker.is_none() {
            self.worker = Self::spawn();
        }
        let Some((tx, rx)) = &self.worker else {
            return Outcome::Failed;
        };
        if tx.send(path.to_path_buf()).is_err() {
            self.worker = None;
            return Outcome::Failed;
        }
        match rx.recv_timeout(FILE_WAIT) {
            Ok(Ok(bytes)) => Outcome::Bytes(bytes),
            Ok(Err(_)) => Outcome::Failed,
            Err(_) => {
                self.worker = None;
                self.wedged.push(device_prefix(host));
                Outcome::Hung
            }
        }
    }
}

/// The PCI device directory a sysfs path belongs to (up to its last
/// `dddd:bb:dd.f` component), or the path itself.
fn device_prefix(host: &str) -> String {
    let is_bdf = |c: &str| {
        let b = c.as_bytes();
        b.len() == 12 && b[4] == b':' && b[7] == b':' && b[10] == b'.'
    };
    let mut end = None;
    let mut pos = 0;
    for part in host.split('/') {
        pos += part.len() + 1;
        if is_bdf(part) {
            end = Some(pos);
        }
    }
    end.and_then(|e| host.get(..e)).unwrap_or(host).to_string()
}

/// Replacements for serials and the host name.
struct Redactor {
    pairs: Vec<(String, String)>,
    count: usize,
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

impl Redactor {
    fn new(facts: &NodeFacts, enabled: bool, reader: &mut BoundedReader) -> Redactor {
        let mut pairs = Vec::new();
        if enabled {
            for g in &facts.gpus {
                if let Some(u) = g.kfd.as_ref().and_then(|k| k.unique_id).filter(|&u| u != 0) {
                    let fake = fnv(&u.to_string()) | 1;
                    pairs.push((u.to_string(), fake.to_string()));
                    pairs.push((format!("{u:016X}"), format!("{fake:016X}")));
                    pairs.push((format!("{u:016x}"), format!("{fake:016x}")));
                }
                if let Some(pci) = &g.pci {
                    let host = format!("{}/serial_number", pci.sysfs_dir());
                    if let Outcome::Bytes(b) = reader.read(&host, &facts.sysroot.path(&host)) {
                        let serial = String::from_utf8_lossy(&b).trim().to_string();
                        if serial.len() >= 4 {
                            pairs.push((
                                serial.clone(),
                                format!("REDACTED-{:08x}", fnv(&serial) as u32),
                            ));
                        }
                    }
                }
            }
            if let Ok(Some(host)) = facts.sysroot.read_opt("/proc/sys/kernel/hostname") {
                if host.len() >= 2 {
                    pairs.push((
                        host.clone(),
                        format!("node-{:06x}", fnv(&host) as u32 & 0xff_ffff),
                    ));
                }
            }
            // Longest first, so a value is not half-replaced by a shorter one.
            pairs.sort_by_key(|(a, _)| std::cmp::Reverse(a.len()));
            pairs.dedup();
        }
        Redactor { pairs, count: 0 }
    }

    fn apply(&mut self, text: String) -> String {
        let mut out = text;
        for (from, to) in &self.pairs {
            let n = out.matches(from.as_str()).count();
            if n > 0 {
                self.count += n;
                out = out.replace(from.as_str(), to);
            }
        }
        out
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

fn header(kind: tar::EntryType, size: u64, mode: u32) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_size(size);
    h.set_mode(mode);
    h.set_mtime(0);
    h
}

/// The capture record: who took the snapshot and what they could open.
fn capture_record(facts: &NodeFacts, redact: &mut Redactor) -> Capture {
    if let Some(c) = facts.capture() {
        return c.clone();
    }
    let user = facts.user.as_ref().map(|u| CapturedUser {
        name: redact.apply(u.name.clone()),
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
            let meta = std::fs::metadata(facts.sysroot.path(&p)).ok();
            let open = match facts.access(&p) {
                Access::Granted => "ok".to_string(),
                Access::Missing => "ENOENT".to_string(),
                Access::Denied { errno, .. } => errno,
                Access::Failed { error } => error,
                Access::Unknown { .. } => "unknown".to_string(),
            };
            CapturedDevice {
                gid: meta.as_ref().map(MetadataExt::gid),
                mode: meta
                    .as_ref()
                    .map(|m| format!("{:04o}", m.permissions().mode() & 0o7777)),
                path: p,
                open,
            }
        })
        .collect();
    Capture { user, devices }
}

/// Writes a snapshot of what `facts.sysroot` (a recording sysroot) has
/// accessed, plus the kernel log and the capture record, to `out`.
pub fn write(facts: &NodeFacts, out: &Path, redact: bool) -> Result<Summary, String> {
    let root = &facts.sysroot;
    let mut reader = BoundedReader::new();
    let mut redactor = Redactor::new(facts, redact, &mut reader);
    let file = std::fs::File::create(out)
        .map_err(|e| format!("failed to create {}: {e}", out.display()))?;
    let enc = zstd::Encoder::new(file, 3)
        .map_err(|e| format!("failed to start compressing {}: {e}", out.display()))?;
    let mut tar = tar::Builder::new(enc);
    let mut summary = Summary::default();
    let err = |e: std::io::Error| format!("failed to write {}: {e}", out.display());
    let mut accesses: BTreeMap<String, Use> = root.accesses().into_iter().collect();
    for extra in [
        "/etc/os-release",
        "/opt/rocm/.info/version",
        "/proc/sys/kernel/hostname",
        "/var/lib/dpkg/status",
    ] {
        accesses.entry(extra.to_string()).or_insert(Use::Read);
    }
    for (host, how) in &accesses {
        let rel = host.trim_start_matches('/');
        if rel.is_empty()
            || host == "/var/log/kern.log"
            || host == CAPTURE_FILE
            || host == "/dev/kmsg"
        {
            continue;
        }
        let path = root.path(host);
        match how {
            Use::Linked => {
                if let Ok(target) = std::fs::read_link(&path) {
                    let mut h = header(tar::EntryType::Symlink, 0, 0o777);
                    tar.append_link(&mut h, rel, &target).map_err(err)?;
                    summary.links += 1;
                }
            }
            Use::Listed => {
                if path.is_dir() {
                    let mut h = header(tar::EntryType::Directory, 0, 0o755);
                    tar.append_data(&mut h, rel, std::io::empty())
                        .map_err(err)?;
                    summary.dirs += 1;
                }
            }
            Use::Read | Use::Probed => {
                let Ok(meta) = std::fs::metadata(&path) else {
                    continue;
                };
                if meta.is_dir() {
                    let mut h = header(tar::EntryType::Directory, 0, 0o755);
                    tar.append_data(&mut h, rel, std::io::empty())
                        .map_err(err)?;
                    summary.dirs += 1;
                    continue;
                }
                // Device nodes and probed files: presence is what matters.
                let mut bytes = Vec::new();
                let hung = if meta.file_type().is_fifo() {
                    // A capture that simulates a hang (as the fixtures do) keeps it.
                    true
                } else if *how == Use::Read && meta.is_file() {
                    match reader.read(host, &path) {
                        Outcome::Bytes(b) => {
                            bytes = b;
                            false
                        }
                        Outcome::Failed => false,
                        Outcome::Hung => true,
                    }
                } else {
                    false
                };
                if hung {
                    let mut h = header(tar::EntryType::Fifo, 0, 0o644);
                    tar.append_data(&mut h, rel, std::io::empty())
                        .map_err(err)?;
                    summary.hung.push(host.clone());
                    continue;
                }
                if host == "/var/lib/dpkg/status" {
                    bytes = gpu_packages(&String::from_utf8_lossy(&bytes)).into_bytes();
                }
                if redact && std::str::from_utf8(&bytes).is_ok() {
                    bytes = redactor
                        .apply(String::from_utf8_lossy(&bytes).into_owned())
                        .into_bytes();
                }
                let mut h = header(tar::EntryType::Regular, bytes.len() as u64, 0o644);
                tar.append_data(&mut h, rel, bytes.as_slice())
                    .map_err(err)?;
                summary.files += 1;
            }
        }
    }
    if let Ok(log) = facts.kernel_log() {
        let text = redactor.apply(log.lines.join("\n") + "\n");
        let mut h = header(tar::EntryType::Regular, text.len() as u64, 0o644);
        tar.append_data(&mut h, "var/log/kern.log", text.as_bytes())
            .map_err(err)?;
        summary.files += 1;
    }
    let capture = capture_record(facts, &mut redactor);
    let record = format!(
        "# Written by rocgate {} snapshot{}: the user who took it and the device nodes they could open.\n{}",
        env!("CARGO_PKG_VERSION"),
        if redact {
            " (serials and host name redacted)"
        } else {
            ""
        },
        toml::to_string(&capture)
            .map_err(|e| format!("failed to write the capture record: {e}"))?
    );
    let mut h = header(tar::EntryType::Regular, record.len() as u64, 0o644);
    tar.append_data(
        &mut h,
        CAPTURE_FILE.trim_start_matches('/'),
        record.as_bytes(),
    )
    .map_err(err)?;
    summary.files += 1;
    summary.redacted = redactor.count;
    let enc = tar.into_inner().map_err(err)?;
    let mut file = enc.finish().map_err(err)?;
    file.flush().map_err(err)?;
    Ok(summary)
}

/// Whether `path` is a snapshot archive rather than a sysroot directory.
pub fn is_archive(path: &Path) -> bool {
    path.is_file()
}

/// Unpacks a snapshot (`.tar.zst`, or a plain `.tar`) into a temporary
/// directory that lives as long as the returned guard.
pub fn extract(path: &Path) -> Result<tempfile::TempDir, String> {
    let mut head = [0u8; 4];
    let mut f =
        std::fs::File::open(path).map_err(|e| format!("failed to open {}: {e}", path.display()))?;
    let n = f
        .read(&mut head)
        .map_err(|e| format!("failed to read {}: {e}", path.display()))?;
    let f =
        std::fs::File::open(path).map_err(|e| format!("failed to open {}: {e}", path.display()))?;
    let dir = tempfile::Builder::new()
        .prefix("rocgate-snapshot-")
        .tempdir()
        .map_err(|e| {
            format!(
                "failed to create a directory to unpack {}: {e}",
                path.display()
            )
        })?;
    let bad = |e: std::io::Error| {
        format!(
            "failed to unpack {} (is it a rocgate snapshot?): {e}",
            path.display()
        )
    };
    if n == 4 && head == [0x28, 0xb5, 0x2f, 0xfd] {
        let dec = zstd::Decoder::new(f).map_err(bad)?;
        unpack(tar::Archive::new(dec), dir.path()).map_err(bad)?;
    } else {
        unpack(tar::Archive::new(f), dir.path()).map_err(bad)?;
    }
    Ok(dir)
}

/// Unpacks an archive, recreating the FIFOs that stand for hung files (the
/// tar crate would make them empty regular files).
fn unpack<R: Read>(mut archive: tar::Archive<R>, dir: &Path) -> std::io::Result<()> {
    for entry in archive.entries()? {
        let mut entry = entry?;
        if entry.header().entry_type() != tar::EntryType::Fifo {
            entry.unpack_in(dir)?;
            continue;
        }
        let rel = entry.path()?.into_owned();
        // unpack_in's own guard: nothing may land outside `dir`.
        if rel.is_absolute()
            || rel
                .components()
                .any(|c| c == std::path::Component::ParentDir)
        {
            return Err(std::io::Error::other(format!(
                "entry {} escapes the archive",
                rel.display()
            )));
        }
        let path = dir.join(&rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o644))
            .map_err(std::io::Error::from)?;
    }
    Ok(())
}

/// The directory a `--sysroot` argument names: itself, or a snapshot
/// unpacked for the life of the process.
pub fn sysroot_dir(arg: &Path) -> Result<PathBuf, String> {
    if !is_archive(arg) {
        return Ok(arg.to_path_buf());
    }
    static UNPACKED: std::sync::Mutex<Vec<tempfile::TempDir>> = std::sync::Mutex::new(Vec::new());
    let dir = extract(arg)?;
    let path = dir.path().to_path_buf();
    UNPACKED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(dir);
    Ok(path)
}

/// The current user, for the capture record of a live snapshot.
pub fn current_user(facts: &NodeFacts) -> Option<access::User> {
    facts.user.clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hung_file_wedges_its_device_only() {
        assert_eq!(
            device_prefix("/sys/devices/pci0000:00/0000:46:00.0/fw_version/mec_fw_version"),
            "/sys/devices/pci0000:00/0000:46:00.0/"
        );
        assert_eq!(
            device_prefix("/sys/bus/pci/devices/0000:46:00.0/serial_number"),
            "/sys/bus/pci/devices/0000:46:00.0/"
        );
        assert_eq!(device_prefix("/proc/modules"), "/proc/modules");
    }

    #[test]
    fn a_file_that_blocks_is_hung_and_the_reader_carries_on() {
        let dir = tempfile::tempdir().unwrap();
        let dev = dir.path().join("0000:46:00.0");
        std::fs::create_dir(&dev).unwrap();
        // Opening a FIFO nobody writes blocks, as a read on a wedged GPU does.
        nix::unistd::mkfifo(
            &dev.join("hangs"),
            nix::sys::stat::Mode::from_bits_truncate(0o644),
        )
        .unwrap();
        std::fs::write(dev.join("after"), "1\n").unwrap();
        std::fs::write(dir.path().join("fine"), "ok\n").unwrap();
        let mut reader = BoundedReader::new();
        assert!(matches!(
            reader.read("/sys/0000:46:00.0/hangs", &dev.join("hangs")),
            Outcome::Hung
        ));
        let start = std::time::Instant::now();
        assert!(matches!(
            reader.read("/sys/0000:46:00.0/after", &dev.join("after")),
            Outcome::Hung
        ));
        assert!(
            start.elapsed() < Duration::from_millis(100),
            "the wedged device is not retried"
        );
        match reader.read("/proc/fine", &dir.path().join("fine")) {
            Outcome::Bytes(b) => assert_eq!(b, b"ok\n"),
            _ => panic!("a healthy file after a hang must read"),
        }
        assert!(matches!(
            reader.read("/proc/missing", &dir.path().join("missing")),
            Outcome::Failed
        ));
    }
}
