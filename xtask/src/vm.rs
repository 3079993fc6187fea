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
use std::{
    collections::{BTreeMap, BTreeSet},
    fmt,
    fs::{self, File},
    path::{Path, PathBuf},
    thread,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::Value;

use crate::{
    cmd::{Cmd, find_in_path, need_sudo, target_dir},
    say,
    setup::install_missing,
};

/// Host packages the matrix needs: the guest's shell and tools, the archive
/// tool, and the emulator.
const HOST_PACKAGES: &[&str] = &["busybox-static", "cpio", "qemu-system-x86"];
/// Where busybox-static puts its binary.
const BUSYBOX: &str = "/bin/busybox";
/// Busybox applets that [`INIT`] calls by name.
const APPLETS: &[&str] = &[
    "sh", "mount", "cat", "grep", "cut", "sleep", "tail", "sed", "poweroff",
];
/// How long one VM may run (TCG is slow, but a boot with both recordings
/// takes well under a minute on a 2-CPU machine).
const VM_TIMEOUT: Duration = Duration::from_secs(300);
/// How far the recorded switch total may be from `/proc/stat`'s.
const SWITCH_TOLERANCE: f64 = 0.10;
/// The recordings [`INIT`] makes, in order.
const RUNS: [&str; 2] = ["host-wide", "spawned"];
/// Where Debian's archive keys are (for the private apt sources).
const DEBIAN_KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";
const DEFAULT_MIRROR: &str = "http://deb.debian.org/debian";

/// The guest's `/init`. It prints marker lines (`MDIAG-VM-…`) and, between
/// `MDIAG-VM-JSON-BEGIN` and `-END`, the report JSON; [`parse_log`] reads them.
/// The `ctxt` lines bracket each recording: from the moment mdiag says its
/// probes are attached (its clock starts then; mdiag's output comes through a
/// pipe, so the shell sees the line at once) to as long after as it records
/// (waiting for its exit instead would count the writing of the file too).
pub const INIT: &str = r#"#!/bin/sh
# Written by `cargo xtask vm-matrix` (xtask/src/vm.rs), which parses its output.
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
mount -t tracefs tracefs /sys/kernel/tracing 2>/dev/null
echo "MDIAG-VM-BEGIN $(cat /proc/sys/kernel/osrelease)"
cd /tmp
# How long each recording lasts, in seconds.
secs=3

# ctxt RUN WHEN: context switches since boot, and the uptime; with shell
# builtins only, so that reading them switches no more than it has to.
ctxt() {
    while read -r key value; do [ "$key" = ctxt ] && break; done </proc/stat
    read -r up rest </proc/uptime
    echo "MDIAG-VM-CTXT $1 $2 $value $up"
}

# watch RUN: copies mdiag's output (stdin) to /tmp/RUN.log; when it says the
# probes are attached, the ctxt lines: now, and as long after as it records.
watch() {
    while IFS= read -r l; do
        echo "$l" >>/tmp/$1.log
        case $l in
        *"probes attached"*)
            ctxt $1 start
            (sleep $secs; ctxt $1 end) &
            ;;
        esac
    done
    wait
}

# record RUN ARGS...: one `mdiag record`, its exit status, its log's tail when
# it failed, and the recording explained as JSON.
record() {
    run=$1
    shift
    : >/tmp/$run.log
    {
        NO_COLOR=1 /bin/mdiag record --duration ${secs}s --no-progress -o /tmp/$run.mdiag "$@"
        echo $? >/tmp/$run.rc
    } 2>&1 | watch $run
    rc=$(cat /tmp/$run.rc 2>/dev/null || echo 255)
    echo "MDIAG-VM-RECORD $run $rc"
    if [ "$rc" -ne 0 ]; then
        tail -n 20 /tmp/$run.log | cut -c1-300 | sed "s/^/MDIAG-VM-LOG $run /"
    fi
    if [ -f /tmp/$run.mdiag ]; then
        echo "MDIAG-VM-JSON-BEGIN $run"
        NO_COLOR=1 /bin/mdiag explain /tmp/$run.mdiag --format json 2>/tmp/$run.explain
        echo "MDIAG-VM-JSON-END $run $?"
        tail -n 5 /tmp/$run.explain | cut -c1-300 | sed "s/^/MDIAG-VM-LOG $run explain: /"
    fi
}

record host-wide --host-wide
record spawned -- /bin/busybox sh -c 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done'
echo MDIAG-VM-END
poweroff -f
"#;

// ------------------------------------------------------------ kernels ----

/// One kernel line: which Debian package builds it and where apt finds it.
#[derive(Debug, PartialEq, Eq)]
pub struct Line {
    /// What `--kernel` takes, and the log's name.
    pub name: &'static str,
    /// Upstream major.minor, for [`EXPECTATIONS`].
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

// ------------------------------------------------------- expectations ----

/// What a probe family must reach on a kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Every program attached.
    Attached,
    /// At least one program attached.
    Partly,
    /// Not tried, or "not applicable" (nothing to probe in the guest).
    NotApplicable,
    /// Anything, even a failure: shown, not checked.
    Any,
}

impl Need {
    fn met_by(self, status: &Status) -> bool {
        match self {
            Need::Attached => matches!(status, Status::Attached),
            Need::Partly => matches!(status, Status::Attached | Status::Partly { .. }),
            Need::NotApplicable => matches!(status, Status::Absent | Status::NotApplicable(_)),
            Need::Any => true,
        }
    }
}

