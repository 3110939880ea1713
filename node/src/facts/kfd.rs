//! The KFD topology under `/sys/class/kfd/kfd/topology`.

use super::properties::Properties;
use crate::{ReadError, Sysroot};
use std::path::Path;

/// Host path of the topology.
pub const TOPOLOGY: &str = "/sys/class/kfd/kfd/topology";

/// io_link `type` of an XGMI link (kfd_crat.h CRAT_IOLINK_TYPE_XGMI).
pub const LINK_TYPE_XGMI: u64 = 11;
/// io_link `type` of a PCIe link (kfd_crat.h CRAT_IOLINK_TYPE_PCIEXPRESS).
pub const LINK_TYPE_PCIE: u64 = 2;

/// The parsed topology; nodes that could not be read are kept as errors so
/// one damaged node does not hide the others.
#[derive(Clone, Debug, Default)]
pub struct Topology {
    /// `generation_id`, when readable.
    pub generation_id: Option<u64>,
    /// Nodes in numeric order.
    pub nodes: Vec<KfdNode>,
    /// Nodes (or their parts) that could not be read, naming the file.
    pub errors: Vec<ReadError>,
}

impl Topology {
    /// The GPU nodes (`simd_count` > 0), in node order.
    pub fn gpu_nodes(&self) -> impl Iterator<Item = &KfdNode> {
        self.nodes.iter().filter(|n| n.is_gpu())
    }
}

/// A link from one KFD node to another, as `iolink_show` (kfd_topology.c)
/// prints it for `io_links/N` and `p2p_links/N` alike.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct IoLink {
    /// 2 PCIe, 11 XGMI, 1 HyperTransport, 5 QPI.
    pub link_type: u64,
    /// Source node.
    pub node_from: u64,
    /// Destination node.
    pub node_to: u64,
    /// CRAT_IOLINK_FLAGS_* (kfd_crat.h): 0x1 enabled, 0x2 non-coherent,
    /// 0x4/0x8 no 32/64-bit atomics, 0x10 no peer-to-peer DMA.
    /// `kfd_fill_iolink_non_crat_info` (kfd_topology.c) sets every GPU
    /// link's flags to ENABLED and adds only the atomics and coherence bits:
    /// amdkfd itself never sets 0x10.
    pub flags: u64,
    /// Relative cost: 15 per XGMI hop, 13 within one device's partitions,
    /// 20 for PCIe to the CPU (kfd_crat.c `kfd_fill_gpu_xgmi_link_to_gpu`,
    /// `kfd_parse_subtype_iolink`); absent when not printed.
    pub weight: Option<u64>,
    /// MB/s.
    pub min_bandwidth: Option<u64>,
    /// MB/s.
    pub max_bandwidth: Option<u64>,
}

/// One KFD node (a CPU, a GPU or a GPU partition).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KfdNode {
    /// The node's directory number.
    pub id: u32,
    /// `gpu_id` (0 for CPU nodes), when present.
    pub gpu_id: Option<u64>,
    /// `name`, when present.
    pub name: Option<String>,
    /// SIMDs; 0 on CPU nodes.
    pub simd_count: u64,
    /// SIMDs per compute unit.
    pub simd_per_cu: Option<u64>,
    /// major*10000 + minor*100 + stepping; absent on old kernels.
    pub gfx_target_version: Option<u64>,
    /// PCI vendor id (4098 = 0x1002).
    pub vendor_id: Option<u64>,
    /// PCI device id.
    pub device_id: Option<u64>,
    /// `bus << 8 | dev << 3 | fn`.
    pub location_id: Option<u64>,
    /// PCI domain; absent on old kernels (then 0).
    pub domain: Option<u64>,
    /// Minor of `/dev/dri/renderD<minor>`.
    pub drm_render_minor: Option<u64>,
    /// XGMI hive (0 = none).
    pub hive_id: Option<u64>,
    /// Device serial, shared by the partitions of one GPU.
    pub unique_id: Option<u64>,
    /// Accelerator complexes (XCCs) in this node.
    pub num_xcc: Option<u64>,
    /// MEC firmware version.
    pub fw_version: Option<u64>,
    /// SDMA firmware version.
    pub sdma_fw_version: Option<u64>,
    /// Wavefront size.
    pub wave_front_size: Option<u64>,
    /// Memory banks: `(heap_type, size_in_bytes)`.
    pub mem_banks: Vec<(u64, u64)>,
    /// `io_links`: the link to the CPU node, and on XGMI GPUs one to every
    /// GPU node of the hive (kfd_crat.c `kfd_create_vcrat_image_gpu`).
    pub io_links: Vec<IoLink>,
    /// `p2p_links`: indirect links (a GPU to the CPU nodes it does not sit
    /// on) and, with CONFIG_HSA_AMD_P2P, a PCIe link to every GPU outside
    /// its hive whose VRAM it can reach through the BAR (kfd_topology.c
    /// `kfd_create_indirect_link_prop`, `kfd_add_peer_prop`). `None` when
    /// the node has no `p2p_links` directory: kernels before Linux 6.0
    /// (`kfd_build_sysfs_node_entry` creates it on every node since).
    pub p2p_links: Option<Vec<IoLink>>,
}

