/*
 * papcoll native core: the few things Python cannot do well or cheaply.
 *
 *  - flags: 64-bit words in memory shared between processes, each written by
 *    one process and polled by others, with acquire/release ordering so that
 *    data written before a flag is visible to whoever sees the flag;
 *  - bounded waits on those flags that back off from spinning to sleeping,
 *    because papcoll often runs more ranks than cores;
 *  - Cross Memory Attach (process_vm_readv/writev) copies that move every
 *    byte or report an errno, plus the probe behind the CMA cost model.
 *
 * Python reaches it through the module papcoll._native, built from the same
 * files: its objects own the core's structs (papcoll_pyloops.c, papcoll_pytypes.c,
 * papcoll_pyxport.c, papcoll_pyflags.c) and release the GIL around every wait;
 * its entry runs a cached plan (struct pc_plan, papcoll_plan.h) once per call
 * (papcoll_call.c).
 *
 * Conventions: functions that can fail return a negative errno (-EINVAL,
 * -ETIMEDOUT, -EFAULT, ...) rather than -1 and errno, and nothing blocks
 * without a deadline: every wait takes timeout_ns >= 0 as its last argument
 * (0 = test once) and rejects a negative timeout with -EINVAL; "wait forever"
 * is not offered because a lost peer must become an error, not a hang.
 */
#ifndef PAPCOLL_NATIVE_H
#define PAPCOLL_NATIVE_H

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- clock -------------------------------------------------------------- */

/* CLOCK_MONOTONIC in nanoseconds: the clock of every deadline here, so that
 * Python can compute deadlines that agree with the waits (vDSO, ~20 ns). */
int64_t pc_now_ns(void);

/* ---- flags ---------------------------------------------------------------- */

/* Publish v at *f with release ordering: every store this process made before
 * (e.g. the data a flag announces) is visible to a process that reads v with
 * pc_flag_load. f must be 8-byte aligned; only one process should write f. */
void pc_flag_store(volatile uint64_t *f, uint64_t v);

/* Read *f with acquire ordering: after seeing a value published with
 * pc_flag_store, the data written before that store is visible here. */
uint64_t pc_flag_load(const volatile uint64_t *f);

/* For the loops of papcoll_native.c and papcoll_loops.c: flag i of a set (see below), and
 * the arguments every "serve pending flags" loop checks first: the number of pending
 * entries (> 0), -ENOENT when there are none (or n == 0), -EINVAL for a bad start or
 * stride. */
static inline uint64_t pc_flag_at(const volatile uint64_t *base, size_t stride_bytes, size_t i)
{
    return pc_flag_load((const volatile uint64_t *)((const volatile char *)base + i * stride_bytes));
}

static inline int pc_count_pending(const uint8_t *pending, size_t n, size_t start, size_t stride_bytes)
{
    if (n > INT_MAX || start >= n || stride_bytes == 0)
        return n == 0 ? -ENOENT : -EINVAL;
    int count = 0;
    for (size_t i = 0; i < n; i++)
        count += pending[i] != 0;
    return count > 0 ? count : -ENOENT;
}

/* ---- the one wait ---------------------------------------------------------- */

/* Every native wait is pc_wait: it calls poll(what) -- one look at what it waits for, which
 * returns PC_DONE when the wait is over, PC_MORE when it progressed without being over,
 * PC_IDLE when nothing changed, or -errno to end the wait with that error -- until the wait
 * is over or a look in vain finds the deadline (pc_now_ns() time) passed. It looks at least
 * once, so a deadline already past makes it a test; after progress it looks again at once
 * (progress is finite: there are so many peers, so many blocks). Returns 0, -ETIMEDOUT, poll's error, or the
 * deadline itself when that is < 0 (pc_deadline's -EINVAL).
 *
 * Between looks in vain it backs off, by the time since the last progress: a peer running on
 * another core usually answers within a microsecond or two, so it spins (2 us); past that
 * it gives the core away, first by yielding (to 1 ms), which costs a peer that needs it
 * one context switch and costs nothing when nobody does, then by sleeping, growing the sleep
 * (1 to 64 us) so that a long wait costs few wake-ups: a waiter sharing a
 * core must not starve the process it waits for. After progress it spins again: arrivals
 * come in bunches. Linux adds its timer slack (50 us by default) to every sleep; with
 * PC_PRECISE, once the wait sleeps, it lowers the thread's slack to 1 us and restores it on
 * return, for the waits that end an alltoall, where each wake-up's delay adds to the call.
 * A look that returns PC_BUSY found nothing either, but what it waits for moves only while
 * it looks (MPICH serves RMA messages only inside this process's MPI calls): the wait then
 * yields, and never sleeps -- measured, a 4 MiB aggregate between two masters took 3 x as
 * long with sleeps between the polls that move it. */
