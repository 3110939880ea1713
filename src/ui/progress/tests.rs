use super::*;
use rocgate_harness::{Finding, Severity};

fn result(id: &str, scope: Scope, status: Status) -> CheckResult {
    CheckResult::new(
        id.into(),
        "hsa::queue".into(),
        rocgate_suites::stack::HSA,
        scope,
        status,
    )
}

fn plain() -> Style {
    Style::from(Capabilities {
        color: false,
        cursor: false,
    })
}

#[test]
fn a_pass_is_its_status_time_count_and_id_alone() {
    let mut r = result("gpu0.hsa.queue", Scope::Gpu(0), Status::Pass);
    r.duration = Duration::from_millis(12);
    r.message = "queue created".into();
    let line = finished_line(
        plain(),
        &r,
        Count {
            done: 7,
            total: 317,
        },
    );
    assert_eq!(line, "   PASS [   0.012s] (  7/317) gpu0.hsa.queue");
}

#[test]
fn a_failure_adds_its_code_and_the_first_line_of_its_message() {
    let mut r = result("gpu5.hsa.queue", Scope::Gpu(5), Status::Timeout);
    r.duration = Duration::from_secs(30);
    r.message = "did not finish within 30.0 s\nmore".into();
    r.finding = Some(Finding::new("check-timeout", Severity::Fail, "x", "y"));
    let line = finished_line(plain(), &r, Count { done: 1, total: 9 });
    assert_eq!(
        line,
        "TIMEOUT [  30.000s] (1/9) gpu5.hsa.queue [check-timeout]: did not finish within 30.0 s"
    );
}

#[test]
fn a_blocked_check_names_its_blocker_and_no_time() {
    let mut r = result("gpu1.hip.device", Scope::Gpu(1), Status::Blocked);
    r.blocked_by = Some("node.hsa.init".into());
    r.message = "blocked by node.hsa.init: a long message said above".into();
    let line = finished_line(
        plain(),
        &r,
        Count {
            done: 10,
            total: 10,
        },
    );
    assert_eq!(
        line,
        "BLOCKED             (10/10) gpu1.hip.device: blocked by node.hsa.init"
    );
}

#[test]
fn the_tracker_counts_per_scope_and_forgets_what_finished() {
    let secs = Duration::from_secs;
    let mut t = Tracker::new([
        ("node.hsa.init".to_string(), Scope::Node, secs(2), false),
        ("gpu0.hsa.queue".to_string(), Scope::Gpu(0), secs(1), false),
        (
            "gpu0.hip.memtest".to_string(),
            Scope::Gpu(0),
            secs(8),
            false,
        ),
    ]);
    assert_eq!(t.overall(), Count { done: 0, total: 3 });
    // The node's 2 s, then the GPU's 9 s.
    assert_eq!(t.left(Instant::now()), secs(11));
    t.start("gpu0.hsa.queue", Scope::Gpu(0), Duration::from_secs(30));
    t.start("node.hsa.init", Scope::Node, Duration::from_secs(60));
    assert_eq!(t.running.len(), 2);
    t.finish(&result("gpu0.hsa.queue", Scope::Gpu(0), Status::Pass));
    assert_eq!(t.running.len(), 1);
    assert_eq!(t.running[0].id, "node.hsa.init");
    assert_eq!(t.scopes[&Scope::Gpu(0)], Count { done: 1, total: 2 });
    assert_eq!(t.overall(), Count { done: 1, total: 3 });
    // What finished no longer counts, and a running check's time spent is
    // taken off its typical time, never below none.
    let later = t.running[0].started + secs(5);
    assert_eq!(t.left(later), secs(8));
}

#[test]
fn the_time_left_takes_the_gpus_side_by_side() {
    let secs = Duration::from_secs;
    let t = Tracker::new(
        (0..8).map(|g| (format!("gpu{g}.hip.memtest"), Scope::Gpu(g), secs(8), false)),
    );
    assert_eq!(t.left(Instant::now()), secs(8));
    assert_eq!(
        left_words(&t, Instant::now()),
        "about 8.0s left (typical times)"
    );
    let done = Tracker::new([(
        "node.x".to_string(),
        Scope::Node,
        Duration::from_millis(300),
        false,
    )]);
    assert_eq!(left_words(&done, Instant::now()), "");
    // The node's all-reduce loop and the GPUs' burn-ins run at once.
    let burnin = Tracker::new([
        (
            "gpu0.hip.vector_add".to_string(),
            Scope::Gpu(0),
            secs(5),
            false,
        ),
        ("gpu0.hip.burnin".to_string(), Scope::Gpu(0), secs(60), true),
        ("gpu1.hip.burnin".to_string(), Scope::Gpu(1), secs(60), true),
        ("node.rccl.burnin".to_string(), Scope::Node, secs(60), true),
    ]);
    assert_eq!(burnin.left(Instant::now()), secs(65));
}

#[test]
fn a_sustained_check_is_not_slow_for_its_duration_and_shows_its_gpu_s_telemetry() {
    let secs = Duration::from_secs;
    let mut t = Tracker::new([(
        "gpu2.hip.burnin".to_string(),
        Scope::Gpu(2),
        secs(600),
        true,
    )]);
    t.glance = Some(Glance::new(|s| {
        Some(format!("{} junction 76 °C", s.label()))
    }));
    t.start("gpu2.hip.burnin", Scope::Gpu(2), secs(720));
    let r = t.running[0].clone();
    // Ten minutes of load plus half of the 120 s it may run beyond.
    assert!(!r.slow(r.started + secs(600)));
    assert!(r.slow(r.started + secs(661)));
    assert_eq!(
        t.running_text(&r, r.started + secs(300)),
        "gpu2.hip.burnin (300s of 720s timeout) [gpu2 junction 76 °C]"
    );
}

#[test]
fn a_check_is_slow_past_half_its_timeout() {
    let start = Instant::now();
    let r = Running {
        id: "node.rccl.allreduce".into(),
        scope: Scope::Node,
        started: start,
        timeout: Duration::from_secs(60),
        sustained: false,
        slow_after: Duration::from_secs(30),
    };
    assert!(!r.slow(start + Duration::from_secs(30)));
    assert!(r.slow(start + Duration::from_secs(31)));
    assert_eq!(
        running_line(&r, start + Duration::from_secs(31)),
        "node.rccl.allreduce (31s of 60s timeout, SLOW)"
    );
    assert_eq!(
        running_line(&r, start + Duration::from_millis(4200)),
        "node.rccl.allreduce (4.2s of 60s timeout)"
    );
}
