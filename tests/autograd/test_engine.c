/*
 * tests/autograd/test_engine.c - the autograd engine and graph rules
 * (src/autograd/node.c, engine.c): leaves and grad_fn, accumulation,
 * dependency order without recursion, saved tensors freed or retained,
 * PyTorch's error texts, no_grad and detach.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensorplay/tensorplay.h"
#include "../check.h"

#define SHAPE(...) ((int64_t[]){__VA_ARGS__})

static tp_tensor *leaf(int ndim, const int64_t *sizes, double start, tp_dtype dtype) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= sizes[i];
    tp_tensor *a = tp_arange(start, start + (double)n, 1, dtype);
    tp_tensor *t = tp_tensor_reshape(a, ndim, sizes);
    tp_tensor *c = tp_clone(t); /* not a view */
    tp_tensor_release(a);
    tp_tensor_release(t);
    tp_tensor_set_requires_grad(c, true);
    return c;
}

static double at(const tp_tensor *t, int64_t i) {
    double v = NAN;
    int64_t idx[TP_MAX_DIMS] = {0};
    int64_t rem = i;
    for (int d = tp_tensor_dim(t) - 1; d >= 0; d--) {
        idx[d] = rem % tp_tensor_sizes(t)[d];
        rem /= tp_tensor_sizes(t)[d];
    }
    tp_tensor_get(t, idx, &v);
    return v;
}

// ----------------------------------------------------------------------------

static void test_leaf_and_grad_fn(void) {
    tp_tensor *x = leaf(1, SHAPE(3), 1, TP_DTYPE_FLOAT32);
    CHECK(tp_tensor_is_leaf(x));
    CHECK(tp_tensor_grad_fn_name(x) == NULL);
    tp_tensor *y = tp_ag_mul(x, x);
    CHECK(!tp_tensor_is_leaf(y));
    CHECK(tp_tensor_requires_grad(y));
    CHECK_STR(tp_tensor_grad_fn_name(y), "MulBackward0");
    tp_tensor *s = tp_ag_sum(y, 0, NULL, false);
    CHECK_STR(tp_tensor_grad_fn_name(s), "SumBackward1");
    CHECK_EQ(tp_backward(s, NULL, false), TP_STATUS_OK);
    tp_tensor *g = tp_tensor_grad(x);
    CHECK(g != NULL);
    for (int i = 0; i < 3; i++) CHECK(at(g, i) == 2.0 * (i + 1)); /* d(x^2)/dx = 2x */
    CHECK(tp_tensor_grad(y) == NULL); /* non-leaves keep no .grad */
    tp_tensor_release(s);
    tp_tensor_release(y);
    tp_tensor_release(x);
}

static void test_inputs_without_requires_grad_record_nothing(void) {
    tp_tensor *a = tp_ones(1, SHAPE(2), TP_DTYPE_FLOAT32);
    tp_tensor *b = tp_ag_unary(TP_UNARY_OP_EXP, a);
    CHECK(b && !tp_tensor_requires_grad(b) && tp_tensor_grad_fn_name(b) == NULL);
    CHECK_EQ(tp_backward(b, NULL, false), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "element 0 of tensors does not require grad and does not have a grad_fn");
    tp_tensor_release(b);
    tp_tensor_release(a);
}

static void test_comparisons_compute_without_recording(void) {
    tp_tensor *x = leaf(1, SHAPE(3), 0, TP_DTYPE_FLOAT32);
    tp_tensor *c = tp_ag_binary_scalar(TP_BINARY_OP_GT, x, 0.5);
    tp_tensor *d = tp_ag_binary(TP_BINARY_OP_EQ, x, x);
    CHECK(c && d && tp_tensor_dtype(c) == TP_DTYPE_BOOL && !tp_tensor_requires_grad(c));
    CHECK(!tp_tensor_requires_grad(d) && tp_tensor_grad_fn_name(d) == NULL);
    tp_tensor_release(d);
    tp_tensor_release(c);
    tp_tensor_release(x);
}

