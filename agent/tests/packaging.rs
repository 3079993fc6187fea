//! What `packaging/` ships beside the binary, checked without root:
//!
//! - the Grafana dashboards (`packaging/grafana/`): standard dashboard JSON
//!   (schema version, unique panel ids, a `$datasource` of type prometheus,
//!   the `instance`, `rs_nm`, `cl_role` variables), every metric a query
//!   names is in docs/agent.md's table (or one Prometheus makes itself), and
//!   every metric of that table is on some dashboard. That each query returns
//!   series from a real agent is the root suite's (tests/root/dashboards.rs).
//! - the Kubernetes manifests (`packaging/kubernetes/`): `kubectl kustomize`
//!   builds them, kubernetes-validate (strict) and the Prometheus Operator's
//!   PodMonitor CRD schema accept them (both installed by `cargo xtask
//!   setup`), and reject a misspelled field; the pod keeps the systemd
//!   unit's capability set and memory limit; its config parses.
//! - the PrometheusRule of `packaging/prometheus/` passes the operator's
//!   PrometheusRule CRD schema (copied by setup beside the PodMonitor's).
//! - the Helm chart (`packaging/helm/mdiag/`): `helm lint --strict`, its
//!   renderings (defaults, and every option on) pass the same schemas (and
//!   the PrometheusRule CRD's), its pod is the kustomize pod, its
//!   NetworkPolicy admits only the configured Prometheus to the metrics
//!   port, and it refuses values that cannot work.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers: a failure is the test failing"
)]

use std::{
    collections::BTreeSet,
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

#[path = "../../tests/src/dashboards.rs"]
mod dashboards;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Metric names of docs/agent.md's table (first column, each `name`): the
/// agent's own (`mdiag_`) and the standard process families (`process_`).
fn documented() -> BTreeSet<String> {
    let doc = std::fs::read_to_string(repo().join("docs/agent.md")).expect("docs/agent.md");
    let table = doc
        .split("| metric | type | labels | what |")
        .nth(1)
        .expect("docs/agent.md has the metrics table");
    let mut names = BTreeSet::new();
    for line in table.lines().skip(2).take_while(|l| l.starts_with('|')) {
        let first = line.split('|').nth(1).unwrap_or_default();
        names.extend(
            first
                .split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_owned)
                .filter(|n| n.starts_with("mdiag_") || n.starts_with("process_")),
        );
    }
    assert!(names.len() >= 30, "{names:?}");
    names
}

/// Series Prometheus adds to every scrape itself.
const PROMETHEUS_OWN: &[&str] = &["up", "scrape_samples_scraped", "scrape_duration_seconds"];

/// The documented metric `name` refers to: itself, or the histogram whose
/// `_bucket`/`_sum`/`_count` it is.
fn documented_as(name: &str, docs: &BTreeSet<String>) -> Option<String> {
    if docs.contains(name) {
        return Some(name.to_owned());
    }
    ["_bucket", "_sum", "_count"]
        .iter()
        .filter_map(|s| name.strip_suffix(s))
        .find(|base| docs.contains(*base))
        .map(str::to_owned)
}

#[test]
fn dashboards_are_standard_json_with_the_shared_variables() {
    let mut uids = BTreeSet::new();
    for (name, d) in dashboards::load() {
        assert!(uids.insert(d["uid"].to_string()), "{name}: uid repeated");
        let schema = d["schemaVersion"].as_u64().unwrap_or(0);
        assert!(
            (36..=41).contains(&schema),
            "{name}: schemaVersion {schema}"
        );
        let vars = d["templating"]["list"].as_array().expect("templating");
        let var = |n: &str| vars.iter().find(|v| v["name"] == n);
        let ds = var("datasource").unwrap_or_else(|| panic!("{name}: no $datasource"));
        assert_eq!(ds["type"], "datasource", "{name}");
        assert_eq!(ds["query"], "prometheus", "{name}");
        for v in ["instance", "rs_nm", "cl_role"] {
            let v = var(v).unwrap_or_else(|| panic!("{name}: no ${v}"));
            assert_eq!(v["datasource"]["uid"], "${datasource}", "{name}: {v}");
        }
        let mut ids = BTreeSet::new();
        for p in dashboards::panels(&d) {
            let id = p["id"].as_u64().expect("a panel id");
            assert!(ids.insert(id), "{name}: panel id {id} repeated");
            let targets = p["targets"].as_array();
            if p["type"] == "row" {
                assert!(targets.is_none(), "{name}: row {id} has queries");
                continue;
            }
            assert!(p["title"].as_str().is_some_and(|t| !t.is_empty()));
            let targets = targets.unwrap_or_else(|| panic!("{name}: panel {id} no queries"));
            assert!(!targets.is_empty(), "{name}: panel {id} has no queries");
            for t in std::iter::once(p).chain(targets) {
                assert_eq!(t["datasource"]["type"], "prometheus", "{name}: {id}");
                assert_eq!(t["datasource"]["uid"], "${datasource}", "{name}: {id}");
            }
        }
    }
}

