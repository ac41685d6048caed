/*
 * smollm3: the llama block, except that every fourth layer ((il + 1) % 4 == 0) has no
 * positions at all (NoPE): its q and k are not rotated. The step of 4 is fixed by the
 * architecture, not read from the file.
 */
#include "forward.h"

enum { SMOLLM3_NOPE_STEP = 4 };

static bool smollm3_hparams(model_loader *ld)
{
    corral_model *m = ld->model;
    for (uint32_t il = 0; il < m->hp.n_layer; il++)
        m->layers[il].no_rope = (il + 1) % SMOLLM3_NOPE_STEP == 0;
    return true;
}

const model_arch arch_smollm3 = {
    .name = "smollm3",
    .rope = ROPE_NORMAL,
    .ffn = FFN_SWIGLU,
    .read_hparams = smollm3_hparams,
    .layer = layer_pre_norm,
};