impl fmt::Display for Need {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Need::Attached => "attached",
            Need::Partly => "partly",
            Need::NotApplicable => "n/a",
            Need::Any => "any",
        })
    }
}

/// From kernel `since` on, `family` must reach `need` (in both recordings).
#[derive(Debug, Clone, Copy)]
pub struct Expectation {
    pub family: &'static str,
    pub since: (u32, u32),
    pub need: Need,
}

const fn expect(family: &'static str, since: (u32, u32), need: Need) -> Expectation {
    Expectation {
        family,
        since,
        need,
    }
}

/// What each family must do on each kernel: for a family and a kernel, the
/// row with the highest `since` that is not above the kernel counts; a family
/// without a row for the kernel is shown but not checked. Tighten here (or
/// for one run with `--expect FAMILY=NEED`).
pub const EXPECTATIONS: &[Expectation] = &[
    expect("sched", (5, 10), Need::Attached),
    expect("softirq", (5, 10), Need::Attached),
    expect("syscalls", (5, 10), Need::Attached),
    expect("perf", (5, 10), Need::Attached),
    // The lock-contention programs need the contention_begin/end
    // tracepoints (5.19); the D-state program works before.
    expect("contention", (5, 10), Need::Partly),
    expect("contention", (5, 19), Need::Attached),
    // No WiredTiger in busybox: not tried host-wide, "not applicable" spawned.
    expect("wiredtiger", (5, 10), Need::NotApplicable),
    // Not tried host-wide; in the spawned busybox (static) the allocator's
    // entry points may or may not be found: shown, not checked.
    expect("alloc", (5, 10), Need::Any),
];

/// The need for `family` on a kernel `version`: an `--expect` override, else
/// the table's row.
fn need_for(
    table: &[Expectation],
    overrides: &[(String, Need)],
    family: &str,
    version: (u32, u32),
) -> Option<Need> {
    if let Some((_, need)) = overrides.iter().rev().find(|(f, _)| f == family) {
        return Some(*need);
    }
    table
        .iter()
        .filter(|e| e.family == family && e.since <= version)
        .max_by_key(|e| e.since)
        .map(|e| e.need)
}

fn parse_expect(s: &str) -> Result<(String, Need), String> {
    let (family, need) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not FAMILY=NEED"))?;
    let need = match need {
        "attached" => Need::Attached,
        "partly" => Need::Partly,
        "n/a" | "not-applicable" => Need::NotApplicable,
        "any" => Need::Any,
        _ => {
            return Err(format!(
                "{need:?}: NEED is one of attached, partly, not-applicable, any"
            ));
        }
    };
    Ok((family.to_owned(), need))
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

/// Why a guest may have stopped: the first few kernel lines that say
/// something went wrong (a lockup, a stall, a panic, an oops), else the
/// console's last lines.
fn console_trouble(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text
        .lines()
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.trim().is_empty())
        .collect();
    let signs = [
        "BUG:",
        "Kernel panic",
        "Oops",
        "self-detected stall",
        "RIP:",
    ];
    let mut trouble: Vec<String> = Vec::new();
    for l in &lines {
        if signs.iter().any(|s| l.contains(s)) && !trouble.iter().any(|t| t == l) {
            trouble.push((*l).to_owned());
        }
    }
    if trouble.is_empty() {
        trouble = lines[lines.len().saturating_sub(8)..]
            .iter()
            .map(|l| (*l).to_owned())
            .collect();
    }
    trouble.truncate(8);
    trouble
}

// ---------------------------------------------------------------- apt ----

/// apt, for the host's sources or a private state per extra suite.
struct Apt {
    vm_dir: PathBuf,
    /// Sources (`None`: the host's) already updated in this run.
    updated: BTreeSet<Option<&'static str>>,
}

