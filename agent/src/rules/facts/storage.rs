//! The `storage` fact group: the data directory (mongod's dbPath) and the
//! file system and disk under it, for the rules about the disk's settings
//! (readahead).
//!
//! Two sources, the first that has the disk wins: mongod's own dbPath
//! (getCmdLineOpts, read when `record --uri` polled a local mongod), then the
//! directory mdiag found itself from the target's open WiredTiger/mongod lock
//! file or its `--dbpath` (host facts). When neither names a directory on a
//! block device, the group is absent with the reason, so a rule that needs
//! it is *not assessed*, never evaluated on a guessed disk.

use super::{FactGroup, FactValue, int, text};
use crate::recording::StorageFacts;
use crate::recording::model::Recording;

/// Why the group is absent when nothing was recorded about the data directory.
pub const STORAGE_NOT_RECORDED: &str = "the data directory (dbPath) was not recorded \
     (host-wide recording, or a recording from an older mdiag)";

/// The data directory's storage with how it was found, or why it is unknown.
fn source(rec: &Recording) -> Result<(StorageFacts, String), String> {
    let from_mongod = rec
        .mongod
        .as_ref()
        .and_then(|m| m.info.as_ref())
        .and_then(|i| i.db_path_storage.clone())
        .filter(|s| s.disk.is_some());
    if let Some(s) = from_mongod {
        return Ok((s, "mongod's getCmdLineOpts (storage.dbPath)".into()));
    }
    let d = rec.host.db_path.as_ref().ok_or(STORAGE_NOT_RECORDED)?;
    let (Some(path), Some(storage)) = (&d.path, &d.storage) else {
        return Err(d.unknown_reason.clone().unwrap_or_else(|| {
            "the data directory (dbPath) or its storage could not be read".into()
        }));
    };
    if storage.disk.is_none() && d.found_by.as_deref().is_some_and(|f| f.starts_with("FTDC")) {
        return Err(format!(
            "FTDC names the data directory {path} and its file system, not the disk's queue \
             settings (readahead, scheduler): record on the host to assess them"
        ));
    }
    if storage.disk.is_none() {
        return Err(format!(
            "the data directory {path} is on {} ({}), which has no block device of its own \
             whose queue settings could be read",
            storage
                .fs_type
                .as_deref()
                .unwrap_or("an unknown file system"),
            storage.source.as_deref().unwrap_or("unknown source"),
        ));
    }
    let found_by = d.found_by.clone().unwrap_or_else(|| "unknown".into());
    Ok((storage.clone(), found_by))
}

/// The facts that say where the data directory lives, shared by the
/// `storage` and `filesystem` groups: its path, how it was found, and the
/// mount holding it (point, type, source) when known.
pub(super) fn mount_group(s: &StorageFacts, found_by: String) -> FactGroup {
    let mut g = FactGroup::new();
    g.insert("db_path".into(), text(s.path.clone()));
    g.insert("found_by".into(), text(found_by));
    for (k, v) in [
        ("mount_point", &s.mount_point),
        ("fs_type", &s.fs_type),
        ("source", &s.source),
    ] {
        if let Some(v) = v {
            g.insert(k.into(), text(v.clone()));
        }
    }
    g
}

/// Derives the `storage` group; `Err` with the reason when the data
/// directory or the disk under it is unknown.
pub fn storage_facts(rec: &Recording) -> Result<FactGroup, String> {
    let (s, found_by) = source(rec)?;
    let mut g = mount_group(&s, found_by);
    let mut put = |k: &str, v: Option<FactValue>| {
        if let Some(v) = v {
            g.insert(k.into(), v);
        }
    };
    put("device", s.device.clone().map(text));
    put("disk", s.disk.clone().map(text));
    put("read_ahead_kb", s.read_ahead_kb.map(int));
    // blockdev --getra counts 512-byte sectors.
    put(
        "read_ahead_sectors",
        s.read_ahead_kb.map(|kb| int(kb.saturating_mul(2))),
    );
    put("rotational", s.rotational.map(FactValue::Bool));
    put(
        "scheduler",
        s.scheduler
            .as_ref()
            .and_then(|c| c.selected.clone())
            .map(text),
    );
    put(
        "noatime",
        s.mount_options
            .as_ref()
            .map(|o| FactValue::Bool(o.iter().any(|o| o == "noatime"))),
    );
    Ok(g)
}

