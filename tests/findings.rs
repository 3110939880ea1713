//! Every finding code of the catalogue is produced by a fixture node or an
//! injected fault, through the real binary; every code a run reports is in
//! the catalogue; and a code's severity matches its check (advisory codes
//! come from checks that do not gate, codes that stop the stack from checks
//! that do). The README's list of codes and FINDINGS.md are the catalogue's.

//!
//! A data-driven harness (`harness = false`): each case is a trial of its
//! own, named by the codes it must produce, so one runs alone
//! (`cargo test --test findings pcie-acs-enabled`) and a failure hides no
//! other case.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "util/mod.rs"]
mod util;

use libtest_mimic::{Arguments, Failed, Trial};
use rocgate_suites::findings::{self, Severity};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;
use util::{TOPO, fake_rocm, node, on_sysroot, remove_io_links, rocgate, set_prop};

/// Where a test reaches a GPU's sysfs files: through its bus entry, wherever
/// the device sits below its bridges.
const PCI: &str = "sys/bus/pci/devices";

/// One way to make rocgate report findings.
struct Case {
    /// What the case breaks.
    name: &'static str,
    /// The fixture scenario it starts from.
    scenario: &'static str,
    /// Changes to the written node.
    node: fn(&Path),
    /// Whether the fake ROCm libraries run the runtime layers, and changes
    /// to their directory.
    fake: Option<fn(&Path)>,
    /// `ROCGATE_FAKE_FAULTS`.
    faults: &'static str,
    /// Extra environment.
    env: &'static [(&'static str, &'static str)],
    /// Extra arguments to `rocgate run`.
    args: &'static [&'static str],
    /// Codes the run must report.
    codes: &'static [&'static str],
}

fn keep(_: &Path) {}

/// gpu0's VCN firmware did not load, and amdgpu went on without it (a
/// load failure without `Fatal error during GPU init` after it).
fn optional_firmware_missing(root: &Path) {
    append(
        &root.join("var/log/kern.log"),
        "[    5.576634] amdgpu 0000:05:00.0: Direct firmware load for amdgpu/vcn_4_0_3.bin failed with error -2\n",
    );
}

/// gpu3 of an 8x MI300X on another MEC firmware and VBIOS than the rest.
fn one_gpu_on_other_firmware(root: &Path) {
    let dev = root.join(PCI).join("0000:65:00.0");
    fs::write(dev.join("fw_version/mec_fw_version"), "0x00000099\n").unwrap();
    fs::write(dev.join("vbios_version"), "113-M3000100-XXX\n").unwrap();
}

/// Where a test reaches an RDMA device's files.
const RDMA: &str = "sys/class/infiniband";

/// The netdev of the RDMA device at `device` (its card's only one).
fn netdev_of(device: &Path) -> std::path::PathBuf {
    let net = device.join("device/net");
    let first = fs::read_dir(&net).unwrap().next().unwrap().unwrap();
    net.join(first.file_name())
}

/// Every ConnectX-7 port down, as no link partner leaves it.
fn every_rdma_port_down(root: &Path) {
    for i in 0..8 {
        let port = root.join(format!("{RDMA}/mlx5_{i}/ports/1"));
        fs::write(port.join("state"), "1: DOWN\n").unwrap();
        fs::write(port.join("phys_state"), "2: Polling\n").unwrap();
    }
}

/// bnxt_re3's netdev set down (its port DOWN, Disabled, as bnxt_re shows a
/// netdev without link), and bnxt_re5's RDMA device gone (bnxt_re did not
/// probe that card).
fn roce_rail_set_down_and_one_unprobed(root: &Path) {
    let port = root.join(format!("{RDMA}/bnxt_re3/ports/1"));
    fs::write(port.join("state"), "1: DOWN\n").unwrap();
    fs::write(port.join("phys_state"), "3: Disabled\n").unwrap();
    fs::write(
        netdev_of(&root.join(format!("{RDMA}/bnxt_re3"))).join("flags"),
        "0x1002\n",
    )
    .unwrap();
    fs::remove_file(root.join(format!("{RDMA}/bnxt_re5"))).unwrap();
}