#[test]
fn every_dashboard_metric_is_documented_and_every_documented_metric_shown() {
    let docs = documented();
    let mut queries = dashboards::queries();
    let variables = dashboards::variable_queries();
    assert_eq!(variables.len(), 9, "{variables:?}");
    queries.extend(variables);
    let builtin = ["__rate_interval", "__interval", "__range"];
    let mut shown = BTreeSet::new();
    for q in &queries {
        assert!(!q.expr.trim().is_empty(), "{q}: empty");
        // Tables and single values show the last value: instant queries.
        let instant = matches!(q.kind.as_str(), "table" | "stat" | "bargauge" | "variable");
        assert_eq!(q.instant, instant, "{q}: a {} panel", q.kind);
        for v in dashboards::variables(&q.expr) {
            let known = ["datasource", "instance", "rs_nm", "cl_role"];
            assert!(
                known.contains(&v.as_str()) || builtin.contains(&v.as_str()),
                "{q}: ${v} is not a variable of the dashboards"
            );
        }
        let names = dashboards::metric_names(&q.expr);
        assert!(!names.is_empty(), "{q}: no metric");
        for n in names {
            match documented_as(&n, &docs) {
                Some(d) => {
                    shown.insert(d);
                }
                None => assert!(
                    PROMETHEUS_OWN.contains(&n.as_str()),
                    "{q}: {n} is not in docs/agent.md's metrics table"
                ),
            }
        }
    }
    let missing: Vec<_> = docs.difference(&shown).collect();
    assert!(missing.is_empty(), "on no dashboard: {missing:?}");
}

#[test]
fn the_metric_check_sees_names_and_only_names() {
    let docs = documented();
    let names = dashboards::metric_names(
        r#"histogram_quantile(0.99, sum by (instance, le) (rate(mdiag_sched_runqueue_delay_seconds_bucket{target=~"a|b", kind!="x"}[5m] offset 1m))) / on(instance) group_left(rs_nm) mdiag_target_info + 1e-3 * max without (job) (mdiag_sched_migratons_total)"#,
    );
    assert_eq!(
        names,
        [
            "mdiag_sched_migratons_total",
            "mdiag_sched_runqueue_delay_seconds_bucket",
            "mdiag_target_info"
        ]
    );
    // A misspelled name is not documented: the test above would fail on it.
    assert_eq!(documented_as(&names[0], &docs), None);
    assert_eq!(
        documented_as(&names[1], &docs).as_deref(),
        Some("mdiag_sched_runqueue_delay_seconds")
    );
    assert_eq!(
        dashboards::substitute(
            "rate(x{i=~\"$instance\"}[$__rate_interval]) ${rs_nm}",
            &[
                ("instance", "h:1"),
                ("__rate", "BAD"),
                ("__rate_interval", "5s"),
                ("rs_nm", "rs0"),
            ]
        ),
        "rate(x{i=~\"h:1\"}[5s]) rs0"
    );
}

// ------------------------------------------------------------ kubernetes ----

/// `kubectl kustomize packaging/kubernetes` (no cluster needed).
fn kustomize() -> String {
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(repo().join("packaging/kubernetes"))
        .output()
        .expect("run kubectl (install it: https://kubernetes.io/docs/tasks/tools/)");
    assert!(
        out.status.success(),
        "kubectl kustomize: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 YAML")
}

