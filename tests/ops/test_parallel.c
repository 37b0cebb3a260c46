/*
 * tests/ops/test_parallel.c - the kernel thread pool: thread-count knob,
 * idle workers that sleep instead of spinning, and ops called from several
 * user threads at once (one gets the pool, the others run inline) giving
 * the same answers.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <pthread.h>
#include <time.h>
#include "check.h"

static int thread_count(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

/* Must run first: the pool starts lazily on the first big op. */
static void test_tiny_ops_run_inline_big_ops_start_workers(void) {
    tp_set_num_threads(3);
    int before = thread_count();
    tp_tensor *x = tp_ones(1, (int64_t[]){1000}, TP_DTYPE_FLOAT32);
    tp_tensor *y = tp_add(x, x), *s = tp_sum(y, 0, NULL, false);
    CHECK_EQ(thread_count(), before); /* small work never wakes (or creates) the pool */
    tp_tensor *big = tp_ones(1, (int64_t[]){1 << 20}, TP_DTYPE_FLOAT32);
    tp_tensor *z = tp_add(big, big);
    CHECK_EQ(thread_count(), before + 2); /* caller + 2 workers = 3 threads */
    CHECK_EQ(at(z, 777), 2);
    tp_tensor *t[] = {x, y, s, big, z};
    for (int k = 0; k < 5; k++) tp_tensor_release(t[k]);
}

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void test_num_threads_knob(void) {
    int saved = tp_get_num_threads();
    CHECK(saved >= 1);
    CHECK_EQ(tp_set_num_threads(3), TP_STATUS_OK);
    CHECK_EQ(tp_get_num_threads(), 3);
    CHECK_ERROR(tp_set_num_threads(-2) != TP_STATUS_OK, "set_num_threads expects a number of threads");
    CHECK_EQ(tp_get_num_threads(), 3);
    tp_set_num_threads(saved);
}

static void test_idle_workers_sleep(void) {
    tp_set_num_threads(4);
    /* tp_set_num_threads also sizes OpenBLAS, whose own threads busy-wait
     * for ~0.1 s after waking (its THREAD_TIMEOUT); let them settle so only
     * our pool is measured. */
    struct timespec settle = {0, 400 * 1000 * 1000};
    nanosleep(&settle, NULL);
    tp_tensor *x = tp_ones(1, (int64_t[]){1 << 20}, TP_DTYPE_FLOAT32);
    tp_tensor *y = tp_add(x, x); /* wakes the pool */
    CHECK_EQ(at(y, 12345), 2);
    double before = cpu_seconds();
    struct timespec nap = {0, 200 * 1000 * 1000};
    nanosleep(&nap, NULL);
    double used = cpu_seconds() - before;
    /* three spinning workers would burn ~0.6 s of CPU here */
    if (used >= 0.05) fprintf(stderr, "  idle CPU %.3f s\n", used);
    CHECK(used < 0.05);
    tp_tensor_release(x);
    tp_tensor_release(y);
}

typedef struct job {
    tp_tensor *x;
    double sum;
} job;

static void *worker(void *arg) {
    job *j = arg;
    for (int i = 0; i < 20; i++) {
        tp_tensor *y = tp_binary_scalar(TP_BINARY_OP_MUL, j->x, 2);
        tp_tensor *s = tp_sum(y, 0, NULL, false);
        tp_tensor_item(s, &j->sum);
        tp_tensor_release(s);
        tp_tensor_release(y);
    }
    return NULL;
}

static void test_concurrent_callers_get_correct_results(void) {
    tp_set_num_threads(4);
    tp_tensor *x = tp_arange(0, 200000, 1, TP_DTYPE_FLOAT64);
    pthread_t th[4];
    job jobs[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (job){x, 0};
        pthread_create(&th[i], NULL, worker, &jobs[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) CHECK_NEAR(jobs[i].sum, 199999.0 * 200000.0, 0);
    tp_tensor_release(x);
}

int main(void) {
    RUN_TEST(test_tiny_ops_run_inline_big_ops_start_workers);
    RUN_TEST(test_num_threads_knob);
    RUN_TEST(test_idle_workers_sleep);
    RUN_TEST(test_concurrent_callers_get_correct_results);
    return CHECK_DONE();
}
