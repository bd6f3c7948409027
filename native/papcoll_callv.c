/* papcoll._native's Alltoallv plans: pc_enterv() and bindv(), the same idea as pc_enter() and
 * bind() (papcoll_call.c) for calls with a count per process. The shape rules of these calls
 * live here only: bindv() reads a checked call's specs and buffers, pc_enterv() compares. */
#include "papcoll_call.h"

#include <errno.h>
#include <string.h>

#include "papcoll_native.h"

/* The parts of an Alltoallv spec of a form a plan takes: [buf, counts], [buf, (counts,
 * displs)], [buf, counts, datatype], [buf, (counts, displs), datatype] or [buf, counts,
 * displs, datatype] (displs None: not given), as mpi4py reads them (a tuple after the
 * buffer is (counts, displs)). 0 for anything else. */
struct vspec {
    PyObject *buf, *counts, *displs, *datatype;
};

static int vspec_of(PyObject *spec, struct vspec *v)
{
    if (!PyList_CheckExact(spec) && !PyTuple_CheckExact(spec))
        return 0;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(spec);
    PyObject **item = PySequence_Fast_ITEMS(spec);
    if (n < 2 || n > 4)
        return 0;
    v->buf = item[0], v->counts = item[1];
    v->displs = n == 4 ? item[2] : NULL;
    v->datatype = n == 4 ? item[3] : n == 3 ? item[2] : NULL;
    if (n < 4 && PyTuple_CheckExact(v->counts)) {
        if (PyTuple_GET_SIZE(v->counts) != 2)
            return 0;
        v->displs = PyTuple_GET_ITEM(v->counts, 1);
        v->counts = PyTuple_GET_ITEM(v->counts, 0);
    }
    if (v->displs == Py_None)
        v->displs = NULL;
    return 1;
}

/* Whether seq is a list or tuple of exactly the n ints of values. */
static int same_ints(PyObject *seq, const int64_t *values, int64_t n)
{
    if ((!PyList_CheckExact(seq) && !PyTuple_CheckExact(seq)) ||
        PySequence_Fast_GET_SIZE(seq) != n)
        return 0;
    PyObject **item = PySequence_Fast_ITEMS(seq);
    for (int64_t i = 0; i < n; i++) {
        int overflow;
        if (!PyLong_CheckExact(item[i]) ||
            PyLong_AsLongLongAndOverflow(item[i], &overflow) != values[i] || overflow)
            return 0;
    }
    return 1;
}

/* Whether seq is a list or tuple of exactly the n objects of objects. */
static int same_objects(PyObject *seq, void *const *objects, int64_t n)
{
    if ((!PyList_CheckExact(seq) && !PyTuple_CheckExact(seq)) ||
        PySequence_Fast_GET_SIZE(seq) != n)
        return 0;
    PyObject **item = PySequence_Fast_ITEMS(seq);
    for (int64_t i = 0; i < n; i++)
        if (item[i] != objects[i])
            return 0;
    return 1;
}

/* The buffer of one side of an Alltoallv (Alltoallw) call, held in b, if the spec has the
 * shape sh (the same counts, displacements, datatype object (objects), buffer length and
 * format); 0 otherwise. */
