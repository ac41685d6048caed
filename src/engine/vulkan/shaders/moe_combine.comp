#version 450
// Each token's experts' outputs weighted and summed, from its most probable expert on (the
// CPU's order): out[t] = sum over j of weights[t][j] * experts[row of pair t * n_used + j],
// rows of n floats, grid-stride over n_tokens * n. A pair's row is its own, or with
// slotted, the slot moe_group.comp gave it (slot_of).
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer Experts { float experts[]; };
layout(std430, binding = 1) readonly buffer Weights { float weights[]; };
layout(std430, binding = 2) readonly buffer SlotOf { uint slot_of[]; };
layout(std430, binding = 4) writeonly buffer Output { float o[]; };
layout(push_constant) uniform Params { uint count, n, n_used, slotted; } p;

uint row_of(uint pair)
{
    return p.slotted != 0u ? slot_of[pair] : pair;
}

void main()
{
    for (uint i = gl_GlobalInvocationID.x; i < p.count; i += gl_NumWorkGroups.x * 256u) {
        uint t = i / p.n, c = i % p.n, pair = t * p.n_used;
        float sum = experts[row_of(pair) * p.n + c] * weights[pair];
        for (uint j = 1u; j < p.n_used; j++)
            sum += experts[row_of(pair + j) * p.n + c] * weights[pair + j];
        o[i] = sum;
    }
}