impl KfdNode {
    /// Whether this node is a GPU (or GPU partition).
    pub fn is_gpu(&self) -> bool {
        self.simd_count > 0
    }

    /// Compute units (`simd_count / simd_per_cu`), when both are known.
    pub fn compute_units(&self) -> Option<u64> {
        match self.simd_per_cu {
            Some(per) if per > 0 => Some(self.simd_count / per),
            _ => None,
        }
    }

    /// `dddd:bb:dd.f` from `domain` and `location_id`.
    pub fn pci_address(&self) -> Option<String> {
        let loc = self.location_id?;
        Some(format!(
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain.unwrap_or(0),
            (loc >> 8) & 0xff,
            (loc >> 3) & 0x1f,
            loc & 0x7
        ))
    }

    /// VRAM from the public and private heaps (`heap_type` 1 and 2).
    pub fn vram_bytes(&self) -> Option<u64> {
        let sum: u64 = self
            .mem_banks
            .iter()
            .filter(|(t, _)| *t == 1 || *t == 2)
            .map(|(_, s)| *s)
            .sum();
        (sum > 0).then_some(sum)
    }
}

/// Reads the topology. `Err` when the topology directory itself is missing
/// or unreadable; damaged nodes are collected in [`Topology::errors`].
pub fn read(root: &Sysroot) -> Result<Topology, ReadError> {
    let node_names = root.list_dir(&format!("{TOPOLOGY}/nodes"))?;
    let mut topo = Topology {
        generation_id: match root.read_opt(&format!("{TOPOLOGY}/generation_id")) {
            Ok(Some(t)) => t.parse().ok(),
            _ => None,
        },
        ..Topology::default()
    };
    for name in node_names {
        let Ok(id) = name.parse::<u32>() else {
            continue;
        };
        match read_node(root, id) {
            Ok(node) => topo.nodes.push(node),
            Err(e) => topo.errors.push(e),
        }
    }
    Ok(topo)
}

fn read_node(root: &Sysroot, id: u32) -> Result<KfdNode, ReadError> {
    let dir = format!("{TOPOLOGY}/nodes/{id}");
    let props_path = format!("{dir}/properties");
    let path = Path::new(&props_path);
    let props = Properties::parse(&root.read_text(&props_path)?, path)?;
    // Every KFD node prints these (kfd_topology.c node_show, from the first
    // KFD kernels on); without them the file is empty, truncated or NUL
    // bytes, and must not pass for a node with no compute units.
    if let Some(missing) = ["cpu_cores_count", "simd_count"]
        .into_iter()
        .find(|k| props.text(k).is_none())
    {
        return Err(ReadError::malformed(
            path,
            format!("no {missing} (the file is empty, truncated or NUL bytes)"),
        ));
    }
    // kfd_topology.c `node_show` prints every key here with "%u" from a
    // 32-bit field (`sysfs_show_32bit_prop`) but hive_id and unique_id
    // ("%llu", `sysfs_show_64bit_prop`): a value past its type is not what
    // the kernel wrote.
    let num = |key: &str| props.number32(key, path);
    let num64 = |key: &str| props.number(key, path);
    let mut node = KfdNode {
        id,
        gpu_id: root
            .read_opt(&format!("{dir}/gpu_id"))?
            .and_then(|t| t.parse().ok()),
        name: root
            .read_opt(&format!("{dir}/name"))?
            .filter(|n| !n.is_empty()),
        simd_count: num("simd_count")?.unwrap_or(0),
        simd_per_cu: num("simd_per_cu")?,
        gfx_target_version: num("gfx_target_version")?,
        vendor_id: num("vendor_id")?,
        device_id: num("device_id")?,
        location_id: num("location_id")?,
        domain: num("domain")?,
        drm_render_minor: num("drm_render_minor")?,
        hive_id: num64("hive_id")?,
        unique_id: num64("unique_id")?,
        num_xcc: num("num_xcc")?,
        fw_version: num("fw_version")?,
        sdma_fw_version: num("sdma_fw_version")?,
        wave_front_size: num("wave_front_size")?,
        ..KfdNode::default()
    };
    // A GPU's render minor names /dev/dri/renderD<minor>, a device minor
    // of MINORBITS = 20 bits (include/linux/kdev_t.h; drm_drv.c allocates
    // render minors below it).
    if let Some(minor) = node
        .drm_render_minor
        .filter(|m| node.is_gpu() && *m >= 1 << 20)
    {
        return Err(ReadError::malformed(
            path,
            format!(
                "drm_render_minor is {minor}, past the 20-bit device minors the kernel allocates"
            ),
        ));
    }
    for bank in list_sub(root, &format!("{dir}/mem_banks"))? {
        let p = format!("{dir}/mem_banks/{bank}/properties");
        let path = Path::new(&p);
        let props = Properties::parse(&root.read_text(&p)?, path)?;
        // mem_show: heap_type "%u" (32-bit), size_in_bytes "%llu".
        node.mem_banks.push((
            props.number32("heap_type", path)?.unwrap_or(0),
            props.number("size_in_bytes", path)?.unwrap_or(0),
        ));
    }
    node.io_links = read_links(root, &format!("{dir}/io_links"), id)?;
    if root
        .list_dir_if_present(&format!("{dir}/p2p_links"))?
        .is_some()
    {
        node.p2p_links = Some(read_links(root, &format!("{dir}/p2p_links"), id)?);
    }
    Ok(node)
}

