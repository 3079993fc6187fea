//! `cargo xtask package`: the release binary (glibc 2.17, `release.rs`) as a
//! Debian package and an RPM per architecture, in `<target>/package/`.
//!
//! One layout ([`layout`]) feeds both formats, so the .deb and the .rpm hold
//! the same files: the binary in `/usr/bin`, the hardened systemd unit of
//! `packaging/systemd/` in `/usr/lib/systemd/system` (its `ExecStart=`
//! rewritten to `/usr/bin/mdiag`), the example config `packaging/mdiag.toml`
//! as a configuration file the package manager keeps when it was edited
//! (`/etc/mdiag/mdiag.toml`), and the copyright. The maintainer scripts
//! (`packaging/deb/`, `packaging/rpm/`) only tell systemd to re-read its
//! units: installing never enables or starts the agent.
//!
//! The .deb is built by Debian's own `dpkg-deb` from a staged tree; the .rpm
//! by the `rpm` crate (pure Rust, no rpmbuild or spec file), which writes the
//! header digests `rpm -K` checks. The binary is also copied to
//! `<target>/package/<docker arch>/mdiag`, the path the Dockerfile of
//! `packaging/kubernetes/` copies from for each `TARGETARCH`.
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::{
    arch::Arch,
    cmd::{Cmd, workspace_root},
    say,
};

mod deb;
mod dockerfile;
mod rpm;
pub mod test;

/// The package's name in both formats.
pub const NAME: &str = "mdiag";
/// Where the binary, the unit and the config land on the host.
pub const BIN: &str = "/usr/bin/mdiag";
pub const UNIT: &str = "/usr/lib/systemd/system/mdiag-agent.service";
pub const CONFIG: &str = "/etc/mdiag/mdiag.toml";
pub const COPYRIGHT: &str = "/usr/share/doc/mdiag/copyright";
/// The unit's `ExecStart=` as committed (the manual install of README.md).
const UNIT_EXEC_AS_COMMITTED: &str = "ExecStart=/usr/local/bin/mdiag ";

/// One file of the package.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Absolute path on the installed host.
    pub dest: String,
    pub bytes: Vec<u8>,
    pub mode: u32,
    /// A configuration file: kept when the administrator changed it
    /// (Debian conffile, RPM `%config(noreplace)`).
    pub config: bool,
}

impl Entry {
    fn new(dest: &str, bytes: Vec<u8>, mode: u32) -> Self {
        Self {
            dest: dest.to_owned(),
            bytes,
            mode,
            config: false,
        }
    }
}

/// What one package is built from.
#[derive(Debug)]
pub struct Spec<'a> {
    pub arch: &'a Arch,
    /// Upstream version (the workspace's).
    pub version: String,
    /// Debian revision and RPM release: a rebuild of the same version with
    /// a higher one is an upgrade.
    pub revision: u32,
}

impl Spec<'_> {
    /// `0.1.0-1`, as dpkg shows it.
    pub fn deb_version(&self) -> String {
        format!("{}-{}", self.version, self.revision)
    }
}

/// Debian's and Docker's name for the architecture (`dpkg --print-architecture`,
/// `TARGETARCH`): the same three words.
pub fn deb_arch(arch: &Arch) -> Result<&'static str> {
    Ok(match arch.name {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "s390x" => "s390x",
        other => bail!("no Debian architecture known for {other}"),
    })
}

/// `<target>/package`, where the packages are written.
pub fn out_dir() -> Result<PathBuf> {
    Ok(crate::cmd::target_dir()?.join("package"))
}

/// Where the Dockerfile's `COPY` finds `arch`'s binary, relative to the
/// workspace root (its build context): `target/package/<docker arch>/mdiag`.
pub fn docker_binary(arch: &Arch) -> Result<PathBuf> {
    Ok(out_dir()?.join(deb_arch(arch)?).join("mdiag"))
}

fn read(rel: &str) -> Result<Vec<u8>> {
    let path = workspace_root().join(rel);
    std::fs::read(&path).with_context(|| format!("reading {}", path.display()))
}

/// The unit of `packaging/systemd/` with its binary at [`BIN`]; fails unless
/// exactly one `ExecStart=` names `/usr/local/bin/mdiag`.
pub fn packaged_unit(text: &str) -> Result<String> {
    let execs = text.lines().filter(|l| l.starts_with("ExecStart=")).count();
    let ours = text.matches(UNIT_EXEC_AS_COMMITTED).count();
    if execs != 1 || ours != 1 {
        bail!(
            "the unit has {execs} ExecStart= lines, {ours} of them `{UNIT_EXEC_AS_COMMITTED}…`: \
             expected exactly one, to point it at {BIN}"
        );
    }
    Ok(text.replace(UNIT_EXEC_AS_COMMITTED, &format!("ExecStart={BIN} ")))
}

/// Every file of the package for the binary `bin`.
pub fn layout(arch: &Arch, bin: &Path) -> Result<Vec<Entry>> {
    let unit = String::from_utf8(read("packaging/systemd/mdiag-agent.service")?)
        .context("the unit is not UTF-8")?;
    let mut files = vec![
        Entry::new(
            BIN,
            std::fs::read(bin).with_context(|| format!("reading {}", bin.display()))?,
            0o755,
        ),
        Entry::new(UNIT, packaged_unit(&unit)?.into_bytes(), 0o644),
        Entry {
            config: true,
            ..Entry::new(CONFIG, read("packaging/mdiag.toml")?, 0o644)
        },
        Entry::new(COPYRIGHT, read("packaging/deb/copyright")?, 0o644),
    ];
    files.extend(runbook_pages()?);
    files.extend(generated_files(arch, bin)?);
    Ok(files)
}

