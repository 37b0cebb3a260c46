// html.c: `tpprof report DB --format html`: one self-contained page (no
// network at view time, works from file://) with the summary and its
// warnings, the memory timeline, an icicle flame graph, the leaks grouped by
// stack, the tensor storages a reference keeps alive, the storage-sharing
// graph and the fragmentation map.
//
// The page is generated here from what profile.c, tensors.c and the other
// commands already compute; html_flame.c and html_data.c build the data the
// script (html/report.js, embedded at build time) draws. The pictures of
// `tpprof graph` and `tpprof fragmentation --format svg` are those commands'
// own output, captured. Every string from the recording goes through
// tpprof_html_text or tpprof_html_json_string: function names and paths may
// hold '<', '&', quotes and bytes that are not UTF-8.
//
// What it leaves out: anything a browser would have to fetch, and any
// framework. A section whose tables the recording lacks says so and the
// rest renders.
#define _POSIX_C_SOURCE 200809L
#include "viewer.h"

#include "html_assets.h"

#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#ifdef TPPROF_HAVE_GVC
#include <graphviz/gvc.h>
#endif

// Leak groups listed in the page (the rest are summed in one line).
#define HTML_LEAKS 200
#define HTML_STACK_FRAMES 64

// ---------------------------------------------------------------------------
// Escaping

// tpprof_utf8_len (json.c) tells where a byte that is not UTF-8 is.
#define utf8_len tpprof_utf8_len

void tpprof_html_text(FILE *out, const char *s) {
    if (!s)
        return;
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n = utf8_len(p);
        if (n == 0) {
            fputs("\xef\xbf\xbd", out); // U+FFFD for a byte that is not UTF-8
            p++;
            continue;
        }
        switch (*p) {
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '&': fputs("&amp;", out); break;
        case '"': fputs("&quot;", out); break;
        case '\'': fputs("&#39;", out); break;
        default:
            if (*p < 0x20 && *p != '\n' && *p != '\t')
                fputs("\xef\xbf\xbd", out);
            else
                fwrite(p, 1, n, out);
        }
        p += n;
    }
}

void tpprof_html_json_string(FILE *out, const char *s) {
    if (!s) {
        fputs("null", out);
        return;
    }
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n = utf8_len(p);
        if (n == 0) {
            fputs("\\ufffd", out);
            p++;
            continue;
        }
        // '<', '>' and '&' as escapes too: the JSON sits inside a <script>
        // element, which "</script>" or "<!--" in a name would end or upset.
        if (*p == '"' || *p == '\\')
            fprintf(out, "\\%c", *p);
        else if (*p < 0x20 || *p == '<' || *p == '>' || *p == '&')
            fprintf(out, "\\u%04x", *p);
        else
            fwrite(p, 1, n, out);
        p += n;
    }
    fputc('"', out);
}

// ---------------------------------------------------------------------------
// Capturing what another printer writes on stdout (the pattern
// cmd_fragmentation.c's svg_report uses): the text and SVG printers of the
// other commands are reused as they are.

char *tpprof_capture_stdout(int (*fn)(void *), void *arg, int *status) {
    FILE *tmp = tmpfile();
    if (!tmp) {
        tpprof_error_set("cannot create a temporary file");
        return NULL;
    }
    fflush(stdout);
    FILE *saved = stdout;
    stdout = tmp;
    int rc = fn(arg);
    fflush(stdout);
    stdout = saved;
    if (status)
        *status = rc;
    long size = ftell(tmp);
    char *buf = size >= 0 ? malloc((size_t)size + 1) : NULL;
    if (!buf) {
        fclose(tmp);
        tpprof_error_set("out of memory");
        return NULL;
    }
    rewind(tmp);
    size_t got = fread(buf, 1, (size_t)size, tmp);
    buf[got] = 0;
    fclose(tmp);
    return buf;
}

typedef struct command_call {
    int (*cmd)(int, char **);
    int argc;
    char **argv;
} command_call;

static int run_command(void *arg) {
    command_call *c = arg;
    // Its error lines would go to our stderr: the page says what failed instead.
    return c->cmd(c->argc, c->argv);
}

