/*
 * samples/tensors/cat_storage.c - cat results own their storage.
 *
 * Builds two tensors and a view, concatenates them, then writes into the
 * inputs: the cat result does not change, because cat always allocates a new
 * storage (unlike a view).  Under tpprof the sharing graph shows the cat
 * output as its own storage node, with no edge to the inputs.
 */
#include "common.h"

int main(void) {
    tp_tensor *a = CHECK(tp_arange(0, 6, 1, TP_DTYPE_FLOAT32));
    tp_tensor *b = CHECK(tp_full(1, (int64_t[]){4}, 9, TP_DTYPE_FLOAT32));
    tp_tensor *a_view = CHECK(tp_tensor_narrow(a, 0, 2, 3)); /* shares a's storage */
    tp_tensor *joined = CHECK(tp_cat(3, (tp_tensor *[]){a, b, a_view}, 0));
    CHECK_STATUS(tp_fill_(a, -1));
    double v = 0;
    CHECK_STATUS(tp_tensor_get(joined, (int64_t[]){2}, &v));
    int shares = tp_tensor_storage(joined) == tp_tensor_storage(a) ||
                 tp_tensor_storage(joined) == tp_tensor_storage(b);
    printf("cat_storage: joined has %lld elements, joined[2] = %.0f after a.fill_(-1), "
           "shares storage with an input: %s\n",
           (long long)tp_tensor_numel(joined), v, shares ? "yes" : "no");
    tp_tensor *all[] = {a, b, a_view, joined};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) tp_tensor_release(all[i]);
    return shares || v != 2.0;
}
