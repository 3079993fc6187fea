//! `cargo xtask setup`'s step for the Kubernetes manifests' check: the
//! PodMonitor and PrometheusRule CRDs of the Prometheus Operator, whose
//! schemas the PodMonitor of `packaging/kubernetes/` and the PrometheusRule
//! of `packaging/prometheus/` are validated against (agent/tests/packaging.rs).
//!
//! GitHub is not reachable from every CI machine, the Go module proxy is: the
//! CRD ships in the operator's Go module (`example/prometheus-operator-crd/`),
//! so it is fetched with `go mod download` at a pinned version and copied to
//! `<target>/k8s-schemas/`. Idempotent: a marker names the version copied.
use std::path::PathBuf;

use anyhow::{Context, Result, bail};

use crate::{
    cmd::{Cmd, find_in_path},
    say,
};

/// The Prometheus Operator's Go module and the version pinned.
const OPERATOR_MODULE: &str = "github.com/prometheus-operator/prometheus-operator";
const OPERATOR_VERSION: &str = "v0.85.0";
/// The CRD's path inside the module, and its file name in the schema dir.
const CRD_DIR: &str = "example/prometheus-operator-crd";
pub const PODMONITOR_CRD: &str = "monitoring.coreos.com_podmonitors.yaml";
pub const PROMETHEUSRULE_CRD: &str = "monitoring.coreos.com_prometheusrules.yaml";
const CRDS: [&str; 2] = [PODMONITOR_CRD, PROMETHEUSRULE_CRD];

/// `<target>/k8s-schemas`, where the tests find the CRD.
pub fn schemas_dir() -> Result<PathBuf> {
    Ok(crate::cmd::target_dir()?.join("k8s-schemas"))
}

/// Copies the pinned CRDs into [`schemas_dir`] unless the marker says they
/// are there; installs Debian's Go when there is no `go`.
pub fn operator_crds() -> Result<()> {
    let dir = schemas_dir()?;
    let marker = dir.join(".mdiag-version");
    let wanted = format!("{OPERATOR_MODULE}@{OPERATOR_VERSION}");
    if CRDS.iter().all(|c| dir.join(c).exists())
        && std::fs::read_to_string(&marker).is_ok_and(|m| m == wanted)
    {
        say!(
            "setup: Prometheus Operator CRDs of {wanted} already in {}",
            dir.display()
        );
        return Ok(());
    }
    if find_in_path("go").is_none() {
        crate::setup::install_missing("setup", &["golang-go"])?;
    }
    say!("setup: fetching {wanted} from the Go module proxy");
    // Outside any module; -mod=mod in case GOFLAGS says otherwise.
    let json = Cmd::new("go")
        .current_dir(std::env::temp_dir())
        .env("GOFLAGS", "-mod=mod")
        .args(["mod", "download", "-json", &wanted])
        .stdout()?;
    let module_dir = json
        .lines()
        .find_map(|l| l.trim().strip_prefix("\"Dir\": \""))
        .and_then(|l| l.strip_suffix("\","))
        .with_context(|| format!("`go mod download -json {wanted}` named no Dir:\n{json}"))?;
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    for crd in CRDS {
        let src = PathBuf::from(module_dir).join(CRD_DIR).join(crd);
        if !src.exists() {
            bail!("{wanted} has no {CRD_DIR}/{crd}");
        }
        let dst = dir.join(crd);
        std::fs::copy(&src, &dst)
            .with_context(|| format!("copying {} to {}", src.display(), dst.display()))?;
    }
    std::fs::write(&marker, &wanted).with_context(|| format!("writing {}", marker.display()))?;
    say!(
        "setup: Prometheus Operator CRDs of {wanted} copied to {}",
        dir.display()
    );
    Ok(())
}
