/*
 * tests/cuda/test_cuda_ops.c - every CUDA op against the CPU path, op by op
 * (elementwise with broadcasts and strided views, scalars, comparisons,
 * in-place forms, reductions over dims, cat, casts, matmul, fills and
 * copies).  Needs a real GPU: without one it says "SKIP: no CUDA device"
 * and exits 77.  One line per check: PASS/FAIL, the op, the largest
 * difference from the CPU.
 */
#include <math.h>
#include <stdlib.h>

#include "../check.h"
#include "fake/fake_cudart.h"
#include "tensorplay/tensorplay.h"
#include "tensorplay/cuda.h"

#define SHAPE(...) (int64_t[]){__VA_ARGS__}

static tp_device dev;
static int checks;

/* Largest |a - b| (NaN where one is NaN and the other not; inf if shapes differ). */
static double max_diff(const tp_tensor *cpu, const tp_tensor *gpu) {
    if (!cpu || !gpu) return INFINITY;
    if (tp_tensor_dim(cpu) != tp_tensor_dim(gpu) || tp_tensor_numel(cpu) != tp_tensor_numel(gpu) ||
        tp_tensor_dtype(cpu) != tp_tensor_dtype(gpu))
        return INFINITY;
    for (int d = 0; d < tp_tensor_dim(cpu); d++)
        if (tp_tensor_size(cpu, d) != tp_tensor_size(gpu, d)) return INFINITY;
    tp_tensor *h = tp_tensor_to((tp_tensor *)gpu, tp_device_cpu());
    tp_tensor *a = tp_to_dtype((tp_tensor *)cpu, TP_DTYPE_FLOAT64);
    tp_tensor *b = h ? tp_to_dtype(h, TP_DTYPE_FLOAT64) : NULL;
    tp_tensor *ac = a ? tp_contiguous(a) : NULL, *bc = b ? tp_contiguous(b) : NULL;
    double worst = ac && bc ? 0.0 : INFINITY;
    for (int64_t i = 0; ac && bc && i < tp_tensor_numel(ac); i++) {
        double x = ((double *)tp_tensor_data(ac))[i], y = ((double *)tp_tensor_data(bc))[i];
        if (isnan(x) || isnan(y)) {
            if (isnan(x) != isnan(y)) worst = NAN;
            continue;
        }
        if (isinf(x) || isinf(y)) {
            if (x != y) worst = INFINITY;
            continue;
        }
        double d = fabs(x - y) / (1.0 + fabs(x));
        if (d > worst) worst = d;
    }
    tp_tensor *all[] = {h, a, b, ac, bc};
    for (int i = 0; i < 5; i++) tp_tensor_release(all[i]);
    return worst;
}

static void expect(const char *what, const tp_tensor *cpu, const tp_tensor *gpu, double tol) {
    double d = max_diff(cpu, gpu);
    bool ok = d <= tol; /* NaN fails */
    printf("%s %-44s max_rel_err=%.3g%s\n", ok ? "PASS" : "FAIL", what, d,
           gpu ? "" : tp_last_error());
    if (!ok) check_failures++;
    checks++;
}

static tp_tensor *up(tp_tensor *t) { return tp_tensor_to(t, dev); }

static tp_tensor *sample(int ndim, const int64_t *sizes, tp_dtype dtype, uint64_t seed) {
    tp_tensor *r = tp_randn(ndim, sizes, TP_DTYPE_FLOAT64, seed);
    tp_tensor *s = tp_binary_scalar(TP_BINARY_OP_MUL, r, 4.0);
    tp_tensor *t = tp_to_dtype(s, dtype); /* integers: truncated normals */
    tp_tensor_release(r), tp_tensor_release(s);
    return t;
}

static double tol_of(tp_dtype d) {
    return d == TP_DTYPE_FLOAT16 ? 2e-3 : d == TP_DTYPE_BFLOAT16 ? 1e-2 : d == TP_DTYPE_FLOAT32 ? 2e-6 : 1e-12;
}

// ----------------------------------------------------------------------------

