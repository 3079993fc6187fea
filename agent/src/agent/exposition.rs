//! The text a scrape of `/metrics` gets: built once per second from the
//! agent's [`View`](super::metrics::View) with the official Prometheus
//! client (`prometheus-client`, OpenMetrics text), so a scrape only copies a
//! string and never waits for a probe or for mongod.
//!
//! A fresh registry per build: series of a target that went away disappear
//! with it, and memory does not grow with the targets ever seen. Every row
//! counts against the series limit; rows past it are left out and counted
//! (`mdiag_series_dropped`), so a host with many targets cannot flood
//! Prometheus.

use std::sync::atomic::AtomicU64;

use prometheus_client::{
    encoding::{
        EncodeMetric, MetricEncoder,
        text::{encode_eof, encode_registry},
    },
    metrics::{MetricType, TypedMetric, counter::Counter, family::Family, gauge::Gauge},
    registry::{Registry, Unit},
};

/// The unit of shares (Prometheus' `_ratio` suffix; the client's own
/// `Unit::Ratios` would write `_ratios`).
pub fn ratio() -> Unit {
    Unit::Other("ratio".into())
}

/// A label set: (name, value) pairs.
pub type Labels = Vec<(String, String)>;

/// `[("k", "v"), ...]` as owned labels.
pub fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// A classic histogram given by its cumulative buckets.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Buckets {
    pub sum: f64,
    pub count: u64,
    /// (upper bound, count in this bucket alone), ascending, ending with
    /// +Inf; the encoder writes them cumulative.
    pub buckets: Vec<(f64, u64)>,
}

impl Buckets {
    /// From log2 buckets of nanoseconds (`counts[i]`: values in
    /// [2^i, 2^(i+1)) ns, bucket 0 also holding 0) to seconds, with the sum
    /// estimated at each bucket's middle when `sum_ns` is unknown.
    pub fn from_log2_ns(counts: &[u64], sum_ns: Option<f64>) -> Self {
        let mut cumulative = 0u64;
        let mut est = 0f64;
        let mut buckets = Vec::with_capacity(counts.len() + 1);
        for (i, &c) in counts.iter().enumerate() {
            cumulative = cumulative.saturating_add(c);
            let upper_ns = 2f64.powi(i as i32 + 1);
            est += c as f64 * upper_ns * 0.75;
            buckets.push((upper_ns / 1e9, c));
        }
        buckets.push((f64::INFINITY, 0));
        Self {
            sum: sum_ns.unwrap_or(est) / 1e9,
            count: cumulative,
            buckets,
        }
    }
}

/// Rows of one histogram family, encoded as given (the client's own
/// histogram only takes observations; ours come aggregated from the kernel).
#[derive(Debug, Default)]
struct HistogramRows(Vec<(Labels, Buckets)>);

impl TypedMetric for HistogramRows {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for HistogramRows {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (labels, b) in &self.0 {
            encoder
                .encode_family(labels)?
                .encode_histogram::<Labels>(b.sum, b.count, &b.buckets, None)?;
        }
        Ok(())
    }
    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

/// Rows of one info family (the client's `Info` holds one label set).
#[derive(Debug, Default)]
struct InfoRows(Vec<Labels>);

impl TypedMetric for InfoRows {
    const TYPE: MetricType = MetricType::Info;
}

impl EncodeMetric for InfoRows {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for labels in &self.0 {
            encoder.encode_info(labels)?;
        }
        Ok(())
    }
    fn metric_type(&self) -> MetricType {
        MetricType::Info
    }
}

/// Which registry a family goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Namespace {
    /// `mdiag_<name>`: the agent's own families.
    Mdiag,
    /// `<name>` as given: the names every Prometheus client exports
    /// (`process_cpu_seconds_total`, ...), so stock dashboards and alerts
    /// work on the agent too.
    Standard,
}

/// One exposition being built.
pub struct Exposition {
    registry: Registry,
    standard: Registry,
    max_series: usize,
    series: usize,
    dropped: usize,
}

