/* An adaptive site's window (papcoll/adaptive.py) in C: the one owner of its state, K seconds
 * and how many of them its calls have timed. The Entry notes a call into it by
 * pc_window_note (papcoll_entry.c), Python by its note(); its end (papcoll_agree.c) takes
 * the times for the reduction by pc_window_send and opens it again by pc_window_reopen. A
 * C type, not the site's numpy array and count: the Entry read and wrote those by name and
 * took the array as a buffer every call, 0.2-0.3 us a call more (docs/adaptive.md). */
#include "papcoll_call.h"

#include <structmember.h>

typedef struct {
    PyObject_HEAD
    Py_ssize_t k;     /* calls a window */
    Py_ssize_t count; /* calls timed in this one; -1 before the site's first (not timed) */
    double *times;    /* k seconds */
} Window;

static PyTypeObject window_type;

static Window *window_of(PyObject *obj)
{
    if (Py_IS_TYPE(obj, &window_type))
        return (Window *)obj;
    PyErr_Format(PyExc_TypeError, "papcoll adaptive window: a site's window is a Window, "
                                  "not %.100s", Py_TYPE(obj)->tp_name);
    return NULL;
}

int pc_window_open(PyObject *obj)
{
    Window *w = window_of(obj);
    if (w == NULL)
        return -1;
    if (w->count >= w->k) {
        PyErr_SetString(PyExc_RuntimeError, "papcoll adaptive window: full, and not ended");
        return -1;
    }
    return w->count >= 0;
}

int pc_window_note(PyObject *obj, double seconds)
{
    Window *w = (Window *)obj; /* pc_window_open's, and so a Window */
    if (w->count < 0 || w->count >= w->k)
        return 0; /* not open, or full: never a write beyond it */
    w->times[w->count++] = seconds;
    return w->count == w->k;
}

int pc_window_send(PyObject *obj, double *send, Py_ssize_t n)
{
    Window *w = window_of(obj);
    if (w == NULL)
        return -1;
    if (n != 2 * w->k) {
        PyErr_SetString(PyExc_ValueError, "papcoll adaptive window: send is not 2 K values");
        return -1;
    }
    for (Py_ssize_t i = 0; i < w->k; i++) {
        send[i] = w->times[i];
        send[w->k + i] = -w->times[i];
    }
    return 0;
}

void pc_window_reopen(PyObject *obj)
{
    ((Window *)obj)->count = 0; /* pc_window_send's, and so a Window */
}

static PyObject *window_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"k", NULL};
    Py_ssize_t k;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "n:Window", names, &k))
        return NULL;
    if (k < 1)
        return PyErr_Format(PyExc_ValueError, "Window(k): k >= 1, not %zd", k);
    Window *w = (Window *)type->tp_alloc(type, 0);
    if (w == NULL)
        return NULL;
    w->k = k;
    w->count = -1;
    if ((w->times = PyMem_Calloc((size_t)k, sizeof *w->times)) == NULL) {
        Py_DECREF(w);
        return PyErr_NoMemory();
    }
    return (PyObject *)w;
}

static void window_dealloc(Window *w)
{
    PyMem_Free(w->times);
    Py_TYPE(w)->tp_free((PyObject *)w);
}

/* note(seconds) -> whether the window is full: a call Python served and timed. The site's
 * first call opens the window and is not noted. */
static PyObject *window_note(Window *w, PyObject *arg)
{
    double seconds = PyFloat_AsDouble(arg);
    if (seconds == -1.0 && PyErr_Occurred())
        return NULL;
    int open = pc_window_open((PyObject *)w);
    if (open <= 0) {
        if (open < 0)
            return NULL;
        w->count = 0;
        Py_RETURN_FALSE;
    }
    return PyBool_FromLong(pc_window_note((PyObject *)w, seconds));
}

static PyObject *window_times(Window *w, void *unused)
{
    (void)unused;
    PyObject *t = PyTuple_New(w->k);
    for (Py_ssize_t i = 0; t != NULL && i < w->k; i++) {
        PyObject *v = PyFloat_FromDouble(w->times[i]);
        if (v == NULL)
            Py_CLEAR(t);
        else
            PyTuple_SET_ITEM(t, i, v);
    }
    return t;
}

static PyMethodDef window_type_methods[] = {
    {"note", (PyCFunction)window_note, METH_O,
     "note(seconds) -> whether the window is full (the site's first call opens it, untimed)"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef window_members[] = {
    {"k", T_PYSSIZET, offsetof(Window, k), READONLY, "calls a window"},
    {"count", T_PYSSIZET, offsetof(Window, count), READONLY,
     "calls timed in this window; -1 before the site's first"},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef window_getset[] = {
    {"times", (getter)window_times, NULL, "the window's k seconds, as a tuple", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject window_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "papcoll._native.Window",
    .tp_basicsize = sizeof(Window),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Window(k): an adaptive site's window of k timed calls (adaptive.py).",
    .tp_new = window_new,
    .tp_dealloc = (destructor)window_dealloc,
    .tp_methods = window_type_methods,
    .tp_members = window_members,
    .tp_getset = window_getset,
};

int pc_add_window(PyObject *module)
{
    if (PyType_Ready(&window_type) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "Window", (PyObject *)&window_type);
}
