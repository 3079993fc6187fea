//! The guest's initramfs, one per architecture: static busybox with its
//! applets, the mdiag binary (stripped) with its shared libraries, and the
//! init script [`INIT`], packed by `cpio` (newc) and `gzip`.
//!
//! The libraries: for the host's architecture those `ldd` names; for another
//! one `ldd` cannot run the binary, so they are the `DT_NEEDED` closure
//! (`readelf -d`) found in the cross glibc's `<sysroot>/lib` and put in the
//! guest's `/lib` (which the dynamic loader searches), the loader itself at
//! its `PT_INTERP` path (`readelf -l`).
//!
//! Why tools and not a crate: no new dependency, so the workspace's
//! `Cargo.lock` stays as it is. It is rebuilt on every run, from the current
//! binary; the staged tree stays in `<vm>/initramfs/<arch>/root/` to look at.
use std::{
    fs,
    path::{Path, PathBuf},
    time::Instant,
};

use anyhow::{Context, Result, bail};

use super::guest::Guest;
use crate::{arch::Arch, cmd::Cmd, say};

/// Busybox applets that [`INIT`] calls by name.
const APPLETS: &[&str] = &[
    "sh", "mount", "cat", "grep", "cut", "sleep", "tail", "sed", "poweroff", "ip", "wget", "awk",
    "kill", "mv", "mkdir", "rm", "touch", "base64", "head",
];
/// The recordings [`INIT`] makes, in order: the last only where the
/// initramfs has mongod (`vm/mongod.rs`).
pub(super) const RUNS: [&str; 3] = ["host-wide", "spawned", "mongod"];
/// The executable of the target of the `spawned` recording.
pub(super) const SPAWNED_PROGRAM: &str = "busybox";

/// The guest's `/init`. It prints marker lines (`MDIAG-VM-…`) and, between
/// `MDIAG-VM-JSON-BEGIN` and `-END`, the report JSON; [`parse_log`] reads them.
/// The `ctxt` lines bracket a window inside each recording: from the moment
/// mdiag says its probes are attached (its clock starts then; mdiag's output
/// comes through a pipe, so the shell sees the line at once) to half a
/// second before it stops recording. Not to its end: right after it, mdiag
/// detaches its probes and writes the file, a burst of switches (RCU grace
/// periods, worker threads) that the shell's late `sleep` would partly count
/// under TCG, where it overshoots by up to a fifth of a second; and not to a
/// whole second, where mdiag cuts a slice. The verdict compares the rates of
/// the two windows.
///
/// Then, when the initramfs has mongod (`vm/mongod.rs`), `mongod_run`
/// starts it on a tmpfs dbpath (cache 0.25 GB, a checkpoint every 2 s, a
/// 10 MB journal file not preallocated: tmpfs is RAM) in the background and
/// waits (180 s at most) for its log to say it is waiting for connections;
/// starts `mdiag-mongoload` with two connections until its stdin closes and
/// waits for its `ready`; records mongod as a target with `--uri` for
/// [`MONGOD_SECS`] s, with an allocator window of 200 ms every 2 s, by the
/// release build of mdiag (`/bin/mdiag-release`, see `vm/mongod.rs`) and
/// explains it; lists mongod's threads (tid, context switches,
/// name from `/proc/PID/task/*`) when the probes are attached and
/// [`MONGOD_THREADS_END`] s later; stops the load and prints its total
/// line; prints the recording itself in base64 (its per-thread data is
/// not in the report); and kills mongod.
///
/// Last, `agent` runs `mdiag agent` host-wide (no process of its `processes`
/// runs in the guest) with windows of one second, polls its `/metrics` on
/// port 9219 with busybox `wget` once a second until it counts two windows
/// (or 90 s), prints the `mdiag_probe_up` and `mdiag_windows_total` samples
/// read last (value first, each line cut at 200 characters), stops it with
/// SIGTERM (SIGKILL after 30 s: `hung`) and prints its exit status and its
/// log, which `vm/agent.rs` judges. The loopback interface, down in a bare
/// initramfs, is brought up for it.
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
read -r up rest </proc/uptime
echo "MDIAG-VM-BEGIN $(cat /proc/sys/kernel/osrelease) $up"
cd /tmp
# How long each recording lasts, and the ctxt window in it, in seconds.
secs=4
window=3.5
# The mongod run's (see INIT's comment; its window ends when the threads
# are listed the second time).
mongod_secs=MONGOD_SECS
mongod_window=MONGOD_WINDOW
# The mdiag that records and explains (the mongod run's is another).
mdiag=/bin/mdiag