static void test_gradients_accumulate_across_backward_calls_and_paths(void) {
    tp_tensor *x = leaf(1, SHAPE(2), 1, TP_DTYPE_FLOAT64);
    for (int k = 0; k < 2; k++) {
        /* x used twice: y = x + x*3, dy/dx = 4 */
        tp_tensor *m = tp_ag_binary_scalar(TP_BINARY_OP_MUL, x, 3);
        tp_tensor *y = tp_ag_add(x, m);
        tp_tensor *s = tp_ag_sum(y, 0, NULL, false);
        CHECK_EQ(tp_backward(s, NULL, false), TP_STATUS_OK);
        tp_tensor_release(s);
        tp_tensor_release(y);
        tp_tensor_release(m);
    }
    CHECK(at(tp_tensor_grad(x), 0) == 8.0 && at(tp_tensor_grad(x), 1) == 8.0);
    tp_tensor_release(x);
}

static void test_diamond_runs_each_node_once_with_summed_gradient(void) {
    /* a = exp(x); b = a*2; c = a*3; d = b + c: dd/dx = 5 exp(x) */
    tp_tensor *x = leaf(1, SHAPE(1), 0, TP_DTYPE_FLOAT64);
    tp_tensor *a = tp_ag_unary(TP_UNARY_OP_EXP, x);
    tp_tensor *b = tp_ag_binary_scalar(TP_BINARY_OP_MUL, a, 2);
    tp_tensor *c = tp_ag_binary_scalar(TP_BINARY_OP_MUL, a, 3);
    tp_tensor *d = tp_ag_add(b, c);
    CHECK_EQ(tp_backward(d, NULL, false), TP_STATUS_OK); /* exp's saved output used once */
    CHECK(fabs(at(tp_tensor_grad(x), 0) - 5.0) < 1e-12);
    tp_tensor *ts[] = {d, c, b, a, x};
    for (int i = 0; i < 5; i++) tp_tensor_release(ts[i]);
}

static void test_long_chain_does_not_recurse(void) {
    /* 100,000 nodes: backward and the graph's release both iterate. */
    tp_tensor *x = leaf(1, SHAPE(1), 1, TP_DTYPE_FLOAT64);
    tp_tensor *y = tp_tensor_retain(x);
    for (int i = 0; i < 100000; i++) {
        tp_tensor *z = tp_ag_binary_scalar(TP_BINARY_OP_ADD, y, 1e-5);
        tp_tensor_release(y);
        y = z;
    }
    CHECK(fabs(at(y, 0) - 2.0) < 1e-9);
    CHECK_EQ(tp_backward(y, NULL, false), TP_STATUS_OK);
    CHECK(at(tp_tensor_grad(x), 0) == 1.0);
    tp_tensor_release(y); /* frees 100,000 nodes */
    /* a chain of nodes that save tensors too */
    y = tp_tensor_retain(x);
    for (int i = 0; i < 100000; i++) {
        tp_tensor *z = tp_ag_mul(y, y);
        tp_tensor *w = tp_ag_unary(TP_UNARY_OP_SQRT, z);
        tp_tensor_release(z);
        tp_tensor_release(y);
        y = w;
        if (i == 50000) break; /* 100,002 nodes */
    }
    CHECK_EQ(tp_backward(y, NULL, false), TP_STATUS_OK);
    CHECK(fabs(at(tp_tensor_grad(x), 0) - 2.0) < 1e-6); /* 1 from the first chain + 1 */
    tp_tensor_release(y);
    tp_tensor_release(x);
}

static void test_saved_tensors_are_freed_by_backward(void) {
    tp_tensor *x = leaf(1, SHAPE(4), 0, TP_DTYPE_FLOAT32);
    tp_tensor *y = tp_ag_unary(TP_UNARY_OP_EXP, x); /* saves its output */
    tp_tensor *s = tp_ag_sum(y, 0, NULL, false);
    CHECK_EQ(tp_storage_use_count(tp_tensor_storage(y)), 2); /* y + the saved alias */
    CHECK_EQ(tp_backward(s, NULL, false), TP_STATUS_OK);
    CHECK_EQ(tp_storage_use_count(tp_tensor_storage(y)), 1);
    /* a second backward needs the freed tensor */
    CHECK_EQ(tp_backward(s, NULL, false), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(),
              "Trying to backward through the graph a second time (or directly access saved "
              "tensors after they have already been freed). Saved intermediate values of the graph "
              "are freed when you call .backward() or autograd.grad(). Specify retain_graph=True "
              "if you need to backward through the graph a second time or if you need to access "
              "saved tensors after calling backward.");
    tp_tensor_release(s);
    tp_tensor_release(y);
    tp_tensor_release(x);
}

