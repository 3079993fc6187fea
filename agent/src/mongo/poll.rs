//! The poller: the official driver on its own thread (with its own tokio
//! runtime), so a slow, unreachable or stopped server never delays the probe
//! pipeline. It sends what it learns over a channel; the record loop takes
//! whatever has arrived when it cuts a slice.
//!
//! Schedule (from the recording's start): the once-per-recording facts
//! (buildInfo, getCmdLineOpts, hostInfo, dbStats of every database) in a task
//! of their own, serverStatus every second 100 ms after each slice boundary,
//! `serverStatus({tcmalloc: 2})` every [`DETAIL_EVERY`] seconds, and the
//! replication figures (replSetGetStatus, the oplog's collStats, its first
//! and last entries) every [`REPL_EVERY`] seconds until the server says it
//! is not a replica-set member. Every command has a timeout; errors are
//! sent redacted.

use std::{
    collections::BTreeMap,
    sync::mpsc,
    thread::JoinHandle,
    time::{Duration, Instant},
};

use bson::{Document, RawDocumentBuf, doc};
use mongodb::{
    Client,
    error::{Error as DriverError, ErrorKind},
    options::ClientOptions,
};

use super::conn::{Connection, Redactor};
use super::info;
use crate::ftdc::metrics::extract;
use crate::recording::mongod::MongodInfo;
use crate::recording::mongod::ReplSample;
use crate::recording::server_status::ServerStatusSample;

/// Connect timeout (unless the URI sets its own).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long one serverStatus may take before the second is marked missing.
pub const POLL_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the driver looks for the server before it gives up: shorter
/// than [`POLL_TIMEOUT`], so that a server nobody can reach is reported as
/// unreachable, in the driver's words, and not as a poll that timed out
/// (which says "slow or stopped"). With both at 2 s either could win.
pub const SELECTION_TIMEOUT: Duration = Duration::from_millis(1500);
/// How long the once-per-recording facts may take altogether.
pub const INFO_TIMEOUT: Duration = Duration::from_secs(10);
/// `serverStatus({tcmalloc: 2})` every this many seconds.
pub const DETAIL_EVERY: u64 = 30;
/// Replication figures every this many seconds (a modest rate: four small
/// commands, one of them reading the oplog's statistics).
pub const REPL_EVERY: u64 = 10;
/// Most metrics kept from one tcmalloc detail reply.
pub const DETAIL_MAX_METRICS: usize = 4000;
/// Most databases whose dbStats are read.
const MAX_DATABASES: usize = 1000;
/// Polls start this long after each slice boundary, so the reply lands in the slice.
const PHASE: Duration = Duration::from_millis(100);
const PERIOD: Duration = Duration::from_secs(1);

/// One serverStatus reply, parsed.
#[derive(Debug, Clone)]
pub struct StatusReply {
    pub sample: ServerStatusSample,
    pub process: Option<String>,
    pub storage_engine: Option<String>,
}

/// What the poller reports.
#[derive(Debug, Clone)]
pub enum PollEvent {
    /// The once-per-recording facts, and what could not be read.
    Info {
        info: Box<MongodInfo>,
        error: Option<String>,
    },
    /// A serverStatus poll: when it was sent and when it ended.
    Status {
        sent: Instant,
        done: Instant,
        result: Result<Box<StatusReply>, String>,
    },
    /// Replication figures (see [`read_repl`]).
    Repl {
        done: Instant,
        sample: Box<ReplSample>,
    },
    /// The cluster's id (see [`read_cluster_id`]), sent once.
    ClusterId(String),
    /// `serverStatus({tcmalloc: 2})`, flattened under `tcmalloc`.
    Detail {
        done: Instant,
        metrics: BTreeMap<String, i64>,
    },
}

