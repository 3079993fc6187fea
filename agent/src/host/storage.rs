//! The storage behind a path (mongod's dbPath): the file system and its
//! mount options, and the queue settings of the disk underneath.
//!
//! Not recorded yet: the dbPath comes from mongod's configuration, which a
//! later change reads.

use std::path::{Path, PathBuf};

use procfs::{FromRead, process::MountInfos};

use super::{read_choice, read_parsed, under};
use crate::recording::StorageFacts;

/// The storage behind `path` on this host.
pub fn storage_facts(path: &Path) -> StorageFacts {
    storage_facts_in(Path::new("/"), path)
}

/// The storage behind `path` (absolute, as seen from `root`) in the tree
/// `root`, through mdiag's own mount table (ROOT/proc/self/mountinfo).
pub fn storage_facts_in(root: &Path, path: &Path) -> StorageFacts {
    let path = resolve(root, path);
    let mut facts = StorageFacts {
        path: path.to_string_lossy().into_owned(),
        ..Default::default()
    };
    let Ok(mounts) = MountInfos::from_file(root.join("proc/self/mountinfo")) else {
        return facts;
    };
    // Longest prefix; of equal ones the last (it hides those below it).
    let Some(mount) = mounts
        .0
        .iter()
        .filter(|m| path.starts_with(&m.mount_point))
        .max_by_key(|m| m.mount_point.components().count())
    else {
        return facts;
    };
    let options = |o: &std::collections::HashMap<String, Option<String>>| {
        let mut v: Vec<String> = o
            .iter()
            .map(|(k, v)| match v {
                Some(v) => format!("{k}={v}"),
                None => k.clone(),
            })
            .collect();
        v.sort();
        v
    };
    facts.mount_point = Some(mount.mount_point.to_string_lossy().into_owned());
    facts.fs_type = Some(mount.fs_type.clone());
    facts.source = mount.mount_source.clone();
    facts.mount_options = Some(options(&mount.mount_options));
    facts.super_options = Some(options(&mount.super_options));
    facts.device = Some(mount.majmin.clone());
    if let Some(disk) = disk_dir(root, &mount.majmin) {
        let queue = disk.join("queue");
        facts.disk = disk.file_name().map(|n| n.to_string_lossy().into_owned());
        facts.scheduler = read_choice(queue.join("scheduler"));
        facts.read_ahead_kb = read_parsed(queue.join("read_ahead_kb"));
        facts.rotational = read_parsed::<u8>(queue.join("rotational")).map(|r| r != 0);
    }
    facts
}

/// `path` with symbolic links resolved inside `root` when it exists there,
/// else as given.
fn resolve(root: &Path, path: &Path) -> PathBuf {
    let resolved = std::fs::canonicalize(root).ok().and_then(|r| {
        let p = std::fs::canonicalize(under(root, path)).ok()?;
        Some(Path::new("/").join(p.strip_prefix(r).ok()?))
    });
    resolved.unwrap_or_else(|| path.to_path_buf())
}

