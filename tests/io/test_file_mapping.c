/*
 * tests/io/test_file_mapping.c - refcounted file mappings and the storages
 * that point into them.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <unistd.h>

#include "../check.h"
#include "tensorplay/tensorplay.h"

static char path[64];

static void test_storage_points_into_the_mapping_without_copying(void) {
    tp_file_mapping *m;
    CHECK(tp_file_mapping_open(path, &m) == TP_STATUS_OK);
    if (!m) return;
    CHECK_EQ_U64(tp_file_mapping_size(m), 26);
    tp_storage *s = tp_file_mapping_storage(m, 3, 5);
    CHECK(s != NULL);
    CHECK(tp_storage_data(s) == (char *)tp_file_mapping_data(m) + 3);
    CHECK_EQ_U64(tp_storage_nbytes(s), 5);
    CHECK(memcmp(tp_storage_data(s), "defgh", 5) == 0);
    CHECK(!tp_storage_resizable(s));
    CHECK(tp_storage_resize(s, 10) != TP_STATUS_OK);
    tp_storage_release(s);
    tp_file_mapping_release(m);
}

static void test_mapping_lives_until_its_last_holder_lets_go(void) {
    uint64_t before = tp_file_mapping_live_count();
    tp_file_mapping *m;
    CHECK(tp_file_mapping_open(path, &m) == TP_STATUS_OK);
    CHECK_EQ_U64(tp_file_mapping_live_count(), before + 1);
    tp_storage *a = tp_file_mapping_storage(m, 0, 10), *b = tp_file_mapping_storage(m, 10, 16);
    tp_file_mapping_release(m);
    CHECK_EQ_U64(tp_file_mapping_live_count(), before + 1);
    tp_storage_release(a);
    CHECK_EQ_U64(tp_file_mapping_live_count(), before + 1);
    CHECK(memcmp(tp_storage_data(b), "klmnopqrstuvwxyz", 16) == 0);
    tp_storage_release(b);
    CHECK_EQ_U64(tp_file_mapping_live_count(), before);
}

static void test_ranges_outside_the_file_are_refused(void) {
    tp_file_mapping *m;
    CHECK(tp_file_mapping_open(path, &m) == TP_STATUS_OK);
    CHECK(tp_file_mapping_storage(m, 20, 7) == NULL);
    CHECK(tp_last_status() == TP_STATUS_OUT_OF_BOUNDS);
    CHECK_STR_EQ(tp_last_error(), "file mapping: bytes [20, 20 + 7) are outside the 26-byte file");
    CHECK(tp_file_mapping_storage(m, 27, 0) == NULL);
    CHECK(tp_file_mapping_storage(m, SIZE_MAX, 2) == NULL);
    tp_storage *end = tp_file_mapping_storage(m, 26, 0); /* empty range at the end is fine */
    CHECK(end != NULL);
    tp_storage_release(end);
    tp_file_mapping_release(m);
}

static void test_empty_and_missing_files(void) {
    char empty[80];
    snprintf(empty, sizeof empty, "%s.empty", path);
    FILE *f = fopen(empty, "wb");
    if (f) fclose(f);
    tp_file_mapping *m;
    CHECK(tp_file_mapping_open(empty, &m) == TP_STATUS_OK);
    CHECK(m && tp_file_mapping_size(m) == 0 && tp_file_mapping_data(m) == NULL);
    tp_file_mapping_release(m);
    unlink(empty);
    CHECK(tp_file_mapping_open(empty, &m) == TP_STATUS_IO);
    CHECK(m == NULL);
    CHECK_CONTAINS(tp_last_error(), "No such file or directory");
    CHECK(tp_file_mapping_open(NULL, &m) == TP_STATUS_INVALID_ARGUMENT);
}

int main(void) {
    snprintf(path, sizeof path, "/tmp/tp_mapping_XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0 || write(fd, "abcdefghijklmnopqrstuvwxyz", 26) != 26) return 1;
    close(fd);
    RUN(test_storage_points_into_the_mapping_without_copying);
    RUN(test_mapping_lives_until_its_last_holder_lets_go);
    RUN(test_ranges_outside_the_file_are_refused);
    RUN(test_empty_and_missing_files);
    unlink(path);
    return CHECK_EXIT_STATUS();
}
