/* What papcoll._native's files share: papcoll_call.c (the module, and Alltoall's plans),
 * papcoll_run.c (a planned call run), papcoll_callv.c (Alltoallv's plans) and
 * papcoll_entry.c (a Communicator's entry). */
#ifndef PAPCOLL_CALL_H
#define PAPCOLL_CALL_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "papcoll_plan.h"

/* Whether sendbuf is mpi4py's MPI.IN_PLACE. */
int pc_in_place(PyObject *sendbuf);
/* The struct pc_plan of a Plan object (papcoll_pytypes.c), or NULL with a TypeError. */
struct pc_plan *pc_plan_of(PyObject *arg);
/* A buffer's struct-module format ("B" when it gives none). */
const char *pc_format_of(const Py_buffer *b);
/* Release a call's held buffers (s is r's alias when in_place). */
void pc_release(Py_buffer *s, Py_buffer *r, int in_place);

/* The end of a PC_PLAN_VAR call (papcoll_callv.c) whose engine returned rc: rc, or 0 with a
 * Python error when its staged receive side could not be unpacked. */
int pc_var_end(struct pc_plan *p, int rc);

/* How a call enters a plan: run (a blocking call); start (a request's: the engine makes one
 * pass and returns, resume() goes on; an MPI plan runs nothing and says PC_MPI_STARTS, the
 * caller starts MPI's nonblocking call); probe (only whether the plan takes the call). */
enum pc_mode { PC_RUN, PC_START, PC_PROBE };
#define PC_MPI_STARTS 2

/* The call of sendbuf and recvbuf entered into plan p (NULL: declined) in mode: 1 done (a
 * probe: taken), 0 declined with nothing touched, PC_MPI_STARTS, or < 0, left to the
 * algorithm (papcoll_run.c's run_* say which values); NULL with a Python error. */
PyObject *pc_enter(struct pc_plan *p, PyObject *sendbuf, PyObject *recvbuf, enum pc_mode mode);
PyObject *pc_enterv(struct pc_plan *p, PyObject *sendbuf, PyObject *recvbuf, enum pc_mode mode);
/* An Alltoall call, its buffers held and of p's shape, run (PC_RUN, PC_START) by p's kind
 * (papcoll_run.c): pc_enter's rc, a Python error possibly set; and whether p's calls are
 * zero-copy (peers write into the registered receive buffer itself). */
int pc_run(struct pc_plan *p, const char *send, char *recv, int in_place, enum pc_mode mode);
int pc_zero_copy(const struct pc_plan *p);

long pc_first(PyObject *plans, PyObject *sendbuf, PyObject *recvbuf, Py_ssize_t *index);
/* The shared argument decoders (papcoll_args.c). Whether a METH_FASTCALL function of name
 * got between lo and hi arguments (else a TypeError). */
int pc_nargs(const char *name, Py_ssize_t nargs, Py_ssize_t lo, Py_ssize_t hi);
/* The arguments of a METH_FASTCALL | METH_KEYWORDS function, by position in out[0..hi)
 * (NULL: not given), names[i] naming position i: 0, or -1 with a TypeError. */
int pc_fast_args(const char *name, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                 const char *const *names, Py_ssize_t lo, Py_ssize_t hi, PyObject **out);
/* A Python int as a uint64 (ValueError naming what when it does not fit), and finite
 * seconds >= 0 as nanoseconds (every wait is bounded): 0, or -1 with a Python error. */
int pc_u64_arg(PyObject *value, const char *what, uint64_t *out);
int pc_timeout_arg(PyObject *value, int64_t *out);
/* A contiguous buffer, writable if asked: 0 held, -1 with a Python error naming what. */
int pc_local_arg(PyObject *obj, int writable, const char *what, Py_buffer *b);
/* Add the Flags type (papcoll_pyflags.c) and the plain functions (papcoll_pycore.c). */
int pc_add_flags(PyObject *module);
int pc_add_core(PyObject *module);
/* Add the XPort and MR types (papcoll_pyxport.c, papcoll_pyverbs.c). */
int pc_add_xport(PyObject *module);
/* Add the Entry type (papcoll_entry.c) to the module: 0, or -1 with a Python error. */
int pc_add_entry(PyObject *module);
/* Add the adaptive auto's Window type (papcoll_window.c) and the functions of a window's end
 * (papcoll_agree.c). */
int pc_add_window(PyObject *module);
int pc_add_agree(PyObject *module);
/* An adaptive site's Window (papcoll_window.c), the one owner of its state: 1 it times this
 * call, 0 not (the site's first call), -1 with a Python error (not a Window, or full); and,
 * where open, a timed call's seconds noted: 1 the window is now full, else 0. */
int pc_window_open(PyObject *window);
int pc_window_note(PyObject *window, double seconds);
/* A window's times and their negatives into ``send`` (n == 2 K doubles), the input of the
 * reduction that ends it: 0, or -1 with a Python error; then, that reduction started, the
 * window opened again for the next window's first call. */
int pc_window_send(PyObject *window, double *send, Py_ssize_t n);
void pc_window_reopen(PyObject *window);
/* The end of an adaptive site's window (adaptive.Site, papcoll_agree.c): 1 ended, its next
 * reduction started; 0 its last reduction still in flight, nothing done; -1 with a Python
 * error. */
int pc_window_end(PyObject *site);

PyObject *pc_bindv(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