impl Apt {
    fn new(vm_dir: &Path) -> Self {
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
fn kernel(line: &Line, apt: &mut Apt, dir: &Path) -> Result<(String, PathBuf)> {
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

// ---------------------------------------------------------- initramfs ----

/// Stages the guest's root in `<vm>/initramfs/root` and packs it into
/// `<vm>/initramfs/initrd.gz`.
fn build_initramfs(dir: &Path, bin: &Path) -> Result<PathBuf> {
    let started = Instant::now();
    let base = dir.join("initramfs");
    let root = base.join("root");
    if root.exists() {
        fs::remove_dir_all(&root).with_context(|| format!("removing {}", root.display()))?;
    }
    for sub in ["bin", "dev", "proc", "sys", "tmp"] {
        fs::create_dir_all(root.join(sub))
            .with_context(|| format!("creating {}", root.join(sub).display()))?;
    }
    copy_into(&root, Path::new(BUSYBOX), "bin/busybox")?;
    for applet in APPLETS {
        let link = root.join("bin").join(applet);
        std::os::unix::fs::symlink("busybox", &link)
            .with_context(|| format!("creating {}", link.display()))?;
    }
    // Stripped: the debug binary is mostly debug info, which the guest
    // would have to hold in RAM.
    Cmd::new("strip")
        .arg("-o")
        .arg(root.join("bin/mdiag"))
        .arg(bin)
        .run()?;
    let ldd = Cmd::new("ldd").arg(bin).stdout()?;
    for lib in shared_libraries(&ldd) {
        let relative = lib.strip_prefix("/").unwrap_or(&lib).to_owned();
        copy_into(&root, &lib, &relative)?;
    }
    write_executable(&root.join("init"), INIT)?;
    let initrd = base.join("initrd.gz");
    Cmd::new("bash")
        .args([
            "-c",
            "set -o pipefail; find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet | gzip -1 > \"$1\"",
            "bash",
        ])
        .arg(&initrd)
        .current_dir(&root)
        .run()?;
    let size = fs::metadata(&initrd)
        .with_context(|| format!("reading {}", initrd.display()))?
        .len();
    say!(
        "vm-matrix: initramfs {} ({} MB, with {}) in {} s",
        initrd.display(),
        size / 1_000_000,
        bin.display(),
        started.elapsed().as_secs()
    );
    Ok(initrd)
}

/// Copies `from` to `root/relative` (following symlinks), keeping its mode.
fn copy_into(root: &Path, from: &Path, relative: impl AsRef<Path>) -> Result<()> {
    let to = root.join(relative);
    if let Some(parent) = to.parent() {
        fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    fs::copy(from, &to)
        .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    Ok(())
}

fn write_executable(path: &Path, text: &str) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o755))
        .with_context(|| format!("making {} executable", path.display()))
}

/// The files a dynamic executable needs, from `ldd`'s output: each
/// `name => /path (addr)` and the interpreter's `/path (addr)`; not the vDSO.
fn shared_libraries(ldd_output: &str) -> Vec<PathBuf> {
    ldd_output
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let path = match l.split_once("=>") {
                Some((_, rest)) => rest.split_whitespace().next()?,
                None => l.split_whitespace().next()?,
            };
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

// --------------------------------------------------------------- boot ----

/// Runs QEMU until the guest powers off (or [`VM_TIMEOUT`]), its console
/// into `log`.
fn boot(vmlinuz: &Path, initrd: &Path, log: &Path) -> Result<()> {
    let file = File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let mut cmd = Cmd::new("qemu-system-x86_64");
    // TCG, not KVM: it runs anywhere (KVM is not usable on every machine
    // that runs this).
    cmd.args(["-accel", "tcg", "-cpu", "max", "-m", "1024", "-smp", "2"])
        .args(["-nographic", "-no-reboot", "-nic", "none"])
        .arg("-kernel")
        .arg(vmlinuz)
        .arg("-initrd")
        .arg(initrd)
        // A soft lockup panics, and the panic ends QEMU (-no-reboot): a hung
        // guest then stops within half a minute, with a stack on the console.
        .args(["-append", "console=ttyS0 quiet panic=-1 softlockup_panic=1"]);
    let mut child = cmd.spawn_logged(file)?;
    let deadline = Instant::now() + VM_TIMEOUT;
    loop {
        if child
            .try_wait()
            .with_context(|| format!("waiting for `{cmd}`"))?
            .is_some()
        {
            return Ok(());
        }
        if Instant::now() >= deadline {
            say!(
                "vm-matrix: QEMU still runs after {} s; stopping it",
                VM_TIMEOUT.as_secs()
            );
            child.kill().with_context(|| format!("stopping `{cmd}`"))?;
            child
                .wait()
                .with_context(|| format!("waiting for `{cmd}`"))?;
            return Ok(());
        }
        thread::sleep(Duration::from_millis(200));
    }
}

// ---------------------------------------------------------- serial log ----

/// What the guest printed.
#[derive(Debug, Default)]
struct GuestLog {
    /// `uname -r` of the guest.
    release: Option<String>,
    /// The init script reached its end.
    finished: bool,
    runs: Vec<RunLog>,
}

#[derive(Debug, Default)]
struct RunLog {
    name: String,
    /// (`ctxt`, uptime in seconds) when the probes were attached, and as
    /// long after as the recording lasts.
    ctxt_start: Option<(u64, f64)>,
    ctxt_end: Option<(u64, f64)>,
    record_exit: Option<i32>,
    /// Lines of mdiag's own log, printed when something failed.
    log: Vec<String>,
    /// The report JSON, when explain ran to its end.
    json: Option<String>,
    explain_exit: Option<i32>,
}

impl GuestLog {
    fn run_mut(&mut self, name: &str) -> &mut RunLog {
        let pos = match self.runs.iter().position(|r| r.name == name) {
            Some(pos) => pos,
            None => {
                self.runs.push(RunLog {
                    name: name.to_owned(),
                    ..RunLog::default()
                });
                self.runs.len() - 1
            }
        };
        &mut self.runs[pos]
    }

    fn run(&self, name: &str) -> Option<&RunLog> {
        self.runs.iter().find(|r| r.name == name)
    }
}

/// A kernel message on the console ("[   12.345678] ..."), which may come
/// between any two lines the guest prints.
fn is_kernel_message(line: &str) -> bool {
    line.trim_start()
        .strip_prefix('[')
        .and_then(|r| r.split_once(']'))
        .is_some_and(|(t, _)| {
            let t = t.trim();
            !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '.')
        })
}

/// Reads the marker lines of [`INIT`] from a serial console log (which also
/// holds firmware escape sequences and kernel messages).
fn parse_log(text: &str) -> GuestLog {
    let mut guest = GuestLog::default();
    // The run whose JSON is being read, and the JSON so far.
    let mut json: Option<(String, String)> = None;
    for line in text.lines() {
        let line = line.trim_end_matches('\r');
        let marker = line.find("MDIAG-VM-").map(|pos| &line[pos..]);
        let words: Vec<&str> = marker
            .map(|m| m.split_whitespace().collect())
            .unwrap_or_default();
        if let Some((run, buf)) = json.as_mut() {
            match words.first().copied() {
                Some("MDIAG-VM-JSON-END") => {
                    let r = guest.run_mut(run);
                    r.json = Some(std::mem::take(buf));
                    r.explain_exit = words.get(2).and_then(|w| w.parse().ok());
                    json = None;
                }
                Some("MDIAG-VM-END") => {
                    guest.finished = true;
                    json = None;
                }
                _ if is_kernel_message(line) => {}
                _ => {
                    buf.push_str(line);
                    buf.push('\n');
                }
            }
            continue;
        }
        match words.as_slice() {
            ["MDIAG-VM-BEGIN", release, ..] => guest.release = Some((*release).to_owned()),
            ["MDIAG-VM-CTXT", run, when, ctxt, uptime, ..] => {
                let (Ok(ctxt), Ok(uptime)) = (ctxt.parse(), uptime.parse()) else {
                    continue;
                };
                let r = guest.run_mut(run);
                match *when {
                    "start" => r.ctxt_start = Some((ctxt, uptime)),
                    "end" => r.ctxt_end = Some((ctxt, uptime)),
                    _ => {}
                }
            }
            ["MDIAG-VM-RECORD", run, rc, ..] => guest.run_mut(run).record_exit = rc.parse().ok(),
            ["MDIAG-VM-LOG", run, ..] => {
                let prefix = format!("MDIAG-VM-LOG {run} ");
                let text = marker
                    .and_then(|m| m.strip_prefix(&prefix))
                    .unwrap_or_default()
                    .to_owned();
                guest.run_mut(run).log.push(text);
            }
            ["MDIAG-VM-JSON-BEGIN", run, ..] => json = Some(((*run).to_owned(), String::new())),
            ["MDIAG-VM-END", ..] => guest.finished = true,
            _ => {}
        }
    }
    guest
}

// ------------------------------------------------------------ verdict ----

/// How a probe family did in one recording.
#[derive(Debug, Clone, PartialEq)]
enum Status {
    /// Not in the recording's `probes` (not tried).
    Absent,
    Attached,
    /// Nothing to probe (the reason).
    NotApplicable(String),
    /// Some programs attached; the first error.
    Partly {
        attached: usize,
        programs: usize,
        error: String,
    },
    /// No program attached; the first error.
    Failed(String),
    /// The recording itself failed (why).
    NoRecording(String),
}

impl Status {
    fn cell(&self) -> String {
        match self {
            Status::Absent => "-".into(),
            Status::Attached => "attached".into(),
            Status::NotApplicable(_) => "n/a".into(),
            Status::Partly {
                attached, programs, ..
            } => format!("partly {attached}/{programs}"),
            Status::Failed(_) => "FAILED".into(),
            Status::NoRecording(_) => "no recording".into(),
        }
    }

