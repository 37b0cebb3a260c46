// pyframes.c: the Python functions, files and lines in the allocation
// stacks, read from CPython's own frame state inside the hooks.
//
// Supported: CPython 3.11, 3.12 and 3.13 (any patch release: the layouts
// read here do not change within a minor version; 3.13's are checked
// against the _Py_DebugOffsets its runtime carries), with its symbols
// exported by the executable or a libpython loaded with it (Debian's
// /usr/bin/python3.11, a shared-library build, a program embedding
// libpython). Other versions, debug and free-threaded builds are detected
// and get native stacks only, said once in meta.python. A libpython
// dlopen'ed RTLD_LOCAL after the start is not seen.
//
// How: the calling thread's PyThreadState is the value of the interpreter's
// GIL-state TLS key (_PyRuntime(.gilstate).autoTSSkey, a pthread key): read
// with pthread_getspecific, so it is right with the GIL released too (a
// thread only ever changes its own frame chain, so the chain is stable
// while the thread is inside malloc). The innermost _PyInterpreterFrame is
// its cframe->current_frame (3.11, 3.12) or current_frame (3.13);
// `previous` links the chain. The frames one C-level
// _PyEval_EvalFrameDefault runs (Python calls run inline) end at the frame
// marked is_entry (3.11), or before a frame of the evaluator's own, owned
// by the C stack (3.12 on). Each frame becomes a pseudo return address
// (pyframes.h) holding the interned code object and the instruction
// (prev_instr, 3.13's instr_ptr: the instruction running, or the call
// waiting on its callee); the line is found later, by the writer, from a
// copy of the code's location table (one format in 3.11-3.13) taken when
// the code object was first seen (it is alive then: it is on a running
// frame). Reads are defensive (alignment, the code object's type, bounded
// depth), never a Python call on the hot path.
//
// Known risk: a frame pointer the interpreter left dangling would be read
// as it is (as py-spy and memray do, without a fault handler); the
// interpreter only publishes initialized frames, and nothing is read once
// _PyRuntime says it is finalizing.
//
// Runs inside malloc hooks: no locks, no malloc.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "base/base.h"
#include "base/mem.h"
#include "record/pyframes.h"
#include "record/stacks.h"

bool tpprof_py_on;

// ---------------------------------------------------------------------------
// Layouts (byte offsets), one per supported version, read from CPython's
// headers (Include/internal/pycore_runtime.h, pycore_frame.h,
// cpython/pystate.h, cpython/code.h, cpython/unicodeobject.h).

struct py_layout {
    unsigned minor;        // 3.minor
    size_t rt_finalizing;  // _PyRuntime._finalizing (non-NULL: finalizing)
    size_t rt_autointerp;  // _PyRuntime.gilstate.autoInterpreterState
    size_t rt_tss;         // _PyRuntime(.gilstate).autoTSSkey: {int initialized; pthread_key_t key}
    size_t ts_interp;      // PyThreadState.interp
    // The innermost frame: PyThreadState.cframe->current_frame (3.11,
    // 3.12), or PyThreadState.current_frame (3.13: ts_cframe 0).
    size_t ts_cframe, cf_current, ts_current_frame;
    // f_code (f_executable in 3.13); the instruction running (3.11, 3.12:
    // prev_instr; 3.13: instr_ptr, the same unit while it runs or calls).
    size_t fr_code, fr_previous, fr_instr;
    // How a C-level evaluation's frames end: the outermost has is_entry set
    // (3.11), or a frame of its own owned by the C stack comes next (3.12
    // on: owner_cstack; fr_is_entry 0).
    size_t fr_is_entry, fr_owner;
    int owner_generator;   // FRAME_OWNED_BY_GENERATOR
    int owner_cstack;      // FRAME_OWNED_BY_CSTACK; -1: none (3.11)
    size_t co_size;        // ob_size: code units
    size_t co_firstlineno, co_filename, co_qualname, co_linetable, co_firsttraceable, co_code;
    size_t ob_type;        // PyObject.ob_type
    size_t str_length, str_state, str_ascii_data, str_compact_data; // PyASCIIObject, PyCompactUnicodeObject
    bool str_ready;        // state has a `ready` bit to check (3.11)
    size_t bytes_size, bytes_data;                                  // PyBytesObject
};

