//! Where the workspace's built artefacts and the Envoy binary live.

use std::path::PathBuf;

/// The workspace root (the folder holding the top `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    // testkit/ sits directly under the root.
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.parent().map(PathBuf::from).unwrap_or(here)
}

/// `CARGO_TARGET_DIR`, or `<root>/target`.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

/// A binary of this workspace (`ankusa-store`, `intake`, …), built by
/// `cargo build --bins` (debug) or `--release`; the newer one wins, unless
/// `ANKUSA_PROFILE` (`debug` or `release`) names the one to use.
pub fn workspace_bin(name: &str) -> PathBuf {
    if let Some(profile) = std::env::var_os("ANKUSA_PROFILE") {
        let path = target_dir().join(&profile).join(name);
        assert!(
            path.exists(),
            "{} is missing (ANKUSA_PROFILE={}): build it first",
            path.display(),
            profile.to_string_lossy()
        );
        return path;
    }
    let candidates = [
        target_dir().join("debug").join(name),
        target_dir().join("release").join(name),
    ];
    candidates
        .iter()
        .filter_map(|p| p.metadata().and_then(|m| m.modified()).ok().map(|t| (t, p.clone())))
        .max()
        .map(|(_, p)| p)
        .unwrap_or_else(|| {
            panic!("{name} is not built under {}: run `cargo build --bins` first (scripts/test.sh does)", target_dir().display())
        })
}

/// The filter as Envoy loads it: `target/wasm32-wasip1/release/ankusa_filter.wasm`.
pub fn filter_wasm() -> PathBuf {
    let path = target_dir().join("wasm32-wasip1/release/ankusa_filter.wasm");
    assert!(
        path.exists(),
        "{} is missing: run `cargo build -p ankusa-filter --target wasm32-wasip1 --release` first (scripts/test.sh does)",
        path.display()
    );
    path
}

/// The native module as Envoy loads it: `target/release-native/libankusa_module.so`.
pub fn native_module() -> PathBuf {
    let path = target_dir().join("release-native/libankusa_module.so");
    assert!(
        path.exists(),
        "{} is missing: run `cargo build -p ankusa-module --profile release-native` first (scripts/test.sh does)",
        path.display()
    );
    path
}

/// The Envoy binary: `$ENVOY_BIN`, else `<root>/.venv/bin/envoy` (scripts/setup.sh installs it).
pub fn envoy_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("ENVOY_BIN") {
        return PathBuf::from(p);
    }
    let path = workspace_root().join(".venv/bin/envoy");
    assert!(
        path.exists(),
        "{} is missing: run scripts/setup.sh",
        path.display()
    );
    path
}
