//! The kernel log, and the firmware and GPU-init errors in it.

use crate::Sysroot;
use regex::Regex;
use std::io::Read;
use std::sync::LazyLock;
use std::time::Duration;

/// How much of a log file's end is read.
const LOG_TAIL_BYTES: u64 = 16 << 20;

/// Kernel log lines of the current boot, and where they came from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelLog {
    /// `/dev/kmsg`, `journalctl -k -b` or a file's path.
    pub source: String,
    /// Lines, oldest first.
    pub lines: Vec<String>,
}

/// Reads a live host's kernel log, or says why it could not.
type LiveReader = fn() -> Result<Vec<String>, String>;

/// Reads the kernel log: on a live host from /dev/kmsg, else `journalctl -k
/// -b`, else /var/log/kern.log; in a sysroot from its var/log/kern.log.
/// `Err` says why none was readable (a limitation, not a node fault).
pub fn read(root: &Sysroot) -> Result<KernelLog, String> {
    let mut tried = Vec::new();
    if root.is_live() {
        let live: [(&str, LiveReader); 2] =
            [("/dev/kmsg", read_kmsg), ("journalctl -k -b", read_journal)];
        for (source, read) in live {
            match read() {
                Ok(lines) => {
                    let source = source.to_string();
                    return Ok(KernelLog { source, lines });
                }
                Err(e) => tried.push(format!("{source}: {e}")),
            }
        }
    }
    let host = "/var/log/kern.log";
    match root.read_tail(host, LOG_TAIL_BYTES) {
        Ok(bytes) => Ok(KernelLog {
            source: host.to_string(),
            lines: current_boot(&String::from_utf8_lossy(&bytes)),
        }),
        Err(e) => {
            tried.push(e.to_string());
            let next = if root.is_live() {
                "run as root or add the user to the adm or systemd-journal group"
            } else {
                "capture the node with `rocgate snapshot` as root, which records its kernel log"
            };
            Err(format!(
                "kernel log not readable ({}); {next}",
                tried.join("; ")
            ))
        }
    }
}

/// The lines after the last boot banner (`Linux version ...`), or all lines.
pub fn current_boot(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .rposition(|l| l.contains("] Linux version ") || l.contains("kernel: Linux version "))
        .unwrap_or(0);
    lines[start..].iter().map(|l| (*l).to_string()).collect()
}

fn read_kmsg() -> Result<Vec<String>, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open("/dev/kmsg")
        .map_err(|e| e.to_string())?;
    let mut lines = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    let mut total = 0u64;
    loop {
        match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                total += n as u64;
                if let Some(line) = parse_kmsg_record(&String::from_utf8_lossy(&buf[..n])) {
                    lines.push(line);
                }
                if total > LOG_TAIL_BYTES {
                    break;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
            // EPIPE: records were overwritten while reading; carry on.
            Err(e) if e.raw_os_error() == Some(32) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(lines)
}

/// Turns a /dev/kmsg record (`6,339,5140900,-;message\n KEY=v`) into a
/// dmesg-style line (`[    5.140900] message`).
pub fn parse_kmsg_record(record: &str) -> Option<String> {
    let (header, rest) = record.split_once(';')?;
    let message = rest.lines().next().unwrap_or("");
    let usec: u64 = header.split(',').nth(2)?.parse().ok()?;
    Some(format!(
        "[{:>5}.{:06}] {message}",
        usec / 1_000_000,
        usec % 1_000_000
    ))
}

/// How long `journalctl -k -b` may take.
const JOURNAL_DEADLINE: Duration = Duration::from_secs(10);

fn read_journal() -> Result<Vec<String>, String> {
    let mut journalctl = std::process::Command::new("journalctl");
    journalctl.args(["-k", "-b", "--no-pager", "-q", "-o", "short-monotonic"]);
    let limit = usize::try_from(LOG_TAIL_BYTES * 4).unwrap_or(usize::MAX);
    let done = crate::subprocess::run(&mut journalctl, JOURNAL_DEADLINE, limit)
        .map_err(|e| e.to_string())?;
    let text = done.stdout_text();
    if !done.status.success() || text.trim().is_empty() {
        return Err(format!(
            "exited with {} and no kernel lines (no permission?)",
            done.status
        ));
    }
    Ok(text.lines().map(str::to_string).collect())
}

/// How long the node has been up, in seconds (`/proc/uptime`'s first
/// field): where "now" is among the log's `[seconds]` stamps.
pub fn uptime(root: &Sysroot) -> Result<f64, String> {
    let text = root.read_text("/proc/uptime").map_err(|e| e.to_string())?;
    text.split_whitespace()
        .next()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s >= 0.0)
        .ok_or_else(|| format!("/proc/uptime reads {text:?}, not seconds"))
}

