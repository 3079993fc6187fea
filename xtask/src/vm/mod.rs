//! `cargo xtask vm-matrix`: boots real Debian kernels in QEMU and checks which
//! mdiag probe families load there.
//!
//! Why: a BPF program that the development host's kernel accepts can still be
//! refused by an older verifier, or miss a tracepoint, on the kernels people
//! run, or on another architecture (other registers, a big-endian BPF object
//! on s390x). So each kernel line ([`LINES`]: x86_64 5.10, 6.1 and 6.12,
//! aarch64 6.1 and 6.12, s390x 6.12, all Debian packages with BTF, and
//! s390x 6.1, Debian 12's own, without BTF) is booted
//! under QEMU's TCG emulator (no KVM needed) with a tiny initramfs of its
//! architecture ([`GUESTS`]): static busybox, the mdiag binary built for
//! that architecture with its shared libraries, and an init script
//! ([`INIT`]) that records twice — host-wide, and with a spawned busybox
//! loop as target so that the per-process families are tried too — then
//! prints `mdiag explain --format json` of each recording between marker
//! lines on the serial console and powers off. The host parses the console
//! log into one verdict per probe family and compares them with
//! [`EXPECTATIONS`] (which `--expect` overrides). It also checks numbers
//! against ground truth: the host-wide recording's rate of context switches
//! against the guest's `/proc/stat` `ctxt`, and that `perf` puts the
//! spawned spinning target's samples in its program. On x86_64 6.1 and 6.12
//! ([`Line::mongod`]) the guest then records the real mongod 6.0.5 under a
//! request load (`mongod.rs`: the archive with mongod, the load and the
//! release mdiag in front of the initramfs, 2 GB of guest memory): the
//! wiredtiger family must attach and see a checkpoint, alloc attach (from
//! 5.15) and time calls in gperftools' `tc_*` only, every mongod thread
//! that ran be in the recording's per-thread data under its name, and the
//! recording hold serverStatus samples (`mongod_check.rs`). Last, the guest runs
//! `mdiag agent` host-wide for a few one-second windows: it must serve
//! `/metrics` and stop on SIGTERM (`agent.rs`).
//!
//! The binaries: the host's is `--bin` or `<target>/debug/mdiag` (built
//! beforehand); another architecture's is built here by `arch::build` (debug;
//! the cross toolchain is installed if missing) unless `--bin ARCH=PATH`
//! gives it. With a mongod line, `cargo build` also makes `mdiag-mongoload`
//! and the release mdiag, and mongod is `MDIAG_MONGOD_BIN` or set-up's
//! `<target>/mongod-6.0.5/mongod` (those lines fail, saying how to fetch it,
//! when it is missing).
//!
//! Everything lives under `<target>/vm/`: `debs/` (downloaded packages),
//! `kernels/<package>/` and `busybox/<package>/` (extracted), `apt/<name>/`
//! (a private apt state for a suite the host's sources do not have, or for
//! another architecture: the host's apt state is never touched by it),
//! `initramfs/<arch>/` (rebuilt every run, from the current binary; with
//! `initrd-mongod.img` beside it for the mongod lines), and
//! `<kernel>.log` (the serial console of that kernel's last boot).
//! Downloads and extractions that are already done are skipped.
//!
//! The initramfs is a newc cpio archive made by the `cpio` tool from a staged
//! tree (`initramfs/<arch>/root/`, left there to look at) and compressed by
//! `gzip`: no new crate, so the workspace's `Cargo.lock` stays as it is.
//!
//! The code, one job per file: this one is the command (its arguments, the
//! flow per architecture and per kernel); `lines.rs` the kernel lines;
//! `guest.rs` how each architecture boots; `apt.rs` finds, downloads and
//! extracts the packages (`mirror.rs`: the host's Debian mirror);
//! `initramfs.rs` builds the guest's root (and holds [`INIT`]); `console.rs`
//! boots QEMU and reads its serial log; `expect.rs` is the expectation table;
//! `status.rs` turns a report's probes into a status per family; `checks.rs`
//! holds the ground-truth checks, `mongod.rs` and `mongod_check.rs` the
//! mongod run's, `agent.rs` the agent's; `verdict.rs` judges a kernel and prints its
//! table (`fixtures.rs` holds test data
//! shared by their tests).
//!
//! [`INIT`]: initramfs::INIT
//! [`EXPECTATIONS`]: expect::EXPECTATIONS
//! [`GUESTS`]: guest::GUESTS
use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::{
    arch,
    cmd::{find_in_path, target_dir},
    say,
    setup::install_missing,
};