/// A venv or directory `cargo xtask setup` made: `env` when set, else
/// `target/<default>`.
fn setup_dir(env: &str, default: &str, inside: &str) -> PathBuf {
    let p =
        std::env::var_os(env).map_or_else(|| repo().join("target").join(default), PathBuf::from);
    assert!(
        p.join(inside).exists(),
        "no {} in {}: run `cargo xtask setup`",
        inside,
        p.display()
    );
    p
}

/// Runs `script` of agent/tests/py with the venv's Python, `yaml` on stdin.
fn python(script: &str, args: &[&std::ffi::OsStr], yaml: &str) -> (bool, String) {
    let venv = setup_dir("MDIAG_PY_VENV", "py-venv", "bin/python");
    let mut child = Command::new(venv.join("bin/python"))
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/py")
                .join(script),
        )
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the venv's python");
    let mut stdin = child.stdin.take().expect("piped stdin");
    stdin.write_all(yaml.as_bytes()).expect("write the YAML");
    drop(stdin);
    let out = child.wait_with_output().expect("wait for python");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// The validator on `yaml`: (accepted, its report).
fn validate(yaml: &str) -> (bool, String) {
    let schemas = setup_dir(
        "MDIAG_K8S_SCHEMAS",
        "k8s-schemas",
        "monitoring.coreos.com_podmonitors.yaml",
    );
    let crds = [
        schemas.join("monitoring.coreos.com_podmonitors.yaml"),
        schemas.join("monitoring.coreos.com_prometheusrules.yaml"),
    ];
    let mut args: Vec<&std::ffi::OsStr> = ["--k8s", "1.28", "--k8s", "1.37"]
        .iter()
        .map(std::ffi::OsStr::new)
        .collect();
    for crd in &crds {
        args.extend([std::ffi::OsStr::new("--crd"), crd.as_os_str()]);
    }
    python("k8s_validate.py", &args, yaml)
}

#[test]
fn kubernetes_manifests_pass_the_schemas_and_a_misspelled_field_does_not() {
    let yaml = kustomize();
    let (ok, report) = validate(&yaml);
    assert!(ok, "{report}");
    for kind in [
        "Namespace",
        "ServiceAccount",
        "ConfigMap",
        "DaemonSet",
        "PodMonitor",
    ] {
        assert!(report.contains(&format!("ok {kind}/")), "{kind}: {report}");
    }
    // The validator rejects what the API server's strict field validation
    // would: a misspelled field of a built-in kind and of the CRD, and a
    // wrong type.
    for (from, to) in [
        ("readOnlyRootFilesystem", "readOnlyRootFileSystem"),
        ("podMetricsEndpoints", "podMetricEndpoints"),
        ("containerPort: 9219", "containerPort: \"9219\""),
    ] {
        assert!(yaml.contains(from), "{from} not in the manifests");
        let (ok, report) = validate(&yaml.replacen(from, to, 1));
        assert!(!ok, "{to} accepted:\n{report}");
        assert!(report.contains("FAIL"), "{report}");
    }
}

/// The PrometheusRule of `packaging/prometheus/` (the alerting rules for
/// the Prometheus Operator) passes the operator's CRD schema, and a
/// misspelled field of a rule does not.
#[test]
fn the_prometheus_rule_passes_the_operator_schema() {
    let yaml =
        std::fs::read_to_string(repo().join("packaging/prometheus/mdiag-prometheusrule.yaml"))
            .expect("the PrometheusRule");
    let (ok, report) = validate(&yaml);
    assert!(ok, "{report}");
    assert!(report.contains("ok PrometheusRule/"), "{report}");
    for (from, to) in [("annotations:", "anotations:"), ("for: 15m", "for: 15")] {
        let (ok, report) = validate(&yaml.replacen(from, to, 1));
        assert!(!ok, "{to} accepted:\n{report}");
    }
}

/// The kustomize output as JSON (the venv's PyYAML reads it).
fn manifests(yaml: &str) -> Vec<serde_json::Value> {
    let (ok, json) = python("yaml2json.py", &[], yaml);
    assert!(ok, "{json}");
    serde_json::from_str(&json).expect("JSON from yaml2json.py")
}

