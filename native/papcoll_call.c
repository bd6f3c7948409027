/* papcoll._native as a Python module: Communicator.Alltoall's one entry into compiled code.
 *
 * The core's state lives in the module's objects (papcoll_pyloops.c, papcoll_pytypes.c, the
 * XPort, Flags). A small alltoall inside a node takes about a microsecond of real work, and
 * Python's steps around it (parsing buffer specs, choosing, checking) took several times that;
 * MPI libraries called from mpi4py pay none of it. So once papcoll has fully checked a call, the algorithm that ran
 * it may leave a plan (struct pc_plan) for calls of its shape: alltoall() takes the user's
 * buffers, checks that they still have that shape, and runs the whole call with the GIL
 * released. Anything it does not recognise it declines, untouched, and the caller takes the
 * full Python path, which also produces every error message. The shape rules live here only:
 * bind() reads a checked call's buffers, alltoall() compares; bindv() and alltoall() do the
 * same for Alltoallv.
 */
#include "papcoll_pystruct.h"

#include <errno.h>
#include <limits.h>
#include <string.h>

#include "papcoll_native.h"

static PyObject *in_place_marker; /* mpi4py's MPI.IN_PLACE, given once by set_in_place */

int pc_in_place(PyObject *sendbuf)
{
    return in_place_marker != NULL && sendbuf == in_place_marker;
}

/* The object holding the data of a buffer argument: the argument itself for plain buffers
 * (datatype NULL), the buffer of a [buf, datatype] list or tuple naming datatype otherwise;
 * NULL for anything else. */
static PyObject *data_of(const void *datatype, PyObject *spec)
{
    if (datatype == NULL)
        return PyList_Check(spec) || PyTuple_Check(spec) ? NULL : spec;
    if ((PyList_CheckExact(spec) || PyTuple_CheckExact(spec)) &&
        PySequence_Fast_GET_SIZE(spec) == 2 && PySequence_Fast_GET_ITEM(spec, 1) == datatype)
        return PySequence_Fast_GET_ITEM(spec, 0);
    return NULL;
}

/* The buffers of a call whose specs have the form datatype says (see data_of): 1 with r
 * held, and s too unless sendbuf is MPI.IN_PLACE (*in_place; then s is r), C-contiguous and
 * not overlapping; 0, nothing held, for any other call. */
