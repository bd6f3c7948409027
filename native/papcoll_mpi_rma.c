/* papcoll's one-sided transports, native half over MPI RMA (see papcoll_xport.h, struct
 * pc_mpi), and the ``mpi`` algorithm's MPI_Alltoall: the one file compiled against the mpi.h
 * of the MPI in use (setup.py builds with its mpicc), which calls MPI by its documented C
 * interface, with the handles of mpi4py's objects. */
#include "papcoll_plan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "papcoll_native.h"

#define PC_IN_WIN 1     /* the windows a peer's data went to since its last notice */
#define PC_IN_INBOX 2
#define PC_IN_DYN 4

struct pc_mpi {
    MPI_Win win, inbox_win, dyn;
    MPI_Comm comm;
    size_t adverts_at, inbox_at; /* displacements in win (inbox: in inbox_win) */
    MPI_Request *reqs;           /* n x PC_MPI_REQS */
    uint8_t *active;             /* n x PC_MPI_REQS: that request is in flight */
    uint8_t *dirty;              /* n: PC_IN_* windows with data to that peer, not flushed */
    uint64_t *queued;            /* [kind][n]: the notice word queued for each peer, 0 if none */
    uint64_t *notices;           /* [kind][n]: the source of each notice put, untouched until
                                  * its request completes (one notice of a kind per call) */
    uint64_t *notice_at;         /* [kind][n]: where in win each queued notice goes */
    size_t in_flight;            /* requests active, all peers */
};

/* mpi4py's ``handle`` is the value of the C handle: an int (MPICH) or a pointer (Open MPI),
 * either of which an intptr_t holds and converts back to exactly. */
#define PC_HANDLE(type, value) ((type)(value))

static void mpi_free(struct pc_mpi *m)
{
    free(m->reqs);
    free(m->active);
    free(m->queued);
    free(m);
}

int pc_mpi_open(struct pc_xport *x, intptr_t comm, intptr_t win, intptr_t inbox_win,
                intptr_t dyn, size_t adverts_at, size_t inbox_at)
{
    size_t n = x->n, reqs = n * PC_MPI_REQS;
    struct pc_mpi *m = calloc(1, sizeof *m);
    if (m == NULL)
        return -ENOMEM;
    m->reqs = calloc(reqs, sizeof *m->reqs);
    m->active = calloc(reqs + n, 1);
    m->queued = calloc(3 * 2 * n, sizeof *m->queued);
    if (m->reqs == NULL || m->active == NULL || m->queued == NULL) {
        mpi_free(m);
        return -ENOMEM;
    }
    m->dirty = m->active + reqs;
    m->notices = m->queued + 2 * n;
    m->notice_at = m->notices + 2 * n;
    m->comm = PC_HANDLE(MPI_Comm, comm);
    m->win = PC_HANDLE(MPI_Win, win);
    m->inbox_win = PC_HANDLE(MPI_Win, inbox_win);
    m->dyn = PC_HANDLE(MPI_Win, dyn);
    m->adverts_at = adverts_at;
    m->inbox_at = inbox_at;
    x->mpi = m;
    return 0;
}

int pc_mpi_alltoall(const void *send, int count, void *recv, intptr_t comm)
{
    return MPI_Alltoall(send ? send : MPI_IN_PLACE, count, MPI_BYTE, recv, count, MPI_BYTE,
                        PC_HANDLE(MPI_Comm, comm));
}

int pc_mpi_pack(void *user, int count, intptr_t type, void *packed, int size, int unpack)
{
    int position = 0;
    void *at = user ? user : MPI_BOTTOM;
    MPI_Datatype t = PC_HANDLE(MPI_Datatype, type);
    return unpack ? MPI_Unpack(packed, size, &position, at, count, t, MPI_COMM_SELF)
                  : MPI_Pack(at, count, t, packed, size, &position, MPI_COMM_SELF);
}

int pc_mpi_alltoallv(const void *send, const struct pc_vshape *s, void *recv,
                     const struct pc_vshape *r, intptr_t comm)
{
    if (send == NULL) /* in place: MPI reads no send argument; r's stand for them */
        send = MPI_IN_PLACE, s = r;
    return MPI_Alltoallv(send, s->icounts, s->idispls, PC_HANDLE(MPI_Datatype, s->mpi_type),
                         recv, r->icounts, r->idispls, PC_HANDLE(MPI_Datatype, r->mpi_type),
                         PC_HANDLE(MPI_Comm, comm));
}

