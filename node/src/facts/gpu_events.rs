//! What happened to the GPUs since boot, as the kernel log tells it: resets,
//! job timeouts, page faults, RAS and thermal events from amdgpu, PCIe
//! errors and link downs from the PCI core, IO page faults from the IOMMU,
//! each with the PCI address it concerns and its time since boot.
//!
//! Each class matches the format string the kernel prints it with; the
//! function is named beside its pattern (amdgpu as in ROCm/amdgpu DKMS
//! 6.x and mainline 6.8; the PCI core and IOMMU drivers as in mainline
//! 6.8). Lines print with `dev_*` carry the device (`amdgpu 0000:05:00.0:
//! `, `pcieport 0000:00:01.1: `); `DRM_ERROR` lines carry none and are
//! attributed by the lines around them.

use super::kernel_log::{is_amdgpu_line, line_address};
use regex::Regex;
use std::sync::LazyLock;

/// What a line reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventClass {
    /// A recovery began (`GPU %s begin!` with `reset` or `jobs stop`,
    /// ROCm's DKMS adding `. Source:  %d`; amdgpu_device_gpu_recover).
    ResetBegin,
    /// A device of a recovery came back (`GPU reset(%d) succeeded!`,
    /// amdgpu_device_sched_resume).
    ResetSucceeded,
    /// A device did not come back (`GPU reset(%d) failed` in 6.8, `GPU
    /// reset(%d) failed with error %d` in ROCm's DKMS, `GPU reset end with
    /// ret = %d` printed only for an error, amdgpu_device_gpu_recover and
    /// amdgpu_device_sched_resume; `GPU Recovery Failed: %d`, ROCm's
    /// amdgpu_job_timedout; `GPU mode1 reset failed`,
    /// amdgpu_device_mode1_reset; `GPU mode2 reset failed`, nv.c).
    ResetFailed,
    /// The kind of reset the recovery used (`GPU mode1 reset`, then `GPU
    /// smu mode1 reset` or `GPU psp mode1 reset`: amdgpu_device_mode1_reset;
    /// `BACO reset`, `MODE2 reset`, `MODE1 reset`, `PCI reset`:
    /// soc15_asic_reset, nv.c, soc21.c; `GPU link reset`, ROCm's DKMS).
    ResetMethod,
    /// A job ran past its timeout (`ring %s timeout, signaled seq=%u,
    /// emitted seq=%u`, amdgpu_job_timedout: `DRM_ERROR` in 6.8, so no
    /// device on the line, `dev_err` in ROCm's DKMS and later kernels).
    JobTimeout,
    /// A GPU page fault (gmc_v9_0_process_interrupt: `[%s] %s page fault
    /// (src_id:%u ring:%u vmid:%u pasid:%u, for process %s pid %d thread
    /// %s pid %d)` in 6.8; ROCm's DKMS ends the line at `pasid:%u)` and
    /// names the process on the next, ` Process %s pid %d thread %s pid
    /// %d` (amdgpu_vm_print_task_info); gmc_v10_0/v11_0 print no
    /// retry word).
    PageFault,
    /// A shader (SQ) error interrupt (`sq_intr: error, se %d, data 0x%x,
    /// ...`, kfd_int_process_v9.c `event_interrupt_wq_v9`: `pr_warn` in 6.8,
    /// without the device, `dev_warn` later).
    ShaderError,
    /// Correctable or deferred RAS errors counted in a block (`%ld
    /// correctable hardware errors detected in %s block`, `... deferred
    /// ...`, amdgpu_ras.c `amdgpu_ras_error_print_error_data`; the
    /// uncorrectable form is the RAS check's), or an ACA bank logged
    /// (`Accelerator Check Architecture events logged`, amdgpu_aca.c).
    RasEvent,
    /// The GPU throttled (`WARN: GPU is throttled, expect performance
    /// decrease. %s.`, smu_v13_0_6_ppt.c `smu_v13_0_6_log_thermal_throttling_event`;
    /// `WARN: GPU thermal throttling temperature reached, expect
    /// performance decrease. %s.`, aldebaran_ppt.c, arcturus_ppt.c).
    Throttle,
    /// The GPU passed its critical temperature (`ERROR: GPU over
    /// temperature range(SW CTF) detected!`, amdgpu_smu.c; `ERROR: GPU HW
    /// Critical Temperature Fault(aka CTF) detected!` and `... shutdown due
    /// to GPU HW CTF!`, smu_v11_0.c and smu_v13_0.c, all `dev_emerg`).
    ThermalShutdown,
    /// A PCIe error the link corrected (`AER: PCIe Bus Error:
    /// severity=Correctable, type=%s, (%s)` on the device the error came
    /// from, drivers/pci/pcie/aer.c `aer_print_error`; `AER: %s%s error
    /// message received from %04x:%02x:%02x.%d` on the root port,
    /// `aer_print_port_info`, with `Multiple ` and the severity string).
    AerCorrected,
    /// An uncorrectable, non-fatal PCIe error (`Uncorrectable (Non-Fatal)`;
    /// `Uncorrected (Non-Fatal)` in older kernels).
    AerNonFatal,
    /// An uncorrectable, fatal PCIe error: the link is reset to recover
    /// (`Uncorrectable (Fatal)`).
    AerFatal,
    /// The slot's link went down or the card is gone (`Slot(%s): Link
    /// Down`, `Slot(%s): Card not present`, pciehp_ctrl.c
    /// `pciehp_handle_presence_or_link_change`), or DPC contained the port
    /// (`DPC: containment event, status:%#06x source:%#06x`, dpc.c
    /// `dpc_process_error`).
    LinkDown,
    /// The IOMMU refused a DMA of the device (`Event logged [IO_PAGE_FAULT
    /// domain=... address=... flags=...]`, drivers/iommu/amd/iommu.c
    /// `amd_iommu_report_page_fault`, with the device's prefix or
    /// `device=%04x:%02x:%02x.%x`; Intel: `DMAR: [DMA Read NO_PASID] Request
    /// device [%02x:%02x.%d] ...`, dmar.c `dmar_fault_do_one`; kernels
    /// before 5.x printed AMD's `device=%02x:%02x.%x` without the domain).
    IommuFault,
    /// Any other error amdgpu or KFD printed (`*ERROR*`, `failed`), kept so
    /// that nothing is dropped.
    OtherError,
}

