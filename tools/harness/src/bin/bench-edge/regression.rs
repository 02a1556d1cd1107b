//! The wasm filter's regression goals: ratios to the floors it sits on, so
//! that it never drifts from them. Each is printed with its figure and
//! whether it is met, at the clients per Envoy it was measured with:
//!
//! - node scopes, (b)/(k), ≤ 1.10 at any load: a node hook beside the
//!   host-call floor (the same host calls with fixed values, nothing decided);
//! - fleet scopes, (c)/(h), ≤ 1.25 at 1 and 4 clients and ≤ 0.95 at 32: a
//!   fleet hook beside the hit floor (one real store hit per hook).

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

#[cfg(test)]
mod tests {
    use super::*;

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