// ---------------------------------------------------------------------------
// Sections

typedef struct page {
    FILE *out;
    const tpprof_profile *p;
    const tpprof_tensors *t;
    const tpprof_backing *backings;
    size_t nbackings;
    const char *path;
} page;

static void stack_pre(const page *g, int64_t stack_id) {
    tpprof_frame f[HTML_STACK_FRAMES];
    size_t total = 0;
    size_t n = tpprof_stacks_frames(g->p->stacks, stack_id, f, HTML_STACK_FRAMES, &total);
    fputs("<pre>", g->out);
    if (n == 0)
        fputs("(no stack recorded)", g->out);
    for (size_t i = 0; i < n; i++) {
        char buf[1024];
        tpprof_html_text(g->out, tpprof_frame_format(&f[i], buf, sizeof buf));
        fputc('\n', g->out);
    }
    if (total > n)
        fprintf(g->out, "... %zu more frames\n", total - n);
    fputs("</pre>", g->out);
}

static void fact(const page *g, const char *name, const char *value) {
    fprintf(g->out, "<tr><td>%s</td><td>", name);
    tpprof_html_text(g->out, value);
    fputs("</td></tr>\n", g->out);
}

static void warn(const page *g, const char *text) {
    fputs("<p class=\"warn\">", g->out);
    tpprof_html_text(g->out, text);
    fputs("</p>\n", g->out);
}

