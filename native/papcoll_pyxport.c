/* papcoll._native.XPort: a one-sided transport's native half (struct pc_xport) as a Python
 * object that owns everything it points to (its verbs half: papcoll_pyverbs.c).
 *
 * An XPort holds its memory (boards, a loop peer's memory, the verbs fixed memory and inbox)
 * as memoryviews, and owns its verbs resources (struct pc_ibv) and its MPI half's requests.
 * close() -- or collection -- frees them once, children first: the struct is closed first
 * (PC_CLOSED: every later call through it, or through a call or plan over it, is -EBADF),
 * then the live registrations, then the QPs, CQs, PD and device. Collection makes no MPI
 * call: a transport never closed leaves its requests in flight to MPI (pc_mpi_forget). */
#include "papcoll_pyxport.h"
#include "papcoll_pystruct.h"

#include <structmember.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <mpi4py/mpi4py.h>

#define KINDS 2                   /* ADVERT, DATA: a board is [KINDS][2 banks][n] words */

int pc_xport_usable(XPort *self)
{
    if (!self->closed)
        return 1;
    PyErr_SetString(PyExc_ValueError, "the transport is closed");
    return 0;
}

Py_buffer *pc_xport_hold(XPort *self, PyObject *obj, int writable, const char *what)
{
    Py_buffer b;
    if (pc_local_arg(obj, writable, what, &b) < 0)
        return NULL;
    PyBuffer_Release(&b);                   /* checked; the view below holds it */
    PyObject *view = PyMemoryView_FromObject(obj);
    if (view == NULL || PyList_Append(self->held, view) < 0) {
        Py_XDECREF(view);
        return NULL;
    }
    Py_DECREF(view);
    return PyMemoryView_GET_BUFFER(view);
}

static PyTypeObject xport_type;

struct pc_xport *pc_xport_of(PyObject *obj, const char *what)
{
    if (PyObject_TypeCheck(obj, &xport_type))
        return &((XPort *)obj)->x;
    PyErr_Format(PyExc_TypeError, "%s must be an XPort, not %s", what, Py_TYPE(obj)->tp_name);
    return NULL;
}

static int xport_init(XPort *self, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"kind", "n", "me", "boards", NULL};
    int kind;
    Py_ssize_t n, me;
    PyObject *boards;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "innO:XPort", names, &kind, &n, &me, &boards))
        return -1;
    if (self->held != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "an XPort is set up once");
        return -1;
    }
    if (kind != PC_VERBS && kind != PC_MPI && kind != PC_LOOP) {
        PyErr_Format(PyExc_ValueError, "no transport kind %d", kind);
        return -1;
    }
    if (n < 1 || me < 0 || me >= n) {
        PyErr_Format(PyExc_ValueError, "rank %zd of %zd processes", me, n);
        return -1;
    }
    if ((self->held = PyList_New(0)) == NULL)
        return -1;
    Py_buffer *b = pc_xport_hold(self, boards, 1, "boards");
    if (b == NULL)
        return -1;
    if (b->len < (Py_ssize_t)(KINDS * 2 * n * 8) || (uintptr_t)b->buf % 8) {
        PyErr_Format(PyExc_ValueError, "boards need %zd aligned bytes, not %zd",
                     KINDS * 2 * n * 8, b->len);
        return -1;
    }
    self->inbox_bytes = calloc((size_t)n, sizeof *self->inbox_bytes);
    self->peers = calloc((size_t)n, sizeof *self->peers);
    if (self->inbox_bytes == NULL || self->peers == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->x.kind = kind;
    self->x.n = (size_t)n;
    self->x.me = (size_t)me;
    self->x.boards = b->buf;
    self->x.inbox_bytes = self->inbox_bytes;
    self->x.peers = self->peers;
    self->x.failed_peer = (size_t)n;
    return 0;
}

/* Free what x points to, once; mpi: how to end the MPI half (0: pc_mpi_forget, no MPI
 * call; else pc_xport_close within timeout_ns). Returns pc_xport_close's result. */
