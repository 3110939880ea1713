//! The links between the node's GPU devices as KFD describes them (XGMI
//! with its weight and bandwidth, PCIe peer links, whether peer-to-peer DMA
//! is possible), shared by the interconnect check and the peer-to-peer
//! bandwidth matrix. A device is a PCI device: an MI300X in CPX mode is one
//! device of eight partitions, each its own KFD node.
//!
//! Where the kernel puts them (amdkfd, Linux 6.x and ROCm's amdgpu DKMS):
//! `io_links` hold a GPU's link to its CPU node and, in an XGMI hive, one
//! XGMI link to every GPU node of the hive (kfd_crat.c
//! `kfd_create_vcrat_image_gpu`, the reverse added by
//! `kfd_parse_subtype_iolink`); `p2p_links` hold a PCIe link from a GPU to
//! every GPU outside its hive whose VRAM it can reach through the PCIe BAR
//! (kfd_topology.c `kfd_dev_create_p2p_links` / `kfd_add_peer_prop`, only
//! when `amdgpu_device_is_peer_accessible` says so), besides indirect links
//! to the CPU nodes it does not sit on.

use rocgate_node::facts::gpus::{Gpu, function_zero};
use rocgate_node::facts::kfd::{IoLink, LINK_TYPE_PCIE, LINK_TYPE_XGMI};
use std::collections::{BTreeMap, BTreeSet};

/// KFD io_link flag: the link is enabled (kfd_crat.h CRAT_IOLINK_FLAGS_ENABLED).
const FLAG_ENABLED: u64 = 0x1;
/// KFD io_link flag: no peer-to-peer DMA over it (kfd_crat.h
/// CRAT_IOLINK_FLAGS_NO_PEER_TO_PEER_DMA). amdkfd never sets it on a GPU's
/// links (`kfd_fill_iolink_non_crat_info` resets their flags to ENABLED):
/// peer DMA is told by the presence of a p2p link, and this flag is only
/// believed when some CRAT does set it.
const FLAG_NO_P2P_DMA: u64 = 0x10;

/// How two devices are connected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LinkKind {
    /// An enabled XGMI link.
    Xgmi,
    /// A PCIe peer link (`p2p_links`) in at least one direction.
    Pcie,
    /// Nothing direct: through the host.
    Host,
}

impl LinkKind {
    /// As the topology table and reports print it.
    pub fn label(self) -> &'static str {
        match self {
            LinkKind::Xgmi => "XGMI",
            LinkKind::Pcie => "PCIe",
            LinkKind::Host => "host",
        }
    }
}

/// What one enabled XGMI io_link from a node of one device to a node of
/// another says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct XgmiSeen {
    /// `weight`, when printed.
    pub weight: Option<u64>,
    /// `max_bandwidth` in MB/s, when printed.
    pub max_bandwidth: Option<u64>,
}

/// The node's GPU devices and the links between them.
pub(crate) struct Links<'a> {
    /// Each device's PCI address (function 0) and its GPUs (partitions), in
    /// address order.
    pub devices: Vec<(String, Vec<&'a Gpu>)>,
    /// `[a][b]`: the enabled XGMI links from nodes of `a` to nodes of `b`.
    xgmi: Vec<Vec<Vec<XgmiSeen>>>,
    /// `[a][b]`: a node of `a` has a PCIe link to a node of `b` (it can
    /// reach `b`'s VRAM).
    pcie: Vec<Vec<bool>>,
    /// Whether every node of the device has a `p2p_links` directory.
    p2p_reported: Vec<bool>,
    /// Device pairs (lower index first) a link flags as without
    /// peer-to-peer DMA.
    pub no_p2p: BTreeSet<(usize, usize)>,
}

