// cmd_graph.c: `tpprof graph DB`: the storage-sharing graph at one moment:
// storages as nodes (size, allocator, reference counts) with the tensors on
// them as children, and views hanging under their base tensor. As text, as
// Graphviz DOT, or as JSON.
//
// At exit and at the peak come from the rows the recorder keeps in every
// mode (docs/schema-tensors.md); an arbitrary --at TIME needs a full-mode
// recording, whose events give each storage's counts at that time. This
// file never writes the database.
#define _POSIX_C_SOURCE 200809L
#include "viewer.h"

#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

const char tpprof_usage_graph[] =
    "usage: tpprof graph DB [--at-exit | --at-peak | --at TIME] [--format text|dot|json]\n"
    "\n"
    "The storage-sharing graph: each storage alive at that moment (size, allocator,\n"
    "strong and weak counts) with the tensors on it (offset, shape, strides, dtype);\n"
    "views hang under their base tensor.\n"
    "\n"
    "  --at-exit     when the recording ended (default)\n"
    "  --at-peak     at the peak of live storage bytes (a full-mode recording: all as at that\n"
    "                time; an aggregate one: the counts shown are the final ones)\n"
    "  --at TIME     at TIME since the start: 2000000 (ns), 250us, 20ms, 1.5s; needs a\n"
    "                full-mode recording (tpprof run --full)\n"
    "  --format F    text (default), dot (Graphviz: tpprof graph DB --format dot | dot -Tsvg)\n"
    "                or json\n";

enum { AT_EXIT, AT_PEAK, AT_TIME };
enum { FORMAT_TEXT, FORMAT_DOT, FORMAT_JSON };

typedef struct graph {
    const tpprof_profile *p;
    const tpprof_tensors *t;
    const tpprof_autograd *ag;    // the autograd graph at the end (empty without its tables)
    int at;
    int64_t time_ns;
    bool peak_counts;             // at the peak of a full recording: counts from its events
    bool *storage_in, *tensor_in; // by index
    int64_t *strong, *weak;       // by storage index, at that moment
    size_t nstorages, ntensors, nedges;
} graph;

// ---------------------------------------------------------------------------
// Which storages and tensors the moment holds

static bool alive_at(int64_t created, int64_t freed, int64_t t) {
    return (created == TPPROF_NO_TIME || created <= t) && (freed == TPPROF_NO_TIME || freed > t);
}

// Counts at g->time_ns from the full-mode refcount events (op 11: size =
// strong, old_address = weak, address = storage id).
static int counts_at(graph *g) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(g->p->db->sql,
                           "SELECT address, size, old_address FROM events WHERE op = 11 AND "
                           "time_ns <= ?1 ORDER BY seq",
                           -1, &st, NULL) != SQLITE_OK)
        return tpprof_db_error(g->p->db, "reading refcount events");
    sqlite3_bind_int64(st, 1, g->time_ns);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const tpprof_storage *s = tpprof_tensors_storage(g->t, sqlite3_column_int64(st, 0));
        if (!s)
            continue;
        size_t i = (size_t)(s - g->t->storages);
        g->strong[i] = sqlite3_column_int64(st, 1);
        g->weak[i] = sqlite3_column_int64(st, 2);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : tpprof_db_error(g->p->db, "reading refcount events");
}

// The peak's last moment, as docs/schema-tensors.md defines the peak: from
// the event that reached it (meta.peak_storage_time_ns) until just before
// the first tensor free or data release after it (the end, if none).
static int64_t peak_last_moment(const tpprof_tensors *t) {
    int64_t from = t->peak_storage_time_ns, until = INT64_MAX;
    for (size_t i = 0; i < t->ntensors; i++) {
        int64_t f = t->tensors[i].freed_ns;
        if (f != TPPROF_NO_TIME && f > from && f < until)
            until = f;
    }
    for (size_t i = 0; i < t->nstorages; i++) {
        int64_t r = t->storages[i].data_released_ns;
        if (r != TPPROF_NO_TIME && r > from && r < until)
            until = r;
    }
    return until == INT64_MAX ? until : until - 1;
}