#[test]
fn the_pod_keeps_the_systemd_unit_s_privileges_and_budget() {
    let docs = manifests(&kustomize());
    let ds = docs
        .iter()
        .find(|d| d["kind"] == "DaemonSet")
        .expect("a DaemonSet");
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(pod["hostPID"], true);
    let c = &pod["containers"][0];
    let sc = &c["securityContext"];
    assert_eq!(sc["privileged"], false);
    assert_eq!(sc["allowPrivilegeEscalation"], false);
    assert_eq!(sc["readOnlyRootFilesystem"], true);
    assert_eq!(sc["capabilities"]["drop"], serde_json::json!(["ALL"]));
    let unit = std::fs::read_to_string(repo().join("packaging/systemd/mdiag-agent.service"))
        .expect("the unit");
    let unit_caps: BTreeSet<String> = unit
        .lines()
        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .expect("CapabilityBoundingSet=")
        .split_whitespace()
        .map(|c| c.trim_start_matches("CAP_").to_owned())
        .collect();
    let pod_caps: BTreeSet<String> = sc["capabilities"]["add"]
        .as_array()
        .expect("capabilities.add")
        .iter()
        .filter_map(|c| c.as_str().map(str::to_owned))
        .collect();
    assert_eq!(pod_caps, unit_caps);
    let max = unit
        .lines()
        .find_map(|l| l.strip_prefix("MemoryMax="))
        .expect("MemoryMax=");
    assert_eq!(
        c["resources"]["limits"]["memory"],
        format!("{}i", max.trim())
    );
    // The config the pod mounts parses, and listens beyond loopback.
    let cm = docs
        .iter()
        .find(|d| d["kind"] == "ConfigMap")
        .expect("a ConfigMap");
    let text = cm["data"]["mdiag.toml"].as_str().expect("mdiag.toml");
    let config = mdiag::agent::config::AgentConfig::parse(text, Path::new("mdiag.toml"))
        .expect("the pod's mdiag.toml parses");
    assert!(config.listen.ip().is_unspecified(), "{config:?}");
    let port = config.listen.port();
    assert_eq!(c["ports"][0]["containerPort"], port);
    let mounts = c["volumeMounts"].as_array().expect("volumeMounts");
    assert!(
        mounts
            .iter()
            .any(|m| m["mountPath"] == config.state_dir.to_string_lossy().as_ref()),
        "state_dir is not a volume: {mounts:?}"
    );
}

// ------------------------------------------------------------------ helm ----

#[path = "support/pki.rs"]
mod support;

#[path = "support/helm.rs"]
mod helm;
use helm::{CHART, helm, template as helm_template};

fn rendered(args: &[&str]) -> String {
    let (ok, yaml) = helm_template(args);
    assert!(ok, "helm template {args:?}: {yaml}");
    yaml
}

/// A values file with `text`, alive as long as the returned guard.
fn values_file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().expect("a temporary file");
    f.write_all(text.as_bytes()).expect("write the values");
    f
}

/// A Prometheus rules file, as `-f` takes it (top-level `groups`).
const RULES_FILE: &str = "groups:\n  - name: mdiag-test\n    rules:\n      - alert: MdiagAgentDown\n        expr: up{job=\"mdiag\"} == 0\n        for: 5m\n        labels:\n          severity: warning\n";

