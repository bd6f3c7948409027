/* The schedule of tasks (papcoll_sched.h). */
#include <string.h>

#include "papcoll_sched.h"

static const struct pc_task_kind *kinds;    /* written only as the library loads */

void pc_task_kind_add(struct pc_task_kind *kind)
{
    kind->next = kinds;
    kinds = kind;
}

int pc_sched_task(struct pc_sched *s, int i, const char *name, void *arg, uint32_t deps,
                  int subscribes)
{
    const struct pc_task_kind *k = kinds;
    while (k && strcmp(k->name, name) != 0)
        k = k->next;
    if (!k)
        return -ENOENT;
    if (i < 0 || i >= PC_TASKS || deps >> i || subscribes >= i || (subscribes >= 0) != !!k->event)
        return -EINVAL;
    s->task[i] = (struct pc_task){k, s, arg, deps, subscribes};
    if (s->n < i + 1)
        s->n = i + 1;
    return 0;
}

static int index_of(const struct pc_task *t)
{
    return (int)(t - t->sched->task);
}

void pc_sched_log(struct pc_task *t, uint64_t source)
{
    struct pc_sched *s = t->sched;
    if (s->events && s->nevents < s->max_events) {
        s->events[2 * s->nevents] = (int64_t)((uint64_t)index_of(t) << 56 | source);
        s->events[2 * s->nevents + 1] = pc_now_ns();
        s->nevents++;
    }
}

/* Post every task not yet posted whose dependencies are all complete. */
static int post_ready(struct pc_sched *s)
{
    for (int i = 0; i < s->n; i++) {
        struct pc_task *t = &s->task[i];
        if (!t->kind || s->posted >> i & 1 || (t->deps & ~s->done))
            continue;
        s->posted |= 1u << i;
        pc_sched_log(t, PC_POSTED);
        int rc = t->kind->post ? t->kind->post(t) : 0;
        if (rc < 0) {
            s->failed = i;
            return rc;
        }
        if (!t->kind->progress)
            s->done |= 1u << i, i = -1;       /* complete at once: look again from the top */
    }
    return 0;
}

int pc_sched_start(struct pc_sched *s)
{
    s->posted = s->done = 0;
    s->failed = -1;
    s->nevents = 0;
    return post_ready(s);
}

static uint32_t all(const struct pc_sched *s)
{
    uint32_t mask = 0;
    for (int i = 0; i < s->n; i++)
        if (s->task[i].kind)
            mask |= 1u << i;
    return mask;
}

/* One look at every task posted and not complete (the one progress queue). */
static int pass(void *what)
{
    struct pc_sched *s = what;
    int moved = 0, busy = 0;
    for (int i = 0; i < s->n; i++) {
        if (!(s->posted >> i & 1) || s->done >> i & 1)
            continue;
        int rc = s->task[i].kind->progress(&s->task[i]);
        if (rc < 0) {
            if (s->failed < 0)
                s->failed = i;
            return rc;
        }
        if (rc == PC_DONE) {
            s->done |= 1u << i, moved = 1;
            if ((rc = post_ready(s)) < 0)
                return rc;
            continue;
        }
        moved |= rc == PC_MORE;
        busy |= rc == PC_BUSY;
    }
    return s->done == all(s) ? PC_DONE : moved ? PC_MORE : busy ? PC_BUSY : PC_IDLE;
}

int pc_sched_run(struct pc_sched *s, int64_t timeout_ns)
{
    if ((s->deadline = pc_deadline(timeout_ns)) < 0)
        return (int)s->deadline;
    int rc = pc_wait(pass, s, s->deadline, PC_PRECISE);
    return rc < 0 ? rc : 1;
}

int pc_sched_event(struct pc_task *t, size_t source)
{
    struct pc_sched *s = t->sched;
    int from = index_of(t);
    for (int i = from + 1; i < s->n; i++) {
        struct pc_task *sub = &s->task[i];
        if (!sub->kind || sub->subscribes != from)
            continue;
        int rc = sub->kind->event(sub, source);
        if (rc < 0) {
            s->failed = i;
            return rc;
        }
    }
    return 0;
}
