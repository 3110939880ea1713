//! What `rocgate run` prints on stderr while it goes. Without a terminal
//! (every CI log): a line per finished check with its status, time and
//! count, a hung check marked slow and named by a heartbeat while it
//! hangs, and the all-reduce's narrowing announced try by try (in
//! `narrowing`). On a terminal: live lines per GPU, redrawn in place.

use crate::util::{
    FakeRun, OnPty, assert_has, assert_lacks, fake_rocm, node, results, run_on_pty, text,
};
use std::collections::BTreeSet;

/// The statuses a progress line starts with.
const LABELS: [&str; 7] = [
    "PASS", "FAIL", "WARN", "BLOCKED", "SKIP", "TIMEOUT", "CRASH",
];

/// A finished check's line split up: status, count done, total, test id.
fn finished(line: &str) -> Option<(&str, usize, usize, &str)> {
    let label = line.split_whitespace().next()?;
    if !LABELS.contains(&label) {
        return None;
    }
    let (_, rest) = line.split_once(" (")?;
    let (count, rest) = rest.split_once(") ")?;
    let (done, total) = count.trim().split_once('/')?;
    let id = rest.split([' ', ':']).next()?;
    Some((label, done.parse().ok()?, total.parse().ok()?, id))
}

#[test]
fn a_ci_log_gets_a_line_per_check_and_a_hung_one_is_named_while_it_hangs() {
    // gpu5's queue creation hangs for its 6 s timeout; with a heartbeat of
    // 1 s, the log must say it is slow and name it while it runs.
    let (out, json, _) = FakeRun::scenario("mi300x-8")
        .faults("hsa_queue_create@gpu5=hang")
        .timeout("hsa::queue", 6)
        .args(&["--heartbeat", "1"])
        .run_finished();
    assert_eq!(out.code, 1, "{}", out.stderr);
    let log = &out.stderr;
    assert_lacks(log, "\x1b");
    assert_lacks(log, "\r");
    let lines: Vec<_> = log.lines().filter_map(finished).collect();
    let ids: BTreeSet<&str> = results(&json).iter().map(|r| text(&r["id"])).collect();
    // One line per result, counted 1..=N in the order they finished.
    assert_eq!(lines.len(), ids.len(), "{log}");
    assert_eq!(lines.iter().map(|l| l.3).collect::<BTreeSet<_>>(), ids);
    for (n, (_, done, total, _)) in lines.iter().enumerate() {
        assert_eq!((*done, *total), (n + 1, ids.len()), "{log}");
    }
    let status = |id: &str| lines.iter().find(|l| l.3 == id).map(|l| l.0);
    assert_eq!(status("gpu5.hsa.queue"), Some("TIMEOUT"));
    assert_eq!(status("gpu0.hsa.queue"), Some("PASS"));
    assert_eq!(status("gpu5.hip.device"), Some("BLOCKED"));
    assert_has(log, "gpu5.hip.device: blocked by gpu5.hsa.queue");
    // Marked slow past half its timeout, and named by a heartbeat, before
    // its timeout line.
    let at = |needle: &str| {
        log.find(needle)
            .unwrap_or_else(|| panic!("no {needle:?} in:\n{log}"))
    };
    let slow = at("gpu5.hsa.queue (timeout 6.0s)");
    assert!(
        log[..slow].ends_with("] ") && log[..slow].contains("   SLOW [>"),
        "{log}"
    );
    let beat = at(" running: ");
    assert_has(&log[beat..], "gpu5.hsa.queue (");
    assert!(
        log[..beat]
            .rsplit('\n')
            .next()
            .unwrap()
            .trim_start()
            .starts_with("RUNNING ["),
        "{log}"
    );
    // The heartbeat says about how long is left, by the typical times of
    // what has not finished: gpu5's checks after its queue, at least.
    let heartbeat = log[..beat].rsplit('\n').next().unwrap();
    assert!(
        heartbeat.contains("s left (typical times); "),
        "{heartbeat}"
    );
    let timed_out = at("TIMEOUT [");
    assert!(slow < timed_out && beat < timed_out, "{log}");
    let last = log.lines().last().unwrap();
    assert!(last.trim_start().starts_with("DONE ["), "{log}");
    assert_has(last, format!("{n} of {n} checks finished", n = ids.len()));
}

#[test]
fn progress_none_and_quiet_print_nothing_while_the_run_goes() {
    let n = node("mi300x-8");
    for flags in [["--progress", "none"].as_slice(), &["--quiet"]] {
        let (out, _, _) = crate::util::run_finished(&n.root, flags, &[]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(
            !out.stderr.lines().any(|l| finished(l).is_some()),
            "{flags:?}: {}",
            out.stderr
        );
    }
}

#[test]
fn a_terminal_gets_live_lines_per_gpu_with_the_running_check_and_its_timeout() {
    // gpu3's queue hangs for its 4 s timeout, so the live lines are drawn
    // while it does.
    let n = node("mi300x-8");
    let rocm = fake_rocm();
    let root = n.root.to_str().unwrap();
    let run = run_on_pty(
        &n.root,
        &[
            "--rocm-path",
            rocm.path().to_str().unwrap(),
            "--timeout",
            "hsa::queue=4",
        ],
        OnPty::Both,
        &[
            ("TERM", "xterm-256color"),
            ("ROCGATE_FAKE_NODE", root),
            ("ROCGATE_FAKE_FAULTS", "hsa_queue_create@gpu3=hang"),
        ],
    );
    let plain = String::from_utf8(strip_ansi_escapes::strip(&run.terminal)).unwrap();
    // The run's line, and gpu3's with the check it hangs in.
    assert_has(&plain, "checks");
    assert_has(&plain, "gpu3");
    assert_has(&plain, "hsa.queue (");
    assert_has(&plain, "of 4.0s timeout");
    // The timeout printed above the live lines as it happened.
    assert_has(&plain, "TIMEOUT [");
    // Redrawn in place, not a line per check.
    assert_has(&run.terminal, "\x1b[");
    assert!(
        !plain.lines().any(|l| l.trim_start().starts_with("PASS [")),
        "{plain}"
    );
}
