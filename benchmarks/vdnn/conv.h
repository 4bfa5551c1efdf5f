/* conv.h — vdnn's conv stack (--model conv) as the technique's own model on the training layer
 * (conv.c): its size, FLOPs, initial weights and serial reference for the technique's table
 * (sl_technique .model_params, .model_flops, .init_params, .reference), and the check of its
 * options. Its layers run in vdnn's pass (pass.c) beside the MLP's and the GPT's. */
#ifndef VDNN_CONV_H
#define VDNN_CONV_H

#include "sl_train.h"

size_t vd_conv_params(void);
double vd_conv_flops(int batch);
void vd_conv_init_params(const sl_train *t, float *w32);
void vd_conv_reference(sl_train *t, float *params, double *losses);
/* The stack's shape from --layers, --batch and these; a tensor over 1 GiB is a usage error. */
void vd_conv_validate(sl_ctx *ctx, long long channels, long long image);

#endif
