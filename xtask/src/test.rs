//! `cargo xtask test`: every test tier, in order, stopping at the first failure.
//!
//! Tiers: `lint` (rustfmt, clippy), `unit` (everything but the root suite),
//! `root` (the integration suite in `tests/`, which loads real BPF and needs
//! root), `cross` (aarch64 and s390x builds agree with x86_64's, see
//! `cross.rs`), `vm` (the kernel matrix: each architecture's binary booted on
//! Debian's kernels in QEMU, x86_64 5.10, 6.1 and 6.12, aarch64 6.1 and 6.12,
//! s390x 6.1 and 6.12, see `vm/`), `package` (the .deb and .rpm of the
//! release binary, installed, upgraded and purged here, see `package/test.rs`)
//! and `bench-build` (benchmarks still compile
//! and link). Cargo's own output goes straight through; xtask adds a failure
//! line and a timed summary on stderr.
use std::time::{Duration, Instant};

use anyhow::Result;
use clap::ValueEnum;

use crate::{
    cmd::{Cmd, need_sudo},
    run::build_for_tests,
    say, setup,
};

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, ValueEnum)]
pub enum Tier {
    /// `cargo fmt --check` and `cargo clippy -D warnings` on the workspace.
    Lint,
    /// Every crate's tests except the root-only suite.
    Unit,
    /// The integration suite in tests/ against a real mdiag binary, as root.
    Root,
    /// The aarch64 and s390x builds print what x86_64's prints (qemu-user);
    /// `cargo xtask cross-check` also runs the unit tests on s390x.
    Cross,
    /// `cargo xtask vm-matrix` with the debug binaries: every family that a
    /// kernel supports loads on x86_64 5.10, 6.1 and 6.12, aarch64 6.1 and
    /// 6.12, and s390x 6.12 and 6.1 (no BTF), and on x86_64 6.1 the release
    /// binary records the real mongod (QEMU, TCG; minutes).
    Vm,
    /// The release binary (x86_64) as a .deb and an .rpm: lintian, rpm -K and
    /// -qlp, the Dockerfile's COPY, then the .deb installed, upgraded and
    /// purged on this host (as root; refused where mdiag is installed).
    Package,
    /// `cargo test --benches --no-run`: benchmarks keep compiling and
    /// linking (in the dev profile; `cargo bench` builds them optimised).
    BenchBuild,
}

impl Tier {
    const ALL: [Tier; 7] = [
        Tier::Lint,
        Tier::Unit,
        Tier::Root,
        Tier::Cross,
        Tier::Vm,
        Tier::Package,
        Tier::BenchBuild,
    ];

    fn name(self) -> &'static str {
        match self {
            Tier::Lint => "lint",
            Tier::Unit => "unit",
            Tier::Root => "root",
            Tier::Cross => "cross",
            Tier::Vm => "vm",
            Tier::Package => "package",
            Tier::BenchBuild => "bench-build",
        }
    }

    fn run(self) -> Result<()> {
        match self {
            Tier::Lint => {
                Cmd::cargo().args(["fmt", "--all", "--", "--check"]).run()?;
                Cmd::cargo()
                    .args([
                        "clippy",
                        "--workspace",
                        "--all-targets",
                        "--",
                        "-D",
                        "warnings",
                    ])
                    .run()
            }
            // The venv: agent/tests/ftdc_cli.rs decodes FTDC with pymongo,
            // agent/tests/packaging.rs validates the Kubernetes manifests
            // with kubernetes-validate and the CRDs setup copied.
            Tier::Unit => crate::timed::run_tests(
                Cmd::cargo()
                    .args(["test", "--workspace", "--exclude", "mdiag-tests"])
                    .args(["--exclude", crate::run::NOT_FOR_THE_HOST])
                    .env("MDIAG_PY_VENV", crate::setup::py_venv_dir()?)
                    .env("MDIAG_K8S_SCHEMAS", crate::setup_k8s::schemas_dir()?)
                    .env("MDIAG_HELM", crate::setup_k8s::helm_bin()?),
                "unit tier",
            ),
            Tier::Root => root(&[]).map(drop),
            Tier::Cross => crate::cross::cross(crate::cross::UnitTests::Skip),
            Tier::Vm => vm(),
            Tier::Package => crate::package::test::tier(),
            // The dev profile: the benches compile and link against the
            // crates the unit tier already built, in a minute instead of a
            // ten-minute release build of everything (clippy in `lint` has
            // checked their code already).
            Tier::BenchBuild => Cmd::cargo()
                .args(["test", "--workspace", "--benches", "--no-run"])
                .args(["--exclude", crate::run::NOT_FOR_THE_HOST])
                .run(),
        }
    }
}

