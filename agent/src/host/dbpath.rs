//! The target's data directory (mongod's dbPath) without a mongod
//! connection, and the storage under it.
//!
//! Rules about the disk under the data (readahead) need the directory. With
//! `record --uri` mongod's getCmdLineOpts names it; without one, the target
//! itself shows it: a WiredTiger process (mongod, SecantusDB, any program
//! using WiredTiger) holds `WiredTiger.lock` open in its home directory for
//! as long as it runs, and mongod also holds `mongod.lock` there. Failing
//! that, `--dbpath` on mongod's command line names it. Nothing is guessed:
//! when neither shows, the directory is unknown with the reason.

use std::path::{Path, PathBuf};

use super::storage::storage_facts_in;
use crate::recording::DbPathFacts;

/// Files a data directory holds open, most telling first.
pub const DATA_FILES: &[&str] = &["WiredTiger.lock", "mongod.lock", "WiredTiger.wt"];

/// The data directory of process `pid` of this host and its storage.
pub fn db_path_facts(pid: u32) -> DbPathFacts {
    db_path_facts_in(Path::new("/"), pid)
}

/// The data directory of process `pid` under `root` (ROOT/proc/PID) and its
/// storage (through ROOT/proc/self/mountinfo and ROOT/sys).
pub fn db_path_facts_in(root: &Path, pid: u32) -> DbPathFacts {
    let proc = root.join(format!("proc/{pid}"));
    let found = from_open_files(&proc)
        .map(|(dir, file)| (dir, format!("open file {file}")))
        .or_else(|| {
            from_command_line(&proc).map(|dir| (dir, "--dbpath on the command line".into()))
        });
    let Some((dir, found_by)) = found else {
        return DbPathFacts {
            unknown_reason: Some(format!(
                "the target (pid {pid}) has none of {} open and no --dbpath on its command line",
                DATA_FILES.join(", ")
            )),
            ..DbPathFacts::default()
        };
    };
    let path = dir.to_string_lossy().into_owned();
    let mut facts = DbPathFacts {
        path: Some(path.clone()),
        found_by: Some(found_by),
        ..DbPathFacts::default()
    };
    if other_mount_namespace(root, &proc) {
        facts.unknown_reason = Some(format!(
            "the target runs in another mount namespace (a container): {path} is its path, \
             not mdiag's, so the disk under it was not read"
        ));
    } else {
        facts.storage = Some(storage_facts_in(root, &dir));
    }
    facts
}

/// The directory of the first of [`DATA_FILES`] among the process's open
/// files, with the file's name.
fn from_open_files(proc: &Path) -> Option<(PathBuf, &'static str)> {
    let mut open: Vec<PathBuf> = std::fs::read_dir(proc.join("fd"))
        .ok()?
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .filter(|target| target.is_absolute())
        .collect();
    open.sort();
    DATA_FILES.iter().find_map(|name| {
        open.iter().find_map(|target| {
            (target.file_name()? == *name)
                .then(|| target.parent().map(|dir| (dir.to_path_buf(), *name)))?
        })
    })
}

/// `--dbpath DIR` or `--dbpath=DIR` on the command line (the last one wins,
/// as in mongod's parser), relative to the process's working directory.
fn from_command_line(proc: &Path) -> Option<PathBuf> {
    let raw = std::fs::read(proc.join("cmdline")).ok()?;
    let args: Vec<String> = raw
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let mut found = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        if let Some(value) = arg.strip_prefix("--dbpath=") {
            found = Some(value.to_owned());
        } else if arg == "--dbpath" {
            found = it.next().cloned();
        }
    }
    let dir = PathBuf::from(found.filter(|d| !d.is_empty())?);
    if dir.is_absolute() {
        Some(dir)
    } else {
        Some(std::fs::read_link(proc.join("cwd")).ok()?.join(dir))
    }
}

