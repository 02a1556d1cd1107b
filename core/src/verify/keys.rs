//! The signing keys of the sources that configure `verify`: their secrets
//! read through an environment (the VM's, at `on_configure`), and the one
//! check a hook makes once its body is in.
//!
//! A path-tenant source with a secret per tenant holds keys for the tenants
//! its configuration lists and no others: a delivery for any other tenant is
//! refused, and no key is ever made for a name a request brought.

use crate::config::Config;
use crate::hook::headers::RequestHeaders;
use crate::verify::rule::Secrets;
use crate::verify::{self, Refusal, Scheme};
use std::collections::BTreeMap;

/// The keys of one source: for all its deliveries, or per path tenant.
enum KeySet {
    Shared(Vec<Vec<u8>>),
    PerTenant(BTreeMap<String, Vec<Vec<u8>>>),
}

/// Each verified source's scheme and the signing keys of its secrets.
#[derive(Default)]
pub struct Keys {
    sources: BTreeMap<String, (Scheme, KeySet)>,
}

impl Keys {
    /// Reads every secret a `verify` names through `env` (the wasm VM's environment, or the native module's process).
    /// A missing, empty or unreadable one refuses the configuration, naming
    /// the source and the variable, never the value; so does one secret
    /// given to two path tenants under two names (unless the source says
    /// they share it).
    pub fn resolve(config: &Config, env: impl Fn(&str) -> Option<String>) -> Result<Keys, String> {
        let mut sources = BTreeMap::new();
        for (id, source) in &config.sources {
            let Some(rule) = &source.verify else { continue };
            let field = format!("sources.{id}.verify.secret_env");
            let read = |field: &str, names: &[String]| -> Result<Vec<Vec<u8>>, String> {
                names
                    .iter()
                    .map(|name| {
                        let value = env(name).ok_or_else(|| {
                            format!("{field}: environment variable {name} is not set in the filter's environment (the proxy-wasm filter: pass it through vm_config.environment_variables.host_env_keys; the native module: set it in Envoy's own environment)")
                        })?;
                        rule.scheme
                            .key(&value)
                            .map_err(|why| format!("{field}: environment variable {name} {why}"))
                    })
                    .collect()
            };
            let set = match &rule.secret_env {
                Secrets::Shared(names) => KeySet::Shared(read(&field, names)?),
                Secrets::PerTenant(tenants) => {
                    let mut per_tenant = BTreeMap::new();
                    let mut seen: Vec<(&str, &str, Vec<u8>)> = Vec::new();
                    for (tenant, names) in tenants {
                        let keys = read(&format!("{field}.{tenant}"), names)?;
                        for (name, key) in names.iter().zip(&keys) {
                            let shared = seen.iter().find(|(t, _, k)| t != tenant && k == key);
                            if let (Some((other, other_name, _)), false) =
                                (shared, rule.shared_across_tenants)
                            {
                                return Err(format!(
                                    "{field}.{tenant}: environment variable {name} holds the same secret as {other_name} of tenant {other:?}: each path tenant needs its own secret"
                                ));
                            }
                            seen.push((tenant, name, key.clone()));
                        }
                        per_tenant.insert(tenant.clone(), keys);
                    }
                    KeySet::PerTenant(per_tenant)
                }
            };
            sources.insert(id.clone(), (rule.scheme.clone(), set));
        }
        Ok(Keys { sources })
    }

    /// Whether `source_id` verifies its deliveries (and so needs the body).
    pub fn verifies(&self, source_id: &str) -> bool {
        self.sources.contains_key(source_id)
    }

    /// Checks one delivery of `source_id` for `tenant`; Ok for a source
    /// without `verify`. A source with a secret per tenant checks only
    /// `tenant`'s, and refuses a tenant it has none for.
    pub fn check(
        &self,
        source_id: &str,
        tenant: &str,
        headers: &RequestHeaders,
        body: Option<&[u8]>,
        now_s: u64,
    ) -> Result<(), Refusal> {
        let Some((scheme, set)) = self.sources.get(source_id) else {
            return Ok(());
        };
        let keys = match set {
            KeySet::Shared(keys) => keys,
            KeySet::PerTenant(tenants) => tenants.get(tenant).ok_or(Refusal::BadSignature)?,
        };
        verify::verify(
            scheme,
            keys,
            |name| headers.get(name),
            body.unwrap_or_default(),
            now_s,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    const CONFIG: &str = r#"{"sources": {
        "gh": {"tenant": "acme", "verify": {"scheme": "github", "secret_env": ["GH_NEW", "GH_OLD"]}},
        "sw": {"tenant": "acme", "verify": {"scheme": "standard_webhooks", "secret_env": "SW"}},
        "open": {"tenant": "acme"}},
        "rate_limits": {"default": {"rate": 1, "burst": 1}}}"#;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    fn config() -> Config {
        Config::parse(CONFIG.as_bytes()).unwrap()
    }

    #[test]
    fn a_missing_secret_names_its_variable() {
        let e = Keys::resolve(&config(), env(&[("GH_NEW", "a"), ("SW", "whsec_AAAA")]))
            .err()
            .unwrap();
        assert!(
            e.starts_with("sources.gh.verify.secret_env: environment variable GH_OLD is not set"),
            "{e}"
        );
    }

    #[test]
    fn a_bad_whsec_secret_names_its_variable_not_its_value() {
        let e = Keys::resolve(
            &config(),
            env(&[("GH_NEW", "a"), ("GH_OLD", "b"), ("SW", "whsec_!!secret!!")]),
        )
        .err()
        .unwrap();
        assert!(e.contains("environment variable SW"), "{e}");
        assert!(!e.contains("!!secret!!"), "{e}");
    }

    #[test]
    fn either_secret_signs_and_unverified_sources_pass() {
        let keys = Keys::resolve(
            &config(),
            env(&[("GH_NEW", "new"), ("GH_OLD", "old"), ("SW", "whsec_AAAA")]),
        )
        .unwrap();
        assert!(keys.verifies("gh") && keys.verifies("sw") && !keys.verifies("open"));
        for secret in [b"new".as_slice(), b"old"] {
            let sig = verify::body_mac::sign(secret, "sha256=", verify::Encoding::Hex, b"{}");
            let headers =
                RequestHeaders::from_pairs(vec![("x-hub-signature-256".into(), sig.into_bytes())]);
            assert_eq!(keys.check("gh", "acme", &headers, Some(b"{}"), 0), Ok(()));
        }
        let none = RequestHeaders::default();
        assert_eq!(
            keys.check("gh", "acme", &none, Some(b"{}"), 0),
            Err(Refusal::BadSignature)
        );
        assert_eq!(keys.check("open", "acme", &none, None, 0), Ok(()));
    }
}

#[cfg(test)]
mod tenant_tests;
