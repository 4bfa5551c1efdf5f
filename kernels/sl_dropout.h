/* sl_dropout.h — dropout's masks, shared by the host and device kernels and the f64 reference.
 *
 * Whether element i of a dropout site is kept is a pure function of the site's key and i
 * (sl_rng.h's counter-based generator): kept when a uniform draw in [0, 1) is at least p, then
 * scaled by 1/(1 - p) (inverted dropout, as PyTorch's). No mask is stored: a forward, its
 * backward, a recomputation (checkpointing) and every partitioning of the same elements draw
 * the same mask, as long as they number the elements alike. The GPT (gpt_model.c) numbers them
 * globally: a site's key is (seed, layer, site), and element i is (sequence, token, feature)
 * of the whole run, the sequence being the step's first + its index in the step's global batch,
 * so "(seed, step, layer, token, element)" decides every mask whoever computes it. */
#ifndef SL_DROPOUT_H
#define SL_DROPOUT_H

#include <stdint.h>

#include "sl_rng.h"

/* One site's dropout over a tensor: p (0: none), its key, and the global number of the
 * tensor's first element. */
typedef struct sl_dropout {
    float p;
    uint64_t key;
    uint64_t first;
} sl_dropout;

/* The GPT's sites: after the embedding, on the attention probabilities, on the attention's
 * and the MLP's outputs before their residual adds (GPT-2's embd, attn and resid dropout). */
enum { SL_DROP_EMBED, SL_DROP_ATTN, SL_DROP_RESID_ATTN, SL_DROP_RESID_MLP };

#define SL_DROPOUT_STREAM 0x64726f706f757421ull /* "dropout!" */

SL_HD uint64_t sl_dropout_key(uint64_t seed, int layer, int site)
{
    return sl_rng_u64(seed ^ SL_DROPOUT_STREAM, (uint64_t)layer * 8u + (uint64_t)site);
}

SL_HD int sl_dropout_keep(uint64_t key, uint64_t i, float p) { return sl_rng_uniform(key, i) >= p; }

SL_HD float sl_dropout_scale(float p) { return 1.0f / (1.0f - p); }

#endif
