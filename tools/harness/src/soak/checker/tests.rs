use super::*;

fn process(role: &str, pid: u32) -> Process {
    Process {
        role: role.into(),
        pid,
    }
}

fn rss(at_s: f64, role: &str, pid: u32, kib: u64) -> Rss {
    Rss {
        at_s,
        process: process(role, pid),
        kib,
    }
}

fn window(from_s: f64, admitted: u64, store_answered: bool, live_edges: u64) -> Window {
    Window {
        from_s,
        admitted,
        store_answered,
        live_edges,
    }
}

/// A run that passes every check.
fn good() -> Evidence {
    Evidence {
        events: 100,
        acknowledged_events: 100,
        intake_duplicates_caught: 3,
        forged_sent: 5,
        forged_rejected: 5,
        windows: vec![window(0.0, 220, true, 3), window(10.0, 290, false, 3)],
        rss: vec![
            rss(0.0, "store", 10, 5000),
            rss(60.0, "store", 10, 10_000),
            rss(120.0, "store", 10, 11_000),
        ],
        warm_up_s: 60.0,
        end_s: 120.0,
        p99_edge_ms: 400.0,
        p99_edge_running_ms: 300.0,
        timeout_ms: 250,
        ..Evidence::default()
    }
}

fn failed(e: &Evidence) -> Vec<String> {
    judge(e).failures().iter().map(|c| c.name.clone()).collect()
}

/// `e` fails `name` alone, its figure and bound starting with the ones given.
fn assert_only_failure(e: &Evidence, name: &str, figure: &str, bound: &str) {
    assert_eq!(failed(e), [name]);
    let v = judge(e);
    let c = v.failures()[0];
    assert!(
        c.figure.starts_with(figure) && c.bound.starts_with(bound),
        "{c:?}"
    );
}

#[test]
fn a_good_run_passes_every_check() {
    let v = judge(&good());
    assert!(v.passed(), "{:?}", v.failures());
    let names: Vec<&str> = v.checks.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "lost",
            "stored duplicates",
            "events acknowledged",
            "forgeries refused",
            "metered per 10 s, store answering",
            "metered per 10 s, store not answering",
            "rss store",
            "edge p99"
        ]
    );
}

#[test]
fn a_lost_or_twice_stored_hook_fails() {
    let mut e = good();
    e.lost = 1;
    e.lost_keys = vec!["gh:1".into()];
    e.stored_duplicates = 2;
    assert_eq!(failed(&e), ["lost", "stored duplicates"]);
    let v = judge(&e);
    assert!(v.checks[0].figure.contains("gh:1"), "{:?}", v.checks[0]);
}

#[test]
fn an_unacknowledged_event_or_an_admitted_forgery_fails() {
    let mut e = good();
    e.acknowledged_events = 99;
    e.forged_rejected = 4;
    assert_eq!(failed(&e), ["events acknowledged", "forgeries refused"]);
    // One sent to an edge that wasn't listening got no answer: not admitted.
    e.acknowledged_events = 100;
    e.forged_unanswered = 1;
    assert!(judge(&e).passed(), "{:?}", judge(&e).failures());
}

#[test]
fn the_gcra_window_holds_while_the_store_answers() {
    // burst 20 + 20/s × 10 s = 220, + 10 % + 2 = 244.
    assert_eq!(window_quota(), 220);
    let mut e = good();
    e.windows = vec![window(0.0, 244, true, 3)];
    assert!(judge(&e).passed());
    e.windows.push(window(10.0, 245, true, 3));
    assert_only_failure(&e, "metered per 10 s, store answering", "245", "244");
}

