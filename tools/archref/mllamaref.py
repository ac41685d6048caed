#!/usr/bin/env python3
"""mllamaref: the mllama (Llama 3.2 Vision) text fixture and its reference, without llama.cpp
(which has no mllama). Standard library only.

    mllamaref.py OUT_DIR [--seed N]

writes OUT_DIR/mllama.gguf, a tiny random-weight mllama text model laid out as ollama's
converter writes llama3.2-vision (self-attention layers as llama's; cross-attention layers
with blk.N.cross_attn_{q,k,v,o}_proj, cross_attn_{q,k}_norm, the two gates
cross_attn_attn_gate and cross_attn_mlp_gate, and their own FFN; the image token "<|image|>"
last in the vocabulary, past output.weight's rows; token_embd.weight eight rows longer than
the output), and OUT_DIR/mllama.ref.txt in the format of tests/fixtures/arch's references.

The reference follows transformers' MllamaTextModel for a prompt without an image: a
cross-attention layer is skipped when there are no cross-attention states and none cached,
and the self-attention layers are Llama's (RMSNorm, RoPE with Llama 3's per-pair frequency
divisors from rope_freqs.weight, grouped-query attention, SwiGLU). RoPE rotates adjacent
pairs, as on the GGUF's q and k rows, which the converter permuted from transformers' halves.
Python floats (doubles) throughout; the logits are written with 9 significant digits.
"""
import argparse
import math
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import archgen  # noqa: E402

N_EMBD, N_HEAD, N_HEAD_KV, HEAD_DIM, N_FF = 64, 4, 2, 16, 96
N_LAYER, CROSS_LAYERS = 5, [1, 3]
EPS, ROPE_BASE = 1e-5, 500000.0
VOCAB_FROM = "tests/fixtures/arch/qwen2.gguf"
INPUT_TEXT = "The dog and the fox were in"
# qwen2.gguf's ids for INPUT_TEXT (tests/fixtures/arch/llama4.ref.txt, same vocabulary)
INPUT_IDS = [51, 257, 300, 285, 262, 298, 265, 260, 68, 220, 258]
N_GREEDY = 16


