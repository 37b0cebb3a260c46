/*
 * tests/io/test_safetensors.c - safetensors save/load: round trips of every
 * dtype and of strided inputs, zero-copy loading, the mapping's lifetime,
 * and the exact message for each kind of corrupt file.
 *
 * Tensors are built from storages directly (core only) so this test does
 * not depend on the ops library.  Files live in a fresh mkdtemp directory.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../check.h"
#include "tensorplay/tensorplay.h"

static char dir[64];

// ----------------------------------------------------------------------------
// helpers

static const char *path_of(const char *name) {
    static char buf[4][128];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

static void write_bytes(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) abort();
}

/* An 8-byte length, the header text as given, then dlen data bytes. */
static size_t make_file(const char *path, const char *header, const void *data, size_t dlen) {
    size_t hlen = strlen(header);
    unsigned char *b = malloc(8 + hlen + dlen + 1);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    memcpy(b + 8, header, hlen);
    if (dlen) memcpy(b + 8 + hlen, data, dlen);
    write_bytes(path, b, 8 + hlen + dlen);
    free(b);
    return 8 + hlen + dlen;
}

static unsigned char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    if (fread(b, 1, (size_t)n, f) != (size_t)n) abort();
    fclose(f);
    *len = (size_t)n;
    return b;
}

static tp_tensor *new_tensor(tp_dtype dtype, int ndim, const int64_t *sizes) {
    int64_t numel = 1;
    for (int i = 0; i < ndim; i++) numel *= sizes[i];
    tp_storage *s = tp_storage_new((size_t)numel * tp_dtype_itemsize(dtype), NULL, false);
    if (!s) abort();
    tp_tensor *t = tp_tensor_new_from_storage(s, 0, ndim, sizes, NULL, dtype);
    tp_storage_release(s);
    if (!t) abort();
    unsigned char *p = tp_tensor_data(t);
    for (size_t i = 0; i < tp_tensor_nbytes(t); i++)
        p[i] = dtype == TP_DTYPE_BOOL ? (unsigned char)(i % 2) : (unsigned char)(i * 7 + dtype);
    return t;
}

/* The address range of the mapping of `path` in /proc/self/maps, or 0s. */
static void mapped_range(const char *path, uintptr_t *lo, uintptr_t *hi) {
    *lo = *hi = 0;
    char real[4096];
    if (!realpath(path, real)) return;
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4608];
    while (f && fgets(line, sizeof line, f)) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        size_t n = strlen(line), m = strlen(real);
        if (n < m || strcmp(line + n - m, real) != 0) continue;
        unsigned long a, b;
        if (sscanf(line, "%lx-%lx", &a, &b) == 2) {
            if (!*lo || a < *lo) *lo = a;
            if (b > *hi) *hi = b;
        }
    }
    if (f) fclose(f);
}

static bool in_mapping(const char *path, const void *p) {
    uintptr_t lo, hi;
    mapped_range(path, &lo, &hi);
    return (uintptr_t)p >= lo && (uintptr_t)p < hi;
}

static bool is_mapped(const char *path) {
    uintptr_t lo, hi;
    mapped_range(path, &lo, &hi);
    return hi != 0;
}

static size_t files_in_dir(void) {
    DIR *d = opendir(dir);
    size_t n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.') n++;
    if (d) closedir(d);
    return n;
}

// ----------------------------------------------------------------------------
// round trips