static void test_retain_graph_keeps_saved_tensors(void) {
    tp_tensor *x = leaf(1, SHAPE(2), 1, TP_DTYPE_FLOAT64);
    tp_tensor *y = tp_ag_mul(x, x);
    tp_tensor *s = tp_ag_sum(y, 0, NULL, false);
    CHECK_EQ(tp_backward(s, NULL, true), TP_STATUS_OK);
    CHECK_EQ(tp_backward(s, NULL, false), TP_STATUS_OK);
    CHECK(at(tp_tensor_grad(x), 1) == 8.0); /* 2 * (2x) at x = 2 */
    CHECK_EQ(tp_backward(s, NULL, false), TP_STATUS_INVALID_ARGUMENT);
    tp_tensor_release(s);
    tp_tensor_release(y);
    tp_tensor_release(x);
}

static void test_graph_without_saved_tensors_can_run_twice(void) {
    /* as in PyTorch: (x * 2).sum().backward() twice is fine */
    tp_tensor *x = leaf(1, SHAPE(2), 1, TP_DTYPE_FLOAT32);
    tp_tensor *y = tp_ag_binary_scalar(TP_BINARY_OP_MUL, x, 2);
    tp_tensor *s = tp_ag_sum(y, 0, NULL, false);
    CHECK_EQ(tp_backward(s, NULL, false), TP_STATUS_OK);
    CHECK_EQ(tp_backward(s, NULL, false), TP_STATUS_OK);
    CHECK(at(tp_tensor_grad(x), 0) == 4.0);
    tp_tensor_release(s);
    tp_tensor_release(y);
    tp_tensor_release(x);
}

static void test_saved_tensor_modified_in_place_fails_with_pytorch_text(void) {
    tp_tensor *x = leaf(1, SHAPE(3), 0, TP_DTYPE_FLOAT32);
    tp_tensor *y = tp_ag_unary(TP_UNARY_OP_SIGMOID, x);
    tp_tensor *s = tp_ag_sum(y, 0, NULL, false);
    CHECK_EQ(tp_add_(y, y), TP_STATUS_OK); /* raw in-place: version 0 -> 1 */
    CHECK_EQ(tp_backward(s, NULL, false), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(),
              "one of the variables needed for gradient computation has been modified by an "
              "inplace operation: [tensorplay.FloatTensor [3]], which is output 0 of "
              "SigmoidBackward0, is at version 1; expected version 0 instead. Hint: enable "
              "anomaly detection to find the operation that failed to compute its gradient, with "
              "torch.autograd.set_detect_anomaly(True).");
    tp_tensor_release(s);
    tp_tensor_release(y);
    /* a saved leaf: no "which is output" clause; under no_grad the leaf
     * may be changed, and the version still bumps */
    tp_tensor *z = tp_ag_mul(x, x);
    bool prev = tp_grad_set_enabled(false);
    CHECK_EQ(tp_ag_binary_scalar_(TP_BINARY_OP_ADD, x, 1), TP_STATUS_OK);
    tp_grad_set_enabled(prev);
    CHECK_EQ(tp_tensor_version(x), 1);
    tp_tensor *zs = tp_ag_sum(z, 0, NULL, false);
    CHECK_EQ(tp_backward(zs, NULL, false), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(),
              "one of the variables needed for gradient computation has been modified by an "
              "inplace operation: [tensorplay.FloatTensor [3]] is at version 1; expected version "
              "0 instead. Hint: enable anomaly detection to find the operation that failed to "
              "compute its gradient, with torch.autograd.set_detect_anomaly(True).");
    tp_tensor_release(zs);
    tp_tensor_release(z);
    tp_tensor_release(x);
}

static void test_in_place_on_leaf_requiring_grad_is_refused(void) {
    tp_tensor *x = leaf(1, SHAPE(3), 0, TP_DTYPE_FLOAT32);
    CHECK_EQ(tp_ag_binary_scalar_(TP_BINARY_OP_MUL, x, 2), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "a leaf Variable that requires grad is being used in an in-place operation.");
    CHECK_EQ(tp_tensor_version(x), 0);
    CHECK(at(x, 1) == 1.0);
    tp_tensor *v = tp_ag_slice(x, 0, 1, 3, 1);
    CHECK_EQ(tp_ag_binary_(TP_BINARY_OP_ADD, v, v), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(),
              "a view of a leaf Variable that requires grad is being used in an in-place operation.");
    tp_tensor_release(v);
    tp_tensor_release(x);
}