/// A running poller; dropping it (or [`Poller::stop`]) ends the thread.
pub struct Poller {
    rx: mpsc::Receiver<PollEvent>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Poller {
    /// Starts polling `conn`; the schedule counts from `start`.
    pub fn start(conn: &Connection, start: Instant) -> std::io::Result<Poller> {
        let (tx, rx) = mpsc::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel();
        let conn = conn.clone();
        let thread = std::thread::Builder::new()
            .name("mdiag-mongo".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = tx.send(PollEvent::Info {
                            info: Box::default(),
                            error: Some(format!("cannot start the poller's runtime: {e}")),
                        });
                        return;
                    }
                };
                rt.block_on(async move {
                    tokio::select! {
                        _ = stop_rx => {}
                        _ = run(conn, start, tx) => {}
                    }
                });
                // Do not wait for the driver's background tasks.
                rt.shutdown_background();
            })?;
        Ok(Poller {
            rx,
            stop: Some(stop_tx),
            thread: Some(thread),
        })
    }

    /// Everything that arrived since the last call (never blocks).
    pub fn drain(&self) -> Vec<PollEvent> {
        self.rx.try_iter().collect()
    }

    /// Stops the thread; waits at most `grace` for it, then leaves it to end
    /// on its own (a driver call cannot hold the caller).
    pub fn stop(&mut self, grace: Duration) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let deadline = Instant::now() + grace;
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        self.stop(Duration::ZERO);
    }
}

async fn run(conn: Connection, start: Instant, tx: mpsc::Sender<PollEvent>) {
    let redactor = Redactor::for_uri(&conn.uri);
    let client = match client(&conn).await {
        Ok(c) => c,
        Err(e) => {
            let why = redactor.scrub(&format!("cannot use the connection string: {e}"));
            return report_unusable(why, start, &tx).await;
        }
    };
    let info_task = spawn_info(&client, &tx, &redactor);
    let admin = client.database("admin");
    let mut ticks = ticker(start);
    let mut n: u64 = 0;
    // Cleared when the server says it is not a replica-set member.
    let repl_on = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    // Set once the cluster's id was read.
    let id_known = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    loop {
        ticks.tick().await;
        let sent = Instant::now();
        let result = server_status(&admin, &redactor).await;
        // Per-CPU detail only from servers that have a tcmalloc section, and
        // on a task of its own so the per-second poll keeps its pace.
        let detail = result
            .as_ref()
            .is_ok_and(|r| r.sample.sections.iter().any(|s| s == "tcmalloc"));
        if tx
            .send(PollEvent::Status {
                sent,
                done: Instant::now(),
                result,
            })
            .is_err()
        {
            break;
        }
        if detail && n.is_multiple_of(DETAIL_EVERY) {
            spawn_detail(&admin, &tx);
        }
        if n.is_multiple_of(REPL_EVERY) && repl_on.load(std::sync::atomic::Ordering::Relaxed) {
            spawn_repl(&client, &tx, [&repl_on, &id_known]);
        }
        n += 1;
    }
    info_task.abort();
}

/// The connection string cannot be used: says why once as the info, then
/// marks every second with the reason until the receiver is gone.
async fn report_unusable(why: String, start: Instant, tx: &mpsc::Sender<PollEvent>) {
    let _ = tx.send(PollEvent::Info {
        info: Box::default(),
        error: Some(why.clone()),
    });
    let mut ticks = ticker(start);
    loop {
        ticks.tick().await;
        let now = Instant::now();
        if tx
            .send(PollEvent::Status {
                sent: now,
                done: now,
                result: Err(why.clone()),
            })
            .is_err()
        {
            return;
        }
    }
}

/// Reads the server's startup facts (buildInfo, getCmdLineOpts, hostInfo,
/// dbStats) once, on a task of its own.
fn spawn_info(
    client: &Client,
    tx: &mpsc::Sender<PollEvent>,
    redactor: &Redactor,
) -> tokio::task::JoinHandle<()> {
    let (client, tx, redactor) = (client.clone(), tx.clone(), redactor.clone());
    tokio::spawn(async move {
        let (info, error) = match tokio::time::timeout(INFO_TIMEOUT, read_info(&client)).await {
            Ok((info, errors)) => (
                info,
                (!errors.is_empty()).then(|| redactor.scrub(&errors.join("; "))),
            ),
            Err(_) => (
                MongodInfo::default(),
                Some(format!(
                    "buildInfo, getCmdLineOpts, hostInfo and dbStats took longer than {} s",
                    INFO_TIMEOUT.as_secs()
                )),
            ),
        };
        let _ = tx.send(PollEvent::Info {
            info: Box::new(info),
            error,
        });
    })
}

