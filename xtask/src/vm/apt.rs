//! apt for the kernel matrix: which package of a kernel line is newest, its
//! download into `<vm>/debs/`, and its extraction into `<vm>/kernels/`.
//!
//! Why a private apt state: 5.10 comes from Debian 11, which the host's
//! sources need not have. For such a suite apt runs on `<vm>/apt/<suite>/`
//! (its own sources.list on the host's Debian mirror, its own lists and
//! cache), so the host's apt state is never touched. Finished downloads and
//! extractions are kept and skipped next time; unfinished ones go to a
//! scratch directory first, so they are never taken for finished ones.
use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result, bail};

use super::Line;
use crate::{
    cmd::{Cmd, need_sudo},
    say,
};

/// Where Debian's archive keys are (for the private apt sources).
const DEBIAN_KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";
const DEFAULT_MIRROR: &str = "http://deb.debian.org/debian";

/// apt, for the host's sources or a private state per extra suite.
pub(super) struct Apt {
    vm_dir: PathBuf,
    /// Sources (`None`: the host's) already updated in this run.
    updated: BTreeSet<Option<&'static str>>,
}

impl Apt {
    pub(super) fn new(vm_dir: &Path) -> Self {
        Self {
            vm_dir: vm_dir.to_owned(),
            updated: BTreeSet::new(),
        }
    }

    /// `apt-get` or `apt-cache` for `suite`'s sources.
    fn cmd(&self, program: &str, suite: Option<&str>) -> Result<Cmd> {
        let mut cmd = Cmd::new(program);
        cmd.arg("-q");
        if let Some(suite) = suite {
            let state = self.private_state(suite)?;
            let opt = |k: &str, v: &Path| format!("{k}={}", v.display());
            cmd.args([
                "-o",
                &opt("Dir::Etc::SourceList", &state.join("sources.list")),
            ])
            .args(["-o", "Dir::Etc::SourceParts=/dev/null"])
            .args(["-o", &opt("Dir::State::Lists", &state.join("lists"))])
            // Its package cache too, so the host's is not rebuilt from these lists.
            .args(["-o", &opt("Dir::Cache", &state.join("cache"))]);
        }
        Ok(cmd)
    }

    /// `<vm>/apt/<suite>/`, with a sources.list for `suite` on the host's
    /// Debian mirror.
    fn private_state(&self, suite: &str) -> Result<PathBuf> {
        let state = self.vm_dir.join("apt").join(suite);
        for sub in ["lists/partial", "cache"] {
            fs::create_dir_all(state.join(sub))
                .with_context(|| format!("creating {}", state.join(sub).display()))?;
        }
        let mirror = host_mirror();
        let sources = format!(
            "deb [signed-by={}] {} {suite} main\n",
            mirror.signed_by, mirror.uri
        );
        let path = state.join("sources.list");
        if fs::read_to_string(&path).ok().as_deref() != Some(sources.as_str()) {
            fs::write(&path, &sources).with_context(|| format!("writing {}", path.display()))?;
        }
        Ok(state)
    }

    fn update(&mut self, suite: Option<&'static str>) -> Result<()> {
        say!(
            "vm-matrix: apt-get update ({})",
            suite.map_or("the host's sources".to_owned(), |s| format!(
                "private state for {s}"
            ))
        );
        let mut cmd = if suite.is_none()
            && need_sudo("apt-get update", "run `apt-get update` as root first")?
        {
            let mut cmd = Cmd::new("sudo");
            cmd.arg("apt-get");
            cmd
        } else {
            self.cmd("apt-get", suite)?
        };
        cmd.arg("update").run()?;
        self.updated.insert(suite);
        Ok(())
    }