    /// The error worth showing under the table.
    fn error(&self) -> Option<&str> {
        match self {
            Status::Partly { error, .. } | Status::Failed(error) => Some(error),
            _ => None,
        }
    }
}

/// Each family's status in a report JSON (its `probes` array, see
/// docs/report-json.md).
fn statuses(report: &Value) -> Result<BTreeMap<String, Status>, String> {
    let probes = report["probes"]
        .as_array()
        .ok_or("the report has no probes array")?;
    let mut out = BTreeMap::new();
    for probe in probes {
        let family = probe["family"].as_str().ok_or("a probe without a family")?;
        out.insert(family.to_owned(), classify(probe));
    }
    Ok(out)
}

fn classify(probe: &Value) -> Status {
    let programs = probe["programs"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let errors: Vec<String> = programs
        .iter()
        .filter(|p| !p["attached"].as_bool().unwrap_or(p["error"].is_null()))
        .map(|p| {
            let error = p["error"].as_str().unwrap_or("did not attach");
            format!(
                "{} ({}): {}",
                p["name"].as_str().unwrap_or("?"),
                p["attach_point"].as_str().unwrap_or("?"),
                error
            )
        })
        .collect();
    let first = || errors.first().cloned().unwrap_or_default();
    if programs.is_empty() {
        Status::Failed("the family lists no programs".into())
    } else if errors.is_empty() {
        Status::Attached
    } else if errors.len() < programs.len() {
        Status::Partly {
            attached: programs.len() - errors.len(),
            programs: programs.len(),
            error: first(),
        }
    } else if programs.iter().all(|p| {
        p["error"]
            .as_str()
            .is_some_and(|e| e.starts_with("not applicable"))
    }) {
        Status::NotApplicable(first())
    } else {
        Status::Failed(first())
    }
}

/// One line of an error for the table: its first line, and for a verifier
/// log its verdict (the line before "verification time" / "processed N insns").
fn summarize(error: &str) -> String {
    let lines: Vec<&str> = error.lines().map(str::trim).collect();
    let mut out = lines.first().copied().unwrap_or("").to_owned();
    let end = lines
        .iter()
        .position(|l| l.starts_with("verification time") || l.starts_with("processed "));
    if let Some(reason) = end
        .filter(|&e| e > 1)
        .and_then(|e| lines[1..e].iter().rev().find(|l| !l.is_empty()))
        && !out.contains(reason)
    {
        out.push_str(" … ");
        out.push_str(reason);
    }
    const MAX: usize = 300;
    if out.chars().count() > MAX {
        out = out.chars().take(MAX).collect::<String>() + "…";
    }
    out
}

/// The host-wide recording's switches against the guest's `/proc/stat`.
#[derive(Debug, PartialEq)]
enum SwitchCheck {
    Skipped(String),
    Done {
        /// Switches in the recording: `switches_per_s × duration_s`.
        recorded: f64,
        /// Its `duration_s`.
        secs: f64,
        /// How much `ctxt` grew in the guest's window, and how long that was.
        ctxt: u64,
        window: f64,
        /// |recorded − expected| / expected, where expected is `ctxt` scaled
        /// from the guest's window to the recording's duration (the two
        /// windows start within a poll of each other, but the guest's sleep
        /// may run long under TCG).
        off: f64,
    },
}

fn switch_check(run: &RunLog, report: Option<&Value>) -> SwitchCheck {
    let sched = report.map(|r| &r["measurements"]["sched"]);
    let (Some(per_s), Some(secs)) = (
        sched.and_then(|s| s["switches_per_s"].as_f64()),
        sched.and_then(|s| s["duration_s"].as_f64()),
    ) else {
        return SwitchCheck::Skipped("the recording has no sched measurements".into());
    };
    let (Some((start, t0)), Some((end, t1))) = (run.ctxt_start, run.ctxt_end) else {
        return SwitchCheck::Skipped("the guest printed no ctxt lines".into());
    };
    let ctxt = end.saturating_sub(start);
    let window = t1 - t0;
    if ctxt == 0 || window <= 0.0 {
        return SwitchCheck::Skipped("/proc/stat ctxt or the uptime did not move".into());
    }
    let recorded = per_s * secs;
    let expected = ctxt as f64 * secs / window;
    SwitchCheck::Done {
        recorded,
        secs,
        ctxt,
        window,
        off: (recorded - expected).abs() / expected,
    }
}

struct Row {
    family: String,
    /// One per [`RUNS`].
    cells: Vec<Status>,
    need: Option<Need>,
    ok: bool,
}

/// The outcome on one kernel.
struct Verdict {
    line: &'static str,
    package: String,
    release: Option<String>,
    vm_time: Duration,
    /// Runs whose recording or report failed, and why.
    run_errors: Vec<(String, String)>,
    rows: Vec<Row>,
    switches: SwitchCheck,
    /// Why the kernel fails; empty when it passes.
    failures: Vec<String>,
    /// Console lines worth showing when the VM did not finish.
    console: Vec<String>,
}

fn run_statuses(run: Option<&RunLog>) -> (Result<BTreeMap<String, Status>, String>, Option<Value>) {
    let Some(run) = run else {
        return (
            Err("not reached (the VM stopped or hung before)".into()),
            None,
        );
    };
    if run.record_exit.is_none() {
        return (
            Err("did not end (the VM stopped or hung during it)".into()),
            None,
        );
    }
    let why = |what: String| {
        let log = run.log.iter().rev().find(|l| !l.trim().is_empty());
        match log {
            Some(l) => format!("{what}: {}", l.trim()),
            None => what,
        }
    };
    let Some(json) = &run.json else {
        return (
            Err(why(format!(
                "mdiag record exited with {}, no recording",
                run.record_exit.map_or("?".into(), |c| c.to_string())
            ))),
            None,
        );
    };
    if run.explain_exit != Some(0) {
        return (
            Err(why(format!(
                "mdiag explain exited with {}",
                run.explain_exit.map_or("?".into(), |c| c.to_string())
            ))),
            None,
        );
    }
    match serde_json::from_str::<Value>(json) {
        Ok(report) => (statuses(&report), Some(report)),
        Err(e) => (Err(format!("the report is not JSON: {e}")), None),
    }
}

fn judge(
    line: &'static Line,
    package: String,
    guest: &GuestLog,
    overrides: &[(String, Need)],
    vm_time: Duration,
) -> Verdict {
    judge_with(line, package, guest, EXPECTATIONS, overrides, vm_time)
}

fn judge_with(
    line: &'static Line,
    package: String,
    guest: &GuestLog,
    table: &[Expectation],
    overrides: &[(String, Need)],
    vm_time: Duration,
) -> Verdict {
    let mut run_errors = Vec::new();
    let mut per_run = Vec::new();
    let mut switches = SwitchCheck::Skipped("no host-wide report".into());
    for name in RUNS {
        let run = guest.run(name);
        let (statuses, report) = run_statuses(run);
        if name == "host-wide"
            && let Some(run) = run
        {
            let sched = statuses.as_ref().ok().and_then(|m| m.get("sched"));
            switches = if sched == Some(&Status::Attached) {
                switch_check(run, report.as_ref())
            } else {
                SwitchCheck::Skipped("sched did not attach".into())
            };
        }
        if let Err(e) = &statuses {
            run_errors.push((name.to_owned(), e.clone()));
        }
        per_run.push(statuses);
    }
    // Families of the table first, in its order, then any other reported.
    let mut families: Vec<String> = Vec::new();
    let known = table
        .iter()
        .map(|e| e.family.to_owned())
        .chain(overrides.iter().map(|(f, _)| f.clone()))
        .chain(
            per_run
                .iter()
                .flatten()
                .flat_map(|m| m.keys().cloned())
                .collect::<BTreeSet<_>>(),
        );
    for family in known {
        if !families.contains(&family) {
            families.push(family);
        }
    }
    let mut failures = Vec::new();
    let mut rows = Vec::new();
    for family in families {
        let need = need_for(table, overrides, &family, line.version);
        let cells: Vec<Status> = per_run
            .iter()
            .map(|r| match r {
                Ok(m) => m.get(&family).cloned().unwrap_or(Status::Absent),
                Err(e) => Status::NoRecording(e.clone()),
            })
            .collect();
        let ok = need.is_none_or(|n| cells.iter().all(|c| n.met_by(c)));
        if let (false, Some(n)) = (ok, need) {
            failures.push(format!("{family} is not {n}"));
        }
        // A family without expectation that nobody tried is noise.
        if need.is_some() || cells.iter().any(|c| *c != Status::Absent) {
            rows.push(Row {
                family,
                cells,
                need,
                ok,
            });
        }
    }
    if let SwitchCheck::Done { off, .. } = switches
        && off > SWITCH_TOLERANCE
    {
        failures.push(format!(
            "recorded switches {:.0} % off /proc/stat",
            off * 100.0
        ));
    }
    Verdict {
        line: line.name,
        package,
        release: guest.release.clone(),
        vm_time,
        run_errors,
        rows,
        switches,
        failures,
        console: Vec::new(),
    }
}

impl Verdict {
    /// The table and its notes, on stderr.
    fn print(&self) {
        say!(
            "vm-matrix {}: {} (uname -r {}), VM ran {} s",
            self.line,
            self.package,
            self.release.as_deref().unwrap_or("?"),
            self.vm_time.as_secs()
        );
        for line in self.table() {
            say!("  {line}");
        }
        if !self.console.is_empty() {
            say!("  the VM did not finish; its console says:");
            for line in &self.console {
                say!("    | {line}");
            }
        }
    }

    fn table(&self) -> Vec<String> {
        let mut header = vec!["family".to_owned()];
        header.extend(RUNS.iter().map(|r| (*r).to_owned()));
        header.extend(["expected".to_owned(), "verdict".to_owned()]);
        let mut grid = vec![header];
        for row in &self.rows {
            let mut cells = vec![row.family.clone()];
            cells.extend(row.cells.iter().map(Status::cell));
            cells.push(row.need.map_or("-".into(), |n| n.to_string()));
            cells.push(match (row.need, row.ok) {
                (None, _) => "".into(),
                (Some(_), true) => "ok".into(),
                (Some(_), false) => "FAIL".into(),
            });
            grid.push(cells);
        }
        let widths: Vec<usize> = (0..grid[0].len())
            .map(|i| grid.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
            .collect();
        let mut out: Vec<String> = grid
            .iter()
            .map(|r| {
                r.iter()
                    .zip(&widths)
                    .map(|(c, w)| format!("{c:<w$}"))
                    .collect::<Vec<_>>()
                    .join("  ")
                    .trim_end()
                    .to_owned()
            })
            .collect();
        for (run, error) in &self.run_errors {
            out.push(format!("{run} recording: {error}"));
        }
        for row in &self.rows {
            let errors: Vec<(&str, String)> = RUNS
                .iter()
                .zip(&row.cells)
                .filter_map(|(run, c)| c.error().map(|e| (*run, summarize(e))))
                .collect();
            match errors.as_slice() {
                [(_, a), (_, b)] if a == b => out.push(format!("{} (both): {a}", row.family)),
                _ => {
                    for (run, e) in errors {
                        out.push(format!("{} ({run}): {e}", row.family));
                    }
                }
            }
        }
        out.push(match &self.switches {
            SwitchCheck::Skipped(why) => format!("switch check: skipped ({why})"),
            SwitchCheck::Done {
                recorded,
                secs,
                ctxt,
                window,
                off,
            } => format!(
                "switch check: recorded {recorded:.0} in {secs:.2} s, /proc/stat ctxt +{ctxt} \
                 in {window:.2} s: {:.1} % apart ({})",
                off * 100.0,
                if *off <= SWITCH_TOLERANCE {
                    "ok"
                } else {
                    "FAIL"
                }
            ),
        });
        out
    }
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

    #[test]
    fn ldd_output_gives_libraries_and_interpreter() {
        let ldd = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                   \tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f59)\n\
                   \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f59)\n\
                   \t/lib64/ld-linux-x86-64.so.2 (0x00007f59)\n";
        assert_eq!(
            shared_libraries(ldd),
            [
                "/lib/x86_64-linux-gnu/libgcc_s.so.1",
                "/lib/x86_64-linux-gnu/libc.so.6",
                "/lib64/ld-linux-x86-64.so.2"
            ]
            .map(PathBuf::from)
        );
    }

    #[test]
    fn the_table_picks_the_newest_row_not_above_the_kernel() {
        let t = EXPECTATIONS;
        assert_eq!(need_for(t, &[], "contention", (5, 10)), Some(Need::Partly));
        assert_eq!(need_for(t, &[], "contention", (6, 1)), Some(Need::Attached));
        assert_eq!(need_for(t, &[], "sched", (6, 12)), Some(Need::Attached));
        assert_eq!(need_for(t, &[], "sched", (4, 19)), None);
        assert_eq!(need_for(t, &[], "rseq", (6, 1)), None);
        let over = [parse_expect("sched=partly").unwrap()];
        assert_eq!(need_for(t, &over, "sched", (6, 1)), Some(Need::Partly));
        assert!(parse_expect("sched").is_err());
        assert!(parse_expect("sched=maybe").is_err());
        // Every kernel line has a row for the families the brief names.
        for line in LINES {
            for family in ["sched", "softirq", "syscalls", "perf", "contention"] {
                assert!(need_for(t, &[], family, line.version).is_some());
            }
        }
    }

    #[test]
    fn needs_accept_what_they_say() {
        let partly = Status::Partly {
            attached: 1,
            programs: 3,
            error: "x".into(),
        };
        assert!(Need::Attached.met_by(&Status::Attached));
        assert!(!Need::Attached.met_by(&partly));
        assert!(Need::Partly.met_by(&partly));
        assert!(!Need::Partly.met_by(&Status::Failed("x".into())));
        assert!(!Need::Partly.met_by(&Status::Absent));
        assert!(Need::NotApplicable.met_by(&Status::Absent));
        assert!(Need::NotApplicable.met_by(&Status::NotApplicable("n".into())));
        assert!(!Need::NotApplicable.met_by(&Status::Failed("x".into())));
        assert!(!Need::NotApplicable.met_by(&Status::NoRecording("x".into())));
        assert!(Need::Any.met_by(&Status::NoRecording("x".into())));
    }

    fn program(name: &str, error: Option<&str>) -> Value {
        serde_json::json!({
            "name": name,
            "attach_point": format!("tp_btf/{name}"),
            "attached": error.is_none(),
            "error": error,
        })
    }

    fn report(probes: Vec<Value>, switches_per_s: f64) -> String {
        serde_json::json!({
            "report_version": 1,
            "probes": probes,
            "measurements": {"sched": {"switches_per_s": switches_per_s, "duration_s": 3.0}},
        })
        .to_string()
    }

    /// A console log like the guest's: firmware escapes before the first
    /// marker, CRLF line ends, a kernel message inside the JSON.
    fn console(host_json: &str, spawned_json: &str) -> String {
        let host_json = host_json.replacen(',', ",\n[   12.345678] random: crng init done\n", 1);
        format!(
            "SeaBIOS\r\n\x1bc\x1b[?7l\x1b[2JMDIAG-VM-BEGIN 6.1.0-56-cloud-amd64\r\n\
             MDIAG-VM-CTXT host-wide start 1000 10.50\r\n\
             MDIAG-VM-CTXT host-wide end 1615 13.58\r\n\
             MDIAG-VM-RECORD host-wide 0\r\n\
             MDIAG-VM-JSON-BEGIN host-wide\r\n{host_json}\r\n\
             MDIAG-VM-JSON-END host-wide 0\r\n\
             MDIAG-VM-CTXT spawned start 2000 20.0\r\n\
             MDIAG-VM-CTXT spawned end 2600 24.0\r\n\
             MDIAG-VM-RECORD spawned 0\r\n\
             MDIAG-VM-JSON-BEGIN spawned\r\n{spawned_json}\r\n\
             MDIAG-VM-JSON-END spawned 0\r\n\
             MDIAG-VM-END\r\n[   30.1] reboot: Power down\r\n"
        )
    }

    const SCHED_ERROR: &str = "load: the BPF_PROG_LOAD syscall returned Invalid argument (os error 22). \
        Verifier output: 0: R1=ctx() R10=fp0\n\
        516: (0f) r2 += r1\n\
        math between map_value pointer and register with unbounded min value is not allowed\n\
        verification time 32986 usec\n\
        stack depth 240+0\n\
        processed 918 insns (limit 1000000) max_states_per_insn 4";

    fn probes(sched_error: Option<&str>, spawned: bool) -> Vec<Value> {
        let mut p = vec![
            serde_json::json!({"family": "sched", "attached": sched_error.is_none(),
                "programs": [program("sched_switch", sched_error), program("sched_wakeup", None)]}),
            serde_json::json!({"family": "softirq", "attached": true,
                "programs": [program("softirq_entry", None)]}),
            serde_json::json!({"family": "syscalls", "attached": true,
                "programs": [program("sys_enter", None), program("sys_exit", None)]}),
            serde_json::json!({"family": "perf", "attached": true,
                "programs": [program("perf_cpu_clock", None)]}),
            serde_json::json!({"family": "contention", "attached": false,
                "programs": [program("cont_switch", None),
                    program("contention_begin", Some("tracepoint contention_begin: not in this kernel's BTF")),
                    program("contention_end", Some("tracepoint contention_end: not in this kernel's BTF"))]}),
        ];
        if spawned {
            let na = "not applicable: no WiredTiger symbols found in pid 7";
            p.push(
                serde_json::json!({"family": "wiredtiger", "attached": false,
                "programs": [program("wt_begin", Some(na)), program("wt_end", Some(na))]}),
            );
        }
        p
    }

    #[test]
    fn a_console_log_becomes_runs() {
        let log = console(
            &report(probes(None, false), 200.0),
            &report(probes(None, true), 0.0),
        );
        let guest = parse_log(&log);
        assert!(guest.finished);
        assert_eq!(guest.release.as_deref(), Some("6.1.0-56-cloud-amd64"));
        let host = guest.run("host-wide").unwrap();
        assert_eq!(host.ctxt_start, Some((1000, 10.5)));
        assert_eq!(host.ctxt_end, Some((1615, 13.58)));
        assert_eq!(host.record_exit, Some(0));
        assert_eq!(host.explain_exit, Some(0));
        let json: Value = serde_json::from_str(host.json.as_deref().unwrap()).unwrap();
        let st = statuses(&json).unwrap();
        assert_eq!(st["sched"], Status::Attached);
        assert!(matches!(
            st["contention"],
            Status::Partly {
                attached: 1,
                programs: 3,
                ..
            }
        ));
        let spawned: Value =
            serde_json::from_str(guest.run("spawned").unwrap().json.as_deref().unwrap()).unwrap();
        assert!(matches!(
            statuses(&spawned).unwrap()["wiredtiger"],
            Status::NotApplicable(_)
        ));
        assert!(!parse_log("MDIAG-VM-BEGIN 6.1\nMDIAG-VM-JSON-BEGIN host-wide\n{").finished);
    }

    fn line(name: &str) -> &'static Line {
        parse_line(name).unwrap()
    }

