/*
 * samples/tensors/common.h - tiny helpers shared by the tensor leak
 * scenarios: every runtime call is checked, and the first failure ends the
 * program with the runtime's message.
 */
#ifndef SAMPLES_TENSORS_COMMON_H
#define SAMPLES_TENSORS_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include "tensorplay/tensorplay.h"

static inline tp_tensor *sample_check(tp_tensor *t, const char *what) {
    if (!t) {
        fprintf(stderr, "sample: %s failed: %s\n", what, tp_last_error());
        exit(1);
    }
    return t;
}
#define CHECK(call) sample_check((call), #call)

static inline void sample_check_status(tp_status st, const char *what) {
    if (st != TP_STATUS_OK) {
        fprintf(stderr, "sample: %s failed: %s\n", what, tp_last_error());
        exit(1);
    }
}
#define CHECK_STATUS(call) sample_check_status((call), #call)

#endif