enum { PC_IDLE = 0, PC_DONE = 1, PC_MORE = 2, PC_BUSY = 3 };
#define PC_PRECISE 1
typedef int (*pc_poll_fn)(void *what);
int pc_wait(pc_poll_fn poll, void *what, int64_t deadline, int flags);

/* What the calling thread's pc_waits did: looks, yields and sleeps (bench cost --counts).
 * Each thread's own; pc_wait only adds to them. */
struct pc_wait_counts {
    uint64_t looks, yields, sleeps;
};
const struct pc_wait_counts *pc_wait_counts(void);

/* The deadline timeout_ns from now (saturated), or -EINVAL when timeout_ns < 0. */
int64_t pc_deadline(int64_t timeout_ns);

/* Wait until *f >= target (flags only grow: they carry epochs or counters).
 * Returns 0 once *f >= target, -ETIMEDOUT when timeout_ns (CLOCK_MONOTONIC)
 * elapsed first, -EINVAL if timeout_ns < 0. */
int pc_wait_ge(const volatile uint64_t *f, uint64_t target, int64_t timeout_ns);

/* Flag i of a set lives at (const char *)base + i * stride_bytes (stride lets
 * flags sit on separate cache lines); pending[i] != 0 marks the flags still
 * of interest. Wait until some pending flag is >= target and return its index.
 * The scan starts at index start and wraps around, so the caller decides the
 * service order: pass (p + 1) mod n first, then one past the last index served,
 * to serve peers in the order they arrive without favouring low indices.
 * Returns the index, -ETIMEDOUT at the deadline, -ENOENT if no flag is
 * pending (waiting would be a bug), -EINVAL on bad arguments (start >= n,
 * n > INT_MAX, stride 0, timeout_ns < 0). */
int pc_wait_any_ge(const volatile uint64_t *base, size_t stride_bytes,
                   const uint8_t *pending, size_t n, uint64_t target,
                   size_t start, int64_t timeout_ns);

/* As pc_wait_any_ge, but once at least one pending flag is ready, write the
 * indices of ALL ready pending flags to out (room for n entries), in scan
 * order from start, and return how many: one call serves a whole batch, which
 * matters when each call costs a Python round trip. With timeout_ns == 0 it
 * is a non-blocking poll (-ETIMEDOUT meaning "none ready"). */
int pc_wait_ready_ge(const volatile uint64_t *base, size_t stride_bytes,
                     const uint8_t *pending, size_t n, uint64_t target,
                     size_t start, size_t *out, int64_t timeout_ns);

/* ---- Cross Memory Attach -------------------------------------------------- */

/* Copy n bytes from address remote in process pid to local. Loops over
 * partial transfers (the kernel moves at most ~2 GiB per call) until all n
 * bytes moved. Returns n, or -errno: -ESRCH (no such process), -EPERM (not
 * allowed: other user, or Yama ptrace_scope without pc_allow_ptrace_any in
 * the target), -EFAULT (a bad local or remote address), -EINVAL. */
ssize_t pc_cma_read(pid_t pid, void *local, const void *remote, size_t n);

/* Copy n bytes from local to address remote in process pid; as pc_cma_read. */
ssize_t pc_cma_write(pid_t pid, const void *local, void *remote, size_t n);

/* Vector form: segment i copies lengths[i] bytes between local_addrs[i] here
 * and remote_addrs[i] in pid. Segments are packed up to IOV_MAX per syscall,
 * since the per-call cost (alpha in the CMA cost model) dominates small
 * blocks. A partial transfer may stop inside a segment; the next call resumes
 * at that exact byte. Zero-length segments are skipped. Returns the total
 * byte count, or -errno; on error *err_seg (if err_seg is non-NULL) is the
 * index of the segment whose first uncopied byte failed, and all earlier
 * segments have been copied. -EINVAL if the total exceeds SSIZE_MAX. */
ssize_t pc_cma_readv(pid_t pid, size_t n_segments, const uintptr_t *local_addrs,
                     const uintptr_t *remote_addrs, const size_t *lengths,
                     size_t *err_seg);

/* Vector form of pc_cma_write; as pc_cma_readv. */
ssize_t pc_cma_writev(pid_t pid, size_t n_segments, const uintptr_t *local_addrs,
                      const uintptr_t *remote_addrs, const size_t *lengths,
                      size_t *err_seg);

