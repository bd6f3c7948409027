/*
 * papcoll's one-sided transports, native half (native/papcoll_xport.c, over papcoll_verbs.c
 * and papcoll_mpi_rma.c), and the PAP Direct engine that runs a whole call over one
 * (native/papcoll_exchange.c).
 *
 * A transport is a papcoll._native.XPort (papcoll_pyxport.c), which owns the struct pc_xport
 * and what it points to: for verbs, the device context, PD, CQs, QPs and MRs, made with
 * libibverbs (papcoll_ibv.c); for MPI RMA, the requests in flight over the windows mpi4py
 * made. Python sets it up; from then on every put, every poll of completions and every
 * "complete" runs here, for the engine (transport/base.py states the contract; this is its
 * only implementation).
 *
 * Notices. A put may carry a notice (kind, sequence number, signature code); the receiver's
 * board gets a notice word (pc_notice_word: the data's length too) in bank seq % 2. verbs:
 * one RDMA WRITE_WITH_IMM (pc_imm); the receive completion (after the data is placed) gives the
 * length; the board is this process's memory, updated by pc_xport_poll. MPI RMA: the data, a
 * flush of its window at the target, then a put of the notice word into the boards' window
 * (which is the board), once the data is complete there (struct pc_mpi).
 */
#ifndef PAPCOLL_XPORT_H
#define PAPCOLL_XPORT_H

#include <stddef.h>
#include <stdint.h>

#include "papcoll_native.h"

#define PC_ADVERT 0
#define PC_DATA 1
#define PC_SEQ_BITS 23
#define PC_SEQ_MASK ((UINT64_C(1) << PC_SEQ_BITS) - 1)

/* ---- the wire formats: written here and nowhere else ------------------------------------ */

/* The notice word on a board: seq << 40 | code << 32 | length. */
static inline uint64_t pc_notice_word(uint64_t seq, uint32_t code, uint32_t len)
{
    return ((seq & PC_SEQ_MASK) << 40) | ((uint64_t)(code & 0xFF) << 32) | len;
}
/* Whether word is the notice of sequence number seq (not a stale or a future one). */
static inline int pc_notice_current(uint64_t word, uint64_t seq)
{
    return ((word >> 40) & PC_SEQ_MASK) == (seq & PC_SEQ_MASK);
}
static inline uint32_t pc_notice_code(uint64_t word) { return (uint32_t)(word >> 32) & 0xFF; }
static inline uint32_t pc_notice_len(uint64_t word) { return (uint32_t)word; }

/* Where the notice word of kind, sequence seq, from peer lies among a board's n x 2 x kinds
 * words: bank seq % 2, so call k's word stays readable while call k + 1's lands. */
static inline size_t pc_board_index(int kind, uint64_t seq, size_t n, size_t peer)
{
    return ((size_t)kind * 2 + seq % 2) * n + peer;
}

/* verbs: the 32-bit immediate of a notice (host order; the wire's is network order):
 * kind << 31 | code << 23 | seq (low 23 bits). Its word is made with the length the receive
 * completion reports. */
static inline uint32_t pc_imm(int kind, uint64_t seq, uint32_t code)
{
    return ((uint32_t)kind << (PC_SEQ_BITS + 8)) | ((code & 0xFF) << PC_SEQ_BITS) |
           (uint32_t)(seq & PC_SEQ_MASK);
}
static inline int pc_imm_kind(uint32_t imm) { return (int)(imm >> (PC_SEQ_BITS + 8)); }
static inline uint64_t pc_imm_word(uint32_t imm, uint32_t len)
{
    return pc_notice_word(imm & PC_SEQ_MASK, (imm >> PC_SEQ_BITS) & 0xFF, len);
}

/* The advert record a process writes at each peer for a zero-copy call: where its exposed
 * receive buffer is, and which call it is for (epoch, full signature). */
struct pc_advert {
    uint64_t addr, bytes;
    uint32_t rkey, pad;
    uint64_t epoch, sig;
};
#define PC_ADVERT_BYTES 40
_Static_assert(sizeof(struct pc_advert) == PC_ADVERT_BYTES, "advert record");

/* Where a put goes at the peer. */
#define PC_TO_ADVERTS 0 /* the peer's advert record for me: offset within its adverts area */
#define PC_TO_INBOX 1   /* the peer's inbox: offset within it */
#define PC_TO_EXPOSED 2 /* a buffer the peer exposed: remote address and key given */

