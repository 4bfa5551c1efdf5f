/* serial.h — megatron_mlp's model on one process: L transformer-style MLP blocks
 *     U = X·A^T + a,  Y = GeLU(U),  Z = Y·B^T + b,  X' = X + Z
 * (A [f, h], B [h, f] in PyTorch's [out, in] layout, f = ffn-mult·h), as the 2L-layer sl_mlp
 * h -> f -> h -> f -> ... -> h whose even layers have GeLU and odd layers none, plus the residual
 * connection around each pair, and the layout of the flat parameter vector (layer 2i = A_i then
 * a_i, layer 2i+1 = B_i then b_i).
 *
 * mm_serial_forward/backward are not the technique: they are the independent f32 reference its
 * blocks are checked against (check.c). The technique's serial model is its own blocks at t = 1,
 * which a defect of the blocks would share; this one is written with the shared model's layers
 * (sl_mlp_layer_forward/backward, checked against train_ref in t/unit), in f32 only, so that
 * such a defect shows. Pointers are backend memory. */
#ifndef MEGATRON_SERIAL_H
#define MEGATRON_SERIAL_H

#include "sl_train.h"

/* The 2L-layer model of L blocks of width h and inner width f; returns 0, or -1 for a bad shape. */
int mm_model_init(sl_mlp *m, sl_backend be, int blocks, int h, int f);

/* What the serial blocks keep for backward, for n tokens: x[0..L] ([n, h]; x[0] the input,
 * x[L] the output), u[i] and y[i] ([n, f]) per block; plus work buffers z [n, h] and two
 * gradient buffers. */
typedef struct mm_serial_acts {
    int n, blocks;
    float **x, **u, **y;
    float *z, *d[2], *dy;
} mm_serial_acts;
void mm_serial_acts_alloc(const sl_mlp *m, int n, mm_serial_acts *a);
void mm_serial_acts_free(const sl_mlp *m, mm_serial_acts *a);
/* Bytes the serial blocks keep for backward at n tokens: ((L + 1)·h + 2L·f)·n floats. */
double mm_serial_activ_bytes(const sl_mlp *m, int n);

/* Forward from a->x[0] to a->x[L]. */
void mm_serial_forward(const sl_mlp *m, mm_serial_acts *a, const float *params);
/* Backward from dout = dL/dx[L] ([n, h], not kept), accumulating into grads (flat, like params);
 * returns dL/dx[0] (one of a->d). */
float *mm_serial_backward(const sl_mlp *m, mm_serial_acts *a, const float *params, float *grads,
                          const float *dout);

#endif
