/*
 * src/autograd/functions/elementwise.c - differentiable elementwise ops:
 * binary (broadcasting: each gradient is summed back to its input's
 * shape), with a scalar, unary, GELU, and the in-place forms with
 * PyTorch's leaf checks.
 *
 * Node parameter conventions: iarg[0] = the tp_binary_op / tp_unary_op,
 * darg[0] = the scalar.
 */
#include <math.h>
#include <string.h>

#include "kernels.h"

// ----------------------------------------------------------------------------
// helpers

/* Consumes t; the sum_to of it for edge i. */
static tp_tensor *to_edge(tp__node *n, int i, tp_tensor *t) {
    if (!t) return NULL;
    tp_tensor *r = tp__sum_to(t, n->next[i].ndim, n->next[i].sizes);
    tp_tensor_release(t);
    return r;
}

#define FAIL_IF_NULL(x) do { if (!(x)) return tp_last_status(); } while (0)

// ----------------------------------------------------------------------------
// binary

static tp_status binary_backward(tp__node *n, tp_tensor *g, tp_tensor **out) {
    tp_binary_op op = (tp_binary_op)n->iarg[0];
    bool wa = tp__edge_wants(n, 0), wb = tp__edge_wants(n, 1);
    switch (op) {
    case TP_BINARY_OP_ADD:
    case TP_BINARY_OP_SUB:
        if (wa) FAIL_IF_NULL(out[0] = tp__sum_to(g, n->next[0].ndim, n->next[0].sizes));
        if (wb) FAIL_IF_NULL(out[1] = to_edge(n, 1, op == TP_BINARY_OP_ADD ? tp_tensor_retain(g) : tp_neg(g)));
        return TP_STATUS_OK;
    case TP_BINARY_OP_MUL: {
        /* saved: 0 = a (if b wants), then b (if a wants), in iarg[1]/[2] slots */
        if (wa) {
            tp_tensor *b = tp__node_unpack(n, (int)n->iarg[2]);
            FAIL_IF_NULL(b);
            FAIL_IF_NULL(out[0] = to_edge(n, 0, tp_mul(g, b)));
        }
        if (wb) {
            tp_tensor *a = tp__node_unpack(n, (int)n->iarg[1]);
            FAIL_IF_NULL(a);
            FAIL_IF_NULL(out[1] = to_edge(n, 1, tp_mul(g, a)));
        }
        return TP_STATUS_OK;
    }
    case TP_BINARY_OP_DIV: {
        tp_tensor *b = tp__node_unpack(n, (int)n->iarg[2]);
        FAIL_IF_NULL(b);
        tp_tensor *gb = tp_div(g, b); /* g / b */
        FAIL_IF_NULL(gb);
        if (wb) {
            tp_tensor *a = tp__node_unpack(n, (int)n->iarg[1]);
            tp_tensor *t1 = a ? tp_mul(gb, a) : NULL;          /* g a / b */
            tp_tensor *t2 = t1 ? tp_div(t1, b) : NULL;         /* g a / b^2 */
            tp_tensor_release(t1);
            out[1] = to_edge(n, 1, t2 ? tp_neg(t2) : NULL);
            tp_tensor_release(t2);
            if (!out[1]) {
                tp_tensor_release(gb);
                return tp_last_status();
            }
        }
        if (wa) out[0] = to_edge(n, 0, tp_tensor_retain(gb));
        tp_tensor_release(gb);
        return wa && !out[0] ? tp_last_status() : TP_STATUS_OK;
    }
    case TP_BINARY_OP_POW: {
        tp_tensor *a = tp__node_unpack(n, 0), *b = a ? tp__node_unpack(n, 1) : NULL;
        tp_tensor *y = b ? tp__node_unpack(n, 2) : NULL;
        FAIL_IF_NULL(y);
        if (wa) { /* g * b * a^(b-1) */
            tp_tensor *bm1 = tp_binary_scalar(TP_BINARY_OP_SUB, b, 1.0);
            tp_tensor *p = bm1 ? tp_pow(a, bm1) : NULL;
            tp_tensor *q = p ? tp_mul(p, b) : NULL;
            tp_tensor *r = q ? tp_mul(g, q) : NULL;
            tp_tensor_release(bm1);
            tp_tensor_release(p);
            tp_tensor_release(q);
            FAIL_IF_NULL(out[0] = to_edge(n, 0, r));
        }
        if (wb) { /* g * y * log(a) */
            tp_tensor *la = tp_log(a);
            tp_tensor *q = la ? tp_mul(y, la) : NULL;
            tp_tensor *r = q ? tp_mul(g, q) : NULL;
            tp_tensor_release(la);
            tp_tensor_release(q);
            FAIL_IF_NULL(out[1] = to_edge(n, 1, r));
        }
        return TP_STATUS_OK;
    }
    default:
        return tp__error(TP_STATUS_INTERNAL, "autograd: no formula for binary op %d", (int)op);
    }
}

