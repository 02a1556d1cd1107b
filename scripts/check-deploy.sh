#!/usr/bin/env bash
# Checks the deployment files: the Kubernetes manifests (strictly, against the
# Kubernetes schemas and the vendored CRD schemas), their references, their
# kustomize renderings, the embedded copies of the bootstrap, rules and
# dashboard, and the remote-fetch bootstrap with Envoy's own validator.
# `--write` rewrites the embedded copies first. See scripts/check_deploy.py.
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python scripts/check_deploy.py "$@"
.venv/bin/envoy --mode validate --disable-hot-restart -c envoy/edge-remote.yaml --log-level error >/dev/null
echo "check-deploy: envoy --mode validate envoy/edge-remote.yaml: ok"
