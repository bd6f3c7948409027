/*
 * papcoll's cached plans (struct pc_plan): how the next calls of a checked shape run in C,
 * entered once per call (papcoll_call.c for Alltoall, papcoll_callv.c for Alltoallv/w), over
 * the engine and transports of papcoll_xport.h, the node loops of papcoll_native.h, or the MPI
 * library (papcoll_mpi_rma.c).
 */
#ifndef PAPCOLL_PLAN_H
#define PAPCOLL_PLAN_H

#include "papcoll_sched.h"
#include "papcoll_xport.h"

/* ---- plans: Communicator.Alltoall's one entry (papcoll_call.c) ------------------------- */

#define PC_PLAN_SEGMENT 1 /* shm_pap: pc_exchange_blocks over the node board, in slot pieces */
#define PC_PLAN_ENGINE 2  /* copy-based PAP Direct: the engine, one prepared call per bank */
#define PC_PLAN_MPI 3     /* mpi: the MPI library's MPI_Alltoall */
#define PC_PLAN_HIER 4    /* shm_direct, pap_shm_direct: one round of their schedule */
#define PC_PLAN_MPIV 5    /* mpi's Alltoallv: the MPI library's MPI_Alltoallv */
#define PC_PLAN_VAR 6     /* pap_direct's Alltoallv: the engine's PC_VAR call, every block in
                           * the inbox (one prepared call per bank) */
#define PC_PLAN_MPIW 7    /* mpi's Alltoallw: the MPI library's MPI_Alltoallw */

/* One side (send, receive) of the Alltoallv calls a plan takes: the spec's counts and
 * displacements in elements (n each; displs_given 0: the spec gives none, and the blocks are
 * packed), the datatype object it names (NULL: the buffer's format, of itemsize bytes, says
 * it), the buffer's length; for MPI, the counts and displacements as ints and the datatype's
 * handle value (as in pc_mpi_open). An Alltoallw side (PC_PLAN_MPIW) names a datatype object
 * per process instead (datatypes, n; displacements in bytes), of handle values mpi_types. */
struct pc_vshape {
    int64_t nbytes, itemsize;
    char format[16];
    void *datatype;
    int displs_given;
    const int64_t *counts, *displs;
    const int *icounts, *idispls;
    intptr_t mpi_type;
    void *const *datatypes;
    const intptr_t *mpi_types;
    /* A staged side of a PC_PLAN_VAR plan (an Alltoallw's blocks that are not contiguous
     * bytes): the engine moves staging, packed (send) before the call or unpacked (receive)
     * after it by MPI_Pack / MPI_Unpack with the user's datatypes, as vbuffers.Blocks does:
     * peer q's move_count[q] items of MPI type move_type[q] at move_at[q] - bound of the
     * call's buffer (move_at: addresses in the buffer of the call bindv saw, at bound),
     * move_len[q] bytes at move_off[q] of staging. NULL: the engine moves the user's buffer
     * itself. */
    char *staging;
    intptr_t bound;
    const int64_t *move_at, *move_off, *move_len;
    const int *move_count;
    const intptr_t *move_type;
};

/* A step of a hierarchical call: sources served by copying their lists as they rise
 * (pc_serve_lists). */
struct pc_step {
    struct pc_sources sources;
    struct pc_copies list;
};

/* One round of a hierarchical call (papcoll/algorithms/shm_direct.py says why it is correct),
 * for one pair of banks (the board epoch's parity and the round's): a schedule of tasks
 * (sched; papcoll_hier.c and papcoll_reads.c define them, shm_direct.py adds each role's),
 * run for every call, planned or not.
 *
 * Set up once (shm_layout.py): my blocks go out by the copy list post (npost copies: absolute
 * destinations in the node's board and outbox, sources relative to the round's send buffer)
 * and my post on the board (its four words); my own block from offset own. local: my node's
 * posts, their blocks for me out of the board (all_local: the sources), or, read by CMA
 * (reads set), none; reads: the posters' buffers, read (pc_cma_collect: pids, acks,
 * ack_stride; the sources: others), and releases: every other process's read of mine.
 * masters: a master's call among the masters; shm_direct's master then raises the one done
 * flag (done); pap_shm_direct's hands each remote aggregate on as it lands (flags: one per
 * node, flag_stride apart; its copies: remote's). remote: the done flags, my parts of the
 * aggregates (all_remote), served as they rise. Scans start at start (my node) and
 * scatter_start (the nodes).
 *
 * sig: the signature of its calls (its block size's; the masters' call's code is its own).
 * A round is begun by pc_hier_start and run by pc_sched_run on sched, as often as it takes. */
