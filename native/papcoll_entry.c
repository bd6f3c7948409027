/* papcoll._native.Entry: a Communicator's way into C, one per Context (context.py).
 *
 * A call that a plan serves should cost what MPI's own call costs from mpi4py. In Python the
 * steps around the plan -- the Communicator's lock, its state, the call count, the call site's
 * plans, the hit's bookkeeping -- took about 0.9 us, a third of an 8 B MPI_Alltoall on two
 * processes. So the Entry holds them in C:
 *
 * - the Communicator's lock (acquire, release, with: a threading.Lock's interface), which
 *   every call and request of the Communicator takes;
 * - ``calls``, the count of calls begun, which give-ups quote (rendezvous.py);
 * - ``sites``: call site -> (Plan structs, Plan objects, the names calls are said to be
 *   served by, last use per plan), kept by callcache.py, read here;
 * - ``chosen``, the algorithm that served the last call;
 * - ``stale``: Python sets it whenever a call must take Python's path first -- a request
 *   active or dropped, a datatype freed, the Communicator broken or closed -- and clears it
 *   there once the state allows plans again (callcache.CallCache.ready).
 *
 * serve() takes a call only when nothing stale stands in the way and the lock is free, and
 * then either runs it by a plan or declines it untouched: so Python's path, which produces
 * every error message, sees each call a plan did not take exactly as it was given.
 */
#include "papcoll_call.h"
#include "papcoll_native.h"

#include <string.h>
#include <structmember.h>

typedef struct {
    PyObject_HEAD
    PyThread_type_lock lock;
    char held, stale;
    unsigned long long calls, hits, misses, tick;
    PyObject *sites;  /* dict: see above */
    PyObject *chosen; /* str or None */
    PyObject *finish; /* finish(plan, rc): the algorithm ends the call a plan left (rc < 0) */
    PyObject *fail;   /* fail(error): an error left a call unfinished (Context.fail) */
} Entry;

/* An error in a call: fail(error) is told, then the error (or fail's own) is raised. */
static int failed(Entry *e)
{
    e->stale = 1;
    if (e->fail == Py_None)
        return -1;
    PyObject *type, *error, *traceback;
    PyErr_Fetch(&type, &error, &traceback);
    PyErr_NormalizeException(&type, &error, &traceback);
    if (traceback != NULL)
        PyException_SetTraceback(error, traceback);
    PyObject *said = PyObject_CallOneArg(e->fail, error);
    if (said == NULL) {
        Py_XDECREF(type), Py_XDECREF(error), Py_XDECREF(traceback);
        return -1;
    }
    Py_DECREF(said);
    PyErr_Restore(type, error, traceback);
    return -1;
}

/* The call run by one of the site's plans (the lock held): 1; 0 when none takes it, nothing
 * touched; -1 with a Python error. */
static int serve_locked(Entry *e, PyObject *site, PyObject *sendbuf, PyObject *recvbuf)
{
    PyObject *entry = PyDict_GetItemWithError(e->sites, site);
    if (entry == NULL) {
        if (PyErr_Occurred())
            return -1;
        e->misses++;
        return 0;
    }
    if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 4) {
        PyErr_SetString(PyExc_SystemError, "papcoll Entry: a call site of another form");
        return -1;
    }
    Py_INCREF(entry); /* finish() may change the sites */
    Py_ssize_t i;
    long rc = pc_first(PyTuple_GET_ITEM(entry, 0), sendbuf, recvbuf, &i);
    int out = rc < 0 && i < 0 ? failed(e) : i < 0 ? 0 : 1;
    if (out == 1) {
        e->hits++;
        PyObject *tick = PyLong_FromUnsignedLongLong(++e->tick);
        if (tick == NULL || PyList_SetItem(PyTuple_GET_ITEM(entry, 3), i, tick) < 0) {
            out = failed(e);
        } else {
            Py_XSETREF(e->chosen, Py_NewRef(PyTuple_GET_ITEM(PyTuple_GET_ITEM(entry, 2), i)));
            if (rc < 0) {
                PyObject *done = PyObject_CallFunction(
                    e->finish, "Ol", PyTuple_GET_ITEM(PyTuple_GET_ITEM(entry, 1), i), rc);
                if (done == NULL)
                    out = failed(e);
                Py_XDECREF(done);
            }
        }
    } else if (out == 0) {
        e->misses++;
    }
    Py_DECREF(entry);
    return out;
}

