//! One communicator per selected GPU with its buffers and stream: the
//! all-reduce the rccl checks launch, wait for (a hang found and the
//! communicators aborted before the check's own timeout) and verify.
//!
//! Rank r sends `r + 1 + (j % 7)` at element j, so every sum is a small
//! integer (exact in fp32 in any order) that names what each rank gave.

use crate::context::NodeContext;
use crate::findings::{Code, codes};
use crate::layers::hip::device::hip_devices;
use rocgate_harness::Verdict;
use rocgate_rocm::hip::{DeviceBuffer, Hip, HipError, Stream};
use rocgate_rocm::rccl::Comms;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The next step of every rccl failure.
const NEXT: &str = "run rccl-tests' all_reduce_perf on this node for detail (NCCL_DEBUG=INFO); check the interconnect check above, `dmesg | grep -i -e xgmi -e amdgpu`, and that RCCL matches the ROCm release";

/// A finding of `code` with the rccl next step.
pub(super) fn fail(code: Code, e: impl Into<String>) -> Verdict {
    Verdict::found(code.finding_next(e.into(), NEXT))
}

/// The all-reduce's communicators, buffers and streams.
pub(super) struct Collective {
    hip: Arc<Hip>,
    comms: Comms,
    sends: Vec<DeviceBuffer>,
    recvs: Vec<DeviceBuffer>,
    streams: Vec<Stream>,
    /// (fixture GPU index, HIP device) per rank.
    pub devices: Vec<(u32, i32)>,
    /// Elements per rank.
    pub count: usize,
}

/// A wrong element: rank, index, what it held and what it should.
pub(super) struct Wrong {
    pub rank: usize,
    pub gpu: u32,
    pub at: usize,
    pub got: f32,
    pub want: f32,
}

impl Collective {
    /// Communicators over every selected GPU and `count` fp32 per rank;
    /// `fill` writes the send pattern and poisons the receive buffers (a
    /// timing run leaves them as they are).
    pub(super) fn new(ctx: &NodeContext, count: usize, fill: bool) -> Result<Collective, Verdict> {
        let devices = hip_devices(ctx)?;
        if devices.len() < 2 {
            return Err(Verdict::not_applicable(
                "an all-reduce needs two or more GPUs",
            ));
        }
        let (hip, _) = ctx.runtime.hip_ready()?;
        let rccl = ctx.runtime.rccl()?;
        let ids: Vec<i32> = devices.iter().map(|&(_, d)| d).collect();
        let comms = Comms::init_all(rccl, &ids)
            .map_err(|e| fail(codes::RCCL_INIT_FAILED, e.to_string()))?;
        let mem = |e: HipError| fail(codes::RCCL_MEMORY_FAILED, e.to_string());
        let (mut sends, mut recvs, mut streams) = (Vec::new(), Vec::new(), Vec::new());
        for (rank, &d) in ids.iter().enumerate() {
            hip.set_device(d).map_err(mem)?;
            let send = DeviceBuffer::new(hip, count * 4).map_err(mem)?;
            let recv = DeviceBuffer::new(hip, count * 4).map_err(mem)?;
            if fill {
                let data: Vec<u8> = (0..count)
                    .flat_map(|j| sent(rank, j).to_le_bytes())
                    .collect();
                send.upload(&data).map_err(mem)?;
                recv.fill(0xFF).map_err(mem)?;
            }
            streams.push(Stream::new(hip).map_err(mem)?);
            sends.push(send);
            recvs.push(recv);
        }
        Ok(Collective {
            hip: Arc::clone(hip),
            comms,
            sends,
            recvs,
            streams,
            devices,
            count,
        })
    }

    /// Queues one sum all-reduce on every rank's stream.
    pub(super) fn launch(&self) -> Result<(), Verdict> {
        self.comms
            .all_reduce_f32(self.count, &self.sends, &self.recvs, &self.streams)
            .map_err(|e| fail(codes::RCCL_ALLREDUCE_FAILED, e.to_string()))
    }

