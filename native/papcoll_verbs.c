/* papcoll's one-sided transports, native half over verbs (see papcoll_xport.h): the hot path,
 * libibverbs' inline ibv_post_send, ibv_post_recv and ibv_poll_cq on the QPs and CQs that
 * papcoll_ibv.c made. */
#include "papcoll_xport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "papcoll_ibv.h"
#include "papcoll_native.h"

#define PCV_POLL 32             /* completions reaped per ibv_poll_cq */

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

/* Post peer's queued writes as one list: one doorbell. 0 or -errno (failed_*). */
static int post_chain(struct pc_xport *x, size_t peer)
{
    struct pc_ibv_chain *ch = &x->chains[peer];
    if (ch->len == 0)
        return 0;
    struct ibv_send_wr *bad;
    int rc = ibv_post_send(x->peers[peer].qp, ch->wr, &bad);
    ch->len = 0;
    x->vstats.doorbells++;
    return rc ? pc_xport_fail(x, peer, -rc, rc) : 0;
}

int pc_verbs_flush(struct pc_xport *x)
{
    int first = 0;
    for (size_t q = 0; q < x->n; q++) {
        int rc = q == x->me ? 0 : post_chain(x, q);
        first = first ? first : rc;
    }
    return first;
}

/* Queue wr (its one SGE, sge) on peer's chain; post the chain unless x->batch. */
static int queue(struct pc_xport *x, size_t peer, const struct ibv_send_wr *wr,
                 const struct ibv_sge *sge)
{
    struct pc_ibv_chain *ch = &x->chains[peer];
    int rc;
    if (ch->len == PC_IBV_CHAIN && (rc = post_chain(x, peer)) < 0)
        return rc;
    int i = ch->len++;
    ch->sge[i] = *sge;
    ch->wr[i] = *wr;
    ch->wr[i].sg_list = &ch->sge[i];
    ch->wr[i].next = NULL;
    if (i > 0)
        ch->wr[i - 1].next = &ch->wr[i];
    return x->batch ? 0 : post_chain(x, peer);
}

/* A wait of pc_verbs_put for room in a full send queue: completions retire entries. */
struct room {
    struct pc_xport *x;
    const struct pc_vpeer *p;
};

static int has_room(void *what)
{
    const struct room *r = what;
    int rc = pc_xport_poll(r->x);
    return rc < 0 ? rc : r->p->posted + 1 > r->x->depth ? PC_IDLE : PC_DONE;
}

/* A wait of stage for the staging ring's bytes up to end, freed by completions. */
struct ring_room {
    struct pc_xport *x;
    const struct pc_vpeer *p;
    uint64_t end;
};

static int ring_free(void *what)
{
    const struct ring_room *r = what;
    int rc = pc_xport_poll(r->x);
    return rc < 0 ? rc : r->end - r->p->stage_tail > r->x->stage_bytes ? PC_IDLE : PC_DONE;
}

/* Copy len bytes of src into peer's staging ring, contiguous (a block that would wrap starts
 * the ring over, the bytes skipped freed with it): where they are, or 0 with *rc set. Each
 * staged write is signalled, and its completion frees the ring up to its end (*end); a QP's
 * completions come in order, so the ring's bytes are freed in the order they were taken. */
static uint64_t stage(struct pc_xport *x, size_t peer, const void *src, size_t len,
                      uint64_t *end, int *rc)
{
    struct pc_vpeer *p = &x->peers[peer];
    uint64_t at = p->stage_head, bytes = x->stage_bytes;
    if (at % bytes + len > bytes)
        at += bytes - at % bytes;
    if (at + len - p->stage_tail > bytes) {
        struct ring_room r = {x, p, at + len};
        if ((*rc = post_chain(x, peer)) < 0)   /* the writes that free it may be queued */
            return 0;
        *rc = pc_wait(ring_free, &r, x->deadline, 0);
        if (*rc == -ETIMEDOUT)
            x->failed_peer = peer;
        if (*rc < 0)
            return 0;
    }
    char *to = x->stage + peer * bytes + at % bytes;
    memcpy(to, src, len);
    p->stage_head = *end = at + len;
    x->vstats.bcopies++;
    return (uint64_t)(uintptr_t)to;
}

/* A write's wr_id: how many entries its completion retires, and a staged write's ring end. */
#define PCV_STAGED (1ull << 31)
#define PCV_RETIRES(id) ((uint32_t)((id) & (PCV_STAGED - 1)))

