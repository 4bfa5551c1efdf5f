/* loss_scale.c — the loss scaler's state machine (see loss_scale.h): GradScaler.update(). */
#include <float.h>

#include "loss_scale.h"

const char *sl_scale_mode_name(sl_scale_mode m)
{
    return m == SL_SCALE_NONE ? "none" : m == SL_SCALE_STATIC ? "static"
         : m == SL_SCALE_DYNAMIC ? "dynamic" : "?";
}

void sl_loss_scaler_init(sl_loss_scaler *s, sl_scale_mode mode, double scale, double growth,
                         double backoff, long interval)
{
    *s = (sl_loss_scaler){.mode = mode, .scale = mode == SL_SCALE_NONE ? 1.0 : scale,
                          .growth = growth, .backoff = backoff, .interval = interval};
}

int sl_loss_scaler_update(sl_loss_scaler *s, int found_nonfinite)
{
    s->steps++;
    if (s->mode == SL_SCALE_NONE) return 1;
    if (found_nonfinite) {
        s->skipped++;
        if (s->mode == SL_SCALE_DYNAMIC) { /* GradScaler: scale *= backoff, tracker = 0 */
            s->scale *= s->backoff;
            s->backoffs++;
            s->clean = 0;
        }
        return 0;
    }
    if (s->mode == SL_SCALE_DYNAMIC && ++s->clean == s->interval) { /* tracker reached interval */
        /* GradScaler keeps the scale (an f32) as it is where growing would make it infinite */
        if (s->scale * s->growth <= FLT_MAX) {
            s->scale *= s->growth;
            s->growths++;
        }
        s->clean = 0;
    }
    return 1;
}
