//! The two floor filters `scripts/bench-edge.sh` compares the Ankusa filter
//! with (crates under `bench/`), run in the edge template in its place: the
//! same listener, route, clusters and wasm VM settings, another module.

use ankusa_testkit::envoy::{Edge, EdgeSpec};
use ankusa_testkit::paths;
use std::path::PathBuf;

/// `bench/noop-filter`: passes every request, counts it in [`NOOP_REQUESTS`].
pub const NOOP: &str = "ankusa_bench_noop";
/// `bench/callout-floor`: one GET per request on the `ankusa_store` cluster
/// (or, configured with `/v1/hit`, one real hit), the request held until its
/// answer; counts in [`CALLOUT_CALLS`] and [`CALLOUT_ANSWERS`].
pub const CALLOUT: &str = "ankusa_bench_callout";

pub const NOOP_REQUESTS: &str = "bench_noop_requests_total";
/// The configuration that makes [`NOOP`] the host-call floor: every host
/// call a node-scope hook of the Ankusa filter makes, with fixed values.
pub const NODE_CALLS: &str = "node host calls";
pub const CALLOUT_CALLS: &str = "bench_callout_calls_total";
pub const CALLOUT_ANSWERS: &str = "bench_callout_answers_total";
/// The configuration that makes [`CALLOUT`] the hit floor: a real hit on
/// the store's `/v1/hit` per request, a fresh claim each time.
pub const HIT_TARGET: &str = "ankusa_store /v1/hit";
/// The callout floor's `/v1/hit` calls answered other than 200, or reset.
pub const CALLOUT_NOT_OK: &str = "bench_callout_not_ok_total";

/// The release wasm of floor `name` ([`NOOP`] or [`CALLOUT`]), or how to build it.
pub fn wasm(name: &str) -> Result<PathBuf, String> {
    let path = paths::target_dir()
        .join("wasm32-wasip1/release")
        .join(format!("{name}.wasm"));
    if path.exists() {
        Ok(path)
    } else {
        Err(format!(
            "{} is missing: run `cargo build -p {} --target wasm32-wasip1 --release` (scripts/test.sh and scripts/bench-edge.sh do)",
            path.display(),
            name.replace('_', "-")
        ))
    }
}

/// `bootstrap` (the rendered edge template) loading `module` instead of the Ankusa filter.
pub fn swap_module(bootstrap: &str, module: &std::path::Path) -> Result<String, String> {
    let from = format!("filename: \"{}\"", paths::filter_wasm().display());
    if !bootstrap.contains(&from) {
        return Err(format!("the bootstrap has no `{from}`"));
    }
    Ok(bootstrap.replace(&from, &format!("filename: \"{}\"", module.display())))
}

/// Starts (without waiting) an edge from `spec` with floor `name` in the
/// filter's place; `spec.filter_config` becomes the floor's configuration.
pub fn spawn(spec: EdgeSpec, name: &str) -> Result<Edge, String> {
    let tweak = floor(&spec, name)?;
    Ok(Edge::spawn_with(spec, tweak))
}

/// [`spawn`], and waits until the edge is ready (on other ports if one was taken).
pub fn start(spec: EdgeSpec, name: &str) -> Result<Edge, String> {
    let tweak = floor(&spec, name)?;
    Ok(Edge::start_with(spec, tweak))
}

/// What puts floor `name` in the filter's place in a bootstrap rendered
/// from `spec`: a tweak for [`Edge::start_with`], to compose with others.
pub fn floor(spec: &EdgeSpec, name: &str) -> Result<impl Fn(String) -> String, String> {
    let module = wasm(name)?;
    // Rendered once here so a template without the filter line is an error, not a panic in Envoy.
    let probe = ankusa_testkit::envoy::render(spec, &paths::filter_wasm());
    swap_module(&probe, &module)?;
    Ok(move |b: String| swap_module(&b, &module).unwrap_or(b))
}

/// The native floors' build (`cargo build -p ankusa-module --profile
/// release-floor --features floor`), copied beside the module as
/// `libankusa_floor.so` (scripts/test.sh and scripts/bench-edge.sh do):
/// Envoy loads a dynamic module by name.
pub const NATIVE_FLOOR: &str = "ankusa_floor";

/// The native shell's bootstrap loading the floors' build instead of the module.
pub fn native_floor(bootstrap: String) -> String {
    bootstrap.replace("name: ankusa_module", &format!("name: {NATIVE_FLOOR}"))
}

/// The native floors' build where Envoy finds it, or how to build it.
pub fn native_floor_so() -> Result<PathBuf, String> {
    let path = paths::target_dir().join(format!("release-native/lib{NATIVE_FLOOR}.so"));
    if path.exists() {
        Ok(path)
    } else {
        Err(format!(
            "{} is missing: run `cargo build -p ankusa-module --profile release-floor --features floor` and copy target/release-floor/libankusa_module.so there (scripts/test.sh and scripts/bench-edge.sh do)",
            path.display()
        ))
    }
}