/// bnxt_re1's netdev at the Ethernet default MTU, bnxt_re4 without its
/// IPv4 address (its two GIDs the zero GID, as the kernel shows removed
/// entries), bnxt_re6 on other firmware, bnxt_re7's link trained at x8.
fn roce_rails_misconfigured(root: &Path) {
    let dev = |i: u32| root.join(format!("{RDMA}/bnxt_re{i}"));
    let netdev = |i: u32| netdev_of(&dev(i));
    fs::write(netdev(1).join("mtu"), "1500\n").unwrap();
    for gid in ["2", "3"] {
        fs::write(
            dev(4).join("ports/1/gids").join(gid),
            "0000:0000:0000:0000:0000:0000:0000:0000\n",
        )
        .unwrap();
        for attr in ["types", "ndevs"] {
            fs::remove_file(dev(4).join("ports/1/gid_attrs").join(attr).join(gid)).unwrap();
        }
    }
    fs::write(dev(6).join("fw_ver"), "229.1.123.0\n").unwrap();
    fs::write(dev(7).join("device/current_link_width"), "8\n").unwrap();
}

fn append(path: &Path, text: &str) {
    let mut s = fs::read_to_string(path).unwrap_or_default();
    s.push_str(text);
    fs::write(path, s).unwrap();
}

/// gpu3's log: a reset it came back from (`amdgpu_device_gpu_recover`).
fn gpu_reset_recovered(root: &Path) {
    append(
        &root.join("var/log/kern.log"),
        "[80000.100000] amdgpu 0000:65:00.0: amdgpu: GPU reset begin!\n\
         [80000.200000] amdgpu 0000:65:00.0: amdgpu: GPU mode1 reset\n\
         [80001.900000] amdgpu 0000:65:00.0: amdgpu: GPU reset(1) succeeded!\n",
    );
}

fn thp_never(root: &Path) {
    fs::write(
        root.join("sys/kernel/mm/transparent_hugepage/enabled"),
        "always madvise [never]\n",
    )
    .unwrap();
}

/// gpu3's root port with ACS P2P Egress Control on (the ACS Control
/// register the fixture lays at 0x16e), and one CPU on schedutil.
fn host_slows_gpu_traffic(root: &Path) {
    let config = root.join(format!("{PCI}/0000:60:01.1/config"));
    let mut bytes = fs::read(&config).unwrap();
    bytes[0x16e] = 0x20;
    fs::write(&config, bytes).unwrap();
    fs::write(
        root.join("sys/devices/system/cpu/cpufreq/policy3/scaling_governor"),
        "schedutil\n",
    )
    .unwrap();
}

fn iommu_group_blocked(root: &Path) {
    // gpu2's IOMMU group (the fixtures put GPU n in group 40 + n).
    fs::write(root.join("sys/kernel/iommu_groups/42/type"), "blocked\n").unwrap();
}

fn node_breaks(root: &Path) {
    // gpu0 (KFD node 2): its PCI device gone, KFD still lists it.
    fs::remove_file(root.join("sys/bus/pci/devices/0000:05:00.0")).unwrap();
    // gpu1: amdgpu abandoned its init with PSP errors, no file named.
    append(
        &root.join("var/log/kern.log"),
        "[    7.100000] amdgpu 0000:26:00.0: amdgpu: PSP load sys drv failed!\n[    7.100100] amdgpu 0000:26:00.0: amdgpu: Fatal error during GPU init\n",
    );
    // gpu2: no firmware versions at all; gpu3: a damaged one.
    fs::remove_dir_all(root.join(format!("{PCI}/0000:46:00.0/fw_version"))).unwrap();
    fs::write(
        root.join(format!("{PCI}/0000:65:00.0/fw_version/sdma_fw_version")),
        "garbage\n",
    )
    .unwrap();
    // The driver reports no version of any kind.
    fs::remove_file(root.join("sys/module/amdgpu/version")).unwrap();
    fs::remove_file(root.join("sys/module/amdgpu/srcversion")).unwrap();
    // gpu4 (KFD node 6) claims gpu5's render node; gpu6 has no compute
    // units; gpu7's gfx target is nothing KFD or rocgate knows.
    set_prop(root, 6, "drm_render_minor", "133");
    set_prop(root, 8, "simd_per_cu", "0");
    set_prop(root, 9, "gfx_target_version", "91600");
    set_prop(root, 9, "device_id", "4660");
    fs::write(root.join(format!("{PCI}/0000:e5:00.0/device")), "0x1234\n").unwrap();
}

fn drivers_and_nodes(root: &Path) {
    // gpu0 unbound from amdgpu; gpu1's render node file gone; gpu2 with no
    // render minor in KFD.
    fs::remove_file(root.join(format!("{PCI}/0000:05:00.0/driver"))).unwrap();
    fs::remove_file(root.join("dev/dri/renderD129")).unwrap();
    set_prop(root, 4, "drm_render_minor", "0");
    // The first XGMI link of gpu3 (KFD node 5) gone both ways.
    remove_io_links(root, 5);
}

