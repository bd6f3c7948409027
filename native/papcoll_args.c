/* The argument decoders papcoll._native's functions share (declared in papcoll_call.h): the
 * number of arguments and their names, a contiguous buffer, a uint64, a timeout. Each says
 * what was wrong in a Python error that names the argument, so every binding reports a bad
 * argument alike; timeouts have one rule (finite seconds >= 0), since every wait is bounded.
 */
#include "papcoll_call.h"

#include <math.h>

int pc_nargs(const char *name, Py_ssize_t nargs, Py_ssize_t lo, Py_ssize_t hi)
{
    if (lo <= nargs && nargs <= hi)
        return 1;
    PyErr_Format(PyExc_TypeError, "%s takes %zd to %zd arguments (%zd given)", name, lo, hi,
                 nargs);
    return 0;
}

int pc_fast_args(const char *name, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                 const char *const *names, Py_ssize_t lo, Py_ssize_t hi, PyObject **out)
{
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs > hi)
        return pc_nargs(name, nargs, lo, hi) - 1;
    for (Py_ssize_t i = 0; i < hi; i++)
        out[i] = i < nargs ? args[i] : NULL;
    for (Py_ssize_t k = 0; k < nkw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        Py_ssize_t i = hi;
        while (--i >= 0 && PyUnicode_CompareWithASCIIString(key, names[i]) != 0)
            ;
        if (i < 0 || out[i] != NULL) {
            PyErr_Format(PyExc_TypeError, "%s() got %s argument '%U'", name,
                         i < 0 ? "an unexpected keyword" : "multiple values for", key);
            return -1;
        }
        out[i] = args[nargs + k];
    }
    for (Py_ssize_t i = 0; i < lo; i++)
        if (out[i] == NULL) {
            PyErr_Format(PyExc_TypeError, "%s() missing argument '%s'", name, names[i]);
            return -1;
        }
    return 0;
}

int pc_local_arg(PyObject *obj, int writable, const char *what, Py_buffer *b)
{
    if (PyObject_GetBuffer(obj, b, PyBUF_C_CONTIGUOUS) < 0) {
        PyErr_Clear();
        if (!PyObject_CheckBuffer(obj))
            PyErr_Format(PyExc_TypeError, "%s must be a numpy array or a contiguous buffer, "
                         "not %s", what, Py_TYPE(obj)->tp_name);
        else
            PyErr_Format(PyExc_ValueError, "%s must be C-contiguous", what);
        return -1;
    }
    if (!writable || !b->readonly)
        return 0;
    PyBuffer_Release(b);
    PyErr_Format(PyExc_ValueError, "%s is read-only", what);
    return -1;
}

int pc_u64_arg(PyObject *value, const char *what, uint64_t *out)
{
    PyObject *i = PyNumber_Index(value);
    if (i == NULL)
        return -1;
    *out = PyLong_AsUnsignedLongLong(i);
    if (*out == (uint64_t)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
            Py_DECREF(i);
            return -1;
        }
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s must fit in 64 unsigned bits, not %S", what, i);
        Py_DECREF(i);
        return -1;
    }
    Py_DECREF(i);
    return 0;
}

int pc_timeout_arg(PyObject *value, int64_t *out)
{
    double t = PyFloat_AsDouble(value);
    if (t == -1.0 && PyErr_Occurred())
        return -1;
    if (!isfinite(t) || t < 0 || t > 9e9) {
        PyErr_Format(PyExc_ValueError,
                     "timeout must be finite seconds >= 0 (every wait is bounded), not %R", value);
        return -1;
    }
    *out = (int64_t)(t * 1e9);
    return 0;
}
