//! The `filesystem` fact group: the file system holding the data directory
//! (mongod's dbPath) and its mount options, for the rules MongoDB's
//! production notes make about them (XFS for WiredTiger, `noatime`).
//!
//! Unlike the `storage` group it needs no disk: the mount is enough. So it
//! is also known from FTDC alone (hostInfo's `mountInfo`, mongod 5.0+) and for
//! a data directory on a device without queue settings. Sources, first wins:
//! mongod's own dbPath as polled on this host, the directory mdiag found from
//! the target (open lock file, `--dbpath`), then FTDC's hostInfo. Absent with
//! the reason when none names the mount.

use super::{FactGroup, FactValue, text};
use crate::recording::StorageFacts;
use crate::recording::model::Recording;

/// Why the group is absent when no source names the data directory's mount.
pub const FILESYSTEM_NOT_RECORDED: &str = "the data directory's file system was not recorded \
     (host-wide recording without mongod's dbPath, or FTDC without hostInfo mountInfo: mongod before 5.0)";

/// The data directory's mount and how it was found.
fn source(rec: &Recording) -> Option<(StorageFacts, String)> {
    let info = rec.mongod.as_ref().and_then(|m| m.info.as_ref());
    if let Some(s) = info
        .and_then(|i| i.db_path_storage.clone())
        .filter(|s| s.fs_type.is_some())
    {
        return Some((s, "mongod's getCmdLineOpts (storage.dbPath)".into()));
    }
    let from_host = rec.host.db_path.as_ref().and_then(|d| {
        let s = d.storage.clone().filter(|s| s.fs_type.is_some())?;
        Some((s, d.found_by.clone().unwrap_or_else(|| "unknown".into())))
    });
    if from_host.is_some() {
        return from_host;
    }
    let s = info.and_then(|i| i.db_path_mount.clone())?;
    s.fs_type.is_some().then(|| {
        (
            s,
            "mongod's hostInfo mountInfo (the server's own mount table)".into(),
        )
    })
}

/// Derives the group, or why it is absent.
pub fn filesystem_facts(rec: &Recording) -> Result<FactGroup, String> {
    let (s, found_by) = source(rec).ok_or_else(|| FILESYSTEM_NOT_RECORDED.to_string())?;
    let mut g = super::storage::mount_group(&s, found_by);
    let mut put = |k: &str, v: Option<FactValue>| {
        if let Some(v) = v {
            g.insert(k.into(), v);
        }
    };
    let has = |o: &str| {
        s.mount_options
            .as_ref()
            .map(|opts| FactValue::Bool(opts.iter().any(|x| x == o)))
    };
    put("noatime", has("noatime"));
    put("relatime", has("relatime"));
    // How access times are kept now (for a revert): the kernel's default is
    // relatime when the options name none.
    let atime = s.mount_options.as_ref().map(|o| {
        ["noatime", "strictatime", "relatime"]
            .into_iter()
            .find(|m| o.iter().any(|x| x == m))
            .unwrap_or("relatime")
    });
    put("atime_mode", atime.map(text));
    put(
        "mount_options",
        s.mount_options.as_ref().map(|o| text(o.join(","))),
    );
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_the_targets_data_directory_and_absent_without_one() {
        let rec = super::super::example_recording();
        let g = filesystem_facts(&rec).unwrap();
        assert_eq!(g["fs_type"], text("xfs"));
        assert_eq!(g["noatime"], FactValue::Bool(true));
        assert_eq!(g["relatime"], FactValue::Bool(false));
        assert_eq!(g["mount_point"], text("/data"));
        let mut none = rec.clone();
        none.host.db_path = None;
        none.mongod = None;
        assert_eq!(
            filesystem_facts(&none).unwrap_err(),
            FILESYSTEM_NOT_RECORDED
        );
    }

    #[test]
    fn from_ftdc_hostinfo_when_nothing_else_names_it() {
        let mut rec = super::super::example_recording();
        rec.host.db_path = None;
        let mount = StorageFacts {
            path: "/data/db".into(),
            mount_point: Some("/".into()),
            fs_type: Some("ext4".into()),
            source: Some("/dev/sda2".into()),
            mount_options: Some(vec!["relatime".into(), "rw".into()]),
            ..StorageFacts::default()
        };
        rec.mongod = Some(crate::recording::mongod::MongodRecording {
            source: "ftdc".into(),
            info: Some(crate::recording::mongod::MongodInfo {
                db_path_mount: Some(mount),
                ..Default::default()
            }),
            ..Default::default()
        });
        let g = filesystem_facts(&rec).unwrap();
        assert_eq!(g["fs_type"], text("ext4"));
        assert_eq!(g["noatime"], FactValue::Bool(false));
        assert_eq!(g["relatime"], FactValue::Bool(true));
        assert!(matches!(&g["found_by"], FactValue::Text(t) if t.contains("mountInfo")));
    }
}
