#!/usr/bin/env bash
# scripts/release.sh VERSION: a versioned, hash-pinned release in dist/:
#
#   ankusa_filter-VERSION.wasm         the filter (wasm32-wasip1, release build)
#   ankusa_filter-VERSION.wasm.sha256  its sha256 (`sha256sum` format): the hash an
#                                      Envoy `vm_config.code.remote.sha256`, an Istio
#                                      WasmPlugin or an Envoy Gateway policy pins
#   libankusa_module-VERSION-linux-ARCH.so
#                                      the native module (Envoy's dynamic modules
#                                      filter, profile release-native), for the Envoy
#                                      it was built for (docs/deploy.md, "Which shell");
#                                      install it as libankusa_module.so under
#                                      ENVOY_DYNAMIC_MODULES_SEARCH_PATH
#   libankusa_module-VERSION-linux-ARCH.so.sha256
#                                      its sha256 (`sha256sum` format)
#   ankusa-store-VERSION-linux-ARCH    the store service
#   ankusa-config-VERSION-linux-ARCH   the configuration checker
#   oci/                               an OCI image layout holding the module, tag
#                                      VERSION, as Istio and Envoy Gateway pull it: one
#                                      layer, the .wasm itself, media type
#                                      application/vnd.module.wasm.content.layer.v1+wasm,
#                                      config application/vnd.module.wasm.config.v1+json
#   ankusa_filter-VERSION.oci-digest   the image's manifest digest (sha256:…): the hash
#                                      an Istio WasmPlugin's `sha256` or an Envoy Gateway
#                                      `code.image.sha256` pins (without the sha256: prefix)
#   SHA256SUMS                         every file above but oci/
#
# Push the image with any OCI tool, e.g.
#   skopeo copy oci:dist/oci:VERSION docker://REGISTRY/ankusa/filter:VERSION
#
# Knobs (environment): DIST (default dist), ANKUSA_RELEASE_BUILD=0 to package
# what target/ already holds instead of building, ANKUSA_RELEASE_PROFILE
# (release, or debug for a quick check) for the two native binaries.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

VERSION=${1:-}
if [[ $# -ne 1 || ! "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "usage: scripts/release.sh VERSION   (VERSION like 1.2.3 or 1.2.3-rc.1, got '${1:-}')" >&2
  exit 2
fi
DIST=${DIST:-dist}
PROFILE=${ANKUSA_RELEASE_PROFILE:-release}
case "$PROFILE" in release | debug) ;; *)
  echo "ANKUSA_RELEASE_PROFILE must be release or debug, got '$PROFILE'" >&2
  exit 2
  ;;
esac
TARGET=${CARGO_TARGET_DIR:-target}

if [[ ${ANKUSA_RELEASE_BUILD:-1} != 0 ]]; then
  cargo build -q --release -p ankusa-filter --target wasm32-wasip1
  flag=(--release)
  [[ $PROFILE == debug ]] && flag=()
  cargo build -q "${flag[@]}" -p ankusa-store -p ankusa-config --bins
  cargo build -q --profile release-native -p ankusa-module
fi

wasm=$TARGET/wasm32-wasip1/release/ankusa_filter.wasm
native=$TARGET/release-native/libankusa_module.so
arch=$(uname -m)
for f in "$wasm" "$native" "$TARGET/$PROFILE/ankusa-store" "$TARGET/$PROFILE/ankusa-config"; do
  [[ -f $f ]] || { echo "release: $f is missing (build it, or leave ANKUSA_RELEASE_BUILD unset)" >&2; exit 1; }
done

rm -rf "$DIST"
mkdir -p "$DIST"
name=ankusa_filter-$VERSION.wasm
cp "$wasm" "$DIST/$name"
cp "$TARGET/$PROFILE/ankusa-store" "$DIST/ankusa-store-$VERSION-linux-$arch"
cp "$TARGET/$PROFILE/ankusa-config" "$DIST/ankusa-config-$VERSION-linux-$arch"
(cd "$DIST" && sha256sum "$name" >"$name.sha256")
so=libankusa_module-$VERSION-linux-$arch.so
cp "$native" "$DIST/$so"
(cd "$DIST" && sha256sum "$so" >"$so.sha256")

# The OCI image layout (image-spec v1.0 layout, one manifest). Every byte
# is a function of the .wasm and VERSION, so a rebuild of the same module
# gives the same manifest digest.
oci=$DIST/oci
blobs=$oci/blobs/sha256
mkdir -p "$blobs"
blob() { # FILE -> prints its digest hex, stores it under blobs/
  local d
  d=$(sha256sum "$1" | cut -d' ' -f1)
  cp "$1" "$blobs/$d"
  echo "$d"
}
size() { stat -c %s "$1"; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

wasm_digest=$(blob "$DIST/$name")
# The config Istio's and Envoy Gateway's fetchers read past: the module's
# kind, ABI and root id, after the module format it follows.
printf '{"type":"envoy_proxy","abiVersions":["v0.2.1"],"config":{"rootIds":["ankusa"]}}' >"$work/config.json"
config_digest=$(blob "$work/config.json")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.module.wasm.config.v1+json","digest":"sha256:%s","size":%d},"layers":[{"mediaType":"application/vnd.module.wasm.content.layer.v1+wasm","digest":"sha256:%s","size":%d,"annotations":{"org.opencontainers.image.title":"plugin.wasm"}}],"annotations":{"org.opencontainers.image.title":"ankusa-filter","org.opencontainers.image.version":"%s"}}' \
  "$config_digest" "$(size "$work/config.json")" "$wasm_digest" "$(size "$DIST/$name")" "$VERSION" >"$work/manifest.json"
manifest_digest=$(blob "$work/manifest.json")
printf 'sha256:%s\n' "$manifest_digest" >"$DIST/ankusa_filter-$VERSION.oci-digest"
printf '{"imageLayoutVersion":"1.0.0"}' >"$oci/oci-layout"
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%d,"annotations":{"org.opencontainers.image.ref.name":"%s"}}]}' \
  "$manifest_digest" "$(size "$work/manifest.json")" "$VERSION" >"$oci/index.json"

(cd "$DIST" && find . -maxdepth 1 -type f -printf '%f\n' | sort | xargs sha256sum >SHA256SUMS.tmp && mv SHA256SUMS.tmp SHA256SUMS)

echo "release $VERSION in $DIST/"
echo "  module   $name  sha256 $wasm_digest"
echo "  native   $so  sha256 $(cut -d' ' -f1 "$DIST/$so.sha256")"
echo "  image    oci:$oci:$VERSION  manifest sha256:$manifest_digest"