// (Checked with offsetof against each version's headers, built with
// -DPy_BUILD_CORE: 3.11.7, 3.12.1, 3.13.0.)
static const struct py_layout layouts[] = {
    {.minor = 11,
     .rt_finalizing = 24, .rt_autointerp = 584, .rt_tss = 592,
     .ts_interp = 16, .ts_cframe = 56, .cf_current = 8,
     .fr_code = 32, .fr_previous = 48, .fr_instr = 56, .fr_is_entry = 68, .fr_owner = 69,
     .owner_generator = 1, .owner_cstack = -1,
     .co_size = 16, .co_firstlineno = 72, .co_filename = 112, .co_qualname = 128, .co_linetable = 136,
     .co_firsttraceable = 168, .co_code = 184,
     .ob_type = 8,
     .str_length = 16, .str_state = 32, .str_ascii_data = 48, .str_compact_data = 72, .str_ready = true,
     .bytes_size = 16, .bytes_data = 32},
    {.minor = 12,
     .rt_finalizing = 24, .rt_autointerp = 2568, .rt_tss = 1544,
     .ts_interp = 16, .ts_cframe = 56, .cf_current = 0,
     .fr_code = 0, .fr_previous = 8, .fr_instr = 56, .fr_owner = 70,
     .owner_generator = 1, .owner_cstack = 3,
     .co_size = 16, .co_firstlineno = 68, .co_filename = 112, .co_qualname = 128, .co_linetable = 136,
     .co_firsttraceable = 176, .co_code = 192,
     .ob_type = 8,
     .str_length = 16, .str_state = 32, .str_ascii_data = 40, .str_compact_data = 56,
     .bytes_size = 16, .bytes_data = 32},
    {.minor = 13,
     .rt_finalizing = 608, .rt_autointerp = 9888, .rt_tss = 2160,
     .ts_interp = 16, .ts_current_frame = 72,
     .fr_code = 0, .fr_previous = 8, .fr_instr = 56, .fr_owner = 70,
     .owner_generator = 1, .owner_cstack = 3,
     .co_size = 16, .co_firstlineno = 68, .co_filename = 112, .co_qualname = 128, .co_linetable = 136,
     .co_firsttraceable = 184, .co_code = 200,
     .ob_type = 8,
     .str_length = 16, .str_state = 32, .str_ascii_data = 40, .str_compact_data = 56,
     .bytes_size = 16, .bytes_data = 32},
};
#define N_LAYOUTS (sizeof layouts / sizeof *layouts)

static const struct py_layout *L;
typedef int py_walk_fn(uintptr_t *py, uint8_t *ends, int *ngroups);
static py_walk_fn py_walk_0, py_walk_1, py_walk_2; // one a layout (the hot path, below)
static py_walk_fn *const walks[] = {py_walk_0, py_walk_1, py_walk_2};
_Static_assert(sizeof walks / sizeof *walks == N_LAYOUTS, "a walk for each layout");
static py_walk_fn *py_walk; // L's
static const char *runtime;                        // &_PyRuntime
static const void *code_type, *str_type, *bytes_type; // &PyCode_Type, &PyUnicode_Type, &PyBytes_Type
static uintptr_t eval_lo, eval_hi;                 // _PyEval_EvalFrameDefault
static char meta[160];
static void *(*gilstate_get)(void);                 // PyGILState_GetThisThreadState, for verify()
// The offsets checked once against the interpreter's own answer
// (PyGILState_GetThisThreadState, a plain read of the same TLS key): 0 not
// yet, 1 agreed. A disagreement turns Python frames off.
static _Atomic int verified, layout_bad;
static char meta_bad[200];

#define PY_WALK_MAX 1024   // frames walked at most (frames not shown count too)
#define PY_GROUPS_MAX 64   // C-level evaluations told apart
#define CODE_SLOT_BITS 17
#define CODE_SLOTS ((uint64_t)1 << CODE_SLOT_BITS)
#define MAX_CODES ((uint32_t)(CODE_SLOTS * 7 / 10))
_Static_assert(MAX_CODES < (1u << TPPROF_PY_CODE_BITS), "code ids fit a pseudo frame");
#define CODE_FAILED UINT32_MAX

static bool codes_init(void);

static inline const char *ptr_at(const char *base, size_t off) { return *(const char *const *)(base + off); }
static inline bool aligned(const void *p) { return p && ((uintptr_t)p & 7) == 0; }

// ---------------------------------------------------------------------------
// Setup (constructor, guard held).