# ctxt RUN WHEN: context switches since boot, and the uptime; with shell
# builtins only, so that reading them switches no more than it has to.
ctxt() {
    while read -r key value; do [ "$key" = ctxt ] && break; done </proc/stat
    read -r up rest </proc/uptime
    echo "MDIAG-VM-CTXT $1 $2 $value $up"
}

# watch RUN: copies mdiag's output (stdin) to /tmp/RUN.log; when it says the
# probes are attached, the ctxt lines: now, and half a second before it stops.
watch() {
    while IFS= read -r l; do
        echo "$l" >>/tmp/$1.log
        case $l in
        *"probes attached"*)
            ctxt $1 start
            [ $1 = mongod ] && threads start
            (
                sleep $window
                ctxt $1 end
                [ $1 = mongod ] && threads end
            ) &
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
        NO_COLOR=1 $mdiag record --duration ${secs}s --no-progress -o /tmp/$run.mdiag "$@"
        echo $? >/tmp/$run.rc
    } 2>&1 | watch $run
    rc=$(cat /tmp/$run.rc 2>/dev/null || echo 255)
    echo "MDIAG-VM-RECORD $run $rc"
    if [ "$rc" -ne 0 ]; then
        tail -n 20 /tmp/$run.log | cut -c1-300 | sed "s/^/MDIAG-VM-LOG $run /"
    fi
    if [ -f /tmp/$run.mdiag ]; then
        echo "MDIAG-VM-JSON-BEGIN $run"
        NO_COLOR=1 $mdiag explain /tmp/$run.mdiag --format json 2>/tmp/$run.explain
        echo "MDIAG-VM-JSON-END $run $?"
        tail -n 5 /tmp/$run.explain | cut -c1-300 | sed "s/^/MDIAG-VM-LOG $run explain: /"
    fi
}

record host-wide --host-wide
# A target on a CPU in user space all along (mdiag stops it at the end; the
# bound only ends it should mdiag not): the perf check counts its samples.
record spawned -- /bin/busybox sh -c 'i=0; while [ $i -lt 3000000 ]; do i=$((i+1)); done'

# alive PID: the process runs (a zombie, ended but not waited for, does not).
alive() {
    [ -r /proc/$1/stat ] || return 1
    read -r _ _ state _ </proc/$1/stat
    [ "$state" != Z ]
}

# threads WHEN: each mongod thread's tid, context switches so far and name.
threads() {
    for t in /proc/$mpid/task/*; do
        n=0
        while read -r key value; do
            case $key in
            voluntary_ctxt_switches: | nonvoluntary_ctxt_switches:) n=$((n + value)) ;;
            esac
        done 2>/dev/null <$t/status
        read -r comm 2>/dev/null <$t/comm || continue
        echo "MDIAG-VM-MONGOD-THREAD $1 ${t##*/} $n $comm"
    done
}

# wait_for FILE PATTERN PID SECS: until FILE has PATTERN, while PID lives,
# for SECS seconds at most; fails when it never came.
wait_for() {
    read -r t0 rest </proc/uptime
    until grep -q "$2" $1 2>/dev/null; do
        alive $3 || return 1
        read -r now rest </proc/uptime
        [ ${now%.*} -lt $((${t0%.*} + $4)) ] || return 1
        sleep 0.5
    done
}

