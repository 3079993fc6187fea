//! The `package` test tier: packages the x86_64 release binary twice (revisions
//! 1 and 2) and checks what an SRE's host would see.
//!
//! - lintian (Debian 12's) on the .deb: no error and no warning that
//!   `packaging/deb/lintian-overrides` does not override with its reason;
//! - the .rpm with Debian's `rpm`: `rpm -K` (header and payload digests),
//!   name/version/release/arch, `rpm -qlp` is exactly the layout, the config
//!   file is `%config`, glibc ≥ 2.17 is required, the scriptlets are
//!   `packaging/rpm/`'s and enable or start nothing, and the payload's
//!   binary is the release binary byte for byte (`rpm2cpio | cpio`);
//! - the Dockerfile copies exactly the binary `package` wrote for this
//!   architecture (`dockerfile.rs`), and it is the release binary;
//! - on this host, as root: `dpkg -i` of revision 1 (status, version,
//!   conffile, the binary byte for byte, `mdiag --version`, `systemd-analyze
//!   verify` of the installed unit, whose `ExecStart=` is `/usr/bin/mdiag`,
//!   the unit neither enabled nor started by the maintainer scripts), an
//!   edit of the conffile, `dpkg -i` of revision 2 without a prompt (the edit
//!   kept, version 2), then `dpkg --purge`: every file and `/etc/mdiag` gone.
//!   It refuses to run where mdiag is installed already (or its files are
//!   there), and purges on every way out, failure included.
//!
//! Set-up (idempotent): Debian's lintian, rpm, rpm2cpio and cpio.
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};

use super::{BIN, CONFIG, NAME, UNIT, deb_arch, docker_binary, dockerfile};
use crate::{
    arch,
    cmd::{Cmd, need_sudo, workspace_root},
    say,
    setup::install_missing,
};

/// Debian packages the checks run.
const TOOLS: &[&str] = &["lintian", "rpm", "rpm2cpio", "cpio"];

/// The tier.
pub fn tier() -> Result<()> {
    install_missing("package", TOOLS)?;
    let sudo = need_sudo(
        "the package tier (dpkg -i / --purge of the .deb)",
        "run `cargo xtask test` as root, or leave this tier out with --tier",
    )?;
    let arch = arch::host();
    let bin = crate::release::build(arch)?;
    let first = super::package_binary(arch, &bin, 1)?;
    let second = super::package_binary(arch, &bin, 2)?;
    let (deb1, rpm1, docker) = (&first[0], &first[1], &first[2]);
    let deb2 = &second[0];
    lintian(deb1)?;
    say!("package: lintian: no error, no unexplained warning");
    check_rpm(rpm1, &bin, arch.name)?;
    say!("package: {} checked", rpm1.display());
    check_docker(arch, docker, &bin)?;
    say!("package: the Dockerfile copies {}", docker.display());
    install_upgrade_purge(sudo, deb1, deb2, &bin)?;
    say!("package: .deb installed, upgraded and purged; host as found");
    Ok(())
}

fn lintian(deb: &Path) -> Result<()> {
    let out = Cmd::new("lintian")
        .args(["--fail-on", "error,warning", "--display-level", ">=warning"])
        .arg("--allow-root")
        .arg(deb)
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    eprint!("{text}{}", String::from_utf8_lossy(&out.stderr));
    ensure!(out.status.success(), "lintian failed on {}", deb.display());
    Ok(())
}

/// `rpm` with `args` on `rpm`; its stdout.
fn rpm_q(args: &[&str], rpm: &Path) -> Result<String> {
    Cmd::new("rpm").args(args).arg(rpm).stdout()
}