static bool sym_range(const char *name, uintptr_t *lo, uintptr_t *hi) {
    void *f = dlsym(RTLD_DEFAULT, name);
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (!f || !dladdr1(f, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym || !sym->st_size) return false;
    *lo = (uintptr_t)f;
    *hi = *lo + sym->st_size;
    return true;
}

// 3.13 on: _PyRuntime opens with _Py_DebugOffsets, CPython's offsets for
// out-of-process debuggers ("xdebugpy", the version, whether the build is
// free-threaded, then offsets by struct): the layout's must be the same (a
// 3.13.x that moved one, a free-threaded build, whose objects have a
// longer header). Positions (bytes) in 3.13's struct.
static bool debug_offsets_agree(const struct py_layout *lay, const char *rt, unsigned long hexv) {
    if (lay->minor < 13) return true;
    static const struct {
        uint16_t at, field;
    } same[] = {
        {32, offsetof(struct py_layout, rt_finalizing)},    {176, offsetof(struct py_layout, ts_interp)},
        {184, offsetof(struct py_layout, ts_current_frame)}, {232, offsetof(struct py_layout, fr_previous)},
        {240, offsetof(struct py_layout, fr_code)},          {248, offsetof(struct py_layout, fr_instr)},
        {264, offsetof(struct py_layout, fr_owner)},         {280, offsetof(struct py_layout, co_filename)},
        {296, offsetof(struct py_layout, co_qualname)},      {304, offsetof(struct py_layout, co_linetable)},
        {312, offsetof(struct py_layout, co_firstlineno)},   {344, offsetof(struct py_layout, co_code)},
        {360, offsetof(struct py_layout, ob_type)},          {520, offsetof(struct py_layout, bytes_size)},
        {528, offsetof(struct py_layout, bytes_data)},       {544, offsetof(struct py_layout, str_state)},
        {552, offsetof(struct py_layout, str_length)},       {560, offsetof(struct py_layout, str_ascii_data)},
    };
    uint64_t v, ft;
    memcpy(&v, rt + 8, 8);
    memcpy(&ft, rt + 16, 8);
    if (memcmp(rt, "xdebugpy", 8) != 0 || v >> 16 != hexv >> 16 || ft != 0) return false;
    for (size_t i = 0; i < sizeof same / sizeof *same; i++) {
        uint64_t d;
        size_t mine;
        memcpy(&d, rt + same[i].at, 8);
        memcpy(&mine, (const char *)lay + same[i].field, sizeof mine);
        if (d != mine) return false;
    }
    return true;
}

void tpprof_py_init(void) {
    const unsigned long *hexv = dlsym(RTLD_DEFAULT, "Py_Version"); // 3.11 and later
    char version[32] = "";
    unsigned major = 0, minor = 0;
    if (hexv) {
        major = (unsigned)(*hexv >> 24);
        minor = (unsigned)(*hexv >> 16) & 255;
        snprintf(version, sizeof version, "%u.%u.%lu", major, minor, (*hexv >> 8) & 255);
    } else {
        // Older interpreters: "3.10.12 (main, ...)", a static string.
        const char *(*getv)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "Py_GetVersion");
        if (!getv) return; // not a Python program
        const char *v = getv();
        size_t k = 0;
        while (v && v[k] && v[k] != ' ' && k + 1 < sizeof version) {
            version[k] = v[k];
            k++;
        }
        version[k] = 0;
    }
    const char *env = getenv("TPPROF_PYTHON");
    if (env && strcmp(env, "0") == 0) {
        snprintf(meta, sizeof meta, "CPython %s: off (TPPROF_PYTHON=0)", version);
        return;
    }
    for (size_t i = 0; major == 3 && i < N_LAYOUTS; i++)
        if (layouts[i].minor == minor) L = &layouts[i];
    if (!L) {
        snprintf(meta, sizeof meta, "CPython %s: not supported (3.11 to 3.13 are), native stacks only", version);
        return;
    }
    // A debug build (python3.11-dbg) lays its objects out otherwise.
    if (dlsym(RTLD_DEFAULT, "_Py_RefTotal") || dlsym(RTLD_DEFAULT, "_Py_NegativeRefcount")) {
        snprintf(meta, sizeof meta, "CPython %s: a debug build, not supported, native stacks only", version);
        L = NULL;
        return;
    }
    runtime = dlsym(RTLD_DEFAULT, "_PyRuntime");
    code_type = dlsym(RTLD_DEFAULT, "PyCode_Type");
    str_type = dlsym(RTLD_DEFAULT, "PyUnicode_Type");
    bytes_type = dlsym(RTLD_DEFAULT, "PyBytes_Type");
    if (!runtime || !code_type || !str_type || !bytes_type || !sym_range("_PyEval_EvalFrameDefault", &eval_lo, &eval_hi)) {
        snprintf(meta, sizeof meta, "CPython %s: its symbols are not exported, native stacks only", version);
        L = NULL;
        return;
    }
    if (!debug_offsets_agree(L, runtime, *hexv)) {
        snprintf(meta, sizeof meta, "CPython %s: its debug offsets are not 3.%u's layout (free-threaded?), native stacks only",
                 version, minor);
        L = NULL;
        return;
    }
    if (!codes_init()) {
        snprintf(meta, sizeof meta, "CPython %s: out of memory, native stacks only", version);
        L = NULL;
        return;
    }
    // (Looked up here: a dlsym inside a hook could allocate, and would drop
    // the thread's pending dlerror() state.)
    gilstate_get = (void *(*)(void))dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
    py_walk = walks[L - layouts];
    snprintf(meta, sizeof meta, "CPython %s", version);
    snprintf(meta_bad, sizeof meta_bad, "CPython %s: its thread state is not where 3.%u's layout has it, native stacks only",
             version, minor);
    tpprof_py_on = true;
}

