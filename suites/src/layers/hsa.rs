//! hsa: the ROCr runtime. Every check here runs in the scope's worker
//! process, since ROCr can hang or fault.

use crate::context::NodeContext;
use crate::findings::{Code, codes};
use crate::layers::support::{end, isolated, judge_round_trip, list};
use crate::stack;
use rocgate_harness::{Check, Outcome, Scope, ScopeKind, Verdict};
use rocgate_node::facts::gpus::Gpu;
use rocgate_rocm::hsa::sys::{self, Agent, KernelDispatchPacket};
use rocgate_rocm::hsa::{
    AgentInfo, Executable, Hsa, HsaError, PoolInfo, PoolMemory, Queue, Signal,
};
use std::sync::Arc;
use std::time::{Duration, Instant};

const NEEDS_INIT: &[&str] = &["hsa::init"];
const NEEDS_AGENT: &[&str] = &["hsa::agent"];

/// The hsa layer's checks.
pub fn checks() -> Vec<Check<NodeContext>> {
    vec![
        isolated(
            "hsa::runtime",
            stack::HSA,
            ScopeKind::Node,
            &[],
            30,
            "the ROCr runtime library loads",
            runtime,
        ),
        isolated(
            "hsa::init",
            stack::HSA,
            ScopeKind::Node,
            &["hsa::runtime"],
            60,
            "hsa_init succeeds",
            init,
        )
        // hsa_init opens KFD and brings up every GPU agent (8 on an MI300X node).
        .typically(Duration::from_millis(1500)),
        isolated(
            "hsa::agents",
            stack::HSA,
            ScopeKind::Node,
            NEEDS_INIT,
            30,
            "ROCr lists one GPU agent per KFD GPU node",
            agents,
        ),
        isolated(
            "hsa::agent",
            stack::HSA,
            ScopeKind::PerGpu,
            NEEDS_INIT,
            30,
            "the GPU is an HSA agent matching its KFD node (ISA, CUs)",
            agent,
        ),
        isolated(
            "hsa::memory_pools",
            stack::HSA,
            ScopeKind::PerGpu,
            NEEDS_AGENT,
            30,
            "the agent has an allocatable device memory pool",
            memory_pools,
        ),
        isolated(
            "hsa::queue",
            stack::HSA,
            ScopeKind::PerGpu,
            NEEDS_AGENT,
            30,
            "an AQL queue can be created on the agent",
            queue,
        ),
        isolated(
            "hsa::signal",
            stack::HSA,
            ScopeKind::PerGpu,
            NEEDS_AGENT,
            30,
            "a signal can be created, stored and waited on",
            signal,
        ),
        isolated(
            "hsa::code_object",
            stack::HSA,
            ScopeKind::PerGpu,
            NEEDS_AGENT,
            60,
            "rocgate's code object for the agent's ISA loads and exposes its kernels",
            code_object,
        ),
        isolated(
            "hsa::dispatch",
            stack::HSA,
            ScopeKind::PerGpu,
            &[
                "hsa::queue",
                "hsa::signal",
                "hsa::code_object",
                "hsa::memory_pools",
            ],
            60,
            "a kernel dispatched through an AQL packet writes the expected result",
            dispatch,
        ),
        isolated(
            "hsa::copy",
            stack::HSA,
            ScopeKind::PerGpu,
            &["hsa::memory_pools"],
            60,
            "host<->device copies by the DMA engines arrive intact (bandwidth as metrics)",
            copy,
        )
        // 16 MiB each way through the DMA engines.
        .typically(Duration::from_millis(300)),
    ]
}

fn runtime(ctx: &NodeContext, _: Scope) -> Outcome {
    let hsa = ctx.runtime.hsa()?;
    let path = hsa.path().display().to_string();
    // ROCr's version is its file's (libhsa-runtime64.so.1.14.0).
    let version = path
        .split_once(".so.")
        .map(|(_, v)| v.to_string())
        .filter(|v| v.contains('.'));
    let mut v = Verdict::pass(format!(
        "loaded {path}{}",
        version
            .as_deref()
            .map_or_else(String::new, |v| format!(" (ROCr {v})"))
    ))
    .with_fact("hsa_library", path);
    if let Some(version) = version {
        v = v.with_fact("hsa_runtime_version", version);
    }
    Ok(v)
}

