/* The core's structs as Python objects (papcoll_pystruct.c): one generic type machinery, and
 * each struct declared once, field by field, from its C declaration by offsetof
 * (papcoll_pyloops.c, papcoll_pytypes.c). No layout is mirrored in Python.
 *
 * An object owns its struct's memory (or, for a struct embedded in another, is a view that
 * holds the object whose memory it lies in) and every object a pointer field points into:
 * setting the field holds the new one and drops the old. Collection frees the memory after
 * nothing in C can use it (no C runs on a struct while Python can collect it), so the order
 * in which a process drops its objects does not matter. */
#ifndef PAPCOLL_PYSTRUCT_H
#define PAPCOLL_PYSTRUCT_H

#include "papcoll_call.h"

/* What a field holds, and what Python gives it. */
enum pc_field_kind {
    PC_F_INT, PC_F_U32, PC_F_I64, PC_F_U64, PC_F_SIZE,  /* a number */
    PC_F_SECONDS,   /* int64_t ns, given and read as seconds (finite, >= 0) */
    PC_F_CHARS,     /* char[count], read only */
    PC_F_MEM,       /* a pointer into memory held here: a contiguous buffer object (writable
                     * with PC_F_WRITES), a Flags (its flag 0), or (either, byte offset) */
    PC_F_BORROW,    /* a pointer to the buffer of the call in progress: its address only (the
                     * caller holds the buffer while the call runs; nothing outlives it) */
    PC_F_STRUCT,    /* a pointer to another struct object of `type`, held; count > 1: an
                     * array of them, given as a sequence (None: NULL) */
    PC_F_EMBED,     /* a struct of `type` inside this one (count > 1: an array): views */
    PC_F_XPORT,     /* an XPort's struct pc_xport, held */
    PC_F_OBJECT,    /* a Python object's identity (void *), held */
    PC_F_OBJECTS,   /* a sequence of objects' identities (void *const *), held */
    PC_F_DATATYPE,  /* an mpi4py Datatype's handle value (intptr_t), held */
    PC_F_DATATYPES, /* a sequence of them (const intptr_t *), held */
    PC_F_COMM,      /* an mpi4py Comm's handle value (intptr_t), held */
};
#define PC_F_WRITES 0x100  /* or-ed into a PC_F_MEM kind: C writes there */
#define PC_F_LOCKED 0x200  /* or-ed into any kind: C sets it, Python only reads */

struct pc_field {
    const char *name;
    size_t offset;
    int kind;
    PyTypeObject *type;  /* PC_F_STRUCT, PC_F_EMBED */
    size_t count;        /* arrays (0: one); PC_F_CHARS: its bytes */
    size_t size;         /* PC_F_EMBED: one element's bytes */
};

/* A getset entry for field f of struct S (one line per field in the type files); PC_FIELD_AS
 * names it otherwise in Python (a time in seconds whose C field counts ns). */
#define PC_FIELD_AS(S, f, pyname, k, ...)                                               \
    {pyname, pc_field_get, pc_field_set, NULL,                                          \
     &(struct pc_field){.name = pyname, .offset = offsetof(S, f), .kind = (k), __VA_ARGS__}}
#define PC_FIELD(S, f, k, ...) PC_FIELD_AS(S, f, #f, k, __VA_ARGS__)

/* A struct type: its Python type first, then its C struct's size. */
struct pc_stype {
    PyTypeObject type;
    size_t size;
};

typedef struct {
    PyObject_HEAD
    char *mem;           /* the struct */
    PyObject *owner;     /* the object whose memory holds mem (a view), or NULL: mem is ours */
    PyObject *held;      /* dict: a pointer field's address -> what it points into (the root
                          * object's, shared by its views) */
} PcStruct;

/* Shorthands of the type files (papcoll_pyloops.c, papcoll_pytypes.c). */
#define MEM PC_F_MEM
#define MEMW (PC_F_MEM | PC_F_WRITES)
#define LOCKED(k) ((k) | PC_F_LOCKED)
#define MEM_OF(self) ((void *)((PcStruct *)(self))->mem)
/* A struct type: struct S as papcoll._native.pyname, its fields and methods. */
#define STYPE(var, S, pyname, fields, methods)                                         \
    struct pc_stype var = {                                                             \
        {PyVarObject_HEAD_INIT(NULL, 0).tp_name = "papcoll._native." pyname,            \
         .tp_doc = "struct " #S ": its fields by keyword (native/papcoll_py*.c)",       \
         .tp_getset = fields, .tp_methods = methods},                                   \
        sizeof(struct S)}

extern struct pc_stype pc_sources_type, pc_copies_type, pc_step_type, pc_exchange_type,
    pc_sched_type, pc_hier_type, pc_xcall_type, pc_vshape_type, pc_plan_type;

/* A C function's rc as a Python int, or NULL when it left a Python error. */
PyObject *pc_rc_of(int rc);

PyObject *pc_field_get(PyObject *self, void *closure);
int pc_field_set(PyObject *self, PyObject *value, void *closure);

/* Ready a struct type (generic new, init by keywords, collection) and add it to module. */
int pc_stype_add(PyObject *module, struct pc_stype *t, const char *name);
/* The struct of obj when it is of type t (else a TypeError naming what): or NULL. */
void *pc_struct_of(PyObject *obj, struct pc_stype *t, const char *what);
/* Hold obj for the field at address where in self's struct (NULL: drop): 0 or -1. */
int pc_struct_hold(PcStruct *self, void *where, PyObject *obj);

/* XPort's struct pc_xport (papcoll_pyxport.c); Flags' base, stride and size
 * (papcoll_pyflags.c): NULL / -1 with a TypeError naming what when obj is not one. */
struct pc_xport *pc_xport_of(PyObject *obj, const char *what);
int pc_flags_of(PyObject *obj, const char *what, volatile uint64_t **base, size_t *stride,
                size_t *size);
int pc_add_structs(PyObject *module);

#endif