fn device_open_fails(root: &Path) {
    let p = root.join("rocgate-capture.toml");
    let text = fs::read_to_string(&p)
        .unwrap()
        .replacen("open = \"ok\"", "open = \"ENOMEM\"", 1);
    fs::write(p, text).unwrap();
}

fn topology_damaged(root: &Path) {
    fs::write(
        root.join(format!("{TOPO}/3/properties")),
        [0xff, 0xfe, b'\n'],
    )
    .unwrap();
}

/// KFD node 5's properties do not answer (a FIFO stands for the wedged file).
fn kfd_file_hangs(root: &Path) {
    util::wedge(&root.join(format!("{TOPO}/5/properties")));
}

fn pci_class_garbled(root: &Path) {
    fs::write(
        root.join("sys/bus/pci/devices/0000:26:00.0/class"),
        "display\n",
    )
    .unwrap();
}

fn no_pci_bus(root: &Path) {
    fs::remove_dir_all(root.join("sys/bus/pci/devices")).unwrap();
}

fn no_p2p(root: &Path) {
    let link = root.join(format!("{TOPO}/2/io_links/1/properties"));
    let text = fs::read_to_string(&link)
        .unwrap()
        .replace("flags 1", "flags 17");
    fs::write(&link, text).unwrap();
}

fn partition_elsewhere(root: &Path) {
    set_prop(root, 5, "location_id", &(0x27u32 << 8 | 3).to_string());
}

fn old_gpu_new_rocm(root: &Path) {
    // ROCm 7.1.1 supports neither an MI25 nor kernel 5.4.
    fs::create_dir_all(root.join("opt/rocm/.info")).unwrap();
    fs::write(root.join("opt/rocm/.info/version"), "7.1.1-66\n").unwrap();
}

fn new_kernel(root: &Path) {
    let kernel = "6.19.0-1-generic";
    fs::write(
        root.join("proc/sys/kernel/osrelease"),
        format!("{kernel}\n"),
    )
    .unwrap();
    let dkms = root.join(format!("lib/modules/{kernel}/updates/dkms"));
    fs::create_dir_all(&dkms).unwrap();
    fs::write(dkms.join("amdgpu.ko.zst"), "dkms").unwrap();
}

/// Replaces the libraries with files that are not libraries: removing them
/// would let the system loader find a host's own ROCm.
fn damage_libraries(dir: &Path) {
    for lib in [
        "libhsa-runtime64.so.1",
        "libamdhip64.so.6",
        "libamdhip64.so",
        "librocblas.so.4",
        "libMIOpen.so.1",
        "librccl.so.1",
    ] {
        let path = dir.join("lib").join(lib);
        fs::remove_file(&path).unwrap();
        fs::write(&path, "not a library").unwrap();
    }
}

fn broken_hiprtc(dir: &Path) {
    fs::write(dir.join("lib/libhiprtc.so.6"), "not a library").unwrap();
}

/// A thresholds file whose host-to-device floor no link meets.
const FLOORS: &str = "schema_version = 1\nmargin = 0.05\n\n[tolerance]\nfp64 = 1e-12\nfp32 = 1e-5\nfp16 = 2e-3\nbf16 = 1.6e-2\n\n[[floor]]\ngpu = \"gfx942\"\nmetric = \"h2d_gbps\"\nvalue = 1000000.0\nsource = \"a floor no link meets\"\n\n[memtest]\nvram_share = 0.0001\n";