/// What kind of firmware or init error a line reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FirmwareErrorKind {
    /// A firmware file could not be loaded (`Direct firmware load ... failed`).
    Load,
    /// The PSP (security processor, which loads most firmware) failed.
    Psp,
    /// GPU initialisation was abandoned.
    FatalInit,
}

/// One firmware or init error from the kernel log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FirmwareEvent {
    /// The log line.
    pub line: String,
    /// The PCI address it concerns: named on the line, or (when
    /// `by_context`) the address of the latest amdgpu line before it.
    pub address: Option<String>,
    /// Whether the address came from a preceding line.
    pub by_context: bool,
    /// The firmware file named, if any (`amdgpu/psp_13_0_8_toc.bin`).
    pub file: Option<String>,
    /// What failed.
    pub kind: FirmwareErrorKind,
}

static ADDRESS: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"\b([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\b").ok()
});
static FIRMWARE_FILE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r#"(?:Direct firmware load for |Failed to load firmware "?)(amdgpu/[^\s"]+)"#).ok()
});

/// Classifies a line as a firmware or init error.
fn classify(line: &str) -> Option<FirmwareErrorKind> {
    let l = line.to_ascii_lowercase();
    if l.contains("fatal error during gpu init")
        || l.contains("amdgpu_device_ip_init failed")
        || (l.contains("of ip block <") && l.contains("failed"))
    {
        Some(FirmwareErrorKind::FatalInit)
    } else if (l.contains("direct firmware load for amdgpu/") && l.contains("failed"))
        || l.contains("failed to load firmware")
        || (l.contains("fail to request/validate") && l.contains("microcode"))
        || l.contains("failed to load gpu_info firmware")
    {
        Some(FirmwareErrorKind::Load)
    } else if l.contains("psp") && (l.contains("failed") || l.contains("fail to")) {
        Some(FirmwareErrorKind::Psp)
    } else {
        None
    }
}

/// The PCI address a log line names (`amdgpu 0000:c1:00.0: ...`, as
/// `dev_info` and friends prefix the device), lower case; `None` when it
/// names none.
pub fn line_address(line: &str) -> Option<String> {
    ADDRESS
        .as_ref()
        .and_then(|re| re.captures(line))
        .and_then(|c| c.get(1))
        .map(|m| m.as_str().to_ascii_lowercase())
}

/// Whether amdgpu or KFD printed `line`.
pub(crate) fn is_amdgpu_line(line: &str) -> bool {
    line.contains("amdgpu") || line.contains("[drm") || line.contains("kfd")
}

/// Every firmware or init error in `lines`, attributed to a PCI address.
pub fn firmware_events(lines: &[String]) -> Vec<FirmwareEvent> {
    let mut last_address: Option<String> = None;
    let mut events = Vec::new();
    for line in lines {
        let named = line_address(line);
        if named.is_some() && is_amdgpu_line(line) {
            last_address.clone_from(&named);
        }
        if line.contains("Linux version ") {
            last_address = None;
        }
        let Some(kind) = classify(line) else { continue };
        let by_context = named.is_none() && last_address.is_some();
        events.push(FirmwareEvent {
            address: named.or_else(|| last_address.clone()),
            by_context,
            file: FIRMWARE_FILE
                .as_ref()
                .and_then(|re| re.captures(line))
                .and_then(|c| c.get(1))
                .map(|m| m.as_str().to_string()),
            kind,
            line: line.trim().to_string(),
        });
    }
    events
}

/// An uncorrectable UMC (VRAM) error that reached amdgpu through the CPU's
/// machine-check path rather than a RAS counter: on GPUs attached to the
/// CPU over XGMI (MI250X in CPU-attached systems) the error is an x86 MCE,
/// which amdgpu's MCE notifier prints as "Uncorrectable error detected in
/// UMC inst: %d, chan_idx: %d" with `dev_info` (amdgpu_ras.c,
/// `amdgpu_bad_page_notifier`; registered for Aldebaran connected to the
/// CPU in `amdgpu_ras_recovery_init`). No `umc_err_count` counts it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UmcMceError {
    /// The log line.
    pub line: String,
    /// The GPU the line names (`dev_info` prefixes the device, `amdgpu
    /// 0000:c1:00.0: `); `None` when the line names none, so it concerns
    /// the node, not one GPU.
    pub address: Option<String>,
}

