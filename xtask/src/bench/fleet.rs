//! `cargo xtask bench-fleet`: the fleet store at scale, by simulation
//! (issue #14). For each fleet size (default 1 000, 3 000, 10 000 hosts), on
//! a fresh store: `fleet_sim` (`agent/examples/fleet_sim.rs`) plays every
//! host's agent through the driver in compressed time (windows every
//! simulated minute, findings' transitions at a realistic rate, a day of
//! resolved history); then the real `mdiag fleet` binary answers each view
//! `--runs` times. Prints the sustained write rate against what the fleet
//! needs in real time, the store's growth per day, each view's response
//! time (median, p95), and which gives out first, at what size.
//!
//! The store is SecantusDB (the venv of `cargo xtask setup`): a
//! MongoDB-wire server written in Python with WiredTiger inside. Its
//! operations cost far more CPU than mongod's and it runs one command at a
//! time, so its write rate is a floor, not mongod's; its `dataSize` is
//! uncompressed BSON (mongod's `storageSize` is compressed), and its query
//! planner is not mongod's. What scales with the fleet (documents per host
//! per day, which view reads how many episodes) does not depend on the
//! server. Never a test: the figures depend on the machine.

use std::{
    net::{TcpListener, TcpStream},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use super::common::{TempDir, median};
use crate::{
    cmd::{Cmd, target_dir},
    run::build,
};

/// `mdiag fleet`'s budget for one view (the "under a second").
const QUERY_BUDGET_S: f64 = 1.0;

/// Options of `cargo xtask bench-fleet`.
#[derive(clap::Args)]
pub struct FleetBenchArgs {
    /// Use the debug builds of mdiag and the simulator instead of release.
    #[arg(long)]
    debug: bool,
    /// Fleet sizes, in hosts, each on a fresh store.
    #[arg(long, value_delimiter = ',', default_value = "1000,3000,10000")]
    sizes: Vec<usize>,
    /// Simulated minutes of writes per size (one window per host and target each).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    minutes: u64,
    /// Days of resolved episodes in the store before the timed writes.
    #[arg(long, default_value_t = 1)]
    history_days: u64,
    /// Writes in flight (agents writing at once).
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Runs of each `mdiag fleet` view.
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u64).range(1..))]
    runs: u64,
    /// Keep each size's store (data and log) under this directory, to query it
    /// again afterwards with `secantusd-py --storage-path DIR/store-PORT`
    /// (by default the stores are in a temporary directory, removed at the end).
    #[arg(long)]
    keep: Option<PathBuf>,
}

/// A `secantusd-py` on a free port with its data in `dir`; killed on drop.
struct Store {
    child: Child,
    port: u16,
    data: PathBuf,
}

