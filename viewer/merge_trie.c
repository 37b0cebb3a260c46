// merge_trie.c: several recordings' stack tries folded into one, each stack
// the processes share stored once (merge_trie.h says how frames compare).
//
// With ASLR the same code sits at a different address in each process, so a
// frame is keyed by (module identity, ip - module base) when the input's
// modules table places it in a module with a build id, and by (input, ip)
// otherwise; a Python frame by its function, file and line (py_frames),
// all that any command shows of it. A merged node is keyed by (merged
// parent, frame key) in one hash table, so an input's node is found or added
// in O(1). Left out on purpose: frames outside modules (JIT code), whose
// addresses mean nothing outside their process.
#include "merge_trie.h"
#include "viewer.h"

#include <inttypes.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#define IP_MASK ((UINT64_C(1) << 48) - 1)
#define IP_PYTHON (UINT64_C(1) << 47)

// A merged node's key. a > 0: a module identity and b the offset in it;
// a < 0: -(input number) and b the input's own ip.
typedef struct slot {
    int64_t parent, a;
    uint64_t b;
    int64_t id; // 0: empty
} slot;

struct tpprof_trie {
    slot *slots;
    size_t cap, used; // cap a power of two
    int64_t next_id;
    char **idents;    // identity i + 1: "path\nbuild_id" of a module, "\1function\nfile" of Python code
    size_t nidents, cap_idents;
    size_t *ident_slots; // open addressing over idents: index + 1, 0 empty
    size_t ident_cap;    // a power of two
    // By merged id: the child found or made last under it, and each node's
    // (a, b). The inputs of a build are mostly the same programs walking the
    // same stacks in the same order: a node's child is nearly always the one
    // the last input found, whose key sits next to the last one read (ids
    // are given in that order), where the table's slot is a cache miss.
    int64_t (*last_child)[2]; // the last, then the one before it
    struct key_ab {
        int64_t a;
        uint64_t b;
    } *key_ab;
    size_t cap_ids;
};

// One row of an input's modules, sorted by lo.
typedef struct module_range {
    uint64_t lo, hi, base;
    int64_t ident;   // 0: not comparable across inputs (no build id)
    uint64_t max_hi; // the largest hi of this row and those before it
} module_range;

tpprof_trie *tpprof_trie_new(void) {
    tpprof_trie *t = calloc(1, sizeof *t);
    if (t) {
        t->cap = 1024;
        t->slots = calloc(t->cap, sizeof *t->slots);
    }
    if (!t || !t->slots) {
        free(t);
        tpprof_error_set("out of memory");
        return NULL;
    }
    t->next_id = 1;
    return t;
}

void tpprof_trie_free(tpprof_trie *t) {
    if (!t)
        return;
    for (size_t i = 0; i < t->nidents; i++)
        free(t->idents[i]);
    free(t->idents);
    free(t->ident_slots);
    free(t->last_child);
    free(t->key_ab);
    free(t->slots);
    free(t);
}

void tpprof_trie_input_free(tpprof_trie_input *in) {
    free(in->nodes);
    free(in->old_ids);
    free(in->new_ids);
    memset(in, 0, sizeof *in);
}

static uint64_t hash(int64_t parent, int64_t a, uint64_t b) {
    uint64_t h = (uint64_t)parent * UINT64_C(0x9E3779B97F4A7C15);
    h ^= (uint64_t)a * UINT64_C(0xC2B2AE3D27D4EB4F) + (h << 6) + (h >> 2);
    h ^= b * UINT64_C(0x165667B19E3779F9) + (h << 6) + (h >> 2);
    return h ^ (h >> 29);
}

static int grow_table(tpprof_trie *t) {
    size_t cap = t->cap * 2;
    slot *s = calloc(cap, sizeof *s);
    if (!s)
        return tpprof_error_set("out of memory folding stacks");
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->slots[i].id)
            continue;
        size_t j = hash(t->slots[i].parent, t->slots[i].a, t->slots[i].b) & (cap - 1);
        while (s[j].id)
            j = (j + 1) & (cap - 1);
        s[j] = t->slots[i];
    }
    free(t->slots);
    t->slots = s;
    t->cap = cap;
    return 0;
}

// Room in the arrays by merged id for ids up to id. 0, or -1 (out of memory).
static int ids_room(tpprof_trie *t, int64_t id) {
    if ((size_t)id < t->cap_ids)
        return 0;
    size_t cap = t->cap_ids ? t->cap_ids : 4096;
    while (cap <= (size_t)id)
        cap *= 2;
    int64_t (*lc)[2] = realloc(t->last_child, cap * sizeof *lc);
    if (lc)
        t->last_child = lc;
    struct key_ab *k = realloc(t->key_ab, cap * sizeof *k);
    if (k)
        t->key_ab = k;
    if (!lc || !k)
        return -1;
    memset(lc + t->cap_ids, 0, (cap - t->cap_ids) * sizeof *lc);
    t->cap_ids = cap;
    return 0;
}

