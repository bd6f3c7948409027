/* The core's structs as Python objects: the generic part (papcoll_pystruct.h says what an
 * object owns). Every field is read and set here, by the kind its declaration names, so a
 * pointer from Python is never trusted: memory comes as an object that is held, another
 * struct as its object, an MPI handle through mpi4py's C API. */
#include "papcoll_pystruct.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <mpi4py/mpi4py.h>

PyObject *pc_rc_of(int rc)
{
    return PyErr_Occurred() ? NULL : PyLong_FromLong(rc);
}

static PyObject *key_of(const void *where)
{
    return PyLong_FromVoidPtr((void *)where);
}

int pc_struct_hold(PcStruct *self, void *where, PyObject *obj)
{
    PyObject *key = key_of(where);
    if (key == NULL)
        return -1;
    int rc = obj != NULL ? PyDict_SetItem(self->held, key, obj) : 0;
    if (obj == NULL && PyDict_DelItem(self->held, key) < 0) {
        if (PyErr_ExceptionMatches(PyExc_KeyError))
            PyErr_Clear();
        else
            rc = -1;
    }
    Py_DECREF(key);
    return rc;
}

static PyObject *held_at(PcStruct *self, const void *where)
{
    PyObject *key = key_of(where);
    if (key == NULL)
        return NULL;
    PyObject *obj = PyDict_GetItemWithError(self->held, key);
    Py_DECREF(key);
    return obj != NULL ? Py_NewRef(obj) : PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
}

void *pc_struct_of(PyObject *obj, struct pc_stype *t, const char *what)
{
    if (PyObject_TypeCheck(obj, &t->type))
        return ((PcStruct *)obj)->mem;
    PyErr_Format(PyExc_TypeError, "%s must be a %s, not %s", what, t->type.tp_name,
                 Py_TYPE(obj)->tp_name);
    return NULL;
}

static PyObject *view(PcStruct *self, struct pc_stype *t, char *mem)
{
    PcStruct *v = PyObject_GC_New(PcStruct, &t->type);
    if (v == NULL)
        return NULL;
    v->mem = mem;
    v->owner = Py_NewRef(self->owner ? self->owner : (PyObject *)self);
    v->held = Py_NewRef(self->held);
    PyObject_GC_Track(v);
    return (PyObject *)v;
}

/* A (object, byte offset) pair's parts, or the object and 0. */
static int located(PyObject *value, PyObject **obj, Py_ssize_t *offset)
{
    *obj = value, *offset = 0;
    if (!PyTuple_Check(value))
        return 0;
    if (PyTuple_GET_SIZE(value) != 2) {
        PyErr_SetString(PyExc_TypeError, "a place in memory is an object or (object, offset)");
        return -1;
    }
    *obj = PyTuple_GET_ITEM(value, 0);
    *offset = PyLong_AsSsize_t(PyTuple_GET_ITEM(value, 1));
    return *offset == -1 && PyErr_Occurred() ? -1 : 0;
}

/* Where a PC_F_MEM or PC_F_BORROW value points (its object held in *keep for PC_F_MEM). */
static int memory(PyObject *value, int kind, const char *name, void **at, PyObject **keep)
{
    PyObject *obj;
    Py_ssize_t offset, len;
    if (located(value, &obj, &offset) < 0)
        return -1;
    char *base;
    volatile uint64_t *flags;
    size_t stride, n;
    if (pc_flags_of(obj, NULL, &flags, &stride, &n) == 0) {
        base = (char *)flags, len = (Py_ssize_t)(stride * n);
        *keep = Py_NewRef(obj);
    } else {
        Py_buffer b;
        if (pc_local_arg(obj, (kind & PC_F_WRITES) != 0, name, &b) < 0)
            return -1;
        base = b.buf, len = b.len;
        PyBuffer_Release(&b);
        *keep = (kind & 0xff) == PC_F_MEM ? PyMemoryView_FromObject(obj) : NULL;
        if ((kind & 0xff) == PC_F_MEM && *keep == NULL)
            return -1;
    }
    if (offset < 0 || (offset > len) || (offset == len && len > 0)) {
        Py_CLEAR(*keep);
        PyErr_Format(PyExc_IndexError, "%s: offset %zd outside its %zd bytes", name, offset, len);
        return -1;
    }
    *at = base + offset;
    return 0;
}

/* A sequence of n objects' identities or datatypes' handles, in a bytes object held with
 * the sequence. */
static int array_of(PyObject *value, int kind, const char *name, void **at, PyObject **keep)
{
    PyObject *seq = PySequence_Tuple(value);
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    PyObject *store = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(intptr_t));
    if (store == NULL) {
        Py_DECREF(seq);
        return -1;
    }
    intptr_t *a = (intptr_t *)PyBytes_AS_STRING(store);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyTuple_GET_ITEM(seq, i);
        if (kind == PC_F_OBJECTS) {
            a[i] = (intptr_t)item;
            continue;
        }
        MPI_Datatype *t = PyMPIDatatype_Get(item);
        if (t == NULL) {
            Py_DECREF(seq);
            Py_DECREF(store);
            return -1;
        }
        a[i] = (intptr_t)*t;
    }
    (void)name;
    *at = a;
    *keep = PyTuple_Pack(2, store, seq);
    Py_DECREF(store);
    Py_DECREF(seq);
    return *keep == NULL ? -1 : 0;
}