/// Storage facts of an XFS partition of an NVMe disk, for examples and tests.
#[cfg(test)]
pub(crate) fn example_storage(path: &str, disk: &str, read_ahead_kb: u64) -> StorageFacts {
    StorageFacts {
        path: path.into(),
        mount_point: Some("/data".into()),
        fs_type: Some("xfs".into()),
        source: Some(format!("/dev/{disk}p1")),
        mount_options: Some(vec!["noatime".into(), "rw".into()]),
        super_options: Some(vec!["rw".into()]),
        device: Some("259:1".into()),
        disk: Some(disk.into()),
        scheduler: Some(crate::recording::SysfsChoice {
            selected: Some("none".into()),
            raw: "[none] mq-deadline".into(),
        }),
        read_ahead_kb: Some(read_ahead_kb),
        rotational: Some(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::DbPathFacts;

    fn with_db_path(d: Option<DbPathFacts>) -> Recording {
        let mut rec = super::super::example_recording();
        rec.host.db_path = d;
        rec
    }

    #[test]
    fn found_directory_gives_the_disk_and_its_readahead() {
        let rec = with_db_path(Some(DbPathFacts {
            path: Some("/data/db".into()),
            found_by: Some("open file WiredTiger.lock".into()),
            unknown_reason: None,
            storage: Some(example_storage("/data/db", "nvme0n1", 128)),
        }));
        let g = storage_facts(&rec).unwrap();
        assert_eq!(g["db_path"], FactValue::Text("/data/db".into()));
        assert_eq!(
            g["found_by"],
            FactValue::Text("open file WiredTiger.lock".into())
        );
        assert_eq!(g["disk"], FactValue::Text("nvme0n1".into()));
        assert_eq!(g["read_ahead_kb"], FactValue::Int(128));
        assert_eq!(g["read_ahead_sectors"], FactValue::Int(256));
        assert_eq!(g["rotational"], FactValue::Bool(false));
        assert_eq!(g["noatime"], FactValue::Bool(true));
        assert_eq!(g["scheduler"], FactValue::Text("none".into()));
    }

    #[test]
    fn mongods_own_db_path_wins() {
        let mut rec = with_db_path(Some(DbPathFacts {
            path: Some("/data/db".into()),
            found_by: Some("open file WiredTiger.lock".into()),
            unknown_reason: None,
            storage: Some(example_storage("/data/db", "nvme0n1", 128)),
        }));
        super::super::mongod::fill_example(&mut rec);
        if let Some(i) = rec.mongod.as_mut().and_then(|m| m.info.as_mut()) {
            i.db_path_storage = Some(example_storage("/var/lib/mongo", "sdb", 16));
        }
        let g = storage_facts(&rec).unwrap();
        assert_eq!(g["db_path"], FactValue::Text("/var/lib/mongo".into()));
        assert_eq!(g["disk"], FactValue::Text("sdb".into()));
        assert_eq!(g["read_ahead_kb"], FactValue::Int(16));
        assert!(matches!(&g["found_by"], FactValue::Text(t) if t.contains("getCmdLineOpts")));
    }

    #[test]
    fn absent_with_the_reason() {
        assert_eq!(
            storage_facts(&with_db_path(None)).unwrap_err(),
            STORAGE_NOT_RECORDED
        );
        let why = storage_facts(&with_db_path(Some(DbPathFacts {
            unknown_reason: Some("the target (pid 7) has none of ... open".into()),
            ..DbPathFacts::default()
        })))
        .unwrap_err();
        assert!(why.contains("pid 7"), "{why}");
        // tmpfs: no disk, so no readahead to read.
        let why = storage_facts(&with_db_path(Some(DbPathFacts {
            path: Some("/dev/shm/db".into()),
            found_by: Some("open file WiredTiger.lock".into()),
            unknown_reason: None,
            storage: Some(StorageFacts {
                path: "/dev/shm/db".into(),
                fs_type: Some("tmpfs".into()),
                source: Some("tmpfs".into()),
                ..StorageFacts::default()
            }),
        })))
        .unwrap_err();
        assert!(
            why.contains("tmpfs") && why.contains("no block device"),
            "{why}"
        );
    }
}