/// The links under `dir` (`io_links` or `p2p_links`) of node `id`, in
/// numeric order; a missing directory has none.
fn read_links(root: &Sysroot, dir: &str, id: u32) -> Result<Vec<IoLink>, ReadError> {
    let mut names = list_sub(root, dir)?;
    names.sort_by_key(|n| n.parse::<u32>().unwrap_or(u32::MAX));
    let mut links = Vec::new();
    for link in names {
        let p = format!("{dir}/{link}/properties");
        let path = Path::new(&p);
        let props = Properties::parse(&root.read_text(&p)?, path)?;
        // iolink_show prints every key with "%u" (32-bit).
        links.push(IoLink {
            link_type: props.number32("type", path)?.unwrap_or(0),
            node_from: props.number32("node_from", path)?.unwrap_or(u64::from(id)),
            node_to: props.number32("node_to", path)?.unwrap_or(u64::MAX),
            flags: props.number32("flags", path)?.unwrap_or(0),
            weight: props.number32("weight", path)?,
            min_bandwidth: props.number32("min_bandwidth", path)?,
            max_bandwidth: props.number32("max_bandwidth", path)?,
        });
    }
    Ok(links)
}

/// Numbered subdirectories of `dir`; a missing directory is empty.
fn list_sub(root: &Sysroot, dir: &str) -> Result<Vec<String>, ReadError> {
    let names = root.list_dir_if_present(dir)?.unwrap_or_default();
    Ok(names
        .into_iter()
        .filter(|n| n.parse::<u32>().is_ok())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A one-GPU topology whose GPU node has `key value` among its
    /// properties.
    fn topology_with(key: &str, value: &str) -> Result<Topology, ReadError> {
        let dir = tempfile::tempdir().unwrap();
        let node = dir.path().join("sys/class/kfd/kfd/topology/nodes/1");
        std::fs::create_dir_all(&node).unwrap();
        let mut props = String::from(
            "cpu_cores_count 0\nsimd_count 1216\nsimd_per_cu 4\ngfx_target_version 90402\ndomain 0\ndrm_render_minor 128\n",
        );
        props = props
            .lines()
            .filter(|l| !l.starts_with(&format!("{key} ")))
            .map(|l| format!("{l}\n"))
            .collect();
        props.push_str(&format!("{key} {value}\n"));
        std::fs::write(node.join("properties"), props).unwrap();
        read(&Sysroot::at(dir.path()))
    }

    #[test]
    fn values_past_what_the_kernel_prints_are_damage() {
        for (key, value) in [
            ("simd_count", u64::MAX.to_string()),
            ("drm_render_minor", (1u64 << 32).to_string()),
            ("drm_render_minor", (1u64 << 20).to_string()),
            ("domain", (1u64 << 32).to_string()),
            ("gfx_target_version", "99999999999".to_string()),
        ] {
            let t = topology_with(key, &value).unwrap();
            assert!(t.nodes.is_empty(), "{key} {value}");
            assert!(t.errors[0].to_string().contains(key), "{}", t.errors[0]);
        }
        // At the limits the kernel can print, they read.
        let t = topology_with("domain", &u32::MAX.to_string()).unwrap();
        assert_eq!(t.nodes[0].domain, Some(u64::from(u32::MAX)));
        let t = topology_with("hive_id", &u64::MAX.to_string()).unwrap();
        assert_eq!(t.nodes[0].hive_id, Some(u64::MAX));
    }

    proptest! {
        #[test]
        fn no_value_panics_the_reader(key in "(simd_count|domain|drm_render_minor|gfx_target_version|location_id|hive_id)", value in "[0-9]{1,22}|\\PC{0,8}") {
            let _ = topology_with(&key, &value);
        }
    }

    /// A one-GPU topology whose node 1 has `io` as `io_links/0` and, when
    /// given, `p2p` as `p2p_links/0` (an empty string: the directory only).
    fn topology_with_links(io: &str, p2p: Option<&str>) -> Result<Topology, ReadError> {
        let dir = tempfile::tempdir().unwrap();
        let node = dir.path().join("sys/class/kfd/kfd/topology/nodes/1");
        std::fs::create_dir_all(node.join("io_links/0")).unwrap();
        std::fs::write(
            node.join("properties"),
            "cpu_cores_count 0\nsimd_count 1216\nsimd_per_cu 4\n",
        )
        .unwrap();
        std::fs::write(node.join("io_links/0/properties"), io).unwrap();
        if let Some(p2p) = p2p {
            std::fs::create_dir_all(node.join("p2p_links")).unwrap();
            if !p2p.is_empty() {
                std::fs::create_dir_all(node.join("p2p_links/0")).unwrap();
                std::fs::write(node.join("p2p_links/0/properties"), p2p).unwrap();
            }
        }
        read(&Sysroot::at(dir.path()))
    }

    const XGMI: &str = "type 11\nversion_major 0\nversion_minor 0\nnode_from 1\nnode_to 2\nweight 15\nmin_latency 0\nmax_latency 0\nmin_bandwidth 64000\nmax_bandwidth 64000\nrecommended_transfer_size 0\nrecommended_sdma_engine_id_mask 0\nflags 1\n";

    #[test]
    fn links_carry_weight_and_bandwidth_and_p2p_links_when_the_kernel_has_them() {
        let t = topology_with_links(XGMI, None).unwrap();
        let n = &t.nodes[0];
        assert_eq!(
            n.io_links[0],
            IoLink {
                link_type: LINK_TYPE_XGMI,
                node_from: 1,
                node_to: 2,
                flags: 1,
                weight: Some(15),
                min_bandwidth: Some(64000),
                max_bandwidth: Some(64000),
            }
        );
        assert_eq!(n.p2p_links, None, "no p2p_links directory: not reported");
        let t = topology_with_links(XGMI, Some("")).unwrap();
        assert_eq!(t.nodes[0].p2p_links, Some(Vec::new()));
        let pcie = XGMI
            .replace("type 11", "type 2")
            .replace("flags 1", "flags 3");
        let t = topology_with_links(XGMI, Some(&pcie)).unwrap();
        let p2p = t.nodes[0].p2p_links.as_ref().unwrap();
        assert_eq!((p2p[0].link_type, p2p[0].flags), (LINK_TYPE_PCIE, 3));
        // A damaged p2p link is the node's damage, named by its file.
        let t = topology_with_links(XGMI, Some("weight 99999999999\n")).unwrap();
        assert!(t.nodes.is_empty());
        assert!(
            t.errors[0].to_string().contains("p2p_links/0"),
            "{}",
            t.errors[0]
        );
    }

    proptest! {
        #[test]
        fn no_link_value_panics_the_reader(key in "(type|node_to|weight|min_bandwidth|max_bandwidth|flags)", value in "[0-9]{1,22}|\\PC{0,8}", p2p in proptest::bool::ANY) {
            let bad = format!("{key} {value}\n");
            let _ = if p2p {
                topology_with_links(XGMI, Some(&bad))
            } else {
                topology_with_links(&bad, None)
            };
        }
    }

    #[test]
    fn pci_address_from_domain_and_location() {
        let n = KfdNode {
            location_id: Some(25344),
            domain: Some(0),
            ..KfdNode::default()
        };
        assert_eq!(n.pci_address().as_deref(), Some("0000:63:00.0"));
        let p = KfdNode {
            location_id: Some(0x0503),
            domain: Some(2),
            ..KfdNode::default()
        };
        assert_eq!(p.pci_address().as_deref(), Some("0002:05:00.3"));
        let cu = KfdNode {
            simd_count: 1216,
            simd_per_cu: Some(4),
            ..KfdNode::default()
        };
        assert_eq!(cu.compute_units(), Some(304));
    }
}