typedef struct binary_ctx {
    tp_binary_op op;
    tp_tensor *a, *b;
} binary_ctx;

static tp_status binary_fill(tp__node *n, tp_tensor *out, void *vctx) {
    binary_ctx *c = vctx;
    tp_status st = TP_STATUS_OK;
    n->iarg[0] = c->op;
    bool wa = tp__edge_wants(n, 0), wb = tp__edge_wants(n, 1);
    switch (c->op) {
    case TP_BINARY_OP_MUL:
        if (wb) { n->iarg[1] = n->n_saved; st = tp__node_save(n, c->a, false); }
        if (st == TP_STATUS_OK && wa) { n->iarg[2] = n->n_saved; st = tp__node_save(n, c->b, false); }
        return st;
    case TP_BINARY_OP_DIV:
        if (wb) { n->iarg[1] = n->n_saved; st = tp__node_save(n, c->a, false); }
        if (st == TP_STATUS_OK) { n->iarg[2] = n->n_saved; st = tp__node_save(n, c->b, false); }
        return st;
    case TP_BINARY_OP_POW:
        st = tp__node_save(n, c->a, false);
        if (st == TP_STATUS_OK) st = tp__node_save(n, c->b, false);
        if (st == TP_STATUS_OK) st = tp__node_save(n, out, true);
        return st;
    default:
        return TP_STATUS_OK;
    }
}

static const char *binary_node_name(tp_binary_op op) {
    switch (op) {
    case TP_BINARY_OP_ADD: return "AddBackward0";
    case TP_BINARY_OP_SUB: return "SubBackward0";
    case TP_BINARY_OP_MUL: return "MulBackward0";
    case TP_BINARY_OP_DIV: return "DivBackward0";
    case TP_BINARY_OP_POW: return "PowBackward1";
    default: return NULL;
    }
}

tp_tensor *tp_ag_binary(tp_binary_op op, tp_tensor *a, tp_tensor *b) {
    /* comparisons: computed, never recorded (a bool result has no gradient) */
    const char *name = (unsigned)op < TP_BINARY_OP_COUNT ? binary_node_name(op) : NULL;
    tp_tensor *out = tp_binary(op, a, b);
    binary_ctx c = {op, a, b};
    return name ? tp__record(out, name, binary_backward, 2, (tp_tensor *[]){a, b}, binary_fill, &c) : out;
}

tp_tensor *tp_ag_add(tp_tensor *a, tp_tensor *b) { return tp_ag_binary(TP_BINARY_OP_ADD, a, b); }
tp_tensor *tp_ag_sub(tp_tensor *a, tp_tensor *b) { return tp_ag_binary(TP_BINARY_OP_SUB, a, b); }
tp_tensor *tp_ag_mul(tp_tensor *a, tp_tensor *b) { return tp_ag_binary(TP_BINARY_OP_MUL, a, b); }
tp_tensor *tp_ag_div(tp_tensor *a, tp_tensor *b) { return tp_ag_binary(TP_BINARY_OP_DIV, a, b); }

// ----------------------------------------------------------------------------
// with a scalar

static tp_status scalar_backward(tp__node *n, tp_tensor *g, tp_tensor **out) {
    tp_binary_op op = (tp_binary_op)n->iarg[0];
    double s = n->darg[0];
    switch (op) {
    case TP_BINARY_OP_ADD:
    case TP_BINARY_OP_SUB: out[0] = tp_tensor_retain(g); break;
    case TP_BINARY_OP_MUL: out[0] = tp_binary_scalar(TP_BINARY_OP_MUL, g, s); break;
    case TP_BINARY_OP_DIV: out[0] = tp_binary_scalar(TP_BINARY_OP_DIV, g, s); break;
    case TP_BINARY_OP_POW: { /* g * s * a^(s-1) */
        tp_tensor *a = tp__node_unpack(n, 0);
        tp_tensor *p = a ? tp_binary_scalar(TP_BINARY_OP_POW, a, s - 1.0) : NULL;
        tp_tensor *q = p ? tp_binary_scalar(TP_BINARY_OP_MUL, p, s) : NULL;
        out[0] = q ? tp_mul(g, q) : NULL;
        tp_tensor_release(p);
        tp_tensor_release(q);
        break;
    }
    default: return tp__error(TP_STATUS_INTERNAL, "autograd: no formula for scalar op %d", (int)op);
    }
    return out[0] ? TP_STATUS_OK : tp_last_status();
}

