//! The softirq family loaded in-process, against /proc/softirqs read by the
//! test itself, under loopback TCP traffic.

use std::process::Command;

use mdiag::probes::{ProbeConfig, Probes};
use mdiag_tests::{proc_softirqs, rel_diff, require_root};

const LOOPBACK: &str = env!("CARGO_BIN_EXE_mdiag-loopback");

#[test]
fn net_softirq_counts_match_proc_softirqs_per_cpu() {
    let _serial = mdiag_tests::serial();
    require_root();
    let probes = Probes::attach(ProbeConfig { target_tgid: None }).expect("attach");
    let family = probes
        .status()
        .iter()
        .find(|s| s.family == "softirq")
        .expect("softirq status");
    assert!(family.attached(), "{family:?}");
    let reader = probes.softirq.as_ref().expect("softirq reader");
    let before = reader.totals_since_attach().unwrap();
    let proc_before = proc_softirqs();
    let out = Command::new(LOOPBACK)
        .args(["--ms", "1500"])
        .output()
        .expect("loopback workload");
    assert!(out.status.success());
    let proc_after = proc_softirqs();
    let after = reader.totals_since_attach().unwrap();

    let counts = |s: &mdiag::recording::SoftirqSlice, name: &str| {
        s.vectors
            .iter()
            .find(|v| v.name == name)
            .map(|v| v.count_per_cpu.clone())
            .unwrap_or_default()
    };
    for vector in ["NET_RX", "NET_TX"] {
        let (b, a) = (counts(&before, vector), counts(&after, vector));
        let (pb, pa) = (&proc_before[vector], &proc_after[vector]);
        for cpu in 0..pa.len() {
            let truth = pa[cpu] - pb[cpu];
            let recorded = a.get(cpu).copied().unwrap_or(0) - b.get(cpu).copied().unwrap_or(0);
            if truth >= 500 {
                assert!(
                    rel_diff(recorded, truth) <= 0.02,
                    "{vector} cpu{cpu}: probe {recorded} vs /proc/softirqs {truth}"
                );
            } else {
                assert!(
                    recorded.abs_diff(truth) <= 10,
                    "{vector} cpu{cpu}: probe {recorded} vs /proc/softirqs {truth}"
                );
            }
        }
    }
    let rx_truth: u64 = proc_after["NET_RX"]
        .iter()
        .zip(&proc_before["NET_RX"])
        .map(|(a, b)| a - b)
        .sum();
    assert!(
        rx_truth > 5_000,
        "loopback traffic produced too few NET_RX softirqs: {rx_truth}"
    );
    // Time is measured too: NET_RX handlers took some CPU time.
    let rx_time: u64 = after
        .vectors
        .iter()
        .filter(|v| v.name == "NET_RX")
        .flat_map(|v| &v.time_ns_per_cpu)
        .sum();
    assert!(rx_time > 1_000_000, "NET_RX time {rx_time} ns");
    assert_eq!(after.drops.irq_map_full + after.drops.bad_vector, 0);
}
