//! What bench-edge prints: the machine and knobs; per mode one row per
//! variant with its rate, latencies and Envoy CPU per hook; the ratios
//! between variants beside the goals; and why a row doesn't measure what it
//! names, if it doesn't.

use super::measure::Tally;
use super::variants::{Module, Variant, BODY, PATH};
use super::Args;
use ankusa_testkit::paths;
use ankusa_testkit::process::load_average;
use ankusa_tools::load;

/// A ratio of Envoy CPU per hook the goals bound: `num`/`den` at most `goal`.
pub const GOALS: [(char, char, f64, &str); 3] = [
    ('b', 'n', 1.20, "node scopes / no-op wasm filter"),
    ('c', 'f', 1.00, "fleet scopes / one-callout floor"),
    ('c', 'p', 0.90, "fleet scopes / the peer"),
];

/// A ratio of total CPU per hook (Envoy + limiter + Redis) the goals bound.
pub const TOTAL_GOALS: [(char, char, f64, &str); 1] = [('c', 'p', 0.80, "fleet scopes / the peer")];

/// The native module's goals, in Envoy CPU per hook: (num, den, goal at 1
/// client, goal at more, what). The total-CPU one is [`NATIVE_TOTAL_GOAL`].
pub const NATIVE_GOALS: [(char, char, f64, f64, &str); 3] = [
    ('F', 'p', 1.00, 0.80, "native fleet scopes / the peer"),
    (
        'H',
        'p',
        1.00,
        0.80,
        "native fleet, own connection / the peer",
    ),
    ('N', 'M', 1.10, 1.10, "native node scopes / native no-op"),
];

/// Native fleet scopes' total CPU (Envoy + store + Redis) against the peer's
/// (Envoy + Limitador + Redis), bound at 32 clients.
pub const NATIVE_TOTAL_GOAL: (char, char, f64, usize, &str) = (
    'F',
    'p',
    0.80,
    32,
    "native fleet scopes / the peer, total CPU",
);

/// Ratios printed for context, no goal attached.
const CONTEXT: [(char, char, &str); 26] = [
    ('l', 'a', "native local_ratelimit / bare"),
    ('n', 'a', "no-op wasm / bare"),
    ('n', 'l', "no-op wasm / native local_ratelimit"),
    ('k', 'n', "host-call floor / no-op wasm"),
    ('b', 'k', "node scopes / host-call floor"),
    ('f', 'n', "one-callout floor / no-op wasm"),
    ('h', 'f', "hit floor / one-callout floor"),
    ('c', 'h', "fleet scopes / hit floor"),
    ('b', 'a', "node scopes / bare"),
    ('d', 'b', "node + verify / node scopes"),
    ('c', 'b', "fleet scopes / node scopes"),
    ('o', 'b', "fleet, breaker open / node scopes"),
    ('p', 'f', "the peer / one-callout floor"),
    ('b', 'B', "node scopes / baseline build"),
    ('c', 'C', "fleet scopes / baseline build"),
    ('N', 'b', "native module, node / wasm filter, node"),
    ('D', 'd', "native module, verify / wasm filter, verify"),
    ('N', 'n', "native module, node / no-op wasm"),
    ('M', 'n', "native no-op / no-op wasm"),
    ('G', 'f', "native one-callout floor / wasm floor"),
    ('F', 'G', "native fleet / native one-callout floor"),
    ('F', 'c', "native fleet / wasm filter, fleet"),
    ('G', 'p', "native one-callout floor / the peer"),
    (
        'H',
        'F',
        "native fleet, own connection / native fleet, callouts",
    ),
    (
        'H',
        'G',
        "native fleet, own connection / native one-callout floor",
    ),
    (
        'H',
        'c',
        "native fleet, own connection / wasm filter, fleet",
    ),
];

/// Ratios of total CPU per hook (Envoy + the variant's own store and Redis).
const TOTALS: [(char, char, &str); 3] = [
    ('c', 'f', "fleet scopes / one-callout floor"),
    ('c', 'C', "fleet scopes / baseline build"),
    ('c', 'b', "fleet scopes / node scopes"),
];