static void section_summary(const page *g) {
    const tpprof_profile *p = g->p;
    const tpprof_summary *s = &p->summary;
    FILE *out = g->out;
    tpprof_verdict v;
    tpprof_verdict_of(p, &v);
    char line[1024], a[32], b[32], c[32], d[32], e[32], f[32], h[32];
    fputs("<section id=\"summary\">\n", out);
    fprintf(out, "<p id=\"verdict\" class=\"verdict %s\" data-verdict=\"%s\">",
            v.verdict == TPPROF_VERDICT_NO_LEAK ? "ok" : v.verdict == TPPROF_VERDICT_LEAK ? "leak" : "unsure",
            tpprof_verdict_name(v.verdict));
    tpprof_html_text(out, tpprof_verdict_headline(&v, line, sizeof line));
    fputs("</p>\n<p id=\"reachable\" class=\"reachable\">", out);
    tpprof_html_text(out, tpprof_verdict_reachable(&v, line, sizeof line));
    fputs("</p>\n<table class=\"facts\">\n", out);
    snprintf(line, sizeof line, "%s (pid %lld)%s", p->exe ? p->exe : "(unknown)", (long long)s->pid,
             p->mode && strcmp(p->mode, "full") == 0 ? ", full mode" : ", aggregate mode");
    fact(g, "program", line);
    snprintf(line, sizeof line, "%.3f s, %s%s", (double)s->duration_ns / 1e9,
             s->complete ? "complete" : s->still_running ? "INCOMPLETE (still running)" : "INCOMPLETE (did not end normally)",
             s->end_signal ? ", died of a signal" : "");
    fact(g, "run", line);
    snprintf(line, sizeof line, "%s allocations, %s frees, %s temporary", tpprof_format_count(s->allocations, a),
             tpprof_format_count(s->frees, b), tpprof_format_count(s->temporary_count, c));
    fact(g, "calls", line);
    fact(g, "allocated", tpprof_format_size(s->total_bytes, a));
    snprintf(line, sizeof line, "%s at %.3f s (heap + anonymous mmap)", tpprof_format_size(s->peak_bytes, a),
             (double)s->peak_time_ns / 1e9);
    fact(g, "peak", line);
    snprintf(line, sizeof line, "%s in %s blocks still allocated: lost %s in %s, reachable %s in %s, not scanned %s",
             tpprof_format_size(s->leaked_bytes, a), tpprof_format_count(s->leaked_count, b),
             tpprof_format_size(s->lost_bytes, c), tpprof_format_count(s->lost_count, d),
             tpprof_format_size(s->reachable_bytes, e), tpprof_format_count(s->reachable_count, f),
             tpprof_format_size(s->unscanned_bytes, h));
    fact(g, "at exit", line);
    if (s->libc_count) {
        snprintf(line, sizeof line, "%s in %s blocks the C library keeps to the end (not leaks)",
                 tpprof_format_size(s->libc_bytes, a), tpprof_format_count(s->libc_count, b));
        fact(g, "libc", line);
    }
    if (s->reserved_count) {
        snprintf(line, sizeof line, "%s in %s PROT_NONE mappings (address space, not memory)",
                 tpprof_format_size(s->reserved_total_bytes, a), tpprof_format_count(s->reserved_count, b));
        fact(g, "reserved", line);
    }
    if (g->t->attached || g->t->nstorages) {
        snprintf(line, sizeof line, "%zu storages and %zu tensors in the tables, peak of storage bytes %s",
                 g->t->nstorages, g->t->ntensors, tpprof_format_size((uint64_t)g->t->peak_storage_bytes, a));
        fact(g, "tensors", line);
        if (tpprof_verdict_graphs(p, g->t, line, sizeof line))
            fact(g, "graphs", line + strlen("graphs: "));
    }
    // Device memory: each caching allocator's device and peak.
    tpprof_alloc_state *st = NULL;
    size_t nst = 0;
    if (tpprof_alloc_load(p->db, &st, &nst) == 0)
        for (size_t i = 0; i < nst; i++) {
            snprintf(line, sizeof line, "%s on %s: peak allocated %s", st[i].allocator,
                     st[i].device ? st[i].device : "?", tpprof_format_size((uint64_t)st[i].peak_allocated, a));
            fact(g, "allocator", line);
        }
    tpprof_alloc_states_free(st, nst);
    // CUDA device memory (device_blocks): each device, pinned host memory,
    // and how it was captured, as the text report's summary has them.
    tpprof_devices dv;
    if (tpprof_devices_load(p, false, 0, &dv) == 0) {
        if (dv.recorded) {
            char name[32];
            for (size_t i = 0; i < dv.ndevices; i++) {
                if (dv.devices[i].device < 0)
                    snprintf(name, sizeof name, "device ?");
                else
                    snprintf(name, sizeof name, "device %d", (int)dv.devices[i].device);
                fact(g, name, tpprof_dev_stats_line(&dv.devices[i], line, sizeof line));
            }
            if (dv.pinned.allocations)
                fact(g, "pinned host", tpprof_dev_stats_line(&dv.pinned, line, sizeof line));
            uint64_t failed = tpprof_devices_calls_failed(&dv), bad = tpprof_devices_bad_frees(&dv);
            snprintf(line, sizeof line, "capture %s; %s failed call%s, %s bad free%s",
                     dv.capture ? dv.capture : "unknown", tpprof_format_count(failed, a), failed == 1 ? "" : "s",
                     tpprof_format_count(bad, b), bad == 1 ? "" : "s");
            fact(g, "device", line);
        }
        tpprof_devices_free(&dv);
    }
    fputs("</table>\n", out);
    if (!s->complete)
        warn(g, s->still_running ? "The program is still running: this is what it has flushed so far."
                                 : "The recording is incomplete: the program did not end normally.");
    if (s->live_from_sites)
        warn(g, "No live set was written: the leaks are what each site still had allocated at the last flush.");
    if (s->dropped_events) {
        snprintf(line, sizeof line, "%lld events were dropped while recording: some blocks may look leaked that were freed.",
                 (long long)s->dropped_events);
        warn(g, line);
    }
    if (s->stacks_full) {
        snprintf(line, sizeof line, "tpprof ran out of memory for the stack table: %lld allocations were recorded without a stack.",
                 (long long)s->stacks_full);
        warn(g, line);
    }
    if (p->malloc_owner) {
        snprintf(line, sizeof line, "The program's malloc is %s's, not the recorder's: its allocations are missing.",
                 p->malloc_owner);
        warn(g, line);
    }
    for (size_t i = 0; i < p->nbypassing; i++) {
        snprintf(line, sizeof line, "%s calls the C library's allocator directly: its allocations are missing.",
                 p->bypassing[i]);
        warn(g, line);
    }
    fputs("</section>\n", out);
}

