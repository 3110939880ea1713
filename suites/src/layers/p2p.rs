//! hip, extended tier: peer-to-peer copies between every pair of GPU
//! devices, checked for integrity and timed, as a GB/s matrix judged
//! against the floor of each pair's link (XGMI or PCIe). Partitions of one
//! device share its links, so one partition stands for its device.

use super::hip_device::{hip_devices, hip_fail};
use super::isolated;
use super::links::{LinkKind, Links};
use crate::context::NodeContext;
use crate::findings::codes;
use crate::stack;
use rocgate_harness::{Check, Outcome, Scope, ScopeKind, Status, Tier, Verdict};
use rocgate_node::facts::gpus::Gpu;
use rocgate_rocm::hip::{DeviceBuffer, Hip, HipError, Stream, TimedCopy};
use std::collections::BTreeSet;
use std::sync::Arc;

/// Bytes of each timed copy: TransferBench's healthcheck moves hundreds of
/// MiB per transfer, enough that launch overhead does not count.
const TIMED_BYTES: usize = 256 << 20;
/// Bytes of each pair's integrity copy.
const CHECKED_BYTES: usize = 1 << 20;
/// The metric family of the matrix.
const FAMILY: &str = "p2p_gbps";

/// The peer-to-peer check.
pub fn checks() -> Vec<Check<NodeContext>> {
    vec![Check {
        tier: Tier::Extended,
        gates: false,
        ..isolated(
            "hip::p2p_bandwidth",
            stack::HIP,
            ScopeKind::Node,
            &["hip::device", "hip::memcpy"],
            300,
            "every pair of GPUs copies peer-to-peer intact, at or above its link's floor (a GB/s matrix)",
            p2p_bandwidth,
        )
    }]
}

/// One GPU standing for its device: the GPU, its HIP ordinal, its device.
struct Peer<'a> {
    gpu: &'a Gpu,
    ordinal: i32,
    device: usize,
    small: DeviceBuffer,
    large: DeviceBuffer,
    /// A stream on this GPU, which copies to it are timed on.
    stream: Stream,
}

/// What went wrong between two GPUs, by pair.
#[derive(Default)]
struct Faults {
    corrupt: Vec<String>,
    /// The GPUs of each corrupted pair, to name the one they share.
    corrupt_gpus: Vec<(u32, u32)>,
    failed: Vec<String>,
    below: Vec<String>,
}

fn p2p_bandwidth(ctx: &NodeContext, _: Scope) -> Outcome {
    let (hip, _) = ctx.runtime.hip_ready()?;
    let links = Links::of(&ctx.facts.gpus);
    let peers = peers(ctx, hip, &links)?;
    let pattern: Vec<u8> = (0..CHECKED_BYTES).map(|i| (i % 251) as u8).collect();
    let mut faults = Faults::default();
    let mut measured = Verdict::pass("");
    let mut judged = Vec::new();
    for from in &peers {
        for to in peers.iter().filter(|p| p.gpu.index != from.gpu.index) {
            let (from_scope, to_scope) = (
                Scope::Gpu(from.gpu.index).label(),
                Scope::Gpu(to.gpu.index).label(),
            );
            let pair = format!("{from_scope}>{to_scope}");
            let kind = links.kind(from.device, to.device);
            match copy_pair(hip, from, to, &pattern) {
                Ok(Some(rates)) => {
                    let gbps = rates.first().copied().unwrap_or(0.0);
                    let v = judge(ctx, from.gpu, kind, gbps).with_samples(&rates);
                    if v.status == Status::Fail {
                        faults
                            .below
                            .push(format!("{pair} {gbps:.1} GB/s ({})", kind.label()));
                    }
                    measured =
                        measured.with_metrics_between(v.metrics.clone(), &from_scope, &to_scope);
                    judged.push(v);
                }
                Ok(None) => {
                    faults.corrupt.push(format!("{pair} ({})", kind.label()));
                    faults.corrupt_gpus.push((from.gpu.index, to.gpu.index));
                }
                Err(e) => faults
                    .failed
                    .push(format!("{pair} ({}): {e}", kind.label())),
            }
        }
    }
    let pairs = peers.len() * (peers.len() - 1);
    let verdict = summarise(&faults, &judged, pairs);
    Ok(Verdict {
        metrics: measured.metrics,
        ..verdict
    })
}

/// One GPU of each device among those selected, with its buffers.
fn peers<'a>(
    ctx: &'a NodeContext,
    hip: &Arc<Hip>,
    links: &Links<'_>,
) -> Result<Vec<Peer<'a>>, Verdict> {
    let mut devices = BTreeSet::new();
    let mut peers = Vec::new();
    let fail = |e: HipError| hip_fail(codes::P2P_COPY_FAILED, &e, "see hip.memcpy on this GPU");
    for (index, ordinal) in hip_devices(ctx)? {
        let (Some(gpu), Some(device)) = (ctx.facts.gpu(index), links.device_of(index)) else {
            continue;
        };
        if !devices.insert(device) {
            continue;
        }
        hip.set_device(ordinal).map_err(fail)?;
        peers.push(Peer {
            gpu,
            ordinal,
            device,
            small: DeviceBuffer::new(hip, CHECKED_BYTES).map_err(fail)?,
            large: DeviceBuffer::new(hip, TIMED_BYTES).map_err(fail)?,
            stream: Stream::new(hip).map_err(fail)?,
        });
    }
    if peers.len() < 2 {
        return Err(Verdict::not_applicable(
            "peer-to-peer copies need two or more GPU devices",
        ));
    }
    Ok(peers)
}