static void test_in_place_on_non_leaf_is_recorded(void) {
    tp_tensor *x = leaf(1, SHAPE(2), 1, TP_DTYPE_FLOAT64);
    tp_tensor *y = tp_ag_binary_scalar(TP_BINARY_OP_MUL, x, 3); /* 3x */
    CHECK_EQ(tp_ag_binary_scalar_(TP_BINARY_OP_MUL, y, 2), TP_STATUS_OK); /* 6x */
    CHECK_EQ(tp_ag_binary_(TP_BINARY_OP_ADD, y, x), TP_STATUS_OK);       /* 7x */
    CHECK_STR(tp_tensor_grad_fn_name(y), "AddBackward0");
    CHECK_EQ(tp_tensor_version(y), 2);
    tp_tensor *s = tp_ag_sum(y, 0, NULL, false);
    CHECK_EQ(tp_backward(s, NULL, false), TP_STATUS_OK);
    CHECK(at(tp_tensor_grad(x), 0) == 7.0);
    tp_tensor_release(s);
    tp_tensor_release(y);
    tp_tensor_release(x);
}

static void test_in_place_needing_the_old_value_is_recorded_on_a_copy(void) {
    tp_tensor *x = leaf(1, SHAPE(2), 1, TP_DTYPE_FLOAT64);  /* [1, 2] */
    tp_tensor *w = leaf(1, SHAPE(2), 3, TP_DTYPE_FLOAT64);  /* [3, 4] */
    tp_tensor *y = tp_ag_binary_scalar(TP_BINARY_OP_MUL, x, 1);
    CHECK_EQ(tp_ag_binary_(TP_BINARY_OP_MUL, y, w), TP_STATUS_OK); /* x w */
    CHECK_STR(tp_tensor_grad_fn_name(y), "MulBackward0");
    CHECK_EQ(tp_tensor_version(y), 1);
    CHECK_EQ(tp_ag_unary_(TP_UNARY_OP_EXP, y), TP_STATUS_OK); /* exp(x w) */
    CHECK_STR(tp_tensor_grad_fn_name(y), "ExpBackward0");
    CHECK_EQ(tp_tensor_version(y), 2);
    tp_tensor *s = tp_ag_sum(y, 0, NULL, false);
    CHECK_EQ(tp_backward(s, NULL, false), TP_STATUS_OK);
    /* d/dx exp(x w) = w exp(x w); d/dw = x exp(x w) */
    CHECK(fabs(at(tp_tensor_grad(x), 1) - 4 * exp(8.0)) < 1e-9 * exp(8.0));
    CHECK(fabs(at(tp_tensor_grad(w), 0) - 1 * exp(3.0)) < 1e-9 * exp(3.0));
    tp_tensor_release(s);
    /* a view with history, and a comparison, are refused */
    tp_tensor *v = tp_ag_slice(y, 0, 0, 1, 1);
    CHECK_EQ(tp_ag_unary_(TP_UNARY_OP_TANH, v), TP_STATUS_UNSUPPORTED);
    CHECK_STR(tp_last_error(), "in-place TanhBackward0 on a view with autograd history: not recorded here "
                               "(PyTorch's CopySlices is not implemented)");
    CHECK_EQ(tp_ag_binary_(TP_BINARY_OP_LT, y, w), TP_STATUS_UNSUPPORTED);
    /* a shape the in-place op cannot write: refused, y untouched */
    tp_tensor *big = leaf(2, SHAPE(3, 2), 0, TP_DTYPE_FLOAT64);
    CHECK_EQ(tp_ag_binary_(TP_BINARY_OP_MUL, y, big), TP_STATUS_INVALID_ARGUMENT);
    CHECK_EQ(tp_tensor_version(y), 2);
    /* an in-place op on a tensor another node saved trips its check */
    tp_tensor *z = tp_ag_mul(y, y);
    CHECK_EQ(tp_ag_unary_(TP_UNARY_OP_SIGMOID, y), TP_STATUS_OK);
    tp_tensor *s2 = tp_ag_sum(z, 0, NULL, false);
    CHECK_EQ(tp_backward(s2, NULL, false), TP_STATUS_INVALID_ARGUMENT);
    CHECK(strncmp(tp_last_error(), "one of the variables needed for gradient computation has been modified by an "
                                   "inplace operation: [tensorplay.DoubleTensor [2]], which is output 0 of "
                                   "ExpBackward0, is at version 3; expected version 2 instead.", 170) == 0);
    tp_tensor_release(s2);
    tp_tensor_release(z);
    tp_tensor_release(big);
    tp_tensor_release(v);
    tp_tensor_release(y);
    tp_tensor_release(w);
    tp_tensor_release(x);
}

