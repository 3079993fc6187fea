//! Disk use of the test tiers: how much `target/` holds and how much its
//! filesystem has free, said after every tier and checked before the first.
//!
//! Why: a CI run once failed in the unit tier with "No space left on device"
//! and nothing in its log said how full the disk was or which tier filled it.
//! A full run on a clean clone needs about [`FULL_RUN_BYTES`] (see its
//! comment); with less free, the run starts anyway (a partial `--tier` run
//! needs less) but says so first.
use std::{fs, io, os::unix::fs::MetadataExt, path::Path};

use crate::{cmd::target_dir, say};

/// About what a full `./x test` on a clean clone leaves in `target/`, with
/// a margin: measured 2026-11-24 (debug builds with line tables only,
/// `CARGO_INCREMENTAL=0` as in `.ci/run`), 3.6 GiB after the unit tier,
/// 4.7 GiB after the root tier, and each cross architecture's debug build
/// about 2 GiB more (with its tests, and the kernel matrix's images, more).
/// Each tier's line in the log gives the real figure of a run.
pub const FULL_RUN_BYTES: u64 = 16 << 30;

const GIB: f64 = (1u64 << 30) as f64;

/// Bytes allocated under `dir` (blocks, so sparse files count what they use);
/// entries that vanish while it walks (a build running beside) are skipped.
fn allocated(dir: &Path) -> io::Result<u64> {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = match fs::read_dir(&d) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let Ok(entry) = entry else { continue };
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                total += meta.blocks() * 512;
            }
        }
    }
    Ok(total)
}

/// Free bytes (for an unprivileged user) on the filesystem holding `path`.
fn free(path: &Path) -> io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: statvfs is plain old data; an all-zero value is valid and
    // the call overwrites it.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path that outlives the call and `st`
    // is a valid, writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

/// The filesystem's free space at `target/`, or the workspace's when
/// `target/` does not exist yet.
fn free_at_target(target: &Path) -> io::Result<u64> {
    let at = if target.exists() {
        target
    } else {
        target.parent().unwrap_or(target)
    };
    free(at)
}

/// "target/ holds 6.0 GiB; 70.1 GiB free", or why it could not be read.
fn line(held: &io::Result<u64>, free: &io::Result<u64>) -> String {
    let gib = |r: &io::Result<u64>| match r {
        Ok(b) => format!("{:.1} GiB", *b as f64 / GIB),
        Err(e) => format!("unreadable ({e})"),
    };
    format!("target/ holds {}; {} free", gib(held), gib(free))
}

/// [`line`] for `target/` now.
pub fn usage() -> String {
    match target_dir() {
        Ok(target) => line(&allocated(target), &free_at_target(target)),
        Err(_) => "disk use unknown (no target directory)".to_owned(),
    }
}

/// Before the first tier: warns when `target/` and the free space together
/// fall short of what a full run needs, else says both.
pub fn warn_if_short() {
    let Ok(target) = target_dir() else { return };
    let (held, free) = (allocated(target), free_at_target(target));
    if let (Ok(h), Ok(f)) = (&held, &free)
        && let Some(short) = shortfall(*h, *f)
    {
        say!(
            "warning: a full test run needs about {:.0} GiB in target/; it holds {:.1} GiB \
             and {:.1} GiB are free, {:.1} GiB short: free some disk (old clones' target/ \
             directories, `cargo clean`) or a tier may fail with \"No space left on device\"",
            FULL_RUN_BYTES as f64 / GIB,
            *h as f64 / GIB,
            *f as f64 / GIB,
            short as f64 / GIB
        );
    } else {
        say!("{}", line(&held, &free));
    }
}

/// How many bytes a full run lacks, given what `target/` already holds
/// (reused by the build) and what is free.
fn shortfall(held: u64, free: u64) -> Option<u64> {
    FULL_RUN_BYTES
        .checked_sub(held.saturating_add(free))
        .filter(|&s| s > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shortfall_counts_what_target_already_holds() {
        assert_eq!(shortfall(0, FULL_RUN_BYTES), None);
        assert_eq!(shortfall(FULL_RUN_BYTES, 0), None);
        assert_eq!(
            shortfall(1 << 30, FULL_RUN_BYTES - (3 << 30)),
            Some(2 << 30)
        );
        assert_eq!(shortfall(u64::MAX, u64::MAX), None);
    }

    #[test]
    fn allocated_sums_the_files_below_a_directory() {
        let dir = std::env::temp_dir().join(format!("xtask-disk-{}", std::process::id()));
        fs::create_dir_all(dir.join("a/b")).unwrap();
        fs::write(dir.join("a/one"), vec![1u8; 64 * 1024]).unwrap();
        fs::write(dir.join("a/b/two"), vec![2u8; 128 * 1024]).unwrap();
        let n = allocated(&dir).unwrap();
        fs::remove_dir_all(&dir).unwrap();
        // Blocks, so at least the bytes written (tmpfs and ext4 allocate
        // them all; a compressing filesystem is not where CI runs).
        assert!(n >= 192 * 1024, "{n}");
        assert!(n < 1 << 20, "{n}");
    }

    #[test]
    fn free_reads_the_filesystem_of_a_path() {
        // A full disk has 0 free: only that the call answers is checked.
        assert!(free(Path::new("/")).is_ok());
        assert!(free(Path::new("/no/such/path")).is_err());
    }
}
