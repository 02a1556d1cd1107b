#!/usr/bin/env python3
"""A CustomResourceDefinition's openAPIV3Schema as a strict JSON Schema.

    openapi2jsonschema.py CRD.yaml KIND VERSION > KIND.json

Strict like the API server's strict field validation: an object that lists
its properties and doesn't preserve unknown fields refuses any other key (a
misspelt field is an error, not silently pruned); `nullable` becomes a null
type; the root lists apiVersion, kind and metadata, which a CRD's schema
may leave out; a pattern written `^(?i)…` (valid in Go, refused by Python's
re, which check-deploy validates with) is written `(?i)^…`, which
means the same. CEL rules (x-kubernetes-validations) are not evaluated. Needs PyYAML
(in .venv with kubernetes-validate). The vendored files beside it were made
with it from the sources README.md names.
"""
import json
import sys

import yaml


def strict(node):
    if isinstance(node, list):
        return [strict(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: strict(v) for k, v in node.items()}
    pattern = out.get("pattern")
    if isinstance(pattern, str) and pattern.startswith("^(?i)"):
        out["pattern"] = "(?i)^" + pattern[len("^(?i)"):]
    if out.pop("nullable", False) and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def main(path, kind, version):
    for doc in yaml.safe_load_all(open(path)):
        if not doc or doc.get("kind") != "CustomResourceDefinition":
            continue
        spec = doc["spec"]
        if spec["names"]["kind"] != kind:
            continue
        for v in spec["versions"]:
            if v["name"] == version:
                root = dict(v["schema"]["openAPIV3Schema"])
                root["properties"] = {
                    "apiVersion": {"type": "string"},
                    "kind": {"type": "string"},
                    "metadata": {"type": "object"},
                    **root.get("properties", {}),
                }
                schema = strict(root)
                schema["$schema"] = "http://json-schema.org/draft-07/schema#"
                schema["title"] = f"{kind} {spec['group']}/{version}"
                json.dump(schema, sys.stdout, indent=1, sort_keys=True)
                sys.stdout.write("\n")
                return
    sys.exit(f"no {kind} {version} in {path}")


if __name__ == "__main__":
    main(*sys.argv[1:])
