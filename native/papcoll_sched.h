/* A schedule of tasks, after UCC's (ucc_schedule_add_task, ucc_task_subscribe_dep): the
 * phases of a collective as tasks, each started once the tasks it depends on complete, all
 * moved on by one progress queue in one wait. The hierarchical call (papcoll_hier.c) is one.
 *
 * A task has a post (its start: arm what it waits for, or do what needs no waiting), a
 * progress step (one look, never a wait: PC_DONE once complete, PC_MORE when it moved,
 * PC_IDLE when nothing changed, or -errno) and its completion, which posts the tasks that
 * depend on it. A task may also publish per-source events (pc_sched_event: "source i's part
 * of my work is in"), which the tasks subscribed to it take at once, before it completes:
 * the PAP hand-on, where a master hands a remote aggregate on as it lands while its own
 * gather still waits for a late local process. */
#ifndef PAPCOLL_SCHED_H
#define PAPCOLL_SCHED_H

#include "papcoll_native.h"

#define PC_TASKS 8                      /* the most tasks in a schedule */
#define PC_POSTED ((UINT64_C(1) << 56) - 1) /* an event log's "source" of a task's post */

struct pc_sched;
struct pc_task {
    int (*post)(struct pc_task *t);     /* NULL: nothing to start; else 0 or -errno */
    int (*progress)(struct pc_task *t); /* NULL: complete once posted */
    /* A per-source event of the task this one subscribes to (called before or after this
     * one is posted: it must need nothing post sets up). 0 or -errno. */
    int (*event)(struct pc_task *t, size_t source);
    struct pc_sched *sched;
    void *arg;
    uint32_t deps;                      /* bit j: task j must complete before this one posts */
    int subscribes;                     /* the task whose events it takes; -1: none */
};

/* The tasks (n, each added by pc_sched_add), their state in the run in progress (posted, done:
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

/* Task i of s (0 <= i < PC_TASKS, added in order of dependence: deps name earlier tasks),
 * or NULL when it is not in s. */
struct pc_task *pc_sched_add(struct pc_sched *s, int i, int (*post)(struct pc_task *),
                             int (*progress)(struct pc_task *), void *arg, uint32_t deps);
/* Begin a run: nothing posted or done, no events; post every task without dependencies.
 * 0, or a post's -errno (failed names it). */
int pc_sched_start(struct pc_sched *s);
/* Move the run on until every task is complete or timeout_ns passes: 1 done, -ETIMEDOUT
 * (run again: the state is kept), or a task's -errno (failed names it). */
int pc_sched_run(struct pc_sched *s, int64_t timeout_ns);
/* Task `from` says source's part of its work is in: logged, and taken by every task
 * subscribed to it. 0, or a subscriber's -errno (failed names it). */
int pc_sched_event(struct pc_sched *s, int from, size_t source);
/* Log that task `from` served source (PC_POSTED: it was posted), when the log is on. */
void pc_sched_log(struct pc_sched *s, int from, uint64_t source);

#endif
