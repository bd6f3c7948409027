/* papcoll native core: the intra-node PAP loops -- serving peers as their posts show up,
 * with the signature checks -- and the copy lists; see native/papcoll_native.h. */
#define _GNU_SOURCE /* prctl under -std=c11 */
#include "papcoll_native.h"

#include <errno.h>
#include <string.h>
#include <sys/prctl.h>

/* ---- intra-node PAP loops ------------------------------------------------- */

/* These loops end an alltoall, so however long a waiter takes to wake up after its peer
 * arrives is added to the call. Linux lengthens every sleep of a thread by its timer slack
 * (50 us by default), more than a small alltoall takes; so once a loop starts sleeping it
 * lowers the slack to PRECISE_SLACK_NS, and it restores the thread's own value on return.
 * *saved is -1 before the first sleep, then the value to restore (0: nothing to restore). */
#define PRECISE_SLACK_NS 1000

static int pause_precisely(struct pc_backoff *b, long *saved)
{
    if (*saved < 0 && pc_now_ns() - b->start >= YIELD_NS) {
        long old = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
        *saved = old > PRECISE_SLACK_NS && prctl(PR_SET_TIMERSLACK, PRECISE_SLACK_NS, 0, 0, 0) == 0
                     ? old : 0;
    }
    return pc_backoff_pause(b);
}

static void restore_slack(long saved)
{
    if (saved > 0)
        prctl(PR_SET_TIMERSLACK, saved, 0, 0, 0);
}

/* How one peer is served once it has arrived: 0 or -errno. */
typedef int (*serve_fn)(void *how, size_t peer);

/* The loop behind pc_exchange_blocks and pc_cma_collect (contract in the header). */
static int serve_as_ready(const volatile uint64_t *flags, size_t flag_stride,
                          uint8_t *pending, size_t n, uint64_t target, size_t start,
                          size_t *served, size_t max_served, int64_t timeout_ns,
                          serve_fn serve, void *how)
{
    if (max_served == 0)
        return n == 0 ? -ENOENT : -EINVAL;
    int rc = pc_count_pending(pending, n, start, flag_stride);
    if (rc < 0)
        return rc;
    size_t left = (size_t)rc;
    struct pc_backoff b;
    rc = pc_backoff_begin(&b, timeout_ns);
    long slack = -1;
    size_t count = 0, i = start;
    while (rc == 0) {
        int progressed = 0;
        for (size_t k = 0; k < n; k++, i = i + 1 == n ? 0 : i + 1) {
            if (!pending[i] || pc_flag_at(flags, flag_stride, i) < target)
                continue;
            rc = serve(how, i);
            if (rc < 0)
                break;
            pending[i] = 0;
            served[count++] = i;
            if (--left == 0 || count == max_served)
                break;
            progressed = 1;
        }
        if (rc < 0 || left == 0 || count == max_served)
            break;
        if (progressed) { /* start spinning again: arrivals come in bunches */
            b.start = pc_now_ns();
            b.sleep_ns = SLEEP_MIN_NS;
        } else {
            rc = pause_precisely(&b, &slack);
        }
    }
    restore_slack(slack);
    if (rc < 0 && rc != -ETIMEDOUT)
        return rc;
    return count > 0 ? (int)count : rc;
}

/* The signature word of a post for epoch (see PC_POST_SIG). */
static inline uint64_t post_sig(const volatile uint64_t *post, uint64_t epoch)
{
    return post[PC_POST_SIG + (epoch & 1)];
}

static inline const volatile uint64_t *post_at(const volatile uint64_t *base, size_t stride,
                                               size_t i)
{
    return (const volatile uint64_t *)((const volatile char *)base + i * stride);
}

/* One epoch of pc_exchange_blocks: where peer i's block for me is, and where it goes. */
struct exchange_call {
    const struct pc_exchange *x;
    const char *src, *inbox; /* my blocks; region 0's slot for me in this epoch's bank */
    char *dst;
    size_t block, len;
    uint64_t epoch, sig;
};

static int copy_in(void *how, size_t i)
{
    const struct exchange_call *c = how;
    const struct pc_exchange *x = c->x;
    /* The flag was loaded with acquire ordering: the signature stored before it is visible. */
    if (post_sig(post_at(x->flags, x->flag_stride, i), c->epoch) != c->sig) {
        *x->failed = i;
        return -EPROTO;
    }
    char *to = c->dst + i * c->block;
    const char *from = i == x->me ? c->src + i * c->block : c->inbox + i * x->region_stride;
    if (from != to) /* with IN_PLACE my own block is already where it belongs */
        memcpy(to, from, c->len);
    return 0;
}