/// One serverStatus, or why there is none (secrets scrubbed).
async fn server_status(
    admin: &mongodb::Database,
    redactor: &Redactor,
) -> Result<Box<StatusReply>, String> {
    match tokio::time::timeout(POLL_TIMEOUT, admin.run_command(doc! { "serverStatus": 1 })).await {
        Ok(Ok(doc)) => parse_reply(&doc),
        Ok(Err(e)) => Err(redactor.scrub(&describe_error(&e))),
        Err(_) => Err(format!(
            "no reply to serverStatus within {} s (server slow or stopped)",
            POLL_TIMEOUT.as_secs()
        )),
    }
}

/// TCMalloc's per-CPU detail (`serverStatus` with `tcmalloc: 2`), on a task
/// of its own; nothing is sent when it does not answer in time.
fn spawn_detail(admin: &mongodb::Database, tx: &mpsc::Sender<PollEvent>) {
    let (admin, tx) = (admin.clone(), tx.clone());
    tokio::spawn(async move {
        let cmd = doc! { "serverStatus": 1, "tcmalloc": 2 };
        if let Ok(Ok(doc)) = tokio::time::timeout(POLL_TIMEOUT, admin.run_command(cmd)).await
            && let Some(metrics) = tcmalloc_detail(&doc)
        {
            let _ = tx.send(PollEvent::Detail {
                done: Instant::now(),
                metrics,
            });
        }
    });
}

/// The replica set's state, on a task of its own; clears `on` when the
/// server is not a member. Until `id_known`, the cluster's id is read
/// after it (a set initiated after the agent started gets one then).
fn spawn_repl(
    client: &Client,
    tx: &mpsc::Sender<PollEvent>,
    [on, id_known]: [&std::sync::Arc<std::sync::atomic::AtomicBool>; 2],
) {
    use std::sync::atomic::Ordering::Relaxed;
    let (client, tx, on, id_known) = (client.clone(), tx.clone(), on.clone(), id_known.clone());
    tokio::spawn(async move {
        match tokio::time::timeout(POLL_TIMEOUT, read_repl(&client)).await {
            Ok(Ok(Some(sample))) => {
                let _ = tx.send(PollEvent::Repl {
                    done: Instant::now(),
                    sample: Box::new(sample),
                });
                if !id_known.load(Relaxed)
                    && let Ok(Some(id)) =
                        tokio::time::timeout(POLL_TIMEOUT, read_cluster_id(&client)).await
                {
                    id_known.store(true, Relaxed);
                    let _ = tx.send(PollEvent::ClusterId(id));
                }
            }
            Ok(Err(NotReplicaSet)) => on.store(false, std::sync::atomic::Ordering::Relaxed),
            // No answer in time, or nothing readable: the next round tries again.
            Ok(Ok(None)) | Err(_) => {}
        }
    });
}

fn ticker(start: Instant) -> tokio::time::Interval {
    let first = (start + PHASE).max(Instant::now());
    let mut t = tokio::time::interval_at(first.into(), PERIOD);
    // A poll that took longer than a second skips the ticks it overran.
    t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    t
}

async fn client(conn: &Connection) -> Result<Client, DriverError> {
    let mut opts = ClientOptions::parse(&conn.uri).await?;
    opts.connect_timeout.get_or_insert(CONNECT_TIMEOUT);
    opts.server_selection_timeout
        .get_or_insert(SELECTION_TIMEOUT);
    opts.app_name.get_or_insert_with(|| "mdiag".into());
    // One named host: talk to that member, whatever its replica-set role.
    if opts.hosts.len() == 1 && opts.repl_set_name.is_none() && !conn.uri.starts_with("mongodb+srv")
    {
        opts.direct_connection.get_or_insert(true);
    }
    Client::with_options(opts)
}

/// The driver's error in plain words, starting with its class.
fn describe_error(e: &DriverError) -> String {
    match e.kind.as_ref() {
        ErrorKind::Authentication { message, .. } => format!("authentication failed: {message}"),
        ErrorKind::ServerSelection { message, .. } => format!("unreachable: {message}"),
        ErrorKind::Command(c) if c.code == 13 || c.code == 18 => {
            format!("not authorised ({}): {}", c.code_name, c.message)
        }
        ErrorKind::Command(c) => format!("command failed ({}): {}", c.code_name, c.message),
        ErrorKind::Io(io) => format!("connection error: {io}"),
        _ => e.to_string(),
    }
}