#define PC_CLOSED 0 /* closed (pc_xport_close): every call through it returns -EBADF */
#define PC_VERBS 1
#define PC_MPI 2
#define PC_LOOP 3 /* every rank in one process (tests of the engine): a put to peer q is a copy
                   * into q's memory (peers[q]: its adverts and inbox addresses, its boards)
                   * and its notice a store on q's board; nothing is ever in flight */

/* libibverbs' objects (infiniband/verbs.h), which only papcoll_verbs.c and papcoll_ibv.c
 * look inside. */
struct ibv_qp;
struct ibv_cq;

/* What a verbs transport knows of one peer (a loop transport: adverts_addr, inbox_addr and
 * boards only). */
struct pc_vpeer {
    struct ibv_qp *qp;              /* made and connected by papcoll_ibv.c */
    uint64_t *boards;               /* PC_LOOP: the peer's boards */
    uint64_t adverts_addr, inbox_addr;
    uint32_t adverts_rkey, inbox_rkey;
    uint32_t qp_num;                /* mine, for completions */
    uint32_t posted;                /* writes posted and not yet retired by a completion */
    uint32_t unsignaled;            /* of which not signalled (retired by the next that is) */
    uint32_t reading;               /* of which the oldest, up to the last whose source the
                                     * device reads after its post (not inline, not empty) */
    uint64_t stage_head, stage_tail; /* staging ring: bytes taken, and freed by completions */
};

#define PC_MPI_REQS 8   /* requests in flight per peer: a call makes at most 4 (advert, its
                         * notice, data, its notice), and completes them before it returns */

/* The MPI RMA half's state (papcoll_mpi_rma.c, the one file compiled against the mpi.h of the
 * MPI in use, which declares it): the windows, the requests in flight and the notices queued
 * behind them. Every put is request-based (MPI_Rput) and its request is tested, never waited
 * for: a blocking flush waits on the target's progress, which a dead, stopped or departed peer
 * never makes. A notice is put once the requests of the data before it have completed and a
 * flush of those windows at that target -- with nothing left in flight to it, a flush waits
 * for nobody -- has ordered the data first. */
struct pc_mpi;

/* What the verbs half did, counted for the per-message cost breakdown (bench cost --counts);
 * C only adds to them. */
struct pc_vstats {
    uint64_t send_wrs, recv_wrs;    /* work requests posted: writes, receives (re-)posted */
    uint64_t send_cqes, recv_cqes;  /* completions reaped */
    uint64_t polls, empty_polls;    /* pc_verbs_poll calls, and those that found nothing */
    uint64_t bcopies;               /* writes copied into a staging ring */
    uint64_t doorbells;             /* ibv_post_send calls: a list of writes to one peer each */
};

struct pc_xport {
    int kind;                    /* PC_VERBS, PC_MPI, PC_LOOP or PC_CLOSED */
    size_t n, me;
    uint64_t *boards;            /* [2 kinds][2 banks][n] notice words */
    /* verbs */
    struct pc_vpeer *peers;
    struct ibv_cq *send_cq, *recv_cq;
    uint64_t scratch;            /* 8 bytes in the fixed MR, for empty writes and receives */
    uint32_t scratch_lkey;
    uint32_t depth;              /* send queue entries per QP */
    char *stage;                 /* a staging ring of stage_bytes per peer (index: the peer) */
    uint32_t stage_bytes, stage_lkey;
    uint32_t bcopy_max;          /* writes above PC_IBV_INLINE up to this go through it */
    struct pc_ibv_chain *chains; /* per peer: writes queued while batch, posted as one list */
    int batch;                   /* the engine's pass: writes wait for pc_xport_flush */
    const uint32_t *qp_order;    /* indices of peers by ascending qp_num (completions) */
    struct pc_vstats vstats;
    /* mpi */
    struct pc_mpi *mpi;
    /* n: the inbox bytes each peer exposed (puts beyond are refused: -EMSGSIZE) */
    const uint64_t *inbox_bytes;
    /* CLOCK_MONOTONIC ns after which a put waiting for room in a full send queue gives up
     * (-ETIMEDOUT): the engine sets its call's deadline; 0: no wait at all */
    int64_t deadline;
    /* the last failure: the peer, the completion status and vendor error (or MPI error) */
    size_t failed_peer;
    int failed_status, failed_vendor;
};