typedef struct scalar_ctx {
    tp_binary_op op;
    double s;
    tp_tensor *a;
} scalar_ctx;

static tp_status scalar_fill(tp__node *n, tp_tensor *out, void *vctx) {
    (void)out;
    scalar_ctx *c = vctx;
    n->iarg[0] = c->op;
    n->darg[0] = c->s;
    return c->op == TP_BINARY_OP_POW ? tp__node_save(n, c->a, false) : TP_STATUS_OK;
}

static const char *scalar_node_name(tp_binary_op op) {
    switch (op) {
    case TP_BINARY_OP_ADD: return "AddBackward1";
    case TP_BINARY_OP_SUB: return "SubBackward1";
    case TP_BINARY_OP_MUL: return "MulBackward1";
    case TP_BINARY_OP_DIV: return "DivBackward1";
    case TP_BINARY_OP_POW: return "PowBackward0";
    default: return NULL;
    }
}

tp_tensor *tp_ag_binary_scalar(tp_binary_op op, tp_tensor *a, double b) {
    const char *name = (unsigned)op < TP_BINARY_OP_COUNT ? scalar_node_name(op) : NULL;
    tp_tensor *out = tp_binary_scalar(op, a, b);
    scalar_ctx c = {op, b, a};
    return name ? tp__record(out, name, scalar_backward, 1, &a, scalar_fill, &c) : out;
}

// ----------------------------------------------------------------------------
// unary

static tp_status unary_backward(tp__node *n, tp_tensor *g, tp_tensor **out) {
    tp_unary_op op = (tp_unary_op)n->iarg[0];
    if (op == TP_UNARY_OP_NEG) {
        out[0] = tp_neg(g);
        return out[0] ? TP_STATUS_OK : tp_last_status();
    }
    tp_tensor *s = tp__node_unpack(n, 0); /* the input for abs/log, else the output */
    if (!s) return tp_last_status();
    switch (op) {
    case TP_UNARY_OP_ABS: out[0] = tp__map(TP__MAP_ABS_BWD, g, s); break;
    case TP_UNARY_OP_EXP: out[0] = tp_mul(g, s); break;
    case TP_UNARY_OP_LOG: out[0] = tp_div(g, s); break;
    case TP_UNARY_OP_SQRT: out[0] = tp__map(TP__MAP_SQRT_BWD, g, s); break;
    case TP_UNARY_OP_RELU: out[0] = tp__map(TP__MAP_RELU_BWD, g, s); break;
    case TP_UNARY_OP_TANH: out[0] = tp__map(TP__MAP_TANH_BWD, g, s); break;
    case TP_UNARY_OP_SIGMOID: out[0] = tp__map(TP__MAP_SIGMOID_BWD, g, s); break;
    default: return tp__error(TP_STATUS_INTERNAL, "autograd: no formula for unary op %d", (int)op);
    }
    return out[0] ? TP_STATUS_OK : tp_last_status();
}

typedef struct unary_ctx {
    tp_unary_op op;
    tp_tensor *a;
} unary_ctx;

static tp_status unary_fill(tp__node *n, tp_tensor *out, void *vctx) {
    unary_ctx *c = vctx;
    n->iarg[0] = c->op;
    switch (c->op) {
    case TP_UNARY_OP_NEG: return TP_STATUS_OK;
    case TP_UNARY_OP_ABS:
    case TP_UNARY_OP_LOG: return tp__node_save(n, c->a, false);
    default: return tp__node_save(n, out, true);
    }
}

static const char *unary_node_name(tp_unary_op op) {
    static const char *names[TP_UNARY_OP_COUNT] = {
        [TP_UNARY_OP_NEG] = "NegBackward0",   [TP_UNARY_OP_ABS] = "AbsBackward0",
        [TP_UNARY_OP_EXP] = "ExpBackward0",   [TP_UNARY_OP_LOG] = "LogBackward0",
        [TP_UNARY_OP_SQRT] = "SqrtBackward0", [TP_UNARY_OP_RELU] = "ReluBackward0",
        [TP_UNARY_OP_TANH] = "TanhBackward0", [TP_UNARY_OP_SIGMOID] = "SigmoidBackward0",
    };
    return (unsigned)op < TP_UNARY_OP_COUNT ? names[op] : NULL;
}

tp_tensor *tp_ag_unary(tp_unary_op op, tp_tensor *a) {
    const char *name = unary_node_name(op);
    tp_tensor *out = tp_unary(op, a);
    unary_ctx c = {op, a};
    return name ? tp__record(out, name, unary_backward, 1, &a, unary_fill, &c) : out;
}

