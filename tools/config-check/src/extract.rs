//! Where a plugin configuration sits in a file.
//!
//! A file whose name ends in `.yaml` or `.yml` is read as YAML documents and
//! searched for the Ankusa filter's configuration wherever a deployment puts
//! it; any other file is the plugin configuration itself (JSON):
//!
//! - an Envoy `envoy.extensions.filters.http.wasm.v3.Wasm` filter whose
//!   `config.root_id` is `ankusa`: its `config.configuration` (a
//!   `google.protobuf.StringValue`), in a bootstrap, an LDS file or any YAML;
//! - an Envoy `envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter`
//!   loading the native module (`dynamic_module_config.name` `ankusa_module`):
//!   its `filter_config` (a `google.protobuf.StringValue`) ([`Shell::Native`]);
//! - an Istio `WasmPlugin`: `spec.pluginConfig`;
//! - an Envoy Gateway `EnvoyExtensionPolicy`: each `spec.wasm[].config`;
//! - a Kubernetes `ConfigMap`: each `data` entry named `*.yaml`/`*.yml`
//!   (an Envoy bootstrap shipped in a ConfigMap), searched the same way.

use serde_yaml::Value;
use std::path::Path;

const WASM_FILTER: &str = "type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm";
const NATIVE_FILTER: &str =
    "type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter";
/// The native module's name (libankusa_module.so), as every shipped bootstrap names it.
pub const NATIVE_MODULE: &str = "ankusa_module";
const STRING_VALUE: &str = "type.googleapis.com/google.protobuf.StringValue";
/// The filter's root id, as every shipped bootstrap names it.
pub const ROOT_ID: &str = "ankusa";

/// Which shell reads a configuration found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shell {
    /// The proxy-wasm filter (and a bare JSON file).
    Wasm,
    /// The native module.
    Native,
}

/// One configuration found: where in the file (empty for a JSON file), its
/// JSON bytes, and the shell that reads it.
pub type Found = (String, Vec<u8>, Shell);

/// Each configuration found. A YAML file that holds none is an error.
pub fn configurations(path: &Path, text: &[u8]) -> Result<Vec<Found>, String> {
    let yaml = path.extension().is_some_and(|x| x == "yaml" || x == "yml");
    if !yaml {
        return Ok(vec![(String::new(), text.to_vec(), Shell::Wasm)]);
    }
    let text = std::str::from_utf8(text).map_err(|e| format!("not UTF-8: {e}"))?;
    let mut found = Vec::new();
    search_documents(text, "", &mut found)?;
    if found.is_empty() {
        return Err(format!(
            "no Ankusa plugin configuration found: looked for an envoy.filters.http.wasm \
             filter with root_id {ROOT_ID:?}, an envoy.filters.http.dynamic_modules filter \
             loading {NATIVE_MODULE:?}, an Istio WasmPlugin, an Envoy Gateway \
             EnvoyExtensionPolicy and ConfigMap data holding one"
        ));
    }
    Ok(found)
}

fn search_documents(text: &str, prefix: &str, found: &mut Vec<Found>) -> Result<(), String> {
    for (i, document) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let value = <Value as serde::Deserialize>::deserialize(document)
            .map_err(|e| format!("{prefix}not valid YAML: {e}"))?;
        let here = if i == 0 {
            prefix.to_string()
        } else {
            format!("{prefix}document {}: ", i + 1)
        };
        search(&value, &here, "", found)?;
    }
    Ok(())
}

fn search(value: &Value, doc: &str, path: &str, found: &mut Vec<Found>) -> Result<(), String> {
    match value {
        Value::Mapping(map) => {
            let get = |key: &str| map.get(key);
            let text = |key: &str| get(key).and_then(Value::as_str);
            if text("@type") == Some(WASM_FILTER) {
                if let Some(config) = get("config") {
                    if config.get("root_id").and_then(Value::as_str) == Some(ROOT_ID) {
                        let place = format!("{doc}{path}.config.configuration");
                        found.push((
                            place,
                            string_value("config.configuration", config.get("configuration"))?,
                            Shell::Wasm,
                        ));
                        return Ok(());
                    }
                }
            }
            if text("@type") == Some(NATIVE_FILTER) {
                let module = get("dynamic_module_config")
                    .and_then(|m| m.get("name"))
                    .and_then(Value::as_str);
                if module == Some(NATIVE_MODULE) {
                    let place = format!("{doc}{path}.filter_config");
                    found.push((
                        place,
                        string_value("filter_config", get("filter_config"))?,
                        Shell::Native,
                    ));
                    return Ok(());
                }
            }
            let kind = text("kind");
            let spec = get("spec");
            let name = get("metadata")
                .and_then(|m| m.get("name"))
                .and_then(Value::as_str)
                .unwrap_or("");
            match (kind, spec) {
                (Some("WasmPlugin"), Some(spec)) => {
                    let place = format!("{doc}WasmPlugin {name} spec.pluginConfig");
                    found.push((place, json_of(spec.get("pluginConfig"))?, Shell::Wasm));
                    return Ok(());
                }
                (Some("EnvoyExtensionPolicy"), Some(spec)) => {
                    let wasm = spec.get("wasm").and_then(Value::as_sequence);
                    for (i, entry) in wasm.into_iter().flatten().enumerate() {
                        let place =
                            format!("{doc}EnvoyExtensionPolicy {name} spec.wasm[{i}].config");
                        found.push((place, json_of(entry.get("config"))?, Shell::Wasm));
                    }
                    return Ok(());
                }
                (Some("ConfigMap"), _) => {
                    let data = get("data").and_then(Value::as_mapping);
                    for (key, text) in data.into_iter().flatten() {
                        let (Some(key), Some(text)) = (key.as_str(), text.as_str()) else {
                            continue;
                        };
                        if key.ends_with(".yaml") || key.ends_with(".yml") {
                            let prefix = format!("{doc}ConfigMap {name} data.{key}: ");
                            search_documents(text, &prefix, found)?;
                        }
                    }
                    return Ok(());
                }
                _ => {}
            }
            for (key, child) in map {
                let key = key
                    .as_str()
                    .map_or_else(|| format!("{key:?}"), str::to_string);
                let child_path = if path.is_empty() {
                    key
                } else {
                    format!("{path}.{key}")
                };
                search(child, doc, &child_path, found)?;
            }
        }
        Value::Sequence(items) => {
            for (i, child) in items.iter().enumerate() {
                search(child, doc, &format!("{path}[{i}]"), found)?;
            }
        }
        _ => {}
    }
    Ok(())
}

/// A filter's configuration (a Wasm filter's `config.configuration`, the
/// native filter's `filter_config`, named `field`): the StringValue's text.
/// A missing one is an empty configuration, which the parser refuses as
/// Envoy's filter would.
fn string_value(field: &str, any: Option<&Value>) -> Result<Vec<u8>, String> {
    let Some(any) = any else {
        return Ok(Vec::new());
    };
    let kind = any.get("@type").and_then(Value::as_str);
    if kind != Some(STRING_VALUE) {
        return Err(format!(
            "{field}: expected \"@type\": {STRING_VALUE}, got {kind:?}"
        ));
    }
    Ok(any
        .get("value")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .as_bytes()
        .to_vec())
}

/// A configuration written as YAML (a manifest's object) as JSON; absent is empty.
fn json_of(value: Option<&Value>) -> Result<Vec<u8>, String> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(value) => {
            serde_json::to_vec(value).map_err(|e| format!("not expressible as JSON: {e}"))
        }
    }
}

#[cfg(test)]
mod tests;
