/*
 * tests/core/test_dtype.c - dtype table, promotion, float16/bfloat16
 * conversions and device names (src/core/dtype.c).
 */
#include <math.h>

#include "tensorplay/tensorplay.h"
#include "../check.h"

static float f32(uint32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static void test_itemsize_and_name_of_every_dtype(void) {
    static const struct { tp_dtype d; size_t size; const char *name; bool fl; } table[] = {
        {TP_DTYPE_FLOAT32, 4, "float32", true},   {TP_DTYPE_FLOAT64, 8, "float64", true},
        {TP_DTYPE_FLOAT16, 2, "float16", true},   {TP_DTYPE_BFLOAT16, 2, "bfloat16", true},
        {TP_DTYPE_INT8, 1, "int8", false},        {TP_DTYPE_INT16, 2, "int16", false},
        {TP_DTYPE_INT32, 4, "int32", false},      {TP_DTYPE_INT64, 8, "int64", false},
        {TP_DTYPE_UINT8, 1, "uint8", false},      {TP_DTYPE_BOOL, 1, "bool", false},
    };
    CHECK_EQ(sizeof table / sizeof table[0], TP_DTYPE_COUNT);
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        CHECK_EQ(tp_dtype_itemsize(table[i].d), table[i].size);
        CHECK_STR(tp_dtype_name(table[i].d), table[i].name);
        CHECK_EQ(tp_dtype_is_floating(table[i].d), table[i].fl);
        CHECK(tp_dtype_is_valid(table[i].d));
    }
}

static void test_invalid_dtype_is_reported_not_crashed(void) {
    CHECK_EQ(tp_dtype_itemsize(TP_DTYPE_COUNT), 0);
    CHECK_EQ(tp_dtype_itemsize((tp_dtype)-1), 0);
    CHECK_STR(tp_dtype_name((tp_dtype)99), "invalid");
    CHECK(!tp_dtype_is_valid(TP_DTYPE_COUNT));
    CHECK(!tp_dtype_is_floating((tp_dtype)99));
    CHECK_EQ(tp_dtype_promote(TP_DTYPE_COUNT, TP_DTYPE_INT8), TP_DTYPE_COUNT);
    CHECK_EQ(tp_last_status(), TP_STATUS_INVALID_ARGUMENT);
}

