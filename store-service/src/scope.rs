//! What an edge token speaks for: the node names it may send (one name or a
//! pattern with `*`), and its allowance of live names (how many of them may
//! be heard within the live-edges TTL at once). Written after the token in a
//! token file line or an `ANKUSA_STORE_EDGE_TOKENS` item:
//!
//! ```text
//! <token> nodes=edge-a              # one name (its allowance is 1)
//! <token> nodes=edge-* live=4       # any name the pattern matches, 4 at once
//! <token>                           # unscoped (0.2.0 format): any name, 64 at once
//! ```
//!
//! The check of one name against a scope is here; the allowance itself is
//! counted in Redis (see [`crate::live_names`]), so it holds across store
//! replicas. Pure logic, no I/O.

use ankusa_core::limit::limits::{is_valid_name, MAX_NAME_LEN};

/// The allowance of a token line with no `nodes=` (the 0.2.0 format): any
/// name, this many at once. A fleet sharing one unscoped token across more
/// edges writes `nodes=* live=N` on its line.
pub const UNSCOPED_LIVE: u32 = 64;
/// The largest `live=`: the most names the store keeps between two
/// refreshes of the live edges (see [`crate::edges::MAX_HEARD`]).
pub const MAX_LIVE: u32 = 10_000;

/// The node names one edge token speaks for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Scope {
    /// A node name, or a pattern in which `*` stands for any run of characters.
    nodes: String,
    /// How many names it may have live at once.
    live: u32,
    /// Whether its line said `nodes=` (false: an unscoped 0.2.0 line).
    declared: bool,
}

impl Scope {
    /// A bare token's scope: any name, [`UNSCOPED_LIVE`] at once.
    pub fn unscoped() -> Scope {
        Scope {
            nodes: "*".into(),
            live: UNSCOPED_LIVE,
            declared: false,
        }
    }

    /// Reads the fields after a token (`nodes=…`, `live=…`), whitespace
    /// separated. Errors name the field and its value, never the token: a
    /// word that isn't a field is named by its position only (it might be
    /// a second token pasted on the line).
    pub fn parse<'a>(fields: impl Iterator<Item = &'a str>) -> Result<Scope, String> {
        let mut nodes: Option<&str> = None;
        let mut live: Option<u32> = None;
        for (i, word) in fields.enumerate() {
            let Some((name, value)) = word.split_once('=') else {
                return Err(format!(
                    "word {} after the token is not a field (nodes=NAME or nodes=PATTERN, live=N)",
                    i + 2
                ));
            };
            match name {
                "nodes" if nodes.is_some() => return Err("nodes= is given twice".into()),
                "live" if live.is_some() => return Err("live= is given twice".into()),
                "nodes" => nodes = Some(check_pattern(value)?),
                "live" => live = Some(check_live(value)?),
                other => {
                    return Err(format!(
                        "unknown field {} (the fields are nodes= and live=)",
                        quoted(other)
                    ))
                }
            }
        }
        let Some(nodes) = nodes else {
            return match live {
                None => Ok(Scope::unscoped()),
                Some(_) => Err("live= without nodes=: say which names it counts".into()),
            };
        };
        let pattern = nodes.contains('*');
        let live = match (live, pattern) {
            (Some(n), false) if n > 1 => {
                return Err(format!(
                    "live={n} with the single name nodes={nodes}: one name is at most 1 live name"
                ))
            }
            (Some(n), _) => n,
            (None, false) => 1,
            (None, true) => {
                return Err(format!(
                    "nodes={nodes} is a pattern: give its allowance of live names too (live=N)"
                ))
            }
        };
        Ok(Scope {
            nodes: nodes.to_string(),
            live,
            declared: true,
        })
    }

    /// Whether this scope speaks for `name`.
    pub fn permits(&self, name: &str) -> bool {
        glob(self.nodes.as_bytes(), name.as_bytes())
    }

    /// The names or pattern (`*` for an unscoped token).
    pub fn nodes(&self) -> &str {
        &self.nodes
    }

    pub fn live(&self) -> u32 {
        self.live
    }

    /// Whether the token's line said which names it speaks for.
    pub fn is_declared(&self) -> bool {
        self.declared
    }

    /// How it is written after a token (`nodes=edge-* live=4`).
    pub fn describe(&self) -> String {
        if self.declared {
            format!("nodes={} live={}", self.nodes, self.live)
        } else {
            format!("unscoped (any name, live={})", self.live)
        }
    }
}

/// A `nodes=` value: a node name (`[A-Za-z0-9_.-]`, 1 to 64), in which `*`
/// may stand for any run of characters.
fn check_pattern(value: &str) -> Result<&str, String> {
    let letters = value.replace('*', "a");
    if value.len() > MAX_NAME_LEN || !is_valid_name(&letters) {
        return Err(format!(
            "nodes={}: not a node name of 1 to {MAX_NAME_LEN} characters of [A-Za-z0-9_.-], \
             where * stands for any run of them",
            quoted(value)
        ));
    }
    Ok(value)
}

