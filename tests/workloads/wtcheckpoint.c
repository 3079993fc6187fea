/*
 * mdiag-wtcheckpoint: a WiredTiger workload with known checkpoints, for the
 * root test of the wiredtiger probe family (tests/root/wiredtiger.rs, which
 * compiles it with the system C compiler: cc ... -lwiredtiger -pthread).
 *
 * Opens (creates) a database in --home, creates a table, prints "ready" and
 * waits for a line on stdin (the test attaches in between). Then writer
 * threads insert into the table while one thread runs
 * session->checkpoint(session, NULL) --checkpoints times, --interval-ms apart,
 * timing each call itself with CLOCK_MONOTONIC (the clock of the kernel's
 * bpf_ktime_get_ns). It prints one JSON line with its own numbers, then waits
 * for stdin to close before closing the connection (the close checkpoints
 * again, after the test has read what it needs).
 *
 * With --no-hold (for `mdiag record -- CMD`, which holds it itself) it neither
 * prints "ready" nor reads stdin, closes the connection right after its
 * checkpoints, timing the close too (the close checkpoints once more), and
 * prints the JSON line last, with "close_start_ns"/"close_end_ns".
 *
 * With --checkpointers 2, two threads start each checkpoint at the same
 * moment (a barrier per round): WiredTiger serialises them on its checkpoint
 * lock, so one waits for the other's whole checkpoint (checkpoints then holds
 * 2 × N entries). --stats opens WiredTiger with statistics=(all) and adds
 * "stats" with WiredTiger's own lock wait times (usecs) to the JSON line.
 * Threads are named as mongod names its own: writers "connN", checkpoint
 * threads "Checkpointer"; "checkpoint_tids" lists the latter.
 *
 * Usage: mdiag-wtcheckpoint --home DIR [--checkpoints N] [--interval-ms MS] [--writers W]
 *        [--checkpointers 1|2] [--stats] [--no-hold]
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <wiredtiger.h>

#define MAX_CHECKPOINTS 1000
#define MAX_WRITERS 64

static WT_CONNECTION *conn;
static atomic_int stop;
static atomic_ullong inserts;
static int n_checkpoints = 8, interval_ms = 150, n_writers = 3, hold = 1;
static int n_checkpointers = 1, stats = 0;
static pthread_barrier_t round_barrier;
static atomic_int n_done;

struct ckpt {
    uint64_t start_ns, end_ns;
    /* The thread's own CPU time during the call: the rest of the call's
     * wall time it was off the CPU (preempted, waiting to run, asleep). */
    uint64_t cpu_ns;
    int ret;
};
static struct ckpt ckpts[2 * MAX_CHECKPOINTS];
static pid_t ckpt_tids[2];