# mongod_run: the real mongod under a request load, recorded (see INIT's
# comment); only where the initramfs has it.
mongod_run() {
    [ -x /bin/mongod ] || return 0
    echo MDIAG-VM-MONGOD-BEGIN
    ip link set lo up
    mkdir -p /tmp/db
    uri=mongodb://127.0.0.1:27017
    read -r t0 rest </proc/uptime
    /bin/mongod --dbpath /tmp/db --port 27017 --bind_ip 127.0.0.1 --nounixsocket \
        --wiredTigerCacheSizeGB 0.25 --syncdelay 2 \
        --wiredTigerEngineConfigString 'log=(file_max=10MB,prealloc=false)' \
        --logpath /tmp/mongod.log >/tmp/mongod.out 2>&1 &
    mpid=$!
    if ! wait_for /tmp/mongod.log "Waiting for connections" $mpid 180; then
        echo "MDIAG-VM-MONGOD-FAILED mongod did not start listening within 180 s"
        tail -n 5 /tmp/mongod.out /tmp/mongod.log | cut -c1-300 | sed "s/^/MDIAG-VM-MONGOD-LOG /"
        kill -KILL $mpid 2>/dev/null
        wait $mpid
        echo MDIAG-VM-MONGOD-END
        return
    fi
    read -r t1 rest </proc/uptime
    echo "MDIAG-VM-MONGOD-UP $mpid $t0 $t1"
    rm -f /tmp/load.stop
    { while [ ! -f /tmp/load.stop ]; do sleep 0.5; done; } |
        /bin/mdiag-mongoload --uri $uri --threads 2 --until-stdin >/tmp/load.out 2>/tmp/load.err &
    lpid=$!
    if wait_for /tmp/load.out "^ready" $lpid 120; then
        read -r t2 rest </proc/uptime
        echo "MDIAG-VM-MONGOD-READY $t2"
        secs=$mongod_secs
        window=$mongod_window
        mdiag=/bin/mdiag-release
        record mongod --pid $mpid --uri $uri --alloc-window 200ms --alloc-every 2s
        mdiag=/bin/mdiag
        read -r t3 rest </proc/uptime
        echo "MDIAG-VM-MONGOD-RECORDED $t3"
    else
        echo "MDIAG-VM-MONGOD-FAILED the load did not connect within 120 s"
    fi
    touch /tmp/load.stop
    wait $lpid
    echo "MDIAG-VM-MONGOD-LOAD $(tail -n 1 /tmp/load.out)"
    head -n 3 /tmp/load.err | cut -c1-300 | sed "s/^/MDIAG-VM-MONGOD-LOG load: /"
    if [ -f /tmp/mongod.mdiag ]; then
        echo "MDIAG-VM-FILE-BEGIN mongod"
        base64 /tmp/mongod.mdiag
        echo "MDIAG-VM-FILE-END mongod"
    fi
    kill -KILL $mpid 2>/dev/null
    wait $mpid
    echo MDIAG-VM-MONGOD-END
}

# agent: `mdiag agent` host-wide with 1 s windows (see INIT's comment).
agent() {
    echo MDIAG-VM-AGENT-BEGIN
    ip link set lo up
    cat >/tmp/agent.toml <<EOF
[agent]
window = "1s"
listen = "127.0.0.1:9219"
state_dir = "/tmp/agent"
processes = ["mongod"]
EOF
    NO_COLOR=1 /bin/mdiag agent --config /tmp/agent.toml --no-mongo >/tmp/agent.log 2>&1 &
    pid=$!
    tries=0
    while [ $tries -lt 90 ] && alive $pid; do
        sleep 1
        tries=$((tries + 1))
        wget -q -O /tmp/agent.new http://127.0.0.1:9219/metrics 2>/dev/null || continue
        mv /tmp/agent.new /tmp/agent.metrics
        windows=$(awk '/^mdiag_windows_total[{ ]/ { print int($NF) }' /tmp/agent.metrics)
        [ "${windows:-0}" -ge 2 ] && break
    done
    echo "MDIAG-VM-AGENT-WAITED $tries"
    if [ -f /tmp/agent.metrics ]; then
        awk '/^mdiag_(probe_up|windows_total)/ { print "MDIAG-VM-AGENT-METRIC " $NF " " substr($0, 1, 200) }' /tmp/agent.metrics
    fi
    kill -TERM $pid 2>/dev/null
    (sleep 30; echo hung >/tmp/agent.hung; kill -KILL $pid 2>/dev/null) &
    dog=$!
    wait $pid
    rc=$?
    kill $dog 2>/dev/null
    [ -f /tmp/agent.hung ] && rc=hung
    tail -n 20 /tmp/agent.log | cut -c1-300 | sed "s/^/MDIAG-VM-AGENT-LOG /"
    echo "MDIAG-VM-AGENT-EXIT $rc"
}