fn parse_reply(doc: &Document) -> Result<Box<StatusReply>, String> {
    let raw = RawDocumentBuf::try_from(doc).map_err(|e| format!("serverStatus reply: {e}"))?;
    let sample =
        ServerStatusSample::from_document(&raw).map_err(|e| format!("serverStatus reply: {e}"))?;
    Ok(Box::new(StatusReply {
        sample,
        process: doc.get_str("process").ok().map(str::to_owned),
        storage_engine: doc
            .get_document("storageEngine")
            .ok()
            .and_then(|s| s.get_str("name").ok())
            .map(str::to_owned),
    }))
}

/// The `tcmalloc` section flattened, at most [`DETAIL_MAX_METRICS`] metrics.
fn tcmalloc_detail(doc: &Document) -> Option<BTreeMap<String, i64>> {
    let section = doc.get_document("tcmalloc").ok()?;
    let raw = RawDocumentBuf::try_from(section).ok()?;
    let flat = extract(&raw).ok()?;
    Some(
        flat.paths
            .iter()
            .zip(flat.values.iter())
            .take(DETAIL_MAX_METRICS)
            .map(|(p, v)| (p.to_owned(), *v))
            .collect(),
    )
}

/// The server is not a replica-set member (replSetGetStatus answers
/// NoReplicationEnabled, or CommandNotFound from a mongos).
struct NotReplicaSet;

/// replSetGetStatus, the oplog's collStats, the `ts` of its first and
/// last entries and the members' configured delays (replSetGetConfig). A
/// part that fails is left out (a user may lack the right to read
/// `local`); `None` when nothing could be read.
async fn read_repl(client: &Client) -> Result<Option<ReplSample>, NotReplicaSet> {
    let status = match client
        .database("admin")
        .run_command(doc! { "replSetGetStatus": 1 })
        .await
    {
        Ok(d) => Some(d),
        Err(e) => match e.kind.as_ref() {
            // NoReplicationEnabled (a standalone), CommandNotFound (mongos).
            ErrorKind::Command(c) if c.code == 76 || c.code == 59 => return Err(NotReplicaSet),
            _ => None,
        },
    };
    let local = client.database("local");
    let stats = local
        .run_command(doc! { "collStats": "oplog.rs" })
        .await
        .ok();
    let oplog = local.collection::<Document>("oplog.rs");
    let mut ends = [None, None];
    for (end, order) in ends.iter_mut().zip([1, -1]) {
        *end = oplog
            .find_one(doc! {})
            .sort(doc! { "$natural": order })
            .projection(doc! { "ts": 1 })
            .await
            .ok()
            .flatten()
            .and_then(|d| d.get_timestamp("ts").ok())
            .map(|ts| i64::from(ts.time));
    }
    // The members' configured delays (a delayed member lags on purpose).
    let config = client
        .database("admin")
        .run_command(doc! { "replSetGetConfig": 1 })
        .await
        .ok();
    let raw = |d: &Option<Document>| d.as_ref().and_then(|d| RawDocumentBuf::try_from(d).ok());
    let (status, stats) = (raw(&status), raw(&stats));
    let mut sample =
        ReplSample::from_replies(status.as_deref(), stats.as_deref(), (ends[0], ends[1]));
    if let (Some(s), Some(c)) = (sample.as_mut(), config.as_ref()) {
        s.set_delays(&super::repl::member_delays(c));
    }
    Ok(sample)
}

/// The cluster's id as mongodb_exporter's `cl_id` reads it:
/// `config.version`'s `clusterId` (a config server's), else the replica
/// set's `settings.replicaSetId` (replSetGetConfig); hex. `None` when
/// neither is there or readable (the next replication round tries again).
async fn read_cluster_id(client: &Client) -> Option<String> {
    let version = client
        .database("config")
        .collection::<Document>("version")
        .find_one(doc! {})
        .await
        .ok()
        .flatten();
    if let Some(id) = version
        .as_ref()
        .and_then(|d| d.get_object_id("clusterId").ok())
    {
        return Some(id.to_hex());
    }
    let reply = client
        .database("admin")
        .run_command(doc! { "replSetGetConfig": 1 })
        .await
        .ok()?;
    replica_set_id(&reply)
}