static int release(XPort *self, int mpi, int64_t timeout_ns)
{
    int rc = 0;
    if (self->closed)
        return 0;
    self->closed = 1;
    if (self->x.kind == PC_MPI && !mpi)
        pc_mpi_forget(&self->x);
    else if (self->x.kind == PC_MPI) {
        Py_BEGIN_ALLOW_THREADS
        rc = pc_xport_close(&self->x, timeout_ns);
        Py_END_ALLOW_THREADS
    }
    pc_xport_close(&self->x, 0);     /* no MPI half left: only marks x closed */
    pc_xport_drop_mrs(self);
    pc_ibv_close(&self->ibv);
    free(self->peers);
    free(self->inbox_bytes);
    self->peers = NULL;
    self->inbox_bytes = NULL;
    Py_CLEAR(self->held);
    return rc;
}

static void xport_dealloc(XPort *self)
{
    if (self->held != NULL || self->peers != NULL)
        release(self, 0, 0);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* close(wait=0.0): close x before what it points to goes; MPI requests still in flight are
 * tested for wait seconds, then left to MPI (their memory kept). Whether all completed. */
static PyObject *xport_close(XPort *self, PyObject *args)
{
    PyObject *wait = NULL;
    int64_t timeout = 0;
    if (!PyArg_ParseTuple(args, "|O:close", &wait) ||
        (wait != NULL && pc_timeout_arg(wait, &timeout) < 0))
        return NULL;
    return PyBool_FromLong(release(self, 1, timeout) == 0);
}

/* put(peer, dest, offset, rkey, source, lkey, kind=-1, seq=0, code=0, signal=1): one write
 * of all of source (pc_xport_put): 0 or -errno. */
static PyObject *xport_put(XPort *self, PyObject *args)
{
    Py_ssize_t peer;
    int dest, kind = -1, signal = 1;
    unsigned long long offset, seq = 0;
    unsigned int rkey, lkey, code = 0;
    PyObject *source;
    Py_buffer b;
    if (!PyArg_ParseTuple(args, "niKIOI|iKIi:put", &peer, &dest, &offset, &rkey, &source, &lkey,
                          &kind, &seq, &code, &signal) ||
        pc_local_arg(source, 0, "source", &b) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pc_xport_put(&self->x, (size_t)peer, dest, offset, rkey, b.buf, (size_t)b.len, lkey,
                      kind, seq, code, signal);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    return PyLong_FromLong(rc);
}

static PyObject *xport_flush(XPort *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromLong(pc_xport_flush(&self->x));
}

static PyObject *xport_poll(XPort *self, PyObject *unused)
{
    (void)unused;
    return PyLong_FromLong(pc_xport_poll(&self->x));
}

/* complete(timeout): pc_xport_complete, for at most timeout seconds. */
static PyObject *xport_complete(XPort *self, PyObject *arg)
{
    int64_t timeout;
    if (pc_timeout_arg(arg, &timeout) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pc_xport_complete(&self->x, timeout);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(rc);
}

static PyObject *xport_post_receives(XPort *self, PyObject *args)
{
    Py_ssize_t peer, count;
    if (!PyArg_ParseTuple(args, "nn:post_receives", &peer, &count))
        return NULL;
    if (peer < 0 || count < 0)
        return PyErr_Format(PyExc_ValueError, "peer %zd, count %zd", peer, count);
    return PyLong_FromLong(pc_xport_post_receives(&self->x, (size_t)peer, (size_t)count));
}

int pc_xport_peer_arg(XPort *self, Py_ssize_t peer)
{
    if (peer >= 0 && (size_t)peer < self->x.n && (size_t)peer != self->x.me)
        return 1;
    PyErr_Format(PyExc_IndexError, "no peer %zd among %zu processes (me: %zu)", peer,
                 self->x.n, self->x.me);
    return 0;
}

/* set_inbox_bytes(sizes): the inbox bytes each peer exposed (n ints); puts beyond are
 * refused (-EMSGSIZE). */
static PyObject *xport_set_inbox_bytes(XPort *self, PyObject *sizes)
{
    if (!pc_xport_usable(self))
        return NULL;
    PyObject *seq = PySequence_Fast(sizes, "inbox sizes must be a sequence");
    if (seq == NULL)
        return NULL;
    if ((size_t)PySequence_Fast_GET_SIZE(seq) != self->x.n) {
        Py_DECREF(seq);
        return PyErr_Format(PyExc_ValueError, "%zu inbox sizes needed", self->x.n);
    }
    for (size_t q = 0; q < self->x.n; q++)
        if (pc_u64_arg(PySequence_Fast_GET_ITEM(seq, q), "an inbox size",
                       &self->inbox_bytes[q]) < 0) {
            Py_DECREF(seq);
            return NULL;
        }
    Py_DECREF(seq);
    Py_RETURN_NONE;
}

/* open_mpi(comm, win, inbox_win, dyn, adverts_at, inbox_at): the MPI half over these mpi4py
 * objects (their handles read through mpi4py's C API); the objects stay the caller's. */
static PyObject *xport_open_mpi(XPort *self, PyObject *args)
{
    PyObject *comm, *win, *inbox_win, *dyn;
    Py_ssize_t adverts_at, inbox_at;
    if (!PyArg_ParseTuple(args, "OOOOnn:open_mpi", &comm, &win, &inbox_win, &dyn, &adverts_at,
                          &inbox_at) || !pc_xport_usable(self))
        return NULL;
    if (self->x.kind != PC_MPI || self->x.mpi != NULL)
        return PyErr_Format(PyExc_ValueError, "open_mpi: not a fresh MPI transport");
    MPI_Comm *c = PyMPIComm_Get(comm);
    MPI_Win *w = c ? PyMPIWin_Get(win) : NULL, *i = w ? PyMPIWin_Get(inbox_win) : NULL;
    MPI_Win *d = i ? PyMPIWin_Get(dyn) : NULL;
    if (d == NULL)
        return NULL;
    if (pc_mpi_open(&self->x, (intptr_t)*c, (intptr_t)*w, (intptr_t)*i, (intptr_t)*d,
                    (size_t)adverts_at, (size_t)inbox_at) < 0)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

/* loop_peer(q, boards, adverts, inbox): in a loop transport, peer q's memory. */
static PyObject *xport_loop_peer(XPort *self, PyObject *args)
{
    Py_ssize_t q;
    PyObject *boards, *adverts, *inbox;
    if (!PyArg_ParseTuple(args, "nOOO:loop_peer", &q, &boards, &adverts, &inbox) ||
        !pc_xport_usable(self))
        return NULL;
    if (self->x.kind != PC_LOOP || q < 0 || (size_t)q >= self->x.n)
        return PyErr_Format(PyExc_ValueError, "loop_peer(%zd): not a loop transport's peer", q);
    Py_buffer *b = pc_xport_hold(self, boards, 1, "boards"), *a = b ? pc_xport_hold(self, adverts, 1, "adverts")
                                                          : NULL;
    Py_buffer *i = a ? pc_xport_hold(self, inbox, 1, "inbox") : NULL;
    if (i == NULL)
        return NULL;
    self->peers[q].boards = b->buf;
    self->peers[q].adverts_addr = (uint64_t)(uintptr_t)a->buf;
    self->peers[q].inbox_addr = (uint64_t)(uintptr_t)i->buf;
    Py_RETURN_NONE;
}

static PyObject *xport_address(XPort *self, void *closure)
{
    (void)closure;
    return PyLong_FromVoidPtr(&self->x);
}

static PyObject *xport_vstats(XPort *self, void *closure)
{
    (void)closure;
    const struct pc_vstats *s = &self->x.vstats;
    return Py_BuildValue("{sKsKsKsKsKsKsKsK}", "send_wrs", s->send_wrs, "doorbells",
                         s->doorbells, "recv_wrs", s->recv_wrs, "send_cqes", s->send_cqes,
                         "recv_cqes", s->recv_cqes, "polls", s->polls, "empty_polls",
                         s->empty_polls, "bcopies", s->bcopies);
}

static PyObject *xport_closed(XPort *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->closed);
}

#define METH(name, f, flags, doc) {name, (PyCFunction)(void (*)(void))(f), flags, doc}

static PyMethodDef xport_methods[] = {
    METH("close", xport_close, METH_VARARGS, "close(wait=0.0) -> whether MPI's requests completed"),
    METH("put", xport_put, METH_VARARGS,
         "put(peer, dest, offset, rkey, source, lkey, kind=-1, seq=0, code=0, signal=1) -> rc"),
    METH("flush", xport_flush, METH_NOARGS, "pc_xport_flush -> rc"),
    METH("poll", xport_poll, METH_NOARGS, "pc_xport_poll -> rc"),
    METH("complete", xport_complete, METH_O, "complete(timeout) -> rc"),
    METH("post_receives", xport_post_receives, METH_VARARGS, "post_receives(peer, count) -> rc"),
    METH("set_inbox_bytes", xport_set_inbox_bytes, METH_O, "set_inbox_bytes(sizes)"),
    METH("open_mpi", xport_open_mpi, METH_VARARGS,
         "open_mpi(comm, win, inbox_win, dyn, adverts_at, inbox_at)"),
    METH("loop_peer", xport_loop_peer, METH_VARARGS, "loop_peer(q, boards, adverts, inbox)"),
    METH("open_verbs", pc_xport_open_verbs, METH_VARARGS,
         "open_verbs(device, port, gid_index, fixed, inbox, sends, recvs)"),
    METH("verbs_info", pc_xport_verbs_info, METH_NOARGS, "what peers need to connect to me"),
    METH("connect", pc_xport_connect, METH_VARARGS, "connect(peer, qp_num, psn, gid, lid)"),
    METH("set_peer", pc_xport_set_peer, METH_VARARGS,
         "set_peer(peer, (adverts addr, rkey), (inbox addr, rkey), inbox_bytes)"),
    METH("register", pc_xport_register, METH_VARARGS, "register(buffer, remote=False) -> MR"),
    {NULL, NULL, 0, NULL},
};

#define X_MEMBER(name, type, field, flags, doc) \
    {name, type, offsetof(XPort, x) + offsetof(struct pc_xport, field), flags, doc}

static PyMemberDef xport_members[] = {
    X_MEMBER("kind", T_INT, kind, READONLY, "PC_VERBS, PC_MPI, PC_LOOP (0: closed)"),
    X_MEMBER("n", T_PYSSIZET, n, READONLY, "processes"),
    X_MEMBER("me", T_PYSSIZET, me, READONLY, "my index"),
    X_MEMBER("failed_peer", T_PYSSIZET, failed_peer, READONLY, "the last failure's peer"),
    X_MEMBER("failed_status", T_INT, failed_status, READONLY, "its completion status or MPI error"),
    X_MEMBER("failed_vendor", T_INT, failed_vendor, READONLY, "its vendor error"),
    X_MEMBER("bcopy_max", T_UINT, bcopy_max, READONLY,
             "verbs: the longest write whose source needs no registration (copied at its post)"),
    X_MEMBER("deadline", T_LONGLONG, deadline, 0,
             "CLOCK_MONOTONIC ns after which a put waiting for room gives up (0: no wait)"),
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef xport_getset[] = {
    {"address", (getter)xport_address, NULL, "the struct pc_xport's address (the engine's calls)",
     NULL},
    {"closed", (getter)xport_closed, NULL, "whether close() has run", NULL},
    {"vstats", (getter)xport_vstats, NULL, "what the verbs half did so far (struct pc_vstats)",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject xport_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "papcoll._native.XPort",
    .tp_basicsize = sizeof(XPort),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "XPort(kind, n, me, boards): a transport's native half (papcoll_xport.h), which\n"
              "owns what it points to until close() or collection.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)xport_init,
    .tp_dealloc = (destructor)xport_dealloc,
    .tp_methods = xport_methods,
    .tp_members = xport_members,
    .tp_getset = xport_getset,
};

int pc_add_xport(PyObject *module)
{
    /* mpi4py's C API is a table of pointers per C file: this file imports its own. */
    if (import_mpi4py() < 0 || PyType_Ready(&xport_type) < 0 ||
        PyModule_AddObjectRef(module, "XPort", (PyObject *)&xport_type) < 0)
        return -1;
    return pc_add_verbs(module);
}
