//! Snapshots: everything the node layers and the compat check read, in one
//! `.tar.zst` that `--sysroot` accepts, so a failing node can be diagnosed
//! elsewhere. Serials and the host name can be redacted consistently.
//!
//! An archive given to `--sysroot` may come from anywhere, so unpacking it
//! trusts nothing: entries land inside a fresh temporary directory or not at
//! all (no absolute names, no `..`, nothing written through a symbolic link
//! the archive made), device nodes are refused, and the unpacked size and
//! entry count are capped. The directory is removed when the command that
//! opened it ends.

use crate::PathUse as Use;
use crate::Sysroot;
use crate::facts::NodeFacts;
use crate::facts::access::{self, Access};
use crate::facts::capture::{CAPTURE_FILE, Capture, CapturedDevice, CapturedUser};
use crate::sysroot::Kind;
use nix::errno::Errno;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::fs::MetadataExt;
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
    mpsc::Sender<String>,
    mpsc::Receiver<std::io::Result<Vec<u8>>>,
);

/// Reads files on a helper thread so that a wedged GPU's sysfs cannot hang
/// the snapshot: a file that does not answer within [`FILE_WAIT`] is hung,
/// its thread is abandoned, and the PCI device it belongs to is treated as
/// wedged from then on (its other files are not tried).
struct BoundedReader {
    root: Sysroot,
    worker: Option<ReadWorker>,
    wedged: Vec<String>,
}

impl BoundedReader {
    /// Reads recorded paths of `root`, its links resolved inside it.
    fn new(root: &Sysroot) -> BoundedReader {
        BoundedReader {
            root: root.clone(),
            worker: None,
            wedged: Vec::new(),
        }
    }

    fn spawn(root: Sysroot) -> Option<ReadWorker> {
        let (to_worker, requests) = mpsc::channel::<String>();
        let (replies, from_worker) = mpsc::channel();
        std::thread::Builder::new()
            .name("rocgate-snapshot-read".into())
            .spawn(move || {
                for at in requests {
                    // Page-sized reads until EOF, as the facts read: a
                    // binary attribute (`gpu_vram_bad_pages`) stored from
                    // `read_to_end` would hold only its first records.
                    let r = root
                        .recorded_open(&at)
                        .and_then(|f| crate::bounded_io::read_paged(f, MAX_FILE));
                    if replies.send(r).is_err() {
                        return;
                    }
                }
            })
            .ok()?;
        Some((to_worker, from_worker))
    }

