/* The node loops' and the hierarchical round's structs as Python types (papcoll_pystruct.h
 * says how a type is declared): polled sources and copy lists (papcoll_native.h), shm_pap's
 * exchange, a round's schedule (papcoll_sched.h, papcoll_plan.h), each with the C functions
 * that work on it as its methods. Waits release the GIL and take their timeouts in seconds
 * (pc_timeout_arg, the one rule). */
#include "papcoll_pystruct.h"

#include <errno.h>

#include "papcoll_plan.h"

/* ---- struct pc_sources: polled sources, with the node loops over them ------------------- */

#define S struct pc_sources
static PyGetSetDef sources_fields[] = {
    PC_FIELD(S, flags, MEM), PC_FIELD(S, stride, PC_F_SIZE), PC_FIELD(S, pending, MEMW),
    PC_FIELD(S, n, PC_F_SIZE), PC_FIELD(S, target, PC_F_U64), PC_FIELD(S, sig, PC_F_U64),
    PC_FIELD(S, start, PC_F_SIZE), PC_FIELD(S, served, MEMW),
    PC_FIELD(S, max_served, PC_F_SIZE), PC_FIELD(S, failed, PC_F_SIZE), {NULL}};
#undef S

/* cma_collect(pids, remote_offset, dst, dst_stride, length, acks, timeout): pc_cma_collect
 * into dst (a writable buffer holding n blocks dst_stride apart), acks a writable Flags. */
static PyObject *cma_collect(PyObject *self, PyObject *args)
{
    PyObject *pids, *dst, *acks, *timeout;
    Py_ssize_t remote_offset, stride, len;
    if (!PyArg_ParseTuple(args, "OnOnnOO:cma_collect", &pids, &remote_offset, &dst, &stride,
                          &len, &acks, &timeout))
        return NULL;
    struct pc_sources *s = MEM_OF(self);
    volatile uint64_t *a;
    size_t ack_stride, nacks;
    int64_t ns;
    Py_buffer p, d;
    if (pc_flags_of(acks, "acks", &a, &ack_stride, &nacks) < 0 || pc_timeout_arg(timeout, &ns) < 0)
        return NULL;
    if (pc_local_arg(pids, 0, "pids", &p) < 0)
        return NULL;
    if (pc_local_arg(dst, 1, "dst", &d) < 0) {
        PyBuffer_Release(&p);
        return NULL;
    }
    int fits = remote_offset >= 0 && stride >= 0 && len >= 0 && nacks >= s->n &&
               (size_t)p.len >= s->n * sizeof(pid_t) &&
               (s->n == 0 || (Py_ssize_t)(s->n - 1) * stride + len <= d.len);
    int rc = -EINVAL;
    if (fits) {
        Py_BEGIN_ALLOW_THREADS
        rc = pc_cma_collect(s, p.buf, (size_t)remote_offset, d.buf, (size_t)stride, (size_t)len,
                            a, ack_stride, ns);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&p);
    PyBuffer_Release(&d);
    return pc_rc_of(rc);
}

