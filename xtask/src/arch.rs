//! The CPU architectures mdiag is built for, and how to cross-build for each
//! from an x86_64 Debian machine: one table ([`ARCHES`]) drives
//! `cargo xtask build --target`, the `cross` test tier and the VM matrix.
//!
//! Why each row is what it is:
//! - aarch64: rustup publishes `rust-std` for the pinned toolchain, Debian's
//!   `gcc-aarch64-linux-gnu` links (and compiles the C inside zstd and ring).
//! - s390x: rustup publishes no `rust-std` for 1.98.0, so std is built from
//!   the toolchain's `rust-src` (`-Zbuild-std`, allowed on a stable compiler
//!   by `RUSTC_BOOTSTRAP=1` for this one cargo process only).
//!   The eBPF object is then big-endian (`bpfeb`): aya-build picks the
//!   endianness from the agent's target.
//!
//! Binaries of other architectures run here under qemu-user (Debian's
//! `qemu-user`) with the cross glibc of `libc6-<arch>-cross` as their root
//! (`-L`).
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::{
    cmd::{Cmd, target_dir},
    say,
    setup::install_missing,
};

/// One architecture.
#[derive(Debug, PartialEq, Eq)]
pub struct Arch {
    /// What `--target` takes besides the triple, and `uname -m`.
    pub name: &'static str,
    /// Rust's target triple.
    pub triple: &'static str,
    /// `None` for the host; else the cross C toolchain (compiler and linker).
    pub cross_gcc: Option<&'static str>,
    /// Debian packages cross-building and emulating need.
    pub packages: &'static [&'static str],
    /// std comes from `rust-src` (no `rust-std` published for the pinned
    /// toolchain).
    pub build_std: bool,
    /// qemu-user's binary, `None` for the host.
    pub qemu_user: Option<&'static str>,
    /// The root qemu-user resolves the dynamic loader and libraries in.
    pub sysroot: Option<&'static str>,
    /// Big-endian: the eBPF object is `bpfeb`.
    pub big_endian: bool,
}

pub const ARCHES: &[Arch] = &[
    Arch {
        name: "x86_64",
        triple: "x86_64-unknown-linux-gnu",
        cross_gcc: None,
        packages: &[],
        build_std: false,
        qemu_user: None,
        sysroot: None,
        big_endian: false,
    },
    Arch {
        name: "aarch64",
        triple: "aarch64-unknown-linux-gnu",
        cross_gcc: Some("aarch64-linux-gnu-gcc"),
        packages: &[
            "gcc-aarch64-linux-gnu",
            "libc6-dev-arm64-cross",
            "qemu-user",
        ],
        build_std: false,
        qemu_user: Some("qemu-aarch64"),
        sysroot: Some("/usr/aarch64-linux-gnu"),
        big_endian: false,
    },
    Arch {
        name: "s390x",
        triple: "s390x-unknown-linux-gnu",
        cross_gcc: Some("s390x-linux-gnu-gcc"),
        packages: &["gcc-s390x-linux-gnu", "libc6-dev-s390x-cross", "qemu-user"],
        build_std: true,
        qemu_user: Some("qemu-s390x"),
        sysroot: Some("/usr/s390x-linux-gnu"),
        big_endian: true,
    },
];

/// The host's row.
pub fn host() -> &'static Arch {
    &ARCHES[0]
}

/// For clap: an architecture name or its triple.
pub fn parse_arch(s: &str) -> Result<&'static Arch, String> {
    ARCHES
        .iter()
        .find(|a| a.name == s || a.triple == s)
        .ok_or_else(|| {
            let names: Vec<&str> = ARCHES.iter().map(|a| a.name).collect();
            format!(
                "unknown target {s:?}; one of: {} (or their Rust triples)",
                names.join(", ")
            )
        })
}

impl Arch {
    pub fn is_host(&self) -> bool {
        self.cross_gcc.is_none()
    }

    /// `CARGO_TARGET_<TRIPLE>_<what>`.
    fn cargo_target_env(&self, what: &str) -> String {
        format!(
            "CARGO_TARGET_{}_{what}",
            self.triple.to_uppercase().replace('-', "_")
        )
    }

    /// Installs what building for this architecture needs: the cross C
    /// toolchain and qemu-user (apt), and `rust-std` or `rust-src` for the
    /// pinned toolchain (rustup). Idempotent.
    pub fn prepare(&self) -> Result<()> {
        if self.is_host() {
            return Ok(());
        }
        install_missing(&format!("build {}", self.name), self.packages)?;
        let toolchain = crate::setup::user_toolchain_name()?;
        let (what, list, add): (&str, &[&str], Vec<&str>) = if self.build_std {
            (
                "rust-src",
                &["component", "list", "--installed", "--toolchain"],
                vec!["component", "add", "--toolchain", &toolchain, "rust-src"],
            )
        } else {
            (
                self.triple,
                &["target", "list", "--installed", "--toolchain"],
                vec!["target", "add", "--toolchain", &toolchain, self.triple],
            )
        };
        let installed = Cmd::new("rustup")
            .env("RUSTUP_AUTO_INSTALL", "0")
            .args(list)
            .arg(&toolchain)
            .stdout()?;
        if installed.lines().any(|l| l.trim() == what) {
            say!(
                "build {}: {what} already installed for {toolchain}",
                self.name
            );
            return Ok(());
        }
        say!("build {}: adding {what} to {toolchain}", self.name);
        Cmd::new("rustup").args(&add).run()
    }

