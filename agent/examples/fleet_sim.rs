//! The fleet simulator of `cargo xtask bench-fleet`: N agents writing to the
//! fleet store through the driver, in compressed time (simulated minutes
//! back to back, as fast as the store takes them), with the schema's own
//! document types. Prints one JSON line: what was written, how fast, and
//! how much the store grew. Not a test: the figures depend on the server
//! and the machine; the bench prints them.
//!
//! Per host and simulated minute, as `mdiag agent` does with 60 s windows:
//! one [`WindowDoc`] per target (1 target, 1 in 10 hosts 2), one [`HostDoc`]
//! and the findings' transitions, each written by the agent's own
//! `fleet::store::Store` (`write_window`, `write_host`, `write_finding`:
//! idempotent upserts, `w: majority`), which also creates the collections
//! and indexes. The spool and the sender's rate limit are left out: this
//! measures what the store takes.
//! Findings: each host starts with 0 (50 %), 1 (30 %), 2 (15 %) or 3 (5 %)
//! open episodes; an episode is pending 2 minutes, then fires (4 in 5) or
//! resolves; a firing one resolves after 4 h on average; new episodes open
//! at the rate that keeps that mix; 1 host in 100 flaps (firing ⇄ flapping
//! every 3 minutes on average). Before the timed part, `--history-days` of
//! resolved episodes and the hosts are bulk-inserted (not counted), so the
//! history queries read a store of a realistic size.
//!
//! Agents are independent clients: every operation is its own round trip,
//! `--concurrency` of them in flight (one pooled client). `ops` counts
//! documents written (one store call each).

use std::{
    collections::VecDeque,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::Instant,
};

use anyhow::{Context, Result};
use bson::{DateTime, Document, doc};
use clap::Parser;
use mdiag::fleet::schema::{
    FINDINGS, FindingDoc, FindingEvent, HOSTS, HostDoc, HostFacts, TransitionDoc, WINDOWS,
    WindowDoc, WindowMeta,
};
use mdiag::fleet::{config::FleetConfig, store::Store};
use mongodb::{Client, Database};

#[derive(Parser)]
struct Args {
    #[arg(long)]
    uri: String,
    #[arg(long, default_value = "mdiag")]
    database: String,
    #[arg(long, default_value_t = 3000)]
    hosts: usize,
    #[arg(long, default_value_t = 10)]
    minutes: u64,
    #[arg(long, default_value_t = 1)]
    history_days: u64,
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// The server's data directory: its size on disk is reported too.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// The store's pid: the simulator writes nothing unless serverStatus
    /// reports it (another server on the port is left alone).
    #[arg(long)]
    expect_pid: Option<i64>,
    /// Resolved episodes expire this long after resolution; windows too.
    #[arg(long, default_value_t = 7)]
    retention_days: u64,
}

const RULES: [&str; 12] = [
    "sched.wakeup_preemption",
    "sched.runqueue_latency",
    "softirq.net_rx_on_mongod_cpus",
    "alloc.tcmalloc_slow_path",
    "wt.checkpoint_stalls_writes",
    "wt.eviction_app_threads",
    "syscalls.fsync_latency",
    "mem.thp_compaction",
    "mem.numa_remote",
    "net.retransmits",
    "io.readahead_waste",
    "host.cpu_throttled",
];
const MINUTE: i64 = 60_000;
const FLAPPING_EVERY: u64 = 100;

/// xorshift64*: deterministic, so every run simulates the same fleet.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

#[derive(Clone, Copy, PartialEq)]
enum St {
    Pending { fire_at: u64 },
    Firing,
    Flapping,
}

struct Open {
    rule: &'static str,
    target: String,
    start: DateTime,
    st: St,
}

struct Host {
    name: String,
    facts: HostFacts,
    targets: Vec<String>,
    flapping: bool,
    open: Vec<Open>,
}

enum Op {
    Window(WindowDoc),
    Host(HostDoc),
    Event(FindingEvent),
}

fn fleet(n: usize, rng: &mut Rng) -> Vec<Host> {
    (0..n)
        .map(|i| {
            let arch = match rng.unit() {
                u if u < 0.70 => "x86_64",
                u if u < 0.95 => "aarch64",
                _ => "s390x",
            };
            let targets = if i % 10 == 9 {
                vec!["mongod:27017".into(), "mongod:27018".into()]
            } else {
                vec!["mongod:27017".into()]
            };
            Host {
                name: format!("db-{i:05}.example.net"),
                facts: HostFacts {
                    arch: arch.into(),
                    kernel: rng
                        .pick(&["5.14.0-503", "5.15.0-126", "6.1.0-28", "6.8.0-51"])
                        .into(),
                    mongod_version: Some(
                        rng.pick(&["6.0.19", "7.0.15", "7.0.16", "8.0.4", "8.0.5"])
                            .into(),
                    ),
                    rs_nm: Some(format!("rs{}", i / 3)),
                    cl_role: None,
                    agent_version: "0.1.0".into(),
                },
                targets,
                flapping: i as u64 % FLAPPING_EVERY == 7,
                open: Vec::new(),
            }
        })
        .collect()
}