static int hold(const void *datatype, PyObject *sendbuf, PyObject *recvbuf, Py_buffer *s,
                Py_buffer *r, int *in_place)
{
    *in_place = pc_in_place(sendbuf);
    PyObject *send_data = *in_place ? NULL : data_of(datatype, sendbuf);
    PyObject *recv_data = data_of(datatype, recvbuf);
    if (recv_data == NULL || (send_data == NULL && !*in_place))
        return 0;
    if (PyObject_GetBuffer(recv_data, r, PyBUF_WRITABLE | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        return 0;
    }
    if (*in_place) {
        *s = *r;
    } else if (PyObject_GetBuffer(send_data, s, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        PyBuffer_Release(r);
        return 0;
    }
    const char *send = s->buf, *recv = r->buf;
    if (*in_place || send + s->len <= recv || recv + r->len <= send)
        return 1;
    PyBuffer_Release(s);
    PyBuffer_Release(r);
    return 0;
}

void pc_release(Py_buffer *s, Py_buffer *r, int in_place)
{
    if (!in_place)
        PyBuffer_Release(s);
    PyBuffer_Release(r);
}

const char *pc_format_of(const Py_buffer *b)
{
    return b->format ? b->format : "B";
}

/* A buffer of the plan's shape: its length and, for plain buffers, its format and item size
 * (a [buf, datatype] spec makes the datatype, not the buffer's format, say what the bytes
 * are). */
static int shaped(const struct pc_plan *p, const Py_buffer *b)
{
    return b->len == p->nbytes &&
           (p->datatype != NULL ||
            (b->itemsize == p->itemsize && strcmp(pc_format_of(b), p->format) == 0));
}

/* One piece of a segment call: an epoch of pc_exchange_blocks, resumed slice by slice with
 * the GIL taken in between for signals. 0 when every process was served, -ETIMEDOUT at the
 * deadline, -EPROTO when a process's call differs (x->s.failed), -1 with a Python error set. */
static int segment_piece(const struct pc_plan *p, const char *src, char *dst, size_t len,
                         uint64_t epoch, int64_t deadline)
{
    struct pc_exchange *x = p->x;
    size_t left = x->s.n, block = (size_t)p->nbytes / x->s.n;
    x->s.target = epoch, x->s.sig = p->sig, x->s.start = p->start;
    for (;;) {
        int64_t slice = deadline - pc_now_ns();
        slice = slice < 0 ? 0 : slice > p->slice_ns ? p->slice_ns : slice;
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = pc_exchange_blocks(x, src, dst, block, len, slice);
        Py_END_ALLOW_THREADS
        if (rc > 0) {
            left -= (size_t)rc;
            if (left == 0)
                return 0;
        } else if (rc == -EPROTO) {
            return rc;
        } else if (rc != -ETIMEDOUT) { /* the plan was checked when it was built */
            PyErr_Format(PyExc_SystemError, "papcoll plan: exchange failed (%d)", rc);
            return -1;
        } else if (pc_now_ns() >= deadline) {
            return -ETIMEDOUT;
        }
        if (PyErr_CheckSignals() < 0)
            return -1;
    }
}

/* shm_pap: the call in slot-sized pieces, each the next epoch; at least one piece: a call of
 * empty blocks still meets its peers. 1, or as segment_piece. */
static int run_segment(const struct pc_plan *p, const char *send, char *recv)
{
    size_t block = (size_t)p->nbytes / p->x->s.n, slot = p->x->slot, offset = 0;
    int64_t deadline = pc_now_ns() + p->timeout_ns;
    int rc;
    do
        rc = segment_piece(p, send + offset, recv + offset,
                           block - offset < slot ? block - offset : slot, ++*p->epoch,
                           deadline);
    while (rc == 0 && (offset += slot) < block);
    return rc == 0 ? 1 : rc;
}

static int zero_copy(const struct pc_plan *p)
{
    return p->kind == PC_PLAN_ENGINE && p->calls[0]->scheme != PC_COPY;
}

/* A zero-copy plan's start: the next of the Exchange's zero-copy calls; the first start
 * makes its epoch the request's. */
static uint64_t next_advert(const struct pc_plan *p, uint64_t epoch)
{
    if (*p->first == 0)
        *p->first = epoch;
    return ++*p->adverts;
}

/* PAP Direct by the engine, run for slice_ns: 1 done, or the engine's rc for the call it left
 * in calls[epoch % 2] (-ETIMEDOUT after the slice: the caller resumes it, -EPROTO, a
 * transport's failure). Copy-based in place, the blocks go out of the plan's spare copy:
 * peers' blocks land in recv while mine for them may still be read. Zero-copy, peers write
 * into recv itself. */
static int run_engine(const struct pc_plan *p, const char *send, char *recv, int in_place,
                      int64_t slice_ns)
{
    uint64_t epoch = ++*p->epoch;
    struct pc_xcall *c = p->calls[epoch % 2];
    size_t me = c->x->me, block = (size_t)p->nbytes / c->x->n;
    int zcopy = zero_copy(p);
    pc_xcall_start(c, epoch, zcopy ? next_advert(p, epoch) : *p->adverts, p->sig, c->code,
                   (int64_t)block);
    c->out = zcopy ? NULL : recv;
    if (zcopy) {
        /* same registration: pc_enter declines buffers at other addresses */
        pc_xcall_advertise(c, *p->first, 1, p->recv_at, p->recv_bytes, p->rkey);
        c->src = send;
        c->lkey = p->lkey;
        memcpy(recv + me * block, send + me * block, block);
    } else if (in_place) {
        memcpy(p->spare, recv, (size_t)p->nbytes);
        c->src = p->spare;
    } else {
        c->src = send;
        memcpy(recv + me * block, send + me * block, block);
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pc_xcall_run(c, slice_ns);
    Py_END_ALLOW_THREADS
    return rc;
}

/* mpi: MPI_Alltoall, the GIL released as mpi4py does. 1, or -(the MPI error code). */
static int run_mpi(const struct pc_plan *p, const char *send, char *recv, int in_place)
{
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pc_mpi_alltoall(in_place ? NULL : send, (int)(p->nbytes / p->n), recv, p->comm);
    Py_END_ALLOW_THREADS
    return rc ? -rc : 1;
}

/* shm_direct, pap_shm_direct: one round of the hierarchical call (papcoll_hier.c), its
 * round and board epoch the next of *round and *epoch, a master's call the next of *xepoch;
 * run for a slice: 1, or pc_sched_run's rc for the round left in the plan (resume() goes on
 * with it). */
static int run_hier(struct pc_plan *p, const char *send, char *recv, int in_place)
{
    uint64_t round = ++*p->round, epoch = ++*p->epoch;
    struct pc_hier *h = p->current = p->rounds[(epoch % 2) * 2 + round % 2];
    size_t block = (size_t)(p->nbytes / p->n);
    uint64_t xepoch = h->masters ? ++*p->xepoch : 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pc_hier_start(h, in_place ? recv : send, recv, block, 0, block, round, epoch, 0, xepoch,
                       *p->adverts);
    if (rc == 0)
        rc = pc_sched_run(&h->sched, p->slice_ns);
    Py_END_ALLOW_THREADS
    if (rc == 1)
        p->current = NULL;
    return rc;
}

/* A call of Alltoall plan p (see papcoll_call.h). Only the engine's and MPI's plans start:
 * the algorithms that serve requests leave no others. */
PyObject *pc_enter(struct pc_plan *p, PyObject *sendbuf, PyObject *recvbuf, enum pc_mode mode)
{
    Py_buffer s, r;
    int in_place;
    if (p == NULL || !p->armed || !hold(p->datatype, sendbuf, recvbuf, &s, &r, &in_place))
        return PyErr_Occurred() ? NULL : PyLong_FromLong(0);
    if (!shaped(p, &r) || (!in_place && !shaped(p, &s)) ||
        (zero_copy(p) && (in_place || (uintptr_t)r.buf != p->recv_at ||
                          (uintptr_t)s.buf != p->send_at))) {   /* not what it registered */
        pc_release(&s, &r, in_place);
        return PyLong_FromLong(0);
    }
    int rc;
    if (mode == PC_PROBE)
        rc = 1;
    else if (mode == PC_START)
        rc = p->kind == PC_PLAN_ENGINE ? run_engine(p, s.buf, r.buf, in_place, 0)
             : p->kind == PC_PLAN_MPI  ? PC_MPI_STARTS
                                       : 0;
    else
        rc = p->kind == PC_PLAN_SEGMENT  ? run_segment(p, s.buf, r.buf)
             : p->kind == PC_PLAN_ENGINE ? run_engine(p, s.buf, r.buf, in_place, p->slice_ns)
             : p->kind == PC_PLAN_HIER   ? run_hier(p, s.buf, r.buf, in_place)
                                         : run_mpi(p, s.buf, r.buf, in_place);
    pc_release(&s, &r, in_place);
    return PyErr_Occurred() ? NULL : PyLong_FromLong(rc);
}

static int variable(const struct pc_plan *p)
{
    return p->kind == PC_PLAN_MPIV || p->kind == PC_PLAN_VAR || p->kind == PC_PLAN_MPIW;
}

/* The call (plan, sendbuf, recvbuf) of a Python entry, in mode, by the plan's kind. */
static PyObject *entered(PyObject *const *args, Py_ssize_t nargs, enum pc_mode mode,
                         const char *usage)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, usage);
        return NULL;
    }
    struct pc_plan *p = args[0] == Py_None ? NULL : pc_plan_of(args[0]);
    if (p == NULL && PyErr_Occurred())
        return NULL;
    return (p != NULL && variable(p) ? pc_enterv : pc_enter)(p, args[1], args[2], mode);
}

