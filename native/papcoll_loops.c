/* papcoll native core: the intra-node PAP loops -- serving peers as their posts show up,
 * with the signature checks -- and the copy lists; see native/papcoll_native.h. */
#include "papcoll_native.h"

#include <errno.h>
#include <string.h>

/* ---- intra-node PAP loops ------------------------------------------------- */

/* How one source of s is served once it has arrived: 0 or -errno. */
typedef int (*serve_fn)(const struct pc_sources *s, const void *how, size_t i);

/* A wait of serve_as_ready: the sources, and where the scan is. */
struct serving {
    struct pc_sources *s;
    size_t left, count, i;
    serve_fn serve;
    const void *how;
};

/* One scan, from where the last one stopped: serve every pending source whose flag is up. */
static int serve_ready(void *what)
{
    struct serving *w = what;
    struct pc_sources *s = w->s;
    int progressed = PC_IDLE;
    for (size_t k = 0; k < s->n; k++, w->i = w->i + 1 == s->n ? 0 : w->i + 1) {
        if (!s->pending[w->i] || pc_flag_at(s->flags, s->stride, w->i) < s->target)
            continue;
        int rc = w->serve(s, w->how, w->i);
        if (rc < 0) {
            s->failed = w->i;
            return rc;
        }
        s->pending[w->i] = 0;
        s->served[w->count++] = w->i;
        if (--w->left == 0 || w->count == s->max_served)
            return PC_DONE;
        progressed = PC_MORE;
    }
    return progressed;
}

/* The loop behind pc_exchange_blocks, pc_cma_collect and pc_serve_lists (contract in the
 * header); the one place that moves s->start on. */
static int serve_as_ready(struct pc_sources *s, int64_t timeout_ns, serve_fn serve,
                          const void *how)
{
    if (s->max_served == 0)
        return s->n == 0 ? -ENOENT : -EINVAL;
    int rc = pc_count_pending(s->pending, s->n, s->start, s->stride);
    if (rc < 0)
        return rc;
    struct serving w = {s, (size_t)rc, 0, s->start, serve, how};
    rc = pc_wait(serve_ready, &w, pc_deadline(timeout_ns), PC_PRECISE);
    if (w.count > 0)
        s->start = (s->served[w.count - 1] + 1) % s->n;
    if (rc < 0 && rc != -ETIMEDOUT)
        return rc;
    return w.count > 0 ? (int)w.count : rc;
}

uint64_t pc_post_sig(const volatile uint64_t *post, uint64_t epoch)
{
    return post[PC_POST_SIG + (epoch & 1)];
}

uint64_t pc_post_address(const volatile uint64_t *post)
{
    return post[PC_POST_ADDR];
}

static inline const volatile uint64_t *post_at(const volatile uint64_t *base, size_t stride,
                                               size_t i)
{
    return (const volatile uint64_t *)((const volatile char *)base + i * stride);
}

void pc_post(volatile uint64_t *post, uint64_t epoch, uint64_t sig, uint64_t address)
{
    post[PC_POST_ADDR] = address;
    post[PC_POST_SIG + (epoch & 1)] = sig;
    pc_flag_store(post, epoch);
}

void pc_head_aggregates(char *out, const uint64_t *at, size_t n, size_t me, uint64_t sig)
{
    for (size_t q = 0; q < n; q++)
        if (q != me)
            memcpy(out + at[q], &sig, sizeof sig);
}

uint64_t pc_inbox_slot(uint64_t bank, uint64_t n, uint64_t q, uint64_t slot)
{
    return (bank * n + q) * slot;
}

/* Whether source i's post carries s->sig for s->target: 0 or -EPROTO. Its flag was loaded
 * with acquire ordering, so the signature stored before it is visible. */
static int same_call(const struct pc_sources *s, size_t i)
{
    return pc_post_sig(post_at(s->flags, s->stride, i), s->target) == s->sig ? 0 : -EPROTO;
}

/* One epoch of pc_exchange_blocks: where process i's block for me is, and where it goes. */
struct exchange_call {
    const struct pc_exchange *x;
    const char *src, *inbox; /* my blocks; region 0's slot for me in this epoch's bank */
    char *dst;
    size_t block, len;
};

