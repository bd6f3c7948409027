/* A hierarchical call's round as a schedule of tasks (struct pc_hier, papcoll_plan.h;
 * papcoll/algorithms/shm_direct.py argues the protocol). The tasks and what they wait for:
 *
 *   gather   post my blocks (board, outbox rows, own block); serve my node's posts, or read
 *            their blocks for me by CMA
 *   masters  a master's call among the masters, posted at once so that it takes remote
 *            aggregates as they land; its writes wait for the gather (its gate)
 *   handon   pap_shm_direct's master: subscribed to the masters' per-source events, it raises
 *            a remote node's done flag and copies my part of its aggregate as it lands
 *   done     shm_direct's master, after masters: the one done flag
 *   scatter  after done (shm_direct's master), else at once: my parts of the remote
 *            aggregates as their flags rise (not a PAP master's: handon did them)
 *   release  CMA: every other process has read my buffer
 *
 * A run cut short by its timeout keeps its place in the schedule, so running again goes on
 * where it stopped. */
#include <string.h>

#include "papcoll_plan.h"

#define BIT(task) (1u << (task))

static int pending(const struct pc_sources *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->pending[i])
            return 1;
    return 0;
}

/* Arm sources s to serve those all marks, for target (their flags' value) and sig (0: none
 * to check), from source start. */
static void arm(struct pc_sources *s, const uint8_t *all, uint64_t target, uint64_t sig,
                size_t start)
{
    memcpy(s->pending, all, s->n);
    s->target = target, s->sig = sig, s->start = start % s->n;
}

/* The sources a serving loop just served (rc of them), into the log as task's. */
static int served(struct pc_sched *sched, int task, const struct pc_sources *s, int rc)
{
    for (int i = 0; i < rc; i++)
        pc_sched_log(sched, task, s->served[i]);
    return rc == -ETIMEDOUT || rc == -ENOENT ? 0 : rc;
}

/* A step served as its sources rise: PC_DONE once none is pending. */
static int serve(struct pc_task *t, int task, struct pc_step *step)
{
    struct pc_sources *s = &step->sources;
    if (!pending(s))
        return PC_DONE;
    int rc = served(t->sched, task, s, pc_serve_lists(s, &step->list, 0));
    return rc < 0 ? rc : pending(s) ? (rc ? PC_MORE : PC_IDLE) : PC_DONE;
}

static int gather_post(struct pc_task *t)
{
    struct pc_hier *h = t->arg;
    pc_copy_list(NULL, h->post_dst, h->send, h->post_src, h->npost, h->len);
    pc_post(h->post, h->epoch, h->sig, h->address); /* release: whoever sees it sees my blocks */
    if (h->send != h->recv)
        memcpy(h->recv + h->own, h->send + h->own, h->len);
    arm(&h->local->sources, h->all_local, h->epoch, h->sig, h->start);
    h->local->list.dst = h->recv, h->local->list.len = h->len;
    if (h->reads)
        arm(h->reads, h->others, h->epoch, h->sig, h->start);
    h->gathered = 0;
    return 0;
}

static int gather(struct pc_task *t)
{
    struct pc_hier *h = t->arg;
    int rc = serve(t, PC_HIER_GATHER, h->local);
    if (rc == PC_DONE && h->reads && pending(h->reads)) {
        struct pc_sources *s = h->reads;  /* my node's blocks for me, from their buffers */
        rc = served(t->sched, PC_HIER_GATHER, s,
                    pc_cma_collect(s, h->pids, h->own + h->offset, h->recv + h->node_at,
                                   h->block, h->len, h->acks, h->ack_stride, 0));
        rc = rc < 0 ? rc : pending(s) ? (rc ? PC_MORE : PC_IDLE) : PC_DONE;
    }
    if (rc == PC_DONE)
        h->gathered = 1;                  /* the masters' writes may go */
    return rc;
}

/* The masters' call: a remote aggregate in, as an event (then the call goes on). */
static int landed(void *arg, size_t peer)
{
    struct pc_hier *h = arg;
    return pc_sched_event(&h->sched, PC_HIER_MASTERS, peer);
}

static int masters_post(struct pc_task *t)
{
    struct pc_hier *h = t->arg;
    struct pc_xcall *c = h->masters;     /* my aggregates start with the call's signature */
    pc_head_aggregates((char *)c->src, c->src_off, c->x->n, c->x->me, h->sig);
    pc_xcall_start(c, h->xepoch, h->adverts, h->sig, h->code, -1);
    c->gate = &h->gathered;
    c->landed = h->flags ? landed : NULL, c->landed_arg = h;
    return 0;
}

static int masters(struct pc_task *t)
{
    struct pc_hier *h = t->arg;
    h->masters->x->deadline = t->sched->deadline;   /* a put waiting for room: till then */
    return pc_xcall_step(h->masters);
}

/* The scatter, or the hand-on: my parts of the remote aggregates, into the round's buffer. */
static int remote_post(struct pc_task *t)
{
    struct pc_hier *h = t->arg;
    struct pc_step *r = h->remote;
    arm(&r->sources, h->all_remote, h->round, 0, h->scatter_start);
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
    return 0;
}

static int handon(struct pc_task *t)
{
    struct pc_hier *h = t->arg;
    return pending(&h->remote->sources) ? PC_IDLE : PC_DONE;
}

static int done_post(struct pc_task *t)
{
    struct pc_hier *h = t->arg;
    pc_flag_store(h->done, h->round);
    return 0;
}

static int scatter(struct pc_task *t)
{
    struct pc_hier *h = t->arg;
    return serve(t, PC_HIER_SCATTER, h->remote);
}

static int release(struct pc_task *t)
{
    struct pc_hier *h = t->arg;
    int rc = pc_wait_all_ge(h->releases, 0);
    return rc == -ETIMEDOUT ? PC_IDLE : rc < 0 ? rc : PC_DONE;
}

static int release_post(struct pc_task *t)
{
    struct pc_hier *h = t->arg;
    memcpy(h->releases->pending, h->others, h->releases->n);
    h->releases->target = h->epoch;
    return 0;
}

/* The round's tasks: which a process runs follows from its part (master or not, PAP or
 * not, CMA or not), fixed at set-up. */
static void build(struct pc_hier *h)
{
    struct pc_sched *s = &h->sched;
    pc_sched_add(s, PC_HIER_GATHER, gather_post, gather, h, 0);
    if (h->masters)
        pc_sched_add(s, PC_HIER_MASTERS, masters_post, masters, h, 0);
    if (h->flags) {
        struct pc_task *t = pc_sched_add(s, PC_HIER_HANDON, remote_post, handon, h, 0);
        t->event = handon_event, t->subscribes = PC_HIER_MASTERS;
    } else {
        if (h->done)
            pc_sched_add(s, PC_HIER_DONE, done_post, NULL, h, BIT(PC_HIER_MASTERS));
        pc_sched_add(s, PC_HIER_SCATTER, remote_post, scatter, h,
                     h->done ? BIT(PC_HIER_DONE) : 0);
    }
    if (h->releases)
        pc_sched_add(s, PC_HIER_RELEASE, release_post, release, h, 0);
}

int pc_hier_start(struct pc_hier *h)
{
    if (h->sched.n == 0)
        build(h);
    return pc_sched_start(&h->sched);
}

int pc_hier_run(struct pc_hier *h, int64_t timeout_ns)
{
    return pc_sched_run(&h->sched, timeout_ns);
}
