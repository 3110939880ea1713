//! `rocgate compare` as an upgrade gate that does not cry wolf, through the
//! real binary and the fake ROCm libraries: two runs of one healthy node on
//! a loaded machine compare clean at the standard and the extended tier,
//! while a slower GEMM on one GPU, a slower link between one pair and error
//! counters that grew are regressions that name the GPU; durations never
//! regress; checks blocked by one fault are one line under it, and versions
//! their checks could not read say so; GPUs are followed by PCI address
//! when one falls off the bus, and a version change is shown beside the
//! regression it came with.

use crate::util;
use crate::util::{FakeRun, HANG_GUARD, assert_has, assert_lacks, node, rocgate, run};
use serde_json::Value;
use std::fs;
use std::path::Path;
use std::process::{Child, Command};

/// Runs `rocgate run` on `root`; the results file it wrote.
fn results_json(root: &Path) -> std::path::PathBuf {
    let (_, _, _, _) = run(root, &[]);
    root.with_extension("results.json")
}

/// `rocgate compare BEFORE AFTER EXTRA` on two results files: its exit code
/// and stdout.
fn compare_paths(before: &Path, after: &Path, extra: &[&str]) -> (i32, String) {
    let out = rocgate()
        .arg("compare")
        .arg(before)
        .arg(after)
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Processes that keep the machine's CPUs busy while they live: what a
/// 2-core CI machine shared with other jobs looks like. Killed (by their own
/// ids) on drop.
struct Load(Vec<Child>);

impl Load {
    /// Two busy loops.
    fn start() -> Load {
        Load(
            (0..2)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .spawn()
                        .unwrap()
                })
                .collect(),
        )
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// `rocgate compare BEFORE AFTER ARGS` on two results documents: its exit
/// code and what it printed.
fn compare(before: &Value, after: &Value, args: &[&str]) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let (b, a) = (
        dir.path().join("before.json"),
        dir.path().join("after.json"),
    );
    std::fs::write(&b, before.to_string()).unwrap();
    std::fs::write(&a, after.to_string()).unwrap();
    let out = rocgate()
        .arg("compare")
        .arg(&b)
        .arg(&a)
        .args(args)
        .timeout(HANG_GUARD)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// The built-in thresholds with the memory test over `share` of VRAM, so
/// the extended tier's fake GPUs write megabytes rather than gigabytes, in
/// `dir`.
fn small_memtest(dir: &Path, share: &str) -> String {
    let builtin = include_str!("../../suites/thresholds.toml");
    assert!(builtin.contains("vram_share = 0.1\n"));
    let path = dir.join("thresholds.toml");
    let changed = builtin.replace("vram_share = 0.1\n", &format!("vram_share = {share}\n"));
    std::fs::write(&path, changed).unwrap();
    path.to_str().unwrap().to_string()
}

/// The lines of `text` under the heading that starts with `title`.
fn section<'a>(text: &'a str, title: &str) -> Vec<&'a str> {
    text.lines()
        .skip_while(|l| !l.starts_with(title))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect()
}

/// The metric `name` of result `id`.
fn metric<'a>(json: &'a Value, id: &str, name: &str) -> &'a Value {
    util::entry(&util::result(json, id)["metrics"], "name", name)
}

