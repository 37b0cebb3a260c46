// test_pyframes_layouts.c: pyframes.c's walk of each supported CPython's
// frame state, on a made-up interpreter: this executable exports the
// symbols pyframes.c looks for (Py_Version, _PyRuntime, PyCode_Type, ...,
// _PyEval_EvalFrameDefault) and lays out a thread state, frames, code
// objects and strings at the offsets of CPython's own headers (3.11.7,
// 3.12.1, 3.13.0, built with -DPy_BUILD_CORE and offsetof). So the walk of
// 3.12 and 3.13 is tested where only 3.11 is installed (CI); the real
// interpreters are tests/python's.
//
// usage: tpprof_test_pyframes_layouts VERSION
//   3.11, 3.12, 3.13: frames found, in order, grouped by evaluation;
//   3.13t: a free-threaded 3.13 (its debug offsets say so): refused;
//   3.12-elsewhere: the thread state is not where the layout says: refused
//   after the first look; 3.14: not supported.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record/pyframes.h"
#include "record/rings.h"
#include "record/stacks.h"
#include "../check.h"

__thread struct tpprof_thread *tpprof_self; // stacks.c's per-thread cache owner

// ---------------------------------------------------------------------------
// The made-up interpreter's exported symbols.

#define EXPORT __attribute__((visibility("default"), used))
EXPORT unsigned long Py_Version;
EXPORT _Alignas(64) char _PyRuntime[16384];
EXPORT _Alignas(64) char PyCode_Type[512], PyUnicode_Type[512], PyBytes_Type[512];

static void *gilstate_answer; // what PyGILState_GetThisThreadState says
EXPORT void *PyGILState_GetThisThreadState(void) { return gilstate_answer; }

// Its size matters (the native frames inside it are the evaluations').
EXPORT __attribute__((noinline)) int _PyEval_EvalFrameDefault(volatile int *x, int n) {
    int s = 0;
    for (int i = 0; i < n; i++) s = (s + x[i] * (i + 1)) ^ (s >> 3);
    return s;
}

// ---------------------------------------------------------------------------
// Layouts, from the headers (the same facts pyframes.c holds, written down
// again here as the specification).

struct layout {
    unsigned minor;
    size_t rt_finalizing, rt_autointerp, rt_tss, ts_interp, ts_cframe, cf_current, ts_current_frame;
    size_t fr_code, fr_previous, fr_instr, fr_is_entry, fr_owner;
    size_t co_size, co_firstlineno, co_filename, co_qualname, co_linetable, co_firsttraceable, co_code;
    size_t str_length, str_state, str_data, bytes_size, bytes_data;
    bool str_ready;
};
static const struct layout layouts[] = {
    {11, 24, 584, 592, 16, 56, 8, 0, 32, 48, 56, 68, 69, 16, 72, 112, 128, 136, 168, 184, 16, 32, 48, 16, 32, true},
    {12, 24, 2568, 1544, 16, 56, 0, 0, 0, 8, 56, 0, 70, 16, 68, 112, 128, 136, 176, 192, 16, 32, 40, 16, 32, false},
    {13, 608, 9888, 2160, 16, 0, 0, 72, 0, 8, 56, 0, 70, 16, 68, 112, 128, 136, 184, 200, 16, 32, 40, 16, 32, false},
};
enum { OWNER_THREAD = 0, OWNER_GENERATOR = 1, OWNER_CSTACK = 3 };

// 3.13's _Py_DebugOffsets at the start of _PyRuntime: (position, value).
static const size_t debug_offsets_313[][2] = {
    {32, 608},  {176, 16},  {184, 72},  {232, 8},   {240, 0},   {248, 56},  {264, 70},  {280, 112}, {296, 128},
    {304, 136}, {312, 68},  {344, 200}, {360, 8},   {520, 16},  {528, 32},  {544, 32},  {552, 16},  {560, 40},
};

static const struct layout *lay;

static void put_ptr(char *at, const void *p) { memcpy(at, &p, sizeof p); }
static void put_size(char *at, size_t v) { memcpy(at, &v, sizeof v); }
static void put_int(char *at, int v) { memcpy(at, &v, sizeof v); }
static char *ptr_of(const char *at) {
    char *p;
    memcpy(&p, at, sizeof p);
    return p;
}

