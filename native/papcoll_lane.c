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

#define SLICE_NS 100000000 /* longest wait without the GIL: Ctrl-C gets through */

/* Both buffers C-contiguous with the armed format, item size and length, recvbuf writable,
 * and not overlapping: exactly what the full parse checked when it armed the lane. */
static int shape_matches(const struct pc_lane *lane, const Py_buffer *s, const Py_buffer *r)
{
    const char *sf = s->format ? s->format : "B", *rf = r->format ? r->format : "B";
    const char *send = s->buf, *recv = r->buf;
    return r->len == lane->nbytes && s->len == lane->nbytes && r->itemsize == lane->itemsize &&
           s->itemsize == lane->itemsize && strcmp(rf, lane->format) == 0 &&
           strcmp(sf, lane->format) == 0 &&
           (send + s->len <= recv || recv + r->len <= send);
}

/* lane_alltoall(lane, sendbuf, recvbuf) -> 1 done, 0 declined (nothing touched), or
 * -ETIMEDOUT (the lane's timeout passed; pending marks the missing peers). */
static PyObject *lane_alltoall(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "lane_alltoall(lane, sendbuf, recvbuf)");
        return NULL;
    }
    struct pc_lane *lane = PyLong_AsVoidPtr(args[0]);
    if (lane == NULL)
        return PyErr_Occurred() ? NULL : PyLong_FromLong(0);
    if (!lane->armed)
        return PyLong_FromLong(0);
    Py_buffer s, r;
    if (PyObject_GetBuffer(args[2], &r, PyBUF_WRITABLE | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        return PyLong_FromLong(0);
    }
    if (PyObject_GetBuffer(args[1], &s, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        PyBuffer_Release(&r);
        return PyLong_FromLong(0);
    }
    long result = 0;
    if (shape_matches(lane, &s, &r)) {
        uint64_t epoch = ++lane->epoch;
        size_t left = lane->x.n, start = lane->start, block = lane->block;
        int64_t deadline = pc_now_ns() + lane->timeout_ns;
        for (;;) {
            int64_t slice = deadline - pc_now_ns();
            slice = slice < 0 ? 0 : slice > SLICE_NS ? SLICE_NS : slice;
            int rc;
            Py_BEGIN_ALLOW_THREADS
            rc = pc_exchange_blocks(&lane->x, s.buf, r.buf, block, block, epoch, start, slice);
            Py_END_ALLOW_THREADS
            if (rc > 0) {
                left -= (size_t)rc;
                start = (lane->x.served[rc - 1] + 1) % lane->x.n;
                if (left == 0) {
                    result = 1;
                    break;
                }
            } else if (rc != -ETIMEDOUT) { /* the armed plan was checked when it was built */
                PyErr_Format(PyExc_SystemError, "papcoll lane: exchange failed (%d)", rc);
                break;
            } else if (pc_now_ns() >= deadline) {
                result = -ETIMEDOUT;
                break;
            }
            if (PyErr_CheckSignals() < 0)
                break;
        }
    }
    PyBuffer_Release(&s);
    PyBuffer_Release(&r);
    return PyErr_Occurred() ? NULL : PyLong_FromLong(result);
}

static PyMethodDef methods[] = {
    {"lane_alltoall", (PyCFunction)(void (*)(void))lane_alltoall, METH_FASTCALL,
     "lane_alltoall(lane, sendbuf, recvbuf): 1 done, 0 declined, -ETIMEDOUT."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native",
                                    "papcoll's native core (see native/papcoll_native.h).", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&module); }
