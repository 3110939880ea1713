//! hip, burn-in tier: each GPU under sustained load for the run's
//! `--duration`, its telemetry sampled about once a second from sysfs, and
//! its results compared iteration by iteration.
//!
//! An iteration runs rocgate's integer kernel (`burn_hash`: a mix of
//! multiplies, shifts and xors, [`LAUNCHES`] launches xored into one
//! buffer) with the same seeds every time, interleaved with STREAM triads
//! over arrays far past the cache ([`super::stream::Arrays`]) and, where
//! rocBLAS loads, fp16 GEMMs on the matrix cores ([`gemm`]), so the ALUs,
//! the matrix cores and the HBM are all busy. Each workload has one right
//! answer, whatever the order of its arithmetic (integers; GEMM inputs
//! whose sums are exact): its checksum must be the same in every iteration
//! and on every GPU of the node (the cross-GPU comparison is a judgement
//! after the run, [`crate::burnin_peers`]), and its sampled elements must
//! be what the CPU computes. A GPU that differs once names itself, the
//! workload, the iteration and the time: silent data corruption.
//!
//! The telemetry ([`rocgate_node::facts::telemetry`]) is kept as series in
//! the result (temperatures against their critical limits, power against
//! its cap, the clocks against their highest level) and judged with the
//! thresholds' `[burnin]` table once the load ends.

mod gemm;

use super::device::{HipDevice, find_device, hip_fail, load_module};
use super::stream::Arrays;
use crate::context::NodeContext;
use crate::findings::{Code, codes};
use crate::layers::support::{end, isolated, seconds};
use crate::stack;
use rocgate_harness::{Check, Outcome, Scope, ScopeKind, Series, SkipReason, Tier, Verdict};
use rocgate_node::facts::gpu_metrics::{POWER_BITS, Residency, THERMAL_BITS, Throttle};
use rocgate_node::facts::telemetry::{self, Sample};
use rocgate_rocm::hip::{DeviceBuffer, HipError};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The burn-in's duration when `--duration` is not given.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(30 * 60);
/// Words of the hash buffer (64 MiB).
const HASH_WORDS: u32 = 16 << 20;
/// Rounds of the mix per word per launch.
const ROUNDS: u32 = 8192;
/// Hash launches per iteration, each followed by [`TRIADS`] triads and,
/// where rocBLAS loads, [`GEMMS`] GEMMs: about 1.5 s of an MI300X per
/// iteration, 40% of it GEMM (hash: 16 Mi words x 8192 rounds x 9
/// operations x 48 launches at ~80 T integer ops/s, 0.75 s; GEMMs: 1536 of
/// 0.28 TFLOP at ~700 TFLOP/s, 0.6 s; triads: 96 over 6 GiB at ~4.3 TB/s,
/// 0.15 s; estimates until measured), so the host's download and checksum
/// between iterations (tens of milliseconds, the GPU idle) is a small share
/// of the clock samples.
const LAUNCHES: u32 = 48;
const TRIADS: u32 = 2;
/// GEMMs after each hash launch, where rocBLAS loads.
const GEMMS: u32 = 32;
/// The first seed; launch k of every iteration uses `SEED + k`.
const SEED: u32 = 0x5eed_0001;
/// Words at each end of the buffer the CPU recomputes.
const EDGE: usize = 4;
/// How often telemetry is sampled.
const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// Kept of the check's own time at the end, for judging and reporting.
const RESERVE: Duration = Duration::from_secs(20);

/// The burn-in.
pub fn checks() -> Vec<Check<NodeContext>> {
    vec![Check {
        tier: Tier::Burnin,
        gates: false,
        sustained: true,
        ..isolated(
            "hip::burnin",
            stack::HIP,
            ScopeKind::PerGpu,
            &["hip::vector_add"],
            // Beyond the duration: allocation, the CPU's reference and the
            // last iteration.
            120,
            "under sustained load (integer kernel and HBM triads) the GPU's results stay identical and its telemetry within limits",
            burnin,
        )
        .typically(Duration::from_secs(3))
    }]
}

/// What one workload computed in one iteration.
struct Product {
    /// FNV-1a over its result's bytes.
    checksum: u64,
    /// Its sampled elements that differ from the CPU's, each said.
    wrong: Vec<String>,
}

/// One iteration's result: a product per workload, in [`Workload`] order.
struct Iteration {
    at: f64,
    products: Vec<Product>,
}

/// A workload whose result is compared: its name in reports and the fact
/// its common checksum is kept as, for [`crate::burnin_peers`].
struct Workload {
    name: &'static str,
    fact: &'static str,
}

/// rocgate's integer kernel, in every burn-in.
const HASH: Workload = Workload {
    name: "integer hash",
    fact: "burnin_checksum",
};
/// The HBM triads' result (a = b + 0.5c, exact in fp32), in every burn-in.
const TRIAD: Workload = Workload {
    name: "HBM triad",
    fact: "burnin_triad_checksum",
};
/// The rocBLAS GEMM, where rocBLAS loads.
const GEMM: Workload = Workload {
    name: "fp16 GEMM",
    fact: "burnin_gemm_checksum",
};

/// How the load ended before its time.
enum Cut {
    /// A HIP call failed (the GPU may be gone).
    Hip(f64, String),
    /// The run was interrupted.
    Interrupted(f64),
    /// The check's own time ran out.
    OutOfTime(f64),
}

