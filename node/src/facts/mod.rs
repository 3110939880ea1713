//! What the node is: everything the node layers read, gathered once per run
//! through the sysroot. Read failures are kept as values for the checks to
//! report.

pub mod access;
pub mod acs;
pub mod aer;
pub mod bad_page_threshold;
pub mod blacklist;
pub mod capture;
pub mod container;
pub mod dkms;
pub mod drm;
pub mod gpu_events;
pub mod gpu_metrics;
pub mod gpus;
pub mod hwmon;
pub mod ids;
pub mod kernel_log;
pub mod kfd;
pub mod kfd_procs;
pub mod missing;
pub mod module;
pub mod pci;
pub mod properties;
pub mod ras;
pub mod rdma;
pub mod system;
pub mod telemetry;

use crate::{ReadError, Sysroot};
use std::sync::OnceLock;

/// The node's facts.
#[derive(Debug)]
pub struct NodeFacts {
    /// Where they were read from.
    pub sysroot: Sysroot,
    /// AMD GPUs on the PCI bus.
    pub pci: Result<pci::PciScan, ReadError>,
    /// The KFD topology.
    pub kfd: Result<kfd::Topology, ReadError>,
    /// DRM cards and render nodes.
    pub drm: drm::DrmNodes,
    /// The amdgpu module.
    pub amdgpu: module::AmdgpuModule,
    /// The running kernel's release.
    pub kernel_release: Result<String, ReadError>,
    /// Settings that keep amdgpu from loading (kernel command line and
    /// modprobe.d), and what of those could not be read.
    pub blacklist: blacklist::Blacklist,
    /// DKMS amdgpu builds.
    pub dkms: dkms::DkmsAmdgpu,
    /// The sysroot's capture record (`Err` when it is malformed).
    pub capture: Result<Option<capture::Capture>, String>,
    /// The user whose access is checked, when known.
    pub user: Option<access::User>,
    /// `/etc/group`.
    pub groups: Vec<access::Group>,
    /// The node's GPUs.
    pub gpus: Vec<gpus::Gpu>,
    /// The container rocgate runs in, if it runs in one.
    pub container: Option<container::Container>,
    /// The processes KFD listed when the node was first read, before any
    /// of rocgate's own workers opened a GPU (rocgate's own pid left out).
    pub kfd_processes: Result<Option<kfd_procs::KfdProcesses>, ReadError>,
    kernel_log: OnceLock<Result<kernel_log::KernelLog, String>>,
    firmware_events: OnceLock<Vec<kernel_log::FirmwareEvent>>,
    gpu_events: OnceLock<Vec<gpu_events::GpuEvent>>,
    rdma: OnceLock<Result<Option<rdma::RdmaScan>, ReadError>>,
    /// ROCm install directories named by how rocgate was started on a live
    /// node (`--rocm-path`, then `ROCM_PATH`), read before `/opt/rocm` for
    /// the ROCm release: Spack, module and relocated installs live there.
    pub rocm_dirs: Vec<String>,
}

impl NodeFacts {
    /// Reads the node through `sysroot`. Never fails: what cannot be read is
    /// recorded for the checks to report.
    pub fn discover(sysroot: Sysroot) -> NodeFacts {
        let pci = pci::scan(&sysroot);
        let kfd = kfd::read(&sysroot);
        let own_pid = sysroot.is_live().then(std::process::id);
        let kfd_processes = kfd_procs::read(&sysroot, own_pid);
        let gpus = gpus::enumerate(kfd.as_ref().ok(), pci.as_ref().ok());
        let cmdline = sysroot.read_opt("/proc/cmdline");
        let capture = capture::read(&sysroot);
        let user = access::current_user(&sysroot, capture.as_ref().ok().and_then(Option::as_ref));
        NodeFacts {
            drm: drm::read(&sysroot),
            amdgpu: module::read_amdgpu(&sysroot),
            kernel_release: module::kernel_release(&sysroot),
            blacklist: blacklist::scan(&sysroot, &cmdline),
            dkms: dkms::scan(&sysroot),
            groups: access::read_groups(&sysroot),
            container: container::detect(&sysroot),
            rocm_dirs: Vec::new(),
            kfd_processes,
            capture,
            user,
            gpus,
            pci,
            kfd,
            sysroot,
            kernel_log: OnceLock::new(),
            firmware_events: OnceLock::new(),
            gpu_events: OnceLock::new(),
            rdma: OnceLock::new(),
        }
    }

    /// The RDMA network cards, read on first use (only the network layer
    /// reads them): `Ok(None)` when the node has no RDMA class.
    pub fn rdma(&self) -> &Result<Option<rdma::RdmaScan>, ReadError> {
        self.rdma.get_or_init(|| rdma::scan(&self.sysroot))
    }

    /// The kernel log, read on first use (it can be large).
    pub fn kernel_log(&self) -> &Result<kernel_log::KernelLog, String> {
        self.kernel_log.get_or_init(|| {
            kernel_log::read(&self.sysroot).map_err(|e| match (&self.container, self.sysroot.host_root()) {
                // In a container the log files are the image's.
                (Some(c), None) => format!(
                    "{e}; in a {} container, run privileged (for /dev/kmsg) or mount the host's / read-only at /host (`-v /:/host:ro`) for its /var/log",
                    c.runtime
                ),
                _ => e,
            })
        })
    }

    /// GPU and bus events in the kernel log (empty when the log is
    /// unreadable; [`NodeFacts::kernel_log`] says why).
    pub fn gpu_events(&self) -> &[gpu_events::GpuEvent] {
        self.gpu_events.get_or_init(|| match self.kernel_log() {
            Ok(log) => gpu_events::events(&log.lines),
            Err(_) => Vec::new(),
        })
    }

    /// Firmware and GPU-init errors in the kernel log (empty when the log is
    /// unreadable; [`NodeFacts::kernel_log`] says why).
    pub fn firmware_events(&self) -> &[kernel_log::FirmwareEvent] {
        self.firmware_events
            .get_or_init(|| match self.kernel_log() {
                Ok(log) => kernel_log::firmware_events(&log.lines),
                Err(_) => Vec::new(),
            })
    }

    /// The GPU with inventory index `index`.
    pub fn gpu(&self, index: u32) -> Option<&gpus::Gpu> {
        self.gpus.get(index as usize)
    }

    /// The capture record, if the sysroot has a valid one.
    pub fn capture(&self) -> Option<&capture::Capture> {
        self.capture.as_ref().ok().and_then(Option::as_ref)
    }

    /// Probes read-write access to a device node.
    pub fn access(&self, host: &str) -> access::Access {
        access::probe(&self.sysroot, self.capture(), host)
    }

    /// Number of physical AMD GPUs on the PCI bus.
    pub fn pci_gpu_count(&self) -> usize {
        self.pci.as_ref().map_or(0, |p| p.gpus.len())
    }
}