/// `config.settings.replicaSetId` of a replSetGetConfig reply, hex.
fn replica_set_id(reply: &Document) -> Option<String> {
    let id = reply
        .get_document("config")
        .ok()?
        .get_document("settings")
        .ok()?
        .get_object_id("replicaSetId")
        .ok()?;
    Some(id.to_hex())
}

/// buildInfo, getCmdLineOpts, hostInfo, mongod's startup warnings, its
/// feature compatibility version and the catalogue sizes; what failed is
/// listed, the rest kept.
async fn read_info(client: &Client) -> (MongodInfo, Vec<String>) {
    let admin = client.database("admin");
    let mut errors = Vec::new();
    let mut get = async |name: &str| match admin.run_command(command(name)).await {
        Ok(d) => Some(d),
        Err(e) => {
            errors.push(format!("{name}: {}", describe_error(&e)));
            None
        }
    };
    let build = get("buildInfo").await;
    let opts = get("getCmdLineOpts").await;
    let host = get("hostInfo").await;
    let mut info = info::from_documents(build.as_ref(), opts.as_ref(), host.as_ref());
    info.startup_warnings = match admin
        .run_command(doc! { "getLog": "startupWarnings" })
        .await
    {
        Ok(reply) => Some(super::startup::from_reply(&reply)),
        Err(e) => {
            errors.push(format!("getLog startupWarnings: {}", describe_error(&e)));
            None
        }
    };
    let fcv = doc! { "getParameter": 1, "featureCompatibilityVersion": 1 };
    match admin.run_command(fcv).await {
        Ok(reply) => (info.fcv, info.fcv_target) = info::fcv(&reply),
        Err(e) => errors.push(format!(
            "getParameter featureCompatibilityVersion: {}",
            describe_error(&e)
        )),
    }
    match catalogue(client).await {
        Ok((dbs, colls, idx)) => {
            info.databases = Some(dbs);
            info.collections = Some(colls);
            info.indexes = Some(idx);
        }
        Err(e) => errors.push(format!("collection and index counts: {e}")),
    }
    (info, errors)
}

fn command(name: &str) -> Document {
    let mut d = Document::new();
    d.insert(name, 1);
    d
}

/// (databases, collections, indexes) summed over dbStats of every database.
async fn catalogue(client: &Client) -> Result<(u64, u64, u64), String> {
    let names = client
        .list_database_names()
        .await
        .map_err(|e| describe_error(&e))?;
    let (mut colls, mut idx) = (0u64, 0u64);
    for name in names.iter().take(MAX_DATABASES) {
        let stats = client
            .database(name)
            .run_command(doc! { "dbStats": 1 })
            .await
            .map_err(|e| format!("dbStats on {name}: {}", describe_error(&e)))?;
        colls += number(&stats, "collections");
        idx += number(&stats, "indexes");
    }
    Ok((names.len() as u64, colls, idx))
}

fn number(doc: &Document, key: &str) -> u64 {
    match doc.get(key) {
        Some(bson::Bson::Int32(i)) => u64::try_from(*i).unwrap_or(0),
        Some(bson::Bson::Int64(i)) => u64::try_from(*i).unwrap_or(0),
        Some(bson::Bson::Double(d)) if *d >= 0.0 => *d as u64,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_replica_set_id_from_its_config() {
        let id = bson::oid::ObjectId::parse_str("6560f0a1b2c3d4e5f6a7b8c9").unwrap();
        let reply =
            doc! { "config": { "_id": "rs0", "settings": { "replicaSetId": id } }, "ok": 1 };
        assert_eq!(
            replica_set_id(&reply).as_deref(),
            Some("6560f0a1b2c3d4e5f6a7b8c9")
        );
        assert_eq!(replica_set_id(&doc! { "config": { "_id": "rs0" } }), None);
        assert_eq!(replica_set_id(&doc! { "ok": 0 }), None);
    }
}
