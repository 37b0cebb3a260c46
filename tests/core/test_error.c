/*
 * tests/core/test_error.c - the thread-local error state (src/core/error.c).
 */
#include <pthread.h>

#include "tensorplay/tensorplay.h"
#include "../check.h"

static void test_last_error_is_empty_before_any_failure(void) {
    CHECK_STR(tp_last_error(), "");
    CHECK_EQ(tp_last_status(), TP_STATUS_OK);
}

static void test_failing_call_sets_message_and_status(void) {
    tp_status st = tp_allocator_set((tp_device_type)7, NULL);
    CHECK_EQ(st, TP_STATUS_INVALID_ARGUMENT);
    CHECK_EQ(tp_last_status(), TP_STATUS_INVALID_ARGUMENT);
    CHECK_STR(tp_last_error(), "allocator_set: invalid device type 7");
}

static void test_successful_call_keeps_previous_message(void) {
    tp_allocator_set((tp_device_type)7, NULL);
    CHECK_EQ(tp_allocator_set(TP_DEVICE_TYPE_CPU, NULL), TP_STATUS_OK);
    CHECK_STR(tp_last_error(), "allocator_set: invalid device type 7");
}

static void test_clear_error_resets_message_and_status(void) {
    tp_allocator_set((tp_device_type)7, NULL);
    tp_clear_error();
    CHECK_STR(tp_last_error(), "");
    CHECK_EQ(tp_last_status(), TP_STATUS_OK);
}

static void *fail_on_other_thread(void *arg) {
    (void)arg;
    tp_allocator_set((tp_device_type)9, NULL);
    static char seen[128];
    snprintf(seen, sizeof seen, "%s", tp_last_error());
    return seen;
}

static void test_error_state_is_per_thread(void) {
    tp_clear_error();
    pthread_t th;
    void *seen = NULL;
    CHECK_EQ(pthread_create(&th, NULL, fail_on_other_thread, NULL), 0);
    pthread_join(th, &seen);
    CHECK_STR((const char *)seen, "allocator_set: invalid device type 9");
    CHECK_STR(tp_last_error(), ""); /* this thread never failed */
    CHECK_EQ(tp_last_status(), TP_STATUS_OK);
}

static void test_status_names_are_distinct(void) {
    CHECK_STR(tp_status_name(TP_STATUS_OK), "ok");
    CHECK_STR(tp_status_name(TP_STATUS_OUT_OF_BOUNDS), "out of bounds");
    CHECK_STR(tp_status_name(TP_STATUS_OUT_OF_MEMORY), "out of memory");
    CHECK_STR(tp_status_name((tp_status)42), "unknown status");
    for (int a = 0; a <= TP_STATUS_INTERNAL; a++)
        for (int b = a + 1; b <= TP_STATUS_INTERNAL; b++)
            CHECK(strcmp(tp_status_name((tp_status)a), tp_status_name((tp_status)b)) != 0);
}

int main(void) {
    RUN_TEST(test_last_error_is_empty_before_any_failure);
    RUN_TEST(test_failing_call_sets_message_and_status);
    RUN_TEST(test_successful_call_keeps_previous_message);
    RUN_TEST(test_clear_error_resets_message_and_status);
    RUN_TEST(test_error_state_is_per_thread);
    RUN_TEST(test_status_names_are_distinct);
    return CHECK_DONE();
}
