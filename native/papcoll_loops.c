/* papcoll native core: the intra-node PAP loops -- serving peers as their posts show up,
 * with the signature checks -- and the copy lists; see native/papcoll_native.h. */
#include "papcoll_native.h"

#include <errno.h>
#include <string.h>

/* ---- intra-node PAP loops ------------------------------------------------- */

/* How one peer is served once it has arrived: 0 or -errno. */
typedef int (*serve_fn)(void *how, size_t peer);

/* A wait of serve_as_ready: the loop's arguments, and where the scan is. */
struct serving {
    const volatile uint64_t *flags;
    size_t flag_stride;
    uint8_t *pending;
    size_t n;
    uint64_t target;
    size_t *served, max_served, left, count, i;
    serve_fn serve;
    void *how;
};

/* One scan, from where the last one stopped: serve every pending peer whose flag is up. */
static int serve_ready(void *what)
{
    struct serving *s = what;
    int progressed = PC_IDLE;
    for (size_t k = 0; k < s->n; k++, s->i = s->i + 1 == s->n ? 0 : s->i + 1) {
        if (!s->pending[s->i] || pc_flag_at(s->flags, s->flag_stride, s->i) < s->target)
            continue;
        int rc = s->serve(s->how, s->i);
        if (rc < 0)
            return rc;
        s->pending[s->i] = 0;
        s->served[s->count++] = s->i;
        if (--s->left == 0 || s->count == s->max_served)
            return PC_DONE;
        progressed = PC_MORE;
    }
    return progressed;
}

/* The loop behind pc_exchange_blocks, pc_cma_collect and pc_serve_lists (contract in the
 * header). */
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
    struct serving s = {flags, flag_stride, pending, n, target, served, max_served,
                        (size_t)rc, 0, start, serve, how};
    rc = pc_wait(serve_ready, &s, pc_deadline(timeout_ns), PC_PRECISE);
    if (rc < 0 && rc != -ETIMEDOUT)
        return rc;
    return s.count > 0 ? (int)s.count : rc;
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
    if (pc_post_sig(post_at(x->flags, x->flag_stride, i), c->epoch) != c->sig) {
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
        pc_post(mine, epoch, sig, 0); /* release: whoever sees it sees my blocks */
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
    if (pc_post_sig(post, r->target) != r->sig) {
        *r->err_peer = i;
        return -EPROTO;
    }
    const char *remote = (const char *)(uintptr_t)pc_post_address(post) + r->remote_offset;
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
    if (c->sig && pc_post_sig(post_at(c->flags, c->flag_stride, i), c->target) != c->sig) {
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

/* A wait of pc_wait_all_ge. */
struct all_at_least {
    const volatile uint64_t *flags;
    size_t flag_stride;
    uint8_t *pending;
    size_t n;
    uint64_t target;
};

static int all_reached(void *what)
{
    const struct all_at_least *w = what;
    size_t left = 0;
    for (size_t i = 0; i < w->n; i++) {
        if (w->pending[i] && pc_flag_at(w->flags, w->flag_stride, i) >= w->target)
            w->pending[i] = 0;
        left += w->pending[i] != 0;
    }
    return left ? PC_IDLE : PC_DONE;
}

int pc_wait_all_ge(const volatile uint64_t *flags, size_t flag_stride, uint8_t *pending,
                   size_t n, uint64_t target, int64_t timeout_ns)
{
    if (n > INT_MAX || flag_stride == 0)
        return -EINVAL;
    struct all_at_least w = {flags, flag_stride, pending, n, target};
    return pc_wait(all_reached, &w, pc_deadline(timeout_ns), PC_PRECISE);
}