static void test_no_grad_records_nothing_but_versions_bump(void) {
    tp_tensor *x = leaf(1, SHAPE(2), 1, TP_DTYPE_FLOAT32);
    CHECK(tp_grad_is_enabled());
    bool prev = tp_grad_set_enabled(false);
    CHECK(prev);
    CHECK(!tp_grad_is_enabled());
    tp_tensor *y = tp_ag_mul(x, x);
    CHECK(!tp_tensor_requires_grad(y) && tp_tensor_grad_fn_name(y) == NULL);
    tp_tensor *v = tp_ag_slice(x, 0, 0, 1, 1); /* a no_grad view does not require grad */
    CHECK(!tp_tensor_requires_grad(v));
    CHECK_EQ(tp_ag_binary_scalar_(TP_BINARY_OP_SUB, x, 1), TP_STATUS_OK);
    CHECK_EQ(tp_tensor_version(x), 1);
    CHECK_EQ(tp_tensor_version(v), 1); /* shared with the view */
    tp_grad_set_enabled(prev);
    CHECK(tp_grad_is_enabled());
    tp_tensor_release(v);
    tp_tensor_release(y);
    tp_tensor_release(x);
}

static void *other_thread(void *arg) {
    (void)arg;
    return (void *)(intptr_t)tp_grad_is_enabled();
}

#include <pthread.h>
static void test_grad_mode_is_thread_local(void) {
    bool prev = tp_grad_set_enabled(false);
    pthread_t th;
    void *r = NULL;
    pthread_create(&th, NULL, other_thread, NULL);
    pthread_join(th, &r);
    CHECK(r == (void *)1); /* the other thread still records */
    tp_grad_set_enabled(prev);
}

static void test_detach_shares_storage_and_version_counter(void) {
    tp_tensor *x = leaf(1, SHAPE(3), 0, TP_DTYPE_FLOAT32);
    tp_tensor *y = tp_ag_unary(TP_UNARY_OP_EXP, x);
    tp_tensor *d = tp_tensor_detach(y);
    CHECK(tp_tensor_storage(d) == tp_tensor_storage(y));
    CHECK(!tp_tensor_requires_grad(d) && tp_tensor_is_leaf(d));
    CHECK_EQ(tp_fill_(d, 0), TP_STATUS_OK);
    CHECK_EQ(tp_tensor_version(y), 1);
    tp_tensor *s = tp_ag_sum(y, 0, NULL, false);
    CHECK_EQ(tp_backward(s, NULL, false), TP_STATUS_INVALID_ARGUMENT); /* exp's output changed */
    CHECK_CONTAINS(tp_last_error(), "which is output 0 of ExpBackward0, is at version 1");
    tp_tensor_release(s);
    tp_tensor_release(d);
    tp_tensor_release(y);
    tp_tensor_release(x);
}

static void test_views_of_tensors_requiring_grad(void) {
    /* y = x[1:, 1:] of a 3x4 leaf; grad is 1 there and 0 elsewhere */
    tp_tensor *x = leaf(2, SHAPE(3, 4), 0, TP_DTYPE_FLOAT32);
    tp_tensor *a = tp_ag_slice(x, 0, 1, 3, 1);
    tp_tensor *v = tp_ag_slice(a, 1, 1, 4, 1);
    CHECK(tp_tensor_is_view(v) && tp_tensor_base(v) == x);
    CHECK_STR(tp_tensor_grad_fn_name(v), "SliceBackward0");
    CHECK(tp_tensor_requires_grad(v));
    tp_tensor *s = tp_ag_sum(v, 0, NULL, false);
    CHECK_EQ(tp_backward(s, NULL, false), TP_STATUS_OK);
    double expect[12] = {0, 0, 0, 0, 0, 1, 1, 1, 0, 1, 1, 1};
    for (int i = 0; i < 12; i++) CHECK(at(tp_tensor_grad(x), i) == expect[i]);
    tp_tensor_release(s);
    tp_tensor_release(v);
    tp_tensor_release(a);
    tp_tensor_release(x);
}

