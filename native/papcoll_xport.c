/* papcoll's one-sided transports, native half: see papcoll_xport.h. */
#include "papcoll_xport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "papcoll_native.h"

/* ---- verbs -----------------------------------------------------------------------------
 * The few libibverbs types the hot path touches, as the public ABI (infiniband/verbs.h)
 * lays them out -- an ABI libibverbs keeps stable -- so that the native core builds without
 * rdma-core's headers. The provider's entry points are called as verbs.h's inline
 * ibv_post_send, ibv_post_recv and ibv_poll_cq call them: through the context's ops table.
 * Python checks that it found the right objects (transport/verbs.py). */

struct pcv_sge {
    uint64_t addr;
    uint32_t length, lkey;
};

struct pcv_send_wr {
    uint64_t wr_id;
    struct pcv_send_wr *next;
    struct pcv_sge *sg_list;
    int num_sge, opcode;
    unsigned int send_flags;
    uint32_t imm_data;          /* network byte order */
    uint64_t remote_addr;       /* wr.rdma, at offset 40 */
    uint32_t rkey;
    char rest[92];              /* the rest of the real struct (128 bytes): zero */
};

struct pcv_recv_wr {
    uint64_t wr_id;
    struct pcv_recv_wr *next;
    struct pcv_sge *sg_list;
    int num_sge;
};

struct pcv_wc {
    uint64_t wr_id;
    int status, opcode;
    uint32_t vendor_err, byte_len, imm_data, qp_num, src_qp;
    unsigned int wc_flags;
    uint16_t pkey_index, slid;
    uint8_t sl, dlid_path_bits;
};

struct pcv_qp {                 /* struct ibv_qp's head */
    void *context, *qp_context, *pd, *send_cq, *recv_cq, *srq;
    uint32_t handle, qp_num;
};

struct pcv_cq {                 /* struct ibv_cq's head */
    void *context;
};

enum { PCV_POLL_CQ = 11, PCV_POST_SEND = 25, PCV_POST_RECV = 26 }; /* ibv_context_ops slots */
enum { PCV_WRITE = 0, PCV_WRITE_WITH_IMM = 1, PCV_SIGNALED = 2, PCV_INLINE = 8 };
enum { PCV_WC_WR_FLUSH_ERR = 5 };
#define PCV_INLINE_MAX 64       /* the QPs' max_inline_data (transport/verbs.py) */
#define PCV_POLL 32             /* completions reaped per poll_cq */

typedef int (*pcv_poll_cq_fn)(void *, int, struct pcv_wc *);
typedef int (*pcv_post_send_fn)(void *, struct pcv_send_wr *, struct pcv_send_wr **);
typedef int (*pcv_post_recv_fn)(void *, struct pcv_recv_wr *, struct pcv_recv_wr **);

static void *op(void *context, int slot)
{
    /* struct ibv_context: a device pointer, then the ops table */
    return ((void **)((char *)context + sizeof(void *)))[slot];
}

static int fail(struct pc_xport *x, size_t peer, int status, int vendor)
{
    x->failed_peer = peer;
    x->failed_status = status;
    x->failed_vendor = vendor;
    return -EIO;
}

/* The peer whose QP has this number (qp_order sorts the peers by it). */
static size_t peer_of(const struct pc_xport *x, uint32_t qp_num)
{
    size_t lo = 0, hi = x->n - 2; /* n - 1 peers (me excluded), sorted */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (x->peers[x->qp_order[mid]].qp_num < qp_num)
            lo = mid + 1;
        else
            hi = mid;
    }
    return x->qp_order[lo];
}

static int verbs_put(struct pc_xport *x, size_t peer, int dest, uint64_t offset, uint32_t rkey,
                     const void *src, size_t len, uint32_t lkey, int kind, uint64_t seq,
                     uint32_t code, int signal)
{
    struct pc_vpeer *p = &x->peers[peer];
    struct pcv_sge sge = {(uint64_t)(uintptr_t)src, (uint32_t)len, lkey};
    struct pcv_send_wr wr;
    memset(&wr, 0, sizeof wr);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    if (len == 0) {                       /* a notice alone: an empty SGE */
        sge.addr = x->scratch;
        sge.lkey = x->scratch_lkey;
    } else if (len <= PCV_INLINE_MAX) {
        wr.send_flags |= PCV_INLINE;
    }
    if (kind >= 0) {
        wr.opcode = PCV_WRITE_WITH_IMM;
        wr.imm_data = htonl(pc_imm(kind, seq, code));
    } else {
        wr.opcode = PCV_WRITE;
    }
    if (dest == PC_TO_ADVERTS) {
        wr.remote_addr = p->adverts_addr + offset;
        wr.rkey = p->adverts_rkey;
    } else if (dest == PC_TO_INBOX) {
        wr.remote_addr = p->inbox_addr + offset;
        wr.rkey = p->inbox_rkey;
    } else {
        wr.remote_addr = offset;
        wr.rkey = rkey;
    }
    /* The send queue holds depth entries; one must stay free to signal a completion. */
    if (!signal && p->unsignaled + 1 >= x->depth / 2)
        signal = 1;
    if (p->posted + 1 > x->depth) {       /* full: wait for completions to retire entries */
        int64_t left = x->deadline - pc_now_ns();
        struct pc_backoff b;
        int rc = pc_backoff_begin(&b, left > 0 ? left : 0);
        for (; rc == 0 && p->posted + 1 > x->depth; rc = pc_backoff_pause(&b))
            if ((rc = pc_xport_poll(x)) < 0)
                return rc;
        if (p->posted + 1 > x->depth) {
            x->failed_peer = peer;
            return -ETIMEDOUT;
        }
    }
    if (signal)
        wr.send_flags |= PCV_SIGNALED;
    wr.wr_id = p->unsignaled + 1;         /* how many entries its completion retires */
    struct pcv_send_wr *bad;
    int rc = ((pcv_post_send_fn)op(((struct pcv_qp *)p->qp)->context, PCV_POST_SEND))(
        p->qp, &wr, &bad);
    if (rc)
        return fail(x, peer, -rc, rc);
    p->posted++;
    p->unsignaled = signal ? 0 : p->unsignaled + 1;
    return 0;
}