fn init(ctx: &NodeContext, _: Scope) -> Outcome {
    let hsa = ctx.runtime.hsa_ready()?;
    let version = hsa
        .version()
        .map_or_else(|e| format!("unknown ({e})"), |(a, b)| format!("{a}.{b}"));
    Ok(Verdict::pass(format!("hsa_init succeeded (HSA {version})"))
        .with_fact("hsa_version", version))
}

fn agents(ctx: &NodeContext, _: Scope) -> Outcome {
    let agents = ctx.runtime.agents()?;
    let gpus = agents.iter().filter(|a| a.is_gpu()).count();
    let kfd: Vec<&Gpu> = ctx.facts.gpus.iter().filter(|g| g.kfd.is_some()).collect();
    let names: Vec<String> = agents
        .iter()
        .filter(|a| a.is_gpu())
        .map(|a| a.name.clone())
        .collect();
    // rocgate's workers see every KFD GPU (`worker_env`); a check run in
    // rocgate's own process sees what its ROCR_VISIBLE_DEVICES leaves, the
    // caller's view and not a fault, so that is what ROCr must list.
    let filter = std::env::var(crate::worker_env::ROCR_FILTER).ok();
    let expected = filter
        .as_deref()
        .map_or(kfd.len(), |f| rocr_visible(&kfd, f));
    if gpus != expected {
        let shown = filter.as_deref().map_or_else(
            || format!("KFD has {} GPU nodes", kfd.len()),
            |f| {
                format!(
                    "ROCR_VISIBLE_DEVICES={f} leaves {expected} of KFD's {} GPU nodes",
                    kfd.len()
                )
            },
        );
        return end(Verdict::found(codes::HSA_AGENT_MISMATCH.finding_next(format!("ROCr lists {gpus} GPU agents but {shown}"), "ROCr skipped GPUs it cannot use: check their render node permissions and `dmesg | grep -i kfd`")));
    }
    // Not every agent that is not a GPU is a CPU: Ryzen AI hosts add an
    // AIE agent (ROCm 7), some platforms a DSP.
    let mut kinds: Vec<(String, usize)> = Vec::new();
    for a in agents {
        let name = a.kind.name();
        match kinds.iter_mut().find(|(k, _)| *k == name) {
            Some((_, n)) => *n += 1,
            None => kinds.push((name, 1)),
        }
    }
    let counts: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
    Ok(Verdict::pass(format!(
        "{} agents: {} ({})",
        agents.len(),
        counts.join(", "),
        list(&names, 4)
    ))
    .with_count("hsa_gpu_agents", gpus as f64, "count"))
}

/// How many of the KFD GPUs `kfd` (in node order) ROCr shows a process
/// whose ROCR_VISIBLE_DEVICES is `list`. ROCR-Runtime
/// `core/runtime/amd_filter_device.cpp` (`RvdFilter`, ROCm 5.x to 7.x):
/// tokens are comma-separated, trimmed and upper-cased; a number is an
/// ordinal among the KFD GPU nodes (C `strtol`, base 0), a token starting
/// with `G` a prefix (5 to 20 characters) of `GPU-<unique_id, 16 hex
/// digits>` that names exactly one GPU; only the first `min(GPUs, tokens)`
/// tokens count, and parsing stops at the first bad, out-of-range,
/// ambiguous or repeated token. Set but empty, no GPU is visible.
fn rocr_visible(kfd: &[&Gpu], list: &str) -> usize {
    if list.trim().is_empty() {
        return 0;
    }
    let uuid = |g: &Gpu| {
        g.kfd
            .as_ref()
            .and_then(|k| k.unique_id)
            .filter(|&u| u != 0)
            .map(|u| format!("GPU-{u:016X}"))
    };
    let tokens: Vec<String> = list
        .split(',')
        .map(|t| t.trim().to_ascii_uppercase())
        .collect();
    let mut picked: Vec<usize> = Vec::new();
    for token in tokens.iter().take(kfd.len().min(tokens.len())) {
        let found = if token.starts_with('G') {
            let mut hits = (0..kfd.len()).filter(|&i| {
                (5..=20).contains(&token.len())
                    && uuid(kfd[i]).is_some_and(|u| u.starts_with(token.as_str()))
            });
            match (hits.next(), hits.next()) {
                (Some(i), None) => Some(i),
                _ => None,
            }
        } else {
            strtol(token)
                .and_then(|i| usize::try_from(i).ok())
                .filter(|&i| i < kfd.len())
        };
        match found {
            Some(i) if !picked.contains(&i) => picked.push(i),
            _ => break,
        }
    }
    picked.len()
}