static int select_moment(graph *g) {
    const tpprof_tensors *t = g->t;
    g->storage_in = calloc(t->nstorages + 1, sizeof *g->storage_in);
    g->tensor_in = calloc(t->ntensors + 1, sizeof *g->tensor_in);
    g->strong = calloc(t->nstorages + 1, sizeof *g->strong);
    g->weak = calloc(t->nstorages + 1, sizeof *g->weak);
    if (!g->storage_in || !g->tensor_in || !g->strong || !g->weak)
        return tpprof_error_set("out of memory");
    // One moment for every figure: at the peak of a full recording, its
    // last moment, for which storages and tensors are taken by their times
    // as the refcounts are by the events' (not the at_peak flags with the
    // counts of another moment).
    bool by_time = g->at == AT_TIME || g->peak_counts;
    for (size_t i = 0; i < t->nstorages; i++) {
        const tpprof_storage *s = &t->storages[i];
        g->storage_in[i] = by_time             ? alive_at(s->created_ns, s->freed_ns, g->time_ns)
                           : g->at == AT_EXIT ? tpprof_storage_alive(s)
                                              : s->at_peak;
        g->strong[i] = s->strong;
        g->weak[i] = s->weak;
        if (by_time) {
            g->strong[i] = 1; // a new storage: one strong reference, c10's weak +1
            g->weak[i] = 1;
        }
        g->nstorages += g->storage_in[i];
    }
    for (size_t i = 0; i < t->ntensors; i++) {
        const tpprof_tensor *x = &t->tensors[i];
        const tpprof_storage *s = tpprof_tensors_storage(t, x->storage_id);
        bool in = by_time             ? alive_at(x->created_ns, x->freed_ns, g->time_ns)
                  : g->at == AT_EXIT ? tpprof_tensor_alive(x)
                                     : x->at_peak;
        g->tensor_in[i] = in && s && g->storage_in[s - t->storages];
        g->ntensors += g->tensor_in[i];
    }
    g->nedges = g->ntensors; // every tensor has exactly one parent
    return by_time ? counts_at(g) : 0;
}

// The parent of tensor x in the graph: its base tensor when the base is in
// the graph on the same storage, else NULL (the storage).
static const tpprof_tensor *parent_of(const graph *g, const tpprof_tensor *x) {
    if (!x->base_id || x->base_id == x->id)
        return NULL;
    const tpprof_tensor *b = tpprof_tensors_tensor(g->t, x->base_id);
    // base_id names the root base, itself no view: anything else is not
    // followed (and a damaged file cannot make a cycle).
    if (!b || b->base_id != 0 || !g->tensor_in[b - g->t->tensors] || b->storage_id != x->storage_id)
        return NULL;
    return b;
}

static bool has_unmatched(const tpprof_tensors *t, int64_t storage) {
    size_t n = 0;
    const tpprof_ref *r = tpprof_tensors_refs(t, storage, &n);
    for (size_t i = 0; i < n; i++)
        if (tpprof_ref_unmatched(&r[i], false))
            return true;
    return false;
}

// At exit: a tp_tensor_retain no release matched keeps x alive.
static bool kept_by_handle(const graph *g, const tpprof_tensor *x) {
    int64_t stack = 0;
    return g->at == AT_EXIT && tpprof_tensors_unmatched_handles(g->t, x->id, &stack) > 0;
}

// The node alive at exit that keeps x as a saved tensor, or NULL (at exit
// only: the graph tables hold the end's graph).
static const tpprof_gnode *saved_by(const graph *g, const tpprof_tensor *x) {
    if (g->at != AT_EXIT)
        return NULL;
    const tpprof_gsaved *sv = tpprof_autograd_saved_as(g->ag, x->storage_id, x->id);
    return sv ? tpprof_autograd_node(g->ag, sv->node_id) : NULL;
}

static const char *moment_name(const graph *g) {
    return g->at == AT_EXIT ? "exit" : g->at == AT_PEAK ? "peak" : "time";
}

// ---------------------------------------------------------------------------
// Text

static void text_tensor(const graph *g, const tpprof_tensor *x, int depth) {
    printf("%*s%s #%lld %s %s, strides %s, offset %lld", 4 + 2 * depth, "",
           depth ? "view" : "tensor", (long long)x->id, x->sizes ? x->sizes : "?",
           x->dtype ? x->dtype : "?", x->strides ? x->strides : "?", (long long)x->offset);
    if (x->base_id && !parent_of(g, x))
        printf(", view of #%lld (not alive then)", (long long)x->base_id);
    const tpprof_gnode *node = saved_by(g, x);
    if (node)
        printf("  (saved by %s #%lld for backward; graph alive: %s)", node->name, (long long)node->id,
               tpprof_gnode_why(node));
    printf("%s\n", kept_by_handle(g, x) ? "  (kept by a handle retain)" : "");
    size_t nv = 0;
    const size_t *views = tpprof_tensors_views_of(g->t, x->id, &nv);
    for (size_t i = 0; i < nv; i++)
        if (g->tensor_in[views[i]] && parent_of(g, &g->t->tensors[views[i]]) == x)
            text_tensor(g, &g->t->tensors[views[i]], depth + 1);
}