    /// Cargo's target directory for this architecture's debug builds: the
    /// workspace's for the host, one of its own inside it for each foreign
    /// architecture (`<target>/build-<name>`). Why: cargo locks a profile's
    /// directory for the whole of a build, host-side build scripts and proc
    /// macros included, so an aarch64 build in the workspace's directory
    /// made the host's tiers wait for it (the head start of `prebuild.rs`
    /// runs them side by side); and the s390x build runs with
    /// `RUSTC_BOOTSTRAP=1`, for which proc-macro2, anyhow and thiserror rerun
    /// their build scripts (`rerun-if-env-changed`), so sharing host-side
    /// artifacts with the aarch64 build recompiled nearly every crate at
    /// each switch between the two. The host-side artifacts are compiled
    /// once per directory (a minute); the host's own features differ from
    /// `-p mdiag`'s anyway.
    fn cargo_target_dir(&self) -> Result<PathBuf> {
        let dir = target_dir()?;
        Ok(if self.is_host() {
            dir.to_path_buf()
        } else {
            dir.join(format!("build-{}", self.name))
        })
    }

    /// Sets what cargo needs to build for this architecture on `cmd` (a
    /// `cargo build`/`test` being assembled): `--target`, the linker, the
    /// runner for `cargo test`, its own target directory, the optimisation
    /// `debug` asks for, and build-std where needed.
    pub fn cargo_args(&self, cmd: &mut Cmd, debug: DebugBuild) -> Result<()> {
        if self.is_host() {
            return Ok(());
        }
        cmd.args(["--target", self.triple])
            .env("CARGO_TARGET_DIR", self.cargo_target_dir()?);
        if let Some(gcc) = self.cross_gcc {
            cmd.env(self.cargo_target_env("LINKER"), gcc);
        }
        if let (Some(qemu), Some(root)) = (self.qemu_user, self.sysroot) {
            cmd.env(self.cargo_target_env("RUNNER"), format!("{qemu} -L {root}"));
        }
        match debug {
            DebugBuild::ForUnitTests => {
                cmd.env("CARGO_PROFILE_DEV_OPT_LEVEL", "1");
            }
            DebugBuild::Plain => {
                for package in EMULATED_HOT {
                    cmd.arg("--config")
                        .arg(format!("profile.dev.package.{package}.opt-level=1"));
                }
            }
        }
        if self.build_std {
            // `test` too, although only `cargo test` needs it: cargo makes
            // every crate depend on each std crate it builds, so a `cargo
            // test` with `test` added to the set recompiled every dependency
            // that `cargo build` had just compiled (5 min in the cross tier).
            // The binary does not link it (nothing uses it).
            cmd.env("RUSTC_BOOTSTRAP", "1")
                .arg("-Zbuild-std=std,panic_abort,test");
        }
        Ok(())
    }

    /// Where cargo puts this architecture's `profile` outputs.
    pub fn out_dir(&self, release: bool) -> Result<PathBuf> {
        let profile = if release { "release" } else { "debug" };
        Ok(if self.is_host() {
            target_dir()?.join(profile)
        } else {
            self.cargo_target_dir()?.join(self.triple).join(profile)
        })
    }

    /// A command that runs `bin` (built for this architecture) here: directly
    /// on the host, else under qemu-user.
    pub fn runner(&self, bin: &Path) -> Cmd {
        match (self.qemu_user, self.sysroot) {
            (Some(qemu), Some(root)) => {
                let mut cmd = Cmd::new(qemu);
                cmd.arg("-L").arg(root).arg(bin);
                cmd
            }
            _ => Cmd::new(bin),
        }
    }
}

/// What a foreign debug build is for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum DebugBuild {
    /// The binary the cross and vm tiers run: the dev profile as the host's
    /// debug build has it (opt-level 0, the package overrides of the
    /// workspace's Cargo.toml). Measured on the 2-vCPU CI machine: aarch64
    /// builds in 3.4 min (5.7 min of CPU) against 6.0 (10.6) at opt-level
    /// 1, aarch64 and s390x together in 7.2 min against about 17; the
    /// cross tier's 39 cases then took 3.1 min under qemu-user instead of
    /// 0.4 (an `explain` about 6 s on s390x), so the few dependencies
    /// where that time goes are still optimised ([`EMULATED_HOT`]). The
    /// x86_64 debug binary, built the same way, passes its boots under TCG.
    Plain,
    /// Built with the library's unit tests, which run for many minutes
    /// under qemu-user (`cargo xtask cross-check`): opt-level 1, and the
    /// big-endian build selects [`DEV_FEATURES_TARGETS`] so that the tests
    /// reuse its dependencies.
    ForUnitTests,
}

