//! Scenarios of the `storage.*` rules: XFS, noatime, the I/O scheduler and
//! XFS inode-lock waits read from the data directory's mount and D-state
//! stacks; each fires with its evidence and has near misses.

use super::{fired, fix_has, num, passed, report, txt};
use crate::recording::model::Recording;
use crate::rules::testdata::{baseline, set_contention};

#[test]
fn xfs_ilock_rule_reads_the_d_state_signature() {
    let mut rec = baseline();
    // 3 s of D-state in xfs_ilock over 10 s: 300 ms per second.
    set_contention(&mut rec, 20, 20, "xfs_ilock", 300);
    let f = fired(&rec, "storage.xfs_ilock");
    assert_eq!(txt(&f, "most common D-state frame"), "xfs_ilock");
    assert!((num(&f, "time asleep there (ms per s)") - 300.0).abs() < 1.0);
    // The advice spreads the data over more files; directoryPerDB, which
    // moves the same files into subdirectories, is not advised, nor ext4.
    assert!(f.fix.files.is_empty(), "{:?}", f.fix.files);
    assert!(
        f.fix.summary.contains("more collections"),
        "{}",
        f.fix.summary
    );
    assert!(f.summary.contains("reads of a file"), "{}", f.summary);
    assert!(f.fix.risk.contains("not advised"), "{}", f.fix.risk);
    // Near miss: the same time in ordinary block I/O.
    set_contention(&mut rec, 20, 20, "submit_bio_wait", 300);
    passed(&rec, "storage.xfs_ilock");
    // Near miss: xfs_ilock, but rarely.
    set_contention(&mut rec, 20, 20, "xfs_ilock", 5);
    passed(&rec, "storage.xfs_ilock");
}

#[test]
fn xfs_and_noatime_rules_read_the_data_directorys_mount() {
    // ext4 with relatime under the data directory.
    let mut rec = baseline();
    {
        let s = rec.host.db_path.as_mut().unwrap().storage.as_mut().unwrap();
        s.fs_type = Some("ext4".into());
        s.mount_options = Some(vec!["relatime".into(), "rw".into()]);
    }
    let x = fired(&rec, "storage.xfs");
    assert_eq!(txt(&x, "file system"), "ext4");
    assert!(x.summary.contains("strongly recommend"), "{}", x.summary);
    let n = fired(&rec, "storage.noatime");
    assert!(
        fix_has(&n, "mount -o remount,noatime /data"),
        "{:?}",
        n.fix.commands
    );
    // The revert restores what the mount had.
    assert_eq!(n.fix.revert[0], "mount -o remount,relatime /data");
    // Near misses: the baseline's XFS with noatime; a tmpfs data directory
    // is not judged (its backing store is unknown).
    passed(&baseline(), "storage.xfs");
    passed(&baseline(), "storage.noatime");
    let mut tmp = baseline();
    {
        let s = tmp.host.db_path.as_mut().unwrap().storage.as_mut().unwrap();
        s.fs_type = Some("tmpfs".into());
        s.mount_options = Some(vec!["rw".into()]);
    }
    passed(&tmp, "storage.xfs");
    passed(&tmp, "storage.noatime");
    // Without a data directory: not assessed, never guessed.
    let mut none = baseline();
    none.host.db_path = None;
    let r = report(&none);
    assert!(r.not_assessed.iter().any(|n| n.rule_id == "storage.xfs"));
}

#[test]
fn io_scheduler_rule_wants_none_on_solid_state_data_disks() {
    let mut rec = baseline();
    let set = |rec: &mut Recording, sched: &str, rotational: bool| {
        let s = rec.host.db_path.as_mut().unwrap().storage.as_mut().unwrap();
        s.scheduler = Some(crate::recording::SysfsChoice {
            selected: Some(sched.into()),
            raw: format!("mq-deadline kyber [{sched}] none"),
        });
        s.rotational = Some(rotational);
    };
    set(&mut rec, "bfq", false);
    let f = fired(&rec, "storage.io_scheduler");
    let disk = rec
        .host
        .db_path
        .as_ref()
        .unwrap()
        .storage
        .as_ref()
        .unwrap()
        .disk
        .clone()
        .unwrap();
    assert!(fix_has(
        &f,
        &format!("echo none > /sys/block/{disk}/queue/scheduler")
    ));
    assert!(
        f.fix.files[0]
            .content
            .contains(&format!("KERNEL==\"{disk}\""))
    );
    // The revert puts back the recorded scheduler.
    assert_eq!(
        f.fix.revert[1],
        format!("echo bfq > /sys/block/{disk}/queue/scheduler")
    );
    // Near misses: a spinning disk with bfq; an SSD with mq-deadline or none.
    set(&mut rec, "bfq", true);
    passed(&rec, "storage.io_scheduler");
    set(&mut rec, "mq-deadline", false);
    passed(&rec, "storage.io_scheduler");
    passed(&baseline(), "storage.io_scheduler");
    // Near miss: kyber, the 8.0 checklist's choice for several workloads
    // in one VM.
    set(&mut rec, "kyber", false);
    passed(&rec, "storage.io_scheduler");
}