static int copy_in(const struct pc_sources *s, const void *how, size_t i)
{
    const struct exchange_call *c = how;
    const struct pc_exchange *x = c->x;
    if (same_call(s, i) < 0)
        return -EPROTO;
    char *to = c->dst + i * c->block;
    const char *from = i == x->me ? c->src + i * c->block : c->inbox + i * x->region_stride;
    if (from != to) /* with IN_PLACE my own block is already where it belongs */
        memcpy(to, from, c->len);
    return 0;
}

int pc_exchange_blocks(struct pc_exchange *x, const void *src, void *dst, size_t block,
                       size_t len, int64_t timeout_ns)
{
    struct pc_sources *s = &x->s;
    if (x->me >= s->n || len > x->slot)
        return -EINVAL;
    size_t bank = (size_t)(s->target & 1) * s->n * x->slot;
    if (pc_flag_load(x->post) < s->target) { /* not posted yet: the call's first attempt */
        for (size_t i = 0; i < s->n; i++)
            if (i != x->me) /* my own block goes straight from src to dst */
                memcpy(x->mine + bank + i * x->slot, (const char *)src + i * block, len);
        pc_post(x->post, s->target, s->sig, 0); /* release: whoever sees it sees my blocks */
        memset(s->pending, 1, s->n);
    }
    struct exchange_call c = {x, src, x->regions + bank + x->me * x->slot, dst, block, len};
    return serve_as_ready(s, timeout_ns, copy_in, &c);
}

/* One call of pc_cma_collect: where each source's block is read to, and acknowledged. */
struct read_from_posts {
    const pid_t *pids;
    size_t remote_offset;
    char *dst;
    size_t dst_stride, len;
    volatile uint64_t *acks;
    size_t ack_stride;
};

static int read_block(const struct pc_sources *s, const void *how, size_t i)
{
    const struct read_from_posts *r = how;
    if (same_call(s, i) < 0)
        return -EPROTO;
    /* The address was stored before the flag too: a plain load sees it. */
    const char *remote =
        (const char *)(uintptr_t)pc_post_address(post_at(s->flags, s->stride, i)) +
        r->remote_offset;
    char *local = r->dst + i * r->dst_stride;
    if (r->pids[i] == 0) {
        memcpy(local, remote, r->len);
    } else {
        ssize_t got = pc_cma_read(r->pids[i], local, remote, r->len);
        if (got < 0)
            return (int)got;
    }
    pc_flag_store((volatile uint64_t *)((volatile char *)r->acks + i * r->ack_stride), s->target);
    return 0;
}

int pc_cma_collect(struct pc_sources *s, const pid_t *pids, size_t remote_offset, void *dst,
                   size_t dst_stride, size_t len, volatile uint64_t *acks, size_t ack_stride,
                   int64_t timeout_ns)
{
    struct read_from_posts r = {pids, remote_offset, dst, dst_stride, len, acks, ack_stride};
    return serve_as_ready(s, timeout_ns, read_block, &r);
}

void pc_copy_list(char *dst, const size_t *dst_off, const char *src, const size_t *src_off,
                  size_t count, size_t len)
{
    for (size_t k = 0; k < count; k++)
        memcpy(dst + dst_off[k], src + src_off[k], len);
}

static int copy_source(const struct pc_sources *s, const void *how, size_t i)
{
    const struct pc_copies *c = how;
    if (s->sig && same_call(s, i) < 0)
        return -EPROTO;
    pc_copy_list(c->dst, c->dst_off + c->first[i], c->src, c->src_off + c->first[i],
                 c->first[i + 1] - c->first[i], c->len);
    return 0;
}

int pc_serve_lists(struct pc_sources *s, const struct pc_copies *list, int64_t timeout_ns)
{
    return serve_as_ready(s, timeout_ns, copy_source, list);
}

static int all_reached(void *what)
{
    const struct pc_sources *s = what;
    size_t left = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->pending[i] && pc_flag_at(s->flags, s->stride, i) >= s->target)
            s->pending[i] = 0;
        left += s->pending[i] != 0;
    }
    return left ? PC_IDLE : PC_DONE;
}

int pc_wait_all_ge(struct pc_sources *s, int64_t timeout_ns)
{
    if (s->n > INT_MAX || s->stride == 0)
        return -EINVAL;
    return pc_wait(all_reached, s, pc_deadline(timeout_ns), PC_PRECISE);
}
