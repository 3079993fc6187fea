//! Load + attach of every probe family, warm (object already in the page
//! cache, BTF parsed before), then detach. Needs root: without it the
//! benchmark says so and measures nothing.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark: a failure aborts the run"
)]
use criterion::{Criterion, criterion_group, criterion_main};
use mdiag::probes::{ProbeConfig, Probes};

fn attach(c: &mut Criterion) {
    if !nix::unistd::geteuid().is_root() {
        eprintln!(
            "attach benchmark skipped: loading BPF needs root (run `sudo -E cargo bench --bench attach`)"
        );
        return;
    }
    // Warm up once outside the measurement.
    drop(Probes::attach(ProbeConfig::default()).expect("attach"));
    let mut group = c.benchmark_group("probes");
    group.sample_size(10);
    group.bench_function("load+attach+detach all, host-wide", |b| {
        b.iter(|| drop(Probes::attach(ProbeConfig::default()).expect("attach")));
    });
    group.finish();
}

criterion_group!(benches, attach);
criterion_main!(benches);