static void test_bad_backward_arguments(void) {
    tp_tensor *x = leaf(1, SHAPE(3), 0, TP_DTYPE_FLOAT32);
    tp_tensor *y = tp_ag_binary_scalar(TP_BINARY_OP_MUL, x, 2);
    CHECK_EQ(tp_backward(y, NULL, false), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "grad can be implicitly created only for scalar outputs");
    tp_tensor *g2 = tp_ones(1, SHAPE(2), TP_DTYPE_FLOAT32);
    CHECK_EQ(tp_backward(y, g2, false), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(),
              "Mismatch in shape: grad_output[0] has a shape of tensorplay.Size([2]) and "
              "output[0] has a shape of tensorplay.Size([3]).");
    CHECK_EQ(tp_backward(NULL, NULL, false), TP_STATUS_INVALID_ARGUMENT);
    /* a correct gradient argument, in another dtype, is converted */
    tp_tensor *g3 = tp_full(1, SHAPE(3), 0.5, TP_DTYPE_FLOAT64);
    CHECK_EQ(tp_backward(y, g3, false), TP_STATUS_OK);
    CHECK(at(tp_tensor_grad(x), 2) == 1.0);
    CHECK_EQ(tp_tensor_dtype(tp_tensor_grad(x)), TP_DTYPE_FLOAT32);
    CHECK(x != NULL && tp_tensor_grad(x) != NULL);
    tp_tensor_release(g3);
    tp_tensor_release(g2);
    tp_tensor_release(y);
    /* backward on a leaf accumulates into itself */
    tp_tensor *l = leaf(0, NULL, 5, TP_DTYPE_FLOAT32);
    CHECK_EQ(tp_backward(l, NULL, false), TP_STATUS_OK);
    CHECK(at(tp_tensor_grad(l), 0) == 1.0);
    tp_tensor_release(l);
    tp_tensor_release(x);
}

static void test_grad_output_is_copied_not_adopted(void) {
    tp_tensor *x = leaf(1, SHAPE(2), 0, TP_DTYPE_FLOAT32);
    tp_tensor *y = tp_ag_binary_scalar(TP_BINARY_OP_ADD, x, 1);
    tp_tensor *g = tp_ones(1, SHAPE(2), TP_DTYPE_FLOAT32);
    CHECK_EQ(tp_backward(y, g, false), TP_STATUS_OK);
    CHECK(tp_tensor_storage(tp_tensor_grad(x)) != tp_tensor_storage(g));
    CHECK_EQ(tp_backward(y, g, false), TP_STATUS_OK); /* adds into x.grad, not into g */
    CHECK(at(g, 0) == 1.0 && at(tp_tensor_grad(x), 0) == 2.0);
    tp_tensor_release(g);
    tp_tensor_release(y);
    tp_tensor_release(x);
}

static void test_graph_holds_leaves_until_freed(void) {
    tp_tensor *w = leaf(1, SHAPE(2), 0, TP_DTYPE_FLOAT32);
    tp_tensor *y = tp_ag_mul(w, w);
    CHECK_EQ(tp_tensor_use_count(w), 3); /* ours + one per edge of the node */
    tp_tensor_release(y);
    CHECK_EQ(tp_tensor_use_count(w), 1);
    tp_tensor_release(w);
}

// ----------------------------------------------------------------------------
// the observer's graph events (observer.h version 3)

static struct {
    int created, ran, freed, saved, released, grads_set, other_kinds_v2;
    uint64_t exp_id, sum_id, sum_next, exp_leaf, saved_tensor, saved_storage;
    uint64_t grad_tensor, grad_id, grad_storage; /* the last GRAD_SET */
    uint32_t ran_flags;
} seen;

