/* scalelab.h — everything a benchmark needs from the harness, in one include. */
#ifndef SCALELAB_H
#define SCALELAB_H

#include "sl_env.h"
#include "sl_env_check.h"
#include "sl_error.h"
#include "sl_harness.h"
#include "sl_json.h"
#include "sl_mem.h"
#include "sl_options.h"
#include "sl_papi.h"
#include "sl_results.h"
#include "sl_slowdown.h"
#include "sl_stats.h"
#include "sl_timer.h"
#include "sl_trace.h"
#include "sl_types.h"

#endif