/// C's `strtol(s, &end, 0)` where all of `s` must be consumed: decimal,
/// `0x` hex, or octal after a leading zero.
fn strtol(s: &str) -> Option<i64> {
    let (digits, radix) = if let Some(h) = s.strip_prefix("0X") {
        (h, 16)
    } else if s.len() > 1 && s.starts_with('0') {
        (&s[1..], 8)
    } else {
        (s, 10)
    };
    i64::from_str_radix(digits, radix).ok()
}

/// This GPU's agent, matched by PCI domain and location.
fn find_agent(ctx: &NodeContext, scope: Scope) -> Result<(&Gpu, AgentInfo, &Arc<Hsa>), Verdict> {
    let gpu = ctx.gpu(scope)?;
    // A GPU KFD does not list is hidden from its worker's ROCr
    // (`worker_env`): nothing to ask ROCm.
    let Some(k) = &gpu.kfd else {
        return Err(Verdict::not_applicable(
            "no KFD node for this GPU (see kfd.topology_node)",
        ));
    };
    let hsa = ctx.runtime.hsa_ready()?;
    let agents = ctx.runtime.agents()?;
    let (loc, dom) = (k.location_id.unwrap_or(0), k.domain.unwrap_or(0));
    match agents
        .iter()
        .find(|a| a.is_gpu() && u64::from(a.bdfid) == loc && u64::from(a.domain) == dom)
    {
        Some(a) => Ok((gpu, a.clone(), hsa)),
        None => end(Verdict::found(codes::HSA_AGENT_MISSING.finding(format!(
            "ROCr has no GPU agent at {} (KFD node {})",
            gpu.pci_address, k.id
        )))),
    }
}

fn agent(ctx: &NodeContext, scope: Scope) -> Outcome {
    let (gpu, a, _) = find_agent(ctx, scope)?;
    let mut problems = Vec::new();
    if let Some(t) = &gpu.gfx_target {
        let isa = a.name.split(':').next().unwrap_or(&a.name);
        if isa != t {
            problems.push(format!("ISA {isa}, KFD says {t}"));
        }
    }
    if let Some(cu) = gpu.compute_units() {
        if u64::from(a.compute_units) != cu {
            problems.push(format!("{} CUs, KFD says {cu}", a.compute_units));
        }
    }
    if !problems.is_empty() {
        return end(Verdict::found(codes::HSA_AGENT_MISMATCH.finding(format!(
            "the agent at {} disagrees with KFD: {}",
            gpu.pci_address,
            problems.join("; ")
        ))));
    }
    // The worker's view: one GPU (ROCR_VISIBLE_DEVICES) unless the user
    // chose otherwise.
    let seen = std::env::var("ROCR_VISIBLE_DEVICES")
        .map_or_else(|_| String::new(), |v| format!("; ROCR_VISIBLE_DEVICES={v}"));
    Ok(Verdict::pass(format!(
        "{} ({}), {} CUs, wave{}{seen}",
        a.name, a.product, a.compute_units, a.wavefront_size
    ))
    .with_count("compute_units", f64::from(a.compute_units), "count"))
}

/// The agent's device pool (global, coarse-grained).
fn device_pool(hsa: &Hsa, agent: Agent) -> Result<PoolInfo, Verdict> {
    let pools = hsa
        .pools(agent)
        .map_err(|e| hsa_fail(codes::HSA_MEMORY_POOLS_FAILED, &e))?;
    pools
        .into_iter()
        .find(|p| p.is_global_with(sys::POOL_FLAG_COARSE_GRAINED) && p.size > 0)
        .ok_or_else(|| {
            Verdict::found(
                codes::HSA_NO_DEVICE_MEMORY.finding(
                    "the GPU agent offers no allocatable coarse-grained global memory pool",
                ),
            )
        })
}

/// A system pool with `flag` (fine-grained, or kernarg) on a CPU agent.
fn system_pool(ctx: &NodeContext, hsa: &Hsa, flag: u32) -> Result<PoolInfo, Verdict> {
    let agents = ctx.runtime.agents()?;
    for cpu in agents.iter().filter(|a| a.is_cpu()) {
        let pools = hsa
            .pools(cpu.agent)
            .map_err(|e| hsa_fail(codes::HSA_MEMORY_POOLS_FAILED, &e))?;
        if let Some(p) = pools.into_iter().find(|p| p.is_global_with(flag)) {
            return Ok(p);
        }
    }
    end(Verdict::found(codes::HSA_NO_SYSTEM_MEMORY.finding(
        format!("no CPU agent offers a global system memory pool with flag {flag}"),
    )))
}