static void test_binary_ops_broadcast_and_strides(void) {
    tp_dtype dts[] = {TP_DTYPE_FLOAT32, TP_DTYPE_FLOAT64, TP_DTYPE_FLOAT16, TP_DTYPE_BFLOAT16,
                      TP_DTYPE_INT32, TP_DTYPE_INT64, TP_DTYPE_UINT8, TP_DTYPE_BOOL};
    const char *names[] = {"add", "sub", "mul", "div", "pow", "eq", "ne", "lt", "le", "gt", "ge"};
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
        tp_tensor *a = sample(2, SHAPE(33, 17), dts[i], 1 + i);
        tp_tensor *b = sample(1, SHAPE(17), dts[i], 100 + i);
        tp_tensor *at = tp_tensor_t(a); /* (17, 33), strided */
        tp_tensor *bc = sample(2, SHAPE(17, 1), dts[i], 200 + i);
        tp_tensor *ga = up(a), *gb = up(b), *gat = tp_tensor_t(ga), *gbc = up(bc);
        for (int op = 0; op < TP_BINARY_OP_COUNT; op++) {
            if (op == TP_BINARY_OP_SUB && dts[i] == TP_DTYPE_BOOL) continue;
            if (op == TP_BINARY_OP_POW && !tp_dtype_is_floating(dts[i])) continue;
            char what[96];
            tp_tensor *c = tp_binary(op, a, b), *g = tp_binary(op, ga, gb);
            snprintf(what, sizeof what, "%s %s broadcast", names[op], tp_dtype_name(dts[i]));
            expect(what, c, g, tol_of(tp_tensor_dtype(c)));
            tp_tensor_release(c), tp_tensor_release(g);
            c = tp_binary(op, at, bc), g = tp_binary(op, gat, gbc);
            snprintf(what, sizeof what, "%s %s transposed", names[op], tp_dtype_name(dts[i]));
            expect(what, c, g, tol_of(tp_tensor_dtype(c)));
            tp_tensor_release(c), tp_tensor_release(g);
        }
        tp_tensor *all[] = {a, b, at, bc, ga, gb, gat, gbc};
        for (int k = 0; k < 8; k++) tp_tensor_release(all[k]);
    }
    /* mixed dtypes promote the same way */
    tp_tensor *a = sample(1, SHAPE(1000), TP_DTYPE_INT32, 5), *b = sample(1, SHAPE(1000), TP_DTYPE_FLOAT32, 6);
    tp_tensor *ga = up(a), *gb = up(b);
    tp_tensor *c = tp_add(a, b), *g = tp_add(ga, gb);
    expect("add int32+float32", c, g, 2e-6);
    tp_tensor_release(c), tp_tensor_release(g);
    c = tp_div(a, a), g = tp_div(ga, ga);
    expect("div int32/int32 (true division)", c, g, 2e-6);
    tp_tensor *all[] = {a, b, ga, gb, c, g};
    for (int k = 0; k < 6; k++) tp_tensor_release(all[k]);
    /* a large contiguous float32 add (the fast path) */
    tp_tensor *x = sample(1, SHAPE(1 << 22), TP_DTYPE_FLOAT32, 7), *y = sample(1, SHAPE(1 << 22), TP_DTYPE_FLOAT32, 8);
    tp_tensor *gx = up(x), *gy = up(y);
    c = tp_add(x, y), g = tp_add(gx, gy);
    expect("add float32 4Mi contiguous", c, g, 0);
    tp_tensor *list[] = {x, y, gx, gy, c, g};
    for (int k = 0; k < 6; k++) tp_tensor_release(list[k]);
}

