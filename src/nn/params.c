/*
 * src/nn/params.c - the parameter list a model exposes (borrowed pointers)
 * and zero_grad over it.
 */
#include <stdlib.h>

#include "../core/internal.h"
#include "tensorplay/nn.h"

tp_status tp_param_list_add(tp_param_list *list, tp_tensor *p) {
    if (!list || !p) return tp__error(TP_STATUS_INVALID_ARGUMENT, "param_list_add: list or tensor is NULL");
    if (list->count == list->capacity) {
        int cap = list->capacity ? list->capacity * 2 : 16;
        tp_tensor **items = realloc(list->items, (size_t)cap * sizeof *items);
        if (!items) return tp__error(TP_STATUS_OUT_OF_MEMORY, "param_list_add: out of memory");
        list->items = items;
        list->capacity = cap;
    }
    list->items[list->count++] = p;
    return TP_STATUS_OK;
}

void tp_param_list_free(tp_param_list *list) {
    if (!list) return;
    free(list->items);
    *list = (tp_param_list){0};
}

tp_status tp_param_list_zero_grad(const tp_param_list *list, bool set_to_none) {
    if (!list) return tp__error(TP_STATUS_INVALID_ARGUMENT, "zero_grad: list is NULL");
    for (int i = 0; i < list->count; i++) {
        tp_tensor *g = tp_tensor_grad(list->items[i]);
        if (!g) continue;
        tp_status st = set_to_none ? tp_tensor_set_grad(list->items[i], NULL) : tp_fill_(g, 0.0);
        if (st != TP_STATUS_OK) return st;
    }
    return TP_STATUS_OK;
}
