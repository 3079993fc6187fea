//! Scenarios of the `net.*` rules: NET_RX softirq work piled on one CPU with
//! RFS off; it fires with its evidence and has near misses.

use super::{fired, num, passed};
use crate::rules::testdata::{baseline, set_softirq};

#[test]
fn rfs_rule_fires_when_net_rx_piles_on_one_cpu() {
    let mut rec = baseline();
    // 8 CPUs: CPU 0 takes 40 000 NET_RX/s and 300 ms/s, the others little.
    let mut count = vec![500; 8];
    let mut time = vec![1_000_000; 8];
    count[0] = 40_000;
    time[0] = 300_000_000;
    set_softirq(&mut rec, &count, &time);
    rec.host.net.as_mut().unwrap().rps_sock_flow_entries = 0;
    rec.host.net.as_mut().unwrap().interfaces[0].rx_queues[0].rps_flow_cnt = 0;
    let f = fired(&rec, "net.softirq_imbalance_rfs");
    assert_eq!(num(&f, "busiest CPU"), 0.0);
    assert!(
        (num(&f, "share of NET_RX time on the busiest CPU") - 300.0 / 307.0 * 100.0).abs() < 0.01
    );
    assert!((num(&f, "that CPU's time in NET_RX") - 30.0).abs() < 0.01);
    // s390x ranks it higher.
    let mut z = rec.clone();
    z.host.arch = "s390x".into();
    assert!(fired(&z, "net.softirq_imbalance_rfs").score > f.score);
    // Near miss: RFS already on.
    let mut on = rec.clone();
    on.host.net = baseline().host.net;
    passed(&on, "net.softirq_imbalance_rfs");
    // Near miss: the same load spread evenly.
    let mut even = rec.clone();
    set_softirq(&mut even, &[5_500; 8], &[38_000_000; 8]);
    passed(&even, "net.softirq_imbalance_rfs");
    // Near miss, measured on a real 2-CPU host: NET_RX split 50.3 / 49.7 %
    // is balanced although the busiest CPU holds half the time.
    let mut two = rec.clone();
    two.host.cpu_count = 2;
    set_softirq(&mut two, &[24_000, 23_700], &[151_000_000, 149_200_000]);
    passed(&two, "net.softirq_imbalance_rfs");
    // The same 2-CPU host with three quarters on one CPU is imbalanced.
    set_softirq(&mut two, &[36_000, 12_000], &[225_000_000, 75_000_000]);
    let f = fired(&two, "net.softirq_imbalance_rfs");
    assert!((num(&f, "NET_RX imbalance (busiest / mean)") - 1.5).abs() < 0.01);
}