int pc_mpi_alltoallw(const void *send, const struct pc_vshape *s, void *recv,
                     const struct pc_vshape *r, intptr_t comm)
{
    MPI_Comm c = PC_HANDLE(MPI_Comm, comm);
    int n;
    MPI_Comm_size(c, &n);
    if (send == NULL) /* as in pc_mpi_alltoallv */
        send = MPI_IN_PLACE, s = r;
    MPI_Datatype types[2][n];
    for (int q = 0; q < n; q++) {
        types[0][q] = PC_HANDLE(MPI_Datatype, s->mpi_types[q]);
        types[1][q] = PC_HANDLE(MPI_Datatype, r->mpi_types[q]);
    }
    return MPI_Alltoallw(send, s->icounts, s->idispls, types[0], recv, r->icounts, r->idispls,
                         types[1], c);
}

static int mpi_fail(struct pc_xport *x, size_t peer, int rc)
{
    return pc_xport_fail(x, peer, rc, 0);
}

/* Test peer's requests in flight (MPI_Test also drives progress): 1 when none is left. */
static int mpi_settled(struct pc_xport *x, size_t peer)
{
    struct pc_mpi *m = x->mpi;
    int left = 0;
    for (size_t i = peer * PC_MPI_REQS; i < (peer + 1) * PC_MPI_REQS; i++) {
        if (!m->active[i])
            continue;
        int done = 0, rc = MPI_Test(&m->reqs[i], &done, MPI_STATUS_IGNORE);
        if (rc)
            return mpi_fail(x, peer, rc);
        if (done) {
            m->active[i] = 0;
            m->in_flight--;
        } else {
            left = 1;
        }
    }
    return !left;
}

int pc_mpi_close(struct pc_xport *x, int64_t timeout_ns)
{
    struct pc_mpi *m = x->mpi;
    if (m == NULL)
        return 0;
    int64_t deadline = pc_deadline(timeout_ns);
    for (;;) {
        int settled = 1;
        for (size_t q = 0; q < x->n; q++)
            settled &= mpi_settled(x, q) == 1;
        if (settled || m->in_flight == 0) {
            mpi_free(m);
            x->mpi = NULL;
            return 0;
        }
        if (pc_now_ns() >= deadline)
            break;
    }
    for (size_t i = 0; i < x->n * PC_MPI_REQS; i++)
        if (m->active[i])
            MPI_Request_free(&m->reqs[i]);
    x->mpi = NULL;              /* m stays: MPI may still read the notices it holds */
    return -EBUSY;
}

void pc_mpi_forget(struct pc_xport *x)
{
    struct pc_mpi *m = x->mpi;
    if (m != NULL && m->in_flight == 0)
        mpi_free(m);
    x->mpi = NULL;
    x->kind = PC_CLOSED;        /* a call still holding x gets -EBADF, never a NULL m */
}

static int mpi_rput(struct pc_xport *x, size_t peer, const void *src, int count,
                    MPI_Datatype type, uint64_t at, MPI_Win win)
{
    struct pc_mpi *m = x->mpi;
    size_t i = peer * PC_MPI_REQS, end = i + PC_MPI_REQS;
    while (i < end && m->active[i])
        i++;
    if (i == end) {                       /* full: some may have completed meanwhile */
        int rc = mpi_settled(x, peer);
        if (rc < 0)
            return rc;
        for (i = peer * PC_MPI_REQS; i < end && m->active[i]; i++)
            ;
        if (i == end) {                   /* more than a call makes: a bug, not a peer */
            x->failed_peer = peer;
            return -EBUSY;
        }
    }
    int rc = MPI_Rput(src, count, type, (int)peer, (MPI_Aint)at, count, type, win, &m->reqs[i]);
    if (rc)
        return mpi_fail(x, peer, rc);
    m->active[i] = 1;
    m->in_flight++;
    return 0;
}