int pc_verbs_put(struct pc_xport *x, size_t peer, int dest, uint64_t offset, uint32_t rkey,
                 const void *src, size_t len, uint32_t lkey, int kind, uint64_t seq,
                 uint32_t code, int signal)
{
    struct pc_vpeer *p = &x->peers[peer];
    struct ibv_sge sge = {(uint64_t)(uintptr_t)src, (uint32_t)len, lkey};
    struct ibv_send_wr wr;
    memset(&wr, 0, sizeof wr);
    wr.sg_list = &sge;
    wr.num_sge = 1;
    int copied = len <= x->bcopy_max;     /* the device is done with src at the post */
    int staged = len > PC_IBV_INLINE && copied;
    if (len == 0) {                       /* a notice alone: an empty SGE */
        sge.addr = x->scratch;
        sge.lkey = x->scratch_lkey;
    } else if (len <= PC_IBV_INLINE) {
        wr.send_flags |= IBV_SEND_INLINE;
    }
    if (kind >= 0) {
        wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
        wr.imm_data = htonl(pc_imm(kind, seq, code));
    } else {
        wr.opcode = IBV_WR_RDMA_WRITE;
    }
    if (dest == PC_TO_ADVERTS) {
        wr.wr.rdma.remote_addr = p->adverts_addr + offset;
        wr.wr.rdma.rkey = p->adverts_rkey;
    } else if (dest == PC_TO_INBOX) {
        wr.wr.rdma.remote_addr = p->inbox_addr + offset;
        wr.wr.rdma.rkey = p->inbox_rkey;
    } else {
        wr.wr.rdma.remote_addr = offset;
        wr.wr.rdma.rkey = rkey;
    }
    /* The send queue holds depth entries; one must stay free to signal a completion. A source
     * read later is in use until a completion says otherwise. */
    if (!copied || staged || (!signal && p->unsignaled + 1 >= x->depth / 2))
        signal = 1;
    if (p->posted + 1 > x->depth) {       /* full: wait for completions to retire entries */
        struct room r = {x, p};
        int rc = post_chain(x, peer);
        if (rc == 0)
            rc = pc_wait(has_room, &r, x->deadline, 0);
        if (rc == -ETIMEDOUT)
            x->failed_peer = peer;
        if (rc < 0)
            return rc;
    }
    wr.wr_id = p->unsignaled + 1;         /* how many entries its completion retires */
    if (staged) {
        uint64_t end;
        int rc;
        if ((sge.addr = stage(x, peer, src, len, &end, &rc)) == 0)
            return rc;
        sge.lkey = x->stage_lkey;
        wr.wr_id |= PCV_STAGED | (uint64_t)(uint32_t)end << 32;
    }
    if (signal)
        wr.send_flags |= IBV_SEND_SIGNALED;
    int rc = queue(x, peer, &wr, &sge);
    if (rc < 0)
        return rc;
    x->vstats.send_wrs++;
    p->posted++;
    p->unsignaled = signal ? 0 : p->unsignaled + 1;
    if (!copied)
        p->reading = p->posted;
    return 0;
}

int pc_xport_post_receives(struct pc_xport *x, size_t peer, size_t count)
{
    if (x->kind != PC_VERBS)
        return x->kind == PC_CLOSED ? -EBADF : -EINVAL;
    if (peer >= x->n)
        return -EINVAL;
    struct pc_vpeer *p = &x->peers[peer];
    struct ibv_sge sge = {x->scratch, 8, x->scratch_lkey};
    struct ibv_recv_wr wr = {.wr_id = peer, .sg_list = &sge, .num_sge = 1}, *bad;
    for (size_t i = 0; i < count; i++) {
        int rc = ibv_post_recv(p->qp, &wr, &bad);
        if (rc)
            return pc_xport_fail(x, peer, -rc, rc);
        x->vstats.recv_wrs++;
    }
    return 0;
}

static int poll_sends(struct pc_xport *x, uint64_t *found)
{
    struct ibv_wc wc[PCV_POLL];
    int got;
    while ((got = ibv_poll_cq(x->send_cq, PCV_POLL, wc)) > 0) {
        x->vstats.send_cqes += (uint64_t)got;
        *found += (uint64_t)got;
        for (int i = 0; i < got; i++) {
            size_t peer = peer_of(x, wc[i].qp_num);
            if (wc[i].status)
                return pc_xport_fail(x, peer, wc[i].status, (int)wc[i].vendor_err);
            struct pc_vpeer *p = &x->peers[peer];
            uint32_t retires = PCV_RETIRES(wc[i].wr_id);
            p->posted -= retires;
            p->reading = p->reading > retires ? p->reading - retires : 0;
            if (wc[i].wr_id & PCV_STAGED)  /* its ring end's low 32 bits: the rest is the tail's */
                p->stage_tail += (uint32_t)((wc[i].wr_id >> 32) - (uint32_t)p->stage_tail);
        }
    }
    return got < 0 ? pc_xport_fail(x, x->n, got, 0) : 0;
}

int pc_verbs_poll(struct pc_xport *x)
{
    struct ibv_wc wc[PCV_POLL];
    int got;
    uint64_t found = 0;
    x->vstats.polls++;
    while ((got = ibv_poll_cq(x->recv_cq, PCV_POLL, wc)) > 0) {
        x->vstats.recv_cqes += (uint64_t)got;
        found += (uint64_t)got;
        for (int i = 0; i < got; i++) {
            size_t peer = (size_t)wc[i].wr_id;
            if (wc[i].status) {
                /* A flushed receive: the QP failed, and a write's completion says why. */
                int rc = wc[i].status == IBV_WC_WR_FLUSH_ERR ? poll_sends(x, &found) : 0;
                return rc < 0 ? rc
                              : pc_xport_fail(x, peer, wc[i].status, (int)wc[i].vendor_err);
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
        return pc_xport_fail(x, x->n, got, 0);
    int rc = poll_sends(x, &found);
    x->vstats.empty_polls += !found;
    return rc;
}

/* One look of pc_verbs_complete: done when the device reads no source of mine any longer
 * (failed_peer: the first peer with a write still reading). Writes copied at their post may
 * still be in flight: their sources are free, and nothing else waits on a sender's completion
 * (a receiver learns of the data from its notice; a failure surfaces at a later poll). */
static int retired(void *what)
{
    struct pc_xport *x = what;
    for (size_t q = 0; q < x->n; q++)
        if (q != x->me && x->peers[q].reading) {
            x->failed_peer = q;
            int rc = pc_verbs_poll(x);
            return rc < 0 ? rc : PC_IDLE;
        }
    return PC_DONE;
}

/* Every write of mine that reads its source retired by its completion, within the deadline.
 * The completions come from the device, or a peer's core. */
int pc_verbs_complete(struct pc_xport *x, int64_t timeout_ns)
{
    return pc_wait(retired, x, pc_deadline(timeout_ns), 0);
}