const char *tpprof_py_meta(void) { return atomic_load(&layout_bad) ? meta_bad : meta[0] ? meta : NULL; }

// ---------------------------------------------------------------------------
// Code objects, interned: an id for each (code object, its name, file and
// location table), with copies of those taken the first time it is seen.
// Lock-free open addressing as in stacks.c. The key mixes the object's
// address with the addresses of its name, file and table objects and its
// first line, so a code object freed and another made at its address gets
// a new id unless all of those were reused as well.

struct code_slot {
    _Atomic uint64_t key;
    _Atomic uint32_t id;
    uint32_t unused;
};

struct py_code {
    int firstlineno;
    uint32_t ltab_len;
    const char *name, *file;
    const uint8_t *ltab;
};

static struct code_slot *code_slots;
static struct py_code **codes; // id -> record
static _Atomic uint32_t next_code = 1;
_Atomic uint64_t tpprof_py_frames_lost;

// Own memory for the copies: one offset over chunks mapped as they are
// reached (64 MiB at most); a piece never spans two chunks.
#define ARENA_CHUNK ((size_t)1 << 20)
#define ARENA_CHUNKS 64
static _Atomic(char *) arena[ARENA_CHUNKS];
static _Atomic size_t arena_used;

static char *arena_take(size_t bytes) {
    bytes = (bytes + 7) & ~(size_t)7;
    if (bytes > ARENA_CHUNK) return NULL;
    for (;;) {
        size_t off = atomic_fetch_add(&arena_used, bytes);
        size_t c = off / ARENA_CHUNK;
        if (c >= ARENA_CHUNKS) return NULL;
        if ((off + bytes - 1) / ARENA_CHUNK != c) continue; // the next chunk's start instead
        char *base = atomic_load_explicit(&arena[c], memory_order_acquire);
        if (!base) {
            char *fresh = tpprof_mem_map(ARENA_CHUNK);
            if (!fresh) return NULL;
            if (atomic_compare_exchange_strong(&arena[c], &base, fresh)) base = fresh;
            else tpprof_mem_unmap(fresh, ARENA_CHUNK); // another thread mapped it first
        }
        return base + off % ARENA_CHUNK;
    }
}

static void put_utf8(char **p, char *end, uint32_t c) {
    char buf[4];
    int n;
    if (c < 0x80) buf[0] = (char)c, n = 1;
    else if (c < 0x800) buf[0] = (char)(0xC0 | c >> 6), buf[1] = (char)(0x80 | (c & 63)), n = 2;
    else if (c < 0x10000)
        buf[0] = (char)(0xE0 | c >> 12), buf[1] = (char)(0x80 | (c >> 6 & 63)), buf[2] = (char)(0x80 | (c & 63)), n = 3;
    else
        buf[0] = (char)(0xF0 | c >> 18), buf[1] = (char)(0x80 | (c >> 12 & 63)), buf[2] = (char)(0x80 | (c >> 6 & 63)),
        buf[3] = (char)(0x80 | (c & 63)), n = 4;
    if (*p + n > end) return;
    memcpy(*p, buf, (size_t)n);
    *p += n;
}

// A str object as UTF-8 into out (cap bytes, NUL-terminated), "?" when it is
// not a compact ready str. Returns the length.
static size_t str_copy(const char *o, char *out, size_t cap) {
    char *p = out, *end = out + cap - 1;
    if (aligned(o) && *(const void *const *)(o + L->ob_type) == str_type) {
        unsigned st = *(const uint32_t *)(o + L->str_state) & 255;
        unsigned kind = st >> 2 & 7;
        bool compact = st >> 5 & 1, ascii = st >> 6 & 1, ready = !L->str_ready || st >> 7 & 1;
        ssize_t len = *(const ssize_t *)(o + L->str_length);
        if (compact && ready && len >= 0 && (kind == 1 || kind == 2 || kind == 4)) {
            const uint8_t *d = (const uint8_t *)o + (ascii ? L->str_ascii_data : L->str_compact_data);
            for (ssize_t i = 0; i < len && p < end; i++) {
                uint32_t c = kind == 1 ? d[i] : kind == 2 ? ((const uint16_t *)d)[i] : ((const uint32_t *)d)[i];
                put_utf8(&p, end, c);
            }
        }
    }
    if (p == out) *p++ = '?';
    *p = 0;
    return (size_t)(p - out);
}

