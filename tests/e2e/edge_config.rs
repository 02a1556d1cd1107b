//! The Envoy configs: both validate, and a bad plugin configuration is refused
//! with a log line naming the field.

use ankusa_testkit::envoy::{self, Edge, EdgeSpec, Shell};
use ankusa_testkit::paths;
use ankusa_testkit::ports::free_port;
use serde_json::json;
use std::time::Duration;

/// The compose file mounts the filter at /etc/ankusa; validation loads it and
/// runs its on_configure, so the copy checked here points at the built one.
#[test]
fn the_compose_edge_config_validates() {
    let text = std::fs::read_to_string(paths::workspace_root().join("envoy/edge.yaml")).unwrap();
    let mounted = "/etc/ankusa/ankusa_filter.wasm";
    assert!(
        text.contains(mounted),
        "envoy/edge.yaml loads the filter from {mounted}"
    );
    let dir = ankusa_testkit::process::scratch_dir("edge-compose");
    let file = dir.join("edge.yaml");
    std::fs::write(
        &file,
        text.replace(mounted, &paths::filter_wasm().display().to_string()),
    )
    .unwrap();
    // The container gets its signing secrets from the environment; any value will do here.
    let env: Vec<(String, String)> = envoy::host_env_keys(&text)
        .into_iter()
        .map(|name| (name, "validate-only-secret".to_string()))
        .collect();
    assert!(
        !env.is_empty(),
        "envoy/edge.yaml passes its secrets by name"
    );
    envoy::validate_with_env(&file, &env)
        .unwrap_or_else(|log| panic!("envoy/edge.yaml does not validate:\n{log}"));
}

#[test]
fn the_rendered_template_validates() {
    let spec = EdgeSpec::new(
        "edge-validate",
        free_port(),
        free_port(),
        envoy::fleet_filter_config(),
    );
    let dir = ankusa_testkit::process::scratch_dir("edge-validate");
    let file = dir.join("edge.yaml");
    std::fs::write(&file, envoy::render(&spec, &paths::filter_wasm())).unwrap();
    envoy::validate(&file)
        .unwrap_or_else(|log| panic!("the rendered template does not validate:\n{log}"));
}

#[test]
fn each_bad_config_is_refused_naming_the_field() {
    let mut good = envoy::fleet_filter_config();
    good["node"] = json!("edge-x");
    let cases = [
        ("rate_limits.defualt", {
            let mut c = good.clone();
            c["rate_limits"]["defualt"] = json!({"rate": 1, "burst": 1});
            c
        }),
        ("fleet.timeout_ms", {
            let mut c = good.clone();
            c["fleet"]["timeout_ms"] = json!(0);
            c
        }),
        ("sources", {
            let mut c = good.clone();
            c["sources"] = json!({});
            c
        }),
        ("fleet.breaker_failure_rate", {
            let mut c = good.clone();
            c["fleet"]["breaker_failure_rate"] = json!(1.5);
            c
        }),
        ("sources.gh.dedupe", {
            let mut c = good.clone();
            c["sources"]["gh"]["dedupe"] = json!("gitlab");
            c
        }),
        ("rate_limits.tenants.acme.bytes_burst", {
            let mut c = good.clone();
            c["rate_limits"]["tenants"]["acme"] = json!({"rate": 1, "burst": 1, "bytes_rate": 5});
            c
        }),
        ("node", {
            let mut c = good.clone();
            c["node"] = json!("edge one");
            c
        }),
        // A secret the VM environment doesn't hold: the field, and the variable's name.
        ("sources.gh.verify.secret_env", {
            let mut c = good.clone();
            c["sources"]["gh"]["verify"] =
                json!({"scheme": "github", "secret_env": ["ANKUSA_NOT_SET_SECRET"]});
            c
        }),
    ];
    for (field, config) in cases {
        let spec = EdgeSpec::new("edge-bad", free_port(), free_port(), config);
        let mut edge = Edge::spawn(spec);
        let exited = edge.wait_exit(Duration::from_secs(30));
        let log = edge.log();
        let line = log
            .lines()
            .find(|l| l.contains("ankusa: configuration refused"))
            .unwrap_or_else(|| panic!("no refusal logged for {field}:\n{}", edge.log_tail()));
        assert!(
            line.contains(&format!("{field}:")),
            "refusal does not name {field}: {line}"
        );
        assert!(
            exited.is_some()
                || !ankusa_tests::edge_support::eventually(Duration::from_secs(1), || {
                    ankusa_testkit::ports::is_listening(edge.spec.listen_port)
                }),
            "a refused config must not serve: {field}"
        );
    }
}

