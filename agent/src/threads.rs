//! Thread classes: what a thread of mongod does, from its name (`comm`, at
//! most 15 bytes), so that per-thread figures can be grouped the way an SRE
//! thinks about mongod ("the connection threads", "the checkpointer").
//!
//! The names are the ones mongod gives its threads (`setThreadName`,
//! `BackgroundJob::name()`, thread pools' `<pool>-<n>`), one table
//! ([`NAMES`]) from the names mongod 4.0 to 8.0 use. Since 4.4, a name over
//! 15 characters reaches the kernel as its first 7 characters, a dot and its
//! last 7 (`util/concurrency/thread_name.cpp`: "LogicalSessionCacheRefresh"
//! is `Logical.Refresh`), so such a `comm` is matched by its first 7
//! characters; older versions cut names at 15 (`WTCheckpointThr`), which a
//! prefix matches. mongod leaves its main thread unnamed, and WiredTiger
//! names none of its own threads (eviction, log, sweep, capacity, tiered
//! storage servers), so those carry the program's name, `mongod`: class
//! [`WIREDTIGER`]. Anything else is "other", and `tests/root/` lists every
//! name a real mongod 6.0 has so that "other" stays empty for it.

/// Connection (client operation) threads: `conn123`.
pub const CONN: &str = "conn";
pub const CHECKPOINTER: &str = "checkpointer";
pub const JOURNAL_FLUSHER: &str = "journal_flusher";
pub const EVICTION: &str = "eviction";
pub const FTDC: &str = "ftdc";
pub const TTL_MONITOR: &str = "ttl_monitor";
pub const CURSOR_MONITOR: &str = "cursor_monitor";
pub const REPLICATION: &str = "replication";
/// Network accept and service-executor threads.
pub const NETWORK: &str = "network";
/// Other named mongod maintenance threads (session cache, timestamp monitor, ...).
pub const BACKGROUND: &str = "background";
/// Threads named `mongod`: WiredTiger's own (eviction, log, sweep, capacity
/// servers), which it does not name, and mongod's main thread, which only
/// waits for shutdown once the server runs.
pub const WIREDTIGER: &str = "wiredtiger";
pub const OTHER: &str = "other";

/// Every class, in the order reports list them.
pub const CLASSES: [&str; 12] = [
    CONN,
    CHECKPOINTER,
    JOURNAL_FLUSHER,
    EVICTION,
    FTDC,
    TTL_MONITOR,
    CURSOR_MONITOR,
    REPLICATION,
    NETWORK,
    BACKGROUND,
    WIREDTIGER,
    OTHER,
];

/// mongod's thread names (or the prefix of a family of names, such as a
/// pool's `OplogApplier-<n>`) and their class. A name of 7 characters or
/// more also matches the abbreviated `comm` of any longer name that starts
/// with its first 7 (see the module header); `no_two_classes_share_a_stem`
/// checks that this never makes a name ambiguous.
pub const NAMES: &[(&str, &str)] = &[
    ("Checkpointer", CHECKPOINTER),
    ("WTCheckpointThread", CHECKPOINTER),
    ("JournalFlusher", JOURNAL_FLUSHER),
    ("WTJournalFlusher", JOURNAL_FLUSHER),
    ("WTOplogJournalThread", JOURNAL_FLUSHER),
    ("TTLMonitor", TTL_MONITOR),
    ("clientcursormon", CURSOR_MONITOR),
    // Replication: applying, fetching, the coordinator and its executors.
    ("OplogApplier", REPLICATION),
    ("ApplyBatchFinalizerForJournal", REPLICATION),
    ("ReplBatcher", REPLICATION),
    ("BackgroundSync", REPLICATION),
    ("rsBackgroundSync", REPLICATION),
    ("rsSync", REPLICATION),
    ("ReplWriterWorker", REPLICATION),
    ("repl", REPLICATION),
    ("SyncSourceFeedback", REPLICATION),
    ("ReplCoord", REPLICATION),
    ("ReplNetwork", REPLICATION),
    ("ReplNodeDbWorker", REPLICATION),
    ("OplogCapMaintainerThread", REPLICATION),
    ("OplogVisibilityThread", REPLICATION),
    ("NoopWriter", REPLICATION),
    ("MirrorMaestro", REPLICATION),
    ("TopologyVersionObserver", REPLICATION),
    // Accepting connections and running their work.
    ("listener", NETWORK),
    ("NetworkInterface", NETWORK),
    ("ServiceExecutor", NETWORK),
    ("asio", NETWORK),
    ("ingress", NETWORK),
    // Other maintenance.
    ("initandlisten", BACKGROUND),
    ("LogicalSessionCacheRefresh", BACKGROUND),
    ("LogicalSessionCacheReap", BACKGROUND),
    ("TimestampMonitor", BACKGROUND),
    ("WTIdleSessionSweeper", BACKGROUND),
    ("PeriodicTaskRunner", BACKGROUND),
    ("DeadlineMonitor", BACKGROUND),
    ("abortExpiredTransactions", BACKGROUND),
    ("FlowControlRefresher", BACKGROUND),
    ("SignalHandler", BACKGROUND),
    ("waitForMajority", BACKGROUND),
    ("monitoring-keys-for-HMAC", BACKGROUND),
    ("startPeriodicThreadToAbortExpiredTransactions", BACKGROUND),
    ("CertificateExpirationMonitor", BACKGROUND),
    ("ChangeStreamExpiredPreImagesRemover", BACKGROUND),
    ("FreeMon", BACKGROUND),
    ("OCSPManagerHTTP", BACKGROUND),
    ("SessionKiller", BACKGROUND),
    ("ShardSplitDonorService", BACKGROUND),
    ("TenantMigration", BACKGROUND),
    ("TenantFileImporterService", BACKGROUND),
    ("FLECrud", BACKGROUND),
    ("AuthorizationManager", BACKGROUND),
    ("ReadWriteConcernDefaults", BACKGROUND),
    ("WaitForMajorityService", BACKGROUND),
];