#define NAME_CAP 512
#define FILE_CAP 4096
#define LTAB_CAP ((size_t)256 << 10)

static struct py_code *code_record(const char *code) {
    char name[NAME_CAP], file[FILE_CAP];
    size_t nl = str_copy(ptr_at(code, L->co_qualname), name, sizeof name);
    size_t fl = str_copy(ptr_at(code, L->co_filename), file, sizeof file);
    const char *lt = ptr_at(code, L->co_linetable);
    size_t ll = 0;
    if (aligned(lt) && *(const void *const *)(lt + L->ob_type) == bytes_type) {
        ssize_t n = *(const ssize_t *)(lt + L->bytes_size);
        ll = n > 0 ? ((size_t)n < LTAB_CAP ? (size_t)n : LTAB_CAP) : 0;
    }
    struct py_code *r = (struct py_code *)arena_take(sizeof *r + nl + 1 + fl + 1 + ll);
    if (!r) return NULL;
    char *s = (char *)(r + 1);
    memcpy(s, name, nl + 1);
    memcpy(s + nl + 1, file, fl + 1);
    memcpy(s + nl + 1 + fl + 1, lt + L->bytes_data, ll);
    r->name = s;
    r->file = s + nl + 1;
    r->ltab = (const uint8_t *)(s + nl + 1 + fl + 1);
    r->ltab_len = (uint32_t)ll;
    r->firstlineno = *(const int *)(code + L->co_firstlineno);
    return r;
}

// Mapped at the start (touched as codes come): two threads' first
// allocations must not both make the table.
static bool codes_init(void) {
    struct code_slot *s = tpprof_mem_map(CODE_SLOTS * sizeof *s);
    struct py_code **c = s ? tpprof_mem_map(((size_t)MAX_CODES + 1) * sizeof *c) : NULL;
    if (!c) {
        if (s) tpprof_mem_unmap(s, CODE_SLOTS * sizeof *s);
        return false;
    }
    codes = c;
    code_slots = s;
    return true;
}

static uint32_t code_publish(struct code_slot *s, const char *code) {
    uint32_t id = atomic_fetch_add(&next_code, 1);
    struct py_code *r = id <= MAX_CODES ? code_record(code) : NULL;
    if (!r) {
        atomic_store_explicit(&s->id, CODE_FAILED, memory_order_release);
        atomic_fetch_add_explicit(&tpprof_py_frames_lost, 1, memory_order_relaxed);
        return 0;
    }
    codes[id] = r;
    atomic_store_explicit(&s->id, id, memory_order_release);
    return id;
}

// The hot path's functions take the layout as an argument and are inlined
// into py_walk, which is called with &layouts[i] for a constant i: each
// offset is then an immediate, not a load from the layout (15 of them a
// frame).
#define PY_INLINE static inline __attribute__((always_inline))

// What a code object's key is made of (code_key).
struct code_parts {
    const char *code, *qualname, *filename, *linetable;
    int firstlineno;
};

PY_INLINE struct code_parts code_parts(const struct py_layout *lay, const char *code) {
    return (struct code_parts){code, ptr_at(code, lay->co_qualname), ptr_at(code, lay->co_filename),
                               ptr_at(code, lay->co_linetable), *(const int *)(code + lay->co_firstlineno)};
}

PY_INLINE uint64_t code_key(const struct code_parts *p) {
    uint64_t k = (uint64_t)(uintptr_t)p->code;
    k = (k ^ (uint64_t)(uintptr_t)p->qualname) * 0x9E3779B97F4A7C15ULL;
    k = (k ^ (uint64_t)(uintptr_t)p->filename) * 0xff51afd7ed558ccdULL;
    k = (k ^ (uint64_t)(uintptr_t)p->linetable) * 0xc4ceb9fe1a85ec53ULL;
    k = (k ^ (uint32_t)p->firstlineno) * 0x9FB21C651E98DF25ULL;
    k ^= k >> 29;
    return k | 1; // 0 marks an empty slot
}

