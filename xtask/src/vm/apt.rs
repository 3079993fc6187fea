//! apt for the kernel matrix: which package of a kernel line is newest, the
//! download of it (and of a guest's busybox) into `<vm>/debs/`, and their
//! extraction into `<vm>/kernels/` and `<vm>/busybox/`.
//!
//! Why private apt states: 5.10 comes from Debian 11 and s390x's kernel from
//! bookworm-backports, which the host's sources need not have, and the
//! packages of another architecture are not in the host's lists. For such a
//! source apt runs on `<vm>/apt/<name>/` (its own lists and cache; for an
//! extra suite also its own sources.list on the host's Debian mirror; for
//! another architecture `APT::Architecture`), so the host's apt state is
//! never touched (no `dpkg --add-architecture`). Finished downloads and
//! extractions are kept and skipped next time; unfinished ones go to a
//! scratch directory first, so they are never taken for finished ones.
use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result, bail};

use super::{Line, guest::Guest, mirror::host_mirror};
use crate::{
    cmd::{Cmd, need_sudo},
    say,
};

/// Where apt looks for a package: a suite's sources (`None`: the host's),
/// for one Debian architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Source {
    suite: Option<&'static str>,
    deb_arch: &'static str,
    /// Not the host's architecture: apt is told which one.
    foreign: bool,
}

impl Source {
    fn new(suite: Option<&'static str>, guest: &'static Guest) -> Self {
        Self {
            suite,
            deb_arch: guest.deb_arch,
            foreign: guest.arch().is_ok_and(|a| !a.is_host()),
        }
    }

    /// The private state's directory name under `<vm>/apt/`, `None` for the
    /// host's own state.
    fn state_name(self) -> Option<String> {
        match (self.suite, self.foreign) {
            (None, false) => None,
            (Some(suite), false) => Some(suite.to_owned()),
            (Some(suite), true) => Some(format!("{suite}-{}", self.deb_arch)),
            (None, true) => Some(format!("host-{}", self.deb_arch)),
        }
    }

    fn describe(self) -> String {
        let suite = self
            .suite
            .map_or("the host's sources".to_owned(), |s| format!("suite {s}"));
        if self.foreign {
            format!("{suite}, {}", self.deb_arch)
        } else {
            suite
        }
    }
}

/// apt, for the host's sources or a private state per extra source.
pub(super) struct Apt {
    vm_dir: PathBuf,
    /// Sources already updated in this run.
    updated: BTreeSet<Source>,
}

impl Apt {
    pub(super) fn new(vm_dir: &Path) -> Self {
        Self {
            vm_dir: vm_dir.to_owned(),
            updated: BTreeSet::new(),
        }
    }

    /// `apt-get` or `apt-cache` for `source`.
    fn cmd(&self, program: &str, source: Source) -> Result<Cmd> {
        let mut cmd = Cmd::new(program);
        cmd.arg("-q");
        let opt = |k: &str, v: &Path| format!("{k}={}", v.display());
        if let Some(state) = self.private_state(source)? {
            if source.suite.is_some() {
                cmd.args([
                    "-o",
                    &opt("Dir::Etc::SourceList", &state.join("sources.list")),
                ])
                .args(["-o", "Dir::Etc::SourceParts=/dev/null"]);
            }
            cmd.args(["-o", &opt("Dir::State::Lists", &state.join("lists"))])
                // Its package cache too, so the host's is not rebuilt from these lists.
                .args(["-o", &opt("Dir::Cache", &state.join("cache"))]);
        }
        if source.foreign {
            cmd.args(["-o", &format!("APT::Architecture={}", source.deb_arch)])
                .args(["-o", &format!("APT::Architectures={}", source.deb_arch)]);
        }
        Ok(cmd)
    }