fn cases() -> Vec<Case> {
    let case = |name, scenario, node: fn(&Path), codes| Case {
        name,
        scenario,
        node,
        fake: None,
        faults: "",
        env: &[],
        args: &["--no-gate"],
        codes,
    };
    let fault = |name, faults, args, codes| Case {
        name,
        scenario: "mi300x-8",
        node: keep,
        fake: Some(keep),
        faults,
        env: &[],
        args,
        codes,
    };
    vec![
        case(
            "transparent huge pages disabled",
            "mi300x-8",
            thp_never,
            &["thp-disabled"],
        ),
        case(
            "egress control on a root port, one CPU on schedutil",
            "mi300x-8",
            host_slows_gpu_traffic,
            &["pcie-acs-enabled", "cpu-governor-not-performance"],
        ),
        case(
            "an IOMMU group left blocked",
            "mi300x-8",
            iommu_group_blocked,
            &["iommu-dma-blocked"],
        ),
        case(
            "node breaks",
            "mi300x-8",
            node_breaks,
            &[
                "gpu-not-on-pci",
                "gpu-init-failed",
                "firmware-not-reported",
                "firmware-version-unreadable",
                "amdgpu-version-unknown",
                "render-minor-mismatch",
                "no-compute-units",
                "gfx-target-unknown",
            ],
        ),
        case(
            "a firmware file that failed to load on a GPU that initialised",
            "mi300x-8",
            optional_firmware_missing,
            &["firmware-load-degraded"],
        ),
        case(
            "every InfiniBand port of the node down: no fabric, or cards unused here",
            "mi300x-8-ib",
            every_rdma_port_down,
            &["rdma-no-port-up"],
        ),
        case(
            "RoCE rails: one netdev set down by its administrator, one card whose RDMA device never came",
            "mi300x-8-roce",
            roce_rail_set_down_and_one_unprobed,
            &["rdma-port-disabled", "rdma-device-missing"],
        ),
        case(
            "RoCE rails: one netdev at MTU 1500, one port without an address, one card on other firmware, one card's PCIe link at x8",
            "mi300x-8-roce",
            roce_rails_misconfigured,
            &[
                "roce-mtu-small",
                "roce-gid-missing",
                "nic-firmware-differs",
                "nic-pcie-link-degraded",
            ],
        ),
        case(
            "one GPU on other firmware and VBIOS than the others of its model",
            "mi300x-8",
            one_gpu_on_other_firmware,
            &["firmware-differs-within-node"],
        ),
        case(
            "a day of amdgpu's log: a failed reset, a timeout, a page fault, throttling, a shader error, RAS, an overheat",
            "gpu-faults-logged",
            keep,
            &[
                "gpu-reset-failed",
                "gpu-job-timeout",
                "gpu-page-fault",
                "gpu-throttled",
                "gpu-shader-error",
                "gpu-ras-event",
                "gpu-thermal-shutdown",
            ],
        ),
        case(
            "a GPU reset and recovered",
            "mi300x-8",
            gpu_reset_recovered,
            &["gpu-reset"],
        ),
        Case {
            args: &["--no-gate", "--since", "1h"],
            ..case(
                "the same day's log judged over the last hour",
                "gpu-faults-logged",
                keep,
                &["gpu-event-history"],
            )
        },
        case(
            "the PCI core's and the IOMMU's log: link down, fatal and non-fatal AER, an IO page fault",
            "bus-faults-logged",
            keep,
            &[
                "pcie-link-down",
                "pcie-fatal-error",
                "pcie-error-logged",
                "iommu-page-fault",
            ],
        ),
        case(
            "drivers and render nodes",
            "mi300x-8",
            drivers_and_nodes,
            &[
                "amdgpu-probe-failed",
                "render-node-missing",
                "render-minor-missing",
                "xgmi-link-missing",
            ],
        ),
        case(
            "/dev/kfd open fails",
            "mi300x-8",
            device_open_fails,
            &["device-open-failed"],
        ),
        case(
            "damaged topology",
            "mi300x-8",
            topology_damaged,
            &["kfd-topology-unreadable"],
        ),
        case(
            "no PCI bus in sysfs",
            "mi300x-8",
            no_pci_bus,
            &["pci-sysfs-unreadable"],
        ),
        case(
            "a GPU's PCI class is garbage",
            "mi300x-8",
            pci_class_garbled,
            &["pci-entry-garbled"],
        ),
        case(
            "a KFD file that does not answer",
            "mi300x-8",
            kfd_file_hangs,
            &["sysfs-read-timeout"],
        ),
        case(
            "no peer-to-peer DMA",
            "mi210-8-two-hives",
            no_p2p,
            &["p2p-disabled"],
        ),
        case(
            "partition on another device",
            "mi300x-8-cpx",
            partition_elsewhere,
            &["partition-mismatch"],
        ),
        case(
            "old GPU, new ROCm",
            "mi25-old-kernel",
            old_gpu_new_rocm,
            &["compat-gpu-unsupported"],
        ),
        case(
            "unlisted kernel",
            "mi300x-8",
            new_kernel,
            &["compat-kernel-unsupported"],
        ),
        fault(
            "hsa faults",
            "hsa_agent_get_info@gpu0=wrong;hsa_amd_memory_pool_get_info@gpu1=wrong;hsa_iterate_agents@gpu2=wrong;hsa_amd_agent_iterate_memory_pools@gpu3=error:0x1001;hsa_queue_create@gpu4=error:0x1002;hsa_signal_create@gpu5=error:0x1008;hsa_executable_load_agent_code_object@gpu6=error:0x100F;hsa_signal_store_screlease@gpu7=error:0x1016",
            &[],
            &[
                "hsa-agent-mismatch",
                "hsa-no-device-memory",
                "hsa-no-system-memory",
                "hsa-memory-pools-failed",
                "hsa-queue-failed",
                "hsa-signal-failed",
                "hsa-code-object-failed",
                "hsa-dispatch-failed",
            ],
        ),
        fault(
            "a GPU falls off the bus during the run",
            "hsa_init@gpu3=vanish",
            &[],
            &["gpu-vanished"],
        ),
        fault(
            "wrong data and hip faults",
            "hsa_signal_store_screlease@gpu0=wrong;hsa_amd_memory_async_copy@gpu1=negative-signal;hsa_amd_memory_async_copy@gpu2=wrong;hsa_signal_store_screlease@gpu3=error:43;hipDeviceGetAttribute@gpu4=wrong;hipDeviceGetAttribute@gpu5=error:1;hipMemcpy@gpu6=error:1;hipMemcpy@gpu7=wrong",
            &[],
            &[
                "hsa-dispatch-wrong",
                "hsa-copy-failed",
                "hsa-copy-corrupt",
                "gpu-memory-fault",
                "hip-device-mismatch",
                "hip-device-failed",
                "hip-memcpy-failed",
                "hip-memcpy-corrupt",
            ],
        ),
        fault(
            "kernels, hiprtc, a crash and a hang",
            "hipModuleLoadData@gpu0=error:200;hipModuleLaunchKernel@gpu1=error:719;hipModuleLaunchKernel@gpu2=wrong;hiprtcCompileProgram@gpu3=error:6;hiprtcCompileProgram@gpu4=wrong;hipMemcpy@gpu5=crash;hsa_queue_create@gpu6=hang",
            &["--timeout", "hsa::queue=5"],
            &[
                "hip-module-load-failed",
                "hip-launch-failed",
                "hip-kernel-wrong",
                "hiprtc-failed",
                "hiprtc-wrong",
                "check-crash",
                "check-timeout",
            ],
        ),
        fault(
            "runtimes that start without agents or devices",
            "hsa_iterate_agents@gpu*=error:0x1000;hipGetDeviceCount@gpu*=error:3",
            &["--no-gate"],
            &["hsa-agents-failed", "hip-init-failed"],
        ),
        fault(
            "runtimes that do not start",
            "hsa_init@gpu*=error:0x1008;hipGetDeviceCount@gpu*=error:100",
            &["--no-gate"],
            &["hsa-init-failed", "hip-no-device"],
        ),
        fault(
            "an all-reduce that hangs whenever gpu3 takes part",
            "ncclAllReduce@gpu3=hang",
            &["--tier", "standard", "--timeout", "rccl::allreduce=4"],
            &["rccl-hang-isolated"],
        ),
        fault(
            "a wedged GPU",
            "hsa_init@gpu3=hang",
            &["--timeout", "hsa::init=4", "--timeout", "hsa::agent=8"],
            &["gpu-wedged"],
        ),
        Case {
            // GEMMs as fast as can be, so the extended tier's time goes to
            // the peer copies.
            env: &[
                ("ROCGATE_FAKE_GEMM_TFLOPS", "100000"),
                ("ROCGATE_FAKE_P2P_GBPS", "xgmi=400"),
            ],
            ..fault(
                "a peer-to-peer copy that arrives corrupted, and a stuck VRAM bit",
                "hipMemcpyPeer@gpu1=wrong;memtest_write@gpu2=wrong",
                &[
                    "--tier",
                    "extended",
                    "--gpus",
                    "0,1,2",
                    "--thresholds",
                    "FLOORS",
                ],
                &["p2p-copy-corrupt", "vram-test-failed"],
            )
        },
        Case {
            env: &[
                ("ROCGATE_FAKE_GEMM_TFLOPS", "100000"),
                ("ROCGATE_FAKE_P2P_GBPS", "xgmi=400"),
            ],
            ..fault(
                "a GPU that refuses its peer access",
                "hipDeviceEnablePeerAccess@gpu2=error:217",
                &["--tier", "extended", "--gpus", "0,2"],
                &["p2p-copy-failed"],
            )
        },
        // A filter rocgate inherited is the caller's view, not a fault
        // (tests/health.rs); a GPU ROCr could not open is one.
        fault(
            "a GPU ROCr could not open, one HIP misplaces",
            "hsa_init@gpu3=wrong;hipDeviceGetPCIBusId@gpu5=wrong",
            &["--no-gate"],
            &["hsa-agent-missing", "hip-device-missing"],
        ),
        Case {
            fake: Some(damage_libraries),
            ..fault(
                "no ROCm libraries",
                "",
                &["--no-gate", "--tier", "standard", "--gpus", "0"],
                &[
                    "hsa-library-missing",
                    "hip-library-missing",
                    "rocblas-library-missing",
                    "miopen-library-missing",
                    "rccl-library-missing",
                ],
            )
        },
        Case {
            fake: Some(broken_hiprtc),
            ..fault(
                "a damaged libhiprtc",
                "",
                &["--gpus", "0"],
                &["hiprtc-library-missing"],
            )
        },
        fault(
            "math library faults",
            "rocblas_create_handle@gpu0=error:6;rocblas_sgemm@gpu1=error:6;rocblas_sgemm@gpu2=wrong;rocblas_sgemm@gpu3=error:15;miopenCreate@gpu4=error:3;miopenConvolutionForward@gpu5=error:3;miopenConvolutionForward@gpu6=wrong;rocblas_create_handle@gpu7=no-binary;ncclAllReduce@gpu*=wrong",
            &["--tier", "standard"],
            &[
                "rocblas-handle-failed",
                "rocblas-gemm-failed",
                "rocblas-gemm-wrong",
                "rocblas-no-kernels-for-arch",
                "miopen-handle-failed",
                "miopen-conv-failed",
                "miopen-conv-wrong",
                "no-binary-for-gpu",
                "rccl-allreduce-wrong",
            ],
        ),
        fault(
            "no device memory for the libraries",
            "hipMalloc@gpu*=error:2",
            &["--tier", "standard", "--no-gate", "--gpus", "0,1"],
            &[
                "rocblas-memory-failed",
                "miopen-memory-failed",
                "rccl-memory-failed",
            ],
        ),
        fault(
            "communicators that do not form",
            "ncclCommInitAll@gpu*=error:3",
            &["--tier", "standard", "--gpus", "0,1"],
            &["rccl-init-failed"],
        ),
        fault(
            "an all-reduce that fails",
            "ncclAllReduce@gpu*=error:3",
            &["--tier", "standard", "--gpus", "0,1"],
            &["rccl-allreduce-failed"],
        ),
        fault(
            "an all-reduce that never completes",
            "hipStreamQuery@gpu*=error:600",
            &[
                "--tier",
                "standard",
                "--gpus",
                "0,1",
                "--timeout",
                "rccl::allreduce=6",
            ],
            &["rccl-allreduce-hang"],
        ),
        Case {
            env: &[(
                "ROCGATE_FAKE_LOAD",
                "gpu0=hot;gpu1=warm;gpu2=throttle;gpu3=lowpower;gpu4=ue:3;gpu5=ce:3;gpu6=drop:6;gpu7=flip:4",
            )],
            ..fault(
                "a burn-in: a hot GPU, a warm one, a throttled one, one that never reaches full power, an uncorrectable and a corrected error, a GPU lost, one bit flipped",
                "",
                &[
                    "--tier",
                    "burnin",
                    "--duration",
                    "15s",
                    "--only",
                    "hip::burnin",
                ],
                &[
                    "gpu-over-thermal-limit",
                    "gpu-near-thermal-limit",
                    "gpu-clocks-collapsed",
                    "gpu-power-out-of-band",
                    "gpu-errors-under-load",
                    "gpu-corrected-under-load",
                    "gpu-lost-under-load",
                    "gpu-result-mismatch",
                ],
            )
        },
        Case {
            env: &[("ROCGATE_FAKE_LOAD", "gpu0=thermal:2")],
            ..fault(
                "a burn-in whose GPU its SMU holds back for heat while its clock stays up",
                "",
                &[
                    "--tier",
                    "burnin",
                    "--duration",
                    "8s",
                    "--gpus",
                    "0",
                    "--only",
                    "hip::burnin",
                ],
                &["gpu-thermal-throttled"],
            )
        },
        fault(
            "a floor no GPU meets",
            "",
            &[
                "--tier",
                "extended",
                "--gpus",
                "0",
                "--thresholds",
                "FLOORS",
            ],
            &["perf-below-floor"],
        ),
    ]
}

