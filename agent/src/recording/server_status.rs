//! What a recording keeps of one serverStatus document
//! ([`ServerStatusSample`]): one `Option<i64>` per figure, declared with the
//! dotted paths it is read from ([`PATHS`]), so the one parser
//! (`mongo/status.rs`: live replies and FTDC samples) and the recording
//! format agree by construction. Only the type and its figures live here,
//! below everything that reads or writes a recording.

use serde::{Deserialize, Serialize};

/// Declares [`ServerStatusSample`]: one `Option<i64>` per figure, with the
/// paths it is read from (first present wins).
macro_rules! sample_fields {
    ($( $(#[doc = $doc:literal])* $field:ident : [$($path:literal),+ $(,)?] ;)*) => {
        /// The figures of one serverStatus document that rules and the report
        /// use; `None` when the document did not have them. Doubles are
        /// truncated to integers, booleans are 0/1 (as FTDC stores them).
        #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(default, deny_unknown_fields)]
        pub struct ServerStatusSample {
            /// Top-level sections of the document that hold metrics ("opcounters", "wiredTiger", ...), sorted.
            pub sections: Vec<String>,
            $( $(#[doc = $doc])* #[serde(skip_serializing_if = "Option::is_none")] pub $field: Option<i64>, )*
        }

        impl ServerStatusSample {
            /// Reads every figure through `lookup` (a dotted path → value).
            pub fn parse_with(lookup: &dyn Fn(&str) -> Option<i64>, sections: Vec<String>) -> Self {
                Self {
                    sections,
                    $( $field: [$($path),+].iter().find_map(|p| lookup(p)), )*
                }
            }
        }

        /// Every path any figure is read from.
        pub const PATHS: &[&str] = &[ $($($path),+),* ];
    };
}

sample_fields! {
    /// `uptimeMillis`.
    uptime_ms: ["uptimeMillis"];
    /// `opcounters.*`: operations since start (counters).
    op_insert: ["opcounters.insert"];
    op_query: ["opcounters.query"];
    op_update: ["opcounters.update"];
    op_delete: ["opcounters.delete"];
    op_getmore: ["opcounters.getmore"];
    op_command: ["opcounters.command"];
    /// `connections.*`.
    connections_current: ["connections.current"];
    connections_available: ["connections.available"];
    connections_total_created: ["connections.totalCreated"];
    connections_active: ["connections.active"];
    /// `globalLock.currentQueue.*`: operations queued for the global lock / tickets.
    queue_total: ["globalLock.currentQueue.total"];
    queue_readers: ["globalLock.currentQueue.readers"];
    queue_writers: ["globalLock.currentQueue.writers"];
    /// `globalLock.activeClients.*`.
    active_readers: ["globalLock.activeClients.readers"];
    active_writers: ["globalLock.activeClients.writers"];
    /// Read / write execution tickets in use and available (`wiredTiger.concurrentTransactions` up to 7.x, `queues.execution` from 7.0).
    tickets_read_out: ["wiredTiger.concurrentTransactions.read.out", "queues.execution.read.out"];
    tickets_read_available: ["wiredTiger.concurrentTransactions.read.available", "queues.execution.read.available"];
    tickets_write_out: ["wiredTiger.concurrentTransactions.write.out", "queues.execution.write.out"];
    tickets_write_available: ["wiredTiger.concurrentTransactions.write.available", "queues.execution.write.available"];
    /// `mem.resident` / `mem.virtual`, MiB.
    mem_resident_mb: ["mem.resident"];
    mem_virtual_mb: ["mem.virtual"];
    /// `extra_info.*` (Linux): CPU time, faults, threads.
    user_time_us: ["extra_info.user_time_us"];
    system_time_us: ["extra_info.system_time_us"];
    page_faults: ["extra_info.page_faults"];
    threads: ["extra_info.threads"];
    /// `tcmalloc.usingPerCPUCaches` (Google TCMalloc only; 0/1).
    tcmalloc_per_cpu_caches: ["tcmalloc.usingPerCPUCaches"];
    /// `tcmalloc.tcmalloc.cpu_free`: bytes in per-CPU caches (Google TCMalloc; > 0 when they really work).
    tcmalloc_cpu_free: ["tcmalloc.tcmalloc.cpu_free"];
    /// `tcmalloc.maxPerCPUCacheSizeBytes`: the capacity of each CPU's cache (Google TCMalloc; 0 = the caches hold nothing).
    tcmalloc_max_per_cpu_cache: ["tcmalloc.maxPerCPUCacheSizeBytes"];
    tcmalloc_allocated_bytes: ["tcmalloc.generic.current_allocated_bytes"];
    tcmalloc_heap_size: ["tcmalloc.generic.heap_size"];
    tcmalloc_pageheap_free_bytes: ["tcmalloc.tcmalloc.pageheap_free_bytes"];
    tcmalloc_pageheap_unmapped_bytes: ["tcmalloc.tcmalloc.pageheap_unmapped_bytes"];
    tcmalloc_central_cache_free: ["tcmalloc.tcmalloc.central_cache_free", "tcmalloc.tcmalloc.central_cache_free_bytes"];
    tcmalloc_transfer_cache_free: ["tcmalloc.tcmalloc.transfer_cache_free", "tcmalloc.tcmalloc.transfer_cache_free_bytes"];
    tcmalloc_thread_cache_free: ["tcmalloc.tcmalloc.thread_cache_free", "tcmalloc.tcmalloc.thread_cache_free_bytes"];
    /// gperftools: `tcmalloc.tcmalloc.spinlock_total_delay_ns`.
    tcmalloc_spinlock_delay_ns: ["tcmalloc.tcmalloc.spinlock_total_delay_ns"];
    /// `wiredTiger.cache`: size and fill.
    cache_max_bytes: ["wiredTiger.cache.maximum bytes configured"];
    cache_bytes: ["wiredTiger.cache.bytes currently in the cache"];
    cache_dirty_bytes: ["wiredTiger.cache.tracked dirty bytes in the cache"];
    cache_bytes_read: ["wiredTiger.cache.bytes read into cache"];
    cache_bytes_written: ["wiredTiger.cache.bytes written from cache"];
    /// Pages evicted by application threads (they do eviction work when the cache is too full).
    cache_app_evicted_pages: ["wiredTiger.cache.pages evicted by application threads"];
    cache_app_evict_time_us: ["wiredTiger.cache.application thread time evicting (usecs)", "wiredTiger.thread-yield.application thread time evicting (usecs)"];
    cache_app_wait_time_us: ["wiredTiger.thread-yield.application thread time waiting for cache (usecs)"];
    cache_worker_evicted_pages: ["wiredTiger.cache.eviction worker thread evicting pages"];
    cache_modified_evicted: ["wiredTiger.cache.modified pages evicted"];
    cache_unmodified_evicted: ["wiredTiger.cache.unmodified pages evicted"];
    cache_aggressive: ["wiredTiger.cache.eviction currently operating in aggressive mode"];
    /// Checkpoints (8.x `wiredTiger.checkpoint`, ≤7.0 `wiredTiger.transaction`).
    checkpoints: ["wiredTiger.checkpoint.total succeed number of checkpoints", "wiredTiger.checkpoint.number of checkpoints", "wiredTiger.transaction.transaction checkpoints"];
    checkpoint_running: ["wiredTiger.checkpoint.currently running", "wiredTiger.checkpoint.prepare currently running", "wiredTiger.transaction.transaction checkpoint currently running"];
    checkpoint_most_recent_ms: ["wiredTiger.checkpoint.most recent time (msecs)", "wiredTiger.transaction.transaction checkpoint most recent time (msecs)"];
    checkpoint_max_ms: ["wiredTiger.checkpoint.max time (msecs)", "wiredTiger.transaction.transaction checkpoint max time (msecs)"];
    checkpoint_total_ms: ["wiredTiger.checkpoint.total time (msecs)", "wiredTiger.transaction.transaction checkpoint total time (msecs)"];
    /// `wiredTiger.lock`: application threads' wait times (µs, counters).
    lock_checkpoint_wait_us: ["wiredTiger.lock.checkpoint lock application thread wait time (usecs)"];
    lock_dhandle_wait_us: ["wiredTiger.lock.dhandle lock application thread time waiting (usecs)"];
    lock_schema_wait_us: ["wiredTiger.lock.schema lock application thread wait time (usecs)"];
    lock_txn_global_wait_us: ["wiredTiger.lock.txn global lock application thread time waiting (usecs)"];
    /// `metrics.queryExecutor` / `metrics.document` / `metrics.operation`:
    /// index keys and documents examined, documents returned, in-memory
    /// sorts (counters): how well queries are targeted.
    query_scanned_keys: ["metrics.queryExecutor.scanned"];
    query_scanned_objects: ["metrics.queryExecutor.scannedObjects"];
    query_collection_scans: ["metrics.queryExecutor.collectionScans.total"];
    docs_returned: ["metrics.document.returned"];
    scan_and_order: ["metrics.operation.scanAndOrder"];
    /// `flowControl`: time writes waited for flow-control tickets (µs,
    /// counter), and whether the majority commit point lags now (0/1).
    flow_control_acquiring_us: ["flowControl.timeAcquiringMicros"];
    flow_control_lagged: ["flowControl.isLagged"];
    /// `wiredTiger.log`: journal syncs and their time (µs), counters.
    journal_syncs: ["wiredTiger.log.log sync operations"];
    journal_sync_us: ["wiredTiger.log.log sync time duration (usecs)"];
    /// Execution admission (6.1+): time operations waited in the queue for
    /// an execution ticket, µs summed over operations (counters), by kind
    /// and priority; `queues.execution` from 8.0,
    /// `wiredTiger.concurrentTransactions` before.
    admission_read_queued_us: ["queues.execution.read.normalPriority.totalTimeQueuedMicros", "wiredTiger.concurrentTransactions.read.normalPriority.totalTimeQueuedMicros"];
    admission_read_low_queued_us: ["queues.execution.read.lowPriority.totalTimeQueuedMicros", "wiredTiger.concurrentTransactions.read.lowPriority.totalTimeQueuedMicros"];
    admission_write_queued_us: ["queues.execution.write.normalPriority.totalTimeQueuedMicros", "wiredTiger.concurrentTransactions.write.normalPriority.totalTimeQueuedMicros"];
    admission_write_low_queued_us: ["queues.execution.write.lowPriority.totalTimeQueuedMicros", "wiredTiger.concurrentTransactions.write.lowPriority.totalTimeQueuedMicros"];
    /// `asserts.*`: assertions raised since start (counters; all reset to
    /// 0 when one reaches 2^30, and `rollovers` grows): `regular` by the
    /// server's `verify`, `msg` by `massert`, `tripwire` (newer servers) by
    /// `tassert` (its own checks of invariants), `user` by `uassert`
    /// (errors of the request: a duplicate key, a bad query).
    asserts_regular: ["asserts.regular"];
    asserts_msg: ["asserts.msg"];
    asserts_tripwire: ["asserts.tripwire"];
    asserts_user: ["asserts.user"];
    /// `wiredTiger.data-handle`.
    dhandles_active: ["wiredTiger.data-handle.connection data handles currently active"];
    dhandle_sweeps: ["wiredTiger.data-handle.connection sweeps"];
}

impl ServerStatusSample {
    /// Whether per-CPU caches really work: `usingPerCPUCaches` and
    /// `cpu_free > 0` (MongoDB's own check); `None` without Google TCMalloc.
    pub fn per_cpu_caches_active(&self) -> Option<bool> {
        let using = self.tcmalloc_per_cpu_caches?;
        Some(using != 0 && self.tcmalloc_cpu_free.unwrap_or(0) > 0)
    }

    /// Operations of every kind (opcounters summed), when any is present.
    pub fn ops_total(&self) -> Option<i64> {
        let all = [
            self.op_insert,
            self.op_query,
            self.op_update,
            self.op_delete,
            self.op_getmore,
            self.op_command,
        ];
        all.iter()
            .any(Option::is_some)
            .then(|| all.iter().flatten().sum())
    }
}
