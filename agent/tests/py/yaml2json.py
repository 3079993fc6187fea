"""A multi-document YAML stream on stdin as one JSON list on stdout, for
agent/tests/packaging.rs (PyYAML from the venv `cargo xtask setup` makes)."""

import json
import sys

import yaml

json.dump([d for d in yaml.safe_load_all(sys.stdin) if d], sys.stdout)
