//! `rocgate inventory`: what the node has, for humans and machines.

use rocgate_node::driver_release::DriverRow;
use rocgate_node::facts::NodeFacts;
use serde::Serialize;

/// Layout version of the inventory JSON.
pub const SCHEMA_VERSION: u32 = 1;

/// How long inventory waits for the GPUs' firmware files: they answer in
/// microseconds unless a GPU is wedged, and inventory must still print.
const GPU_VERSIONS_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The node's inventory.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct Inventory {
    /// Layout version.
    pub schema_version: u32,
    /// Where the node was read from.
    pub sysroot: String,
    /// The node's software.
    pub node: NodeSummary,
    /// One entry per KFD GPU node (a partition counts as one), then PCI GPUs
    /// that KFD does not list.
    pub gpus: Vec<GpuEntry>,
    /// The ROCm runtime libraries: where they were loaded from and their
    /// versions (`hsa_library`, `hip_library`, `hip_runtime_version`), or why
    /// they could not be (`hsa_error`, `hip_error`). Filled by the caller,
    /// which loads them in a worker process.
    pub runtime: std::collections::BTreeMap<String, String>,
    /// Every layer's version: `node` (kernel, OS, amdgpu, ROCm, runtime
    /// libraries) and each GPU (`gpu0`: VBIOS, firmware per IP).
    pub versions: std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>,
}

/// Node-wide software facts.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct NodeSummary {
    /// Running kernel release.
    pub kernel: Option<String>,
    /// amdgpu initstate (`live`), if loaded.
    pub amdgpu_initstate: Option<String>,
    /// DKMS amdgpu version of the loaded module.
    pub amdgpu_version: Option<String>,
    /// srcversion of the loaded module.
    pub amdgpu_srcversion: Option<String>,
    /// Why the DKMS version file could not be read, when it exists but did
    /// not read (the driver is then not known to be the inbox one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amdgpu_version_error: Option<String>,
    /// Kernels with a DKMS amdgpu build.
    pub dkms_kernels: Vec<String>,
    /// Physical AMD GPUs on the PCI bus.
    pub pci_gpus: usize,
}

/// One GPU.
#[derive(Clone, Debug, Serialize, schemars::JsonSchema)]
pub struct GpuEntry {
    /// Inventory index (`gpu<index>`).
    pub index: u32,
    /// KFD node number, if in KFD.
    pub kfd_node: Option<u32>,
    /// `0000:05:00.0`.
    pub pci_address: String,
    /// `0x74a1`.
    pub device_id: Option<String>,
    /// Marketing name.
    pub product: Option<String>,
    /// `gfx942`.
    pub gfx_target: Option<String>,
    /// Compute units.
    pub compute_units: Option<u64>,
    /// Accelerator complexes.
    pub num_xcc: Option<u64>,
    /// VRAM from KFD memory banks, else DRM's mem_info_vram_total.
    pub vram_bytes: Option<u64>,
    /// Device serial (`0x%016x`), shared by partitions.
    pub unique_id: Option<String>,
    /// XGMI hive (`0x%016x`).
    pub hive_id: Option<String>,
    /// Render minor.
    pub drm_render_minor: Option<u64>,
    /// Bound PCI driver.
    pub driver: Option<String>,
    /// RAS totals and retired pages (`ras_ue`, `ras_ce`, `ras_bad_pages`),
    /// junction temperature (°C) and power (W), as far as the GPU has them.
    pub health: std::collections::BTreeMap<String, String>,
}

fn hex64(v: Option<u64>) -> Option<String> {
    v.filter(|&v| v != 0).map(|v| format!("0x{v:016x}"))
}

/// Builds the inventory from the node's facts, naming the driver release
/// by `driver_rows` (the run's compatibility matrix's).
pub fn build(facts: &NodeFacts, driver_rows: &[DriverRow]) -> Inventory {
    let mut health = rocgate_node::versions::gpu_health_within(facts, GPU_VERSIONS_WAIT);
    let gpus = facts
        .gpus
        .iter()
        .map(|g| {
            let k = g.kfd.as_ref();
            let vram = g.vram_bytes(&facts.sysroot);
            GpuEntry {
                index: g.index,
                kfd_node: k.map(|k| k.id),
                pci_address: g.pci_address.clone(),
                device_id: g.device_id.map(|d| format!("0x{d:04x}")),
                product: g.product.clone(),
                gfx_target: g.gfx_target.clone(),
                compute_units: g.compute_units(),
                num_xcc: k.and_then(|k| k.num_xcc),
                vram_bytes: vram,
                unique_id: hex64(k.and_then(|k| k.unique_id)),
                hive_id: hex64(k.and_then(|k| k.hive_id)),
                drm_render_minor: k.and_then(|k| k.drm_render_minor),
                driver: g.pci.as_ref().and_then(|p| p.driver.clone()),
                health: health.remove(&g.index).unwrap_or_default(),
            }
        })
        .collect();
    Inventory {
        schema_version: SCHEMA_VERSION,
        sysroot: facts.sysroot.to_string(),
        node: NodeSummary {
            kernel: facts.kernel_release.as_ref().ok().cloned(),
            amdgpu_initstate: facts.amdgpu.initstate.clone(),
            amdgpu_version: facts.amdgpu.version.clone(),
            amdgpu_srcversion: facts.amdgpu.srcversion.clone(),
            amdgpu_version_error: facts.amdgpu.version_error.as_ref().map(ToString::to_string),
            dkms_kernels: facts.dkms.builds.iter().map(|(k, _)| k.clone()).collect(),
            pci_gpus: facts.pci_gpu_count(),
        },
        versions: std::iter::once((
            "node".to_string(),
            rocgate_node::versions::node_versions(facts, driver_rows),
        ))
        .chain(
            rocgate_node::versions::gpu_versions_within(facts, GPU_VERSIONS_WAIT)
                .into_iter()
                .map(|(g, v)| (format!("gpu{g}"), v)),
        )
        .collect(),
        gpus,
        runtime: std::collections::BTreeMap::new(),
    }
}
