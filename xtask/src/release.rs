//! The release binary: one file per architecture that runs on every
//! distribution MongoDB 8 supports, RHEL 8 (glibc 2.28) and Amazon Linux 2
//! (glibc 2.26) included.
//!
//! How: `cargo zigbuild` links against zig's copy of glibc's symbol versions
//! as of [`GLIBC_BASELINE`] (the `<triple>.2.17` target), so the binary asks
//! for no symbol newer than that; Rust's std looks newer functions (statx,
//! getrandom) up weakly and falls back. zig comes from PyPI (`ziglang`,
//! into `<target>/zig-venv`), cargo-zigbuild from crates.io, both pinned.
//! Chosen over a static musl build: musl's allocator made `export` about
//! 2.2 times as costly in CPU, its resolver ignores nsswitch, and Debian has no
//! musl cross compiler for aarch64 or s390x (zig would be needed anyway).
//!
//! After each build the binary's version needs (`readelf -V`) are checked:
//! a dependency that starts calling a newer glibc function fails the build
//! here, not on a customer's RHEL 8 host.
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::{
    arch::Arch,
    cmd::{Cmd, find_in_path, target_dir},
    say,
};

/// The oldest glibc the release binary runs on.
pub const GLIBC_BASELINE: (u32, u32) = (2, 17);
const ZIGLANG: &str = "ziglang==0.17.1";
const ZIGBUILD_VERSION: &str = "0.24.1";

/// `cargo zigbuild --release -p mdiag` for `arch`; returns the binary (in
/// `<target>/<triple>/release/`) after checking its glibc needs.
pub fn build(arch: &Arch) -> Result<PathBuf> {
    arch.prepare()
        .with_context(|| format!("preparing to build for {}", arch.name))?;
    let zig_bin = zig()?;
    zigbuild()?;
    let (major, minor) = GLIBC_BASELINE;
    let mut cmd = Cmd::cargo();
    cmd.args(["zigbuild", "--release", "-p", "mdiag", "--target"])
        .arg(format!("{}.{major}.{minor}", arch.triple));
    if arch.build_std {
        cmd.env("RUSTC_BOOTSTRAP", "1")
            .arg("-Zbuild-std=std,panic_abort");
    }
    // zig (from the venv) before everything else on PATH.
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![zig_bin];
    dirs.extend(std::env::split_paths(&path));
    cmd.env("PATH", std::env::join_paths(dirs)?);
    cmd.run()?;
    let bin = target_dir()?
        .join(arch.triple)
        .join("release")
        .join("mdiag");
    check_glibc(&bin)?;
    say!(
        "release: {} needs glibc ≤ {major}.{minor} (RHEL 8: 2.28, Amazon Linux 2: 2.26)",
        bin.display()
    );
    Ok(bin)
}

/// The venv's bin directory, with `python3 -m ziglang` installed.
fn zig() -> Result<PathBuf> {
    let venv = target_dir()?.join("zig-venv");
    let bin = venv.join("bin");
    let marker = venv.join(".mdiag-ziglang");
    if std::fs::read_to_string(&marker).is_ok_and(|m| m == ZIGLANG) {
        return Ok(bin);
    }
    let python = find_in_path("python3")
        .context("python3 is not in PATH; install Debian's python3 and python3-venv")?;
    if !bin.join("python3").exists() {
        Cmd::new(&python).arg("-m").arg("venv").arg(&venv).run()?;
    }
    say!("release: installing {ZIGLANG} into {}", venv.display());
    Cmd::new(bin.join("python3"))
        .args([
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            ZIGLANG,
        ])
        .run()?;
    std::fs::write(&marker, ZIGLANG)?;
    Ok(bin)
}

/// cargo-zigbuild, pinned, installed when missing or another version.
/// What is installed comes from `cargo install --list` (`cargo zigbuild
/// --version` is refused by cargo-zigbuild's subcommand parser, which made
/// every build run `cargo install` again, reaching crates.io each time).
fn zigbuild() -> Result<()> {
    let listed = Cmd::cargo().args(["install", "--list"]).stdout()?;
    if zigbuild_installed(&listed) {
        return Ok(());
    }
    say!("release: installing cargo-zigbuild {ZIGBUILD_VERSION}");
    Cmd::cargo()
        .args([
            "install",
            "--locked",
            "cargo-zigbuild",
            "--version",
            ZIGBUILD_VERSION,
        ])
        .run()
}

/// Whether `cargo install --list` output lists the pinned cargo-zigbuild.
fn zigbuild_installed(listed: &str) -> bool {
    listed
        .lines()
        .any(|l| l.trim_end() == format!("cargo-zigbuild v{ZIGBUILD_VERSION}:"))
}

/// Fails when `bin` needs a glibc symbol version newer than the baseline.
fn check_glibc(bin: &Path) -> Result<()> {
    let text = Cmd::new("readelf")
        .arg("-V")
        .arg(bin)
        .stdout()
        .context("readelf (binutils) reads the binary's version needs")?;
    let too_new = newer_than_baseline(&text);
    if !too_new.is_empty() {
        bail!(
            "{} needs {} (newer than glibc {}.{}): a dependency calls a newer glibc function; \
             find it with `objdump -T {} | grep GLIBC_` and call it through libc::syscall or \
             look it up at run time",
            bin.display(),
            too_new.join(", "),
            GLIBC_BASELINE.0,
            GLIBC_BASELINE.1,
            bin.display()
        );
    }
    Ok(())
}

/// The `GLIBC_x.y` versions `readelf -V` lists that are newer than the
/// baseline.
fn newer_than_baseline(readelf: &str) -> Vec<String> {
    let mut out: Vec<String> = readelf
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("GLIBC_"))
        .filter(|v| {
            let mut parts = v.split('.').map(|p| p.parse::<u32>().ok());
            match (parts.next().flatten(), parts.next().flatten()) {
                (Some(major), Some(minor)) => (major, minor) > GLIBC_BASELINE,
                // GLIBC_PRIVATE and the like: not a version a release has.
                _ => false,
            }
        })
        .map(|v| format!("GLIBC_{v}"))
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pinned_zigbuild_is_found_in_cargos_list() {
        let listed = format!(
            "bpf-linker v0.13.0:\n    bpf-linker\ncargo-zigbuild v{ZIGBUILD_VERSION}:\n    cargo-zigbuild\n"
        );
        assert!(zigbuild_installed(&listed));
        assert!(!zigbuild_installed(
            "cargo-zigbuild v0.1.0:\n    cargo-zigbuild\n"
        ));
        assert!(!zigbuild_installed(""));
    }

    #[test]
    fn versions_newer_than_the_baseline_are_found() {
        let readelf = "Version needs section '.gnu.version_r' contains 2 entries:\n \
             Addr: 0x0  Offset: 0x000f90  Link: 7 (.dynstr)\n  \
             000000: Version: 1  File: libc.so.6  Cnt: 4\n  \
             0x0010:   Name: GLIBC_2.2.5  Flags: none  Version: 5\n  \
             0x0020:   Name: GLIBC_2.17  Flags: none  Version: 4\n  \
             0x0030:   Name: GLIBC_2.34  Flags: none  Version: 3\n  \
             0x0040:   Name: GLIBC_2.28  Flags: none  Version: 2\n";
        assert_eq!(newer_than_baseline(readelf), ["GLIBC_2.28", "GLIBC_2.34"]);
        let ok = "Name: GLIBC_2.2.5 Name: GLIBC_2.17 Name: GLIBC_PRIVATE";
        assert!(newer_than_baseline(ok).is_empty());
    }
}
