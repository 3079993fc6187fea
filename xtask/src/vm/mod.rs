//! `cargo xtask vm-matrix`: boots real Debian kernels in QEMU and checks which
//! mdiag probe families load there.
//!
//! Why: a BPF program that the development host's kernel accepts can still be
//! refused by an older verifier, or miss a tracepoint, on the kernels people
//! run. So each kernel line ([`LINES`]: 5.10 from Debian 11, 6.1 and 6.12 from
//! Debian 12, the small `cloud-amd64` flavour, which has BTF) is booted under
//! QEMU's TCG emulator (no KVM needed) with a tiny initramfs: static busybox,
//! the mdiag binary with its shared libraries, and an init script ([`INIT`])
//! that records twice — host-wide, and with a spawned busybox loop as target
//! so that the per-process families are tried too — then prints `mdiag
//! explain --format json` of each recording between marker lines on the
//! serial console and powers off. The host parses the console log into one
//! verdict per probe family and compares them with [`EXPECTATIONS`] (which
//! `--expect` overrides). It also checks the host-wide recording's total of
//! context switches against the guest's `/proc/stat` `ctxt`.
//!
//! Everything lives under `<target>/vm/`: `debs/` (downloaded packages),
//! `kernels/<package>/` (extracted), `apt/<suite>/` (a private apt state for
//! a suite the host's sources do not have: the host's apt state is never
//! touched by it), `initramfs/` (rebuilt every run, from the current binary),
//! and `<kernel>.log` (the serial console of that kernel's last boot).
//! Downloads and extractions that are already done are skipped.
//!
//! The initramfs is a newc cpio archive made by the `cpio` tool from a staged
//! tree (`initramfs/root/`, left there to look at) and compressed by `gzip`:
//! no new crate, so the workspace's `Cargo.lock` stays as it is.
//!
//! The code, one job per file: this one is the command (its arguments, the
//! kernel lines, the flow per kernel); `apt.rs` finds, downloads and extracts
//! the kernel packages; `initramfs.rs` builds the guest's root (and holds
//! [`INIT`]); `console.rs` boots QEMU and reads its serial log; `expect.rs` is
//! the expectation table; `status.rs` turns a report's probes into a status
//! per family; `verdict.rs` judges a kernel and prints its table
//! (`fixtures.rs` holds test data shared by their tests).
//!
//! [`INIT`]: initramfs::INIT
//! [`EXPECTATIONS`]: expect::EXPECTATIONS
use std::{
    fs,
    path::{Path, PathBuf},
    time::Instant,
};

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::{
    cmd::{find_in_path, target_dir},
    say,
    setup::install_missing,
};

mod apt;
mod console;
mod expect;
#[cfg(test)]
mod fixtures;
mod initramfs;
mod status;
mod verdict;

use apt::{Apt, kernel};
use console::{VM_TIMEOUT, boot, console_trouble, parse_log};
use expect::{Need, parse_expect};
use initramfs::build_initramfs;
use verdict::{Verdict, judge};

/// Host packages the matrix needs: the guest's shell and tools, the archive
/// tool, and the emulator.
const HOST_PACKAGES: &[&str] = &["busybox-static", "cpio", "qemu-system-x86"];

// ------------------------------------------------------------ kernels ----

/// One kernel line: which Debian package builds it and where apt finds it.
#[derive(Debug, PartialEq, Eq)]
pub struct Line {
    /// What `--kernel` takes, and the log's name.
    pub name: &'static str,
    /// Upstream major.minor, for [`EXPECTATIONS`](expect::EXPECTATIONS).
    pub version: (u32, u32),
    /// `None`: the host's apt sources have it; else the Debian suite to add
    /// in a private apt state.
    pub suite: Option<&'static str>,
    /// `apt-cache search --names-only` patterns, tried in order until one
    /// matches (the unsigned image first; a signed one boots the same way
    /// under QEMU's `-kernel`).
    pub patterns: &'static [&'static str],
}

pub const LINES: &[Line] = &[
    Line {
        name: "5.10",
        version: (5, 10),
        suite: Some("bullseye"),
        patterns: &[
            r"^linux-image-5\.10\.0-[0-9]+-cloud-amd64-unsigned$",
            r"^linux-image-5\.10\.0-[0-9]+-cloud-amd64$",
        ],
    },
    Line {
        name: "6.1",
        version: (6, 1),
        suite: None,
        patterns: &[r"^linux-image-6\.1\.0-[0-9]+-cloud-amd64-unsigned$"],
    },
    Line {
        name: "6.12",
        version: (6, 12),
        suite: None,
        patterns: &[r"^linux-image-6\.12\.[0-9]+\+deb12-cloud-amd64-unsigned$"],
    },
];