static void section_timeline(const page *g, bool has_timeline) {
    FILE *out = g->out;
    fputs("<h2>Memory over time</h2>\n<section id=\"timeline\">\n", out);
    if (!has_timeline) {
        fputs("<p class=\"missing\">This recording has no timeline samples.</p>\n</section>\n", out);
        return;
    }
    fputs("<div id=\"timeline-chart\"></div><div id=\"timeline-legend\" class=\"legend\"></div>\n"
          "<div id=\"timeline-tip\">Hover for the values at a time; click to see what was live.</div>\n"
          "<div id=\"live-at\"></div>\n</section>\n",
          out);
}

static void section_flame(const page *g) {
    fputs("<h2>Allocation stacks (icicle: callers above callees)</h2>\n<section id=\"flame\">\n"
          "<div id=\"flame-controls\"><select id=\"flame-metric\">"
          "<option value=\"bytes\">bytes allocated</option><option value=\"calls\">allocation calls</option>"
          "<option value=\"peak\">live at the peak</option><option value=\"leaked\">live at exit (lost in red)</option>"
          "</select><input id=\"flame-search\" type=\"search\" placeholder=\"search functions\">"
          "<button id=\"flame-reset\">reset zoom</button><span id=\"flame-matched\"></span></div>\n"
          "<div id=\"flame-chart\"></div><div id=\"flame-tip\">Click a frame to zoom into it.</div>\n</section>\n",
          g->out);
}

static void section_leaks(const page *g) {
    const tpprof_profile *p = g->p;
    FILE *out = g->out;
    char a[32], b[32];
    fprintf(out, "<h2>Still allocated at exit, by stack (lost first)</h2>\n<section id=\"leaks\">\n");
    if (p->nleaks == 0) {
        fputs("<p>None: every block was freed.</p>\n</section>\n", out);
        return;
    }
    fputs("<table><tr><th class=\"num\">bytes</th><th class=\"num\">blocks</th><th>state</th><th>kind</th>"
          "<th>allocated in</th></tr>\n", out);
    size_t n = p->nleaks < HTML_LEAKS ? p->nleaks : HTML_LEAKS;
    for (size_t i = 0; i < n; i++) {
        const tpprof_leak *l = &p->leaks[i];
        char where[1024];
        bool lost = tpprof_leak_counts_as_lost(p, l);
        fprintf(out, "<tr class=\"leak\"><td class=\"num\">%s</td><td class=\"num\">%s</td><td class=\"%s\">%s</td><td>",
                tpprof_format_size(l->bytes, a), tpprof_format_count(l->count, b), lost ? "lost" : "reach",
                tpprof_reach_name(l->reachability));
        tpprof_html_text(out, tpprof_profile_kind(p, l->kind));
        fputs("</td><td><details><summary class=\"mono\">", out);
        tpprof_html_text(out, tpprof_stacks_describe_caller(p->stacks, l->stack_id, where, sizeof where));
        fputs("</summary>", out);
        stack_pre(g, l->stack_id);
        fputs("</details>", out);
        size_t backed = 0;
        for (size_t k = 0; k < g->nbackings; k++)
            backed += tpprof_backing_in(&g->backings[k], l);
        if (backed)
            fprintf(out, "<div>the data of %zu tensor storage%s (below)</div>", backed, backed == 1 ? "" : "s");
        fputs("</td></tr>\n", out);
    }
    fputs("</table>\n", out);
    if (n < p->nleaks) {
        uint64_t rest = 0;
        for (size_t i = n; i < p->nleaks; i++)
            rest += p->leaks[i].bytes;
        fprintf(out, "<p>... %zu more stacks with %s (tpprof report --leaks --top 0 lists all).</p>\n",
                p->nleaks - n, tpprof_format_size(rest, a));
    }
    fputs("</section>\n", out);
}

typedef struct storages_call {
    const tpprof_profile *p;
    const tpprof_tensors *t;
} storages_call;

static int print_storages(void *arg) {
    storages_call *c = arg;
    tpprof_report_storages_text(c->p, c->t, 50);
    return 0;
}

