/* The engine's calls and the plans as Python types (papcoll_pystruct.h says how a type is
 * declared; papcoll_xport.h and papcoll_plan.h what the fields mean), and the registration of
 * every struct type of the module. */
#include "papcoll_pystruct.h"

#include <errno.h>
#include <string.h>

#include "papcoll_plan.h"

_Static_assert(sizeof(intptr_t) == sizeof(int64_t), "handles and bounds are read as int64");

/* ---- struct pc_xcall: the engine's call -------------------------------------------------- */

#define S struct pc_xcall
static PyGetSetDef xcall_fields[] = {
    PC_FIELD(S, x, PC_F_XPORT), PC_FIELD(S, scheme, PC_F_INT), PC_FIELD(S, epoch, PC_F_U64),
    PC_FIELD(S, adverts, PC_F_U64), PC_FIELD(S, sig, PC_F_U64), PC_FIELD(S, code, PC_F_U32),
    PC_FIELD(S, expected, MEMW), PC_FIELD(S, src, PC_F_BORROW), PC_FIELD(S, src_off, MEM),
    PC_FIELD(S, len, MEM), PC_FIELD(S, dst_off, MEM), PC_FIELD(S, lkey, PC_F_U32),
    PC_FIELD(S, inbox, MEM), PC_FIELD(S, out, PC_F_BORROW | PC_F_WRITES),
    PC_FIELD(S, in_off, MEM), PC_FIELD(S, out_off, MEM), PC_FIELD(S, out_len, MEM),
    PC_FIELD(S, record, MEMW), PC_FIELD(S, record_lkey, PC_F_U32),
    PC_FIELD(S, advert_area, MEM), PC_FIELD(S, unsent, MEMW), PC_FIELD(S, waiting, MEMW),
    PC_FIELD(S, next, LOCKED(PC_F_SIZE)), PC_FIELD(S, advertised, PC_F_INT),
    PC_FIELD(S, events, MEMW), PC_FIELD(S, nevents, PC_F_SIZE),
    PC_FIELD(S, max_events, PC_F_SIZE), PC_FIELD(S, failed_in, PC_F_INT),
    PC_FIELD(S, failed_peer, PC_F_SIZE), PC_FIELD(S, failed_sig, PC_F_U64),
    PC_FIELD(S, failed_code, PC_F_U32), PC_FIELD(S, failed_len, PC_F_U32),
    PC_FIELD(S, via_inbox, MEM), PC_FIELD(S, advertise, MEM), PC_FIELD(S, expect_len, MEM),
    PC_FIELD(S, record_epoch, PC_F_U64), PC_FIELD(S, notice_only, PC_F_INT),
    PC_FIELD(S, records, MEMW), {NULL}};
#undef S

/* A call whose transport is set: the struct, or NULL with a ValueError. */
static struct pc_xcall *xcall_of(PyObject *self)
{
    struct pc_xcall *c = MEM_OF(self);
    if (c->x == NULL)
        PyErr_SetString(PyExc_ValueError, "the call has no transport");
    return c->x ? c : NULL;
}

/* run(timeout): pc_xcall_run. */
static PyObject *xcall_run(PyObject *self, PyObject *timeout)
{
    struct pc_xcall *c = xcall_of(self);
    int64_t ns;
    if (c == NULL || pc_timeout_arg(timeout, &ns) < 0)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pc_xcall_run(c, ns);
    Py_END_ALLOW_THREADS
    return pc_rc_of(rc);
}

/* start(epoch, adverts, sig, code, block=-1): pc_xcall_start. */
static PyObject *xcall_start(PyObject *self, PyObject *args)
{
    struct pc_xcall *c = xcall_of(self);
    unsigned long long epoch, adverts, sig;
    unsigned int code;
    long long block = -1;
    if (c == NULL || !PyArg_ParseTuple(args, "KKKI|L:start", &epoch, &adverts, &sig, &code,
                                       &block))
        return NULL;
    pc_xcall_start(c, epoch, adverts, sig, code, block);
    Py_RETURN_NONE;
}

/* advert(record, address, nbytes, rkey): pc_xcall_advert (address: the region of my receive
 * buffer a peer writes to, which the record carries; never read here). */
