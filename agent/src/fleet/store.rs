//! The fleet store through the official driver: connects (appName
//! `mdiag-fleet`, a short server selection timeout, `w: "majority"`),
//! creates the collections and indexes idempotently, and writes the
//! spool's records so that writing one twice, or late, changes nothing:
//!
//! - a [`FindingEvent`]: one upsert by the episode's deterministic `_id`
//!   (`$setOnInsert` of the identity and of this event's state,
//!   `$addToSet` of the transition), then `state`/`since`/`expire_at` set
//!   only where the stored `since` is older than the event: a replay is a
//!   no-op and an old event delivered late never regresses an episode;
//! - a [`WindowDoc`]: inserted with a deterministic `_id` into a plain
//!   collection (a duplicate key is "already there"), or, in a time-series
//!   collection (whose `_id` is not unique), inserted unless a document of
//!   the same host, target and time is there (one writer per host, so the
//!   check cannot race with itself);
//! - a [`HostDoc`]: upsert with `$min first_seen`, `$max last_seen`.
//!
//! Window summaries go to a time-series collection when the server makes
//! one, else (the server refuses the options, or the collection already
//! exists as a plain one) to a plain collection with a TTL index on `at`:
//! decided by the server's answer, never by its version.

use std::time::Duration;

use bson::{Bson, Document, doc};
use mongodb::{
    Client, Database,
    error::{Error as DriverError, ErrorKind, WriteFailure},
    options::{Acknowledgment, ClientOptions, DatabaseOptions, WriteConcern},
};

use super::config::FleetConfig;
use super::schema::{
    FINDINGS, FindingEvent, HOSTS, HostDoc, HostFacts, INDEXES, WINDOWS, WindowDoc, window_id,
};
use super::spool::Record;
use crate::mongo::conn::Redactor;

/// How long the driver looks for a server before a write fails (then the
/// record waits in the spool).
pub const SELECTION_TIMEOUT: Duration = Duration::from_secs(2);
/// How long one operation may take, majority acknowledgement included.
pub const OP_TIMEOUT: Duration = Duration::from_secs(10);
/// The window collection's TTL index when it is a plain collection.
pub const WINDOWS_TTL_INDEX: &str = "at_ttl";
/// The index of the window summaries by host, target and time.
pub const WINDOWS_META_INDEX: &str = "meta_at";
const DUPLICATE_KEY: i32 = 11000;
const NAMESPACE_EXISTS: i32 = 48;
const INDEX_OPTIONS_CONFLICT: i32 = 85;
/// What some servers answer instead of 85 for the same name, other options.
const INDEX_KEY_SPECS_CONFLICT: i32 = 86;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("fleet store: {what}: {why}")]
    Driver {
        what: String,
        why: String,
        /// The server's error code, when it answered.
        code: Option<i32>,
        /// The store is unreachable or busy: try again later.
        transient: bool,
    },
    #[error("fleet store: {what}: no answer within {} s", OP_TIMEOUT.as_secs())]
    Timeout { what: String },
    #[error("fleet store: cannot encode {what}: {why}")]
    Encode { what: &'static str, why: String },
}

impl StoreError {
    /// True when the same write may succeed later (the record stays in
    /// the spool); false when the server refused the document itself.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Driver { transient, .. } => *transient,
            StoreError::Timeout { .. } => true,
            StoreError::Encode { .. } => false,
        }
    }
}

/// How the window summaries are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowsKind {
    TimeSeries,
    Plain,
}

/// A connected store whose collections and indexes exist.
#[derive(Debug, Clone)]
pub struct Store {
    db: Database,
    retention: Duration,
    windows: WindowsKind,
    redactor: Redactor,
}

fn encode<T: serde::Serialize>(what: &'static str, v: &T) -> Result<Document, StoreError> {
    bson::serialize_to_document(v).map_err(|e| StoreError::Encode {
        what,
        why: e.to_string(),
    })
}