/// The root tier: the suite runs the debug mdiag named by `MDIAG_BIN`. Not
/// root: everything is built as the caller and only the test binaries run
/// under `sudo -E` (as cargo's runner), so target/ gets no root-owned files.
/// Once the suite is built (a CPU-bound few minutes), what the tiers of
/// `rest` (this one and the later ones) compile starts building at nice 19
/// beside it (`prebuild.rs`); returned running when the suite passed.
fn root(rest: &[Tier]) -> Result<Option<crate::prebuild::Prebuild>> {
    let sudo = need_sudo(
        "the root tier (it loads real BPF)",
        "run `cargo xtask test` as root, or leave this tier out with --tier",
    )?;
    // The TCMalloc workload (tests/tcmalloc-workload) is one of the
    // workspace's binaries.
    let build = build_for_tests()?;
    let mut cmd = if sudo {
        say!("not root: running the root suite through `sudo -E`");
        let mut cmd = Cmd::new("sudo");
        cmd.arg("-E").arg(&build.root_suite);
        cmd
    } else {
        Cmd::new(&build.root_suite)
    };
    // Where `cargo test` would run it: the package's directory.
    cmd.current_dir(crate::cmd::workspace_root().join("tests"))
        .env("MDIAG_BIN", &build.mdiag)
        .env("MDIAG_PY_VENV", crate::setup::py_venv_dir()?)
        .env(crate::mongod::ENV, crate::mongod::binary()?)
        .env(
            "MDIAG_TCMALLOC_BIN",
            crate::cmd::target_dir()?.join("debug/mdiag-tcmalloc"),
        )
        .arg("--test-threads=1");
    crate::timed::report_time(&mut cmd);
    // Dropped (stopped) if the suite fails: the run ends there.
    let prebuild = crate::prebuild::Prebuild::start(rest);
    crate::timed::run_tests(&mut cmd, "root tier")?;
    Ok(prebuild)
}

/// The vm tier: the kernel matrix on the debug binary the root tier tested
/// (x86_64) and the debug cross builds the cross tier ran (aarch64, s390x;
/// `vm_matrix` builds those itself, a no-op when they are fresh).
fn vm() -> Result<()> {
    #[derive(clap::Parser)]
    struct VmCli {
        #[command(flatten)]
        vm: crate::vm::VmArgs,
    }
    let bin = build_for_tests()?.mdiag;
    let cli = <VmCli as clap::Parser>::try_parse_from([
        std::ffi::OsStr::new("vm-matrix"),
        std::ffi::OsStr::new("--bin"),
        bin.as_os_str(),
    ])?;
    crate::vm::vm_matrix(&cli.vm)
}

/// The summary's line for the time spent waiting for the head start
/// (`prebuild.rs`) before the first tier that needs it.
const HEAD_START: &str = "(head start)";

enum Outcome {
    Passed(Duration),
    Failed(Duration),
}

/// [`test`] `repeat` times in a row (set-up only before the first), with
/// every CPU loaded by spinners when `cpu_load` (`load.rs`).
pub fn test_repeated(tiers: &[Tier], skip_setup: bool, cpu_load: bool, repeat: u32) -> Result<()> {
    for round in 1..=repeat {
        if repeat > 1 {
            say!("round {round} of {repeat}");
        }
        let _load = if cpu_load {
            Some(crate::load::CpuLoad::start()?)
        } else {
            None
        };
        test(tiers, skip_setup || round > 1)
            .map_err(|e| e.context(format!("round {round} of {repeat}")))?;
    }
    Ok(())
}

