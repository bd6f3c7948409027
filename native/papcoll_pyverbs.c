/* papcoll._native.XPort's verbs half: its resources (pc_ibv_open), the connection of its
 * QPs, where its peers' memory is, and its registrations, the MR type.
 *
 * An MR holds a reference to its XPort (the PD outlives it) but none to its buffer: the
 * registration caches (transport/regcache.py) drop it when the buffer's owner dies, so a
 * registration never keeps a user's buffer alive. */
#include "papcoll_pyxport.h"

#include <structmember.h>
#include <errno.h>

static PyTypeObject mr_type;

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
PyObject *pc_xport_open_verbs(XPort *self, PyObject *args)
{
    const char *device, *what = "";
    int port, gid_index;
    unsigned int sends, recvs;
    PyObject *fixed, *inbox;
    if (!PyArg_ParseTuple(args, "siiOOII:open_verbs", &device, &port, &gid_index, &fixed,
                          &inbox, &sends, &recvs) || !pc_xport_usable(self))
        return NULL;
    if (self->x.kind != PC_VERBS || self->ibv.ctx != NULL)
        return PyErr_Format(PyExc_ValueError, "open_verbs: not a fresh verbs transport");
    Py_buffer *f = pc_xport_hold(self, fixed, 1, "fixed memory");
    Py_buffer *i = f == NULL || inbox == Py_None ? NULL : pc_xport_hold(self, inbox, 1, "inbox");
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
PyObject *pc_xport_verbs_info(XPort *self, PyObject *unused)
{
    (void)unused;
    struct pc_ibv *v = &self->ibv;
    if (!pc_xport_usable(self))
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
PyObject *pc_xport_connect(XPort *self, PyObject *args)
{
    Py_ssize_t peer;
    unsigned int qp_num, psn, lid;
    const char *gid, *what = "";
    Py_ssize_t gid_len;
    if (!PyArg_ParseTuple(args, "nIIy#I:connect", &peer, &qp_num, &psn, &gid, &gid_len, &lid) ||
        !pc_xport_usable(self) || !pc_xport_peer_arg(self, peer))
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
PyObject *pc_xport_set_peer(XPort *self, PyObject *args)
{
    Py_ssize_t peer;
    unsigned int adverts_rkey, inbox_rkey;
    unsigned long long adverts_addr, inbox_addr, inbox_bytes;
    if (!PyArg_ParseTuple(args, "n(KI)(KI)K:set_peer", &peer, &adverts_addr, &adverts_rkey,
                          &inbox_addr, &inbox_rkey, &inbox_bytes) || !pc_xport_usable(self) ||
        !pc_xport_peer_arg(self, peer))
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
PyObject *pc_xport_register(XPort *self, PyObject *args)
{
    PyObject *buffer;
    int remote = 0;
    Py_buffer b;
    if (!PyArg_ParseTuple(args, "O|p:register", &buffer, &remote) || !pc_xport_usable(self) ||
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

void pc_xport_drop_mrs(XPort *self)
{
    for (MR *m = self->mrs; m != NULL; m = m->next) {
        pc_ibv_deregister(m->mr);
        m->mr = NULL;
    }
}

#define METH(name, f, flags, doc) {name, (PyCFunction)(void (*)(void))(f), flags, doc}

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

int pc_add_verbs(PyObject *module)
{
    if (PyType_Ready(&mr_type) < 0 ||
        PyModule_AddObjectRef(module, "MR", (PyObject *)&mr_type) < 0)
        return -1;
    return PyModule_AddFunctions(module, xport_functions);
}
