//! rccl: the GPUs' interconnect as KFD describes it, and an all-reduce across
//! the node's GPUs with RCCL, verified, with bus bandwidth.

mod burnin;
mod collective;

use crate::context::NodeContext;
use crate::findings::codes;
use crate::layers::hip::device::hip_devices;
use crate::layers::kfd::links::Links;
use crate::layers::support::{LibraryName, check, end, isolated, judge_floor, list};
use crate::stack;
use collective::Collective;
use rocgate_harness::{Check, Outcome, Scope, ScopeKind, Tier, Verdict};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// The rccl layer's checks.
pub fn checks() -> Vec<Check<NodeContext>> {
    vec![
        Check {
            gates: false,
            ..check(
                "rccl::interconnect",
                stack::RCCL,
                ScopeKind::Node,
                "every pair of GPUs in an XGMI hive has an enabled XGMI link (direct, by KFD's weight and bandwidth, on a fully connected hive), and GPUs outside a hive have PCIe peer links",
                interconnect,
            )
        },
        Check {
            tier: Tier::Standard,
            ..isolated(
                "rccl::runtime",
                stack::RCCL,
                ScopeKind::Node,
                &[],
                60,
                "RCCL loads and reports its version",
                |ctx, _| LIBRARY.loaded(&**ctx.runtime.rccl()?),
            )
        },
        Check {
            tier: Tier::Standard,
            ..isolated(
                "rccl::allreduce",
                stack::RCCL,
                ScopeKind::Node,
                &["rccl::runtime", "hip::device"],
                120,
                "an fp32 sum all-reduce across the GPUs gives the right sums (bus bandwidth as a metric)",
                allreduce,
            )
            // a communicator over every GPU and a small all-reduce.
            .typically(Duration::from_millis(3000))
        },
        Check {
            tier: Tier::Extended,
            gates: false,
            ..isolated(
                "rccl::allreduce_throughput",
                stack::RCCL,
                ScopeKind::Node,
                &["rccl::allreduce"],
                300,
                "all-reduce bus bandwidth meets its floor",
                allreduce_throughput,
            )
            // timed all-reduces of growing size.
            .typically(Duration::from_millis(10000))
        },
        burnin::check(),
    ]
}

/// How RCCL is named in reports and reinstalled.
const LIBRARY: LibraryName = LibraryName::new("RCCL", "rccl", "rccl", codes::RCCL_LIBRARY_MISSING);

/// KFD's weight of one XGMI hop: `kfd_fill_gpu_xgmi_link_to_gpu`
/// (kfd_crat.c) sets `KFD_CRAT_XGMI_WEIGHT` (15) times
/// `amdgpu_xgmi_get_hops_count` (amdgpu_xgmi.c, the PSP TA's hop count).
const XGMI_HOP_WEIGHT: u64 = 15;

/// gfx targets whose XGMI hives are fully connected, every GPU with a
/// direct link to every other: MI300X/MI325X (8 OAMs), MI300A (4 sockets),
/// MI355X. Elsewhere (MI250X's 8 GCDs) pairs two hops apart are by design.
const FULLY_CONNECTED: &[&str] = &["gfx942", "gfx950"];

/// Whether device `a`'s hive is one where every pair has a direct link.
fn fully_connected(links: &Links<'_>, a: usize) -> bool {
    links.devices[a].1.iter().any(|g| {
        g.gfx_target
            .as_deref()
            .is_some_and(|t| FULLY_CONNECTED.contains(&t))
    })
}

/// What is wrong with the XGMI link between `a` and `b` of a fully
/// connected hive, judged by KFD's own numbers: a weight above one hop
/// (traffic routed through another GPU) or no bandwidth
/// (`amdgpu_xgmi_get_bandwidth` gives 0 when the TA counts no link to the
/// peer). Both directions are read; `None` when the link is direct.
fn xgmi_fault(links: &Links<'_>, a: usize, b: usize) -> Option<String> {
    links.xgmi_seen(a, b).find_map(|seen| {
        let hops = seen.weight.filter(|&w| w > XGMI_HOP_WEIGHT);
        let dead = seen.max_bandwidth == Some(0);
        (hops.is_some() || dead).then(|| {
            let weight = seen.weight.map_or_else(
                || "weight not reported".to_string(),
                |w| {
                    if w > XGMI_HOP_WEIGHT {
                        format!(
                            "weight {w} ({} hops, not a direct link)",
                            w.div_ceil(XGMI_HOP_WEIGHT)
                        )
                    } else {
                        format!("weight {w}")
                    }
                },
            );
            let bandwidth = seen.max_bandwidth.map_or_else(
                || "max_bandwidth not reported".to_string(),
                |m| format!("max_bandwidth {m} MB/s"),
            );
            format!("{weight}, {bandwidth}")
        })
    })
}