/// The sysfs directory of the disk behind device `majmin`: the device's
/// own, or its parent's for a partition.
fn disk_dir(root: &Path, majmin: &str) -> Option<PathBuf> {
    let dev = std::fs::canonicalize(root.join("sys/dev/block").join(majmin)).ok()?;
    if dev.join("partition").exists() {
        dev.parent().map(Path::to_path_buf)
    } else {
        Some(dev)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::write_tree;
    use crate::recording::SysfsChoice;

    #[test]
    fn storage_from_a_fake_tree() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        write_tree(
            r,
            &[
                (
                    "proc/self/mountinfo",
                    "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard\n\
                     60 27 259:2 / /data rw,noatime - xfs /dev/nvme0n1p2 rw,attr2,logbsize=256k,noquota\n\
                     61 60 0:50 / /data/tmp rw - tmpfs tmpfs rw,size=1024k\n\
                     62 27 259:3 / /database rw - ext4 /dev/nvme0n1p3 rw\n",
                ),
                ("sys/devices/pci0/nvme/nvme0n1/nvme0n1p2/partition", "2\n"),
                (
                    "sys/devices/pci0/nvme/nvme0n1/queue/scheduler",
                    "[none] mq-deadline kyber\n",
                ),
                ("sys/devices/pci0/nvme/nvme0n1/queue/read_ahead_kb", "128\n"),
                ("sys/devices/pci0/nvme/nvme0n1/queue/rotational", "0\n"),
                (
                    "sys/devices/virtual/block/vda/queue/scheduler",
                    "none [mq-deadline]\n",
                ),
                ("sys/devices/virtual/block/vda/queue/rotational", "1\n"),
                ("data/db/WiredTiger", ""),
            ],
        );
        std::fs::create_dir_all(r.join("sys/dev/block")).unwrap();
        std::os::unix::fs::symlink(
            "../../devices/pci0/nvme/nvme0n1/nvme0n1p2",
            r.join("sys/dev/block/259:2"),
        )
        .unwrap();
        std::os::unix::fs::symlink(
            "../../devices/virtual/block/vda",
            r.join("sys/dev/block/254:0"),
        )
        .unwrap();
        std::os::unix::fs::symlink("data/db", r.join("dblink")).unwrap();

        let f = storage_facts_in(r, Path::new("/dblink"));
        assert_eq!(
            f,
            StorageFacts {
                path: "/data/db".into(),
                mount_point: Some("/data".into()),
                fs_type: Some("xfs".into()),
                source: Some("/dev/nvme0n1p2".into()),
                mount_options: Some(vec!["noatime".into(), "rw".into()]),
                super_options: Some(vec![
                    "attr2".into(),
                    "logbsize=256k".into(),
                    "noquota".into(),
                    "rw".into()
                ]),
                device: Some("259:2".into()),
                disk: Some("nvme0n1".into()),
                scheduler: Some(SysfsChoice {
                    selected: Some("none".into()),
                    raw: "[none] mq-deadline kyber".into()
                }),
                read_ahead_kb: Some(128),
                rotational: Some(false),
            }
        );
        // "/database" is not under "/data": prefixes are whole components.
        let f = storage_facts_in(r, Path::new("/database/db"));
        assert_eq!(f.mount_point.as_deref(), Some("/database"));
        assert_eq!(
            (f.disk, f.scheduler),
            (None, None),
            "no /sys/dev/block/259:3"
        );
        let f = storage_facts_in(r, Path::new("/data/tmp/x"));
        assert_eq!(f.fs_type.as_deref(), Some("tmpfs"));
        let f = storage_facts_in(r, Path::new("/var/lib/mongo"));
        assert_eq!(f.mount_point.as_deref(), Some("/"));
        assert_eq!(f.disk.as_deref(), Some("vda"));
        assert_eq!(
            f.scheduler.unwrap().selected.as_deref(),
            Some("mq-deadline")
        );
        assert_eq!((f.read_ahead_kb, f.rotational), (None, Some(true)));
        let f = storage_facts_in(&r.join("missing"), Path::new("/data"));
        assert_eq!(
            f,
            StorageFacts {
                path: "/data".into(),
                ..Default::default()
            }
        );
    }

    #[test]
    fn storage_of_a_directory_of_this_host() {
        let dir = std::env::temp_dir();
        let f = storage_facts(&dir);
        let own = std::fs::canonicalize(&dir).unwrap();
        assert_eq!(Path::new(&f.path), own);
        let mount_point = f.mount_point.clone().unwrap();
        assert!(own.starts_with(&mount_point), "{f:?}");
        // The mount's device is the directory's st_dev.
        let dev = std::os::unix::fs::MetadataExt::dev(&std::fs::metadata(&own).unwrap());
        let expected = format!("{}:{}", libc::major(dev), libc::minor(dev));
        assert_eq!(f.device.as_deref(), Some(expected.as_str()), "{f:?}");
        assert!(!f.fs_type.unwrap().is_empty());
        assert!(
            f.mount_options
                .unwrap()
                .iter()
                .any(|o| o == "rw" || o == "ro")
        );
        if let Some(disk) = &f.disk {
            let sched =
                std::fs::read_to_string(format!("/sys/block/{disk}/queue/scheduler")).unwrap();
            assert_eq!(f.scheduler.unwrap().raw, sched.trim());
        }
    }
}