// The merged id of (parent, a, b), *added when new; 0 on out of memory.
static int64_t find_or_add(tpprof_trie *t, int64_t parent, int64_t a, uint64_t b, bool *added) {
    if ((size_t)parent < t->cap_ids)
        for (int i = 0; i < 2; i++) {
            int64_t c = t->last_child[parent][i];
            if (c && t->key_ab[c].a == a && t->key_ab[c].b == b) {
                if (i) { // the last now
                    t->last_child[parent][1] = t->last_child[parent][0];
                    t->last_child[parent][0] = c;
                }
                *added = false;
                return c;
            }
        }
    if (((t->used + 1) * 2 > t->cap && grow_table(t) != 0) || ids_room(t, parent > t->next_id ? parent : t->next_id) != 0)
        return 0;
    size_t j = hash(parent, a, b) & (t->cap - 1);
    for (; t->slots[j].id; j = (j + 1) & (t->cap - 1))
        if (t->slots[j].parent == parent && t->slots[j].a == a && t->slots[j].b == b) {
            *added = false;
            t->last_child[parent][1] = t->last_child[parent][0];
            t->last_child[parent][0] = t->slots[j].id;
            return t->slots[j].id;
        }
    t->slots[j] = (slot){parent, a, b, t->next_id++};
    t->used++;
    t->key_ab[t->slots[j].id] = (struct key_ab){a, b};
    t->last_child[parent][1] = t->last_child[parent][0];
    t->last_child[parent][0] = t->slots[j].id;
    *added = true;
    return t->slots[j].id;
}

static uint64_t hash_text(const char *k) {
    uint64_t h = UINT64_C(1469598103934665603);
    for (; *k; k++)
        h = (h ^ (unsigned char)*k) * UINT64_C(1099511628211);
    return h;
}

// The identity number of key (owned: kept or freed), interned; 0 on out of
// memory. Hashed: a Python job has thousands of distinct functions.
static int64_t intern(tpprof_trie *t, char *key) {
    if (!key)
        return 0;
    if ((t->nidents + 1) * 2 > t->ident_cap) {
        size_t cap = t->ident_cap ? t->ident_cap * 2 : 256;
        size_t *slots = calloc(cap, sizeof *slots);
        if (!slots) {
            free(key);
            return 0;
        }
        for (size_t i = 0; i < t->nidents; i++) {
            size_t j = hash_text(t->idents[i]) & (cap - 1);
            while (slots[j])
                j = (j + 1) & (cap - 1);
            slots[j] = i + 1;
        }
        free(t->ident_slots);
        t->ident_slots = slots;
        t->ident_cap = cap;
    }
    size_t j = hash_text(key) & (t->ident_cap - 1);
    for (; t->ident_slots[j]; j = (j + 1) & (t->ident_cap - 1))
        if (strcmp(t->idents[t->ident_slots[j] - 1], key) == 0) {
            free(key);
            return (int64_t)t->ident_slots[j];
        }
    char **grown = tpprof_grow(t->idents, t->nidents, &t->cap_idents, sizeof *grown);
    if (!grown) {
        free(key);
        return 0;
    }
    t->idents = grown;
    t->idents[t->nidents++] = key;
    t->ident_slots[j] = t->nidents;
    return (int64_t)t->nidents;
}

static char *join(const char *lead, const char *x, const char *y) {
    size_t len = strlen(lead) + strlen(x) + strlen(y) + 2;
    char *key = malloc(len);
    if (key)
        snprintf(key, len, "%s%s\n%s", lead, x, y);
    return key;
}

// A module's identity: its path and build id; 0 without a build id (two
// files at one path need not be one file).
static int64_t intern_module(tpprof_trie *t, const char *path, const char *build_id) {
    if (!path || !build_id || !*build_id)
        return 0;
    return intern(t, join("", path, build_id));
}