/// The dependencies a [`DebugBuild::Plain`] foreign build still optimises (level
/// 1): where an `explain` under qemu-user spends its time unoptimised (the
/// rules' TOML and CEL parsers, JSON, zstd's C). Measured on aarch64: an
/// `explain` of a golden recording 2.6 s without them, 1.5 s with.
const EMULATED_HOT: &[&str] = &[
    "winnow",
    "toml_parser",
    "toml_edit",
    "toml",
    "antlr4rust",
    "cel",
    "serde_json",
    "zstd-sys",
];

/// `cargo build -p mdiag` (debug) for `arch`; returns the binary. The
/// host's is the test tiers' ([`crate::run::build_for_tests`]), so the
/// cross tier compares the binary the root tier tested.
pub fn build(arch: &Arch, debug: DebugBuild) -> Result<PathBuf> {
    if arch.is_host() {
        return crate::run::build_for_tests().map(|b| b.mdiag);
    }
    arch.prepare()
        .with_context(|| format!("preparing to build for {}", arch.name))?;
    let mut cmd = Cmd::cargo();
    cmd.args(["build", "-p", "mdiag"]);
    if debug == DebugBuild::ForUnitTests && arch.big_endian {
        cmd.args(DEV_FEATURES_TARGETS);
    }
    arch.cargo_args(&mut cmd, debug)?;
    cmd.run()?;
    Ok(arch.out_dir(false)?.join("mdiag"))
}

/// The big-endian architecture's build for its unit tests also selects one
/// small test target: with a test selected, cargo resolves the
/// dependencies' features as `cargo test` does (dev-dependencies such as
/// hyper's client and insta add some), so `cargo xtask cross-check`'s
/// `cargo test -p mdiag --lib` for it reuses this build's dependencies and
/// compiles mdiag's tests alone (3.6 min at opt-level 1), instead of 40
/// crates more (8 min in all). The binary is the same program.
const DEV_FEATURES_TARGETS: &[&str] = &["--bins", "--test", "journal"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_triples_parse_and_the_host_comes_first() {
        assert_eq!(
            parse_arch("s390x").map(|a| a.triple),
            Ok("s390x-unknown-linux-gnu")
        );
        assert_eq!(
            parse_arch("aarch64-unknown-linux-gnu").map(|a| a.name),
            Ok("aarch64")
        );
        let err = parse_arch("riscv64").unwrap_err();
        assert!(err.contains("x86_64, aarch64, s390x"), "{err}");
        assert!(host().is_host());
        assert_eq!(ARCHES.iter().filter(|a| a.is_host()).count(), 1);
    }

    #[test]
    fn the_test_target_that_unifies_features_exists() {
        let [.., test] = DEV_FEATURES_TARGETS else {
            panic!("no test target");
        };
        let file = crate::cmd::workspace_root().join(format!("agent/tests/{test}.rs"));
        assert!(file.is_file(), "{}", file.display());
    }

    #[test]
    fn cargo_env_names_are_what_cargo_reads() {
        let s390x = parse_arch("s390x").unwrap();
        assert_eq!(
            s390x.cargo_target_env("LINKER"),
            "CARGO_TARGET_S390X_UNKNOWN_LINUX_GNU_LINKER"
        );
        assert!(s390x.big_endian && s390x.build_std);
    }

    #[test]
    fn foreign_builds_have_a_target_directory_of_their_own() {
        let target = target_dir().unwrap();
        let dir = |name| parse_arch(name).unwrap().cargo_target_dir().unwrap();
        assert_eq!(dir("x86_64"), target);
        assert_eq!(dir("aarch64"), target.join("build-aarch64"));
        assert_eq!(dir("s390x"), target.join("build-s390x"));
        let s390x = parse_arch("s390x").unwrap();
        assert_eq!(
            s390x.out_dir(false).unwrap(),
            target.join("build-s390x/s390x-unknown-linux-gnu/debug")
        );
        let mut cmd = Cmd::new("cargo");
        s390x.cargo_args(&mut cmd, DebugBuild::Plain).unwrap();
        let line = cmd.to_string();
        assert!(line.contains("RUSTC_BOOTSTRAP=1"), "{line}");
        assert!(line.contains("-Zbuild-std=std,panic_abort,test"), "{line}");
        let mut cmd = Cmd::new("cargo");
        parse_arch("aarch64")
            .unwrap()
            .cargo_args(&mut cmd, DebugBuild::Plain)
            .unwrap();
        let line = cmd.to_string();
        assert!(
            line.contains("build-aarch64") && !line.contains("RUSTC_BOOTSTRAP"),
            "{line}"
        );
        assert!(!line.contains("OPT_LEVEL"), "{line}");
        assert!(
            line.contains("profile.dev.package.cel.opt-level=1"),
            "{line}"
        );
        let mut cmd = Cmd::new("cargo");
        s390x
            .cargo_args(&mut cmd, DebugBuild::ForUnitTests)
            .unwrap();
        let line = cmd.to_string();
        assert!(line.contains("CARGO_PROFILE_DEV_OPT_LEVEL=1"), "{line}");
    }
}