/// Why `t` doesn't measure what `v` names, if it doesn't.
pub fn problem(v: &Variant, t: &Tally, mode: &str) -> Option<String> {
    let tag = format!("{mode} ({})", v.key);
    let ok = t.ok as f64;
    if t.ok == 0 {
        return Some(format!(
            "{tag} got no 2xx answer ({} non-2xx, {} errors)",
            t.non_2xx, t.errors
        ));
    }
    if t.non_2xx > 0 {
        return Some(format!(
            "{tag} {} hooks were refused: nothing should be",
            t.non_2xx
        ));
    }
    match v.module {
        Module::Filter if t.counts.admitted == 0.0 => {
            Some(format!("{tag} the filter admitted nothing"))
        }
        Module::LocalRatelimit if t.counts.local_ok < ok => Some(format!(
            "{tag} the native limiter passed {} of {} hooks",
            t.counts.local_ok, t.ok
        )),
        Module::Noop | Module::NodeCalls if t.counts.noop < ok => Some(format!(
            "{tag} the no-op filter counted {} of {} hooks",
            t.counts.noop, t.ok
        )),
        Module::Callout if t.counts.callout_answers < ok => Some(format!(
            "{tag} the callout floor had {} answers for {} hooks",
            t.counts.callout_answers, t.ok
        )),
        Module::HitCallout if t.counts.callout_answers < ok || t.backend.store_hits < ok => {
            Some(format!(
                "{tag} the hit floor had {} answers with a 200 (the rest: \
                 bench_callout_not_ok_total) and the store {} hits for {} hooks",
                t.counts.callout_answers, t.backend.store_hits, t.ok
            ))
        }
        Module::Peer if t.counts.peer_ok < ok || t.backend.store_hits < ok => Some(format!(
            "{tag} the peer's filter passed {} and Limitador allowed {} of {} hooks",
            t.counts.peer_ok, t.backend.store_hits, t.ok
        )),
        _ if v.hits_store() && t.backend.store_hits == 0.0 => {
            Some(format!("{tag} the store saw no hit"))
        }
        _ if v.store_down && t.counts.breaker != 1.0 => Some(format!(
            "{tag} the breaker was not open (state {})",
            t.counts.breaker
        )),
        _ => None,
    }
}

/// What the host-call floor says of the node goal ((b)/(n), [`GOALS`]'
/// first): a node hook can't cost less than its host calls do with nothing
/// decided around them. `n`, `k` and `b` are Envoy µs per hook over all
/// rounds (`b` when the filter ran): (k)/(n), and what the goal leaves for
/// the decision, 1.20 × (n) − (k), beside what the filter's takes, (b) − (k).
fn host_call_floor(n: f64, k: f64, b: Option<f64>) -> String {
    let (_, _, goal, _) = GOALS[0];
    let r = k / n;
    let verdict = if r > goal {
        "over the node goal's"
    } else {
        "within the node goal's"
    };
    let left = goal * n - k;
    let taken = b.map_or(String::new(), |b| {
        format!(" (the filter's takes {:.1})", b - k)
    });
    format!(
        "a node hook's host calls alone, nothing decided, cost {r:.2} × (n): {verdict} {goal:.2}, \
         leaving {left:.1} µs a hook for the decision{taken}"
    )
}