mod agent;
mod apt;
mod checks;
mod console;
mod expect;
#[cfg(test)]
mod fixtures;
mod guest;
mod initramfs;
mod lines;
mod mirror;
mod mongod;
mod mongod_check;
mod status;
mod verdict;

use apt::{Apt, busybox, kernel};
use console::{Boot, boot, console_trouble, parse_log};
use expect::{Need, parse_expect};
use guest::{GUESTS, Guest};
use initramfs::build_initramfs;
pub use lines::{LINES, Line, parse_line};
use verdict::{Verdict, judge};

/// Host packages the matrix needs besides each architecture's emulator: the
/// archive tool.
const HOST_PACKAGES: &[&str] = &["cpio"];
/// Guest memory: the usual, and with mongod (its 140 MB binary lives in the
/// initramfs, in RAM, twice while the kernel unpacks it; then mongod with a
/// 0.25 GB cache, its dbpath on tmpfs, the load and mdiag).
const MEMORY_MB: u32 = 1024;
const MONGOD_MEMORY_MB: u32 = 2048;
/// What the mongod run may add to a boot's timeout.
const MONGOD_TIMEOUT: Duration = Duration::from_secs(300);

// -------------------------------------------------------------- entry ----

#[derive(Args)]
pub struct VmArgs {
    /// Kernel to boot (repeatable): 5.10, 6.1, 6.12 (x86_64), aarch64-6.1,
    /// aarch64-6.12, s390x-6.12 or s390x-6.1 (no BTF); all of them when not
    /// given.
    #[arg(long = "kernel", value_name = "NAME", value_parser = parse_line)]
    kernels: Vec<&'static Line>,
    /// The mdiag binary to test (repeatable): PATH for the host's
    /// architecture [default: <target>/debug/mdiag; build it first],
    /// ARCH=PATH for another one [default: built here, debug].
    #[arg(long = "bin", value_name = "[ARCH=]PATH", value_parser = parse_bin)]
    bins: Vec<(&'static str, PathBuf)>,
    /// Override the expectation table for FAMILY on every kernel
    /// (repeatable); NEED is attached, attached-if-tried, partly,
    /// not-applicable or any.
    #[arg(long = "expect", value_name = "FAMILY=NEED", value_parser = parse_expect)]
    expect: Vec<(String, Need)>,
    /// Kernels booted at once [default: 2, or 1 on a one-CPU host]. An
    /// x86_64 boot is one host thread; mongod's line (about 4 min) is
    /// booted first, and the other lines (about 4 min together) one after
    /// the other beside it.
    #[arg(long, default_value_t = default_boots_at_once(), value_parser = clap::value_parser!(u32).range(1..=4))]
    boots_at_once: u32,
}

/// Two boots at once where the host has two CPUs or more, else one.
fn default_boots_at_once() -> u32 {
    match std::thread::available_parallelism() {
        Ok(n) if n.get() >= 2 => 2,
        _ => 1,
    }
}

/// `--bin`: `ARCH=PATH`, or a `PATH` for the host's architecture.
fn parse_bin(s: &str) -> Result<(&'static str, PathBuf), String> {
    if let Some((arch, path)) = s.split_once('=')
        && let Some(guest) = GUESTS.iter().find(|g| g.name == arch)
    {
        return Ok((guest.name, PathBuf::from(path)));
    }
    let host = GUESTS
        .iter()
        .find(|g| g.arch().is_ok_and(|a| a.is_host()))
        .ok_or("no guest architecture is the host's")?;
    Ok((host.name, PathBuf::from(s)))
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
    if find_in_path("apt-get").is_none() {
        bail!("vm-matrix needs Debian's apt-get (it boots Debian kernels from Debian packages)");
    }
    let mut guests: Vec<&'static Guest> = Vec::new();
    for line in &lines {
        if !guests.contains(&line.guest) {
            guests.push(line.guest);
        }
    }
    let mut packages = HOST_PACKAGES.to_vec();
    packages.extend(guests.iter().map(|g| g.qemu_package));
    install_missing("vm-matrix", &packages)?;
    let dir = target_dir()?.join("vm");
    let mut apt = Apt::new(&dir);
    // Each architecture's initramfs, or why there is none.
    let mut initrds: BTreeMap<&str, Result<Initrds, String>> = BTreeMap::new();
    for guest in guests {
        let started = Instant::now();
        let with_mongod = lines.iter().any(|l| l.guest == guest && l.mongod);
        let initrd = prepare(guest, &args.bins, with_mongod, &mut apt, &dir)
            .with_context(|| format!("preparing the {} guest", guest.name))
            .map_err(|e| format!("{e:#}"));
        say!(
            "vm-matrix {}: guest {} in {} s",
            guest.name,
            if initrd.is_ok() { "ready" } else { "FAILED" },
            started.elapsed().as_secs()
        );
        initrds.insert(guest.name, initrd);
    }
    // Kernels fetched one after the other (one apt state), then booted
    // `--boots-at-once` at a time, mongod's line first: a boot is one QEMU,
    // CPU-bound on one host thread for x86_64 (`thread=single`), so two
    // overlap on two CPUs.
    let mut jobs: Vec<Job> = Vec::new();
    let mut summary: Vec<(&str, Vec<String>, Duration)> = Vec::new();
    for line in lines {
        let kernel = match initrds.get(line.guest.name) {
            Some(Ok(initrds)) => initrds
                .for_line(line)
                .map_err(|e| anyhow::anyhow!("{e}"))
                .and_then(|initrd| {
                    let (package, vmlinuz) = kernel(line, &mut apt, &dir)?;
                    Ok((package, vmlinuz, initrd.to_owned()))
                }),
            Some(Err(e)) => Err(anyhow::anyhow!("{e}")),
            None => Err(anyhow::anyhow!("no guest for {}", line.guest.name)),
        };
        match kernel {
            Ok((package, vmlinuz, initrd)) => jobs.push(Job {
                line,
                package,
                vmlinuz,
                initrd,
            }),
            Err(e) => summary.push((line.name, vec![format!("{e:#}")], Duration::ZERO)),
        }
    }
    jobs.sort_by_key(|j| std::cmp::Reverse(j.line.mongod));
    let at_once = args.boots_at_once as usize;
    for (job, result, took) in boot_all(&jobs, &dir, &args.expect, at_once) {
        let failures = match result {
            Ok(v) => {
                v.print();
                v.failures
            }
            Err(e) => vec![format!("{e:#}")],
        };
        say!(
            "vm-matrix {}: {} in {} s",
            job.line.name,
            if failures.is_empty() { "ok" } else { "FAIL" },
            took.as_secs()
        );
        summary.push((job.line.name, failures, took));
    }
    say!("vm-matrix summary:");
    for (name, failures, took) in &summary {
        let what = if failures.is_empty() {
            "ok".to_owned()
        } else {
            format!("FAIL: {}", failures.join("; "))
        };
        say!("  {name:<12} {:>4} s  {what}", took.as_secs());
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

/// A guest's initramfs, and the one with mongod in front of it.
struct Initrds {
    base: PathBuf,
    /// Built when a line to boot has mongod; else `None`.
    mongod: Option<Result<PathBuf, String>>,
}

impl Initrds {
    fn for_line(&self, line: &Line) -> Result<&Path, String> {
        match (&self.mongod, line.mongod) {
            (_, false) => Ok(&self.base),
            (Some(Ok(initrd)), true) => Ok(initrd),
            (Some(Err(e)), true) => Err(format!("no initramfs with mongod: {e}")),
            (None, true) => Err("no initramfs with mongod was built".into()),
        }
    }
}

/// `guest`'s initramfs: its mdiag binary, its busybox, packed; and, with
/// `with_mongod`, the one with mongod and its load (`mongod.rs`), or why
/// there is none (only the lines that need it fail then).
fn prepare(
    guest: &'static Guest,
    bins: &[(&str, PathBuf)],
    with_mongod: bool,
    apt: &mut Apt,
    dir: &Path,
) -> Result<Initrds> {
    let bin = mdiag_binary(guest, bins)?;
    let busybox = busybox(guest, apt, dir)?;
    let base = build_initramfs(dir, guest, &busybox, &bin).context("building the initramfs")?;
    let mongod = with_mongod.then(|| {
        mongod::mongod_files()
            .and_then(|files| mongod::build_mongod_initrd(guest.arch()?, &base, &files))
            .context("building the initramfs with mongod")
            .map_err(|e| format!("{e:#}"))
    });
    Ok(Initrds { base, mongod })
}

/// What a boot of `line` gets: more memory and time with mongod.
fn boot_of(line: &Line) -> Boot {
    match line.mongod {
        true => Boot {
            memory_mb: MONGOD_MEMORY_MB,
            timeout: line.guest.timeout + MONGOD_TIMEOUT,
        },
        false => Boot {
            memory_mb: MEMORY_MB,
            timeout: line.guest.timeout,
        },
    }
}

/// `guest`'s mdiag binary, made absolute (commands run elsewhere): `--bin`
/// for it, else the host's debug binary, or another architecture's built now.
fn mdiag_binary(guest: &Guest, bins: &[(&str, PathBuf)]) -> Result<PathBuf> {
    let arch = guest.arch()?;
    let bin = match bins.iter().rev().find(|(a, _)| *a == guest.name) {
        Some((_, b)) => b.to_owned(),
        None if arch.is_host() => target_dir()?.join("debug/mdiag"),
        None => {
            say!("vm-matrix {}: building mdiag for it (debug)", guest.name);
            arch::build(arch, arch::DebugBuild::Plain)?
        }
    };
    fs::canonicalize(&bin).with_context(|| {
        format!(
            "no mdiag binary at {} (build it with `cargo xtask build [--target {}]`, or give --bin)",
            bin.display(),
            guest.name
        )
    })
}

/// Boots a fetched kernel and judges the serial log.
fn check_kernel(job: &Job, dir: &Path, overrides: &[(String, Need)]) -> Result<Verdict> {
    let Job {
        line,
        package,
        vmlinuz,
        initrd,
    } = job;
    let (line, package, vmlinuz, initrd) =
        (*line, package.clone(), vmlinuz.as_path(), initrd.as_path());
    let log = dir.join(format!("{}.log", line.name));
    say!(
        "vm-matrix {}: booting {} under {} (TCG, {} MB, up to {} s); console in {}",
        line.name,
        vmlinuz.display(),
        line.guest.qemu,
        boot_of(line).memory_mb,
        boot_of(line).timeout.as_secs(),
        log.display()
    );
    let (mut text, mut vm_time) = boot_and_read(line, vmlinuz, initrd, &log)?;
    if !parse_log(&text).finished && is_text_patching_trap(&text) {
        // The kernel stopped on its own breakpoint: a CPU ran an `int3` that
        // x86's live text patching (static calls, jump labels) had already
        // taken back. Attaching and detaching a tracepoint's programs make
        // the kernel patch its call sites while the other CPU runs them;
        // every tracer does that. Seen twice in CI under TCG with a thread
        // per vCPU, on 6.12.117 only (see `accel` in guest.rs); the same
        // binary and kernel booted cleanly ten times in a row in between.
        // One more boot, whose verdict counts: a crash that repeats, or any
        // other crash, fails.
        let first = dir.join(format!("{}.crash.log", line.name));
        fs::rename(&log, &first)
            .with_context(|| format!("keeping {} as {}", log.display(), first.display()))?;
        say!(
            "vm-matrix {}: the kernel stopped on a text-patching breakpoint (console kept in {}); booting it once more:",
            line.name,
            first.display()
        );
        for l in console_trouble(&text) {
            say!("  | {l}");
        }
        (text, vm_time) = boot_and_read(line, vmlinuz, initrd, &log)?;
    }
    let guest = parse_log(&text);
    // What the guest did finish is judged all the same.
    let trampolines = verdict::trampolines_configured(&apt::kernel_config(vmlinuz)?);
    let mut verdict = judge(line, package, &guest, overrides, vm_time, trampolines);
    if !guest.finished {
        verdict.failures.push(format!(
            "the VM did not finish (no MDIAG-VM-END on its console); see {}",
            log.display()
        ));
        verdict.console = console_trouble(&text);
    }
    Ok(verdict)
}

/// One kernel line ready to boot.
struct Job {
    line: &'static Line,
    /// The kernel's Debian package.
    package: String,
    vmlinuz: PathBuf,
    initrd: PathBuf,
}

/// Boots every job, `at_once` at a time in their order; returns each with
/// its verdict and how long it took, in the order they finished.
fn boot_all<'a>(
    jobs: &'a [Job],
    dir: &Path,
    overrides: &[(String, Need)],
    at_once: usize,
) -> Vec<(&'a Job, Result<Verdict>, Duration)> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..at_once.clamp(1, jobs.len().max(1)) {
            scope.spawn(|| {
                while let Some(job) =
                    jobs.get(next.fetch_add(1, std::sync::atomic::Ordering::SeqCst))
                {
                    let started = Instant::now();
                    let verdict = check_kernel(job, dir, overrides);
                    let took = started.elapsed();
                    done.lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push((job, verdict, took));
                }
            });
        }
    });
    done.into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Boots `line`'s kernel and reads back its console: the text, and how long
