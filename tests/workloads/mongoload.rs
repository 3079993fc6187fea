//! A request load on a real mongod, shared by the root tests and the benches:
//! `--threads` connections (one client each, one pooled connection), each
//! looping over insert / update / find / aggregate on `<db>.docs` (indexed on
//! `k`) for `--secs` seconds, or until stdin closes with `--until-stdin`.
//!
//! It counts what it did itself, so that a test can hold mdiag's and mongod's
//! figures against the load's own: after `ready` (every connection made and
//! the collection prepared) it prints one JSON line per second of load,
//! `{"second": i, "insert": n, "update": n, "find": n, "aggregate": n,
//! "errors": n, "p50_us": x, "p99_us": x, "max_us": x}`, then one last line
//! `{"total": {...same keys...}, "secs": s, "ops": n, "ops_per_sec": r}`.
//! An operation counts in the second in which it completed. Errors are
//! counted and the first one is printed on stderr; the load goes on.
//!
//! Usage: `mdiag-mongoload --uri mongodb://127.0.0.1:PORT [--threads 4]
//! [--secs 20 | --until-stdin] [--db mdiag_load] [--doc-bytes 100] [--drop-first]
//! [--rate OPS]`.
//!
//! `--rate OPS` paces each connection to OPS operations a second (an open
//! schedule: an operation late by more than one interval is not made up
//! for); without it each connection loops as fast as mongod answers, which
//! takes every CPU of a small host. A test that needs a load, not a
//! saturated host, paces it and leaves CPU time to the rest of the machine.
//!
//! `--drop-first` drops `<db>.docs` before the run: the aggregate reads the
//! documents of 50 keys, more of them the more runs inserted before, so runs
//! that are compared (the benches) each start from an empty collection.

use std::{
    io::{BufRead, Write},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use bson::doc;
use mongodb::{Client, Collection, options::ClientOptions};

const KINDS: [&str; 4] = ["insert", "update", "find", "aggregate"];
/// Keys are drawn from this many values, so updates and finds mostly hit.
const KEYS: u64 = 100_000;
/// Latency buckets: log2 of microseconds, 0..=31.
const BUCKETS: usize = 32;

struct Args {
    uri: String,
    threads: usize,
    secs: Option<u64>,
    db: String,
    doc_bytes: usize,
    drop_first: bool,
    /// Operations a second per connection; `None`: as fast as it can.
    rate: Option<f64>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        uri: String::new(),
        threads: 4,
        secs: Some(20),
        db: "mdiag_load".into(),
        doc_bytes: 100,
        drop_first: false,
        rate: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        match a.as_str() {
            "--uri" => args.uri = value("--uri")?,
            "--threads" => args.threads = parse(&value("--threads")?)?,
            "--secs" => args.secs = Some(parse(&value("--secs")?)?),
            "--until-stdin" => args.secs = None,
            "--drop-first" => args.drop_first = true,
            "--db" => args.db = value("--db")?,
            "--doc-bytes" => args.doc_bytes = parse(&value("--doc-bytes")?)?,
            "--rate" => args.rate = Some(parse(&value("--rate")?)?),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if args.uri.is_empty() {
        return Err("--uri is required".into());
    }
    if args.threads == 0 {
        return Err("--threads must be at least 1".into());
    }
    if args.rate.is_some_and(|r: f64| !(r.is_finite() && r > 0.0)) {
        return Err("--rate must be a positive number of operations a second".into());
    }
    Ok(args)
}

fn parse<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    s.parse().map_err(|_| format!("not a number: {s:?}"))
}

/// Counters of one second (or of the whole run).
#[derive(Default, Clone)]
struct Tally {
    ops: [u64; 4],
    errors: u64,
    latency: [u64; BUCKETS],
    max_us: u64,
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        for (a, b) in self.ops.iter_mut().zip(other.ops) {
            *a += b;
        }
        self.errors += other.errors;
        for (a, b) in self.latency.iter_mut().zip(other.latency) {
            *a += b;
        }
        self.max_us = self.max_us.max(other.max_us);
    }

    /// The upper bound (µs) of the bucket holding quantile `q`.
    fn quantile_us(&self, q: f64) -> u64 {
        let n: u64 = self.latency.iter().sum();
        if n == 0 {
            return 0;
        }
        let want = ((n as f64) * q).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, c) in self.latency.iter().enumerate() {
            seen += c;
            if seen >= want {
                return (1u64 << (i + 1)).min(self.max_us.max(1));
            }
        }
        self.max_us
    }

    fn json(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        for (k, n) in KINDS.iter().zip(self.ops) {
            m.insert((*k).into(), n.into());
        }
        m.insert("errors".into(), self.errors.into());
        m.insert("p50_us".into(), self.quantile_us(0.5).into());
        m.insert("p99_us".into(), self.quantile_us(0.99).into());
        m.insert("max_us".into(), self.max_us.into());
        serde_json::Value::Object(m)
    }
}

