/*
 * tests/io/test_safetensors_corpus.c - replays every file in a corpus
 * directory through the safetensors loader, from disk (mmap) and from
 * memory, so CI exercises the fuzzer's findings without clang.
 *
 * valid_* must load; bad_* must be refused with a "safetensors: " message;
 * anything else (crash-*, found by the fuzzer) must only be handled: OK or
 * INVALID_ARGUMENT, never a crash, and both paths must agree.  A loaded
 * file's tensors are read byte by byte so ASan checks every range.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdlib.h>

#include "../check.h"
#include "tensorplay/tensorplay.h"

static int name_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static unsigned char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    if (!b || fread(b, 1, (size_t)n, f) != (size_t)n) abort();
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* Sums every byte of every tensor; returns the total byte count. */
static uint64_t touch_all(const tp_safetensors *st, unsigned *sum) {
    uint64_t total = 0;
    for (size_t i = 0; i < st->count; i++) {
        const unsigned char *p = tp_tensor_data(st->tensors[i]);
        size_t n = tp_tensor_nbytes(st->tensors[i]);
        for (size_t k = 0; k < n; k++) *sum += p[k];
        total += n;
    }
    return total;
}

static void replay(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int before = check_failures;
    tp_safetensors *a = NULL, *b = NULL;
    tp_status sa = tp_safetensors_load(path, &a);
    char msg_a[512];
    snprintf(msg_a, sizeof msg_a, "%s", sa == TP_STATUS_OK ? "" : tp_last_error());
    size_t len = 0;
    unsigned char *bytes = read_all(path, &len);
    CHECK(bytes != NULL);
    tp_status sb = tp_safetensors_load_bytes(bytes, len, &b);
    CHECK(sa == sb);
    if (sa != TP_STATUS_OK) CHECK_STR_EQ(tp_last_error(), msg_a);
    CHECK(sa == TP_STATUS_OK || sa == TP_STATUS_INVALID_ARGUMENT);
    if (sa != TP_STATUS_OK) CHECK(strncmp(msg_a, "safetensors: ", 13) == 0);
    if (strncmp(name, "valid_", 6) == 0) CHECK(sa == TP_STATUS_OK);
    if (strncmp(name, "bad_", 4) == 0) CHECK(sa == TP_STATUS_INVALID_ARGUMENT);
    if (a && b) {
        unsigned sum_a = 0, sum_b = 0;
        uint64_t na = touch_all(a, &sum_a), nb = touch_all(b, &sum_b);
        CHECK(na == nb && sum_a == sum_b && a->count == b->count);
        uint64_t hlen = 0;
        for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | bytes[i];
        CHECK_EQ_U64(na, len - 8 - hlen); /* the tensors cover the buffer exactly */
    }
    tp_safetensors_free(a);
    tp_safetensors_free(b);
    free(bytes);
    fprintf(stderr, "%s %s%s%s\n", check_failures == before ? "ok  " : "FAIL", name,
            sa == TP_STATUS_OK ? "" : ": ", msg_a);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    DIR *d = opendir(argv[1]);
    if (!d) {
        fprintf(stderr, "cannot open %s\n", argv[1]);
        return 2;
    }
    char *names[4096];
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < 4096;)
        if (e->d_name[0] != '.') names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, n, sizeof *names, name_cmp);
    size_t valid = 0, bad = 0;
    for (size_t i = 0; i < n; i++) {
        valid += strncmp(names[i], "valid_", 6) == 0;
        bad += strncmp(names[i], "bad_", 4) == 0;
        replay(argv[1], names[i]);
        free(names[i]);
    }
    /* An empty or misplaced corpus must not pass silently. */
    CHECK(valid >= 5 && bad >= 10);
    fprintf(stderr, "%zu files replayed\n", n);
    return CHECK_EXIT_STATUS();
}