mongod_run
agent
echo MDIAG-VM-END
poweroff -f
"#;

/// How long the mongod run records, in seconds. Under TCG (the release
/// build, on a 2-vCPU host shared with builds) mdiag's record loop was held
/// 14 to 17 s by its first slice and 25 to 31 s more by resolving the
/// allocator's entry points in mongod's symbol table, so the first
/// allocator window opened at 38.9 s (6.1, 40 s recording) and 48.1 s (6.1,
/// 50 s); on 6.12 it opened earlier. 70 s leaves a margin of about 20 s.
pub(super) const MONGOD_SECS: u32 = 70;

/// When the guest lists mongod's threads the second time, in seconds after
/// the probes were attached: well before the recording ends, because the
/// shell's `sleep` overshot by up to 2 s under TCG, and a thread that first
/// ran after mdiag stopped (TTLMonitor wakes 60 s after mongod started) must
/// not count as one that ran while it recorded.
pub(super) const MONGOD_THREADS_END: u32 = MONGOD_SECS - 5;

/// [`INIT`] with the mongod run's duration and ctxt window filled in.
pub(super) fn init() -> String {
    INIT.replace("MONGOD_SECS", &MONGOD_SECS.to_string())
        .replace("MONGOD_WINDOW", &MONGOD_THREADS_END.to_string())
}

