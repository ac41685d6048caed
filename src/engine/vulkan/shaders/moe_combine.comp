#version 450
// Each token's experts' outputs weighted and summed, from its most probable expert on (the
// CPU's order): out[t] = sum over j of weights[t][j] * experts[row of pair t * n_used + j],
// rows of n floats, grid-stride over count = n_tokens * n; unweighted (mode 1), the rows
// summed alone, their inputs having carried the weights. Mode 2 goes the other way, before
// the experts, for llama4's experts that weight their input: each pair's input row is its
// token's row times the pair's weight, out[row of pair p] = rows[p / n_used] * weights[p],
// over count = n_pairs * n. A pair's row is its own, or with slotted, the slot
// moe_group.comp gave it (slot_of).
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Rows { float rows[]; };
layout(std430, binding = 1) readonly buffer Weights { float weights[]; };
layout(std430, binding = 2) readonly buffer SlotOf { uint slot_of[]; };
layout(std430, binding = 4) writeonly buffer Output { float o[]; };
layout(push_constant) uniform Params { uint count, n, n_used, slotted, mode; } p;

const uint COMBINE = 0u, COMBINE_UNWEIGHTED = 1u, WEIGH_INPUTS = 2u;

uint row_of(uint pair)
{
    return p.slotted != 0u ? slot_of[pair] : pair;
}

void main()
{
    for (uint i = gl_GlobalInvocationID.x; i < p.count; i += gl_NumWorkGroups.x * 256u) {
        uint c = i % p.n;
        if (p.mode == WEIGH_INPUTS) {
            uint pair = i / p.n;
            o[row_of(pair) * p.n + c] = rows[(pair / p.n_used) * p.n + c] * weights[pair];
            continue;
        }
        uint pair = (i / p.n) * p.n_used;
        float sum = rows[row_of(pair) * p.n + c];
        if (p.mode == COMBINE)
            sum *= weights[pair];
        for (uint j = 1u; j < p.n_used; j++) {
            float r = rows[row_of(pair + j) * p.n + c];
            sum += p.mode == COMBINE ? r * weights[pair + j] : r;
        }
        o[i] = sum;
    }
}