/// The codes a JSON report names, with the checks that reported them.
fn reported(json: &serde_json::Value) -> Vec<(String, String, String)> {
    json["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| {
            let status = r["status"].as_str().unwrap_or("");
            let code = r["finding"]["code"].as_str()?.to_string();
            Some((
                code,
                r["check"].as_str().unwrap_or("").to_string(),
                status.to_string(),
            ))
        })
        .collect()
}

/// Runs case `c` and asserts that it reports every code it names, and that
/// every code it reports is catalogued with the status its severity says.
fn run_case(c: &Case, gates: &BTreeMap<&str, bool>) {
    let n = node(c.scenario);
    (c.node)(&n.root);
    let json_path = n.root.with_extension("findings.json");
    let floors = n.root.with_extension("floors.toml");
    fs::write(&floors, FLOORS).unwrap();
    let mut cmd = rocgate();
    cmd.arg("run")
        .arg("--sysroot")
        .arg(&n.root)
        .arg("--quiet")
        .arg("--json")
        .arg(&json_path);
    for a in c.args {
        cmd.arg(if *a == "FLOORS" {
            floors.to_str().unwrap()
        } else {
            a
        });
    }
    let _rocm = c.fake.map(|setup| {
        let dir = fake_rocm();
        setup(dir.path());
        cmd.arg("--rocm-path")
            .arg(dir.path())
            .env("ROCGATE_FAKE_NODE", &n.root)
            .env("ROCGATE_FAKE_FAULTS", c.faults);
        dir
    });
    cmd.envs(c.env.iter().copied());
    let out = cmd.output().unwrap();
    let json: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(&json_path)
            .unwrap_or_else(|e| panic!("{}: no JSON ({e}): {out:?}", c.name)),
    )
    .unwrap();
    let got = reported(&json);
    for code in c.codes {
        assert!(
            got.iter().any(|(g, _, _)| g == code),
            "{}: expected {code}, got {:?}\n{}",
            c.name,
            got,
            String::from_utf8_lossy(&out.stdout)
        );
    }
    check_reported(&got, gates, c.name);
}