int pc_xport_post_receives(struct pc_xport *x, size_t peer, size_t count)
{
    struct pc_vpeer *p = &x->peers[peer];
    struct pcv_sge sge = {x->scratch, 8, x->scratch_lkey};
    struct pcv_recv_wr wr = {peer, NULL, &sge, 1}, *bad;
    pcv_post_recv_fn post = (pcv_post_recv_fn)op(((struct pcv_qp *)p->qp)->context,
                                                 PCV_POST_RECV);
    for (size_t i = 0; i < count; i++) {
        int rc = post(p->qp, &wr, &bad);
        if (rc)
            return fail(x, peer, -rc, rc);
    }
    return 0;
}

static int poll_sends(struct pc_xport *x, void *context)
{
    struct pcv_wc wc[PCV_POLL];
    pcv_poll_cq_fn poll = (pcv_poll_cq_fn)op(context, PCV_POLL_CQ);
    int got;
    while ((got = poll(x->send_cq, PCV_POLL, wc)) > 0) {
        for (int i = 0; i < got; i++) {
            size_t peer = peer_of(x, wc[i].qp_num);
            if (wc[i].status)
                return fail(x, peer, wc[i].status, (int)wc[i].vendor_err);
            x->peers[peer].posted -= (uint32_t)wc[i].wr_id;
        }
    }
    return got < 0 ? fail(x, x->n, got, 0) : 0;
}

static int verbs_poll(struct pc_xport *x)
{
    struct pcv_wc wc[PCV_POLL];
    void *context = ((struct pcv_cq *)x->recv_cq)->context;
    pcv_poll_cq_fn poll = (pcv_poll_cq_fn)op(context, PCV_POLL_CQ);
    int got;
    while ((got = poll(x->recv_cq, PCV_POLL, wc)) > 0) {
        for (int i = 0; i < got; i++) {
            size_t peer = (size_t)wc[i].wr_id;
            if (wc[i].status) {
                /* A flushed receive: the QP failed, and a write's completion says why. */
                int rc = wc[i].status == PCV_WC_WR_FLUSH_ERR ? poll_sends(x, context) : 0;
                return rc < 0 ? rc : fail(x, peer, wc[i].status, (int)wc[i].vendor_err);
            }
            uint32_t imm = ntohl(wc[i].imm_data);
            x->boards[pc_board_index(pc_imm_kind(imm), imm, x->n, peer)] =
                pc_imm_word(imm, wc[i].byte_len);
            int rc = pc_xport_post_receives(x, peer, 1);
            if (rc < 0)
                return rc;
        }
    }
    if (got < 0)
        return fail(x, x->n, got, 0);
    return poll_sends(x, context);
}

/* ---- MPI RMA ------------------------------------------------------------------------- */

static int mpi_fail(struct pc_xport *x, size_t peer, int rc)
{
    return fail(x, peer, rc, 0);
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

static int mpi_put(struct pc_xport *x, size_t peer, int dest, uint64_t offset,
                   const void *src, size_t len, int kind, uint64_t seq, uint32_t code)
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

int pc_xport_flush(struct pc_xport *x)
{
    if (x->kind != PC_MPI)
        return 0;
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

static int mpi_poll(struct pc_xport *x)
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
    if (m->in_flight && (rc = pc_xport_flush(x)) < 0)
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
static int mpi_complete(struct pc_xport *x, int64_t timeout_ns)
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

/* ---- the interface --------------------------------------------------------------------- */

int pc_xport_put(struct pc_xport *x, size_t peer, int dest, uint64_t offset, uint32_t rkey,
                 const void *src, size_t len, uint32_t lkey, int kind, uint64_t seq,
                 uint32_t code, int signal)
{
    if (peer >= x->n || peer == x->me)
        return -EINVAL;
    if (dest == PC_TO_INBOX && (offset > x->inbox_bytes[peer] ||
                                len > x->inbox_bytes[peer] - offset)) {
        x->failed_peer = peer;            /* never past what the peer exposed */
        return -EMSGSIZE;
    }
    if (x->kind == PC_VERBS)
        return verbs_put(x, peer, dest, offset, rkey, src, len, lkey, kind, seq, code, signal);
    return mpi_put(x, peer, dest, offset, src, len, kind, seq, code);
}

int pc_xport_poll(struct pc_xport *x)
{
    return x->kind == PC_VERBS ? verbs_poll(x) : mpi_poll(x);
}

int pc_xport_complete(struct pc_xport *x, int64_t timeout_ns)
{
    int rc = pc_xport_flush(x);
    if (rc < 0)
        return rc;
    if (x->kind == PC_MPI)
        return mpi_complete(x, timeout_ns);
    struct pc_backoff b;          /* the completions come from the device, or a peer's core */
    for (rc = pc_backoff_begin(&b, timeout_ns); rc == 0; rc = pc_backoff_pause(&b)) {
        size_t busy = x->n;
        for (size_t q = 0; q < x->n && busy == x->n; q++)
            if (q != x->me && x->peers[q].posted)
                busy = q;
        if (busy == x->n)
            return 0;
        x->failed_peer = busy;
        if ((rc = verbs_poll(x)) < 0)
            return rc;
    }
    return rc;
}