/// What the workers share: the current second's tally, swapped out each second.
struct Shared {
    current: Mutex<Tally>,
    stop: AtomicBool,
    first_error: Mutex<Option<String>>,
    seq: AtomicU64,
}

impl Shared {
    fn record(&self, kind: usize, took: Duration, result: Result<(), String>) {
        let us = took.as_micros() as u64;
        let mut t = match self.current.lock() {
            Ok(t) => t,
            Err(p) => p.into_inner(),
        };
        match result {
            Ok(()) => {
                t.ops[kind] += 1;
                let b = (64 - us.max(1).leading_zeros() as usize - 1).min(BUCKETS - 1);
                t.latency[b] += 1;
                t.max_us = t.max_us.max(us);
            }
            Err(e) => {
                t.errors += 1;
                drop(t);
                let mut first = match self.first_error.lock() {
                    Ok(f) => f,
                    Err(p) => p.into_inner(),
                };
                if first.is_none() {
                    eprintln!("mdiag-mongoload: {e}");
                    *first = Some(e);
                }
            }
        }
    }
}

async fn connect(uri: &str) -> Result<Client, String> {
    let mut opts = ClientOptions::parse(uri).await.map_err(|e| e.to_string())?;
    opts.max_pool_size = Some(1);
    opts.min_pool_size = Some(1);
    opts.app_name = Some("mdiag-mongoload".into());
    if opts.hosts.len() == 1 && opts.repl_set_name.is_none() {
        opts.direct_connection.get_or_insert(true);
    }
    let client = Client::with_options(opts).map_err(|e| e.to_string())?;
    client
        .database("admin")
        .run_command(doc! { "ping": 1 })
        .await
        .map_err(|e| format!("ping: {e}"))?;
    Ok(client)
}

/// One operation of kind `n % 4` on a pseudo-random key.
async fn one(coll: &Collection<bson::Document>, n: u64, key: u64, pad: &str) -> Result<(), String> {
    let k = key as i64;
    let r = match n % 4 {
        0 => coll
            .insert_one(doc! { "k": k, "v": pad, "c": 0 })
            .await
            .map(drop),
        1 => coll
            .update_one(doc! { "k": k }, doc! { "$inc": { "c": 1 } })
            .await
            .map(drop),
        2 => {
            use futures_like::drain;
            drain(coll.find(doc! { "k": k }).limit(5).await).await
        }
        _ => {
            let pipeline = [
                doc! { "$match": { "k": { "$gte": k, "$lt": k + 50 } } },
                doc! { "$group": { "_id": null, "n": { "$sum": 1 }, "c": { "$sum": "$c" } } },
            ];
            futures_like::drain(coll.aggregate(pipeline).await).await
        }
    };
    r.map_err(|e| e.to_string())
}

/// Reading a cursor to its end without the `futures` crate: `advance` is the
/// driver's own way to step a cursor.
mod futures_like {
    pub async fn drain<T>(
        cursor: mongodb::error::Result<mongodb::Cursor<T>>,
    ) -> mongodb::error::Result<()> {
        let mut c = cursor?;
        while c.advance().await? {}
        Ok(())
    }
}

