//! The search that follows a hung or failed all-reduce, through the binary
//! and the fake ROCm: each try runs in a worker that sees only its GPUs, so
//! a GPU whose runtime start hangs fails only the tries that hold it; and a
//! try that a reset of the XGMI hive cut short blames none of its GPUs.

use crate::util::{FakeRun, assert_has, node, result, result_with_finding, text};
use serde_json::Value;

/// Every try that hangs waits this long; completing tries take well under
/// it even on a loaded machine (a fake all-reduce of 4 MiB per GPU).
const TRY_SECS: u32 = 10;

/// `run` on the standard tier with `faults`, every all-reduce try cut short
/// after [`TRY_SECS`]; it must fail (exit 1). Its JSON document.
fn failed_search<'a>(run: FakeRun<'a>, faults: &'a str) -> Value {
    let (out, json, _) = run
        .faults(faults)
        .args(&["--tier", "standard"])
        .timeout("rccl::allreduce", TRY_SECS)
        .run_finished();
    assert_eq!(out.code, 1, "{}", out.stdout);
    // The search is announced try by try, with its bounds, so a CI log
    // shows it is alive while each try runs.
    assert_has(
        &out.stderr,
        format!(
            "PHASE narrowing the failed all-reduce to a GPU: try 1 of at most 12 on gpu0,gpu1,gpu2,gpu3 (at most {TRY_SECS} s)"
        ),
    );
    assert_has(&out.stderr, "PHASE try 1 on gpu0,gpu1,gpu2,gpu3: ");
    json
}

#[test]
fn a_gpu_wedged_by_the_hung_all_reduce_is_named_by_tries_that_see_only_their_gpus() {
    // The all-reduce hangs on gpu5 and leaves it wedged: from then on the
    // runtime start of every process that can see gpu5 hangs. Tries that
    // see every GPU all hang in their start, whatever GPUs they reduce on.
    let json = failed_search(FakeRun::scenario("mi300x-8"), "ncclAllReduce@gpu5=wedge");
    let r = result_with_finding(&json, "node.rccl.allreduce", "rccl-hang-isolated");
    assert_eq!(r["finding"]["blames"], "gpu5", "{r}");
    let output = text(&r["output"]);
    for line in [
        "all-reduce on gpu0,gpu1,gpu2,gpu3: completed",
        "all-reduce on gpu4,gpu5,gpu6,gpu7: did not complete",
        "all-reduce on gpu6,gpu7: completed",
        "all-reduce on gpu4,gpu6: completed",
        "all-reduce on gpu5,gpu6: did not complete",
    ] {
        assert!(output.contains(line), "{line}\n{output}");
    }
}

#[test]
fn a_hive_reset_during_a_try_is_waited_out_and_blames_none_of_its_gpus() {
    // The all-reduce hangs whenever gpu0 takes part; while the try on gpu1
    // and gpu2 runs, the hive resets (every MI300X of the node is in it),
    // the try's process dies, and the kernel log says so. Counted as a
    // failure, that try would make gpu1 a suspect too and the search would
    // name nobody.
    let n = node("mi300x-8");
    let json = failed_search(
        FakeRun::on(&n.root),
        "ncclAllReduce@gpu0=hang;ncclAllReduce@gpu1=hive-reset",
    );
    let log = std::fs::read_to_string(n.root.join("var/log/kern.log")).unwrap();
    assert!(log.contains("GPU reset begin!"), "the reset never happened");
    let r = result_with_finding(&json, "node.rccl.allreduce", "rccl-hang-isolated");
    assert_eq!(r["finding"]["blames"], "gpu0", "{r}");
    let output = text(&r["output"]);
    assert!(
        output
            .contains("all-reduce on gpu1,gpu2: completed (tried again after a GPU reset of 0000:"),
        "{output}"
    );
    assert!(
        output.contains("cut the first try short: failed (crash"),
        "{output}"
    );
}

#[test]
fn a_hive_reset_the_gpus_do_not_come_back_from_stops_the_search_naming_it() {
    // The hive resets during the try on gpu4..gpu7, and the reset fails:
    // nothing a try could say after it is about the GPUs, so the search
    // stops there, names nobody on the one try before it, and says why.
    let n = node("mi300x-8");
    let json = failed_search(
        FakeRun::on(&n.root),
        "ncclAllReduce@gpu0=hang;ncclAllReduce@gpu4=hive-reset:failed",
    );
    let r = result(&json, "node.rccl.allreduce");
    assert_ne!(r["finding"]["code"], "rccl-hang-isolated", "{r}");
    assert_eq!(r["finding"]["blames"], serde_json::Value::Null, "{r}");
    assert!(
        text(&r["finding"]["message"])
            .ends_with("stopped at a GPU reset of the XGMI hive (see the output)"),
        "{r}"
    );
    let output = text(&r["output"]);
    assert_has(output, "search stopped: a GPU reset of 0000:");
    assert_has(output, "failed during the try on gpu4,gpu5,gpu6,gpu7");
}
