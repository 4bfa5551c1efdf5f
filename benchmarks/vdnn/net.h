/* net.h — the conv stack vdnn trains on its own loop (--model conv), as vDNN sees a network: a
 * chain of operations, each reading one input tensor, writing one output tensor, and needing
 * its input again in backward. Operation i reads t[i] and writes t[i + 1]; t[0] is the batch,
 * t[nops] the output:
 *
 *   Conv_0, ReLU_0, Conv_1, ..., Conv_{L-1}   (3x3, stride 1, padding 1, channels -> channels,
 *   no bias: every tensor is [batch, channels, image, image])
 *
 * So every activation tensor has the same size, which keeps the arena free of fragmentation
 * and the memory model a count of tensors. The loss is MSE against N(0, 1) noise of the
 * output's shape. */
#ifndef VDNN_NET_H
#define VDNN_NET_H

#include <stddef.h>

#include "kernels.h"
#include "mlp.h"

typedef enum { OP_RELU, OP_CONV } op_kind;

#define NET_MAX_OPS (2 * SL_MLP_MAX_LAYERS)

typedef struct net {
    sl_backend be;
    int layers, nops, batch;
    op_kind op[NET_MAX_OPS];
    int layer_of[NET_MAX_OPS];
    size_t act_elems;  /* elements of every tensor t[i] */
    size_t nparams;    /* flat parameter vector: the L filters in order */
    sl_conv2d cv;      /* every layer's shape */
    unsigned long long seed;
} net;

/* Returns 0, or -1 for an invalid shape. */
int net_init(net *n, sl_backend be, int layers, int batch, int channels, int image, unsigned long long seed);
size_t net_act_bytes(const net *n);
/* The initial parameters (backend memory, nparams floats). */
void net_init_params(const net *n, float *params);
/* Step `step`'s batch into x (t[0]) and its target into y. */
void net_load(net *n, int step, float *x, float *y);
/* t[i + 1] = op_i(t[i]) */
void net_forward(const net *n, int i, const float *params, const float *x, float *y);
/* Backward of op i from dy = dL/dt[i + 1]: accumulates its parameters' gradients into grads
 * (the flat vector) and writes dx = dL/dt[i] unless dx is NULL (op 0). */
void net_backward(const net *n, int i, const float *params, const float *x, const float *dy,
                  float *grads, float *dx);
/* MSE of the output against y, the mean over its elements; dL/d(out) into dout. */
double net_loss(const net *n, const float *out, const float *y, float *dout);

#endif