impl EventClass {
    /// How reports name it.
    pub fn name(self) -> &'static str {
        match self {
            EventClass::ResetBegin => "reset begun",
            EventClass::ResetSucceeded => "reset succeeded",
            EventClass::ResetFailed => "reset failed",
            EventClass::ResetMethod => "reset method",
            EventClass::JobTimeout => "job timeout",
            EventClass::PageFault => "page fault",
            EventClass::ShaderError => "shader error",
            EventClass::RasEvent => "RAS event",
            EventClass::Throttle => "throttling",
            EventClass::ThermalShutdown => "thermal shutdown",
            EventClass::AerCorrected => "PCIe corrected error",
            EventClass::AerNonFatal => "PCIe non-fatal error",
            EventClass::AerFatal => "PCIe fatal error",
            EventClass::LinkDown => "PCIe link down",
            EventClass::IommuFault => "IOMMU page fault",
            EventClass::OtherError => "other amdgpu error",
        }
    }

    /// Whether the PCI core or the IOMMU reports it (about the link and the
    /// bus), rather than amdgpu (about the GPU).
    pub fn is_bus_event(self) -> bool {
        matches!(
            self,
            EventClass::AerCorrected
                | EventClass::AerNonFatal
                | EventClass::AerFatal
                | EventClass::LinkDown
                | EventClass::IommuFault
        )
    }
}

/// One event of the kernel log.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuEvent {
    /// What it reports.
    pub class: EventClass,
    /// The line, trimmed.
    pub line: String,
    /// The PCI address it concerns: the one the line names (for AER, the
    /// device the error came from), else, when `by_context`, the one the
    /// lines around it name.
    pub address: Option<String>,
    /// Whether the address came from the lines around it.
    pub by_context: bool,
    /// Seconds since boot, from the line's `[ 8812.104211]` stamp, else
    /// from its wall-clock prefix against the boot banner's.
    pub uptime_s: Option<f64>,
    /// The faulting process, when the line or the one after it names it
    /// (`process python3 pid 4242`, page faults and job timeouts).
    pub process: Option<String>,
}

