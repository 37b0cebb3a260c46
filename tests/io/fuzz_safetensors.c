/*
 * tests/io/fuzz_safetensors.c - libFuzzer target for the safetensors loader
 * (and through it the strict JSON parser).  Built only with clang; run by
 * hand for long sessions, e.g.
 *     mkdir -p /tmp/st-corpus && cp -r tests/io/corpus/. /tmp/st-corpus/
 *     build-fuzz/tests/io/fuzz_safetensors -max_total_time=300 /tmp/st-corpus
 * and copy any crash-* it writes into tests/io/corpus/ so the corpus test
 * replays it forever.  Every input must give OK or INVALID_ARGUMENT.
 */
#include <stdint.h>
#include <stdlib.h>

#include "tensorplay/tensorplay.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile unsigned sink; /* keeps the reads below from being optimized out */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tp_safetensors *st = NULL;
    tp_status s = tp_safetensors_load_bytes(data, size, &st);
    if (s != TP_STATUS_OK && s != TP_STATUS_INVALID_ARGUMENT) abort();
    if (s == TP_STATUS_OK) {
        /* Read every tensor byte so ASan checks the ranges the loader made. */
        for (size_t i = 0; i < st->count; i++) {
            const unsigned char *p = tp_tensor_data(st->tensors[i]);
            for (size_t k = 0; k < tp_tensor_nbytes(st->tensors[i]); k++) sink += p[k];
        }
        tp_safetensors_free(st);
    }
    return 0;
}
