use super::*;

fn found(name: &str, text: &str) -> Result<Vec<(String, String)>, String> {
    configurations(Path::new(name), text.as_bytes()).map(|all| {
        all.into_iter()
            .map(|(place, json, _)| (place, String::from_utf8(json).unwrap()))
            .collect()
    })
}

const FILTER: &str = r#"
static_resources:
  listeners:
  - name: webhooks
    filter_chains:
    - filters:
      - typed_config:
          http_filters:
          - name: other
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm
              config: { root_id: someone_else }
          - name: envoy.filters.http.wasm
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm
              config:
                root_id: ankusa
                configuration:
                  "@type": type.googleapis.com/google.protobuf.StringValue
                  value: '{"a": 1}'
"#;

#[test]
fn a_json_file_is_the_configuration_itself() {
    assert_eq!(
        found("x.json", "{}").unwrap(),
        [(String::new(), "{}".into())]
    );
    assert_eq!(found("x", "not json").unwrap()[0].1, "not json");
}

#[test]
fn a_bootstrap_gives_the_ankusa_filter_only() {
    let got = found("edge.yaml", FILTER).unwrap();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].1, r#"{"a": 1}"#);
    assert!(
        got[0].0.starts_with("static_resources.listeners[0]"),
        "{}",
        got[0].0
    );
    assert!(got[0]
        .0
        .ends_with("http_filters[1].typed_config.config.configuration"));
}

#[test]
fn a_configuration_that_is_no_string_value_is_named() {
    let text = FILTER.replace("google.protobuf.StringValue", "google.protobuf.Struct");
    let e = found("edge.yaml", &text).unwrap_err();
    assert!(
        e.starts_with("config.configuration: expected \"@type\""),
        "{e}"
    );
}

#[test]
fn manifests_give_wasm_plugins_extension_policies_and_config_maps() {
    let text = format!(
        "kind: WasmPlugin\nmetadata: {{name: ankusa}}\nspec:\n  pluginConfig:\n    sources: {{gh: {{dedupe: github}}}}\n    rate: 0.5\n---\n\
         kind: EnvoyExtensionPolicy\nmetadata: {{name: eg}}\nspec:\n  wasm:\n  - config: {{b: 2}}\n  - name: bare\n---\n\
         kind: ConfigMap\nmetadata: {{name: boot}}\ndata:\n  dashboard.json: '{{}}'\n  envoy.yaml: |\n{}",
        FILTER.lines().map(|l| format!("    {l}\n")).collect::<String>()
    );
    let got = found("all.yaml", &text).unwrap();
    let places: Vec<&str> = got.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(places.len(), 4, "{places:?}");
    assert_eq!(places[0], "WasmPlugin ankusa spec.pluginConfig");
    assert_eq!(
        got[0].1,
        r#"{"sources":{"gh":{"dedupe":"github"}},"rate":0.5}"#
    );
    assert_eq!(
        places[1],
        "document 2: EnvoyExtensionPolicy eg spec.wasm[0].config"
    );
    assert_eq!(got[1].1, r#"{"b":2}"#);
    assert_eq!(got[2].1, "", "an entry without config is an empty one");
    assert!(places[3].starts_with("document 3: ConfigMap boot data.envoy.yaml: static_resources"));
    assert_eq!(got[3].1, r#"{"a": 1}"#);
}

#[test]
fn yaml_without_a_configuration_or_not_yaml_is_refused() {
    let e = found("x.yaml", "a: 1\n").unwrap_err();
    assert!(e.starts_with("no Ankusa plugin configuration found"), "{e}");
    let e = found("x.yml", "a: [1\n").unwrap_err();
    assert!(e.starts_with("not valid YAML"), "{e}");
}

#[test]
fn a_native_filter_loading_the_module_is_found_as_the_native_shells() {
    let text = r#"
http_filters:
- name: envoy.filters.http.dynamic_modules
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter
    dynamic_module_config: { name: someone_else }
    filter_config: { "@type": type.googleapis.com/google.protobuf.StringValue, value: '{"b": 2}' }
- name: envoy.filters.http.dynamic_modules
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter
    dynamic_module_config: { name: ankusa_module }
    filter_name: ankusa
    filter_config: { "@type": type.googleapis.com/google.protobuf.StringValue, value: '{"a": 1}' }
"#;
    let all = configurations(Path::new("edge.yaml"), text.as_bytes()).unwrap();
    assert_eq!(
        all,
        [(
            "http_filters[1].typed_config.filter_config".to_string(),
            br#"{"a": 1}"#.to_vec(),
            Shell::Native
        )]
    );
}
