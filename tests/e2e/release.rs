//! `scripts/release.sh` as a user runs it: the module, its sha256, the
//! binaries, and an OCI image layout that a real OCI tool (Debian's `skopeo`)
//! reads, pushes to a real registry (Debian's `docker-registry`, on a free
//! loopback port) and pulls back byte for byte, with the wasm artifact media
//! types Istio's WasmPlugin and Envoy Gateway pull.

use ankusa_testkit::http;
use ankusa_testkit::paths::{filter_wasm, workspace_bin, workspace_root};
use ankusa_testkit::ports::free_port;
use ankusa_testkit::process::{scratch_dir, Proc};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

const VERSION: &str = "0.0.0-test.1";
const LAYER: &str = "application/vnd.module.wasm.content.layer.v1+wasm";
const CONFIG: &str = "application/vnd.module.wasm.config.v1+json";

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn skopeo(args: &[&str]) -> Output {
    run(Command::new("skopeo").arg("--insecure-policy").args(args))
}

/// Packages what target/ holds (the builds `scripts/test.sh` made) into `dist`.
fn release(dist: &Path) -> Output {
    // The profile of the store binary the tests use (debug unless only release is built).
    let store = workspace_bin("ankusa-store");
    let profile = store
        .parent()
        .and_then(Path::file_name)
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    run(Command::new("bash")
        .arg(workspace_root().join("scripts/release.sh"))
        .arg(VERSION)
        .env("DIST", dist)
        .env("ANKUSA_RELEASE_BUILD", "0")
        .env("ANKUSA_RELEASE_PROFILE", profile)
        .current_dir(workspace_root()))
}