    /// The newest package of `line`, updating the sources once when nothing
    /// matches.
    fn newest(&mut self, line: &Line) -> Result<String> {
        loop {
            for pattern in line.patterns {
                let out = self
                    .cmd("apt-cache", line.suite)?
                    .args(["search", "--names-only", pattern])
                    .stdout()?;
                if let Some(package) = newest_package(&out) {
                    return Ok(package);
                }
            }
            if self.updated.contains(&line.suite) {
                bail!(
                    "apt-cache finds no package matching {} (suite {})",
                    line.patterns.join(" or "),
                    line.suite.unwrap_or("of the host")
                );
            }
            self.update(line.suite)?;
        }
    }

    /// `<vm>/debs/<package>_….deb`, downloaded unless it is there.
    fn download(&self, line: &Line, package: &str) -> Result<PathBuf> {
        let debs = self.vm_dir.join("debs");
        if let Some(deb) = find_deb(&debs, package)? {
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
        say!("vm-matrix {}: downloading {package}", line.name);
        self.cmd("apt-get", line.suite)?
            // As root apt would drop to _apt, who cannot write here.
            .args(["-o", "APT::Sandbox::User=root", "download", package])
            .current_dir(&partial)
            .run()?;
        let got = find_deb(&partial, package)?
            .with_context(|| format!("apt-get download left no {package}_*.deb"))?;
        let name = got.file_name().context("a .deb without a file name")?;
        let deb = debs.join(name);
        fs::rename(&got, &deb).with_context(|| format!("moving {}", got.display()))?;
        Ok(deb)
    }
}

/// The `.deb` of `package` in `dir` (the highest version when several).
fn find_deb(dir: &Path, package: &str) -> Result<Option<PathBuf>> {
    let prefix = format!("{package}_");
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    let mut found = Vec::new();
    for entry in entries {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with(&prefix) && name.ends_with(".deb") {
            found.push(path);
        }
    }
    Ok(found.into_iter().max())
}

/// The newest package in `apt-cache search` output ("name - description"
/// lines): the one whose version numbers (between `linux-image-` and
/// `-cloud`) are highest, compared as numbers.
fn newest_package(apt_cache_output: &str) -> Option<String> {
    apt_cache_output
        .lines()
        .filter_map(|l| l.split(" - ").next())
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .max_by_key(|n| (version_key(n), n.to_string()))
        .map(str::to_owned)
}

/// "linux-image-6.12.117+deb12-cloud-amd64-unsigned" → [6, 12, 117, 12].
fn version_key(package: &str) -> Vec<u64> {
    let v = package.strip_prefix("linux-image-").unwrap_or(package);
    let v = v.split("-cloud").next().unwrap_or(v);
    v.split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect()
}

struct Mirror {
    uri: String,
    signed_by: String,
}

/// The host's main Debian mirror (not the security one), from
/// `/etc/apt/sources.list.d/debian.sources` or `/etc/apt/sources.list`.
fn host_mirror() -> Mirror {
    let read = |p: &str| fs::read_to_string(p).unwrap_or_default();
    mirror_from_deb822(&read("/etc/apt/sources.list.d/debian.sources"))
        .or_else(|| mirror_from_list(&read("/etc/apt/sources.list")))
        .unwrap_or_else(|| Mirror {
            uri: DEFAULT_MIRROR.to_owned(),
            signed_by: DEBIAN_KEYRING.to_owned(),
        })
}

fn is_security(uri: &str, suites: &str) -> bool {
    uri.contains("security") || suites.split_whitespace().all(|s| s.ends_with("-security"))
}

/// The first deb822 stanza with a `deb` type and a non-security source.
fn mirror_from_deb822(text: &str) -> Option<Mirror> {
    text.split("\n\n").find_map(|stanza| {
        let field = |name: &str| {
            stanza.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
            })
        };
        let uri = field("URIs")?.split_whitespace().next()?;
        let types = field("Types").unwrap_or("deb");
        let suites = field("Suites").unwrap_or("");
        if !types.split_whitespace().any(|t| t == "deb") || is_security(uri, suites) {
            return None;
        }
        // A path; an inline key block does not fit in a one-line source.
        let signed_by = field("Signed-By")
            .filter(|s| s.starts_with('/'))
            .unwrap_or(DEBIAN_KEYRING);
        Some(Mirror {
            uri: uri.to_owned(),
            signed_by: signed_by.to_owned(),
        })
    })
}