/// Runs `tiers` (all when empty) in their fixed order, after the set-up
/// they need ([`setup::steps_for`]) unless `skip_setup`.
pub fn test(tiers: &[Tier], skip_setup: bool) -> Result<()> {
    let mut tiers: Vec<Tier> = if tiers.is_empty() {
        Tier::ALL.to_vec()
    } else {
        tiers.to_vec()
    };
    tiers.sort();
    tiers.dedup();

    let run_start = Instant::now();
    let mut done: Vec<(&str, Outcome)> = Vec::new();
    let mut failure = None;
    if !skip_setup {
        let start = Instant::now();
        let steps: Vec<setup::Step> = tiers
            .iter()
            .flat_map(|&t| setup::steps_for(t).iter().copied())
            .collect();
        match setup::setup_steps(&steps) {
            Ok(()) => done.push(("setup", Outcome::Passed(start.elapsed()))),
            Err(e) => {
                done.push(("setup", Outcome::Failed(start.elapsed())));
                say!("setup failed");
                failure = Some(e);
            }
        }
    }
    if failure.is_none() {
        crate::disk::warn_if_short();
        // What the later tiers compile, built at nice 19 beside the root
        // suite (`prebuild.rs`); waited for when the first of them starts,
        // stopped (dropped) if the run fails before.
        let mut prebuild: Option<crate::prebuild::Prebuild> = None;
        for (i, &tier) in tiers.iter().enumerate() {
            if crate::prebuild::needs(tier)
                && let Some(p) = prebuild.take()
            {
                // Its own line in the summary: the time waited for the
                // head start is part of the run's, not of any tier's.
                // FAILED there does not stop the run: the tiers build
                // what the head start did not.
                let start = Instant::now();
                let built = p.finish();
                let waited = start.elapsed();
                done.push((
                    HEAD_START,
                    if built {
                        Outcome::Passed(waited)
                    } else {
                        Outcome::Failed(waited)
                    },
                ));
            }
            say!("tier {}: starting", tier.name());
            let start = Instant::now();
            let result = match tier {
                Tier::Root => root(&tiers[i..]).map(|p| prebuild = p),
                _ => tier.run(),
            };
            let elapsed = start.elapsed();
            say!("tier {}: {}", tier.name(), crate::disk::usage());
            match result {
                Ok(()) => done.push((tier.name(), Outcome::Passed(elapsed))),
                Err(e) => {
                    done.push((tier.name(), Outcome::Failed(elapsed)));
                    say!("tier {} failed", tier.name());
                    failure = Some(e.context(format!("tier {} failed", tier.name())));
                    break;
                }
            }
        }
    }

    say!("summary:");
    for (name, outcome) in &done {
        let (word, time) = match outcome {
            Outcome::Passed(t) => ("ok", t),
            Outcome::Failed(t) => ("FAILED", t),
        };
        say!("  {name:<12} {word:<7} {:>7.1}s", time.as_secs_f64());
    }
    for tier in tiers
        .iter()
        .filter(|t| !done.iter().any(|(n, _)| *n == t.name()))
    {
        say!("  {:<12} not run", tier.name());
    }
    say!(
        "  {:<12} {:<7} {:>7.1}s",
        "in all",
        "",
        run_start.elapsed().as_secs_f64()
    );
    failure.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::{Step, steps_for};

    #[test]
    fn every_tier_builds_and_all_tiers_set_up_everything() {
        for tier in Tier::ALL {
            assert_eq!(steps_for(tier).first(), Some(&Step::Build), "{tier:?}");
        }
        let mut all: Vec<Step> = Tier::ALL
            .iter()
            .flat_map(|&t| steps_for(t).iter().copied())
            .collect();
        all.sort();
        all.dedup();
        assert_eq!(all, Step::ALL, "`./x test` sets up what `./x setup` does");
        // Linting needs only what building does; the venv's pip fetches
        // mongod, so a tier with mongod has the venv (set up before it).
        assert_eq!(steps_for(Tier::Lint), [Step::Build]);
        for tier in Tier::ALL {
            let s = steps_for(tier);
            assert!(!s.contains(&Step::Mongod) || s.contains(&Step::PyVenv));
        }
    }
}