/// How many characters of a long name mongod keeps before the dot.
const STEM: usize = 7;

/// mongod's class of a thread named `comm` ([`OTHER`] for a name that is not one
/// of mongod's; `rules::facts::thread_class` names those too, for per-class figures).
pub fn mongod_class(comm: &str) -> &'static str {
    let name = comm.trim_end_matches('\0').trim();
    if let Some(rest) = name.strip_prefix("conn")
        && (rest.is_empty() || rest.bytes().all(|b| b.is_ascii_digit()))
    {
        return CONN;
    }
    if name.to_ascii_lowercase().contains("evict") {
        return EVICTION;
    }
    if name == "ftdc" {
        return FTDC;
    }
    if name == "mongod" {
        return WIREDTIGER;
    }
    let stem = abbreviated_stem(name);
    NAMES
        .iter()
        .find(|(known, _)| match stem {
            Some(stem) => known.len() >= STEM && known.as_bytes()[..STEM] == *stem.as_bytes(),
            // Before 4.4 a long name was cut at 15 ("WTCheckpointThr").
            None => name.starts_with(known) || (name.len() == 15 && known.starts_with(name)),
        })
        .map_or(OTHER, |(_, class)| class)
}

/// The first 7 characters of a name mongod abbreviated ("Logical.Refresh").
fn abbreviated_stem(name: &str) -> Option<&str> {
    (name.len() == 2 * STEM + 1 && name.as_bytes()[STEM] == b'.').then(|| &name[..STEM])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mongod_thread_names_map_to_their_class() {
        for (comm, class) in [
            ("conn1", CONN),
            ("conn123456", CONN),
            ("Checkpointer", CHECKPOINTER),
            ("WTCheckpointThr", CHECKPOINTER),
            ("JournalFlusher", JOURNAL_FLUSHER),
            ("WTJournalFlushe", JOURNAL_FLUSHER),
            ("WTOplogJournalT", JOURNAL_FLUSHER),
            ("WTEvictionThrea", EVICTION),
            ("wt-evict-2", EVICTION),
            ("ftdc", FTDC),
            ("TTLMonitor", TTL_MONITOR),
            ("clientcursormon", CURSOR_MONITOR),
            ("OplogApplier-0", REPLICATION),
            ("ReplBatcher", REPLICATION),
            ("BackgroundSync", REPLICATION),
            ("listener", NETWORK),
            ("initandlisten", BACKGROUND),
            ("LogicalSessionC", BACKGROUND),
            ("TimestampMonitor", BACKGROUND),
            // mongod 6.0.5's abbreviated names, as /proc shows them.
            ("Logical.Refresh", BACKGROUND),
            ("Logical.cheReap", BACKGROUND),
            ("WTIdleS.Sweeper", BACKGROUND),
            ("FlowCon.fresher", BACKGROUND),
            ("ReplCoo.xtern-0", REPLICATION),
            ("OplogCa.plog.rs", REPLICATION),
            ("Backgro.kSource", REPLICATION),
            ("ApplyBa.Journal", REPLICATION),
            ("Service.Fixed-0", NETWORK),
            ("TenantM.rvice-1", BACKGROUND),
            ("ReplCoord-1", REPLICATION),
            ("Authori.nager-0", BACKGROUND),
            ("ReadWri.aults-0", BACKGROUND),
            ("WaitFor.dPool-1", BACKGROUND),
            ("mongod", WIREDTIGER),
        ] {
            assert_eq!(mongod_class(comm), class, "{comm}");
        }
    }

    #[test]
    fn no_two_classes_share_a_stem() {
        for (a, ca) in NAMES {
            for (b, cb) in NAMES {
                if a.len() >= STEM && b.len() >= STEM && a[..STEM] == b[..STEM] {
                    assert_eq!(ca, cb, "{a} and {b} abbreviate alike but differ in class");
                }
            }
        }
    }

    #[test]
    fn everything_else_is_other() {
        for comm in [
            "connector",
            "conn-x",
            "",
            "python3",
            "kworker/0:1",
            "ftdc2",
            "wtcheckpoint",
            "Unknown.Abbrevd",
            "mongodb",
        ] {
            assert_eq!(mongod_class(comm), OTHER, "{comm:?}");
        }
        // NUL padding and surrounding blanks are ignored.
        assert_eq!(mongod_class("conn7\0\0\0"), CONN);
        assert!(CLASSES.contains(&mongod_class("anything")));
    }
}