fn kinds(docs: &[serde_json::Value]) -> BTreeSet<String> {
    docs.iter()
        .filter_map(|d| d["kind"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn helm_chart_lints_and_every_rendering_passes_the_schemas() {
    let out = helm()
        .args(["lint", "--strict", CHART])
        .output()
        .expect("run helm lint");
    assert!(
        out.status.success(),
        "helm lint: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let defaults = rendered(&[]);
    let (ok, report) = validate(&defaults);
    assert!(ok, "{report}");
    assert_eq!(
        kinds(&manifests(&defaults)),
        [
            "ConfigMap",
            "DaemonSet",
            "NetworkPolicy",
            "PodMonitor",
            "ServiceAccount"
        ]
        .map(str::to_owned)
        .into(),
    );
    let rules = values_file(RULES_FILE);
    let path = rules.path().to_str().expect("UTF-8 path");
    let all = rendered(&[
        "-f",
        path,
        "--set",
        "prometheusRule.enabled=true,prometheusRule.docsUrl=https://docs.example.org/mdiag,mongodb.uri=mongodb://u:p@mongod.example:27017",
        "--set",
        "priorityClassName=system-node-critical,podMonitor.labels.release=kps",
    ]);
    let (ok, report) = validate(&all);
    assert!(ok, "{report}");
    let docs = manifests(&all);
    assert!(kinds(&docs).contains("PrometheusRule") && kinds(&docs).contains("Secret"));
    let rule = docs.iter().find(|d| d["kind"] == "PrometheusRule").unwrap();
    assert_eq!(
        rule["spec"]["groups"][0]["rules"][0]["alert"],
        "MdiagAgentDown"
    );
    let secret = docs.iter().find(|d| d["kind"] == "Secret").unwrap();
    let ds = docs.iter().find(|d| d["kind"] == "DaemonSet").unwrap();
    let env = &ds["spec"]["template"]["spec"]["containers"][0]["envFrom"][0]["secretRef"];
    assert_eq!(env["name"], secret["metadata"]["name"]);
    // The CRD's schema can fail the rule too: a misspelled field.
    let (ok, report) = validate(&all.replacen("expr:", "exprr:", 1));
    assert!(!ok && report.contains("FAIL PrometheusRule/"), "{report}");
}

#[test]
fn helm_chart_refuses_values_that_cannot_work() {
    // Rules switched on without rules.
    let (ok, text) = helm_template(&["--set", "prometheusRule.enabled=true"]);
    assert!(
        !ok && text.contains("prometheusRule.enabled needs rules"),
        "{text}"
    );
    // A metrics port the config does not listen on.
    let (ok, text) = helm_template(&["--set", "metricsPort=9300"]);
    assert!(!ok && text.contains("0.0.0.0:9300"), "{text}");
    // Both moved together work.
    let config = std::fs::read_to_string(repo().join("packaging/kubernetes/mdiag.toml"))
        .unwrap()
        .replace("0.0.0.0:9219", "0.0.0.0:9300");
    let values = values_file(&format!(
        "metricsPort: 9300\nconfig: |\n{}",
        config
            .lines()
            .map(|l| format!("  {l}\n"))
            .collect::<String>()
    ));
    let yaml = rendered(&["-f", values.path().to_str().unwrap()]);
    let docs = manifests(&yaml);
    let ds = docs.iter().find(|d| d["kind"] == "DaemonSet").unwrap();
    assert_eq!(
        ds["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"],
        9300
    );
}

/// The pod of a DaemonSet with what legitimately differs between the chart
/// and kustomize blanked: labels and annotations, the image, the
/// ConfigMap's name (kustomize adds a content hash).
fn comparable_pod(ds: &serde_json::Value) -> serde_json::Value {
    let mut pod = ds["spec"]["template"].clone();
    pod["metadata"] = serde_json::Value::Null;
    pod["spec"]["containers"][0]["image"] = serde_json::Value::Null;
    for v in pod["spec"]["volumes"].as_array_mut().unwrap() {
        if v.get("configMap").is_some() {
            v["configMap"]["name"] = serde_json::Value::Null;
        }
    }
    pod
}

#[test]
fn helm_chart_renders_the_kustomize_pod_and_config() {
    let ours = manifests(&rendered(&[]));
    let theirs = manifests(&kustomize());
    let ds = |docs: &[serde_json::Value]| {
        docs.iter()
            .find(|d| d["kind"] == "DaemonSet")
            .cloned()
            .expect("a DaemonSet")
    };
    assert_eq!(comparable_pod(&ds(&ours)), comparable_pod(&ds(&theirs)));
    let cm = |docs: &[serde_json::Value]| {
        docs.iter()
            .find(|d| d["kind"] == "ConfigMap")
            .map(|c| c["data"]["mdiag.toml"].clone())
            .expect("a ConfigMap")
    };
    assert_eq!(cm(&ours), cm(&theirs));
    let pm = |docs: &[serde_json::Value]| {
        let mut pm = docs
            .iter()
            .find(|d| d["kind"] == "PodMonitor")
            .cloned()
            .expect("a PodMonitor");
        pm["spec"]["selector"] = serde_json::Value::Null;
        pm["spec"].clone()
    };
    assert_eq!(pm(&ours), pm(&theirs));
    // The chart's image is its appVersion, the workspace's version.
    let image = ds(&ours)["spec"]["template"]["spec"]["containers"][0]["image"].clone();
    assert_eq!(
        image,
        format!("registry.example.com/mdiag:{}", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn the_network_policy_admits_only_the_scraping_prometheus_to_the_metrics_port() {
    let values = values_file(
        "networkPolicy:\n  prometheus:\n    namespaceSelector:\n      matchLabels:\n        kubernetes.io/metadata.name: monitoring\n    podSelector:\n      matchLabels:\n        app.kubernetes.io/name: prometheus\n        prometheus: k8s\n",
    );
    let yaml = rendered(&["-f", values.path().to_str().unwrap()]);
    let (ok, report) = validate(&yaml);
    assert!(ok, "{report}");
    let docs = manifests(&yaml);
    let np = docs.iter().find(|d| d["kind"] == "NetworkPolicy").unwrap();
    let ds = docs.iter().find(|d| d["kind"] == "DaemonSet").unwrap();
    // It selects exactly the agent's pods.
    assert_eq!(
        np["spec"]["podSelector"]["matchLabels"],
        ds["spec"]["selector"]["matchLabels"]
    );
    let pod_labels = ds["spec"]["template"]["metadata"]["labels"]
        .as_object()
        .unwrap();
    for (k, v) in np["spec"]["podSelector"]["matchLabels"]
        .as_object()
        .unwrap()
    {
        assert_eq!(pod_labels.get(k), Some(v), "{k}");
    }
    // Ingress only (egress to mongod stays open), one rule: the configured
    // Prometheus (both selectors in one peer: pods of those namespaces),
    // on the container's metrics port.
    assert_eq!(np["spec"]["policyTypes"], serde_json::json!(["Ingress"]));
    let ingress = np["spec"]["ingress"].as_array().unwrap();
    assert_eq!(ingress.len(), 1);
    assert_eq!(
        ingress[0]["from"],
        serde_json::json!([{
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus", "prometheus": "k8s"}},
        }])
    );
    let port = &ds["spec"]["template"]["spec"]["containers"][0]["ports"][0];
    assert_eq!(
        ingress[0]["ports"],
        serde_json::json!([{"port": port["containerPort"], "protocol": "TCP"}])
    );
    // Switched off, it is gone.
    let off = manifests(&rendered(&["--set", "networkPolicy.enabled=false"]));
    assert!(!kinds(&off).contains("NetworkPolicy"));
}

/// Values that switch on everything the web configuration does.
const WEB_VALUES: &str = "webConfig:\n  enabled: true\n  tls:\n    secretName: mdiag-tls\n    clientAuthType: RequireAndVerifyClientCert\n  basicAuthUsers:\n    prometheus: $2y$10$X0h1gDsPszWURQaxFh.zoubFi6DXncSjhoQNJgRrnGs7EsimhC7zG\n  scrape:\n    basicAuthSecret: mdiag-scrape\n    serverName: mdiag-agent\n    clientCertSecret: prometheus-client\n";

#[test]
fn helm_chart_serves_metrics_with_tls_and_basic_auth_when_asked() {
    let values = values_file(WEB_VALUES);
    let yaml = rendered(&["-f", values.path().to_str().unwrap()]);
    let (ok, report) = validate(&yaml);
    assert!(ok, "{report}");
    let docs = manifests(&yaml);
    let secret = docs
        .iter()
        .find(|d| d["kind"] == "Secret" && d["metadata"]["name"] == "mdiag-agent-web-config")
        .expect("the web config Secret");
    // The file the chart writes is one the agent accepts, once the TLS
    // Secret's files are where the pod mounts them.
    let dir = tempfile::tempdir().unwrap();
    // The TLS Secret's keys.
    support::Ca::new().write(
        dir.path(),
        &["mdiag-agent"],
        ["tls.crt", "tls.key", "ca.crt"],
    );
    let file = secret["stringData"]["web-config.yml"]
        .as_str()
        .unwrap()
        .replace("/etc/mdiag-tls", dir.path().to_str().unwrap());
    let web = mdiag::agent::web_config::WebConfig::parse(&file, &dir.path().join("web-config.yml"))
        .unwrap_or_else(|e| panic!("{e}\n{file}"));
    assert!(web.tls.is_some() && web.authenticates(), "{web:?}");
    assert_eq!(web.users.keys().collect::<Vec<_>>(), ["prometheus"]);
    // The pod reads it: the flag (which mdiag parses), the Secrets mounted
    // where the flag and the file say.
    let ds = docs.iter().find(|d| d["kind"] == "DaemonSet").unwrap();
    let pod = &ds["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let cli = <mdiag::cli::Cli as clap::Parser>::try_parse_from(
        std::iter::once("mdiag").chain(args.iter().copied()),
    )
    .unwrap();
    let mdiag::cli::Command::Agent(agent) = cli.command else {
        panic!("{args:?}");
    };
    assert_eq!(
        agent.web_config_file.as_deref(),
        Some(std::path::Path::new("/etc/mdiag-web/web-config.yml"))
    );
    let mount = |name: &str| {
        c["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .map(|m| m["mountPath"].clone())
    };
    let volume = |name: &str| {
        pod["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == name)
            .map(|v| v["secret"]["secretName"].clone())
    };
    assert_eq!(mount("web-config"), Some("/etc/mdiag-web".into()));
    assert_eq!(
        volume("web-config"),
        Some(secret["metadata"]["name"].clone())
    );
    assert_eq!(mount("tls"), Some("/etc/mdiag-tls".into()));
    assert_eq!(volume("tls"), Some("mdiag-tls".into()));
    // The kubelet has no password: its probes only connect.
    assert!(c["readinessProbe"]["tcpSocket"].is_object(), "{c}");
    assert!(c["livenessProbe"]["httpGet"].is_null(), "{c}");
    // Prometheus scrapes with https, the CA, its certificate and the password.
    let pm = docs.iter().find(|d| d["kind"] == "PodMonitor").unwrap();
    let ep = &pm["spec"]["podMetricsEndpoints"][0];
    assert_eq!(ep["scheme"], "https");
    assert_eq!(ep["tlsConfig"]["ca"]["secret"]["name"], "mdiag-tls");
    assert_eq!(ep["tlsConfig"]["serverName"], "mdiag-agent");
    assert_eq!(ep["tlsConfig"]["keySecret"]["name"], "prometheus-client");
    assert_eq!(ep["basicAuth"]["password"]["name"], "mdiag-scrape");
    // Off by default: plain HTTP, no web config (the kustomize pod test
    // holds the rest of the default pod).
    let off = manifests(&rendered(&[]));
    let pm = off.iter().find(|d| d["kind"] == "PodMonitor").unwrap();
    assert!(pm["spec"]["podMetricsEndpoints"][0]["scheme"].is_null());
    assert!(!kinds(&off).contains("Secret"));
}

#[test]
fn helm_chart_refuses_web_configs_that_cannot_work() {
    for (values, says) in [
        ("webConfig:\n  enabled: true\n", "webConfig.enabled needs"),
        (
            "webConfig:\n  enabled: true\n  basicAuthUsers:\n    p: x\n",
            "scrape.basicAuthSecret",
        ),
        (
            "webConfig:\n  enabled: true\n  tls:\n    secretName: s\n    clientAuthType: RequireAndVerifyClientCert\n",
            "scrape.clientCertSecret",
        ),
        (
            "webConfig:\n  enabled: true\n  tls:\n    secretName: s\n    clientAuthType: RequireAnyClientCert\n",
            "NoClientCert or RequireAndVerifyClientCert",
        ),
    ] {
        let f = values_file(values);
        let (ok, text) = helm_template(&["-f", f.path().to_str().unwrap()]);
        assert!(!ok && text.contains(says), "{values}: {text}");
    }
}
