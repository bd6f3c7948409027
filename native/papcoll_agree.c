/* The end of an adaptive site's window (papcoll/adaptive.py) in C: its measure, the agreement
 * on it across the site's ranks, and the choice.
 *
 * Every rank ends a site's window in the same call, and processes that share a core end it
 * together, so its work is paid about twice over and holds up every rank of the next call. In
 * Python it took 50-60 us a window on 4 processes over 2 cores -- the measure's sorts, the
 * arrays, the reduction's start and test --, 3-4 us a call at K = 16; here, 9-17 us, and
 * 4.6-9.3 since the choice is looked up here rather than asked of the policy's chooser in
 * Python, which took 6.5-7.5 us of it, cold (docs/adaptive.md). The Entry ends a window as
 * the call that fills it returns (pc_window_end), without a return to Python between.
 *
 * The window being filled is a Window (papcoll_window.c, its owner). The rest of the site
 * (adaptive.Site) is attributes, which this file reads and writes by name: ``window``,
 * ``send`` (the reduction's input: the window's times and their negatives), ``out`` (its
 * result), ``reduce`` (the site's persistent MPI_Allreduce_init request over those two, made
 * once: a start costs less than a nonblocking reduction's set-up each window), ``pending``
 * (``reduce`` while in flight, else None), ``base``, ``skew``, ``key``, and ``bounds`` and
 * ``keys``: the site's choice by skew as steps, which the policy works out once for the site
 * (policy.by_skew). */
#include "papcoll_call.h"

#include <mpi.h>
#include <mpi4py/mpi4py.h>
#include <stdlib.h>
#include <string.h>

