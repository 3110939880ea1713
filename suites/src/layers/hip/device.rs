//! A GPU's HIP device, as every layer above HIP finds it: rocBLAS, MIOpen
//! and RCCL run on the device the hip layer checked, so they find it the
//! same way rather than each matching bus ids of its own.

use crate::context::NodeContext;
use crate::findings::{Code, codes};
use crate::layers::support::{end, list};
use rocgate_harness::{Scope, Verdict};
use rocgate_node::facts::gpus::Gpu;
use rocgate_rocm::hip::{Hip, HipError, Module};
use std::sync::Arc;

/// A failed HIP call as a failure with `code` and the next step `next`.
pub(crate) fn hip_fail(code: Code, e: &HipError, next: &str) -> Verdict {
    Verdict::found(code.finding_next(e.to_string(), next))
}

/// A PCI address as `hipDeviceGetPCIBusId` prints it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct BusId {
    domain: u32,
    bus: u32,
    device: u32,
    function: u32,
}

impl BusId {
    /// Parses `0000:05:00.3` (case-insensitive).
    fn parse(s: &str) -> Option<BusId> {
        let (rest, function) = s.trim().rsplit_once('.')?;
        let mut parts = rest.split(':');
        let hex = |p: Option<&str>| p.and_then(|x| u32::from_str_radix(x, 16).ok());
        let (domain, bus, device) = (hex(parts.next())?, hex(parts.next())?, hex(parts.next())?);
        if parts.next().is_some() {
            return None;
        }
        Some(BusId {
            domain,
            bus,
            device,
            function: u32::from_str_radix(function, 16).ok()?,
        })
    }

    fn same_device(&self, other: &BusId) -> bool {
        (self.domain, self.bus, self.device) == (other.domain, other.bus, other.device)
    }
}

/// How a GPU was found among HIP's devices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Matched {
    /// Its PCI bus id, function included.
    Exactly,
    /// Its device's bus id and its place among the device's partitions: HIP
    /// before ROCm 6.2 prints every partition of a device as function 0
    /// (clr `hip_device_runtime.cpp`: `%04x:%02x:%02x.0`), while KFD's
    /// location_id carries the partition in the function bits.
    ByPartition,
}

/// The HIP device index of `gpu`, matched by PCI bus id; among partitions
/// that HIP prints alike, by their order (HIP lists devices in ROCr's agent
/// order, which is KFD's).
pub(crate) fn hip_index(
    hip: &Hip,
    n: i32,
    gpu: &Gpu,
    gpus: &[Gpu],
) -> Result<(i32, Matched), Verdict> {
    let mut seen = Vec::new();
    for d in 0..n {
        let bus = hip.pci_bus_id(d).map_err(|e| {
            hip_fail(
                codes::HIP_DEVICE_FAILED,
                &e,
                "HIP cannot describe its devices: check `rocminfo` and `dmesg`",
            )
        })?;
        seen.push((d, bus));
    }
    let missing = |why: String| {
        Verdict::found(codes::HIP_DEVICE_MISSING.finding(format!(
            "HIP has no device for {}{why} (HIP devices: {})",
            gpu.label(),
            list(&seen.iter().map(|(_, b)| b.as_str()).collect::<Vec<_>>(), 8)
        )))
    };
    let Some(want) = BusId::parse(&gpu.pci_address) else {
        return Err(missing(" (its address does not parse)".into()));
    };
    let parsed: Vec<(i32, BusId)> = seen
        .iter()
        .filter_map(|(d, b)| BusId::parse(b).map(|p| (*d, p)))
        .collect();
    let exact: Vec<i32> = parsed
        .iter()
        .filter(|(_, b)| *b == want)
        .map(|(d, _)| *d)
        .collect();
    if let [only] = exact.as_slice() {
        return Ok((*only, Matched::Exactly));
    }
    // Same device: one candidate is this GPU; several are its device's
    // partitions, in KFD order, when HIP lists as many as KFD has.
    let candidates: Vec<i32> = parsed
        .iter()
        .filter(|(_, b)| b.same_device(&want) && (b.function == want.function || b.function == 0))
        .map(|(d, _)| *d)
        .collect();
    let siblings: Vec<&Gpu> = gpus
        .iter()
        .filter(|g| g.kfd.is_some())
        .filter(|g| BusId::parse(&g.pci_address).is_some_and(|b| b.same_device(&want)))
        .collect();
    match candidates.as_slice() {
        [] => Err(missing(String::new())),
        [only] => Ok((*only, Matched::ByPartition)),
        many if many.len() == siblings.len() => {
            let rank = siblings
                .iter()
                .position(|g| g.index == gpu.index)
                .unwrap_or(usize::MAX);
            many.get(rank)
                .map(|d| (*d, Matched::ByPartition))
                .ok_or_else(|| missing(" (not among its device's partitions)".into()))
        }
        many => Err(missing(format!(
            ": HIP lists {} devices at its PCI device but KFD has {} partitions there, so they cannot be told apart",
            many.len(),
            siblings.len()
        ))),
    }
}

