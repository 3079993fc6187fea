//! Scenarios of the `system.*` rules (mongod's view of its host: FTDC
//! systemMetrics or read live): a nearly full data file system, a slow data
//! disk and CPU steal, each firing with its evidence, with near misses: the
//! baseline (balanced) and an idle host.

use super::{fired, num, passed, txt};
use crate::recording::mongod::SystemSample;
use crate::rules::facts::system::example_samples;
use crate::rules::testdata::{baseline, set_system};

fn with(samples: Vec<SystemSample>) -> crate::recording::model::Recording {
    let mut rec = baseline();
    set_system(&mut rec, &samples);
    rec
}

#[test]
fn a_nearly_full_data_file_system_fires() {
    let mut samples = example_samples(10, 0, 0, 1);
    for s in &mut samples {
        let m = s.mounts.get_mut("/data").unwrap();
        (m.available, m.free) = (4 << 30, 5 << 30);
    }
    let f = fired(&with(samples), "system.disk_full");
    // df: 95 GiB used of 95 + 4.
    assert!((num(&f, "file system used (%)") - 9500.0 / 99.0).abs() < 1e-9);
    assert_eq!(num(&f, "available (GB)"), 4.0);
    assert_eq!(txt(&f, "mount"), "/data");
    assert!(f.fix.verify.contains("df -h /data"), "{}", f.fix.verify);
    passed(&baseline(), "system.disk_full");
    passed(&with(example_samples(10, 0, 0, 0)), "system.disk_full");
}

#[test]
fn a_slow_busy_data_disk_fires_a_fast_or_idle_one_does_not() {
    let f = fired(&with(example_samples(10, 0, 50, 30)), "system.disk_latency");
    assert_eq!(num(&f, "average I/O time (ms)"), 30.0);
    assert_eq!(num(&f, "I/Os per second"), 100.0);
    assert_eq!(txt(&f, "disk"), "nvme0n1");
    assert!(f.fix.verify.contains("iostat -x 5 nvme0n1"));
    // Balanced: the same I/O rate at 1 ms.
    passed(&baseline(), "system.disk_latency");
    // Idle: slow I/Os, but hardly any.
    let mut idle = example_samples(10, 0, 0, 30);
    for (i, s) in idle.iter_mut().enumerate() {
        let d = s.disks.get_mut("nvme0n1").unwrap();
        (d.reads, d.writes) = (i as i64, 0);
        (d.read_time_ms, d.write_time_ms) = (i as i64 * 30, 0);
    }
    passed(&with(idle), "system.disk_latency");
}

#[test]
fn cpu_steal_fires_on_a_crowded_host() {
    let f = fired(&with(example_samples(10, 300, 0, 1)), "system.cpu_steal");
    // 300 ms of each 2000 ms of CPU time.
    assert!((num(&f, "CPU time stolen (%)") - 15.0).abs() < 1e-9);
    assert!((num(&f, "CPUs' worth of time stolen") - 0.3).abs() < 1e-9);
    assert!(f.fix.commands.is_empty());
    // Near misses: a little steal under load, and an idle host.
    passed(&with(example_samples(10, 40, 0, 1)), "system.cpu_steal");
    passed(&baseline(), "system.cpu_steal");
}
