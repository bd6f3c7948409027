/* The schedule of tasks (papcoll_sched.h). */
#include "papcoll_sched.h"

struct pc_task *pc_sched_add(struct pc_sched *s, int i, int (*post)(struct pc_task *),
                             int (*progress)(struct pc_task *), void *arg, uint32_t deps)
{
    struct pc_task *t = &s->task[i];
    *t = (struct pc_task){post, progress, NULL, s, arg, deps, -1};
    if (s->n < i + 1)
        s->n = i + 1;
    return t;
}

static int in(const struct pc_sched *s, int i)
{
    return s->task[i].sched == s;
}

void pc_sched_log(struct pc_sched *s, int from, uint64_t source)
{
    if (s->events && s->nevents < s->max_events) {
        s->events[2 * s->nevents] = (int64_t)((uint64_t)from << 56 | source);
        s->events[2 * s->nevents + 1] = pc_now_ns();
        s->nevents++;
    }
}

/* Post every task not yet posted whose dependencies are all complete. */
static int post_ready(struct pc_sched *s)
{
    for (int i = 0; i < s->n; i++) {
        struct pc_task *t = &s->task[i];
        if (!in(s, i) || s->posted >> i & 1 || (t->deps & ~s->done))
            continue;
        s->posted |= 1u << i;
        pc_sched_log(s, i, PC_POSTED);
        int rc = t->post ? t->post(t) : 0;
        if (rc < 0) {
            s->failed = i;
            return rc;
        }
        if (!t->progress)
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
        if (in(s, i))
            mask |= 1u << i;
    return mask;
}

/* One look at every task posted and not complete (the one progress queue). */
static int pass(void *what)
{
    struct pc_sched *s = what;
    int moved = 0;
    for (int i = 0; i < s->n; i++) {
        if (!(s->posted >> i & 1) || s->done >> i & 1)
            continue;
        int rc = s->task[i].progress(&s->task[i]);
        if (rc < 0) {
            if (s->failed < 0)
                s->failed = i;
            return rc;
        }
        if (rc == PC_DONE) {
            s->done |= 1u << i;
            if ((rc = post_ready(s)) < 0)
                return rc;
        }
        moved |= rc != PC_IDLE;
    }
    return s->done == all(s) ? PC_DONE : moved ? PC_MORE : PC_IDLE;
}

int pc_sched_run(struct pc_sched *s, int64_t timeout_ns)
{
    if ((s->deadline = pc_deadline(timeout_ns)) < 0)
        return (int)s->deadline;
    int rc = pc_wait(pass, s, s->deadline, PC_PRECISE);
    return rc < 0 ? rc : 1;
}

int pc_sched_event(struct pc_sched *s, int from, size_t source)
{
    pc_sched_log(s, from, source);
    for (int i = 0; i < s->n; i++) {
        struct pc_task *t = &s->task[i];
        if (!in(s, i) || t->subscribes != from)
            continue;
        int rc = t->event(t, source);
        if (rc < 0) {
            s->failed = i;
            return rc;
        }
    }
    return 0;
}