/// the VM ran.
fn boot_and_read(
    line: &Line,
    vmlinuz: &Path,
    initrd: &Path,
    log: &Path,
) -> Result<(String, Duration)> {
    let booted = Instant::now();
    boot(line.guest, &boot_of(line), vmlinuz, initrd, log)?;
    let vm_time = booted.elapsed();
    let bytes = fs::read(log).with_context(|| format!("reading {}", log.display()))?;
    Ok((String::from_utf8_lossy(&bytes).into_owned(), vm_time))
}

/// Whether the kernel oopsed on an `int3` trap in its own code: the mark of
/// x86 text patching (`text_poke_bp`) seen out of step, not of a fault in
/// what the guest ran.
fn is_text_patching_trap(console: &str) -> bool {
    console.lines().any(|l| l.contains("Oops: int3"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_int3_oops_is_a_text_patching_trap() {
        assert!(is_text_patching_trap(
            "[   31.221373] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI\r\n\
             [   31.222704] RIP: 0010:__schedule+0x5b8/0xbf0\r\n"
        ));
        assert!(!is_text_patching_trap(
            "[   12.1] BUG: kernel NULL pointer dereference, address: 0000000000000000\n\
             [   12.1] Oops: 0000 [#1] PREEMPT SMP NOPTI\n"
        ));
        assert!(!is_text_patching_trap("MDIAG-VM-END\n"));
    }

    #[test]
    fn bin_takes_an_architecture_or_is_the_host_s() {
        assert_eq!(
            parse_bin("s390x=/t/mdiag"),
            Ok(("s390x", PathBuf::from("/t/mdiag")))
        );
        assert_eq!(
            parse_bin("target/debug/mdiag"),
            Ok(("x86_64", PathBuf::from("target/debug/mdiag")))
        );
        // Not an architecture before the `=`: all of it is the path.
        assert_eq!(
            parse_bin("/a=b/mdiag"),
            Ok(("x86_64", PathBuf::from("/a=b/mdiag")))
        );
    }
}
