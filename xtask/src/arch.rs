//! The CPU architectures mdiag is built for, and how to cross-build for each
//! from an x86_64 Debian machine: one table ([`ARCHES`]) drives
//! `cargo xtask build --target`, the `cross` test tier and the VM matrix.
//!
//! Why each row is what it is:
//! - aarch64: rustup publishes `rust-std` for the pinned toolchain, Debian's
//!   `gcc-aarch64-linux-gnu` links (and compiles the C inside zstd and ring).
//! - s390x: rustup publishes no `rust-std` for 1.98.0, so std is built from
//!   the toolchain's `rust-src` (`-Zbuild-std`, allowed on a stable compiler
//!   by `RUSTC_BOOTSTRAP=1` for this one cargo process only). The eBPF object
//!   is then big-endian (`bpfeb`): aya-build picks the endianness from the
//!   agent's target.
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

    /// Sets what cargo needs to build for this architecture on `cmd` (a
    /// `cargo build`/`test` being assembled): `--target`, the linker, the
    /// runner for `cargo test`, and build-std where needed.
    pub fn cargo_args(&self, cmd: &mut Cmd) {
        if self.is_host() {
            return;
        }
        cmd.args(["--target", self.triple]);
        if let Some(gcc) = self.cross_gcc {
            cmd.env(self.cargo_target_env("LINKER"), gcc);
        }
        if let (Some(qemu), Some(root)) = (self.qemu_user, self.sysroot) {
            cmd.env(self.cargo_target_env("RUNNER"), format!("{qemu} -L {root}"));
        }
        // Foreign debug builds (and their tests) run under emulation
        // (qemu-user, QEMU's TCG), where unoptimised code is tens of times
        // slower than here: level 1 keeps debug assertions and costs little
        // more to compile. Release builds are not affected.
        cmd.env("CARGO_PROFILE_DEV_OPT_LEVEL", "1");
        if self.build_std {
            cmd.env("RUSTC_BOOTSTRAP", "1")
                .arg("-Zbuild-std=std,panic_abort");
        }
    }

    /// Where cargo puts this architecture's `profile` outputs.
    pub fn out_dir(&self, release: bool) -> Result<PathBuf> {
        let profile = if release { "release" } else { "debug" };
        let dir = target_dir()?;
        Ok(if self.is_host() {
            dir.join(profile)
        } else {
            dir.join(self.triple).join(profile)
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

/// `cargo build -p mdiag` for `arch`; returns the binary.
pub fn build(arch: &Arch, release: bool) -> Result<PathBuf> {
    arch.prepare()
        .with_context(|| format!("preparing to build for {}", arch.name))?;
    let mut cmd = Cmd::cargo();
    cmd.args(["build", "-p", "mdiag"]);
    if release {
        cmd.arg("--release");
    }
    arch.cargo_args(&mut cmd);
    cmd.run()?;
    Ok(arch.out_dir(release)?.join("mdiag"))
}

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
    fn cargo_env_names_are_what_cargo_reads() {
        let s390x = parse_arch("s390x").unwrap();
        assert_eq!(
            s390x.cargo_target_env("LINKER"),
            "CARGO_TARGET_S390X_UNKNOWN_LINUX_GNU_LINKER"
        );
        assert!(s390x.big_endian && s390x.build_std);
    }
}