static int take_args(const char *what, Py_ssize_t nargs)
{
    if (nargs == 3)
        return 1;
    PyErr_Format(PyExc_TypeError, "%s(site, sendbuf, recvbuf)", what);
    return 0;
}

#define NOT_TRIED (-2)

/* The lock taken without waiting, and marked held: 1; 0 where it is taken already. */
static int hold(Entry *e)
{
    if (e->held || !PyThread_acquire_lock(e->lock, NOWAIT_LOCK))
        return 0;
    e->held = 1;
    return 1;
}

static void let_go(Entry *e)
{
    e->held = 0;
    PyThread_release_lock(e->lock);
}

/* The call taken by one of the site's plans where nothing stale stands in the way and the lock
 * is free: 1 (counted); 0 none takes it; NOT_TRIED; -1 with a Python error. Nothing is held
 * after it returns. */
static int take(Entry *e, PyObject *site, PyObject *sendbuf, PyObject *recvbuf)
{
    if (e->stale || !hold(e))
        return NOT_TRIED;
    e->calls++;
    int out = serve_locked(e, site, sendbuf, recvbuf);
    if (out == 0)
        e->calls--; /* Python's path counts it */
    let_go(e);
    return out;
}

/* serve(site, sendbuf, recvbuf) -> True: a plan ran the call (counted); False: none takes
 * it; None: not tried (stale, or the lock is taken). */
static PyObject *serve(Entry *e, PyObject *const *args, Py_ssize_t nargs)
{
    if (!take_args("serve", nargs))
        return NULL;
    int out = take(e, args[0], args[1], args[2]);
    return out == NOT_TRIED ? Py_NewRef(Py_None) : out < 0 ? NULL : PyBool_FromLong(out);
}

/* run(site, sendbuf, recvbuf) -> as serve(), the lock held and the call counted by the
 * caller (Python's path), whatever ``stale`` says. */
static PyObject *run(Entry *e, PyObject *const *args, Py_ssize_t nargs)
{
    if (!take_args("run", nargs))
        return NULL;
    if (!e->held) {
        PyErr_SetString(PyExc_RuntimeError, "papcoll Entry.run: the lock is not held");
        return NULL;
    }
    int out = serve_locked(e, args[0], args[1], args[2]);
    return out < 0 ? NULL : PyBool_FromLong(out);
}

/* The names of an adaptive site's attributes (adaptive.Site) that timed() reads: ``key``,
 * the call site its plans serve; ``window``, its Window (papcoll_window.c). */
static PyObject *s_key, *s_window;

static int interned(void)
{
    return s_window != NULL || ((s_key = PyUnicode_InternFromString("key")) != NULL &&
                                (s_window = PyUnicode_InternFromString("window")) != NULL);
}

/* A site's window has filled: end it here, the lock held (pc_window_end), where its last
 * reduction has completed, the usual case -> True; else the site, for Python to wait for that
 * reduction, bounded -- or to say another thread holds the lock. An error fails the
 * Communicator, as Python's agreement does: peers are in an unknown state. */
static PyObject *ended(Entry *e, PyObject *site)
{
    if (!hold(e))
        return Py_NewRef(site);
    int rc = pc_window_end(site);
    if (rc < 0)
        rc = failed(e);
    let_go(e);
    return rc < 0 ? NULL : Py_NewRef(rc ? Py_True : site);
}

