/* The tasks of a hierarchical call's round (struct pc_hier, papcoll_plan.h;
 * papcoll/algorithms/shm_direct.py argues the protocol and lists each role's schedule):
 *
 *   gather   post my blocks (board, outbox rows); serve my node's posts -- their
 *            blocks for me out of the board, or, when CMA reads them (papcoll_reads.c), only
 *            their signatures
 *   own      my own block, send buffer to receive buffer (a master's after its call)
 *   masters  a master's call among the masters, posted at once so that it takes remote
 *            aggregates as they land; its writes wait for the gather (its gate)
 *   handon   pap_shm_direct's master: subscribed to the masters' per-source events, it raises
 *            a remote node's done flag and copies my part of its aggregate as it lands
 *   done     shm_direct's master, after masters: the one done flag
 *   scatter  my parts of the remote aggregates as their done flags rise
 *   release  CMA: every other process of my node has read my buffer
 *
 * A run cut short by its timeout keeps its place in the schedule, so running again goes on
 * where it stopped. */
#include <string.h>

#include "papcoll_plan.h"

int pc_hier_pending(const struct pc_sources *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->pending[i])
            return 1;
    return 0;
}

void pc_hier_arm(struct pc_sources *s, const uint8_t *all, uint64_t target, uint64_t sig,
                 size_t start)
{
    memcpy(s->pending, all, s->n);
    s->target = target, s->sig = sig, s->start = start % s->n;
}

int pc_hier_served(struct pc_task *t, const struct pc_sources *s, int rc)
{
    for (int i = 0; i < rc; i++)
        pc_sched_log(t, s->served[i]);
    if (rc < 0 && rc != -ETIMEDOUT && rc != -ENOENT)
        return rc;
    return pc_hier_pending(s) ? (rc > 0 ? PC_MORE : PC_IDLE) : PC_DONE;
}

/* A step served as its sources rise. */
static int serve(struct pc_task *t, struct pc_step *step)
{
    struct pc_sources *s = &step->sources;
    if (!pc_hier_pending(s))
        return PC_DONE;
    return pc_hier_served(t, s, pc_serve_lists(s, &step->list, 0));
}

static int gather_post(struct pc_task *t)
{
    struct pc_hier *h = t->arg;
    pc_copy_list(NULL, h->post_dst, h->send, h->post_src, h->npost, h->len);
    pc_post(h->post, h->epoch, h->sig, h->address); /* release: whoever sees it sees my blocks */
    pc_hier_arm(&h->local->sources, h->all_local, h->epoch, h->sig, h->start);
    h->local->list.dst = h->recv, h->local->list.len = h->len;
    h->gathered = 0;
    return 0;
}

static int gather(struct pc_task *t)
{
    struct pc_hier *h = t->arg;
    int rc = serve(t, h->local);
    if (rc == PC_DONE)
        h->gathered = 1;                  /* my node's rows are in: the masters' writes may go */
    return rc;
}
PC_TASK_KIND(gather_kind, "gather", gather_post, gather, NULL)

/* My own block, out of the way of a master's call: no one waits for it. */
static int own_post(struct pc_task *t)
{
    struct pc_hier *h = t->arg;
    if (h->send != h->recv)
        memcpy(h->recv + h->own, h->send + h->own, h->len);
    return 0;
}
PC_TASK_KIND(own_kind, "own", own_post, NULL, NULL)

/* The masters' call: a remote aggregate is in, an event of the masters' task. */
static int landed(void *arg, size_t peer)
{
    return pc_sched_event(arg, peer);
}

static int masters_post(struct pc_task *t)
{
    struct pc_hier *h = t->arg;
    struct pc_xcall *c = h->masters;     /* my aggregates start with the call's signature */
    pc_head_aggregates((char *)c->src, c->src_off, c->x->n, c->x->me, h->sig);
    pc_xcall_start(c, h->xepoch, h->adverts, h->sig, c->code, -1);
    c->gate = &h->gathered;
    c->landed = landed, c->landed_arg = t;
    return 0;
}

static int masters(struct pc_task *t)
{
    struct pc_hier *h = t->arg;
    h->masters->x->deadline = t->sched->deadline;   /* a put waiting for room: till then */
    return pc_xcall_step(h->masters);
}
PC_TASK_KIND(masters_kind, "masters", masters_post, masters, NULL)

/* The scatter, or the hand-on: my parts of the remote aggregates, into the round's buffer. */
static int remote_post(struct pc_task *t)
{
    struct pc_hier *h = t->arg;
    struct pc_step *r = h->remote;
    pc_hier_arm(&r->sources, h->all_remote, h->round, 0, h->scatter_start);
    r->list.dst = h->recv, r->list.len = h->len;
    return 0;
}

/* Remote node `node`'s aggregate is in: its done flag for my node, then my part of it. */
static int handon_event(struct pc_task *t, size_t node)
{
    struct pc_hier *h = t->arg;
    struct pc_step *r = h->remote;
    pc_flag_store((volatile uint64_t *)((volatile char *)h->flags + node * h->flag_stride),
                  h->round);
    const size_t *first = r->list.first;
    pc_copy_list(r->list.dst, r->list.dst_off + first[node], r->list.src,
                 r->list.src_off + first[node], first[node + 1] - first[node], r->list.len);
    r->sources.pending[node] = 0;
    pc_sched_log(t, node);
    return 0;
}

static int handon(struct pc_task *t)
{
    struct pc_hier *h = t->arg;
    return pc_hier_pending(&h->remote->sources) ? PC_IDLE : PC_DONE;
}
PC_TASK_KIND(handon_kind, "handon", remote_post, handon, handon_event)

static int done_post(struct pc_task *t)
{
    struct pc_hier *h = t->arg;
    pc_flag_store(h->done, h->round);
    return 0;
}
PC_TASK_KIND(done_kind, "done", done_post, NULL, NULL)

static int scatter(struct pc_task *t)
{
    struct pc_hier *h = t->arg;
    return serve(t, h->remote);
}
PC_TASK_KIND(scatter_kind, "scatter", remote_post, scatter, NULL)

static int release_post(struct pc_task *t)
{
    struct pc_hier *h = t->arg;
    memcpy(h->releases->pending, h->others, h->releases->n);
    h->releases->target = h->epoch;
    return 0;
}

static int release(struct pc_task *t)
{
    struct pc_hier *h = t->arg;
    int rc = pc_wait_all_ge(h->releases, 0);
    return rc == -ETIMEDOUT ? PC_IDLE : rc < 0 ? rc : PC_DONE;
}
PC_TASK_KIND(release_kind, "release", release_post, release, NULL)

int pc_hier_start(struct pc_hier *h, const char *send, char *recv, size_t block, size_t offset,
                  size_t len, uint64_t round, uint64_t epoch, uint64_t address, uint64_t xepoch,
                  uint64_t adverts)
{
    h->send = send, h->recv = recv, h->block = block, h->offset = offset, h->len = len;
    h->round = round, h->epoch = epoch, h->address = address;
    h->xepoch = xepoch, h->adverts = adverts;
    return pc_sched_start(&h->sched);
}
