//! helm for the integration tests: the binary `cargo xtask setup` built
//! (`MDIAG_HELM`, else `target/helm/bin/helm`) and `helm template` of the
//! chart `packaging/helm/mdiag`. Shared by `packaging.rs` and `alerts.rs`
//! through `#[path]`.
#![allow(
    dead_code,
    clippy::expect_used,
    reason = "each test crate uses part of it; a failure is the test failing"
)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The chart, from the repository's root.
pub const CHART: &str = "packaging/helm/mdiag";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// helm as `cargo xtask setup` built it, run from the repository's root.
pub fn helm() -> Command {
    let bin = std::env::var_os("MDIAG_HELM")
        .map_or_else(|| repo().join("target/helm/bin/helm"), PathBuf::from);
    assert!(
        bin.exists(),
        "no {}: run `cargo xtask setup`",
        bin.display()
    );
    let mut cmd = Command::new(bin);
    cmd.current_dir(repo());
    cmd
}

/// `helm template` of the chart with `args`: (succeeded, stdout + stderr).
pub fn template(args: &[&str]) -> (bool, String) {
    let out = helm()
        .args(["template", "mdiag", CHART, "--namespace", "mdiag"])
        .args(["--kube-version", "1.28.0"])
        .args(args)
        .output()
        .expect("run helm");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}