/* alltoall(plan, sendbuf, recvbuf) -> 1 done, 0 declined (nothing touched: no plan, not
 * armed, or buffers of another shape), or < 0: the call is left for the algorithm to finish
 * or to raise (the run_* say which values). plan: a Plan (papcoll_pytypes.c), or None. An
 * Alltoallv plan's call likewise. */
static PyObject *alltoall(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    return entered(args, nargs, PC_RUN, "alltoall(plan, sendbuf, recvbuf)");
}

/* start(plan, sendbuf, recvbuf) -> a request's start: as alltoall(), or PC_MPI_STARTS. */
static PyObject *start(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    return entered(args, nargs, PC_START, "start(plan, sendbuf, recvbuf)");
}

/* probe(plan, sendbuf, recvbuf) -> 1 when the plan takes the call, else 0; nothing runs. */
static PyObject *probe(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    return entered(args, nargs, PC_PROBE, "probe(plan, sendbuf, recvbuf)");
}

/* The call run by plans[*index], the first plan of the tuple (Plan structs, Alltoall's or
 * Alltoallv's) that has its shape: its rc, as alltoall()'s; 0 with *index -1 when every plan
 * declined, nothing touched; -1 with a Python error. A call site's several shapes
 * (callcache.py) are tried in one entry into C (papcoll_entry.c). */
