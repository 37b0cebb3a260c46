/*
 * src/autograd/functions/conv.c - conv2d by im2col + one batched gemm, as
 * one node (ConvolutionBackward0).  Groups 1, dilation 1; float32/float64.
 *
 *   cols (N, C*kh*kw, OH*OW) = im2col(x)
 *   y (N, O, OH*OW) = W (O, C*kh*kw) @ cols  (+ bias per O)
 * backward (x and W saved; cols recomputed, so the graph keeps the input,
 * not the kh*kw times larger cols):
 *   dW = sum_n dy_n @ cols_n^T,   dcols = W^T @ dy,   dx = col2im(dcols),
 *   db = sum of dy over (N, OH, OW)
 * Node parameters: iarg[0..3] = stride h, w, padding h, w.
 */
#include <string.h>

#include "kernels.h"

typedef struct geom {
    int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, oh, ow;
} geom;

#define IM2COL_LOOP(T, BODY)                                                            \
    for (int64_t b = 0; b < g->n; b++)                                                  \
        for (int64_t ci = 0; ci < g->c; ci++)                                           \
            for (int64_t i = 0; i < g->kh; i++)                                         \
                for (int64_t j = 0; j < g->kw; j++) {                                   \
                    int64_t row = (ci * g->kh + i) * g->kw + j;                         \
                    T *col = (T *)cols + (b * g->c * g->kh * g->kw + row) * g->oh * g->ow; \
                    T *img = (T *)image + (b * g->c + ci) * g->h * g->w;                \
                    for (int64_t y = 0; y < g->oh; y++) {                               \
                        int64_t iy = y * g->sh - g->ph + i;                             \
                        for (int64_t x = 0; x < g->ow; x++) {                           \
                            int64_t ix = x * g->sw - g->pw + j;                         \
                            bool in = iy >= 0 && iy < g->h && ix >= 0 && ix < g->w;     \
                            T *cp = col + y * g->ow + x;                                \
                            T *ip = in ? img + iy * g->w + ix : NULL;                   \
                            BODY;                                                       \
                        }                                                               \
                    }                                                                   \
                }

/* cols from image (to_cols) or image += cols (col2im), contiguous both. */
static void im2col(const geom *g, tp_dtype dtype, void *image, void *cols, bool to_cols) {
    if (dtype == TP_DTYPE_FLOAT32) {
        if (to_cols) { IM2COL_LOOP(float, *cp = ip ? *ip : 0.0f) }
        else { IM2COL_LOOP(float, if (ip) *ip += *cp) }
    } else {
        if (to_cols) { IM2COL_LOOP(double, *cp = ip ? *ip : 0.0) }
        else { IM2COL_LOOP(double, if (ip) *ip += *cp) }
    }
}

static tp_tensor *make_cols(const geom *g, tp_tensor *x) {
    tp_tensor *xc = tp_contiguous(x);
    tp_tensor *cols = xc ? tp_empty(3, (int64_t[]){g->n, g->c * g->kh * g->kw, g->oh * g->ow}, x->dtype) : NULL;
    if (cols && cols->numel) im2col(g, x->dtype, tp_tensor_data(xc), tp_tensor_data(cols), true);
    tp_tensor_release(xc);
    return cols;
}

static void geom_of(geom *g, const tp_tensor *x, const tp_tensor *w, const int64_t *p) {
    *g = (geom){.n = x->sizes[0], .c = x->sizes[1], .h = x->sizes[2], .w = x->sizes[3],
                .o = w->sizes[0], .kh = w->sizes[2], .kw = w->sizes[3],
                .sh = p[0], .sw = p[1], .ph = p[2], .pw = p[3]};
    g->oh = (g->h + 2 * g->ph - g->kh) / g->sh + 1;
    g->ow = (g->w + 2 * g->pw - g->kw) / g->sw + 1;
}

static tp_status conv_backward(tp__node *n, tp_tensor *gy, tp_tensor **out) {
    tp_tensor *x = tp__node_unpack(n, 0), *w = x ? tp__node_unpack(n, 1) : NULL;
    if (!w) return tp_last_status();
    geom g;
    geom_of(&g, x, w, n->iarg);
    int64_t ckk = g.c * g.kh * g.kw, l = g.oh * g.ow;
    tp_status st = TP_STATUS_OK;
    tp_tensor *g3 = tp_tensor_reshape(gy, 3, (int64_t[]){g.n, g.o, l});
    tp_tensor *w2 = g3 ? tp_tensor_reshape(w, 2, (int64_t[]){g.o, ckk}) : NULL;
    if (!w2) {
        tp_tensor_release(g3);
        return tp_last_status();
    }
    if (tp__edge_wants(n, 0)) { /* dcols = W^T @ dy, then col2im */
        tp_tensor *wt = tp_tensor_t(w2);
        tp_tensor *dcols = wt ? tp_matmul(wt, g3) : NULL;
        tp_tensor *dc = dcols ? tp_contiguous(dcols) : NULL;
        tp_tensor *dx = dc ? tp_zeros(4, x->sizes, x->dtype) : NULL;
        if (dx && dx->numel) im2col(&g, x->dtype, tp_tensor_data(dx), tp_tensor_data(dc), false);
        out[0] = dx;
        if (!dx) st = tp_last_status();
        tp_tensor_release(wt);
        tp_tensor_release(dcols);
        tp_tensor_release(dc);
    }
    if (st == TP_STATUS_OK && tp__edge_wants(n, 1)) { /* dW = sum_n dy_n @ cols_n^T */
        tp_tensor *cols = make_cols(&g, x);
        tp_tensor *ct = cols ? tp_tensor_transpose(cols, 1, 2) : NULL;
        tp_tensor *per = ct ? tp_matmul(g3, ct) : NULL; /* (N, O, CKK) */
        tp_tensor *sum = per ? tp_sum(per, 1, (int[]){0}, false) : NULL;
        out[1] = sum ? tp_tensor_reshape(sum, 4, w->sizes) : NULL;
        if (!out[1]) st = tp_last_status();
        tp_tensor_release(cols);
        tp_tensor_release(ct);
        tp_tensor_release(per);
        tp_tensor_release(sum);
    }
    if (st == TP_STATUS_OK && n->n_next > 2 && tp__edge_wants(n, 2)) {
        out[2] = tp_sum(g3, 2, (int[]){0, 2}, false);
        if (!out[2]) st = tp_last_status();
    }
    tp_tensor_release(w2);
    tp_tensor_release(g3);
    return st;
}

