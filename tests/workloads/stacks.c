/* A workload with known call paths, for the stacks tests.
 *
 * One thread named "burner" loops over burner_main -> a -> b -> c and
 * a -> d, each function burning CPU itself for a fixed number of units:
 * a 1, b 2, c 4, d 1 per round. d burns through spin_inline, always
 * inlined: a profile with this binary's DWARF (built with -g) shows it as
 * an inlined frame inside d. It times its own work with the thread's CPU
 * clock (CLOCK_THREAD_CPUTIME_ID) per function, so the shares of CPU time
 * are the workload's own accounting, not an assumption.
 *
 * One thread named "blocker" loops over blocker_main -> outer_wait ->
 * inner_wait, which blocks in a futex (FUTEX_WAIT with a 20 ms timeout on a
 * word nobody wakes, through libc's syscall(): glibc's own futex wrappers
 * have no frame pointers, so a stack walked from inside them stops there)
 * and adds the wall time it was blocked.
 *
 * Built with frame pointers and without inlining (see tests/root/stacks.rs).
 * Prints "ready <pid>" once both threads run; on "report" (or end of input)
 * on stdin, prints one JSON line of its accounting and keeps running until
 * stdin closes.
 */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static volatile uint64_t sink;
static uint64_t ns_a, ns_b, ns_c, ns_d, rounds;
static uint64_t blocked_ns, waits;
static pthread_mutex_t acct_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t ready_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ready_cond = PTHREAD_COND_INITIALIZER;
static int ready;

static uint64_t now(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* About 50 µs of arithmetic per unit on this machine. */
static NOINLINE void spin(int units) {
    for (int u = 0; u < units; u++)
        for (int i = 0; i < 20000; i++)
            sink += (uint64_t)i * 2654435761u;
}

/* spin(), always inlined into its caller. */
static inline __attribute__((always_inline)) void spin_inline(int units) {
    for (int u = 0; u < units; u++)
        for (int i = 0; i < 20000; i++)
            sink += (uint64_t)i * 2654435761u;
}

/* Each function burns its own units, timed, then calls on. */
static NOINLINE uint64_t burn(int units) {
    uint64_t t0 = now(CLOCK_THREAD_CPUTIME_ID);
    spin(units);
    return now(CLOCK_THREAD_CPUTIME_ID) - t0;
}

NOINLINE void c(void) {
    uint64_t t = burn(4);
    pthread_mutex_lock(&acct_lock);
    ns_c += t;
    pthread_mutex_unlock(&acct_lock);
}

NOINLINE void d(void) {
    uint64_t t0 = now(CLOCK_THREAD_CPUTIME_ID);
    spin_inline(1);
    uint64_t t = now(CLOCK_THREAD_CPUTIME_ID) - t0;
    pthread_mutex_lock(&acct_lock);
    ns_d += t;
    pthread_mutex_unlock(&acct_lock);
}

NOINLINE void b(void) {
    uint64_t t = burn(2);
    pthread_mutex_lock(&acct_lock);
    ns_b += t;
    pthread_mutex_unlock(&acct_lock);
    c();
}

NOINLINE void a(void) {
    uint64_t t = burn(1);
    pthread_mutex_lock(&acct_lock);
    ns_a += t;
    rounds++;
    pthread_mutex_unlock(&acct_lock);
    b();
    d();
}

static void mark_ready(void) {
    pthread_mutex_lock(&ready_lock);
    ready++;
    pthread_cond_broadcast(&ready_cond);
    pthread_mutex_unlock(&ready_lock);
}

NOINLINE void *burner_main(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "burner");
    mark_ready();
    for (;;)
        a();
    return NULL;
}

NOINLINE void inner_wait(void) {
    static uint32_t never;
    struct timespec timeout = {0, 20 * 1000000};
    uint64_t t0 = now(CLOCK_MONOTONIC);
#if defined(__x86_64__)
    /* The syscall instruction here, not in libc's syscall(): a leaf
     * without a frame of its own would hide this function from a
     * frame-pointer walk (its caller's frame is what rbp points to). */
    register long r10 __asm__("r10") = (long)&timeout;
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "0"((long)SYS_futex), "D"(&never), "S"((long)FUTEX_WAIT_PRIVATE),
                       "d"(0L), "r"(r10)
                     : "rcx", "r11", "memory");
    (void)ret;
#else
    syscall(SYS_futex, &never, FUTEX_WAIT_PRIVATE, 0, &timeout, NULL, 0);
#endif
    uint64_t t = now(CLOCK_MONOTONIC) - t0;
    pthread_mutex_lock(&acct_lock);
    blocked_ns += t;
    waits++;
    pthread_mutex_unlock(&acct_lock);
}

NOINLINE void outer_wait(void) {
    inner_wait();
}

NOINLINE void *blocker_main(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "blocker");
    mark_ready();
    for (;;)
        outer_wait();
    return NULL;
}

static void report(void) {
    pthread_mutex_lock(&acct_lock);
    printf("{\"a_ns\":%llu,\"b_ns\":%llu,\"c_ns\":%llu,\"d_ns\":%llu,\"rounds\":%llu,"
           "\"blocked_ns\":%llu,\"waits\":%llu}\n",
           (unsigned long long)ns_a, (unsigned long long)ns_b, (unsigned long long)ns_c,
           (unsigned long long)ns_d, (unsigned long long)rounds,
           (unsigned long long)blocked_ns, (unsigned long long)waits);
    pthread_mutex_unlock(&acct_lock);
    fflush(stdout);
}

int main(void) {
    pthread_t t1, t2;
    pthread_create(&t1, NULL, burner_main, NULL);
    pthread_create(&t2, NULL, blocker_main, NULL);
    pthread_mutex_lock(&ready_lock);
    while (ready < 2)
        pthread_cond_wait(&ready_cond, &ready_lock);
    pthread_mutex_unlock(&ready_lock);
    printf("ready\n");
    fflush(stdout);
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        if (strncmp(line, "report", 6) == 0)
            report();
    }
    return 0;
}