fn check_live(value: &str) -> Result<u32, String> {
    match value.parse::<u32>() {
        Ok(n) if (1..=MAX_LIVE).contains(&n) => Ok(n),
        _ => Err(format!(
            "live={}: not a whole number from 1 to {MAX_LIVE}",
            quoted(value)
        )),
    }
}

/// A value as shown in an error: quoted, escaped.
fn quoted(value: &str) -> String {
    format!("{value:?}")
}

/// Why a node name was refused to an edge token (the `reason` label of
/// `ankusa_store_forbidden_total`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeRefusal {
    /// The token doesn't speak for the name (its `nodes=`).
    Outside { nodes: String },
    /// A new name while the token's allowance of live names is full.
    Allowance { live: u32, ttl_ms: u64 },
}

impl NodeRefusal {
    pub fn label(&self) -> &'static str {
        match self {
            NodeRefusal::Outside { .. } => "node",
            NodeRefusal::Allowance { .. } => "allowance",
        }
    }
}

/// Whether `name` matches `pattern`, where `*` stands for any run of bytes
/// (none included). Iterative, with one point to go back to: linear in
/// practice, never recursive.
fn glob(pattern: &[u8], name: &[u8]) -> bool {
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(&c) if c == name[n] => {
                p += 1;
                n += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    p = sp + 1;
                    n = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Scope, String> {
        Scope::parse(text.split_whitespace())
    }

    #[test]
    fn a_single_name_allows_one_live_name_and_only_itself() {
        let s = parse("nodes=edge-a").unwrap();
        assert_eq!((s.nodes(), s.live(), s.is_declared()), ("edge-a", 1, true));
        assert!(s.permits("edge-a"));
        assert!(!s.permits("edge-b") && !s.permits("edge-a2") && !s.permits("edge-"));
        assert_eq!(parse("nodes=edge-a live=1").unwrap(), s);
    }

    #[test]
    fn a_pattern_needs_its_allowance_and_matches_any_run() {
        let s = parse("live=4 nodes=ankusa-edge-*").unwrap();
        assert_eq!((s.nodes(), s.live()), ("ankusa-edge-*", 4));
        for name in ["ankusa-edge-", "ankusa-edge-7f9c-x2", "ankusa-edge-a.b"] {
            assert!(s.permits(name), "{name}");
        }
        for name in ["ankusa-edg", "other-edge-1", "xankusa-edge-1"] {
            assert!(!s.permits(name), "{name}");
        }
        let err = parse("nodes=edge-*").unwrap_err();
        assert!(
            err.contains("nodes=edge-*") && err.contains("live=N"),
            "{err}"
        );
        let mid = parse("nodes=eu-*-edge live=2").unwrap();
        assert!(mid.permits("eu-west-1-edge") && !mid.permits("eu-west-1-edge2"));
        let all = parse("nodes=* live=500").unwrap();
        assert!(all.permits("anything") && all.is_declared());
    }

    #[test]
    fn a_bare_token_is_unscoped_with_a_bounded_allowance() {
        let s = parse("").unwrap();
        assert_eq!(s, Scope::unscoped());
        assert!(!s.is_declared() && s.permits("any.name-at_all"));
        assert_eq!(s.live(), UNSCOPED_LIVE);
        assert!(s.describe().contains("unscoped"));
    }

    #[test]
    fn bad_fields_are_named_with_their_value() {
        let cases = [
            ("nodes=edge a", "word 3"),
            ("nodes=edge/a", "nodes=\"edge/a\""),
            ("nodes=", "nodes=\"\""),
            ("nodes=edge-* live=0", "live=\"0\""),
            ("nodes=edge-* live=lots", "live=\"lots\""),
            ("nodes=edge-* live=10001", "live=\"10001\""),
            (
                "nodes=edge-a live=3",
                "live=3 with the single name nodes=edge-a",
            ),
            ("live=3", "live= without nodes="),
            ("nodes=a nodes=b", "nodes= is given twice"),
            ("node=edge-a", "unknown field \"node\""),
        ];
        for (text, expected) in cases {
            let err = parse(text).unwrap_err();
            assert!(err.contains(expected), "{text}: {err}");
        }
        let long = format!("nodes={}", "a".repeat(65));
        assert!(parse(&long).unwrap_err().contains("1 to 64"));
    }

    #[test]
    fn a_word_that_is_not_a_field_is_never_echoed() {
        let err = parse("second-token-0123456789abcdef").unwrap_err();
        assert!(!err.contains("second-token"), "{err}");
        assert!(err.contains("word 2"), "{err}");
    }

    #[test]
    fn glob_handles_several_stars_without_backtracking_blowup() {
        assert!(glob(b"a*b*c", b"axxbyyc"));
        assert!(!glob(b"a*b*c", b"axxbyy"));
        assert!(glob(b"**", b""));
        assert!(!glob(b"", b"a"));
        let name = "a".repeat(64);
        assert!(!glob(b"*a*a*a*a*b", name.as_bytes()));
    }
}
