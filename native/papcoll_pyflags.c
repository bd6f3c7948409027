/* papcoll._native.Flags: a set of shared 64-bit flags and the bounded waits on them, as a
 * Python object that owns its view of the flags' memory.
 *
 * The object holds the array's buffer (Py_buffer) from construction to collection, so the
 * memory it reads cannot go while it lives: a segment's mmap refuses to close while a view is
 * exported. Its arguments are decoded here, once, and every wait runs with the GIL released.
 * papcoll/native/flags.py adds what builds numpy results on top (wait_ready_ge's view).
 */
#include "papcoll_pystruct.h"

#include <structmember.h>
#include <errno.h>
#include <string.h>

#include "papcoll_native.h"

typedef struct {
    PyObject_HEAD
    PyObject *array;
    Py_buffer view; /* held while this lives (view.obj != NULL) */
    char *base;
    Py_ssize_t stride, size;
} Flags;

static PyTypeObject flags_type;

/* A uint64 of native order, as the buffer protocol spells it (numpy says "L" on LP64). */
static int is_u64(const Py_buffer *b)
{
    const char *f = b->format ? b->format : "B";
    if (*f == '@' || *f == '=' || (*f == '<' && PY_LITTLE_ENDIAN))
        f++;
    return b->itemsize == 8 && (strcmp(f, "Q") == 0 || (strcmp(f, "L") == 0 && sizeof(long) == 8));
}

static int flags_init(Flags *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"array", NULL};
    PyObject *array;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O:Flags", names, &array))
        return -1;
    if (self->view.obj != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Flags are set once");
        return -1;
    }
    if (!PyObject_CheckBuffer(array)) {
        PyErr_Format(PyExc_TypeError, "flags must be a numpy uint64 array, not %s",
                     Py_TYPE(array)->tp_name);
        return -1;
    }
    Py_buffer v;
    if (PyObject_GetBuffer(array, &v, PyBUF_RECORDS_RO) < 0)
        return -1;
    Py_ssize_t stride = v.ndim == 1 && v.shape[0] > 1 ? v.strides[0] : 8;
    if (!is_u64(&v))
        PyErr_Format(PyExc_TypeError, "flags must have dtype uint64 (native order), not "
                     "format '%s'", v.format ? v.format : "B");
    else if (v.ndim != 1)
        PyErr_Format(PyExc_ValueError, "flags must be one-dimensional (got %d dimensions)",
                     v.ndim);
    else if (stride <= 0 || stride % 8)
        PyErr_SetString(PyExc_ValueError,
                        "flags need a positive stride that is a multiple of 8 bytes");
    else if ((uintptr_t)v.buf % 8)
        PyErr_SetString(PyExc_ValueError, "flags must be 8-byte aligned");
    if (PyErr_Occurred()) {
        PyBuffer_Release(&v);
        return -1;
    }
    self->view = v;
    self->base = v.buf;
    self->stride = stride;
    self->size = v.shape[0];
    Py_INCREF(array);
    self->array = array;
    return 0;
}