/* wait_all_ge(timeout): pc_wait_all_ge. */
static PyObject *wait_all_ge(PyObject *self, PyObject *timeout)
{
    int64_t ns;
    if (pc_timeout_arg(timeout, &ns) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pc_wait_all_ge(MEM_OF(self), ns);
    Py_END_ALLOW_THREADS
    return pc_rc_of(rc);
}

static PyMethodDef sources_methods[] = {
    {"cma_collect", cma_collect, METH_VARARGS, NULL},
    {"wait_all_ge", wait_all_ge, METH_O, NULL},
    {NULL}};

/* ---- struct pc_copies, struct pc_step ---------------------------------------------------- */

#define S struct pc_copies
static PyGetSetDef copies_fields[] = {
    PC_FIELD(S, first, MEM), PC_FIELD(S, dst_off, MEM), PC_FIELD(S, src_off, MEM),
    PC_FIELD(S, len, PC_F_SIZE), {NULL}};   /* dst, src: a round's bases, set in C */
#undef S

#define S struct pc_step
static PyGetSetDef step_fields[] = {
    PC_FIELD(S, sources, PC_F_EMBED, .type = &pc_sources_type.type),
    PC_FIELD(S, list, PC_F_EMBED, .type = &pc_copies_type.type), {NULL}};
#undef S

/* ---- struct pc_exchange: shm_pap's exchange through the node segment --------------------- */

#define S struct pc_exchange
static PyGetSetDef exchange_fields[] = {
    PC_FIELD(S, s, PC_F_EMBED, .type = &pc_sources_type.type), PC_FIELD(S, me, PC_F_SIZE),
    PC_FIELD(S, post, MEMW), PC_FIELD(S, mine, MEMW), PC_FIELD(S, regions, MEM),
    PC_FIELD(S, region_stride, PC_F_SIZE), PC_FIELD(S, slot, PC_F_SIZE), {NULL}};
#undef S

/* exchange_blocks(src, dst, block, length, timeout): pc_exchange_blocks, src and dst holding
 * n blocks of block bytes. */
static PyObject *exchange_blocks(PyObject *self, PyObject *args)
{
    PyObject *src, *dst, *timeout;
    Py_ssize_t block, len;
    if (!PyArg_ParseTuple(args, "OOnnO:exchange_blocks", &src, &dst, &block, &len, &timeout))
        return NULL;
    struct pc_exchange *x = MEM_OF(self);
    int64_t ns;
    Py_buffer s, d;
    if (pc_timeout_arg(timeout, &ns) < 0 || pc_local_arg(src, 0, "src", &s) < 0)
        return NULL;
    if (pc_local_arg(dst, 1, "dst", &d) < 0) {
        PyBuffer_Release(&s);
        return NULL;
    }
    Py_ssize_t need = (Py_ssize_t)(x->s.n - 1) * block + len;
    int rc = -EINVAL;
    if (block >= 0 && len >= 0 && len <= block && (size_t)len <= x->slot && x->s.n > 0 &&
        s.len >= need && d.len >= need) {
        Py_BEGIN_ALLOW_THREADS
        rc = pc_exchange_blocks(x, s.buf, d.buf, (size_t)block, (size_t)len, ns);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&s);
    PyBuffer_Release(&d);
    return pc_rc_of(rc);
}

static PyMethodDef exchange_methods[] = {
    {"exchange_blocks", exchange_blocks, METH_VARARGS, NULL}, {NULL}};

/* ---- struct pc_sched, struct pc_hier: a hierarchical round's schedule ------------------- */

#define S struct pc_sched
static PyGetSetDef sched_fields[] = {
    PC_FIELD(S, n, LOCKED(PC_F_INT)), PC_FIELD(S, posted, LOCKED(PC_F_U32)),
    PC_FIELD(S, done, LOCKED(PC_F_U32)), PC_FIELD(S, failed, LOCKED(PC_F_INT)),
    PC_FIELD(S, events, MEMW), PC_FIELD(S, nevents, PC_F_SIZE),
    PC_FIELD(S, max_events, PC_F_SIZE), {NULL}};
#undef S

#define S struct pc_hier
static PyGetSetDef hier_fields[] = {
    PC_FIELD(S, npost, PC_F_SIZE), PC_FIELD(S, post_dst, MEM), PC_FIELD(S, post_src, MEM),
    PC_FIELD(S, own, PC_F_SIZE), PC_FIELD(S, post, MEMW),
    PC_FIELD(S, local, PC_F_STRUCT, .type = &pc_step_type.type),
    PC_FIELD(S, remote, PC_F_STRUCT, .type = &pc_step_type.type), PC_FIELD(S, all_local, MEM),
    PC_FIELD(S, all_remote, MEM), PC_FIELD(S, reads, PC_F_STRUCT, .type = &pc_sources_type.type),
    PC_FIELD(S, releases, PC_F_STRUCT, .type = &pc_sources_type.type), PC_FIELD(S, pids, MEM),
    PC_FIELD(S, acks, MEMW), PC_FIELD(S, ack_stride, PC_F_SIZE), PC_FIELD(S, others, MEM),
    PC_FIELD(S, masters, PC_F_STRUCT, .type = &pc_xcall_type.type), PC_FIELD(S, done, MEMW),
    PC_FIELD(S, flags, MEMW), PC_FIELD(S, flag_stride, PC_F_SIZE),
    PC_FIELD(S, start, PC_F_SIZE), PC_FIELD(S, scatter_start, PC_F_SIZE),
    PC_FIELD(S, node_at, PC_F_SIZE), PC_FIELD(S, sig, PC_F_U64),
    PC_FIELD(S, len, LOCKED(PC_F_SIZE)), PC_FIELD(S, block, LOCKED(PC_F_SIZE)),
    PC_FIELD(S, offset, LOCKED(PC_F_SIZE)), PC_FIELD(S, round, LOCKED(PC_F_U64)),
    PC_FIELD(S, epoch, LOCKED(PC_F_U64)),
    PC_FIELD(S, sched, PC_F_EMBED, .type = &pc_sched_type.type), {NULL}};
#undef S

/* task(i, kind, deps, subscribes): task i of the round's schedule, on the round
 * (pc_sched_task); -1 subscribes to none. */
static PyObject *hier_task(PyObject *self, PyObject *args)
{
    struct pc_hier *h = MEM_OF(self);
    int i, subscribes;
    const char *kind;
    unsigned int deps;
    if (!PyArg_ParseTuple(args, "isIi:task", &i, &kind, &deps, &subscribes))
        return NULL;
    int rc = pc_sched_task(&h->sched, i, kind, h, deps, subscribes);
    if (rc < 0)
        return PyErr_Format(PyExc_ValueError, "task %d (%s): %s", i, kind,
                            rc == -ENOENT ? "no such kind" : "bad dependencies");
    Py_RETURN_NONE;
}

/* begin(send, recv, block, offset, len, round, epoch, cma, xepoch, adverts): pc_hier_start on
 * the call's buffers at offset (send is recv: MPI.IN_PLACE), which the caller holds until
 * the round is done; cma: my post publishes my send buffer. 0 or a post's -errno. */
static PyObject *hier_begin(PyObject *self, PyObject *args)
{
    struct pc_hier *h = MEM_OF(self);
    PyObject *send, *recv;
    Py_ssize_t block, offset, len;
    unsigned long long round, epoch, xepoch, adverts;
    int cma;
    if (!PyArg_ParseTuple(args, "OOnnnKKpKK:begin", &send, &recv, &block, &offset, &len, &round,
                          &epoch, &cma, &xepoch, &adverts))
        return NULL;
    Py_buffer s, r;
    if (pc_local_arg(recv, 1, "recv", &r) < 0)
        return NULL;
    if (pc_local_arg(send, 0, "send", &s) < 0) {
        PyBuffer_Release(&r);
        return NULL;
    }
    int rc = 0;
    if (block < 0 || offset < 0 || len < 0 || offset + len > r.len || s.len != r.len)
        PyErr_Format(PyExc_ValueError, "a round of %zd bytes at %zd of blocks of %zd does not "
                     "fit the call's buffers", len, offset, block);
    else
        rc = pc_hier_start(h, (char *)s.buf + offset, (char *)r.buf + offset, (size_t)block,
                           (size_t)offset, (size_t)len, round, epoch,
                           cma ? (uint64_t)(uintptr_t)s.buf : 0, xepoch, adverts);
    PyBuffer_Release(&s);
    PyBuffer_Release(&r);
    return pc_rc_of(rc);
}

/* run(timeout): pc_sched_run on the round's schedule. */
static PyObject *hier_run(PyObject *self, PyObject *timeout)
{
    struct pc_hier *h = MEM_OF(self);
    int64_t ns;
    if (pc_timeout_arg(timeout, &ns) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pc_sched_run(&h->sched, ns);
    Py_END_ALLOW_THREADS
    return pc_rc_of(rc);
}

static PyMethodDef hier_methods[] = {
    {"task", hier_task, METH_VARARGS, NULL}, {"begin", hier_begin, METH_VARARGS, NULL},
    {"run", hier_run, METH_O, NULL}, {NULL}};


STYPE(pc_sources_type, pc_sources, "Sources", sources_fields, sources_methods);
STYPE(pc_copies_type, pc_copies, "Copies", copies_fields, NULL);
STYPE(pc_step_type, pc_step, "Step", step_fields, NULL);
STYPE(pc_exchange_type, pc_exchange, "Exchange", exchange_fields, exchange_methods);
STYPE(pc_sched_type, pc_sched, "Sched", sched_fields, NULL);
STYPE(pc_hier_type, pc_hier, "Hier", hier_fields, hier_methods);
