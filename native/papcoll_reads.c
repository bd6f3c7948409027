/* The reads task of a hierarchical round (papcoll_hier.c): my node's blocks for me read by
 * CMA straight out of their senders' buffers, as each sender posts (pc_cma_collect checks its
 * signature first). Its own task, posted at once, so a master's reads overlap its call among
 * the masters: that call's gate needs my node's posts (the gather), not these blocks. */
#include "papcoll_plan.h"

static int reads_post(struct pc_task *t)
{
    struct pc_hier *h = t->arg;
    pc_hier_arm(h->reads, h->others, h->epoch, h->sig, h->start);
    return 0;
}

static int reads(struct pc_task *t)
{
    struct pc_hier *h = t->arg;
    struct pc_sources *s = h->reads;
    if (!pc_hier_pending(s))
        return PC_DONE;
    return pc_hier_served(t, s, pc_cma_collect(s, h->pids, h->own + h->offset,
                                               h->recv + h->node_at, h->block, h->len, h->acks,
                                               h->ack_stride, 0));
}
PC_TASK_KIND(reads_kind, "reads", reads_post, reads, NULL)