    #[test]
    fn verdicts_follow_the_table() {
        // 6.1: every family attached but contention's lock programs → contention fails.
        let log = console(
            &report(probes(None, false), 200.0),
            &report(probes(None, true), 0.0),
        );
        let v = judge(
            line("6.1"),
            "pkg".into(),
            &parse_log(&log),
            &[],
            Duration::ZERO,
        );
        assert_eq!(v.failures, ["contention is not attached"]);
        // 200/s × 3 s = 600 against ctxt +615 in 3.08 s, 599 in 3 s.
        assert!(matches!(v.switches, SwitchCheck::Done { ctxt: 615, off, .. } if off < 0.01));
        // 300 recorded where the kernel counted 599 fails.
        let fewer = console(
            &report(probes(None, false), 100.0),
            &report(probes(None, true), 0.0),
        );
        let v = judge(
            line("6.12"),
            "pkg".into(),
            &parse_log(&fewer),
            &[],
            Duration::ZERO,
        );
        assert!(
            v.failures
                .contains(&"recorded switches 50 % off /proc/stat".to_owned())
        );
        // 5.10: partly is enough for contention.
        let v = judge(
            line("5.10"),
            "pkg".into(),
            &parse_log(&log),
            &[],
            Duration::ZERO,
        );
        assert!(v.failures.is_empty(), "{:?}", v.failures);
        let table = v.table().join("\n");
        assert!(table.contains("wiredtiger  -           n/a"), "{table}");
        assert!(
            table.contains("contention (both): contention_begin (tp_btf/contention_begin): tracepoint contention_begin"),
            "{table}"
        );

        // A verifier rejection of sched on the host-wide run.
        let log = console(
            &report(probes(Some(SCHED_ERROR), false), 0.0),
            &report(probes(None, true), 0.0),
        );
        let v = judge(
            line("5.10"),
            "pkg".into(),
            &parse_log(&log),
            &[],
            Duration::ZERO,
        );
        assert_eq!(v.failures, ["sched is not attached"]);
        let table = v.table().join("\n");
        assert!(
            table.contains("sched (host-wide): sched_switch (tp_btf/sched_switch): load: the BPF_PROG_LOAD syscall returned Invalid argument (os error 22). Verifier output: 0: R1=ctx() R10=fp0 … math between map_value pointer and register with unbounded min value is not allowed"),
            "{table}"
        );
        // Overridden, it passes.
        let v = judge(
            line("5.10"),
            "pkg".into(),
            &parse_log(&log),
            &[("sched".into(), Need::Partly)],
            Duration::ZERO,
        );
        assert!(v.failures.is_empty(), "{:?}", v.failures);
    }