static void flags_dealloc(Flags *self)
{
    if (self->view.obj != NULL)
        PyBuffer_Release(&self->view);
    Py_XDECREF(self->array);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int ready(const Flags *self)
{
    if (self->view.obj != NULL)
        return 1;
    PyErr_SetString(PyExc_RuntimeError, "Flags were not initialised");
    return 0;
}

int pc_flags_of(PyObject *obj, const char *what, volatile uint64_t **base, size_t *stride,
                size_t *size)
{
    if (!PyObject_TypeCheck(obj, &flags_type)) {
        if (what != NULL)
            PyErr_Format(PyExc_TypeError, "%s must be a papcoll.native.Flags, not %s", what,
                         Py_TYPE(obj)->tp_name);
        return -1;
    }
    Flags *f = (Flags *)obj;
    if (!ready(f))
        return -1;
    *base = (volatile uint64_t *)f->base;
    *stride = (size_t)f->stride, *size = (size_t)f->size;
    return 0;
}

/* ---- argument decoding (the messages flags.py's callers test) ------------------- */

static volatile uint64_t *flag_at(const Flags *self, PyObject *index)
{
    Py_ssize_t i = PyNumber_AsSsize_t(index, PyExc_IndexError);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    if (i < 0 || i >= self->size) {
        PyErr_Format(PyExc_IndexError, "flag index %zd out of range for %zd flags", i,
                     self->size);
        return NULL;
    }
    return (volatile uint64_t *)(self->base + i * self->stride);
}

/* The pending mask of a wait: held in *m (release it), its entry count in m->len. */
static int pending_arg(const Flags *self, PyObject *pending, PyObject *start, Py_buffer *m,
                       size_t *s)
{
    if (PyObject_GetBuffer(pending, m, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        PyErr_Clear();
        PyErr_SetString(PyExc_TypeError, "pending must be a numpy bool or uint8 array");
        return -1;
    }
    const char *f = m->format ? m->format : "B";
    Py_ssize_t i = 0;
    if (m->itemsize != 1 || (strcmp(f, "?") && strcmp(f, "B"))) {
        PyErr_SetString(PyExc_TypeError, "pending must be a numpy bool or uint8 array");
    } else if (m->ndim != 1) {
        PyErr_SetString(PyExc_ValueError, "pending must be a one-dimensional C-contiguous array");
    } else if (m->len > self->size) {
        PyErr_Format(PyExc_ValueError, "pending has %zd entries for %zd flags", m->len,
                     self->size);
    } else if (start != NULL && (i = PyNumber_AsSsize_t(start, PyExc_IndexError)) == -1 &&
               PyErr_Occurred()) {
        /* start is no integer: its error stands */
    } else if (m->len && (i < 0 || i >= m->len)) {
        PyErr_Format(PyExc_IndexError, "start %zd out of range for a pending mask of %zd "
                     "entries", i, m->len);
    } else {
        *s = (size_t)i;
        return 0;
    }
    PyBuffer_Release(m);
    return -1;
}

/* A wait's rc as its result: rc >= 0, -1 for a timeout, else NULL with the error. */
static PyObject *waited(int rc)
{
    if (rc >= 0 || rc == -ETIMEDOUT)
        return PyLong_FromLong(rc >= 0 ? rc : -1);
    if (rc == -ENOENT)
        PyErr_SetString(PyExc_ValueError, "no flag is pending: waiting would only time out");
    else
        PyErr_Format(PyExc_ValueError, "native wait rejected its arguments (%s)",
                     strerror(-rc));
    return NULL;
}

/* ---- methods ------------------------------------------------------------------- */

static PyObject *load(Flags *self, PyObject *index)
{
    volatile uint64_t *f = ready(self) ? flag_at(self, index) : NULL;
    return f ? PyLong_FromUnsignedLongLong(pc_flag_load(f)) : NULL;
}

static PyObject *store(Flags *self, PyObject *const *args, Py_ssize_t nargs)
{
    uint64_t v;
    if (!pc_nargs("store", nargs, 2, 2) || !ready(self))
        return NULL;
    if (self->view.readonly) {
        PyErr_SetString(PyExc_ValueError, "cannot store into a read-only flags array");
        return NULL;
    }
    volatile uint64_t *f = flag_at(self, args[0]);
    if (f == NULL || pc_u64_arg(args[1], "flag value", &v) < 0)
        return NULL;
    pc_flag_store(f, v);
    Py_RETURN_NONE;
}

static PyObject *wait_ge(Flags *self, PyObject *const *args, Py_ssize_t nargs)
{
    uint64_t target;
    int64_t timeout;
    if (!pc_nargs("wait_ge", nargs, 3, 3) || !ready(self))
        return NULL;
    volatile uint64_t *f = flag_at(self, args[0]);
    if (f == NULL || pc_u64_arg(args[1], "target", &target) < 0 ||
        pc_timeout_arg(args[2], &timeout) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pc_wait_ge(f, target, timeout);
    Py_END_ALLOW_THREADS
    return PyBool_FromLong(rc == 0);
}

/* wait_any_ge(pending, target, timeout, start=0) and _wait_ready(pending, target, timeout,
 * start=0, out): flags.py says what they return. */
static PyObject *wait_pending(Flags *self, PyObject *const *argv, Py_ssize_t nargs,
                              PyObject *kwnames, int all)
{
    static const char *const names[] = {"pending", "target", "timeout", "start", "out"};
    PyObject *args[5];
    uint64_t target;
    int64_t timeout;
    size_t start;
    Py_buffer m, out = {0};
    if (pc_fast_args(all ? "_wait_ready" : "wait_any_ge", argv, nargs, kwnames, names,
                     all ? 5 : 3, all ? 5 : 4, args) < 0 ||
        !ready(self) || pc_u64_arg(args[1], "target", &target) < 0 ||
        pc_timeout_arg(args[2], &timeout) < 0 ||
        pending_arg(self, args[0], args[3], &m, &start) < 0)
        return NULL;
    if (all && (PyObject_GetBuffer(args[4], &out, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0 ||
                out.itemsize != sizeof(size_t) || out.len < m.len * out.itemsize)) {
        if (out.obj != NULL)
            PyBuffer_Release(&out);
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError,
                     "out must be a writable contiguous intp array of >= %zd entries", m.len);
        PyBuffer_Release(&m);
        return NULL;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = all ? pc_wait_ready_ge((const volatile uint64_t *)self->base, self->stride, m.buf,
                                m.len, target, start, out.buf, timeout)
             : pc_wait_any_ge((const volatile uint64_t *)self->base, self->stride, m.buf, m.len,
                              target, start, timeout);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&m);
    if (all)
        PyBuffer_Release(&out);
    return waited(rc);
}

static PyObject *wait_any_ge(Flags *self, PyObject *const *args, Py_ssize_t nargs,
                             PyObject *kwnames)
{
    return wait_pending(self, args, nargs, kwnames, 0);
}

static PyObject *wait_ready(Flags *self, PyObject *const *args, Py_ssize_t nargs,
                            PyObject *kwnames)
{
    return wait_pending(self, args, nargs, kwnames, 1);
}

/* Posts (papcoll_native.h): the four words from flag i, so the stride must hold them (a view of
 * one flag has no stride: its board's layout, papcoll's own, gives the post its words). */
static volatile uint64_t *post_at(Flags *self, PyObject *index)
{
    if (!ready(self))
        return NULL;
    if (self->size > 1 && self->stride < 32) {
        PyErr_Format(PyExc_ValueError, "posts need flags at least 32 bytes apart, not %zd",
                     self->stride);
        return NULL;
    }
    return flag_at(self, index);
}

static PyObject *post(Flags *self, PyObject *const *args, Py_ssize_t nargs)
{
    uint64_t epoch, sig, address;
    if (!pc_nargs("post", nargs, 4, 4))
        return NULL;
    volatile uint64_t *p = post_at(self, args[0]);
    if (p == NULL || pc_u64_arg(args[1], "epoch", &epoch) < 0 ||
        pc_u64_arg(args[2], "sig", &sig) < 0 || pc_u64_arg(args[3], "address", &address) < 0)
        return NULL;
    if (self->view.readonly) {
        PyErr_SetString(PyExc_ValueError, "cannot post into a read-only flags array");
        return NULL;
    }
    pc_post(p, epoch, sig, address);
    Py_RETURN_NONE;
}

static PyObject *post_sig(Flags *self, PyObject *const *args, Py_ssize_t nargs)
{
    uint64_t epoch;
    if (!pc_nargs("post_sig", nargs, 2, 2))
        return NULL;
    volatile uint64_t *p = post_at(self, args[0]);
    if (p == NULL || pc_u64_arg(args[1], "epoch", &epoch) < 0)
        return NULL;
    return PyLong_FromUnsignedLongLong(pc_post_sig(p, epoch));
}

static PyObject *post_address(Flags *self, PyObject *index)
{
    volatile uint64_t *p = post_at(self, index);
    return p ? PyLong_FromUnsignedLongLong(pc_post_address(p)) : NULL;
}

static Py_ssize_t flags_len(Flags *self)
{
    return self->size;
}

static PyObject *get_address(Flags *self, void *closure)
{
    (void)closure;
    return ready(self) ? PyLong_FromVoidPtr(self->base) : NULL;
}

#define FASTCALL(f) (PyCFunction)(void (*)(void))(f), METH_FASTCALL
#define KEYWORDS(f) (PyCFunction)(void (*)(void))(f), METH_FASTCALL | METH_KEYWORDS

static PyMethodDef flags_methods[] = {
    {"load", (PyCFunction)load, METH_O, "load(i): flag i's value (acquire)."},
    {"store", FASTCALL(store), "store(i, value): publish value in flag i (release)."},
    {"wait_ge", FASTCALL(wait_ge),
     "wait_ge(i, target, timeout): whether flag i reached target within timeout seconds."},
    {"wait_any_ge", KEYWORDS(wait_any_ge),
     "wait_any_ge(pending, target, timeout, start=0): the index of a pending flag >= target,\n"
     "scanning from start (wrapping), or -1 after timeout seconds."},
    {"_wait_ready", KEYWORDS(wait_ready),
     "_wait_ready(pending, target, timeout, start, out): how many ready indices out holds."},
    {"post", FASTCALL(post),
     "post(i, epoch, sig, address): fill process i's post (native pc_post, its one writer)."},
    {"post_sig", FASTCALL(post_sig), "post_sig(i, epoch): process i's signature for epoch."},
    {"post_address", (PyCFunction)post_address, METH_O,
     "post_address(i): the buffer address process i's post publishes."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef flags_members[] = {
    {"array", T_OBJECT, offsetof(Flags, array), READONLY, "the flags' array"},
    {"stride", T_PYSSIZET, offsetof(Flags, stride), READONLY, "bytes from one flag to the next"},
    {"size", T_PYSSIZET, offsetof(Flags, size), READONLY, "how many flags"},
    {NULL, 0, 0, 0, NULL},
};

static PyObject *get_writable(Flags *self, void *closure)
{
    (void)closure;
    return ready(self) ? PyBool_FromLong(!self->view.readonly) : NULL;
}

static PyGetSetDef flags_getset[] = {
    {"address", (getter)get_address, NULL, "flag 0's address", NULL},
    {"writable", (getter)get_writable, NULL, "whether the flags may be stored into", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods flags_sequence = {.sq_length = (lenfunc)flags_len};

static PyTypeObject flags_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "papcoll._native.Flags",
    .tp_basicsize = sizeof(Flags),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Flags(array): shared 64-bit flags, a 1-D uint64 array (a strided view pads\n"
              "them to cache lines), its memory held while this lives.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)flags_init,
    .tp_dealloc = (destructor)flags_dealloc,
    .tp_methods = flags_methods,
    .tp_members = flags_members,
    .tp_getset = flags_getset,
    .tp_as_sequence = &flags_sequence,
};

int pc_add_flags(PyObject *module)
{
    if (PyType_Ready(&flags_type) < 0)
        return -1;
    Py_INCREF(&flags_type);
    if (PyModule_AddObject(module, "Flags", (PyObject *)&flags_type) < 0) {
        Py_DECREF(&flags_type);
        return -1;
    }
    return 0;
}