/* timed(sites, sendbuf, recvbuf): an adaptive auto's call (adaptive.py), served and timed in
 * C, and its window ended here when it fills, so that Python sees a site's calls only where a
 * window's reduction is still in flight at its end. The site is ``sites[len(recvbuf) in
 * bytes]``; the call runs as serve() would run the site's ``key``, and its seconds in the plan
 * go into the site's window. Where ``sites`` holds a key (a tuple) in place of a site, no skew
 * changes its choice: the call runs as serve() runs that key, untimed. -> True: served (and
 * timed, and a full window ended); the site: served, timed, and its window is full but not
 * ended (ended() says why; Python agrees on it); None: not taken -- no such site, its first
 * call, no plan takes it, or what makes serve() decline --, nothing touched. */
static PyObject *timed(Entry *e, PyObject *const *args, Py_ssize_t nargs)
{
    if (!take_args("timed", nargs) || !interned())
        return NULL;
    if (e->stale || e->held) /* take() would decline it: spare the lookups */
        Py_RETURN_NONE;
    Py_buffer view;
    if (PyObject_GetBuffer(args[2], &view, PyBUF_STRIDES) < 0) {
        PyErr_Clear(); /* a buffer spec: Python's path parses it */
        Py_RETURN_NONE;
    }
    PyObject *length = PyLong_FromSsize_t(view.len);
    PyBuffer_Release(&view);
    if (length == NULL)
        return NULL;
    PyObject *site = PyDict_GetItemWithError(args[0], length);
    Py_DECREF(length);
    if (site == NULL)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    Py_INCREF(site);
    if (PyTuple_CheckExact(site)) { /* a site no skew changes: its key, served untimed */
        int served = take(e, site, args[1], args[2]);
        Py_DECREF(site);
        return served == -1 ? NULL : Py_NewRef(served == 1 ? Py_True : Py_None);
    }
    PyObject *out = NULL, *key = NULL, *window = PyObject_GetAttr(site, s_window);
    int open = window == NULL ? -1 : pc_window_open(window);
    if (open <= 0) {
        out = open < 0 ? NULL : Py_NewRef(Py_None);
        goto done;
    }
    if ((key = PyObject_GetAttr(site, s_key)) == NULL)
        goto done;
    int64_t start = pc_now_ns();
    int served = take(e, key, args[1], args[2]);
    double seconds = (double)(pc_now_ns() - start) * 1e-9;
    if (served == 1)
        out = pc_window_note(window, seconds) ? ended(e, site) : Py_NewRef(Py_True);
    else if (served != -1)
        out = Py_NewRef(Py_None);
done:
    Py_XDECREF(window);
    Py_XDECREF(key);
    Py_DECREF(site);
    return out;
}

/* acquire(blocking=True) -> whether the lock was taken; a blocked wait lets other threads
 * and signal handlers run. */
static PyObject *acquire(Entry *e, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"blocking", NULL};
    int blocking = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|p:acquire", names, &blocking))
        return NULL;
    int got = PyThread_acquire_lock(e->lock, NOWAIT_LOCK);
    while (!got && blocking) {
        PyLockStatus status;
        Py_BEGIN_ALLOW_THREADS
        status = PyThread_acquire_lock_timed(e->lock, 50000, 0);
        Py_END_ALLOW_THREADS
        got = status == PY_LOCK_ACQUIRED;
        if (!got && PyErr_CheckSignals() < 0)
            return NULL;
    }
    if (got)
        e->held = 1;
    return PyBool_FromLong(got);
}

static PyObject *release(Entry *e, PyObject *unused)
{
    (void)unused;
    if (!e->held) {
        PyErr_SetString(PyExc_RuntimeError, "release unlocked lock");
        return NULL;
    }
    let_go(e);
    Py_RETURN_NONE;
}

static PyObject *enter(Entry *e, PyObject *unused)
{
    (void)unused;
    PyObject *args = PyTuple_New(0);
    PyObject *got = args ? acquire(e, args, NULL) : NULL;
    Py_XDECREF(args);
    return got;
}

static PyObject *exit_(Entry *e, PyObject *args)
{
    (void)args;
    return release(e, NULL);
}

static PyObject *locked(Entry *e, PyObject *unused)
{
    (void)unused;
    return PyBool_FromLong(e->held);
}