/* Write len bytes from src (lkey: its registration; 0 for data up to bcopy_max) to the peer's
 * dest (PC_TO_*: offset in the area, or remote address + key), with a notice if kind >= 0
 * (seq, code). signal: a verbs completion is wanted for this write: earlier unsignalled ones
 * are retired with it. A write whose source the device reads after the post (longer than
 * bcopy_max) is always signalled, so that pc_xport_complete can see it done; one copied at
 * its post (inline, or empty) needs no completion, and gets one only every depth / 2. One
 * copied into the peer's staging ring (longer than PC_IBV_INLINE, up to bcopy_max) is
 * signalled too, its completion freeing its bytes there, but nobody waits for it: its source
 * is free at the post, as an inline write's is, without the device's limit on inline data.
 * verbs, while x->batch (the engine's passes): queued on the peer's chain, and posted with the
 * rest of it, one ibv_post_send a peer (one doorbell), at pc_xport_flush -- or before, at a
 * wait for room or when the chain is full -- so src must stay as it is until then.
 * MPI: the data is put now, its notice queued until pc_xport_flush finds the data complete.
 * Returns 0 or -errno (-EIO: failed_* say why; -EMSGSIZE: the peer's inbox is smaller, failed_peer). */
int pc_xport_put(struct pc_xport *x, size_t peer, int dest, uint64_t offset, uint32_t rkey,
                 const void *src, size_t len, uint32_t lkey, int kind, uint64_t seq,
                 uint32_t code, int signal);

/* MPI: put every queued notice whose data is complete at its target (never waits). verbs:
 * post every peer's queued writes, a list a peer. 0 or -EIO. */
int pc_xport_flush(struct pc_xport *x);

/* Update the boards: reap receive completions (verbs, re-posting their receive requests) and
 * send completions, or drive MPI progress (MPICH serves RMA active messages only during RMA
 * synchronisation calls, so a target that only waited would starve its writers). 0 or -EIO. */
int pc_xport_poll(struct pc_xport *x);

/* My puts are done with their sources, and my notices visible at their targets: 0, or
 * -ETIMEDOUT after timeout_ns (writes or notices still in flight; failed_peer one of their
 * targets), -EIO. */
int pc_xport_complete(struct pc_xport *x, int64_t timeout_ns);

/* Post n receive requests for notices from peer (at set-up). 0 or -EIO. */
int pc_xport_post_receives(struct pc_xport *x, size_t peer, size_t count);

/* Close x before its owner frees what it points to (QPs, CQs, MRs, windows, boards): MPI's
 * requests still in flight are tested until timeout_ns (their sources, the notices, must
 * outlive them), then x is PC_CLOSED and its pointers NULL, so every later call through it,
 * or through a call or plan over it, returns -EBADF instead of touching freed memory. 0, or
 * -EBUSY where MPI requests were left in flight: their handles are freed (MPI completes them
 * at the windows' unlock) and their memory is kept, never freed. Safe twice. */
int pc_xport_close(struct pc_xport *x, int64_t timeout_ns);

/* The halves the calls above dispatch to, by x->kind: papcoll_verbs.c and papcoll_mpi_rma.c,
 * with the same contracts; a failure is recorded by pc_xport_fail (failed_*: -EIO). */
int pc_xport_fail(struct pc_xport *x, size_t peer, int status, int vendor);
int pc_verbs_put(struct pc_xport *x, size_t peer, int dest, uint64_t offset, uint32_t rkey,
                 const void *src, size_t len, uint32_t lkey, int kind, uint64_t seq,
                 uint32_t code, int signal);
int pc_verbs_poll(struct pc_xport *x);
int pc_verbs_flush(struct pc_xport *x);
int pc_verbs_complete(struct pc_xport *x, int64_t timeout_ns);
int pc_mpi_put(struct pc_xport *x, size_t peer, int dest, uint64_t offset, const void *src,
               size_t len, int kind, uint64_t seq, uint32_t code);
int pc_mpi_poll(struct pc_xport *x);
int pc_mpi_flush(struct pc_xport *x);
int pc_mpi_complete(struct pc_xport *x, int64_t timeout_ns);

/* Give x (kind PC_MPI, n and me set) its MPI half over these handles -- the values of mpi4py's
 * objects' ``handle`` (an int in MPICH, a pointer in Open MPI), converted to mpi.h's types
 * there -- with the adverts at adverts_at in win and the inbox at inbox_at in inbox_win: 0 or
 * -ENOMEM. pc_xport_close frees it; MPI's objects stay the caller's. */