/// Copies `pattern` from `from` to `to` and back to the host, then times
/// large copies on the GPU's clock (a warm-up, then three back to back
/// between events): their rates in GB/s, the best first. `Ok(None)`: the
/// data arrived different.
fn copy_pair(
    hip: &Hip,
    from: &Peer,
    to: &Peer,
    pattern: &[u8],
) -> Result<Option<Vec<f64>>, HipError> {
    // Peer access is what HIP and RCCL use between linked GPUs; without
    // it hipMemcpyPeer stages through host memory, which is the fault.
    if !hip.can_access_peer(to.ordinal, from.ordinal)? {
        return Err(HipError::Invalid {
            call: "hipDeviceCanAccessPeer",
            reason: "the GPU cannot access its peer's memory".into(),
        });
    }
    hip.set_device(to.ordinal)?;
    hip.enable_peer_access(from.ordinal)?;
    from.small.upload(pattern)?;
    to.small.fill(0)?;
    to.small
        .copy_from_peer(to.ordinal, &from.small, from.ordinal)?;
    let mut back = vec![0u8; pattern.len()];
    to.small.download(&mut back)?;
    if back != pattern {
        return Ok(None);
    }
    let mut copy = TimedCopy::Peer {
        to: &to.large,
        to_device: to.ordinal,
        from: &from.large,
        from_device: from.ordinal,
    };
    let mut rates: Vec<f64> = to
        .stream
        .time_copies(&mut copy, 3)?
        .iter()
        .map(|d| TIMED_BYTES as f64 / d.as_secs_f64().max(1e-9) / 1e9)
        .collect();
    rates.sort_by(|a, b| b.total_cmp(a));
    Ok(Some(rates))
}

/// `gbps` against the floor of its link kind, recorded as the family.
fn judge(ctx: &NodeContext, gpu: &Gpu, kind: LinkKind, gbps: f64) -> Verdict {
    let floor_metric = match kind {
        LinkKind::Xgmi => "p2p_gbps.xgmi",
        LinkKind::Pcie | LinkKind::Host => "p2p_gbps.pcie",
    };
    let mut v = super::judge_floor(ctx, gpu, floor_metric, gbps, "GB/s");
    for m in &mut v.metrics {
        m.name = FAMILY.to_string();
    }
    v
}

/// The check's verdict from what every pair showed.
fn summarise(faults: &Faults, judged: &[Verdict], pairs: usize) -> Verdict {
    if !faults.corrupt.is_empty() {
        let mut finding = codes::P2P_COPY_CORRUPT.finding(format!(
            "{} of {pairs} GPU pairs corrupted a peer-to-peer copy: {}",
            faults.corrupt.len(),
            super::list(&faults.corrupt, 6)
        ));
        // The GPU in every corrupted pair is the one to drain and name,
        // not the node.
        let (a, b) = faults.corrupt_gpus[0];
        finding.blames = [a, b]
            .into_iter()
            .find(|g| faults.corrupt_gpus.iter().all(|&(x, y)| x == *g || y == *g))
            .map(Scope::Gpu);
        return Verdict::found(finding);
    }
    if !faults.failed.is_empty() {
        return Verdict::found(codes::P2P_COPY_FAILED.finding(format!(
            "{} of {pairs} GPU pairs cannot copy peer-to-peer: {}",
            faults.failed.len(),
            super::list(&faults.failed, 4)
        )));
    }
    if !faults.below.is_empty() {
        return Verdict::found(codes::PERF_BELOW_FLOOR.finding(format!(
            "{} of {pairs} GPU pairs copy below their link's floor: {}",
            faults.below.len(),
            super::list(&faults.below, 6)
        )));
    }
    let values: Vec<f64> = judged
        .iter()
        .flat_map(|v| v.metrics.iter().map(|m| m.value))
        .collect();
    let least = values.iter().copied().fold(f64::INFINITY, f64::min);
    // A pair without a floor (or a GPU the inventory lost) was measured,
    // not judged: it never counts as at or above a floor.
    let unjudged = judged
        .iter()
        .filter(|v| v.status == Status::Skipped)
        .count();
    if unjudged == pairs {
        return Verdict::not_configured(format!(
            "{pairs} GPU pairs copy intact, slowest {least:.1} GB/s; no p2p_gbps floor for these GPUs' links (see README: thresholds)"
        ));
    }
    Verdict::pass(format!(
        "{pairs} GPU pairs copy intact, slowest {least:.1} GB/s; {} judged against their link's floor, all at or above it{}",
        pairs - unjudged,
        if unjudged > 0 {
            format!(" ({unjudged} have no floor)")
        } else {
            String::new()
        }
    ))
}