    /// Waits for every stream, polling rather than blocking, so a hang is
    /// found and the communicators aborted with time left to say so.
    /// `what` names the work in the hang's message.
    pub(super) fn wait(
        &mut self,
        started: Instant,
        limit: Duration,
        what: &str,
    ) -> Result<(), Verdict> {
        loop {
            if let Err(e) = self.comms.async_error() {
                self.comms.abort();
                return Err(fail(codes::RCCL_ALLREDUCE_FAILED, e.to_string()));
            }
            let done = self
                .streams
                .iter()
                .map(Stream::is_done)
                .collect::<Result<Vec<bool>, _>>()
                .map_err(|e| fail(codes::RCCL_ALLREDUCE_FAILED, e.to_string()))?;
            if done.iter().all(|&d| d) {
                return Ok(());
            }
            if started.elapsed() > limit {
                self.comms.abort();
                return Err(fail(
                    codes::RCCL_ALLREDUCE_HANG,
                    format!(
                        "{what} across {} GPUs did not complete within {:.1} s; communicators aborted",
                        self.devices.len(),
                        limit.as_secs_f64()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// The first element of `ranges` on any rank whose sum is not what the
    /// ranks sent.
    pub(super) fn first_wrong(&self, ranges: &[Range<usize>]) -> Result<Option<Wrong>, Verdict> {
        let n = self.devices.len();
        let mem = |e: HipError| fail(codes::RCCL_MEMORY_FAILED, e.to_string());
        for (rank, recv) in self.recvs.iter().enumerate() {
            self.hip.set_device(self.devices[rank].1).map_err(mem)?;
            for range in ranges {
                let range = range.start.min(self.count)..range.end.min(self.count);
                let mut bytes = vec![0u8; range.len() * 4];
                recv.download_at(range.start * 4, &mut bytes).map_err(mem)?;
                let bad = bytes.chunks_exact(4).enumerate().find_map(|(k, w)| {
                    let j = range.start + k;
                    let got = f32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                    let want = expected(n, j);
                    (got != want).then_some(Wrong {
                        rank,
                        gpu: self.devices[rank].0,
                        at: j,
                        got,
                        want,
                    })
                });
                if bad.is_some() {
                    return Ok(bad);
                }
            }
        }
        Ok(None)
    }
}

/// What rank `rank` sends at element `j`.
fn sent(rank: usize, j: usize) -> f32 {
    (rank + 1) as f32 + (j % 7) as f32
}

/// The sum of every rank's element `j` over `n` ranks.
fn expected(n: usize, j: usize) -> f32 {
    (n * (n + 1) / 2) as f32 + (n * (j % 7)) as f32
}

/// Bus bandwidth in GB/s of an all-reduce of `count` fp32 over `n` ranks
/// in `secs` (rccl-tests' busbw: algbw x 2(n-1)/n).
pub(super) fn busbw(count: usize, n: usize, secs: f64) -> f64 {
    let algbw = (count * 4) as f64 / secs.max(1e-9) / 1e9;
    algbw * 2.0 * (n as f64 - 1.0) / n as f64
}

/// A wrong sum as a finding.
pub(super) fn wrong_sum(w: &Wrong, when: &str) -> Verdict {
    Verdict::found(codes::RCCL_ALLREDUCE_WRONG.finding(format!(
        "all-reduce result on GPU {} (rank {}) is wrong at element {}{when}: got {}, expected {}",
        w.gpu, w.rank, w.at, w.got, w.want
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sum_names_each_rank_s_share_and_busbw_follows_rccl_tests() {
        // 8 ranks: 1+..+8 = 36, plus 8 x (j % 7).
        assert_eq!(expected(8, 0), 36.0);
        assert_eq!(expected(8, 9), 36.0 + 16.0);
        assert_eq!((0..8).map(|r| sent(r, 9)).sum::<f32>(), expected(8, 9));
        // 2^28 floats (2^30 bytes) in 1 s over 8 ranks: algbw 1.07 GB/s x 14/8.
        assert!((busbw(1 << 28, 8, 1.0) - 1.073_741_824 * 1.75).abs() < 1e-9);
    }
}