#[test]
fn two_runs_of_a_healthy_node_on_a_loaded_machine_compare_clean() {
    let n = node("mi300x-8");
    let dir = tempfile::tempdir().unwrap();
    let thresholds = small_memtest(dir.path(), "0.0001");
    let load = Load::start();
    let started = std::time::Instant::now();
    let standard = || {
        FakeRun::on(&n.root)
            .args(&["--tier", "standard"])
            .exits(0)
            .0
    };
    let (s1, s2) = (standard(), standard());
    let extended = || {
        FakeRun::on(&n.root)
            .args(&["--tier", "extended", "--thresholds", &thresholds])
            .exits(0)
            .0
    };
    let (e1, e2) = (extended(), extended());
    let took = started.elapsed();
    drop(load);
    for (tier, before, after) in [("standard", &s1, &s2), ("extended", &e1, &e2)] {
        let (code, text) = compare(before, after, &[]);
        assert_eq!(code, 0, "{tier}: {text}");
        assert!(text.contains("NO REGRESSION"), "{tier}: {text}");
        assert!(text.contains("Throughputs worse beyond their tolerance and spread: 0"));
    }
    // The extended tier's throughputs were judged, each with the spread of
    // its repetitions; the standard tier measures none worth comparing
    // (its rates are of single calls made to check results), only counters.
    let (_, text) = compare(&e1, &e2, &[]);
    let judged = |text: &str| -> usize {
        let after = text.split("Metrics judged: ").nth(1).unwrap();
        after.split(' ').next().unwrap().parse().unwrap()
    };
    // 8 GPUs' host copies each way, 4 GEMM data types and RAS counters, and
    // 56 peer-to-peer pairs.
    assert!(judged(&text) > 8 * 2 + 8 * 4 + 56, "{text}");
    let h2d = metric(&e1, "gpu0.hip.bandwidth", "h2d_gbps");
    assert_eq!(h2d["kind"], "throughput", "{h2d}");
    assert_eq!(h2d["spread"]["samples"], 3, "{h2d}");
    let gemm = metric(&e1, "gpu0.rocblas.gemm_throughput", "gemm_tflops.fp16");
    assert_eq!(gemm["spread"]["samples"], 5, "{gemm}");
    let (_, text) = compare(&s1, &s2, &[]);
    assert_has(&text, "not judged: ");
    let duration = metric(&s1, "gpu0.hip.vector_add", "vector_add_ms");
    assert_eq!(duration["kind"], "duration", "{duration}");
    eprintln!("four runs under load took {took:?}");
}

/// The extended tier's `check` alone on `gpus` of a fresh mi300x-8, with
/// `env` set.
fn extended_check(check: &str, gpus: &str, env: &[(&'static str, &'static str)]) -> Value {
    let mut run = FakeRun::scenario("mi300x-8")
        .args(&["--tier", "extended", "--gpus", gpus, "--only", check]);
    for (k, v) in env {
        run = run.env(k, v);
    }
    run.exits(0).0
}