typedef struct conv_ctx {
    tp_tensor *x, *w;
    int64_t p[4];
} conv_ctx;

static tp_status conv_fill(tp__node *n, tp_tensor *out, void *vctx) {
    (void)out;
    conv_ctx *c = vctx;
    memcpy(n->iarg, c->p, sizeof c->p);
    tp_status st = tp__node_save(n, c->x, false);
    return st == TP_STATUS_OK ? tp__node_save(n, c->w, false) : st;
}

tp_tensor *tp_ag_conv2d(tp_tensor *x, tp_tensor *weight, tp_tensor *bias, int64_t stride_h,
                        int64_t stride_w, int64_t pad_h, int64_t pad_w) {
    char xs[256], ws[256];
    if (!x || !weight) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "conv2d: input or weight is NULL");
        return NULL;
    }
    if (x->ndim != 4 || weight->ndim != 4 || x->sizes[1] != weight->sizes[1]) {
        tp__error(TP_STATUS_INVALID_ARGUMENT,
                  "conv2d: expected input (N, C, H, W) and weight (O, C, kh, kw) with the same C, "
                  "got %s and %s",
                  tp__format_shape(x->ndim, x->sizes, xs, sizeof xs),
                  tp__format_shape(weight->ndim, weight->sizes, ws, sizeof ws));
        return NULL;
    }
    if (x->dtype != weight->dtype || (x->dtype != TP_DTYPE_FLOAT32 && x->dtype != TP_DTYPE_FLOAT64)) {
        tp__error(TP_STATUS_UNSUPPORTED, "conv2d: input and weight must both be float32 or both float64");
        return NULL;
    }
    if (stride_h < 1 || stride_w < 1 || pad_h < 0 || pad_w < 0) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "conv2d: stride must be >= 1 and padding >= 0");
        return NULL;
    }
    if (bias && (bias->ndim != 1 || bias->sizes[0] != weight->sizes[0] || bias->dtype != x->dtype)) {
        tp__error(TP_STATUS_INVALID_ARGUMENT, "conv2d: bias must have shape [%lld] and the input's dtype",
                  (long long)weight->sizes[0]);
        return NULL;
    }
    geom g;
    conv_ctx c = {x, weight, {stride_h, stride_w, pad_h, pad_w}};
    geom_of(&g, x, weight, c.p);
    if (x->sizes[2] + 2 * pad_h < g.kh || x->sizes[3] + 2 * pad_w < g.kw) {
        tp__error(TP_STATUS_INVALID_ARGUMENT,
                  "Calculated padded input size per channel: (%lld x %lld). Kernel size: (%lld x "
                  "%lld). Kernel size can't be greater than actual input size",
                  (long long)(g.h + 2 * pad_h), (long long)(g.w + 2 * pad_w), (long long)g.kh,
                  (long long)g.kw);
        return NULL;
    }
    tp_tensor *cols = make_cols(&g, x);
    tp_tensor *w2 = cols ? tp_tensor_reshape(weight, 2, (int64_t[]){g.o, g.c * g.kh * g.kw}) : NULL;
    tp_tensor *y3 = w2 ? tp_matmul(w2, cols) : NULL; /* (N, O, L) */
    tp_tensor *y = y3 ? tp_tensor_reshape(y3, 4, (int64_t[]){g.n, g.o, g.oh, g.ow}) : NULL;
    tp_tensor_release(cols);
    tp_tensor_release(w2);
    tp_tensor_release(y3);
    if (y && bias) {
        tp_tensor *b3 = tp_tensor_reshape(bias, 3, (int64_t[]){g.o, 1, 1});
        tp_status st = b3 ? tp_add_(y, b3) : tp_last_status();
        tp_tensor_release(b3);
        if (st != TP_STATUS_OK) {
            tp_tensor_release(y);
            y = NULL;
        }
    }
    return tp__record(y, "ConvolutionBackward0", conv_backward, bias ? 3 : 2,
                      (tp_tensor *[]){x, weight, bias}, conv_fill, &c);
}
