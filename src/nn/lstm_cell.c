/*
 * src/nn/lstm_cell.c - the LSTMCell layer, written with the differentiable
 * ops as torch.nn.LSTMCell computes it:
 *   gates = x W_ih^T + b_ih + h W_hh^T + b_hh        (B, 4H): i, f, g, o
 *   c' = sigmoid(f) * c + sigmoid(i) * tanh(g);   h' = sigmoid(o) * tanh(c')
 */
#include <math.h>

#include "nn_internal.h"

// ----------------------------------------------------------------------------
// LSTMCell

tp_status tp_nn_lstm_cell_init(tp_nn_lstm_cell *m, tp_nn_lstm_cell_options o) {
    if (!m) return tp__error(TP_STATUS_INVALID_ARGUMENT, "lstm_cell: module is NULL");
    *m = (tp_nn_lstm_cell){0};
    if (o.input_size <= 0 || o.hidden_size <= 0)
        return tp__error(TP_STATUS_INVALID_ARGUMENT, "lstm_cell: input_size and hidden_size must be positive");
    int64_t h4 = 4 * o.hidden_size;
    double bound = 1.0 / sqrt((double)o.hidden_size); /* PyTorch: every weight U(-1/sqrt(H), 1/sqrt(H)) */
    m->hidden_size = o.hidden_size;
    m->weight_ih = tp__nn_parameter(2, (int64_t[]){h4, o.input_size}, o.dtype, bound, o.seed + 1);
    m->weight_hh = tp__nn_parameter(2, (int64_t[]){h4, o.hidden_size}, o.dtype, bound, o.seed + 2);
    m->bias_ih = tp__nn_parameter(1, &h4, o.dtype, bound, o.seed + 3);
    m->bias_hh = tp__nn_parameter(1, &h4, o.dtype, bound, o.seed + 4);
    if (!m->weight_ih || !m->weight_hh || !m->bias_ih || !m->bias_hh) {
        tp_status st = tp_last_status();
        tp_nn_lstm_cell_free(m);
        return st;
    }
    return TP_STATUS_OK;
}

tp_status tp_nn_lstm_cell_forward(const tp_nn_lstm_cell *m, tp_tensor *x, tp_tensor *h, tp_tensor *c,
                                  tp_tensor **h_out, tp_tensor **c_out) {
    if (h_out) *h_out = NULL;
    if (c_out) *c_out = NULL;
    if (!m || !m->weight_ih || !x || !h || !c || !h_out || !c_out)
        return tp__error(TP_STATUS_INVALID_ARGUMENT, "lstm_cell: a module, tensor or output is NULL");
    int64_t hs = m->hidden_size;
    tp_tensor *t[16] = {0};
    int k = 0;
    tp_status st = TP_STATUS_OK;
#define STEP(expr) do { if (st == TP_STATUS_OK && !(t[k++] = (expr))) st = tp_last_status(); } while (0)
    STEP(tp_ag_linear(x, m->weight_ih, m->bias_ih));        /* 0 */
    STEP(tp_ag_linear(h, m->weight_hh, m->bias_hh));        /* 1 */
    STEP(tp_ag_add(t[0], t[1]));                            /* 2: gates (B, 4H) */
    STEP(tp_ag_narrow(t[2], -1, 0 * hs, hs));               /* 3: i */
    STEP(tp_ag_narrow(t[2], -1, 1 * hs, hs));               /* 4: f */
    STEP(tp_ag_narrow(t[2], -1, 2 * hs, hs));               /* 5: g */
    STEP(tp_ag_narrow(t[2], -1, 3 * hs, hs));               /* 6: o */
    STEP(tp_ag_unary(TP_UNARY_OP_SIGMOID, t[3]));           /* 7 */
    STEP(tp_ag_unary(TP_UNARY_OP_SIGMOID, t[4]));           /* 8 */
    STEP(tp_ag_unary(TP_UNARY_OP_TANH, t[5]));              /* 9 */
    STEP(tp_ag_unary(TP_UNARY_OP_SIGMOID, t[6]));           /* 10 */
    STEP(tp_ag_mul(t[8], c));                               /* 11: f c */
    STEP(tp_ag_mul(t[7], t[9]));                            /* 12: i g */
    STEP(tp_ag_add(t[11], t[12]));                          /* 13: c' */
    STEP(tp_ag_unary(TP_UNARY_OP_TANH, t[13]));             /* 14 */
    STEP(tp_ag_mul(t[10], t[14]));                          /* 15: h' */
#undef STEP
    if (st == TP_STATUS_OK) {
        *c_out = tp_tensor_retain(t[13]);
        *h_out = tp_tensor_retain(t[15]);
    }
    for (int i = 0; i < 16; i++) tp_tensor_release(t[i]);
    return st;
}

tp_status tp_nn_lstm_cell_parameters(const tp_nn_lstm_cell *m, tp_param_list *list) {
    tp_tensor *ps[] = {m->weight_ih, m->weight_hh, m->bias_ih, m->bias_hh};
    for (int i = 0; i < 4; i++) {
        tp_status st = tp_param_list_add(list, ps[i]);
        if (st != TP_STATUS_OK) return st;
    }
    return TP_STATUS_OK;
}

void tp_nn_lstm_cell_free(tp_nn_lstm_cell *m) {
    if (!m) return;
    tp_tensor_release(m->weight_ih);
    tp_tensor_release(m->weight_hh);
    tp_tensor_release(m->bias_ih);
    tp_tensor_release(m->bias_hh);
    *m = (tp_nn_lstm_cell){0};
}
