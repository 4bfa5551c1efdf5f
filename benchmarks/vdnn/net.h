/* net.h — the deep models vdnn trains, as vDNN sees a network: a chain of operations, each
 * reading one input tensor, writing one output tensor, and needing its input again in
 * backward. Operation i reads t[i] and writes t[i + 1]; t[0] is the batch, t[nops] the output.
 *
 *   mlp:  Linear_0, ReLU_0, Linear_1, ReLU_1, ..., Linear_{L-1}   (the shared MLP, mlp.h,
 *         width -> width in every layer, so every tensor is [batch, width])
 *   conv: Conv_0, ReLU_0, Conv_1, ..., Conv_{L-1}   (3x3, stride 1, padding 1, channels ->
 *         channels, no bias: every tensor is [batch, channels, image, image])
 *
 * So every activation tensor has the same size, which keeps the arena free of fragmentation
 * and the memory model a count of tensors. The loss is MSE against a target of the output's
 * shape: the synthetic teacher task for the MLP (as the training layer trains it), N(0, 1)
 * noise for the conv stack. */
#ifndef VDNN_NET_H
#define VDNN_NET_H

#include <stddef.h>

#include "kernels.h"
#include "mlp.h"

typedef enum { NET_MLP, NET_CONV, NET_NKINDS } net_kind;
typedef enum { OP_LINEAR, OP_RELU, OP_CONV } op_kind;

#define NET_MAX_OPS (2 * SL_MLP_MAX_LAYERS)

typedef struct net {
    net_kind kind;
    sl_backend be;
    int layers, nops, batch;
    op_kind op[NET_MAX_OPS];
    int layer_of[NET_MAX_OPS];
    size_t act_elems;  /* elements of every tensor t[i] */
    size_t nparams;    /* flat parameter vector: the MLP's (mlp.h), or the L filters in order */
    sl_mlp mlp;        /* NET_MLP */
    sl_task task;      /* NET_MLP: the teacher */
    sl_conv2d cv;      /* NET_CONV: every layer's shape */
    unsigned long long seed;
} net;

/* width: the MLP's; channels, image: the conv stack's. Returns 0, or -1 for an invalid shape. */
int net_init(net *n, net_kind kind, sl_backend be, int layers, int batch, int width, int channels,
             int image, unsigned long long seed);
void net_free(net *n);
const char *net_op_name(const net *n, int i); /* "linear" "relu" "conv" */
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
/* Floating-point operations of op i's forward and backward (GEMMs and convolutions). */
double net_flops(const net *n, int i, int backward);

#endif
