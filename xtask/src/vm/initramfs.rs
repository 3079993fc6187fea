//! The guest's initramfs: static busybox with its applets, the mdiag binary
//! (stripped) with the shared libraries `ldd` names, and the init script
//! [`INIT`], packed by `cpio` (newc) and `gzip`.
//!
//! Why tools and not a crate: no new dependency, so the workspace's
//! `Cargo.lock` stays as it is. It is rebuilt on every run, from the current
//! binary; the staged tree stays in `<vm>/initramfs/root/` to look at.
use std::{
    fs,
    path::{Path, PathBuf},
    time::Instant,
};

use anyhow::{Context, Result};

use crate::{cmd::Cmd, say};

/// Where busybox-static puts its binary.
const BUSYBOX: &str = "/bin/busybox";
/// Busybox applets that [`INIT`] calls by name.
const APPLETS: &[&str] = &[
    "sh", "mount", "cat", "grep", "cut", "sleep", "tail", "sed", "poweroff",
];
/// The recordings [`INIT`] makes, in order.
pub(super) const RUNS: [&str; 2] = ["host-wide", "spawned"];

/// The guest's `/init`. It prints marker lines (`MDIAG-VM-…`) and, between
/// `MDIAG-VM-JSON-BEGIN` and `-END`, the report JSON; [`parse_log`] reads them.
/// The `ctxt` lines bracket each recording: from the moment mdiag says its
/// probes are attached (its clock starts then; mdiag's output comes through a
/// pipe, so the shell sees the line at once) to as long after as it records
/// (waiting for its exit instead would count the writing of the file too).
///
/// [`parse_log`]: super::console::parse_log
pub(super) const INIT: &str = r#"#!/bin/sh
# Written by `cargo xtask vm-matrix` (xtask/src/vm/), which parses its output.
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

/// Stages the guest's root in `<vm>/initramfs/root` and packs it into
/// `<vm>/initramfs/initrd.gz`.
pub(super) fn build_initramfs(dir: &Path, bin: &Path) -> Result<PathBuf> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
