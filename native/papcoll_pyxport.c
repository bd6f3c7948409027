/* papcoll._native.XPort: a one-sided transport's native half (struct pc_xport) as a Python
 * object that owns everything it points to, and papcoll._native.MR, a verbs registration.
 *
 * An XPort holds its memory (boards, a loop peer's memory, the verbs fixed memory and inbox)
 * as memoryviews, and owns its verbs resources (struct pc_ibv) and its MPI half's requests.
 * close() -- or collection -- frees them once, children first: the struct is closed first
 * (PC_CLOSED: every later call through it, or through a call or plan over it, is -EBADF),
 * then the live registrations, then the QPs, CQs, PD and device. Collection makes no MPI
 * call: a transport never closed leaves its requests in flight to MPI (pc_mpi_forget).
 *
 * An MR holds a reference to its XPort (the PD outlives it) but none to its buffer: the
 * registration caches (transport/regcache.py) drop it when the buffer's owner dies, so a
 * registration never keeps a user's buffer alive. */
#include "papcoll_call.h"

#include <structmember.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <mpi4py/mpi4py.h>

#include "papcoll_ibv.h"

#define KINDS 2                   /* ADVERT, DATA: a board is [KINDS][2 banks][n] words */

typedef struct MR MR;

typedef struct {
    PyObject_HEAD
    struct pc_xport x;
    struct pc_vpeer *peers;       /* n (verbs, loop) */
    uint64_t *inbox_bytes;        /* n */
    struct pc_ibv ibv;
    PyObject *held;               /* memoryviews of the memory x points to */
    MR *mrs;                      /* live registrations */
    int closed;
} XPort;

struct MR {
    PyObject_HEAD
    XPort *owner;
    struct ibv_mr *mr;
    unsigned long long address, nbytes;
    unsigned int lkey, rkey;
    MR *prev, *next;
};

static PyTypeObject mr_type;

static int usable(XPort *self)
{
    if (!self->closed)
        return 1;
    PyErr_SetString(PyExc_ValueError, "the transport is closed");
    return 0;
}

/* Hold a view of obj's memory (contiguous, writable if asked) for as long as x may use it:
 * its buffer, or NULL with a Python error. */
static Py_buffer *hold(XPort *self, PyObject *obj, int writable, const char *what)
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
    Py_buffer *b = hold(self, boards, 1, "boards");
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
    for (MR *m = self->mrs; m != NULL; m = m->next) {
        pc_ibv_deregister(m->mr);
        m->mr = NULL;
    }
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

/* complete(timeout_ns): pc_xport_complete. */
static PyObject *xport_complete(XPort *self, PyObject *arg)
{
    long long timeout = PyLong_AsLongLong(arg);
    if (timeout == -1 && PyErr_Occurred())
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

static int peer_arg(XPort *self, Py_ssize_t peer)
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
    if (!usable(self))
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
                          &inbox_at) || !usable(self))
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
        !usable(self))
        return NULL;
    if (self->x.kind != PC_LOOP || q < 0 || (size_t)q >= self->x.n)
        return PyErr_Format(PyExc_ValueError, "loop_peer(%zd): not a loop transport's peer", q);
    Py_buffer *b = hold(self, boards, 1, "boards"), *a = b ? hold(self, adverts, 1, "adverts")
                                                          : NULL;
    Py_buffer *i = a ? hold(self, inbox, 1, "inbox") : NULL;
    if (i == NULL)
        return NULL;
    self->peers[q].boards = b->buf;
    self->peers[q].adverts_addr = (uint64_t)(uintptr_t)a->buf;
    self->peers[q].inbox_addr = (uint64_t)(uintptr_t)i->buf;
    Py_RETURN_NONE;
}

/* ---- verbs ------------------------------------------------------------------------------ */

static PyObject *os_error(int rc, const char *what, const char *device)
{
    errno = -rc;
    PyObject *text = PyUnicode_FromFormat("%s on %s", what, device);
    if (text != NULL)
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, text);
    Py_XDECREF(text);
    return NULL;
}