    /// `<vm>/apt/<name>/` of `source` (with a sources.list on the host's
    /// Debian mirror for an extra suite), `None` for the host's own state.
    fn private_state(&self, source: Source) -> Result<Option<PathBuf>> {
        let Some(name) = source.state_name() else {
            return Ok(None);
        };
        let state = self.vm_dir.join("apt").join(name);
        for sub in ["lists/partial", "cache"] {
            fs::create_dir_all(state.join(sub))
                .with_context(|| format!("creating {}", state.join(sub).display()))?;
        }
        if let Some(suite) = source.suite {
            let mirror = host_mirror();
            let sources = format!(
                "deb [signed-by={}] {} {suite} main\n",
                mirror.signed_by, mirror.uri
            );
            let path = state.join("sources.list");
            if fs::read_to_string(&path).ok().as_deref() != Some(sources.as_str()) {
                fs::write(&path, &sources)
                    .with_context(|| format!("writing {}", path.display()))?;
            }
        }
        Ok(Some(state))
    }

    fn update(&mut self, source: Source) -> Result<()> {
        say!("vm-matrix: apt-get update ({})", source.describe());
        let mut cmd = if source.state_name().is_none()
            && need_sudo("apt-get update", "run `apt-get update` as root first")?
        {
            let mut cmd = Cmd::new("sudo");
            cmd.arg("apt-get");
            cmd
        } else {
            self.cmd("apt-get", source)?
        };
        cmd.arg("update").run()?;
        self.updated.insert(source);
        Ok(())
    }

    /// The newest package of `line`, updating the sources once when nothing
    /// matches.
    fn newest(&mut self, line: &Line) -> Result<String> {
        let source = Source::new(line.suite, line.guest);
        loop {
            for pattern in line.patterns {
                let out = self
                    .cmd("apt-cache", source)?
                    .args(["search", "--names-only", pattern])
                    .stdout()?;
                if let Some(package) = newest_package(&out) {
                    return Ok(package);
                }
            }
            if self.updated.contains(&source) {
                bail!(
                    "apt-cache finds no package matching {} ({})",
                    line.patterns.join(" or "),
                    source.describe()
                );
            }
            self.update(source)?;
        }
    }

    /// `<vm>/debs/<package>_…_<arch>.deb`, downloaded unless it is there.
    fn download(&self, source: Source, who: &str, package: &str) -> Result<PathBuf> {
        let debs = self.vm_dir.join("debs");
        if let Some(deb) = find_deb(&debs, package, source.deb_arch)? {
            return Ok(deb);
        }
        // Into a scratch directory first, so that a broken download is
        // never taken for a finished one.
        let partial = debs.join("partial");
        if partial.exists() {
            fs::remove_dir_all(&partial)
                .with_context(|| format!("removing {}", partial.display()))?;
        }
        fs::create_dir_all(&partial).with_context(|| format!("creating {}", partial.display()))?;
        say!(
            "vm-matrix {who}: downloading {package} ({})",
            source.deb_arch
        );
        self.cmd("apt-get", source)?
            // As root apt would drop to _apt, who cannot write here.
            .args(["-o", "APT::Sandbox::User=root", "download", package])
            .current_dir(&partial)
            .run()?;
        let got = find_deb(&partial, package, source.deb_arch)?
            .with_context(|| format!("apt-get download left no {package}_*.deb"))?;
        let name = got.file_name().context("a .deb without a file name")?;
        let deb = debs.join(name);
        fs::rename(&got, &deb).with_context(|| format!("moving {}", got.display()))?;
        Ok(deb)
    }

    /// The package `pick` names, downloaded; when that fails on lists not
    /// updated in this run (the mirror may have dropped the package the
    /// lists still name), after an update, once more.
    fn fetch(
        &mut self,
        source: Source,
        who: &str,
        pick: impl Fn(&mut Self) -> Result<String>,
    ) -> Result<(String, PathBuf)> {
        let package = pick(self)?;
        match self.download(source, who, &package) {
            Ok(deb) => Ok((package, deb)),
            Err(e) if !self.updated.contains(&source) => {
                say!("vm-matrix {who}: {e:#}; updating the package lists and trying again");
                self.update(source)?;
                let package = pick(self)?;
                let deb = self.download(source, who, &package)?;
                Ok((package, deb))
            }
            Err(e) => Err(e),
        }
    }
}