// ----------------------------------------------------------------------------
// GELU (exact)

static tp_status gelu_backward(tp__node *n, tp_tensor *g, tp_tensor **out) {
    tp_tensor *x = tp__node_unpack(n, 0);
    if (!x) return tp_last_status();
    out[0] = tp__map(TP__MAP_GELU_BWD, g, x);
    return out[0] ? TP_STATUS_OK : tp_last_status();
}

static tp_status gelu_fill(tp__node *n, tp_tensor *out, void *ctx) {
    (void)out;
    return tp__node_save(n, ctx, false);
}

tp_tensor *tp_ag_gelu(tp_tensor *a) {
    if (!a) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "gelu: tensor is NULL");
        return NULL;
    }
    return tp__record(tp__map(TP__MAP_GELU, a, NULL), "GeluBackward0", gelu_backward, 1, &a,
                      gelu_fill, a);
}

// ----------------------------------------------------------------------------
// in place

/* PyTorch's check_inplace: refused for a leaf that requires grad, or a view
 * of one, while grad mode is on. */
static tp_status check_inplace(tp_tensor *a) {
    if (!a) return tp__error(TP_STATUS_INVALID_ARGUMENT, "in-place op: tensor is NULL");
    if (!tp__grad_enabled()) return TP_STATUS_OK;
    if (a->requires_grad && !a->grad_fn && !a->base)
        return tp__error(TP_STATUS_INVALID_ARGUMENT,
                         "a leaf Variable that requires grad is being used in an in-place operation.");
    if (a->base && a->base->requires_grad && !a->base->grad_fn && a->requires_grad)
        return tp__error(TP_STATUS_INVALID_ARGUMENT,
                         "a view of a leaf Variable that requires grad is being used in an "
                         "in-place operation.");
    return TP_STATUS_OK;
}

/* Rebases a's history onto a node for the in-place op (inputs: a's old
 * self, and b).  Called after the op succeeded. */
static tp_status rebase(tp_tensor *a, const char *name, tp__backward_fn fn, tp_tensor *b,
                        tp_binary_op op, double s) {
    tp__node *n = tp__node_new(name, fn, b ? 2 : 1, (tp_tensor *[]){a, b});
    if (!n) return tp_last_status();
    n->iarg[0] = op;
    n->darg[0] = s;
    return tp__node_attach(n, a, false);
}

/* An in-place op whose gradient needs a's old value, recorded as PyTorch
 * records it with original_self: out (consumed) is the op computed out of
 * place on old, a copy of a's old value; its node, made on inputs (a's
 * history, b's) and saving what the out-of-place op saves (of old and out,
 * so writing into a trips no version check), is moved to a once out is
 * written into a.  Releases old. */
static tp_status inplace_from_copy(tp_tensor *a, tp_tensor *old, tp_tensor *out, const char *name,
                                   tp__backward_fn fn, int n, tp_tensor *const *inputs, tp__fill_fn fill,
                                   void *ctx) {
    tp_status st = TP_STATUS_OK;
    if (!out) st = tp_last_status();
    else if (out->ndim != a->ndim || memcmp(out->sizes, a->sizes, (size_t)a->ndim * sizeof(int64_t)) != 0) {
        char got[256], want[256];
        st = tp__error(TP_STATUS_INVALID_ARGUMENT,
                       "output with shape %s doesn't match the broadcast shape %s",
                       tp__format_shape(a->ndim, a->sizes, want, sizeof want),
                       tp__format_shape(out->ndim, out->sizes, got, sizeof got));
    } else if (!(out = tp__record(out, name, fn, n, inputs, fill, ctx))) {
        st = tp_last_status();
    } else {
        bool prev = tp_grad_set_enabled(false);
        st = tp_copy_(a, out); /* a's version bumps once, as the in-place op's */
        tp_grad_set_enabled(prev);
        if (st == TP_STATUS_OK) tp__node_move(out, a);
    }
    tp_tensor_release(out);
    tp_tensor_release(old);
    return st;
}

static tp_status refuse_view(const char *what) {
    return tp__error(TP_STATUS_UNSUPPORTED,
                     "in-place %s on a view with autograd history: not recorded here (PyTorch's "
                     "CopySlices is not implemented)", what);
}