/* open_verbs(device, port, gid_index, fixed, inbox, sends, recvs): the verbs resources
 * (pc_ibv_open): fixed, the adverts (and inbox if inbox is None) then 8 bytes of scratch,
 * and inbox are held while this lives. */
static PyObject *xport_open_verbs(XPort *self, PyObject *args)
{
    const char *device, *what = "";
    int port, gid_index;
    unsigned int sends, recvs;
    PyObject *fixed, *inbox;
    if (!PyArg_ParseTuple(args, "siiOOII:open_verbs", &device, &port, &gid_index, &fixed,
                          &inbox, &sends, &recvs) || !usable(self))
        return NULL;
    if (self->x.kind != PC_VERBS || self->ibv.ctx != NULL)
        return PyErr_Format(PyExc_ValueError, "open_verbs: not a fresh verbs transport");
    Py_buffer *f = hold(self, fixed, 1, "fixed memory");
    Py_buffer *i = f == NULL || inbox == Py_None ? NULL : hold(self, inbox, 1, "inbox");
    if (f == NULL || (inbox != Py_None && i == NULL))
        return NULL;
    if (f->len < 8 || sends < 2 || recvs < 1)
        return PyErr_Format(PyExc_ValueError, "open_verbs: %zd fixed bytes, %u sends, %u "
                            "receives", f->len, sends, recvs);
    int rc = pc_ibv_open(&self->ibv, &self->x, device, port, gid_index, f->buf,
                         (size_t)f->len, i ? i->buf : NULL, i ? (size_t)i->len : 0, sends,
                         recvs, &what);
    if (rc < 0) {
        pc_ibv_close(&self->ibv);
        return os_error(rc, what, device);
    }
    Py_RETURN_NONE;
}

/* verbs_info(): what peers need to connect to me: {"gid": 16 bytes, "lid", "mtu",
 * "fixed": (lkey, rkey), "inbox_rkey", "qps": {peer: (qp_num, first psn)}}. */
static PyObject *xport_verbs_info(XPort *self, PyObject *unused)
{
    (void)unused;
    struct pc_ibv *v = &self->ibv;
    if (!usable(self))
        return NULL;
    if (v->ctx == NULL)
        return PyErr_Format(PyExc_ValueError, "verbs_info: no verbs resources");
    uint32_t fl, fr, il, ir;
    pc_ibv_keys(v->fixed_mr, &fl, &fr);
    pc_ibv_keys(v->inbox_mr ? v->inbox_mr : v->fixed_mr, &il, &ir);
    PyObject *qps = PyDict_New();
    for (size_t q = 0; qps != NULL && q < v->n; q++) {
        if (v->qps[q] == NULL)
            continue;
        PyObject *key = PyLong_FromSize_t(q);
        PyObject *value = Py_BuildValue("(II)", self->peers[q].qp_num, v->psns[q]);
        if (key == NULL || value == NULL || PyDict_SetItem(qps, key, value) < 0)
            Py_CLEAR(qps);
        Py_XDECREF(key);
        Py_XDECREF(value);
    }
    if (qps == NULL)
        return NULL;
    return Py_BuildValue("{s:y#,s:i,s:i,s:(II),s:I,s:N}", "gid", (const char *)v->gid,
                         (Py_ssize_t)16, "lid", (int)v->lid, "mtu", v->mtu, "fixed", fl, fr,
                         "inbox_rkey", ir, "qps", qps);
}

