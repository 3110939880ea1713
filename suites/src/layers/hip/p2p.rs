//! hip, extended tier: peer-to-peer copies between every pair of GPU
//! devices, checked for integrity and timed, as a GB/s matrix judged
//! against the floor of each pair's link (XGMI or PCIe). Partitions of one
//! device share its links, so one partition stands for its device.

use super::device::hip_devices;
use crate::context::NodeContext;
use crate::findings::codes;
use crate::layers::kfd::links::{LinkKind, Links};
use crate::layers::support::{end, isolated, judge_floor, list};
use crate::stack;
use rocgate_harness::{Check, Outcome, Scope, ScopeKind, Status, Tier, Verdict};
use rocgate_node::facts::gpus::Gpu;
use rocgate_rocm::hip::{DeviceBuffer, Hip, HipError, Stream, TimedCopy};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

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
            // a copy per ordered pair: 56 on 8 GPUs.
            .typically(Duration::from_millis(6000))
    }]
}

/// One GPU standing for its device: the GPU, its HIP ordinal, its device.
struct Member<'a> {
    gpu: &'a Gpu,
    ordinal: i32,
    device: usize,
}

/// A member's buffers and stream, made and used on the copying thread only
/// (HIP's current device is per thread, and the handles stay there).
struct Peer {
    ordinal: i32,
    small: DeviceBuffer,
    large: DeviceBuffer,
    /// A stream on this GPU, which copies to it are timed on.
    stream: Stream,
}