static void section_storages(const page *g) {
    FILE *out = g->out;
    fputs("<h2>Tensor storages alive at exit</h2>\n<section id=\"storages\">\n", out);
    if (!g->t->attached && g->t->nstorages == 0) {
        fputs("<p class=\"missing\">This recording has no tensor tables (the program did not use libtensorplay, "
              "or TPPROF_TENSORS=0).</p>\n</section>\n", out);
        return;
    }
    // The groups of references no release matched: what keeps storages alive.
    size_t ng = 0;
    tpprof_ref_group *groups = tpprof_ref_groups(g->t, false, &ng);
    char a[32];
    fprintf(out, "<p id=\"unmatched\">%zu stack%s took a strong reference no release matched:</p>\n", ng,
            ng == 1 ? "" : "s");
    if (ng) {
        fputs("<table><tr><th class=\"num\">storages</th><th class=\"num\">references</th><th class=\"num\">bytes</th>"
              "<th>op</th><th>taken in</th></tr>\n", out);
        for (size_t i = 0; i < ng; i++) {
            char where[1024];
            fprintf(out, "<tr class=\"unmatched\"><td class=\"num\">%llu</td><td class=\"num\">%llu</td><td class=\"num\">%s</td><td>%s</td><td><details><summary class=\"mono\">",
                    (unsigned long long)groups[i].storages, (unsigned long long)groups[i].refs,
                    tpprof_format_size(groups[i].bytes, a), tpprof_ref_op_name(groups[i].op));
            tpprof_html_text(out, tpprof_stacks_describe_caller(g->p->stacks, groups[i].stack_id, where, sizeof where));
            fputs("</summary>", out);
            stack_pre(g, groups[i].stack_id);
            fputs("</details></td></tr>\n", out);
        }
        fputs("</table>\n", out);
    }
    free(groups);
    storages_call c = {g->p, g->t};
    char *text = tpprof_capture_stdout(print_storages, &c, NULL);
    fputs("<details><summary>Every storage alive at exit, with its tensors and references (as <code>tpprof report "
          "--storages</code>)</summary><pre>", out);
    tpprof_html_text(out, text ? text : tpprof_error());
    fputs("</pre></details>\n</section>\n", out);
    free(text);
}

// The DOT of `tpprof graph`, laid out as SVG by Graphviz's libgvc where the
// build has it; the DOT source otherwise.
static void section_graph(const page *g) {
    FILE *out = g->out;
    fputs("<h2>Storage sharing at exit</h2>\n<section id=\"graph\">\n", out);
    if (!g->t->attached && g->t->nstorages == 0) {
        fputs("<p class=\"missing\">This recording has no tensor tables: no storage graph.</p>\n</section>\n", out);
        return;
    }
    char *argv[] = {"graph", (char *)g->path, "--format", "dot", NULL};
    command_call c = {tpprof_cmd_graph, 4, argv};
    int status = 0;
    char *dot = tpprof_capture_stdout(run_command, &c, &status);
    if (!dot || status != 0) {
        fputs("<p class=\"missing\">The graph could not be drawn.</p>\n</section>\n", out);
        free(dot);
        return;
    }
    bool drawn = false;
#ifdef TPPROF_HAVE_GVC
    GVC_t *gvc = gvContext();
    Agraph_t *graph = gvc ? agmemread(dot) : NULL;
    if (graph && gvLayout(gvc, graph, "dot") == 0) {
        char *svg = NULL;
        unsigned int len = 0;
        if (gvRenderData(gvc, graph, "svg", &svg, &len) == 0 && svg) {
            // Drop the XML prolog and DOCTYPE: the SVG sits inside HTML.
            const char *start = strstr(svg, "<svg");
            if (start) {
                fputs("<div class=\"svgbox\">", out);
                fwrite(start, 1, len - (size_t)(start - svg), out);
                fputs("</div>\n", out);
                drawn = true;
            }
            gvFreeRenderData(svg);
        }
        gvFreeLayout(gvc, graph);
    }
    if (graph)
        agclose(graph);
    if (gvc)
        gvFreeContext(gvc);
#endif
    if (!drawn) {
        fputs("<p class=\"missing\">Graphviz's layout is not in this build: the graph as DOT "
              "(<code>dot -Tsvg</code> draws it).</p><pre>", out);
        tpprof_html_text(out, dot);
        fputs("</pre>\n", out);
    }
    free(dot);
    fputs("</section>\n", out);
}