int pc_mpi_open(struct pc_xport *x, intptr_t comm, intptr_t win, intptr_t inbox_win,
                intptr_t dyn, size_t adverts_at, size_t inbox_at);
int pc_mpi_close(struct pc_xport *x, int64_t timeout_ns);
/* What an XPort never closed leaves at its collection (its finalizer: no MPI call): the
 * MPI half's memory, unless a request is still in flight, whose memory stays; x is then
 * PC_CLOSED, as after pc_xport_close. */
void pc_mpi_forget(struct pc_xport *x);

/* MPI_Alltoall of count bytes per process on comm (a handle value, as above), send NULL for
 * MPI_IN_PLACE: the MPI error code. The ``mpi`` algorithm's plan (papcoll_call.c). */
int pc_mpi_alltoall(const void *send, int count, void *recv, intptr_t comm);

/* MPI_Pack of count x type (a handle value) from user -- NULL: MPI_BOTTOM, the datatype's
 * addresses being absolute -- into size bytes at packed; unpack: MPI_Unpack the other way.
 * The MPI error code. */
int pc_mpi_pack(void *user, int count, intptr_t type, void *packed, int size, int unpack);

/* MPI_Alltoallv on comm, each side's counts, displacements and datatype as a plan's
 * vshape says (send NULL: MPI_IN_PLACE): the MPI error code. */
struct pc_vshape;
int pc_mpi_alltoallv(const void *send, const struct pc_vshape *s, void *recv,
                     const struct pc_vshape *r, intptr_t comm);

/* MPI_Alltoallw on comm, each side as a PC_PLAN_MPIW plan's vshape says (send NULL: in
 * place): the MPI error code. */
int pc_mpi_alltoallw(const void *send, const struct pc_vshape *s, void *recv,
                     const struct pc_vshape *r, intptr_t comm);

/* ---- the engine: one call of PAP Direct ------------------------------------------------ */

#define PC_COPY 1   /* copy-based: write into the peer's inbox; its data found = it arrived */
#define PC_ZCOPY 2  /* zero-copy: advertise my buffer, write into every peer that advertised */
#define PC_STEP 3   /* zero-copy in step order: wait for rank + i's advertisement (Direct) */
#define PC_ORDER 4  /* copy-based writes in step order, at once (the masters of shm_direct) */
#define PC_VAR 5    /* blocks of a length per peer (Alltoallv/w): each pair copy-based or
                     * zero-copy by the block's length, as both ends of it know it */

#define PC_SEEN 0            /* trace events: a peer's arrival seen, my data sent, its landed */
#define PC_SENT 1
#define PC_RECEIVED 2

/* Where a call fails: a peer (failed_peer) whose notice word (PC_IN_NOTICE: failed_code and
 * failed_len, what it carried), advert record or header (failed_sig: its signature) is not
 * this call's. */
#define PC_IN_NOTICE 1
#define PC_IN_ADVERT 2
#define PC_IN_HEADER 3

/* One call of PAP Direct over x among its n processes: a peer's arrival is seen in the data
 * path itself -- its data landing in my inbox (copy-based), its advertisement (zero-copy) --
 * and arrived peers are served first; a late one never holds up a ready one.
 *
 * To peer q I write len[q] bytes from src + src_off[q] (registered under lkey) to dst_off[q]
 * in q's inbox (copy-based) or in the buffer q advertised (zero-copy), with a DATA notice
 * (epoch, code). From q I expect the DATA notice word expected[q] (NULL: any of my code: the
 * data then carries a header, see hand-on); its data at inbox + in_off[q] is copied to
 * out + out_off[q] (out_len[q] bytes) when out is set. Zero-copy: record (PC_ADVERT_BYTES,
 * under record_lkey) is advertised to every peer (ADVERT notice, sequence adverts), and the
 * records peers advertised are read at advert_area + q * PC_ADVERT_BYTES.
 *
 * Data without an expected word (expected NULL) must start with sig (a header word).
 * landed (set: the hierarchical masters' call, a task of their schedule, papcoll_hier.c):
 * called with landed_arg as each peer's data is in and checked -- the per-source event that
 * hands it on. gate (set): nothing is sent while *gate is 0 (the masters': until my node's
 * gather is complete; arrivals are taken meanwhile).
 *
 * PC_VAR: my block to q goes to q's inbox if via_inbox[q], else into the region q advertised
 * for it, which must be exactly len[q] bytes; I advertise to the peers q with advertise[q] set
 * the record at record + q * PC_ADVERT_BYTES (the region I expect q's block in); expect_len
 * gives the length of each peer's expected DATA notice (pc_xcall_start).
 *
 * unsent and waiting (n each) are set by the caller to the peers to serve; the run keeps its
 * state there, so a run cut short by its timeout is resumed by running again. Events (when
 * events is set, room for max_events pairs): (kind << 56 | peer, CLOCK_MONOTONIC ns). */
