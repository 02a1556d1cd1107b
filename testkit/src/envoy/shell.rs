//! Which shell an edge runs the core in: the proxy-wasm filter or the
//! native module (Envoy's dynamic modules filter). The rest of an edge (its
//! listener, clusters, access log, the plugin configuration) is the same,
//! so the same end-to-end tests run for both: `ANKUSA_SHELL=native` runs
//! them with the native module.

use crate::paths;
use std::path::PathBuf;

/// The environment variable naming the shell the tests' edges run.
pub const SHELL_ENV: &str = "ANKUSA_SHELL";

/// Where Envoy looks for a dynamic module named in its configuration.
pub const SEARCH_PATH_ENV: &str = "ENVOY_DYNAMIC_MODULES_SEARCH_PATH";

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Shell {
    /// `envoy.filters.http.wasm` with `ankusa_filter.wasm`.
    #[default]
    Wasm,
    /// `envoy.filters.http.dynamic_modules` with `libankusa_module.so`.
    Native,
}

impl Shell {
    /// The shell `ANKUSA_SHELL` names (`wasm`, the default, or `native`);
    /// any other value is a mistake, said at once.
    pub fn from_env() -> Shell {
        match std::env::var(SHELL_ENV).as_deref() {
            Err(_) | Ok("") | Ok("wasm") => Shell::Wasm,
            Ok("native") => Shell::Native,
            Ok(other) => panic!("{SHELL_ENV}={other:?}: expected \"wasm\" or \"native\""),
        }
    }

    /// The folder Envoy loads the native module from (None: the wasm shell).
    pub fn search_path(self) -> Option<PathBuf> {
        match self {
            Shell::Wasm => None,
            Shell::Native => paths::native_module().parent().map(PathBuf::from),
        }
    }

    /// The bootstrap template for this shell: the wasm filter's block
    /// replaced by the native module's, with the same configuration.
    pub fn template(self, template: &str) -> String {
        match self {
            Shell::Wasm => template.to_string(),
            Shell::Native => native_template(template),
        }
    }
}

/// The environment variable naming how a native edge's fleet calls reach
/// the store: `callout` (the default: Envoy's HTTP callouts through the
/// `ankusa_store` cluster) or `direct` (the module's own connection to the
/// same store port, `fleet.connection: "direct"`). The wasm shell ignores it.
pub const CONNECTION_ENV: &str = "ANKUSA_CONNECTION";

impl Shell {
    /// The filter configuration an edge of this shell is given: for the
    /// native shell with `ANKUSA_CONNECTION=direct`, a configuration that
    /// calls the store (a fleet scope or a `fleet` section, and no
    /// connection of its own) calls it on the module's own connection to
    /// 127.0.0.1:`store_port`, where the `ankusa_store` cluster points.
    pub fn filter_config(self, config: &serde_json::Value, store_port: u16) -> serde_json::Value {
        let direct = match std::env::var(CONNECTION_ENV).as_deref() {
            Err(_) | Ok("") | Ok("callout") => false,
            Ok("direct") => true,
            Ok(other) => panic!("{CONNECTION_ENV}={other:?}: expected \"callout\" or \"direct\""),
        };
        if self == Shell::Wasm || !direct {
            return config.clone();
        }
        with_direct_connection(config, store_port)
    }
}

/// `config` with its store calls on a direct connection to 127.0.0.1:`store_port`
/// (unchanged when it calls no store or names a connection itself).
pub fn with_direct_connection(config: &serde_json::Value, store_port: u16) -> serde_json::Value {
    let mut config = config.clone();
    let fleet_scope = |section: &str| config[section]["scope"] == "fleet";
    let calls_store =
        fleet_scope("rate_limits") || fleet_scope("dedupe") || config.get("fleet").is_some();
    if calls_store && config["fleet"].get("connection").is_none() {
        if let Some(obj) = config.as_object_mut() {
            let fleet = obj.entry("fleet").or_insert_with(|| serde_json::json!({}));
            fleet["connection"] = "direct".into();
            fleet["store"] = format!("127.0.0.1:{store_port}").into();
        }
    }
    config
}