fn parse_line(s: &str) -> Result<&'static Line, String> {
    LINES.iter().find(|l| l.name == s).ok_or_else(|| {
        let names: Vec<&str> = LINES.iter().map(|l| l.name).collect();
        format!("unknown kernel {s:?}; one of: {}", names.join(", "))
    })
}

// -------------------------------------------------------------- entry ----

#[derive(Args)]
pub struct VmArgs {
    /// Kernel to boot (repeatable): 5.10, 6.1 or 6.12; all three when not given.
    #[arg(long = "kernel", value_name = "NAME", value_parser = parse_line)]
    kernels: Vec<&'static Line>,
    /// The mdiag binary to test [default: <target>/debug/mdiag; build it first].
    #[arg(long, value_name = "PATH")]
    bin: Option<PathBuf>,
    /// Override the expectation table for FAMILY on every kernel
    /// (repeatable); NEED is attached, partly, not-applicable or any.
    #[arg(long = "expect", value_name = "FAMILY=NEED", value_parser = parse_expect)]
    expect: Vec<(String, Need)>,
}

pub fn vm_matrix(args: &VmArgs) -> Result<()> {
    let mut lines: Vec<&'static Line> = Vec::new();
    for line in &args.kernels {
        if !lines.contains(line) {
            lines.push(line);
        }
    }
    if lines.is_empty() {
        lines = LINES.iter().collect();
    }
    let bin = mdiag_binary(args.bin.as_deref())?;
    if find_in_path("apt-get").is_none() {
        bail!("vm-matrix needs Debian's apt-get (it boots Debian kernels from Debian packages)");
    }
    install_missing("vm-matrix", HOST_PACKAGES)?;
    let dir = target_dir()?.join("vm");
    let initrd = build_initramfs(&dir, &bin).context("building the initramfs")?;
    let mut apt = Apt::new(&dir);
    let mut summary = Vec::new();
    for line in lines {
        let started = Instant::now();
        let verdict = check_kernel(line, &mut apt, &dir, &initrd, &args.expect);
        let took = started.elapsed();
        let failures = match verdict {
            Ok(v) => {
                v.print();
                v.failures
            }
            Err(e) => vec![format!("{e:#}")],
        };
        say!(
            "vm-matrix {}: {} in {} s",
            line.name,
            if failures.is_empty() { "ok" } else { "FAIL" },
            took.as_secs()
        );
        summary.push((line.name, failures, took));
    }
    say!("vm-matrix summary:");
    for (name, failures, took) in &summary {
        let what = if failures.is_empty() {
            "ok".to_owned()
        } else {
            format!("FAIL: {}", failures.join("; "))
        };
        say!("  {name:<5} {:>4} s  {what}", took.as_secs());
    }
    let failed: Vec<&str> = summary
        .iter()
        .filter(|(_, f, _)| !f.is_empty())
        .map(|(n, _, _)| *n)
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        bail!("vm-matrix failed on kernel {}", failed.join(", "))
    }
}

/// `--bin`, or the debug binary, made absolute (commands run elsewhere).
fn mdiag_binary(bin: Option<&Path>) -> Result<PathBuf> {
    let bin = match bin {
        Some(b) => b.to_owned(),
        None => target_dir()?.join("debug/mdiag"),
    };
    fs::canonicalize(&bin).with_context(|| {
        format!(
            "no mdiag binary at {} (build it with `cargo xtask build`, or give --bin)",
            bin.display()
        )
    })
}

/// Fetches the kernel, boots it, and judges the serial log.
fn check_kernel(
    line: &'static Line,
    apt: &mut Apt,
    dir: &Path,
    initrd: &Path,
    overrides: &[(String, Need)],
) -> Result<Verdict> {
    let (package, vmlinuz) = kernel(line, apt, dir)?;
    let log = dir.join(format!("{}.log", line.name));
    say!(
        "vm-matrix {}: booting {} under QEMU/TCG (up to {} s); console in {}",
        line.name,
        vmlinuz.display(),
        VM_TIMEOUT.as_secs(),
        log.display()
    );
    let booted = Instant::now();
    boot(&vmlinuz, initrd, &log)?;
    let vm_time = booted.elapsed();
    let bytes = fs::read(&log).with_context(|| format!("reading {}", log.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    let guest = parse_log(&text);
    // What the guest did finish is judged all the same.
    let mut verdict = judge(line, package, &guest, overrides, vm_time);
    if !guest.finished {
        verdict.failures.push(format!(
            "the VM did not finish (no MDIAG-VM-END on its console); see {}",
            log.display()
        ));
        verdict.console = console_trouble(&text);
    }
    Ok(verdict)
}