static PyObject *xcall_advert(PyObject *self, PyObject *args)
{
    struct pc_xcall *c = xcall_of(self);
    Py_ssize_t record;
    unsigned long long address, nbytes;
    unsigned int rkey;
    if (c == NULL || !PyArg_ParseTuple(args, "nKKI:advert", &record, &address, &nbytes, &rkey))
        return NULL;
    if (record < 0 || (record > 0 && (size_t)record >= c->x->n)) {
        PyErr_Format(PyExc_IndexError, "no advert record %zd", record);
        return NULL;
    }
    pc_xcall_advert(c, (size_t)record, address, nbytes, rkey);
    Py_RETURN_NONE;
}

/* advertise_recv(first, same, address, nbytes, rkey): pc_xcall_advertise, on the records cell
 * the call was given. */
static PyObject *xcall_advertise(PyObject *self, PyObject *args)
{
    struct pc_xcall *c = xcall_of(self);
    unsigned long long first, address, nbytes;
    int same;
    unsigned int rkey;
    if (c == NULL || !PyArg_ParseTuple(args, "KpKKI:advertise_recv", &first, &same, &address,
                                       &nbytes, &rkey))
        return NULL;
    if (c->records == NULL) {
        PyErr_SetString(PyExc_ValueError, "the call has no records cell");
        return NULL;
    }
    pc_xcall_advertise(c, first, same, address, nbytes, rkey);
    Py_RETURN_NONE;
}

/* arrived(peer): pc_xcall_arrived. */
static PyObject *xcall_arrived(PyObject *self, PyObject *arg)
{
    struct pc_xcall *c = xcall_of(self);
    Py_ssize_t peer = c ? PyLong_AsSsize_t(arg) : -1;
    if (c == NULL || (peer == -1 && PyErr_Occurred()))
        return NULL;
    if (peer < 0 || (size_t)peer >= c->x->n) {
        PyErr_Format(PyExc_IndexError, "no peer %zd", peer);
        return NULL;
    }
    return pc_rc_of(pc_xcall_arrived(c, (size_t)peer));
}

static PyMethodDef xcall_methods[] = {
    {"run", xcall_run, METH_O, NULL}, {"start", xcall_start, METH_VARARGS, NULL},
    {"advert", xcall_advert, METH_VARARGS, NULL},
    {"advertise_recv", xcall_advertise, METH_VARARGS, NULL},
    {"arrived", xcall_arrived, METH_O, NULL}, {NULL}};

/* ---- struct pc_vshape, struct pc_plan ---------------------------------------------------- */

#define S struct pc_vshape
static PyGetSetDef vshape_fields[] = {
    PC_FIELD(S, nbytes, LOCKED(PC_F_I64)), PC_FIELD(S, itemsize, LOCKED(PC_F_I64)),
    PC_FIELD(S, format, PC_F_CHARS, .count = 16), PC_FIELD(S, datatype, PC_F_OBJECT),
    PC_FIELD(S, displs_given, PC_F_INT), PC_FIELD(S, counts, MEM), PC_FIELD(S, displs, MEM),
    PC_FIELD(S, icounts, MEM), PC_FIELD(S, idispls, MEM),
    PC_FIELD(S, mpi_type, PC_F_DATATYPE), PC_FIELD(S, datatypes, PC_F_OBJECTS),
    PC_FIELD(S, mpi_types, PC_F_DATATYPES), PC_FIELD(S, staging, MEMW),
    PC_FIELD(S, move_at, MEM), PC_FIELD(S, move_off, MEM), PC_FIELD(S, move_len, MEM),
    PC_FIELD(S, move_count, MEM), PC_FIELD(S, move_type, PC_F_DATATYPES), {NULL}};
#undef S

