// pyframes.h: Python frames in the allocation stacks (record/pyframes.c).
//
// When the program runs a supported CPython (3.11 to 3.13), each captured native
// stack gets the Python functions the interpreter was running, put in
// front of the native frame of `_PyEval_EvalFrameDefault` that ran them,
// read from the interpreter's own frame state: no Python code runs, nothing
// is imported, no Python API call is made on the hot path.
//
//     // unwind.c, a capture's last step:
//     id = tpprof_py_on ? tpprof_py_intern(frames, n) : tpprof_stack_intern(frames, n);
//     id = tpprof_py_on ? tpprof_py_merge(id, frames, n) : id;   // where it has an id too
//     ...
//     // writer thread, later: a frame is a Python one when
//     if (tpprof_py_is_frame(ip)) tpprof_py_resolve(ip, &f);  // store/pyframes.c
//
// A Python frame is a pseudo return address: bit 47 set and nothing above
// it (no user-space address has it: they end below 2^47, and the kernel's
// have all of bits 47-63 set), then the interned code object's id (23 bits)
// and the instruction's offset in code units (24 bits). It fits in 48 bits,
// which `tpprof merge` keeps (it tags the process above them).
// TPPROF_PYTHON=0 turns it off.
#ifndef TPPROF_RECORD_PYFRAMES_H
#define TPPROF_RECORD_PYFRAMES_H

#include "base/base.h"

#define TPPROF_PY_TAG ((uint64_t)1 << 47)
#define TPPROF_PY_CODE_BITS 23
#define TPPROF_PY_UNIT_BITS 24

static inline bool tpprof_py_is_frame(uint64_t ip) { return (ip >> 47) == 1; }

// True once a supported interpreter was found at the start (and
// TPPROF_PYTHON is not 0): the capture then calls tpprof_py_merge.
TPPROF_HIDDEN extern bool tpprof_py_on;

// Looks for a CPython in the process (its exported symbols: Py_Version,
// _PyRuntime, PyCode_Type, _PyEval_EvalFrameDefault) and sets tpprof_py_on
// if its version is supported. Called once from the constructor.
TPPROF_HIDDEN void tpprof_py_init(void);

// The stack `native_id` (a depot id, whose frames are ips[0..n)) with the
// calling thread's Python frames put in: each group of Python frames run
// by one C-level evaluation goes right in front of (inner to) that
// evaluation's `_PyEval_EvalFrameDefault` frame; groups whose native frame
// is past the captured depth are appended at the end. Returns the merged
// stack's depot id, or native_id when the thread runs no Python. The
// frames are the caller's, not the depot's: those of a stack the writer
// has already made a trie leaf of are gone (tpprof_stack_release), and a
// merge that read them got the Python frames alone. Hot path: no locks,
// no malloc.
TPPROF_HIDDEN uint32_t tpprof_py_merge(uint32_t native_id, const uintptr_t *ips, int n);
// The same for a capture that has its frames and no depot id yet
// (libunwind's walk, the plain frame-pointer walk): ips[0..n) interned with
// the Python frames put in, the native stack never interned on its own (a
// Python stack then takes one depot id, not two).
TPPROF_HIDDEN uint32_t tpprof_py_intern(const uintptr_t *ips, int n);

// What the store writes about the interpreter in meta.python (a short
// text: "CPython 3.11.2", "CPython 3.14.0: not supported (3.11 to 3.13
// are), native stacks only", "off (TPPROF_PYTHON=0)"), or NULL when the
// program is not Python.
TPPROF_HIDDEN const char *tpprof_py_meta(void);

// Python frames left out of stacks because their code object could not be
// kept (the code table full: ~91,000 code objects, or out of memory):
// meta.python_frames_lost.
TPPROF_HIDDEN extern _Atomic uint64_t tpprof_py_frames_lost;

// A Python frame resolved (writer thread): strings borrowed, valid until exit.
struct tpprof_py_frame {
    const char *function; // co_qualname, UTF-8
    const char *file;     // co_filename, UTF-8
    int line;             // 0: unknown
};
// Resolves a pseudo frame; false if its code id is unknown.
TPPROF_HIDDEN bool tpprof_py_resolve(uint64_t ip, struct tpprof_py_frame *out);

// For tests: the line of code unit `unit` in a 3.11-3.13 location table
// (co_linetable) whose code starts at line `first`; 0 when not covered.
TPPROF_HIDDEN int tpprof_py_linetable_line(const uint8_t *tab, size_t len, int first, uint32_t unit);

#endif