/// Every blob of an OCI layout, by file name (its digest).
fn blobs(layout: &Path) -> Vec<(String, Vec<u8>)> {
    let mut all: Vec<(String, Vec<u8>)> = std::fs::read_dir(layout.join("blobs/sha256"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    all.sort();
    all
}

#[test]
fn release_builds_a_pinned_module_and_an_image_a_registry_round_trips() {
    let dir = scratch_dir("release");
    let dist = dir.join("dist");
    release(&dist);

    // The module and its hash, as Envoy's `code.remote.sha256` pins it.
    let wasm = std::fs::read(filter_wasm()).unwrap();
    let name = format!("ankusa_filter-{VERSION}.wasm");
    assert_eq!(std::fs::read(dist.join(&name)).unwrap(), wasm);
    let digest = hex(&wasm);
    let sha_file = std::fs::read_to_string(dist.join(format!("{name}.sha256"))).unwrap();
    assert_eq!(sha_file, format!("{digest}  {name}\n"));
    let sums = std::fs::read_to_string(dist.join("SHA256SUMS")).unwrap();
    assert!(sums.contains(&format!("{digest}  {name}\n")), "{sums}");
    let arch = String::from_utf8(run(Command::new("uname").arg("-m")).stdout).unwrap();
    let store = dist.join(format!("ankusa-store-{VERSION}-linux-{}", arch.trim()));
    assert_eq!(
        std::fs::read(&store).unwrap(),
        std::fs::read(workspace_bin("ankusa-store")).unwrap()
    );
    assert!(dist
        .join(format!("ankusa-config-{VERSION}-linux-{}", arch.trim()))
        .exists());

    // The native module and its hash.
    let so = std::fs::read(ankusa_testkit::paths::native_module()).unwrap();
    let so_name = format!("libankusa_module-{VERSION}-linux-{}.so", arch.trim());
    assert_eq!(std::fs::read(dist.join(&so_name)).unwrap(), so);
    let so_sha = std::fs::read_to_string(dist.join(format!("{so_name}.sha256"))).unwrap();
    assert_eq!(so_sha, format!("{}  {so_name}\n", hex(&so)));
    assert!(
        sums.contains(&format!("{}  {so_name}\n", hex(&so))),
        "{sums}"
    );

    // skopeo reads the layout: one manifest with the wasm artifact media types.
    let layout = dist.join("oci");
    let src = format!("oci:{}:{VERSION}", layout.display());
    let manifest_bytes = skopeo(&["inspect", "--raw", &src]).stdout;
    let manifest: Value = serde_json::from_slice(&manifest_bytes).unwrap();
    assert_eq!(
        manifest["mediaType"],
        "application/vnd.oci.image.manifest.v1+json"
    );
    assert_eq!(manifest["config"]["mediaType"], CONFIG);
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1, "{manifest}");
    assert_eq!(layers[0]["mediaType"], LAYER);
    assert_eq!(layers[0]["digest"], format!("sha256:{digest}"));
    assert_eq!(layers[0]["size"], wasm.len());
    assert_eq!(
        manifest["annotations"]["org.opencontainers.image.version"],
        VERSION
    );
    let oci_digest =
        std::fs::read_to_string(dist.join(format!("ankusa_filter-{VERSION}.oci-digest"))).unwrap();
    assert_eq!(
        oci_digest,
        format!("sha256:{}\n", hex(&manifest_bytes)),
        "the digest a WasmPlugin pins"
    );
    let config: Value =
        serde_json::from_slice(&skopeo(&["inspect", "--config", "--raw", &src]).stdout).unwrap();
    assert_eq!(config["config"]["rootIds"][0], "ankusa");

    // A real registry on loopback, its storage in the test's folder; ended by PID.
    let port = free_port();
    let config_file = dir.join("registry.yml");
    std::fs::write(
        &config_file,
        format!(
            "version: 0.1\nlog: {{ level: warn, accesslog: {{ disabled: true }} }}\n\
             storage: {{ filesystem: {{ rootdirectory: {} }} }}\nhttp: {{ addr: 127.0.0.1:{port} }}\n",
            dir.join("registry").display()
        ),
    )
    .unwrap();
    let mut cmd = Command::new("docker-registry");
    cmd.arg("serve").arg(&config_file);
    let mut registry = Proc::spawn("docker-registry", cmd, &dir.join("registry.log"));
    registry.wait_for_port(port, Duration::from_secs(20));

    let remote = format!("docker://127.0.0.1:{port}/ankusa/filter:{VERSION}");
    skopeo(&["copy", "--dest-tls-verify=false", &src, &remote]);
    // What Istio's and Envoy Gateway's fetchers ask the registry for.
    let base = format!("http://127.0.0.1:{port}/v2/ankusa/filter");
    let accept = [("accept", "application/vnd.oci.image.manifest.v1+json")];
    let served = http::request(
        "GET",
        &format!("{base}/manifests/{VERSION}"),
        &accept,
        b"",
        Duration::from_secs(10),
    )
    .unwrap();
    assert_eq!(served.status, 200, "{}", served.text());
    assert_eq!(
        served.body, manifest_bytes,
        "the registry serves the manifest as built"
    );
    let layer = http::get(&format!("{base}/blobs/sha256:{digest}")).unwrap();
    assert_eq!(layer.status, 200);
    assert!(
        layer.body == wasm,
        "the registry serves the module as built"
    );

    let pulled = dir.join("pulled");
    skopeo(&[
        "copy",
        "--src-tls-verify=false",
        &remote,
        &format!("oci:{}:{VERSION}", pulled.display()),
    ]);
    assert_eq!(
        blobs(&pulled),
        blobs(&layout),
        "the pulled image differs from the release"
    );
    let index: Value =
        serde_json::from_slice(&std::fs::read(pulled.join("index.json")).unwrap()).unwrap();
    assert_eq!(
        index["manifests"][0]["digest"],
        format!("sha256:{}", hex(&manifest_bytes))
    );
    assert_eq!(
        index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"],
        VERSION
    );
    registry.stop(Duration::from_secs(5));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_version_is_a_usage_error() {
    for version in ["", "v1.0", "1.0", "1.0.0 ; true"] {
        let out = Command::new("bash")
            .arg(workspace_root().join("scripts/release.sh"))
            .arg(version)
            .env("DIST", scratch_dir("release-usage").join("dist"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{version:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("usage: scripts/release.sh VERSION"));
    }
}