static void on_graph_event(void *user, const tp_obs_event *ev) {
    bool v2 = user != NULL;
    switch (ev->kind) {
    case TP_OBS_NODE_CREATED:
        seen.created++;
        if (strcmp(ev->u.node.name, "ExpBackward0") == 0) {
            seen.exp_id = ev->u.node.node_id;
            seen.exp_leaf = ev->u.node.n_leaves == 1 && ev->u.node.n_next == 0 ? ev->u.node.leaf_ids[0] : 0;
        }
        if (strcmp(ev->u.node.name, "SumBackward1") == 0 || strcmp(ev->u.node.name, "SumBackward0") == 0) {
            seen.sum_id = ev->u.node.node_id;
            seen.sum_next = ev->u.node.n_next == 1 ? ev->u.node.next_ids[0] : 0;
        }
        break;
    case TP_OBS_NODE_RAN: seen.ran++; seen.ran_flags |= ev->u.node.flags; break;
    case TP_OBS_NODE_FREED: seen.freed++; break;
    case TP_OBS_TENSOR_SAVED:
        seen.saved++;
        seen.saved_tensor = ev->u.saved.tensor_id;
        seen.saved_storage = ev->u.saved.storage_id;
        break;
    case TP_OBS_SAVED_RELEASED: seen.released++; break;
    case TP_OBS_GRAD_SET:
        seen.grads_set++;
        seen.grad_tensor = ev->u.grad.tensor_id;
        seen.grad_id = ev->u.grad.grad_id;
        seen.grad_storage = ev->u.grad.grad_storage_id;
        break;
    default: break;
    }
    if (v2 && ev->kind > TP_OBS_TENSOR_REFCOUNT) seen.other_kinds_v2++;
}

static void exp_sum_backward(bool retain) {
    tp_tensor *x = leaf(1, SHAPE(4), 0, TP_DTYPE_FLOAT32);
    tp_tensor *y = tp_ag_unary(TP_UNARY_OP_EXP, x); /* saves its output */
    if (seen.created) CHECK_EQ(seen.exp_leaf, tp_tensor_id(x)); /* exp's one input: the leaf x */
    tp_tensor *s = tp_ag_sum(y, 0, NULL, false);
    CHECK_EQ(tp_backward(s, NULL, retain), TP_STATUS_OK);
    if (seen.saved) CHECK_EQ(seen.saved_storage, tp_storage_id(tp_tensor_storage(y)));
    if (seen.grads_set) { /* x's first gradient: AccumulateGrad set it */
        tp_tensor *g = tp_tensor_grad(x);
        CHECK(g != NULL);
        CHECK_EQ(seen.grad_tensor, tp_tensor_id(x));
        CHECK_EQ(seen.grad_id, g ? tp_tensor_id(g) : 0);
        CHECK_EQ(seen.grad_storage, g ? tp_storage_id(tp_tensor_storage(g)) : 0);
    }
    tp_tensor_release(s);
    tp_tensor_release(y);
    tp_tensor_release(x);
}

static void test_observer_sees_nodes_made_run_and_freed_with_their_saved_tensors(void) {
    static const tp_observer v3 = {.abi_version = 3, .struct_size = sizeof v3, .on_event = on_graph_event};
    memset(&seen, 0, sizeof seen);
    CHECK_EQ(tp_observer_set(&v3), 0);
    exp_sum_backward(false);
    CHECK_EQ(seen.created, 2);
    CHECK(seen.exp_id != 0 && seen.sum_id != 0 && seen.sum_next == seen.exp_id); /* sum's edge: exp's node */
    CHECK_EQ(seen.saved, 1);    /* exp saves its output */
    CHECK_EQ(seen.ran, 2);
    CHECK_EQ(seen.ran_flags, 0u);
    CHECK_EQ(seen.released, 1); /* by the backward, not again when freed */
    CHECK_EQ(seen.freed, 2);
    CHECK_EQ(seen.grads_set, 1); /* x's grad: set once, freed with x (no event) */
    memset(&seen, 0, sizeof seen);
    exp_sum_backward(true);
    CHECK_EQ(seen.ran_flags, TP_OBS_NODE_RETAINED);
    CHECK_EQ(seen.released, 1); /* kept by retain_graph, released when the node went */
    CHECK_EQ(seen.freed, 2);
    /* A version-2 observer still attaches and sees none of them. */
    static int v2_user;
    static const tp_observer v2 = {.abi_version = 2, .struct_size = sizeof v2, .user = &v2_user,
                                   .on_event = on_graph_event};
    memset(&seen, 0, sizeof seen);
    CHECK_EQ(tp_observer_set(&v2), 0);
    exp_sum_backward(false);
    CHECK_EQ(seen.other_kinds_v2, 0);
    CHECK_EQ(seen.created + seen.saved + seen.ran + seen.freed + seen.grads_set, 0);
    CHECK_EQ(tp_observer_set(NULL), 0);
}

