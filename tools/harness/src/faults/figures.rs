//! A row's figures from what its run left: the audit of the intake, the
//! latencies before and during the fault, how the gauges moved, and when
//! fleet answers resumed after the heal.

use super::drive::Run;
use super::latency::{held_within, p99_at_edge_ms, p99_ms};
use super::metered;
use super::plan::{Plan, SAMPLE_EVERY, WARM_UP};
use super::promise::{metered_limit, resume_bound_ms};
use super::row::{Row, Transitions};
use super::row_fault::RowFault;
use super::target::Target;
use crate::provider::audit;
use crate::provider::board::Attempt;
use std::time::Duration;

/// The intake's count of copies its own index caught (`GET /stats`).
pub(crate) fn intake_duplicates_caught(intake: &str) -> u64 {
    let url = format!("{}/stats", intake.trim_end_matches('/'));
    ankusa_testkit::http::get(&url)
        .ok()
        .filter(|r| r.status == 200)
        .and_then(|r| r.json()["duplicates_caught"].as_u64())
        .unwrap_or_else(|| panic!("GET {url} gave no duplicates_caught"))
}

/// The row's figures. Panics when the audit can't read the intake.
pub(crate) fn figures(
    fault: &dyn RowFault,
    plan: &Plan,
    fleet: &mut impl Target,
    run: &Run,
) -> Row {
    let intake = fleet.intake_url();
    let edges = fleet.edge_urls().len() as u64;
    let audit = audit::audit(
        &intake,
        &run.options.tenant,
        &run.options.source,
        &run.outcome.events,
        &run.outcome.acknowledged,
    )
    .unwrap_or_else(|e| panic!("{}: audit failed: {e}", fault.name()));

    // The baseline: attempts over before the fault began (one still running
    // when it began would carry the fault into the baseline).
    let before: Vec<&Attempt> = run
        .outcome
        .attempts
        .iter()
        .filter(|a| a.started >= WARM_UP && a.started + a.took < plan.fault_at)
        .collect();
    let during: Vec<&Attempt> = run
        .outcome
        .attempts
        .iter()
        .filter(|a| a.started >= plan.fault_at && a.started < run.heal_at)
        .collect();
    let (p99_before, p99_during) = (p99_ms(&before), p99_ms(&during));
    let account = fleet.account();
    let held = fleet.held();
    let (edge_before, _) = p99_at_edge_ms(
        &held_within(
            &held,
            run.start_unix_ms,
            WARM_UP,
            plan.fault_at,
            Some(plan.fault_at),
        ),
        &run.stalls,
        &account.frozen,
    );
    let (edge_during, edge_during_running) = p99_at_edge_ms(
        &held_within(&held, run.start_unix_ms, plan.fault_at, run.heal_at, None),
        &run.stalls,
        &account.frozen,
    );
    let (fault_from, fault_to) = (
        run.start_unix_ms + plan.fault_at.as_millis() as u64,
        run.start_unix_ms + run.heal_at.as_millis() as u64,
    );
    // The most any one edge's worker waited for a CPU during the fault.
    let stalled_during = run
        .stalls
        .values()
        .map(|s| s.waited_ms(fault_from, fault_to))
        .max()
        .unwrap_or(0);
    let caught = intake_duplicates_caught(&intake);
    let store_errors_after_heal = fleet.store_hit_errors().saturating_sub(run.errors_at_heal);
    let budget = fleet.budget();
    // Fleet answers resume when fall-backs stop: the last sample after the
    // heal in which the edges' fall-back count still grew.
    let last_growth = run
        .samples
        .windows(2)
        .filter(|w| w[1].at >= run.heal_at && w[1].fallback_sum > w[0].fallback_sum)
        .map(|w| w[1].at)
        .next_back();
    let resume_ms = last_growth.map_or(0, |at| (at - run.heal_at).as_millis() as u64);
    // The breaker closed for good: the sample after the last one in which
    // some edge's breaker was not closed.
    let closed = run
        .samples
        .iter()
        .rposition(|s| s.breaker_max != 0.0)
        .and_then(|i| run.samples.get(i + 1));
    let breaker_closed_ms =
        closed.map_or(0, |s| s.at.saturating_sub(run.heal_at).as_millis() as u64);
    let fallbacks_at_close = closed
        .filter(|s| s.at >= run.heal_at)
        .or_else(|| run.samples.iter().find(|s| s.at >= run.heal_at))
        .map_or(0.0, |s| s.fallback_sum);
    let fallbacks_after_close = run
        .samples
        .last()
        .map_or(0.0, |s| s.fallback_sum - fallbacks_at_close)
        .max(0.0) as u64;
    let fallbacks_after_heal = fallbacks_after(run, run.heal_at);
    let promoted_at = account.promoted_after.map(|after| plan.fault_at + after);
    let fallbacks_once_owned = promoted_at.map(|at| fallbacks_after(run, at.min(run.heal_at)));
    let acked_events = run.outcome.acknowledged.iter().filter(|a| **a).count() as u64;
    let window = run.heal_at.saturating_sub(plan.fault_at);
    Row {
        fault: fault.name().into(),
        notes: account.notes,
        redis_keys_after_restart: account.redis_keys_after_restart,
        events: plan.events as u64,
        deliveries: run.outcome.tally.sent,
        acknowledged_events: acked_events,
        lost: audit.lost,
        lost_keys: audit.lost_keys,
        stored: audit.stored,
        stored_duplicates: audit.stored_duplicates,
        intake_duplicates_caught: caught,
        duplicates_reason: (audit.stored_duplicates > 0 || caught > 0)
            .then(|| fault.duplicates_reason().to_string()),
        answers: run.outcome.tally.answers.clone(),
        transport_errors: run.outcome.tally.transport_errors,
        p99_before_ms: p99_before,
        p99_during_ms: p99_during,
        added_p99_ms: ((p99_during - p99_before) * 10.0).round() / 10.0,
        p99_edge_before_ms: edge_before,
        p99_edge_during_ms: edge_during,
        added_edge_p99_ms: ((edge_during - edge_before) * 10.0).round() / 10.0,
        p99_edge_during_running_ms: edge_during_running,
        stalled_during_ms: stalled_during,
        timeout_ms: budget.timeout_ms,
        breaker_open_ms: budget.breaker_open_ms,
        breaker: Transitions::of(run.samples.iter().map(|s| s.breaker_max)),
        degraded: Transitions::of(run.samples.iter().map(|s| s.degraded_max)),
        fallbacks: run.samples.last().map_or(0.0, |s| s.fallback_sum) as u64,
        settle_dropped: run.samples.last().map_or(0.0, |s| s.settle_dropped_sum) as u64,
        resume_after_heal_ms: resume_ms,
        breaker_closed_after_heal_ms: breaker_closed_ms,
        fallbacks_after_close,
        fallbacks_after_heal,
        promoted_s: promoted_at.map(|at| at.as_secs_f64()),
        fallbacks_once_owned,
        resume_bound_ms: fault.heals_at_once().then(|| {
            resume_bound_ms(
                budget.breaker_open_ms,
                budget.timeout_ms,
                SAMPLE_EVERY.as_millis() as u64,
            )
        }),
        store_proxy_refused: account.store_proxy_refused,
        store_errors_after_heal,
        fault_s: [plan.fault_at.as_secs_f64(), run.heal_at.as_secs_f64()],
        metered_admitted: run.metered.admitted_within(plan.fault_at, run.heal_at),
        metered_quota: metered::quota(window),
        metered_limit: metered_limit(
            metered::quota_and_shares(metered::quota(window), fault.shares_beyond_quota(), edges),
            fault.loses_redis_keys(),
        ),
        live_edges: Transitions::of(
            run.samples
                .iter()
                .map(|s| s.live_edges_min)
                .filter(|v| *v > 0.0),
        ),
    }
}

/// The fall-backs counted from the first sample at or after `at` to the end.
fn fallbacks_after(run: &Run, at: Duration) -> u64 {
    let from = run
        .samples
        .iter()
        .find(|s| s.at >= at)
        .map_or(0.0, |s| s.fallback_sum);
    run.samples
        .last()
        .map_or(0.0, |s| s.fallback_sum - from)
        .max(0.0) as u64
}