int pc_exchange_blocks(const struct pc_exchange *x, const void *src, void *dst, size_t block,
                       size_t len, uint64_t epoch, uint64_t sig, size_t start, int64_t timeout_ns)
{
    if (x->me >= x->n || len > x->slot)
        return -EINVAL;
    size_t bank = (size_t)(epoch & 1) * x->n * x->slot;
    volatile uint64_t *mine =
        (volatile uint64_t *)((volatile char *)x->flags + x->me * x->flag_stride);
    if (pc_flag_load(mine) < epoch) { /* not posted yet: this is the call's first attempt */
        for (size_t i = 0; i < x->n; i++)
            if (i != x->me) /* my own block goes straight from src to dst */
                memcpy(x->mine + bank + i * x->slot, (const char *)src + i * block, len);
        mine[PC_POST_SIG + (epoch & 1)] = sig;
        pc_flag_store(mine, epoch); /* release: whoever sees it sees my blocks and signature */
        memset(x->pending, 1, x->n);
    }
    struct exchange_call c = {x, src, x->regions + bank + x->me * x->slot, dst, block, len,
                              epoch, sig};
    return serve_as_ready(x->flags, x->flag_stride, x->pending, x->n, epoch, start, x->served,
                          x->max_served, timeout_ns, copy_in, &c);
}

struct read_from_posts {
    const volatile uint64_t *posts;
    size_t post_stride;
    const pid_t *pids;
    size_t remote_offset;
    char *dst;
    size_t dst_stride, len;
    volatile uint64_t *acks;
    size_t ack_stride;
    uint64_t target, sig;
    size_t *err_peer;
};

static int read_block(void *how, size_t i)
{
    const struct read_from_posts *r = how;
    /* The address and signature were stored before the flag that serve_as_ready loaded with
     * acquire ordering, so plain loads see them. */
    const volatile uint64_t *post = post_at(r->posts, r->post_stride, i);
    if (post_sig(post, r->target) != r->sig) {
        *r->err_peer = i;
        return -EPROTO;
    }
    const char *remote = (const char *)(uintptr_t)post[PC_POST_ADDR] + r->remote_offset;
    char *local = r->dst + i * r->dst_stride;
    if (r->pids[i] == 0) {
        memcpy(local, remote, r->len);
    } else {
        ssize_t got = pc_cma_read(r->pids[i], local, remote, r->len);
        if (got < 0) {
            *r->err_peer = i;
            return (int)got;
        }
    }
    pc_flag_store((volatile uint64_t *)((volatile char *)r->acks + i * r->ack_stride), r->target);
    return 0;
}

int pc_cma_collect(const volatile uint64_t *posts, size_t post_stride,
                   uint8_t *pending, size_t n, uint64_t target, uint64_t sig, size_t start,
                   const pid_t *pids, size_t remote_offset, void *dst, size_t dst_stride,
                   size_t len, volatile uint64_t *acks, size_t ack_stride,
                   size_t *served, size_t max_served, size_t *err_peer, int64_t timeout_ns)
{
    struct read_from_posts r = {posts, post_stride, pids, remote_offset, dst, dst_stride,
                                len, acks, ack_stride, target, sig, err_peer};
    return serve_as_ready(posts, post_stride, pending, n, target, start, served, max_served,
                          timeout_ns, read_block, &r);
}

void pc_copy_list(char *dst, const size_t *dst_off, const char *src, const size_t *src_off,
                  size_t count, size_t len)
{
    for (size_t k = 0; k < count; k++)
        memcpy(dst + dst_off[k], src + src_off[k], len);
}

/* One call of pc_serve_lists: the list, and what a source's post must say. */
struct serve_lists {
    const volatile uint64_t *flags;
    size_t flag_stride;
    uint64_t target, sig;
    const size_t *first, *dst_off, *src_off;
    char *dst;
    const char *src;
    size_t len, *failed;
};

static int copy_source(void *how, size_t i)
{
    const struct serve_lists *c = how;
    if (c->sig && post_sig(post_at(c->flags, c->flag_stride, i), c->target) != c->sig) {
        *c->failed = i;
        return -EPROTO;
    }
    pc_copy_list(c->dst, c->dst_off + c->first[i], c->src, c->src_off + c->first[i],
                 c->first[i + 1] - c->first[i], c->len);
    return 0;
}

int pc_serve_lists(const volatile uint64_t *flags, size_t flag_stride, uint8_t *pending,
                   size_t n, uint64_t target, uint64_t sig, size_t start, const size_t *first,
                   char *dst, const size_t *dst_off, const char *src, const size_t *src_off,
                   size_t len, size_t *served, size_t max_served, size_t *failed,
                   int64_t timeout_ns)
{
    struct serve_lists c = {flags, flag_stride, target, sig, first, dst_off, src_off,
                            dst, src, len, failed};
    return serve_as_ready(flags, flag_stride, pending, n, target, start, served, max_served,
                          timeout_ns, copy_source, &c);
}

int pc_wait_all_ge(const volatile uint64_t *flags, size_t flag_stride, uint8_t *pending,
                   size_t n, uint64_t target, int64_t timeout_ns)
{
    if (n > INT_MAX || flag_stride == 0)
        return -EINVAL;
    struct pc_backoff b;
    int rc = pc_backoff_begin(&b, timeout_ns);
    long slack = -1;
    while (rc == 0) {
        size_t left = 0;
        for (size_t i = 0; i < n; i++) {
            if (pending[i] && pc_flag_at(flags, flag_stride, i) >= target)
                pending[i] = 0;
            left += pending[i] != 0;
        }
        if (left == 0)
            break;
        rc = pause_precisely(&b, &slack);
    }
    restore_slack(slack);
    return rc;
}
