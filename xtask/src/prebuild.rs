//! Builds what the last tiers compile (the aarch64 and s390x debug binaries,
//! the release binary) while the root suite runs, at the lowest CPU
//! priority.
//!
//! Why: in sequence after the suite, those builds took about 30 min of a CI
//! run (aarch64 alone 9 min, s390x 13), and the run passed its 90 min
//! limit. The suite's 17 min are partly spent waiting on workloads,
//! recordings and mongod; a `nice -n 19` build gets some of that CPU time
//! and little else (measured: a third of the aarch64 build, while the
//! suite took as long as without it: 1057 s against 1043 s), and the
//! suite's tests are written to pass on a busy host anyway. It starts once
//! the suite is built: lint, the unit tier's build and the suite's keep
//! every CPU busy, and a run that started it with lint saw lint and the
//! unit build take 1.9 and 1.4 times as long (what the head start gained,
//! they lost).
//! Each foreign architecture builds in a target directory of its own
//! (`arch.rs`) and the release binary in `target/release`, so cargo's
//! per-directory locks never make a tier wait for this build.
//!
//! The builds run as a child `cargo xtask prebuild` (its own process group,
//! so it is stopped whole if an earlier tier fails) with its output in
//! `<target>/prebuild.log`. They are only a head start: each later tier
//! builds what it needs as before, a no-op once the child has built it with
//! the same commands ([`build`] calls the tiers' own functions), and a
//! failed head start only costs its time: the tier that needs the build
//! fails on it with the compiler's output in place.
use std::{
    fs::File,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Instant,
};

use anyhow::{Context, Result};
use clap::ValueEnum;

use crate::{
    arch::{self, ARCHES},
    cmd::target_dir,
    say,
    test::Tier,
};

/// What one of the last tiers needs built, and by which of their functions.
#[derive(Clone, Copy, PartialEq, Eq, Debug, ValueEnum)]
pub enum Part {
    /// Each foreign architecture's debug binary (cross, vm).
    Cross,
    /// The x86_64 release binary (the vm tier's mongod run, package).
    Release,
}

/// Whether `tier` compiles a part (so the head start is waited for first).
pub fn needs(tier: Tier) -> bool {
    !parts_of(tier).is_empty()
}

fn parts_of(tier: Tier) -> &'static [Part] {
    match tier {
        Tier::Cross => &[Part::Cross],
        Tier::Vm => &[Part::Cross, Part::Release],
        Tier::Package => &[Part::Release],
        Tier::Lint | Tier::Unit | Tier::Root | Tier::BenchBuild => &[],
    }
}

/// The parts the tiers of the rest of a run, `tiers` (from the root tier
/// on), need, in their order.
pub fn parts_for(tiers: &[Tier]) -> Vec<Part> {
    let mut parts: Vec<Part> = Vec::new();
    for &tier in tiers {
        for part in parts_of(tier) {
            if !parts.contains(part) {
                parts.push(*part);
            }
        }
    }
    parts
}

/// `cargo xtask prebuild`: builds `parts`, in order, failing at the first
/// that fails.
pub fn build(parts: &[Part]) -> Result<()> {
    for part in parts {
        match part {
            Part::Cross => {
                for arch in ARCHES.iter().filter(|a| !a.is_host()) {
                    arch::build(arch, arch::DebugBuild::Plain)?;
                }
            }
            Part::Release => {
                crate::release::build(arch::host())?;
            }
        }
    }
    Ok(())
}

/// The running child, killed with its process group if dropped unfinished.
pub struct Prebuild {
    child: Option<Child>,
    log: PathBuf,
    started: Instant,
}

impl Prebuild {
    /// Starts `cargo xtask prebuild` at nice 19 for what [`parts_for`]
    /// `tiers` gives; `None` when that is nothing. A child that cannot
    /// start is only said.
    pub fn start(tiers: &[Tier]) -> Option<Prebuild> {
        let parts = parts_for(tiers);
        if parts.is_empty() {
            return None;
        }
        match spawn(&parts) {
            Ok(p) => Some(p),
            Err(e) => {
                say!("prebuild: not started ({e:#}); the later tiers build in turn");
                None
            }
        }
    }