static void test_every_dtype_round_trips_with_metadata(void) {
    const char *names[TP_DTYPE_COUNT] = {"f32", "f64", "f16", "bf16", "i8",
                                         "i16", "i32", "i64", "u8",  "bool"};
    const char *st_names[TP_DTYPE_COUNT] = {"F32", "F64", "F16", "BF16", "I8",
                                            "I16", "I32", "I64", "U8",  "BOOL"};
    tp_tensor *ts[TP_DTYPE_COUNT];
    int64_t sz[2] = {3, 5};
    for (int d = 0; d < TP_DTYPE_COUNT; d++) ts[d] = new_tensor((tp_dtype)d, 2, sz);
    const char *meta[] = {"format", "pt", "note", "quote \" and \\ and \n", NULL};
    const char *path = path_of("all.safetensors");
    CHECK(tp_safetensors_save(path, TP_DTYPE_COUNT, names, ts, meta) == TP_STATUS_OK);

    size_t len = 0;
    unsigned char *raw = read_all(path, &len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | raw[i];
    CHECK_EQ_U64(hlen % 8, 0);
    for (int d = 0; d < TP_DTYPE_COUNT; d++) {
        char needle[64];
        snprintf(needle, sizeof needle, "\"dtype\":\"%s\"", st_names[d]);
        CHECK(memmem(raw + 8, hlen, needle, strlen(needle)) != NULL);
    }
    free(raw);

    tp_safetensors *st;
    CHECK(tp_safetensors_load(path, &st) == TP_STATUS_OK);
    if (!st) return;
    CHECK_EQ_U64(st->count, TP_DTYPE_COUNT);
    for (int d = 0; d < TP_DTYPE_COUNT; d++) {
        tp_tensor *t = tp_safetensors_get(st, names[d]);
        CHECK(t != NULL);
        if (!t) continue;
        CHECK(tp_tensor_dtype(t) == (tp_dtype)d);
        CHECK(tp_tensor_dim(t) == 2 && tp_tensor_size(t, 0) == 3 && tp_tensor_size(t, 1) == 5);
        CHECK(tp_tensor_is_contiguous(t));
        CHECK(memcmp(tp_tensor_data(t), tp_tensor_data(ts[d]), tp_tensor_nbytes(t)) == 0);
    }
    /* Data order: widest itemsize first, then by name. */
    const char *order[] = {"f64", "i64", "f32", "i32", "bf16", "f16", "i16", "bool", "i8", "u8"};
    for (int i = 0; i < TP_DTYPE_COUNT; i++) CHECK_STR_EQ(st->names[i], order[i]);
    CHECK_EQ_U64(st->metadata_count, 2);
    CHECK_STR_EQ(tp_safetensors_metadata_get(st, "format"), "pt");
    CHECK_STR_EQ(tp_safetensors_metadata_get(st, "note"), "quote \" and \\ and \n");
    CHECK(tp_safetensors_metadata_get(st, "missing") == NULL);
    CHECK(tp_safetensors_get(st, "missing") == NULL);
    tp_safetensors_free(st);
    for (int d = 0; d < TP_DTYPE_COUNT; d++) tp_tensor_release(ts[d]);
}

static float f32_at(tp_tensor *t, int64_t i, int64_t j) {
    const float *p = tp_tensor_data(t);
    return p[i * tp_tensor_stride(t, 0) + j * tp_tensor_stride(t, 1)];
}

static void test_strided_inputs_are_written_contiguous(void) {
    int64_t sz[2] = {4, 6};
    tp_tensor *x = new_tensor(TP_DTYPE_FLOAT32, 2, sz);
    float *px = tp_tensor_data(x);
    for (int i = 0; i < 24; i++) px[i] = (float)i;
    tp_tensor *xt = tp_tensor_transpose(x, 0, 1);        /* (6, 4), strides (1, 6) */
    tp_tensor *sl = tp_tensor_slice(x, 1, 1, 6, 2);      /* (4, 3), strides (6, 2), offset 1 */
    int64_t esz[2] = {3, 6};
    tp_tensor *row = tp_tensor_narrow(x, 0, 2, 1);       /* (1, 6) */
    tp_tensor *ex = tp_tensor_expand(row, 2, esz);       /* (3, 6), stride 0 on dim 0 */
    CHECK(xt && sl && row && ex);
    CHECK(!tp_tensor_is_contiguous(xt) && !tp_tensor_is_contiguous(sl));
    const char *names[] = {"xt", "sl", "ex"};
    tp_tensor *ts[] = {xt, sl, ex};
    const char *path = path_of("strided.safetensors");
    CHECK(tp_safetensors_save(path, 3, names, ts, NULL) == TP_STATUS_OK);
    tp_safetensors *st;
    CHECK(tp_safetensors_load(path, &st) == TP_STATUS_OK);
    if (st) {
        for (int k = 0; k < 3; k++) {
            tp_tensor *a = ts[k], *b = tp_safetensors_get(st, names[k]);
            CHECK(b && tp_tensor_is_contiguous(b));
            CHECK(b && tp_tensor_size(b, 0) == tp_tensor_size(a, 0) &&
                  tp_tensor_size(b, 1) == tp_tensor_size(a, 1));
            for (int64_t i = 0; b && i < tp_tensor_size(a, 0); i++)
                for (int64_t j = 0; j < tp_tensor_size(a, 1); j++)
                    CHECK(f32_at(a, i, j) == f32_at(b, i, j));
        }
        CHECK(f32_at(tp_safetensors_get(st, "xt"), 5, 3) == 23.0f);
        CHECK(f32_at(tp_safetensors_get(st, "sl"), 1, 2) == 11.0f);
        CHECK(f32_at(tp_safetensors_get(st, "ex"), 2, 4) == 16.0f);
    }
    tp_safetensors_free(st);
    tp_tensor *all[] = {ex, row, sl, xt, x};
    for (int i = 0; i < 5; i++) tp_tensor_release(all[i]);
}

static void test_scalars_and_empty_tensors_round_trip(void) {
    int64_t zero[2] = {0, 3};
    tp_tensor *s = new_tensor(TP_DTYPE_INT64, 0, NULL);
    tp_tensor *e = new_tensor(TP_DTYPE_FLOAT32, 2, zero);
    *(int64_t *)tp_tensor_data(s) = -42;
    const char *names[] = {"scalar", "empty"};
    tp_tensor *ts[] = {s, e};
    const char *path = path_of("small.safetensors");
    CHECK(tp_safetensors_save(path, 2, names, ts, NULL) == TP_STATUS_OK);
    tp_safetensors *st;
    CHECK(tp_safetensors_load(path, &st) == TP_STATUS_OK);
    if (st) {
        tp_tensor *s2 = tp_safetensors_get(st, "scalar"), *e2 = tp_safetensors_get(st, "empty");
        CHECK(s2 && tp_tensor_dim(s2) == 0 && *(int64_t *)tp_tensor_data(s2) == -42);
        CHECK(e2 && tp_tensor_dim(e2) == 2 && tp_tensor_numel(e2) == 0 &&
              tp_tensor_size(e2, 1) == 3);
    }
    tp_safetensors_free(st);
    /* No tensors at all is a valid file too. */
    CHECK(tp_safetensors_save(path, 0, NULL, NULL, NULL) == TP_STATUS_OK);
    CHECK(tp_safetensors_load(path, &st) == TP_STATUS_OK);
    CHECK(st && st->count == 0 && st->metadata_count == 0);
    tp_safetensors_free(st);
    tp_tensor_release(s);
    tp_tensor_release(e);
}

// ----------------------------------------------------------------------------
// zero copy and the mapping's lifetime

static void test_loaded_tensors_point_into_the_mapping(void) {
    int64_t sz[1] = {1000};
    tp_tensor *a = new_tensor(TP_DTYPE_FLOAT32, 1, sz), *b = new_tensor(TP_DTYPE_INT8, 1, sz);
    const char *names[] = {"a", "b"};
    tp_tensor *ts[] = {a, b};
    const char *path = path_of("zc.safetensors");
    CHECK(tp_safetensors_save(path, 2, names, ts, NULL) == TP_STATUS_OK);
    uint64_t before = tp_file_mapping_live_count();
    tp_safetensors *st;
    CHECK(tp_safetensors_load(path, &st) == TP_STATUS_OK);
    if (!st) return;
    CHECK_EQ_U64(tp_file_mapping_live_count(), before + 1);
    tp_tensor *la = tp_safetensors_get(st, "a"), *lb = tp_safetensors_get(st, "b");
    CHECK(in_mapping(path, tp_tensor_data(la)));
    CHECK(in_mapping(path, tp_tensor_data(lb)));
    /* Named "mmap" (what profilers show) but never allocating: not resizable. */
    tp_allocator *ma = tp_storage_allocator(tp_tensor_storage(la));
    CHECK(ma != NULL && strcmp(ma->name, "mmap") == 0);
    CHECK(!tp_storage_resizable(tp_tensor_storage(la)));
    CHECK(tp_storage_resize(tp_tensor_storage(la), 64) != TP_STATUS_OK);
    tp_data_ptr none;
    CHECK(ma && tp_allocator_allocate(ma, 16, &none) == TP_STATUS_UNSUPPORTED && none.ptr == NULL);
    CHECK_CONTAINS(tp_last_error(), "a file mapping cannot allocate");
    tp_safetensors_free(st);
    tp_tensor_release(a);
    tp_tensor_release(b);
}

static void test_the_file_is_unmapped_when_the_last_storage_goes(void) {
    int64_t sz[1] = {64};
    tp_tensor *a = new_tensor(TP_DTYPE_FLOAT64, 1, sz), *b = new_tensor(TP_DTYPE_FLOAT64, 1, sz);
    const char *names[] = {"a", "b"};
    tp_tensor *ts[] = {a, b};
    const char *path = path_of("life.safetensors");
    CHECK(tp_safetensors_save(path, 2, names, ts, NULL) == TP_STATUS_OK);
    uint64_t before = tp_file_mapping_live_count();
    tp_safetensors *st;
    CHECK(tp_safetensors_load(path, &st) == TP_STATUS_OK);
    if (!st) return;
    tp_tensor *ka = tp_tensor_retain(tp_safetensors_get(st, "a"));
    tp_tensor *view = tp_tensor_narrow(tp_safetensors_get(st, "b"), 0, 10, 5);
    tp_safetensors_free(st);
    CHECK(is_mapped(path));
    CHECK_EQ_U64(tp_file_mapping_live_count(), before + 1);
    CHECK(memcmp(tp_tensor_data(ka), tp_tensor_data(a), 64 * 8) == 0);
    tp_tensor_release(ka);
    CHECK(is_mapped(path)); /* the view's storage still holds it */
    CHECK(memcmp(tp_tensor_data(view), (double *)tp_tensor_data(b) + 10, 5 * 8) == 0);
    tp_tensor_release(view);
    CHECK(!is_mapped(path));
    CHECK_EQ_U64(tp_file_mapping_live_count(), before);
    tp_tensor_release(a);
    tp_tensor_release(b);
}

static void test_writes_to_a_loaded_tensor_never_reach_the_file(void) {
    int64_t sz[1] = {16};
    tp_tensor *a = new_tensor(TP_DTYPE_INT32, 1, sz);
    const char *names[] = {"a"};
    const char *path = path_of("cow.safetensors");
    CHECK(tp_safetensors_save(path, 1, names, &a, NULL) == TP_STATUS_OK);
    tp_safetensors *st;
    CHECK(tp_safetensors_load(path, &st) == TP_STATUS_OK);
    if (!st) return;
    memset(tp_tensor_data(st->tensors[0]), 0xFF, 64);
    tp_safetensors *again;
    CHECK(tp_safetensors_load(path, &again) == TP_STATUS_OK);
    CHECK(again && memcmp(tp_tensor_data(again->tensors[0]), tp_tensor_data(a), 64) == 0);
    tp_safetensors_free(again);
    tp_safetensors_free(st);
    tp_tensor_release(a);
}

static void test_misaligned_data_is_copied_to_aligned_memory(void) {
    /* Header of 10 bytes: the buffer starts at file offset 18, so an F32 at
     * BEGIN 0 sits 2 bytes off alignment inside the page-aligned mapping. */
    const char *hdr = "{\"f\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                      "\"c\":{\"dtype\":\"I8\",\"shape\":[2],\"data_offsets\":[8,10]}}";
    char padded[256];
    size_t n = strlen(hdr);
    memcpy(padded, hdr, n);
    while ((8 + n) % 8 != 2) padded[n++] = ' ';
    padded[n] = '\0';
    float vals[2] = {1.5f, -2.25f};
    unsigned char data[10];
    memcpy(data, vals, 8);
    data[8] = 7, data[9] = 9;
    const char *path = path_of("misaligned.safetensors");
    make_file(path, padded, data, 10);
    tp_safetensors *st;
    CHECK(tp_safetensors_load(path, &st) == TP_STATUS_OK);
    if (!st) return;
    tp_tensor *f = tp_safetensors_get(st, "f"), *c = tp_safetensors_get(st, "c");
    CHECK((uintptr_t)tp_tensor_data(f) % 4 == 0);
    CHECK(!in_mapping(path, tp_tensor_data(f)));
    CHECK(((float *)tp_tensor_data(f))[1] == -2.25f);
    CHECK(in_mapping(path, tp_tensor_data(c))); /* bytes need no alignment */
    CHECK(((int8_t *)tp_tensor_data(c))[1] == 9);
    tp_safetensors_free(st);
}

/* Counts what loading sends: a loaded tensor takes its new storage's
 * creation reference (mapped or copied alike), no retain/release pair. */
static int created_storages, adopting_tensors, other_tensors, refcount_changes;
static void count_load_events(void *user, const tp_obs_event *ev) {
    (void)user;
    if (ev->kind == TP_OBS_STORAGE_CREATED) created_storages++;
    if (ev->kind == TP_OBS_STORAGE_REFCOUNT) refcount_changes++;
    if (ev->kind == TP_OBS_TENSOR_CREATED) {
        if (ev->u.tensor.flags & TP_OBS_TENSOR_ADOPTED_REF) adopting_tensors++;
        else other_tensors++;
    }
}

static void test_loaded_tensors_adopt_their_new_storages(void) {
    /* As in the misaligned case: "f" is copied, "c" points into the mapping. */
    const char *hdr = "{\"f\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                      "\"c\":{\"dtype\":\"I8\",\"shape\":[2],\"data_offsets\":[8,10]}}";
    char padded[256];
    size_t n = strlen(hdr);
    memcpy(padded, hdr, n);
    while ((8 + n) % 8 != 2) padded[n++] = ' ';
    padded[n] = '\0';
    unsigned char data[10] = {0};
    const char *path = path_of("adopt.safetensors");
    make_file(path, padded, data, 10);
    static const tp_observer obs = {
        .abi_version = TP_OBSERVER_ABI_VERSION,
        .struct_size = sizeof obs,
        .on_event = count_load_events,
    };
    const tp_observer *saved = tp_observer_get();
    CHECK(tp_observer_set(&obs) == 0);
    tp_safetensors *st = NULL;
    CHECK(tp_safetensors_load(path, &st) == TP_STATUS_OK);
    tp_observer_set(saved);
    if (!st) return;
    CHECK_EQ(created_storages, 2);
    CHECK_EQ(adopting_tensors, 2);
    CHECK_EQ(other_tensors, 0);
    CHECK_EQ(refcount_changes, 0);
    tp_tensor *f = tp_safetensors_get(st, "f"), *c = tp_safetensors_get(st, "c");
    CHECK(!in_mapping(path, tp_tensor_data(f)) && in_mapping(path, tp_tensor_data(c)));
    CHECK_EQ(tp_storage_use_count(tp_tensor_storage(f)), 1);
    CHECK_EQ(tp_storage_use_count(tp_tensor_storage(c)), 1);
    tp_safetensors_free(st);
    CHECK(!is_mapped(path)); /* the tensor's release was the storage's last */
}

static void test_loading_from_memory_copies(void) {
    float vals[2] = {3.0f, 4.0f};
    const char *hdr = "{\"v\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}  ";
    size_t hlen = strlen(hdr);
    unsigned char buf[128];
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hlen >> (8 * i));
    memcpy(buf + 8, hdr, hlen);
    memcpy(buf + 8 + hlen, vals, 8);
    tp_safetensors *st;
    CHECK(tp_safetensors_load_bytes(buf, 8 + hlen + 8, &st) == TP_STATUS_OK);
    if (!st) return;
    tp_tensor *v = tp_safetensors_get(st, "v");
    CHECK((unsigned char *)tp_tensor_data(v) < buf || (unsigned char *)tp_tensor_data(v) >= buf + 128);
    memset(buf, 0, sizeof buf);
    CHECK(((float *)tp_tensor_data(v))[1] == 4.0f);
    tp_safetensors_free(st);
}

