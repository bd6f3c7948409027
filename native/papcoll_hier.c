/* A hierarchical call in one native run (struct pc_hier, papcoll_plan.h): the phases of
 * papcoll/algorithms/shm_direct.py chained by completion, each waited for by the engine's
 * own means -- pc_serve_lists for the node's posts and the done flags, pc_xcall_run for the
 * masters' call. A run cut short by its timeout keeps its place in the plan (phase, the
 * steps' pending sources), so running again goes on where it stopped. */
#include <string.h>

#include "papcoll_native.h"
#include "papcoll_plan.h"

/* A step's sources still pending: whether any. */
static int pending(const struct pc_gate *g)
{
    for (size_t i = 0; i < g->sources.n; i++)
        if (g->sources.pending[i])
            return 1;
    return 0;
}

/* Arm step g to serve the sources all marks, for target (its flags' value), sig (0: none to
 * check), from source start. */
static void arm(struct pc_gate *g, const uint8_t *all, uint64_t target, uint64_t sig,
                size_t start, char *recv, size_t len)
{
    struct pc_sources *s = &g->sources;
    memcpy(s->pending, all, s->n);
    s->target = target, s->sig = sig, s->start = start % s->n;
    g->list.dst = recv, g->list.len = len, g->open = 0;
}

/* Serve step g's sources as their flags rise, until the deadline: 0 once none is pending,
 * -ETIMEDOUT, -EPROTO (g->sources.failed), or another -errno. */
static int serve(struct pc_gate *g, int64_t deadline)
{
    if (!pending(g))
        return 0;
    int64_t left = deadline - pc_now_ns();
    int rc = pc_serve_lists(&g->sources, &g->list, left > 0 ? left : 0);
    if (rc < 0 && rc != -ETIMEDOUT)
        return rc;
    return pending(g) ? -ETIMEDOUT : 0;
}

void pc_hier_start(struct pc_plan *p, const char *send, char *recv, int in_place)
{
    uint64_t round = ++*p->round, epoch = ++*p->epoch;
    struct pc_hier *h = p->current = p->rounds[(epoch % 2) * 2 + round % 2];
    size_t len = (size_t)p->nbytes / (size_t)p->n;
    const char *src = in_place ? recv : send;
    pc_copy_list(NULL, h->post_dst, src, h->post_src, h->npost, len);
    pc_post(h->post, epoch, p->sig, 0);   /* release: whoever sees it sees my blocks */
    if (!in_place)
        memcpy(recv + h->own, send + h->own, len);
    arm(h->local, h->all_local, epoch, p->sig, p->start, recv, len);
    if (h->remote)
        arm(h->remote, h->all_remote, round, 0, p->scatter_start, recv, len);
    p->phase = PC_HIER_GATHER;
    struct pc_xcall *c = h->masters;
    if (c) {                              /* my aggregates start with the call's signature */
        pc_head_aggregates((char *)c->src, c->src_off, c->x->n, c->x->me, p->sig);
        pc_xcall_start(c, ++*p->xepoch, *p->adverts, p->sig, c->code, -1);
        c->hand_len = len;
        c->hand_dst = recv;
        p->phase = PC_HIER_MASTERS;
    }
}

int pc_hier_run(struct pc_plan *p, int64_t timeout_ns)
{
    struct pc_hier *h = p->current;
    int64_t deadline = pc_deadline(timeout_ns);
    int rc;
    if (deadline < 0)
        return (int)deadline;
    if (p->phase == PC_HIER_GATHER) {
        if ((rc = serve(h->local, deadline)) < 0)
            return rc;
        p->phase = PC_HIER_SCATTER;
    } else if (p->phase == PC_HIER_MASTERS) {
        int64_t left = deadline - pc_now_ns();
        if ((rc = pc_xcall_run(h->masters, left > 0 ? left : 0)) < 0)
            return rc;
        if (h->done)
            pc_flag_store(h->done, *p->round);
        p->phase = PC_HIER_SCATTER;
    }
    if (h->remote && (rc = serve(h->remote, deadline)) < 0)
        return rc;
    p->phase = 0;
    return 1;
}
