/* The verbs transport's resources, made with libibverbs (see papcoll_ibv.h). */
#include "papcoll_ibv.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <infiniband/verbs.h>

/* A failed step: -errno (EIO where libibverbs set none), *what naming it. */
static int failed(const char **what, const char *step)
{
    *what = step;
    return errno > 0 ? -errno : -EIO;
}

static struct ibv_context *open_device(const char *name)
{
    int count = 0;
    struct ibv_device **list = ibv_get_device_list(&count);
    if (list == NULL)
        return NULL;
    struct ibv_context *ctx = NULL;
    errno = ENODEV;
    for (int i = 0; i < count && ctx == NULL; i++)
        if (strcmp(ibv_get_device_name(list[i]), name) == 0)
            ctx = ibv_open_device(list[i]);
    int saved = errno;
    ibv_free_device_list(list);
    errno = saved;
    return ctx;
}

/* order[0..m) sorted by the peers' QP numbers (set-up only: an insertion sort will do). */
static void sort_by_qp_num(uint32_t *order, size_t m, const struct pc_vpeer *peers)
{
    for (size_t i = 1; i < m; i++) {
        uint32_t q = order[i];
        size_t j = i;
        for (; j > 0 && peers[order[j - 1]].qp_num > peers[q].qp_num; j--)
            order[j] = order[j - 1];
        order[j] = q;
    }
}

int pc_ibv_open(struct pc_ibv *v, struct pc_xport *x, const char *device, int port,
                int gid_index, void *fixed, size_t fixed_len, void *inbox, size_t inbox_len,
                uint32_t sends, uint32_t recvs, const char **what)
{
    size_t n = x->n, peers = n > 1 ? n - 1 : 1;
    errno = 0;
    v->n = n;
    v->qps = calloc(n, sizeof *v->qps);
    v->psns = calloc(n, sizeof *v->psns);
    v->order = calloc(peers, sizeof *v->order);
    if (v->qps == NULL || v->psns == NULL || v->order == NULL)
        return failed(what, "allocating the QP table");
    if ((v->ctx = open_device(device)) == NULL)
        return failed(what, "ibv_open_device");
    struct ibv_port_attr attr;
    union ibv_gid gid;
    if ((errno = ibv_query_port(v->ctx, (uint8_t)port, &attr)) != 0)
        return failed(what, "ibv_query_port");
    if (ibv_query_gid(v->ctx, (uint8_t)port, gid_index, &gid))
        return failed(what, "ibv_query_gid");
    v->port = (uint8_t)port;
    v->gid_index = gid_index;
    v->mtu = attr.active_mtu;
    v->lid = attr.lid;
    memcpy(v->gid, gid.raw, sizeof v->gid);
    if ((v->pd = ibv_alloc_pd(v->ctx)) == NULL)
        return failed(what, "ibv_alloc_pd");
    if ((v->send_cq = ibv_create_cq(v->ctx, (int)(sends * peers), NULL, NULL, 0)) == NULL ||
        (v->recv_cq = ibv_create_cq(v->ctx, (int)(recvs * peers), NULL, NULL, 0)) == NULL)
        return failed(what, "ibv_create_cq");
    /* Adverts and the inbox: the only fixed memory peers may write. */
    if ((v->fixed_mr = pc_ibv_register(v, fixed, fixed_len, 1)) == NULL ||
        (inbox != NULL && (v->inbox_mr = pc_ibv_register(v, inbox, inbox_len, 1)) == NULL))
        return failed(what, "ibv_reg_mr");
    /* A staging ring per peer (index q, mine unused), for writes papcoll_verbs.c copies. */
    size_t ring = PC_IBV_STAGE / peers / 64 * 64;   /* 4 writes at least: room to spare */
    ring = ring < PC_IBV_RING ? ring : PC_IBV_RING;
    ring = ring > 4 * PC_IBV_INLINE ? ring : 4 * PC_IBV_INLINE;
    x->stage_bytes = (uint32_t)ring;
    x->bcopy_max = ring / 4 < PC_IBV_BCOPY ? (uint32_t)ring / 4 : PC_IBV_BCOPY;
    if ((v->stage = aligned_alloc(64, n * x->stage_bytes)) == NULL)
        return errno = ENOMEM, failed(what, "allocating the staging rings");
    if ((v->stage_mr = pc_ibv_register(v, v->stage, n * x->stage_bytes, 0)) == NULL)
        return failed(what, "ibv_reg_mr");
    x->stage = v->stage;
    x->stage_lkey = v->stage_mr->lkey;
    if ((v->chains = calloc(n, sizeof *v->chains)) == NULL)
        return errno = ENOMEM, failed(what, "allocating the write chains");
    x->chains = v->chains;
    struct ibv_qp_init_attr init = {
        .send_cq = v->send_cq, .recv_cq = v->recv_cq, .qp_type = IBV_QPT_RC, .sq_sig_all = 0,
        .cap = {.max_send_wr = sends, .max_recv_wr = recvs, .max_send_sge = 1,
                .max_recv_sge = 1, .max_inline_data = PC_IBV_INLINE}};
    for (size_t q = 0, k = 0; q < n; q++) {
        if (q == x->me)
            continue;
        if ((v->qps[q] = ibv_create_qp(v->pd, &init)) == NULL)
            return failed(what, "ibv_create_qp");
        if (getrandom(&v->psns[q], sizeof v->psns[q], 0) != sizeof v->psns[q])
            return failed(what, "getrandom");
        v->psns[q] &= 0xFFFFFF;
        x->peers[q].qp = v->qps[q];
        x->peers[q].qp_num = v->qps[q]->qp_num;
        v->order[k++] = (uint32_t)q;
    }
    sort_by_qp_num(v->order, n - 1, x->peers);
    x->qp_order = v->order;
    x->send_cq = v->send_cq;
    x->recv_cq = v->recv_cq;
    x->depth = sends;
    x->scratch = (uint64_t)(uintptr_t)fixed + fixed_len - 8;
    x->scratch_lkey = v->fixed_mr->lkey;
    return 0;
}