static PyObject *entry_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"finish", "fail", NULL};
    PyObject *finish, *fail;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:Entry", names, &finish, &fail))
        return NULL;
    Entry *e = (Entry *)type->tp_alloc(type, 0);
    if (e == NULL)
        return NULL;
    e->lock = PyThread_allocate_lock();
    e->sites = PyDict_New();
    if (e->lock == NULL || e->sites == NULL) {
        Py_DECREF(e);
        return PyErr_Occurred() ? NULL : PyErr_NoMemory();
    }
    e->stale = 1;
    e->chosen = Py_NewRef(Py_None);
    e->finish = Py_NewRef(finish);
    e->fail = Py_NewRef(fail);
    return (PyObject *)e;
}

static int entry_traverse(Entry *e, visitproc visit, void *arg)
{
    Py_VISIT(e->sites);
    Py_VISIT(e->chosen);
    Py_VISIT(e->finish);
    Py_VISIT(e->fail);
    return 0;
}

static int entry_clear(Entry *e)
{
    Py_CLEAR(e->sites);
    Py_CLEAR(e->chosen);
    Py_CLEAR(e->finish);
    Py_CLEAR(e->fail);
    return 0;
}

static void entry_dealloc(Entry *e)
{
    PyObject_GC_UnTrack(e);
    entry_clear(e);
    if (e->lock != NULL)
        PyThread_free_lock(e->lock);
    Py_TYPE(e)->tp_free((PyObject *)e);
}

static PyMethodDef entry_methods[] = {
    {"serve", (PyCFunction)(void (*)(void))serve, METH_FASTCALL,
     "serve(site, sendbuf, recvbuf): True served, False no plan takes it, None not tried."},
    {"run", (PyCFunction)(void (*)(void))run, METH_FASTCALL,
     "run(site, sendbuf, recvbuf): as serve, the lock held and the call counted."},
    {"timed", (PyCFunction)(void (*)(void))timed, METH_FASTCALL,
     "timed(sites, sendbuf, recvbuf): an adaptive site's call served and timed: True, the site "
     "(its window full) or None (not taken)."},
    {"acquire", (PyCFunction)(void (*)(void))acquire, METH_VARARGS | METH_KEYWORDS,
     "acquire(blocking=True): take the Communicator's lock."},
    {"release", (PyCFunction)release, METH_NOARGS, "release(): give the lock back."},
    {"locked", (PyCFunction)locked, METH_NOARGS, "locked(): whether the lock is taken."},
    {"__enter__", (PyCFunction)enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)exit_, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef entry_members[] = {
    {"stale", T_BOOL, offsetof(Entry, stale), 0, "calls take Python's path first"},
    {"calls", T_ULONGLONG, offsetof(Entry, calls), 0, "calls begun"},
    {"hits", T_ULONGLONG, offsetof(Entry, hits), 0, "calls a plan served"},
    {"misses", T_ULONGLONG, offsetof(Entry, misses), 0, "calls no plan took"},
    {"tick", T_ULONGLONG, offsetof(Entry, tick), 0, "the clock of the plans' last use"},
    {"sites", T_OBJECT_EX, offsetof(Entry, sites), READONLY, "call site -> its plans"},
    {"chosen", T_OBJECT, offsetof(Entry, chosen), 0, "the algorithm of the last call"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject entry_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "papcoll._native.Entry",
    .tp_basicsize = sizeof(Entry),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Entry(finish, fail): a Communicator's lock, state and call sites in C.",
    .tp_new = entry_new,
    .tp_dealloc = (destructor)entry_dealloc,
    .tp_traverse = (traverseproc)entry_traverse,
    .tp_clear = (inquiry)entry_clear,
    .tp_methods = entry_methods,
    .tp_members = entry_members,
};

int pc_add_entry(PyObject *module)
{
    if (PyType_Ready(&entry_type) < 0)
        return -1;
    return PyModule_AddObjectRef(module, "Entry", (PyObject *)&entry_type);
}