/// Every reported code is in the catalogue, and a result that found
/// something has the status its code's severity says (`fail` codes fail,
/// `warn` codes warn), whether or not its check gates.
fn check_reported(got: &[(String, String, String)], gates: &BTreeMap<&str, bool>, case: &str) {
    for (code, check, status) in got {
        let entry = findings::lookup(code).unwrap_or_else(|| {
            panic!("{case}: {check} reported {code}, which the catalogue lacks")
        });
        if status != "fail" && status != "warn" {
            continue;
        }
        let gating = gates.get(check.as_str()).copied().unwrap_or(true);
        let expected = match entry.severity {
            Severity::Fail => "fail",
            Severity::Warn => "warn",
        };
        assert_eq!(
            status, expected,
            "{case}: {code} from {check} (gates: {gating})"
        );
    }
}

/// The check ids of the registry with whether each gates.
fn gates() -> BTreeMap<&'static str, bool> {
    rocgate_suites::registry()
        .iter()
        .map(|c| (c.id, c.gates))
        .collect()
}

/// Codes a classic break gives beside its diagnosis, which no other case
/// produces.
const ALSO_FROM_SCENARIO: &[(&str, &str)] = &[("amdgpu-blacklisted", "amdgpu-blacklisted")];

/// The classic breaks as cases: every broken scenario of the fixture
/// catalogue must give its diagnosis (and the codes of
/// [`ALSO_FROM_SCENARIO`]).
fn scenario_cases() -> Vec<Case> {
    rocgate_fixtures::catalogue()
        .into_iter()
        .filter_map(|s| {
            let (code, _) = s.diagnosis?;
            let mut codes = vec![code];
            codes.extend(
                ALSO_FROM_SCENARIO
                    .iter()
                    .filter(|(scenario, _)| *scenario == s.name)
                    .map(|(_, also)| *also),
            );
            Some(Case {
                name: s.name,
                scenario: s.name,
                node: keep,
                fake: None,
                faults: "",
                env: &[],
                args: if s.expect_gpus.is_some() {
                    &["--expect-gpus", "8"]
                } else {
                    &[]
                },
                codes: codes.leak(),
            })
        })
        .collect()
}

