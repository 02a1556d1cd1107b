//! `bench-fleet memory`: the edges' and the store's resident memory after
//! every pass over K distinct delivery ids, until N hooks.
//!
//! Each pass sends every id once (half through each edge): the first pass
//! forwards them, the later ones are redeliveries the edges answer as
//! duplicates (201 `{"duplicate":true,…}`) from the claims the first pass
//! committed. Memory that grows with hooks rather than keys shows as the
//! later passes drifting above the first.

use super::through_each_edge;
use ankusa_testkit::process::rss_kib;
use ankusa_tools::fleet::Fleet;

/// The last pass's memory may be at most this much above the first's.
const FLAT: f64 = 1.10;
/// How an edge's duplicate answer begins.
const DUPLICATE: &str = r#"{"duplicate":true"#;

struct Sample {
    hooks: u64,
    edges_kib: Vec<u64>,
    store_kib: u64,
    redis_bytes: u64,
}

fn sample(fleet: &Fleet, hooks: u64) -> Sample {
    Sample {
        hooks,
        edges_kib: fleet.edges.iter().map(|e| rss_kib(e.proc.pid())).collect(),
        store_kib: rss_kib(fleet.store.proc.pid()),
        redis_bytes: fleet.redis.info_number("memory", "used_memory") as u64,
    }
}

pub fn run(
    fleet: &Fleet,
    hooks_total: u64,
    keys: u64,
    clients: usize,
) -> Result<Vec<String>, String> {
    let edges = fleet.edges.len() as u64;
    let passes = hooks_total / keys;
    let before = sample(fleet, 0);
    println!(
        "{:>9} {:>8} {:>8} {:>6} {:>9} {:>12} {:>10} {:>9}",
        "hooks", "new", "dup", "other", "hooks/s", "edges_MiB", "store_MiB", "redis_MiB"
    );
    print_sample(&before, 0, 0, 0, 0.0);
    let mut samples = Vec::new();
    let mut sent = 0;
    let mut problems = Vec::new();
    for pass in 0..passes {
        let (reports, elapsed) = through_each_edge(fleet, "mem", clients, |e, spec| {
            spec.max_requests = Some(keys / edges + u64::from((e as u64) < keys % edges));
            if pass > 0 {
                spec.expect_body = Some(DUPLICATE.to_string());
            }
        })?;
        // The first pass: every 2xx is forwarded; later: every ok is a duplicate answer.
        let ok: u64 = reports.iter().map(|r| r.ok).sum();
        let forwarded_again: u64 = reports.iter().map(|r| r.bad_body).sum();
        let refused: u64 = reports.iter().map(|r| r.non_2xx).sum();
        let errors: u64 = reports.iter().map(|r| r.errors).sum();
        let all = ok + forwarded_again + refused + errors;
        sent += all;
        let s = sample(fleet, sent);
        let (new, dup) = if pass == 0 {
            (ok, 0)
        } else {
            (forwarded_again, ok)
        };
        print_sample(&s, new, dup, refused + errors, all as f64 / elapsed);
        if pass == 0 && ok != keys {
            problems.push(format!("the first pass forwarded {ok} of {keys} new ids"));
        }
        if forwarded_again > 0 {
            problems.push(format!(
                "pass {pass}: {forwarded_again} redeliveries were forwarded again, not answered duplicate"
            ));
        }
        if refused + errors > 0 {
            problems.push(format!(
                "pass {pass}: {refused} hooks refused and {errors} unanswered"
            ));
        }
        samples.push(s);
    }
    if let (Some(first), Some(last)) = (samples.first(), samples.last()) {
        println!();
        let edges_first: u64 = first.edges_kib.iter().sum();
        let edges_last: u64 = last.edges_kib.iter().sum();
        for (what, a, b) in [
            ("edges", edges_first, edges_last),
            ("store", first.store_kib, last.store_kib),
        ] {
            let ratio = b as f64 / a.max(1) as f64;
            println!(
                "goal: {what} RSS after {} hooks / after {}: {ratio:.3} (target ≤ {FLAT:.2}) {}",
                last.hooks,
                first.hooks,
                if ratio <= FLAT { "met" } else { "NOT met" }
            );
        }
    }
    Ok(problems)
}

fn print_sample(s: &Sample, new: u64, dup: u64, other: u64, rate: f64) {
    let edges = s
        .edges_kib
        .iter()
        .map(|k| format!("{:.1}", *k as f64 / 1024.0))
        .collect::<Vec<_>>()
        .join("+");
    println!(
        "{:>9} {:>8} {:>8} {:>6} {:>9.0} {:>12} {:>10.1} {:>9.1}",
        s.hooks,
        new,
        dup,
        other,
        rate,
        edges,
        s.store_kib as f64 / 1024.0,
        s.redis_bytes as f64 / 1_048_576.0
    );
}