impl Exposition {
    pub fn new(max_series: usize) -> Self {
        Self {
            registry: Registry::with_prefix("mdiag"),
            standard: Registry::default(),
            max_series,
            series: 0,
            dropped: 0,
        }
    }

    /// The rows that fit in the series limit.
    fn admit<T>(&mut self, rows: Vec<T>) -> Vec<T> {
        let room = self.max_series.saturating_sub(self.series);
        let keep = rows.len().min(room);
        self.dropped += rows.len() - keep;
        self.series += keep;
        rows.into_iter().take(keep).collect()
    }

    pub fn gauge(&mut self, name: &str, help: &str, unit: Option<Unit>, rows: Vec<(Labels, f64)>) {
        self.gauge_in(Namespace::Mdiag, name, help, unit, rows);
    }

    /// A gauge of `namespace`.
    pub fn gauge_in(
        &mut self,
        namespace: Namespace,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        rows: Vec<(Labels, f64)>,
    ) {
        let rows = self.admit(rows);
        if rows.is_empty() {
            return;
        }
        let family = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        for (l, v) in rows {
            family.get_or_create(&l).set(v);
        }
        self.register_in(namespace, name, help, unit, family);
    }

    /// A counter (`_total` is added to `name`); `rows` hold totals.
    pub fn counter(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        rows: Vec<(Labels, f64)>,
    ) {
        self.counter_in(Namespace::Mdiag, name, help, unit, rows);
    }

    /// A counter of `namespace`.
    pub fn counter_in(
        &mut self,
        namespace: Namespace,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        rows: Vec<(Labels, f64)>,
    ) {
        let rows = self.admit(rows);
        if rows.is_empty() {
            return;
        }
        let family = Family::<Labels, Counter<f64, AtomicU64>>::default();
        for (l, v) in rows {
            family.get_or_create(&l).inc_by(v.max(0.0));
        }
        self.register_in(namespace, name, help, unit, family);
    }

    pub fn histogram(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        rows: Vec<(Labels, Buckets)>,
    ) {
        // Each bucket is a series of its own, and so are _sum and _count.
        let mut kept = Vec::new();
        for (l, b) in rows {
            let series = b.buckets.len() + 2;
            if self.series + series <= self.max_series {
                self.series += series;
                kept.push((l, b));
            } else {
                self.dropped += series;
            }
        }
        let rows = kept;
        if rows.is_empty() {
            return;
        }
        self.register(name, help, unit, HistogramRows(rows));
    }

    /// `<name>_info` with `labels` (value 1).
    pub fn info(&mut self, name: &str, help: &str, labels: Labels) {
        self.info_rows(name, help, vec![labels]);
    }

    /// `<name>_info`, one row per label set.
    pub fn info_rows(&mut self, name: &str, help: &str, rows: Vec<Labels>) {
        let rows = self.admit(rows);
        if rows.is_empty() {
            return;
        }
        self.register(name, help, None, InfoRows(rows));
    }

    fn register(
        &mut self,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        metric: impl prometheus_client::registry::Metric,
    ) {
        self.register_in(Namespace::Mdiag, name, help, unit, metric);
    }

    fn register_in(
        &mut self,
        namespace: Namespace,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        metric: impl prometheus_client::registry::Metric,
    ) {
        let registry = match namespace {
            Namespace::Mdiag => &mut self.registry,
            Namespace::Standard => &mut self.standard,
        };
        match unit {
            Some(u) => registry.register_with_unit(name, help, u, metric),
            None => registry.register(name, help, metric),
        }
    }

    /// The OpenMetrics text, with the count of rows left out.
    pub fn finish(mut self) -> String {
        let dropped = self.dropped as f64;
        self.max_series += 1;
        self.gauge(
            "series_dropped",
            "Series left out of this exposition by the agent's series limit",
            None,
            vec![(Labels::new(), dropped)],
        );
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = encode_registry(&mut text, &self.standard)
            .and_then(|()| encode_registry(&mut text, &self.registry))
            .and_then(|()| encode_eof(&mut text));
        text
    }
}