def spec_tensors(n_out):
    E, Q, KV = N_EMBD, N_HEAD * HEAD_DIM, N_HEAD_KV * HEAD_DIM
    self_layers = [il for il in range(N_LAYER) if il not in CROSS_LAYERS]
    sel, cross = {"layers": self_layers}, {"layers": CROSS_LAYERS}
    return [
        ["token_embd.weight", [E, n_out + 8], "normal", 1.0],
        ["output_norm.weight", [E], "norm"],
        ["output.weight", [E, n_out], "matrix", 3.0],
        ["rope_freqs.weight", [HEAD_DIM // 2], "norm", 2.0],
        ["blk.{L}.attn_norm.weight", [E], "norm"],
        ["blk.{L}.attn_q.weight", [E, Q], "matrix", 1.0, sel],
        ["blk.{L}.attn_k.weight", [E, KV], "matrix", 1.0, sel],
        ["blk.{L}.attn_v.weight", [E, KV], "matrix", 1.0, sel],
        ["blk.{L}.attn_output.weight", [Q, E], "matrix", 1.0, sel],
        ["blk.{L}.cross_attn_q_proj.weight", [E, Q], "matrix", 1.0, cross],
        ["blk.{L}.cross_attn_k_proj.weight", [E, KV], "matrix", 1.0, cross],
        ["blk.{L}.cross_attn_v_proj.weight", [E, KV], "matrix", 1.0, cross],
        ["blk.{L}.cross_attn_o_proj.weight", [Q, E], "matrix", 1.0, cross],
        ["blk.{L}.cross_attn_q_norm.weight", [HEAD_DIM], "norm", cross],
        ["blk.{L}.cross_attn_k_norm.weight", [HEAD_DIM], "norm", cross],
        ["blk.{L}.cross_attn_attn_gate", [1], "values", [0.7], cross],
        ["blk.{L}.cross_attn_mlp_gate", [1], "values", [-0.4], cross],
        ["blk.{L}.ffn_norm.weight", [E], "norm"],
        ["blk.{L}.ffn_gate.weight", [E, N_FF], "matrix", 1.0],
        ["blk.{L}.ffn_up.weight", [E, N_FF], "matrix", 1.0],
        ["blk.{L}.ffn_down.weight", [N_FF, E], "matrix", 1.0],
    ]


def metadata(vocab_kv):
    u32, f32 = archgen.T_U32, archgen.T_F32
    kv = {"general.architecture": (archgen.T_STR, b"mllama"),
          "general.name": (archgen.T_STR, b"archref-mllama"),
          "general.file_type": (u32, 0),
          "mllama.context_length": (u32, 256),
          "mllama.embedding_length": (u32, N_EMBD),
          "mllama.block_count": (u32, N_LAYER),
          "mllama.feed_forward_length": (u32, N_FF),
          "mllama.attention.head_count": (u32, N_HEAD),
          "mllama.attention.head_count_kv": (u32, N_HEAD_KV),
          "mllama.attention.layer_norm_rms_epsilon": (f32, EPS),
          "mllama.rope.freq_base": (f32, ROPE_BASE),
          "mllama.rope.dimension_count": (u32, HEAD_DIM),
          "mllama.attention.cross_attention_layers": (archgen.T_ARR, (archgen.T_I32, CROSS_LAYERS))}
    for key, value in vocab_kv.items():
        if key.startswith("tokenizer."):
            kv[key] = value
    # the image token, last, as in llama3.2-vision's vocabulary
    etype, tokens = kv["tokenizer.ggml.tokens"][1]
    kv["tokenizer.ggml.tokens"] = (archgen.T_ARR, (etype, tokens + [b"<|image|>"]))
    etype, types = kv["tokenizer.ggml.token_type"][1]
    kv["tokenizer.ggml.token_type"] = (archgen.T_ARR, (etype, types + [3]))
    return kv, len(tokens)


# --- the reference ---------------------------------------------------------------------------

def matvec(w, n_in, x):
    """GGUF [n_in, n_out]: n_out rows of n_in values."""
    return [sum(w[o * n_in + i] * x[i] for i in range(n_in)) for o in range(len(w) // n_in)]


def rmsnorm(x, w):
    r = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + EPS)
    return [v * r * g for v, g in zip(x, w)]


def rope(x, pos, factors):
    out = list(x)
    for h in range(len(x) // HEAD_DIM):
        for i in range(HEAD_DIM // 2):
            theta = pos * ROPE_BASE ** (-2.0 * i / HEAD_DIM) / factors[i]
            c, s = math.cos(theta), math.sin(theta)
            a, b = x[h * HEAD_DIM + 2 * i], x[h * HEAD_DIM + 2 * i + 1]
            out[h * HEAD_DIM + 2 * i] = a * c - b * s
            out[h * HEAD_DIM + 2 * i + 1] = a * s + b * c
    return out


def silu(v):
    return v / (1.0 + math.exp(-v))


class Model:
    def __init__(self, weights):
        self.w = weights
        self.cache = {il: ([], []) for il in range(N_LAYER)}

    def cross_layer(self, il, x, pos):
        """No image: transformers skips the layer (mllamavis.py's model has one)."""
        return x

    def step(self, token, pos):
        w = self.w
        x = list(w["token_embd.weight"][token * N_EMBD:(token + 1) * N_EMBD])
        for il in range(N_LAYER):
            if il in CROSS_LAYERS:
                x = self.cross_layer(il, x, pos)
                continue
            p = f"blk.{il}."
            h = rmsnorm(x, w[p + "attn_norm.weight"])
            q = rope(matvec(w[p + "attn_q.weight"], N_EMBD, h), pos, w["rope_freqs.weight"])
            k = rope(matvec(w[p + "attn_k.weight"], N_EMBD, h), pos, w["rope_freqs.weight"])
            v = matvec(w[p + "attn_v.weight"], N_EMBD, h)
            keys, values = self.cache[il]
            keys.append(k)
            values.append(v)
            attn = []
            for hq in range(N_HEAD):
                hk = hq // (N_HEAD // N_HEAD_KV)
                qh = q[hq * HEAD_DIM:(hq + 1) * HEAD_DIM]
                scores = [sum(a * b for a, b in zip(qh, kk[hk * HEAD_DIM:(hk + 1) * HEAD_DIM]))
                          / math.sqrt(HEAD_DIM) for kk in keys]
                top = max(scores)
                e = [math.exp(s - top) for s in scores]
                total = sum(e)
                for d in range(HEAD_DIM):
                    attn.append(sum(e[j] * values[j][hk * HEAD_DIM + d] for j in range(len(e)))
                                / total)
            o = matvec(w[p + "attn_output.weight"], N_HEAD * HEAD_DIM, attn)
            x = [a + b for a, b in zip(x, o)]
            h = rmsnorm(x, w[p + "ffn_norm.weight"])
            g = matvec(w[p + "ffn_gate.weight"], N_EMBD, h)
            u = matvec(w[p + "ffn_up.weight"], N_EMBD, h)
            d = matvec(w[p + "ffn_down.weight"], N_FF, [silu(a) * b for a, b in zip(g, u)])
            x = [a + b for a, b in zip(x, d)]
        return matvec(w["output.weight"], N_EMBD, rmsnorm(x, w["output_norm.weight"]))


def fmt(values):
    return " ".join(f"{v:.9g}" for v in values)


def main():
    ap = argparse.ArgumentParser(description="mllama text fixture and pure-Python reference")
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=3211)
    a = ap.parse_args()

    kv, n_out = metadata(archgen.read_kv(VOCAB_FROM))
    tensors = archgen.expand_tensors({"n_layers": N_LAYER, "tensors": spec_tensors(n_out)})
    archgen.write_gguf(os.path.join(a.out_dir, "mllama.gguf"), kv, tensors, a.seed)
    # the values as stored: F32 rounding of archgen's draws
    weights = {}
    for name, shape, init, args, _ in tensors:
        values = archgen.tensor_values(a.seed, name, shape, init, args)
        weights[name] = [struct.unpack("<f", struct.pack("<f", v))[0]
                         for v in values]

    model = Model(weights)
    all_logits = [model.step(t, pos) for pos, t in enumerate(INPUT_IDS)]
    logits, steps, greedy, gaps = all_logits[-1], [], [], []
    for s in range(N_GREEDY):
        steps.append(logits)
        best = max(range(n_out), key=lambda i: (logits[i], -i))
        second = max(v for i, v in enumerate(logits) if i != best)
        greedy.append(best)
        gaps.append(logits[best] - second)
        if s + 1 < N_GREEDY:
            logits = model.step(best, len(INPUT_IDS) + s)

    with open(os.path.join(a.out_dir, "mllama.ref.txt"), "w") as f:
        f.write("# archref v1 mllama: arch mllama, model mllama\n")
        f.write("# pure Python through tools/archref/mllamaref.py: transformers' MllamaTextModel "
                f"without an image, cross-attention layers {CROSS_LAYERS} skipped\n")
        f.write(f'# input_text: "{INPUT_TEXT}"\n')
        f.write("arch mllama\nmodel mllama.gguf\n")
        f.write(f"input_ids {len(INPUT_IDS)} {' '.join(map(str, INPUT_IDS))}\n")
        f.write(f"# greedy_min_top2_gap {min(gaps):.6f}\n")
        f.write(f"greedy_ids {N_GREEDY} {' '.join(map(str, greedy))}\n")
        f.write(f"last_logits {n_out} {fmt(all_logits[-1])}\n")
        f.write(f"all_logits {len(INPUT_IDS)} {n_out}\n")
        for row in all_logits:
            f.write(fmt(row) + "\n")
        f.write(f"greedy_step_logits {N_GREEDY} {n_out}\n")
        for row in steps:
            f.write(fmt(row) + "\n")


if __name__ == "__main__":
    main()
