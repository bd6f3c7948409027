/* papcoll's one-sided transports, native half over MPI RMA (see papcoll_xport.h, struct
 * pc_mpi). */
#include "papcoll_xport.h"

#include <errno.h>
#include <string.h>

#include "papcoll_native.h"

static int mpi_fail(struct pc_xport *x, size_t peer, int rc)
{
    return pc_xport_fail(x, peer, rc, 0);
}

/* Test peer's requests in flight (MPI_Test also drives progress): 1 when none is left. */
static int mpi_settled(struct pc_xport *x, size_t peer)
{
    struct pc_mpi *m = &x->mpi;
    int left = 0;
    for (size_t i = peer * PC_MPI_REQS; i < (peer + 1) * PC_MPI_REQS; i++) {
        if (!m->active[i])
            continue;
        int done = 0, rc = m->test(m->reqs + i * m->req_size, &done, m->status);
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

static int mpi_rput(struct pc_xport *x, size_t peer, const void *src, int count,
                    intptr_t type, uint64_t at, intptr_t win)
{
    struct pc_mpi *m = &x->mpi;
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
    int rc = m->rput(src, count, type, (int)peer, (intptr_t)at, count, type, win,
                     m->reqs + i * m->req_size);
    if (rc)
        return mpi_fail(x, peer, rc);
    m->active[i] = 1;
    m->in_flight++;
    return 0;
}

int pc_mpi_put(struct pc_xport *x, size_t peer, int dest, uint64_t offset, const void *src,
               size_t len, int kind, uint64_t seq, uint32_t code)
{
    struct pc_mpi *m = &x->mpi;
    intptr_t win;
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
        int rc = mpi_rput(x, peer, src, (int)len, m->byte, at, win);
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
    struct pc_mpi *m = &x->mpi;
    int rc = mpi_settled(x, peer);
    if (rc <= 0)
        return rc;
    /* Nothing in flight to peer: these flushes wait for nobody, and complete the data at
     * the target (MPI's own promise; a completed request promises only the source). */
    static const int windows[] = {PC_IN_WIN, PC_IN_INBOX, PC_IN_DYN};
    for (int w = 0; w < 3; w++) {
        if (!(m->dirty[peer] & windows[w]))
            continue;
        intptr_t win = w == 0 ? m->win : w == 1 ? m->inbox_win : m->dyn;
        if ((rc = m->flush((int)peer, win)))
            return mpi_fail(x, peer, rc);
    }
    m->dirty[peer] = 0;
    for (int kind = 0; kind < 2; kind++) {
        size_t k = kind * x->n + peer;
        if (!m->queued[k])
            continue;
        m->notices[k] = m->queued[k];
        m->queued[k] = 0;
        rc = mpi_rput(x, peer, &m->notices[k], 1, m->uint64, m->notice_at[k], m->win);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int pc_mpi_flush(struct pc_xport *x)
{
    struct pc_mpi *m = &x->mpi;
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
    struct pc_mpi *m = &x->mpi;
    int flag, rc = m->iprobe(m->any_source, m->any_tag, m->comm, &flag, m->status);
    /* MPICH serves RMA active messages (puts into my dynamic window) only in RMA calls: a
     * local flush when nothing of mine is in flight (it then waits for nobody), else the
     * tests of what is. */
    if (!rc && !m->in_flight)
        rc = m->flush_local_all(m->dyn);
    if (rc)
        return mpi_fail(x, x->n, rc);
    if (m->in_flight && (rc = pc_mpi_flush(x)) < 0)
        return rc;
    for (size_t q = 0; q < x->n && m->in_flight; q++)
        if ((rc = mpi_settled(x, q)) < 0)
            return rc;
    rc = m->sync(m->win);
    if (!rc && m->inbox_win != m->win)
        rc = m->sync(m->inbox_win);
    if (!rc)
        rc = m->sync(m->dyn);
    return rc ? mpi_fail(x, x->n, rc) : 0;
}

/* Every queued notice put and every request complete, within the deadline. */
int pc_mpi_complete(struct pc_xport *x, int64_t timeout_ns)
{
    struct pc_mpi *m = &x->mpi;
    struct pc_backoff b;
    int rc = pc_backoff_begin(&b, timeout_ns);
    for (; rc == 0; rc = pc_backoff_pause(&b)) {
        size_t busy = x->n;
        for (size_t q = 0; q < x->n; q++) {
            if ((rc = mpi_notify(x, q)) < 0)
                return rc;
            if (busy == x->n && (m->queued[q] || m->queued[x->n + q] || !mpi_settled(x, q)))
                busy = q;
        }
        if (busy == x->n)
            return 0;
        x->failed_peer = busy;
    }
    return rc;
}