/* Cost-model probe (Chakraborty et al., "Contention-aware kernel-assisted MPI
 * collectives", Table III): issue `reps` identical process_vm_readv calls with
 * one local iovec of local_len bytes at local and riov_count (<= IOV_MAX)
 * remote iovecs of riov_len bytes at remote + k * riov_stride, and store the
 * duration of each call in times_ns[0..reps). Which kernel steps run depends
 * on the lengths (mm/process_vm_access.c; measured on Linux 6.18):
 *   local_len 0                        -> returns before any lookup: syscall only
 *                                         (so the paper's 0-byte local iovec
 *                                         pins nothing on Linux);
 *   local 1 B, remote 1 iovec of 1 B   -> + access check + 1 page pin: alpha;
 *   local 1 B, remote 1 iovec of N pages (N <= 1024)
 *                                      -> pins all N pages, copies 1 B: + N*l;
 *   local N pages, remote N pages      -> + N*s*beta.
 * l depends on how the remote memory is mapped: pinning is far cheaper for
 * transparent huge pages than for 4 KiB pages, so probe the kind papcoll uses.
 * Returns the byte count of the last call or -errno. */
ssize_t pc_cma_probe(pid_t pid, void *local, size_t local_len, uintptr_t remote,
                     size_t riov_count, size_t riov_len, size_t riov_stride,
                     size_t reps, int64_t *times_ns);

/* Let any process of this user read/write our memory with CMA when Yama's
 * ptrace_scope is 1 (prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY), as Open MPI
 * does); every rank calls it once before peers use CMA on it. Returns 0 (also
 * when Yama is absent: EINVAL is ignored) or -errno. */
int pc_allow_ptrace_any(void);

/* Undo pc_allow_ptrace_any (prctl(PR_SET_PTRACER, 0)): once no papcoll Communicator needs
 * CMA any more, only the kernel's default rule decides who may read our memory. Returns 0
 * (also without Yama) or -errno. */
int pc_drop_ptrace_any(void);

/* ---- intra-node PAP loops ------------------------------------------------- */

/* The polled sources of a loop: the peers (or flags) it waits on and serves as they arrive,
 * described once for the loops below, the engine's gate and the hierarchical steps
 * (papcoll_xport.h, papcoll_plan.h). The loops keep their progress here, so a call cut short
 * (timeout, max_served) is resumed by calling again with the same struct. */
struct pc_sources {
    const volatile uint64_t *flags; /* source i's flag (its post's word 0): flags + i * stride */
    size_t stride;                  /* bytes between flags, > 0: they may sit a cache line apart */
    uint8_t *pending;               /* n bytes: != 0 while source i is still to be served */
    size_t n;
    uint64_t target;                /* source i has arrived once its flag is >= target */
    uint64_t sig;                   /* what i's post must carry for target (PC_POST_SIG) before
                                     * i is served; pc_serve_lists: 0 = nothing to check */
    size_t start;                   /* where the next scan begins (< n); a loop leaves it one
                                     * past the source it served last */
    size_t *served, max_served;     /* who the last call served, in order (room for n); it
                                     * serves at most max_served (> 0) */
    size_t failed;                  /* the source whose post's signature differed (-EPROTO), or
                                     * whose read failed (pc_cma_collect) */
};

/* The hot loops of papcoll's exchanges inside a node, one C call per alltoall so that a
 * small-message call does not pay Python per peer. Each serves the pending sources of s
 * (local ranks 0..n-1) as they arrive: it clears pending[i] and appends i to served[] as it
 * serves source i. Scans begin at s->start and wrap: start at (me + 1) % n so that
 * simultaneous arrivals spread the load over the sources, and a late source never holds up
 * a ready one. They return the number of sources served (>= 1) once none is pending or
 * max_served were served; if the deadline passes first, the number served so far, or
 * -ETIMEDOUT if none; -ENOENT if no source was pending; -EINVAL on bad arguments (start >= n,
 * n > INT_MAX, stride 0, max_served 0, timeout_ns < 0); -EPROTO (s->failed = i, still
 * pending, nothing of it copied) when source i's signature differs. They wait by pc_wait,
 * PC_PRECISE, as pc_wait_all_ge below does. */

/* Posts. A process announces each operation with a post of four words, its flag first:
 * word 0 the flag (the operation's epoch, stored last, with release ordering), words 1 and 2
 * the signature of the call of epoch e in word 1 + e % 2 (two banks: a flag >= e may already
 * announce epoch e + 1, whose signature must not overwrite e's while others still check it),
 * word 3 the address of a published buffer (CMA). A signature says what the call is (which
 * algorithm and scheme, and its block size), so a reader compares it with its own before it
 * touches a byte of the poster's data: calls that disagree fail with -EPROTO instead of
 * copying stale, foreign or missing bytes. */
#define PC_POST_SIG 1
#define PC_POST_ADDR 3

/* Fill my post (its four words at post) for epoch: the published buffer's address (0: none)
 * and the call's signature first, then the flag, with release ordering: whoever sees the flag
 * sees the rest, and the blocks written before. The one writer of a post, for C and Python. */
void pc_post(volatile uint64_t *post, uint64_t epoch, uint64_t sig, uint64_t address);

/* A post's signature for epoch, and its published buffer's address: read after its flag
 * (acquire), which was stored after them. */