/// The runbook pages, to read on the host: `docs/agent.md` (the unit's
/// `Documentation=`) and every `docs/rules/*.md`, under `/usr/share/doc/mdiag`.
/// The alert rules' `runbook_url`s name the same pages on the web (a
/// `file://` link opens only on the host itself, not from Alertmanager).
fn runbook_pages() -> Result<Vec<Entry>> {
    let doc = format!("/usr/share/doc/{NAME}");
    let mut files = vec![Entry::new(
        &format!("{doc}/agent.md"),
        read("docs/agent.md")?,
        0o644,
    )];
    let dir = workspace_root().join("docs/rules");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".md"))
        .collect();
    names.sort();
    for name in names {
        files.push(Entry::new(
            &format!("{doc}/rules/{name}"),
            read(&format!("docs/rules/{name}"))?,
            0o644,
        ));
    }
    Ok(files)
}

/// Where each shell's completion script of `mdiag completions SHELL` goes.
const COMPLETIONS: [(&str, &str); 3] = [
    ("bash", "/usr/share/bash-completion/completions/mdiag"),
    ("zsh", "/usr/share/zsh/vendor-completions/_mdiag"),
    ("fish", "/usr/share/fish/vendor_completions.d/mdiag.fish"),
];

/// Files the binary generates about itself from its own command-line
/// definition (so they cannot drift from it), packaged beside it: every man
/// page of `mdiag man` in `/usr/share/man/man1` (gzip -9n) and the shell
/// completions of `mdiag completions`. `bin` is built for `arch`: it runs
/// through `Arch::runner` (qemu-user for a foreign one).
fn generated_files(arch: &Arch, bin: &Path) -> Result<Vec<Entry>> {
    let dir = out_dir()?.join(format!("generated-{}", arch.name));
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    arch.runner(bin).arg("man").arg("--out").arg(&dir).run()?;
    let mut pages: Vec<PathBuf> = std::fs::read_dir(&dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    pages.retain(|p| p.extension().is_some_and(|e| e == "1"));
    pages.sort();
    if pages.is_empty() {
        bail!(
            "`{} man --out {}` wrote no page",
            bin.display(),
            dir.display()
        );
    }
    let mut files = Vec::new();
    for page in pages {
        let Some(name) = page.file_name().and_then(|n| n.to_str()) else {
            bail!("{} has no UTF-8 name", page.display());
        };
        let gz = Cmd::new("gzip").arg("-9nc").arg(&page).output()?;
        if !gz.status.success() {
            bail!("gzip -9nc {}: {}", page.display(), gz.status);
        }
        files.push(Entry::new(
            &format!("/usr/share/man/man1/{name}.gz"),
            gz.stdout,
            0o644,
        ));
    }
    for (shell, dest) in COMPLETIONS {
        let script = arch.runner(bin).args(["completions", shell]).stdout()?;
        files.push(Entry::new(dest, script.into_bytes(), 0o644));
    }
    Ok(files)
}

/// Builds the release binary for each of `arches` and packages it; returns
/// the packages written.
pub fn package(arches: &[&'static Arch], revision: u32) -> Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for &arch in arches {
        let bin = crate::release::build(arch)?;
        written.extend(package_binary(arch, &bin, revision)?);
    }
    for p in &written {
        say!("package: {}", p.display());
    }
    Ok(written)
}

/// Packages the release binary `bin` of `arch` (built already): the .deb,
/// the .rpm and the Dockerfile's copy.
pub fn package_binary(arch: &'static Arch, bin: &Path, revision: u32) -> Result<Vec<PathBuf>> {
    let spec = Spec {
        arch,
        version: env!("CARGO_PKG_VERSION").to_owned(),
        revision,
    };
    let files = layout(arch, bin)?;
    let dir = out_dir()?;
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let deb = deb::build(&spec, &files, &dir)?;
    let rpm = rpm::build(&spec, &files, &dir)?;
    let docker = docker_binary(arch)?;
    if let Some(parent) = docker.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::copy(bin, &docker)
        .with_context(|| format!("copying {} to {}", bin.display(), docker.display()))?;
    Ok(vec![deb, rpm, docker])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arch::ARCHES;

    #[test]
    fn the_packaged_unit_runs_the_packaged_binary() {
        let unit =
            String::from_utf8(read("packaging/systemd/mdiag-agent.service").unwrap()).unwrap();
        let packaged = packaged_unit(&unit).unwrap();
        let exec: Vec<&str> = packaged
            .lines()
            .filter(|l| l.starts_with("ExecStart="))
            .collect();
        assert_eq!(exec, ["ExecStart=/usr/bin/mdiag agent"]);
        // Only that line changed.
        assert_eq!(packaged.lines().count(), unit.lines().count());
        let changed = packaged
            .lines()
            .zip(unit.lines())
            .filter(|(a, b)| a != b)
            .count();
        assert_eq!(changed, 1);
        // A unit whose ExecStart names another path is refused, not shipped.
        let moved = unit.replace("/usr/local/bin/mdiag", "/opt/mdiag");
        assert!(packaged_unit(&moved).is_err());
        let twice = format!("{unit}\nExecStart=/usr/local/bin/mdiag agent\n");
        assert!(packaged_unit(&twice).is_err());
    }

    #[test]
    fn every_architecture_has_a_debian_and_docker_name() {
        let names: Vec<&str> = ARCHES.iter().map(|a| deb_arch(a).unwrap()).collect();
        assert_eq!(names, ["amd64", "arm64", "s390x"]);
    }
}
