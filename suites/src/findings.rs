//! The catalogue of finding codes: every code a check can report, with the
//! layers that report it, its severity (`fail`: the node is not fit for
//! work; `warn`: worth fixing, the node works), its category, what it means
//! and the default next step. Checks build their
//! findings from these entries (`codes::KFD_MISSING.finding(message)`), so a
//! code cannot exist without its entry; `rocgate codes` prints the table and
//! FINDINGS.md is generated from it.

pub use rocgate_harness::Severity;
use rocgate_harness::{Finding, Layer, Verdict};
use serde::Serialize;

/// What kind of problem a finding is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    /// Something that should be there is not (a GPU, a driver, a library).
    Missing,
    /// The user or container may not use a device or file.
    Access,
    /// The node is set up inconsistently (driver binding, blacklist, DKMS).
    Configuration,
    /// The installed versions do not go together.
    Compatibility,
    /// The kernel driver or firmware failed.
    Driver,
    /// A runtime or library call failed.
    Runtime,
    /// A computation or copy gave wrong data.
    Correctness,
    /// The hardware or its links are degraded or faulting.
    Hardware,
    /// A measurement is below its floor.
    Performance,
    /// Another process holds the GPU (its memory or queues).
    Occupied,
    /// Something stopped answering.
    Hang,
    /// A process died.
    Crash,
    /// rocgate itself misbehaved.
    Internal,
    /// rocgate cannot see the node where it runs (no /sys in a container,
    /// a directory that is not a node): no verdict on the node, so
    /// `health` says unknown and nothing is drained.
    Environment,
}

/// One finding code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Code {
    /// The stable code (`kfd-missing`).
    pub code: &'static str,
    /// The layers whose checks report it (empty: any layer).
    pub layers: &'static [Layer],
    /// `fail` or `warn`: what a result with this code is.
    pub severity: Severity,
    /// The kind of problem.
    pub category: Category,
    /// What it means, in one line.
    pub meaning: &'static str,
    /// What to do next, when the check has nothing more specific.
    pub next_step: &'static str,
}

impl Code {
    /// A finding of this code with its default next step.
    pub fn finding(self, message: impl Into<String>) -> Finding {
        Finding::new(self.code, self.severity, message, self.next_step)
    }

    /// A finding of this code with a next step specific to what was found.
    pub fn finding_next(self, message: impl Into<String>, next_step: impl Into<String>) -> Finding {
        Finding::new(self.code, self.severity, message, next_step)
    }

    /// The verdict of this code (a failure or a warning, as its severity
    /// says) with its default next step.
    pub fn fail(self, message: impl Into<String>) -> Verdict {
        Verdict::found(self.finding(message))
    }
}

/// The entry for `code`, if the catalogue has one.
pub fn lookup(code: &str) -> Option<&'static Code> {
    codes::ALL.iter().find(|c| c.code == code)
}

/// Declares the catalogue: one constant per code, and `ALL`.
macro_rules! catalogue {
    ($( $name:ident = $code:literal, [$($layer:ident),*], $severity:ident, $category:ident,
        $meaning:literal, $next:literal; )*) => {
        $(
            #[doc = concat!("`", $code, "`: ", $meaning)]
            pub const $name: Code = Code {
                code: $code,
                layers: &[$(crate::stack::$layer),*],
                severity: Severity::$severity,
                category: Category::$category,
                meaning: $meaning,
                next_step: $next,
            };
        )*
        /// Every code, in layer order.
        pub const ALL: &[Code] = &[$($name),*];
    };
}

/// The codes, bottom-up by layer.
pub mod codes {
    use super::{Category, Code, Severity};