pub fn print_facts(args: &Args, pinning: &str) {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    // Counted from /proc: once this process is pinned it may use only one.
    let cores = cpuinfo
        .lines()
        .filter(|l| l.starts_with("processor"))
        .count();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')))
        .map_or("unknown CPU", |(_, m)| m.trim());
    let envoy = std::process::Command::new(paths::envoy_bin())
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let envoy = envoy
        .split_once("version: ")
        .map_or("unknown", |(_, v)| v.trim());
    let redis_version = std::process::Command::new("redis-server")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let redis_version = redis_version
        .split_whitespace()
        .find_map(|w| w.strip_prefix("v="))
        .unwrap_or("unknown");
    println!(
        "machine: {cores} cores ({model}), load average {} at the start",
        load_average()
    );
    println!("envoy:   {envoy}, --concurrency {}", args.concurrency);
    println!(
        "redis:   {redis_version}; ankusa-store, intake and this load generator: release builds; \
         every variant calling a store has its own store and Redis"
    );
    println!("pinning: {pinning}");
    println!(
        "knobs:   {} keep-alive HTTP/1.1 clients, {} rounds of {}s per variant after {}s warm-up; \
         POST {PATH}, a ~{}-byte JSON body, a fresh x-github-delivery per hook; \
         intake answers 201 without storing (x-intake-status)",
        args.clients,
        args.rounds,
        args.seconds,
        args.warmup_seconds,
        BODY.replace(load::COUNTER, "12345").len()
    );
}

/// `a`'s figure over `b`'s over all rounds (`whole`), and the lowest and
/// highest of the per-round ratios (`rounds`).
fn spread(
    a: &Tally,
    b: &Tally,
    whole: fn(&Tally) -> Option<f64>,
    rounds: fn(&Tally) -> &Vec<f64>,
) -> Option<(f64, f64, f64)> {
    let r = whole(a)? / whole(b)?;
    let per: Vec<f64> = rounds(a)
        .iter()
        .zip(rounds(b))
        .map(|(x, y)| x / y)
        .filter(|r| r.is_finite())
        .collect();
    let lo = per.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = per.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((r, lo, hi))
}

fn fmt_opt(v: Option<f64>, digits: usize) -> String {
    v.filter(|x| x.is_finite())
        .map_or("-".to_string(), |x| format!("{x:.digits$}"))
}

/// One goal's line: the ratio, its per-round spread, and whether it is met.
fn print_goal((a, b, goal, what): (char, char, f64, &str), (r, lo, hi): (f64, f64, f64)) {
    println!(
        "  goal  ({a})/({b}) {what:<40} {r:>5.2}  [{lo:.2}–{hi:.2}]  target ≤ {goal:.2}  {}",
        if r <= goal { "met" } else { "NOT met" }
    );
}

/// The native module's goals for one load (`clients` per Envoy).
pub fn print_native_goals(clients: usize, rows: &[(&Variant, &Tally)]) {
    let get = |k: char| rows.iter().find(|(v, _)| v.key == k).map(|(_, t)| *t);
    let mut printed = false;
    for (a, b, one, more, what) in NATIVE_GOALS {
        let Some((x, y)) = get(a).zip(get(b)) else {
            continue;
        };
        let Some((r, lo, hi)) = spread(x, y, Tally::envoy_us, |t| &t.per_round_us) else {
            continue;
        };
        if !printed {
            println!("Native module goals at {clients} clients per Envoy:");
            printed = true;
        }
        let goal = if clients <= 1 { one } else { more };
        print_goal((a, b, goal, what), (r, lo, hi));
    }
    let (a, b, goal, at, what) = NATIVE_TOTAL_GOAL;
    if clients == at {
        let total = get(a)
            .zip(get(b))
            .and_then(|(x, y)| spread(x, y, Tally::total_us, |t| &t.per_round_total_us));
        if let Some((r, lo, hi)) = total {
            print_goal((a, b, goal, what), (r, lo, hi));
        }
    }
}

