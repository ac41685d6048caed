#version 450
// In place over n elements (grid-stride): op 0 x += y, 1 x *= y, 2 x *= scale. y repeats
// every y_n elements (a weight vector applied to every row), y_n = n for plain operands.
// op 3: x *= y[i / y_n], a value per row of y_n elements. op 4: x = relu(x)², y unread (as
// the CPU's block_relu_sqr: anything not above 0, a NaN too, becomes 0). op 5: x *= sigmoid(y)
// (qwen35's gate on its attention's output). op 6: x = gelu(x) through erf, y unread (mllama's
// vision MLP), erf by Abramowitz and Stegun's 7.1.26, within 1.5e-7 of it. op 7: x =
// max(min(x, hi), scale), y unread (gemma4v's clipped linears). op 8: x = tanh(x), y unread
// (gemma3n's AltUp router). op 9: x *= softplus(y[i / y_n]), a gate per group of y_n elements
// (laguna's on its attention's output: a head's values, or y_n = 1 each value; the CPU's
// softplus, linear above 20).
layout(local_size_x = 256) in;
layout(std430, binding = 0) buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Y { float y[]; };
layout(push_constant) uniform Params { uint n, y_n, op; float scale, hi; } p;

void main()
{
    for (uint i = gl_GlobalInvocationID.x; i < p.n; i += gl_NumWorkGroups.x * 256u) {
        if (p.op == 0u)
            x[i] += y[i % p.y_n];
        else if (p.op == 1u)
            x[i] *= y[i % p.y_n];
        else if (p.op == 3u)
            x[i] *= y[i / p.y_n];
        else if (p.op == 4u) {
            float v = x[i] > 0.0 ? x[i] : 0.0;
            x[i] = v * v;
        }
        else if (p.op == 5u)
            x[i] *= 1.0 / (1.0 + exp(-y[i % p.y_n]));
        else if (p.op == 6u) {
            float v = x[i], z = abs(v) * 0.70710678118654752;
            float t = 1.0 / (1.0 + 0.3275911 * z);
            float poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 +
                         t * (-1.453152027 + t * 1.061405429))));
            float e = 1.0 - poly * exp(-z * z);
            x[i] = 0.5 * v * (1.0 + (v < 0.0 ? -e : e));
        }
        else if (p.op == 7u)
            x[i] = max(min(x[i], p.hi), p.scale);
        else if (p.op == 8u)
            x[i] = tanh(x[i]);
        else if (p.op == 9u) {
            float g = y[i / p.y_n];
            x[i] *= g > 20.0 ? g : log(1.0 + exp(g));
        }
        else
            x[i] *= p.scale;
    }
}