static int cmp_range(const void *x, const void *y) {
    const module_range *a = x, *b = y;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

static int load_modules(tpprof_trie *t, tpprof_db *db, module_range **out, size_t *count) {
    sqlite3_stmt *st = NULL;
    *out = NULL;
    *count = 0;
    if (sqlite3_prepare_v2(db->sql, "SELECT path, build_id, base, lo, hi FROM modules", -1, &st, NULL) != SQLITE_OK)
        return tpprof_db_error(db, "reading modules");
    size_t cap = 0;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        module_range *grown = tpprof_grow(*out, *count, &cap, sizeof *grown);
        if (!grown) {
            sqlite3_finalize(st);
            return -1;
        }
        *out = grown;
        module_range *m = &(*out)[(*count)++];
        m->base = (uint64_t)sqlite3_column_int64(st, 2);
        m->lo = (uint64_t)sqlite3_column_int64(st, 3);
        m->hi = (uint64_t)sqlite3_column_int64(st, 4);
        m->ident = intern_module(t, (const char *)sqlite3_column_text(st, 0), (const char *)sqlite3_column_text(st, 1));
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return tpprof_db_error(db, "reading modules");
    if (*count)
        qsort(*out, *count, sizeof **out, cmp_range);
    for (size_t i = 0; i < *count; i++)
        (*out)[i].max_hi = i && (*out)[i - 1].max_hi > (*out)[i].hi ? (*out)[i - 1].max_hi : (*out)[i].hi;
    return 0;
}

// An input's Python frames (py_frames), sorted by id: each one's code
// (function and file, interned) and line, which is all a report shows of it.
typedef struct py_keys {
    int64_t *ids, *idents, *lines;
    size_t n;
} py_keys;

static void py_keys_free(py_keys *py) {
    free(py->ids);
    free(py->idents);
    free(py->lines);
}

static int load_py_frames(tpprof_trie *t, tpprof_db *db, py_keys *py) {
    memset(py, 0, sizeof *py);
    int64_t count = 0;
    if (!tpprof_db_has_table(db, "py_frames"))
        return 0;
    if (tpprof_db_scalar(db, "SELECT COUNT(*) FROM py_frames", &count) != 0)
        return -1;
    sqlite3_stmt *st = NULL;
    py->ids = malloc(((size_t)count + 1) * sizeof *py->ids);
    py->idents = malloc(((size_t)count + 1) * sizeof *py->idents);
    py->lines = malloc(((size_t)count + 1) * sizeof *py->lines);
    if (!py->ids || !py->idents || !py->lines)
        return tpprof_error_set("out of memory reading py_frames");
    if (sqlite3_prepare_v2(db->sql, "SELECT id, function, file, line FROM py_frames ORDER BY id", -1, &st, NULL) !=
        SQLITE_OK)
        return tpprof_db_error(db, "reading py_frames");
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW && py->n < (size_t)count) {
        const char *fn = (const char *)sqlite3_column_text(st, 1), *file = (const char *)sqlite3_column_text(st, 2);
        // "\1" first: no module path starts so.
        int64_t ident = intern(t, join("\1", fn ? fn : "", file ? file : ""));
        if (!ident) {
            sqlite3_finalize(st);
            return tpprof_error_set("out of memory reading py_frames");
        }
        py->ids[py->n] = sqlite3_column_int64(st, 0);
        py->idents[py->n] = ident;
        py->lines[py->n++] = sqlite3_column_int64(st, 3);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW)
        return tpprof_db_error(db, "reading py_frames");
    return 0;
}

// The key (a, b) of ip in input k (module ranges sorted by lo; its Python
// frames): a Python frame is its code and line, a native one its module and
// offset, when known; otherwise the input's own.
static void frame_key(const module_range *m, size_t n, const py_keys *py, int64_t k, uint64_t ip, int64_t *a,
                      uint64_t *b) {
    *a = -k;
    *b = ip;
    if (ip & IP_PYTHON) {
        ptrdiff_t i = tpprof_ids_index(py->ids, py->n, (int64_t)ip);
        if (i >= 0) {
            *a = py->idents[i];
            *b = (uint64_t)py->lines[i];
        }
        return;
    }
    // The last range starting at or below ip, then back while an earlier one
    // may still cover it (ranges of modules unloaded and loaded again overlap).
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m[mid].lo <= ip)
            lo = mid + 1;
        else
            hi = mid;
    }
    int64_t ident = 0;
    uint64_t offset = 0;
    for (size_t i = lo; i-- > 0 && m[i].max_hi > ip;) {
        if (ip >= m[i].hi)
            continue;
        // Every module that covered ip must agree, else it stays the input's own.
        if (!m[i].ident || (ident && (ident != m[i].ident || offset != ip - m[i].base)))
            return;
        ident = m[i].ident;
        offset = ip - m[i].base;
    }
    if (ident) {
        *a = ident;
        *b = offset;
    }
}

// ---------------------------------------------------------------------------
// One input