/// A GPU's HIP device, made current on this thread.
pub(crate) struct HipDevice<'a> {
    /// The GPU.
    pub gpu: &'a Gpu,
    /// HIP, initialised, with devices.
    pub hip: &'a Arc<Hip>,
    /// The device's HIP index.
    pub index: i32,
    /// How the GPU was found among HIP's devices.
    pub matched: Matched,
}

/// This scope's GPU as a HIP device, made current.
pub(crate) fn find_device(ctx: &NodeContext, scope: Scope) -> Result<HipDevice<'_>, Verdict> {
    let gpu = ctx.gpu(scope)?;
    let (hip, n) = ctx.runtime.hip_ready()?;
    let (index, matched) = hip_index(hip, n, gpu, &ctx.facts.gpus)?;
    hip.set_device(index).map_err(|e| {
        hip_fail(
            codes::HIP_DEVICE_FAILED,
            &e,
            "HIP cannot select this device: read `dmesg | grep -i amdgpu`",
        )
    })?;
    Ok(HipDevice {
        gpu,
        hip,
        index,
        matched,
    })
}

/// The selected GPUs' HIP device indices, in inventory order; each GPU must
/// be its own device (two GPUs matched to one HIP device would make RCCL
/// reduce a GPU with itself).
pub(crate) fn hip_devices(ctx: &NodeContext) -> Result<Vec<(u32, i32)>, Verdict> {
    let (hip, n) = ctx.runtime.hip_ready()?;
    let devices: Vec<(u32, i32)> = ctx
        .selected_gpus()
        .into_iter()
        .filter_map(|i| ctx.facts.gpu(i))
        .filter(|g| g.kfd.is_some())
        .map(|g| hip_index(hip, n, g, &ctx.facts.gpus).map(|(d, _)| (g.index, d)))
        .collect::<Result<_, _>>()?;
    let mut ids: Vec<i32> = devices.iter().map(|&(_, d)| d).collect();
    ids.sort_unstable();
    if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
        return end(Verdict::found(codes::HIP_DEVICE_MISSING.finding_next(format!(
                "two GPUs map to HIP device {}: HIP's PCI bus ids cannot tell them apart",
                w[0]
            ), "report this with `rocgate inventory --json` and `rocminfo`; meanwhile run the all-reduce on GPUs of distinct PCI devices with --gpus")));
    }
    Ok(devices)
}

/// rocgate's kernels for `gpu`, loaded into HIP; a build without a code
/// object for its target cannot look.
pub(crate) fn load_module(gpu: &Gpu, hip: &Arc<Hip>) -> Result<Module, Verdict> {
    let target = gpu.gfx_target.clone().unwrap_or_default();
    let Some(co) = rocgate_kernels::code_object(&target) else {
        return Err(Verdict::unverifiable(rocgate_kernels::missing_reason(
            &target,
        )));
    };
    Module::load(hip, co.bytes).map_err(|e| {
        let next = match e.code() {
            Some(200 | 209) => "the HIP runtime rejects code for this GPU (hipErrorInvalidImage/NoBinaryForGpu): this ROCm release may not support the gfx target; check the compatibility matrix",
            _ => "read `dmesg | grep -i amdgpu`; check that the HIP runtime matches the installed ROCm and driver",
        };
        hip_fail(codes::HIP_MODULE_LOAD_FAILED, &e, next)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_ids_parse_as_hip_prints_them() {
        let b = BusId::parse("0000:C6:00.3").unwrap();
        assert_eq!((b.domain, b.bus, b.device, b.function), (0, 0xc6, 0, 3));
        assert!(b.same_device(&BusId::parse("0000:c6:00.0").unwrap()));
        assert!(!b.same_device(&BusId::parse("0001:c6:00.0").unwrap()));
        for bad in ["", "0000:c6:00", "c6:00.0", "0000:zz:00.0", "0:0:0:0.0"] {
            assert!(BusId::parse(bad).is_none(), "{bad}");
        }
    }
}
