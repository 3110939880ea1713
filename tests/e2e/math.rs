//! The math and collective layers (rocblas, miopen, rccl) end to end on a
//! fake 8x MI300X: the standard tier passes; a wrong GEMM, a missing
//! rocBLAS and a rocBLAS without kernels for the GPU each land as the right
//! outcome, layer and next step; extended-tier floors apply.

use crate::util::{
    FakeRun, assert_gpus_pass, assert_has, entry, node, on_sysroot, result, result_with_finding,
    result_with_status, text,
};
use serde_json::Value;

#[test]
fn the_standard_tier_passes_on_a_fake_8x_mi300x() {
    let (json, junit) = FakeRun::scenario("mi300x-8")
        .args(&["--tier", "standard"])
        .exits(0);
    assert_gpus_pass(&json, 0..8, &["rocblas", "miopen"]);
    let ar = result_with_status(&json, "node.rccl.allreduce", "pass");
    assert!(ar["metrics"][0]["name"] == "allreduce_busbw");
    result_with_status(&json, "node.rccl.interconnect", "pass");
    assert!(
        text(&result(&json, "gpu3.rocblas.bf16gemm")["message"])
            .contains("matches the CPU reference")
    );
    for prop in ["rocblas_version", "miopen_version", "rccl_version"] {
        assert!(
            junit.contains(&format!(r#"<property name="{prop}""#)),
            "{prop} missing from the node suite"
        );
    }
}

#[test]
fn a_wrong_gemm_fails_that_gpu_with_a_next_step() {
    let (json, _) = FakeRun::scenario("mi300x-8")
        .faults("rocblas_gemm_ex@gpu2=wrong;miopenConvolutionForward@gpu5=wrong")
        .args(&["--tier", "standard"])
        .exits(1);
    for id in ["gpu2.rocblas.hgemm", "gpu2.rocblas.bf16gemm"] {
        let r = result_with_finding(&json, id, "rocblas-gemm-wrong");
        assert!(text(&r["finding"]["next_step"]).contains("RAS/ECC"));
    }
    result_with_status(&json, "gpu2.rocblas.sgemm", "pass");
    result_with_status(&json, "gpu3.rocblas.hgemm", "pass");
    for id in ["gpu5.miopen.conv_fp32", "gpu5.miopen.conv_fp16"] {
        result_with_finding(&json, id, "miopen-conv-wrong");
    }
    assert_eq!(json["first_failing_layer"], "rocblas");
}

#[test]
fn a_missing_rocblas_fails_its_layer_and_only_it() {
    // A file that is not a library: removing it would let the system
    // loader find a host's own rocBLAS.
    let (json, _) = FakeRun::scenario("mi300x-8")
        .args(&["--tier", "standard"])
        .damage("librocblas.so.4")
        .exits(1);
    let r = result_with_finding(&json, "node.rocblas.runtime", "rocblas-library-missing");
    assert!(
        r["message"].as_str().unwrap().contains("librocblas.so.4"),
        "names the library: {r}"
    );
    // The file is there but is no library: the next step is to reinstall
    // it, not to look for ROCm elsewhere.
    let next = r["finding"]["next_step"].as_str().unwrap();
    assert!(
        next.contains("librocblas.so.4") && next.contains("reinstall"),
        "{r}"
    );
    // Layers above rocBLAS (MIOpen builds on it) wait for it; those below run.
    for id in [
        "gpu0.rocblas.sgemm",
        "gpu0.miopen.conv_fp32",
        "node.rccl.allreduce",
    ] {
        let b = result_with_status(&json, id, "blocked");
        assert_eq!(b["blocked_by"], "node.rocblas.runtime");
    }
    result_with_status(&json, "gpu0.hip.vector_add", "pass");
}

/// `tier` on gpu0 of an MI300X node with the fakes' environment `var`
/// set, which must fail (exit 1): its JSON document.
fn failing_on_gpu0(tier: &str, var: (&str, &str)) -> Value {
    FakeRun::scenario("mi300x-8")
        .args(&["--tier", tier, "--gpus", "0"])
        .env(var.0, var.1)
        .exits(1)
        .0
}

#[test]
fn rocblas_without_kernels_for_the_gpu_is_named() {
    let json = failing_on_gpu0("standard", ("ROCGATE_FAKE_MISSING_TENSILE", "1"));
    let r = result_with_finding(&json, "gpu0.rocblas.sgemm", "rocblas-no-kernels-for-arch");
    assert_eq!(r["status"], "crash", "{r}");
    assert!(r["finding"]["message"].as_str().unwrap().contains("gfx942"));
    assert!(text(&r["finding"]["next_step"]).contains("AMDGPU_TARGETS=gfx942"));
}

#[test]
fn extended_floors_pass_fail_or_skip_with_their_source() {
    let n = node("mi300x-8");
    let t = n.root.with_extension("thresholds.toml");
    let mut thresholds = rocgate_suites::thresholds::BUILTIN.to_string();
    thresholds.push_str("\n[[floor]]\ngpu = \"gfx942\"\nmetric = \"allreduce_busbw_gbps\"\nvalue = 1e9\nsource = \"an impossible floor for this test\"\n");
    // The first matching row wins: this one shadows the built-in h2d floor.
    thresholds = thresholds.replacen(
        "metric = \"h2d_gbps\"\nvalue = 45.0",
        "metric = \"h2d_gbps\"\nvalue = 1e9",
        1,
    );
    std::fs::write(&t, thresholds).unwrap();
    let (json, _) = FakeRun::on(&n.root)
        .args(&["--tier", "extended", "--gpus", "0,1"])
        .args(&["--thresholds", t.to_str().unwrap()])
        .exits(1);
    let bw = result_with_finding(&json, "gpu0.hip.bandwidth", "perf-below-floor");
    assert!(
        bw["message"].as_str().unwrap().contains("TransferBench"),
        "names the source: {bw}"
    );
    // The simulated GPU delivers 700 TFLOP/s by default: every floor met.
    let tp = result_with_status(&json, "gpu1.rocblas.gemm_throughput", "pass");
    assert!(
        text(&tp["message"]).contains("4864x4096x8192 fp16 with A transposed"),
        "measured as the floor's source did: {tp}"
    );
    result_with_finding(&json, "node.rccl.allreduce_throughput", "perf-below-floor");

    let bad = n.root.with_extension("bad.toml");
    std::fs::write(
        &bad,
        "schema_version = 1\nmargin = 0.05\n[tolerance]\nfp64 = \"tight\"\n",
    )
    .unwrap();
    let out = on_sysroot(&["run", "--thresholds", bad.to_str().unwrap()], &n.root)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml") && err.contains("line 4"), "{err}");
}

#[test]
fn throughput_is_judged_by_what_the_gpu_delivers() {
    // A simulated GPU at 300 TFLOP/s misses RVS's fp16 (639) and bf16 (581)
    // targets and meets its fp32 (100) and fp64 (70) ones.
    let json = failing_on_gpu0("extended", ("ROCGATE_FAKE_GEMM_TFLOPS", "300"));
    let tp = result_with_finding(&json, "gpu0.rocblas.gemm_throughput", "perf-below-floor");
    let msg = tp["message"].as_str().unwrap();
    assert_has(msg, "gemm_tflops.fp16");
    assert_has(msg, "ROCm Validation Suite");
    let fp16 = entry(&tp["metrics"], "name", "gemm_tflops.fp16");
    // What the simulated GPU delivers, measured (within 10%).
    let v = fp16["value"].as_f64().unwrap();
    assert!((270.0..330.0).contains(&v), "{fp16}");
}

#[test]
fn a_partition_is_never_judged_against_a_whole_gpu_floor() {
    let (_, _, json, _) = FakeRun::scenario("mi300x-8-cpx")
        .args(&["--tier", "extended", "--gpus", "0"])
        .run();
    let tp = result_with_status(&json, "gpu0.rocblas.gemm_throughput", "skipped");
    assert_eq!(tp["skip_reason"], "not-configured", "{tp}");
    let bw = result(&json, "gpu0.hip.bandwidth");
    assert_eq!(bw["skip_reason"], "not-configured", "{bw}");
    assert!(
        text(&bw["message"]).contains("a CPX partition of AMD Instinct MI300X"),
        "{bw}"
    );
}