// The id of the code object whose key is k (0: none, counted).
static uint32_t code_id(const char *code, uint64_t k) {
    uint64_t idx = (k >> 20) & (CODE_SLOTS - 1);
    for (int probe = 0; probe < 64; probe++, idx = (idx + 1) & (CODE_SLOTS - 1)) {
        struct code_slot *s = &code_slots[idx];
        uint64_t cur = atomic_load_explicit(&s->key, memory_order_acquire);
        if (cur == 0) {
            if (atomic_load_explicit(&next_code, memory_order_relaxed) > MAX_CODES) break;
            if (atomic_compare_exchange_strong(&s->key, &cur, k)) return code_publish(s, code);
        }
        if (cur != k) continue;
        uint32_t id;
        unsigned spins = 0; // the claimant is copying; one that vanished (fork) is given up on
        while ((id = atomic_load_explicit(&s->id, memory_order_acquire)) == 0) {
            if (++spins > 100000) break;
            if (spins > 100) sched_yield();
        }
        return id == CODE_FAILED ? 0 : id;
    }
    atomic_fetch_add_explicit(&tpprof_py_frames_lost, 1, memory_order_relaxed);
    return 0;
}

// ---------------------------------------------------------------------------
// The thread's code ids, by code object.
//
// A frame's code id comes from its code object's key through the process's
// table: four multiplies one after the other and a probe of a 2 MiB table,
// for each frame of each allocation (half of py_walk's samples in the
// PyTorch loop, whose Python stacks hardly change while libtorch's static
// constructors make 800,000 allocations under one import). The thread
// keeps the ids it found, by code object, with the parts the key was made
// of: a code object that still holds all of them takes its id from there
// (the same parts make the same key, and a key's id never changes). An
// entry is a fact about the process's memory and table, right for any
// thread that reads the same parts: the memo goes with the thread struct,
// as the CFI walk's state does. Direct mapped, 512 entries of 48 bytes
// (24 KiB), mapped on the thread's first Python stack (not static TLS,
// which glibc takes from every thread's stack).

#define CODE_MEMO_BITS 9
struct code_memo_entry {
    struct code_parts p; // p.code NULL: empty
    uint32_t id;
};
struct tpprof_py_memo {
    struct code_memo_entry e[1u << CODE_MEMO_BITS];
};

// The calling thread's memo, or NULL (no thread struct, or no memory: the
// ids then come from the table each time).
static struct tpprof_py_memo *memo_of_thread(void) {
    struct tpprof_thread *t = tpprof_self;
    if (TPPROF_UNLIKELY(!t)) return NULL;
    if (TPPROF_UNLIKELY(!t->py_memo)) t->py_memo = tpprof_mem_map(sizeof *t->py_memo);
    return t->py_memo;
}

// The id of `code` (0: none, counted), from the memo where it holds.
PY_INLINE uint32_t code_id_of(const struct py_layout *lay, struct tpprof_py_memo *memo, const char *code) {
    struct code_parts p = code_parts(lay, code);
    if (TPPROF_UNLIKELY(!memo)) return code_id(code, code_key(&p));
    struct code_memo_entry *e = &memo->e[((uintptr_t)code >> 4) * 0x9E3779B97F4A7C15ULL >> (64 - CODE_MEMO_BITS)];
    if (e->p.code == code && e->p.qualname == p.qualname && e->p.filename == p.filename &&
        e->p.linetable == p.linetable && e->p.firstlineno == p.firstlineno)
        return e->id;
    uint32_t id = code_id(code, code_key(&p));
    if (id) {
        e->p = p;
        e->id = id;
    }
    return id;
}

// ---------------------------------------------------------------------------
// The hot path.

// The calling thread's PyThreadState, or NULL.
PY_INLINE const char *this_tstate(const struct py_layout *lay) {
    const char *rt = runtime;
    if (*(void *const *)(rt + lay->rt_finalizing)) return NULL;
    const int *tss = (const int *)(rt + lay->rt_tss);
    if (!tss[0]) return NULL; // the interpreter has not started (or is gone)
    const char *ts = pthread_getspecific((pthread_key_t)(unsigned)tss[1]);
    if (!aligned(ts) || ptr_at(ts, lay->ts_interp) != ptr_at(rt, lay->rt_autointerp)) return NULL;
    return ts;
}