fn hsa_fail(code: Code, e: &rocgate_rocm::hsa::HsaError) -> Verdict {
    Verdict::found(code.finding_next(e.to_string(), "read `dmesg | grep -i -e kfd -e amdgpu` around this time; a GPU that fails here after hsa_init usually needs a reset (<reset>) or a reboot"))
}

fn memory_pools(ctx: &NodeContext, scope: Scope) -> Outcome {
    let (_, a, hsa) = find_agent(ctx, scope)?;
    let p = device_pool(hsa, a.agent)?;
    Ok(Verdict::pass(format!(
        "device pool of {:.1} GiB",
        p.size as f64 / f64::from(1u32 << 30)
    ))
    .with_count("device_pool_bytes", p.size as f64, "bytes"))
}

fn queue(ctx: &NodeContext, scope: Scope) -> Outcome {
    let (_, a, hsa) = find_agent(ctx, scope)?;
    let q = Queue::new(hsa, a.agent, 128)
        .map_err(|e| Verdict::found(codes::HSA_QUEUE_FAILED.finding(e.to_string())))?;
    Ok(Verdict::pass(format!(
        "created an AQL queue of {} packets",
        q.size()
    )))
}

fn signal(ctx: &NodeContext, scope: Scope) -> Outcome {
    let (_, _, hsa) = find_agent(ctx, scope)?;
    let value = Signal::new(hsa, 1)
        .and_then(|s| {
            s.store(0)?;
            s.wait_below(1, Duration::from_secs(5), "hsa_signal_wait_scacquire")?;
            s.load()
        })
        .map_err(|e| hsa_fail(codes::HSA_SIGNAL_FAILED, &e))?;
    if value != 0 {
        return end(Verdict::found(
            codes::HSA_SIGNAL_FAILED.finding(format!("a signal stored 0 reads back {value}")),
        ));
    }
    Ok(Verdict::pass("signal created, stored and waited on"))
}

/// The code object for this agent, or the skip verdict.
fn load_kernels(gpu: &Gpu, a: &AgentInfo, hsa: &Arc<Hsa>) -> Result<Executable, Verdict> {
    let target = gpu.gfx_target.clone().unwrap_or_else(|| a.name.clone());
    let Some(co) = rocgate_kernels::code_object(&target) else {
        return Err(Verdict::unverifiable(rocgate_kernels::missing_reason(
            &target,
        )));
    };
    Executable::load(hsa, a.agent, co.bytes).map_err(|e| {
        Verdict::found(
            codes::HSA_CODE_OBJECT_FAILED
                .finding(format!("loading rocgate's {} code object: {e}", co.target)),
        )
    })
}

fn code_object(ctx: &NodeContext, scope: Scope) -> Outcome {
    let (gpu, a, hsa) = find_agent(ctx, scope)?;
    let exe = load_kernels(gpu, &a, hsa)?;
    let mut found = Vec::new();
    for k in rocgate_kernels::KERNELS {
        let sym = exe.kernel(k).map_err(|e| {
            Verdict::found(codes::HSA_CODE_OBJECT_FAILED.finding_next(format!("kernel {k} is missing from the loaded executable: {e}"), "the code object loaded but its kernel symbols are not visible: report this with `rocgate inventory --json`"))
        })?;
        found.push(format!("{k} ({} B kernargs)", sym.kernarg_size));
    }
    Ok(Verdict::pass(format!("loaded {}", found.join(", "))))
}

/// How long to wait for a dispatch or copy to complete: what the check has
/// left, keeping a second to report a hang as a failure of its own.
fn wait_budget() -> Duration {
    rocgate_harness::deadline::wait_budget(Duration::from_secs(1), Duration::from_secs(20))
}

/// A value no stale or zeroed buffer matches by accident.
const FILL_BASE: u32 = 0x5EED_0000;