    /// Reads `host`, a recorded path.
    fn read(&mut self, host: &str) -> Outcome {
        if self.wedged.iter().any(|w| host.starts_with(w.as_str())) {
            return Outcome::Hung;
        }
        if self.worker.is_none() {
            self.worker = Self::spawn(self.root.clone());
        }
        let Some((tx, rx)) = &self.worker else {
            return Outcome::Failed;
        };
        if tx.send(host.to_string()).is_err() {
            self.worker = None;
            return Outcome::Failed;
        }
        match rx.recv_timeout(FILE_WAIT) {
            Ok(Ok(bytes)) => Outcome::Bytes(bytes),
            // A FIFO, device or socket of a capture: it did not answer there.
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::WouldBlock => Outcome::Hung,
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

/// Replacements for serials, the host name, user names and addresses.
struct Redactor {
    /// Serials, replaced wherever they occur.
    pairs: Vec<(String, String)>,
    /// Host and user names, replaced where they stand as a word (`ci` in
    /// `pci` is no user name).
    words: Vec<(String, String)>,
    /// Whether IP addresses are replaced.
    addresses: bool,
    count: usize,
}

/// A user name's stand-in: the same for the same name, so that a user is
/// still recognisable across files (the capture record, `/etc/group`).
fn pseudonym(user: &str) -> String {
    format!("user-{:08x}", fnv(user) as u32)
}

/// Whether `c` continues a host or user name.
fn in_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// `text` with every whole-word `from` replaced by `to`; counts them.
fn replace_word(text: &str, from: &str, to: &str, count: &mut usize) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    let mut before: Option<char> = None;
    while let Some(at) = rest.find(from) {
        let prev = rest[..at].chars().next_back().or(before);
        let next = rest[at + from.len()..].chars().next();
        out.push_str(&rest[..at]);
        if prev.is_some_and(in_word) || next.is_some_and(in_word) {
            out.push_str(from);
        } else {
            out.push_str(to);
            *count += 1;
        }
        before = from.chars().next_back();
        rest = &rest[at + from.len()..];
    }
    out.push_str(rest);
    out
}

/// An IPv4 or IPv6 address's stand-in, from the documentation and
/// benchmarking ranges (RFC 5737, 2544, 3849), the same for the same
/// address; `None` for one that identifies no node (loopback,
/// unspecified, a netmask).
fn address_stand_in(token: &str) -> Option<String> {
    if let Ok(v4) = token.parse::<std::net::Ipv4Addr>() {
        if v4.is_loopback() || v4.is_unspecified() || v4.octets()[0] == 255 {
            return None;
        }
        let h = fnv(token) as u32;
        return Some(format!(
            "198.{}.{}.{}",
            18 + ((h >> 16) & 1),
            (h >> 8) & 0xff,
            h & 0xff
        ));
    }
    let v6 = token.parse::<std::net::Ipv6Addr>().ok()?;
    if v6.is_loopback() || v6.is_unspecified() {
        return None;
    }
    let h = fnv(&v6.to_string());
    Some(format!(
        "2001:db8::{:x}:{:x}",
        (h >> 16) & 0xffff,
        h & 0xffff
    ))
}

/// `text` with its IPv4 and IPv6 addresses replaced; counts them. A
/// candidate is a run of hex digits, dots and colons that starts and ends
/// a word; a run that is no address as a whole (`ip=A::B:MASK:host`, a
/// kernel command line) is tried piece by piece between its colons.
fn redact_addresses(text: &str, count: &mut usize) -> String {
    let b = text.as_bytes();
    let run = |c: u8| c.is_ascii_hexdigit() || c == b'.' || c == b':';
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'.';
    let mut out = String::with_capacity(text.len());
    let (mut i, mut copied) = (0, 0);
    while i < b.len() {
        if !run(b[i]) || (i > 0 && word(b[i - 1])) {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < b.len() && run(b[j]) {
            j += 1;
        }
        // Glued to a word (`6.8.0.45x`), unless the run ended on a
        // separator (`...:255.255.255.0:host`).
        if j < b.len()
            && (b[j].is_ascii_alphanumeric() || b[j] == b'_')
            && !matches!(b[j - 1], b':' | b'.')
        {
            i = j;
            continue;
        }
        let token = text[i..j].trim_end_matches(['.', ':']);
        let end = i + token.len();
        let replaced = address_stand_in(token).or_else(|| {
            if !token.contains(':') {
                return None;
            }
            let mut any = false;
            let pieces: Vec<String> = token
                .split(':')
                .map(|p| match address_stand_in(p).filter(|_| p.contains('.')) {
                    Some(r) => {
                        any = true;
                        *count += 1;
                        r
                    }
                    None => p.to_string(),
                })
                .collect();
            any.then(|| pieces.join(":"))
        });
        if let Some(r) = replaced {
            if !r.contains(':') || token.parse::<std::net::Ipv6Addr>().is_ok() {
                *count += 1;
            }
            out.push_str(&text[copied..i]);
            out.push_str(&r);
            copied = end;
        }
        i = j;
    }
    out.push_str(&text[copied..]);
    out
}

/// `/etc/group` with every member list's names replaced by their
/// stand-ins; the group names, which checks look up, stay.
fn redact_groups(text: &str, count: &mut usize) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(b) => (b, "\n"),
            None => (line, ""),
        };
        let fields: Vec<&str> = body.splitn(4, ':').collect();
        if fields.len() == 4 && !fields[3].trim().is_empty() {
            let members: Vec<String> = fields[3]
                .split(',')
                .map(|m| {
                    *count += 1;
                    pseudonym(m.trim())
                })
                .collect();
            out.push_str(&format!(
                "{}:{}:{}:{}{end}",
                fields[0],
                fields[1],
                fields[2],
                members.join(",")
            ));
        } else {
            out.push_str(line);
        }
    }
    out
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

impl Redactor {
    fn new(facts: &NodeFacts, enabled: bool, reader: &mut BoundedReader) -> Redactor {
        let mut pairs = Vec::new();
        let mut words = Vec::new();
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
                    if let Outcome::Bytes(b) = reader.read(&host) {
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
                // The short name too: syslog lines and `ip=` carry it.
                let short = host.split('.').next().unwrap_or(&host).to_string();
                let stand_in = format!("node-{:06x}", fnv(&short) as u32 & 0xff_ffff);
                for name in [host.clone(), short] {
                    if name.len() >= 2 {
                        words.push((name, stand_in.clone()));
                    }
                }
            }
            // The capture's user, by the name it logs under; `root` names
            // nobody in particular, and is a word of kernel command lines.
            let user = facts
                .capture()
                .and_then(|c| c.user.as_ref().map(|u| u.name.clone()))
                .or_else(|| facts.user.as_ref().map(|u| u.name.clone()));
            if let Some(user) = user.filter(|u| u.len() >= 2 && u != "root") {
                words.push((user.clone(), pseudonym(&user)));
            }
            // Longest first, so a value is not half-replaced by a shorter one.
            pairs.sort_by_key(|(a, _)| std::cmp::Reverse(a.len()));
            pairs.dedup();
            words.sort_by_key(|(a, _)| std::cmp::Reverse(a.len()));
            words.dedup();
        }
        Redactor {
            pairs,
            words,
            addresses: enabled,
            count: 0,
        }
    }

    /// The capture user's name as redacted (`root` as it is).
    fn user(&mut self, name: &str) -> String {
        if self.addresses && name != "root" {
            self.count += 1;
            pseudonym(name)
        } else {
            name.to_string()
        }
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
        for (from, to) in &self.words {
            if out.contains(from.as_str()) {
                out = replace_word(&out, from, to, &mut self.count);
            }
        }
        if self.addresses {
            out = redact_addresses(&out, &mut self.count);
        }
        out
    }
}

