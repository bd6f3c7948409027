/* papcoll._native's plain functions: the clock, Cross Memory Attach, MPI's packing, the
 * check that this build's MPI is mpi4py's and a DLPack tensor's element type.
 *
 * Each decodes its arguments once, here: local memory comes as a buffer object, held for the
 * call (a pointer from Python is never trusted), another process's memory as an address (it
 * has no object here), an MPI datatype as an mpi4py object, through mpi4py's C API. Copies
 * run with the GIL released. They return the C core's result; papcoll/native/cma.py turns a
 * -errno into the error that names the process and the address.
 */
#include "papcoll_call.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>

#include <mpi4py/mpi4py.h>

#include "papcoll_dlpack.h"
#include "papcoll_native.h"

static int pid_arg(PyObject *value, pid_t *pid)
{
    long p = PyLong_AsLong(value);
    if (p == -1 && PyErr_Occurred())
        return -1;
    if (p <= 0 || p > INT_MAX) {
        PyErr_Format(PyExc_ValueError, "pid must be a positive process id, not %ld", p);
        return -1;
    }
    *pid = (pid_t)p;
    return 0;
}

/* keep(obj): a reference to obj that nothing drops, not even the interpreter's shutdown
 * (transport/base.py's keep says why). */
static PyObject *keep(PyObject *module, PyObject *obj)
{
    (void)module;
    Py_INCREF(obj);
    Py_RETURN_NONE;
}

static PyObject *wait_counts(PyObject *module, PyObject *unused)
{
    (void)module, (void)unused;
    const struct pc_wait_counts *c = pc_wait_counts();
    return Py_BuildValue("(KKK)", c->looks, c->yields, c->sleeps);
}

static PyObject *now_ns(PyObject *module, PyObject *unused)
{
    (void)module, (void)unused;
    return PyLong_FromLongLong(pc_now_ns());
}

/* cma_copy(pid, local, remote, write): all of local from (write: to) address remote in pid;
 * the byte count or -errno. */