/// `fleet.connection: "direct"` is the native module's alone: the
/// proxy-wasm filter refuses it, naming the field (it can't own a socket),
/// and the module refuses a malformed `fleet.store`, naming that one.
#[test]
fn a_direct_store_connection_is_refused_by_the_wasm_filter_and_a_bad_store_address_by_both() {
    let mut direct = envoy::fleet_filter_config();
    direct["fleet"]["connection"] = json!("direct");
    direct["fleet"]["store"] = json!("127.0.0.1:8081");
    let mut malformed = direct.clone();
    malformed["fleet"]["store"] = json!("127.0.0.1");
    for (shell, config, field) in [
        (
            Shell::Wasm,
            direct,
            "fleet.connection: \"direct\" (to 127.0.0.1:8081) needs a shell that owns its sockets",
        ),
        (
            Shell::Wasm,
            malformed.clone(),
            "fleet.store: \"127.0.0.1\" is not \"host:port\"",
        ),
        (
            Shell::Native,
            malformed,
            "fleet.store: \"127.0.0.1\" is not \"host:port\"",
        ),
    ] {
        let mut spec = EdgeSpec::new("edge-direct", free_port(), free_port(), config);
        spec.shell = shell;
        let mut edge = Edge::spawn(spec);
        edge.wait_exit(Duration::from_secs(30));
        let log = edge.log();
        let line = log
            .lines()
            .find(|l| l.contains("ankusa: configuration refused"))
            .unwrap_or_else(|| panic!("{shell:?}: no refusal logged:\n{}", edge.log_tail()));
        assert!(line.contains(field), "{shell:?}: {line}");
    }
}

/// A port handed out for the listener can be taken before Envoy binds it
/// (by another test's client); the edge starts again on another, its
/// listener static or from LDS.
#[test]
fn an_edge_whose_listen_port_was_taken_starts_on_another() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port();
    let config = json!({"sources": {"gh": {"tenant": "acme"}},
        "rate_limits": {"default": {"rate": 10, "burst": 10}}});
    let mut spec = EdgeSpec::new("edge-taken", free_port(), free_port(), config.clone());
    spec.listen_port = port;
    let edge = Edge::start(spec);
    assert_ne!(edge.spec.listen_port, port);
    assert!(ankusa_testkit::ports::is_listening(edge.spec.listen_port));
    // A listener from LDS on a taken port: Envoy stays up and rejects it.
    let mut spec = EdgeSpec::new("edge-taken-lds", free_port(), free_port(), config.clone());
    spec.listen_port = port;
    let edge = Edge::start_lds(spec);
    assert_ne!(edge.spec.listen_port, port);
    assert!(ankusa_testkit::ports::is_listening(edge.spec.listen_port));
    // A rewritten bootstrap: the rewrite is applied again to the new ports' one.
    let mut spec = EdgeSpec::new("edge-taken-with", free_port(), free_port(), config);
    spec.listen_port = port;
    let edge = Edge::start_with(spec, |b| {
        b.replace("edge-taken-with", "edge-taken-rewritten")
    });
    assert_ne!(edge.spec.listen_port, port);
    assert!(ankusa_testkit::ports::is_listening(edge.spec.listen_port));
    let bootstrap = std::fs::read_to_string(edge.dir.join("edge.yaml")).expect("bootstrap");
    assert!(bootstrap.contains("edge-taken-rewritten"), "{bootstrap}");
    drop(taken);
}
