use super::*;

fn row(extra: serde_json::Value) -> Row {
    let mut v = serde_json::json!({
        "fault": "store-frozen", "events": 1, "deliveries": 1, "acknowledged_events": 1,
        "lost": 0, "lost_keys": [], "stored": 1, "stored_duplicates": 0,
        "duplicates_reason": null, "answers": {}, "transport_errors": 0,
        "p99_before_ms": 1.0, "p99_during_ms": 2.0, "added_p99_ms": 1.0, "timeout_ms": 250,
        "breaker_open_ms": 1000, "breaker": [0.0], "degraded": [0.0], "fallbacks": 1,
        "settle_dropped": 0, "resume_after_heal_ms": 0, "fault_s": [1.0, 2.0]
    });
    if let (Some(v), Some(extra)) = (v.as_object_mut(), extra.as_object()) {
        v.extend(extra.clone());
    }
    serde_json::from_value(v).expect("row")
}

#[test]
fn the_budget_is_held_on_the_edge_time_less_the_workers_cpu_wait() {
    let ok = row(serde_json::json!({
        "p99_edge_during_ms": 420.0, "p99_edge_during_running_ms": 300.0
    }));
    assert_eq!(ok.broken_promise(), None);
    let over = row(serde_json::json!({
        "p99_edge_during_ms": 320.0, "p99_edge_during_running_ms": 301.0
    }));
    let broken = over.broken_promise().expect("over the budget");
    assert!(
        broken.contains("over fleet.timeout_ms 250 plus 50 ms"),
        "{broken}"
    );
}

#[test]
fn the_breaker_must_close_within_its_bound_when_the_heal_is_whole() {
    let bound = resume_bound_ms(1000, 250, 100);
    assert_eq!(bound, 1600);
    let late = |closed: u64, bound: Option<u64>| {
        row(serde_json::json!({
            "breaker_closed_after_heal_ms": closed, "resume_bound_ms": bound,
            "resume_after_heal_ms": 7000
        }))
        .broken_promise()
    };
    assert_eq!(
        late(1600, Some(bound)),
        None,
        "single late fall-backs are no breach"
    );
    assert!(late(1700, Some(bound)).is_some());
    assert_eq!(
        late(5000, None),
        None,
        "no bound for a fault that heals slowly"
    );
    let still_open = row(serde_json::json!({
        "breaker": [0.0, 1.0], "resume_bound_ms": bound, "breaker_closed_after_heal_ms": 0
    }));
    let broken = still_open.broken_promise().expect("open at the end");
    assert!(
        broken.contains("still open when the traffic ended"),
        "{broken}"
    );
    assert!(
        still_open
            .markdown()
            .contains("breaker still open at the end"),
        "{}",
        still_open.markdown()
    );
}

#[test]
fn the_metered_tenant_must_stay_within_its_fleet_quota_for_the_window() {
    let within = row(serde_json::json!({"metered_admitted": 112, "metered_quota": 100}));
    assert_eq!(within.broken_promise(), None);
    // Two edges each answering alone with the whole quota: about twice.
    let twice = row(serde_json::json!({"metered_admitted": 190, "metered_quota": 100}));
    let broken = twice.broken_promise().expect("over the quota");
    assert!(
        broken.contains("190 hooks of the metered tenant"),
        "{broken}"
    );
    assert!(
        twice.markdown().ends_with("| 190 / 100 (live edges -) |"),
        "{}",
        twice.markdown()
    );
    assert_eq!(
        row(serde_json::json!({})).broken_promise(),
        None,
        "an older row"
    );
}

#[test]
fn a_store_proxy_at_its_bound_fails_the_row() {
    let refused = row(serde_json::json!({"store_proxy_refused": 3}));
    let broken = refused.broken_promise().expect("the proxy was measured");
    assert!(broken.contains("closed 3 connections"), "{broken}");
}

#[test]
fn a_moving_slot_may_cost_one_hook_in_a_hundred_and_a_failover_nothing_after_its_heal() {
    let migrated = |fallbacks: u64| {
        row(serde_json::json!({
            "fault": "cluster-slot-migrated", "deliveries": 1000, "fallbacks": fallbacks
        }))
        .broken_promise()
    };
    assert_eq!(migrated(10), None);
    let broken = migrated(11).expect("over 1 in 100");
    assert!(
        broken.contains("11 of 1000 hooks fell back while a slot moved"),
        "{broken}"
    );
    let failover = |after_heal: u64| {
        row(serde_json::json!({
            "fault": "cluster-master-killed-replica-promoted", "deliveries": 1000,
            "fallbacks": 300, "fallbacks_after_heal": after_heal
        }))
        .broken_promise()
    };
    assert_eq!(failover(10), None);
    let broken = failover(11).expect("over 1 in 100 after the heal");
    assert!(
        broken.contains("after the replica had taken over"),
        "{broken}"
    );
    // A stalled reshard falls back on the tenant whose slot is split: no bound.
    let stalled = row(serde_json::json!({
        "fault": "cluster-slot-migration-stalled", "deliveries": 1000, "fallbacks": 300
    }));
    assert_eq!(stalled.broken_promise(), None);
}

#[test]
fn a_fault_that_loses_the_buckets_may_admit_one_burst_more() {
    // 120 + 12 + 2, and one burst (20) where Redis lost the bucket.
    assert_eq!(metered_limit(120, false), 134);
    assert_eq!(metered_limit(120, true), 154);
    assert!(Fault::ClusterFailover.loses_redis_keys() && Fault::RedisFlushall.loses_redis_keys());
    assert!(!Fault::StoreFrozen.loses_redis_keys());
    let admitted = |limit: u64, n: u64| {
        row(serde_json::json!({
            "metered_quota": 120, "metered_admitted": n, "metered_limit": limit
        }))
        .broken_promise()
    };
    assert_eq!(
        admitted(0, 134),
        None,
        "a row without its limit: the quota's"
    );
    assert!(admitted(0, 135).is_some());
    assert_eq!(admitted(154, 154), None);
    let broken = admitted(154, 155).expect("over the bound");
    assert!(broken.contains("(allowed 154)"), "{broken}");
}

#[test]
fn an_event_stored_twice_breaks_the_promise() {
    let twice = row(serde_json::json!({"stored_duplicates": 2, "intake_duplicates_caught": 5}));
    let broken = twice.broken_promise().expect("stored twice");
    assert!(broken.contains("2 events stored twice"), "{broken}");
}