/// Whether a file is text that redaction may rewrite: UTF-8 with no NUL
/// before its padding. A binary file (a PCI `config`, whose offsets a
/// reader walks) may happen to be valid UTF-8, and a replaced value of
/// another length would move every register after it.
fn is_text(bytes: &[u8]) -> bool {
    let end = bytes.len() - bytes.iter().rev().take_while(|&&b| b == 0).count();
    std::str::from_utf8(bytes).is_ok() && !bytes[..end].contains(&0)
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

/// Where `rel` (a path relative to the root) goes in the archive. Unpacking
/// never writes through a symbolic link, so a path beneath a link the
/// archive stores (`links`: placed path to target) is stored beneath the
/// link's target instead; replaying follows the link to the same place.
/// `None` when the links loop.
fn place(rel: &str, links: &BTreeMap<String, PathBuf>) -> Option<String> {
    let mut parts: Vec<String> = rel
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .map(str::to_string)
        .collect();
    // As the kernel's limit on links followed in one lookup.
    let mut hops = 0;
    'resolve: loop {
        for i in 1..parts.len() {
            let Some(target) = links.get(&parts[..i].join("/")) else {
                continue;
            };
            hops += 1;
            if hops > 40 {
                return None;
            }
            // Within the sysroot an absolute target starts at its root and
            // `..` stops there, as in a chroot.
            let mut base: Vec<String> = if target.has_root() {
                Vec::new()
            } else {
                parts[..i - 1].to_vec()
            };
            for c in target.components() {
                match c {
                    std::path::Component::Normal(s) => base.push(s.to_string_lossy().into_owned()),
                    std::path::Component::ParentDir => {
                        base.pop();
                    }
                    _ => {}
                }
            }
            base.extend_from_slice(&parts[i..]);
            parts = base;
            continue 'resolve;
        }
        return (!parts.is_empty()).then(|| parts.join("/"));
    }
}

/// The target a link stored at `at` gets in the archive. An absolute
/// target means the node's root, so it is made relative to the link's
/// directory: replayed, the link then leads inside the unpacked snapshot
/// (as [`place`] stored what lies beneath it), not into the replaying
/// host's own `/opt/rocm` or `/etc`.
fn within_root(at: &str, target: &Path) -> PathBuf {
    let Ok(below) = target.strip_prefix("/") else {
        return target.to_path_buf();
    };
    let depth = at
        .split('/')
        .filter(|p| !p.is_empty())
        .count()
        .saturating_sub(1);
    let mut rel = PathBuf::new();
    for _ in 0..depth {
        rel.push("..");
    }
    rel.push(below);
    if rel.as_os_str().is_empty() {
        rel.push(".");
    }
    rel
}

/// Writes a snapshot of what `facts.sysroot` (a recording sysroot) has
/// accessed, plus the kernel log and the capture record, to `out`.
///
/// `out` is written as the reports are (`rocgate_harness::atomic`): a
/// regular file or a new path is replaced whole by a temporary file renamed
/// into place, so it is either untouched or complete, never half-written; a
/// symlink is followed to its target, never replaced; a FIFO or a character
/// device is written through, opened without blocking (a FIFO nobody reads
/// fails at once with ENXIO); `/dev/stdout` is rocgate's own stdout. `stop`
/// is polled between entries; when it says so the snapshot is abandoned
/// before anything is written.
pub fn write(
    facts: &NodeFacts,
    out: &Path,
    redact: bool,
    stop: &dyn Fn() -> bool,
) -> Result<Summary, String> {
    if std::fs::metadata(out).is_ok_and(|m| m.is_dir()) {
        return Err(format!(
            "failed to write {}: it is a directory; give the archive's file name (`--out {}/node.tar.zst`)",
            out.display(),
            out.display()
        ));
    }
    // A snapshot is a few MiB at most (every file is capped, most are
    // sysfs attributes): it is built in memory, then written in one go.
    let (bytes, summary) = write_to(facts, Vec::new(), out, redact, stop)?;
    if stop() {
        return Err(format!("interrupted: {} not written", out.display()));
    }
    rocgate_harness::atomic::write(out, &bytes)
        .map_err(|e| format!("the snapshot was not written: {e}"))?;
    Ok(summary)
}

