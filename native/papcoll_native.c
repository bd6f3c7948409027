/* papcoll native core: the clock, flags and the one wait (the intra-node PAP loops are in
 * papcoll_loops.c, CMA's copies in papcoll_cma.c); see native/papcoll_native.h for the
 * interface. */
#define _GNU_SOURCE /* clock_gettime, nanosleep and prctl under -std=c11 */
#include "papcoll_native.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

/* ---- clock -------------------------------------------------------------- */

int64_t pc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- flags ---------------------------------------------------------------- */

void pc_flag_store(volatile uint64_t *f, uint64_t v)
{
    __atomic_store_n(f, v, __ATOMIC_RELEASE);
}

uint64_t pc_flag_load(const volatile uint64_t *f)
{
    return __atomic_load_n(f, __ATOMIC_ACQUIRE);
}

/* ---- the one wait ----------------------------------------------------------- */

#define SPIN_NS 2000          /* the phases of a wait (papcoll_native.h) */
#define YIELD_NS 1000000
#define SLEEP_MIN_NS 1000
#define SLEEP_MAX_NS 64000
#define PAUSES_PER_CHECK 4    /* between clock reads while spinning */
#define PRECISE_SLACK_NS 1000 /* the timer slack of a PC_PRECISE wait once it sleeps */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#else
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
#endif
}

int64_t pc_deadline(int64_t timeout_ns)
{
    if (timeout_ns < 0)
        return -EINVAL;
    int64_t now = pc_now_ns();
    return timeout_ns > INT64_MAX - now ? INT64_MAX : now + timeout_ns;
}

static _Thread_local struct pc_wait_counts counts;

const struct pc_wait_counts *pc_wait_counts(void)
{
    return &counts;
}

int pc_wait(pc_poll_fn poll, void *what, int64_t deadline, int flags)
{
    if (deadline < 0)
        return (int)deadline;
    int64_t since = pc_now_ns(), sleep_ns = SLEEP_MIN_NS;
    long slack = -1;            /* the thread's own, once lowered (0: nothing to restore) */
    int rc;
    while ((rc = poll(what)) == PC_IDLE || rc == PC_MORE || rc == PC_BUSY) {
        int64_t now = pc_now_ns();
        counts.looks++;
        if (rc == PC_MORE) {        /* look again at once: progress is finite, so is this */
            since = now, sleep_ns = SLEEP_MIN_NS;
        } else if (now >= deadline) {
            rc = -ETIMEDOUT;
            break;
        } else if (now - since < SPIN_NS) {
            for (int i = 0; i < PAUSES_PER_CHECK; i++)
                cpu_relax();
        } else if (now - since < YIELD_NS || rc == PC_BUSY) {
            sched_yield();
            counts.yields++;
        } else {
            if (slack < 0 && (flags & PC_PRECISE)) {
                long old = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
                slack = old > PRECISE_SLACK_NS &&
                                prctl(PR_SET_TIMERSLACK, PRECISE_SLACK_NS, 0, 0, 0) == 0
                            ? old : 0;
            }
            int64_t ns = sleep_ns < deadline - now ? sleep_ns : deadline - now;
            struct timespec ts = {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};
            nanosleep(&ts, NULL); /* EINTR just ends this pause early */
            counts.sleeps++;
            if (sleep_ns < SLEEP_MAX_NS)
                sleep_ns *= 2;
        }
    }
    if (slack > 0)
        prctl(PR_SET_TIMERSLACK, slack, 0, 0, 0);
    return rc == PC_DONE ? 0 : rc;
}

/* ---- waits on flags --------------------------------------------------------- */

struct at_least {
    const volatile uint64_t *f;
    uint64_t target;
};

static int reached(void *what)
{
    const struct at_least *w = what;
    return pc_flag_load(w->f) >= w->target ? PC_DONE : PC_IDLE;
}

int pc_wait_ge(const volatile uint64_t *f, uint64_t target, int64_t timeout_ns)
{
    struct at_least w = {f, target};
    return pc_wait(reached, &w, pc_deadline(timeout_ns), 0);
}

/* One pass over the pending flags from start, wrapping around: write up to
 * max_out ready indices to out and return how many. */
static size_t scan_ready(const volatile uint64_t *base, size_t stride_bytes,
                         const uint8_t *pending, size_t n, uint64_t target,
                         size_t start, size_t *out, size_t max_out)
{
    size_t found = 0;
    for (size_t k = 0, i = start; k < n && found < max_out; k++) {
        if (pending[i] && pc_flag_at(base, stride_bytes, i) >= target)
            out[found++] = i;
        if (++i == n)
            i = 0;
    }
    return found;
}

/* A wait of pc_wait_any_ge (max_out 1) or pc_wait_ready_ge (max_out n): found, once > 0. */
struct ready {
    const volatile uint64_t *base;
    size_t stride_bytes;
    const uint8_t *pending;
    size_t n;
    uint64_t target;
    size_t start, *out, max_out, found;
};

static int any_ready(void *what)
{
    struct ready *r = what;
    r->found = scan_ready(r->base, r->stride_bytes, r->pending, r->n, r->target, r->start,
                          r->out, r->max_out);
    return r->found ? PC_DONE : PC_IDLE;
}

static int wait_ready(const volatile uint64_t *base, size_t stride_bytes,
                      const uint8_t *pending, size_t n, uint64_t target,
                      size_t start, int64_t timeout_ns, size_t *out, size_t max_out)
{
    int rc = pc_count_pending(pending, n, start, stride_bytes);
    if (rc < 0)
        return rc;
    struct ready r = {base, stride_bytes, pending, n, target, start, out, max_out, 0};
    rc = pc_wait(any_ready, &r, pc_deadline(timeout_ns), 0);
    return rc < 0 ? rc : (int)r.found;
}

int pc_wait_any_ge(const volatile uint64_t *base, size_t stride_bytes,
                   const uint8_t *pending, size_t n, uint64_t target,
                   size_t start, int64_t timeout_ns)
{
    size_t index;
    int rc = wait_ready(base, stride_bytes, pending, n, target, start, timeout_ns, &index, 1);
    return rc < 0 ? rc : (int)index;
}

int pc_wait_ready_ge(const volatile uint64_t *base, size_t stride_bytes,
                     const uint8_t *pending, size_t n, uint64_t target,
                     size_t start, size_t *out, int64_t timeout_ns)
{
    return wait_ready(base, stride_bytes, pending, n, target, start, timeout_ns, out, n);
}
