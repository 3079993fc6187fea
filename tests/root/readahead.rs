//! The data directory's disk and the `host.readahead` rule against the
//! host's own block-device settings: a WiredTiger process (the checkpoint
//! workload) holds WiredTiger.lock open in its home directory; mdiag must
//! name that directory, its device and the disk's read_ahead_kb exactly as
//! findmnt, lsblk, /sys/block and `blockdev --getra` show them, and the rule
//! must fire iff the readahead is above 16 KiB. The readahead is set to a
//! value on each side of the threshold for the test and restored after.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use mdiag::recording::read_file;
use mdiag_tests::{require_root, run_mdiag};

/// The device (MAJ:MIN) and whole disk of `path`, by util-linux.
fn disk_of(path: &Path) -> (String, String) {
    let out = Command::new("findmnt")
        .args(["-no", "MAJ:MIN", "-T"])
        .arg(path)
        .output()
        .expect("findmnt");
    let majmin = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    let out = Command::new("lsblk")
        .args(["-lJ", "-o", "KNAME,PKNAME,TYPE,MAJ:MIN"])
        .output()
        .expect("lsblk");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("lsblk json");
    let dev = v["blockdevices"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["maj:min"] == majmin.as_str())
        .unwrap_or_else(|| panic!("lsblk lists no {majmin}: is {path:?} on a block device?"));
    let disk = if dev["type"] == "part" {
        dev["pkname"].as_str().unwrap().to_owned()
    } else {
        dev["kname"].as_str().unwrap().to_owned()
    };
    (majmin, disk)
}

/// `blockdev --getra` (512-byte sectors); `None` where the device cannot be
/// opened (some VMs refuse even root).
fn getra(disk: &str) -> Option<u64> {
    let out = Command::new("blockdev")
        .arg("--getra")
        .arg(format!("/dev/{disk}"))
        .output()
        .expect("blockdev");
    if !out.status.success() {
        eprintln!(
            "blockdev --getra /dev/{disk}: {} (cross-check skipped)",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        return None;
    }
    String::from_utf8(out.stdout).unwrap().trim().parse().ok()
}

/// Sets /sys/block/DISK/queue/read_ahead_kb and puts the old value back when dropped.
struct Readahead {
    file: PathBuf,
    old: String,
}

impl Readahead {
    fn set(disk: &str, kb: u64) -> Readahead {
        let file = PathBuf::from(format!("/sys/block/{disk}/queue/read_ahead_kb"));
        let old = std::fs::read_to_string(&file).unwrap();
        std::fs::write(&file, kb.to_string()).unwrap();
        Readahead { file, old }
    }
}

impl Drop for Readahead {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.file, self.old.trim());
    }
}

/// Where `host.readahead` ended in `explain`'s JSON for `rec`: "checklist", "passed", ...
fn readahead_list(rec: &Path) -> (String, serde_json::Value) {
    let out = run_mdiag(&["explain", rec.to_str().unwrap(), "--format", "json"]);
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    crate::mongod_rules::where_is(&v, "host.readahead")
}