#[test]
fn the_degraded_window_holds_quota_times_one_plus_share() {
    // Three live edges: 220 + 220/3 = 293, + 29 + 2 = 324. Two: 330 → 365.
    assert_eq!(degraded_quota(3), 293);
    assert_eq!(degraded_quota(2), 330);
    let mut e = good();
    e.windows = vec![window(0.0, 324, false, 3), window(10.0, 365, false, 2)];
    assert!(judge(&e).passed(), "{:?}", judge(&e).failures());
    e.windows.push(window(20.0, 325, false, 3));
    assert_eq!(failed(&e), ["metered per 10 s, store not answering"]);
    // A window the store answered is held to the GCRA bound, not this one.
    let mut e = good();
    e.windows = vec![window(0.0, 300, true, 3)];
    assert_eq!(failed(&e), ["metered per 10 s, store answering"]);
}

#[test]
fn memory_may_grow_ten_percent_from_its_level_after_warm_up() {
    let mut e = good();
    // Level 10 000 KiB at 60 s: 11 000 passes, 11 001 fails.
    e.rss.push(rss(125.0, "store", 10, 11_001));
    assert_only_failure(&e, "rss store", "11001", "11000");
}

#[test]
fn a_process_ended_by_a_fault_is_reported_and_its_replacement_warms_up_anew() {
    let mut e = good();
    e.rss = vec![
        rss(0.0, "edge-1", 1, 30_000),
        rss(60.0, "edge-1", 1, 40_000),
        rss(70.0, "edge-1", 1, 90_000),
        // Restarted at 75 s: its level is at 75 + 60 s.
        rss(75.0, "edge-1", 2, 20_000),
        rss(135.0, "edge-1", 2, 30_000),
        rss(200.0, "edge-1", 2, 33_000),
        // Restarted late: too young to judge.
        rss(0.0, "store", 3, 5000),
        rss(150.0, "store", 4, 5000),
        rss(200.0, "store", 4, 9000),
    ];
    let v = judge(&e);
    assert!(v.passed(), "{:?}", v.failures());
    let judged: Vec<(&str, u32)> = v
        .memory
        .iter()
        .filter(|m| m.judged().is_some())
        .map(|m| (m.process.role.as_str(), m.process.pid))
        .collect();
    assert_eq!(judged, [("edge-1", 2)]);
    let first = v
        .memory
        .iter()
        .find(|m| m.process.pid == 1)
        .expect("edge pid 1");
    assert!(!first.to_the_end);
    assert_eq!(first.peak_kib, 90_000);
    e.rss.push(rss(205.0, "edge-1", 2, 33_001));
    assert_eq!(failed(&e), ["rss edge-1"]);
}

#[test]
fn the_edge_p99_is_held_to_the_budget_less_cpu_waits() {
    let mut e = good();
    e.p99_edge_running_ms = 300.0;
    assert!(judge(&e).passed());
    e.p99_edge_running_ms = 300.1;
    assert_eq!(failed(&e), ["edge p99"]);
}

#[test]
fn redis_nodes_are_judged_together_as_slots_move_between_them() {
    let mut e = good();
    // A slot moves from :7001 to :7002 after warm-up: one node shrinks as
    // the other grows; together they grew 5 %.
    e.rss.extend([
        rss(0.0, "redis:7001", 20, 10_000),
        rss(60.0, "redis:7001", 20, 10_000),
        rss(120.0, "redis:7001", 20, 8_000),
        rss(0.0, "redis:7002", 21, 10_000),
        rss(60.0, "redis:7002", 21, 10_000),
        rss(120.0, "redis:7002", 21, 13_000),
    ]);
    assert_eq!(failed(&e), Vec::<String>::new());
    let together = judge(&e)
        .checks
        .into_iter()
        .find(|c| c.name == "rss redis, its 2 nodes together")
        .expect("one check for the nodes");
    assert_eq!(together.figure, "21000 KiB at the end");
    // Together 15 % more: the check fails.
    e.rss.push(rss(125.0, "redis:7001", 20, 8_000));
    e.rss.push(rss(125.0, "redis:7002", 21, 15_000));
    e.rss.push(rss(125.0, "store", 10, 11_000));
    assert_eq!(failed(&e), ["rss redis, its 2 nodes together"]);
}