fn event(h: &Host, o: &Open, from: &str, to: &str, at: DateTime) -> Op {
    Op::Event(FindingEvent {
        host: h.name.clone(),
        rule: o.rule.into(),
        target: o.target.clone(),
        // The agent's title is the rule's, the same for every target.
        title: o.rule.to_string(),
        from: from.into(),
        to: to.into(),
        at,
        episode_start: o.start,
        facts: h.facts.clone(),
    })
}

/// Around 40 numbers in 6 groups: the size of a window's facts.
fn window_facts(rng: &mut Rng) -> Document {
    let mut facts = Document::new();
    for (group, n) in [
        ("sched", 8),
        ("softirq", 6),
        ("mongo", 10),
        ("alloc", 5),
        ("syscalls", 6),
        ("host", 5),
    ] {
        let mut g = Document::new();
        for k in 0..n {
            g.insert(format!("f{k}"), (rng.unit() * 1e6).round() / 1e3);
        }
        facts.insert(group, g);
    }
    facts
}

/// The episodes a host has open when the simulation starts (0 to 3,
/// at least one when it flaps), firing for three minutes.
fn open_at_start(h: &mut Host, at: DateTime, rng: &mut Rng, events: &mut Vec<Op>) {
    let k = match rng.unit() {
        u if u < 0.50 => 0,
        u if u < 0.80 => 1,
        u if u < 0.95 => 2,
        _ => 3,
    };
    let k = if h.flapping { k.max(1) } else { k };
    for _ in 0..k {
        let rule = rng.pick(&RULES);
        if h.open.iter().any(|o| o.rule == rule) {
            continue;
        }
        let target = h.targets[0].clone();
        let start = DateTime::from_millis(at.timestamp_millis() - 3 * MINUTE);
        let o = Open {
            rule,
            target,
            start,
            st: St::Firing,
        };
        events.push(event(h, &o, "inactive", "pending", start));
        events.push(event(
            h,
            &o,
            "pending",
            "firing",
            DateTime::from_millis(start.timestamp_millis() + 2 * MINUTE),
        ));
        h.open.push(o);
    }
}

/// Moves each open episode on: pending fires or clears, firing resolves
/// or flaps.
fn advance(h: &mut Host, m: u64, at: DateTime, rng: &mut Rng, events: &mut Vec<Op>) {
    let mut keep = Vec::new();
    for mut o in std::mem::take(&mut h.open) {
        let next = match o.st {
            St::Pending { fire_at } if m >= fire_at => {
                if rng.unit() < 0.8 {
                    Some(St::Firing)
                } else {
                    None
                }
            }
            St::Pending { .. } => Some(o.st),
            St::Firing if rng.unit() < 1.0 / 240.0 => None,
            St::Firing if h.flapping && rng.unit() < 1.0 / 3.0 => Some(St::Flapping),
            St::Flapping if rng.unit() < 1.0 / 3.0 => Some(St::Firing),
            st => Some(st),
        };
        let name = |s: St| match s {
            St::Pending { .. } => "pending",
            St::Firing => "firing",
            St::Flapping => "flapping",
        };
        match next {
            None => events.push(event(h, &o, name(o.st), "resolved", at)),
            Some(st) if st != o.st => {
                events.push(event(h, &o, name(o.st), name(st), at));
                o.st = st;
                keep.push(o);
            }
            Some(_) => keep.push(o),
        }
    }
    h.open = keep;
}

/// Now and then a new pending episode on one of the host's targets.
fn maybe_open(h: &mut Host, m: u64, at: DateTime, rng: &mut Rng, events: &mut Vec<Op>) {
    let new_rate = 0.75 / 240.0;
    if h.open.len() < 3 && rng.unit() < new_rate {
        let rule = rng.pick(&RULES);
        if !h.open.iter().any(|o| o.rule == rule) {
            let target = h.targets[(rng.next() % h.targets.len() as u64) as usize].clone();
            let o = Open {
                rule,
                target,
                start: at,
                st: St::Pending { fire_at: m + 2 },
            };
            events.push(event(h, &o, "inactive", "pending", at));
            h.open.push(o);
        }
    }
}