fn dispatch(ctx: &NodeContext, scope: Scope) -> Outcome {
    const N: u32 = 1 << 16;
    let (gpu, a, hsa) = find_agent(ctx, scope)?;
    let exe = load_kernels(gpu, &a, hsa)?;
    let fail = |e: rocgate_rocm::hsa::HsaError| hsa_fail(codes::HSA_DISPATCH_FAILED, &e);
    let kernel = exe.kernel("fill").map_err(fail)?;
    let fine = system_pool(ctx, hsa, sys::POOL_FLAG_FINE_GRAINED)?;
    let kernarg_pool = system_pool(ctx, hsa, sys::POOL_FLAG_KERNARG_INIT)?;
    let mut out = PoolMemory::allocate_host(hsa, fine.pool, N as usize * 4).map_err(fail)?;
    out.allow(&[a.agent]).map_err(fail)?;
    out.host_u32s().map_err(fail)?.fill(0xFFFF_FFFF);
    let mut args = PoolMemory::allocate_host(
        hsa,
        kernarg_pool.pool,
        (kernel.kernarg_size as usize).max(16),
    )
    .map_err(fail)?;
    args.allow(&[a.agent]).map_err(fail)?;
    // fill(out, value, n): a pointer, then two u32s.
    args.write_at(0, &(out.ptr() as u64).to_le_bytes())
        .map_err(fail)?;
    args.write_at(8, &FILL_BASE.to_le_bytes()).map_err(fail)?;
    args.write_at(12, &N.to_le_bytes()).map_err(fail)?;
    let queue = Queue::new(hsa, a.agent, 128).map_err(fail)?;
    let done = Signal::new(hsa, 1).map_err(fail)?;
    let header = (sys::PACKET_TYPE_KERNEL_DISPATCH << sys::PACKET_HEADER_TYPE)
        | (1 << sys::PACKET_HEADER_BARRIER)
        | (sys::FENCE_SCOPE_SYSTEM << sys::PACKET_HEADER_SCACQUIRE_FENCE_SCOPE)
        | (sys::FENCE_SCOPE_SYSTEM << sys::PACKET_HEADER_SCRELEASE_FENCE_SCOPE);
    let packet = KernelDispatchPacket {
        header,
        setup: 1 << sys::DISPATCH_SETUP_DIMENSIONS,
        workgroup_size_x: 256,
        workgroup_size_y: 1,
        workgroup_size_z: 1,
        grid_size_x: N,
        grid_size_y: 1,
        grid_size_z: 1,
        private_segment_size: kernel.private_segment_size,
        group_segment_size: kernel.group_segment_size,
        kernel_object: kernel.kernel_object,
        kernarg_address: args.ptr() as u64,
        completion_signal: done.raw(),
        ..KernelDispatchPacket::default()
    };
    let start = Instant::now();
    queue.dispatch(packet).map_err(fail)?;
    queue
        .wait(&done, wait_budget())
        .map_err(|e| match e {
            HsaError::QueueError { .. } => Verdict::found(codes::HSA_DISPATCH_FAILED.finding_next(e.to_string(), "the GPU stopped the kernel with an exception: read `dmesg | grep -i -e amdgpu -e kfd` for the fault, reset the GPU (<reset>) and rerun; if it persists, check RAS/ECC counters (`amd-smi metric --ecc`)")),
            other => fail(other),
        })?;
    let elapsed = start.elapsed();
    let got = out.host_u32s().map_err(fail)?;
    let wrong: Vec<usize> = (0..N as usize)
        .filter(|&i| got[i] != FILL_BASE.wrapping_add(i as u32))
        .collect();
    if let Some(&first) = wrong.first() {
        return end(Verdict::found(codes::HSA_DISPATCH_WRONG.finding(format!(
                "the fill kernel completed but {} of {N} values are wrong; first at index {first}: got 0x{:08x}, expected 0x{:08x}",
                wrong.len(),
                got[first],
                FILL_BASE.wrapping_add(first as u32)
            ))));
    }
    Ok(Verdict::pass(format!(
        "fill kernel over {N} work-items verified in {:.2} ms",
        elapsed.as_secs_f64() * 1e3
    ))
    .with_duration_ms("dispatch_ms", elapsed.as_secs_f64() * 1e3))
}