/// The GPUs' interconnect as KFD describes it: every pair of one XGMI hive
/// linked (and, on a fully connected hive, directly: weight and bandwidth
/// judged), and peer-to-peer DMA possible between GPUs that are not.
fn interconnect(ctx: &NodeContext, _: Scope) -> Outcome {
    let links = Links::of(&ctx.facts.gpus);
    let n = links.devices.len();
    if n < 2 {
        return Err(Verdict::not_applicable(
            "fewer than two GPUs in KFD: no interconnect to check",
        ));
    }
    let names: Vec<&String> = links.devices.iter().map(|(name, _)| name).collect();
    let hives: Vec<Option<u64>> = (0..n).map(|a| links.hive(a)).collect();
    let pairs_of = || (0..n).flat_map(|a| (a + 1..n).map(move |b| (a, b)));
    let same_hive = |a: usize, b: usize| hives[a].is_some() && hives[a] == hives[b];
    let mut missing = Vec::new();
    let mut down = Vec::new();
    // Pairs whose links KFD describes by design, not by the hardware: in a
    // partition mode other than SPX `kfd_fill_gpu_xgmi_link_to_gpu` skips
    // the TA's numbers and gives a link between partitions of different
    // devices weight 41 (2 x KFD_CRAT_INTRA_SOCKET_WEIGHT 13 + 15) and
    // bandwidth 0.
    let mut by_design = 0;
    let mut judged = 0;
    for (a, b) in pairs_of().filter(|&(a, b)| same_hive(a, b)) {
        if !links.xgmi(a, b) {
            missing.push(format!("{} <-> {}", names[a], names[b]));
        } else if links.partitioned(a) || links.partitioned(b) {
            by_design += 1;
        } else if fully_connected(&links, a) && fully_connected(&links, b) {
            judged += 1;
            if let Some(fault) = xgmi_fault(&links, a, b) {
                down.push(format!("{} <-> {}: {fault}", names[a], names[b]));
            }
        }
    }
    let table = links.table();
    let distinct: BTreeSet<u64> = hives.iter().flatten().copied().collect();
    if !missing.is_empty() {
        return end(Verdict::found(codes::XGMI_LINK_MISSING.finding(format!(
            "{} GPU pairs in one XGMI hive have no enabled XGMI link: {}",
            missing.len(),
            list(&missing, 6)
        )))
        .with_output(table));
    }
    if !down.is_empty() {
        return end(Verdict::found(codes::XGMI_LINK_DOWN.finding(format!(
            "{} of a fully connected XGMI hive {} no working direct link (one hop is weight {XGMI_HOP_WEIGHT} with bandwidth): {}",
            if down.len() == 1 { "1 GPU pair".to_string() } else { format!("{} GPU pairs", down.len()) },
            if down.len() == 1 { "has" } else { "have" },
            list(&down, 6)
        )))
        .with_output(format!("{}\n{table}", down.join("\n"))));
    }
    // Peer DMA between devices without XGMI: the kernel lists a PCIe link
    // in `p2p_links` for each direction amdgpu found possible.
    let mut one_way = Vec::new();
    let mut unreported = 0;
    let mut over_pcie = 0;
    for (a, b) in pairs_of().filter(|&(a, b)| !links.xgmi(a, b)) {
        if !links.p2p_reported(a, b) {
            unreported += 1;
            continue;
        }
        let (there, back) = (links.pcie_to(a, b), links.pcie_to(b, a));
        if there && back {
            over_pcie += 1;
        }
        for (ok, from, to) in [(there, a, b), (back, b, a)] {
            if !ok {
                one_way.push(format!("{} -> {}", names[from], names[to]));
            }
        }
    }
    if !one_way.is_empty() {
        return end(Verdict::found(codes::P2P_DISABLED.finding_next(format!(
            "KFD lists no PCIe peer link (p2p_links) for {} directions between GPUs outside an XGMI hive: {}; amdgpu found the peer's VRAM out of reach (amdgpu_device_is_peer_accessible: no large BAR, an address the IOMMU cannot map, or amdgpu.pcie_p2p=0)",
            one_way.len(),
            list(&one_way, 6)
        ), "RCCL and hipMemcpyPeer stage through host memory between them: enable Above 4G decoding and Resizable BAR in the BIOS, keep the IOMMU in passthrough (iommu=pt), leave amdgpu.pcie_p2p at 1, and use a kernel built with CONFIG_HSA_AMD_P2P"))
        .with_output(table));
    }
    if !links.no_p2p.is_empty() {
        let pairs: Vec<String> = links
            .no_p2p
            .iter()
            .map(|&(a, b)| format!("{} <-> {}", names[a], names[b]))
            .collect();
        return end(Verdict::found(codes::P2P_DISABLED.finding_next(format!("peer-to-peer DMA is disabled on {} links: {}", pairs.len(), list(&pairs, 6)), "RCCL and hipMemcpyPeer stage through host memory on these links: check that the IOMMU is in passthrough (iommu=pt), ACS is off on the PCIe switches, and Above 4G decoding/large BARs are on"))
        .with_output(table));
    }
    let pairs = n * (n - 1) / 2;
    let linked = pairs_of().filter(|&(a, b)| links.xgmi(a, b)).count();
    let mut notes = Vec::new();
    if judged > 0 {
        notes.push(format!(
            "{judged} direct (weight {XGMI_HOP_WEIGHT}, bandwidth reported)"
        ));
    }
    if by_design > 0 {
        notes.push(format!("{by_design} between partitioned GPUs, where KFD reports no per-link health (weight 41, bandwidth 0 by design: the all-reduce tests them)"));
    }
    let notes = if notes.is_empty() {
        String::new()
    } else {
        format!(" ({})", notes.join("; "))
    };
    let peer = if pairs == linked {
        "peer-to-peer DMA over XGMI".to_string()
    } else if unreported > 0 {
        format!(
            "peer-to-peer DMA over PCIe not reported for {unreported} pairs (this kernel has no p2p_links)"
        )
    } else {
        format!("peer-to-peer DMA enabled ({over_pcie} pairs over PCIe, per KFD's p2p_links)")
    };
    Ok(Verdict::pass(format!(
        "{n} GPUs, {} XGMI hives; {linked} of {pairs} pairs linked by XGMI{notes}; {peer}",
        distinct.len()
    ))
    .with_output(table))
}