PyObject *pc_field_get(PyObject *obj, void *closure)
{
    PcStruct *self = (PcStruct *)obj;
    const struct pc_field *f = closure;
    char *p = self->mem + f->offset;
    switch (f->kind & 0xff) {
    case PC_F_INT:
        return PyLong_FromLong(*(int *)p);
    case PC_F_U32:
        return PyLong_FromUnsignedLong(*(uint32_t *)p);
    case PC_F_I64:
        return PyLong_FromLongLong(*(int64_t *)p);
    case PC_F_U64:
        return PyLong_FromUnsignedLongLong(*(uint64_t *)p);
    case PC_F_SIZE:
        return PyLong_FromSize_t(*(size_t *)p);
    case PC_F_SECONDS:
        return PyFloat_FromDouble(*(int64_t *)p * 1e-9);
    case PC_F_CHARS:
        return PyBytes_FromStringAndSize(p, (Py_ssize_t)strnlen(p, f->count));
    case PC_F_BORROW:
        return *(void **)p ? PyLong_FromVoidPtr(*(void **)p) : Py_NewRef(Py_None);
    case PC_F_EMBED: {
        struct pc_stype *t = (struct pc_stype *)f->type;
        if (f->count == 0)
            return view(self, t, p);
        PyObject *views = PyTuple_New((Py_ssize_t)f->count);
        for (size_t i = 0; views != NULL && i < f->count; i++) {
            PyObject *v = view(self, t, p + i * f->size);
            if (v == NULL)
                Py_CLEAR(views);
            else
                PyTuple_SET_ITEM(views, (Py_ssize_t)i, v);
        }
        return views;
    }
    case PC_F_STRUCT:
        if (f->count > 0) {
            PyObject *items = PyTuple_New((Py_ssize_t)f->count);
            for (size_t i = 0; items != NULL && i < f->count; i++) {
                PyObject *item = held_at(self, p + i * sizeof(void *));
                if (item == NULL)
                    Py_CLEAR(items);
                else
                    PyTuple_SET_ITEM(items, (Py_ssize_t)i, item);
            }
            return items;
        }
        return held_at(self, p);
    case PC_F_MEM: {
        PyObject *held = held_at(self, p);
        if (held != NULL && PyMemoryView_Check(held)) {
            PyObject *base = Py_NewRef(PyMemoryView_GET_BUFFER(held)->obj);
            Py_DECREF(held);
            return base;
        }
        return held;
    }
    default:                      /* the rest are Python objects held as given */
        return held_at(self, p);
    }
}

static int number(PyObject *value, int kind, const char *name, void *p)
{
    if (kind == PC_F_SECONDS)
        return pc_timeout_arg(value, p);
    if (kind == PC_F_U64)
        return pc_u64_arg(value, name, p);
    if (kind == PC_F_I64) {
        long long v = PyLong_AsLongLong(value);
        *(int64_t *)p = v;
        return v == -1 && PyErr_Occurred() ? -1 : 0;
    }
    if (kind == PC_F_SIZE) {
        size_t v = PyLong_AsSize_t(value);
        *(size_t *)p = v;
        return v == (size_t)-1 && PyErr_Occurred() ? -1 : 0;
    }
    long long v = PyLong_AsLongLong(value);
    if (v == -1 && PyErr_Occurred())
        return -1;
    if (kind == PC_F_U32 ? (v < 0 || v > UINT32_MAX) : (v < INT_MIN || v > INT_MAX)) {
        PyErr_Format(PyExc_OverflowError, "%s: %lld does not fit", name, v);
        return -1;
    }
    if (kind == PC_F_U32)
        *(uint32_t *)p = (uint32_t)v;
    else
        *(int *)p = (int)v;
    return 0;
}

/* Set one pointer of a pointer kind from value (None: NULL). */
static int pointer(PcStruct *self, const struct pc_field *f, void **p, PyObject *value,
                   const char *name)
{
    int kind = f->kind & 0xff;
    void *at = NULL;
    PyObject *keep = NULL;
    if (value == Py_None)
        ;
    else if (kind == PC_F_MEM || kind == PC_F_BORROW) {
        if (memory(value, f->kind, name, &at, &keep) < 0)
            return -1;
    } else if (kind == PC_F_STRUCT) {
        if ((at = pc_struct_of(value, (struct pc_stype *)f->type, name)) == NULL)
            return -1;
        keep = Py_NewRef(value);
    } else if (kind == PC_F_XPORT) {
        if ((at = pc_xport_of(value, name)) == NULL)
            return -1;
        keep = Py_NewRef(value);
    } else if (kind == PC_F_OBJECT) {
        at = value, keep = Py_NewRef(value);
    } else if (array_of(value, kind, name, &at, &keep) < 0)
        return -1;
    int rc = pc_struct_hold(self, p, keep);
    Py_XDECREF(keep);
    if (rc == 0)
        *p = at;
    return rc;
}