// ----------------------------------------------------------------------------
// save errors

static void test_save_refuses_bad_arguments_and_leaves_no_file(void) {
    int64_t sz[1] = {2};
    tp_tensor *a = new_tensor(TP_DTYPE_FLOAT32, 1, sz);
    tp_tensor *ts[] = {a, a};
    const char *path = path_of("refused.safetensors");
    size_t files = files_in_dir();
    const char *dup[] = {"x", "x"};
    CHECK(tp_safetensors_save(path, 2, dup, ts, NULL) == TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR_EQ(tp_last_error(), "safetensors: tensor name 'x' appears twice");
    const char *reserved[] = {"__metadata__"};
    CHECK(tp_safetensors_save(path, 1, reserved, ts, NULL) == TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR_EQ(tp_last_error(), "safetensors: '__metadata__' is reserved and cannot name a tensor");
    const char *ok[] = {"x"};
    const char *meta[] = {"lonely", NULL};
    CHECK(tp_safetensors_save(path, 1, ok, ts, meta) == TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR_EQ(tp_last_error(), "safetensors: metadata key 'lonely' has no value");
    tp_tensor *none[] = {NULL};
    CHECK(tp_safetensors_save(path, 1, ok, none, NULL) == TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR_EQ(tp_last_error(), "safetensors: tensor 'x' is NULL");
    const char *bad_utf8[] = {"\xff"};
    CHECK(tp_safetensors_save(path, 1, bad_utf8, ts, NULL) == TP_STATUS_INVALID_ARGUMENT);
    CHECK(tp_safetensors_save(path_of("no/such/dir.safetensors"), 1, ok, ts, NULL) == TP_STATUS_IO);
    CHECK_CONTAINS(tp_last_error(), "cannot create");
    CHECK_EQ_U64(files_in_dir(), files);
    tp_tensor_release(a);
}

// ----------------------------------------------------------------------------
// corrupt files

/* The file fails to load with exactly msg, from disk and from memory alike. */
static void expect_bad(const char *header, const void *data, size_t dlen, const char *msg,
                       int line) {
    const char *path = path_of("bad.safetensors");
    make_file(path, header, data, dlen);
    tp_safetensors *st = (tp_safetensors *)1;
    int before = check_failures;
    CHECK(tp_safetensors_load(path, &st) == TP_STATUS_INVALID_ARGUMENT);
    CHECK(st == NULL);
    CHECK_STR_EQ(tp_last_error(), msg);
    size_t len = 0;
    unsigned char *bytes = read_all(path, &len);
    CHECK(tp_safetensors_load_bytes(bytes, len, &st) == TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR_EQ(tp_last_error(), msg);
    free(bytes);
    if (check_failures != before) fprintf(stderr, "  (expect_bad at line %d)\n", line);
}
#define EXPECT_BAD(h, d, n, m) expect_bad(h, d, n, m, __LINE__)

static const unsigned char zeros[64];

static void test_truncated_or_oversized_headers_are_refused(void) {
    const char *path = path_of("short.safetensors");
    write_bytes(path, "\x05\0\0\0\0", 5);
    tp_safetensors *st;
    CHECK(tp_safetensors_load(path, &st) == TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR_EQ(tp_last_error(),
                 "safetensors: file is 5 bytes, too short for the 8-byte header length");
    unsigned char big[18] = {0x01, 0xE1, 0xF5, 0x05}; /* 100,000,001 */
    write_bytes(path, big, sizeof big);
    CHECK(tp_safetensors_load(path, &st) == TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR_EQ(tp_last_error(),
                 "safetensors: header length 100000001 is over the limit of 100000000 bytes");
    unsigned char past[18] = {50};
    write_bytes(path, past, sizeof past);
    CHECK(tp_safetensors_load(path, &st) == TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR_EQ(tp_last_error(),
                 "safetensors: header length 50 is more than the 10 bytes after the length field");
    unsigned char maxlen[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    CHECK(tp_safetensors_load_bytes(maxlen, 8, &st) == TP_STATUS_INVALID_ARGUMENT);
    CHECK_CONTAINS(tp_last_error(), "is over the limit");
    CHECK(tp_safetensors_load(path_of("does-not-exist"), &st) == TP_STATUS_IO);
    CHECK_CONTAINS(tp_last_error(), "cannot open");
    CHECK(tp_safetensors_load(dir, &st) == TP_STATUS_IO);
    CHECK_CONTAINS(tp_last_error(), "not a regular file");
}

static void test_header_must_be_a_strict_json_object(void) {
    EXPECT_BAD("[]      ", NULL, 0, "safetensors: header does not start with '{'");
    EXPECT_BAD(" {}     ", NULL, 0, "safetensors: header does not start with '{'");
    EXPECT_BAD("{\"a\":1,}", NULL, 0,
               "safetensors: header is not valid JSON: expected a string key at byte 7");
    EXPECT_BAD("{}x", NULL, 0,
               "safetensors: header is not valid JSON: trailing characters after the JSON "
               "value at byte 2");
    EXPECT_BAD("{\"\xc3\x28\":1}", NULL, 0,
               "safetensors: header is not valid JSON: invalid UTF-8 in string at byte 2");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}", NULL, 0,
               "safetensors: header is not valid JSON: duplicate key \"a\" at byte 107");
    EXPECT_BAD("{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}", NULL,
               0, "safetensors: a tensor name contains a NUL character");
    /* Valid: an empty object, padded with spaces. */
    make_file(path_of("empty.safetensors"), "{}      ", NULL, 0);
    tp_safetensors *st;
    CHECK(tp_safetensors_load(path_of("empty.safetensors"), &st) == TP_STATUS_OK);
    CHECK(st && st->count == 0);
    tp_safetensors_free(st);
}

static void test_tensor_entries_are_checked_field_by_field(void) {
    EXPECT_BAD("{\"w\":{\"dtype\":\"C64\",\"shape\":[1],\"data_offsets\":[0,8]}}", zeros, 8,
               "safetensors: tensor 'w': dtype 'C64' is not supported (supported: F32, F64, "
               "F16, BF16, I8, I16, I32, I64, U8, BOOL)");
    EXPECT_BAD("{\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]}}", zeros, 12,
               "safetensors: tensor 'w': data_offsets [0, 12] do not match shape [2, 2] of F32 "
               "(16 bytes)");
    EXPECT_BAD("{\"a\":3}", NULL, 0, "safetensors: tensor 'a': expected an object, got number");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", zeros, 4,
               "safetensors: tensor 'a': missing \"data_offsets\"");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"foo\":1}}",
               zeros, 4, "safetensors: tensor 'a': unknown field 'foo'");
    EXPECT_BAD("{\"a\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", zeros, 4,
               "safetensors: tensor 'a': dtype must be a string, got number");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":{},\"data_offsets\":[0,4]}}", zeros, 4,
               "safetensors: tensor 'a': shape must be an array, got object");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", zeros, 4,
               "safetensors: tensor 'a': shape entry 0 is not a non-negative integer below 2^63");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", zeros, 4,
               "safetensors: tensor 'a': shape entry 0 is not a non-negative integer below 2^63");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}",
               zeros, 4, "safetensors: tensor 'a': 9 dims, more than the 8 TensorPlay supports");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,4]}}",
               zeros, 4, "safetensors: tensor 'a': shape is too large (element count overflows)");
    EXPECT_BAD("{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],"
               "\"data_offsets\":[0,4]}}", zeros, 4,
               "safetensors: tensor 'a': shape is too large (element count overflows)");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", zeros, 8,
               "safetensors: tensor 'a': data_offsets must be an array [BEGIN, END]");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,18446744073709551616]}}",
               zeros, 4, "safetensors: tensor 'a': data_offsets must be non-negative integers "
               "below 2^64");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", zeros, 8,
               "safetensors: tensor 'a': data_offsets [8, 4] end before they begin");
    /* A zero dim makes even an overflowing shape empty. */
    make_file(path_of("zero.safetensors"),
              "{\"z\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904,0,8],"
              "\"data_offsets\":[0,0]}}", NULL, 0);
    tp_safetensors *st;
    CHECK(tp_safetensors_load(path_of("zero.safetensors"), &st) == TP_STATUS_OK);
    CHECK(st && st->count == 1 && tp_tensor_numel(st->tensors[0]) == 0);
    tp_safetensors_free(st);
}