static PyObject *s_window, *s_send, *s_out, *s_reduce, *s_pending, *s_base, *s_skew, *s_key,
    *s_bounds, *s_keys;

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* adaptive.window's medians: sorted()[k // 2] of each call's spread (longest less shortest)
 * and of its shortest. ``shortest`` is given negated where ``negated`` (the reduction's). */
static int medians(const double *longest, const double *shortest, int negated, Py_ssize_t k,
                   double *spread, double *base)
{
    double *v = PyMem_Malloc(2 * (size_t)k * sizeof *v);
    if (v == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        v[k + i] = negated ? -shortest[i] : shortest[i];
        v[i] = longest[i] - v[k + i];
    }
    qsort(v, (size_t)k, sizeof *v, by_value);
    qsort(v + k, (size_t)k, sizeof *v, by_value);
    *spread = v[k / 2];
    *base = v[k + k / 2];
    PyMem_Free(v);
    return 0;
}

/* A buffer of doubles, writable if asked: its count, or -1 with a Python error. */
static Py_ssize_t doubles(PyObject *obj, int writable, Py_buffer *b)
{
    if (PyObject_GetBuffer(obj, b, (writable ? PyBUF_WRITABLE : 0) | PyBUF_FORMAT |
                                       PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (strcmp(b->format, "d") != 0 || b->itemsize != sizeof(double)) {
        PyBuffer_Release(b);
        PyErr_SetString(PyExc_TypeError, "papcoll adaptive window: expected float64 buffers");
        return -1;
    }
    return b->len / (Py_ssize_t)sizeof(double);
}

/* window(longest, shortest) -> (median spread, median shortest): adaptive.window. */
static PyObject *window(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "window() takes 2 arguments (%zd given)", nargs);
    Py_buffer l, s;
    Py_ssize_t k = doubles(args[0], 0, &l);
    if (k < 0)
        return NULL;
    if (doubles(args[1], 0, &s) != k || k == 0) {
        if (!PyErr_Occurred()) {
            PyBuffer_Release(&s);
            PyErr_SetString(PyExc_ValueError, "window(): as many longest as shortest, not none");
        }
        PyBuffer_Release(&l);
        return NULL;
    }
    double spread, base;
    int rc = medians(l.buf, s.buf, 0, k, &spread, &base);
    PyBuffer_Release(&l);
    PyBuffer_Release(&s);
    return rc < 0 ? NULL : Py_BuildValue("dd", spread, base);
}

static int set_float(PyObject *site, PyObject *name, double value)
{
    PyObject *v = PyFloat_FromDouble(value);
    int rc = v == NULL ? -1 : PyObject_SetAttr(site, name, v);
    Py_XDECREF(v);
    return rc;
}

/* The key of ``skew`` among the site's steps: ``keys[i]`` for the last ``bounds[i]`` not
 * above it (bounds ascend from 0, policy.by_skew's; a skew is never negative), borrowed; NULL
 * with a Python error. */
static PyObject *step_key(PyObject *bounds, PyObject *keys, double skew)
{
    Py_ssize_t n = PyTuple_Check(bounds) ? PyTuple_GET_SIZE(bounds) : -1;
    if (n < 1 || !PyTuple_Check(keys) || PyTuple_GET_SIZE(keys) != n) {
        PyErr_SetString(PyExc_TypeError, "papcoll adaptive window: a site's bounds and keys "
                                         "are two tuples of one length");
        return NULL;
    }
    Py_ssize_t lo = 0, hi = n; /* bounds[lo] <= skew < bounds[hi] */
    while (hi - lo > 1) {
        Py_ssize_t mid = (lo + hi) / 2;
        double b = PyFloat_AsDouble(PyTuple_GET_ITEM(bounds, mid));
        if (b == -1.0 && PyErr_Occurred())
            return NULL;
        if (b <= skew)
            lo = mid;
        else
            hi = mid;
    }
    return PyTuple_GET_ITEM(keys, lo);
}

/* The skew of a window from its reduction (each call's longest time, then each call's
 * shortest negated), against the site's quickest window so far (``base``), and the key the
 * site's steps give for it: 0, or -1 with a Python error. */
static int learn(PyObject *site, PyObject *reduced)
{
    Py_buffer r;
    Py_ssize_t n = doubles(reduced, 0, &r);
    if (n < 0)
        return -1;
    double spread, mine;
    int rc = -1;
    if (n < 2 || n % 2)
        PyErr_SetString(PyExc_ValueError, "papcoll adaptive window: a reduction of 2 K values");
    else
        rc = medians(r.buf, (double *)r.buf + n / 2, 1, n / 2, &spread, &mine);
    PyBuffer_Release(&r);
    if (rc < 0)
        return -1;
    PyObject *was = PyObject_GetAttr(site, s_base);
    if (was == NULL)
        return -1;
    double base = PyFloat_AsDouble(was);
    Py_DECREF(was);
    if (base == -1.0 && PyErr_Occurred())
        return -1;
    base = mine < base ? mine : base;
    double skew = base > 0 ? spread / base : 0.0;
    PyObject *bounds = PyObject_GetAttr(site, s_bounds);
    PyObject *keys = bounds == NULL ? NULL : PyObject_GetAttr(site, s_keys);
    PyObject *key = keys == NULL ? NULL : step_key(bounds, keys, skew);
    rc = key != NULL && set_float(site, s_base, base) == 0 && set_float(site, s_skew, skew) == 0
             ? PyObject_SetAttr(site, s_key, key)
             : -1;
    Py_XDECREF(bounds);
    Py_XDECREF(keys);
    return rc;
}

/* window_learn(site, reduced): learn() for Python (tests). */
static PyObject *window_learn(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "window_learn() takes 2 arguments (%zd given)",
                            nargs);
    return learn(args[0], args[1]) < 0 ? NULL : Py_NewRef(Py_None);
}

static int mpi_failed(int rc, const char *what)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        len = 0;
    text[len] = '\0';
    PyErr_Format(PyExc_RuntimeError, "papcoll adaptive auto: %s failed (MPI error %d: %s)",
                 what, rc, text);
    return -1;
}

/* The reduction in flight, if any: 1 none or complete (``pending`` cleared, the site has
 * learnt from it), 0 still in flight, -1 with a Python error. */
