//! Which release introduced each configuration key, so a configuration can be
//! checked against the edges of an older release before it is rolled out to
//! them (`ankusa-config check --release X.Y.Z`): an edge refuses a key it
//! doesn't know, naming it, and the whole configuration with it.

use serde_json::Value;

/// The releases whose filter this checker knows, oldest first.
pub const RELEASES: &[&str] = &["0.1.0", "0.2.0"];

/// Keys added after the first release: (path, release). A path names map
/// entries the user chooses (a source's or a tenant's name) as `*`:
/// `sources.*.verify.replay_window_ms`. Every key not listed is as old as
/// the first release. v0.2.0 added none.
pub const INTRODUCED: &[(&str, &str)] = &[];

/// The keys of `config` (a plugin configuration's JSON) that an edge of
/// `release` doesn't know, each with the release that introduced it, by
/// `introduced` ([`INTRODUCED`] for the shipped checker). Err: a release
/// this checker doesn't know.
pub fn too_new(
    config: &Value,
    release: &str,
    introduced: &[(&str, &str)],
) -> Result<Vec<(String, String)>, String> {
    let Some(at) = RELEASES.iter().position(|r| *r == release) else {
        return Err(format!(
            "unknown release {release:?}; this checker knows {}",
            RELEASES.join(", ")
        ));
    };
    let known = &RELEASES[..=at];
    let mut found = Vec::new();
    walk(config, "", "", &mut |path, pattern| {
        if let Some((_, since)) = introduced.iter().find(|(p, _)| *p == pattern) {
            if !known.contains(since) {
                found.push((path.to_string(), format!("v{since}")));
            }
        }
    });
    Ok(found)
}

/// Maps whose keys the user names: their entries are `*` in a pattern.
const USER_MAPS: &[&str] = &["sources", "rate_limits.tenants"];

fn walk(value: &Value, path: &str, pattern: &str, visit: &mut impl FnMut(&str, &str)) {
    let Value::Object(map) = value else { return };
    for (key, child) in map {
        let child_path = join(path, key);
        let child_pattern = if USER_MAPS.contains(&pattern) {
            join(pattern, "*")
        } else {
            join(pattern, key)
        };
        visit(&child_path, &child_pattern);
        walk(child, &child_path, &child_pattern, visit);
    }
}

fn join(base: &str, key: &str) -> String {
    if base.is_empty() {
        key.to_string()
    } else {
        format!("{base}.{key}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const TABLE: &[(&str, &str)] = &[
        ("fleet.receipts", "0.2.0"),
        ("sources.*.verify.replay_window_ms", "0.2.0"),
    ];

    #[test]
    fn a_key_newer_than_the_release_is_named_with_the_release_that_introduced_it() {
        let config = json!({
            "sources": {"gh": {"tenant": "acme", "verify": {"scheme": "github", "replay_window_ms": 300000}}},
            "rate_limits": {"tenants": {"fleet": {"rate": 1, "burst": 1}}},
            "fleet": {"receipts": true, "timeout_ms": 25}
        });
        let found = too_new(&config, "0.1.0", TABLE).unwrap();
        assert_eq!(
            found,
            [
                ("fleet.receipts".to_string(), "v0.2.0".to_string()),
                (
                    "sources.gh.verify.replay_window_ms".to_string(),
                    "v0.2.0".to_string()
                ),
            ]
        );
        assert_eq!(too_new(&config, "0.2.0", TABLE).unwrap(), []);
    }

    #[test]
    fn a_tenant_named_like_a_key_is_not_taken_for_one() {
        // A tenant called "receipts" is a user's name, not the key.
        let config = json!({"rate_limits": {"tenants": {"receipts": {"rate": 1, "burst": 1}}}});
        assert_eq!(too_new(&config, "0.1.0", TABLE).unwrap(), []);
    }

    #[test]
    fn an_unknown_release_is_an_error_naming_the_known_ones() {
        let err = too_new(&json!({}), "0.0.9", TABLE).unwrap_err();
        assert_eq!(
            err,
            "unknown release \"0.0.9\"; this checker knows 0.1.0, 0.2.0"
        );
    }

    #[test]
    fn the_shipped_table_names_known_releases() {
        for (path, since) in INTRODUCED {
            assert!(RELEASES.contains(since), "{path}: {since}");
        }
        assert_eq!(
            RELEASES.last().copied(),
            Some(env!("CARGO_PKG_VERSION")),
            "this release is the newest the checker knows"
        );
    }
}