/// What Envoy prefixes the native module's stats with in
/// `/stats/prometheus` (`envoy_` and the `metrics_namespace`, `ankusa`),
/// which the shipped scrape configuration's `metric_relabel_configs` takes
/// off again (deploy/prometheus/prometheus.yml).
pub const NATIVE_PROMETHEUS_PREFIX: &str = "envoy_ankusa_ankusa_";

/// An edge's `/stats/prometheus` text with the names Prometheus stores:
/// the native module's `envoy_ankusa_ankusa_*` become `ankusa_*`, as the
/// shipped relabel rule makes them.
pub fn as_scraped(text: &str) -> String {
    text.replace(NATIVE_PROMETHEUS_PREFIX, "ankusa_")
}

const WASM_FILTER: &str = "          - name: envoy.filters.http.wasm\n";
const ROUTER: &str = "          - name: envoy.filters.http.router\n";

/// The native module's filter, named `ankusa_module` (libankusa_module.so
/// under the search path), configured with the template's `{{CONFIG}}`.
const NATIVE_FILTER: &str = r#"          - name: envoy.filters.http.dynamic_modules
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter
              dynamic_module_config:
                name: ankusa_module
                do_not_close: true
                metrics_namespace: ankusa
              filter_name: ankusa
              filter_config:
                "@type": type.googleapis.com/google.protobuf.StringValue
                value: {{CONFIG}}
"#;

fn native_template(template: &str) -> String {
    let (Some(start), Some(end)) = (template.find(WASM_FILTER), template.find(ROUTER)) else {
        panic!("the edge template has no wasm filter before its router");
    };
    format!("{}{NATIVE_FILTER}{}", &template[..start], &template[end..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envoy::TEMPLATE;

    #[test]
    fn the_native_template_swaps_the_filter_and_keeps_the_rest() {
        let native = Shell::Native.template(TEMPLATE);
        assert!(!native.contains("envoy.filters.http.wasm"), "{native}");
        assert!(!native.contains("{{WASM}}"), "{native}");
        assert!(native.contains("envoy.filters.http.dynamic_modules"));
        assert!(native.contains("value: {{CONFIG}}"));
        assert!(native.contains("envoy.filters.http.router"));
        let tail = |t: &str| t[t.find(ROUTER).unwrap()..].to_string();
        assert_eq!(tail(&native), tail(TEMPLATE));
        assert_eq!(Shell::Wasm.template(TEMPLATE), TEMPLATE);
    }

    #[test]
    fn a_direct_connection_goes_only_into_configurations_that_call_the_store() {
        use serde_json::json;
        let fleet = json!({"rate_limits": {"scope": "fleet"}, "fleet": {"timeout_ms": 40}});
        let direct = with_direct_connection(&fleet, 9000);
        assert_eq!(direct["fleet"]["connection"], "direct");
        assert_eq!(direct["fleet"]["store"], "127.0.0.1:9000");
        assert_eq!(direct["fleet"]["timeout_ms"], 40);
        let dedupe = with_direct_connection(&json!({"dedupe": {"scope": "fleet"}}), 9000);
        assert_eq!(dedupe["fleet"]["connection"], "direct");
        let node = json!({"rate_limits": {"scope": "node"}});
        assert_eq!(with_direct_connection(&node, 9000), node);
        let own = json!({"fleet": {"connection": "callout"}});
        assert_eq!(with_direct_connection(&own, 9000), own);
    }

    #[test]
    fn the_native_prefix_is_what_the_shipped_relabel_rule_takes_off() {
        let scrape = include_str!("../../../deploy/prometheus/prometheus.yml");
        assert!(
            scrape.contains(&format!("regex: {NATIVE_PROMETHEUS_PREFIX}(.+)")),
            "{scrape}"
        );
        assert_eq!(
            as_scraped("envoy_ankusa_ankusa_admissions_total{outcome=\"admitted\"} 1"),
            "ankusa_admissions_total{outcome=\"admitted\"} 1"
        );
    }
}