/// One mode's table, ratios and goals (`clients` per Envoy).
pub fn print_mode(title: &str, clients: usize, rows: &[(&Variant, &Tally)]) {
    let get = |k: char| rows.iter().find(|(v, _)| v.key == k).map(|(_, t)| *t);
    let us = |k: char| get(k).and_then(Tally::envoy_us);
    println!();
    println!("== {title} (load average now {})", load_average());
    println!(
        "{:<32} {:>8} {:>8} {:>8} {:>7} {:>6} {:>6} {:>11} {:>6} {:>6} {:>8} {:>8} {:>11}",
        "variant",
        "2xx",
        "2xx/s",
        "p50_ms",
        "p99_ms",
        "errors",
        "reconn",
        "envoy µs/hk",
        "×(a)",
        "×(n)",
        "store µs",
        "redis µs",
        "total µs/hk"
    );
    for (v, t) in rows {
        let ratio_to = |k: char| match (t.envoy_us(), us(k)) {
            (Some(x), Some(y)) if y > 0.0 => Some(x / y),
            _ => None,
        };
        println!(
            "{:<32} {:>8} {:>8.0} {:>8.3} {:>7.3} {:>6} {:>6} {:>11} {:>6} {:>6} {:>8} {:>8} {:>11}",
            format!("({}) {}", v.key, v.name),
            t.ok,
            t.rps(),
            t.percentile_ms(0.50),
            t.percentile_ms(0.99),
            t.errors,
            t.reconnects,
            fmt_opt(t.envoy_us(), 1),
            fmt_opt(ratio_to('a'), 2),
            fmt_opt(ratio_to('n'), 2),
            fmt_opt(Some(t.per_hook(t.backend.store_cpu) * 1e6), 1),
            fmt_opt(Some(t.per_hook(t.backend.redis_cpu) * 1e6), 1),
            fmt_opt(t.total_us(), 1),
        );
    }
    let ratio = |a: char, b: char| spread(get(a)?, get(b)?, Tally::envoy_us, |t| &t.per_round_us);
    println!();
    println!(
        "Envoy CPU per hook, ratios (all rounds; the spread of the per-round ratios in brackets):"
    );
    for (a, b, goal, what) in GOALS {
        if let Some((r, lo, hi)) = ratio(a, b) {
            print_goal((a, b, goal, what), (r, lo, hi));
        }
    }
    super::regression::print(clients, ratio);
    super::regression::print_native_floor(ratio);
    for (a, b, what) in CONTEXT {
        if let Some((r, lo, hi)) = ratio(a, b) {
            println!("        ({a})/({b}) {what:<40} {r:>5.2}  [{lo:.2}–{hi:.2}]");
        }
    }
    if let (Some(n), Some(k)) = (us('n'), us('k')) {
        println!("  {}", host_call_floor(n, k, us('b')));
    }
    println!(
        "Envoy + limiter (store or Limitador) + Redis CPU per hook (the total column), ratios (all rounds; per-round spread):"
    );
    let total =
        |a: char, b: char| spread(get(a)?, get(b)?, Tally::total_us, |t| &t.per_round_total_us);
    for (a, b, goal, what) in TOTAL_GOALS {
        if let Some((r, lo, hi)) = total(a, b) {
            print_goal((a, b, goal, what), (r, lo, hi));
        }
    }
    for (a, b, what) in TOTALS {
        if let Some((r, lo, hi)) = total(a, b) {
            println!("        ({a})/({b}) {what:<40} {r:>5.2}  [{lo:.2}–{hi:.2}]");
        }
    }
    if let (Some(d), Some(b)) = (us('d'), us('b')) {
        println!(
            "  verification costs {:+.1} Envoy CPU µs per hook, (d) beside (b)",
            d - b
        );
    }
    for (v, t) in rows.iter().filter(|(v, _)| v.module == Module::Filter) {
        let mut line = format!(
            "  ({}) admitted {:.0} of {} 2xx; fleet fallbacks {:.0}",
            v.key, t.counts.admitted, t.ok, t.counts.fallbacks
        );
        if v.hits_store() {
            line += &format!(
                "; store hits {:.0} ({:.2} per hook) in {:.0} calls ({:.2} hooks per call, {:.2} calls per hook); \
                 settle ops {:.0} ({:.2} per hook), settle calls of their own {:.0} ({:.2} per hook); Redis commands {:.0} ({:.2} per hook)",
                t.backend.store_hits,
                t.per_hook(t.backend.store_hits),
                t.backend.store_calls,
                t.backend.store_hits / t.backend.store_calls.max(1.0),
                t.per_hook(t.backend.store_calls),
                t.backend.settle_ops,
                t.per_hook(t.backend.settle_ops),
                t.backend.settle_calls,
                t.per_hook(t.backend.settle_calls),
                t.backend.redis_cmds,
                t.per_hook(t.backend.redis_cmds)
            );
        }
        if v.store_down {
            line += &format!("; breaker state {} (1 = open)", t.counts.breaker);
        }
        println!("{line}");
    }
    if let Some(p) = get('p') {
        println!(
            "  (p) the ratelimit filter passed {:.0} on Limitador's answer, Limitador allowed {:.0}, for {} hooks; Redis commands {:.0} ({:.2} per hook)",
            p.counts.peer_ok,
            p.backend.store_hits,
            p.ok,
            p.backend.redis_cmds,
            p.per_hook(p.backend.redis_cmds)
        );
    }
    if let Some(f) = get('f') {
        println!(
            "  (f) callouts {:.0}, answered {:.0}, for {} hooks",
            f.counts.callout_calls, f.counts.callout_answers, f.ok
        );
    }
    if let Some(h) = get('h') {
        println!(
            "  (h) hits sent {:.0}, answered with a 200 {:.0}, for {} hooks; store hits {:.0}; Redis commands {:.0} ({:.2} per hook)",
            h.counts.callout_calls,
            h.counts.callout_answers,
            h.ok,
            h.backend.store_hits,
            h.backend.redis_cmds,
            h.per_hook(h.backend.redis_cmds)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::variants::variants;

    #[test]
    fn the_host_call_floor_is_read_against_the_node_goal() {
        let over = host_call_floor(68.1, 82.5, Some(90.7));
        assert!(
            over.contains("1.21 × (n): over the node goal's 1.20"),
            "{over}"
        );
        // 1.20 × 68.1 − 82.5: nothing left; the filter's decision takes 8.2.
        assert!(
            over.ends_with("leaving -0.8 µs a hook for the decision (the filter's takes 8.2)"),
            "{over}"
        );
        let within = host_call_floor(209.1, 237.6, None);
        assert!(
            within.contains("within the node goal's 1.20, leaving 13.3 µs"),
            "{within}"
        );
        assert!(within.ends_with("for the decision"), "{within}");
    }

    /// Variant `key`'s row over 10 hooks, with the edge's count and the
    /// limiter's count `set` writes: a problem unless both saw all 10, and
    /// then one naming the variant and the hooks (`hooks`, as it says them).
    fn a_row_needs_both_counts(key: char, hooks: &str, set: fn(&mut Tally, f64, f64)) {
        let variant = variants().into_iter().find(|v| v.key == key).unwrap();
        let tally = |edge: f64, limiter: f64| {
            let mut t = Tally {
                ok: 10,
                ..Tally::default()
            };
            set(&mut t, edge, limiter);
            t
        };
        assert_eq!(problem(&variant, &tally(10.0, 10.0), "concurrent"), None);
        for (edge, limiter) in [(9.0, 10.0), (10.0, 9.0), (0.0, 0.0)] {
            let p = problem(&variant, &tally(edge, limiter), "concurrent").unwrap();
            assert!(p.contains(&format!("({key})")) && p.contains(hooks), "{p}");
        }
    }

    #[test]
    fn a_peer_row_is_a_problem_unless_its_filter_and_limitador_saw_every_hook() {
        a_row_needs_both_counts('p', "of 10 hooks", |t, passed, allowed| {
            t.counts.peer_ok = passed;
            t.backend.store_hits = allowed;
        });
    }

    #[test]
    fn a_hit_floor_row_is_a_problem_unless_every_hook_got_a_200_hit() {
        a_row_needs_both_counts('h', "for 10 hooks", |t, answers, hits| {
            t.counts.callout_answers = answers;
            t.backend.store_hits = hits;
        });
    }
}
