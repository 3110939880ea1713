//! What vendor libraries print when they fail in ways that end the process
//! (rocBLAS without kernels for the GPU aborts): turned into findings for
//! results that have none.

use crate::findings::codes;
use rocgate_harness::Finding;

/// A finding for a known vendor message in `output`.
pub fn explain(output: &str) -> Option<Finding> {
    if let Some(line) = output
        .lines()
        .find(|l| l.contains("TensileLibrary") && l.contains("Cannot read"))
    {
        let arch = line
            .rsplit("GPU arch :")
            .next()
            .map(str::trim)
            .filter(|a| a.starts_with("gfx"))
            .unwrap_or("this GPU");
        return Some(codes::ROCBLAS_NO_KERNELS_FOR_ARCH.finding_next(format!("rocBLAS has no kernels for {arch}: {}", line.trim()), format!(
                "install a rocBLAS built for {arch}: use a ROCm release that supports {arch} (see the compatibility matrix), or build rocBLAS with -DAMDGPU_TARGETS={arch}"
            )));
    }
    if let Some(line) = output
        .lines()
        .find(|l| l.contains("hipErrorNoBinaryForGpu"))
    {
        return Some(codes::NO_BINARY_FOR_GPU.finding(format!(
            "a library has no code for this GPU: {}",
            line.trim()
        )));
    }
    if let Some(line) = output
        .lines()
        .find(|l| l.contains("Memory access fault by GPU"))
    {
        return Some(codes::GPU_MEMORY_FAULT.finding(format!(
            "the GPU faulted on a memory access: {}",
            line.trim()
        )));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_a_missing_tensile_library() {
        let out = "\nrocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/TensileLibrary.dat: No such file or directory for GPU arch : gfx1201\n";
        let f = explain(out).unwrap();
        assert_eq!(f.code, "rocblas-no-kernels-for-arch");
        assert!(f.message.contains("gfx1201") && f.next_step.contains("gfx1201"));
        assert!(explain("all good").is_none());
    }
}