impl<'a> Links<'a> {
    /// The links among the KFD GPUs of `gpus`.
    pub fn of(gpus: &'a [Gpu]) -> Links<'a> {
        let mut by_address: BTreeMap<String, Vec<&Gpu>> = BTreeMap::new();
        for g in gpus.iter().filter(|g| g.kfd.is_some()) {
            by_address
                .entry(function_zero(&g.pci_address).unwrap_or_else(|| g.pci_address.clone()))
                .or_default()
                .push(g);
        }
        let devices: Vec<(String, Vec<&Gpu>)> = by_address.into_iter().collect();
        let node_of: BTreeMap<u64, usize> = devices
            .iter()
            .enumerate()
            .flat_map(|(i, (_, gs))| {
                gs.iter()
                    .filter_map(move |g| g.kfd.as_ref().map(|k| (u64::from(k.id), i)))
            })
            .collect();
        let n = devices.len();
        let mut links = Links {
            xgmi: vec![vec![Vec::new(); n]; n],
            pcie: vec![vec![false; n]; n],
            p2p_reported: devices
                .iter()
                .map(|(_, gs)| {
                    gs.iter()
                        .all(|g| g.kfd.as_ref().is_some_and(|k| k.p2p_links.is_some()))
                })
                .collect(),
            no_p2p: BTreeSet::new(),
            devices: Vec::new(),
        };
        for (a, (_, gs)) in devices.iter().enumerate() {
            let kfd = gs.iter().filter_map(|g| g.kfd.as_ref());
            let all: Vec<&IoLink> = kfd
                .flat_map(|k| k.io_links.iter().chain(k.p2p_links.iter().flatten()))
                .collect();
            for link in all {
                // Links to CPU nodes (and a device's own partitions) are not
                // links between devices.
                let Some(&b) = node_of.get(&link.node_to).filter(|&&b| b != a) else {
                    continue;
                };
                let enabled = link.flags & FLAG_ENABLED != 0;
                if link.link_type == LINK_TYPE_XGMI && enabled {
                    links.xgmi[a][b].push(XgmiSeen {
                        weight: link.weight,
                        max_bandwidth: link.max_bandwidth,
                    });
                } else if link.link_type == LINK_TYPE_PCIE && enabled {
                    links.pcie[a][b] = true;
                }
                if link.flags & FLAG_NO_P2P_DMA != 0 {
                    links.no_p2p.insert((a.min(b), a.max(b)));
                }
            }
        }
        links.devices = devices;
        links
    }

    /// Whether devices `a` and `b` share an enabled XGMI link (in either
    /// direction).
    pub fn xgmi(&self, a: usize, b: usize) -> bool {
        !self.xgmi[a][b].is_empty() || !self.xgmi[b][a].is_empty()
    }

    /// The enabled XGMI links between `a` and `b`, both directions.
    pub fn xgmi_seen(&self, a: usize, b: usize) -> impl Iterator<Item = &XgmiSeen> {
        self.xgmi[a][b].iter().chain(&self.xgmi[b][a])
    }

    /// Whether a node of `from` has a PCIe link to a node of `to`.
    pub fn pcie_to(&self, from: usize, to: usize) -> bool {
        self.pcie[from][to]
    }

    /// Whether both devices' nodes have `p2p_links` directories, so the
    /// absence of a PCIe peer link between them means the kernel found no
    /// peer access.
    pub fn p2p_reported(&self, a: usize, b: usize) -> bool {
        self.p2p_reported[a] && self.p2p_reported[b]
    }

    /// Whether device `a` shows more than one KFD node (a partition mode
    /// other than SPX).
    pub fn partitioned(&self, a: usize) -> bool {
        self.devices[a].1.len() > 1
    }

    /// How devices `a` and `b` are connected.
    pub fn kind(&self, a: usize, b: usize) -> LinkKind {
        if self.xgmi(a, b) {
            LinkKind::Xgmi
        } else if self.pcie[a][b] || self.pcie[b][a] {
            LinkKind::Pcie
        } else {
            LinkKind::Host
        }
    }

    /// The device holding the GPU of inventory index `gpu`.
    pub fn device_of(&self, gpu: u32) -> Option<usize> {
        self.devices
            .iter()
            .position(|(_, gs)| gs.iter().any(|g| g.index == gpu))
    }

    /// Device `a`'s XGMI hive, when it is in one.
    pub fn hive(&self, a: usize) -> Option<u64> {
        self.devices[a]
            .1
            .iter()
            .find_map(|g| g.kfd.as_ref().and_then(|k| k.hive_id))
            .filter(|&h| h != 0)
    }

    /// The observed topology as a table: a row and a column per device.
    pub fn table(&self) -> String {
        let n = self.devices.len();
        let mut table = format!("{:<14}", "");
        for i in 0..n {
            table.push_str(&format!("{:>6}", format!("d{i}")));
        }
        table.push('\n');
        for (a, (name, _)) in self.devices.iter().enumerate() {
            table.push_str(&format!("d{a} {name:<11}"));
            for b in 0..n {
                let cell = if a == b { "-" } else { self.kind(a, b).label() };
                table.push_str(&format!("{cell:>6}"));
            }
            table.push('\n');
        }
        table
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::fixture::node;

    /// Every pair of distinct devices of `links`, lower index first.
    fn pairs(links: &Links<'_>) -> Vec<(usize, usize)> {
        let n = links.devices.len();
        (0..n)
            .flat_map(|a| (a + 1..n).map(move |b| (a, b)))
            .collect()
    }

    #[test]
    fn an_xgmi_hive_links_every_device_to_every_other_by_xgmi() {
        let n = node("mi300x-8");
        let links = Links::of(&n.ctx.facts.gpus);
        assert_eq!(links.devices.len(), 8);
        assert!(links.no_p2p.is_empty(), "{:?}", links.no_p2p);
        for (a, b) in pairs(&links) {
            assert_eq!(links.kind(a, b), LinkKind::Xgmi, "d{a}-d{b}");
            assert_eq!(links.kind(b, a), LinkKind::Xgmi, "d{b}-d{a}");
            assert!(links.xgmi_seen(a, b).next().is_some(), "d{a}-d{b}");
            assert_eq!(links.hive(a), links.hive(b));
            assert!(links.hive(a).is_some());
        }
        let table = links.table();
        assert!(table.lines().next().unwrap().contains("d7"), "{table}");
        assert!(table.contains("XGMI") && !table.contains("PCIe"), "{table}");
    }

    #[test]
    fn gpus_without_a_bridge_are_pcie_peers_or_go_through_the_host() {
        let n = node("mi210-4-pcie");
        let links = Links::of(&n.ctx.facts.gpus);
        assert_eq!(links.devices.len(), 4);
        for (a, b) in pairs(&links) {
            assert!(!links.xgmi(a, b), "d{a}-d{b}");
            assert_eq!(links.kind(a, b), LinkKind::Pcie, "d{a}-d{b}");
            assert!(links.p2p_reported(a, b), "d{a}-d{b}");
        }
        // Without peer links in p2p_links, copies go through the host.
        let n = node("mi210-4-no-peer-dma");
        let links = Links::of(&n.ctx.facts.gpus);
        for (a, b) in pairs(&links) {
            assert_eq!(links.kind(a, b), LinkKind::Host, "d{a}-d{b}");
        }
    }

    #[test]
    fn the_partitions_of_one_device_are_one_device() {
        let n = node("mi300x-8-cpx");
        let links = Links::of(&n.ctx.facts.gpus);
        assert_eq!(links.devices.len(), 8);
        for (a, (_, gpus)) in links.devices.iter().enumerate() {
            assert_eq!(gpus.len(), 8, "d{a}");
            assert!(links.partitioned(a), "d{a}");
            for gpu in gpus {
                assert_eq!(links.device_of(gpu.index), Some(a), "{}", gpu.pci_address);
            }
        }
        assert!(!Links::of(&node("mi300x-8").ctx.facts.gpus).partitioned(0));
    }
}