/// The lines of `script` that are not comments.
fn code(script: &str) -> Vec<&str> {
    script
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// Fails when a maintainer script's code enables, starts or restarts a unit.
fn enables_nothing(name: &str, script: &str) -> Result<()> {
    for line in code(script) {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.contains(&"systemctl")
            && [
                "enable",
                "start",
                "restart",
                "reload-or-restart",
                "try-restart",
            ]
            .iter()
            .any(|v| words.contains(v))
        {
            bail!("{name} runs `{line}`: installing must enable and start nothing");
        }
    }
    Ok(())
}

fn check_rpm(rpm: &Path, bin: &Path, arch: &str) -> Result<()> {
    let k = rpm_q(&["-K"], rpm)?;
    ensure!(k.contains("digests OK"), "rpm -K: {k}");
    let nvra = rpm_q(
        &["-qp", "--qf", "%{NAME} %{VERSION} %{RELEASE} %{ARCH}"],
        rpm,
    )?;
    let version = env!("CARGO_PKG_VERSION");
    ensure!(
        nvra == format!("{NAME} {version} 1 {arch}"),
        "rpm -qp: {nvra}"
    );
    let listed: Vec<String> = rpm_q(&["-qlp"], rpm)?.lines().map(str::to_owned).collect();
    let mut expected: Vec<String> = super::layout(arch::host(), bin)?
        .into_iter()
        .map(|f| f.dest)
        .collect();
    expected.sort();
    ensure!(
        listed == expected,
        "rpm -qlp: {listed:?}, expected {expected:?}"
    );
    let config = rpm_q(&["-qp", "--configfiles"], rpm)?;
    ensure!(config.trim() == CONFIG, "config files: {config}");
    let requires = rpm_q(&["-qp", "--requires"], rpm)?;
    ensure!(
        requires.lines().any(|l| l.trim() == "glibc >= 2.17"),
        "requires: {requires}"
    );
    for (tag, file) in [("POSTIN", "post"), ("PREUN", "preun"), ("POSTUN", "postun")] {
        let packaged = rpm_q(&["-qp", "--qf", &format!("%{{{tag}}}")], rpm)?;
        let source =
            std::fs::read_to_string(workspace_root().join(format!("packaging/rpm/{file}.sh")))?;
        ensure!(
            packaged.trim() == source.trim(),
            "%{tag} is not packaging/rpm/{file}.sh:\n{packaged}"
        );
        if tag == "POSTIN" {
            enables_nothing("%post", &packaged)?;
        }
    }
    let payload = Cmd::new("sh")
        .args([
            "-c",
            r#"rpm2cpio "$1" | cpio --quiet -i --to-stdout ./usr/bin/mdiag"#,
            "sh",
        ])
        .arg(rpm)
        .output()?;
    ensure!(payload.status.success(), "rpm2cpio | cpio failed");
    ensure!(
        payload.stdout == std::fs::read(bin)?,
        "the RPM's /usr/bin/mdiag is not {}",
        bin.display()
    );
    Ok(())
}

fn check_docker(arch: &arch::Arch, docker: &Path, bin: &Path) -> Result<()> {
    let text = std::fs::read_to_string(workspace_root().join(dockerfile::DOCKERFILE))?;
    let ignore = std::fs::read_to_string(workspace_root().join(dockerfile::DOCKERIGNORE))?;
    ensure!(*docker == docker_binary(arch)?, "{}", docker.display());
    let rel = docker.strip_prefix(workspace_root()).with_context(|| {
        format!(
            "{} is outside the repository, the Dockerfile's build context",
            docker.display()
        )
    })?;
    let sources = dockerfile::copy_sources(&text, deb_arch(arch)?)?;
    ensure!(
        sources.iter().any(|s| Path::new(s) == rel),
        "the Dockerfile copies {sources:?}, not {}",
        rel.display()
    );
    for s in &sources {
        ensure!(
            workspace_root().join(s).is_file(),
            "the Dockerfile copies {s}, which does not exist"
        );
        ensure!(dockerfile::in_context(&ignore, s), "{s} is dockerignored");
    }
    ensure!(
        std::fs::read(docker)? == std::fs::read(bin)?,
        "{}",
        docker.display()
    );
    Ok(())
}

/// A command as root: directly, or through sudo.
fn root(sudo: bool, program: &str) -> Cmd {
    if sudo {
        let mut c = Cmd::new("sudo");
        c.arg(program);
        c
    } else {
        Cmd::new(program)
    }
}

/// `dpkg-query`'s `${Status} ${Version}` for mdiag, `None` when dpkg does
/// not know it.
fn dpkg_status() -> Result<Option<String>> {
    let out = Cmd::new("dpkg-query")
        .args(["-W", "-f", "${Status} ${Version}", NAME])
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    Ok((out.status.success() && !text.starts_with("unknown ok not-installed")).then_some(text))
}

/// Paths the package owns on the host; none may exist before or after.
fn host_paths() -> Vec<PathBuf> {
    [BIN, UNIT, CONFIG, "/etc/mdiag", "/usr/share/doc/mdiag"]
        .iter()
        .map(PathBuf::from)
        .collect()
}

/// Purges mdiag when dropped (the test's every way out).
struct Purge {
    sudo: bool,
}

impl Drop for Purge {
    fn drop(&mut self) {
        if dpkg_status().ok().flatten().is_some() {
            say!("package: purging mdiag (restoring the host)");
            if let Err(e) = root(self.sudo, "dpkg").args(["--purge", NAME]).run() {
                say!("package: could not purge mdiag: {e:#}; run `dpkg --purge mdiag`");
            }
        }
    }
}

fn install_upgrade_purge(sudo: bool, deb1: &Path, deb2: &Path, bin: &Path) -> Result<()> {
    if let Some(status) = dpkg_status()? {
        bail!(
            "mdiag is known to dpkg here ({status}): the package tier installs and purges it, and leaves an installation it did not make alone"
        );
    }
    if let Some(p) = host_paths().into_iter().find(|p| p.exists()) {
        bail!(
            "{} exists: the package tier would overwrite and purge it",
            p.display()
        );
    }
    let guard = Purge { sudo };
    let version = env!("CARGO_PKG_VERSION");

    dpkg_install(sudo, deb1)?;
    let status = dpkg_status()?.unwrap_or_default();
    ensure!(
        status == format!("install ok installed {version}-1"),
        "after dpkg -i: {status}"
    );
    check_installed(bin, version)?;
    let conffiles = Cmd::new("dpkg-query")
        .args(["-W", "-f", "${Conffiles}", NAME])
        .stdout()?;
    ensure!(
        conffiles
            .lines()
            .any(|l| l.split_whitespace().next() == Some(CONFIG)),
        "conffiles: {conffiles}"
    );
    for script in ["postinst", "prerm", "postrm"] {
        let installed = std::fs::read_to_string(format!("/var/lib/dpkg/info/{NAME}.{script}"))?;
        enables_nothing(script, &installed)?;
    }

    // An administrator's edit of the conffile survives the upgrade, and the
    // upgrade asks nothing (stdin is closed).
    let edit = "# edited by the package tier\n";
    root(sudo, "sh")
        .args(["-c", r#"printf '%s' "$1" >> "$2""#, "sh", edit, CONFIG])
        .run()?;
    dpkg_install(sudo, deb2)?;
    let status = dpkg_status()?.unwrap_or_default();
    ensure!(
        status == format!("install ok installed {version}-2"),
        "after the upgrade: {status}"
    );
    let config = std::fs::read_to_string(CONFIG)?;
    ensure!(
        config.ends_with(edit),
        "the upgrade lost the edit of {CONFIG}"
    );
    check_installed(bin, version)?;

    root(sudo, "dpkg").args(["--purge", NAME]).run()?;
    drop(guard);
    if let Some(status) = dpkg_status()? {
        bail!("after dpkg --purge: {status}");
    }
    if let Some(p) = host_paths().into_iter().find(|p| p.exists()) {
        bail!("{} is left after dpkg --purge", p.display());
    }
    Ok(())
}

/// `dpkg -i` with stdin closed: a conffile prompt fails instead of waiting.
fn dpkg_install(sudo: bool, deb: &Path) -> Result<()> {
    let out = root(sudo, "dpkg").arg("-i").arg(deb).output()?;
    eprint!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    ensure!(out.status.success(), "dpkg -i {} failed", deb.display());
    Ok(())
}

/// The installed binary, unit and their state.
fn check_installed(bin: &Path, version: &str) -> Result<()> {
    ensure!(
        std::fs::read(BIN)? == std::fs::read(bin)?,
        "{BIN} is not {}",
        bin.display()
    );
    let v = Cmd::new(BIN).arg("--version").stdout()?;
    ensure!(
        v.split_whitespace().any(|w| w == version),
        "`{BIN} --version` printed {v:?}, not version {version}"
    );
    let unit = std::fs::read_to_string(UNIT)?;
    let exec: Vec<&str> = unit
        .lines()
        .filter(|l| l.starts_with("ExecStart="))
        .collect();
    ensure!(exec == [format!("ExecStart={BIN} agent")], "{exec:?}");
    let verify = Cmd::new("systemd-analyze")
        .args(["verify", UNIT])
        .output()?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
    ensure!(
        verify.status.success() && !said.contains("mdiag-agent.service:"),
        "systemd-analyze verify {UNIT}:\n{said}"
    );
    // Not enabled: no `*.wants/` link anywhere systemd looks for them.
    for dir in [
        "/etc/systemd/system",
        "/usr/lib/systemd/system",
        "/lib/systemd/system",
    ] {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for e in entries.flatten() {
            let link = e.path().join("mdiag-agent.service");
            ensure!(
                link.symlink_metadata().is_err(),
                "{} exists: installing enabled the agent",
                link.display()
            );
        }
    }
    let enabled = Cmd::new("systemctl")
        .args(["is-enabled", "mdiag-agent.service"])
        .output()?;
    let state = String::from_utf8_lossy(&enabled.stdout).trim().to_owned();
    ensure!(state == "disabled", "systemctl is-enabled: {state:?}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_maintainer_scripts_enable_and_start_nothing() {
        for s in [
            "deb/postinst",
            "deb/prerm",
            "deb/postrm",
            "rpm/post.sh",
            "rpm/postun.sh",
        ] {
            let text = std::fs::read_to_string(workspace_root().join("packaging").join(s)).unwrap();
            enables_nothing(s, &text).unwrap();
        }
        assert!(
            enables_nothing("x", "if a; then\n  systemctl --system enable --now x\nfi").is_err()
        );
        assert!(enables_nothing("x", "# systemctl start x\n").is_ok());
    }
}