fn copy(ctx: &NodeContext, scope: Scope) -> Outcome {
    const BYTES: usize = 16 << 20;
    let (_, a, hsa) = find_agent(ctx, scope)?;
    let fail = |e: rocgate_rocm::hsa::HsaError| hsa_fail(codes::HSA_COPY_FAILED, &e);
    let device = device_pool(hsa, a.agent)?;
    let fine = system_pool(ctx, hsa, sys::POOL_FLAG_FINE_GRAINED)?;
    let agents = ctx.runtime.agents()?;
    let Some(cpu) = agents.iter().find(|x| x.is_cpu()).map(|x| x.agent) else {
        return end(Verdict::found(codes::HSA_NO_SYSTEM_MEMORY.finding_next("ROCr lists no CPU agent to copy from", "ROCr's host side is missing: compare `rocminfo` output and check the kernel's KFD CPU nodes")));
    };
    let mut src = PoolMemory::allocate_host(hsa, fine.pool, BYTES).map_err(fail)?;
    let mut dst = PoolMemory::allocate_host(hsa, fine.pool, BYTES).map_err(fail)?;
    let dev = PoolMemory::allocate(hsa, device.pool, BYTES).map_err(fail)?;
    src.allow(&[a.agent]).map_err(fail)?;
    dst.allow(&[a.agent]).map_err(fail)?;
    for (i, v) in src.host_u32s().map_err(fail)?.iter_mut().enumerate() {
        *v = (i as u32).wrapping_mul(2_654_435_761);
    }
    dst.host_u32s().map_err(fail)?.fill(0);
    let timeout = wait_budget();
    let t = Instant::now();
    hsa.copy(&dev, a.agent, &src, cpu, timeout).map_err(fail)?;
    let h2d = t.elapsed();
    let t = Instant::now();
    hsa.copy(&dst, cpu, &dev, a.agent, timeout).map_err(fail)?;
    let d2h = t.elapsed();
    let s = src.host_u32s().map_err(fail)?.to_vec();
    let d = dst.host_u32s().map_err(fail)?;
    judge_round_trip(
        codes::HSA_COPY_CORRUPT,
        "host->device->host round trip",
        &s,
        d,
        (h2d, d2h),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_visibility_filter_leaves_what_rocr_would_show() {
        let node = super::super::fixture::node("mi300x-8");
        let facts = &node.ctx.facts;
        let kfd: Vec<&Gpu> = facts.gpus.iter().filter(|g| g.kfd.is_some()).collect();
        assert_eq!(kfd.len(), 8);
        assert_eq!(rocr_visible(&kfd, "2,3"), 2);
        assert_eq!(rocr_visible(&kfd, " 0x1 , 07 "), 2);
        assert_eq!(rocr_visible(&kfd, "1,9,2"), 1, "out of range stops");
        assert_eq!(rocr_visible(&kfd, "1,1,2"), 1, "a repeat stops");
        assert_eq!(rocr_visible(&kfd, "x,1"), 0);
        assert_eq!(rocr_visible(&kfd, ""), 0);
        assert_eq!(rocr_visible(&kfd, &"0,".repeat(20)), 1);
        if let Some(u) = kfd[3]
            .kfd
            .as_ref()
            .and_then(|k| k.unique_id)
            .filter(|&u| u != 0)
        {
            assert_eq!(rocr_visible(&kfd, &format!("gpu-{u:016x},0")), 2);
        }
    }

    #[test]
    fn a_token_is_read_as_c_s_strtol_reads_it_all() {
        assert_eq!(strtol("12"), Some(12));
        assert_eq!(strtol("0X1F"), Some(31));
        assert_eq!(strtol("017"), Some(15));
        assert_eq!(strtol("0"), Some(0));
        assert_eq!(strtol("08"), None, "8 is not an octal digit");
        assert_eq!(strtol("1X"), None, "all of it must be a number");
        assert_eq!(strtol(""), None);
    }

    #[test]
    fn every_hsa_check_skips_without_the_runtime_and_none_passes() {
        let n = crate::layers::fixture::node("mi300x-8");
        n.assert_skip_without_runtime(&checks());
        let off = n.ctx.runtime.disabled.as_ref().map(|(kind, _)| *kind);
        for check in checks() {
            let scope = match check.scope {
                ScopeKind::Node => Scope::Node,
                ScopeKind::PerGpu => n.gpus()[0],
            };
            let v = n.verdict(check.run, scope);
            assert_eq!(v.skip_reason, off, "{}: {}", check.id, v.message);
            assert!(
                v.message.contains("runtime layers"),
                "{}: {}",
                check.id,
                v.message
            );
            assert!(v.finding.is_none() && v.metrics.is_empty(), "{}", check.id);
        }
    }
}
