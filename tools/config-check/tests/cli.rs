//! `ankusa-config` as a user runs it: it refuses exactly what the core's
//! parser (the filter's `on_configure`) refuses, with the same sentence, and
//! exits 0, 1 or 2; `schema` prints the checked-in schema byte for byte.

use ankusa_core::config::Config;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ankusa-config"))
        .args(args)
        .current_dir(root())
        .output()
        .expect("run ankusa-config")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn fixtures() -> Vec<String> {
    let dir = root().join("core/tests/fixtures/config");
    let mut all: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            format!(
                "core/tests/fixtures/config/{}",
                p.file_name().unwrap().to_string_lossy()
            )
        })
        .collect();
    all.sort();
    all
}

#[test]
fn every_fixture_gets_the_parsers_verdict_word_for_word() {
    let files = fixtures();
    assert!(files.len() > 50, "{} fixtures", files.len());
    let args: Vec<&str> = std::iter::once("check")
        .chain(files.iter().map(String::as_str))
        .collect();
    let out = run(&args);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), files.len(), "{text}");
    let mut refused = 0;
    for (file, line) in files.iter().zip(&lines) {
        let bytes = std::fs::read(root().join(file)).unwrap();
        let expected = match Config::parse(&bytes) {
            Ok(_) => format!("{file}: ok"),
            Err(e) => {
                refused += 1;
                format!("{file}: refused: {e}")
            }
        };
        assert_eq!(*line, expected);
    }
    assert!(refused > 40 && refused < files.len(), "{refused} refused");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "{refused} refused, {} configurations checked",
            files.len()
        )),
        "{stderr}"
    );
}

#[test]
fn good_files_pass_with_status_zero() {
    let good: Vec<String> = fixtures()
        .into_iter()
        .filter(|f| f.contains("/good_"))
        .collect();
    assert!(good.len() >= 5, "{} good fixtures", good.len());
    let args: Vec<&str> = std::iter::once("check")
        .chain(good.iter().map(String::as_str))
        .collect();
    let out = run(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(stdout(&out).matches(": ok\n").count(), good.len());
}

#[test]
fn the_shipped_bootstraps_and_manifests_pass() {
    let out = run(&[
        "check",
        "envoy/edge.yaml",
        "envoy/edge-remote.yaml",
        "envoy/edge-native.yaml",
        "deploy/kubernetes/base/edge-bootstrap.yaml",
        "deploy/kubernetes/examples/istio-wasmplugin.yaml",
        "deploy/kubernetes/examples/envoy-gateway.yaml",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with(
            "envoy/edge.yaml (static_resources.listeners[0].filter_chains[0].filters[0]"
        ),
        "{text}"
    );
    assert_eq!(text.matches(": ok\n").count(), 6, "{text}");
    for place in [
        "envoy/edge-native.yaml (static_resources.listeners[0].filter_chains[0].filters[0].typed_config.http_filters[0].typed_config.filter_config): ok",
        "deploy/kubernetes/base/edge-bootstrap.yaml (ConfigMap ankusa-edge-bootstrap data.envoy.yaml: static_resources",
        "deploy/kubernetes/examples/istio-wasmplugin.yaml (WasmPlugin ankusa spec.pluginConfig): ok",
        "deploy/kubernetes/examples/envoy-gateway.yaml (EnvoyExtensionPolicy ankusa spec.wasm[0].config): ok",
    ] {
        assert!(text.contains(place), "{place} missing from:\n{text}");
    }
}

#[test]
fn a_bootstrap_with_a_bad_configuration_is_refused_naming_the_field() {
    let good = std::fs::read_to_string(root().join("envoy/edge.yaml")).unwrap();
    let bad = good.replace(
        r#""tenants": {"acme": {"rate": 500, "burst": 1000}}"#,
        r#""tenants": {"acme": {"rate": 500, "burst": 0}}"#,
    );
    assert_ne!(good, bad, "the bootstrap's tenant line moved");
    let dir = std::env::temp_dir().join(format!("ankusa-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("edge.yaml");
    std::fs::write(&file, bad).unwrap();
    let out = run(&["check", file.to_str().unwrap()]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).ends_with(
            ": refused: rate_limits.tenants.acme.burst: must be between 1 and 4294967296, got 0\n"
        ),
        "{}",
        stdout(&out)
    );
}

#[test]
fn schema_prints_the_checked_in_file_exactly() {
    let out = run(&["schema"]);
    assert_eq!(out.status.code(), Some(0));
    let file = std::fs::read(root().join("deploy/schema/ankusa-config.schema.json")).unwrap();
    assert_eq!(out.stdout, file);
    let schema: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
}

#[test]
fn usage_errors_exit_two() {
    for args in [
        &[][..],
        &["check"],
        &["lint", "x.json"],
        &["schema", "extra"],
        &["check", "no/such/file.json"],
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("usage: ankusa-config check [--release X.Y.Z] FILE"),
            "{args:?}: {stderr}"
        );
    }
    let out = run(&["check", "no/such/file.json"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read no/such/file.json"));
}

/// `--release`: the shipped configurations load on edges of every release
/// this checker knows (v0.2.0 added no key); a release it doesn't know is a
/// usage error naming the ones it does.
#[test]
fn shipped_configurations_load_on_every_known_release() {
    for release in ankusa_core::config::since::RELEASES {
        let out = run(&[
            "check",
            "--release",
            release,
            "envoy/edge.yaml",
            "envoy/edge-remote.yaml",
        ]);
        assert_eq!(out.status.code(), Some(0), "v{release}: {}", stdout(&out));
        assert_eq!(stdout(&out).matches(": ok").count(), 2, "{}", stdout(&out));
    }
    let out = run(&["check", "--release", "0.0.9", "envoy/edge.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown release \"0.0.9\"; this checker knows 0.1.0, 0.2.0"),
        "{err}"
    );
    let out = run(&["check", "--release", "0.1.0"]);
    assert_eq!(out.status.code(), Some(2), "no file is a usage error");
}