fn to_millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl Store {
    /// Connects and makes sure the collections and indexes exist (safe to
    /// repeat: same names, same keys).
    pub async fn connect(cfg: &FleetConfig) -> Result<Store, StoreError> {
        let redactor = cfg.redactor();
        let fail = |what: &str, e: DriverError| driver_error(&redactor, what, &e);
        let mut opts = ClientOptions::parse(&cfg.uri)
            .await
            .map_err(|e| fail("cannot use [fleet] uri", e))?;
        opts.app_name = Some("mdiag-fleet".into());
        opts.server_selection_timeout
            .get_or_insert(SELECTION_TIMEOUT);
        opts.connect_timeout.get_or_insert(SELECTION_TIMEOUT);
        let client = Client::with_options(opts).map_err(|e| fail("cannot use [fleet] uri", e))?;
        let wc = WriteConcern::builder()
            .w(Acknowledgment::Majority)
            .w_timeout(OP_TIMEOUT)
            .build();
        let db = client.database_with_options(
            &cfg.database,
            DatabaseOptions::builder().write_concern(wc).build(),
        );
        let mut store = Store {
            db,
            retention: cfg.retention,
            windows: WindowsKind::Plain,
            redactor,
        };
        store.windows = store.ensure_schema(cfg.window_retention).await?;
        Ok(store)
    }

    /// How window summaries are stored on this server.
    pub fn windows_kind(&self) -> WindowsKind {
        self.windows
    }

    /// The database (for tests and the fleet view).
    pub fn database(&self) -> &Database {
        &self.db
    }

    async fn command(&self, what: &str, cmd: Document) -> Result<Document, StoreError> {
        match tokio::time::timeout(OP_TIMEOUT, self.db.run_command(cmd)).await {
            Ok(Ok(d)) => Ok(d),
            Ok(Err(e)) => Err(driver_error(&self.redactor, what, &e)),
            Err(_) => Err(StoreError::Timeout { what: what.into() }),
        }
    }

    /// Creates what is missing; returns how windows are stored.
    async fn ensure_schema(&self, window_retention: Duration) -> Result<WindowsKind, StoreError> {
        for coll in [FINDINGS, HOSTS] {
            self.create(coll, doc! {}).await?;
        }
        for spec in INDEXES {
            let keys: Document = spec
                .keys
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Bson::Int32(*v)))
                .collect();
            let mut index = doc! { "key": keys, "name": spec.name };
            if let Some(secs) = spec.expire_after_secs {
                index.insert("expireAfterSeconds", secs as i64);
            }
            self.create_index(spec.collection, index).await?;
        }
        let ttl = window_retention.as_secs() as i64;
        let kind = self.ensure_windows(ttl).await?;
        let meta = doc! {
            "key": { "meta.host": 1, "meta.target": 1, "at": -1 },
            "name": WINDOWS_META_INDEX,
        };
        self.create_index(WINDOWS, meta).await?;
        if kind == WindowsKind::Plain {
            let index = doc! {
                "key": { "at": 1 }, "name": WINDOWS_TTL_INDEX, "expireAfterSeconds": ttl,
            };
            if let Err(e) = self.create_index(WINDOWS, index).await {
                // Another retention than the index has: change the index.
                if !is_code(&e, INDEX_OPTIONS_CONFLICT) && !is_code(&e, INDEX_KEY_SPECS_CONFLICT) {
                    return Err(e);
                }
                let cmd = doc! {
                    "collMod": WINDOWS,
                    "index": { "name": WINDOWS_TTL_INDEX, "expireAfterSeconds": ttl },
                };
                self.command("collMod windows (window_retention)", cmd)
                    .await?;
            }
        }
        Ok(kind)
    }

    /// A time-series collection for the windows if the server makes one,
    /// else a plain one; an existing collection is used as it is.
    async fn ensure_windows(&self, ttl: i64) -> Result<WindowsKind, StoreError> {
        if let Some((kind, expire)) = self.existing_windows().await? {
            if kind == WindowsKind::TimeSeries && expire != Some(ttl) {
                let cmd = doc! { "collMod": WINDOWS, "expireAfterSeconds": ttl };
                self.command("collMod windows (window_retention)", cmd)
                    .await?;
            }
            return Ok(kind);
        }
        let ts = doc! {
            "timeseries": { "timeField": "at", "metaField": "meta", "granularity": "minutes" },
            "expireAfterSeconds": ttl,
        };
        match self.create(WINDOWS, ts).await {
            Ok(()) => Ok(self
                .existing_windows()
                .await?
                .map_or(WindowsKind::Plain, |(k, _)| k)),
            // Refused by the server (not unreachable): a plain collection.
            Err(e) if !e.is_transient() => {
                self.create(WINDOWS, doc! {}).await?;
                Ok(self
                    .existing_windows()
                    .await?
                    .map_or(WindowsKind::Plain, |(k, _)| k))
            }
            Err(e) => Err(e),
        }
    }

    /// The windows collection's kind and TTL, if it exists.
    async fn existing_windows(&self) -> Result<Option<(WindowsKind, Option<i64>)>, StoreError> {
        let cmd = doc! { "listCollections": 1, "filter": { "name": WINDOWS } };
        let reply = self.command("listCollections", cmd).await?;
        let first = reply
            .get_document("cursor")
            .ok()
            .and_then(|c| c.get_array("firstBatch").ok())
            .and_then(|b| b.first())
            .and_then(Bson::as_document);
        Ok(first.map(|c| {
            let options = c.get_document("options").ok();
            let ts = c.get_str("type").ok() == Some("timeseries")
                || options.is_some_and(|o| o.contains_key("timeseries"));
            let expire = options
                .and_then(|o| o.get("expireAfterSeconds"))
                .and_then(|v| match v {
                    Bson::Int32(n) => Some(i64::from(*n)),
                    Bson::Int64(n) => Some(*n),
                    Bson::Double(f) => Some(*f as i64),
                    _ => None,
                });
            let kind = if ts {
                WindowsKind::TimeSeries
            } else {
                WindowsKind::Plain
            };
            (kind, expire)
        }))
    }

    /// `create`, where "already exists" is success.
    async fn create(&self, coll: &str, options: Document) -> Result<(), StoreError> {
        let mut cmd = doc! { "create": coll };
        cmd.extend(options);
        match self.command(&format!("create {coll}"), cmd).await {
            Err(e) if is_code(&e, NAMESPACE_EXISTS) => Ok(()),
            other => other.map(|_| ()),
        }
    }

    async fn create_index(&self, coll: &str, index: Document) -> Result<(), StoreError> {
        let name = index.get_str("name").unwrap_or_default().to_owned();
        let cmd = doc! { "createIndexes": coll, "indexes": [index] };
        self.command(&format!("index {name} of {coll}"), cmd)
            .await
            .map(|_| ())
    }

    /// Writes one spooled record (idempotently).
    pub async fn write(&self, rec: &Record) -> Result<(), StoreError> {
        match rec {
            Record::Finding(e) => self.write_finding(e).await,
            Record::Window(w) => self.write_window(w).await,
            Record::Host(h) => self.write_host(h).await,
        }
    }

    async fn update(
        &self,
        coll: &str,
        filter: Document,
        update: Document,
        upsert: bool,
    ) -> Result<(), StoreError> {
        let c = self.db.collection::<Document>(coll);
        let op = c.update_one(filter, update).upsert(upsert);
        self.finish(&format!("update of {coll}"), op)
            .await
            .map(|_| ())
    }

    async fn finish<T>(
        &self,
        what: &str,
        op: impl std::future::IntoFuture<Output = mongodb::error::Result<T>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(OP_TIMEOUT, op.into_future()).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(driver_error(&self.redactor, what, &e)),
            Err(_) => Err(StoreError::Timeout { what: what.into() }),
        }
    }

    /// One transition of an episode: appended once, and the episode's
    /// state moved forward only.
    pub async fn write_finding(&self, e: &FindingEvent) -> Result<(), StoreError> {
        let id = e.id();
        let transition = encode("a transition", &e.transition())?;
        let expire_at = (e.to == "resolved").then(|| {
            bson::DateTime::from_millis(
                e.at.timestamp_millis()
                    .saturating_add(to_millis(self.retention)),
            )
        });
        let mut state = doc! { "state": &e.to, "since": e.at, "title": &e.title };
        state.extend(facts_doc(&e.facts)?);
        let mut insert = doc! {
            "host": &e.host,
            "rule": &e.rule,
            "target": &e.target,
            "episode_start": e.episode_start,
        };
        insert.extend(state.clone());
        if let Some(t) = expire_at {
            insert.insert("expire_at", t);
        }
        let first = doc! {
            "$setOnInsert": insert,
            "$addToSet": { "transitions": transition },
        };
        // `host` in the filters: the shard key when `findings` is sharded.
        self.update(FINDINGS, doc! { "_id": &id, "host": &e.host }, first, true)
            .await?;
        // Newer than what is stored: this event's state wins.
        let filter = doc! {
            "_id": &id,
            "host": &e.host,
            "$or": [ { "since": { "$exists": false } }, { "since": { "$lt": e.at } } ],
        };
        let mut newer = doc! {};
        match expire_at {
            Some(t) => {
                state.insert("expire_at", t);
            }
            None => {
                newer.insert("$unset", doc! { "expire_at": "" });
            }
        }
        newer.insert("$set", state);
        self.update(FINDINGS, filter, newer, false).await
    }

    /// One window of one target, once.
    pub async fn write_window(&self, w: &WindowDoc) -> Result<(), StoreError> {
        let mut d = encode("a window", w)?;
        let c = self.db.collection::<Document>(WINDOWS);
        if self.windows == WindowsKind::TimeSeries {
            let filter =
                doc! { "meta.host": &w.meta.host, "meta.target": &w.meta.target, "at": w.at };
            let found = self.finish("find in windows", c.find_one(filter)).await?;
            if found.is_some() {
                return Ok(());
            }
        } else {
            d.insert("_id", window_id(&w.meta.host, &w.meta.target, w.at));
        }
        match self.finish("insert into windows", c.insert_one(d)).await {
            Err(e) if is_code(&e, DUPLICATE_KEY) => Ok(()),
            other => other.map(|_| ()),
        }
    }

    /// The host: facts and targets replaced, first/last seen widened.
    pub async fn write_host(&self, h: &HostDoc) -> Result<(), StoreError> {
        let mut set = facts_doc(&h.facts)?;
        set.insert("targets", h.targets.clone());
        let update = doc! {
            "$set": set,
            "$min": { "first_seen": h.first_seen },
            "$max": { "last_seen": h.last_seen },
        };
        self.update(HOSTS, doc! { "_id": &h.host }, update, true)
            .await
    }
}