/// Extended check `check` on `gpus` of an MI300X node, run with the fakes'
/// environment `var` (name, value before, value after) at each value, and
/// the two reports compared: (before, after, the comparison's exit code and
/// text).
fn slowed(
    check: &str,
    gpus: &str,
    var: (&'static str, &'static str, &'static str),
) -> (Value, Value, i32, String) {
    let (name, was, now) = var;
    let before = extended_check(check, gpus, &[(name, was)]);
    let after = extended_check(check, gpus, &[(name, now)]);
    let (code, text) = compare(&before, &after, &[]);
    (before, after, code, text)
}

#[test]
fn a_gemm_slower_on_one_gpu_is_a_regression_that_names_it() {
    // 1000 TFLOP/s, and 700 on gpu3 after: 30% slower, yet above every
    // MI300X floor, so only the comparison can see it.
    let (before, after, code, text) = slowed(
        "rocblas::gemm_throughput",
        "1,3",
        ("ROCGATE_FAKE_GEMM_TFLOPS", "1000", "1000;gpu3=700"),
    );
    assert_eq!(code, 1, "{text}");
    let slower = section(&text, "Throughputs worse");
    assert!(!slower.is_empty(), "{text}");
    for line in &slower {
        assert!(
            line.starts_with("  gpu3.rocblas.gemm_throughput gemm_tflops.")
                && line.contains(" (0000:65:00.0): ")
                && line.contains("%; tolerance 5%, spread "),
            "{text}"
        );
    }
    assert!(
        section(&text, "Checks that stopped passing").is_empty(),
        "{text}"
    );
    // A tolerance above the drop, for every family, hides it.
    let (code, text) = compare(&before, &after, &["--tolerance", "0.35"]);
    assert_eq!(code, 0, "{text}");
}

#[test]
fn a_link_slower_between_one_pair_is_a_regression_that_names_the_pair() {
    // 60 GB/s over XGMI, and 45 from gpu2 to gpu5 after: still above the
    // 42 GB/s floor, 25% slower.
    let (before, after, code, text) = slowed(
        "hip::p2p_bandwidth",
        "0,2,5",
        ("ROCGATE_FAKE_P2P_GBPS", "xgmi=60", "xgmi=60;gpu2>gpu5=45"),
    );
    assert_eq!(code, 1, "{text}");
    // The copies are timed on the simulated GPU's clock: exactly the
    // link's rate, whatever the host's load.
    let slower = section(&text, "Throughputs worse");
    assert_eq!(slower.len(), 1, "{text}");
    assert!(
        slower[0].starts_with(
            "  node.hip.p2p_bandwidth p2p_gbps.gpu2>gpu5 (0000:46:00.0 > 0000:a6:00.0): 60.0"
        ) && slower[0].contains(" -> 45.0")
            && slower[0].contains(" GB/s (-25.0%; tolerance 10%, spread 0.0"),
        "{text}"
    );
    // The family's tolerance comes from the thresholds file: one that
    // tolerates 30% for peer copies lets it pass; a broken one is refused.
    let dir = tempfile::tempdir().unwrap();
    let lenient = dir.path().join("lenient.toml");
    let builtin = include_str!("../../suites/thresholds.toml");
    std::fs::write(
        &lenient,
        builtin.replace("p2p_gbps = 0.1\n", "p2p_gbps = 0.3\n"),
    )
    .unwrap();
    let (code, text) = compare(
        &before,
        &after,
        &["--thresholds", lenient.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{text}");
    let broken = dir.path().join("broken.toml");
    std::fs::write(&broken, builtin.replace("p2p_gbps = 0.1\n", "p2p = 0.1\n")).unwrap();
    let (code, text) = compare(&before, &after, &["--thresholds", broken.to_str().unwrap()]);
    assert_eq!(code, 2, "{text}");
    assert_has(&text, "broken.toml");
    assert_has(&text, "known families");
}

#[test]
fn retired_pages_that_grew_are_a_regression_that_names_the_gpu() {
    let n = node("mi300x-8");
    let (_, _, before, _) = run(&n.root, &[]);
    let pages = n
        .root
        .join("sys/bus/pci/devices/0000:65:00.0/ras/gpu_vram_bad_pages");
    std::fs::write(
        &pages,
        "0x00012345 : 0x00001000 : R\n0x00054321 : 0x00001000 : R\n",
    )
    .unwrap();
    let (_, _, after, _) = run(&n.root, &[]);
    let (code, text) = compare(&before, &after, &[]);
    assert_eq!(code, 1, "{text}");
    assert_eq!(
        section(&text, "Error counters that grew"),
        ["  gpu3.amdgpu.ras_bad_pages ras_bad_pages (0000:65:00.0): 0 -> 2 pages (+2)"],
        "{text}"
    );
}

/// `doc` with every metric of `kind` scaled by `factor`.
fn scaled(doc: &Value, kind: &str, factor: f64) -> Value {
    let mut doc = doc.clone();
    for r in doc["results"].as_array_mut().unwrap() {
        for m in r["metrics"].as_array_mut().into_iter().flatten() {
            if m["kind"] == kind {
                m["value"] = (m["value"].as_f64().unwrap() * factor).into();
            }
        }
    }
    doc
}

#[test]
fn durations_and_readings_never_regress_however_far_they_move() {
    let (before, _) = FakeRun::scenario("mi300x-8")
        .args(&["--tier", "standard"])
        .exits(0);
    // A thousand times slower kernels and compiles, and a hundredth of
    // every reading (single-call rates, temperatures).
    let after = scaled(&scaled(&before, "duration", 1000.0), "reading", 0.01);
    let (code, text) = compare(&before, &after, &[]);
    assert_eq!(code, 0, "{text}");
    let not_judged = text.split("not judged: ").nth(1).unwrap();
    assert!(!not_judged.starts_with('0'), "{text}");
    // The same report read as one written before metrics said their kind:
    // times are still never compared.
    let mut old = after.clone();
    for r in old["results"].as_array_mut().unwrap() {
        for m in r["metrics"].as_array_mut().into_iter().flatten() {
            if m["kind"] == "duration" {
                m.as_object_mut().unwrap().remove("kind");
            }
        }
    }
    let (code, text) = compare(&before, &old, &[]);
    assert_eq!(code, 0, "{text}");
}

#[test]
fn checks_blocked_by_one_fault_are_one_line_and_what_they_read_is_not_read() {
    let (before, _) = FakeRun::scenario("mi300x-8")
        .args(&["--tier", "standard"])
        .exits(0);
    let (after, _) = FakeRun::scenario("amdgpu-not-loaded")
        .args(&["--tier", "standard"])
        .exits(1);
    let (code, text) = compare(&before, &after, &[]);
    assert_eq!(code, 1, "{text}");
    let stopped = section(&text, "Checks that stopped passing");
    let root = stopped
        .iter()
        .position(|l| l.starts_with("  node.amdgpu.module_live pass -> fail: "))
        .unwrap_or_else(|| panic!("{text}"));
    let blocked = stopped[root + 1];
    assert!(
        blocked.starts_with("    ") && blocked.ends_with(" checks above it blocked"),
        "{text}"
    );
    // One line for the root, not one per check it blocked.
    assert!(stopped.len() < 5, "{text}");
    assert_lacks(&text, "gpu3.hip.vector_add");
    // HIP's version was read by a check the fault blocked: not "(none)".
    let versions = section(&text, "Versions changed");
    assert!(
        versions.iter().any(|l| l.contains("hip_runtime_version")
            && l.ends_with("not read (blocked by node.amdgpu.module_live)")),
        "{text}"
    );
    assert!(
        versions
            .iter()
            .all(|l| !l.contains("hip_runtime_version") || !l.contains("(none)")),
        "{text}"
    );
    let (_, md) = compare(&before, &after, &["--format", "markdown"]);
    assert_has(&md, "checks above it blocked");
    assert_has(&md, "not read (blocked by node.amdgpu.module_live)");
}

/// Swaps KFD nodes `a` and `b` of the sysroot at `root` (their directories
/// and every IO link naming them): the same GPUs, enumerated in another
/// order, as after a reboot that probed them differently.
fn swap_kfd_nodes(root: &Path, a: u32, b: u32) {
    let topo = root.join(util::TOPO);
    let tmp = topo.join("swap");
    std::fs::rename(topo.join(a.to_string()), &tmp).unwrap();
    std::fs::rename(topo.join(b.to_string()), topo.join(a.to_string())).unwrap();
    std::fs::rename(&tmp, topo.join(b.to_string())).unwrap();
    let swap = |v: &str| match v.parse::<u32>() {
        Ok(n) if n == a => b.to_string(),
        Ok(n) if n == b => a.to_string(),
        _ => v.to_string(),
    };
    for node in std::fs::read_dir(&topo).unwrap() {
        let links = node.unwrap().path().join("io_links");
        for link in std::fs::read_dir(&links).into_iter().flatten() {
            let p = link.unwrap().path().join("properties");
            let Ok(text) = std::fs::read_to_string(&p) else {
                continue;
            };
            let out: String = text
                .lines()
                .map(|l| match l.split_once(' ') {
                    Some((k @ ("node_from" | "node_to"), v)) => format!("{k} {}\n", swap(v)),
                    _ => format!("{l}\n"),
                })
                .collect();
            std::fs::write(p, out).unwrap();
        }
    }
}

/// The extended tier's peer copies on a mi300x-8 whose KFD nodes `swap`
/// are exchanged (none: as written), with `rates` for the fake's links.
fn p2p_run(swap: Option<(u32, u32)>, rates: &str) -> Value {
    let n = node("mi300x-8");
    if let Some((a, b)) = swap {
        swap_kfd_nodes(&n.root, a, b);
    }
    FakeRun::on(&n.root)
        .args(&[
            "--tier",
            "extended",
            "--gpus",
            "0,2,5",
            "--only",
            "hip::p2p_bandwidth",
        ])
        .env("ROCGATE_FAKE_P2P_GBPS", rates)
        .run()
        .2
}

/// `doc` as a report older than `between` wrote it: pairs named only by
/// their metric's name.
fn without_between(doc: &Value) -> Value {
    let mut doc = doc.clone();
    for r in doc["results"].as_array_mut().unwrap() {
        for m in r["metrics"].as_array_mut().into_iter().flatten() {
            m.as_object_mut().unwrap().remove("between");
        }
    }
    doc
}

#[test]
fn pairs_are_matched_by_both_gpus_identity_when_kfd_renumbers_them() {
    // gpu2 is 0000:46:00.0 and gpu5 0000:a6:00.0 (KFD nodes 4 and 7); the
    // link from 0x46 to 0xa6 is slow in both runs. After the swap it is
    // gpu5>gpu2: by name a false regression, by identity the same link.
    let before = p2p_run(None, "xgmi=60;gpu2>gpu5=45");
    let after = p2p_run(Some((4, 7)), "xgmi=60;gpu5>gpu2=45");
    let address = |doc: &Value, gpu: &str| {
        util::entry(&doc["scopes"], "scope", gpu)["properties"]["pci_address"].clone()
    };
    assert_eq!(address(&before, "gpu2"), "0000:46:00.0");
    assert_eq!(address(&after, "gpu5"), "0000:46:00.0");
    for (form, b, a) in [
        ("this release's", before.clone(), after.clone()),
        (
            "an older release's",
            without_between(&before),
            without_between(&after),
        ),
    ] {
        let (code, text) = compare(&b, &a, &[]);
        assert_eq!(code, 0, "{form} reports: {text}");
        assert!(text.contains("NO REGRESSION"), "{form}: {text}");
        assert!(!text.contains("matched by index"), "{form}: {text}");
    }
    // A 79% drop of that link, renumbered, is a regression named by both
    // GPUs' addresses, whichever pair the same name held before.
    let before = p2p_run(None, "xgmi=60");
    let after = p2p_run(Some((4, 7)), "xgmi=60;gpu5>gpu2=12.6");
    for (form, b, a) in [
        ("this release's", before.clone(), after.clone()),
        (
            "an older release's",
            without_between(&before),
            without_between(&after),
        ),
    ] {
        let (code, text) = compare(&b, &a, &[]);
        assert_eq!(code, 1, "{form}: {text}");
        let slower = section(&text, "Throughputs worse");
        assert_eq!(slower.len(), 1, "{form}: {text}");
        assert!(
            slower[0].starts_with(
                "  node.hip.p2p_bandwidth p2p_gbps.gpu5>gpu2 (0000:46:00.0 > 0000:a6:00.0): 60.0"
            ) && slower[0].contains("-79.0%"),
            "{form}: {text}"
        );
    }
    // A report that does not say who its GPUs are is matched by index, and
    // the comparison says so.
    let mut anonymous = after.clone();
    for s in anonymous["scopes"].as_array_mut().unwrap() {
        s["properties"] = serde_json::json!({});
    }
    let (_, text) = compare(&before, &anonymous, &[]);
    assert!(
        text.starts_with("Note: gpu0, gpu2, gpu5 of the second run have no pci_address or unique_id: GPUs are matched by index"),
        "{text}"
    );
}

/// `doc` with the first metric of result `id` set to `value`, or removed.
fn with_metric(doc: &Value, id: &str, value: Option<Value>) -> Value {
    let mut doc = doc.clone();
    let r = doc["results"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|r| r["id"] == id)
        .unwrap();
    let metrics = r["metrics"].as_array_mut().unwrap();
    match value {
        Some(v) => metrics[0]["value"] = v,
        None => {
            metrics.remove(0);
        }
    }
    doc
}

#[test]
fn a_measurement_that_vanished_while_its_check_passes_is_a_regression() {
    let (before, _) = FakeRun::scenario("mi300x-8")
        .args(&["--tier", "standard"])
        .exits(0);
    // A GPU's RAS counter written with no value (as a NaN was), and a
    // reading left out, while both checks pass.
    let ras = "gpu2.amdgpu.ras_bad_pages";
    let name = |id: &str| util::result(&before, id)["metrics"][0]["name"].clone();
    assert_eq!(util::result(&before, ras)["status"], "pass");
    let vector = "gpu6.hip.vector_add";
    for (id, value, says) in [
        (ras, Some(Value::Null), "missing (written with no value)"),
        (vector, None, "missing (not in the report)"),
    ] {
        let after = with_metric(&before, id, value);
        let (code, text) = compare(&before, &after, &[]);
        assert_eq!(code, 1, "{text}");
        let missing = section(&text, "Measurements missing while their checks pass");
        assert_eq!(missing.len(), 1, "{text}");
        let metric = name(id);
        assert!(
            missing[0].starts_with(&format!("  {id} {}", metric.as_str().unwrap()))
                && missing[0].ends_with(says),
            "{text}"
        );
        assert!(text.ends_with("REGRESSED\n"), "{text}");
        let (_, md) = compare(&before, &after, &["--format", "markdown"]);
        assert_has(&md, "### Measurements missing while their checks pass");
    }
}

#[test]
fn reports_of_another_schema_say_what_theirs_is_and_what_is_expected() {
    let (doc, _) = FakeRun::scenario("mi300x-8")
        .args(&["--tier", "passive"])
        .exits(0);
    for (version, says) in [
        (
            serde_json::json!("1.0"),
            "schema_version the string \"1.0\", not the integer 1",
        ),
        (
            serde_json::json!(1.5),
            "schema_version 1.5, a number that is not the integer 1",
        ),
        (serde_json::json!(2), "schema_version 2 is not supported"),
    ] {
        let mut other = doc.clone();
        other["schema_version"] = version;
        let (code, text) = compare(&doc, &other, &[]);
        assert_eq!(code, 3, "{text}");
        assert_has(&text, "after.json: ");
        assert_has(&text, says);
        assert_lacks(&text, "no schema_version");
        assert_has(&text, "this rocgate reads schema_version 1");
    }
    let mut none = doc.clone();
    none.as_object_mut().unwrap().remove("schema_version");
    let (code, text) = compare(&none, &doc, &[]);
    assert_eq!(code, 3, "{text}");
    assert_has(
        &text,
        "before.json is not a rocgate run report: it has no schema_version",
    );
    // Not a file of any size: refused before anything is read.
    let out = rocgate()
        .args(["compare", "/dev/zero", "/dev/null"])
        .timeout(HANG_GUARD)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_has(&err, "/dev/zero is a character device, not a report file");
}

#[test]
fn node_text_in_compare_markdown_is_never_markup() {
    let (before, _) = FakeRun::scenario("mi300x-8")
        .args(&["--tier", "passive"])
        .exits(0);
    let mut after = before.clone();
    let r = after["results"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|r| r["status"] == "pass")
        .unwrap();
    r["status"] = "fail".into();
    r["message"] = "<img src=https://e.x/p.png> | <script>x</script>\n| [l](https://e.x)".into();
    let (code, md) = compare(&before, &after, &["--format", "markdown"]);
    assert_eq!(code, 1, "{md}");
    assert_lacks(&md, "<img");
    assert_lacks(&md, "<script");
    assert_lacks(&md, "://");
    assert_has(
        &md,
        "&lt;img src=https&#58;//e.x/p.png&gt; \\| &lt;script&gt;",
    );
    let row = md.lines().find(|l| l.contains("&lt;img")).unwrap();
    assert_eq!(util::unescaped_pipes(row), 5, "{row}");
}

#[test]
fn compare_follows_gpus_by_pci_address_when_one_falls_off_the_bus() {
    let before = node("mi300x-8");
    // gpu5 (0000:a6:00.0) is gone: what was gpu6 (0000:c6:00.0) is gpu5
    // now, and its slot link trained at x8 (read at the upstream port of
    // its internal switch, 0000:c4:00.0).
    let after = node("gpu-count-mismatch");
    let width = after
        .root
        .join("sys/bus/pci/devices/0000:c4:00.0/current_link_width");
    assert!(width.exists(), "{}", width.display());
    std::fs::write(&width, "8\n").unwrap();
    let (b, a) = (results_json(&before.root), results_json(&after.root));

    // A generous tolerance hides no gone GPU, and the degraded link is
    // charged to the GPU that has it, under its new index.
    let (code, text) = compare_paths(&b, &a, &["--tolerance", "0.5"]);
    assert_eq!(code, 1, "{text}");
    assert_has(&text, "GPU count changed: 8 -> 7");
    assert_has(&text, "GPU 0000:a6:00.0 (was gpu5)");
    assert_has(&text, "gpu5.pci.link_width (was gpu6) pass -> warn");
    assert_has(&text, "REGRESSED");
    // The gone GPU's firmware is not listed version by version.
    assert_has(&text, "Versions changed: 0");

    // The same runs the other way round: a GPU that appeared is a count change.
    let (code, text) = compare_paths(&a, &b, &["--tolerance", "0.5"]);
    assert_eq!(code, 1, "{text}");
    assert_has(&text, "GPU count changed: 7 -> 8");

    // And a run compared with itself is no regression.
    let (code, text) = compare_paths(&b, &b, &[]);
    assert_eq!(code, 0, "{text}");
    assert_has(&text, "NO REGRESSION");
}

#[test]
fn compare_catches_a_regression_and_shows_version_changes() {
    let before = node("mi300x-8");
    let (_, _, _, _) = run(&before.root, &[]);
    let after = node("pcie-link-degraded");
    std::fs::write(after.root.join("sys/module/amdgpu/version"), "6.16.7\n").unwrap();
    let (_, _, _, _) = run(&after.root, &[]);
    let (b, a) = (
        before.root.with_extension("results.json"),
        after.root.with_extension("results.json"),
    );
    let out = rocgate()
        .arg("compare")
        .arg(&b)
        .arg(&a)
        .args(["--format", "markdown"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let md = String::from_utf8_lossy(&out.stdout);
    assert_has(&md, "## rocgate: regression");
    assert_has(&md, "| node | amdgpu | 6.16.6 | 6.16.7 |");
    assert_has(&md, "`gpu1.pci.link_width` | pass | **warn**");
    let same = rocgate().arg("compare").arg(&b).arg(&b).output().unwrap();
    assert_eq!(same.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&same.stdout).contains("NO REGRESSION"));
    let bad = before.root.with_extension("junk.json");
    std::fs::write(&bad, "{\"hello\": 1}").unwrap();
    let out = rocgate().arg("compare").arg(&b).arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("junk.json"));
}

#[test]
fn correctable_errors_that_grow_between_runs_are_a_regression() {
    let n = node("mi300x-8");
    let before = n.root.with_extension("before.json");
    let (_, _, json, _) = run(&n.root, &[]);
    fs::write(&before, json.to_string()).unwrap();
    // The same GPU, later: 5 correctable UMC errors (MI300X counts through
    // ACA), and hotter, which is not a regression.
    let aca = n.root.join("sys/bus/pci/devices/0000:26:00.0/ras/aca_umc");
    fs::write(&aca, "ue: 0\nce: 5\nde: 0\n").unwrap();
    let (code, _, after, _) = run(&n.root, &[]);
    assert_eq!(code, 0, "correctable errors alone do not fail a run");
    let after_file = n.root.with_extension("after.json");
    fs::write(&after_file, after.to_string()).unwrap();
    let out = rocgate()
        .arg("compare")
        .arg(&before)
        .arg(&after_file)
        .timeout(HANG_GUARD)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert_has(&text, "Error counters that grew");
    assert_has(
        &text,
        "gpu1.amdgpu.ras_errors ras_ce.umc (0000:26:00.0): 0 -> 5 errors (+5)",
    );
}