static void text_graph(const graph *g) {
    char a[32];
    printf("Storage-sharing graph at %s", moment_name(g));
    if (g->at == AT_TIME)
        printf(" %s", tpprof_format_ns(g->time_ns, a));
    printf(": %zu storage%s, %zu tensor%s%s\n", g->nstorages, g->nstorages == 1 ? "" : "s",
           g->ntensors, g->ntensors == 1 ? "" : "s",
           g->at == AT_PEAK && !g->peak_counts ? " (counts as at exit or when freed: an aggregate "
                                                 "recording keeps no earlier counts)"
                                               : "");
    if (!g->t->attached && g->t->nstorages == 0)
        printf("  (no tensor data in this recording)\n");
    for (size_t i = 0; i < g->t->nstorages; i++) {
        if (!g->storage_in[i])
            continue;
        const tpprof_storage *s = &g->t->storages[i];
        printf("  storage #%lld  %s  %s on %s  strong %lld, weak %lld%s%s\n", (long long)s->id,
               tpprof_format_size((uint64_t)s->nbytes, a), s->allocator ? s->allocator : "(borrowed)",
               s->device ? s->device : "?", (long long)g->strong[i], (long long)g->weak[i],
               g->at == AT_EXIT && !tpprof_storage_data_alive(s) ? "  (data released)" : "",
               g->at == AT_EXIT && has_unmatched(g->t, s->id) ? "  (unmatched retain)" : "");
        bool any = false;
        size_t non = 0;
        const size_t *on = tpprof_tensors_on(g->t, s->id, &non);
        for (size_t k = 0; k < non; k++) {
            const tpprof_tensor *x = &g->t->tensors[on[k]];
            if (g->tensor_in[on[k]] && !parent_of(g, x)) {
                text_tensor(g, x, 0);
                any = true;
            }
        }
        if (!any)
            printf("    (no tensor)\n");
    }
}

// ---------------------------------------------------------------------------
// DOT

// A DOT string body: quotes and backslashes escaped.
static void dot_escaped(const char *s) {
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            putchar('\\');
        putchar(*s);
    }
}

static void dot_graph(const graph *g) {
    char a[32];
    printf("digraph tpprof_storages {\n");
    printf("  rankdir=LR;\n");
    printf("  node [fontname=\"monospace\", fontsize=10];\n");
    printf("  label=\"storage sharing at %s\"; labelloc=t;\n", moment_name(g));
    for (size_t i = 0; i < g->t->nstorages; i++) {
        if (!g->storage_in[i])
            continue;
        const tpprof_storage *s = &g->t->storages[i];
        const char *fill = g->at == AT_EXIT && has_unmatched(g->t, s->id) ? "#f4cccc"
                           : g->at == AT_EXIT && !tpprof_storage_data_alive(s) ? "#dddddd"
                                                                              : "#dbe9f6";
        printf("  s%lld [shape=box, style=filled, fillcolor=\"%s\", label=\"storage #%lld\\n%s ",
               (long long)s->id, fill, (long long)s->id, tpprof_format_size((uint64_t)s->nbytes, a));
        dot_escaped(s->allocator ? s->allocator : "(borrowed)");
        printf(" on ");
        dot_escaped(s->device ? s->device : "?");
        printf("\\nstrong %lld, weak %lld\"];\n", (long long)g->strong[i], (long long)g->weak[i]);
    }
    for (size_t k = 0; k < g->t->ntensors; k++) {
        if (!g->tensor_in[k])
            continue;
        const tpprof_tensor *x = &g->t->tensors[k];
        printf("  t%lld [shape=ellipse, %slabel=\"tensor #%lld\\n", (long long)x->id,
               kept_by_handle(g, x) ? "style=filled, fillcolor=\"#f4cccc\", " : "", (long long)x->id);
        dot_escaped(x->sizes ? x->sizes : "?");
        putchar(' ');
        dot_escaped(x->dtype ? x->dtype : "?");
        printf("\\nstrides ");
        dot_escaped(x->strides ? x->strides : "?");
        printf(" offset %lld%s", (long long)x->offset, kept_by_handle(g, x) ? "\\nkept by a handle retain" : "");
        const tpprof_gnode *node = saved_by(g, x);
        if (node) {
            printf("\\nsaved by ");
            dot_escaped(node->name);
        }
        printf("\"];\n");
        const tpprof_tensor *parent = parent_of(g, x);
        if (parent)
            printf("  t%lld -> t%lld [style=dashed, label=\"view\"];\n", (long long)parent->id,
                   (long long)x->id);
        else
            printf("  s%lld -> t%lld;\n", (long long)x->storage_id, (long long)x->id);
    }
    printf("}\n");
}