static void test_promotion_follows_pytorch(void) {
    /* torch.promote_types results. */
    static const tp_dtype cases[][3] = {
        {TP_DTYPE_UINT8, TP_DTYPE_INT8, TP_DTYPE_INT16},
        {TP_DTYPE_INT8, TP_DTYPE_UINT8, TP_DTYPE_INT16},
        {TP_DTYPE_UINT8, TP_DTYPE_INT32, TP_DTYPE_INT32},
        {TP_DTYPE_UINT8, TP_DTYPE_UINT8, TP_DTYPE_UINT8},
        {TP_DTYPE_BOOL, TP_DTYPE_UINT8, TP_DTYPE_UINT8},
        {TP_DTYPE_BOOL, TP_DTYPE_INT8, TP_DTYPE_INT8},
        {TP_DTYPE_INT16, TP_DTYPE_INT64, TP_DTYPE_INT64},
        {TP_DTYPE_INT64, TP_DTYPE_FLOAT16, TP_DTYPE_FLOAT16},
        {TP_DTYPE_INT64, TP_DTYPE_BFLOAT16, TP_DTYPE_BFLOAT16},
        {TP_DTYPE_BOOL, TP_DTYPE_FLOAT32, TP_DTYPE_FLOAT32},
        {TP_DTYPE_FLOAT16, TP_DTYPE_BFLOAT16, TP_DTYPE_FLOAT32},
        {TP_DTYPE_BFLOAT16, TP_DTYPE_FLOAT16, TP_DTYPE_FLOAT32},
        {TP_DTYPE_FLOAT16, TP_DTYPE_FLOAT32, TP_DTYPE_FLOAT32},
        {TP_DTYPE_BFLOAT16, TP_DTYPE_FLOAT64, TP_DTYPE_FLOAT64},
        {TP_DTYPE_FLOAT32, TP_DTYPE_FLOAT64, TP_DTYPE_FLOAT64},
        {TP_DTYPE_BOOL, TP_DTYPE_BOOL, TP_DTYPE_BOOL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_EQ(tp_dtype_promote(cases[i][0], cases[i][1]), cases[i][2]);
        CHECK_EQ(tp_dtype_promote(cases[i][1], cases[i][0]), cases[i][2]); /* symmetric */
    }
}

static void test_every_half_value_round_trips_through_float(void) {
    for (uint32_t h = 0; h <= 0xffff; h++) {
        float f = tp_half_to_float((uint16_t)h);
        bool is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        if (is_nan) {
            CHECK(isnan(f));
            CHECK(isnan(tp_half_to_float(tp_float_to_half(f))));
        } else if (tp_float_to_half(f) != h) {
            CHECK_EQ(tp_float_to_half(f), h);
        }
    }
}

static void test_float_to_half_rounds_to_nearest_even(void) {
    CHECK_EQ(tp_float_to_half(1.0f), 0x3c00);
    CHECK_EQ(tp_float_to_half(1.0f + 0x1p-11f), 0x3c00);       /* tie -> even (down) */
    CHECK_EQ(tp_float_to_half(1.0f + 3 * 0x1p-11f), 0x3c02);   /* tie -> even (up) */
    CHECK_EQ(tp_float_to_half(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01); /* above tie */
    CHECK_EQ(tp_float_to_half(65504.0f), 0x7bff);              /* max finite */
    CHECK_EQ(tp_float_to_half(65519.0f), 0x7bff);
    CHECK_EQ(tp_float_to_half(65520.0f), 0x7c00);              /* tie -> inf */
    CHECK_EQ(tp_float_to_half(1e10f), 0x7c00);
    CHECK_EQ(tp_float_to_half(0x1p-24f), 0x0001);              /* smallest subnormal */
    CHECK_EQ(tp_float_to_half(0x1p-25f), 0x0000);              /* tie -> even (0) */
    CHECK_EQ(tp_float_to_half(3 * 0x1p-25f), 0x0002);          /* tie -> even (2) */
    CHECK_EQ(tp_float_to_half(0x1p-14f - 0x1p-26f), 0x0400);   /* rounds up into normals */
    CHECK_EQ(tp_float_to_half(-0.0f), 0x8000);
    CHECK_EQ(tp_float_to_half(-2.5f), 0xc100);
    CHECK_EQ(tp_float_to_half(INFINITY), 0x7c00);
    CHECK_EQ(tp_float_to_half(-INFINITY), 0xfc00);
    uint16_t nan = tp_float_to_half(NAN);
    CHECK((nan & 0x7c00) == 0x7c00 && (nan & 0x3ff) != 0);
    /* A NaN whose payload lives only in the low bits must not become inf. */
    uint16_t low_nan = tp_float_to_half(f32(0x7f800001u));
    CHECK((low_nan & 0x7c00) == 0x7c00 && (low_nan & 0x3ff) != 0);
}

static void test_bfloat16_rounds_to_nearest_even_and_keeps_nan(void) {
    CHECK_EQ(tp_float_to_bfloat16(1.0f), 0x3f80);
    CHECK_EQ(tp_float_to_bfloat16(1.0f + 0x1p-8f), 0x3f80);      /* tie -> even (down) */
    CHECK_EQ(tp_float_to_bfloat16(1.0f + 3 * 0x1p-8f), 0x3f82);  /* tie -> even (up) */
    CHECK_EQ(tp_float_to_bfloat16(f32(0x7f7fffffu)), 0x7f80);    /* FLT_MAX rounds to inf */
    CHECK_EQ(tp_float_to_bfloat16(INFINITY), 0x7f80);
    CHECK_EQ(tp_float_to_bfloat16(-INFINITY), 0xff80);
    CHECK(isnan(tp_bfloat16_to_float(tp_float_to_bfloat16(f32(0x7f800001u)))));
    CHECK(isnan(tp_bfloat16_to_float(tp_float_to_bfloat16(NAN))));
    CHECK(tp_bfloat16_to_float(0x4049) == 3.140625f);
    for (uint32_t b = 0; b <= 0xffff; b++) {
        bool is_nan = (b & 0x7f80) == 0x7f80 && (b & 0x7f);
        if (!is_nan && tp_float_to_bfloat16(tp_bfloat16_to_float((uint16_t)b)) != b)
            CHECK_EQ(tp_float_to_bfloat16(tp_bfloat16_to_float((uint16_t)b)), b);
    }
}

static void test_device_names(void) {
    char buf[16];
    CHECK_STR(tp_device_str(tp_device_cpu(), buf, sizeof buf), "cpu");
    CHECK_STR(tp_device_str((tp_device){TP_DEVICE_TYPE_CPU, -1}, buf, sizeof buf), "cpu");
    CHECK_STR(tp_device_str((tp_device){TP_DEVICE_TYPE_CUDA, 0}, buf, sizeof buf), "cuda:0");
    CHECK_STR(tp_device_str((tp_device){TP_DEVICE_TYPE_CUDA, 3}, buf, sizeof buf), "cuda:3");
    CHECK_STR(tp_device_str((tp_device){TP_DEVICE_TYPE_CUDA, -1}, buf, sizeof buf), "cuda");
    CHECK_STR(tp_device_str((tp_device){7, 0}, buf, sizeof buf), "invalid");
    char small[4];
    CHECK_STR(tp_device_str((tp_device){TP_DEVICE_TYPE_CUDA, 1}, small, sizeof small), "cud");
}

static void test_device_strings_parse_like_torch_device(void) {
    tp_device d = {7, 7};
    CHECK_EQ(tp_device_parse("cuda:0", &d), TP_STATUS_OK);
    CHECK(d.type == TP_DEVICE_TYPE_CUDA && d.index == 0);
    CHECK_EQ(tp_device_parse("cuda:12", &d), TP_STATUS_OK);
    CHECK_EQ(d.index, 12);
    CHECK_EQ(tp_device_parse("cuda", &d), TP_STATUS_OK);
    CHECK_EQ(d.index, -1);
    CHECK_EQ(tp_device_parse("cpu", &d), TP_STATUS_OK);
    CHECK(d.type == TP_DEVICE_TYPE_CPU && d.index == 0);
    CHECK_EQ(tp_device_parse("cpu:0", &d), TP_STATUS_OK);
    tp_device before = d;
    CHECK_EQ(tp_device_parse("tpu", &d), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "Expected one of cpu, cuda device type at start of device string: tpu");
    CHECK_EQ(tp_device_parse("cuda:1:2", &d), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "Invalid device string: 'cuda:1:2'");
    CHECK_EQ(tp_device_parse("cpu:1", &d), TP_STATUS_INVALID_ARGUMENT);
    CHECK_EQ(tp_device_parse("cuda:99999", &d), TP_STATUS_INVALID_ARGUMENT);
    CHECK_EQ(tp_device_parse(NULL, &d), TP_STATUS_INVALID_ARGUMENT);
    CHECK(d.type == before.type && d.index == before.index); /* unchanged on failure */
    char buf[16];
    CHECK_EQ(tp_device_parse(tp_device_str(tp_device_cuda(3), buf, sizeof buf), &d), TP_STATUS_OK);
    CHECK(tp_device_equal(d, tp_device_cuda(3)));
}

int main(void) {
    RUN_TEST(test_itemsize_and_name_of_every_dtype);
    RUN_TEST(test_invalid_dtype_is_reported_not_crashed);
    RUN_TEST(test_promotion_follows_pytorch);
    RUN_TEST(test_every_half_value_round_trips_through_float);
    RUN_TEST(test_float_to_half_rounds_to_nearest_even);
    RUN_TEST(test_bfloat16_rounds_to_nearest_even_and_keeps_nan);
    RUN_TEST(test_device_names);
    RUN_TEST(test_device_strings_parse_like_torch_device);
    return CHECK_DONE();
}
