/* A schedule of tasks, after UCC's (ucc_schedule_add_task, ucc_task_subscribe_dep): the
 * phases of a collective as tasks, each started once the tasks it depends on complete, all
 * moved on by one progress queue in one wait. The hierarchical call (papcoll_hier.c) is one.
 *
 * A task has a post (its start: arm what it waits for, or do what needs no waiting), a
 * progress step (one look, never a wait: PC_DONE once complete, PC_MORE when it moved,
 * PC_IDLE or PC_BUSY when nothing changed -- see pc_wait --, or -errno) and its completion,
 * which posts the tasks that depend on it. A task may also publish per-source events
 * (pc_sched_event: "source i's part of my work is in"), which the tasks subscribed to it take
 * at once, before it completes: the PAP hand-on, where a master hands a remote aggregate on
 * as it lands while its own gather still waits for a late local process. */
#ifndef PAPCOLL_SCHED_H
#define PAPCOLL_SCHED_H

#include "papcoll_native.h"

#define PC_TASKS 8                      /* the most tasks in a schedule */
#define PC_POSTED ((UINT64_C(1) << 56) - 1) /* an event log's "source" of a task's post */

struct pc_task;
/* What a kind of task does. post: NULL, nothing to start; else 0 or -errno. progress: NULL,
 * complete once posted. event: a per-source event of the task it subscribes to, called
 * before or after this one is posted (it needs nothing post sets up): 0 or -errno. */
struct pc_task_kind {
    const char *name;
    int (*post)(struct pc_task *t);
    int (*progress)(struct pc_task *t);
    int (*event)(struct pc_task *t, size_t source);
    const struct pc_task_kind *next;    /* the registry's list */
};
void pc_task_kind_add(struct pc_task_kind *kind);
/* A kind of task, defined in its own file and registered as the library loads: a new task
 * is one C file (setup.py builds every C file in native/) and a line in its algorithm's
 * schedule. */
#define PC_TASK_KIND(id, name, post, progress, event)                                    \
    static struct pc_task_kind id = {name, post, progress, event, NULL};                 \
    __attribute__((constructor)) static void id##_add(void) { pc_task_kind_add(&id); }

struct pc_sched;
struct pc_task {
    const struct pc_task_kind *kind;    /* NULL: no task here */
    struct pc_sched *sched;
    void *arg;                          /* what the kind's functions work on */
    uint32_t deps;                      /* bit j: task j must complete before this one posts */
    int subscribes;                     /* the task whose events it takes; -1: none */
};

/* The tasks (n, each added by pc_sched_task), their state in the run in progress (posted, done:
 * bit i for task i), the task whose error ended it (failed, -1: none), the run's deadline
 * (tasks that call a transport pass it on), and, when events is set, a log of room for
 * max_events pairs (task << 56 | source, or | PC_POSTED; CLOCK_MONOTONIC ns). */
struct pc_sched {
    struct pc_task task[PC_TASKS];
    int n;
    uint32_t posted, done;
    int failed;
    int64_t deadline;
    int64_t *events;
    size_t nevents, max_events;
};

/* Make task i of s (i < PC_TASKS; tasks are added in order of dependence, so deps and
 * subscribes name earlier ones) one of the kind named kind, working on arg, posted once the
 * tasks of deps complete, taking the per-source events of task subscribes (-1: none).
 * 0, -ENOENT (no such kind), or -EINVAL. */
int pc_sched_task(struct pc_sched *s, int i, const char *kind, void *arg, uint32_t deps,
                  int subscribes);
/* Begin a run: nothing posted or done, no events; post every task without dependencies.
 * 0, or a post's -errno (failed names it). */
int pc_sched_start(struct pc_sched *s);
/* Move the run on until every task is complete or timeout_ns passes: 1 done, -ETIMEDOUT
 * (run again: the state is kept), or a task's -errno (failed names it). */
int pc_sched_run(struct pc_sched *s, int64_t timeout_ns);
/* Task t says source's part of its work is in: taken by every task subscribed to it. 0, or
 * a subscriber's -errno (failed names it). */
int pc_sched_event(struct pc_task *t, size_t source);
/* Log that task t served source (PC_POSTED: it was posted), when the log is on. */
void pc_sched_log(struct pc_task *t, uint64_t source);

#endif