    #[test]
    fn a_failed_recording_fails_the_families_it_should_have() {
        let log = "MDIAG-VM-BEGIN 6.12.1\n\
                   MDIAG-VM-RECORD host-wide 1\n\
                   MDIAG-VM-LOG host-wide Error: no probe attached\n\
                   MDIAG-VM-END\n";
        let v = judge(
            line("6.12"),
            "pkg".into(),
            &parse_log(log),
            &[],
            Duration::ZERO,
        );
        assert!(v.failures.contains(&"sched is not attached".to_owned()));
        // wiredtiger and alloc may be absent, but not without a recording.
        assert!(v.failures.contains(&"wiredtiger is not n/a".to_owned()));
        assert!(!v.failures.iter().any(|f| f.starts_with("alloc")));
        assert_eq!(
            v.run_errors[0],
            (
                "host-wide".to_owned(),
                "mdiag record exited with 1, no recording: Error: no probe attached".to_owned()
            )
        );
    }

    #[test]
    fn a_hung_guest_shows_why() {
        let log = "MDIAG-VM-BEGIN 5.10.0-32-cloud-amd64\r\n\
                   [   39.8] rcu: INFO: rcu_sched self-detected stall on CPU\r\n\
                   [   40.5] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [mdiag:274]\r\n\
                   [   68.5] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [mdiag:274]\r\n";
        assert_eq!(
            console_trouble(log),
            [
                "[   39.8] rcu: INFO: rcu_sched self-detected stall on CPU",
                "[   40.5] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [mdiag:274]",
                "[   68.5] watchdog: BUG: soft lockup - CPU#0 stuck for 22s! [mdiag:274]",
            ]
        );
        assert_eq!(console_trouble("a\nb\n\nc\n"), ["a", "b", "c"]);
        assert!(!parse_log(log).finished);
    }

    #[test]
    fn kernel_messages_are_recognised() {
        assert!(is_kernel_message("[   23.887611] reboot: Power down"));
        assert!(!is_kernel_message("  [1, 2]"));
        assert!(!is_kernel_message("[]"));
    }
}
