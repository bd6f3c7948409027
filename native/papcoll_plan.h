/*
 * papcoll's cached plans (struct pc_plan): how the next calls of a checked shape run in C,
 * entered once per call (papcoll_call.c for Alltoall, papcoll_callv.c for Alltoallv/w), over
 * the engine and transports of papcoll_xport.h, the node loops of papcoll_native.h, or the MPI
 * library (papcoll_mpi_rma.c).
 */
#ifndef PAPCOLL_PLAN_H
#define PAPCOLL_PLAN_H

#include "papcoll_xport.h"

/* ---- plans: Communicator.Alltoall's one entry (papcoll_call.c) ------------------------- */

#define PC_PLAN_SEGMENT 1 /* shm_pap: pc_exchange_blocks over the node board, in slot pieces */
#define PC_PLAN_ENGINE 2  /* copy-based PAP Direct: the engine, one prepared call per bank */
#define PC_PLAN_MPI 3     /* mpi: the MPI library's MPI_Alltoall */
#define PC_PLAN_HIER 4    /* shm_direct, pap_shm_direct: gather, masters, scatter (one round) */
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

/* One round of a hierarchical call (papcoll/algorithms/shm_direct.py says why it is correct),
 * for one pair of banks: the board epoch's parity and the round's. My blocks go out by the
 * copy list post (npost copies: absolute destinations in the node's board and outbox, sources
 * relative to the call's send buffer) and my post on the board (its four words); my own block
 * from offset own of the send buffer to the same offset of the receive buffer. Then the
 * phases, each a step the next waits for:
 *  - gather (local): my node's posts served as they rise -- for a master, the gate of its
 *    call among the masters (masters), which sends nothing before the gate is open;
 *  - masters: that call; shm_direct's master then raises the one done flag (done);
 *  - scatter (remote, NULL for a PAP master: its engine hands my parts on as they land): the
 *    done flags served as they rise.
 * all_local and all_remote: the sources each step serves. */
struct pc_hier {
    size_t npost;
    const size_t *post_dst, *post_src;
    size_t own;
    volatile uint64_t *post;
    struct pc_gate *local, *remote;
    const uint8_t *all_local, *all_remote;
    struct pc_xcall *masters;
    volatile uint64_t *done;
};
#define PC_HIER_GATHER 1  /* the phase a hierarchical call is in (pc_plan.phase; 0: none) */
#define PC_HIER_MASTERS 2
#define PC_HIER_SCATTER 3

/* A hierarchical plan's call: start it (its round and board epoch the next of *round and
 * *epoch, the masters' call the next of *xepoch: posts, own block, phases armed), then run
 * it for at most timeout_ns, as often as it takes: 1 when done, -ETIMEDOUT (run again; phase
 * says where it waits), -EPROTO (a post of the gather, or the masters' call: failed_*), or a
 * transport's -errno. */
struct pc_plan;
void pc_hier_start(struct pc_plan *p, const char *send, char *recv, int in_place);
int pc_hier_run(struct pc_plan *p, int64_t timeout_ns);

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
    /* PC_PLAN_MPI: the communicator's handle value (as in pc_mpi_open) */
    intptr_t comm;
    /* PC_PLAN_HIER: the algorithm's round counter, its masters' call counter (adverts:
     * theirs), its rounds by bank pair (epoch % 2 * 2 + round % 2), where scatters start;
     * the round and phase of the call in progress */
    uint64_t *round, *xepoch;
    struct pc_hier *rounds[4];
    size_t scatter_start;
    struct pc_hier *current;
    int phase;
    /* PC_PLAN_MPIV, PC_PLAN_VAR: the send side's shape and the receive side's (comm: as
     * PC_PLAN_MPI's) */
    struct pc_vshape vshape[2]; /* send, receive; an MPI plan bound in place: send's counts
                                 * NULL (it takes MPI.IN_PLACE as sendbuf) */
    /* PC_PLAN_VAR with a staged receive side: the receive buffer of the call in progress,
     * which its end unpacks into */
    char *unpack_to;
};

#endif