static int vheld(const struct pc_vshape *sh, PyObject *spec, Py_buffer *b, int writable,
                 int64_t n)
{
    struct vspec v;
    if (!vspec_of(spec, &v) ||
        (sh->datatypes ? v.datatype == NULL || !same_objects(v.datatype, sh->datatypes, n)
                       : v.datatype != sh->datatype) ||
        (v.displs != NULL) != sh->displs_given || !same_ints(v.counts, sh->counts, n) ||
        (v.displs && !same_ints(v.displs, sh->displs, n)))
        return 0;
    if (PyObject_GetBuffer(v.buf, b, (writable ? PyBUF_WRITABLE : 0) | PyBUF_FORMAT |
                                         PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        return 0;
    }
    if (b->len == sh->nbytes &&
        (sh->datatype != NULL ||
         (b->itemsize == sh->itemsize && strcmp(pc_format_of(b), sh->format) == 0)))
        return 1;
    PyBuffer_Release(b);
    return 0;
}

/* Both buffers of an Alltoallv call of the plan's shape, not overlapping: 1, held; a plan
 * bound in place (no send shape) takes MPI.IN_PLACE as sendbuf, and then s is r. */
static int vhold(const struct pc_plan *p, PyObject *sendbuf, PyObject *recvbuf, Py_buffer *s,
                 Py_buffer *r, int *in_place)
{
    *in_place = p->vshape[0].counts == NULL;
    if (*in_place != pc_in_place(sendbuf) || !vheld(&p->vshape[1], recvbuf, r, 1, p->n))
        return 0;
    if (*in_place) {
        *s = *r;
        return 1;
    }
    if (!vheld(&p->vshape[0], sendbuf, s, 0, p->n)) {
        PyBuffer_Release(r);
        return 0;
    }
    const char *send = s->buf, *recv = r->buf;
    if (send + s->len <= recv || recv + r->len <= send || !s->len || !r->len)
        return 1;
    pc_release(s, r, 0);
    return 0;
}

/* Pack a staged side's blocks from the user's buffer user into its staging, or (unpack)
 * back: 0, or MPI's error code, set as the Python error. */
static int staged(const struct pc_vshape *sh, char *user, int64_t n, int unpack)
{
    for (int64_t q = 0; q < n; q++) {
        if (!sh->move_count[q])
            continue;
        int rc = pc_mpi_pack(user + (sh->move_at[q] - sh->bound), sh->move_count[q],
                             sh->move_type[q], sh->staging + sh->move_off[q],
                             (int)sh->move_len[q], unpack);
        if (rc) {
            PyErr_Format(PyExc_RuntimeError, "%s of the block of rank %lld failed: MPI error %d",
                         unpack ? "MPI_Unpack" : "MPI_Pack", (long long)q, rc);
            return rc;
        }
    }
    return 0;
}

/* The end of a PC_PLAN_VAR call whose engine returned rc: a staged receive side is unpacked
 * into the call's buffer once every block has landed. */
int pc_var_end(struct pc_plan *p, int rc)
{
    if (rc == 1 && p->unpack_to != NULL) {
        char *recv = p->unpack_to;
        p->unpack_to = NULL;
        if (staged(&p->vshape[1], recv, p->n, 1))
            return 0;
    }
    return rc;
}

/* pap_direct's Alltoallv/w: the engine's PC_VAR call over the user's buffers or a staged
 * side's staging, run for slice_ns; 1 done, 0 with a Python error (MPI_Pack's), or the
 * engine's rc for the call it left in calls[epoch % 2] (as run_engine; resume() ends it). */
static int run_var(struct pc_plan *p, char *send, char *recv, int64_t slice_ns)
{
    const struct pc_vshape *s = &p->vshape[0], *r = &p->vshape[1];
    if (s->staging != NULL && staged(s, send, p->n, 0))
        return 0;
    uint64_t epoch = ++*p->epoch;
    struct pc_xcall *c = p->calls[epoch % 2];
    size_t me = c->x->me;
    pc_xcall_start(c, epoch, ++*p->adverts, p->sig, c->code, -1);
    c->src = s->staging != NULL ? s->staging : send;
    c->out = r->staging != NULL ? r->staging : recv;
    p->unpack_to = r->staging != NULL ? recv : NULL;
    memcpy(c->out + c->out_off[me], c->src + c->src_off[me], c->len[me]);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pc_xcall_run(c, slice_ns);
    Py_END_ALLOW_THREADS
    return pc_var_end(p, rc);
}

/* A call of Alltoallv plan p, as pc_enter's (papcoll_call.h). */
PyObject *pc_enterv(struct pc_plan *p, PyObject *sendbuf, PyObject *recvbuf, enum pc_mode mode)
{
    Py_buffer s, r;
    int in_place;
    if (p == NULL || !p->armed || !vhold(p, sendbuf, recvbuf, &s, &r, &in_place))
        return PyErr_Occurred() ? NULL : PyLong_FromLong(0);
    int rc;
    if (mode == PC_PROBE) {
        rc = 1;
    } else if (p->kind == PC_PLAN_VAR) {
        rc = run_var(p, s.buf, r.buf, mode == PC_START ? 0 : p->slice_ns);
    } else if (mode == PC_START) {
        rc = PC_MPI_STARTS;
    } else {
        int w = p->kind == PC_PLAN_MPIW;
        Py_BEGIN_ALLOW_THREADS
        rc = (w ? pc_mpi_alltoallw : pc_mpi_alltoallv)(in_place ? NULL : s.buf, &p->vshape[0],
                                                        r.buf, &p->vshape[1], p->comm);
        Py_END_ALLOW_THREADS
        rc = rc ? -rc : 1;
    }
    pc_release(&s, &r, in_place);
    return PyErr_Occurred() ? NULL : PyLong_FromLong(rc);
}

/* bindv(plan, sendbuf, recvbuf, sig) -> whether the plan is now armed for Alltoallv calls of
 * the shape of this one, which papcoll has fully checked: its vshapes' counts, displacements,
 * datatype objects and MPI types are filled (from the same check), and the buffers' lengths
 * and formats are read here; the call's specs must then match them. */
PyObject *pc_bindv(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "bindv(plan, sendbuf, recvbuf, sig)");
        return NULL;
    }
    struct pc_plan *p = pc_plan_of(args[0]);
    uint64_t sig = PyLong_AsUnsignedLongLong(args[3]);
    if (p == NULL || PyErr_Occurred())
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_False);
    for (int side = p->vshape[0].counts == NULL; side < 2; side++) {   /* in place: recv */
        struct pc_vshape *sh = &p->vshape[side];
        struct vspec v;
        Py_buffer b;
        if (!vspec_of(args[1 + side], &v) ||
            PyObject_GetBuffer(v.buf, &b, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
            PyErr_Clear();
            return Py_NewRef(Py_False);
        }
        const char *format = pc_format_of(&b);
        sh->nbytes = b.len;
        sh->itemsize = b.itemsize;
        sh->bound = (intptr_t)b.buf;
        snprintf(sh->format, sizeof sh->format, "%s", strlen(format) < sizeof sh->format
                                                         ? format : "?long format");
        PyBuffer_Release(&b);
    }
    if (p->vshape[0].counts == NULL) /* in place: a staged send side packs the receive buffer */
        p->vshape[0].bound = p->vshape[1].bound;
    Py_buffer s, r;
    int in_place;
    p->armed = 1;
    if (!vhold(p, args[1], args[2], &s, &r, &in_place)) {
        p->armed = 0;
        return Py_NewRef(Py_False);
    }
    pc_release(&s, &r, in_place);
    p->sig = sig;
    return Py_NewRef(Py_True);
}