// ---------------------------------------------------------------------------
// JSON

static void json_tensor(tpprof_json *j, const graph *g, const tpprof_tensor *x) {
    tpprof_json_object_begin(j);
    tpprof_json_tensor_fields(j, x);
    tpprof_json_key(j, "views");
    tpprof_json_array_begin(j);
    size_t nv = 0;
    const size_t *views = tpprof_tensors_views_of(g->t, x->id, &nv);
    for (size_t i = 0; i < nv; i++)
        if (g->tensor_in[views[i]] && parent_of(g, &g->t->tensors[views[i]]) == x)
            json_tensor(j, g, &g->t->tensors[views[i]]);
    tpprof_json_array_end(j);
    const tpprof_gnode *node = saved_by(g, x);
    if (node) { // only then: earlier readers matched a tensor's layout ending with its views
        tpprof_json_key(j, "saved_by");
        tpprof_json_object_begin_inline(j);
        tpprof_json_kv_int(j, "node", node->id);
        tpprof_json_kv_string(j, "name", node->name);
        tpprof_json_kv_string(j, "graph_alive", tpprof_gnode_why(node));
        tpprof_json_object_end(j);
    }
    tpprof_json_object_end(j);
}

static void json_graph(const graph *g, const char *path) {
    tpprof_json j;
    tpprof_json_document_begin(&j, stdout, "tpprof-graph", 1, path);
    tpprof_json_kv_string(&j, "at", moment_name(g));
    tpprof_json_key(&j, "time_ns");
    if (g->at == AT_TIME)
        tpprof_json_int(&j, g->time_ns);
    else
        tpprof_json_null(&j);
    tpprof_json_key(&j, "storages");
    tpprof_json_array_begin(&j);
    for (size_t i = 0; i < g->t->nstorages; i++) {
        if (!g->storage_in[i])
            continue;
        const tpprof_storage *s = &g->t->storages[i];
        tpprof_json_object_begin(&j);
        tpprof_json_kv_int(&j, "id", s->id);
        tpprof_json_kv_int(&j, "nbytes", s->nbytes);
        tpprof_json_kv_string(&j, "allocator", s->allocator);
        tpprof_json_kv_string(&j, "device", s->device);
        tpprof_json_kv_int(&j, "strong", g->strong[i]);
        tpprof_json_kv_int(&j, "weak", g->weak[i]);
        tpprof_json_kv_bool(&j, "data_released",
                            g->at == AT_EXIT && !tpprof_storage_data_alive(s));
        tpprof_json_key(&j, "tensors");
        tpprof_json_array_begin(&j);
        size_t non = 0;
        const size_t *on = tpprof_tensors_on(g->t, s->id, &non);
        for (size_t k = 0; k < non; k++) {
            const tpprof_tensor *x = &g->t->tensors[on[k]];
            if (g->tensor_in[on[k]] && !parent_of(g, x))
                json_tensor(&j, g, x);
        }
        tpprof_json_array_end(&j);
        tpprof_json_object_end(&j);
    }
    tpprof_json_array_end(&j);
    // The same graph as a flat edge list: storage -> tensor, base -> view.
    tpprof_json_key(&j, "edges");
    tpprof_json_array_begin(&j);
    for (size_t k = 0; k < g->t->ntensors; k++) {
        if (!g->tensor_in[k])
            continue;
        const tpprof_tensor *x = &g->t->tensors[k];
        const tpprof_tensor *parent = parent_of(g, x);
        char from[32], to[32];
        snprintf(from, sizeof from, "%s%lld", parent ? "t" : "s",
                 (long long)(parent ? parent->id : x->storage_id));
        snprintf(to, sizeof to, "t%lld", (long long)x->id);
        tpprof_json_object_begin_inline(&j);
        tpprof_json_kv_string(&j, "from", from);
        tpprof_json_kv_string(&j, "to", to);
        tpprof_json_kv_string(&j, "kind", parent ? "view" : "storage");
        tpprof_json_object_end(&j);
    }
    tpprof_json_array_end(&j);
    tpprof_json_object_end(&j);
    tpprof_json_finish(&j);
}

