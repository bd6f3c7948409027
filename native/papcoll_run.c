/* A planned Alltoall call run by its plan's kind (struct pc_plan, papcoll_plan.h): shm_pap's
 * segments, PAP Direct by the engine, the hierarchical round, MPI's own. pc_enter
 * (papcoll_call.c) holds and checks the buffers; this file runs the call with the GIL
 * released, and says by its rc how it ended.
 */
#include "papcoll_call.h"

#include <errno.h>
#include <string.h>

#include "papcoll_native.h"

/* One piece of a segment call: an epoch of pc_exchange_blocks, resumed slice by slice with
 * the GIL taken in between for signals. 0 when every process was served, -ETIMEDOUT at the
 * deadline, -EPROTO when a process's call differs (x->s.failed), -1 with a Python error set. */
static int segment_piece(const struct pc_plan *p, const char *src, char *dst, size_t len,
                         uint64_t epoch, int64_t deadline)
{
    struct pc_exchange *x = p->x;
    size_t left = x->s.n, block = (size_t)p->nbytes / x->s.n;
    x->s.target = epoch, x->s.sig = p->sig, x->s.start = p->start;
    for (;;) {
        int64_t slice = deadline - pc_now_ns();
        slice = slice < 0 ? 0 : slice > p->slice_ns ? p->slice_ns : slice;
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = pc_exchange_blocks(x, src, dst, block, len, slice);
        Py_END_ALLOW_THREADS
        if (rc > 0) {
            left -= (size_t)rc;
            if (left == 0)
                return 0;
        } else if (rc == -EPROTO) {
            return rc;
        } else if (rc != -ETIMEDOUT) { /* the plan was checked when it was built */
            PyErr_Format(PyExc_SystemError, "papcoll plan: exchange failed (%d)", rc);
            return -1;
        } else if (pc_now_ns() >= deadline) {
            return -ETIMEDOUT;
        }
        if (PyErr_CheckSignals() < 0)
            return -1;
    }
}

/* shm_pap: the call in slot-sized pieces, each the next epoch; at least one piece: a call of
 * empty blocks still meets its peers. 1, or as segment_piece. */
static int run_segment(const struct pc_plan *p, const char *send, char *recv)
{
    size_t block = (size_t)p->nbytes / p->x->s.n, slot = p->x->slot, offset = 0;
    int64_t deadline = pc_now_ns() + p->timeout_ns;
    int rc;
    do
        rc = segment_piece(p, send + offset, recv + offset,
                           block - offset < slot ? block - offset : slot, ++*p->epoch,
                           deadline);
    while (rc == 0 && (offset += slot) < block);
    return rc == 0 ? 1 : rc;
}

int pc_zero_copy(const struct pc_plan *p)
{
    return p->kind == PC_PLAN_ENGINE && p->calls[0]->scheme != PC_COPY;
}

/* A zero-copy plan's start: the next of the Exchange's zero-copy calls; the first start
 * makes its epoch the request's. */
static uint64_t next_advert(const struct pc_plan *p, uint64_t epoch)
{
    if (*p->first == 0)
        *p->first = epoch;
    return ++*p->adverts;
}

/* PAP Direct by the engine, run for slice_ns: 1 done, or the engine's rc for the call it left
 * in calls[epoch % 2] (-ETIMEDOUT after the slice: the caller resumes it, -EPROTO, a
 * transport's failure). Copy-based in place, the blocks go out of the plan's spare copy:
 * peers' blocks land in recv while mine for them may still be read. Zero-copy, peers write
 * into recv itself. */
static int run_engine(const struct pc_plan *p, const char *send, char *recv, int in_place,
                      int64_t slice_ns)
{
    uint64_t epoch = ++*p->epoch;
    struct pc_xcall *c = p->calls[epoch % 2];
    size_t me = c->x->me, block = (size_t)p->nbytes / c->x->n;
    int zcopy = pc_zero_copy(p);
    pc_xcall_start(c, epoch, zcopy ? next_advert(p, epoch) : *p->adverts, p->sig, c->code,
                   (int64_t)block);
    c->out = zcopy ? NULL : recv;
    if (zcopy) {
        /* same registration: pc_enter declines buffers at other addresses */
        pc_xcall_advertise(c, *p->first, 1, p->recv_at, p->recv_bytes, p->rkey);
        c->src = send;
        c->lkey = p->lkey;
        memcpy(recv + me * block, send + me * block, block);
    } else if (in_place) {
        memcpy(p->spare, recv, (size_t)p->nbytes);
        c->src = p->spare;
    } else {
        c->src = send;
        memcpy(recv + me * block, send + me * block, block);
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pc_xcall_run(c, slice_ns);
    Py_END_ALLOW_THREADS
    return rc;
}

/* mpi: MPI_Alltoall, the GIL released as mpi4py does. 1, or -(the MPI error code). */
static int run_mpi(const struct pc_plan *p, const char *send, char *recv, int in_place)
{
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pc_mpi_alltoall(in_place ? NULL : send, (int)(p->nbytes / p->n), recv, p->comm);
    Py_END_ALLOW_THREADS
    return rc ? -rc : 1;
}

/* shm_direct, pap_shm_direct: one round of the hierarchical call (papcoll_hier.c), its
 * round and board epoch the next of *round and *epoch, a master's call the next of *xepoch;
 * run for a slice: 1, or pc_sched_run's rc for the round left in the plan (resume() goes on
 * with it). */
static int run_hier(struct pc_plan *p, const char *send, char *recv, int in_place)
{
    uint64_t round = ++*p->round, epoch = ++*p->epoch;
    struct pc_hier *h = p->current = p->rounds[(epoch % 2) * 2 + round % 2];
    size_t block = (size_t)(p->nbytes / p->n);
    uint64_t xepoch = h->masters ? ++*p->xepoch : 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pc_hier_start(h, in_place ? recv : send, recv, block, 0, block, round, epoch, 0, xepoch,
                       *p->adverts);
    if (rc == 0)
        rc = pc_sched_run(&h->sched, p->slice_ns);
    Py_END_ALLOW_THREADS
    if (rc == 1)
        p->current = NULL;
    return rc;
}

/* The call entered into p in mode PC_RUN or PC_START, its buffers held by the caller: as
 * pc_enter's rc (papcoll_call.h); a Python error may be set. Only the engine's and MPI's
 * plans start: the algorithms that serve requests leave no others. */
int pc_run(struct pc_plan *p, const char *send, char *recv, int in_place, enum pc_mode mode)
{
    if (mode == PC_START)
        return p->kind == PC_PLAN_ENGINE ? run_engine(p, send, recv, in_place, 0)
               : p->kind == PC_PLAN_MPI  ? PC_MPI_STARTS
                                         : 0;
    return p->kind == PC_PLAN_SEGMENT  ? run_segment(p, send, recv)
           : p->kind == PC_PLAN_ENGINE ? run_engine(p, send, recv, in_place, p->slice_ns)
           : p->kind == PC_PLAN_HIER   ? run_hier(p, send, recv, in_place)
                                       : run_mpi(p, send, recv, in_place);
}