/// A trial's name: the codes its case must produce, then what it breaks,
/// so a filter naming a code selects the cases that produce it.
fn trial_name(c: &Case) -> String {
    let what: String = c
        .name
        .chars()
        .map(|ch| if ch.is_ascii_alphanumeric() { ch } else { '_' })
        .collect();
    format!("{}::{what}", c.codes.join("+"))
}

/// Every catalogued code is named by a case (a scenario's diagnosis, a case
/// of [`cases`], the worker protocol or the live node), each of whose trials
/// asserts that it is produced.
fn every_catalogued_code_has_a_case() -> Result<(), Failed> {
    let mut named: BTreeSet<&str> = scenario_cases()
        .iter()
        .chain(cases().iter())
        .flat_map(|c| c.codes.iter().copied())
        .collect();
    named.extend([
        "internal-error",
        "miopen-db-not-writable",
        "gpu-held-at-job-start",
    ]);
    let missing: Vec<&str> = findings::codes::ALL
        .iter()
        .map(|c| c.code)
        .filter(|c| !named.contains(*c))
        .collect();
    util::check(
        missing.is_empty(),
        format!("catalogued but produced by no case: {missing:?}"),
    )
}

fn main() {
    let gates: &'static BTreeMap<&str, bool> = Box::leak(Box::new(gates()));
    let mut trials: Vec<Trial> = scenario_cases()
        .into_iter()
        .chain(cases())
        .map(|c| {
            Trial::test(trial_name(&c), move || {
                run_case(&c, gates);
                Ok(())
            })
        })
        .collect();
    trials.extend([
        Trial::test("internal-error::the_worker_protocol", || {
            worker_internal_error();
            Ok(())
        }),
        Trial::test("miopen-db-not-writable::the_live_node", || {
            live_database_not_writable();
            Ok(())
        }),
        Trial::test("gpu-held-at-job-start::a_slurm_prolog", || {
            prolog_finds_a_leftover();
            Ok(())
        }),
        Trial::test(
            "every_catalogued_code_has_a_case",
            every_catalogued_code_has_a_case,
        ),
        Trial::test("the_readme_lists_exactly_the_catalogued_codes", || {
            the_readme_lists_exactly_the_catalogued_codes();
            Ok(())
        }),
        Trial::test("findings_md_is_generated_from_the_catalogue", || {
            findings_md_is_generated_from_the_catalogue();
            Ok(())
        }),
    ]);
    libtest_mimic::run(&Arguments::from_args(), trials).exit();
}