/// A worker: its own thread, runtime and connection (a client's background
/// tasks live on the runtime that made it). Says on `ready` whether it
/// connected, waits at `go`, then loops until stopped.
fn worker(
    args: &Args,
    shared: Arc<Shared>,
    seed: u64,
    ready: std::sync::mpsc::Sender<Result<(), String>>,
    go: Arc<std::sync::Barrier>,
) -> std::thread::JoinHandle<()> {
    let (uri, db, doc_bytes) = (args.uri.clone(), args.db.clone(), args.doc_bytes);
    let interval = args.rate.map(|r| Duration::from_secs_f64(1.0 / r));
    std::thread::spawn(move || {
        let rt = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                let _ = ready.send(Err(format!("a worker's runtime: {e}")));
                return;
            }
        };
        let client = match rt.block_on(connect(&uri)) {
            Ok(c) => c,
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        };
        let _ = ready.send(Ok(()));
        go.wait();
        let coll = client.database(&db).collection::<bson::Document>("docs");
        let pad = "x".repeat(doc_bytes);
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        rt.block_on(async {
            let mut next = Instant::now();
            while !shared.stop.load(Ordering::Relaxed) {
                if let Some(interval) = interval {
                    let now = Instant::now();
                    if next > now {
                        tokio::time::sleep(next - now).await;
                    }
                    next = next.max(now) + interval;
                }
                // xorshift: a cheap, reproducible key sequence per worker.
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let n = shared.seq.fetch_add(1, Ordering::Relaxed);
                let t = Instant::now();
                let r = one(&coll, n, x % KEYS, &pad).await;
                shared.record((n % 4) as usize, t.elapsed(), r);
            }
        });
    })
}

/// Connects once to drop the collection (`--drop-first`) and create the
/// index on `k` (idempotent).
fn prepare(args: &Args) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?;
    rt.block_on(async {
        let client = connect(&args.uri).await?;
        let coll = client
            .database(&args.db)
            .collection::<bson::Document>("docs");
        if args.drop_first {
            coll.drop()
                .await
                .map_err(|e| format!("dropping {}.docs: {e}", args.db))?;
        }
        let index = mongodb::IndexModel::builder().keys(doc! { "k": 1 }).build();
        coll.create_index(index)
            .await
            .map_err(|e| format!("creating the index on k: {e}"))?;
        Ok(())
    })
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("mdiag-mongoload: {e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = prepare(&args) {
        eprintln!("mdiag-mongoload: {}: {e}", args.uri);
        std::process::exit(1);
    }
    let shared = Arc::new(Shared {
        current: Mutex::new(Tally::default()),
        stop: AtomicBool::new(false),
        first_error: Mutex::new(None),
        seq: AtomicU64::new(0),
    });
    // Every connection made before `ready`: the load can start at once.
    let go = Arc::new(std::sync::Barrier::new(args.threads + 1));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let mut workers: Vec<_> = (0..args.threads)
        .map(|i| {
            worker(
                &args,
                Arc::clone(&shared),
                i as u64 + 1,
                ready_tx.clone(),
                Arc::clone(&go),
            )
        })
        .collect();
    for _ in 0..args.threads {
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                eprintln!("mdiag-mongoload: cannot connect to {}: {e}", args.uri);
                std::process::exit(1);
            }
            Err(_) => {
                eprintln!("mdiag-mongoload: a worker ended before connecting");
                std::process::exit(1);
            }
        }
    }
    let mut out = std::io::stdout().lock();
    if writeln!(out, "ready").and_then(|()| out.flush()).is_err() {
        return;
    }
    if args.secs.is_none() {
        let stop = Arc::clone(&shared);
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = std::io::stdin().lock().read_line(&mut line);
            stop.stop.store(true, Ordering::Relaxed);
        });
    }
    go.wait();
    let start = Instant::now();
    let mut total = Tally::default();
    let mut second = 0u64;
    loop {
        second += 1;
        let due = start + Duration::from_secs(second);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        let last = args.secs.is_some_and(|s| second >= s) || shared.stop.load(Ordering::Relaxed);
        if last {
            shared.stop.store(true, Ordering::Relaxed);
            for w in workers.drain(..) {
                let _ = w.join();
            }
        }
        let tally = match shared.current.lock() {
            Ok(mut t) => std::mem::take(&mut *t),
            Err(p) => std::mem::take(&mut *p.into_inner()),
        };
        total.add(&tally);
        let mut line = tally.json();
        line["second"] = second.into();
        // A closed stdout (the reader went away) ends the load quietly.
        if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
            shared.stop.store(true, Ordering::Relaxed);
            return;
        }
        if last {
            break;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let ops: u64 = total.ops.iter().sum();
    let line = serde_json::json!({
        "total": total.json(),
        "secs": secs,
        "ops": ops,
        "ops_per_sec": ops as f64 / secs,
    });
    let _ = writeln!(out, "{line}");
}