uint64_t pc_post_sig(const volatile uint64_t *post, uint64_t epoch);
uint64_t pc_post_address(const volatile uint64_t *post);

/* Write the call's signature sig as the header word of each aggregate of an outbox: at out +
 * at[q] for every q < n but me (the engine checks it on arrival, papcoll_exchange.c). The one
 * writer of an aggregate's header, for C and Python. */
void pc_head_aggregates(char *out, const uint64_t *at, size_t n, size_t me, uint64_t sig);

/* The offset in an inbox of the slot where process q's block lands in bank (0 or 1) of an
 * inbox of n slots of slot bytes each per bank. The one definition of the inbox's layout. */
uint64_t pc_inbox_slot(uint64_t bank, uint64_t n, uint64_t q, uint64_t slot);

/* A whole exchange through a node segment (shm_pap's layout), described once: its sources s
 * are the n processes' posts (target: the exchange's epoch, sig: the call's), process i's
 * data region is at regions + i * region_stride, two banks of n slots of slot bytes each,
 * where slot q of bank b (at (b * n + q) * slot) holds its block for process q. post and mine
 * are this process's (me's) post and region, which it writes. */
struct pc_exchange {
    struct pc_sources s;
    size_t me;
    volatile uint64_t *post;
    char *mine;
    const char *regions;
    size_t region_stride, slot;
};

/* One epoch (x->s.target) of the exchange in one call. Unless my flag already shows the
 * epoch (a call that timed out is resumed with the same arguments), post: copy len bytes
 * (<= slot) of each of my n - 1 blocks for others from src (block bytes apart) into my bank
 * epoch % 2, store x->s.sig in my post, publish the epoch in my flag (release: whoever sees
 * it sees the blocks) and mark every process pending. Then serve each process i, once its
 * flag is >= the epoch, by checking that its signature for the epoch is x->s.sig (always,
 * even 0) and copying its slot for me in that bank to dst + i * block; my own block goes
 * straight from src to dst (not at all when src == dst: MPI_IN_PLACE). Returns as the loops
 * above do; -EINVAL also for me >= n or len > slot. len 0 still posts and checks every
 * signature: a call whose blocks are empty still meets its peers. */
int pc_exchange_blocks(struct pc_exchange *x, const void *src, void *dst, size_t block,
                       size_t len, int64_t timeout_ns);

/* Serve source i of s, once its post's flag is >= s->target, by reading len bytes with
 * process_vm_readv from process pids[i] at the address in its post (PC_POST_ADDR, published
 * before the flag) + remote_offset, to dst + i * dst_stride; then publish the target at
 * acks + i * ack_stride (release): "I have read your buffer", so that peer may let its buffer
 * go. Before reading, the post's signature for the target must be s->sig (always checked): a
 * poster whose call differs is never read, so no byte beyond its buffer is touched.
 * pids[i] == 0 marks this process's own buffer: a plain memcpy. A failed read returns its
 * -errno (see pc_cma_read), with s->failed = i and i still pending; the sources served
 * before it stay served. */
int pc_cma_collect(struct pc_sources *s, const pid_t *pids, size_t remote_offset, void *dst,
                   size_t dst_stride, size_t len, volatile uint64_t *acks, size_t ack_stride,
                   int64_t timeout_ns);

/* ---- copy lists (the hierarchical algorithms' intra-node phases) ------------------------ */

/* Copy k (k < count) moves len bytes from src + src_off[k] to dst + dst_off[k]. A base may be
 * NULL with absolute addresses in its offsets: the lists a Communicator keeps hold the fixed
 * side (the node segment) absolute and the user's side relative to the call's buffer. */
void pc_copy_list(char *dst, const size_t *dst_off, const char *src, const size_t *src_off,
                  size_t count, size_t len);

/* A copy list by source: source i owns copies first[i] .. first[i + 1] - 1, each moving len
 * bytes as pc_copy_list does. */
struct pc_copies {
    const size_t *first, *dst_off, *src_off;
    char *dst;
    const char *src;
    size_t len;
};

/* Serve the sources of s in arrival order, source i by copying its copies of list -- once its
 * flag is >= s->target and, when s->sig != 0, its post's signature for the target is s->sig
 * (see PC_POST_SIG). Returns as the loops above do. */
int pc_serve_lists(struct pc_sources *s, const struct pc_copies *list, int64_t timeout_ns);

/* Wait until every pending flag of s (flags, stride, pending, n) is >= s->target, clearing
 * pending[i] as flag i gets there. Returns 0, -ETIMEDOUT at the deadline (pending then marks
 * the flags still short), or -EINVAL (n > INT_MAX, stride 0, timeout_ns < 0). */
int pc_wait_all_ge(struct pc_sources *s, int64_t timeout_ns);

#endif