/// The host facts as stored (flattened into the document), with the
/// optional facts that are unknown left out.
fn facts_doc(f: &HostFacts) -> Result<Document, StoreError> {
    encode("host facts", f)
}

/// Whether the server answered with `code`.
fn is_code(e: &StoreError, code: i32) -> bool {
    matches!(e, StoreError::Driver { code: Some(c), .. } if *c == code)
}

/// Server codes that say "later" (not primary now, shutting down, a
/// network timeout, not authorised yet): anything else is a refusal.
const TRANSIENT_CODES: &[i32] = &[
    6, 7, 13, 50, 64, 89, 91, 112, 117, 189, 262, 9001, 10107, 11600, 11601, 11602, 13435, 13436,
];

fn driver_error(redactor: &Redactor, what: &str, e: &DriverError) -> StoreError {
    let retry = e.contains_label("RetryableWriteError") || e.contains_label("NetworkError");
    let (why, code, transient) = match e.kind.as_ref() {
        ErrorKind::ServerSelection { message, .. } => {
            (format!("unreachable: {message}"), None, true)
        }
        ErrorKind::Io(io) => (format!("connection error: {io}"), None, true),
        ErrorKind::Authentication { message, .. } => {
            (format!("authentication failed: {message}"), None, true)
        }
        ErrorKind::Command(c) => (
            format!("{} (code {}): {}", c.code_name, c.code, c.message),
            Some(c.code),
            retry || TRANSIENT_CODES.contains(&c.code),
        ),
        ErrorKind::Write(WriteFailure::WriteError(w)) => (
            format!(
                "{} (code {}): {}",
                w.code_name.as_deref().unwrap_or("write error"),
                w.code,
                w.message
            ),
            Some(w.code),
            retry || TRANSIENT_CODES.contains(&w.code),
        ),
        ErrorKind::Write(WriteFailure::WriteConcernError(w)) => (
            format!(
                "write concern {} (code {}): {}",
                w.code_name, w.code, w.message
            ),
            Some(w.code),
            true,
        ),
        ErrorKind::InvalidArgument { message, .. } => (message.clone(), None, false),
        ErrorKind::BsonSerialization(b) => (b.to_string(), None, false),
        _ => (e.to_string(), None, true),
    };
    StoreError::Driver {
        what: what.into(),
        why: redactor.scrub(&why),
        code,
        transient,
    }
}