// The offsets against the interpreter's own answer, once, on the first
// thread that has a thread state.
static __attribute__((noinline)) bool verify_first(const char *ts) {
    if (gilstate_get && gilstate_get() == ts) {
        atomic_store(&verified, 1);
        return true;
    }
    atomic_store(&layout_bad, 1);
    tpprof_py_on = false;
    return false;
}
PY_INLINE bool verify(const char *ts) {
    return TPPROF_LIKELY(atomic_load_explicit(&verified, memory_order_relaxed) == 1) || verify_first(ts);
}

// The calling thread's Python frames, innermost first, into py (np
// returned; 0: none); ends[g] is one past the last frame of the g-th C-level
// evaluation, *ngroups of them.
PY_INLINE int py_walk_in(const struct py_layout *lay, uintptr_t py[TPPROF_MAX_DEPTH], uint8_t ends[PY_GROUPS_MAX],
                         int *ngroups) {
    const char *ts = this_tstate(lay);
    if (!ts || !verify(ts)) return 0;
    const char *fr;
    if (lay->ts_cframe) {
        const char *cf = ptr_at(ts, lay->ts_cframe);
        if (!aligned(cf)) return 0;
        fr = ptr_at(cf, lay->cf_current);
    } else {
        fr = ptr_at(ts, lay->ts_current_frame);
    }
    int np = 0, ng = 0;
    struct tpprof_py_memo *memo = memo_of_thread();
    // (A recursion deeper than a stack holds keeps its innermost frames.)
    for (int steps = 0; aligned(fr) && steps < PY_WALK_MAX && ng < PY_GROUPS_MAX && np < TPPROF_MAX_DEPTH; steps++) {
        int owner = fr[lay->fr_owner];
        if (lay->owner_cstack >= 0 && owner == lay->owner_cstack) {
            // 3.12 on: the frame a C-level evaluation pushes below the
            // frames it runs (its code a trampoline, or None), not shown.
            ends[ng++] = (uint8_t)np;
            fr = ptr_at(fr, lay->fr_previous);
            continue;
        }
        const char *code = ptr_at(fr, lay->fr_code);
        if (!aligned(code) || *(const void *const *)(code + lay->ob_type) != code_type) break; // not a frame
        const char *units = code + lay->co_code;
        intptr_t unit = (ptr_at(fr, lay->fr_instr) - units) / 2;
        intptr_t size = *(const intptr_t *)(code + lay->co_size);
        // A frame just pushed, whose code has not started (CPython's
        // _PyFrame_IsIncomplete), is not shown: tracebacks leave it out too
        // (so is 3.13's shim frame under a class's __init__ run inline).
        bool incomplete = owner != lay->owner_generator && unit < *(const int *)(code + lay->co_firsttraceable);
        if (!incomplete && unit >= 0 && unit < size && unit < (1 << TPPROF_PY_UNIT_BITS)) {
            uint32_t cid = code_id_of(lay, memo, code);
            if (cid) py[np++] = TPPROF_PY_TAG | (uint64_t)cid << TPPROF_PY_UNIT_BITS | (uint64_t)unit;
        }
        if (lay->fr_is_entry && fr[lay->fr_is_entry]) ends[ng++] = (uint8_t)np;
        fr = ptr_at(fr, lay->fr_previous);
    }
    if (np && (ng == 0 || ends[ng - 1] != np)) { // the outermost group ended by a limit
        if (ng == PY_GROUPS_MAX) ng--;
        ends[ng++] = (uint8_t)np;
    }
    *ngroups = ng;
    return np;
}

// One walk a layout, its index a constant (each offset an immediate),
// called through py_walk, set with L. (A switch on the version in one
// function cost the 3.11 walk 7 instructions more, 1.7%: callgrind.)
#define PY_WALK_OF(i) \
    static int py_walk_##i(uintptr_t *py, uint8_t *ends, int *ngroups) { return py_walk_in(&layouts[i], py, ends, ngroups); }
PY_WALK_OF(0)
PY_WALK_OF(1)
PY_WALK_OF(2)