static void test_scalar_and_unary_ops(void) {
    tp_dtype dts[] = {TP_DTYPE_FLOAT32, TP_DTYPE_FLOAT64, TP_DTYPE_FLOAT16, TP_DTYPE_INT64, TP_DTYPE_INT8};
    const char *un[] = {"neg", "abs", "exp", "log", "sqrt", "relu", "tanh", "sigmoid"};
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
        tp_tensor *a = sample(3, SHAPE(4, 5, 6), dts[i], 30 + i);
        tp_tensor *ap = tp_tensor_permute(a, 3, (int[]){2, 0, 1});
        tp_tensor *ga = up(a), *gap = tp_tensor_permute(ga, 3, (int[]){2, 0, 1});
        for (int op = 0; op < TP_UNARY_OP_COUNT; op++) {
            if (op == TP_UNARY_OP_NEG && dts[i] == TP_DTYPE_BOOL) continue;
            char what[96];
            tp_tensor *c = tp_unary(op, ap), *g = tp_unary(op, gap);
            snprintf(what, sizeof what, "%s %s permuted", un[op], tp_dtype_name(dts[i]));
            expect(what, c, g, 4 * tol_of(tp_tensor_dtype(c)) + (op >= TP_UNARY_OP_EXP ? 1e-6 : 0));
            tp_tensor_release(c), tp_tensor_release(g);
        }
        double scalars[] = {2.0, -0.5, 3.0};
        for (int s = 0; s < 3; s++)
            for (int op = 0; op < TP_BINARY_OP_COUNT; op++) {
                if (op == TP_BINARY_OP_POW && (!tp_dtype_is_floating(dts[i]) || scalars[s] != 2.0)) continue;
                char what[96];
                tp_tensor *c = tp_binary_scalar(op, a, scalars[s]), *g = tp_binary_scalar(op, ga, scalars[s]);
                snprintf(what, sizeof what, "scalar op %d %s %g", op, tp_dtype_name(dts[i]), scalars[s]);
                expect(what, c, g, tol_of(c ? tp_tensor_dtype(c) : TP_DTYPE_FLOAT64));
                tp_tensor_release(c), tp_tensor_release(g);
            }
        tp_tensor_release(a), tp_tensor_release(ap), tp_tensor_release(ga), tp_tensor_release(gap);
    }
}

static void test_in_place_ops_bump_the_version(void) {
    tp_tensor *a = sample(2, SHAPE(64, 64), TP_DTYPE_FLOAT32, 40), *b = sample(1, SHAPE(64), TP_DTYPE_FLOAT32, 41);
    tp_tensor *ga = up(a), *gb = up(b);
    CHECK_EQ(tp_add_(a, b), TP_STATUS_OK);
    CHECK_EQ(tp_add_(ga, gb), TP_STATUS_OK);
    CHECK_EQ(tp_tensor_version(ga), 1);
    tp_relu_(a), tp_relu_(ga);
    tp_binary_scalar_(TP_BINARY_OP_MUL, a, 0.25), tp_binary_scalar_(TP_BINARY_OP_MUL, ga, 0.25);
    expect("add_ relu_ mul_(scalar) float32", a, ga, 0);
    /* an overlapping operand is read before the write */
    tp_tensor *at = tp_tensor_t(a), *gat = tp_tensor_t(ga);
    tp_add_(a, at), tp_add_(ga, gat);
    expect("add_(a, a.t()) overlapping", a, ga, 0);
    CHECK_EQ(tp_fill_(gb, 1.5), TP_STATUS_OK);
    tp_fill_(b, 1.5);
    expect("fill_ float32", b, gb, 0);
    tp_tensor *list[] = {a, b, ga, gb, at, gat};
    for (int k = 0; k < 6; k++) tp_tensor_release(list[k]);
}