/// One simulated minute: every host's window(s), host upsert and transitions.
fn minute(hosts: &mut [Host], m: u64, base: i64, rng: &mut Rng) -> Vec<Op> {
    let at = DateTime::from_millis(base + m as i64 * MINUTE);
    let mut ops = Vec::new();
    for h in hosts.iter_mut() {
        let mut events = Vec::new();
        if m == 0 {
            open_at_start(h, at, rng, &mut events);
        }
        advance(h, m, at, rng, &mut events);
        maybe_open(h, m, at, rng, &mut events);
        for t in &h.targets {
            ops.push(Op::Window(WindowDoc {
                at,
                meta: WindowMeta {
                    host: h.name.clone(),
                    target: t.clone(),
                },
                seconds: 60.0,
                facts: window_facts(rng),
                held: h
                    .open
                    .iter()
                    .filter(|o| &o.target == t)
                    .map(|o| o.rule.to_owned())
                    .collect(),
            }));
        }
        ops.push(Op::Host(HostDoc {
            host: h.name.clone(),
            facts: h.facts.clone(),
            targets: h.targets.clone(),
            first_seen: DateTime::from_millis(base),
            last_seen: at,
        }));
        ops.extend(events);
    }
    ops
}

/// Resolved episodes over the `days` before `base` (all resolved by then):
/// 4.5 a day per host.
fn history(
    hosts: &[Host],
    days: u64,
    base: i64,
    retention_ms: i64,
    rng: &mut Rng,
) -> Vec<FindingDoc> {
    let mut docs = Vec::new();
    let span = days as i64 * 1440 * MINUTE;
    for h in hosts {
        let n = (4.5 * days as f64 * (0.5 + rng.unit())).round() as usize;
        for _ in 0..n {
            let start = DateTime::from_millis(
                base - span + (rng.unit() * span as f64) as i64 - 9 * 60 * MINUTE,
            );
            let rule = rng.pick(&RULES);
            let target = h.targets[0].clone();
            let s = start.timestamp_millis();
            let fired = DateTime::from_millis(s + 2 * MINUTE);
            let resolved =
                DateTime::from_millis(s + 2 * MINUTE + (rng.unit() * 8.0 * 60.0) as i64 * MINUTE);
            let t = |f: &str, to: &str, at| TransitionDoc {
                from: f.into(),
                to: to.into(),
                at,
            };
            docs.push(FindingDoc {
                id: mdiag::fleet::schema::finding_id(&h.name, rule, &target, start),
                host: h.name.clone(),
                rule: rule.into(),
                target,
                title: rule.to_string(),
                facts: h.facts.clone(),
                episode_start: start,
                state: "resolved".into(),
                since: resolved,
                transitions: vec![
                    t("inactive", "pending", start),
                    t("pending", "firing", fired),
                    t("firing", "resolved", resolved),
                ],
                expire_at: Some(DateTime::from_millis(
                    resolved.timestamp_millis() + retention_ms,
                )),
            });
        }
    }
    docs
}

/// One agent's write, through the agent's own store code.
async fn write(store: &Store, op: Op) -> Result<u64> {
    match op {
        Op::Window(w) => store.write_window(&w).await?,
        Op::Host(h) => store.write_host(&h).await?,
        Op::Event(e) => store.write_finding(&e).await?,
    }
    Ok(1)
}

/// Runs `ops`, `concurrency` in flight; returns the operations done.
async fn run(store: &Arc<Store>, ops: Vec<Op>, concurrency: usize) -> Result<u64> {
    let queue = Arc::new(Mutex::new(VecDeque::from(ops)));
    let mut workers = Vec::new();
    for _ in 0..concurrency.max(1) {
        let (store, queue) = (store.clone(), queue.clone());
        workers.push(tokio::spawn(async move {
            let mut done = 0;
            loop {
                let next = queue
                    .lock()
                    .map_err(|_| anyhow::anyhow!("queue poisoned"))?
                    .pop_front();
                let Some(op) = next else {
                    return Ok::<u64, anyhow::Error>(done);
                };
                done += write(&store, op).await?;
            }
        }));
    }
    let mut total = 0;
    for w in workers {
        total += w.await??;
    }
    Ok(total)
}

async fn sizes(db: &Database) -> Result<(u64, u64, u64, Document)> {
    let s = db.run_command(doc! {"dbStats": 1}).await?;
    let num = |d: &Document, k: &str| {
        d.get(k)
            .and_then(|v| {
                v.as_f64()
                    .or(v.as_i64().map(|i| i as f64))
                    .or(v.as_i32().map(f64::from))
            })
            .unwrap_or(0.0) as u64
    };
    let mut per = Document::new();
    for c in [FINDINGS, WINDOWS, HOSTS] {
        let cs = db.run_command(doc! {"collStats": c}).await?;
        per.insert(c, doc! {"count": num(&cs, "count") as i64, "size": num(&cs, "size") as i64, "index": num(&cs, "totalIndexSize") as i64});
    }
    Ok((
        num(&s, "dataSize"),
        num(&s, "indexSize"),
        num(&s, "objects"),
        per,
    ))
}