/// The `.deb` of `package` for `deb_arch` in `dir` (the highest version when
/// several).
fn find_deb(dir: &Path, package: &str, deb_arch: &str) -> Result<Option<PathBuf>> {
    let prefix = format!("{package}_");
    let suffix = format!("_{deb_arch}.deb");
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    let mut found = Vec::new();
    for entry in entries {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with(&prefix) && name.ends_with(&suffix) {
            found.push(path);
        }
    }
    Ok(found.into_iter().max())
}

/// The newest package in `apt-cache search` output ("name - description"
/// lines): the one whose version numbers are highest, compared as numbers.
fn newest_package(apt_cache_output: &str) -> Option<String> {
    apt_cache_output
        .lines()
        .filter_map(|l| l.split(" - ").next())
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .max_by_key(|n| (version_key(n), n.to_string()))
        .map(str::to_owned)
}

/// The numbers of a kernel package's version, which is the words after
/// `linux-image-` up to the flavour (the first word that starts with a
/// letter): "linux-image-6.12.117+deb12-cloud-amd64-unsigned" → [6, 12,
/// 117, 12], "linux-image-6.12.95+deb12-s390x" → [6, 12, 95, 12].
fn version_key(package: &str) -> Vec<u64> {
    let v = package.strip_prefix("linux-image-").unwrap_or(package);
    v.split('-')
        .take_while(|w| w.starts_with(|c: char| c.is_ascii_digit()))
        .flat_map(|w| w.split(|c: char| !c.is_ascii_digit()))
        .filter_map(|n| n.parse().ok())
        .collect()
}

/// Unpacks `deb` into `root` (through a scratch directory beside it, so a
/// broken extraction is never taken for a finished one).
fn extract(deb: &Path, root: &Path) -> Result<()> {
    let name = root
        .file_name()
        .and_then(|n| n.to_str())
        .context("an extraction directory without a name")?;
    let partial = root.with_file_name(format!("{name}.partial"));
    if partial.exists() {
        fs::remove_dir_all(&partial).with_context(|| format!("removing {}", partial.display()))?;
    }
    fs::create_dir_all(&partial).with_context(|| format!("creating {}", partial.display()))?;
    Cmd::new("dpkg-deb")
        .arg("-x")
        .arg(deb)
        .arg(&partial)
        .run()?;
    if root.exists() {
        fs::remove_dir_all(root).with_context(|| format!("removing {}", root.display()))?;
    }
    fs::rename(&partial, root).with_context(|| format!("renaming {}", partial.display()))
}

/// The package and kernel image of `line`: the newest package, downloaded
/// and extracted unless that is done already.
pub(super) fn kernel(line: &Line, apt: &mut Apt, dir: &Path) -> Result<(String, PathBuf)> {
    let source = Source::new(line.suite, line.guest);
    let (package, deb) = apt.fetch(source, line.name, |apt| apt.newest(line))?;
    let name = package.strip_prefix("linux-image-").unwrap_or(&package);
    let root = dir.join("kernels").join(name);
    if let Some(vmlinuz) = find_vmlinuz(&root)? {
        say!("vm-matrix {}: {package} already extracted", line.name);
        return Ok((package, vmlinuz));
    }
    extract(&deb, &root)?;
    let vmlinuz =
        find_vmlinuz(&root)?.with_context(|| format!("{} has no boot/vmlinuz-*", deb.display()))?;
    Ok((package, vmlinuz))
}

/// The static busybox of `guest`'s architecture, from Debian's
/// `busybox-static` for it (the host's suite), downloaded and extracted
/// unless that is done already.
pub(super) fn busybox(guest: &'static Guest, apt: &mut Apt, dir: &Path) -> Result<PathBuf> {
    const PACKAGE: &str = "busybox-static";
    let source = Source::new(None, guest);
    let (_, deb) = apt.fetch(source, guest.name, |_| Ok(PACKAGE.to_owned()))?;
    let stem = deb
        .file_stem()
        .and_then(|s| s.to_str())
        .context("a .deb without a name")?;
    let root = dir.join("busybox").join(stem);
    let bin = root.join("bin/busybox");
    if !bin.is_file() {
        extract(&deb, &root)?;
    }
    if !bin.is_file() {
        bail!("{} has no bin/busybox", deb.display());
    }
    Ok(bin)
}

