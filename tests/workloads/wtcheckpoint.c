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
 * Usage: mdiag-wtcheckpoint --home DIR [--checkpoints N] [--interval-ms MS] [--writers W] [--no-hold]
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

struct ckpt {
    uint64_t start_ns, end_ns;
    int ret;
};
static struct ckpt ckpts[MAX_CHECKPOINTS];
static pid_t ckpt_tid;

static void die(const char *what, int ret) {
    fprintf(stderr, "mdiag-wtcheckpoint: %s: %s\n", what, wiredtiger_strerror(ret));
    exit(1);
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void *writer(void *arg) {
    int64_t id = (int64_t)(intptr_t)arg;
    WT_SESSION *s;
    WT_CURSOR *c;
    int ret;
    char value[200];
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
    (void)arg;
    WT_SESSION *s;
    int ret;
    ckpt_tid = (pid_t)syscall(SYS_gettid);
    if ((ret = conn->open_session(conn, NULL, NULL, &s)) != 0)
        die("open_session", ret);
    for (int i = 0; i < n_checkpoints; i++) {
        usleep((useconds_t)interval_ms * 1000);
        ckpts[i].start_ns = now_ns();
        ckpts[i].ret = s->checkpoint(s, NULL);
        ckpts[i].end_ns = now_ns();
    }
    s->close(s, NULL);
    return NULL;
}

int main(int argc, char **argv) {
    const char *home = NULL;
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "--no-hold")) {
            hold = 0;
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
        else {
            fprintf(stderr, "mdiag-wtcheckpoint: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    if (!home || n_checkpoints < 0 || n_checkpoints > MAX_CHECKPOINTS || n_writers < 0 ||
        n_writers > MAX_WRITERS) {
        fprintf(stderr, "usage: mdiag-wtcheckpoint --home DIR [--checkpoints N<=%d] "
                        "[--interval-ms MS] [--writers W<=%d]\n",
                MAX_CHECKPOINTS, MAX_WRITERS);
        return 2;
    }
    int ret;
    WT_SESSION *s;
    if ((ret = wiredtiger_open(home, NULL, "create,cache_size=200MB", &conn)) != 0)
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

    pthread_t writers[MAX_WRITERS], ck;
    for (int i = 0; i < n_writers; i++)
        pthread_create(&writers[i], NULL, writer, (void *)(intptr_t)i);
    pthread_create(&ck, NULL, checkpointer, NULL);
    pthread_join(ck, NULL);
    atomic_store(&stop, 1);
    for (int i = 0; i < n_writers; i++)
        pthread_join(writers[i], NULL);

    uint64_t close_start = 0, close_end = 0;
    if (!hold) {
        s->close(s, NULL);
        close_start = now_ns();
        if ((ret = conn->close(conn, NULL)) != 0)
            die("close", ret);
        close_end = now_ns();
    }
    printf("{\"close_start_ns\":%" PRIu64 ",\"close_end_ns\":%" PRIu64 ",", close_start, close_end);
    printf("\"pid\":%d,\"checkpoint_tid\":%d,\"library\":\"%s\",\"inserts\":%llu,\"checkpoints\":[",
           (int)getpid(), (int)ckpt_tid, library, (unsigned long long)atomic_load(&inserts));
    for (int i = 0; i < n_checkpoints; i++)
        printf("%s{\"start_ns\":%" PRIu64 ",\"end_ns\":%" PRIu64 ",\"ret\":%d}", i ? "," : "",
               ckpts[i].start_ns, ckpts[i].end_ns, ckpts[i].ret);
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
