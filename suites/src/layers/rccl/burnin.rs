//! rccl, burn-in tier: the all-reduce in a loop across every selected GPU
//! for the run's `--duration`, in the node's worker while each GPU's own
//! burn-in (`hip::burnin`) runs in its worker: peer traffic over XGMI (or
//! PCIe) the whole time, on the same communicators, every iteration's sums
//! checked and its bus bandwidth kept as a series.

use super::collective::{self, Collective};
use crate::context::NodeContext;

use crate::layers::hip::burnin::DEFAULT_DURATION;
use crate::layers::support::{end, isolated, seconds};
use crate::stack;
use rocgate_harness::{Check, Outcome, Scope, ScopeKind, Series, SkipReason, Tier, Verdict};
use std::time::{Duration, Instant};

/// fp32 per rank: 64 MiB, past every cache (MI300X's Infinity Cache is
/// 256 MiB across the node's eight), where RCCL's ring reaches most of its
/// bus bandwidth.
const COUNT: usize = 16 << 20;
/// All-reduces per iteration, back to back on the same communicators:
/// about 15 ms of 8x MI300X at 300 GB/s bus bandwidth (an estimate).
const CALLS: usize = 32;
/// Elements checked at each end of every rank's result, each iteration.
const CHECKED: usize = 1024;
/// Longest one iteration may take before it counts as a hang.
const ITERATION_LIMIT: Duration = Duration::from_secs(30);
/// Kept of the check's own time at the end, for judging and reporting.
const RESERVE: Duration = Duration::from_secs(20);

/// The check.
pub(super) fn check() -> Check<NodeContext> {
    Check {
        tier: Tier::Burnin,
        gates: false,
        sustained: true,
        ..isolated(
            "rccl::burnin",
            stack::RCCL,
            ScopeKind::Node,
            &["rccl::allreduce"],
            // Beyond the duration: communicators, buffers, the last
            // iteration.
            120,
            "under sustained load the all-reduce across the GPUs keeps completing with the right sums",
            burnin,
        )
        .typically(Duration::from_secs(3))
    }
}

fn burnin(ctx: &NodeContext, _: Scope) -> Outcome {
    let duration = ctx.options.burnin.unwrap_or(DEFAULT_DURATION);
    let mut ring = Collective::new(ctx, COUNT, true)?;
    let n = ring.devices.len();
    let checked = [0..CHECKED, COUNT - CHECKED..COUNT];
    let start = Instant::now();
    let mut rates: Vec<[f64; 2]> = Vec::new();
    let mut cut = None;
    while start.elapsed() < duration {
        let at = start.elapsed().as_secs_f64();
        if rocgate_harness::deadline::stop_asked() {
            cut = Some(SkipReason::Interrupted);
            break;
        }
        if rocgate_harness::deadline::time_left().is_some_and(|left| left < RESERVE) {
            cut = Some(SkipReason::Unverifiable);
            break;
        }
        // Where a failure came, for its message.
        let when = format!(
            " in iteration {} ({} into the burn-in of {})",
            rates.len() + 1,
            seconds(at),
            seconds(duration.as_secs_f64())
        );
        let t = Instant::now();
        let ran = (0..CALLS)
            .try_for_each(|_| ring.launch())
            .and_then(|()| ring.wait(t, ITERATION_LIMIT, &format!("{CALLS} all-reduces")));
        if let Err(v) = ran {
            return end(during(v, &when));
        }
        let secs = t.elapsed().as_secs_f64() / CALLS as f64;
        if let Some(w) = ring.first_wrong(&checked).map_err(|v| during(v, &when))? {
            return end(collective::wrong_sum(&w, &when));
        }
        rates.push([
            start.elapsed().as_secs_f64(),
            collective::busbw(COUNT, n, secs),
        ]);
    }
    let ran = start.elapsed().as_secs_f64();
    let values: Vec<f64> = rates.iter().map(|p| p[1]).collect();
    let Some(spread) = rocgate_harness::Spread::of(&values) else {
        return end(Verdict::unverifiable(format!(
            "no iteration finished in {}: nothing checked",
            seconds(ran)
        )));
    };
    let summary = format!(
        "{} iterations of {CALLS} all-reduces of {} MiB across {n} GPUs in {}, every sum checked right (the first and last {CHECKED} elements of every rank); bus bandwidth median {:.0} GB/s, lowest {:.0}",
        rates.len(),
        (COUNT * 4) >> 20,
        seconds(ran),
        spread.median,
        spread.min
    );
    let attach = |v: Verdict| {
        v.with_series(vec![Series::new("allreduce_busbw", "GB/s", None, &rates)])
            .with_reading("burnin_allreduce_busbw", spread.median, "GB/s")
            .with_count("burnin_iterations", rates.len() as f64, "count")
    };
    match cut {
        Some(SkipReason::Interrupted) => end(attach(Verdict::skip(
            SkipReason::Interrupted,
            format!(
                "interrupted {}: nothing wrong in what ran; {summary}",
                seconds(ran)
            ),
        ))),
        Some(_) => end(attach(Verdict::unverifiable(format!(
            "the check's time ran out {} into the burn-in: nothing wrong in what ran; {summary}",
            seconds(ran)
        )))),
        None => Ok(attach(Verdict::pass(summary))),
    }
}

/// `v` with where in the burn-in it came.
fn during(mut v: Verdict, when: &str) -> Verdict {
    v.message.push_str(when);
    if let Some(f) = v.finding.as_mut() {
        f.message.push_str(when);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::findings::codes;
    use collective::fail;

    #[test]
    fn a_failure_says_where_in_the_burn_in_it_came() {
        let v = during(
            fail(
                codes::RCCL_ALLREDUCE_FAILED,
                "ncclAllReduce: unhandled system error",
            ),
            " in iteration 3 (5 s into the burn-in of 1.0 min)",
        );
        let f = v.finding.expect("a finding");
        assert_eq!(
            f.message,
            "ncclAllReduce: unhandled system error in iteration 3 (5 s into the burn-in of 1.0 min)"
        );
        assert_eq!(v.message, f.message);
    }
}