fn find_vmlinuz(root: &Path) -> Result<Option<PathBuf>> {
    let boot = root.join("boot");
    let entries = match fs::read_dir(&boot) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", boot.display())),
    };
    for entry in entries {
        let path = entry?.path();
        if path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("vmlinuz-"))
        {
            return Ok(Some(path));
        }
    }
    Ok(None)
}

/// The configuration the kernel `vmlinuz` was built with: the package's
/// `boot/config-<release>` beside `boot/vmlinuz-<release>`.
pub(super) fn kernel_config(vmlinuz: &Path) -> Result<String> {
    let name = vmlinuz
        .file_name()
        .and_then(|n| n.to_str())
        .context("a kernel image without a name")?;
    let release = name
        .strip_prefix("vmlinuz-")
        .with_context(|| format!("{} is not named vmlinuz-<release>", vmlinuz.display()))?;
    let config = vmlinuz.with_file_name(format!("config-{release}"));
    fs::read_to_string(&config).with_context(|| format!("reading {}", config.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vm::guest::{AARCH64, S390X, X86_64};

    const APT_CACHE_61: &str = "\
linux-image-6.1.0-47-cloud-amd64-unsigned - Linux 6.1 for x86-64 cloud
linux-image-6.1.0-56-cloud-amd64-unsigned - Linux 6.1 for x86-64 cloud
linux-image-6.1.0-9-cloud-amd64-unsigned - Linux 6.1 for x86-64 cloud
linux-image-6.1.0-55-cloud-amd64-unsigned - Linux 6.1 for x86-64 cloud
";

    #[test]
    fn newest_package_compares_numbers_not_text() {
        assert_eq!(
            newest_package(APT_CACHE_61).as_deref(),
            Some("linux-image-6.1.0-56-cloud-amd64-unsigned")
        );
        let out = "\
linux-image-6.12.99+deb12-cloud-amd64-unsigned - Linux 6.12 for x86-64 cloud
linux-image-6.12.117+deb12-cloud-amd64-unsigned - Linux 6.12 for x86-64 cloud
linux-image-6.12.111+deb12-cloud-amd64-unsigned - Linux 6.12 for x86-64 cloud
";
        assert_eq!(
            newest_package(out).as_deref(),
            Some("linux-image-6.12.117+deb12-cloud-amd64-unsigned")
        );
        assert_eq!(newest_package(""), None);
        assert_eq!(
            version_key("linux-image-5.10.0-32-cloud-amd64"),
            vec![5, 10, 0, 32]
        );
        // The flavour's digits ("s390x") are not the version's.
        assert_eq!(
            version_key("linux-image-6.12.95+deb12-s390x"),
            vec![6, 12, 95, 12]
        );
    }

    #[test]
    fn each_source_has_its_own_state() {
        let host = Source::new(None, &X86_64);
        assert_eq!(host.state_name(), None);
        assert_eq!(
            Source::new(Some("bullseye"), &X86_64)
                .state_name()
                .as_deref(),
            Some("bullseye")
        );
        let arm = Source::new(None, &AARCH64);
        assert!(arm.foreign);
        assert_eq!(arm.state_name().as_deref(), Some("host-arm64"));
        assert_eq!(
            Source::new(Some("bookworm-backports"), &S390X)
                .state_name()
                .as_deref(),
            Some("bookworm-backports-s390x")
        );
    }

    #[test]
    fn debs_are_found_per_architecture() {
        let dir = std::env::temp_dir().join(format!("mdiag-vm-debs-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        for name in [
            "busybox-static_1%3a1.35.0-4+deb12u1+b1_amd64.deb",
            "busybox-static_1%3a1.35.0-4+deb12u1+b1_s390x.deb",
        ] {
            fs::write(dir.join(name), "").unwrap();
        }
        let found = find_deb(&dir, "busybox-static", "s390x").unwrap().unwrap();
        assert!(found.to_string_lossy().ends_with("_s390x.deb"));
        assert_eq!(find_deb(&dir, "busybox-static", "arm64").unwrap(), None);
        assert_eq!(find_deb(&dir, "busybox", "amd64").unwrap(), None);
        fs::remove_dir_all(&dir).unwrap();
    }
}