/// Stages `guest`'s root in `<vm>/initramfs/<arch>/root` from `busybox` and
/// `bin` (both of that architecture) and packs it into
/// `<vm>/initramfs/<arch>/initrd.gz`.
pub(super) fn build_initramfs(
    dir: &Path,
    guest: &Guest,
    busybox: &Path,
    bin: &Path,
) -> Result<PathBuf> {
    let started = Instant::now();
    let arch = guest.arch()?;
    let base = dir.join("initramfs").join(guest.name);
    let root = base.join("root");
    if root.exists() {
        fs::remove_dir_all(&root).with_context(|| format!("removing {}", root.display()))?;
    }
    for sub in ["bin", "dev", "proc", "sys", "tmp"] {
        fs::create_dir_all(root.join(sub))
            .with_context(|| format!("creating {}", root.join(sub).display()))?;
    }
    copy_into(&root, busybox, "bin/busybox")?;
    for applet in APPLETS {
        let link = root.join("bin").join(applet);
        std::os::unix::fs::symlink("busybox", &link)
            .with_context(|| format!("creating {}", link.display()))?;
    }
    // Stripped: the debug binary is mostly debug info, which the guest
    // would have to hold in RAM.
    Cmd::new(strip_tool(arch))
        .arg("-o")
        .arg(root.join("bin/mdiag"))
        .arg(bin)
        .run()?;
    for (from, to) in libraries(arch, bin)? {
        let relative = to.strip_prefix("/").unwrap_or(&to).to_owned();
        copy_into(&root, &from, &relative)?;
    }
    write_executable(&root.join("init"), &init())?;
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
        "vm-matrix {}: initramfs {} ({} MB, with {}) in {} s",
        guest.name,
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

/// The `strip` that reads `arch`'s objects: the host's, or the cross
/// binutils' (`aarch64-linux-gnu-strip` beside `aarch64-linux-gnu-gcc`).
fn strip_tool(arch: &Arch) -> String {
    arch.cross_gcc
        .and_then(|gcc| gcc.strip_suffix("gcc"))
        .map_or("strip".to_owned(), |prefix| format!("{prefix}strip"))
}

/// The shared libraries `bin` needs: (where they are here, where they go in
/// the guest).
pub(super) fn libraries(arch: &Arch, bin: &Path) -> Result<Vec<(PathBuf, PathBuf)>> {
    let Some(sysroot) = arch.sysroot else {
        let ldd = Cmd::new("ldd").arg(bin).stdout()?;
        return Ok(shared_libraries(&ldd)
            .into_iter()
            .map(|l| (l.clone(), l))
            .collect());
    };
    let lib_dir = Path::new(sysroot).join("lib");
    let readelf = |args: &str, file: &Path| Cmd::new("readelf").arg(args).arg(file).stdout();
    let interp = interpreter(&readelf("-l", bin)?)
        .with_context(|| format!("{} names no program interpreter", bin.display()))?;
    let interp_name = interp
        .file_name()
        .context("a program interpreter without a file name")?;
    let mut out = vec![(lib_dir.join(interp_name), interp.clone())];
    // The DT_NEEDED closure.
    let mut todo = needed(&readelf("-d", bin)?);
    let mut seen: Vec<String> = Vec::new();
    while let Some(name) = todo.pop() {
        if seen.contains(&name) {
            continue;
        }
        let from = lib_dir.join(&name);
        if !from.is_file() {
            bail!(
                "{} needs {name}, which is not in {} (is libc6-*-cross installed?)",
                bin.display(),
                lib_dir.display()
            );
        }
        todo.extend(needed(&readelf("-d", &from)?));
        let to = Path::new("/lib").join(&name);
        if to != interp {
            out.push((from, to));
        }
        seen.push(name);
    }
    Ok(out)
}

/// The `NEEDED` names in `readelf -d` output
/// (`0x… (NEEDED)  Shared library: [libc.so.6]`).
fn needed(readelf_d: &str) -> Vec<String> {
    readelf_d
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| {
            let (_, rest) = l.split_once('[')?;
            let (name, _) = rest.split_once(']')?;
            Some(name.to_owned())
        })
        .collect()
}

/// The program interpreter in `readelf -l` output
/// (`[Requesting program interpreter: /lib/ld64.so.1]`).
fn interpreter(readelf_l: &str) -> Option<PathBuf> {
    readelf_l.lines().find_map(|l| {
        let (_, rest) = l.split_once("program interpreter:")?;
        let path = rest.trim().trim_end_matches(']').trim();
        path.starts_with('/').then(|| PathBuf::from(path))
    })
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

    #[test]
    fn readelf_output_gives_needed_and_interpreter() {
        let d = "\
Dynamic section at offset 0x1a1e2c0 contains 30 entries:
  Tag        Type                         Name/Value
 0x0000000000000001 (NEEDED)             Shared library: [libgcc_s.so.1]
 0x0000000000000001 (NEEDED)             Shared library: [libc.so.6]
 0x0000000000000001 (NEEDED)             Shared library: [ld64.so.1]
 0x000000000000000c (INIT)               0x1e3000
";
        assert_eq!(needed(d), ["libgcc_s.so.1", "libc.so.6", "ld64.so.1"]);
        let l = "  INTERP         0x0000000000000238 0x0000000000000238\n\
                 \x20     [Requesting program interpreter: /lib/ld-linux-aarch64.so.1]\n";
        assert_eq!(
            interpreter(l),
            Some(PathBuf::from("/lib/ld-linux-aarch64.so.1"))
        );
        assert_eq!(interpreter("no interp\n"), None);
    }

    #[test]
    fn strip_comes_from_the_cross_binutils() {
        let arch = |name| crate::arch::parse_arch(name).unwrap();
        assert_eq!(strip_tool(arch("x86_64")), "strip");
        assert_eq!(strip_tool(arch("s390x")), "s390x-linux-gnu-strip");
    }
}