struct pc_hier {
    size_t npost;
    const size_t *post_dst, *post_src;
    size_t own;
    volatile uint64_t *post;
    struct pc_step *local, *remote;
    const uint8_t *all_local, *all_remote;
    struct pc_sources *reads, *releases;
    const pid_t *pids;
    volatile uint64_t *acks;
    size_t ack_stride;
    const uint8_t *others;
    struct pc_xcall *masters;
    volatile uint64_t *done, *flags;
    size_t flag_stride;
    size_t start, scatter_start;
    size_t node_at;               /* CMA: where my node's first process's block for me lies */
    uint64_t sig;
    /* the round (pc_hier_start) */
    const char *send;
    char *recv;
    size_t len, block, offset;
    uint64_t round, epoch, xepoch, adverts, address;
    /* its schedule, and whether the gather is complete (the masters' gate) */
    struct pc_sched sched;
    int gathered;
};

/* Begin a round of h: send and recv, the call's buffers at the round's offset (send == recv:
 * MPI_IN_PLACE, my own block stays) in blocks of block bytes, len bytes of each; round and
 * board epoch; address, the buffer my post publishes (CMA; 0: none); a master's call's
 * xepoch and adverts (its counters). 0, or a post's -errno. pc_sched_run on h->sched then
 * runs it: 1 when done, -ETIMEDOUT (run again: sched says which tasks are complete), -EPROTO
 * (a post of the gather, local->sources.failed, or of the reads, reads->failed, or the
 * masters' call: its failed_*), or another -errno (a transport's; a CMA read's:
 * reads->failed); sched.failed names the task. */
int pc_hier_start(struct pc_hier *h, const char *send, char *recv, size_t block, size_t offset,
                  size_t len, uint64_t round, uint64_t epoch, uint64_t address, uint64_t xepoch,
                  uint64_t adverts);

/* For the round's tasks: whether any of s is pending; arm s to serve those all marks, for
 * target and sig (0: none to check), from source start; a serving loop's rc as a progress
 * step's, each source it served logged as t's. */
int pc_hier_pending(const struct pc_sources *s);
void pc_hier_arm(struct pc_sources *s, const uint8_t *all, uint64_t target, uint64_t sig,
                 size_t start);
int pc_hier_served(struct pc_task *t, const struct pc_sources *s, int rc);

/* A cached plan: how to run calls of one shape -- the shape of a call papcoll fully checked
 * before (papcoll_call.c: bind sets it; the algorithm the rest). The shape: nbytes in all,
 * and either plain buffers with items of itemsize bytes and buffer format `format`
 * (datatype NULL) or [buf, datatype] specs naming the Python object datatype (compared by
 * identity; the caller keeps it alive). A call runs at most timeout_ns, taking the GIL back
 * every slice_ns to let signals through; its epochs are the next of *epoch, a counter shared
 * with every other user of the same board, its signature sig. */
struct pc_plan {
    int kind;                     /* PC_PLAN_* */
    int armed;                    /* 0: every call is declined (not bound, or dropped) */
    int64_t nbytes, itemsize;
    char format[16];
    void *datatype;
    int64_t n;                    /* processes */
    int64_t timeout_ns, slice_ns;
    uint64_t sig;
    uint64_t *epoch;
    /* PC_PLAN_SEGMENT: the exchange (its max_served n), serving from start */
    struct pc_exchange *x;
    size_t start;
    /* PC_PLAN_ENGINE, PC_PLAN_VAR: calls[epoch % 2], whose expected words a call writes; the
     * Exchange's count of zero-copy calls (which advertisement would be a peer's next; a
     * PC_VAR call is one); nbytes for the send blocks of an MPI.IN_PLACE call */
    struct pc_xcall *calls[2];
    uint64_t *adverts;
    char *spare;
    /* PC_PLAN_ENGINE over zero-copy calls: a persistent request's, on its buffers only --
     * recv_at (recv_bytes of it, registered for peers' writes under rkey) and send_at (its
     * lkey; 0: copied at the post), never in place. Its advert records carry *first (its
     * first start's epoch, 0 before it; the request's, which its other starts share):
     * pc_xcall_advertise decides whether a start sends its notices alone. */
    uint64_t *first;
    uint64_t recv_at, recv_bytes, send_at;
    uint32_t rkey, lkey;
    /* PC_PLAN_MPI: the communicator's handle value (as in pc_mpi_open) */
    intptr_t comm;
    /* PC_PLAN_HIER: the algorithm's round counter, its masters' call counter (adverts:
     * theirs), its rounds by bank pair (epoch % 2 * 2 + round % 2); the round in progress
     * (NULL: none) */
    uint64_t *round, *xepoch;
    struct pc_hier *rounds[4];
    struct pc_hier *current;
    /* PC_PLAN_MPIV, PC_PLAN_VAR: the send side's shape and the receive side's (comm: as
     * PC_PLAN_MPI's) */
    struct pc_vshape vshape[2]; /* send, receive; an MPI plan bound in place: send's counts
                                 * NULL (it takes MPI.IN_PLACE as sendbuf) */
    /* PC_PLAN_VAR with a staged receive side: the receive buffer of the call in progress,
     * which its end unpacks into */
    char *unpack_to;
};

#endif
