/* conv.h — vdnn's convolution stack (--model conv): the conv stack of net.h trained on vdnn's own
 * loop (conv.c: options, configurations, rows; conv_step.c: the offloading step and its model),
 * with the policies none, all and conv (only convolutions' inputs). The MLP and the GPT train on
 * the training layer (vdnn.c). */
#ifndef VDNN_CONV_H
#define VDNN_CONV_H

/* 1 when the command line asks for --model conv. */
int vdnn_conv_asked(int argc, char **argv);
/* The program for the conv stack: parses, runs every configuration, finalises. */
int vdnn_conv_main(int argc, char **argv);

#endif