fn burnin(ctx: &NodeContext, scope: Scope) -> Outcome {
    let duration = ctx.options.burnin.unwrap_or(DEFAULT_DURATION);
    let HipDevice {
        gpu, hip, index, ..
    } = find_device(ctx, scope)?;
    let module = load_module(gpu, hip)?;
    let next = "the burn-in's kernels did not start: read `dmesg | grep -i -e amdgpu -e 'page fault'`; a GPU that fails launches needs a reset (<reset>)";
    let fail = |e: HipError| hip_fail(codes::HIP_LAUNCH_FAILED, &e, next);
    let hash = module.function("burn_hash").map_err(fail)?;
    let triad = module.function("triad").map_err(fail)?;
    let copy = module.function("stream_copy").map_err(fail)?;
    let total = hip.total_mem(index).map_err(fail)?;
    let no_memory = |e: HipError| super::stream::no_memory(e, next);
    let arrays = Arrays::new(hip, total).map_err(no_memory)?;
    // c = a once, so every triad's result (b + 0.5c) differs from a's
    // fill: a triad that did not run shows.
    arrays.copy(hip, copy).map_err(fail)?;
    let out = DeviceBuffer::new(hip, HASH_WORDS as usize * 4).map_err(no_memory)?;
    let expected = edge_words();
    // The GEMM where rocBLAS is there to run it; without it the load is
    // rocgate's own kernels, and the output says why.
    let gemm = match ctx.runtime.rocblas() {
        Ok(blas) => gemm::Gemm::new(hip, blas),
        Err(v) => Err(gemm::Unavailable::Library(v.message)),
    };
    let (gemm, without_gemm) = match gemm {
        Ok(g) => (Some(g), None),
        Err(gemm::Unavailable::Library(why)) => (None, Some(format!("rocBLAS: {why}"))),
        Err(gemm::Unavailable::Memory(e)) => (None, Some(format!("no room for its matrices: {e}"))),
        Err(gemm::Unavailable::Hip(e)) => return Err(fail(e)),
    };
    let mut load_text = format!(
        "load per iteration: {LAUNCHES} integer hash launches over {} MiB, each followed by {TRIADS} HBM triads over {} MiB",
        HASH_WORDS / (1 << 18),
        (arrays.bytes() * 3) >> 20
    );
    match (&gemm, &without_gemm) {
        (Some(g), _) => load_text.push_str(&format!(
            " and {GEMMS} fp16 GEMMs ({}x{}x{}, rocblas_gemm_ex, fp32 compute; atomics {})",
            gemm::M,
            gemm::N,
            gemm::K,
            match &g.atomics {
                Ok(()) => "not allowed".to_string(),
                Err(e) => format!("left to rocBLAS: {e}"),
            },
        )),
        (None, Some(why)) => load_text.push_str(&format!("; no GEMM in the load ({why})")),
        (None, None) => {}
    }
    let workloads: Vec<&Workload> = if gemm.is_some() {
        vec![&HASH, &TRIAD, &GEMM]
    } else {
        vec![&HASH, &TRIAD]
    };
    let address = gpu.pci_address.clone();
    let kfd_gpu = gpu.kfd.as_ref().and_then(|k| k.gpu_id);
    let sysroot = &ctx.facts.sysroot;
    let samples: Mutex<Vec<(f64, Sample)>> = Mutex::new(Vec::new());
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let mut iterations = Vec::new();
    let mut cut = None;
    std::thread::scope(|s| {
        s.spawn(|| {
            // Two looks in a row: KFD rebuilds its topology when any device
            // leaves, and a look in the middle of that misses every node.
            let mut gone_before = false;
            while !stop.load(Ordering::SeqCst) {
                let sample = telemetry::sample(sysroot, &address, kfd_gpu);
                let at = start.elapsed().as_secs_f64();
                let gone = is_gone(&sample);
                lock(&samples).push((at, sample));
                if gone && gone_before {
                    stop.store(true, Ordering::SeqCst);
                    break;
                }
                gone_before = gone;
                if gone {
                    sleep_unless(&stop, Duration::from_millis(200));
                    continue;
                }
                let next = SAMPLE_EVERY.saturating_sub(Duration::from_secs_f64(at.fract()));
                sleep_unless(&stop, next);
            }
        });
        let mut host = vec![0u8; HASH_WORDS as usize * 4];
        let mut host_c = if gemm.is_some() {
            vec![0u8; gemm::C_BYTES]
        } else {
            Vec::new()
        };
        while start.elapsed() < duration {
            let at = start.elapsed().as_secs_f64();
            if rocgate_harness::deadline::stop_asked() {
                cut = Some(Cut::Interrupted(at));
                break;
            }
            if rocgate_harness::deadline::time_left().is_some_and(|left| left < RESERVE) {
                cut = Some(Cut::OutOfTime(at));
                break;
            }
            if stop.load(Ordering::SeqCst) {
                // The sampler saw the GPU leave.
                break;
            }
            // `Ok(None)`: asked to stop part-way; the iteration is not whole.
            let ran = (|| -> Result<Option<Vec<Product>>, String> {
                let hip_err = |e: HipError| e.to_string();
                out.fill(0).map_err(hip_err)?;
                for k in 0..LAUNCHES {
                    if rocgate_harness::deadline::stop_asked() {
                        hip.synchronize().map_err(hip_err)?;
                        return Ok(None);
                    }
                    hip.launch_burn_hash(hash, &out, SEED.wrapping_add(k), ROUNDS, HASH_WORDS)
                        .map_err(hip_err)?;
                    for _ in 0..TRIADS {
                        arrays.triad(hip, triad).map_err(hip_err)?;
                    }
                    if let Some(g) = &gemm {
                        for _ in 0..GEMMS {
                            g.launch().map_err(|e| e.to_string())?;
                        }
                    }
                }
                hip.synchronize().map_err(hip_err)?;
                out.download(&mut host).map_err(hip_err)?;
                let (head, want) = arrays.triad_head().map_err(hip_err)?;
                let mut products = vec![
                    Product {
                        checksum: checksum(&host),
                        wrong: wrong_edges(&host, &expected),
                    },
                    Product {
                        checksum: checksum(&head),
                        wrong: wrong_floats(&head, want),
                    },
                ];
                if let Some(g) = &gemm {
                    products.push(g.result(&mut host_c).map_err(hip_err)?);
                }
                Ok(Some(products))
            })();
            let products = match ran {
                Ok(Some(p)) => p,
                Ok(None) => {
                    cut = Some(Cut::Interrupted(start.elapsed().as_secs_f64()));
                    break;
                }
                Err(e) => {
                    let at = start.elapsed().as_secs_f64();
                    // Whether the GPU is still there says what the failure was.
                    lock(&samples).push((at, telemetry::sample(sysroot, &address, kfd_gpu)));
                    cut = Some(Cut::Hip(at, e));
                    break;
                }
            };
            iterations.push(Iteration {
                at: start.elapsed().as_secs_f64(),
                products,
            });
        }
        stop.store(true, Ordering::SeqCst);
    });
    let samples = samples
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    judge(
        ctx,
        Loaded {
            duration,
            ran: start.elapsed(),
            iterations,
            workloads,
            load_text,
            samples,
            cut,
        },
    )
}