tp_status tp_ag_binary_(tp_binary_op op, tp_tensor *a, tp_tensor *b) {
    tp_status st = check_inplace(a);
    if (st != TP_STATUS_OK) return st;
    bool record = tp__needs_node(2, (tp_tensor *[]){a, b});
    if (!record) return tp_binary_(op, a, b);
    const char *name = (unsigned)op < TP_BINARY_OP_COUNT ? binary_node_name(op) : NULL;
    if (!name)
        return tp__error(TP_STATUS_UNSUPPORTED,
                         "in-place comparison on a tensor with autograd history: not recorded");
    if (a->base) return refuse_view(name);
    if (op == TP_BINARY_OP_ADD || op == TP_BINARY_OP_SUB) { /* needs no value: rebased */
        st = tp_binary_(op, a, b);
        return st != TP_STATUS_OK ? st : rebase(a, name, binary_backward, b, op, 0);
    }
    tp_tensor *old = tp_clone(a);
    if (!old) return tp_last_status();
    binary_ctx c = {op, old, b};
    return inplace_from_copy(a, old, tp_binary(op, old, b), name, binary_backward, 2, (tp_tensor *[]){a, b},
                             binary_fill, &c);
}

tp_status tp_ag_binary_scalar_(tp_binary_op op, tp_tensor *a, double b) {
    tp_status st = check_inplace(a);
    if (st != TP_STATUS_OK) return st;
    bool record = tp__needs_node(1, &a);
    if (!record) return tp_binary_scalar_(op, a, b);
    const char *name = (unsigned)op < TP_BINARY_OP_COUNT ? scalar_node_name(op) : NULL;
    if (!name)
        return tp__error(TP_STATUS_UNSUPPORTED,
                         "in-place comparison on a tensor with autograd history: not recorded");
    if (a->base) return refuse_view(name);
    if (op != TP_BINARY_OP_POW) { /* add/sub/mul/div by a scalar need no value: rebased */
        st = tp_binary_scalar_(op, a, b);
        return st != TP_STATUS_OK ? st : rebase(a, name, scalar_backward, NULL, op, b);
    }
    tp_tensor *old = tp_clone(a);
    if (!old) return tp_last_status();
    scalar_ctx c = {op, b, old};
    return inplace_from_copy(a, old, tp_binary_scalar(op, old, b), name, scalar_backward, 1, &a, scalar_fill,
                             &c);
}

tp_status tp_ag_unary_(tp_unary_op op, tp_tensor *a) {
    tp_status st = check_inplace(a);
    if (st != TP_STATUS_OK) return st;
    if (!tp__needs_node(1, &a)) return tp_unary_(op, a);
    const char *name = unary_node_name(op);
    if (!name) return tp__error(TP_STATUS_INVALID_ARGUMENT, "in-place unary op %d: no such op", (int)op);
    if (a->base) return refuse_view(name);
    tp_tensor *old = tp_clone(a);
    if (!old) return tp_last_status();
    unary_ctx c = {op, old};
    return inplace_from_copy(a, old, tp_unary(op, old), name, unary_backward, 1, &a, unary_fill, &c);
}

// ----------------------------------------------------------------------------
// copy_ and fill_: the tensor's old value is overwritten, so its history gets
// zeros; copy_'s source gets the gradient (summed to its shape)

static tp_status overwrite_backward(tp__node *n, tp_tensor *g, tp_tensor **out) {
    if (tp__edge_wants(n, 0)) FAIL_IF_NULL(out[0] = tp_zeros(n->next[0].ndim, n->next[0].sizes, g->dtype));
    if (n->n_next > 1 && tp__edge_wants(n, 1)) FAIL_IF_NULL(out[1] = tp__sum_to(g, n->next[1].ndim, n->next[1].sizes));
    return TP_STATUS_OK;
}

tp_status tp_ag_copy_(tp_tensor *dst, tp_tensor *src) {
    tp_status st = check_inplace(dst);
    if (st != TP_STATUS_OK) return st;
    if (!src) return tp__error(TP_STATUS_INVALID_ARGUMENT, "copy_: source tensor is NULL");
    bool record = tp__needs_node(2, (tp_tensor *[]){dst, src});
    if (record && dst->base) return refuse_view("CopyBackwards");
    st = tp_copy_(dst, src);
    return st != TP_STATUS_OK || !record ? st : rebase(dst, "CopyBackwards", overwrite_backward, src, 0, 0);
}

tp_status tp_ag_fill_(tp_tensor *t, double value) {
    tp_status st = check_inplace(t);
    if (st != TP_STATUS_OK) return st;
    bool record = tp__needs_node(1, &t);
    if (record && t->base) return refuse_view("FillBackward0");
    st = tp_fill_(t, value);
    return st != TP_STATUS_OK || !record ? st : rebase(t, "FillBackward0", overwrite_backward, NULL, 0, value);
}
