//! Thread classes: what a thread of mongod does, from its name (`comm`, at
//! most 15 bytes), so that per-thread figures can be grouped the way an SRE
//! thinks about mongod ("the connection threads", "the checkpointer").
//!
//! The names are the ones mongod gives its threads (`setThreadName` and
//! `BackgroundJob::name()`): `conn123` per client connection, `Checkpointer`
//! and `JournalFlusher` (4.4+; `WTCheckpointThr`, `WTJournalFlusher` and
//! `WTOplogJournalThread` before), `ftdc`, `TTLMonitor`, `clientcursormon`,
//! the replication threads, and WiredTiger's eviction threads. Anything else
//! is "other".

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
pub const OTHER: &str = "other";

/// Every class, in the order reports list them.
pub const CLASSES: [&str; 11] = [
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
    OTHER,
];

/// The class of a thread named `comm`.
pub fn thread_class(comm: &str) -> &'static str {
    let name = comm.trim_end_matches('\0').trim();
    let lower = name.to_ascii_lowercase();
    let starts = |p: &str| name.starts_with(p);
    if let Some(rest) = name.strip_prefix("conn")
        && (rest.is_empty() || rest.bytes().all(|b| b.is_ascii_digit()))
    {
        return CONN;
    }
    if starts("Checkpointer") || starts("WTCheckpoint") {
        return CHECKPOINTER;
    }
    if starts("JournalFlusher") || starts("WTJournalFlush") || starts("WTOplogJournal") {
        return JOURNAL_FLUSHER;
    }
    if lower.contains("evict") {
        return EVICTION;
    }
    if lower == "ftdc" {
        return FTDC;
    }
    if starts("TTLMonitor") {
        return TTL_MONITOR;
    }
    if starts("clientcursormon") {
        return CURSOR_MONITOR;
    }
    const REPL: [&str; 10] = [
        "OplogApplier",
        "ReplBatcher",
        "BackgroundSync",
        "rsBackgroundSync",
        "rsSync",
        "ReplWriterWorker",
        "repl",
        "SyncSourceFeedback",
        "ReplCoord",
        "OplogCapMaintain",
    ];
    if REPL.iter().any(|p| starts(p)) {
        return REPLICATION;
    }
    const NET: [&str; 5] = [
        "listener",
        "NetworkInterface",
        "ServiceExecutor",
        "asio",
        "ingress",
    ];
    if NET.iter().any(|p| starts(p)) {
        return NETWORK;
    }
    const BG: [&str; 12] = [
        "initandlisten",
        "LogicalSessionC",
        "TimestampMonitor",
        "WTIdleSessionSw",
        "PeriodicTaskRun",
        "DeadlineMonitor",
        "abortExpiredTra",
        "FlowControlRefr",
        "SignalHandler",
        "waitForMajority",
        "monitoring-keys",
        "startPeriodicTh",
    ];
    if BG.iter().any(|p| starts(p)) {
        return BACKGROUND;
    }
    OTHER
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
        ] {
            assert_eq!(thread_class(comm), class, "{comm}");
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
        ] {
            assert_eq!(thread_class(comm), OTHER, "{comm:?}");
        }
        // NUL padding and surrounding blanks are ignored.
        assert_eq!(thread_class("conn7\0\0\0"), CONN);
        assert!(CLASSES.contains(&thread_class("anything")));
    }
}