#[test]
fn readahead_of_the_wiredtiger_home_disk_matches_sysfs_and_the_rule_follows_it() {
    let _serial = mdiag_tests::serial();
    require_root();
    let exe = crate::wiredtiger::workload();
    let home = tempfile::tempdir().unwrap();
    let home_path = std::fs::canonicalize(home.path()).unwrap();
    let (majmin, disk) = disk_of(&home_path);
    // The WiredTiger workload stands in for mongod, started under mongod's
    // name (a symbolic link: its comm is `mongod`, /proc/PID/exe the real
    // file), since host.readahead is about mongod's data directory
    // (applies_to.target) and is not applicable to another process.
    let names = tempfile::tempdir().unwrap();
    let as_mongod = names.path().join("mongod");
    std::os::unix::fs::symlink(&exe, &as_mongod).unwrap();
    // WiredTiger is open (WiredTiger.lock held) once it says so; it then
    // waits on stdin, holding it, while mdiag records.
    let (mut child, _stdout_held_open) = mdiag_tests::spawn_ready(
        Command::new(&as_mongod)
            .arg("--home")
            .arg(&home_path)
            .args(["--checkpoints", "1", "--writers", "0"]),
    );
    let pid = child.id().to_string();

    // One value on each side of 16 KiB.
    for kb in [128u64, 16] {
        let _set = Readahead::set(&disk, kb);
        let truth: u64 = std::fs::read_to_string(format!("/sys/block/{disk}/queue/read_ahead_kb"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(truth, kb);
        if let Some(sectors) = getra(&disk) {
            assert_eq!(sectors, 2 * truth, "blockdev counts 512-byte sectors");
        }
        let out = tempfile::tempdir().unwrap();
        let file = out.path().join("r.mdiag");
        let rec_out = run_mdiag(&[
            "record",
            "--duration",
            "1s",
            "--pid",
            &pid,
            "-o",
            file.to_str().unwrap(),
        ]);
        assert!(rec_out.status.success(), "{rec_out:?}");
        let rec = read_file(&file).unwrap();
        let d = rec.host.db_path.as_ref().expect("db_path recorded");
        assert_eq!(d.path.as_deref(), home_path.to_str(), "{d:?}");
        assert_eq!(d.found_by.as_deref(), Some("open file WiredTiger.lock"));
        let s = d.storage.as_ref().expect("storage read");
        assert_eq!(s.device.as_deref(), Some(majmin.as_str()), "{s:?}");
        assert_eq!(s.disk.as_deref(), Some(disk.as_str()), "{s:?}");
        assert_eq!(s.read_ahead_kb, Some(truth), "{s:?}");

        let (list, entry) = readahead_list(&file);
        let expected = if truth > 16 { "checklist" } else { "passed" };
        assert_eq!(list, expected, "read_ahead_kb {truth}: {entry}");
        if truth > 16 {
            let ev = &entry["evidence"];
            assert_eq!(ev["readahead (KiB)"], truth, "{entry}");
            assert_eq!(ev["disk"], disk.as_str(), "{entry}");
            assert_eq!(ev["data directory (dbPath)"], home_path.to_str().unwrap());
            // The fix names this host's disk and reverts to the value it had.
            let cmds = entry["fix"]["commands"].to_string();
            assert!(
                cmds.contains(&format!("blockdev --setra 32 /dev/{disk}")),
                "{cmds}"
            );
            let revert = entry["fix"]["revert"].to_string();
            assert!(
                revert.contains(&format!("blockdev --setra {} /dev/{disk}", 2 * truth)),
                "{revert}"
            );
        }
    }
    drop(child.stdin.take());
    let _ = child.wait();
}

#[test]
fn spawned_wiredtiger_target_gets_its_data_directory_once_it_opened_it() {
    let _serial = mdiag_tests::serial();
    require_root();
    let exe = crate::wiredtiger::workload();
    let home = tempfile::tempdir().unwrap();
    let home_path = std::fs::canonicalize(home.path()).unwrap();
    let (majmin, disk) = disk_of(&home_path);
    let truth: u64 = std::fs::read_to_string(format!("/sys/block/{disk}/queue/read_ahead_kb"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let out = tempfile::tempdir().unwrap();
    let file = out.path().join("r.mdiag");
    // Spawned under mongod's name, as in the test above.
    let as_mongod = out.path().join("mongod");
    std::os::unix::fs::symlink(&exe, &as_mongod).unwrap();
    // 40 checkpoints 100 ms apart: still running (WiredTiger.lock held) when
    // the 2 s recording ends; at its start WiredTiger was not open yet.
    let rec_out = run_mdiag(&[
        "record",
        "--duration",
        "2s",
        "-o",
        file.to_str().unwrap(),
        "--",
        as_mongod.to_str().unwrap(),
        "--home",
        home_path.to_str().unwrap(),
        "--checkpoints",
        "40",
        "--interval-ms",
        "100",
        "--writers",
        "0",
        "--no-hold",
    ]);
    assert!(rec_out.status.success(), "{rec_out:?}");
    let rec = read_file(&file).unwrap();
    assert_eq!(
        rec.stop_reason, "duration",
        "the workload ran through the recording"
    );
    let d = rec.host.db_path.as_ref().expect("db_path recorded");
    assert_eq!(d.path.as_deref(), home_path.to_str(), "{d:?}");
    let s = d.storage.as_ref().expect("storage read");
    assert_eq!(s.device.as_deref(), Some(majmin.as_str()));
    assert_eq!(s.read_ahead_kb, Some(truth));
    let (list, _) = readahead_list(&file);
    assert_eq!(list, if truth > 16 { "checklist" } else { "passed" });
}
