//! What vendor libraries print when they fail in ways that end the process
//! (rocBLAS without kernels for the GPU aborts): turned into findings for
//! results that have none.

use crate::findings::{Code, codes};
use rocgate_harness::Finding;

/// Messages named by a marker in their line: the marker, the code and what
/// the line means.
const MARKED: &[(&str, Code, &str)] = &[
    // HIP's loader, when no code object in a fat binary matches the GPU.
    (
        "hipErrorNoBinaryForGpu",
        codes::NO_BINARY_FOR_GPU,
        "a library has no code for this GPU",
    ),
    // ROCr's fault handler before it aborts the process.
    (
        "Memory access fault by GPU",
        codes::GPU_MEMORY_FAULT,
        "the GPU faulted on a memory access",
    ),
];

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
    MARKED.iter().find_map(|(marker, code, meaning)| {
        let line = output.lines().find(|l| l.contains(marker))?;
        Some(code.finding(format!("{meaning}: {}", line.trim())))
    })
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