/// Every uncorrectable UMC error the MCE path printed in `lines`.
pub fn umc_mce_errors(lines: &[String]) -> Vec<UmcMceError> {
    lines
        .iter()
        .filter(|l| {
            l.to_ascii_lowercase()
                .contains("uncorrectable error detected in umc inst")
        })
        .map(|l| UmcMceError {
            line: l.trim().to_string(),
            address: line_address(l),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn lines(s: &str) -> Vec<String> {
        s.lines().map(str::to_string).collect()
    }

    #[test]
    fn attributes_psp_toc_failure_to_its_gpu() {
        let log = lines(
            "[    3.576634] amdgpu 0000:04:00.0: Direct firmware load for amdgpu/psp_13_0_8_toc.bin failed with error -2\n\
             [    3.586367] amdgpu 0000:04:00.0: amdgpu: fail to request/validate toc microcode\n\
             [    3.593924] [drm:psp_sw_init] *ERROR* Failed to load psp firmware!\n\
             [    3.600359] [drm:amdgpu_device_ip_init] *ERROR* sw_init of IP block <psp> failed -2\n\
             [    3.614955] amdgpu 0000:04:00.0: amdgpu: Fatal error during GPU init\n\
             [    4.000000] usb 1-1: new high-speed USB device\n",
        );
        let ev = firmware_events(&log);
        assert_eq!(ev.len(), 5);
        assert!(
            ev.iter()
                .all(|e| e.address.as_deref() == Some("0000:04:00.0"))
        );
        assert_eq!(ev[0].file.as_deref(), Some("amdgpu/psp_13_0_8_toc.bin"));
        assert_eq!(ev[0].kind, FirmwareErrorKind::Load);
        assert_eq!(ev[1].kind, FirmwareErrorKind::Load);
        assert_eq!(ev[2].kind, FirmwareErrorKind::Psp);
        assert!(ev[2].by_context);
        assert_eq!(ev[3].kind, FirmwareErrorKind::FatalInit);
        assert_eq!(ev[4].kind, FirmwareErrorKind::FatalInit);
    }

    #[test]
    fn unattributed_lines_have_no_address_and_boot_resets_context() {
        let log = lines("[drm:psp_hw_start [amdgpu]] *ERROR* PSP create ring failed!\n");
        let ev = firmware_events(&log);
        assert_eq!(ev[0].address, None);
        assert_eq!(ev[0].kind, FirmwareErrorKind::Psp);
        let text = "[1.0] Linux version 6.1\nold boot amdgpu 0000:01:00.0: Fatal error during GPU init\n[0.0] Linux version 6.8\n[1.0] fine\n";
        assert_eq!(
            current_boot(text),
            ["[0.0] Linux version 6.8", "[1.0] fine"]
        );
    }

    #[test]
    fn kmsg_records_become_dmesg_lines() {
        assert_eq!(
            parse_kmsg_record("6,339,5140900,-;amdgpu: Topology: Add CPU node\n SUBSYSTEM=pci\n")
                .as_deref(),
            Some("[    5.140900] amdgpu: Topology: Add CPU node")
        );
        assert_eq!(parse_kmsg_record("garbage"), None);
    }

    #[test]
    fn mce_umc_errors_are_attributed_to_the_gpu_the_line_names() {
        let log = lines(
            "[ 9120.000001] mce: [Hardware Error]: Machine check events logged\n\
             [ 9120.000210] amdgpu 0000:C1:00.0: amdgpu: Uncorrectable error detected in UMC inst: 2, chan_idx: 5\n\
             [ 9121.000000] Uncorrectable error detected in UMC inst: 0, chan_idx: 1\n\
             [ 9122.000000] amdgpu 0000:c1:00.0: amdgpu: 3 correctable hardware errors detected in umc block\n",
        );
        let got = umc_mce_errors(&log);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].address.as_deref(), Some("0000:c1:00.0"));
        assert_eq!(got[1].address, None);
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,400}") {
            let l = lines(&s);
            let _ = firmware_events(&l);
            let _ = umc_mce_errors(&l);
            let _ = current_boot(&s);
            let _ = parse_kmsg_record(&s);
        }
    }
}