static char *object(size_t bytes, const void *type) {
    char *o = aligned_alloc(64, bytes);
    memset(o, 0, bytes);
    put_ptr(o + 8, type);
    return o;
}

static char *str(const char *s) {
    char *o = object(256, PyUnicode_Type);
    put_size(o + lay->str_length, strlen(s));
    unsigned state = 1u << 2 | 1u << 5 | 1u << 6 | (lay->str_ready ? 1u << 7 : 0); // kind 1, compact, ascii
    memcpy(o + lay->str_state, &state, sizeof state);
    memcpy(o + lay->str_data, s, strlen(s) + 1);
    return o;
}

// A code object of 64 code units whose unit u is on line first + 1 + u (a
// location table of one "no columns" entry a unit, each a line further).
static char *code(const char *qualname, int first, int firsttraceable) {
    char *c = object(1024, PyCode_Type);
    put_size(c + lay->co_size, 64);
    put_int(c + lay->co_firstlineno, first);
    put_ptr(c + lay->co_filename, str("/src/fake.py"));
    put_ptr(c + lay->co_qualname, str(qualname));
    char *tab = object(256, PyBytes_Type);
    put_size(tab + lay->bytes_size, 128);
    for (int u = 0; u < 64; u++) {
        tab[lay->bytes_data + 2 * u] = (char)(0x80 | 13 << 3); // no columns, one unit
        tab[lay->bytes_data + 2 * u + 1] = 2;                  // line +1 (zigzag)
    }
    put_ptr(c + lay->co_linetable, tab);
    put_int(c + lay->co_firsttraceable, firsttraceable);
    return c;
}

// A frame running `co` at code unit `unit`, called by `previous`.
static char *frame(char *co, int unit, int owner, bool is_entry, char *previous) {
    char *f = aligned_alloc(64, 128);
    memset(f, 0, 128);
    put_ptr(f + lay->fr_code, co);
    put_ptr(f + lay->fr_previous, previous);
    put_ptr(f + lay->fr_instr, co ? co + lay->co_code + 2 * unit : NULL);
    f[lay->fr_owner] = (char)owner;
    if (lay->fr_is_entry) f[lay->fr_is_entry] = is_entry;
    return f;
}

// The frame an evaluation pushes below the frames it runs (3.12 on; none
// in 3.11, where its outermost frame is marked is_entry instead).
static char *entry(char *previous) {
    if (lay->minor == 11) return previous;
    char *trampoline = lay->minor == 12 ? code("<trampoline>", 0, 0) : object(64, PyUnicode_Type); // 3.13: None
    return frame(trampoline, 0, OWNER_CSTACK, false, previous);
}

// ---------------------------------------------------------------------------

static bool frame_is(uintptr_t ip, const char *function, int line) {
    struct tpprof_py_frame f;
    if (!tpprof_py_is_frame(ip) || !tpprof_py_resolve(ip, &f)) return false;
    bool ok = strcmp(f.function, function) == 0 && strcmp(f.file, "/src/fake.py") == 0 && f.line == line;
    if (!ok) fprintf(stderr, "  frame %s (%s:%d), want %s line %d\n", f.function, f.file, f.line, function, line);
    return ok;
}