static void test_reductions_over_dims(void) {
    tp_dtype dts[] = {TP_DTYPE_FLOAT32, TP_DTYPE_FLOAT64, TP_DTYPE_INT32, TP_DTYPE_FLOAT16};
    int dimsets[][3] = {{0}, {1}, {2}, {0, 2}, {1, 2}};
    int ndims[] = {1, 1, 1, 2, 2};
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
        tp_tensor *a = sample(3, SHAPE(7, 300, 9), dts[i], 50 + i);
        tp_tensor *at = tp_tensor_transpose(a, 0, 2);
        tp_tensor *ga = up(a), *gat = tp_tensor_transpose(ga, 0, 2);
        for (int s = 0; s < 5; s++)
            for (int keep = 0; keep < 2; keep++) {
                char what[96];
                tp_tensor *c, *g;
                c = tp_sum(at, ndims[s], dimsets[s], keep), g = tp_sum(gat, ndims[s], dimsets[s], keep);
                snprintf(what, sizeof what, "sum %s dims#%d keep=%d", tp_dtype_name(dts[i]), s, keep);
                expect(what, c, g, dts[i] == TP_DTYPE_FLOAT16 ? 2e-3 : 1e-5);
                tp_tensor_release(c), tp_tensor_release(g);
                c = tp_max(at, ndims[s], dimsets[s], keep), g = tp_max(gat, ndims[s], dimsets[s], keep);
                snprintf(what, sizeof what, "max %s dims#%d keep=%d", tp_dtype_name(dts[i]), s, keep);
                expect(what, c, g, 0);
                tp_tensor_release(c), tp_tensor_release(g);
                c = tp_min(at, ndims[s], dimsets[s], keep), g = tp_min(gat, ndims[s], dimsets[s], keep);
                snprintf(what, sizeof what, "min %s dims#%d keep=%d", tp_dtype_name(dts[i]), s, keep);
                expect(what, c, g, 0);
                tp_tensor_release(c), tp_tensor_release(g);
                if (tp_dtype_is_floating(dts[i])) {
                    c = tp_mean(at, ndims[s], dimsets[s], keep), g = tp_mean(gat, ndims[s], dimsets[s], keep);
                    snprintf(what, sizeof what, "mean %s dims#%d keep=%d", tp_dtype_name(dts[i]), s, keep);
                    expect(what, c, g, dts[i] == TP_DTYPE_FLOAT16 ? 2e-3 : 1e-5);
                    tp_tensor_release(c), tp_tensor_release(g);
                }
            }
        for (int d = 0; d < 3; d++) {
            char what[96];
            tp_tensor *c = tp_argmax(at, d, false), *g = tp_argmax(gat, d, false);
            snprintf(what, sizeof what, "argmax %s dim %d", tp_dtype_name(dts[i]), d);
            expect(what, c, g, 0);
            tp_tensor_release(c), tp_tensor_release(g);
        }
        tp_tensor *c = tp_sum(a, 0, NULL, false), *g = tp_sum(ga, 0, NULL, false);
        expect("sum all dims", c, g, dts[i] == TP_DTYPE_FLOAT16 ? 2e-3 : 1e-5);
        tp_tensor_release(c), tp_tensor_release(g);
        tp_tensor_release(a), tp_tensor_release(at), tp_tensor_release(ga), tp_tensor_release(gat);
    }
    tp_tensor *big = sample(1, SHAPE(1 << 22), TP_DTYPE_FLOAT32, 60), *gbig = up(big);
    tp_tensor *c = tp_sum(big, 0, NULL, false), *g = tp_sum(gbig, 0, NULL, false);
    expect("sum float32 4Mi elements", c, g, 1e-4);
    tp_tensor_release(c), tp_tensor_release(g);
    c = tp_argmax(big, 0, false), g = tp_argmax(gbig, 0, false);
    expect("argmax float32 4Mi elements", c, g, 0);
    tp_tensor_release(c), tp_tensor_release(g), tp_tensor_release(big), tp_tensor_release(gbig);
}

static void test_cat_casts_and_copies(void) {
    tp_tensor *a = sample(2, SHAPE(5, 8), TP_DTYPE_FLOAT32, 70), *b = sample(2, SHAPE(3, 8), TP_DTYPE_FLOAT32, 71);
    tp_tensor *ga = up(a), *gb = up(b);
    tp_tensor *c = tp_cat(2, (tp_tensor *[]){a, b}, 0), *g = tp_cat(2, (tp_tensor *[]){ga, gb}, 0);
    expect("cat dim 0", c, g, 0);
    tp_tensor_release(c), tp_tensor_release(g);
    tp_tensor *bt = tp_tensor_t(b), *gbt = tp_tensor_t(gb), *at = tp_tensor_t(a), *gat = tp_tensor_t(ga);
    c = tp_cat(2, (tp_tensor *[]){at, bt}, 1), g = tp_cat(2, (tp_tensor *[]){gat, gbt}, 1);
    expect("cat dim 1 of transposed views", c, g, 0);
    tp_tensor_release(c), tp_tensor_release(g);
    for (int from = 0; from < TP_DTYPE_COUNT; from++)
        for (int to = 0; to < TP_DTYPE_COUNT; to++) {
            tp_tensor *x = sample(1, SHAPE(257), from, 80 + from);
            tp_tensor *gx = up(x);
            tp_tensor *cx = tp_to_dtype(x, to), *gx2 = tp_to_dtype(gx, to);
            char what[96];
            snprintf(what, sizeof what, "cast %s -> %s", tp_dtype_name(from), tp_dtype_name(to));
            expect(what, cx, gx2, 0);
            tp_tensor *l[] = {x, gx, cx, gx2};
            for (int k = 0; k < 4; k++) tp_tensor_release(l[k]);
        }
    tp_tensor *cc = tp_contiguous(at), *gc = tp_contiguous(gat);
    expect("contiguous of a transposed view", cc, gc, 0);
    tp_tensor *dst = tp_zeros(2, SHAPE(8, 5), TP_DTYPE_FLOAT64), *gdst = up(dst);
    tp_copy_(dst, at), tp_copy_(gdst, gat);
    expect("copy_ with a cast from a strided view", dst, gdst, 0);
    tp_tensor *list[] = {a, b, ga, gb, bt, gbt, at, gat, cc, gc, dst, gdst};
    for (int k = 0; k < 12; k++) tp_tensor_release(list[k]);
}