// The native frames ips[0..n) with the Python frames put in (see
// tpprof_py_merge), into out, interned. The depot's hash is taken as the
// frames are put (the multiplies overlap the copying; a separate pass over
// frames after was 2.4% of bench/py_alloc.py's samples under the preload).
static uint32_t interleave_intern(uintptr_t out[TPPROF_MAX_DEPTH], const uintptr_t *ips, int n, const uintptr_t *py,
                                  int np, const uint8_t *ends, int ng) {
    uint64_t acc[2] = {0, 0}, h[2];
    int m = 0, g = 0, from = 0;
#define PUT(x) (out[m] = (x), tpprof_stack_hash_step(acc, out[m]), m++)
    for (int i = 0; i < n && m < TPPROF_MAX_DEPTH; i++) {
        uintptr_t ret = ips[i];
        // No return address is there (base.h): a walk that read such a word
        // (a frame-pointer walk through libffi's call under pyenv's 3.13
        // ctypes) ends before it, or it would read as a Python frame.
        if (TPPROF_UNLIKELY(ret >= TPPROF_USER_END)) break;
        if (g < ng && ret - 1 - eval_lo < eval_hi - eval_lo) { // a return address inside the evaluator
            for (; from < ends[g] && m < TPPROF_MAX_DEPTH; from++) PUT(py[from]);
            g++;
            if (m == TPPROF_MAX_DEPTH) break;
        }
        PUT(ret);
    }
    // Evaluations below the captured native frames (TPPROF_DEPTH): their
    // Python frames go last, still in order.
    for (; from < np && m < TPPROF_MAX_DEPTH; from++) PUT(py[from]);
#undef PUT
    tpprof_stack_hash_end(acc, m, h);
    return tpprof_stack_intern_h(out, m, h, 0);
}

uint32_t tpprof_py_merge(uint32_t native_id, const uintptr_t *ips, int n) {
    if (!native_id || !L) return native_id;
    uintptr_t py[TPPROF_MAX_DEPTH];
    uint8_t ends[PY_GROUPS_MAX];
    int ng;
    int np = py_walk(py, ends, &ng);
    if (np == 0) return native_id;
    uintptr_t out[TPPROF_MAX_DEPTH];
    return interleave_intern(out, ips, n, py, np, ends, ng);
}

uint32_t tpprof_py_intern(const uintptr_t *ips, int n) {
    uintptr_t py[TPPROF_MAX_DEPTH];
    uint8_t ends[PY_GROUPS_MAX];
    int ng, np = 0;
    if (L && n > 0) np = py_walk(py, ends, &ng);
    if (np == 0) return tpprof_stack_intern(ips, n);
    uintptr_t out[TPPROF_MAX_DEPTH];
    return interleave_intern(out, ips, n, py, np, ends, ng);
}

// ---------------------------------------------------------------------------
// Resolving (writer thread).

static unsigned rd_varint(const uint8_t *t, size_t len, size_t *i) {
    unsigned v = 0, shift = 0;
    while (*i < len && shift < 30) {
        uint8_t b = t[(*i)++];
        v |= (unsigned)(b & 63) << shift;
        shift += 6;
        if (!(b & 64)) break;
    }
    return v;
}

static int rd_svarint(const uint8_t *t, size_t len, size_t *i) {
    unsigned v = rd_varint(t, len, i);
    return v & 1 ? -(int)(v >> 1) : (int)(v >> 1);
}

// CPython 3.11's location table, 3.12's and 3.13's too (Objects/locations.md): entries of one
// header byte (bit 7 set, code in bits 3-6, code units covered - 1 in bits
// 0-2) and a code-dependent tail; every entry moves the line by a delta.
int tpprof_py_linetable_line(const uint8_t *tab, size_t len, int first, uint32_t unit) {
    size_t i = 0;
    uint32_t addr = 0;
    int line = first;
    while (i < len) {
        uint8_t b = tab[i++];
        if (!(b & 0x80)) return 0; // not an entry's start: damaged
        int code = b >> 3 & 15;
        uint32_t n = (uint32_t)(b & 7) + 1;
        bool none = false;
        if (code == 15) none = true;                 // no location
        else if (code == 14) {                       // long form
            line += rd_svarint(tab, len, &i);
            rd_varint(tab, len, &i);
            rd_varint(tab, len, &i);
            rd_varint(tab, len, &i);
        } else if (code == 13) line += rd_svarint(tab, len, &i); // no columns
        else if (code >= 10) {                       // one line, two column bytes
            line += code - 10;
            i += 2;
        } else i += 1;                               // short form, same line
        if (unit < addr + n) return none ? 0 : line;
        addr += n;
    }
    return 0;
}

bool tpprof_py_resolve(uint64_t ip, struct tpprof_py_frame *out) {
    uint32_t id = (uint32_t)(ip >> TPPROF_PY_UNIT_BITS) & ((1u << TPPROF_PY_CODE_BITS) - 1);
    if (!codes || id == 0 || id > MAX_CODES || !codes[id]) return false;
    const struct py_code *c = codes[id];
    out->function = c->name;
    out->file = c->file;
    out->line = tpprof_py_linetable_line(c->ltab, c->ltab_len, c->firstlineno,
                                         (uint32_t)ip & ((1u << TPPROF_PY_UNIT_BITS) - 1));
    if (out->line <= 0) out->line = c->firstlineno;
    return true;
}