/* connect(peer, qp_num, psn, gid, lid): my QP to peer's (INIT, RTR, RTS). */
static PyObject *xport_connect(XPort *self, PyObject *args)
{
    Py_ssize_t peer;
    unsigned int qp_num, psn, lid;
    const char *gid, *what = "";
    Py_ssize_t gid_len;
    if (!PyArg_ParseTuple(args, "nIIy#I:connect", &peer, &qp_num, &psn, &gid, &gid_len, &lid) ||
        !usable(self) || !peer_arg(self, peer))
        return NULL;
    if (self->ibv.ctx == NULL || gid_len != 16)
        return PyErr_Format(PyExc_ValueError, "connect: %s",
                            gid_len != 16 ? "a GID is 16 bytes" : "no verbs resources");
    int rc = pc_ibv_connect(&self->ibv, (size_t)peer, qp_num, psn, (const uint8_t *)gid,
                            (uint16_t)lid, &what);
    if (rc < 0)
        return os_error(rc, what, "the device");
    Py_RETURN_NONE;
}

/* set_peer(peer, adverts, inbox, inbox_bytes): where peer's adverts area and inbox are,
 * (address, rkey) each, and how many inbox bytes it exposed. */
static PyObject *xport_set_peer(XPort *self, PyObject *args)
{
    Py_ssize_t peer;
    unsigned int adverts_rkey, inbox_rkey;
    unsigned long long adverts_addr, inbox_addr, inbox_bytes;
    if (!PyArg_ParseTuple(args, "n(KI)(KI)K:set_peer", &peer, &adverts_addr, &adverts_rkey,
                          &inbox_addr, &inbox_rkey, &inbox_bytes) || !usable(self) ||
        !peer_arg(self, peer))
        return NULL;
    if (self->x.kind != PC_VERBS)
        return PyErr_Format(PyExc_ValueError, "set_peer: not a verbs transport");
    struct pc_vpeer *p = &self->peers[peer];
    p->adverts_addr = adverts_addr;
    p->adverts_rkey = adverts_rkey;
    p->inbox_addr = inbox_addr;
    p->inbox_rkey = inbox_rkey;
    self->inbox_bytes[peer] = inbox_bytes;
    Py_RETURN_NONE;
}

/* register(buffer, remote=False): an MR over buffer's memory, for the device's reads, or
 * for peers' writes (remote). The buffer is not held: see the header comment. */
static PyObject *xport_register(XPort *self, PyObject *args)
{
    PyObject *buffer;
    int remote = 0;
    Py_buffer b;
    if (!PyArg_ParseTuple(args, "O|p:register", &buffer, &remote) || !usable(self) ||
        pc_local_arg(buffer, remote, "a registered buffer", &b) < 0)
        return NULL;
    PyBuffer_Release(&b);
    if (self->ibv.pd == NULL || b.len == 0)
        return PyErr_Format(PyExc_ValueError, "register: %s",
                            b.len ? "no verbs resources" : "an MR cannot be empty");
    MR *m = PyObject_New(MR, &mr_type);
    if (m == NULL)
        return NULL;
    m->mr = pc_ibv_register(&self->ibv, b.buf, (size_t)b.len, remote);
    if (m->mr == NULL) {
        int err = errno ? errno : EIO;
        m->owner = NULL;
        m->prev = m->next = NULL;
        Py_DECREF(m);
        return os_error(-err, "ibv_reg_mr", "the device");
    }
    m->address = (uintptr_t)b.buf;
    m->nbytes = (unsigned long long)b.len;
    pc_ibv_keys(m->mr, &m->lkey, &m->rkey);
    m->owner = (XPort *)Py_NewRef(self);
    m->prev = NULL;
    m->next = self->mrs;
    if (self->mrs != NULL)
        self->mrs->prev = m;
    self->mrs = m;
    return (PyObject *)m;
}

