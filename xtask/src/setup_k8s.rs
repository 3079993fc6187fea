//! `cargo xtask setup`'s step for the Kubernetes manifests' check: the
//! PodMonitor and PrometheusRule CRDs of the Prometheus Operator, whose
//! schemas the PodMonitor of `packaging/kubernetes/` and the Helm chart's
//! objects are validated against (agent/tests/packaging.rs), and helm, which
//! lints and renders the chart `packaging/helm/mdiag`.
//!
//! GitHub is not reachable from every CI machine, the Go module proxy is: the
//! CRD ships in the operator's Go module (`example/prometheus-operator-crd/`),
//! so it is fetched with `go mod download` at a pinned version and copied to
//! `<target>/k8s-schemas/`. helm is no Debian package: it is built from its
//! Go module (`go install`, pinned, through the same proxy) into
//! `<target>/helm/bin/`. Idempotent: markers name the versions there.
use std::path::{Path, PathBuf};

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
/// Every CRD copied.
const CRDS: &[&str] = &[PODMONITOR_CRD, PROMETHEUSRULE_CRD];
/// helm's Go module and the version pinned.
const HELM_MODULE: &str = "helm.sh/helm/v3";
const HELM_VERSION: &str = "v3.19.0";
/// The Kubernetes version a `helm template` without a cluster assumes
/// (`--kube-version` overrides it); `go install` leaves helm's at 1.20.
const HELM_KUBE_VERSION: (u32, u32) = (1, 34);

/// `<target>/k8s-schemas`, where the tests find the CRD.
pub fn schemas_dir() -> Result<PathBuf> {
    Ok(crate::cmd::target_dir()?.join("k8s-schemas"))
}

/// `<target>/helm/bin/helm`, where the tests find helm.
pub fn helm_bin() -> Result<PathBuf> {
    Ok(crate::cmd::target_dir()?.join("helm/bin/helm"))
}

/// Debian's Go, when there is no `go`.
fn need_go() -> Result<()> {
    if find_in_path("go").is_none() {
        crate::setup::install_missing("setup", &["golang-go"])?;
    }
    Ok(())
}

/// Builds the pinned helm into `<target>/helm/bin` unless the marker says it
/// is there.
pub fn helm() -> Result<()> {
    let bin = helm_bin()?;
    let Some(dir) = bin.parent().and_then(Path::parent) else {
        bail!("{} has no grandparent", bin.display());
    };
    let marker = dir.join(".mdiag-version");
    let wanted = format!("{HELM_MODULE}@{HELM_VERSION}");
    if bin.exists() && std::fs::read_to_string(&marker).is_ok_and(|m| m == wanted) {
        say!("setup: helm {HELM_VERSION} already in {}", bin.display());
        return Ok(());
    }
    need_go()?;
    say!("setup: building helm {HELM_VERSION} from the Go module proxy (a few minutes, once)");
    let (major, minor) = HELM_KUBE_VERSION;
    let ldflags = format!(
        "-X helm.sh/helm/v3/internal/version.version={HELM_VERSION} \
         -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor={major} \
         -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor={minor}"
    );
    Cmd::new("go")
        .current_dir(std::env::temp_dir())
        .env("GOFLAGS", "-mod=mod")
        .env("GOBIN", bin.parent().unwrap_or(dir))
        .env("CGO_ENABLED", "0")
        .args(["install", "-ldflags", &ldflags])
        .arg(format!("{HELM_MODULE}/cmd/helm@{HELM_VERSION}"))
        .run()?;
    let version = Cmd::new(&bin)
        .args(["version", "--template", "{{.Version}}"])
        .stdout()?;
    if version.trim() != HELM_VERSION {
        bail!("{} says it is {version}, not {HELM_VERSION}", bin.display());
    }
    std::fs::write(&marker, &wanted).with_context(|| format!("writing {}", marker.display()))?;
    say!("setup: helm {HELM_VERSION} built into {}", bin.display());
    Ok(())
}

/// Copies the pinned CRDs ([`CRDS`]) into [`schemas_dir`] unless the marker
/// says they are there; installs Debian's Go when there is no `go`.
pub fn operator_crds() -> Result<()> {
    let dir = schemas_dir()?;
    let marker = dir.join(".mdiag-version");
    let wanted = format!("{OPERATOR_MODULE}@{OPERATOR_VERSION} {}", CRDS.join(" "));
    if CRDS.iter().all(|c| dir.join(c).exists())
        && std::fs::read_to_string(&marker).is_ok_and(|m| m == wanted)
    {
        say!(
            "setup: Prometheus Operator CRDs of {OPERATOR_VERSION} already in {}",
            dir.display()
        );
        return Ok(());
    }
    need_go()?;
    let wanted_module = format!("{OPERATOR_MODULE}@{OPERATOR_VERSION}");
    say!("setup: fetching {wanted_module} from the Go module proxy");
    // Outside any module; -mod=mod in case GOFLAGS says otherwise.
    let json = Cmd::new("go")
        .current_dir(std::env::temp_dir())
        .env("GOFLAGS", "-mod=mod")
        .args(["mod", "download", "-json", &wanted_module])
        .stdout()?;
    let module_dir = json
        .lines()
        .find_map(|l| l.trim().strip_prefix("\"Dir\": \""))
        .and_then(|l| l.strip_suffix("\","))
        .with_context(|| {
            format!("`go mod download -json {wanted_module}` named no Dir:\n{json}")
        })?;
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    for crd in CRDS {
        let src = PathBuf::from(module_dir).join(CRD_DIR).join(crd);
        if !src.exists() {
            bail!("{wanted_module} has no {CRD_DIR}/{crd}");
        }
        let dst = dir.join(crd);
        std::fs::copy(&src, &dst)
            .with_context(|| format!("copying {} to {}", src.display(), dst.display()))?;
    }
    std::fs::write(&marker, &wanted).with_context(|| format!("writing {}", marker.display()))?;
    say!("setup: CRDs of {wanted_module} copied to {}", dir.display());
    Ok(())
}