long pc_first(PyObject *plans, PyObject *sendbuf, PyObject *recvbuf, Py_ssize_t *index)
{
    *index = -1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(plans); i++) {
        struct pc_plan *p = pc_plan_of(PyTuple_GET_ITEM(plans, i));
        if (p == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "papcoll: a call site holds no plan");
            return -1;
        }
        PyObject *rc = (variable(p) ? pc_enterv : pc_enter)(p, sendbuf, recvbuf, PC_RUN);
        if (rc == NULL)
            return -1;
        long done = PyLong_AsLong(rc);
        Py_DECREF(rc);
        if (done != 0) {
            *index = i;
            return done;
        }
    }
    return 0;
}

/* bind(plan, sendbuf, recvbuf, datatype, sig) -> whether the plan is now armed for calls of
 * the shape of this one, which papcoll has fully checked (datatype: the one it parsed), with
 * signature sig. The forms a plan takes: both buffers plain (sendbuf may be MPI.IN_PLACE),
 * C-contiguous with one format short enough to keep, or both [buf, datatype] specs naming
 * that datatype object; a whole, non-empty block per process (for MPI, under 2 GiB). A call of
 * another form leaves the plan as it was. */
static PyObject *bind(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "bind(plan, sendbuf, recvbuf, datatype, sig)");
        return NULL;
    }
    struct pc_plan *p = pc_plan_of(args[0]);
    uint64_t sig = PyLong_AsUnsignedLongLong(args[4]);
    if (p == NULL || PyErr_Occurred())
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_False);
    const void *datatype = data_of(args[3], args[2]) != NULL ? args[3] : NULL;
    Py_buffer s, r;
    int in_place;
    if (!hold(datatype, args[1], args[2], &s, &r, &in_place))
        return Py_NewRef(Py_False);
    const char *format = datatype ? "" : pc_format_of(&r);
    int kept = (in_place || datatype != NULL ||
                (s.itemsize == r.itemsize && strcmp(pc_format_of(&s), format) == 0)) &&
               s.len == r.len && r.len > 0 && r.len % p->n == 0 &&
               strlen(format) < sizeof p->format &&
               (p->kind != PC_PLAN_MPI || r.len / p->n <= INT_MAX);
    if (kept) {
        p->nbytes = r.len;
        p->itemsize = r.itemsize;
        snprintf(p->format, sizeof p->format, "%s", format);
        p->datatype = (void *)datatype;
        p->sig = sig;
        p->armed = 1;
    }
    pc_release(&s, &r, in_place);
    return PyBool_FromLong(kept);
}

