//! Shadow mode: a decision computed and counted but not enforced.
//!
//! `shadow` is written `true`/`false` (rate limits only; dedupe stays
//! enforced) or `{"rate_limit": bool, "dedupe": bool}`, in
//! `rate_limits.default`, in `rate_limits.tenants.<t>`, or in a fleet
//! override. Off unless set.

use serde::{Deserialize, Deserializer, Serialize};

/// What a tenant only counts instead of enforcing.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, Serialize)]
pub struct Shadow {
    /// A rate-limit denial is counted (`shadow="true"`), the hook admitted.
    pub rate_limit: bool,
    /// A duplicate is counted, the hook admitted (and stored again).
    pub dedupe: bool,
}

impl Shadow {
    /// The shorthand `shadow: true`: rate limits only.
    pub fn from_bool(on: bool) -> Shadow {
        Shadow {
            rate_limit: on,
            dedupe: false,
        }
    }

    pub fn is_off(&self) -> bool {
        !self.rate_limit && !self.dedupe
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Written {
    Flag(bool),
    Parts(Parts),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Parts {
    #[serde(default)]
    rate_limit: bool,
    #[serde(default)]
    dedupe: bool,
}

impl<'de> Deserialize<'de> for Shadow {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Shadow, D::Error> {
        match Written::deserialize(d) {
            Ok(Written::Flag(on)) => Ok(Shadow::from_bool(on)),
            Ok(Written::Parts(p)) => Ok(Shadow {
                rate_limit: p.rate_limit,
                dedupe: p.dedupe,
            }),
            Err(_) => Err(serde::de::Error::custom(
                "shadow: expected true, false or {\"rate_limit\": bool, \"dedupe\": bool}",
            )),
        }
    }
}

/// Which check a decision came from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Refusal {
    /// A rate limit (node or fleet) denied the hook.
    RateLimited,
    /// The hook's event key is already stored (or pending).
    Duplicate,
}

/// What the edge does with a refusal under a tenant's shadow setting.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Outcome {
    /// Refuse the hook (429 / duplicate answer) as without shadow mode.
    pub enforce: bool,
    /// Count it with `shadow="true"`: computed, not enforced.
    pub shadowed: bool,
}

/// Given a refusal and the tenant's shadow setting: enforced, or only counted.
pub fn outcome(refusal: Refusal, shadow: Shadow) -> Outcome {
    let shadowed = match refusal {
        Refusal::RateLimited => shadow.rate_limit,
        Refusal::Duplicate => shadow.dedupe,
    };
    Outcome {
        enforce: !shadowed,
        shadowed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn parse(text: &str) -> Result<Shadow, String> {
        serde_json::from_str::<Shadow>(text).map_err(|e| e.to_string())
    }

    #[test]
    fn true_shadows_rate_limits_and_keeps_dedupe_enforced() {
        let s = parse("true").unwrap();
        assert_eq!(
            s,
            Shadow {
                rate_limit: true,
                dedupe: false
            }
        );
        assert_eq!(
            outcome(Refusal::RateLimited, s),
            Outcome {
                enforce: false,
                shadowed: true
            }
        );
        assert_eq!(
            outcome(Refusal::Duplicate, s),
            Outcome {
                enforce: true,
                shadowed: false
            }
        );
    }

    #[test]
    fn the_object_form_sets_each_part() {
        let s = parse(r#"{"dedupe": true}"#).unwrap();
        assert!(!s.rate_limit && s.dedupe);
        assert!(outcome(Refusal::RateLimited, s).enforce);
        assert!(outcome(Refusal::Duplicate, s).shadowed);
        assert!(parse("false").unwrap().is_off());
        assert!(Shadow::default().is_off());
    }

    #[test]
    fn off_enforces_everything() {
        for r in [Refusal::RateLimited, Refusal::Duplicate] {
            assert_eq!(
                outcome(r, Shadow::default()),
                Outcome {
                    enforce: true,
                    shadowed: false
                }
            );
        }
    }

    #[test]
    fn a_bad_shadow_names_the_accepted_forms() {
        for bad in ["1", "\"yes\"", r#"{"rate_limits": true}"#, "null"] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains("shadow: expected true, false"), "{bad}: {e}");
        }
    }
}