fn dir_bytes(p: &std::path::Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(p) else {
        return 0;
    };
    rd.flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => dir_bytes(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

async fn disk(client: &Client, dir: Option<&PathBuf>) -> Result<u64> {
    // A pooled connection left idle through a long write phase may have
    // been closed by the server (seen as a broken pipe): fsync is not a
    // retryable command for the driver, so it is tried again here, on
    // another connection of the pool.
    let mut tries = 0;
    loop {
        tries += 1;
        match client
            .database("admin")
            .run_command(doc! {"fsync": 1})
            .await
        {
            Ok(_) => break,
            Err(e) if tries < 3 => eprintln!("fleet_sim: fsync failed ({e}); trying again"),
            Err(e) => return Err(e).context("fsync (a checkpoint)"),
        }
    }
    Ok(dir.map_or(0, |d| dir_bytes(d)))
}

async fn main_async(args: Args) -> Result<()> {
    let client = Client::with_uri_str(&args.uri).await?;
    let db = client.database(&args.database);
    if let Some(want) = args.expect_pid {
        let status = client
            .database("admin")
            .run_command(doc! {"serverStatus": 1})
            .await?;
        let pid = status
            .get_i64("pid")
            .or_else(|_| status.get_i32("pid").map(i64::from))
            .unwrap_or(-1);
        anyhow::ensure!(
            pid == want,
            "the server on {} is pid {pid}, not the store started for the bench ({want}): nothing written",
            args.uri
        );
    }
    let retention_ms = args.retention_days as i64 * 1440 * MINUTE;
    // The agent's store: it creates the collections and indexes (windows
    // time-series where the server has them, else plain with a TTL).
    let config = format!(
        "[fleet]\nuri = {:?}\ndatabase = {:?}\nhost = \"fleet-sim\"\nretention = \"{}d\"\nwindow_retention = \"{}d\"\n",
        args.uri, args.database, args.retention_days, args.retention_days
    );
    let config = FleetConfig::parse(&config, std::path::Path::new("fleet_sim.toml"))?
        .context("the simulator's [fleet] table")?;
    let store = Arc::new(Store::connect(&config).await?);

    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut hosts = fleet(args.hosts, &mut rng);
    let base = DateTime::now().timestamp_millis() - args.minutes as i64 * MINUTE;
    let t0 = Instant::now();
    let hist = history(&hosts, args.history_days, base, retention_ms, &mut rng);
    let history_docs = hist.len();
    for chunk in hist.chunks(1000) {
        db.collection::<FindingDoc>(FINDINGS)
            .insert_many(chunk.to_vec())
            .await?;
    }
    let seed_secs = t0.elapsed().as_secs_f64();
    let disk_before = disk(&client, args.data_dir.as_ref()).await?;
    let (data0, index0, objects0, _) = sizes(&db).await?;

    let (mut ops, mut docs, mut events, mut write_secs) = (0u64, 0u64, 0u64, 0f64);
    let mut minute_secs = Vec::new();
    for m in 0..args.minutes {
        let batch = minute(&mut hosts, m, base, &mut rng);
        docs += batch.iter().filter(|o| matches!(o, Op::Window(_))).count() as u64;
        events += batch.iter().filter(|o| matches!(o, Op::Event(_))).count() as u64;
        let t = Instant::now();
        ops += run(&store, batch, args.concurrency).await?;
        let s = t.elapsed().as_secs_f64();
        minute_secs.push(s);
        write_secs += s;
    }
    let disk_after = disk(&client, args.data_dir.as_ref()).await?;
    let (data1, index1, objects1, per) = sizes(&db).await?;
    let open: usize = hosts.iter().map(|h| h.open.len()).sum();
    let out = serde_json::json!({
        "hosts": args.hosts, "minutes": args.minutes, "concurrency": args.concurrency,
        "history_docs": history_docs, "seed_secs": seed_secs,
        "ops": ops, "window_docs": docs, "host_upserts": args.hosts as u64 * args.minutes, "events": events,
        "write_secs": write_secs, "minute_secs": minute_secs, "open_episodes": open,
        "data_bytes": [data0, data1], "index_bytes": [index0, index1], "objects": [objects0, objects1],
        "disk_bytes": [disk_before, disk_after],
        "collections": serde_json::to_value(&per)?,
        "sample_host": hosts.first().map(|h| h.name.clone()),
    });
    println!("{out}");
    Ok(())
}

fn main() -> Result<()> {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let r = rt.block_on(main_async(args));
    rt.shutdown_background();
    r
}
