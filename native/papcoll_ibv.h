/*
 * The verbs transport's resources (papcoll_ibv.c): one device context, PD, send and receive
 * CQ, the fixed memory's registrations and one RC QP per peer, made, connected and destroyed
 * with libibverbs. A papcoll._native.XPort of kind PC_VERBS owns one (papcoll_pyxport.c);
 * the hot path (papcoll_verbs.c) uses what pc_ibv_open fills into the struct pc_xport.
 */
#ifndef PAPCOLL_IBV_H
#define PAPCOLL_IBV_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "papcoll_xport.h"

#define PC_IBV_INLINE 64        /* bytes written inline: their source needs no registration */
#define PC_IBV_BCOPY 8192       /* ... and up to this many, copied into a staging ring first */
#define PC_IBV_STAGE (2u << 20) /* bytes of staging rings at most, split among the peers */
#define PC_IBV_RING (64u << 10) /* ... and at most this many per peer */
#define PC_IBV_CHAIN 4          /* writes queued per peer before they must go (x->batch) */

/* A peer's writes queued while x->batch, linked as one list for one ibv_post_send. */
struct pc_ibv_chain {
    struct ibv_send_wr wr[PC_IBV_CHAIN];
    struct ibv_sge sge[PC_IBV_CHAIN];
    int len;
};

struct pc_ibv {
    size_t n;
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *send_cq, *recv_cq;
    struct ibv_qp **qps;              /* n; NULL at me */
    struct ibv_mr *fixed_mr, *inbox_mr; /* inbox_mr: NULL where the inbox is in fixed */
    char *stage;                      /* the staging rings, n of x->stage_bytes (x->stage) */
    struct ibv_mr *stage_mr;          /* their registration, for the device's reads only */
    struct pc_ibv_chain *chains;      /* n: the writes queued per peer (x->chains) */
    uint32_t *psns;                   /* n: my first packet sequence number per QP */
    uint32_t *order;                  /* n - 1 peers by ascending QP number (x->qp_order) */
    uint8_t port, gid[16];
    int gid_index, mtu;               /* mtu: the port's active MTU (enum ibv_mtu) */
    uint16_t lid;
};

/* Open device (by name) at port, with GID gid_index, for x (kind PC_VERBS, n, me and peers
 * set): the context, PD, CQs, the registration of fixed (fixed_len bytes: adverts, maybe the
 * inbox, then 8 bytes of scratch at its end) and of inbox unless it is NULL (then the inbox
 * lies in fixed), a staging ring per peer, and a QP per peer of sends send and recvs receive
 * entries; x's verbs fields are filled. 0, or -errno with *what naming the step that failed;
 * pc_ibv_close undoes either. */
int pc_ibv_open(struct pc_ibv *v, struct pc_xport *x, const char *device, int port,
                int gid_index, void *fixed, size_t fixed_len, void *inbox, size_t inbox_len,
                uint32_t sends, uint32_t recvs, const char **what);

/* Connect my QP to peer to its QP qp_num, first PSN psn, at gid (16 bytes) and lid: INIT,
 * RTR, RTS. 0 or -errno (*what: the step). */
int pc_ibv_connect(struct pc_ibv *v, size_t peer, uint32_t qp_num, uint32_t psn,
                   const uint8_t *gid, uint16_t lid, const char **what);

/* Register len bytes at addr (len > 0) in v's PD, for remote writes when remote, else for
 * the device's reads only: the MR, or NULL with errno. Its keys, by pc_ibv_keys. */
struct ibv_mr *pc_ibv_register(struct pc_ibv *v, void *addr, size_t len, int remote);
void pc_ibv_keys(const struct ibv_mr *mr, uint32_t *lkey, uint32_t *rkey);
int pc_ibv_deregister(struct ibv_mr *mr);

/* Destroy what v holds, children first (QPs, MRs, CQs, PD, context): safe on a part-opened
 * or closed v. The registrations of pc_ibv_register must be gone before. */
void pc_ibv_close(struct pc_ibv *v);

/* libibverbs' text for a completion status. */
const char *pc_ibv_status(int status);

#endif
