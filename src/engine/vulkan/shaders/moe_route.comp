#version 450
// A mixture of experts' routing, one token a workgroup of one invocation (a token's
// experts are few: the serial choice is the CPU's, tie for tie). From the token's router
// logits (in place: they become its probabilities or scores in modes 0 and 2), its n_used
// experts, best first, into ids, and their weights into weights:
//   mode 0: softmax over the experts, the n_used most probable (the lower index first among
//           equals), their probabilities divided by their sum;
//   mode 1 (gpt-oss): the n_used largest logits, weighted by the softmax over those alone;
//   mode 2 (deepseek2's scored router): sigmoid (flag 1) or softmax scores; each expert's
//           selection score is its score plus its bias (flag 4, binding 1); with n_groups > 1
//           only the experts of the n_group_used groups whose two best selection scores sum
//           highest stay; the n_used best selection scores win, weighted by their scores,
//           divided by their sum (at least 2^-14) under flag 2, and times scale.
layout(local_size_x = 1) in;
layout(std430, binding = 0) buffer Logits { float logits[]; };
layout(std430, binding = 1) readonly buffer Bias { float bias[]; };
layout(std430, binding = 2) buffer Ids { uint ids[]; };
layout(std430, binding = 3) writeonly buffer Weights { float weights[]; };
layout(push_constant) uniform Params {
    uint n_expert, n_used, mode, n_groups, n_group_used, flags;
    float scale;
} p;

// The host caps the experts at MODEL_MAX_EXPERTS (1024).
const uint MAX_EXPERTS = 1024u;
shared float selection[MAX_EXPERTS];
shared float group_score[MAX_EXPERTS];
shared bool group_kept[MAX_EXPERTS];

void softmax_in_place(uint row)
{
    float top = -1.0 / 0.0;
    for (uint e = 0u; e < p.n_expert; e++)
        top = max(top, logits[row + e]);
    float sum = 0.0;
    for (uint e = 0u; e < p.n_expert; e++) {
        float v = exp(logits[row + e] - top);
        logits[row + e] = v;
        sum += v;
    }
    float inv = 1.0 / sum;
    for (uint e = 0u; e < p.n_expert; e++)
        logits[row + e] *= inv;
}

// Mode 2's selection scores, the experts of dropped groups at -infinity.
void select_scored(uint row)
{
    if ((p.flags & 1u) != 0u) {
        for (uint e = 0u; e < p.n_expert; e++)
            logits[row + e] = 1.0 / (1.0 + exp(-logits[row + e]));
    } else {
        softmax_in_place(row);
    }
    for (uint e = 0u; e < p.n_expert; e++)
        selection[e] = logits[row + e] + ((p.flags & 4u) != 0u ? bias[e] : 0.0);
    if (p.n_groups <= 1u)
        return;
    uint size = p.n_expert / p.n_groups;
    for (uint g = 0u; g < p.n_groups; g++) {
        float best = -1.0 / 0.0, second = -1.0 / 0.0;
        for (uint e = g * size; e < (g + 1u) * size; e++) {
            if (selection[e] > best) {
                second = best;
                best = selection[e];
            } else if (selection[e] > second) {
                second = selection[e];
            }
        }
        group_score[g] = size > 1u ? best + second : best;
        group_kept[g] = false;
    }
    for (uint j = 0u; j < p.n_group_used; j++) {
        uint top = p.n_groups;
        for (uint g = 0u; g < p.n_groups; g++)
            if (!group_kept[g] && (top == p.n_groups || group_score[g] > group_score[top]))
                top = g;
        group_kept[top] = true;
    }
    for (uint e = 0u; e < p.n_expert; e++)
        if (!group_kept[e / size])
            selection[e] = -1.0 / 0.0;
}

float choice_score(uint row, uint e)
{
    return p.mode == 2u ? selection[e] : logits[row + e];
}

void main()
{
    uint t = gl_WorkGroupID.x, row = t * p.n_expert, out0 = t * p.n_used;
    if (p.mode == 0u)
        softmax_in_place(row);
    else if (p.mode == 2u)
        select_scored(row);
    for (uint j = 0u; j < p.n_used; j++) {
        uint best = p.n_expert;
        for (uint e = 0u; e < p.n_expert; e++) {
            bool taken = false;
            for (uint i = 0u; i < j; i++)
                taken = taken || ids[out0 + i] == e;
            if (!taken && (best == p.n_expert || choice_score(row, e) > choice_score(row, best)))
                best = e;
        }
        ids[out0 + j] = best;
    }
    float sum = 0.0;
    float top = logits[row + ids[out0]];
    for (uint j = 0u; j < p.n_used; j++) {
        float v = logits[row + ids[out0 + j]];
        v = p.mode == 1u ? exp(v - top) : v;
        weights[out0 + j] = v;
        sum += v;
    }
    if (p.mode == 0u) {
        for (uint j = 0u; j < p.n_used; j++)
            weights[out0 + j] /= sum;
    } else if (p.mode == 1u) {
        float inv = 1.0 / sum;
        for (uint j = 0u; j < p.n_used; j++)
            weights[out0 + j] *= inv;
    } else {
        sum = max(sum, 6.103515625e-5);
        for (uint j = 0u; j < p.n_used; j++) {
            float w = logits[row + ids[out0 + j]];
            if ((p.flags & 2u) != 0u)
                w /= sum;
            weights[out0 + j] = w * p.scale;
        }
    }
}