static void section_fragmentation(const page *g) {
    FILE *out = g->out;
    // At each allocator's peak: at exit a well-behaved allocator has
    // released everything, and the peak is where fragmentation costs.
    fputs("<h2>Caching allocators: block map at each one's peak</h2>\n<section id=\"fragmentation\">\n", out);
    int64_t events = 0;
    if (!tpprof_db_has_table(g->p->db, "allocator_events") ||
        tpprof_db_scalar(g->p->db, "SELECT COUNT(*) FROM allocator_events", &events) != 0 || events == 0) {
        fputs("<p class=\"missing\">This recording has no caching allocator events.</p>\n</section>\n", out);
        return;
    }
    char *argv[] = {"fragmentation", (char *)g->path, "--at-peak", "--format", "svg", NULL};
    command_call c = {tpprof_cmd_fragmentation, 5, argv};
    int status = 0;
    char *svg = tpprof_capture_stdout(run_command, &c, &status);
    if (svg && status == 0) {
        fputs("<div class=\"svgbox\">", out);
        fputs(svg, out); // the fragmentation command escapes its own text (xml_text)
        fputs("</div>\n", out);
    } else {
        fputs("<p class=\"missing\">The block map could not be drawn.</p>\n", out);
    }
    free(svg);
    fputs("</section>\n", out);
}

// ---------------------------------------------------------------------------
// Page

int tpprof_report_html(FILE *out, const tpprof_profile *p, const tpprof_tensors *t, const tpprof_backing *b,
                       size_t nb, const char *path) {
    page g = {out, p, t, b, nb, path};
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>tpprof: ", out);
    tpprof_html_text(out, p->exe ? tpprof_basename(p->exe) : path);
    // The error hook comes first, so a test (and a reader) sees any script
    // error written into the page itself.
    fputs("</title>\n<script>(function(){var n=0;function note(m){n++;document.documentElement.setAttribute("
          "'data-errors',n);var d=document.getElementById('tp-errors');if(d){d.hidden=false;"
          "d.appendChild(document.createTextNode(String(m)+'\\n'));}}window.addEventListener('error',"
          "function(e){note(e.message);});var ce=console.error;console.error=function(){note([].join.call("
          "arguments,' '));ce.apply(console,arguments);};document.documentElement.setAttribute('data-errors',0);})();"
          "</script>\n<style>\n", out);
    fputs(tpprof_html_css, out);
    fputs("</style></head>\n<body>\n<pre id=\"tp-errors\" class=\"warn\" hidden></pre>\n<h1>tpprof report</h1>\n"
          "<div class=\"path\">", out);
    tpprof_html_text(out, path);
    fputs("</div>\n<nav><a href=\"#timeline\">timeline</a><a href=\"#flame\">flame graph</a><a href=\"#leaks\">leaks</a>"
          "<a href=\"#storages\">storages</a><a href=\"#graph\">sharing graph</a>"
          "<a href=\"#fragmentation\">fragmentation</a></nav>\n", out);
    section_summary(&g);
    bool has_timeline = false;
    int64_t samples = 0;
    if (tpprof_db_has_table(p->db, "timeline") && tpprof_db_scalar(p->db, "SELECT COUNT(*) FROM timeline", &samples) == 0)
        has_timeline = samples > 0;
    section_timeline(&g, has_timeline);
    section_flame(&g);
    section_leaks(&g);
    section_storages(&g);
    section_graph(&g);
    section_fragmentation(&g);
    fputs("<script type=\"application/json\" id=\"tp-data\">", out);
    if (tpprof_html_data(out, p) != 0) {
        fputs("{}</script>\n", out);
        return -1;
    }
    fputs("</script>\n<script>\n", out);
    fputs(tpprof_html_js, out);
    fputs("</script>\n</body></html>\n", out);
    return ferror(out) ? tpprof_error_set("writing the page failed") : 0;
}
