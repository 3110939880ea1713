//! Snapshots: everything the node layers and the compat check read, in one
//! `.tar.zst` that `--sysroot` accepts, so a failing node can be diagnosed
//! elsewhere. Serials and the host name can be redacted consistently.

use crate::facts::NodeFacts;
use crate::facts::access::{self, Access};
use crate::facts::capture::{CAPTURE_FILE, Capture, CapturedDevice, CapturedUser};
use rocgate_harness::Access as Use;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Largest file a snapshot copies.
const MAX_FILE: u64 = 16 << 20;

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
    fn new(facts: &NodeFacts, enabled: bool) -> Redactor {
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
                    if let Ok(Some(serial)) = facts
                        .sysroot
                        .read_opt(&format!("{}/serial_number", pci.sysfs_dir()))
                    {
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
    let mut redactor = Redactor::new(facts, redact);
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
                if *how == Use::Read && meta.is_file() {
                    if let Ok(f) = std::fs::File::open(&path) {
                        let _ = f.take(MAX_FILE).read_to_end(&mut bytes);
                    }
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
        tar::Archive::new(dec).unpack(dir.path()).map_err(bad)?;
    } else {
        tar::Archive::new(f).unpack(dir.path()).map_err(bad)?;
    }
    Ok(dir)
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
