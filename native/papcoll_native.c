/* papcoll native core: the clock, flags and bounded waits (the intra-node PAP loops are in
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

/* ---- bounded backoff ------------------------------------------------------ */

#define PAUSES_PER_CHECK 4 /* between clock reads while spinning */


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

int pc_backoff_begin(struct pc_backoff *b, int64_t timeout_ns)
{
    if (timeout_ns < 0)
        return -EINVAL;
    b->start = pc_now_ns();
    /* Saturate rather than overflow for absurdly long timeouts. */
    b->deadline = timeout_ns > INT64_MAX - b->start ? INT64_MAX : b->start + timeout_ns;
    b->sleep_ns = SLEEP_MIN_NS;
    return 0;
}

/* Wait a little (how long depends on the phase) and return 0, or return
 * -ETIMEDOUT without waiting once the deadline has passed. Callers test their
 * condition before each call, so the condition is always tested once more
 * after the last pause. */
int pc_backoff_pause(struct pc_backoff *b)
{
    int64_t now = pc_now_ns();
    if (now >= b->deadline)
        return -ETIMEDOUT;
    int64_t waited = now - b->start;
    if (waited < SPIN_NS) {
        for (int i = 0; i < PAUSES_PER_CHECK; i++)
            cpu_relax();
    } else if (waited < YIELD_NS) {
        sched_yield();
    } else {
        int64_t ns = b->sleep_ns < b->deadline - now ? b->sleep_ns : b->deadline - now;
        struct timespec ts = {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};
        nanosleep(&ts, NULL); /* EINTR just ends this pause early */
        if (b->sleep_ns < SLEEP_MAX_NS)
            b->sleep_ns *= 2;
    }
    return 0;
}

int pc_wait_ge(const volatile uint64_t *f, uint64_t target, int64_t timeout_ns)
{
    struct pc_backoff b;
    int rc = pc_backoff_begin(&b, timeout_ns);
    while (rc == 0) {
        if (pc_flag_load(f) >= target)
            return 0;
        rc = pc_backoff_pause(&b);
    }
    return rc;
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

/* Shared by pc_wait_any_ge (max_out 1) and pc_wait_ready_ge (max_out n). */
static int wait_ready(const volatile uint64_t *base, size_t stride_bytes,
                      const uint8_t *pending, size_t n, uint64_t target,
                      size_t start, int64_t timeout_ns, size_t *out, size_t max_out)
{
    int rc = pc_count_pending(pending, n, start, stride_bytes);
    if (rc < 0)
        return rc;
    struct pc_backoff b;
    rc = pc_backoff_begin(&b, timeout_ns);
    while (rc == 0) {
        size_t found = scan_ready(base, stride_bytes, pending, n, target, start, out, max_out);
        if (found > 0)
            return (int)found;
        rc = pc_backoff_pause(&b);
    }
    return rc;
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