/// Whether a sample shows the GPU gone from the bus or from KFD.
fn is_gone(s: &Sample) -> bool {
    !s.on_bus || s.in_kfd == Some(false)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Sleeps `d`, waking early when `stop` is set.
fn sleep_unless(stop: &AtomicBool, d: Duration) {
    let end = Instant::now() + d;
    while !stop.load(Ordering::SeqCst) {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(Duration::from_millis(100)));
    }
}

/// `burn_mix` of kernels.cl.
fn mix(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^= x >> 16;
    x
}

/// What an iteration leaves in word `i`: the xor over its launches of the
/// mix applied [`ROUNDS`] times to the launch's seed and the index.
fn word(i: u32) -> u32 {
    (0..LAUNCHES).fold(0, |acc, k| {
        let mut x = SEED.wrapping_add(k) ^ i;
        for r in 0..ROUNDS {
            x = mix(x.wrapping_add(r));
        }
        acc ^ x
    })
}

/// The CPU's words at each end of the buffer, by index.
fn edge_words() -> Vec<(usize, u32)> {
    let n = HASH_WORDS as usize;
    (0..EDGE)
        .chain(n - EDGE..n)
        .map(|i| (i, word(i as u32)))
        .collect()
}

fn word_at(bytes: &[u8], i: usize) -> Option<u32> {
    bytes
        .get(i * 4..i * 4 + 4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
}

/// The edge words that differ from the CPU's, each with the bits that do.
fn wrong_edges(bytes: &[u8], expected: &[(usize, u32)]) -> Vec<String> {
    expected
        .iter()
        .filter_map(|&(i, want)| {
            let got = word_at(bytes, i).unwrap_or(!want);
            (got != want).then(|| {
                format!(
                    "word {i} differs from the CPU's in bits 0x{:08x}",
                    got ^ want
                )
            })
        })
        .collect()
}

/// The first of `bytes`' 32-bit words that is not `want`, said.
fn wrong_floats(bytes: &[u8], want: u32) -> Vec<String> {
    bytes
        .chunks_exact(4)
        .enumerate()
        .find(|(_, w)| u32::from_ne_bytes([w[0], w[1], w[2], w[3]]) != want)
        .map(|(i, w)| {
            let got = u32::from_ne_bytes([w[0], w[1], w[2], w[3]]);
            format!(
                "word {i} of a is {} (0x{got:08x}) where b + 0.5c is {} (0x{want:08x})",
                f32::from_bits(got),
                f32::from_bits(want)
            )
        })
        .into_iter()
        .collect()
}

/// FNV-1a over the buffer's 64-bit words: cheap beside the GPU's work, and
/// any flipped bit changes it.
fn checksum(bytes: &[u8]) -> u64 {
    bytes.chunks(8).fold(0xcbf2_9ce4_8422_2325, |h, c| {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        (h ^ u64::from_le_bytes(w)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// What the load left to judge.
struct Loaded {
    duration: Duration,
    ran: Duration,
    iterations: Vec<Iteration>,
    /// What each iteration's products are, in order.
    workloads: Vec<&'static Workload>,
    /// The load, said.
    load_text: String,
    samples: Vec<(f64, Sample)>,
    cut: Option<Cut>,
}

/// A gate's finding, and how it ranks among the others (lower first).
struct Found {
    rank: u8,
    code: Code,
    message: String,
}

fn judge(ctx: &NodeContext, load: Loaded) -> Outcome {
    let t = &ctx.thresholds.burnin;
    let mut found: Vec<Found> = Vec::new();
    let mut not_read: Vec<String> = Vec::new();
    // Said in the output, judging nothing.
    let mut notes: Vec<String> = Vec::new();
    let of = format!("of {}", seconds(load.duration.as_secs_f64()));
    let samples = &load.samples;

    // Lost: two looks in a row without the GPU (or the last look, at a
    // failing call), else a failing call.
    let gone = samples
        .windows(2)
        .find(|w| is_gone(&w[0].1) && is_gone(&w[1].1))
        .map(|w| &w[0])
        .or_else(|| {
            samples
                .last()
                .filter(|(_, s)| is_gone(s) && matches!(load.cut, Some(Cut::Hip(..))))
        });
    match (gone, &load.cut) {
        (Some((at, s)), cut) => found.push(Found {
            rank: 0,
            code: codes::GPU_LOST_UNDER_LOAD,
            message: format!(
                "the GPU {} {} into the burn-in ({of}){}",
                if s.on_bus {
                    "left KFD's topology"
                } else {
                    "fell off the PCI bus (its /sys/bus/pci/devices entry is gone)"
                },
                seconds(*at),
                match cut {
                    Some(Cut::Hip(_, why)) => format!(", and its launches failed: {why}"),
                    _ => String::new(),
                }
            ),
        }),
        (None, Some(Cut::Hip(at, why))) => found.push(Found {
            rank: 0,
            code: codes::GPU_LOST_UNDER_LOAD,
            message: format!(
                "the GPU's launches failed {} into the burn-in ({of}): {why}",
                seconds(*at)
            ),
        }),
        _ => {}
    }

    // Results: every iteration of each workload against its most common
    // checksum and the CPU's sampled elements.
    let commons: Vec<Option<u64>> = (0..load.workloads.len())
        .map(|w| {
            majority(
                load.iterations
                    .iter()
                    .filter_map(|i| i.products.get(w))
                    .map(|p| p.checksum),
            )
        })
        .collect();
    for (w, workload) in load.workloads.iter().enumerate() {
        if let Some(f) = mismatch(&load.iterations, w, workload, commons[w]) {
            found.push(f);
        }
    }

    // Counters that grew between the first and the last sample that read
    // each (a GPU gone at the end reads none).
    {
        let grew = |read: &dyn Fn(&Sample) -> Option<u64>| -> u64 {
            let mut values = samples.iter().filter_map(|(_, s)| read(s));
            match (values.next(), values.last()) {
                (Some(x), Some(y)) if y > x => y - x,
                _ => 0,
            }
        };
        let ue = grew(&|s| s.ras.map(|r| r.0));
        let fatal = grew(&|s| s.aer.map(|a| a.1)) + grew(&|s| s.aer.map(|a| a.2));
        let ce = grew(&|s| s.ras.map(|r| r.1));
        let corrected = grew(&|s| s.aer.map(|a| a.0));
        let replays = grew(&|s| s.replays);
        if samples
            .iter()
            .all(|(_, s)| s.ras.is_none() && s.aer.is_none())
        {
            not_read.push("no RAS or AER counter read".into());
        } else if samples.iter().all(|(_, s)| s.ras.is_none())
            && samples
                .iter()
                .any(|(_, s)| s.unread.iter().any(|u| u.starts_with("ras")))
        {
            not_read.push("the GPU's RAS counters never read whole".into());
        }
        // `what` names one; a count of several adds an s to its noun.
        let list = |parts: &[(u64, &str)]| {
            parts
                .iter()
                .filter(|(n, _)| *n > 0)
                .map(|(n, what)| match n {
                    1 => format!("1 {what}"),
                    _ => format!("{n} {what}s"),
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        if ue + fatal > 0 {
            found.push(Found {
                rank: 2,
                code: codes::GPU_ERRORS_UNDER_LOAD,
                message: format!(
                    "counted during the burn-in: {}",
                    list(&[
                        (ue, "uncorrectable RAS error"),
                        (fatal, "uncorrectable PCIe AER error"),
                        (ce, "correctable RAS error"),
                    ])
                ),
            });
        } else if ce + corrected + replays > 0 {
            found.push(Found {
                rank: 5,
                code: codes::GPU_CORRECTED_UNDER_LOAD,
                message: format!(
                    "counted during the burn-in: {}",
                    list(&[
                        (ce, "correctable RAS error"),
                        (corrected, "corrected PCIe AER error"),
                        (replays, "PCIe replay"),
                    ])
                ),
            });
        }
    }

    // Temperatures against their limits.
    let sensors = sensors(samples);
    if sensors.is_empty() {
        not_read.push("no temperature sensor read (no hwmon temp*_input)".into());
    } else if sensors.iter().all(|s| s.limit.is_none()) {
        // MI300 under SR-IOV or with PMFW before 85.69 reads 0 (no limit).
        not_read.push(
            "no temperature sensor gives a critical limit (temp*_crit reads 0 or is absent)".into(),
        );
    }
    for s in &sensors {
        let Some(crit) = s.limit else { continue };
        let (at, hottest) = s.points.iter().copied().fold((0.0, f64::MIN), |m, p| {
            if p[1] > m.1 { (p[0], p[1]) } else { m }
        });
        if hottest >= crit {
            found.push(Found {
                rank: 3,
                code: codes::GPU_OVER_THERMAL_LIMIT,
                message: format!(
                    "{} reached {hottest:.0} °C {} into the burn-in, at or past its critical limit of {crit:.0} °C",
                    s.name.trim_start_matches("temp_"),
                    seconds(at)
                ),
            });
        } else if hottest >= crit - t.thermal_margin_c {
            found.push(Found {
                rank: 6,
                code: codes::GPU_NEAR_THERMAL_LIMIT,
                message: format!(
                    "{} reached {hottest:.0} °C {} into the burn-in, within {:.0} °C of its critical limit of {crit:.0} °C",
                    s.name.trim_start_matches("temp_"),
                    seconds(at),
                    t.thermal_margin_c
                ),
            });
        }
    }

    // Clocks and power once warmed up.
    let loaded: Vec<&Sample> = samples
        .iter()
        .filter(|(at, s)| *at >= t.warmup_s && s.on_bus)
        .map(|(_, s)| s)
        .collect();
    let clocks: Vec<(f64, f64)> = loaded
        .iter()
        .filter_map(|s| s.sclk.map(|c| (c.current_mhz, c.max_mhz)))
        .collect();
    let mut clock_text = String::new();
    let short = load.ran.as_secs_f64() <= t.warmup_s + SAMPLE_EVERY.as_secs_f64();
    if clocks.is_empty() && short {
        not_read.push(format!(
            "the burn-in ran {} and its clocks and power are judged only after a {:.0} s warm-up ([burnin] warmup_s)",
            seconds(load.ran.as_secs_f64()),
            t.warmup_s
        ));
    } else if clocks.is_empty() {
        not_read.push(format!(
            "no graphics clock read under load (pp_dpm_sclk) after the {:.0} s warm-up",
            t.warmup_s
        ));
    } else {
        let collapsed = clocks
            .iter()
            .filter(|(cur, max)| *cur < t.clock_floor * max)
            .count();
        let share = collapsed as f64 / clocks.len() as f64;
        let median = median(clocks.iter().map(|c| c.0));
        let max = clocks.iter().map(|c| c.1).fold(0.0, f64::max);
        clock_text = format!(
            "graphics clock median {median:.0} of {max:.0} MHz, under {:.0}% of it {:.0}% of the loaded time",
            t.clock_floor * 100.0,
            share * 100.0
        );
        if share > t.throttle_share {
            found.push(Found {
                rank: 4,
                code: codes::GPU_CLOCKS_COLLAPSED,
                message: format!(
                    "the graphics clock sat below {:.0}% of its {max:.0} MHz for {:.0}% of the loaded time (the most allowed is {:.0}%; median {median:.0} MHz){}",
                    t.clock_floor * 100.0,
                    share * 100.0,
                    t.throttle_share * 100.0,
                    context_of(&loaded)
                ),
            });
        }
    }
    // Why it was held back, where its gpu_metrics table says.
    let throttle_text = match throttled(&loaded) {
        Some(Throttled::Shares {
            thermal,
            power,
            how,
        }) => {
            if thermal > t.throttle_share {
                found.push(Found {
                    rank: 4,
                    code: codes::GPU_THERMAL_THROTTLED,
                    message: format!(
                        "thermal throttlers held the GPU back {:.0}% of the loaded time (the most allowed is {:.0}%), per {how}; the power cap {:.0}%",
                        thermal * 100.0,
                        t.throttle_share * 100.0,
                        power * 100.0
                    ),
                });
            }
            format!(
                "throttled by heat {:.0}%, by the power cap {:.0}% of the loaded time ({how})",
                thermal * 100.0,
                power * 100.0
            )
        }
        Some(Throttled::NotReported(f, c)) => {
            notes.push(format!(
                "gpu_metrics v{f}.{c} says nothing of throttling: judged by the clocks alone"
            ));
            String::new()
        }
        None => String::new(),
    };
    let powers: Vec<(f64, f64)> = loaded
        .iter()
        .filter_map(|s| Some((s.power_w?, s.power_cap_w?)))
        .collect();
    let mut power_text = String::new();
    if powers.is_empty() && short {
        // Said once, with the clocks.
    } else if powers.is_empty() {
        not_read.push(
            "no power reading with a cap (hwmon power1_input/power1_average, power1_cap)".into(),
        );
    } else {
        let median_w = median(powers.iter().map(|p| p.0));
        let cap = powers.iter().map(|p| p.1).fold(0.0, f64::max);
        let [low, high] = t.power_band;
        power_text = format!("power median {median_w:.0} W of a {cap:.0} W cap");
        if median_w < low * cap || median_w > high * cap {
            found.push(Found {
                rank: 7,
                code: codes::GPU_POWER_OUT_OF_BAND,
                message: format!(
                    "the median power under load was {median_w:.0} W, {} the band of {:.0}-{:.0}% of its {cap:.0} W cap{}",
                    if median_w < low * cap { "below" } else { "above" },
                    low * 100.0,
                    high * 100.0,
                    if median_w < low * cap {
                        ": it never reached full load"
                    } else {
                        ": the cap does not hold"
                    }
                ),
            });
        }
    }

    // The evidence every verdict carries.
    let ran = load.ran.as_secs_f64();
    let mut v_metrics = Verdict::pass(String::new())
        .with_count("burnin_iterations", load.iterations.len() as f64, "count")
        .with_reading("burnin_seconds", ran, "s");
    for s in &sensors {
        if let Some(spread) = s.spread() {
            v_metrics = v_metrics.with_reading(&format!("{}_max", s.name), spread.max, "C");
        }
    }
    if !clocks.is_empty() {
        v_metrics =
            v_metrics.with_reading("sclk_median", median(clocks.iter().map(|c| c.0)), "MHz");
    }
    if !powers.is_empty() {
        v_metrics = v_metrics.with_reading("power_median", median(powers.iter().map(|p| p.0)), "W");
    }
    let full_sensors = sensors.clone();
    let series = series_of(samples, sensors);
    let summary = [
        format!(
            "{} iterations in {}{}",
            load.iterations.len(),
            seconds(ran),
            if load.cut.is_some() || gone.is_some() {
                format!(" {of}")
            } else {
                String::new()
            }
        ),
        sensors_text(&full_sensors),
        clock_text,
        throttle_text,
        power_text,
    ]
    .into_iter()
    .filter(|p| !p.is_empty())
    .collect::<Vec<_>>()
    .join("; ");
    let attach = |v: Verdict| {
        let mut v = v.with_series(series.clone());
        v.metrics.extend(v_metrics.metrics.clone());
        for (workload, common) in load.workloads.iter().zip(&commons) {
            if let Some(c) = common {
                v = v.with_fact(workload.fact, format!("0x{c:016x}"));
            }
        }
        let mut unread: Vec<&String> = samples.iter().flat_map(|(_, s)| &s.unread).collect();
        unread.sort();
        unread.dedup();
        let mut output = vec![load.load_text.clone()];
        output.extend(notes.iter().cloned());
        if !not_read.is_empty() {
            output.push(format!("not read: {}", not_read.join("; ")));
        }
        if !unread.is_empty() {
            output.push(format!(
                "files that did not read: {}",
                unread
                    .iter()
                    .take(8)
                    .map(|u| u.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
        v.with_output(output.join("\n"))
    };
    found.sort_by_key(|f| f.rank);
    if let Some(worst) = found.first() {
        let also: Vec<String> = found[1..]
            .iter()
            .map(|f| format!("{} ({})", f.code.code, f.message))
            .collect();
        let message = if also.is_empty() {
            format!("{}; {summary}", worst.message)
        } else {
            format!("{}; also {}; {summary}", worst.message, also.join("; "))
        };
        return end(attach(Verdict::found(worst.code.finding(message))));
    }
    match &load.cut {
        Some(Cut::Interrupted(at)) => {
            return end(attach(Verdict::skip(
                SkipReason::Interrupted,
                format!(
                    "interrupted {} into the burn-in ({of}): nothing wrong in what ran; {summary}",
                    seconds(*at)
                ),
            )));
        }
        Some(Cut::OutOfTime(at)) => {
            return end(attach(Verdict::unverifiable(format!(
                "the check's time ran out {} into the burn-in ({of}): nothing wrong in what ran; {summary}",
                seconds(*at)
            ))));
        }
        _ => {}
    }
    if load.iterations.is_empty() {
        return end(attach(Verdict::unverifiable(format!(
            "no iteration finished in {}: nothing to compare",
            seconds(ran)
        ))));
    }
    if !not_read.is_empty() {
        return end(attach(Verdict::unverifiable(format!(
            "the load ran clean ({summary}), but its telemetry could not be judged: {}",
            not_read.join("; ")
        ))));
    }
    Ok(attach(Verdict::pass(format!(
        "every iteration gave the same result; {summary}"
    ))))
}

/// Workload `w`'s iterations judged against their `common` checksum and
/// the CPU: no majority, the same wrong elements every time, or the first
/// iteration that differs.
fn mismatch(
    iterations: &[Iteration],
    w: usize,
    workload: &Workload,
    common: Option<u64>,
) -> Option<Found> {
    let name = workload.name;
    let products: Vec<(usize, &Iteration, &Product)> = iterations
        .iter()
        .enumerate()
        .filter_map(|(n, i)| Some((n, i, i.products.get(w)?)))
        .collect();
    let odd: Vec<&(usize, &Iteration, &Product)> = products
        .iter()
        .filter(|(_, _, p)| Some(p.checksum) != common || !p.wrong.is_empty())
        .collect();
    let every = !odd.is_empty() && odd.len() == products.len();
    let found = |message: String| Found {
        rank: 1,
        code: codes::GPU_RESULT_MISMATCH,
        message,
    };
    if common.is_none() && products.len() > 1 {
        return Some(found(format!(
            "the {} iterations computed the same {name} with no checksum in the majority: the GPU's results are not repeatable",
            products.len()
        )));
    }
    if let (true, Some(wrong)) = (every, odd.first().and_then(|(_, _, p)| p.wrong.first())) {
        return Some(found(format!(
            "in every one of the {} iterations of the {name}, {wrong}: the GPU computes this work wrong, consistently",
            products.len()
        )));
    }
    let (n, it, p) = odd.first()?;
    let how = match p.wrong.first() {
        Some(wrong) => format!(
            "{wrong}{}",
            if Some(p.checksum) == common {
                ""
            } else {
                " and its checksum from the other iterations'"
            }
        ),
        None => format!(
            "checksum 0x{:016x} where the other iterations gave 0x{:016x}",
            p.checksum,
            common.unwrap_or_default()
        ),
    };
    Some(found(format!(
        "iteration {} of {} ({} into the burn-in) computed a different result for the same {name}: {how}{}",
        n + 1,
        products.len(),
        seconds(it.at),
        match odd.len() {
            1 => String::new(),
            k => format!("; {k} iterations differ in all"),
        }
    )))
}

/// What the loaded samples' `gpu_metrics` said of throttling.
enum Throttled {
    /// The share of the loaded time a thermal throttler and the power cap
    /// held, and where that came from.
    Shares {
        thermal: f64,
        power: f64,
        how: &'static str,
    },
    /// The table's version says nothing of it.
    NotReported(u8, u8),
}

/// The throttling the loaded samples show: from the first to the last
/// residency accumulators (MI300 and later), else the share of samples
/// whose throttlers were active (MI200); `None` without a table.
fn throttled(loaded: &[&Sample]) -> Option<Throttled> {
    let tables: Vec<Throttle> = loaded.iter().filter_map(|s| s.throttle).collect();
    let residencies: Vec<&Residency> = tables
        .iter()
        .filter_map(|t| match t {
            Throttle::Residency(r) => Some(r),
            _ => None,
        })
        .collect();
    if let (Some(first), Some(last)) = (residencies.first(), residencies.last())
        && let Some((thermal, power)) = last.shares_since(first)
    {
        return Some(Throttled::Shares {
            thermal,
            power,
            how: "the SMU's throttle residency counters in gpu_metrics",
        });
    }
    let active: Vec<u64> = tables
        .iter()
        .filter_map(|t| match t {
            Throttle::Active(bits) => Some(*bits),
            _ => None,
        })
        .collect();
    if !active.is_empty() {
        let share = |mask: u64| {
            active.iter().filter(|&&b| b & mask != 0).count() as f64 / active.len() as f64
        };
        return Some(Throttled::Shares {
            thermal: share(THERMAL_BITS),
            power: share(POWER_BITS),
            how: "the throttlers gpu_metrics showed active at each sample",
        });
    }
    tables.iter().find_map(|t| match t {
        Throttle::NotReported(f, c) => Some(Throttled::NotReported(*f, *c)),
        _ => None,
    })
}

/// The value more common than any other, if one is.
fn majority(values: impl Iterator<Item = u64>) -> Option<u64> {
    let mut counts = std::collections::BTreeMap::new();
    for v in values {
        *counts.entry(v).or_insert(0usize) += 1;
    }
    let most = counts.values().copied().max()?;
    let mut leaders = counts.into_iter().filter(|(_, n)| *n == most);
    match (leaders.next(), leaders.next()) {
        (Some((v, _)), None) => Some(v),
        _ => None,
    }
}

fn median(values: impl Iterator<Item = f64>) -> f64 {
    rocgate_harness::Spread::of(&values.collect::<Vec<_>>()).map_or(f64::NAN, |s| s.median)
}

/// What the GPU showed while its clock collapsed: its hottest sensor and
/// its power, so heat and power limits tell themselves apart.
fn context_of(loaded: &[&Sample]) -> String {
    let hottest = loaded
        .iter()
        .flat_map(|s| s.temperatures.iter())
        .map(|t| t.celsius)
        .fold(f64::NAN, f64::max);
    let power = median(loaded.iter().filter_map(|s| s.power_w));
    let cap = loaded
        .iter()
        .filter_map(|s| s.power_cap_w)
        .fold(f64::NAN, f64::max);
    let mut parts = Vec::new();
    if hottest.is_finite() {
        parts.push(format!("hottest sensor {hottest:.0} °C"));
    }
    if power.is_finite() && cap.is_finite() {
        parts.push(format!("median power {power:.0} W of a {cap:.0} W cap"));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" while {}", parts.join(", "))
    }
}

/// Each temperature sensor as a series, with its critical limit.
fn sensors(samples: &[(f64, Sample)]) -> Vec<Series> {
    let mut labels: Vec<(String, Option<f64>)> = Vec::new();
    // The highest limit any sample gave: a read that gave none is not the
    // sensor losing its limit.
    for (_, s) in samples {
        for t in &s.temperatures {
            match labels.iter_mut().find(|(l, _)| *l == t.label) {
                Some((_, crit)) => {
                    *crit = match (*crit, t.crit) {
                        (Some(a), Some(b)) => Some(a.max(b)),
                        (a, b) => a.or(b),
                    }
                }
                None => labels.push((t.label.clone(), t.crit)),
            }
        }
    }
    labels
        .into_iter()
        .map(|(label, crit)| {
            let points: Vec<[f64; 2]> = samples
                .iter()
                .filter_map(|(at, s)| {
                    s.temperatures
                        .iter()
                        .find(|t| t.label == label)
                        .map(|t| [*at, t.celsius])
                })
                .collect();
            // Judged at full resolution; the report's series is bounded.
            Series {
                name: format!("temp_{label}"),
                unit: "C".into(),
                limit: crit,
                points,
            }
        })
        .collect()
}

/// The series a report keeps: temperatures, power and clocks, bounded.
fn series_of(samples: &[(f64, Sample)], sensors: Vec<Series>) -> Vec<Series> {
    let mut out: Vec<Series> = sensors
        .into_iter()
        .map(|s| Series::new(&s.name, &s.unit, s.limit, &s.points))
        .collect();
    let pick = |f: &dyn Fn(&Sample) -> Option<f64>| -> Vec<[f64; 2]> {
        samples
            .iter()
            .filter_map(|(at, s)| f(s).map(|v| [*at, v]))
            .collect()
    };
    let limit = |f: &dyn Fn(&Sample) -> Option<f64>| {
        samples.iter().filter_map(|(_, s)| f(s)).reduce(f64::max)
    };
    let power = pick(&|s| s.power_w);
    if !power.is_empty() {
        out.push(Series::new("power", "W", limit(&|s| s.power_cap_w), &power));
    }
    for (name, clock) in [
        (
            "sclk",
            (&|s: &Sample| s.sclk) as &dyn Fn(&Sample) -> Option<telemetry::Clock>,
        ),
        ("mclk", &|s: &Sample| s.mclk),
    ] {
        let points = pick(&|s| clock(s).map(|c| c.current_mhz));
        if !points.is_empty() {
            out.push(Series::new(
                name,
                "MHz",
                limit(&|s| clock(s).map(|c| c.max_mhz)),
                &points,
            ));
        }
    }
    out
}

/// The temperature series as `junction 41-78 °C, median 76 (limit 100)`.
fn sensors_text(series: &[Series]) -> String {
    series
        .iter()
        .filter(|s| s.name.starts_with("temp_"))
        .filter_map(|s| {
            let spread = s.spread()?;
            Some(format!(
                "{} {:.0}-{:.0} °C, median {:.0}{}",
                s.name.trim_start_matches("temp_"),
                spread.min,
                spread.max,
                spread.median,
                s.limit
                    .map_or_else(String::new, |l| format!(" (limit {l:.0})"))
            ))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_words_follow_the_kernel() {
        // One round of the mix of 0: 0 (every step keeps 0), so word 0 of
        // a launch with seed 0 and one round is 0.
        assert_eq!(mix(0), 0);
        assert_ne!(mix(1), 1);
        let edges = edge_words();
        assert_eq!(edges.len(), 2 * EDGE);
        assert_eq!(edges[0].0, 0);
        assert_eq!(edges[2 * EDGE - 1].0, HASH_WORDS as usize - 1);
    }

    #[test]
    fn a_flipped_bit_changes_the_checksum_and_edges_are_named() {
        let mut bytes = vec![0u8; 64];
        let a = checksum(&bytes);
        bytes[33] ^= 0x08;
        assert_ne!(checksum(&bytes), a);
        let wrong = wrong_edges(&bytes, &[(0, 0), (8, 0)]);
        assert_eq!(wrong, ["word 8 differs from the CPU's in bits 0x00000800"]);
        assert_eq!(majority([3, 5, 3].into_iter()), Some(3));
        assert_eq!(majority([3, 5].into_iter()), None, "a tie has no majority");
        assert_eq!(majority([7].into_iter()), Some(7));
        assert_eq!(majority(std::iter::empty()), None);
    }

    fn iteration(at: f64, products: &[(u64, &[&str])]) -> Iteration {
        Iteration {
            at,
            products: products
                .iter()
                .map(|(checksum, wrong)| Product {
                    checksum: *checksum,
                    wrong: wrong.iter().map(|w| w.to_string()).collect(),
                })
                .collect(),
        }
    }

    #[test]
    fn each_workload_is_judged_on_its_own_and_named() {
        // The hash agrees throughout; the GEMM differs in iteration 3.
        let its: Vec<Iteration> = (0..5)
            .map(|n| {
                let gemm = if n == 2 { 9 } else { 7 };
                iteration(f64::from(n) * 2.0, &[(1, &[]), (gemm, &[])])
            })
            .collect();
        let common = |w: usize| majority(its.iter().map(|i| i.products[w].checksum));
        assert!(mismatch(&its, 0, &HASH, common(0)).is_none());
        let f = mismatch(&its, 1, &GEMM, common(1)).expect("the GEMM differs");
        assert!(
            f.message.starts_with(
                "iteration 3 of 5 (4 s into the burn-in) computed a different result for the same fp16 GEMM: checksum 0x0000000000000009 where the other iterations gave 0x0000000000000007"
            ),
            "{}",
            f.message
        );
    }

    #[test]
    fn a_workload_wrong_alike_in_every_iteration_is_consistently_wrong() {
        let wrong: &[&str] = &["C[4096,4096] is fp16 0x5000 where the CPU computes 0x4c00"];
        let its: Vec<Iteration> = (0..3)
            .map(|n| iteration(f64::from(n), &[(1, &[]), (7, wrong)]))
            .collect();
        let f = mismatch(&its, 1, &GEMM, Some(7)).expect("wrong every time");
        assert!(
            f.message
                .contains("in every one of the 3 iterations of the fp16 GEMM, C[4096,4096]"),
            "{}",
            f.message
        );
        // A tie has no majority.
        let tie = [iteration(0.0, &[(1, &[])]), iteration(1.0, &[(2, &[])])];
        let f = mismatch(&tie, 0, &HASH, None).expect("no majority");
        assert!(
            f.message.contains("no checksum in the majority"),
            "{}",
            f.message
        );
    }
}