/* resume(plan, timeout) -> the call the plan left, run on for at most timeout seconds with the
 * GIL released: pc_sched_run's rc for a hierarchical plan's, pc_xcall_run's for the engine's
 * (PC_PLAN_ENGINE, PC_PLAN_VAR: its last call, whose end unpacks a staged receive side). */
static PyObject *resume(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "resume(plan, timeout)");
        return NULL;
    }
    struct pc_plan *p = pc_plan_of(args[0]);
    int64_t timeout_ns;
    if (p == NULL || pc_timeout_arg(args[1], &timeout_ns) < 0)
        return NULL;
    int engine = p->kind == PC_PLAN_ENGINE || p->kind == PC_PLAN_VAR;
    if (!engine && (p->kind != PC_PLAN_HIER || p->current == NULL)) {
        PyErr_SetString(PyExc_ValueError, "resume: no call of this plan in progress");
        return NULL;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = engine ? pc_xcall_run(p->calls[*p->epoch % 2], timeout_ns)
                : pc_sched_run(&p->current->sched, timeout_ns);
    Py_END_ALLOW_THREADS
    if (!engine && rc == 1)
        p->current = NULL;
    if (p->kind == PC_PLAN_VAR)
        rc = pc_var_end(p, rc);
    return PyErr_Occurred() ? NULL : PyLong_FromLong(rc);
}

/* set_in_place(obj): the object that stands for MPI_IN_PLACE as sendbuf. */
static PyObject *set_in_place(PyObject *module, PyObject *obj)
{
    (void)module;
    Py_XSETREF(in_place_marker, Py_NewRef(obj));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"alltoall", (PyCFunction)(void (*)(void))alltoall, METH_FASTCALL,
     "alltoall(plan, sendbuf, recvbuf): 1 done, 0 declined, < 0 left to the algorithm."},
    {"bind", (PyCFunction)(void (*)(void))bind, METH_FASTCALL,
     "bind(plan, sendbuf, recvbuf, datatype, sig): arm the plan for calls of this shape."},
    {"start", (PyCFunction)(void (*)(void))start, METH_FASTCALL,
     "start(plan, sendbuf, recvbuf) -> a request's start by the plan (papcoll_call.h)"},
    {"probe", (PyCFunction)(void (*)(void))probe, METH_FASTCALL,
     "probe(plan, sendbuf, recvbuf) -> whether the plan takes the call; nothing runs"},
    {"bindv", (PyCFunction)(void (*)(void))pc_bindv, METH_FASTCALL,
     "bindv(plan, sendbuf, recvbuf, sig): arm an Alltoallv plan for calls of this shape."},
    {"resume", (PyCFunction)(void (*)(void))resume, METH_FASTCALL,
     "resume(plan, timeout): run on the hierarchical call a plan left."},
    {"set_in_place", set_in_place, METH_O, "set_in_place(MPI.IN_PLACE)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native",
                                    "papcoll's native core (see native/papcoll_native.h).", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__native(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && (pc_add_entry(m) < 0 || pc_add_flags(m) < 0 || pc_add_core(m) < 0 ||
                      pc_add_xport(m) < 0 || pc_add_structs(m) < 0 ||
                      pc_add_window(m) < 0 || pc_add_agree(m) < 0))
        Py_CLEAR(m);
    return m;
}
