"""Validates Kubernetes manifests (a multi-document YAML stream on stdin)
offline, for agent/tests/packaging.rs.

Built-in kinds: kubernetes-validate (PyPI, pinned by `cargo xtask setup`),
strict mode, which rejects unknown fields, against each --k8s version's
schemas shipped in the package. Custom resources: the openAPIV3Schema of the
CRD files given with --crd (PodMonitor: prometheus-operator's, from the Go
module cache), made strict the same way: an object schema that lists its
properties rejects others unless it says x-kubernetes-preserve-unknown-fields,
as the API server's strict field validation does.

Prints one line per document and version; exits 1 when any fails.
"""

import argparse
import copy
import sys

import jsonschema
import kubernetes_validate
import yaml


def strict(schema):
    """The schema with additionalProperties: false on every object schema
    that lists properties and says nothing else about unknown ones."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def crd_schemas(paths):
    """(group/version, kind) -> strict schema, from CRD files."""
    out = {}
    for path in paths:
        with open(path) as f:
            for crd in yaml.safe_load_all(f):
                if not crd or crd.get("kind") != "CustomResourceDefinition":
                    continue
                spec = crd["spec"]
                for v in spec["versions"]:
                    schema = copy.deepcopy(v["schema"]["openAPIV3Schema"])
                    key = ("%s/%s" % (spec["group"], v["name"]), spec["names"]["kind"])
                    out[key] = strict(schema)
    return out


def name(doc):
    return "%s/%s" % (doc.get("kind"), (doc.get("metadata") or {}).get("name"))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--k8s", action="append", required=True)
    parser.add_argument("--crd", action="append", default=[])
    args = parser.parse_args()
    crds = crd_schemas(args.crd)
    docs = [d for d in yaml.safe_load_all(sys.stdin) if d]
    if not docs:
        print("no documents on stdin")
        return 1
    failed = 0
    for doc in docs:
        key = (doc.get("apiVersion"), doc.get("kind"))
        if key in crds:
            errors = sorted(
                jsonschema.Draft7Validator(crds[key]).iter_errors(doc),
                key=lambda e: list(e.path),
            )
            for e in errors:
                print("FAIL %s (CRD): %s: %s" % (name(doc), ".".join(map(str, e.path)), e.message))
            failed += bool(errors)
            if not errors:
                print("ok %s (CRD)" % name(doc))
            continue
        for version in args.k8s:
            try:
                kubernetes_validate.validate(doc, version, strict=True)
                print("ok %s (Kubernetes %s)" % (name(doc), version))
            except kubernetes_validate.ValidationError as e:
                print("FAIL %s (Kubernetes %s): %s: %s"
                      % (name(doc), version, ".".join(map(str, e.path)), e.message))
                failed += 1
            except kubernetes_validate.SchemaNotFoundError as e:
                print("FAIL %s: %s" % (name(doc), e.message))
                failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