#define S struct pc_plan
static PyGetSetDef plan_fields[] = {
    PC_FIELD(S, kind, PC_F_INT), PC_FIELD(S, armed, PC_F_INT),
    PC_FIELD(S, nbytes, LOCKED(PC_F_I64)), PC_FIELD(S, datatype, LOCKED(PC_F_BORROW)),
    PC_FIELD(S, n, PC_F_I64),
    PC_FIELD_AS(S, timeout_ns, "timeout", PC_F_SECONDS),
    PC_FIELD_AS(S, slice_ns, "slice", PC_F_SECONDS),
    PC_FIELD(S, sig, LOCKED(PC_F_U64)), PC_FIELD(S, epoch, MEMW),
    PC_FIELD(S, x, PC_F_STRUCT, .type = &pc_exchange_type.type), PC_FIELD(S, start, PC_F_SIZE),
    PC_FIELD(S, calls, PC_F_STRUCT, .type = &pc_xcall_type.type, .count = 2),
    PC_FIELD(S, adverts, MEMW), PC_FIELD(S, spare, MEMW), PC_FIELD(S, first, MEMW),
    PC_FIELD(S, recv_at, PC_F_U64),
    PC_FIELD(S, recv_bytes, PC_F_U64), PC_FIELD(S, send_at, PC_F_U64),
    PC_FIELD(S, rkey, PC_F_U32), PC_FIELD(S, lkey, PC_F_U32), PC_FIELD(S, comm, PC_F_COMM),
    PC_FIELD(S, round, MEMW), PC_FIELD(S, xepoch, MEMW),
    PC_FIELD(S, rounds, PC_F_STRUCT, .type = &pc_hier_type.type, .count = 4),
    PC_FIELD(S, vshape, PC_F_EMBED, .type = &pc_vshape_type.type, .count = 2,
             .size = sizeof(struct pc_vshape)),
    {NULL}};
#undef S

struct pc_plan *pc_plan_of(PyObject *arg)
{
    return pc_struct_of(arg, &pc_plan_type, "a plan");
}

/* ---- advert records (struct pc_advert), for tests of a transport by itself ---------------- */

/* advert_record(addr, bytes, rkey, epoch, sig) -> the record's bytes. */
static PyObject *advert_record(PyObject *module, PyObject *args)
{
    (void)module;
    struct pc_advert a = {0};
    unsigned long long addr, bytes, epoch, sig;
    unsigned int rkey;
    if (!PyArg_ParseTuple(args, "KKIKK:advert_record", &addr, &bytes, &rkey, &epoch, &sig))
        return NULL;
    a.addr = addr, a.bytes = bytes, a.rkey = rkey, a.epoch = epoch, a.sig = sig;
    return PyBytes_FromStringAndSize((const char *)&a, sizeof a);
}

/* advert_fields(record) -> (addr, bytes, rkey, epoch, sig) of a record's bytes. */
static PyObject *advert_fields(PyObject *module, PyObject *record)
{
    (void)module;
    Py_buffer b;
    if (pc_local_arg(record, 0, "record", &b) < 0)
        return NULL;
    struct pc_advert a;
    int whole = b.len == (Py_ssize_t)sizeof a;
    if (whole)
        memcpy(&a, b.buf, sizeof a);
    PyBuffer_Release(&b);
    if (!whole)
        return PyErr_Format(PyExc_ValueError, "an advert record is %d bytes", PC_ADVERT_BYTES);
    return Py_BuildValue("KKIKK", (unsigned long long)a.addr, (unsigned long long)a.bytes,
                         a.rkey, (unsigned long long)a.epoch, (unsigned long long)a.sig);
}

static PyMethodDef advert_functions[] = {
    {"advert_record", advert_record, METH_VARARGS, NULL},
    {"advert_fields", advert_fields, METH_O, NULL}, {NULL}};


STYPE(pc_xcall_type, pc_xcall, "XCall", xcall_fields, xcall_methods);
STYPE(pc_vshape_type, pc_vshape, "VShape", vshape_fields, NULL);
STYPE(pc_plan_type, pc_plan, "Plan", plan_fields, NULL);

/* Every struct type of the module (these and papcoll_pyloops.c's), and the advert records'
 * functions. */
int pc_add_structs(PyObject *module)
{
    struct {
        struct pc_stype *t;
        const char *name;
    } types[] = {{&pc_sources_type, "Sources"}, {&pc_copies_type, "Copies"}, {&pc_step_type, "Step"},
                 {&pc_exchange_type, "Exchange"}, {&pc_xcall_type, "XCall"},
                 {&pc_sched_type, "Sched"}, {&pc_hier_type, "Hier"}, {&pc_vshape_type, "VShape"},
                 {&pc_plan_type, "Plan"}};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (pc_stype_add(module, types[i].t, types[i].name) < 0)
            return -1;
    return PyModule_AddFunctions(module, advert_functions) < 0 ||
                   PyModule_AddIntConstant(module, "ADVERT_BYTES", PC_ADVERT_BYTES) < 0
               ? -1 : 0;
}