static STAMP: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"\[\s*(\d{1,10}\.\d{1,9})\]").ok());
static RESET_FAILED: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"GPU reset\(\d+\) failed|GPU reset end with ret = -\d+|GPU Recovery Failed|(?i:mode[12] reset failed)").ok()
});
static RESET_METHOD: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?i:\bmode[12] reset)|BACO reset|GPU link reset|: PCI reset$").ok()
});
static PAGE_FAULT: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"\] (?:(?:retry|no-retry) )?page fault \(src_id:").ok());
static RAS_EVENT: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"\d+ (?:correctable|deferred) hardware errors? detected in \S+ block|Accelerator Check Architecture events logged").ok()
});
static PROCESS: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"(?i)process (\S*) pid (\d+)").ok());
static AER_SOURCE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r"error (?:message )?received from ([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])",
    )
    .ok()
});
static IOMMU_DEVICE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"IO_PAGE_FAULT device=((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])|Request device \[([0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\]").ok()
});

fn matches(re: &LazyLock<Option<Regex>>, line: &str) -> bool {
    re.as_ref().is_some_and(|r| r.is_match(line))
}

/// The first group `re` captured in `line`, lower case.
fn capture(re: &LazyLock<Option<Regex>>, line: &str) -> Option<String> {
    let c = re.as_ref()?.captures(line)?;
    c.iter()
        .skip(1)
        .flatten()
        .next()
        .map(|m| m.as_str().to_ascii_lowercase())
}

/// The class of `line`, if it reports a GPU or bus event.
pub fn classify(line: &str) -> Option<EventClass> {
    let lower = line.to_ascii_lowercase();
    Some(
        if line.contains("GPU reset begin!") || line.contains("GPU jobs stop begin!") {
            EventClass::ResetBegin
        } else if line.contains("GPU reset(") && line.contains(") succeeded!") {
            EventClass::ResetSucceeded
        } else if matches(&RESET_FAILED, line) {
            EventClass::ResetFailed
        } else if matches(&RESET_METHOD, line) {
            EventClass::ResetMethod
        } else if line.contains("ring ") && line.contains(" timeout, signaled seq=") {
            EventClass::JobTimeout
        } else if matches(&PAGE_FAULT, line) {
            EventClass::PageFault
        } else if line.contains("sq_intr: error") {
            EventClass::ShaderError
        } else if matches(&RAS_EVENT, line) {
            EventClass::RasEvent
        } else if lower.contains("sw ctf")
            || lower.contains("hw ctf")
            || lower.contains("critical temperature fault")
        {
            EventClass::ThermalShutdown
        } else if line.contains("GPU is throttled")
            || line.contains("thermal throttling temperature reached")
        {
            EventClass::Throttle
        } else if line.contains("PCIe Bus Error: severity=") {
            if line.contains("severity=Correct") {
                EventClass::AerCorrected
            } else if line.contains("(Fatal)") {
                EventClass::AerFatal
            } else {
                EventClass::AerNonFatal
            }
        } else if line.contains("error message received from")
            || line.contains("error received from")
        {
            // `Correctable` in the severity strings since 4.x, `Corrected`
            // before.
            if line.contains("Correct") {
                EventClass::AerCorrected
            } else if line.contains("(Fatal)") {
                EventClass::AerFatal
            } else {
                EventClass::AerNonFatal
            }
        } else if (line.contains("Slot(")
            && (line.contains("): Link Down") || line.contains("): Card not present")))
            || line.contains("DPC: containment event")
        {
            EventClass::LinkDown
        } else if line.contains("IO_PAGE_FAULT")
            || (line.contains("DMAR: [DMA ") && line.contains("Request device ["))
        {
            EventClass::IommuFault
        } else if is_amdgpu_line(line) && (line.contains("*ERROR*") || lower.contains(" failed")) {
            EventClass::OtherError
        } else {
            return None;
        },
    )
}

/// The seconds since boot a line's stamp says.
pub fn uptime_of(line: &str) -> Option<f64> {
    let c = STAMP.as_ref()?.captures(line)?;
    c.get(1)?.as_str().parse().ok()
}

static ISO_STAMP: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"^\s*(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?(?:Z|[+-]\d{2}:?\d{2}))")
        .ok()
});
static CTIME_STAMP: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"^\s*\[(\w{3} \w{3} [ \d]\d \d{2}:\d{2}:\d{2} \d{4})\]").ok());