/// A worker asked about a GPU the node does not have reports an internal
/// error rather than panicking (the planner never sends such a request).
fn worker_internal_error() -> String {
    let n = node("mi300x-8");
    let out = on_sysroot(&["__worker", "--scope", "gpu99"], &n.root)
        .write_stdin("{\"check\":\"kfd::topology_node\",\"scope\":\"gpu99\"}\n")
        .output()
        .unwrap();
    let reply: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(reply["finding"]["code"], "internal-error", "{reply}");
    "the worker protocol".into()
}

/// MIOpen's directories are checked on the live node only: this host, with
/// MIOpen pointed at a database path that cannot be written.
fn live_database_not_writable() -> Vec<(String, String, String)> {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    rocgate()
        .args([
            "run",
            "--tier",
            "standard",
            "--no-gate",
            "--quiet",
            "--json",
        ])
        .arg(&json)
        .env("MIOPEN_USER_DB_PATH", "/dev/null/miopen-db")
        .env("ROCM_PATH", dir.path())
        .output()
        .unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&json).unwrap()).unwrap();
    let got = reported(&json);
    assert!(
        got.iter().any(|(c, _, _)| c == "miopen-db-not-writable"),
        "{got:?}"
    );
    got
}

/// A Slurm prolog on a GPU a previous job's process still holds: the one
/// code only a prolog gives.
fn prolog_finds_a_leftover() {
    let n = node("gpu-in-use");
    let json = n.root.with_extension("prolog.json");
    let out = on_sysroot(&["health", "--slurm-prolog"], &n.root)
        .arg("--json")
        .arg(&json)
        .env("SLURM_JOB_GPUS", "2")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let json: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&json).unwrap()).unwrap();
    let got = reported(&json);
    assert!(
        got.iter()
            .any(|(c, _, s)| c == "gpu-held-at-job-start" && s == "fail"),
        "{got:?}"
    );
}

fn the_readme_lists_exactly_the_catalogued_codes() {
    let readme = fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let start = readme
        .find("Finding codes (")
        .expect("README has a 'Finding codes' list");
    let section = &readme[start..];
    let end = section.find("\n\n").unwrap_or(section.len());
    let listed: BTreeSet<&str> = section[..end]
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| !s.contains(' '))
        .collect();
    let catalogued: BTreeSet<&str> = findings::codes::ALL.iter().map(|c| c.code).collect();
    assert_eq!(listed, catalogued, "README's 'Finding codes:' list");
}

fn findings_md_is_generated_from_the_catalogue() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/FINDINGS.md");
    let out = rocgate()
        .args(["codes", "--format", "markdown"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let generated = String::from_utf8(out.stdout).unwrap();
    let committed = fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == generated,
        "FINDINGS.md is stale: regenerate it with `cargo run -- codes --format markdown > FINDINGS.md`"
    );
}