/// The process's mount namespace differs from mdiag's (both readable).
fn other_mount_namespace(root: &Path, proc: &Path) -> bool {
    let ns = |p: PathBuf| std::fs::read_link(p).ok();
    match (ns(proc.join("ns/mnt")), ns(root.join("proc/self/ns/mnt"))) {
        (Some(theirs), Some(ours)) => theirs != ours,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::write_tree;
    use std::os::unix::fs::symlink;

    /// A fake tree: /data on an XFS partition of nvme0n1 (read_ahead_kb 128).
    fn tree() -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        write_tree(
            r,
            &[
                (
                    "proc/self/mountinfo",
                    "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n\
                     60 27 259:2 / /data rw,noatime - xfs /dev/nvme0n1p2 rw,attr2\n",
                ),
                ("sys/devices/pci0/nvme/nvme0n1/nvme0n1p2/partition", "2\n"),
                ("sys/devices/pci0/nvme/nvme0n1/queue/read_ahead_kb", "128\n"),
                ("sys/devices/pci0/nvme/nvme0n1/queue/rotational", "0\n"),
                ("data/db/WiredTiger.lock", ""),
            ],
        );
        std::fs::create_dir_all(r.join("sys/dev/block")).unwrap();
        symlink(
            "../../devices/pci0/nvme/nvme0n1/nvme0n1p2",
            r.join("sys/dev/block/259:2"),
        )
        .unwrap();
        std::fs::create_dir_all(r.join("proc/self/ns")).unwrap();
        symlink("mnt:[4026531841]", r.join("proc/self/ns/mnt")).unwrap();
        root
    }

    /// Process `pid` with `fds` open, `cmdline` and its mount namespace.
    fn process(r: &Path, pid: u32, fds: &[&str], cmdline: &[&str], ns: &str) {
        let p = r.join(format!("proc/{pid}"));
        std::fs::create_dir_all(p.join("fd")).unwrap();
        std::fs::create_dir_all(p.join("ns")).unwrap();
        for (i, target) in fds.iter().enumerate() {
            symlink(target, p.join(format!("fd/{i}"))).unwrap();
        }
        let mut raw = cmdline.join("\0");
        raw.push('\0');
        std::fs::write(p.join("cmdline"), raw).unwrap();
        symlink("/srv", p.join("cwd")).unwrap();
        symlink(ns, p.join("ns/mnt")).unwrap();
    }

    const OURS: &str = "mnt:[4026531841]";

    #[test]
    fn open_lock_file_names_the_directory_and_its_disk() {
        let root = tree();
        let r = root.path();
        process(
            r,
            10,
            &[
                "/dev/null",
                "socket:[123]",
                "/data/db/collection-0-1.wt",
                "/data/db/WiredTiger.wt",
                "/data/db/WiredTiger.lock",
                "/data/db/journal/WiredTigerLog.0000000001",
            ],
            &["mongod", "--dbpath", "/elsewhere"],
            OURS,
        );
        let f = db_path_facts_in(r, 10);
        assert_eq!(f.path.as_deref(), Some("/data/db"));
        assert_eq!(f.found_by.as_deref(), Some("open file WiredTiger.lock"));
        assert_eq!(f.unknown_reason, None);
        let s = f.storage.unwrap();
        assert_eq!(s.disk.as_deref(), Some("nvme0n1"));
        assert_eq!(s.device.as_deref(), Some("259:2"));
        assert_eq!(s.fs_type.as_deref(), Some("xfs"));
        assert_eq!(s.read_ahead_kb, Some(128));
        assert_eq!(s.rotational, Some(false));
    }

    #[test]
    fn command_line_when_no_data_file_is_open() {
        let root = tree();
        let r = root.path();
        process(
            r,
            11,
            &["/dev/null"],
            &["mongod", "--dbpath=/data/db2"],
            OURS,
        );
        let f = db_path_facts_in(r, 11);
        assert_eq!(f.path.as_deref(), Some("/data/db2"));
        assert_eq!(f.found_by.as_deref(), Some("--dbpath on the command line"));
        assert_eq!(f.storage.unwrap().disk.as_deref(), Some("nvme0n1"));
        // Relative to the working directory; the last --dbpath wins.
        process(
            r,
            12,
            &[],
            &["mongod", "--dbpath", "x", "--dbpath", "db"],
            OURS,
        );
        assert_eq!(db_path_facts_in(r, 12).path.as_deref(), Some("/srv/db"));
    }

    #[test]
    fn unknown_with_the_reason_never_guessed() {
        let root = tree();
        let r = root.path();
        process(
            r,
            13,
            &["/dev/null"],
            &["mongod", "--config", "/etc/mongod.conf"],
            OURS,
        );
        let f = db_path_facts_in(r, 13);
        assert_eq!((f.path, f.storage), (None, None));
        let why = f.unknown_reason.unwrap();
        assert!(
            why.contains("WiredTiger.lock") && why.contains("--dbpath"),
            "{why}"
        );
        // No such process.
        assert!(db_path_facts_in(r, 99).unknown_reason.is_some());
    }

    #[test]
    fn another_mount_namespace_is_not_read_as_ours() {
        let root = tree();
        let r = root.path();
        process(
            r,
            14,
            &["/data/db/WiredTiger.lock"],
            &["mongod"],
            "mnt:[4026532000]",
        );
        let f = db_path_facts_in(r, 14);
        assert_eq!(f.path.as_deref(), Some("/data/db"));
        assert_eq!(f.storage, None);
        assert!(f.unknown_reason.unwrap().contains("mount namespace"));
    }

    #[test]
    fn this_process_with_a_lock_file_open() {
        let dir = tempfile::tempdir().unwrap();
        let lock = dir.path().join("WiredTiger.lock");
        let _held = std::fs::File::create(&lock).unwrap();
        let f = db_path_facts(std::process::id());
        let own = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(f.path.as_deref(), Some(own.to_str().unwrap()));
        let s = f.storage.unwrap();
        let dev = std::os::unix::fs::MetadataExt::dev(&std::fs::metadata(&own).unwrap());
        let expected = format!("{}:{}", libc::major(dev), libc::minor(dev));
        assert_eq!(s.device.as_deref(), Some(expected.as_str()));
    }
}
