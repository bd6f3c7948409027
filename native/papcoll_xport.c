/* papcoll's one-sided transports, native half: the interface (papcoll_xport.h), over verbs
 * (papcoll_verbs.c) or MPI RMA (papcoll_mpi_rma.c), and the loop transport of the engine's
 * tests (here). */
#include "papcoll_xport.h"

#include <errno.h>
#include <string.h>

int pc_xport_fail(struct pc_xport *x, size_t peer, int status, int vendor)
{
    x->failed_peer = peer;
    x->failed_status = status;
    x->failed_vendor = vendor;
    return -EIO;
}

int pc_xport_put(struct pc_xport *x, size_t peer, int dest, uint64_t offset, uint32_t rkey,
                 const void *src, size_t len, uint32_t lkey, int kind, uint64_t seq,
                 uint32_t code, int signal)
{
    if (x->kind == PC_CLOSED)
        return -EBADF;
    if (peer >= x->n || peer == x->me)
        return -EINVAL;
    if (dest == PC_TO_INBOX && (offset > x->inbox_bytes[peer] ||
                                len > x->inbox_bytes[peer] - offset)) {
        x->failed_peer = peer;            /* never past what the peer exposed */
        return -EMSGSIZE;
    }
    if (x->kind == PC_VERBS)
        return pc_verbs_put(x, peer, dest, offset, rkey, src, len, lkey, kind, seq, code,
                            signal);
    if (x->kind == PC_MPI)
        return pc_mpi_put(x, peer, dest, offset, src, len, kind, seq, code);
    const struct pc_vpeer *p = &x->peers[peer];
    uint64_t at = dest == PC_TO_ADVERTS ? p->adverts_addr + offset
                  : dest == PC_TO_INBOX  ? p->inbox_addr + offset
                                         : offset;
    memcpy((void *)(uintptr_t)at, src, len);
    if (kind >= 0)
        pc_flag_store(&p->boards[pc_board_index(kind, seq, x->n, x->me)],
                      pc_notice_word(seq, code, (uint32_t)len));
    return 0;
}

int pc_xport_poll(struct pc_xport *x)
{
    if (x->kind == PC_CLOSED)
        return -EBADF;
    return x->kind == PC_VERBS ? pc_verbs_poll(x) : x->kind == PC_MPI ? pc_mpi_poll(x) : 0;
}

int pc_xport_flush(struct pc_xport *x)
{
    return x->kind == PC_CLOSED ? -EBADF
           : x->kind == PC_MPI  ? pc_mpi_flush(x)
           : x->kind == PC_VERBS ? pc_verbs_flush(x)
                                : 0;
}

int pc_xport_complete(struct pc_xport *x, int64_t timeout_ns)
{
    int rc = pc_xport_flush(x);
    if (rc < 0)
        return rc;
    return x->kind == PC_MPI     ? pc_mpi_complete(x, timeout_ns)
           : x->kind == PC_VERBS ? pc_verbs_complete(x, timeout_ns)
                                 : 0;
}

int pc_xport_close(struct pc_xport *x, int64_t timeout_ns)
{
    int rc = x->kind == PC_MPI ? pc_mpi_close(x, timeout_ns) : 0;
    x->kind = PC_CLOSED;
    x->boards = NULL;
    x->peers = NULL;
    x->send_cq = x->recv_cq = NULL;
    x->qp_order = NULL;
    x->stage = NULL;
    x->chains = NULL;
    x->inbox_bytes = NULL;
    return rc;
}