static int handle(PyObject *value, int kind, intptr_t *p, PcStruct *self)
{
    intptr_t h = 0;
    if (value != Py_None) {
        if (kind == PC_F_COMM) {
            MPI_Comm *c = PyMPIComm_Get(value);
            if (c == NULL)
                return -1;
            h = (intptr_t)*c;
        } else {
            MPI_Datatype *t = PyMPIDatatype_Get(value);
            if (t == NULL)
                return -1;
            h = (intptr_t)*t;
        }
    }
    if (pc_struct_hold(self, p, value == Py_None ? NULL : value) < 0)
        return -1;
    *p = h;
    return 0;
}

int pc_field_set(PyObject *obj, PyObject *value, void *closure)
{
    PcStruct *self = (PcStruct *)obj;
    const struct pc_field *f = closure;
    char *p = self->mem + f->offset;
    int kind = f->kind & 0xff;
    if (value == NULL || (f->kind & PC_F_LOCKED) || kind == PC_F_CHARS || kind == PC_F_EMBED) {
        PyErr_Format(PyExc_AttributeError, "%s is not set from Python", f->name);
        return -1;
    }
    switch (kind) {
    case PC_F_INT: case PC_F_U32: case PC_F_I64: case PC_F_U64: case PC_F_SIZE:
    case PC_F_SECONDS:
        return number(value, kind, f->name, p);
    case PC_F_COMM: case PC_F_DATATYPE:
        return handle(value, kind, (intptr_t *)p, self);
    case PC_F_STRUCT:
        if (f->count > 0) {
            PyObject *seq = PySequence_Fast(value, "an array of structs is set from a sequence");
            if (seq == NULL)
                return -1;
            int rc = PySequence_Fast_GET_SIZE(seq) <= (Py_ssize_t)f->count ? 0 : -1;
            if (rc < 0)
                PyErr_Format(PyExc_ValueError, "at most %zu structs", f->count);
            for (size_t i = 0; rc == 0 && i < f->count; i++)
                rc = pointer(self, f, (void **)p + i,
                             (Py_ssize_t)i < PySequence_Fast_GET_SIZE(seq)
                                 ? PySequence_Fast_GET_ITEM(seq, (Py_ssize_t)i) : Py_None,
                             f->name);
            Py_DECREF(seq);
            return rc;
        }
        /* fall through */
    default:
        return pointer(self, f, (void **)p, value, f->name);
    }
}

static PyObject *stype_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    (void)args, (void)kwds;
    PcStruct *self = (PcStruct *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->mem = calloc(1, ((struct pc_stype *)type)->size);
    self->held = PyDict_New();
    if (self->mem == NULL || self->held == NULL) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    return (PyObject *)self;
}

/* Fields by keyword: Type(name=value, ...). */
static int stype_init(PyObject *self, PyObject *args, PyObject *kwds)
{
    if (PyTuple_GET_SIZE(args) > 0) {
        PyErr_Format(PyExc_TypeError, "%s takes its fields by keyword", Py_TYPE(self)->tp_name);
        return -1;
    }
    PyObject *key, *value;
    Py_ssize_t i = 0;
    while (kwds != NULL && PyDict_Next(kwds, &i, &key, &value))
        if (PyObject_SetAttr(self, key, value) < 0)
            return -1;
    return 0;
}

static int stype_traverse(PcStruct *self, visitproc visit, void *arg)
{
    Py_VISIT(self->owner);
    Py_VISIT(self->held);
    return 0;
}

static int stype_clear(PcStruct *self)
{
    Py_CLEAR(self->owner);
    Py_CLEAR(self->held);
    return 0;
}

static void stype_dealloc(PcStruct *self)
{
    PyObject_GC_UnTrack(self);
    if (self->owner == NULL)
        free(self->mem);          /* before what it points into: nothing reads it after */
    self->mem = NULL;
    stype_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

int pc_stype_add(PyObject *module, struct pc_stype *t, const char *name)
{
    static int imported;
    if (!imported && import_mpi4py() < 0)   /* the C API's table is per C file */
        return -1;
    imported = 1;
    PyTypeObject *type = &t->type;
    type->tp_basicsize = sizeof(PcStruct);
    type->tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC;
    type->tp_new = stype_new;
    type->tp_init = stype_init;
    type->tp_traverse = (traverseproc)stype_traverse;
    type->tp_clear = (inquiry)stype_clear;
    type->tp_dealloc = (destructor)stype_dealloc;
    for (PyMethodDef *m = type->tp_methods; m != NULL && m->ml_name != NULL; m++)
        for (PyGetSetDef *g = type->tp_getset; g->name != NULL; g++)
            if (strcmp(m->ml_name, g->name) == 0) {
                PyErr_Format(PyExc_SystemError, "%s: %s is a field and a method", name,
                             g->name);
                return -1;
            }
    if (PyType_Ready(type) < 0)
        return -1;
    return PyModule_AddObjectRef(module, name, (PyObject *)type);
}
