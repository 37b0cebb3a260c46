/*
 * tests/ops/test_blas.c - OpenBLAS is opened on the first float matmul, not
 * when libtensorplay loads (its thread pool spins at load: src/ops/blas.c),
 * and the thread count set with tp_set_num_threads reaches it, before and
 * after it is opened.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <string.h>
#include "check.h"

static int is_openblas(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    (void)arg;
    return info->dlpi_name && strstr(info->dlpi_name, "libopenblas") != NULL;
}

static bool openblas_loaded(void) { return dl_iterate_phdr(is_openblas, NULL) != 0; }

/* OpenBLAS's own count, from the copy libtensorplay opened (never global). */
static int openblas_threads(void) {
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD);
    if (!h) return -1;
    int (*get)(void) = (int (*)(void))dlsym(h, "openblas_get_num_threads");
    int n = get ? get() : -2;
    dlclose(h);
    return n;
}

static void test_opened_on_the_first_float_matmul(void) {
    CHECK(!openblas_loaded());
    CHECK_EQ(tp_set_num_threads(2), TP_STATUS_OK); /* remembered until it is opened */
    tp_tensor *x = tp_ones(2, (int64_t[]){2, 3}, TP_DTYPE_FLOAT32);
    tp_tensor *y = tp_ones(2, (int64_t[]){3, 2}, TP_DTYPE_FLOAT32);
    tp_tensor *xi = tp_ones(2, (int64_t[]){2, 3}, TP_DTYPE_INT64);
    tp_tensor *yi = tp_ones(2, (int64_t[]){3, 2}, TP_DTYPE_INT64);
    tp_tensor *s = tp_add(x, x), *pi = tp_matmul(xi, yi); /* integers: no BLAS */
    CHECK(s != NULL && pi != NULL);
    CHECK(!openblas_loaded());
    tp_tensor *p = tp_matmul(x, y);
    CHECK(p != NULL);
    CHECK(openblas_loaded());
    double v = 0;
    if (p) CHECK_EQ(tp_tensor_get(p, (int64_t[]){1, 1}, &v), TP_STATUS_OK);
    CHECK_EQ(v, 3.0);
    CHECK_EQ(openblas_threads(), 2);
    CHECK_EQ(tp_set_num_threads(1), TP_STATUS_OK);
    CHECK_EQ(openblas_threads(), 1);
    tp_tensor *tensors[] = {x, y, xi, yi, s, pi, p};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++) tp_tensor_release(tensors[i]);
}

int main(void) {
    RUN_TEST(test_opened_on_the_first_float_matmul);
    return CHECK_DONE();
}