static PyObject *xport_address(XPort *self, void *closure)
{
    (void)closure;
    return PyLong_FromVoidPtr(&self->x);
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
    METH("complete", xport_complete, METH_O, "complete(timeout_ns) -> rc"),
    METH("post_receives", xport_post_receives, METH_VARARGS, "post_receives(peer, count) -> rc"),
    METH("set_inbox_bytes", xport_set_inbox_bytes, METH_O, "set_inbox_bytes(sizes)"),
    METH("open_mpi", xport_open_mpi, METH_VARARGS,
         "open_mpi(comm, win, inbox_win, dyn, adverts_at, inbox_at)"),
    METH("loop_peer", xport_loop_peer, METH_VARARGS, "loop_peer(q, boards, adverts, inbox)"),
    METH("open_verbs", xport_open_verbs, METH_VARARGS,
         "open_verbs(device, port, gid_index, fixed, inbox, sends, recvs)"),
    METH("verbs_info", xport_verbs_info, METH_NOARGS, "what peers need to connect to me"),
    METH("connect", xport_connect, METH_VARARGS, "connect(peer, qp_num, psn, gid, lid)"),
    METH("set_peer", xport_set_peer, METH_VARARGS,
         "set_peer(peer, (adverts addr, rkey), (inbox addr, rkey), inbox_bytes)"),
    METH("register", xport_register, METH_VARARGS, "register(buffer, remote=False) -> MR"),
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
    X_MEMBER("deadline", T_LONGLONG, deadline, 0,
             "CLOCK_MONOTONIC ns after which a put waiting for room gives up (0: no wait)"),
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef xport_getset[] = {
    {"address", (getter)xport_address, NULL, "the struct pc_xport's address (the engine's calls)",
     NULL},
    {"closed", (getter)xport_closed, NULL, "whether close() has run", NULL},
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

/* ---- MR --------------------------------------------------------------------------------- */

static PyObject *mr_close(MR *m, PyObject *unused)
{
    (void)unused;
    if (m->owner != NULL) {
        if (m->mr != NULL)
            pc_ibv_deregister(m->mr);   /* NULL: its XPort's close deregistered it */
        if (m->prev != NULL)
            m->prev->next = m->next;
        else
            m->owner->mrs = m->next;
        if (m->next != NULL)
            m->next->prev = m->prev;
        m->mr = NULL;
        Py_CLEAR(m->owner);
    }
    Py_RETURN_NONE;
}

static void mr_dealloc(MR *m)
{
    Py_XDECREF(mr_close(m, NULL));
    PyObject_Free(m);
}

static PyMemberDef mr_members[] = {
    {"address", T_ULONGLONG, offsetof(MR, address), READONLY, "the first byte registered"},
    {"nbytes", T_ULONGLONG, offsetof(MR, nbytes), READONLY, "bytes registered"},
    {"lkey", T_UINT, offsetof(MR, lkey), READONLY, "its local key"},
    {"rkey", T_UINT, offsetof(MR, rkey), READONLY, "its remote key"},
    {NULL, 0, 0, 0, NULL},
};

static PyMethodDef mr_methods[] = {
    METH("close", mr_close, METH_NOARGS, "deregister (safe twice)"),
    {NULL, NULL, 0, NULL},
};

static PyTypeObject mr_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "papcoll._native.MR",
    .tp_basicsize = sizeof(MR),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A verbs memory registration, made by XPort.register.",
    .tp_dealloc = (destructor)mr_dealloc,
    .tp_methods = mr_methods,
    .tp_members = mr_members,
};

/* wc_status_str(status): libibverbs' text for a completion status. */
static PyObject *wc_status_str(PyObject *module, PyObject *arg)
{
    (void)module;
    int status = (int)PyLong_AsLong(arg);
    if (status == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(pc_ibv_status(status));
}

static PyMethodDef xport_functions[] = {
    {"wc_status_str", wc_status_str, METH_O, "libibverbs' text for a completion status"},
    {NULL, NULL, 0, NULL},
};

int pc_add_xport(PyObject *module)
{
    /* mpi4py's C API is a table of pointers per C file: this file imports its own. */
    if (import_mpi4py() < 0 || PyType_Ready(&xport_type) < 0 || PyType_Ready(&mr_type) < 0 ||
        PyModule_AddObjectRef(module, "XPort", (PyObject *)&xport_type) < 0 ||
        PyModule_AddObjectRef(module, "MR", (PyObject *)&mr_type) < 0)
        return -1;
    return PyModule_AddFunctions(module, xport_functions);
}