static int settled(PyObject *site)
{
    PyObject *pending = PyObject_GetAttr(site, s_pending);
    if (pending == NULL)
        return -1;
    if (pending == Py_None) {
        Py_DECREF(pending);
        return 1;
    }
    MPI_Request *request = PyMPIRequest_Get(pending);
    int done = 0, rc = request == NULL ? -1 : MPI_Test(request, &done, MPI_STATUS_IGNORE);
    Py_DECREF(pending);
    if (rc != MPI_SUCCESS)
        return rc == -1 ? -1 : mpi_failed(rc, "MPI_Test of the last window's reduction");
    if (!done)
        return 0;
    PyObject *out = PyObject_GetAttr(site, s_out);
    rc = out == NULL ? -1 : learn(site, out);
    Py_XDECREF(out);
    return rc < 0 || PyObject_SetAttr(site, s_pending, Py_None) < 0 ? -1 : 1;
}

/* Start the window's reduction (MAX of each time and of its negative: every call's longest and
 * shortest over the ranks, exactly): the Window's times and their negatives into ``send``,
 * then the site's persistent reduction started, and the Window opened again: the next window
 * fills it meanwhile. */
static int start(PyObject *site)
{
    PyObject *window = PyObject_GetAttr(site, s_window), *send = NULL, *reduce = NULL;
    Py_buffer d = {0};
    int rc = -1, held = 0;
    if (window == NULL || (send = PyObject_GetAttr(site, s_send)) == NULL ||
        (reduce = PyObject_GetAttr(site, s_reduce)) == NULL)
        goto done;
    Py_ssize_t n = doubles(send, 1, &d);
    if (n < 0)
        goto done;
    held = 1;
    if (pc_window_send(window, d.buf, n) < 0)
        goto done;
    MPI_Request *request = PyMPIRequest_Get(reduce);
    if (request == NULL)
        goto done;
    int mpi = MPI_Start(request);
    if (mpi != MPI_SUCCESS) {
        mpi_failed(mpi, "MPI_Start of a window's reduction");
        goto done;
    }
    rc = PyObject_SetAttr(site, s_pending, reduce);
    if (rc == 0)
        pc_window_reopen(window); /* in flight; the next window from its first call */
done:
    if (held)
        PyBuffer_Release(&d);
    Py_XDECREF(window);
    Py_XDECREF(send);
    Py_XDECREF(reduce);
    return rc;
}

/* The end of an adaptive site's window: 1 the last window's reduction had completed (the site
 * has learnt from it and chosen) and this window's has started; 0 that reduction is still in
 * flight, nothing done; -1 with a Python error. The Entry ends a window here as its last call
 * returns (Entry.timed); Python where it must wait for the reduction, bounded (window_end). */
int pc_window_end(PyObject *site)
{
    int got = settled(site);
    return got <= 0 ? got : start(site) < 0 ? -1 : 1;
}

/* window_end(site) -> pc_window_end()'s True or False. */
static PyObject *window_end(PyObject *module, PyObject *site)
{
    (void)module;
    int ended = pc_window_end(site);
    return ended < 0 ? NULL : PyBool_FromLong(ended);
}

#define FASTCALL(f) (PyCFunction)(void (*)(void))(f), METH_FASTCALL

static PyMethodDef window_methods[] = {
    {"window", FASTCALL(window),
     "window(longest, shortest) -> (median spread, median shortest): float64 buffers"},
    {"window_learn", FASTCALL(window_learn),
     "window_learn(site, reduced): the site's skew and key from a window's reduction"},
    {"window_end", window_end, METH_O,
     "window_end(site) -> True (learnt, next reduction started) or False (still in flight)"},
    {NULL, NULL, 0, NULL},
};

int pc_add_agree(PyObject *module)
{
    static const char *names[] = {"window", "send", "out", "reduce", "pending", "base",
                                  "skew", "key", "bounds", "keys"};
    PyObject **slots[] = {&s_window, &s_send, &s_out, &s_reduce, &s_pending, &s_base,
                          &s_skew, &s_key, &s_bounds, &s_keys};
    if (import_mpi4py() < 0) /* the C API's table is per C file */
        return -1;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if ((*slots[i] = PyUnicode_InternFromString(names[i])) == NULL)
            return -1;
    return PyModule_AddFunctions(module, window_methods);
}