/// One all-reduce of `count` floats per GPU; returns (seconds, busbw GB/s).
fn run_allreduce(ctx: &NodeContext, count: usize, verify: bool) -> Result<(f64, f64), Verdict> {
    let mut ring = Collective::new(ctx, count, verify)?;
    let t = Instant::now();
    ring.launch()?;
    let limit =
        rocgate_harness::deadline::wait_budget(Duration::from_secs(3), Duration::from_secs(60));
    ring.wait(t, limit, "the all-reduce")?;
    let secs = t.elapsed().as_secs_f64().max(1e-9);
    if verify && let Some(w) = ring.first_wrong(std::slice::from_ref(&(0..count)))? {
        return end(collective::wrong_sum(&w, ""));
    }
    Ok((secs, collective::busbw(count, ring.devices.len(), secs)))
}

fn allreduce(ctx: &NodeContext, _: Scope) -> Outcome {
    const COUNT: usize = 1 << 20;
    let (secs, busbw) = run_allreduce(ctx, COUNT, true)?;
    let n = hip_devices(ctx).map_or(0, |d| d.len());
    Ok(Verdict::pass(format!(
        "sum all-reduce of {} MiB across {n} GPUs verified in {:.2} ms, bus bandwidth {busbw:.1} GB/s",
        (COUNT * 4) >> 20,
        secs * 1e3
    ))
    // One call of 4 MiB, the first on new communicators, made to check the
    // sum: latency and set-up set its rate, so it is shown, not compared
    // across runs (rccl.allreduce_throughput measures bus bandwidth).
    .with_reading("allreduce_busbw", busbw, "GB/s"))
}

fn allreduce_throughput(ctx: &NodeContext, _: Scope) -> Outcome {
    const COUNT: usize = 64 << 20;
    let Some(first) = ctx.selected_gpus().first().and_then(|&i| ctx.facts.gpu(i)) else {
        return Err(Verdict::not_applicable("no GPU selected"));
    };
    if ctx
        .thresholds
        .floor(first, "allreduce_busbw_gbps")
        .is_none()
    {
        return Err(Verdict::not_configured(format!(
            "{} has no allreduce_busbw_gbps floor for {} (see README: thresholds)",
            ctx.thresholds.origin,
            first.product.as_deref().unwrap_or("this GPU")
        )));
    }
    // A warm-up, then the best of three, all three kept for their spread.
    let mut rates = Vec::new();
    for i in 0..4 {
        let (_, busbw) = run_allreduce(ctx, COUNT, false)?;
        if i > 0 {
            rates.push(busbw);
        }
    }
    let best = rates.iter().copied().fold(0.0, f64::max);
    Ok(judge_floor(ctx, first, "allreduce_busbw_gbps", best, "GB/s").with_samples(&rates))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::fixture::node;

    #[test]
    fn the_interconnect_is_read_from_kfd_links_hive_by_hive() {
        // Two hives of four: the pairs across them need no XGMI link.
        for (scenario, found) in [
            ("mi300x-8", "8 GPUs, 1 XGMI hives; 28 of 28 pairs"),
            ("mi210-8-two-hives", "8 GPUs, 2 XGMI hives; 12 of 28 pairs"),
        ] {
            let v = node(scenario).passes(interconnect, Scope::Node);
            assert!(v.message.starts_with(found), "{scenario}: {}", v.message);
        }
        let single = node("rx7900xtx-1").verdict(interconnect, Scope::Node);
        assert_eq!(
            single.skip_reason,
            Some(rocgate_harness::SkipReason::NotApplicable)
        );
    }
}
