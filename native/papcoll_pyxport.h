/* papcoll._native.XPort's object (papcoll_pyxport.c: the transport, its memory, its MPI
 * half) and what its verbs half (papcoll_pyverbs.c: resources, connection, registrations,
 * the MR type) shares with it. */
#ifndef PAPCOLL_PYXPORT_H
#define PAPCOLL_PYXPORT_H

#include "papcoll_call.h"
#include "papcoll_ibv.h"

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

/* Whether the transport is open (else a ValueError); whether peer is one of its peers (else
 * an IndexError). */
int pc_xport_usable(XPort *self);
int pc_xport_peer_arg(XPort *self, Py_ssize_t peer);
/* Hold a view of obj's memory (contiguous, writable if asked) for as long as x may use it:
 * its buffer, or NULL with a Python error. */
Py_buffer *pc_xport_hold(XPort *self, PyObject *obj, int writable, const char *what);

/* XPort's verbs methods (papcoll_pyverbs.c). */
PyObject *pc_xport_open_verbs(XPort *self, PyObject *args);
PyObject *pc_xport_verbs_info(XPort *self, PyObject *unused);
PyObject *pc_xport_connect(XPort *self, PyObject *args);
PyObject *pc_xport_set_peer(XPort *self, PyObject *args);
PyObject *pc_xport_register(XPort *self, PyObject *args);
/* Deregister every live registration of self (its close: before the PD goes). */
void pc_xport_drop_mrs(XPort *self);
/* Add the MR type and wc_status_str to the module. */
int pc_add_verbs(PyObject *module);

#endif