/// The wall-clock time a line's prefix says, as UTC where the prefix
/// gives its offset (rsyslog's RFC 3339 `2026-12-03T10:00:00.123456+00:00
/// host kernel: ...`, as Ubuntu 24.04's kern.log has it, and `dmesg
/// --time-format iso`'s `2026-12-03T10:00:00,123456+00:00`) and as local
/// time where it does not (`dmesg -T`'s `[Mon Dec 18 08:34:36 2023]`):
/// only differences between lines of one log are taken from it.
pub fn wall_of(line: &str) -> Option<chrono::NaiveDateTime> {
    if let Some(c) = ISO_STAMP.as_ref().and_then(|re| re.captures(line)) {
        let text = c.get(1)?.as_str().replace(',', ".");
        return chrono::DateTime::parse_from_rfc3339(&text)
            .or_else(|_| chrono::DateTime::parse_from_str(&text, "%Y-%m-%dT%H:%M:%S%.f%z"))
            .ok()
            .map(|t| t.naive_utc());
    }
    let c = CTIME_STAMP.as_ref()?.captures(line)?;
    let text = c
        .get(1)?
        .as_str()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    chrono::NaiveDateTime::parse_from_str(&text, "%a %b %d %H:%M:%S %Y").ok()
}

/// Seconds since boot of a line whose only stamp is wall-clock: its time
/// less the boot banner's (the first line of the boot, printed at 0 s).
fn uptime_by_wall(line: &str, boot: Option<chrono::NaiveDateTime>) -> Option<f64> {
    let at = wall_of(line)?;
    let since = at.signed_duration_since(boot?);
    let s = since.num_milliseconds() as f64 / 1000.0;
    (s >= 0.0).then_some(s)
}

/// The device a line concerns, when it names one.
fn address_of(class: EventClass, line: &str) -> Option<String> {
    match class {
        EventClass::AerCorrected | EventClass::AerNonFatal | EventClass::AerFatal => {
            capture(&AER_SOURCE, line).or_else(|| line_address(line))
        }
        EventClass::IommuFault => capture(&IOMMU_DEVICE, line)
            .map(|a| if a.len() == 7 { format!("0000:{a}") } else { a })
            .or_else(|| line_address(line)),
        _ => line_address(line),
    }
}

/// Every GPU or bus event in `lines` (one boot, oldest first). A line that
/// names no device is given the device of the amdgpu line nearest it: the
/// reset a job timeout starts (the next lines), else the last one before.
pub fn events(lines: &[String]) -> Vec<GpuEvent> {
    let mut found = Vec::new();
    let boot = lines
        .iter()
        .find(|l| l.contains("Linux version "))
        .and_then(|l| wall_of(l));
    let mut last: Option<String> = None;
    for (i, line) in lines.iter().enumerate() {
        let named = line_address(line);
        if named.is_some() && is_amdgpu_line(line) {
            last.clone_from(&named);
        }
        let Some(class) = classify(line) else {
            continue;
        };
        let mut address = address_of(class, line);
        let mut by_context = false;
        if address.is_none() && !class.is_bus_event() {
            // A timeout's reset follows within a few lines and names the
            // GPU; otherwise the last amdgpu line before names it.
            let next = lines
                .iter()
                .skip(i + 1)
                .take(4)
                .find(|l| l.contains("GPU reset begin!"))
                .and_then(|l| line_address(l));
            address = next.or_else(|| last.clone());
            by_context = address.is_some();
        }
        let process = process_of(line).or_else(|| {
            matches!(class, EventClass::PageFault | EventClass::JobTimeout)
                .then(|| lines.get(i + 1).and_then(|l| process_of(l)))
                .flatten()
        });
        found.push(GpuEvent {
            class,
            line: line.trim().to_string(),
            address,
            by_context,
            uptime_s: uptime_of(line).or_else(|| uptime_by_wall(line, boot)),
            process,
        });
    }
    found
}

