/* papcoll._native as a Python module: the one entry point that takes Python objects.
 *
 * Everything else in the native core is plain C called through ctypes. A small
 * alltoall inside a node takes about a microsecond of real work, and the Python
 * and ctypes steps around it (argument parsing, buffer addresses, argument
 * conversion) took several times that; MPI libraries called from mpi4py pay
 * none of it. So a call whose shape papcoll has already validated goes through
 * lane_alltoall: it takes the user's buffers, re-checks that they still have
 * that shape, and runs the whole exchange (pc_exchange_blocks) with the GIL
 * released. Anything it does not recognise it declines, untouched, and the
 * caller takes the full Python path, which also produces every error message.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <string.h>

#include "papcoll_native.h"
#include "papcoll_xport.h"

static PyObject *in_place_marker; /* mpi4py's MPI.IN_PLACE, given once by set_in_place */

/* A buffer C-contiguous with the armed length and, for plain buffers, the armed format and
 * item size (a [buf, datatype] spec makes the datatype, not the buffer's format, say what the
 * bytes are): exactly what the full parse checked when it armed the lane. */
static int shape_matches(const struct pc_lane *lane, const Py_buffer *b)
{
    return b->len == lane->nbytes &&
           (lane->datatype != NULL ||
            (b->itemsize == lane->itemsize &&
             strcmp(b->format ? b->format : "B", lane->format) == 0));
}

/* The object holding the data of a buffer argument: the argument itself for a lane armed for
 * plain buffers, the buffer of a [buf, datatype] list or tuple naming the lane's datatype
 * otherwise; NULL (decline) for anything else. */
static PyObject *data_of(const struct pc_lane *lane, PyObject *spec)
{
    if (lane->datatype == NULL)
        return spec;
    if ((PyList_CheckExact(spec) || PyTuple_CheckExact(spec)) &&
        PySequence_Fast_GET_SIZE(spec) == 2 &&
        PySequence_Fast_GET_ITEM(spec, 1) == (PyObject *)lane->datatype)
        return PySequence_Fast_GET_ITEM(spec, 0);
    return NULL;
}

/* One piece of the call: an epoch of pc_exchange_blocks, resumed slice by slice (slice_ns, the
 * longest wait without the GIL, set by papcoll) with the GIL taken in between for signals. 0 when every process was served, -ETIMEDOUT at the
 * deadline, -EPROTO when a process's call differs (x->failed), -1 with a Python error set. */
static int exchange_piece(const struct pc_exchange *x, const char *src, char *dst, size_t block,
                          size_t len, uint64_t epoch, uint64_t sig, size_t start,
                          int64_t deadline, int64_t slice_ns)
{
    size_t left = x->n;
    for (;;) {
        int64_t slice = deadline - pc_now_ns();
        slice = slice < 0 ? 0 : slice > slice_ns ? slice_ns : slice;
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = pc_exchange_blocks(x, src, dst, block, len, epoch, sig, start, slice);
        Py_END_ALLOW_THREADS
        if (rc > 0) {
            left -= (size_t)rc;
            if (left == 0)
                return 0;
            start = (x->served[rc - 1] + 1) % x->n;
        } else if (rc == -EPROTO) {
            return rc;
        } else if (rc != -ETIMEDOUT) { /* the plan was checked when it was built */
            PyErr_Format(PyExc_SystemError, "papcoll lane: exchange failed (%d)", rc);
            return -1;
        } else if (pc_now_ns() >= deadline) {
            return -ETIMEDOUT;
        }
        if (PyErr_CheckSignals() < 0)
            return -1;
    }
}

/* A call's buffers (args: lane, sendbuf, recvbuf), every lane's shape rules in one place: 1
 * when the lane (*lane, a struct that starts with its struct pc_lane) is armed and the buffers
 * have its shape -- r held, and s too unless sendbuf is MPI.IN_PLACE (*in_place; then s is r)
 * --; 0 to decline, nothing held; -1 with a Python error set. */
static int take(PyObject *const *args, Py_ssize_t nargs, const char *usage, void **lane_out,
                Py_buffer *s, Py_buffer *r, int *in_place)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, usage);
        return -1;
    }
    const struct pc_lane *lane = PyLong_AsVoidPtr(args[0]);
    if (lane == NULL)
        return PyErr_Occurred() ? -1 : 0;
    if (!lane->armed)
        return 0;
    *in_place = in_place_marker != NULL && args[1] == in_place_marker;
    PyObject *send_data = *in_place ? NULL : data_of(lane, args[1]);
    PyObject *recv_data = data_of(lane, args[2]);
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
    if (shape_matches(lane, r) && (*in_place || (shape_matches(lane, s) &&
                                                 (send + s->len <= recv || recv + r->len <= send)))) {
        *lane_out = (void *)lane;
        return 1;
    }
    if (!*in_place)
        PyBuffer_Release(s);
    PyBuffer_Release(r);
    return 0;
}

/* What an entry point returns after take() held the buffers: they are released. */
static PyObject *done(Py_buffer *s, Py_buffer *r, int in_place, long result)
{
    if (!in_place)
        PyBuffer_Release(s);
    PyBuffer_Release(r);
    return PyErr_Occurred() ? NULL : PyLong_FromLong(result);
}