static void test_matmul_through_cublas(void) {
    struct { int na; int64_t sa[3]; int nb; int64_t sb[3]; const char *what; } cases[] = {
        {2, {64, 48}, 2, {48, 32}, "matmul 2-D"},
        {3, {4, 31, 17}, 3, {4, 17, 9}, "matmul batched"},
        {3, {4, 31, 17}, 2, {17, 9}, "matmul batched x 2-D"},
        {1, {17}, 3, {2, 17, 5}, "matmul 1-D x batched"},
        {2, {31, 17}, 1, {17}, "matmul 2-D x 1-D"},
        {1, {100}, 1, {100}, "matmul dot"},
    };
    tp_dtype dts[] = {TP_DTYPE_FLOAT32, TP_DTYPE_FLOAT64, TP_DTYPE_FLOAT16, TP_DTYPE_BFLOAT16};
    for (size_t d = 0; d < 4; d++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            tp_tensor *a = sample(cases[i].na, cases[i].sa, dts[d], 90 + i);
            tp_tensor *b = sample(cases[i].nb, cases[i].sb, dts[d], 95 + i);
            tp_tensor *ga = up(a), *gb = up(b);
            tp_tensor *c = tp_matmul(a, b), *g = tp_matmul(ga, gb);
            char what[96];
            snprintf(what, sizeof what, "%s %s", cases[i].what, tp_dtype_name(dts[d]));
            expect(what, c, g, dts[d] == TP_DTYPE_FLOAT64 ? 1e-12 : dts[d] == TP_DTYPE_FLOAT32 ? 1e-4 : 2e-2);
            tp_tensor *l[] = {a, b, ga, gb, c, g};
            for (int k = 0; k < 6; k++) tp_tensor_release(l[k]);
        }
    /* a transposed operand */
    tp_tensor *a = sample(2, SHAPE(48, 64), TP_DTYPE_FLOAT32, 99), *b = sample(2, SHAPE(48, 32), TP_DTYPE_FLOAT32, 98);
    tp_tensor *at = tp_tensor_t(a), *ga = up(a), *gat = tp_tensor_t(ga), *gb = up(b);
    tp_tensor *c = tp_matmul(at, b), *g = tp_matmul(gat, gb);
    expect("matmul a.t() @ b float32", c, g, 1e-4);
    tp_tensor *l[] = {a, b, at, ga, gat, gb, c, g};
    for (int k = 0; k < 8; k++) tp_tensor_release(l[k]);
}

int main(int argc, char **argv) {
    /* --on-the-double: run against the runtime double's host-emulated
     * kernels (and cuBLAS double), which checks the host side and the
     * kernels' arithmetic but not the GPU itself. */
    bool on_double = argc > 1 && strcmp(argv[1], "--on-the-double") == 0;
    tpfake_api fake = tpfake_open();
    int n = 0;
    if ((fake.reset && !on_double) || tp_cuda_device_count(&n) != TP_STATUS_OK) {
        printf("SKIP: no CUDA device (%s)\n", fake.reset ? "the runtime double is loaded" : tp_last_error());
        return 77;
    }
    dev = tp_device_cuda(0);
    RUN_TEST(test_binary_ops_broadcast_and_strides);
    RUN_TEST(test_scalar_and_unary_ops);
    RUN_TEST(test_in_place_ops_bump_the_version);
    RUN_TEST(test_reductions_over_dims);
    RUN_TEST(test_cat_casts_and_copies);
    RUN_TEST(test_matmul_through_cublas);
    printf("%d checks, %d failed\n", checks, check_failures);
    return CHECK_DONE();
}