/// Writes the archive into `sink` (named `out` in messages) and returns it.
fn write_to<W: Write>(
    facts: &NodeFacts,
    sink: W,
    out: &Path,
    redact: bool,
    stop: &dyn Fn() -> bool,
) -> Result<(W, Summary), String> {
    let root = &facts.sysroot;
    let mut reader = BoundedReader::new(root);
    let mut redactor = Redactor::new(facts, redact, &mut reader);
    let enc = zstd::Encoder::new(sink, 3)
        .map_err(|e| format!("failed to start compressing {}: {e}", out.display()))?;
    let mut tar = tar::Builder::new(enc);
    let mut summary = Summary::default();
    let err = |e: std::io::Error| format!("failed to write {}: {e}", out.display());
    let interrupted = || format!("interrupted: {} not written", out.display());
    let mut accesses: BTreeMap<String, Use> = root.accesses().into_iter().collect();
    for extra in [
        "/etc/os-release",
        "/opt/rocm/.info/version",
        "/proc/sys/kernel/hostname",
        "/var/lib/dpkg/status",
    ] {
        accesses.entry(extra.to_string()).or_insert(Use::Read);
    }
    // A listing replays from the directory's entries, and some readers use
    // only the names (the DKMS versions registered): every entry of a
    // listed directory is stored, as a directory, a link, or an empty file
    // (its content was not read, so only its presence is known).
    let listed: Vec<String> = accesses
        .iter()
        .filter(|(_, how)| **how == Use::Listed)
        .map(|(host, _)| host.trim_end_matches('/').to_string())
        .collect();
    for dir in listed {
        let Some(entries) = root.recorded_list(&dir) else {
            continue;
        };
        for (name, kind) in entries {
            let how = match kind {
                Kind::Link => Use::Linked,
                Kind::Dir => Use::Listed,
                _ => Use::Probed,
            };
            accesses.entry(format!("{dir}/{name}")).or_insert(how);
        }
    }
    // The links the archive stores, by where they are stored.
    let read: Vec<(&str, PathBuf)> = accesses
        .iter()
        .filter(|(_, how)| **how == Use::Linked)
        .filter_map(|(host, _)| {
            let target = root.recorded_link(host)?;
            Some((host.trim_start_matches('/'), target))
        })
        .collect();
    let mut links: BTreeMap<String, PathBuf> = BTreeMap::new();
    // Placing a link can depend on a link placed later (a target that
    // leads beneath another link): a few rounds settle it.
    for _ in 0..8 {
        let next: BTreeMap<String, PathBuf> = read
            .iter()
            .filter_map(|(rel, target)| Some((place(rel, &links)?, target.clone())))
            .collect();
        if next == links {
            break;
        }
        links = next;
    }
    let mut stored = std::collections::BTreeSet::new();
    for (host, how) in &accesses {
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
        let Some(at) = place(rel, &links).filter(|at| stored.insert(at.clone())) else {
            continue;
        };
        match how {
            Use::Linked => {
                if let Some(target) = links.get(&at) {
                    let mut h = header(tar::EntryType::Symlink, 0, 0o777);
                    tar.append_link(&mut h, &at, within_root(&at, target))
                        .map_err(err)?;
                    summary.links += 1;
                }
            }
            Use::Listed => {
                if root
                    .recorded_entry(host, true)
                    .is_some_and(|e| e.kind == Kind::Dir)
                {
                    let mut h = header(tar::EntryType::Directory, 0, 0o755);
                    tar.append_data(&mut h, &at, std::io::empty())
                        .map_err(err)?;
                    summary.dirs += 1;
                }
            }
            Use::Read | Use::Probed => {
                let Some(meta) = root.recorded_entry(host, true) else {
                    continue;
                };
                if meta.kind == Kind::Dir {
                    let mut h = header(tar::EntryType::Directory, 0, 0o755);
                    tar.append_data(&mut h, &at, std::io::empty())
                        .map_err(err)?;
                    summary.dirs += 1;
                    continue;
                }
                // Device nodes and probed files: presence is what matters.
                let mut bytes = Vec::new();
                let hung = if meta.kind == Kind::Fifo {
                    // A capture that simulates a hang (as the fixtures do) keeps it.
                    true
                } else if meta.kind == Kind::Special && !root.is_live() {
                    // A device or socket in a capture did not answer there.
                    true
                } else if *how == Use::Read && meta.kind == Kind::File {
                    match reader.read(host) {
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
                    tar.append_data(&mut h, &at, std::io::empty())
                        .map_err(err)?;
                    summary.hung.push(host.clone());
                    continue;
                }
                if host == "/var/lib/dpkg/status" {
                    bytes = gpu_packages(&String::from_utf8_lossy(&bytes)).into_bytes();
                }
                if redact && host == "/etc/group" {
                    let mut n = 0;
                    bytes = redact_groups(&String::from_utf8_lossy(&bytes), &mut n).into_bytes();
                    redactor.count += n;
                }
                if redact && is_text(&bytes) {
                    bytes = redactor
                        .apply(String::from_utf8_lossy(&bytes).into_owned())
                        .into_bytes();
                }
                let mut h = header(tar::EntryType::Regular, bytes.len() as u64, 0o644);
                tar.append_data(&mut h, &at, bytes.as_slice())
                    .map_err(err)?;
                summary.files += 1;
            }
        }
    }
    if stop() {
        return Err(interrupted());
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
            " (serials, host and user names, addresses and group members redacted)"
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
    let mut sink = enc.finish().map_err(err)?;
    sink.flush().map_err(err)?;
    Ok((sink, summary))
}

/// Whether `path` is a snapshot archive rather than a sysroot directory:
/// any regular file (through links) is taken for one, and must then be a
/// valid archive.
pub fn is_archive(path: &Path) -> bool {
    path.is_file()
}

/// How much an archive may unpack to. A snapshot holds sysfs, /proc and
/// /etc files that the writer caps at [`MAX_FILE`] each, a few thousand of
/// them on the largest nodes; an archive far beyond that is damaged or
/// hostile (a few KB of zstd can hold GiBs of zeros), and is refused
/// before it fills the disk.
#[derive(Clone, Copy, Debug)]
struct Limits {
    /// Bytes in one entry.
    file: u64,
    /// Bytes in all entries together.
    total: u64,
    /// Entries, extension headers included.
    entries: u64,
}

/// The limits `--sysroot` applies.
const LIMITS: Limits = Limits {
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

/// A `--sysroot` argument opened for reading. For an archive it owns the
/// temporary directory the archive was unpacked into, which is removed when
/// this is dropped: the command keeps it until it is done (its worker
/// processes get the directory, never the archive).
#[derive(Debug)]
pub struct Opened {
    sysroot: Sysroot,
    unpacked: Option<Unpacked>,
}

/// Names of the directories archives are unpacked into, in the temporary
/// directory: `rocgate-snapshot-PID-XXXXXX`, PID the process that made it.
const UNPACK_PREFIX: &str = "rocgate-snapshot-";

/// A directory an archive was unpacked into, removed when this is dropped.
/// While it lives the directory is locked (`flock`), and registered for
/// removal should a signal end the process by force; a directory left by a
/// process killed outright (SIGKILL) is unlocked, and the next unpack
/// removes it ([`sweep_stale`]).
#[derive(Debug)]
pub struct Unpacked {
    // Fields drop in order: the directory is removed before its lock is
    // released and its registration dropped.
    dir: tempfile::TempDir,
    _lock: Option<nix::fcntl::Flock<std::fs::File>>,
    _registered: rocgate_harness::signal::Registered,
}

impl Unpacked {
    /// The directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// How old an unlocked unpack directory must be before it is taken for one
/// whose process was killed: its maker locks it right after creating it.
const STALE_AFTER: Duration = Duration::from_secs(1);

/// An unlocked unpack directory whose process is still alive (its number
/// reused) is taken for stale after this.
const STALE_ALIVE_AFTER: Duration = Duration::from_secs(60);

/// Removes unpack directories of this user in `tmp` that no live rocgate
/// holds: left by a process killed with SIGKILL, which removes nothing. A
/// directory is taken for stale when its lock is free and, as its maker
/// takes the lock right after creating it, it is older than a second and
/// its process is gone (or older than a minute, the process number being
/// reused). A lock that cannot be tested counts as held.
fn sweep_stale(tmp: &Path) {
    use nix::fcntl::{Flock, FlockArg};
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    let me = nix::unistd::geteuid().as_raw();
    let now = std::time::SystemTime::now();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(UNPACK_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_dir() || meta.uid() != me {
            continue;
        }
        let changed = std::time::UNIX_EPOCH
            + Duration::from_secs(u64::try_from(meta.ctime()).unwrap_or(u64::MAX / 4));
        let age = now.duration_since(changed).unwrap_or_default();
        let gone = matches!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
            Err(Errno::ESRCH)
        );
        if age < STALE_AFTER || (!gone && age < STALE_ALIVE_AFTER) {
            continue;
        }
        let Ok(dir) = std::fs::File::open(&path) else {
            continue;
        };
        // Held while the lock is: no other sweep removes it meanwhile.
        if let Ok(_lock) = Flock::lock(dir, FlockArg::LockExclusiveNonblock) {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// A fresh, locked and registered directory to unpack into.
fn unpack_dir() -> std::io::Result<Unpacked> {
    use nix::fcntl::{Flock, FlockArg};
    let tmp = std::env::temp_dir();
    sweep_stale(&tmp);
    let dir = tempfile::Builder::new()
        .prefix(&format!("{UNPACK_PREFIX}{}-", std::process::id()))
        .tempdir_in(&tmp)?;
    let registered = rocgate_harness::signal::remove_on_forced_exit(dir.path());
    // A file system without flock: the directory is left to the normal
    // removal, and counts as held for every sweep.
    let lock = std::fs::File::open(dir.path())
        .ok()
        .and_then(|f| Flock::lock(f, FlockArg::LockExclusiveNonblock).ok());
    Ok(Unpacked {
        dir,
        _lock: lock,
        _registered: registered,
    })
}

impl Opened {
    /// A sysroot that needs no unpacking (`/` or a directory).
    pub fn plain(sysroot: Sysroot) -> Opened {
        Opened {
            sysroot,
            unpacked: None,
        }
    }

    /// The sysroot to read the node through.
    pub fn sysroot(&self) -> Sysroot {
        self.sysroot.clone()
    }

    /// The directory an archive was unpacked into, if it was one.
    pub fn unpacked_dir(&self) -> Option<&Path> {
        self.unpacked.as_ref().map(Unpacked::path)
    }
}

/// Opens a `--sysroot` argument: a directory as it is, a snapshot archive
/// unpacked into a temporary directory that lives as long as the returned
/// value. Every command goes through here, so all accept the same archives
/// and refuse the same ones. `stop` is polled while unpacking (a signal).
pub fn open(arg: &Path, stop: &dyn Fn() -> bool) -> Result<Opened, String> {
    if !is_archive(arg) {
        return Ok(Opened::plain(Sysroot::at(arg)));
    }
    let dir = extract(arg, stop)?;
    Ok(Opened {
        sysroot: Sysroot::labelled(dir.path(), arg.display().to_string()),
        unpacked: Some(dir),
    })
}

/// Unpacks a snapshot (`.tar.zst`, or a plain `.tar`) into a temporary
/// directory that lives as long as the returned guard. Errors name the
/// archive and what is wrong with it. The archive is read twice: first its
/// headers alone, so that one beyond the limits (or with an entry refused
/// from its header) is refused before anything is written, then to unpack,
/// with every check made again on what is read.
pub fn extract(path: &Path, stop: &dyn Fn() -> bool) -> Result<Unpacked, String> {
    let shown = path.display();
    let next = "give a directory or an archive written by `rocgate snapshot --out FILE` (take a new one on the node if this one is damaged)";
    let mut f = std::fs::File::open(path).map_err(|e| format!("failed to open {shown}: {e}"))?;
    let len = f
        .metadata()
        .map_err(|e| format!("failed to read {shown}: {e}"))?
        .len();
    if len == 0 {
        return Err(format!(
            "{shown} is empty (0 bytes), not a snapshot archive: {next}"
        ));
    }
    let mut head = [0u8; 4];
    let n = f
        .read(&mut head)
        .map_err(|e| format!("failed to read {shown}: {e}"))?;
    let zstd_magic = n == 4 && head == [0x28, 0xb5, 0x2f, 0xfd];
    let pass = |writer: Option<&Path>| -> Result<u64, Refusal> {
        let f = std::fs::File::open(path).map_err(|e| format!("failed to open {shown}: {e}"))?;
        if zstd_magic {
            let dec = zstd::Decoder::new(f)
                .map_err(|e| format!("failed to start decompressing {shown}: {e}"))?;
            walk(dec, writer, LIMITS, stop)
        } else {
            walk(f, writer, LIMITS, stop)
        }
    };
    let refused = |r: Refusal| match r {
        Refusal::Interrupted => format!("interrupted while unpacking {shown}"),
        Refusal::Invalid(why) => format!(
            "{shown} is not a usable snapshot archive ({}): {why}; {next}",
            if zstd_magic {
                "zstd-compressed tar"
            } else {
                "not zstd-compressed, so read as a plain tar"
            }
        ),
    };
    pass(None).map_err(refused)?;
    let dir =
        unpack_dir().map_err(|e| format!("failed to create a directory to unpack {shown}: {e}"))?;
    pass(Some(dir.path())).map_err(refused)?;
    Ok(dir)
}

/// Why unpacking stopped.
#[derive(Debug)]
enum Refusal {
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

/// Creates entries under one root directory without ever following a
/// symbolic link: every parent is opened component by component with
/// `O_NOFOLLOW` relative to its own parent, and every entry is created
/// relative to its parent's descriptor, so a link the archive created
/// earlier (`up -> ..`, `evil -> /etc`) can be created and later read, but
/// nothing is ever written through it.
struct Writer {
    root: std::os::fd::OwnedFd,
}

/// What sits at a name, not following links.
#[derive(Debug, PartialEq, Eq)]
enum Existing {
    Nothing,
    Dir,
    Other,
}

impl Writer {
    fn new(dir: &Path) -> Result<Writer, String> {
        let root = std::fs::File::open(dir)
            .map_err(|e| format!("failed to open {}: {e}", dir.display()))?;
        Ok(Writer { root: root.into() })
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

    fn dir(&self, parts: &[std::ffi::OsString], shown: &str) -> Result<(), String> {
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

    fn file(&self, parts: &[std::ffi::OsString], shown: &str) -> Result<std::fs::File, String> {
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

    fn symlink(
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

    fn fifo(&self, parts: &[std::ffi::OsString], shown: &str) -> Result<(), String> {
        let (dir, name) = self.parent(parts, shown, true)?;
        Self::clear(&dir, name, shown)?;
        nix::unistd::mkfifoat(&dir, name, nix::sys::stat::Mode::from_bits_truncate(0o644))
            .map_err(|e| format!("failed to unpack `{shown}`: {e}"))
    }

    /// A hard link to an entry already unpacked: its target is looked up
    /// inside the root, not following links, and may not be a directory.
    fn hard_link(
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

/// Reads the tar stream `input`, unpacking it into `dir` when given (else
/// checking its headers only): refuses anything that would land outside
/// `dir` or write through a link, device nodes and other entries a snapshot
/// never holds, and archives beyond `limits` (checked on each header before
/// its data is read, and on the bytes as they stream). FIFOs, which stand
/// for files that did not answer, are recreated as FIFOs. Returns the
/// number of entries (at least one).
fn walk<R: Read>(
    input: R,
    dir: Option<&Path>,
    limits: Limits,
    stop: &dyn Fn() -> bool,
) -> Result<u64, Refusal> {
    use tar::EntryType;
    let writer = dir.map(Writer::new).transpose()?;
    let mut archive = tar::Archive::new(input);
    // Raw: the tar crate would read a GNU long name or pax header of any
    // size into memory; here they are bounded like everything else.
    let entries = archive
        .entries()
        .map_err(|e| format!("failed to read the archive: {e}"))?
        .raw(true);
    let mut long_name: Option<Vec<u8>> = None;
    let mut long_link: Option<Vec<u8>> = None;
    let mut pax: Option<Vec<u8>> = None;
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
        if matches!(
            kind,
            EntryType::GNULongName
                | EntryType::GNULongLink
                | EntryType::XHeader
                | EntryType::XGlobalHeader
        ) {
            if size > MAX_META {
                return Err(format!(
                    "extension header {} holds {}, over the {} limit for names and attributes",
                    seen,
                    human(size),
                    human(MAX_META)
                )
                .into());
            }
            let mut bytes = Vec::new();
            entry
                .read_to_end(&mut bytes)
                .map_err(|e| format!("it is damaged at entry {seen}: {e}"))?;
            total += size;
            match kind {
                EntryType::GNULongName => long_name = Some(trim_nul(bytes)),
                EntryType::GNULongLink => long_link = Some(trim_nul(bytes)),
                EntryType::XHeader => pax = Some(bytes),
                // Global pax attributes describe no entry a snapshot needs.
                _ => {}
            }
            continue;
        }
        let mut name = match long_name.take() {
            Some(n) => n,
            None => entry.path_bytes().into_owned(),
        };
        let mut link = match long_link.take() {
            Some(l) => Some(l),
            None => entry.link_name_bytes().map(std::borrow::Cow::into_owned),
        };
        if let Some(attrs) = pax.take() {
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
                    b"size" if ext.value_bytes() != size.to_string().as_bytes() => {
                        return Err(format!(
                            "the pax attributes of `{}` give it another size than its header",
                            shown_name(&name)
                        )
                        .into());
                    }
                    _ => {}
                }
            }
        }
        let shown = shown_name(&name);
        // Every entry's data counts, read or skipped: a directory header
        // claiming 2 GiB would otherwise be streamed past in full.
        if size > limits.file {
            return Err(format!(
                "entry `{shown}` holds {}, over the {} limit for one file (rocgate snapshot stores none larger)",
                human(size),
                human(limits.file)
            )
            .into());
        }
        if total.saturating_add(size) > limits.total {
            return Err(format!(
                "its entries add up to more than {}, the limit for a whole snapshot (at entry `{shown}`)",
                human(limits.total)
            )
            .into());
        }
        let parts = components(&name)?;
        match kind {
            EntryType::Regular
            | EntryType::Continuous
            | EntryType::Directory
            | EntryType::Symlink
            | EntryType::Link
            | EntryType::Fifo => {}
            EntryType::Char | EntryType::Block => {
                return Err(format!(
                    "entry `{shown}` is a device node; a snapshot stores device files as plain files and never needs one"
                )
                .into());
            }
            other => {
                return Err(format!(
                    "entry `{shown}` is of a kind a snapshot never holds ({other:?})"
                )
                .into());
            }
        }
        let link_parts = if kind == EntryType::Link {
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
        match kind {
            EntryType::Regular | EntryType::Continuous => {
                let mut file = writer.file(&parts, &shown)?;
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
                        break;
                    }
                    copied += n as u64;
                    // The header was checked; the bytes are counted too, so
                    // no reader can be talked past the limits.
                    if copied > limits.file || total + copied > limits.total {
                        return Err(format!(
                            "entry `{shown}` streams more than its header said, past the limits"
                        )
                        .into());
                    }
                    file.write_all(&buf[..n])
                        .map_err(|e| format!("failed to unpack `{shown}`: {e}"))?;
                }
                total += copied;
            }
            EntryType::Directory => {
                writer.dir(&parts, &shown)?;
                total += size;
            }
            EntryType::Symlink => {
                let target = link.unwrap_or_default();
                writer.symlink(&parts, &target, &shown)?;
                total += size;
            }
            EntryType::Link => {
                writer.hard_link(&parts, &link_parts.unwrap_or_default(), &shown)?;
                total += size;
            }
            _ => {
                writer.fifo(&parts, &shown)?;
                total += size;
            }
        }
        made += 1;
    }
    if long_name.is_some() || long_link.is_some() || pax.is_some() {
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

/// A GNU long name or link without its terminating NULs.
fn trim_nul(mut bytes: Vec<u8>) -> Vec<u8> {
    while bytes.last() == Some(&0) {
        bytes.pop();
    }
    bytes
}

/// The current user, for the capture record of a live snapshot.
pub fn current_user(facts: &NodeFacts) -> Option<access::User> {
    facts.user.clone()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rocgate_fixtures::hostile::{put, raw_tar_header};
    use std::os::unix::fs::FileTypeExt;

    #[test]
    fn redaction_replaces_names_as_words_and_addresses_of_both_kinds() {
        let mut n = 0;
        assert_eq!(
            replace_word(
                "Dec 1 gpu-node-07 kernel: pci gpu-node-07x ci",
                "ci",
                "U",
                &mut n
            ),
            "Dec 1 gpu-node-07 kernel: pci gpu-node-07x U"
        );
        assert_eq!(n, 1);
        let text = "ip=10.1.2.3::10.1.2.1:255.255.255.0:h:eth0:none fe80::1c2:3ff:fe4d:5e6f%eth0 [2a02:8071:1::5]:22 127.0.0.1 6.8.0.45x 0000:05:00.0 10:00:00 v6.16.6 1.2.3.\n";
        let mut n = 0;
        let out = redact_addresses(text, &mut n);
        for gone in ["10.1.2.3", "10.1.2.1", "fe80::1c2", "2a02:8071"] {
            assert!(!out.contains(gone), "{gone}: {out}");
        }
        for kept in [
            "255.255.255.0",
            "127.0.0.1",
            "6.8.0.45x",
            "0000:05:00.0",
            "10:00:00",
            "v6.16.6",
            "%eth0",
            " 1.2.3.",
        ] {
            assert!(out.contains(kept), "{kept}: {out}");
        }
        assert_eq!(n, 4, "{out}");
        assert_eq!(
            redact_addresses(text, &mut 0),
            out,
            "the same stand-ins every time"
        );
        let mut n = 0;
        let groups = redact_groups(
            "root:x:0:\nrender:x:110:alice,bob\nvideo:x:44:alice",
            &mut n,
        );
        assert_eq!(
            groups,
            format!(
                "root:x:0:\nrender:x:110:{a},{b}\nvideo:x:44:{a}",
                a = pseudonym("alice"),
                b = pseudonym("bob")
            )
        );
        assert_eq!(n, 3);
    }

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
        let mut reader = BoundedReader::new(&Sysroot::live());
        assert!(matches!(
            reader.read(&live(dev.join("hangs"))),
            Outcome::Hung
        ));
        let start = std::time::Instant::now();
        assert!(matches!(
            reader.read(&live(dev.join("after"))),
            Outcome::Hung
        ));
        assert!(
            start.elapsed() < Duration::from_millis(100),
            "the wedged device is not retried"
        );
        match reader.read(&live(dir.path().join("fine"))) {
            Outcome::Bytes(b) => assert_eq!(b, b"ok\n"),
            _ => panic!("a healthy file after a hang must read"),
        }
        assert!(matches!(
            reader.read(&live(dir.path().join("missing"))),
            Outcome::Failed
        ));
        // In a capture the FIFO is never opened: it is hung at once, and
        // its device's other files still read.
        let mut reader = BoundedReader::new(&Sysroot::at(dir.path()));
        let start = std::time::Instant::now();
        assert!(matches!(reader.read("/0000:46:00.0/hangs"), Outcome::Hung));
        assert!(start.elapsed() < FILE_WAIT);
        assert!(matches!(
            reader.read("/0000:46:00.0/after"),
            Outcome::Bytes(_)
        ));
    }

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

    #[test]
    fn paths_beneath_stored_links_are_placed_at_their_targets() {
        let links: BTreeMap<String, PathBuf> = [
            (
                "sys/class/drm/card0/device",
                "../../../devices/pci0000:00/0000:05:00.0",
            ),
            ("opt/rocm", "/opt/rocm-6.2.0"),
            ("loop/a", "b"),
            ("loop/b", "a"),
            ("deep", "../../../../x"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), PathBuf::from(v)))
        .collect();
        assert_eq!(
            place("sys/class/drm/card0/device/vendor", &links).as_deref(),
            Some("sys/devices/pci0000:00/0000:05:00.0/vendor")
        );
        // The link itself stays where it is.
        assert_eq!(
            place("sys/class/drm/card0/device", &links).as_deref(),
            Some("sys/class/drm/card0/device")
        );
        assert_eq!(
            place("opt/rocm/.info/version", &links).as_deref(),
            Some("opt/rocm-6.2.0/.info/version")
        );
        assert_eq!(place("loop/a/x", &links), None);
        assert_eq!(place("deep/y", &links).as_deref(), Some("x/y"));
        assert_eq!(
            place("proc/modules", &links).as_deref(),
            Some("proc/modules")
        );
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
    fn absolute_link_targets_are_stored_relative_to_the_link() {
        assert_eq!(
            within_root("opt/rocm", Path::new("/opt/rocm-6.2.0")),
            Path::new("../opt/rocm-6.2.0")
        );
        assert_eq!(within_root("a/b/c", Path::new("/x")), Path::new("../../x"));
        assert_eq!(within_root("top", Path::new("/")), Path::new("."));
        assert_eq!(within_root("a/b", Path::new("/")), Path::new(".."));
        assert_eq!(within_root("a/b", Path::new("../c")), Path::new("../c"));
    }

    #[test]
    fn an_interrupted_snapshot_leaves_the_target_untouched() {
        let node = tempfile::tempdir().unwrap();
        let facts = NodeFacts::discover(Sysroot::recording(node.path()));
        let out = node.path().join("snap.tar.zst");
        std::fs::write(&out, "previous").unwrap();
        let e = write(&facts, &out, false, &|| true).unwrap_err();
        assert!(e.contains("interrupted"), "{e}");
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "previous");
        assert_eq!(std::fs::read_dir(node.path()).unwrap().count(), 1);
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
