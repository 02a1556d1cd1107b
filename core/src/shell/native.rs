//! What the native module (Envoy's dynamic modules filter) serves so far:
//! node scopes. It makes no store call yet, so a configuration with a fleet
//! scope (or a `fleet` section, whose override list is polled from the
//! store) is refused where the module loads it and where `ankusa-config
//! check` reads it, rather than run degraded.

use crate::config::Config;

/// Ok when the native module serves `config`; else why not, naming the fields.
pub fn serves(config: &Config) -> Result<(), String> {
    if config.uses_store() || config.polls_overrides() {
        return Err(
            "rate_limits.scope / dedupe.scope \"fleet\" (or a \"fleet\" section): the native \
             module does not call the store yet; use node scopes, or the proxy-wasm filter"
                .into(),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_scopes_are_served_and_fleet_ones_refused_naming_the_fields() {
        let with = |extra: &str| {
            let text = format!(
                r#"{{"sources":{{"gh":{{"tenant":"acme","dedupe":"github"}}}},
                    "rate_limits":{{"default":{{"rate":1,"burst":1}}{extra}}}"#
            );
            Config::parse(text.as_bytes()).unwrap()
        };
        assert_eq!(serves(&with("}")), Ok(()));
        let why = serves(&with(r#","scope":"fleet"}"#)).unwrap_err();
        assert!(why.contains("rate_limits.scope"), "{why}");
        assert!(serves(&with(r#"},"dedupe":{"scope":"fleet"}"#)).is_err());
        assert!(serves(&with(r#"},"fleet":{"cluster":"ankusa_store"}"#)).is_err());
    }
}