static void test_walk(unsigned minor, bool free_threaded, bool tstate_elsewhere) {
    lay = &layouts[minor - 11];
    Py_Version = 0x03000000ul | (unsigned long)minor << 16 | 0xF0; // 3.minor.0 final
    char *rt = _PyRuntime;
    if (minor >= 13) {
        memcpy(rt, "xdebugpy", 8);
        uint64_t v = Py_Version, ft = free_threaded;
        memcpy(rt + 8, &v, 8);
        memcpy(rt + 16, &ft, 8);
        for (size_t i = 0; i < sizeof debug_offsets_313 / sizeof *debug_offsets_313; i++)
            put_size(rt + debug_offsets_313[i][0], debug_offsets_313[i][1]);
    }
    // The thread state, found by the GIL-state key.
    static char interp[64];
    char *ts = aligned_alloc(64, 256);
    memset(ts, 0, 256);
    put_ptr(ts + lay->ts_interp, interp);
    put_ptr(rt + lay->rt_autointerp, interp);
    pthread_key_t key;
    CHECK(pthread_key_create(&key, NULL) == 0);
    put_int(rt + lay->rt_tss, 1);
    put_int(rt + lay->rt_tss + 4, (int)key);
    pthread_setspecific(key, ts);
    gilstate_answer = tstate_elsewhere ? (void *)interp : (void *)ts;

    // Innermost first: evaluation 1 runs leaf, under a frame just pushed
    // (its code not started: not shown), under mid; evaluation 2 runs a
    // generator's frame (shown from its first unit on), under top.
    char *last = entry(NULL), *f = last;
    f = frame(code("top", 100, 2), 3, OWNER_THREAD, true, f);
    if (!last) last = f;
    char *gen = f = frame(code("gen", 200, 4), 1, OWNER_GENERATOR, false, f);
    f = entry(f);
    char *mid = f = frame(code("mid", 300, 2), 7, OWNER_THREAD, true, f);
    f = frame(code("Box.__init__", 400, 2), 0, OWNER_THREAD, false, f); // (3.13's __init__ shim)
    char *leaf_code = code("leaf", 500, 0);
    f = frame(leaf_code, 5, OWNER_THREAD, false, f);
    if (lay->ts_cframe) {
        char *cframe = aligned_alloc(64, 64);
        memset(cframe, 0, 64);
        put_ptr(cframe + lay->cf_current, f);
        put_ptr(ts + lay->ts_cframe, cframe);
    } else {
        put_ptr(ts + lay->ts_current_frame, f);
    }

    // A thread struct: the thread keeps its code ids there.
    static struct tpprof_thread thread;
    tpprof_self = &thread;
    tpprof_py_init();
    char want_meta[64];
    snprintf(want_meta, sizeof want_meta, "CPython 3.%u.0", minor);
    const char *meta = tpprof_py_meta();
    CHECK(tpprof_stacks_init());
    uintptr_t eval = (uintptr_t)_PyEval_EvalFrameDefault;
    uintptr_t native[6] = {0x401000, 0x402000, eval + 9, 0x403000, eval + 17, 0x404000};
    uint32_t id = tpprof_stack_intern(native, 6);
    if (free_threaded) {
        CHECK(!tpprof_py_on);
        CHECK_MSG(meta && strstr(meta, "free-threaded") && strstr(meta, "native stacks only"), "meta: %s", meta);
        return;
    }
    CHECK_MSG(tpprof_py_on && meta && strcmp(meta, want_meta) == 0, "meta: %s", meta);
    uint32_t merged = tpprof_py_merge(id, native, 6);
    if (tstate_elsewhere) {
        CHECK(merged == id && !tpprof_py_on);
        CHECK_MSG(strstr(tpprof_py_meta(), "thread state is not where"), "meta: %s", tpprof_py_meta());
        return;
    }
    int n = 0;
    const uintptr_t *m = tpprof_stack_frames(merged, &n);
    CHECK_MSG(n == 10, "%d frames, want 10", n);
    if (n != 10) return;
    // Each evaluation's Python frames right before (inner to) its native frame.
    CHECK(m[0] == native[0] && m[1] == native[1]);
    CHECK(frame_is(m[2], "leaf", 500 + 1 + 5));
    CHECK(frame_is(m[3], "mid", 300 + 1 + 7));
    CHECK(m[4] == native[2] && m[5] == native[3]);
    CHECK(frame_is(m[6], "gen", 200 + 1 + 1));
    CHECK(frame_is(m[7], "top", 100 + 1 + 3));
    CHECK(m[8] == native[4] && m[9] == native[5]);
    // The plain capture's way (no depot id yet) gives the same stack.
    CHECK(tpprof_py_intern(native, 6) == merged);
    // Evaluations past the captured native frames: their frames come last.
    int k = 0;
    const uintptr_t *m2 = tpprof_stack_frames(tpprof_py_merge(tpprof_stack_intern(native, 3), native, 3), &k);
    CHECK_MSG(k == 7 && m2[5] == m[6] && m2[6] == m[7], "%d frames, want 7", k);
    // A walk that read a word above user space where a return address
    // should be (libffi's frame under pyenv's 3.13 ctypes): the native
    // frames end before it, and it is never taken for a Python frame; the
    // evaluations it cut off come last, as past the captured depth.
    uintptr_t bad[6] = {native[0], native[1], eval + 9, (uintptr_t)0xffffffff80000002u, eval + 17, native[5]};
    const uintptr_t *m3 = tpprof_stack_frames(tpprof_py_intern(bad, 6), &k);
    CHECK_MSG(k == 7 && m3[4] == native[2] && m3[5] == m[6] && m3[6] == m[7], "%d frames, want 7", k);
    bad[3] = (uintptr_t)1 << 47 | 5; // (the same, inside the Python frames' range)
    m3 = tpprof_stack_frames(tpprof_py_intern(bad, 6), &k);
    CHECK_MSG(k == 7 && m3[4] == native[2] && m3[5] == m[6], "in the Python range: %d frames, want 7", k);

    // Each change to the frames between two walks is seen by the second (a
    // walk that kept anything from the one before must check all of these).
    // An outer frame at another instruction:
    put_ptr(mid + lay->fr_instr, ptr_of(mid + lay->fr_code) + lay->co_code + 2 * 9);
    m = tpprof_stack_frames(tpprof_py_merge(id, native, 6), &n);
    CHECK_MSG(n == 10 && frame_is(m[2], "leaf", 506) && frame_is(m[3], "mid", 300 + 1 + 9), "mid moved: %d frames", n);
    // A code object freed and another made at its address (its name here):
    char *old_name = ptr_of(leaf_code + lay->co_qualname);
    put_ptr(leaf_code + lay->co_qualname, str("leaf2"));
    free(old_name);
    m = tpprof_stack_frames(tpprof_py_merge(id, native, 6), &n);
    CHECK_MSG(n == 10 && frame_is(m[2], "leaf2", 506) && frame_is(m[3], "mid", 310), "leaf remade: %d frames", n);
    // A frame's owner (the generator's frame now the thread's, its code
    // not started at unit 1 of 4: not shown):
    gen[lay->fr_owner] = OWNER_THREAD;
    m = tpprof_stack_frames(tpprof_py_merge(id, native, 6), &n);
    CHECK_MSG(n == 9 && frame_is(m[6], "top", 104), "gen not started: %d frames", n);
    gen[lay->fr_owner] = OWNER_GENERATOR;
    m = tpprof_stack_frames(tpprof_py_merge(id, native, 6), &n);
    CHECK_MSG(n == 10 && frame_is(m[6], "gen", 202), "gen back: %d frames", n);
    // One more frame past the outermost (an evaluation past the captured
    // native frames: last):
    put_ptr(last + lay->fr_previous, frame(code("outer", 600, 0), 2, OWNER_THREAD, false, NULL));
    m = tpprof_stack_frames(tpprof_py_merge(id, native, 6), &n);
    CHECK_MSG(n == 11 && frame_is(m[7], "top", 104) && frame_is(m[10], "outer", 603), "outer added: %d frames", n);
    // And the same frames again: the same stack.
    CHECK(tpprof_py_merge(id, native, 6) == tpprof_py_intern(native, 6));
}

int main(int argc, char **argv) {
    const char *v = argc > 1 ? argv[1] : "";
    if (strcmp(v, "3.11") == 0) test_walk(11, false, false);
    else if (strcmp(v, "3.12") == 0) test_walk(12, false, false);
    else if (strcmp(v, "3.13") == 0) test_walk(13, false, false);
    else if (strcmp(v, "3.13t") == 0) test_walk(13, true, false);
    else if (strcmp(v, "3.12-elsewhere") == 0) test_walk(12, false, true);
    else if (strcmp(v, "3.14") == 0) {
        Py_Version = 0x030E00F0;
        tpprof_py_init();
        CHECK(!tpprof_py_on);
        CHECK_MSG(tpprof_py_meta() && strcmp(tpprof_py_meta(), "CPython 3.14.0: not supported (3.11 to 3.13 are), native "
                                                               "stacks only") == 0,
                  "meta: %s", tpprof_py_meta());
    } else {
        fprintf(stderr, "usage: %s 3.11|3.12|3.13|3.13t|3.12-elsewhere|3.14\n", argv[0]);
        return 2;
    }
    return CHECK_DONE();
}
