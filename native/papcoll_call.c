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

/* A call of Alltoall plan p (see papcoll_call.h), run by papcoll_run.c. */
PyObject *pc_enter(struct pc_plan *p, PyObject *sendbuf, PyObject *recvbuf, enum pc_mode mode)
{
    Py_buffer s, r;
    int in_place;
    if (p == NULL || !p->armed || !hold(p->datatype, sendbuf, recvbuf, &s, &r, &in_place))
        return PyErr_Occurred() ? NULL : PyLong_FromLong(0);
    if (!shaped(p, &r) || (!in_place && !shaped(p, &s)) ||
        (pc_zero_copy(p) && (in_place || (uintptr_t)r.buf != p->recv_at ||
                             (uintptr_t)s.buf != p->send_at))) {   /* not what it registered */
        pc_release(&s, &r, in_place);
        return PyLong_FromLong(0);
    }
    int rc = mode == PC_PROBE ? 1 : pc_run(p, s.buf, r.buf, in_place, mode);
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
 * or to raise (papcoll_run.c's run_* say which values). plan: a Plan (papcoll_pytypes.c), or
 * None. An Alltoallv plan's call likewise. */
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