/// The first non-security `deb URI SUITE …` line of a one-line sources.list.
fn mirror_from_list(text: &str) -> Option<Mirror> {
    text.lines().find_map(|l| {
        let mut words = l.split_whitespace();
        if words.next()? != "deb" {
            return None;
        }
        let mut uri = words.next()?;
        if uri.starts_with('[') {
            // Options: "[a=b c=d]", one word or several.
            if !uri.ends_with(']') {
                words.find(|w| w.ends_with(']'))?;
            }
            uri = words.next()?;
        }
        let suite = words.next()?;
        (!is_security(uri, suite)).then(|| Mirror {
            uri: uri.to_owned(),
            signed_by: DEBIAN_KEYRING.to_owned(),
        })
    })
}

/// The package and kernel image of `line`: the newest package, downloaded
/// and extracted unless that is done already.
pub(super) fn kernel(line: &Line, apt: &mut Apt, dir: &Path) -> Result<(String, PathBuf)> {
    let mut package = apt.newest(line)?;
    let deb = match apt.download(line, &package) {
        Ok(deb) => deb,
        // The index may be older than the mirror, which dropped the package.
        Err(e) if !apt.updated.contains(&line.suite) => {
            say!(
                "vm-matrix {}: {e:#}; updating the package lists and trying again",
                line.name
            );
            apt.update(line.suite)?;
            package = apt.newest(line)?;
            apt.download(line, &package)?
        }
        Err(e) => return Err(e),
    };
    let name = package.strip_prefix("linux-image-").unwrap_or(&package);
    let root = dir.join("kernels").join(name);
    if let Some(vmlinuz) = find_vmlinuz(&root)? {
        say!("vm-matrix {}: {package} already extracted", line.name);
        return Ok((package, vmlinuz));
    }
    let partial = dir.join("kernels").join(format!("{name}.partial"));
    if partial.exists() {
        fs::remove_dir_all(&partial).with_context(|| format!("removing {}", partial.display()))?;
    }
    fs::create_dir_all(&partial).with_context(|| format!("creating {}", partial.display()))?;
    Cmd::new("dpkg-deb")
        .arg("-x")
        .arg(&deb)
        .arg(&partial)
        .run()?;
    if root.exists() {
        fs::remove_dir_all(&root).with_context(|| format!("removing {}", root.display()))?;
    }
    fs::rename(&partial, &root).with_context(|| format!("renaming {}", partial.display()))?;
    let vmlinuz =
        find_vmlinuz(&root)?.with_context(|| format!("{} has no boot/vmlinuz-*", deb.display()))?;
    Ok((package, vmlinuz))
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

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn the_main_mirror_is_found_not_the_security_one() {
        let deb822 = "\
Types: deb
# http://snapshot.debian.org/archive/debian-security/20250520T000000Z
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /etc/apt/keyrings/mine.gpg
";
        let m = mirror_from_deb822(deb822).unwrap();
        assert_eq!(m.uri, "http://mirror.example/debian");
        assert_eq!(m.signed_by, "/etc/apt/keyrings/mine.gpg");
        let list = "# comment\ndeb http://security.debian.org/ bookworm-security main\n\
                    deb [arch=amd64 signed-by=/k.gpg] http://ftp.de.debian.org/debian bookworm main\n";
        assert_eq!(
            mirror_from_list(list).unwrap().uri,
            "http://ftp.de.debian.org/debian"
        );
        let list = "deb [trusted=yes] http://m.example/debian bookworm main\n";
        assert_eq!(
            mirror_from_list(list).unwrap().uri,
            "http://m.example/debian"
        );
        assert!(mirror_from_deb822("").is_none());
    }
}