static void test_offsets_must_tile_the_buffer_exactly(void) {
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", zeros, 12,
               "safetensors: bytes [4, 8) of the data buffer belong to no tensor (a gap before "
               "tensor 'b')");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", zeros, 8,
               "safetensors: bytes [0, 4) of the data buffer belong to no tensor (a gap before "
               "tensor 'a')");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", zeros, 8,
               "safetensors: tensor 'b' at [4, 8] overlaps tensor 'a' which ends at 8");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", zeros, 8,
               "safetensors: the tensors end at byte 4 but the data buffer has 8 bytes "
               "(trailing bytes belong to no tensor)");
    EXPECT_BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", zeros, 4,
               "safetensors: tensor 'a': data_offsets [0, 8] reach past the end of the 4-byte "
               "data buffer");
    EXPECT_BAD("{}", zeros, 4,
               "safetensors: the tensors end at byte 0 but the data buffer has 4 bytes "
               "(trailing bytes belong to no tensor)");
}

static void test_metadata_and_bool_values_are_checked(void) {
    EXPECT_BAD("{\"__metadata__\":{\"k\":1}}", NULL, 0,
               "safetensors: __metadata__ value for 'k' must be a string, got number");
    EXPECT_BAD("{\"__metadata__\":[]}", NULL, 0,
               "safetensors: __metadata__ must be an object of strings, got array");
    EXPECT_BAD("{\"__metadata__\":{\"k\":\"a\\u0000\"}}", NULL, 0,
               "safetensors: __metadata__ value for 'k' contains a NUL character");
    const unsigned char bools[3] = {1, 2, 0};
    EXPECT_BAD("{\"m\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[0,3]}}", bools, 3,
               "safetensors: tensor 'm': BOOL element 1 is 2, not 0 or 1");
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/tp_safetensors_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    RUN(test_every_dtype_round_trips_with_metadata);
    RUN(test_strided_inputs_are_written_contiguous);
    RUN(test_scalars_and_empty_tensors_round_trip);
    RUN(test_loaded_tensors_point_into_the_mapping);
    RUN(test_the_file_is_unmapped_when_the_last_storage_goes);
    RUN(test_writes_to_a_loaded_tensor_never_reach_the_file);
    RUN(test_misaligned_data_is_copied_to_aligned_memory);
    RUN(test_loaded_tensors_adopt_their_new_storages);
    RUN(test_loading_from_memory_copies);
    RUN(test_save_refuses_bad_arguments_and_leaves_no_file);
    RUN(test_truncated_or_oversized_headers_are_refused);
    RUN(test_header_must_be_a_strict_json_object);
    RUN(test_tensor_entries_are_checked_field_by_field);
    RUN(test_offsets_must_tile_the_buffer_exactly);
    RUN(test_metadata_and_bool_values_are_checked);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return CHECK_EXIT_STATUS();
}