/// `python3 (pid 4242)` from `process python3 pid 4242 thread ...`; an
/// empty name (a kernel job: `process  pid 0`) is none.
fn process_of(line: &str) -> Option<String> {
    let c = PROCESS.as_ref()?.captures(line)?;
    let name = c.get(1)?.as_str();
    let pid = c.get(2)?.as_str();
    (pid != "0" && !name.is_empty()).then(|| format!("{name} (pid {pid})"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn lines(s: &str) -> Vec<String> {
        s.lines().map(str::to_string).collect()
    }

    #[test]
    fn a_timeout_takes_the_gpu_its_reset_names() {
        // ROCm/ROCm#2533, an RX 7900 XT (kern.log as rsyslog writes it).
        let log = lines(
            "Oct  7 12:58:23 host kernel: [ 2237.944235] [drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring sdma0 timeout, signaled seq=16060, emitted seq=16062\n\
             Oct  7 12:58:23 host kernel: [ 2237.944505] [drm:amdgpu_job_timedout [amdgpu]] *ERROR* Process information: process  pid 0 thread  pid 0\n\
             Oct  7 12:58:23 host kernel: [ 2237.944732] amdgpu 0000:0a:00.0: amdgpu: GPU reset begin!\n\
             Oct  7 12:58:23 host kernel: [ 2238.057431] [drm:mes_v11_0_submit_pkt_and_poll_completion.constprop.0 [amdgpu]] *ERROR* MES failed to response msg=3\n\
             Oct  7 12:58:24 host kernel: [ 2239.100000] amdgpu 0000:0a:00.0: amdgpu: GPU reset(2) succeeded!\n",
        );
        let ev = events(&log);
        let classes: Vec<EventClass> = ev.iter().map(|e| e.class).collect();
        assert_eq!(
            classes,
            [
                EventClass::JobTimeout,
                EventClass::OtherError,
                EventClass::ResetBegin,
                EventClass::OtherError,
                EventClass::ResetSucceeded
            ]
        );
        assert!(
            ev.iter()
                .all(|e| e.address.as_deref() == Some("0000:0a:00.0"))
        );
        assert!(ev[0].by_context && !ev[2].by_context);
        assert_eq!(ev[0].uptime_s, Some(2237.944235));
        assert_eq!(ev[0].process, None, "a kernel job names no process");
    }

    #[test]
    fn page_faults_name_their_process_and_bus_events_their_source() {
        let log = lines(
            "[ 100.5] amdgpu 0000:46:00.0: amdgpu: [gfxhub] no-retry page fault (src_id:0 ring:24 vmid:3 pasid:32770)\n\
             [ 100.5] amdgpu 0000:46:00.0: amdgpu:  Process python3 pid 4242 thread python3 pid 4250\n\
             [ 200.0] pcieport 0000:40:01.1: AER: Uncorrectable (Non-Fatal) error message received from 0000:46:00.0\n\
             [ 200.0] amdgpu 0000:46:00.0: AER: PCIe Bus Error: severity=Uncorrectable (Fatal), type=Transaction Layer, (Requester ID)\n\
             [ 201.0] pcieport 0000:40:01.1: pciehp: Slot(3): Link Down\n\
             [ 202.0] AMD-Vi: Event logged [IO_PAGE_FAULT device=0000:46:00.0 domain=0x0000 address=0xfffd0000 flags=0x0020]\n\
             [ 203.0] DMAR: [DMA Read NO_PASID] Request device [65:00.0] fault addr 0x1000 [fault reason 0x06] PTE Read access is not set\n\
             [ 204.0] amdgpu 0000:46:00.0: amdgpu: WARN: GPU is throttled, expect performance decrease. PPT.\n\
             [ 205.0] amdgpu 0000:46:00.0: amdgpu: socket: 0, die: 0 3 correctable hardware errors detected in umc block\n\
             [ 206.0] pcieport 0000:40:01.1: AER: Correctable error message received from 0000:40:01.1\n",
        );
        let ev = events(&log);
        let got: Vec<(EventClass, Option<&str>)> =
            ev.iter().map(|e| (e.class, e.address.as_deref())).collect();
        let g = Some("0000:46:00.0");
        assert_eq!(
            got,
            [
                (EventClass::PageFault, g),
                (EventClass::AerNonFatal, g),
                (EventClass::AerFatal, g),
                (EventClass::LinkDown, Some("0000:40:01.1")),
                (EventClass::IommuFault, g),
                (EventClass::IommuFault, Some("0000:65:00.0")),
                (EventClass::Throttle, g),
                (EventClass::RasEvent, g),
                (EventClass::AerCorrected, Some("0000:40:01.1")),
            ],
            "{ev:#?}"
        );
        assert_eq!(ev[0].process.as_deref(), Some("python3 (pid 4242)"));
    }

    #[test]
    fn reset_outcomes_and_methods_are_told_apart() {
        for (line, class) in [
            (
                "amdgpu 0000:05:00.0: amdgpu: GPU reset(3) failed with error -110",
                Some(EventClass::ResetFailed),
            ),
            (
                "amdgpu 0000:05:00.0: amdgpu: GPU reset end with ret = -110",
                Some(EventClass::ResetFailed),
            ),
            // A recovery that ended well is no failure.
            (
                "amdgpu 0000:05:00.0: amdgpu: GPU reset end with ret = 0",
                None,
            ),
            (
                "amdgpu 0000:05:00.0: amdgpu: GPU psp mode1 reset",
                Some(EventClass::ResetMethod),
            ),
            (
                "amdgpu 0000:05:00.0: amdgpu: MODE2 reset",
                Some(EventClass::ResetMethod),
            ),
            (
                "amdgpu 0000:05:00.0: amdgpu: GPU mode1 reset failed",
                Some(EventClass::ResetFailed),
            ),
            (
                "amdgpu 0000:05:00.0: amdgpu: GPU reset(2) failed",
                Some(EventClass::ResetFailed),
            ),
            (
                "amdgpu 0000:05:00.0: amdgpu: ERROR: GPU HW Critical Temperature Fault(aka CTF) detected!",
                Some(EventClass::ThermalShutdown),
            ),
            (
                "amdgpu 0000:05:00.0: amdgpu: [gfxhub0] page fault (src_id:0 ring:24 vmid:3 pasid:32770, for process python3 pid 4242 thread python3 pid 4250)",
                Some(EventClass::PageFault),
            ),
            (
                "AMD-Vi: Event logged [IO_PAGE_FAULT device=05:00.0 domain=0x0000 address=0x1000 flags=0x0020]",
                Some(EventClass::IommuFault),
            ),
            (
                "amdgpu 0000:05:00.0: amdgpu: ERROR: GPU over temperature range(SW CTF) detected!",
                Some(EventClass::ThermalShutdown),
            ),
            (
                "amdgpu 0000:05:00.0: amdgpu: sq_intr: error, se 2, data 0x1, sh 0, priv 0, wave_id 3, simd_id 1, wgp_id 0",
                Some(EventClass::ShaderError),
            ),
            (
                "usb 1-1: reset high-speed USB device number 2 using xhci_hcd",
                None,
            ),
        ] {
            assert_eq!(classify(line), class, "{line}");
        }
    }

    #[test]
    fn wall_clock_lines_are_placed_against_the_boot_banner() {
        // Ubuntu 24.04's kern.log: rsyslog's RFC 3339 stamps, no [seconds].
        let log = lines(
            "2026-12-02T03:00:00.000000+00:00 gpu-node-01 kernel: Linux version 6.8.0-85-generic (buildd@lcy02)\n\
             2026-12-02T18:00:00.500000+00:00 gpu-node-01 kernel: amdgpu 0000:05:00.0: amdgpu: GPU reset(1) failed\n",
        );
        let ev = events(&log);
        assert_eq!(ev[0].uptime_s, Some(54_000.5));
        // dmesg -T, local time without a zone, and dmesg --time-format iso.
        let log = lines(
            "[Mon Dec 18 08:30:00 2023] Linux version 6.5.0\n\
             [Mon Dec 18 08:34:36 2023] [drm:psp_hw_start [amdgpu]] *ERROR* PSP create ring failed!\n\
             2023-12-18T08:34:40,000000+00:00 amdgpu 0000:c7:00.0: amdgpu: GPU reset begin!\n",
        );
        let ev = events(&log);
        assert_eq!(ev[0].uptime_s, Some(276.0));
        assert!(wall_of(&log[2]).is_some());
        // No banner: no place in time.
        let ev = events(&log[1..]);
        assert_eq!(ev[0].uptime_s, None);
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,400}") {
            let _ = events(&lines(&s));
            let _ = uptime_of(&s);
            let _ = wall_of(&s);
        }
    }
}