static void die(const char *what, int ret) {
    fprintf(stderr, "mdiag-wtcheckpoint: %s: %s\n", what, wiredtiger_strerror(ret));
    exit(1);
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *writer(void *arg) {
    int64_t id = (int64_t)(intptr_t)arg;
    WT_SESSION *s;
    WT_CURSOR *c;
    int ret;
    char value[200], name[16];
    snprintf(name, sizeof(name), "conn%d", (int)id + 1);
    pthread_setname_np(pthread_self(), name);
    if ((ret = conn->open_session(conn, NULL, NULL, &s)) != 0)
        die("open_session", ret);
    if ((ret = s->open_cursor(s, "table:ckpt", NULL, NULL, &c)) != 0)
        die("open_cursor", ret);
    memset(value, 'v', sizeof(value) - 1);
    value[sizeof(value) - 1] = '\0';
    for (int64_t i = 0; !atomic_load(&stop); i++) {
        c->set_key(c, id * 1000000000LL + i);
        c->set_value(c, value);
        if ((ret = c->insert(c)) != 0)
            die("insert", ret);
        atomic_fetch_add(&inserts, 1);
        if (i % 100 == 99)
            usleep(200); /* a steady, moderate write load */
    }
    s->close(s, NULL);
    return NULL;
}

static void *checkpointer(void *arg) {
    int me = (int)(intptr_t)arg;
    WT_SESSION *s;
    int ret;
    pthread_setname_np(pthread_self(), "Checkpointer");
    ckpt_tids[me] = (pid_t)syscall(SYS_gettid);
    if ((ret = conn->open_session(conn, NULL, NULL, &s)) != 0)
        die("open_session", ret);
    for (int i = 0; i < n_checkpoints; i++) {
        if (me == 0)
            usleep((useconds_t)interval_ms * 1000);
        if (n_checkpointers > 1)
            pthread_barrier_wait(&round_barrier);
        uint64_t start = now_ns();
        uint64_t cpu0 = thread_cpu_ns();
        int r = s->checkpoint(s, NULL);
        uint64_t cpu1 = thread_cpu_ns();
        uint64_t end = now_ns();
        int slot = atomic_fetch_add(&n_done, 1);
        ckpts[slot].start_ns = start;
        ckpts[slot].end_ns = end;
        ckpts[slot].cpu_ns = cpu1 - cpu0;
        ckpts[slot].ret = r;
        /* End of round: poll (sleeping, not a futex wait) so that the only
         * futex waits of these threads are WiredTiger's own lock waits. */
        while (n_checkpointers > 1 && atomic_load(&n_done) < (i + 1) * n_checkpointers)
            usleep(200);
    }
    s->close(s, NULL);
    return NULL;
}

/* One connection statistic (WT_STAT_CONN_*), -1 when unreadable. */
static int64_t stat_of(WT_SESSION *s, int key) {
    WT_CURSOR *c;
    const char *desc, *pvalue;
    int64_t value = -1;
    if (s->open_cursor(s, "statistics:", NULL, NULL, &c) != 0)
        return -1;
    c->set_key(c, key);
    if (c->search(c) == 0 && c->get_value(c, &desc, &pvalue, &value) != 0)
        value = -1;
    c->close(c);
    return value;
}

int main(int argc, char **argv) {
    const char *home = NULL;
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "--no-hold")) {
            hold = 0;
            i--;
        } else if (!strcmp(argv[i], "--stats")) {
            stats = 1;
            i--;
        } else if (i + 1 >= argc) {
            fprintf(stderr, "mdiag-wtcheckpoint: %s needs a value\n", argv[i]);
            return 2;
        } else if (!strcmp(argv[i], "--home"))
            home = argv[i + 1];
        else if (!strcmp(argv[i], "--checkpoints"))
            n_checkpoints = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--interval-ms"))
            interval_ms = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--writers"))
            n_writers = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--checkpointers"))
            n_checkpointers = atoi(argv[i + 1]);

        else {
            fprintf(stderr, "mdiag-wtcheckpoint: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (!home || n_checkpoints < 0 || n_checkpoints > MAX_CHECKPOINTS || n_writers < 0 ||
        n_writers > MAX_WRITERS || n_checkpointers < 1 || n_checkpointers > 2) {
        fprintf(stderr, "usage: mdiag-wtcheckpoint --home DIR [--checkpoints N<=%d] "
                        "[--interval-ms MS] [--writers W<=%d] [--checkpointers 1|2] [--stats]\n",
                MAX_CHECKPOINTS, MAX_WRITERS);
        return 2;
    }
    int ret;
    WT_SESSION *s;
    if ((ret = wiredtiger_open(home, NULL,
                               stats ? "create,cache_size=200MB,statistics=(all)"
                                     : "create,cache_size=200MB",
                               &conn)) != 0)
        die("wiredtiger_open", ret);
    if ((ret = conn->open_session(conn, NULL, NULL, &s)) != 0)
        die("open_session", ret);
    if ((ret = s->create(s, "table:ckpt", "key_format=q,value_format=S")) != 0)
        die("create", ret);

    /* Where WiredTiger's code lives, as the dynamic loader found it. */
    Dl_info info;
    const char *library = "";
    if (dladdr((void *)wiredtiger_open, &info) && info.dli_fname)
        library = info.dli_fname;

    char line[64];
    if (hold) {
        printf("ready\n");
        fflush(stdout);
        if (!fgets(line, sizeof(line), stdin))
            return 0;
    }

    pthread_t writers[MAX_WRITERS], ck[2];
    pthread_barrier_init(&round_barrier, NULL, (unsigned)n_checkpointers);
    for (int i = 0; i < n_writers; i++)
        pthread_create(&writers[i], NULL, writer, (void *)(intptr_t)i);
    for (int i = 0; i < n_checkpointers; i++)
        pthread_create(&ck[i], NULL, checkpointer, (void *)(intptr_t)i);
    for (int i = 0; i < n_checkpointers; i++)
        pthread_join(ck[i], NULL);
    atomic_store(&stop, 1);
    for (int i = 0; i < n_writers; i++)
        pthread_join(writers[i], NULL);

    /* WiredTiger's own lock statistics, read before any close. */
    int64_t st_app = -1, st_int = -1, st_schema = -1;
    if (stats) {
        st_app = stat_of(s, WT_STAT_CONN_LOCK_CHECKPOINT_WAIT_APPLICATION);
        st_int = stat_of(s, WT_STAT_CONN_LOCK_CHECKPOINT_WAIT_INTERNAL);
        st_schema = stat_of(s, WT_STAT_CONN_LOCK_SCHEMA_WAIT_APPLICATION);
    }

    uint64_t close_start = 0, close_end = 0;
    if (!hold) {
        s->close(s, NULL);
        close_start = now_ns();
        if ((ret = conn->close(conn, NULL)) != 0)
            die("close", ret);
        close_end = now_ns();
    }
    printf("{\"close_start_ns\":%" PRIu64 ",\"close_end_ns\":%" PRIu64 ",", close_start, close_end);
    if (stats)
        printf("\"stats\":{\"checkpoint_lock_application_wait_us\":%" PRId64
               ",\"checkpoint_lock_internal_wait_us\":%" PRId64
               ",\"schema_lock_application_wait_us\":%" PRId64 "},",
               st_app, st_int, st_schema);
    printf("\"checkpoint_tids\":[%d,%d],", (int)ckpt_tids[0], (int)ckpt_tids[1]);
    printf("\"pid\":%d,\"checkpoint_tid\":%d,\"library\":\"%s\",\"inserts\":%llu,\"checkpoints\":[",
           (int)getpid(), (int)ckpt_tids[0], library, (unsigned long long)atomic_load(&inserts));
    for (int i = 0; i < atomic_load(&n_done); i++)
        printf("%s{\"start_ns\":%" PRIu64 ",\"end_ns\":%" PRIu64 ",\"cpu_ns\":%" PRIu64
               ",\"ret\":%d}",
               i ? "," : "", ckpts[i].start_ns, ckpts[i].end_ns, ckpts[i].cpu_ns, ckpts[i].ret);
    printf("]}\n");
    fflush(stdout);

    if (!hold)
        return 0;
    /* Hold until stdin closes: the close below checkpoints again. */
    while (fgets(line, sizeof(line), stdin))
        ;
    s->close(s, NULL);
    if ((ret = conn->close(conn, NULL)) != 0)
        die("close", ret);
    return 0;
}