/// What the copying thread reports, in order: the buffers made (or why
/// not), then each pair's copies as they end.
enum Progress {
    Ready(Result<(), String>),
    Copied(Result<Option<Vec<f64>>, String>),
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

/// Time kept back from the check's own deadline to report a pair that did
/// not finish, before the worker's watchdog ends the check without a word.
const RESERVE: Duration = Duration::from_secs(3);
/// How long one pair may take when the check runs without a deadline.
const UNBOUNDED_PAIR: Duration = Duration::from_secs(60);

/// How long the next step may wait when `steps` remain (this one included):
/// an even share of what the check has left, so one pair that never
/// finishes is named with time left, while the time fast pairs did not use
/// passes on to the later ones.
fn share(steps: usize) -> Duration {
    rocgate_harness::deadline::time_left().map_or(UNBOUNDED_PAIR, |left| {
        left.saturating_sub(RESERVE) / u32::try_from(steps.max(1)).unwrap_or(u32::MAX)
    })
}

fn p2p_bandwidth(ctx: &NodeContext, _: Scope) -> Outcome {
    let (hip, _) = ctx.runtime.hip_ready()?;
    let links = Links::of(&ctx.facts.gpus);
    let members = members(ctx, &links)?;
    let pairs: Vec<(usize, usize)> = (0..members.len())
        .flat_map(|a| {
            (0..members.len())
                .filter(move |&b| b != a)
                .map(move |b| (a, b))
        })
        .collect();
    // The copies run on a thread of their own: a copy that never returns
    // (a wedged link, a rate near zero) holds that thread, not the check,
    // which names the pair when its share of the time is up.
    let (tx, rx) = mpsc::channel();
    let ordinals: Vec<i32> = members.iter().map(|m| m.ordinal).collect();
    let hip_for_copies = Arc::clone(hip);
    let copying = pairs.clone();
    std::thread::Builder::new()
        .name("p2p-copies".into())
        .spawn(move || copy_all(&hip_for_copies, &ordinals, &copying, &tx))
        .map_err(|e| Verdict::crash(format!("cannot start a thread for the peer copies: {e}")))?;
    let steps = pairs.len() + 1;
    match rx.recv_timeout(share(steps)) {
        Ok(Progress::Ready(Ok(()))) => {}
        Ok(Progress::Ready(Err(e))) => {
            return end(Verdict::found(
                codes::P2P_COPY_FAILED.finding_next(e, "see hip.memcpy on this GPU"),
            ));
        }
        Ok(Progress::Copied(_)) | Err(RecvTimeoutError::Disconnected) => {
            return Err(Verdict::crash(
                "the peer-copy thread ended before it made its buffers",
            ));
        }
        Err(RecvTimeoutError::Timeout) => {
            return Err(Verdict::timeout(format!(
                "allocating the copy buffers on {} GPUs did not finish in {:.1} s",
                members.len(),
                share(steps).as_secs_f64()
            )));
        }
    }
    let mut faults = Faults::default();
    let mut measured = Verdict::pass("");
    let mut judged = Vec::new();
    for (k, &(a, b)) in pairs.iter().enumerate() {
        let (from, to) = (&members[a], &members[b]);
        let (from_scope, to_scope) = (
            Scope::Gpu(from.gpu.index).label(),
            Scope::Gpu(to.gpu.index).label(),
        );
        let pair = format!("{from_scope}>{to_scope}");
        let kind = links.kind(from.device, to.device);
        let limit = share(pairs.len() - k);
        match rx.recv_timeout(limit) {
            Ok(Progress::Copied(Ok(Some(rates)))) => {
                let gbps = rates.first().copied().unwrap_or(0.0);
                let v = judge(ctx, from.gpu, kind, gbps).with_samples(&rates);
                if v.status == Status::Fail {
                    faults
                        .below
                        .push(format!("{pair} {gbps:.1} GB/s ({})", kind.label()));
                }
                measured = measured.with_metrics_between(v.metrics.clone(), &from_scope, &to_scope);
                judged.push(v);
            }
            Ok(Progress::Copied(Ok(None))) => {
                faults.corrupt.push(format!("{pair} ({})", kind.label()));
                faults.corrupt_gpus.push((from.gpu.index, to.gpu.index));
            }
            Ok(Progress::Copied(Err(e))) => faults
                .failed
                .push(format!("{pair} ({}): {e}", kind.label())),
            Ok(Progress::Ready(_)) | Err(RecvTimeoutError::Disconnected) => {
                return Err(Verdict::crash(format!(
                    "the peer-copy thread ended during {pair}"
                )));
            }
            Err(RecvTimeoutError::Timeout) => {
                let gpus = (from.gpu.index, to.gpu.index);
                let verdict = unfinished(&pair, gpus, kind, limit, k, pairs.len(), &faults);
                return Err(Verdict {
                    metrics: measured.metrics,
                    ..verdict
                });
            }
        }
    }
    let verdict = summarise(&faults, &judged, pairs.len());
    Ok(Verdict {
        metrics: measured.metrics,
        ..verdict
    })
}

/// The verdict of a matrix stopped at `pair`, which did not finish its
/// copies within `limit`: a timeout that names the pair and what the pairs
/// before it showed. The copy still holds its thread, so no later pair is
/// started (on a wedged engine it would only wait behind it).
fn unfinished(
    pair: &str,
    (from, to): (u32, u32),
    kind: LinkKind,
    limit: Duration,
    done: usize,
    pairs: usize,
    faults: &Faults,
) -> Verdict {
    let mut before = Vec::new();
    for (what, pairs) in [
        ("corrupted", &faults.corrupt),
        ("failed", &faults.failed),
        ("below floor", &faults.below),
    ] {
        if !pairs.is_empty() {
            before.push(format!("{what}: {}", list(pairs, 4)));
        }
    }
    let message = format!(
        "the peer-to-peer copies {pair} ({}) did not finish within {:.1} s, their share of the check's time; the matrix stopped there, {done} of {pairs} pairs copied before it{}",
        kind.label(),
        limit.as_secs_f64(),
        if before.is_empty() {
            String::new()
        } else {
            format!(" ({})", before.join("; "))
        }
    );
    let mut v = Verdict::timeout(message.clone());
    v.finding = Some(codes::P2P_COPY_FAILED.finding_next(
        message,
        format!(
            "the link of {pair} stalls or crawls: read `dmesg | grep -i -e xgmi -e amdgpu -e 'page fault'` and `amd-smi xgmi`, then copy between the two alone (`rocgate run --tier extended --gpus {from},{to}`); a link that stays stuck needs a reset of both GPUs or a reboot"
        ),
    ));
    v
}

/// One GPU of each device among those selected.
fn members<'a>(ctx: &'a NodeContext, links: &Links<'_>) -> Result<Vec<Member<'a>>, Verdict> {
    let mut devices = BTreeSet::new();
    let mut members = Vec::new();
    for (index, ordinal) in hip_devices(ctx)? {
        let (Some(gpu), Some(device)) = (ctx.facts.gpu(index), links.device_of(index)) else {
            continue;
        };
        if devices.insert(device) {
            members.push(Member {
                gpu,
                ordinal,
                device,
            });
        }
    }
    if members.len() < 2 {
        return Err(Verdict::not_applicable(
            "peer-to-peer copies need two or more GPU devices",
        ));
    }
    Ok(members)
}

/// The copying thread: makes each member's buffers, then copies every pair
/// of `pairs` (indices into `ordinals`) in order, reporting each on `tx`;
/// it stops when the check no longer listens.
fn copy_all(
    hip: &Arc<Hip>,
    ordinals: &[i32],
    pairs: &[(usize, usize)],
    tx: &mpsc::Sender<Progress>,
) {
    let made: Result<Vec<Peer>, HipError> = ordinals
        .iter()
        .map(|&ordinal| {
            hip.set_device(ordinal)?;
            Ok(Peer {
                ordinal,
                small: DeviceBuffer::new(hip, CHECKED_BYTES)?,
                large: DeviceBuffer::new(hip, TIMED_BYTES)?,
                stream: Stream::new(hip)?,
            })
        })
        .collect();
    let peers = match made {
        Ok(p) => {
            if tx.send(Progress::Ready(Ok(()))).is_err() {
                return;
            }
            p
        }
        Err(e) => {
            let _ = tx.send(Progress::Ready(Err(e.to_string())));
            return;
        }
    };
    let pattern: Vec<u8> = (0..CHECKED_BYTES).map(|i| (i % 251) as u8).collect();
    for &(a, b) in pairs {
        let copied = copy_pair(hip, &peers[a], &peers[b], &pattern).map_err(|e| e.to_string());
        if tx.send(Progress::Copied(copied)).is_err() {
            return;
        }
    }
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
    let mut v = judge_floor(ctx, gpu, floor_metric, gbps, "GB/s");
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
            list(&faults.corrupt, 6)
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
            list(&faults.failed, 4)
        )));
    }
    if !faults.below.is_empty() {
        return Verdict::found(codes::PERF_BELOW_FLOOR.finding(format!(
            "{} of {pairs} GPU pairs copy below their link's floor: {}",
            faults.below.len(),
            list(&faults.below, 6)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::fixture::{self, assert_found_first, code, node};
    use rocgate_harness::SkipReason;

    /// Floors for MI300X pairs over XGMI only.
    const FLOORS: &str = r#"
[[floor]]
gpu = "gfx942"
metric = "p2p_gbps.xgmi"
value = 40.0
source = "fleet median"
"#;

    fn faults(corrupt: &[(u32, u32)], failed: usize, below: usize) -> Faults {
        Faults {
            corrupt: corrupt.iter().map(|(a, b)| format!("{a}<->{b}")).collect(),
            corrupt_gpus: corrupt.to_vec(),
            failed: (0..failed).map(|i| format!("f{i}")).collect(),
            below: (0..below).map(|i| format!("b{i}")).collect(),
        }
    }

    #[test]
    fn every_p2p_check_skips_without_the_runtime() {
        node("mi300x-8").assert_skip_without_runtime(&checks());
    }

    #[test]
    fn a_pair_is_judged_against_its_link_s_floor_and_recorded_as_the_family() {
        let mut n = node("mi300x-8");
        n.ctx.thresholds = fixture::thresholds(0.1, FLOORS);
        let gpu = n.ctx.facts.gpus[0].clone();
        let v = judge(&n.ctx, &gpu, LinkKind::Xgmi, 50.0);
        assert_eq!(v.status, Status::Pass, "{}", v.message);
        assert_eq!(v.metrics[0].name, FAMILY);
        let v = judge(&n.ctx, &gpu, LinkKind::Xgmi, 30.0);
        assert_eq!(
            code(&v),
            Some(codes::PERF_BELOW_FLOOR.code),
            "{}",
            v.message
        );
        assert!(v.message.contains("p2p_gbps.xgmi"), "{}", v.message);
        // No PCIe floor: measured, not judged.
        let v = judge(&n.ctx, &gpu, LinkKind::Pcie, 30.0);
        assert_eq!(
            v.skip_reason,
            Some(SkipReason::NotConfigured),
            "{}",
            v.message
        );
        assert_eq!(v.metrics[0].name, FAMILY);
    }

    #[test]
    fn a_corrupted_copy_outranks_every_other_fault_and_blames_the_gpu_its_pairs_share() {
        let v = summarise(&faults(&[(1, 2), (2, 3)], 1, 1), &[], 28);
        assert_found_first(&v, codes::P2P_COPY_CORRUPT, "2 of 28 GPU pairs corrupted");
        assert_eq!(v.finding.unwrap().blames, Some(Scope::Gpu(2)));
        // Pairs with no GPU in common blame no GPU.
        let v = summarise(&faults(&[(0, 1), (2, 3)], 0, 0), &[], 28);
        assert_eq!(v.finding.unwrap().blames, None);
    }

    #[test]
    fn a_pair_that_cannot_copy_outranks_a_slow_one() {
        let v = summarise(&faults(&[], 2, 1), &[], 28);
        assert_eq!(code(&v), Some(codes::P2P_COPY_FAILED.code), "{}", v.message);
        let v = summarise(&faults(&[], 0, 3), &[], 28);
        assert_found_first(&v, codes::PERF_BELOW_FLOOR, "3 of 28 GPU pairs copy below");
    }

    #[test]
    fn intact_pairs_pass_only_when_a_floor_judged_them() {
        let judged = || Verdict::pass("fast").with_throughput(FAMILY, 45.0, "GB/s");
        let unjudged = || Verdict::not_configured("no floor").with_throughput(FAMILY, 20.0, "GB/s");
        let v = summarise(&Faults::default(), &[unjudged(), unjudged()], 2);
        assert_eq!(
            v.skip_reason,
            Some(SkipReason::NotConfigured),
            "{}",
            v.message
        );
        assert!(v.message.contains("slowest 20.0 GB/s"), "{}", v.message);
        let v = summarise(&Faults::default(), &[judged(), unjudged()], 2);
        assert_eq!(v.status, Status::Pass, "{}", v.message);
        assert!(
            v.message.ends_with(
                "1 judged against their link's floor, all at or above it (1 have no floor)"
            ),
            "{}",
            v.message
        );
    }

    #[test]
    fn without_a_deadline_each_pair_may_take_the_unbounded_share() {
        assert_eq!(share(5), UNBOUNDED_PAIR);
        assert_eq!(share(0), UNBOUNDED_PAIR);
    }
}
