#version 450
// A mixture of experts' routing, one token a workgroup of one invocation (a token's
// experts are few: the serial choice is the CPU's, tie for tie). From the token's router
// logits (in place: they become its probabilities in the plain mode), its n_used experts,
// most probable first, into ids, and their weights into weights:
//   mode 0: softmax over the experts, the n_used most probable (the lower index first among
//           equals), their probabilities divided by their sum;
//   mode 1 (gpt-oss): the n_used largest logits, weighted by the softmax over those alone.
layout(local_size_x = 1) in;
layout(std430, binding = 0) buffer Logits { float logits[]; };
layout(std430, binding = 2) buffer Ids { uint ids[]; };
layout(std430, binding = 3) writeonly buffer Weights { float weights[]; };
layout(push_constant) uniform Params { uint n_expert, n_used, mode; } p;

void main()
{
    uint t = gl_WorkGroupID.x, row = t * p.n_expert, out0 = t * p.n_used;
    if (p.mode == 0u) {
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
    for (uint j = 0u; j < p.n_used; j++) {
        uint best = p.n_expert;
        for (uint e = 0u; e < p.n_expert; e++) {
            bool taken = false;
            for (uint i = 0u; i < j; i++)
                taken = taken || ids[out0 + i] == e;
            if (!taken && (best == p.n_expert || logits[row + e] > logits[row + best]))
                best = e;
        }
        ids[out0 + j] = best;
    }
    float sum = 0.0;
    float top = logits[row + ids[out0]];
    for (uint j = 0u; j < p.n_used; j++) {
        float v = logits[row + ids[out0 + j]];
        v = p.mode == 0u ? v : exp(v - top);
        weights[out0 + j] = v;
        sum += v;
    }
    if (p.mode == 0u) {
        for (uint j = 0u; j < p.n_used; j++)
            weights[out0 + j] /= sum;
    } else {
        float inv = 1.0 / sum;
        for (uint j = 0u; j < p.n_used; j++)
            weights[out0 + j] *= inv;
    }
}