    /// Waits for the child and says how it ended; whether it built
    /// everything. Its failure is not this tier's (see the module's
    /// comment).
    pub fn finish(mut self) -> bool {
        let waited = Instant::now();
        let Some(mut child) = self.child.take() else {
            return false;
        };
        match child.wait() {
            Ok(status) if status.success() => {
                say!(
                    "prebuild: done {} s after it started (waited {} s for it; log {})",
                    self.started.elapsed().as_secs(),
                    waited.elapsed().as_secs(),
                    self.log.display()
                );
                true
            }
            Ok(status) => {
                say!(
                    "prebuild: failed ({status}); the later tiers build in turn (log {})",
                    self.log.display()
                );
                false
            }
            Err(e) => {
                say!("prebuild: could not be waited for ({e})");
                false
            }
        }
    }
}

impl Drop for Prebuild {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let Ok(pgid) = i32::try_from(child.id()) else {
                return;
            };
            // SAFETY: kill(2) with a negative pid signals that process group
            // (the child's own, see `spawn`); it touches no memory of ours.
            unsafe {
                libc::kill(-pgid, libc::SIGTERM);
            }
            let _ = child.wait();
            say!("prebuild: stopped");
        }
    }
}

fn spawn(parts: &[Part]) -> Result<Prebuild> {
    let log = target_dir()?.join("prebuild.log");
    let file = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let stderr = file.try_clone()?;
    let exe = own_copy(target_dir()?)?;
    let mut cmd = Command::new("nice");
    cmd.args(["-n", "19"]).arg(exe).arg("prebuild");
    for part in parts {
        if let Some(value) = part.to_possible_value() {
            cmd.arg("--part").arg(value.get_name());
        }
    }
    cmd.current_dir(crate::cmd::workspace_root())
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(stderr)
        .process_group(0);
    let child = cmd
        .spawn()
        .context("starting `nice -n 19 xtask prebuild`")?;
    say!(
        "prebuild: building {} at nice 19 beside the root suite (log {})",
        parts
            .iter()
            .filter_map(|p| p.to_possible_value().map(|v| v.get_name().to_owned()))
            .collect::<Vec<_>>()
            .join(" and "),
        log.display()
    );
    Ok(Prebuild {
        child: Some(child),
        log,
        started: Instant::now(),
    })
}

/// A copy of this process's own executable, to run as the child: the root
/// tier's `cargo build --workspace` rebuilds xtask, which replaces the file
/// this process was started from (`current_exe()` then names a deleted file
/// that `nice` cannot run, and a rebuilt xtask need not be this one). The
/// running image stays readable at `/proc/self/exe`. Written beside and
/// renamed into place, so a copy still running is never written to. `dir`:
/// the target directory.
fn own_copy(dir: &Path) -> Result<PathBuf> {
    let copy = dir.join("xtask-prebuild");
    let tmp = dir.join("xtask-prebuild.tmp");
    std::fs::copy("/proc/self/exe", &tmp)
        .with_context(|| format!("copying xtask's own executable to {}", tmp.display()))?;
    std::fs::rename(&tmp, &copy)
        .with_context(|| format!("renaming {} to {}", tmp.display(), copy.display()))?;
    Ok(copy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_a_later_tier_needs_is_built() {
        assert!(parts_for(&[Tier::Root, Tier::BenchBuild]).is_empty());
        assert_eq!(parts_for(&[Tier::Root, Tier::Cross]), [Part::Cross]);
        assert_eq!(parts_for(&[Tier::Root, Tier::Package]), [Part::Release]);
        assert_eq!(
            parts_for(&[Tier::Root, Tier::Cross, Tier::Vm, Tier::Package]),
            [Part::Cross, Part::Release]
        );
        assert!(needs(Tier::Vm) && !needs(Tier::BenchBuild));
    }

    #[test]
    fn the_copy_is_this_executable_and_replaces_an_older_one() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("xtask-prebuild-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("xtask-prebuild"), "an older copy").unwrap();
        let ours = std::fs::read("/proc/self/exe").unwrap();
        let copy = own_copy(&dir).unwrap();
        assert_eq!(std::fs::read(&copy).unwrap(), ours);
        let mode = std::fs::metadata(&copy).unwrap().permissions().mode();
        assert_eq!(mode & 0o111, 0o111, "{mode:o}");
        assert!(!dir.join("xtask-prebuild.tmp").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