impl Store {
    fn start(venv: &Path, dir: &Path) -> Result<Store> {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .context("finding a free port")?
            .port();
        let data = dir.join(format!("store-{port}"));
        let log = std::fs::File::create(dir.join(format!("store-{port}.log")))?;
        let child = Command::new(venv.join("bin/secantusd-py"))
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .arg("--storage-path")
            .arg(&data)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting secantusd-py")?;
        let mut store = Store { child, port, data };
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            if let Some(status) = store.child.try_wait()? {
                bail!(
                    "secantusd-py exited at start ({status}); see its log in {}",
                    dir.display()
                );
            }
            let addr = ([127, 0, 0, 1], port).into();
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(store);
            }
            if Instant::now() > deadline {
                bail!("secantusd-py did not accept connections within 90 s");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn uri(&self) -> String {
        format!("mongodb://127.0.0.1:{}/?directConnection=true", self.port)
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn p95(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(((v.len() as f64 * 0.95).ceil() as usize).saturating_sub(1))
        .copied()
        .unwrap_or(f64::NAN)
}

fn num(v: &Value, path: &[&str]) -> f64 {
    let mut v = v;
    for p in path {
        v = &v[*p];
    }
    v.as_f64().unwrap_or(f64::NAN)
}

fn pair(v: &Value, key: &str) -> (f64, f64) {
    (
        v[key][0].as_f64().unwrap_or(0.0),
        v[key][1].as_f64().unwrap_or(0.0),
    )
}

fn mib(b: f64) -> String {
    format!("{:.1} MiB", b / 1048576.0)
}

/// One fleet size's figures.
struct Row {
    size: usize,
    ops_per_s: f64,
    docs_per_s: f64,
    needed_ops_per_s: f64,
    bytes_per_day: f64,
    disk_per_day: f64,
    /// (view, median s, p95 s)
    views: Vec<(String, f64, f64)>,
}

fn fleet_view(mdiag: &Path, uri: &str, args: &[&str]) -> Result<(f64, String)> {
    let t = Instant::now();
    let out = Command::new(mdiag)
        .args(["fleet", "--uri", uri])
        .args(args)
        .output()
        .context("running mdiag fleet")?;
    let secs = t.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!(
            "mdiag fleet {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok((secs, String::from_utf8_lossy(&out.stdout).into_owned()))
}

fn one_size(
    args: &FleetBenchArgs,
    bins: (&Path, &Path),
    venv: &Path,
    tmp: &Path,
    size: usize,
) -> Result<Row> {
    let (mdiag, sim) = bins;
    let store = Store::start(venv, tmp)?;
    let uri = store.uri();
    println!(
        "\n== {size} hosts: writing {} simulated minutes ...",
        args.minutes
    );
    let s = simulate(args, sim, &store, size)?;
    let minutes = args.minutes as f64;
    let write_secs = num(&s, &["write_secs"]);
    let ops = num(&s, &["ops"]);
    let docs = num(&s, &["window_docs"]) + num(&s, &["host_upserts"]) + num(&s, &["events"]);
    let (d0, d1) = pair(&s, "data_bytes");
    let (i0, i1) = pair(&s, "index_bytes");
    let (k0, k1) = pair(&s, "disk_bytes");
    let per_minute = ((d1 + i1) - (d0 + i0)) / minutes;
    let row_growth = per_minute * 1440.0;
    let disk_per_day = (k1 - k0) / minutes * 1440.0;
    println!(
        "  history: {} resolved episodes bulk-inserted in {:.1} s; open episodes at the end: {}",
        s["history_docs"],
        num(&s, &["seed_secs"]),
        s["open_episodes"]
    );
    println!(
        "  writes: {ops:.0} documents written by fleet::store ({} windows, {} host upserts, {} transitions) in {write_secs:.1} s",
        s["window_docs"], s["host_upserts"], s["events"]
    );
    let minute_secs: Vec<f64> = s["minute_secs"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    println!(
        "  one simulated minute took {:.2} s (median; first, with the fleet's open findings: {:.2} s): the store keeps up while that is under 60 s",
        median(&minute_secs[minute_secs.len().min(1)..]),
        minute_secs.first().copied().unwrap_or(f64::NAN)
    );
    println!(
        "  store: dataSize+indexSize {} -> {} ({} per simulated minute); WiredTiger files {} -> {}",
        mib(d0 + i0),
        mib(d1 + i1),
        mib(per_minute),
        mib(k0),
        mib(k1)
    );
    println!("  per collection after: {}", s["collections"]);

    let timed = time_views(args, mdiag, &uri, &s, size)?;
    Ok(Row {
        size,
        ops_per_s: ops / write_secs,
        docs_per_s: docs / write_secs,
        needed_ops_per_s: ops / (minutes * 60.0),
        bytes_per_day: row_growth,
        disk_per_day,
        views: timed,
    })
}

/// Runs fleet_sim against the store: its JSON line of figures.
fn simulate(args: &FleetBenchArgs, sim: &Path, store: &Store, size: usize) -> Result<Value> {
    let uri = store.uri();
    let out = Command::new(sim)
        .args([
            "--uri",
            &uri,
            "--hosts",
            &size.to_string(),
            "--minutes",
            &args.minutes.to_string(),
        ])
        .args([
            "--history-days",
            &args.history_days.to_string(),
            "--concurrency",
            &args.concurrency.to_string(),
        ])
        .args(["--expect-pid", &store.child.id().to_string()])
        .arg("--data-dir")
        .arg(&store.data)
        .stderr(Stdio::inherit())
        .output()
        .context("running fleet_sim")?;
    if !out.status.success() {
        bail!("fleet_sim failed ({})", out.status);
    }
    serde_json::from_slice(&out.stdout).context("fleet_sim's JSON line")
}

/// Times each view of `mdiag fleet` over the store: the busiest rule and a
/// host with history come from the store itself. By view: its median and
/// p95 in seconds.
fn time_views(
    args: &FleetBenchArgs,
    mdiag: &Path,
    uri: &str,
    s: &Value,
    size: usize,
) -> Result<Vec<(String, f64, f64)>> {
    // The views: the busiest rule and a host with history, from the store itself.
    let (_, now) = fleet_view(mdiag, uri, &["--format", "json"])?;
    let now: Value = serde_json::from_str(&now).context("mdiag fleet's JSON")?;
    if now["hosts_total"].as_u64() != Some(size as u64) {
        bail!(
            "mdiag fleet counts {} hosts, the simulator wrote {size}",
            now["hosts_total"]
        );
    }
    let rule = now["groups"][0]["rule"]
        .as_str()
        .unwrap_or("sched.wakeup_preemption")
        .to_owned();
    let host = s["sample_host"]
        .as_str()
        .unwrap_or("db-00000.example.net")
        .to_owned();
    let views: Vec<(String, Vec<&str>)> = vec![
        ("now (terminal)".into(), vec![]),
        ("now (json)".into(), vec!["--format", "json"]),
        ("now (html)".into(), vec!["--format", "html"]),
        (
            format!("--rule {rule} --since 24h"),
            vec!["--rule", &rule, "--since", "24h", "--format", "json"],
        ),
        (
            "now --since 24h (json)".into(),
            vec!["--since", "24h", "--format", "json"],
        ),
        (
            format!("--host {host}"),
            vec!["--host", &host, "--format", "json"],
        ),
    ];
    let mut timed = Vec::new();
    for (name, a) in &views {
        let mut t = Vec::new();
        for _ in 0..args.runs {
            t.push(fleet_view(mdiag, uri, a)?.0);
        }
        println!(
            "  mdiag fleet {name}: median {:.3} s, p95 {:.3} s",
            median(&t),
            p95(&t)
        );
        timed.push((name.clone(), median(&t), p95(&t)));
    }
    Ok(timed)
}

pub fn bench_fleet(args: &FleetBenchArgs) -> Result<()> {
    let mdiag = build(!args.debug)?;
    let mut cmd = Cmd::cargo();
    cmd.args(["build", "-p", "mdiag", "--example", "fleet_sim"]);
    if !args.debug {
        cmd.arg("--release");
    }
    cmd.run()?;
    let profile = if args.debug { "debug" } else { "release" };
    let sim = target_dir()?.join(profile).join("examples/fleet_sim");
    let venv = match std::env::var_os("MDIAG_PY_VENV") {
        Some(v) => PathBuf::from(v),
        None => crate::setup::py_venv_dir()?,
    };
    if !venv.join("bin/secantusd-py").exists() {
        bail!(
            "no SecantusDB in {}: run `cargo xtask setup` (or set MDIAG_PY_VENV)",
            venv.display()
        );
    }
    let tmp = TempDir::new("bench-fleet")?;
    let stores = match &args.keep {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            dir.clone()
        }
        None => tmp.path().to_path_buf(),
    };
    println!(
        "mdiag fleet bench: store SecantusDB (Python MongoDB-wire server, WiredTiger inside) on this machine ({} CPUs); mdiag and the simulator {profile} builds; {} simulated minutes per size, {} writes in flight, {} day(s) of history, {} runs per view",
        std::thread::available_parallelism().map_or(0, usize::from),
        args.minutes,
        args.concurrency,
        args.history_days,
        args.runs
    );
    let mut rows = Vec::new();
    for &size in &args.sizes {
        rows.push(one_size(args, (&mdiag, &sim), &venv, &stores, size)?);
    }
    summary(&rows);
    Ok(())
}

fn summary(rows: &[Row]) {
    println!("\n== Summary (SecantusDB figures; see the header of xtask/src/bench/fleet.rs)");
    println!(
        "hosts   ops/s  docs/s  needed ops/s  headroom  growth/day (BSON+index)  per host/day  WT files/day  slowest view p95"
    );
    for r in rows {
        let slowest = r.views.iter().map(|v| v.2).fold(0.0, f64::max);
        println!(
            "{:<7} {:>6.0} {:>7.0} {:>13.1} {:>8.1}x {:>24} {:>13} {:>13} {:>10.3} s",
            r.size,
            r.ops_per_s,
            r.docs_per_s,
            r.needed_ops_per_s,
            r.ops_per_s / r.needed_ops_per_s,
            mib(r.bytes_per_day),
            format!("{:.0} KiB", r.bytes_per_day / r.size as f64 / 1024.0),
            mib(r.disk_per_day),
            slowest,
        );
    }
    let Some(last) = rows.last() else { return };
    // Writes: the store's sustained rate over what one host needs.
    let per_host = last.needed_ops_per_s / last.size as f64;
    let write_limit = last.ops_per_s / per_host;
    // Queries: the first size over budget, else a linear extrapolation of the slowest view.
    let over = rows
        .iter()
        .find(|r| r.views.iter().any(|v| v.2 >= QUERY_BUDGET_S));
    let slowest = last.views.iter().map(|v| v.2).fold(0.0, f64::max);
    let query_limit = match over {
        Some(r) => r.size as f64,
        None => last.size as f64 * QUERY_BUDGET_S / slowest.max(1e-6),
    };
    println!(
        "writes: {:.2} ops/s per host needed; the store sustained {:.0} ops/s at {} hosts: writes keep up to about {:.0} hosts",
        per_host, last.ops_per_s, last.size, write_limit
    );
    match over {
        Some(r) => println!(
            "queries: a view's p95 passed {QUERY_BUDGET_S} s at {} hosts",
            r.size
        ),
        None => println!(
            "queries: every view under {QUERY_BUDGET_S} s up to {} hosts (slowest p95 {slowest:.3} s); linearly extrapolated, the slowest passes {QUERY_BUDGET_S} s near {query_limit:.0} hosts",
            last.size
        ),
    }
    println!(
        "breaks first: {} at about {:.0} hosts",
        if write_limit < query_limit {
            "the write rate"
        } else {
            "query time"
        },
        write_limit.min(query_limit)
    );
}
