//! The Debian package, built by `dpkg-deb` from a tree staged under
//! `<target>/package/`: the layout's files with their modes, `DEBIAN/control`
//! (depends on glibc ≥ 2.17, the release build's baseline), `conffiles` (the
//! layout's configuration files), `md5sums`, the maintainer scripts of
//! `packaging/deb/`, the Debian changelog and the lintian overrides
//! (`packaging/deb/lintian-overrides`, each with its reason). Files are owned
//! by root in the archive (`--root-owner-group`), whoever builds it.
use std::{
    fmt::Write as _,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};

use super::{Entry, NAME, Spec, deb_arch, read};
use crate::{cmd::Cmd, release::GLIBC_BASELINE};

/// Who the package names as its maintainer.
pub const MAINTAINER: &str = "mdiag maintainers <mdiag@example.org>";
const SUMMARY: &str = "eBPF diagnosis agent for MongoDB hosts";
/// Maintainer scripts in `packaging/deb/`.
const SCRIPTS: &[&str] = &["postinst", "prerm", "postrm"];

/// Writes `<dir>/mdiag_<version>_<arch>.deb`; returns its path.
pub fn build(spec: &Spec<'_>, files: &[Entry], dir: &Path) -> Result<PathBuf> {
    let arch = deb_arch(spec.arch)?;
    let stage = dir.join(format!("stage-deb-{arch}"));
    if stage.exists() {
        std::fs::remove_dir_all(&stage).with_context(|| format!("removing {}", stage.display()))?;
    }
    for f in files {
        write(&stage, &f.dest, &f.bytes, f.mode)?;
    }
    let doc = format!("/usr/share/doc/{NAME}");
    write(
        &stage,
        &format!("{doc}/changelog.Debian"),
        changelog(spec)?.as_bytes(),
        0o644,
    )?;
    Cmd::new("gzip")
        .arg("-9n")
        .arg(stage.join(format!("{}/changelog.Debian", &doc[1..])))
        .run()?;
    write(
        &stage,
        &format!("/usr/share/lintian/overrides/{NAME}"),
        &read("packaging/deb/lintian-overrides")?,
        0o644,
    )?;
    let md5sums = Cmd::new("md5sum")
        .current_dir(&stage)
        .args(payload(&stage)?)
        .stdout()?;
    write(&stage, "/DEBIAN/md5sums", md5sums.as_bytes(), 0o644)?;
    let control = control(spec, arch, installed_size_kib(&stage)?);
    write(&stage, "/DEBIAN/control", control.as_bytes(), 0o644)?;
    let conffiles: String = files
        .iter()
        .filter(|f| f.config)
        .map(|f| format!("{}\n", f.dest))
        .collect();
    write(&stage, "/DEBIAN/conffiles", conffiles.as_bytes(), 0o644)?;
    for script in SCRIPTS {
        write(
            &stage,
            &format!("/DEBIAN/{script}"),
            &read(&format!("packaging/deb/{script}"))?,
            0o755,
        )?;
    }
    let deb = dir.join(format!("{NAME}_{}_{arch}.deb", spec.deb_version()));
    Cmd::new("dpkg-deb")
        .args(["--root-owner-group", "-Zxz", "--build"])
        .arg(&stage)
        .arg(&deb)
        .run()?;
    std::fs::remove_dir_all(&stage).with_context(|| format!("removing {}", stage.display()))?;
    Ok(deb)
}

/// Writes `bytes` to `stage` + `dest` (absolute) with `mode`, directories
/// 0755.
fn write(stage: &Path, dest: &str, bytes: &[u8], mode: u32) -> Result<()> {
    let path = stage.join(dest.trim_start_matches('/'));
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
        for dir in parent.ancestors().take_while(|d| d.starts_with(stage)) {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
        }
    }
    std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
        .with_context(|| format!("chmod {}", path.display()))
}

/// The staged payload's files (not `DEBIAN/`), relative, sorted.
fn payload(stage: &Path) -> Result<Vec<String>> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) -> Result<()> {
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            if path.is_dir() {
                if path != root.join("DEBIAN") {
                    walk(root, &path, out)?;
                }
            } else {
                out.push(path.strip_prefix(root)?.to_string_lossy().into_owned());
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(stage, stage, &mut out)?;
    out.sort();
    Ok(out)
}

/// `Installed-Size`: the payload's bytes in KiB, rounded up per file.
fn installed_size_kib(stage: &Path) -> Result<u64> {
    let mut kib = 0;
    for f in payload(stage)? {
        kib += std::fs::metadata(stage.join(f))?.len().div_ceil(1024);
    }
    Ok(kib)
}

/// `DEBIAN/control`.
fn control(spec: &Spec<'_>, arch: &str, installed_kib: u64) -> String {
    let (major, minor) = GLIBC_BASELINE;
    let mut c = String::new();
    let _ = writeln!(c, "Package: {NAME}");
    let _ = writeln!(c, "Version: {}", spec.deb_version());
    let _ = writeln!(c, "Architecture: {arch}");
    let _ = writeln!(c, "Maintainer: {MAINTAINER}");
    let _ = writeln!(c, "Installed-Size: {installed_kib}");
    let _ = writeln!(c, "Depends: libc6 (>= {major}.{minor})");
    c.push_str("Section: admin\nPriority: optional\n");
    let _ = writeln!(c, "Description: {SUMMARY}");
    c.push_str(
        " mdiag watches a running mongod and its host with eBPF (scheduler,\n \
         softirqs, system calls, CPU samples, allocator latency, WiredTiger\n \
         checkpoints, lock contention) and says what to tune, ranked, with the\n \
         numbers that prove it and the exact fix.\n .\n \
         This package installs the mdiag command and the mdiag-agent systemd\n \
         service, neither enabled nor started: enable it with\n \
         `systemctl enable --now mdiag-agent`.\n",
    );
    c
}

/// `changelog.Debian`: one entry for this version, dated by the last commit
/// (reproducible), else now.
fn changelog(spec: &Spec<'_>) -> Result<String> {
    let date = Cmd::new("git")
        .args(["log", "-1", "--format=%aD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|d| !d.is_empty());
    let date = match date {
        Some(d) => d,
        None => Cmd::new("date").arg("-R").stdout()?.trim().to_owned(),
    };
    Ok(format!(
        "{NAME} ({}) unstable; urgency=medium\n\n  * Release {} of mdiag, built by `cargo xtask package`.\n\n -- {MAINTAINER}  {date}\n",
        spec.deb_version(),
        spec.version
    ))
}