typedef struct raw_nodes {
    int64_t *ids, *parents;
    uint64_t *ips;
    size_t n, cap;
} raw_nodes;

static int take_node(void *arg, int64_t id, int64_t parent, int64_t ip) {
    raw_nodes *r = arg;
    if (r->n && id <= r->ids[r->n - 1])
        return tpprof_error_set("stack node %" PRId64 " out of order", id);
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 4096;
        int64_t *ids = realloc(r->ids, cap * sizeof *ids);
        if (ids)
            r->ids = ids;
        int64_t *parents = realloc(r->parents, cap * sizeof *parents);
        if (parents)
            r->parents = parents;
        uint64_t *ips = realloc(r->ips, cap * sizeof *ips);
        if (ips)
            r->ips = ips;
        if (!ids || !parents || !ips)
            return tpprof_error_set("out of memory reading stack nodes");
        r->cap = cap;
    }
    r->ids[r->n] = id;
    r->parents[r->n] = parent;
    r->ips[r->n++] = (uint64_t)ip & IP_MASK;
    return 0;
}

static int add_new(tpprof_trie_input *out, int64_t id, int64_t parent, int64_t k, uint64_t raw) {
    tpprof_trie_node *grown = tpprof_grow(out->nodes, out->nnodes, &out->cap_nodes, sizeof *grown);
    if (!grown)
        return -1;
    out->nodes = grown;
    out->nodes[out->nnodes++] = (tpprof_trie_node){id, parent, (int64_t)(((uint64_t)k << 48) | raw), raw};
    return 0;
}

int tpprof_trie_add(tpprof_trie *t, tpprof_db *db, int64_t k, tpprof_trie_input *out) {
    out->nnodes = 0;
    out->n = 0;
    module_range *mods = NULL;
    size_t nmods = 0;
    raw_nodes r = {0};
    size_t *chain = NULL;
    py_keys py = {0};
    int status = load_modules(t, db, &mods, &nmods);
    if (status == 0)
        status = load_py_frames(t, db, &py);
    if (status == 0)
        status = tpprof_stack_nodes_each(db, take_node, &r);
    if (status == 0 && r.n > out->cap) {
        int64_t *o = realloc(out->old_ids, r.n * sizeof *o);
        if (o)
            out->old_ids = o;
        int64_t *nw = realloc(out->new_ids, r.n * sizeof *nw);
        if (nw)
            out->new_ids = nw;
        if (o && nw)
            out->cap = r.n;
        else
            status = tpprof_error_set("out of memory folding stacks");
    }
    chain = status == 0 ? malloc((r.n + 1) * sizeof *chain) : NULL;
    if (status == 0 && !chain)
        status = tpprof_error_set("out of memory folding stacks");
    if (status == 0) {
        memcpy(out->old_ids, r.ids, r.n * sizeof *r.ids);
        for (size_t i = 0; i < r.n; i++)
            out->new_ids[i] = 0; // 0: not folded yet
        out->n = r.n;
    }
    // Parents are numbered before their children by the recorder, but a
    // damaged or hand-written file need not be: climb to a folded ancestor
    // (or the root) first, then fold down the chain.
    for (size_t i = 0; i < r.n && status == 0; i++) {
        size_t depth = 0;
        int64_t parent_new = 0;
        for (size_t j = i; out->new_ids[j] == 0;) {
            if (depth > r.n) {
                status = tpprof_error_set("stack node %" PRId64 " is its own ancestor: a damaged recording",
                                          r.ids[i]);
                break;
            }
            chain[depth++] = j;
            // A parent that is no node of the input reads as the root, as a
            // stack's outermost frame does.
            ptrdiff_t p = r.parents[j] ? tpprof_ids_index(r.ids, r.n, r.parents[j]) : -1;
            if (p < 0)
                break;
            if (out->new_ids[p]) {
                parent_new = out->new_ids[p];
                break;
            }
            j = (size_t)p;
        }
        while (status == 0 && depth > 0) {
            size_t j = chain[--depth];
            int64_t a;
            uint64_t b;
            frame_key(mods, nmods, &py, k, r.ips[j], &a, &b);
            bool added = false;
            int64_t id = find_or_add(t, parent_new, a, b, &added);
            if (!id || (added && add_new(out, id, parent_new, k, r.ips[j]) != 0)) {
                status = tpprof_error_set("out of memory folding stacks");
                break;
            }
            out->new_ids[j] = id;
            parent_new = id;
        }
    }
    free(chain);
    py_keys_free(&py);
    free(r.ids);
    free(r.parents);
    free(r.ips);
    free(mods);
    return status;
}