static PyObject *cma_copy(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    pid_t pid;
    uint64_t remote;
    Py_buffer b;
    if (!pc_nargs("cma_copy", nargs, 4, 4) || pid_arg(args[0], &pid) < 0 ||
        pc_u64_arg(args[2], "remote address", &remote) < 0)
        return NULL;
    int write = PyObject_IsTrue(args[3]);
    if (write < 0 || pc_local_arg(args[1], !write, "local", &b) < 0)
        return NULL;
    ssize_t rc;
    Py_BEGIN_ALLOW_THREADS
    rc = write ? pc_cma_write(pid, b.buf, (void *)(uintptr_t)remote, (size_t)b.len)
               : pc_cma_read(pid, b.buf, (const void *)(uintptr_t)remote, (size_t)b.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    return PyLong_FromSsize_t(rc);
}

/* A 1-D contiguous vector of size_t (numpy uintp). */
static int sizes_arg(PyObject *obj, const char *what, Py_buffer *b)
{
    if (PyObject_GetBuffer(obj, b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    if (b->itemsize == sizeof(size_t) && b->ndim == 1)
        return 0;
    PyErr_Format(PyExc_TypeError, "%s must be a one-dimensional uintp array", what);
    PyBuffer_Release(b);
    return -1;
}

/* cma_vector(pid, local, offsets, remotes, lengths, write): segment i between local[offsets[i]:]
 * and remotes[i] in pid, lengths[i] bytes: (total or -errno, index of the failing segment).
 * Every segment is checked to lie inside local before any is copied. */
static PyObject *cma_vector(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    pid_t pid;
    Py_buffer b, v[3] = {{0}};
    static const char *names[] = {"local_offsets", "remote_addrs", "lengths"};
    if (!pc_nargs("cma_vector", nargs, 6, 6) || pid_arg(args[0], &pid) < 0)
        return NULL;
    int write = PyObject_IsTrue(args[5]);
    if (write < 0 || pc_local_arg(args[1], !write, "local", &b) < 0)
        return NULL;
    PyObject *result = NULL;
    int held = 0;
    while (held < 3 && sizes_arg(args[2 + held], names[held], &v[held]) == 0)
        held++;
    if (held < 3)
        goto out;
    size_t n = (size_t)v[0].shape[0], *offsets = v[0].buf, *lengths = v[2].buf;
    if ((size_t)v[1].shape[0] != n || (size_t)v[2].shape[0] != n) {
        PyErr_Format(PyExc_ValueError, "local_offsets, remote_addrs and lengths differ in length "
                     "(%zd, %zd, %zd)", v[0].shape[0], v[1].shape[0], v[2].shape[0]);
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        if (lengths[i] > (size_t)b.len || offsets[i] > (size_t)b.len - lengths[i]) {
            PyErr_Format(PyExc_ValueError, "segment %zu (offset %zu, length %zu) exceeds the "
                         "%zd-byte local buffer", i, offsets[i], lengths[i], b.len);
            goto out;
        }
    uintptr_t *local = malloc((n ? n : 1) * sizeof *local);
    if (local == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        local[i] = (uintptr_t)b.buf + offsets[i];
    size_t failed = 0;
    ssize_t rc;
    Py_BEGIN_ALLOW_THREADS
    rc = (write ? pc_cma_writev : pc_cma_readv)(pid, n, local, v[1].buf, lengths, &failed);
    Py_END_ALLOW_THREADS
    free(local);
    result = Py_BuildValue("nn", (Py_ssize_t)rc, (Py_ssize_t)failed);
out:
    while (held > 0)
        PyBuffer_Release(&v[--held]);
    PyBuffer_Release(&b);
    return result;
}

/* cma_probe(pid, local or None, remote, count, length, stride, times): pc_cma_probe, one
 * call per int64 of times; its rc. */
static PyObject *cma_probe(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    pid_t pid;
    uint64_t remote;
    Py_ssize_t count, length, stride;
    Py_buffer local = {0}, times;
    if (!pc_nargs("cma_probe", nargs, 7, 7) || pid_arg(args[0], &pid) < 0 ||
        pc_u64_arg(args[2], "remote address", &remote) < 0)
        return NULL;
    count = PyLong_AsSsize_t(args[3]);
    length = PyLong_AsSsize_t(args[4]);
    stride = PyLong_AsSsize_t(args[5]);
    if (PyErr_Occurred())
        return NULL;
    if (count < 0 || count > IOV_MAX || length < 0 || stride < 0) {
        PyErr_Format(PyExc_ValueError, "need 0 <= riov_count <= %d, riov_len >= 0, riov_stride "
                     ">= 0 (got %zd, %zd, %zd)", IOV_MAX, count, length, stride);
        return NULL;
    }
    if (pc_local_arg(args[6], 1, "times", &times) < 0)
        return NULL;
    if (times.len < 8) {
        PyBuffer_Release(&times);
        PyErr_SetString(PyExc_ValueError, "times must hold at least one int64");
        return NULL;
    }
    if (args[1] != Py_None && pc_local_arg(args[1], 1, "local", &local) < 0) {
        PyBuffer_Release(&times);
        return NULL;
    }
    ssize_t rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pc_cma_probe(pid, local.buf, (size_t)local.len, (uintptr_t)remote, (size_t)count,
                      (size_t)length, (size_t)stride, (size_t)times.len / 8, times.buf);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&times);
    if (local.obj != NULL)
        PyBuffer_Release(&local);
    return PyLong_FromSsize_t(rc);
}

static PyObject *allow_ptrace_any(PyObject *module, PyObject *unused)
{
    (void)module, (void)unused;
    return PyLong_FromLong(pc_allow_ptrace_any());
}

static PyObject *drop_ptrace_any(PyObject *module, PyObject *unused)
{
    (void)module, (void)unused;
    return PyLong_FromLong(pc_drop_ptrace_any());
}

/* inbox_slot(bank, n, q, slot): pc_inbox_slot, the inbox's one layout. */
static PyObject *inbox_slot(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    uint64_t a[4];
    static const char *names[] = {"bank", "n", "q", "slot"};
    if (!pc_nargs("inbox_slot", nargs, 4, 4))
        return NULL;
    for (int i = 0; i < 4; i++)
        if (pc_u64_arg(args[i], names[i], &a[i]) < 0)
            return NULL;
    return PyLong_FromUnsignedLongLong(pc_inbox_slot(a[0], a[1], a[2], a[3]));
}

/* notice_current(word, seq): pc_notice_current, the notice word's one format. */
static PyObject *notice_current(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    uint64_t word, seq;
    if (!pc_nargs("notice_current", nargs, 2, 2) || pc_u64_arg(args[0], "word", &word) < 0 ||
        pc_u64_arg(args[1], "seq", &seq) < 0)
        return NULL;
    return PyBool_FromLong(pc_notice_current(word, seq));
}

static PyObject *mpi_library(PyObject *module, PyObject *unused)
{
    (void)module, (void)unused;
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int len, rc = MPI_Get_library_version(version, &len);
    if (rc != MPI_SUCCESS)
        return PyErr_Format(PyExc_RuntimeError, "MPI_Get_library_version failed (%d)", rc);
    return PyUnicode_DecodeUTF8(version, (Py_ssize_t)strnlen(version, (size_t)len), "replace");
}

/* mpi_pack(at, count, datatype, packed, unpack): MPI_Pack of count x datatype (an
 * MPI.Datatype) from address at (None: MPI_BOTTOM) into packed, or MPI_Unpack back; MPI's
 * error code. The packed side is a buffer held for the call. */
static PyObject *mpi_pack(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    uint64_t at = 0;
    int count;
    if (!pc_nargs("mpi_pack", nargs, 5, 5) ||
        (args[0] != Py_None && pc_u64_arg(args[0], "address", &at) < 0))
        return NULL;
    long given = PyLong_AsLong(args[1]);
    if (given == -1 && PyErr_Occurred())
        return NULL;
    if (given < 0 || given > INT_MAX)
        return PyErr_Format(PyExc_ValueError, "count must be 0..%d, not %ld", INT_MAX, given);
    count = (int)given;
    MPI_Datatype *type = PyMPIDatatype_Get(args[2]);
    int unpack = type == NULL ? -1 : PyObject_IsTrue(args[4]);
    Py_buffer b;
    if (unpack < 0 || pc_local_arg(args[3], !unpack, "packed", &b) < 0)
        return NULL;
    if (b.len > INT_MAX) {
        PyBuffer_Release(&b);
        return PyErr_Format(PyExc_OverflowError, "a packed buffer of %zd bytes", b.len);
    }
    int rc = pc_mpi_pack(at ? (void *)(uintptr_t)at : NULL, count, (intptr_t)*type, b.buf,
                         (int)b.len, unpack);
    PyBuffer_Release(&b);
    return PyLong_FromLong(rc);
}

/* dlpack_dtype(capsule) -> (device_type, code, bits, lanes) of the DLPack tensor a
 * __dlpack__() capsule holds. Only read: the capsule stays unconsumed, so its own destructor
 * still frees the tensor. */
static PyObject *dlpack_dtype(PyObject *module, PyObject *capsule)
{
    (void)module;
    if (!PyCapsule_IsValid(capsule, "dltensor"))     /* a used one is renamed: refused too */
        return PyErr_Format(PyExc_TypeError, "expected an unconsumed DLPack capsule "
                            "(\"dltensor\"), got %.100s", Py_TYPE(capsule)->tp_name);
    const DLManagedTensor *managed = PyCapsule_GetPointer(capsule, "dltensor");
    const DLTensor *t = &managed->dl_tensor;
    return Py_BuildValue("iiii", (int)t->device.device_type, t->dtype.code, t->dtype.bits,
                         t->dtype.lanes);
}

#define FASTCALL(f) (PyCFunction)(void (*)(void))(f), METH_FASTCALL

static PyMethodDef core_methods[] = {
    {"keep", keep, METH_O, "keep(obj): hold obj until the process ends."},
    {"wait_counts", wait_counts, METH_NOARGS,
     "wait_counts() -> (looks, yields, sleeps) of this thread's native waits so far"},
    {"now_ns", now_ns, METH_NOARGS, "CLOCK_MONOTONIC in ns (the clock of every native deadline)."},
    {"cma_copy", FASTCALL(cma_copy), "cma_copy(pid, local, remote, write) -> bytes or -errno"},
    {"cma_vector", FASTCALL(cma_vector),
     "cma_vector(pid, local, offsets, remotes, lengths, write) -> (total or -errno, segment)"},
    {"cma_probe", FASTCALL(cma_probe),
     "cma_probe(pid, local, remote, count, length, stride, times) -> rc"},
    {"allow_ptrace_any", allow_ptrace_any, METH_NOARGS, "pc_allow_ptrace_any: 0 or -errno"},
    {"drop_ptrace_any", drop_ptrace_any, METH_NOARGS, "pc_drop_ptrace_any: 0 or -errno"},
    {"inbox_slot", FASTCALL(inbox_slot), "inbox_slot(bank, n, q, slot): the slot's offset"},
    {"notice_current", FASTCALL(notice_current),
     "notice_current(word, seq): whether a board's word is the notice of seq"},
    {"mpi_library", mpi_library, METH_NOARGS, "the version string of the MPI built against"},
    {"mpi_pack", FASTCALL(mpi_pack),
     "mpi_pack(at, count, datatype, packed, unpack) -> MPI's error code"},
    {"dlpack_dtype", dlpack_dtype, METH_O,
     "dlpack_dtype(capsule) -> (device_type, code, bits, lanes); the capsule is not consumed"},
    {NULL, NULL, 0, NULL},
};

/* DLPack's codes, as module ints: Python names them from the one declaration. */
static const struct { const char *name; int value; } dlpack_codes[] = {
    {"kDLCPU", kDLCPU}, {"kDLInt", kDLInt}, {"kDLUInt", kDLUInt}, {"kDLFloat", kDLFloat},
    {"kDLBfloat", kDLBfloat}, {"kDLComplex", kDLComplex}, {"kDLBool", kDLBool},
};

int pc_add_core(PyObject *module)
{
    if (import_mpi4py() < 0)
        return -1;
    for (size_t i = 0; i < sizeof dlpack_codes / sizeof *dlpack_codes; i++)
        if (PyModule_AddIntConstant(module, dlpack_codes[i].name, dlpack_codes[i].value) < 0)
            return -1;
    return PyModule_AddFunctions(module, core_methods);
}