/* tp_tensor_set_grad tells a version-3 observer who holds which grad (its
 * handle on the grad is the runtime's own): set, replaced, cleared. */
static void test_observer_sees_each_grad_set_and_cleared(void) {
    static const tp_observer v3 = {.abi_version = 3, .struct_size = sizeof v3, .on_event = on_graph_event};
    memset(&seen, 0, sizeof seen);
    CHECK_EQ(tp_observer_set(&v3), 0);
    tp_tensor *w = leaf(1, SHAPE(3), 0, TP_DTYPE_FLOAT32);
    tp_tensor *g = tp_zeros(1, SHAPE(3), TP_DTYPE_FLOAT32);
    CHECK_EQ(tp_tensor_set_grad(w, g), TP_STATUS_OK);
    CHECK_EQ(seen.grads_set, 1);
    CHECK_EQ(seen.grad_tensor, tp_tensor_id(w));
    CHECK_EQ(seen.grad_id, tp_tensor_id(g));
    CHECK_EQ(seen.grad_storage, tp_storage_id(tp_tensor_storage(g)));
    CHECK_EQ(tp_tensor_set_grad(w, NULL), TP_STATUS_OK); /* zero_grad(set_to_none) */
    CHECK_EQ(seen.grads_set, 2);
    CHECK_EQ(seen.grad_id, 0u);
    CHECK_EQ(seen.grad_storage, 0u);
    CHECK_EQ(tp_tensor_set_grad(w, NULL), TP_STATUS_OK); /* nothing to clear: no event */
    CHECK_EQ(seen.grads_set, 2);
    CHECK(tp_tensor_set_grad(w, w) != TP_STATUS_OK); /* refused: no event */
    CHECK_EQ(seen.grads_set, 2);
    tp_tensor_release(g);
    tp_tensor_release(w);
    CHECK_EQ(tp_observer_set(NULL), 0);
}

int main(void) {
    RUN_TEST(test_leaf_and_grad_fn);
    RUN_TEST(test_inputs_without_requires_grad_record_nothing);
    RUN_TEST(test_comparisons_compute_without_recording);
    RUN_TEST(test_gradients_accumulate_across_backward_calls_and_paths);
    RUN_TEST(test_diamond_runs_each_node_once_with_summed_gradient);
    RUN_TEST(test_long_chain_does_not_recurse);
    RUN_TEST(test_saved_tensors_are_freed_by_backward);
    RUN_TEST(test_retain_graph_keeps_saved_tensors);
    RUN_TEST(test_graph_without_saved_tensors_can_run_twice);
    RUN_TEST(test_saved_tensor_modified_in_place_fails_with_pytorch_text);
    RUN_TEST(test_in_place_on_leaf_requiring_grad_is_refused);
    RUN_TEST(test_in_place_on_non_leaf_is_recorded);
    RUN_TEST(test_in_place_needing_the_old_value_is_recorded_on_a_copy);
    RUN_TEST(test_no_grad_records_nothing_but_versions_bump);
    RUN_TEST(test_grad_mode_is_thread_local);
    RUN_TEST(test_detach_shares_storage_and_version_counter);
    RUN_TEST(test_views_of_tensors_requiring_grad);
    RUN_TEST(test_bad_backward_arguments);
    RUN_TEST(test_grad_output_is_copied_not_adopted);
    RUN_TEST(test_graph_holds_leaves_until_freed);
    RUN_TEST(test_observer_sees_each_grad_set_and_cleared);
    RUN_TEST(test_observer_sees_nodes_made_run_and_freed_with_their_saved_tensors);
    return CHECK_DONE();
}