// ---------------------------------------------------------------------------
// Command

int tpprof_cmd_graph(int argc, char **argv) {
    const char *path = NULL;
    int at = AT_EXIT, format = FORMAT_TEXT, moments = 0;
    int64_t time_ns = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(tpprof_usage_graph, stdout);
            return TPPROF_EXIT_OK;
        } else if (strcmp(argv[i], "--at-exit") == 0) {
            at = AT_EXIT;
            moments++;
        } else if (strcmp(argv[i], "--at-peak") == 0) {
            at = AT_PEAK;
            moments++;
        } else if ((r = tpprof_opt(argc, argv, &i, "--at", &v)) != 0) {
            if (r < 0 || tpprof_parse_time("--at", v, &time_ns) != 0)
                goto usage_error;
            at = AT_TIME;
            moments++;
        } else if ((r = tpprof_opt(argc, argv, &i, "--format", &v)) != 0) {
            if (r < 0)
                goto usage_error;
            if (strcmp(v, "text") == 0)
                format = FORMAT_TEXT;
            else if (strcmp(v, "dot") == 0)
                format = FORMAT_DOT;
            else if (strcmp(v, "json") == 0)
                format = FORMAT_JSON;
            else {
                tpprof_error_set("--format: expected text, dot or json, got '%s'", v);
                goto usage_error;
            }
        } else if (tpprof_opt_database("graph", argv[i], &path) != 0) {
            goto usage_error;
        }
    }
    if (!path) {
        tpprof_error_set("missing the database (usage: tpprof graph DB [options])");
        goto usage_error;
    }
    if (moments > 1) {
        tpprof_error_set("choose one moment: --at-exit, --at-peak or --at TIME");
        goto usage_error;
    }
    tpprof_profile *p = tpprof_profile_load(path);
    if (!p)
        goto usage_error;
    tpprof_tensors t;
    if (tpprof_tensors_load(p->db, &t) != 0) {
        tpprof_profile_free(p);
        goto usage_error;
    }
    tpprof_autograd ag;
    if (tpprof_autograd_load(p->db, &ag) != 0) {
        tpprof_tensors_free(&t);
        tpprof_profile_free(p);
        goto usage_error;
    }
    int status = TPPROF_EXIT_OK;
    graph g = {.p = p, .t = &t, .ag = &ag, .at = at, .time_ns = time_ns};
    // A full recording's events give the counts at the peak too.
    if (at == AT_PEAK && t.full && t.peak_storage_time_ns != TPPROF_NO_TIME) {
        g.peak_counts = true;
        g.time_ns = peak_last_moment(&t);
    }
    if (at == AT_TIME && !t.full) {
        tpprof_error_set("--at TIME needs a full-mode recording (tpprof run --full); '%s' is "
                         "aggregate: only --at-exit and --at-peak are available",
                         path);
        status = TPPROF_EXIT_USAGE;
    } else if (select_moment(&g) != 0) {
        status = TPPROF_EXIT_USAGE;
    } else if (format == FORMAT_DOT) {
        dot_graph(&g);
    } else if (format == FORMAT_JSON) {
        json_graph(&g, path);
    } else {
        text_graph(&g);
    }
    if (status != TPPROF_EXIT_OK)
        fprintf(stderr, "tpprof graph: %s\n", tpprof_error());
    free(g.storage_in);
    free(g.tensor_in);
    free(g.strong);
    free(g.weak);
    tpprof_autograd_free(&ag);
    tpprof_tensors_free(&t);
    tpprof_profile_free(p);
    if (status == TPPROF_EXIT_OK && fflush(stdout) != 0)
        status = TPPROF_EXIT_USAGE;
    return status;

usage_error:
    fprintf(stderr, "tpprof graph: %s\n", tpprof_error());
    return TPPROF_EXIT_USAGE;
}