int pc_mpi_put(struct pc_xport *x, size_t peer, int dest, uint64_t offset, const void *src,
               size_t len, int kind, uint64_t seq, uint32_t code)
{
    struct pc_mpi *m = x->mpi;
    MPI_Win win;
    uint64_t at;
    int window;
    if (kind >= 0 && m->queued[kind * x->n + peer]) { /* one notice of a kind per call */
        x->failed_peer = peer;
        return -EBUSY;
    }
    if (dest == PC_TO_ADVERTS) {
        win = m->win, at = m->adverts_at + offset, window = PC_IN_WIN;
    } else if (dest == PC_TO_INBOX) {
        win = m->inbox_win, at = m->inbox_at + offset;
        window = m->inbox_win == m->win ? PC_IN_WIN : PC_IN_INBOX;
    } else {
        win = m->dyn, at = offset, window = PC_IN_DYN;
    }
    if (len > INT32_MAX)
        return -EINVAL;
    if (len) {
        int rc = mpi_rput(x, peer, src, (int)len, MPI_BYTE, at, win);
        if (rc < 0)
            return rc;
        m->dirty[peer] |= (uint8_t)window;
    }
    if (kind >= 0) {                      /* queued: pc_xport_flush puts it after the data */
        m->queued[kind * x->n + peer] = pc_notice_word(seq, code, (uint32_t)len);
        m->notice_at[kind * x->n + peer] = pc_board_index(kind, seq, x->n, x->me) * 8;
    }
    return 0;
}

/* Peer's queued notices, if the data put to it before them is complete there. */
static int mpi_notify(struct pc_xport *x, size_t peer)
{
    struct pc_mpi *m = x->mpi;
    int rc = mpi_settled(x, peer);
    if (rc <= 0)
        return rc;
    /* Nothing in flight to peer: these flushes wait for nobody, and complete the data at
     * the target (MPI's own promise; a completed request promises only the source). */
    static const int windows[] = {PC_IN_WIN, PC_IN_INBOX, PC_IN_DYN};
    for (int w = 0; w < 3; w++) {
        if (!(m->dirty[peer] & windows[w]))
            continue;
        MPI_Win win = w == 0 ? m->win : w == 1 ? m->inbox_win : m->dyn;
        if ((rc = MPI_Win_flush((int)peer, win)))
            return mpi_fail(x, peer, rc);
    }
    m->dirty[peer] = 0;
    for (int kind = 0; kind < 2; kind++) {
        size_t k = kind * x->n + peer;
        if (!m->queued[k])
            continue;
        m->notices[k] = m->queued[k];
        m->queued[k] = 0;
        rc = mpi_rput(x, peer, &m->notices[k], 1, MPI_UINT64_T, m->notice_at[k], m->win);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int pc_mpi_flush(struct pc_xport *x)
{
    struct pc_mpi *m = x->mpi;
    for (size_t q = 0; q < x->n; q++) {
        if (m->queued[q] || m->queued[x->n + q]) {
            int rc = mpi_notify(x, q);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

int pc_mpi_poll(struct pc_xport *x)
{
    struct pc_mpi *m = x->mpi;
    int flag, rc = MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, m->comm, &flag, MPI_STATUS_IGNORE);
    /* MPICH serves RMA active messages (puts into my dynamic window) only in RMA calls: a
     * local flush when nothing of mine is in flight (it then waits for nobody), else the
     * tests of what is. */
    if (!rc && !m->in_flight)
        rc = MPI_Win_flush_local_all(m->dyn);
    if (rc)
        return mpi_fail(x, x->n, rc);
    if (m->in_flight && (rc = pc_mpi_flush(x)) < 0)
        return rc;
    for (size_t q = 0; q < x->n && m->in_flight; q++)
        if ((rc = mpi_settled(x, q)) < 0)
            return rc;
    rc = MPI_Win_sync(m->win);
    if (!rc && m->inbox_win != m->win)
        rc = MPI_Win_sync(m->inbox_win);
    if (!rc)
        rc = MPI_Win_sync(m->dyn);
    return rc ? mpi_fail(x, x->n, rc) : 0;
}

/* One look of pc_mpi_complete: queued notices put where their data is complete; done when
 * none is queued and no request is in flight (failed_peer: the first still busy). */
static int mpi_settle(void *what)
{
    struct pc_xport *x = what;
    struct pc_mpi *m = x->mpi;
    size_t busy = x->n;
    for (size_t q = 0; q < x->n; q++) {
        int rc = mpi_notify(x, q);
        if (rc < 0)
            return rc;
        if (busy == x->n && (m->queued[q] || m->queued[x->n + q] || !mpi_settled(x, q)))
            busy = q;
    }
    if (busy == x->n)
        return PC_DONE;
    x->failed_peer = busy;
    return PC_IDLE;
}

/* Every queued notice put and every request complete, within the deadline. */
int pc_mpi_complete(struct pc_xport *x, int64_t timeout_ns)
{
    return pc_wait(mpi_settle, x, pc_deadline(timeout_ns), 0);
}