struct pc_xcall {
    struct pc_xport *x;
    int scheme;
    uint64_t epoch, adverts, sig;
    uint32_t code;
    const uint64_t *expected;
    const char *src;
    const uint64_t *src_off, *len, *dst_off;
    uint32_t lkey;
    const char *inbox;
    char *out;
    const uint64_t *in_off, *out_off, *out_len;
    const void *record;
    uint32_t record_lkey;
    const uint8_t *advert_area;
    int (*landed)(void *arg, size_t peer);
    void *landed_arg;
    const int *gate;
    uint8_t *unsent, *waiting;
    size_t next;                  /* step order: the next peer to write to (an offset) */
    int advertised;               /* its beginning is done: my advertisements, a poll */
    int64_t *events;
    size_t nevents, max_events;
    int failed_in;
    size_t failed_peer;
    uint64_t failed_sig;
    uint32_t failed_code, failed_len;
    const uint8_t *via_inbox, *advertise;    /* PC_VAR */
    const uint64_t *expect_len;
    /* The epoch every advert record of this call carries, and a peer's must carry (0: this
     * call's): a persistent request's first, the same at every start, so that its record,
     * written once, stays current; notice_only: my advertisements carry no record (the one
     * my peers hold is this request's, for the same registration); records: the Exchange's
     * one cell, which all its calls share: whose records my peers hold, by that epoch (0:
     * none; pc_xcall_advertise keeps it). */
    uint64_t record_epoch;
    int notice_only;
    uint64_t *records;
};

/* A call begins, the one set-up of a call (Exchange and plan alike): c is call epoch
 * (adverts: the zero-copy calls so far, this one included if it is one) of signature sig and
 * signature code code; every peer but me is to be sent to and heard from; where c expects
 * notice words (expected set) and block >= 0, each peer's is its DATA notice of block bytes,
 * or, with expect_len set, of expect_len[q] bytes (expected[] is the caller's own else). */
void pc_xcall_start(struct pc_xcall *c, uint64_t epoch, uint64_t adverts, uint64_t sig,
                    uint32_t code, int64_t block);

/* Zero-copy: this call's advert record (the record-th of c->record: 0, or in PC_VAR the
 * peer's) for my receive buffer at addr, of bytes bytes, under rkey; after pc_xcall_start. */
void pc_xcall_advert(struct pc_xcall *c, size_t record, uint64_t addr, uint64_t bytes,
                     uint32_t rkey);

/* A zero-copy call's advertisement of my receive buffer at addr (bytes, rkey), the one rule
 * of which records go out (papcoll/algorithms/exchange.py argues it): first is the epoch of
 * a persistent request's first start (0: a call of its own), same whether the buffer is
 * registered as when that request's records went out. My advertisements carry no record
 * where my peers hold that request's (*c->records is first, first set, same); else they carry
 * this call's. Either way my peers then hold them: *c->records becomes first. After
 * pc_xcall_start; c->records set. */
void pc_xcall_advertise(struct pc_xcall *c, uint64_t first, int same, uint64_t addr,
                        uint64_t bytes, uint32_t rkey);

/* Whether peer's arrival signal for c is on my boards, after a poll: its DATA notice of this
 * call, or, zero-copy, its advertisement. 1, 0, or a poll's -errno. */
int pc_xcall_arrived(struct pc_xcall *c, size_t peer);

/* One look at the call, never a wait (a task's progress step): PC_DONE once it is done (my
 * writes complete too), PC_MORE, PC_IDLE (PC_BUSY over MPI, which moves only in my polls),
 * or an error as pc_xcall_run's. Puts waiting for
 * room in a send queue wait until x->deadline, which the caller sets. */
int pc_xcall_step(struct pc_xcall *c);

/* Run the call for at most timeout_ns: 1 when done (my writes complete too), -ETIMEDOUT when
 * not yet (run again), -EPROTO when a peer's call differs (failed_*), -EIO or another -errno
 * when the transport failed (x->failed_*). */
int pc_xcall_run(struct pc_xcall *c, int64_t timeout_ns);

#endif
