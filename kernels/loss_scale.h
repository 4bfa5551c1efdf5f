/* loss_scale.h — the loss scaler of mixed-precision training: the state machine of PyTorch's
 * torch.cuda.amp.GradScaler (and of a fixed "static" scale), on the host.
 *
 * The loss is multiplied by `scale` before backward, so that small gradients land inside the
 * 16-bit range instead of flushing to zero; the gradients are divided by it again in f32
 * before the optimizer. If any gradient came out inf or NaN (the scaled values overflowed),
 * the step is skipped. Dynamic scaling then halves the scale (backoff) and, after `interval`
 * clean steps in a row, doubles it (growth): it settles just below the largest scale that does
 * not overflow. Defaults are GradScaler's: initial 2^16, growth 2, backoff 0.5, interval 2000.
 *
 *   sl_loss_scaler s; sl_loss_scaler_init(&s, SL_SCALE_DYNAMIC, 65536, 2, 0.5, 2000);
 *   each step: loss * s.scale -> backward -> grads * (1/s.scale), counting non-finite ones;
 *              if (sl_loss_scaler_update(&s, nonfinite > 0)) optimizer step;   (else skipped)
 */
#ifndef SL_LOSS_SCALE_H
#define SL_LOSS_SCALE_H

typedef enum {
    SL_SCALE_NONE,    /* scale 1, nothing checked: what plain 16-bit training does */
    SL_SCALE_STATIC,  /* a fixed scale; a step with non-finite gradients is skipped */
    SL_SCALE_DYNAMIC, /* GradScaler: back off and skip on overflow, grow after a clean run */
    SL_NSCALES
} sl_scale_mode;
const char *sl_scale_mode_name(sl_scale_mode m); /* "none" "static" "dynamic" */

typedef struct sl_loss_scaler {
    sl_scale_mode mode;
    double scale;       /* the loss is multiplied by this */
    double growth;      /* dynamic: factor after `interval` clean steps (GradScaler 2.0) */
    double backoff;     /* dynamic: factor on a step with inf/NaN (GradScaler 0.5) */
    long interval;      /* dynamic: clean steps in a row before growth (GradScaler 2000) */
    long clean;         /* clean steps since the last growth or backoff */
    long steps, skipped, growths, backoffs;
} sl_loss_scaler;

/* mode none ignores `scale` (it is 1). */
void sl_loss_scaler_init(sl_loss_scaler *s, sl_scale_mode mode, double scale, double growth,
                         double backoff, long interval);
/* After a step's backward: found_nonfinite says whether any unscaled gradient was inf or NaN.
 * Returns 1 when the optimizer should apply the step, 0 when it is skipped; updates the scale
 * for the next step. Mode none applies every step (the non-finite values go into the weights,
 * as they would without a scaler). */
int sl_loss_scaler_update(sl_loss_scaler *s, int found_nonfinite);

#endif