/* One step of a QP's connection: ibv_modify_qp, which returns an errno itself. */
static int modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask, const char **what,
                  const char *step)
{
    int rc = ibv_modify_qp(qp, a, mask);
    errno = rc;
    return rc ? failed(what, step) : 0;
}

int pc_ibv_connect(struct pc_ibv *v, size_t peer, uint32_t qp_num, uint32_t psn,
                   const uint8_t *gid, uint16_t lid, const char **what)
{
    struct ibv_qp *qp = v->qps[peer];
    struct ibv_qp_attr init = {.qp_state = IBV_QPS_INIT, .port_num = v->port,
                               .qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
                                                  IBV_ACCESS_REMOTE_WRITE};
    struct ibv_qp_attr rtr = {.qp_state = IBV_QPS_RTR, .path_mtu = (enum ibv_mtu)v->mtu,
                              .dest_qp_num = qp_num, .rq_psn = psn, .max_dest_rd_atomic = 1,
                              .min_rnr_timer = 12,
                              .ah_attr = {.is_global = 1, .dlid = lid, .port_num = v->port,
                                          .grh = {.sgid_index = (uint8_t)v->gid_index,
                                                  .hop_limit = 1}}};
    memcpy(rtr.ah_attr.grh.dgid.raw, gid, 16);
    /* ACK timeout 4.096 us x 2^18 (~1 s), 7 retries: a stalled emulated host (SoftRoCE
     * between two VMs on a busy machine) is not taken for a dead one; a dead peer still fails
     * the write in ~8 s, within any sensible PAPCOLL_TIMEOUT. */
    struct ibv_qp_attr rts = {.qp_state = IBV_QPS_RTS, .sq_psn = v->psns[peer], .timeout = 18,
                              .retry_cnt = 7, .rnr_retry = 7, .max_rd_atomic = 1};
    int rc = modify(qp, &init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                   IBV_QP_ACCESS_FLAGS, what, "ibv_modify_qp to INIT");
    if (rc == 0)
        rc = modify(qp, &rtr, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                                  IBV_QP_MIN_RNR_TIMER, what, "ibv_modify_qp to RTR");
    if (rc == 0)
        rc = modify(qp, &rts, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
                    what, "ibv_modify_qp to RTS");
    return rc;
}

struct ibv_mr *pc_ibv_register(struct pc_ibv *v, void *addr, size_t len, int remote)
{
    int access = remote ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE : 0;
    return ibv_reg_mr(v->pd, addr, len, access);
}

void pc_ibv_keys(const struct ibv_mr *mr, uint32_t *lkey, uint32_t *rkey)
{
    *lkey = mr->lkey;
    *rkey = mr->rkey;
}

int pc_ibv_deregister(struct ibv_mr *mr)
{
    return ibv_dereg_mr(mr);
}

void pc_ibv_close(struct pc_ibv *v)
{
    for (size_t q = 0; v->qps != NULL && q < v->n; q++)
        if (v->qps[q] != NULL)
            ibv_destroy_qp(v->qps[q]);
    if (v->inbox_mr != NULL)
        ibv_dereg_mr(v->inbox_mr);
    if (v->fixed_mr != NULL)
        ibv_dereg_mr(v->fixed_mr);
    if (v->stage_mr != NULL)
        ibv_dereg_mr(v->stage_mr);
    if (v->send_cq != NULL)
        ibv_destroy_cq(v->send_cq);
    if (v->recv_cq != NULL)
        ibv_destroy_cq(v->recv_cq);
    if (v->pd != NULL)
        ibv_dealloc_pd(v->pd);
    if (v->ctx != NULL)
        ibv_close_device(v->ctx);
    free(v->stage);
    free(v->chains);
    free(v->qps);
    free(v->psns);
    free(v->order);
    memset(v, 0, sizeof *v);
}

const char *pc_ibv_status(int status)
{
    return ibv_wc_status_str((enum ibv_wc_status)status);
}
