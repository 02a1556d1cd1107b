//! The wasm filter's regression goals: ratios to the floors it sits on, so
//! that it never drifts from them. Each is printed with its figure and
//! whether it is met, at the clients per Envoy it was measured with:
//!
//! - node scopes, (b)/(k), ≤ 1.10 at any load: a node hook beside the
//!   host-call floor (the same host calls with fixed values, nothing decided);
//! - fleet scopes, (c)/(h), ≤ 1.25 at 1 and 4 clients and ≤ 0.95 at 32: a
//!   fleet hook beside the hit floor (one real store hit per hook).
//!
//! The native module's node goal, (N)/(M) ≤ 1.10 over the native no-op, is
//! split the same way by the native host-call floor (K): (N)/(K), the hook
//! beside its own host calls, and (K)/(M), the calls alone, with what the
//! goal leaves the hook over the floor ([`native_floor_lines`]).

/// One regression goal: the ratio (`num`)/(`den`) of Envoy CPU per hook.
pub struct Goal {
    pub num: char,
    pub den: char,
    pub what: &'static str,
    /// The bound at a number of clients per Envoy (None: no goal there).
    pub at: fn(usize) -> Option<f64>,
}

pub const GOALS: [Goal; 2] = [
    Goal {
        num: 'b',
        den: 'k',
        what: "node scopes / host-call floor",
        at: |_| Some(1.10),
    },
    Goal {
        num: 'c',
        den: 'h',
        what: "fleet scopes / hit floor",
        at: |clients| match clients {
            1 | 4 => Some(1.25),
            32 => Some(0.95),
            _ => None,
        },
    },
];

/// One goal's line at `clients` per Envoy, for a ratio `(r, lo, hi)` (all
/// rounds, and the spread of the per-round ratios).
pub fn line(goal: &Goal, clients: usize, (r, lo, hi): (f64, f64, f64)) -> String {
    let (num, den, what) = (goal.num, goal.den, goal.what);
    // Three decimals: a ratio just over its bound doesn't read as on it.
    let head = format!("  regression ({num})/({den}) {what:<34} {r:>5.3}  [{lo:.2}–{hi:.2}]");
    match (goal.at)(clients) {
        Some(bound) => format!(
            "{head}  target ≤ {bound:.2} at {clients} clients  {}",
            if r <= bound { "met" } else { "NOT met" }
        ),
        None => format!("{head}  no goal at {clients} clients (goals at 1, 4 and 32)"),
    }
}

/// Prints every goal whose two variants ran, their ratio from `ratio`.
pub fn print(clients: usize, ratio: impl Fn(char, char) -> Option<(f64, f64, f64)>) {
    for goal in &GOALS {
        if let Some(r) = ratio(goal.num, goal.den) {
            println!("{}", line(goal, clients, r));
        }
    }
}

/// The native node goal: (N)/(M) at most this.
pub const NATIVE_NODE_GOAL: f64 = 1.10;

/// The native floor's lines, from (N)/(K) and (K)/(M) (each `(r, lo, hi)`,
/// either None when its variants didn't run): the hook beside its host
/// calls, and the calls beside the no-op with what the goal leaves (N)/(K).
pub fn native_floor_lines(
    hook: Option<(f64, f64, f64)>,
    calls: Option<(f64, f64, f64)>,
) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some((r, lo, hi)) = hook {
        lines.push(format!(
            "  native floor (N)/(K) {:<36} {r:>5.3}  [{lo:.2}–{hi:.2}]",
            "native node / native host-call floor"
        ));
    }
    if let Some((r, lo, hi)) = calls {
        let left = NATIVE_NODE_GOAL / r;
        lines.push(format!(
            "  native floor (K)/(M) {:<36} {r:>5.3}  [{lo:.2}–{hi:.2}]  (N)/(M) ≤ {NATIVE_NODE_GOAL:.2} leaves (N)/(K) ≤ {left:.3}",
            "native host-call floor / no-op"
        ));
    }
    lines
}

/// Prints the native floor's lines whose variants ran.
pub fn print_native_floor(ratio: impl Fn(char, char) -> Option<(f64, f64, f64)>) {
    for line in native_floor_lines(ratio('N', 'K'), ratio('K', 'M')) {
        println!("{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_native_floor_splits_the_node_goal_into_the_hook_and_its_calls() {
        assert!(native_floor_lines(None, None).is_empty());
        let lines = native_floor_lines(Some((1.05, 1.02, 1.07)), Some((1.10, 1.08, 1.12)));
        assert_eq!(lines.len(), 2);
        assert!(
            lines[0].contains("(N)/(K) native node / native host-call floor")
                && lines[0].ends_with("1.050  [1.02–1.07]"),
            "{}",
            lines[0]
        );
        assert!(
            lines[1].contains("(K)/(M)") && lines[1].ends_with("leaves (N)/(K) ≤ 1.000"),
            "{}",
            lines[1]
        );
    }

    #[test]
    fn each_goal_is_read_at_its_load() {
        let [node, fleet] = &GOALS;
        assert!(line(node, 32, (1.10, 1.0, 1.2)).ends_with("target ≤ 1.10 at 32 clients  met"));
        let over = line(node, 4, (1.1022, 1.07, 1.14));
        assert!(
            over.contains(" 1.102  [1.07–1.14]") && over.ends_with("NOT met"),
            "{over}"
        );
        for (clients, r, verdict) in [
            (1, 1.25, "target ≤ 1.25 at 1 clients  met"),
            (4, 1.26, "target ≤ 1.25 at 4 clients  NOT met"),
            (32, 0.95, "target ≤ 0.95 at 32 clients  met"),
            (32, 0.96, "target ≤ 0.95 at 32 clients  NOT met"),
            (8, 0.5, "no goal at 8 clients (goals at 1, 4 and 32)"),
        ] {
            let shown = line(fleet, clients, (r, r, r));
            assert!(shown.ends_with(verdict), "{shown}");
            assert!(
                shown.contains("(c)/(h) fleet scopes / hit floor"),
                "{shown}"
            );
        }
    }
}
