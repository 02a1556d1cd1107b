//! The edge's bootstrap: `envoy/edge.template.yaml` with its `{{NAME}}`
//! placeholders filled in, the listener moved to a file-based LDS file when
//! the edge must reload, and Envoy's own check of a config file.

use super::EdgeSpec;
use crate::paths;
use crate::token::EDGE_TOKEN_ENV;
use std::path::Path;
use std::process::Command;

/// The bootstrap template, the one file both the tests and the fleet command render.
pub const TEMPLATE: &str = include_str!("../../../envoy/edge.template.yaml");

const LISTENERS: &str = "  listeners:\n";
const CLUSTERS: &str = "  clusters:\n";
const LISTENER_TYPE: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";

/// Splits a rendered bootstrap into one whose listener comes from file-based
/// LDS at `lds` (watched through its folder, so a file renamed into place is
/// a reload) and the LDS file itself: `(bootstrap, listener_file)`.
pub fn split_lds(bootstrap: &str, lds: &Path) -> (String, String) {
    let start = bootstrap
        .find(LISTENERS)
        .expect("the template has a static listener");
    let end = bootstrap
        .find(CLUSTERS)
        .expect("the template has static clusters");
    let block = &bootstrap[start + LISTENERS.len()..end];
    let mut listener = String::from("resources:\n");
    for (i, line) in block.lines().enumerate() {
        let line = line.strip_prefix("  ").unwrap_or(line);
        match line.strip_prefix("- ") {
            Some(first) if i == 0 => {
                listener.push_str(&format!("- \"@type\": {LISTENER_TYPE}\n  {first}\n"));
            }
            _ => {
                listener.push_str(line);
                listener.push('\n');
            }
        }
    }
    let folder = lds.parent().unwrap_or(Path::new("/"));
    let dynamic = format!(
        "dynamic_resources:\n  lds_config:\n    resource_api_version: V3\n    path_config_source:\n      path: \"{}\"\n      watched_directory: {{ path: \"{}\" }}\n",
        lds.display(),
        folder.display()
    );
    let bootstrap = format!("{}{}{dynamic}", &bootstrap[..start], &bootstrap[end..]);
    (bootstrap, listener)
}

/// Fills in the template for `spec`, with the filter at `wasm` (the native
/// shell names its module instead, see [`super::Shell`]).
pub fn render(spec: &EdgeSpec, wasm: &Path) -> String {
    // A JSON string literal is also a valid YAML double-quoted scalar.
    let filter_config = spec
        .shell
        .filter_config(&spec.filter_config, spec.store_port);
    let config = serde_json::Value::String(filter_config.to_string()).to_string();
    spec.shell
        .template(TEMPLATE)
        .replace("{{NODE}}", &spec.node)
        .replace("{{ADMIN_PORT}}", &spec.admin_port.to_string())
        .replace("{{LISTEN_PORT}}", &spec.listen_port.to_string())
        .replace("{{UPSTREAM_PORT}}", &spec.upstream_port.to_string())
        .replace("{{STORE_PORT}}", &spec.store_port.to_string())
        .replace("{{WASM}}", &wasm.display().to_string())
        .replace("{{CONFIG}}", &config)
        .replace("{{VM_ENV_KEYS}}", &vm_env_keys(spec))
}

/// The names in every `host_env_keys: [A, B]` line of an Envoy config.
pub fn host_env_keys(config: &str) -> Vec<String> {
    config
        .lines()
        .filter_map(|l| l.trim().strip_prefix("host_env_keys:"))
        .flat_map(|list| {
            list.trim()
                .trim_start_matches('[')
                .trim_end_matches(']')
                .split(',')
                .map(|n| n.trim().trim_matches('"').to_string())
                .filter(|n| !n.is_empty())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The store token's variable and the names of `spec.vm_env`, as a YAML flow list (a JSON array).
fn vm_env_keys(spec: &EdgeSpec) -> String {
    let names: Vec<&str> = std::iter::once(EDGE_TOKEN_ENV)
        .chain(spec.vm_env.iter().map(|(k, _)| k.as_str()))
        .collect();
    serde_json::to_string(&names).unwrap_or_else(|_| "[]".into())
}

/// `envoy --mode validate -c file`: Ok, or Err with Envoy's output.
pub fn validate(file: &Path) -> Result<(), String> {
    validate_with_env(file, &[])
}

/// [`validate`] with `env` in Envoy's environment (the values of the VM
/// environment variables a config names, which its `on_configure` reads).
pub fn validate_with_env(file: &Path, env: &[(String, String)]) -> Result<(), String> {
    let out = Command::new(paths::envoy_bin())
        .args(["--mode", "validate", "--disable-hot-restart", "-c"])
        .arg(file)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .map_err(|e| format!("cannot run envoy: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(())
    } else {
        Err(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listener_moves_to_an_lds_file() {
        let spec = EdgeSpec::new("edge-t", 1, 2, serde_json::json!({"a": 1}));
        let text = render(&spec, Path::new("/x.wasm"));
        let (boot, listener) = split_lds(&text, Path::new("/d/lds/listener.yaml"));
        assert!(!boot.contains("listeners:"), "{boot}");
        assert!(
            boot.contains("clusters:") && boot.contains("lds_config:"),
            "{boot}"
        );
        assert!(
            boot.contains(r#"watched_directory: { path: "/d/lds" }"#),
            "{boot}"
        );
        assert!(
            listener.starts_with(&format!(
                "resources:\n- \"@type\": {LISTENER_TYPE}\n  name: webhooks\n  address:"
            )),
            "{listener}"
        );
        assert!(listener.contains("\n        http_filters:\n"), "{listener}");
    }

    #[test]
    fn renders_every_placeholder() {
        let spec = EdgeSpec::new("edge-t", 1, 2, serde_json::json!({"a": "b\"c"}));
        let text = render(&spec, Path::new("/x.wasm"));
        let left = text
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .find(|l| l.contains("{{"));
        assert_eq!(left, None, "placeholder left in:\n{text}");
        assert!(text.contains(r#"value: "{\"a\":\"b\\\"c\"}""#), "{text}");
    }

    #[test]
    fn vm_env_passes_names_not_values() {
        let mut spec = EdgeSpec::new("edge-t", 1, 2, serde_json::json!({}));
        assert!(render(&spec, Path::new("/x.wasm"))
            .contains(r#"host_env_keys: ["ANKUSA_STORE_TOKEN"]"#));
        spec.vm_env = vec![("ANKUSA_GH_SECRET".into(), "s3cret-value".into())];
        let text = render(&spec, Path::new("/x.wasm"));
        assert!(
            text.contains(r#"host_env_keys: ["ANKUSA_STORE_TOKEN","ANKUSA_GH_SECRET"]"#),
            "{text}"
        );
        assert!(!text.contains("s3cret-value"), "{text}");
        assert_eq!(
            host_env_keys(&text),
            ["ANKUSA_STORE_TOKEN", "ANKUSA_GH_SECRET"]
        );
        assert_eq!(
            host_env_keys("  host_env_keys: [A, B]\n  host_env_keys: []\n"),
            ["A", "B"]
        );
    }
}