    catalogue! {
        IOMMU_NOT_PASSTHROUGH = "iommu-not-passthrough", [SYSTEM], Warn, Configuration,
            "the IOMMU translates the GPUs' DMA instead of passing it through, which slows host<->GPU and peer-to-peer traffic (AMD: iommu=pt)",
            "add `iommu=pt` (Intel hosts: `intel_iommu=on iommu=pt`) to the kernel command line (GRUB_CMDLINE_LINUX in /etc/default/grub, then <update-grub>) and reboot; AMD's MI300X system optimization guide requires it";
        NUMA_BALANCING_ENABLED = "numa-balancing-enabled", [SYSTEM], Warn, Configuration,
            "automatic NUMA balancing is on: the kernel migrates pages under the GPUs' host buffers, which AMD's MI300X guide says to disable",
            "`sudo sh -c 'echo 0 > /proc/sys/kernel/numa_balancing'` now, and `kernel.numa_balancing = 0` in /etc/sysctl.d/ (or `numa_balancing=disable` on the kernel command line) to keep it";
        THP_DISABLED = "thp-disabled", [SYSTEM], Warn, Configuration,
            "transparent huge pages are disabled; AMD's Instinct system acceptance lists transparent_hugepage=always",
            "`echo always | sudo tee /sys/kernel/mm/transparent_hugepage/enabled` (or madvise), and `transparent_hugepage=always` on the kernel command line to keep it";
        AMDGPU_CHECKS_WEAKENED = "amdgpu-checks-weakened", [SYSTEM], Warn, Configuration,
            "an amdgpu module parameter turns off what the GPU-health checks read (amdgpu.ras_enable=0, amdgpu.bad_page_threshold=0)",
            "remove the parameter from the kernel command line and /etc/modprobe.d (`grep -r amdgpu /etc/modprobe.d`), update the initramfs and reboot, so that RAS errors are counted and failing pages retired";
        PCIE_ACS_ENABLED = "pcie-acs-enabled", [SYSTEM], Warn, Configuration,
            "a PCIe bridge above the GPUs has ACS P2P Request Redirect, Completion Redirect or Egress Control on, which forces peer-to-peer traffic (GPU<->GPU, GPU<->NIC RDMA) up to the root complex; AMD's cluster networking guide says to disable ACS; Linux itself turns the redirects on at boot on every ACS-capable port once an IOMMU driver asks for isolation (the AMD IOMMU does on every EPYC host, with or without iommu=pt), so a stock node shows it",
            "clear the ACS Control register of each bridge named: `sudo setpci -s <bdf> ECAP_ACS+0x6.w=0000`, as the disable_acs.sh of AMD's MI300X workload optimization guide does for every device with ACS, or disable ACS in the BIOS; setpci does not survive a reboot: to keep the redirects off, boot with `pci=disable_acs_redir=<bdf>[;<bdf>...]` (Linux 4.19 and later) or `pci=config_acs=x0x00xx@<bdf>[;...]` (Linux 6.11 and later) on the kernel command line; keep ACS on if the GPUs are passed through to virtual machines";
        IOMMU_DMA_BLOCKED = "iommu-dma-blocked", [SYSTEM], Fail, Configuration,
            "a GPU's IOMMU group is of type `blocked`: the IOMMU lets none of the GPU's DMA through, so the GPU cannot read or write host memory",
            "read the kernel log for the group's domain (`dmesg | grep -i iommu`); a group is left blocked when its domain could not be set up or an iommufd/VFIO user left it so: unbind the GPU, `echo DMA | sudo tee /sys/kernel/iommu_groups/<n>/type` (or `identity`), bind amdgpu again, or reboot";
        CPU_GOVERNOR_NOT_PERFORMANCE = "cpu-governor-not-performance", [SYSTEM], Warn, Configuration,
            "a CPU's frequency governor is not `performance`: the host side of GPU work (launches, copies, collectives' proxy threads) runs at lowered clocks; AMD's Instinct system optimization guides set only C-states (`cpupower idle-set -d 2`), while AMD's MLPerf Inference v5.1 reproduction sets `cpupower frequency-set -g performance`",
            "`sudo cpupower frequency-set -g performance` (cpupower comes in linux-tools-common on Ubuntu, cpupower on RHEL and SLES), and keep it across reboots with the distribution's service (the cpupower service's GOVERNOR='performance', or tuned's throughput-performance profile)";
        PCI_SYSFS_UNREADABLE = "pci-sysfs-unreadable", [PCI], Fail, Environment,
            "rocgate may not read the PCI bus in sysfs (absent, or permission denied), so it cannot see the GPUs: no verdict on the node",
            "run rocgate on the host as root (or in a container with /sys mounted), or pass --sysroot with a captured node";
        PCI_ENTRY_GARBLED = "pci-entry-garbled", [PCI], Fail, Driver,
            "a GPU's PCI identity files hold what the kernel never writes there, or fail with an I/O error: a damaged capture, or a device the kernel cannot read",
            "compare with `lspci -vvv -s <address>` and `cat /sys/bus/pci/devices/<address>/{vendor,device,class}`; on a live node, read `dmesg` for AER and I/O errors on the device, and power-cycle it; for a capture, capture the node again";
        NO_AMD_GPU = "no-amd-gpu", [PCI], Fail, Missing,
            "no AMD GPU is on the PCI bus",
            "check `lspci -nn -d 1002:`; if a GPU is installed but not listed, reseat it, check its power cables and the BIOS (Above 4G decoding, slot enabled); in a VM, check the passthrough";
        GPU_COUNT_MISMATCH = "gpu-count-mismatch", [PCI], Fail, Missing,
            "fewer GPUs are on the PCI bus than --expect-gpus says",
            "a GPU that fell off the bus usually needs a cold power cycle; if it stays missing, look for PCIe/AER errors in `dmesg | grep -i -e aer -e pcie`, then reseat it";
        GPU_NOT_ON_PCI = "gpu-not-on-pci", [PCI], Fail, Missing,
            "KFD lists a GPU that is not on the PCI bus",
            "the KFD topology and the PCI bus disagree: on a live node rescan the bus (`echo 1 | sudo tee /sys/bus/pci/rescan`) and reboot if it persists; for a captured node, recapture it";
        GPU_BOUND_TO_OTHER_DRIVER = "gpu-bound-to-other-driver", [PCI], Fail, Configuration,
            "the GPU is bound to another driver (vfio-pci, pci-stub) or to none",
            "if the GPU should serve this host, release it from the other driver (its ids on the kernel command line or in modprobe.d), then bind amdgpu or reboot";
        PCIE_LINK_DEGRADED = "pcie-link-degraded", [PCI], Warn, Hardware,
            "the GPU's PCIe link trained narrower than it can run",
            "reseat the GPU or its riser/cable; `sudo lspci -vv -s <address>` shows LnkSta and AER errors; a narrower link cuts host<->device bandwidth";
        PCIE_AER_UNCORRECTED = "pcie-aer-uncorrected", [PCI], Warn, Hardware,
            "the GPU's PCIe function or a bridge above it counted uncorrectable AER errors (non-fatal or fatal) since boot: completion timeouts, poisoned or malformed TLPs, surprise link downs",
            "read which errors and when: `sudo lspci -vv -s <address>` (UESta) and `dmesg | grep -i -e aer -e <address>`; reseat the GPU or its riser/cable if they recur; counts only grow until reboot, so compare the next run with this one (`rocgate compare`) to see whether they still grow";
        PCIE_LINK_SLOW = "pcie-link-slow", [PCI], Warn, Hardware,
            "the GPU's PCIe link runs slower than both of its ends can (judged, on MI300-class GPUs, on the slot link of the GPU's internal switch); an idle GPU may lower its link speed under PCIe DPM (amdgpu's pcie_dpm, pp_dpm_pcie), so a lower speed at idle can be normal",
            "check the speed under load (`sudo lspci -vv -s <port>` LnkSta while a copy runs); if it stays low, reseat the GPU or its riser/cable and check the slot's link speed setting in the BIOS (a slot forced to a lower generation)";
        FIRMWARE_LOAD_FAILED = "firmware-load-failed", [FIRMWARE], Fail, Driver,
            "amdgpu abandoned the GPU's init because firmware failed to load, or its compute (MEC) microcode is not loaded",
            "read the GPU's kernel log (`dmesg | grep -i -e psp -e firmware`); reinstall the firmware that matches the driver (amdgpu-dkms-firmware for DKMS, linux-firmware for the inbox driver), update the initramfs and reboot";
        FIRMWARE_LOAD_DEGRADED = "firmware-load-degraded", [FIRMWARE], Warn, Driver,
            "a firmware file failed to load; the GPU initialised, with the features that need it off",
            "install the firmware matching the driver (amdgpu-dkms-firmware for DKMS, linux-firmware for the inbox driver); if the file is present, the initramfs is stale: <update-initramfs>; then reboot";
        GPU_INIT_FAILED = "gpu-init-failed", [FIRMWARE], Fail, Driver,
            "amdgpu abandoned the GPU's init with PSP or init errors",
            "read the GPU's kernel log (`dmesg | grep -i -e psp -e amdgpu`); reinstall the firmware that matches the driver and reboot; if it persists, update the GPU's firmware bundle (PLDM/IFWI)";
        FIRMWARE_NOT_REPORTED = "firmware-not-reported", [FIRMWARE], Fail, Driver,
            "amdgpu reports no firmware versions for the GPU: it did not finish initialising it",
            "read this GPU's kernel log: `dmesg | grep <address>`";
        FIRMWARE_DIFFERS_WITHIN_NODE = "firmware-differs-within-node", [FIRMWARE], Warn, Configuration,
            "GPUs of one model on the node run different firmware or VBIOS versions: a node half-upgraded (a firmware flash that stopped part way, a GPU swapped in from another batch)",
            "finish the firmware update on the odd GPUs (amd-smi's or the OEM's PLDM bundle, then a cold reboot) or, if the difference is intended, waive this code for the node";
        FIRMWARE_VERSION_UNREADABLE = "firmware-version-unreadable", [FIRMWARE], Fail, Access,
            "the GPU's firmware version files cannot be read or parsed",
            "run rocgate as a user who can read the GPU's sysfs files, or check the device cgroup; damaged contents mean reloading amdgpu";
        AMDGPU_BLACKLISTED = "amdgpu-blacklisted", [AMDGPU], Warn, Configuration,
            "amdgpu is blacklisted on the kernel command line or in modprobe.d",
            "remove it: for the kernel command line edit GRUB_CMDLINE_LINUX in /etc/default/grub and run <update-grub>; for modprobe.d delete the line and run <update-initramfs>; then reboot";
        DKMS_STALE = "dkms-stale", [AMDGPU], Warn, Configuration,
            "the amdgpu DKMS module is not built for the running kernel",
            "rebuild it for this kernel: <install-headers> and `sudo dkms autoinstall -k $(uname -r)`, then reboot";
        AMDGPU_NOT_LOADED = "amdgpu-not-loaded", [AMDGPU], Fail, Driver,
            "the amdgpu module is not loaded",
            "load it: `sudo modprobe amdgpu`, and read `dmesg | grep -i amdgpu` if that fails";
        AMDGPU_VERSION_UNKNOWN = "amdgpu-version-unknown", [AMDGPU], Warn, Missing,
            "the loaded amdgpu reports neither a version nor a srcversion",
            "run `modinfo amdgpu` to identify the installed build";
        AMDGPU_PROBE_FAILED = "amdgpu-probe-failed", [AMDGPU], Fail, Driver,
            "amdgpu is loaded but did not bind the GPU",
            "read `dmesg | grep <address>` for the probe error; a device this driver does not know needs a newer amdgpu (DKMS) or kernel";
        RENDER_NODE_MISSING = "render-node-missing", [AMDGPU], Fail, Missing,
            "the GPU's render node (/dev/dri/renderD*) does not exist",
            "on the host, udev did not create it: `sudo udevadm trigger`; in a container, pass it: `--device /dev/dri`";
        RAS_UNCORRECTABLE = "ras-uncorrectable", [AMDGPU], Fail, Hardware,
            "the GPU counted uncorrectable (UE) RAS errors or consumed poisoned data: its results cannot be trusted",
            "drain the GPU; read its counters (`grep . /sys/bus/pci/devices/<address>/ras/*`, `amd-smi metric --ecc`) and `dmesg | grep -i -e uncorrectable -e poison`; a reboot clears the counters, not the fault: if uncorrectable errors return, follow AMD's Service Action Guide and RMA the GPU";
        RAS_BAD_PAGES = "ras-bad-pages", [AMDGPU], Warn, Hardware,
            "the GPU has retired VRAM pages near the driver's bad-page threshold (amdgpu.bad_page_threshold; by default 128 pages on MI210/MI250/MI300X, 256 on MP0 13.0.14), past which the driver asks for AMD's Service Action Guide (and, for a threshold the user set, marks the GPU bad)",
            "plan to replace the GPU (AMD's Service Action Guide); the retired pages are listed in /sys/bus/pci/devices/<address>/ras/gpu_vram_bad_pages and `amd-smi bad-pages`; raising the threshold only postpones it";
        GPU_AT_LIMIT_IDLE = "gpu-at-limit-idle", [AMDGPU], Warn, Hardware,
            "before rocgate loaded it, the GPU was within 5 °C of a temperature limit or at 95% of its power cap",
            "check what runs on it (`amd-smi process`), the node's fans and airflow, and the inlet temperature (`amd-smi metric --temperature --power`); a GPU this hot at rest throttles under load";
        CONTAINER_DEVICE_NOT_PASSED = "container-device-not-passed", [AMDGPU, KFD], Fail, Access,
            "rocgate runs in a container started without the GPU's device nodes (/dev/kfd, /dev/dri)",
            "start the container with `--device=/dev/kfd --device=/dev/dri` (GitHub Actions: `container: options: --device=/dev/kfd --device=/dev/dri`; Kubernetes: request amd.com/gpu through the AMD GPU device plugin)";
        DEVICE_GID_MISMATCH = "device-gid-mismatch", [KFD], Fail, Access,
            "in a container, a GPU device node belongs to a group id the container's process is not in (the image numbers render and video differently from the host)",
            "add the device's group id, as a number, to the container: `--group-add <gid>` (GitHub Actions: `container: options: --group-add <gid>`)";
        KFD_MISSING = "kfd-missing", [KFD], Fail, Missing,
            "/dev/kfd or the KFD topology does not exist",
            "load amdgpu with KFD (`sudo modprobe amdgpu`; check `dmesg | grep -i kfd`); in a container, pass `--device /dev/kfd`";
        GPU_IN_USE = "gpu-in-use", [KFD], Warn, Occupied,
            "another process held the GPU's memory or queues when rocgate started: measurements share the GPU with it, and a job given this GPU would too",
            "see what it is (`ps -o pid,user,etime,cmd -p <pid>`, `amd-smi process`); if it is a job's leftover, end it before the GPU is given to work";
        GPU_HELD_AT_JOB_START = "gpu-held-at-job-start", [KFD], Fail, Occupied,
            "a process held the GPU's memory or queues as a job was about to start on it: the job will not get the GPU it was promised (a previous job's process left running)",
            "end the process (`kill <pid>`; `amd-smi process` lists what holds each GPU), find why the previous job's epilog left it, and resume the node";
        GPU_RESET_FAILED = "gpu-reset-failed", [AMDGPU], Fail, Driver,
            "amdgpu tried to reset the GPU and it did not come back: it is unusable until the node is power-cycled",
            "drain the node and power-cycle it (a warm reboot may not clear it); read the kernel log around the reset (`dmesg | grep -e <address> -e 'GPU reset'`) for what hung first; a GPU that fails resets again needs AMD's Service Action Guide";
        GPU_RESET = "gpu-reset", [AMDGPU], Warn, Driver,
            "amdgpu reset the GPU (after a hang, a RAS error or on request) and it came back: the work on it was lost, and on an XGMI hive every GPU of the hive was reset with it",
            "read what started it (the lines before `GPU reset begin!` in `dmesg`: a ring timeout, a RAS error, a page fault); one reset after a bad job is normal, repeated resets are a fault to chase";
        GPU_JOB_TIMEOUT = "gpu-job-timeout", [AMDGPU], Warn, Hang,
            "a job on one of the GPU's rings ran past amdgpu's timeout (`ring <name> timeout`): a hung shader or DMA, or firmware that stopped answering",
            "read the lines after it for the process and the reset it started (`dmesg | grep -A3 'timeout, signaled seq'`); if it recurs on one GPU with different jobs, drain that GPU";
        GPU_PAGE_FAULT = "gpu-page-fault", [AMDGPU], Warn, Runtime,
            "the GPU faulted on a virtual address no mapping covers (a `retry` or `no-retry` page fault): most often the process's own bug (a use after free, an out-of-bounds kernel), sometimes a driver fault",
            "look at the process the log names (`dmesg | grep -A3 'page fault'`: process, pid, address, the IH client); faults from many unrelated processes point at the node, not the code";
        GPU_SHADER_ERROR = "gpu-shader-error", [AMDGPU], Warn, Runtime,
            "the GPU's shader sequencer raised an error interrupt (`sq_intr: error`): an illegal instruction or a memory violation in a wave",
            "find the job that ran then (`dmesg | grep sq_intr` and the job's own logs); if the errors recur with known-good code, run `rocgate run --tier extended` on the GPU";
        GPU_RAS_EVENT = "gpu-ras-event", [AMDGPU], Warn, Hardware,
            "amdgpu logged correctable or deferred RAS errors, or an ACA error bank: the hardware corrected them, but their rate is what predicts a failing part",
            "read the counts by block (`grep . /sys/bus/pci/devices/<address>/ras/*`, `amd-smi metric --ecc`) and compare runs (`rocgate compare`); a rising count on one GPU is the one to replace first";
        GPU_THROTTLED = "gpu-throttled", [AMDGPU], Warn, Hardware,
            "the GPU's power management throttled it (thermal, power or current limits): it ran slower than its clocks allow",
            "check its cooling and power (`amd-smi metric -t -p`, the node's fan and inlet readings); throttling at idle or on one GPU only points at its cooling or its power delivery";
        GPU_THERMAL_SHUTDOWN = "gpu-thermal-shutdown", [AMDGPU], Fail, Hardware,
            "the GPU passed its critical temperature (SW or HW CTF): its power management shut it down to protect it",
            "drain the node and check the GPU's cooling (heatsink contact, fans, airflow and inlet temperature) before it runs again; read `dmesg | grep -i ctf`";
        PCIE_LINK_DOWN = "pcie-link-down", [PCI], Fail, Hardware,
            "the PCIe link to the GPU went down (hot-plug `Link Down` or `Card not present`, or DPC contained the port): the GPU left the bus",
            "drain the node; reseat the GPU or its riser/cable and power-cycle; read `dmesg | grep -e pciehp -e DPC -e <address>`; a slot that drops again needs the OEM's hardware service";
        PCIE_FATAL_ERROR = "pcie-fatal-error", [PCI], Fail, Hardware,
            "the PCI core logged a fatal uncorrectable PCIe error on the GPU or a bridge above it: the link was reset to recover and the GPU's state is lost",
            "drain the node; read `dmesg | grep -i -e aer -e <address>` for the error bits; reseat the GPU and its riser/cable; recurring fatal errors need the OEM's hardware service";
        PCIE_ERROR_LOGGED = "pcie-error-logged", [PCI], Warn, Hardware,
            "the PCI core logged uncorrectable, non-fatal PCIe errors (AER) on the GPU or a bridge above it: completion timeouts, unsupported requests, poisoned TLPs",
            "read the error bits (`dmesg | grep -i -A4 aer`, `sudo lspci -vv -s <address>` UESta); reseat the GPU or its riser/cable if they recur";
        IOMMU_PAGE_FAULT = "iommu-page-fault", [PCI], Warn, Driver,
            "the IOMMU refused a DMA of the GPU (`IO_PAGE_FAULT` or a DMAR fault): the GPU reached an address no mapping allows, a driver fault or an IOMMU set up against ROCm's advice",
            "read the faults (`dmesg | grep -e IO_PAGE_FAULT -e DMAR`); ROCm's install guide asks for `iommu=pt` on the kernel command line; faults with passthrough set point at the driver";
        GPU_EVENT_HISTORY = "gpu-event-history", [PCI, AMDGPU], Warn, Hardware,
            "the kernel log holds fault events of the GPU (a reset, a fault, a link error) before the window the run judges, and none in it: history, not the GPU's present state",
            "read what happened and when (the result's output lists the lines); if the GPU passes the runtime layers now it recovered; a GPU with a history of faults is the first to watch";
        KFD_PERMISSION = "kfd-permission", [KFD], Fail, Access,
            "the user cannot open /dev/kfd or a render node read-write",
            "add the user to the device's group (usually render or video): `sudo usermod -aG render,video $USER`, then log in again; in a container add `--group-add` with the device's gid";
        DEVICE_OPEN_FAILED = "device-open-failed", [KFD], Fail, Driver,
            "opening /dev/kfd or a render node failed for a reason other than permission",
            "the driver refused the open: read `dmesg | grep -i -e kfd -e amdgpu`; errors such as ENOMEM or EFAULT here usually mean an IOMMU problem (try iommu=pt)";
        KFD_TOPOLOGY_UNREADABLE = "kfd-topology-unreadable", [KFD], Fail, Access,
            "the KFD topology cannot be read or is damaged",
            "run rocgate as a user who can read /sys/class/kfd, or check the container's device cgroup; a damaged topology needs amdgpu reloaded or a reboot";
        SYSFS_READ_TIMEOUT = "sysfs-read-timeout", [PCI, KFD], Fail, Hang,
            "a file of the node did not answer within the read deadline (a wedged GPU or driver)",
            "the GPU behind the file is wedged: read `dmesg | grep -i -e amdgpu -e kfd` for a hang or failed reset, reset the GPU (<reset>) or reboot";
        KFD_TOPOLOGY_EMPTY = "kfd-topology-empty", [KFD], Fail, Missing,
            "the KFD topology lists no GPU",
            "read `dmesg | grep -i kfd`: KFD skipped every GPU (an unsupported device, or a driver without KFD)";
        PARTITION_MISMATCH = "partition-mismatch", [KFD], Fail, Configuration,
            "a GPU's partitions disagree on their gfx target, or one unique_id names partitions on different devices",
            "partitions of one GPU must share its PCI device and gfx target: check the partition mode on every GPU (`amd-smi partition`) and reset it consistently, then reload amdgpu";
        PARTITION_COUNT_MISMATCH = "partition-count-mismatch", [KFD], Fail, Missing,
            "a GPU shows fewer or more partitions than its partition mode gives, or than its siblings in that mode",
            "a partition that KFD does not list is unusable: read `dmesg | grep -i -e xcp -e partition`, set the mode again on that GPU (`amd-smi set --compute-partition`), reload amdgpu or reboot";
        GPU_MISSING_FROM_KFD = "gpu-missing-from-kfd", [KFD], Fail, Missing,
            "a GPU on the PCI bus has no KFD topology node",
            "ROCm cannot see this GPU: read `dmesg | grep -i kfd` (\"DID ... is missing in supported_devices\" means this amdgpu does not support it for compute)";
        GFX_TARGET_UNKNOWN = "gfx-target-unknown", [KFD], Fail, Compatibility,
            "the GPU's gfx target cannot be determined",
            "update rocgate; if KFD reports a malformed gfx_target_version, the kernel's amdkfd does not support this GPU";
        NO_COMPUTE_UNITS = "no-compute-units", [KFD], Fail, Driver,
            "KFD reports no compute units for the GPU",
            "the GPU's compute engines did not come up: read `dmesg | grep -i amdgpu` for init errors, then reset the GPU or reboot";
        RENDER_MINOR_MISSING = "render-minor-missing", [KFD], Fail, Driver,
            "KFD names no render node for the GPU",
            "the DRM side of amdgpu did not register this GPU: read `dmesg | grep -i drm` and reload amdgpu";
        RENDER_MINOR_MISMATCH = "render-minor-mismatch", [KFD], Fail, Driver,
            "KFD and DRM disagree about the GPU's render node",
            "KFD and DRM disagree about which GPU owns the render node: reload amdgpu or reboot";
        COMPAT_UNKNOWN_RELEASE = "compat-unknown-release", [COMPAT], Warn, Compatibility,
            "the compatibility matrix does not know the installed ROCm release",
            "update the matrix from AMD's compatibility page and pass it with --matrix FILE, or install a listed ROCm release";
        COMPAT_GPU_UNSUPPORTED = "compat-gpu-unsupported", [COMPAT], Fail, Compatibility,
            "the ROCm release does not support a GPU of the node",
            "install a ROCm release whose compatibility matrix lists this GPU";
        COMPAT_AMDGPU_UNSUPPORTED = "compat-amdgpu-unsupported", [COMPAT], Fail, Compatibility,
            "the amdgpu driver release is not one the ROCm release supports",
            "install an amdgpu driver release the ROCm release lists (amdgpu-dkms from the same ROCm repository), or a ROCm release that lists this driver";
        COMPAT_OS_UNSUPPORTED = "compat-os-unsupported", [COMPAT], Warn, Compatibility,
            "the ROCm release does not support the operating system",
            "use an operating system release the ROCm release lists";
        COMPAT_KERNEL_UNSUPPORTED = "compat-kernel-unsupported", [COMPAT], Warn, Compatibility,
            "the ROCm release does not support the running kernel",
            "boot a kernel the ROCm release lists for this operating system";
        HSA_LIBRARY_MISSING = "hsa-library-missing", [HSA], Fail, Missing,
            "the ROCr runtime library cannot be loaded",
            "install the ROCm runtime (the rocm-hip-runtime package, or Debian's libhsa-runtime64-1 and libamdhip64-5) or point rocgate at it with --rocm-path DIR (libraries in DIR/lib) or ROCM_PATH";
        HSA_INIT_FAILED = "hsa-init-failed", [HSA], Fail, Runtime,
            "hsa_init failed",
            "ROCr reports every start failure as HSA_STATUS_ERROR_OUT_OF_RESOURCES; the cause is in a lower layer: run `rocgate doctor`; if those pass, read `dmesg | grep -i kfd` and check `ulimit -l`";
        HSA_AGENTS_FAILED = "hsa-agents-failed", [HSA], Fail, Runtime,
            "ROCr started but cannot describe its agents",
            "ROCr started but cannot describe its agents: read `dmesg | grep -i kfd` and compare `rocminfo`";
        HSA_AGENT_MISMATCH = "hsa-agent-mismatch", [HSA], Fail, Compatibility,
            "ROCr's agents disagree with KFD (count, ISA or compute units)",
            "ROCr and the kernel driver describe the GPU differently: check that this ROCm release supports the installed amdgpu";
        HSA_AGENT_MISSING = "hsa-agent-missing", [HSA], Fail, Missing,
            "ROCr has no agent for the GPU",
            "ROCr skipped this GPU: check its render node permission, ROCR_VISIBLE_DEVICES, and `dmesg` for KFD errors on it";
        HSA_NO_DEVICE_MEMORY = "hsa-no-device-memory", [HSA], Fail, Driver,
            "the GPU agent offers no allocatable device memory pool",
            "the GPU's memory did not come up: read `dmesg | grep -i -e vram -e amdgpu`";
        HSA_NO_SYSTEM_MEMORY = "hsa-no-system-memory", [HSA], Fail, Runtime,
            "no CPU agent offers the system memory ROCr needs",
            "ROCr's host memory setup is broken: compare `rocminfo` output and check the kernel's KFD CPU nodes";
        HSA_MEMORY_POOLS_FAILED = "hsa-memory-pools-failed", [HSA], Fail, Runtime,
            "ROCr cannot list an agent's memory pools",
            "read `dmesg | grep -i -e kfd -e amdgpu` around this time; a GPU that fails here after hsa_init usually needs a reset (<reset>) or a reboot";
        HSA_QUEUE_FAILED = "hsa-queue-failed", [HSA], Fail, Runtime,
            "an AQL queue cannot be created on the GPU",
            "KFD refused a hardware queue: other processes may hold all queues (`amd-smi process`), or the GPU is in a bad state; read `dmesg | grep -i -e kfd -e mes`";
        HSA_SIGNAL_FAILED = "hsa-signal-failed", [HSA], Fail, Runtime,
            "HSA signals do not work",
            "ROCr's signals are broken on this node: check for a mismatched libhsa-runtime64 and amdgpu";
        HSA_CODE_OBJECT_FAILED = "hsa-code-object-failed", [HSA], Fail, Compatibility,
            "ROCr cannot load rocgate's code object for the GPU",
            "ROCr cannot load code for this GPU: check that the ROCm release supports this gfx target and that the runtime matches the driver";
        HSA_DISPATCH_FAILED = "hsa-dispatch-failed", [HSA], Fail, Runtime,
            "a kernel dispatched through an AQL queue failed (queue error, negative completion signal)",
            "read `dmesg | grep -i -e kfd -e amdgpu` around this time; a GPU that fails here after hsa_init usually needs a reset (<reset>) or a reboot";
        HSA_DISPATCH_WRONG = "hsa-dispatch-wrong", [HSA], Fail, Correctness,
            "a kernel dispatched through HSA ran but wrote wrong values",
            "the GPU computes wrong results: reset it (<reset>), rerun, and if it persists check RAS/ECC errors (`amd-smi metric --ecc`) and RMA the GPU";
        HSA_COPY_FAILED = "hsa-copy-failed", [HSA], Fail, Runtime,
            "a host<->device copy by the DMA engines failed (error status or negative completion signal)",
            "read `dmesg | grep -i -e kfd -e amdgpu` around this time; a GPU that fails here after hsa_init usually needs a reset (<reset>) or a reboot";
        HSA_COPY_CORRUPT = "hsa-copy-corrupt", [HSA], Fail, Correctness,
            "a host<->device round trip by the DMA engines came back different",
            "data is corrupted on the way through the GPU's DMA engines or memory: check RAS/ECC counters (`amd-smi metric --ecc`) and PCIe AER errors (`dmesg | grep -i aer`)";
        GPU_WEDGED = "gpu-wedged", [HSA, HIP], Fail, Hang,
            "a GPU hangs the runtime's initialisation in every process that sees it",
            "reset the GPU (<reset>) or reboot the node, then rerun; until then keep jobs off it (ROCR_VISIBLE_DEVICES without it) and read `dmesg | grep -i -e amdgpu -e kfd` for the hang or a failed reset";
        HIP_LIBRARY_MISSING = "hip-library-missing", [HIP], Fail, Missing,
            "the HIP runtime library cannot be loaded",
            "install the ROCm runtime (the rocm-hip-runtime package, or Debian's libhsa-runtime64-1 and libamdhip64-5) or point rocgate at it with --rocm-path DIR (libraries in DIR/lib) or ROCM_PATH";
        HIP_INIT_FAILED = "hip-init-failed", [HIP], Fail, Runtime,
            "HIP's initialisation failed",
            "HIP starts on ROCr: run `rocgate doctor` and read the hsa layer's result; check HIP_VISIBLE_DEVICES and ROCR_VISIBLE_DEVICES";
        HIP_NO_DEVICE = "hip-no-device", [HIP], Fail, Missing,
            "HIP sees no device (hipErrorNoDevice)",
            "HIP sees no GPU: the cause is in a lower layer; run `rocgate doctor` and read the hsa layer's result; check HIP_VISIBLE_DEVICES and ROCR_VISIBLE_DEVICES";
        HIP_DEVICE_MISMATCH = "hip-device-mismatch", [HIP], Fail, Compatibility,
            "HIP's devices disagree with KFD (count or multiprocessors)",
            "HIP and the kernel driver disagree about the GPU: check that the ROCm and amdgpu versions are a supported pair, and whether HIP_VISIBLE_DEVICES, HSA_CU_MASK, HSA_COOP_CU_COUNT or GPU_ENABLE_WGP_MODE are set";
        HIP_DEVICE_MISSING = "hip-device-missing", [HIP, RCCL], Fail, Missing,
            "no HIP device is the GPU (matched by PCI bus id)",
            "HIP does not expose this GPU: check HIP_VISIBLE_DEVICES/ROCR_VISIBLE_DEVICES and the hsa layer's result for it";
        HIP_DEVICE_FAILED = "hip-device-failed", [HIP], Fail, Runtime,
            "HIP cannot describe or select the device",
            "read `dmesg | grep -i amdgpu` and compare `rocminfo`";
        HIP_MEMCPY_FAILED = "hip-memcpy-failed", [HIP], Fail, Runtime,
            "hipMalloc or hipMemcpy failed",
            "read `dmesg | grep -i -e amdgpu -e aer`; a failing copy usually means a GPU or PCIe fault: reset the GPU and rerun";
        HIP_MEMCPY_CORRUPT = "hip-memcpy-corrupt", [HIP], Fail, Correctness,
            "a hipMemcpy round trip came back different",
            "data is corrupted through the GPU: check RAS/ECC counters (`amd-smi metric --ecc`) and PCIe AER errors";
        VRAM_TEST_FAILED = "vram-test-failed", [HIP], Fail, Hardware,
            "the device-memory test read back words different from what it wrote (walking ones or address in address): the GPU's memory is faulty",
            "drain the GPU; read its memory RAS counters and retired pages (`grep . /sys/bus/pci/devices/<address>/ras/*umc*`, `amd-smi bad-pages`) and `dmesg | grep -i -e umc -e uncorrectable`; rerun with a larger `[memtest] vram_share`; faults that return after a reboot mean the GPU needs AMD's Service Action Guide (RMA)";
        P2P_COPY_FAILED = "p2p-copy-failed", [HIP], Fail, Runtime,
            "two GPUs cannot copy peer-to-peer: HIP refuses peer access or a hipMemcpyPeer between them fails",
            "RCCL and hipMemcpyPeer need peer access between GPUs: check that the IOMMU is in passthrough (iommu=pt), ACS is off on the PCIe switches (see the system layer), Above 4G decoding/large BARs are on in the BIOS, and `dmesg | grep -i -e xgmi -e amdgpu`";
        P2P_COPY_CORRUPT = "p2p-copy-corrupt", [HIP], Fail, Correctness,
            "a peer-to-peer copy between two GPUs arrived different",
            "data is corrupted between the named GPUs: drain the node, read the XGMI and PCIe error counters (`grep . /sys/bus/pci/devices/<address>/ras/*xgmi*`, `amd-smi metric --ecc`, `dmesg | grep -i -e aer -e xgmi`) and rerun TransferBench between the pair";
        HIP_MODULE_LOAD_FAILED = "hip-module-load-failed", [HIP], Fail, Compatibility,
            "hipModuleLoadData rejects rocgate's code object",
            "read `dmesg | grep -i amdgpu`; check that the HIP runtime matches the installed ROCm and driver and that the release supports this gfx target";
        HIP_LAUNCH_FAILED = "hip-launch-failed", [HIP], Fail, Runtime,
            "a kernel launch through HIP failed",
            "the kernel did not run: read `dmesg | grep -i -e amdgpu -e 'page fault'`; a GPU that fails launches needs a reset (<reset>)";
        HIP_KERNEL_WRONG = "hip-kernel-wrong", [HIP], Fail, Correctness,
            "a kernel launched through HIP computed wrong results",
            "the GPU computes wrong results: reset it (<reset>), rerun, and if it persists check RAS/ECC errors and RMA the GPU";
        GPU_RESULT_MISMATCH = "gpu-result-mismatch", [HIP], Fail, Correctness,
            "under sustained load the GPU computed a different result for the same work: the burn-in's integer kernel, run with the same seeds every iteration, gave another checksum in one iteration (or on this GPU than on its siblings), or words that differ from the CPU's: silent data corruption",
            "drain the GPU: a GPU that computes a wrong bit now and then corrupts jobs without an error; rerun `rocgate run --tier burnin --gpus <gpu>` to see it again, read its RAS counters (`grep . /sys/bus/pci/devices/<address>/ras/*`), and if it repeats, the GPU needs AMD's Service Action Guide (RMA)";
        GPU_LOST_UNDER_LOAD = "gpu-lost-under-load", [HIP], Fail, Hardware,
            "the GPU fell off the bus or out of KFD's topology while the burn-in loaded it (or its launches began to fail)",
            "drain the node; read `dmesg | grep -i -e amdgpu -e 'link down' -e aer -e 'surprise'` around the time named, reseat or replace the GPU, its riser or its PCIe switch board, and check the node's power supply under load";
        GPU_ERRORS_UNDER_LOAD = "gpu-errors-under-load", [HIP], Fail, Hardware,
            "an uncorrectable RAS error or an uncorrectable (non-fatal or fatal) PCIe AER error was counted while the burn-in loaded the GPU",
            "drain the GPU; read which block counted it (`grep . /sys/bus/pci/devices/<address>/ras/*`, `amd-smi metric --ecc`) and `dmesg | grep -i -e uncorrectable -e aer`; uncorrectable errors under load mean the GPU (or its link) needs AMD's Service Action Guide";
        GPU_CORRECTED_UNDER_LOAD = "gpu-corrected-under-load", [HIP], Warn, Hardware,
            "correctable RAS errors, corrected PCIe AER errors or PCIe replays were counted while the burn-in loaded the GPU",
            "corrected errors that appear under load are an early sign: compare with the GPU's siblings and its previous runs (rocgate compare); a link that replays under load may need its riser or cable reseated";
        GPU_OVER_THERMAL_LIMIT = "gpu-over-thermal-limit", [HIP], Fail, Hardware,
            "a temperature sensor of the GPU reached its critical limit under the burn-in's load",
            "the GPU overheats under load: check its heatsink seating and thermal interface, the node's fans and airflow and the inlet temperature; compare with its siblings (`amd-smi metric -t`)";
        GPU_NEAR_THERMAL_LIMIT = "gpu-near-thermal-limit", [HIP], Warn, Hardware,
            "a temperature sensor of the GPU came within the configured margin of its critical limit under the burn-in's load",
            "the GPU runs close to its limit: check its cooling (fans, airflow, inlet temperature) before it throttles under real work";
        GPU_CLOCKS_COLLAPSED = "gpu-clocks-collapsed", [HIP], Fail, Hardware,
            "under the burn-in's load the GPU's graphics clock sat below the configured share of its highest level for longer than the configured share of the run: it throttled",
            "read why it throttled (`amd-smi metric --throttle`, or the throttle status in `gpu_metrics`): heat points at cooling, power at the node's power delivery or a lowered cap (`amd-smi metric --power`)";
        GPU_THERMAL_THROTTLED = "gpu-thermal-throttled", [HIP], Fail, Hardware,
            "under the burn-in's load the GPU's SMU held it back with a thermal throttler (PROCHOT, socket, VR or HBM thermal, per gpu_metrics) for longer than the configured share of the run",
            "check the GPU's cooling (fans, airflow, inlet temperature, its heatsink's contact) and the node's thermal logs (`amd-smi metric --throttle`); a GPU that throttles on heat in a burn-in will under real work";
        GPU_POWER_OUT_OF_BAND = "gpu-power-out-of-band", [HIP], Warn, Performance,
            "the GPU's median power under the burn-in's load was outside the configured band of its power cap: too low, it never reached full load; too high, its cap does not hold",
            "too low: check that nothing held it back (clocks, another process, `amd-smi metric --power --clock`) and that its cap is what the SKU should have; too high: check the cap (`cat /sys/bus/pci/devices/<address>/hwmon/hwmon*/power1_cap`) and the firmware";
        HIPRTC_LIBRARY_MISSING = "hiprtc-library-missing", [HIP], Fail, Missing,
            "hiprtc cannot be loaded",
            "install the ROCm runtime with hiprtc (the rocm-hip-runtime package) or point rocgate at it with --rocm-path DIR";
        HIPRTC_FAILED = "hiprtc-failed", [HIP], Fail, Runtime,
            "hiprtc cannot compile a kernel for the GPU, or its code does not run",
            "the runtime compiler failed: check that its device libraries (amdgcn bitcode) and comgr are installed for this ROCm release";
        HIPRTC_WRONG = "hiprtc-wrong", [HIP], Fail, Correctness,
            "a hiprtc-compiled kernel computed wrong results",
            "hiprtc produced wrong code or the GPU computes wrongly: compare with hip.vector_add";
        NO_BINARY_FOR_GPU = "no-binary-for-gpu", [HIP, ROCBLAS, MIOPEN, RCCL], Fail, Compatibility,
            "a library has no code for the GPU (hipErrorNoBinaryForGpu)",
            "the installed ROCm libraries were not built for this gfx target: use a ROCm release that supports it";
        GPU_MEMORY_FAULT = "gpu-memory-fault", [HSA, HIP, ROCBLAS, MIOPEN, RCCL], Fail, Hardware,
            "the GPU faulted on a memory access and ROCr aborted the process",
            "read `dmesg | grep -i -e 'page fault' -e amdgpu` for the faulting address; a fault in rocgate's own checks points at the driver or the hardware";
        ROCBLAS_LIBRARY_MISSING = "rocblas-library-missing", [ROCBLAS], Fail, Missing,
            "rocBLAS cannot be loaded or does not report its version",
            "install rocBLAS (the rocblas package) or point rocgate at it with --rocm-path DIR";
        ROCBLAS_HANDLE_FAILED = "rocblas-handle-failed", [ROCBLAS], Fail, Runtime,
            "a rocBLAS handle cannot be created",
            "read `dmesg | grep -i amdgpu` and run the hip layer's checks on this GPU; check that rocBLAS matches the installed ROCm release";
        ROCBLAS_GEMM_FAILED = "rocblas-gemm-failed", [ROCBLAS], Fail, Runtime,
            "a rocBLAS GEMM returned an error",
            "read `dmesg | grep -i amdgpu` and run the hip layer's checks on this GPU; check that rocBLAS matches the installed ROCm release";
        ROCBLAS_GEMM_WRONG = "rocblas-gemm-wrong", [ROCBLAS], Fail, Correctness,
            "a rocBLAS GEMM differs from the CPU reference",
            "the GPU or rocBLAS computes wrong results: rerun; if it repeats, reset the GPU, check RAS/ECC counters (`amd-smi metric --ecc`), and compare another GPU of the node";
        ROCBLAS_NO_KERNELS_FOR_ARCH = "rocblas-no-kernels-for-arch", [ROCBLAS], Fail, Compatibility,
            "rocBLAS has no kernels for the GPU (a missing TensileLibrary aborts the process; rocblas_status_arch_mismatch)",
            "install a rocBLAS built for this gfx target: use a ROCm release that supports it (see the compatibility matrix), or build rocBLAS with -DAMDGPU_TARGETS=<gfx>";
        ROCBLAS_MEMORY_FAILED = "rocblas-memory-failed", [ROCBLAS], Fail, Runtime,
            "device memory for a GEMM cannot be set up",
            "device memory for the GEMM could not be set up: see the hip layer's memcpy check on this GPU";
        MIOPEN_DB_NOT_WRITABLE = "miopen-db-not-writable", [MIOPEN], Warn, Access,
            "MIOpen's user database or kernel cache is not writable",
            "point MIOPEN_USER_DB_PATH and MIOPEN_CUSTOM_CACHE_DIR at a writable directory (in CI: one in the workspace), or fix HOME";
        MIOPEN_LIBRARY_MISSING = "miopen-library-missing", [MIOPEN], Fail, Missing,
            "MIOpen cannot be loaded or does not report its version",
            "install MIOpen (the miopen-hip package) or point rocgate at it with --rocm-path DIR";
        MIOPEN_HANDLE_FAILED = "miopen-handle-failed", [MIOPEN], Fail, Runtime,
            "an MIOpen handle cannot be created",
            "read `dmesg | grep -i amdgpu`; check that MIOpen matches the ROCm release and that its kernel cache and database paths are writable";
        MIOPEN_CONV_FAILED = "miopen-conv-failed", [MIOPEN], Fail, Runtime,
            "an MIOpen convolution (find or forward) failed",
            "read `dmesg | grep -i amdgpu`; check that MIOpen matches the ROCm release and that its kernel cache and database paths are writable";
        MIOPEN_CONV_WRONG = "miopen-conv-wrong", [MIOPEN], Fail, Correctness,
            "an MIOpen convolution differs from the CPU reference",
            "MIOpen or the GPU computes wrong results: rerun with MIOPEN_FIND_ENFORCE=1 to rule out a stale database entry; then reset the GPU and check RAS/ECC counters";
        MIOPEN_MEMORY_FAILED = "miopen-memory-failed", [MIOPEN], Fail, Runtime,
            "device memory for a convolution cannot be set up",
            "see the hip layer's memcpy check on this GPU";
        XGMI_LINK_MISSING = "xgmi-link-missing", [RCCL], Fail, Hardware,
            "two GPUs of one XGMI hive have no enabled XGMI link",
            "peer traffic between them falls back to PCIe: check the XGMI bridges or baseboard and `dmesg | grep -i xgmi`; reseat or replace the bridge, then reboot";
        XGMI_LINK_DOWN = "xgmi-link-down", [RCCL], Fail, Hardware,
            "two GPUs of a fully connected XGMI hive have no working direct link: KFD weighs their link as several hops, or gives it no bandwidth",
            "the direct XGMI link between them is down and traffic takes a longer path: check `rocm-smi --showtopo` (weight, hops) and the XGMI link status (`amd-smi xgmi`, `dmesg | grep -i xgmi`); reboot, and if it persists reseat the GPUs or RMA the baseboard";
        P2P_DISABLED = "p2p-disabled", [RCCL], Warn, Configuration,
            "KFD marks peer-to-peer DMA between GPUs as not possible",
            "RCCL and hipMemcpyPeer stage through host memory on these links: check that the IOMMU is in passthrough (iommu=pt), ACS is off on the PCIe switches, and the BIOS enables peer-to-peer";
        RCCL_LIBRARY_MISSING = "rccl-library-missing", [RCCL], Fail, Missing,
            "RCCL cannot be loaded or does not report its version",
            "install RCCL (the rccl package) or point rocgate at it with --rocm-path DIR";
        RCCL_INIT_FAILED = "rccl-init-failed", [RCCL], Fail, Runtime,
            "RCCL communicators cannot be created across the GPUs",
            "run rccl-tests' all_reduce_perf on this node for detail (NCCL_DEBUG=INFO); check the interconnect check, `dmesg | grep -i -e xgmi -e amdgpu`, and that RCCL matches the ROCm release";
        RCCL_ALLREDUCE_FAILED = "rccl-allreduce-failed", [RCCL], Fail, Runtime,
            "an RCCL all-reduce returned an error",
            "run rccl-tests' all_reduce_perf on this node for detail (NCCL_DEBUG=INFO); check the interconnect check, `dmesg | grep -i -e xgmi -e amdgpu`, and that RCCL matches the ROCm release";
        RCCL_HANG_ISOLATED = "rccl-hang-isolated", [RCCL], Fail, Hang,
            "the all-reduce hangs or fails whenever one GPU takes part and completes without it: that GPU (or its links) is the culprit",
            "drain the named GPU; check its XGMI/PCIe links (`rocgate run --gpus <gpu>`, `amd-smi xgmi`, `dmesg | grep -i -e xgmi -e <address>`), reset it (<reset>) or power-cycle the node; if it persists, RMA the GPU";
        RCCL_ALLREDUCE_HANG = "rccl-allreduce-hang", [RCCL], Fail, Hang,
            "an RCCL all-reduce did not complete",
            "run rccl-tests' all_reduce_perf on halves of the GPUs to find the one or link that hangs (NCCL_DEBUG=INFO); check `dmesg | grep -i -e xgmi -e amdgpu`";
        RCCL_ALLREDUCE_WRONG = "rccl-allreduce-wrong", [RCCL], Fail, Correctness,
            "an RCCL all-reduce gave wrong sums",
            "the collective corrupted data: rerun rccl-tests with -c 1 to localise the GPU or link; check XGMI/PCIe errors (`dmesg`, `amd-smi metric --ecc`)";
        RCCL_MEMORY_FAILED = "rccl-memory-failed", [RCCL], Fail, Runtime,
            "device memory or streams for an all-reduce cannot be set up",
            "see the hip layer's memcpy check on each GPU";
        RDMA_DEVICE_MISSING = "rdma-device-missing", [NETWORK], Warn, Missing,
            "an RDMA-capable card on the PCI bus has no RDMA device: its RDMA driver (mlx5_ib for NVIDIA cards, bnxt_re for Broadcom's, ionic_rdma for AMD's) is not loaded or failed to probe, so RCCL cannot use it",
            "`lsmod | grep -e mlx5_ib -e bnxt_re -e ionic`, then `sudo modprobe mlx5_ib` (or bnxt_re) and `dmesg | grep -i -e mlx5 -e bnxt -e ionic` for why it did not probe; the RDMA stack comes with the distribution's rdma-core or the vendor's DOCA/OFED and must match the running kernel";
        RDMA_PORT_DISABLED = "rdma-port-disabled", [NETWORK], Warn, Configuration,
            "an RDMA port is set down on purpose (its RoCE netdev set down, or an InfiniBand port disabled by the subnet manager or ibportstate): it carries nothing, and a rail it should be is missing",
            "if the port should carry traffic: `sudo ip link set <netdev> up` (RoCE), or ask the fabric's subnet manager why it disabled the port (`ibportstate`, the UFM's port events); if it is unused by design, waive this code for the node";
        RDMA_PORT_DOWN = "rdma-port-down", [NETWORK], Fail, Hardware,
            "an RDMA port is down while the node's other ports of the same card and port number are up: the GPU traffic that rail carries (RCCL across nodes, GPUDirect RDMA) has no path, or squeezes onto the others",
            "`ibstat <device>` (InfiniBand) or `ip link show <netdev>` and `ethtool <netdev>` (RoCE) show the port; a Polling port has no link partner: reseat or replace the cable or transceiver and check the switch port; an InfiniBand port stuck in INIT or ARMED needs the subnet manager (opensm, UFM) to sweep it";
        RDMA_NO_PORT_UP = "rdma-no-port-up", [NETWORK], Warn, Hardware,
            "no port of some kind of RDMA card on the node is up: its fabric is down, or the cards are not cabled (a node whose NICs are unused here)",
            "if the node should be on the fabric, check the cables, transceivers and switch ports (`ibstat`, `ethtool <netdev>`); if these ports are unused by design, waive this code for the node";
        RDMA_PORT_SLOW = "rdma-port-slow", [NETWORK], Warn, Hardware,
            "an RDMA port trained at a lower rate than the node's other ports of the same card: a lane down, or a speed negotiated down; every collective that crosses this rail runs at its rate",
            "read the port's speed and lanes (`ibstat <device>`, `ethtool <netdev>`); reseat or replace the cable or transceiver, and check the switch port's speed setting";
        ROCE_GID_MISSING = "roce-gid-missing", [NETWORK], Warn, Configuration,
            "a RoCE port that is up has no RoCE v2 GID with a routable address (an IPv4 address, or IPv6 that is not link-local): RCCL's InfiniBand transport finds no GID to route on across a layer-3 fabric",
            "give the port's netdev its address (`ip addr show <netdev>`; the site's netplan or NetworkManager configuration), then `cat /sys/class/infiniband/<device>/ports/1/gids/*` lists the new GIDs";
        ROCE_MTU_SMALL = "roce-mtu-small", [NETWORK], Warn, Configuration,
            "a RoCE port's netdev MTU is below 4200, so the port's RoCE MTU stays below 4096 (Linux `iboe_get_mtu` takes 96 bytes of headers from the netdev MTU): every RDMA message is cut into smaller packets",
            "set the netdev's MTU to 9000 (or at least 4200) here and on the switch ports (`ip link set <netdev> mtu 9000`, then in the site's network configuration to keep it)";
        NIC_FIRMWARE_DIFFERS = "nic-firmware-differs", [NETWORK], Warn, Configuration,
            "RDMA cards of one model on the node run different firmware: a half-finished update, or a card swapped in from another batch",
            "update the odd cards to the firmware the others run (`mlxfwmanager` / `mstflint` for NVIDIA cards, `niccli` for Broadcom's), then reset them or reboot; if the difference is intended, waive this code for the node";
        NIC_PCIE_LINK_DEGRADED = "nic-pcie-link-degraded", [NETWORK], Warn, Hardware,
            "an RDMA card's PCIe link trained narrower or slower than both of its ends can: the card cannot feed its port at full rate (a 400 Gb/s port needs Gen5 x16)",
            "reseat the card or its riser; `sudo lspci -vv -s <address>` shows LnkCap and LnkSta; check the slot's link setting in the BIOS";
        GPU_NIC_FAR = "gpu-nic-far", [NETWORK], Warn, Configuration,
            "on a node with an RDMA card per GPU, a GPU has none on its PCIe switch, root complex or NUMA node: its GPUDirect RDMA traffic crosses the sockets' interconnect (or is staged through host memory), and RCCL's rings through it slow down",
            "find where the cards sit (`lspci -tv`, `cat /sys/class/infiniband/*/device/numa_node`) and move the odd card to a slot on the GPU's root complex, as the platform's manual pairs slots with GPUs; if the slot is right, check the BIOS's NUMA (SRAT) setting";
        PERF_BELOW_FLOOR = "perf-below-floor", [HIP, ROCBLAS, RCCL], Fail, Performance,
            "a measured bandwidth or throughput is below its floor",
            "rule out a busy GPU (`amd-smi process`), power capping or clocks held low (`amd-smi metric --power --clock`), and a degraded PCIe/XGMI link; compare with the same GPU's previous runs (rocgate compare) before suspecting hardware";
        CHECK_TIMEOUT = "check-timeout", [], Fail, Hang,
            "a check did not finish within its timeout; the rest of its GPU is blocked",
            "the layer stopped responding; rerun it alone (<rerun>) and read the kernel log (dmesg) for GPU resets or hangs";
        CHECK_CRASH = "check-crash", [], Fail, Crash,
            "a check's process died (a signal, or an abort in a vendor library)",
            "read the check's captured output for the library's last words; rerun it alone (<rerun>) and read the kernel log (dmesg)";
        GPU_VANISHED = "gpu-vanished", [], Fail, Missing,
            "a GPU that was on the node when the run started is gone from the KFD topology and the PCI bus: it fell off the bus during the run",
            "read the kernel log for why: `dmesg | grep -i -e 'link down' -e aer -e 'surprise' -e amdgpu` (a PCIe link down, AER errors, amdgpu losing the device); a cold power cycle usually brings it back; if it falls off again, reseat the GPU, check its riser, cable and power, or replace it";
        INTERNAL_ERROR = "internal-error", [], Fail, Internal,
            "rocgate reached a state it should not (a planning defect)",
            "report this as a rocgate bug, with the output of `rocgate inventory --json`";
        RAS_BAD_PAGES_PAST_THRESHOLD = "ras-bad-pages-past-threshold", [AMDGPU], Fail, Hardware,
            "the GPU has retired more VRAM pages than the driver's bad-page threshold: with the default (-1) or -2 amdgpu prints \"reaches threshold value\" and asks for AMD's Service Action Guide while it keeps the GPU running; with a threshold the user set it marks the GPU bad (RMA) and will not run it after the next driver load",
            "take the GPU out of service and follow AMD's Service Action Guide (RMA); the retired pages are listed in /sys/bus/pci/devices/<address>/ras/gpu_vram_bad_pages and `amd-smi bad-pages`, and `dmesg | grep -i threshold` shows the driver's message; raising amdgpu.bad_page_threshold only hides it";
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn codes_are_unique_lowercase_and_complete() {
        let mut seen = BTreeSet::new();
        for c in codes::ALL {
            assert!(seen.insert(c.code), "{} twice", c.code);
            assert!(
                c.code
                    .chars()
                    .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-'),
                "{}",
                c.code
            );
            assert!(
                !c.meaning.is_empty() && !c.next_step.is_empty(),
                "{}",
                c.code
            );
        }
        assert_eq!(lookup("kfd-missing"), Some(&codes::KFD_MISSING));
        assert!(lookup("no-such-code").is_none());
    }

    /// Checks build findings from the catalogue only: a code made up at a
    /// call site would escape the catalogue and its coverage test.
    #[test]
    fn no_check_makes_up_a_finding_code() {
        fn visit(dir: &std::path::Path, out: &mut Vec<String>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    visit(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("findings.rs") {
                    let text = std::fs::read_to_string(&p).unwrap();
                    let code = text.split("#[cfg(test)]").next().unwrap_or("");
                    if code.contains("Finding::new(") {
                        out.push(p.display().to_string());
                    }
                }
            }
        }
        let mut offenders = Vec::new();
        visit(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut offenders,
        );
        assert!(
            offenders.is_empty(),
            "Finding::new outside the catalogue: {offenders:?}"
        );
    }

    #[test]
    fn a_finding_takes_its_code_and_default_next_step() {
        let f = codes::KFD_MISSING.finding("no /dev/kfd");
        assert_eq!(f.code, "kfd-missing");
        assert_eq!(f.next_step, codes::KFD_MISSING.next_step);
        let f = codes::KFD_MISSING.finding_next("no /dev/kfd", "do this");
        assert_eq!(f.next_step, "do this");
    }
}
