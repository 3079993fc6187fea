//! The RPM, built by the `rpm` crate (pure Rust: no rpmbuild, no spec file):
//! the layout's files owned by root, the configuration files
//! `%config(noreplace)`, `Requires: glibc >= 2.17` (the release build's
//! baseline), the scriptlets of `packaging/rpm/` and a gzip payload, which
//! every rpm since RHEL 7 and SLES 12 reads (zstd needs rpm 4.14 and
//! Amazon Linux 2 has 4.11). Timestamps are the last commit's, so a rebuild
//! of the same commit is the same file.
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use rpm::{BuildConfig, CompressionType, Dependency, FileOptions, PackageBuilder};

use super::{Entry, NAME, Spec};
use crate::{
    cmd::{Cmd, workspace_root},
    release::GLIBC_BASELINE,
};

const SUMMARY: &str = "eBPF diagnosis agent for MongoDB hosts";
const LICENSE: &str = "MIT OR Apache-2.0";

/// Writes `<dir>/mdiag-<version>-<revision>.<arch>.rpm`; returns its path.
pub fn build(spec: &Spec<'_>, files: &[Entry], dir: &Path) -> Result<PathBuf> {
    let arch = spec.arch.name;
    let mut config = BuildConfig::v4().compression(CompressionType::Gzip);
    if let Some(t) = commit_time() {
        config = config.source_date(t);
    }
    let (major, minor) = GLIBC_BASELINE;
    let mut b = PackageBuilder::new(NAME, &spec.version, LICENSE, arch, SUMMARY);
    b.using_config(config)
        .release(spec.revision.to_string())
        .description(
            "mdiag watches a running mongod and its host with eBPF and says what to \
             tune, ranked, with the numbers that prove it and the exact fix. This \
             package installs the mdiag command and the mdiag-agent systemd service, \
             neither enabled nor started: `systemctl enable --now mdiag-agent`.",
        )
        .requires(Dependency::greater_eq("glibc", format!("{major}.{minor}")))
        .post_install_script(script("post")?)
        .pre_uninstall_script(script("preun")?)
        .post_uninstall_script(script("postun")?);
    for s in ["post", "preun", "postun"] {
        let dep = match s {
            "post" => Dependency::script_post("/bin/sh"),
            "preun" => Dependency::script_preun("/bin/sh"),
            _ => Dependency::script_postun("/bin/sh"),
        };
        b.requires(dep);
    }
    for f in files {
        let mode = u16::try_from(f.mode).context("file mode")?;
        let mut opts = FileOptions::new(f.dest.clone())
            .permissions(mode)
            .user("root")
            .group("root");
        if f.config {
            opts = opts.config().noreplace();
        }
        b.with_file_contents(f.bytes.clone(), opts)
            .with_context(|| format!("adding {} to the RPM", f.dest))?;
    }
    let pkg = b.build().context("building the RPM")?;
    let path = dir.join(format!(
        "{NAME}-{}-{}.{arch}.rpm",
        spec.version, spec.revision
    ));
    pkg.write_file(&path)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

fn script(name: &str) -> Result<String> {
    let path = workspace_root()
        .join("packaging/rpm")
        .join(format!("{name}.sh"));
    std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
}

/// The last commit's time (seconds since the epoch), when git says it.
fn commit_time() -> Option<u32> {
    let out = Cmd::new("git")
        .args(["log", "-1", "--format=%ct"])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout).trim().parse().ok()
}