/* lane_alltoall(lane, sendbuf, recvbuf) -> 1 done, 0 declined (nothing touched),
 * -ETIMEDOUT (the lane's timeout passed; x->pending marks the missing processes) or -EPROTO
 * (a process's call differs: x->failed).
 * sendbuf MPI.IN_PLACE: the blocks go out of recvbuf and come back into it. The buffers are
 * plain, or [buf, datatype] specs, as the lane was armed. */
static PyObject *lane_alltoall(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    struct pc_lane *lane;
    (void)module;
    Py_buffer s, r;
    int in_place, taken = take(args, nargs, "lane_alltoall(lane, sendbuf, recvbuf)",
                               (void **)&lane, &s, &r, &in_place);
    if (taken <= 0)
        return taken < 0 ? NULL : PyLong_FromLong(0);
    const char *send = s.buf;
    const struct pc_exchange *x = lane->x;
    size_t block = (size_t)lane->nbytes / x->n;
    int64_t deadline = pc_now_ns() + lane->timeout_ns;
    int rc = 0;
    size_t offset = 0;
    do /* at least one piece: a call of empty blocks still meets its peers */
        rc = exchange_piece(x, send + offset, (char *)r.buf + offset, block,
                            block - offset < x->slot ? block - offset : x->slot,
                            ++*lane->epoch, lane->sig, lane->start, deadline,
                            lane->slice_ns);
    while (rc == 0 && (offset += x->slot) < block);
    return done(&s, &r, in_place, rc == 0 ? 1 : rc);
}

/* xlane_alltoall(xlane, sendbuf, recvbuf): a copy-based PAP Direct call of the armed shape
 * (struct pc_xlane, papcoll_xport.h) run by the one-sided engine: 1 done, 0 declined (nothing
 * touched), or the engine's rc for the call left in calls[epoch % 2]: -ETIMEDOUT after the
 * lane's slice (the caller resumes it), -EPROTO, or a transport failure. With MPI.IN_PLACE
 * the blocks go out of the lane's spare copy of recvbuf: peers' blocks land in recvbuf while
 * mine for them may still be read. */
static PyObject *xlane_alltoall(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    struct pc_xlane *xl;
    (void)module;
    Py_buffer s, r;
    int in_place, taken = take(args, nargs, "xlane_alltoall(xlane, sendbuf, recvbuf)",
                               (void **)&xl, &s, &r, &in_place);
    if (taken <= 0)
        return taken < 0 ? NULL : PyLong_FromLong(0);
    const struct pc_lane *lane = &xl->lane;
    const char *send = s.buf;
    char *recv = r.buf;
    uint64_t epoch = ++*lane->epoch;
    struct pc_xcall *c = xl->calls[epoch % 2];
    size_t me = c->x->me, block = (size_t)lane->nbytes / c->x->n;
    pc_xcall_start(c, epoch, *xl->adverts, c->sig, c->code, (int64_t)block);
    c->out = recv;
    if (in_place) {
        memcpy(xl->spare, recv, (size_t)lane->nbytes);
        c->src = xl->spare;
    } else {
        c->src = send;
        memcpy(recv + me * block, send + me * block, block);
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pc_xcall_run(c, lane->slice_ns);
    Py_END_ALLOW_THREADS
    return done(&s, &r, in_place, rc);
}

/* mlane_alltoall(mlane, sendbuf, recvbuf): a call of the armed shape handed straight to the
 * MPI library's MPI_Alltoall (struct pc_mlane, papcoll_xport.h), the GIL released as mpi4py
 * does: 1 done, 0 declined (nothing touched), or -(the MPI error code). */
static PyObject *mlane_alltoall(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    struct pc_mlane *ml;
    (void)module;
    Py_buffer s, r;
    int in_place, taken = take(args, nargs, "mlane_alltoall(mlane, sendbuf, recvbuf)",
                               (void **)&ml, &s, &r, &in_place);
    if (taken <= 0)
        return taken < 0 ? NULL : PyLong_FromLong(0);
    int count = (int)(ml->lane.nbytes / ml->n), rc;
    const void *from = in_place ? NULL : s.buf;
    Py_BEGIN_ALLOW_THREADS
    rc = pc_mpi_alltoall(from, count, r.buf, ml->comm);
    Py_END_ALLOW_THREADS
    return done(&s, &r, in_place, rc ? -(long)rc : 1);
}

/* set_in_place(obj): the object that stands for MPI_IN_PLACE as sendbuf. */
static PyObject *set_in_place(PyObject *module, PyObject *obj)
{
    (void)module;
    Py_XSETREF(in_place_marker, Py_NewRef(obj));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"lane_alltoall", (PyCFunction)(void (*)(void))lane_alltoall, METH_FASTCALL,
     "lane_alltoall(lane, sendbuf, recvbuf): 1 done, 0 declined, -ETIMEDOUT, -EPROTO."},
    {"xlane_alltoall", (PyCFunction)(void (*)(void))xlane_alltoall, METH_FASTCALL,
     "xlane_alltoall(xlane, sendbuf, recvbuf): 1 done, 0 declined, or the engine's rc."},
    {"mlane_alltoall", (PyCFunction)(void (*)(void))mlane_alltoall, METH_FASTCALL,
     "mlane_alltoall(mlane, sendbuf, recvbuf): 1 done, 0 declined, -(MPI error)."},
    {"set_in_place", set_in_place, METH_O, "set_in_place(MPI.IN_PLACE)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native",
                                    "papcoll's native core (see native/papcoll_native.h).", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }
