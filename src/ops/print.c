/*
 * src/ops/print.c - PyTorch-like text for a tensor.
 *
 * Follows torch/_tensor_str.py (default print options: precision 4,
 * threshold 1000, edgeitems 3, linewidth 80): one formatter chosen from the
 * values that will be shown (integer mode "1.", fixed "%.4f", or scientific
 * "%.4e"), every element right-aligned to the widest, rows wrapped to the
 * line width, big tensors summarized with "...", and ", dtype=torch.X" for
 * dtypes other than float32, int64 and bool.
 *
 * This file only reads tensors.
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include "ops_internal.h"

#define PRECISION 4
#define THRESHOLD 1000
#define EDGEITEMS 3
#define LINEWIDTH 80

// ----------------------------------------------------------------------------
// a growable string

typedef struct sbuf {
    char *buf;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_put(sbuf *s, const char *p, size_t n) {
    if (s->oom) return;
    if (s->len + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 256;
        while (cap < s->len + n + 1) cap *= 2;
        char *b = realloc(s->buf, cap);
        if (!b) {
            s->oom = true;
            return;
        }
        s->buf = b;
        s->cap = cap;
    }
    memcpy(s->buf + s->len, p, n);
    s->len += n;
    s->buf[s->len] = '\0';
}

static void sb_str(sbuf *s, const char *p) { sb_put(s, p, strlen(p)); }

static void sb_spaces(sbuf *s, int n) {
    for (int i = 0; i < n; i++) sb_put(s, " ", 1);
}

// ----------------------------------------------------------------------------
// the formatter

typedef struct printer {
    tp__view v;
    bool fp;         /* floating dtype */
    bool summarize;
    bool int_mode, sci_mode;
    int width;
} printer;

/* Unpadded text of one value. */
static int format_raw(const printer *p, const char *elem, char *out, size_t len) {
    if (!p->fp) {
        int64_t x;
        tp__load_i64(&x, elem, 0, 1, p->v.dtype);
        if (p->v.dtype == TP_DTYPE_BOOL) return snprintf(out, len, "%s", x ? "True" : "False");
        return snprintf(out, len, "%lld", (long long)x);
    }
    double x = tp__get_f64(elem, p->v.dtype);
    if (p->sci_mode) return snprintf(out, len, "%.*e", PRECISION, x);
    if (p->int_mode) return snprintf(out, len, isfinite(x) ? "%.0f." : "%.0f", x);
    return snprintf(out, len, "%.*f", PRECISION, x);
}

static void put_value(printer *p, sbuf *s, const char *elem) {
    char text[64];
    int n = format_raw(p, elem, text, sizeof text);
    sb_spaces(s, p->width - n);
    sb_str(s, text);
}

/* Calls fn on every element that will be shown, in order. */
typedef void (*visit_fn)(printer *p, const char *elem, void *ctx);

static void visit(printer *p, int d, const char *base, visit_fn fn, void *ctx) {
    if (d == p->v.ndim) {
        fn(p, base, ctx);
        return;
    }
    int64_t n = p->v.sizes[d];
    int64_t step = p->v.strides[d] * tp__itemsize(p->v.dtype);
    for (int64_t i = 0; i < n; i++) {
        if (p->summarize && n > 2 * EDGEITEMS && i == EDGEITEMS) i = n - EDGEITEMS;
        visit(p, d + 1, base + i * step, fn, ctx);
    }
}

typedef struct stats {
    double min_abs, max_abs;
    bool any, all_int;
    int int_width;
} stats;

static void collect(printer *p, const char *elem, void *ctx) {
    stats *st = ctx;
    if (!p->fp) {
        char text[64];
        int n = format_raw(p, elem, text, sizeof text);
        if (n > st->int_width) st->int_width = n;
        return;
    }
    double x = tp__get_f64(elem, p->v.dtype);
    if (!isfinite(x) || x == 0) return;
    double a = fabs(x);
    if (!st->any || a < st->min_abs) st->min_abs = a;
    if (!st->any || a > st->max_abs) st->max_abs = a;
    if (x != ceil(x)) st->all_int = false;
    st->any = true;
}

static void widest(printer *p, const char *elem, void *ctx) {
    (void)ctx;
    double x = tp__get_f64(elem, p->v.dtype);
    if (!isfinite(x) || x == 0) return; /* PyTorch sizes columns on nonzero finite values */
    char text[64];
    int n = format_raw(p, elem, text, sizeof text);
    if (n > p->width) p->width = n;
}

static void choose_format(printer *p) {
    stats st = {.all_int = true, .int_width = 1};
    visit(p, 0, p->v.data, collect, &st);
    p->width = 1;
    p->int_mode = true;
    p->sci_mode = false;
    if (!p->fp) {
        p->width = st.int_width;
        return;
    }
    if (!st.any) return;
    p->int_mode = st.all_int;
    if (st.max_abs / st.min_abs > 1000.0 || st.max_abs > 1.0e8 || (!st.all_int && st.min_abs < 1.0e-4))
        p->sci_mode = true;
    visit(p, 0, p->v.data, widest, NULL);
}

// ----------------------------------------------------------------------------
// layout

static void vector_str(printer *p, sbuf *s, const char *base, int indent) {
    int64_t n = p->v.sizes[p->v.ndim - 1];
    int64_t step = p->v.strides[p->v.ndim - 1] * tp__itemsize(p->v.dtype);
    int per_line = (LINEWIDTH - indent) / (p->width + 2);
    if (per_line < 1) per_line = 1;
    sb_str(s, "[");
    int on_line = 0;
    for (int64_t i = 0; i < n; i++) {
        bool gap = p->summarize && n > 2 * EDGEITEMS && i == EDGEITEMS;
        if (on_line == per_line) {
            sb_str(s, ",\n");
            sb_spaces(s, indent + 1);
            on_line = 0;
        } else if (on_line > 0 || i > 0) {
            sb_str(s, ", ");
        }
        if (gap) {
            sb_str(s, " ...");
            i = n - EDGEITEMS - 1;
        } else {
            put_value(p, s, base + i * step);
        }
        on_line++;
    }
    sb_str(s, "]");
}

static void tensor_str(printer *p, sbuf *s, int d, const char *base, int indent) {
    int rem = p->v.ndim - d;
    if (rem == 0) {
        put_value(p, s, base);
        return;
    }
    if (rem == 1) {
        vector_str(p, s, base, indent);
        return;
    }
    int64_t n = p->v.sizes[d];
    int64_t step = p->v.strides[d] * tp__itemsize(p->v.dtype);
    sb_str(s, "[");
    for (int64_t i = 0; i < n; i++) {
        if (i > 0) {
            sb_str(s, ",");
            for (int k = 0; k < rem - 1; k++) sb_str(s, "\n");
            sb_spaces(s, indent + 1);
        }
        if (p->summarize && n > 2 * EDGEITEMS && i == EDGEITEMS) {
            sb_str(s, "...");
            i = n - EDGEITEMS - 1;
            continue;
        }
        tensor_str(p, s, d + 1, base + i * step, indent + 1);
    }
    sb_str(s, "]");
}

static const char *torch_dtype(tp_dtype d) {
    switch (d) {
    case TP_DTYPE_FLOAT64: return "torch.float64";
    case TP_DTYPE_FLOAT16: return "torch.float16";
    case TP_DTYPE_BFLOAT16: return "torch.bfloat16";
    case TP_DTYPE_INT8: return "torch.int8";
    case TP_DTYPE_INT16: return "torch.int16";
    case TP_DTYPE_INT32: return "torch.int32";
    case TP_DTYPE_UINT8: return "torch.uint8";
    default: return NULL; /* float32, int64, bool: the defaults, not printed */
    }
}

static void add_suffix(sbuf *s, const char *suffix, int indent, size_t *last_line_len) {
    size_t n = strlen(suffix);
    if (*last_line_len + n + 2 > LINEWIDTH) {
        sb_str(s, ",\n");
        sb_spaces(s, indent);
        *last_line_len = (size_t)indent + n;
    } else {
        sb_str(s, ", ");
        *last_line_len += n + 2;
    }
    sb_str(s, suffix);
}

// ----------------------------------------------------------------------------
// public entry points

char *tp_tensor_to_string(const tp_tensor *t) {
    if (!t) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "to_string(): tensor is NULL");
        return NULL;
    }
    if (!tp__is_cpu(t->device)) { /* the values, read back to the host */
        tp_tensor *host = tp_tensor_to((tp_tensor *)t, tp_device_cpu());
        char *text = host ? tp_tensor_to_string(host) : NULL;
        tp_tensor_release(host);
        return text;
    }
    printer p = {.v = tp__view_of(t), .fp = tp_dtype_is_floating(t->dtype), .summarize = t->numel > THRESHOLD};
    sbuf s = {0};
    const int indent = 7; /* strlen("tensor(") */
    sb_str(&s, "tensor(");
    char size_suffix[160] = "";
    if (t->numel == 0) {
        sb_str(&s, "[]");
        if (t->ndim != 1) {
            char shape[128];
            tp__format_shape(t->ndim, t->sizes, shape, sizeof shape);
            /* "[0, 3]" -> "(0, 3)" */
            size_t n = strlen(shape);
            if (n >= 2) {
                shape[0] = '(';
                shape[n - 1] = ')';
            }
            snprintf(size_suffix, sizeof size_suffix, "size=%s", shape);
        }
    } else {
        choose_format(&p);
        tensor_str(&p, &s, 0, p.v.data, indent);
    }
    if (!s.oom) {
        const char *nl = strrchr(s.buf, '\n');
        size_t last_line_len = nl ? (size_t)(s.buf + s.len - nl) + 1 : s.len + 2;
        if (size_suffix[0]) add_suffix(&s, size_suffix, indent, &last_line_len);
        const char *dt = torch_dtype(t->dtype);
        if (dt) {
            char suffix[64];
            snprintf(suffix, sizeof suffix, "dtype=%s", dt);
            add_suffix(&s, suffix, indent, &last_line_len);
        }
        sb_str(&s, ")");
    }
    if (s.oom) {
        free(s.buf);
        tp__error(TP_STATUS_OUT_OF_MEMORY, "to_string(): out of memory");
        return NULL;
    }
    return s.buf;
}

tp_status tp_tensor_print(const tp_tensor *t, FILE *out) {
    if (!out) return tp__error(TP_STATUS_INVALID_ARGUMENT, "print(): stream is NULL");
    char *text = tp_tensor_to_string(t);
    if (!text) return tp_last_status();
    int rc = fprintf(out, "%s\n", text);
    free(text);
    if (rc < 0) return tp__error(TP_STATUS_IO, "print(): could not write to the stream");
    return TP_STATUS_OK;
}
