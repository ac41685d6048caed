#!/usr/bin/env python3
"""gemma4visgen: the tiny random-weight gemma4 + gemma4v fixtures for tests/fixtures/vision,
written with archgen.py's writer (standard library only).

    gemma4visgen.py OUT_DIR [--seed N]

Writes OUT_DIR/gemma4v-text.gguf, a gemma4 text model shaped like the E2B/E4B ones (sliding
and global layers of different head widths, per-layer token inputs, the last layers sharing
the KV cache of earlier ones) whose SentencePiece vocabulary is gemma3.gguf's with the two
texts mtmd puts around a gemma4v image ("<|image>", "<image|>") appended as control tokens;
OUT_DIR/gemma4v-mmproj.gguf, a clip file with projector type "gemma4v" laid out as llama.cpp's
converter writes one (position table [width, rows, 2], the standardisation vectors, clipped
linears' bounds as one-value F32 tensors, the patch kernel in F16); and
OUT_DIR/gemma4v-noclamp-mmproj.gguf, the same tower without the bounds, which is what ollama's
older single files amount to for its engine (they pack the bounds into v.clamp_data, which
its engine now leaves unread). The last is only needed to make a reference.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import archgen  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB = os.path.join(HERE, "..", "..", "tests", "fixtures", "arch", "gemma3.gguf")
MARKS = [b"<|image>", b"<image|>"]
CONTROL = 3

T = 32       # text width
L = 4        # text layers: sliding, global, sliding, global; the last two share KV
P = 4        # per-layer input width
E = 32       # tower width
F = 64       # tower MLP width
PATCH = 4    # patch side
MERGE = 3    # patches pooled per side
POS = 32     # position rows per axis
VL = 2       # tower layers

# Clipped linears' bounds (input_min, input_max, output_min, output_max) where the file has
# them: some tight enough to bite on the fixture's values, the rest left out (unbounded).
CLAMPS = {"v.blk.0.attn_q": (-2.0, 2.0, None, None),
          "v.blk.0.ffn_down": (-0.25, 0.25, None, None),
          "v.blk.1.attn_out": (None, None, -0.4, 0.4),
          "v.blk.1.ffn_up": (-1.5, 1.5, -1.0, 1.0),
          "mm.input_projection": (-2.5, 2.5, -1.5, 1.5)}
BOUNDS = ("input_min", "input_max", "output_min", "output_max")


def f32(shape, init, *args):
    return (shape, init, list(args), "f32")


def text_model(path, seed):
    u32, f, s, b = archgen.T_U32, archgen.T_F32, archgen.T_STR, archgen.T_BOOL
    arr = lambda t, v: (archgen.T_ARR, (t, v))  # noqa: E731
    kv = {"general.architecture": (s, b"gemma4"),
          "general.name": (s, f"gemma4visgen-text-s{seed}".encode()),
          "general.file_type": (u32, 0),
          "gemma4.context_length": (u32, 256),
          "gemma4.embedding_length": (u32, T),
          "gemma4.block_count": (u32, L),
          "gemma4.feed_forward_length": (u32, 64),
          "gemma4.attention.head_count": (u32, 2),
          "gemma4.attention.head_count_kv": arr(u32, [1, 1, 1, 1]),
          "gemma4.attention.key_length": (u32, 16),
          "gemma4.attention.value_length": (u32, 16),
          "gemma4.attention.key_length_swa": (u32, 8),
          "gemma4.attention.value_length_swa": (u32, 8),
          "gemma4.rope.dimension_count": (u32, 16),
          "gemma4.rope.dimension_count_swa": (u32, 8),
          "gemma4.rope.freq_base": (f, 1000000.0),
          "gemma4.rope.freq_base_swa": (f, 10000.0),
          "gemma4.attention.sliding_window": (u32, 8),
          "gemma4.attention.sliding_window_pattern": arr(b, [True, False, True, False]),
          "gemma4.attention.shared_kv_layers": (u32, 2),
          "gemma4.embedding_length_per_layer_input": (u32, P),
          "gemma4.attention.layer_norm_rms_epsilon": (f, 1e-6),
          "gemma4.final_logit_softcapping": (f, 30.0)}
    vocab = {k: v for k, v in archgen.read_kv(VOCAB).items() if k.startswith("tokenizer.")}
    tokens = list(vocab["tokenizer.ggml.tokens"][1][1]) + MARKS
    scores = list(vocab["tokenizer.ggml.scores"][1][1]) + [0.0] * len(MARKS)
    types = list(vocab["tokenizer.ggml.token_type"][1][1]) + [CONTROL] * len(MARKS)
    vocab["tokenizer.ggml.tokens"] = (archgen.T_ARR, (archgen.T_STR, tokens))
    vocab["tokenizer.ggml.scores"] = (archgen.T_ARR, (archgen.T_F32, scores))
    vocab["tokenizer.ggml.token_type"] = (archgen.T_ARR, (archgen.T_I32, types))
    kv.update(vocab)
    V = len(tokens)
    t = [("token_embd.weight",) + f32([T, V], "normal", 0.3),
         ("output_norm.weight",) + f32([T], "const", 1.0),
         # an output matrix of its own: tied to the token table, the tiny model repeats one
         # token for ever, which would make the greedy check a weak one
         ("output.weight",) + f32([T, V], "matrix", 2.0),
         # global layers turn a quarter of their head (llama.cpp's partial rotary factor)
         ("rope_freqs.weight",) + f32([8], "values", [1, 1] + [1e30] * 6),
         ("per_layer_token_embd.weight",) + f32([P * L, V], "normal", 0.3),
         ("per_layer_model_proj.weight",) + f32([T, P * L], "matrix", 1.0),
         ("per_layer_proj_norm.weight",) + f32([P], "norm")]
    for il in range(L):
        n = f"blk.{il}."
        d = 8 if il % 2 == 0 else 16
        t += [(n + "attn_norm.weight",) + f32([T], "norm"),
              (n + "attn_q.weight",) + f32([T, 2 * d], "matrix", 1.0),
              (n + "attn_q_norm.weight",) + f32([d], "norm", 0.5)]
        if il < 2:  # layers 2 and 3 take layers 0's and 1's keys and values
            t += [(n + "attn_k.weight",) + f32([T, d], "matrix", 1.0),
                  (n + "attn_v.weight",) + f32([T, d], "matrix", 1.0),
                  (n + "attn_k_norm.weight",) + f32([d], "norm", 0.5)]
        t += [(n + "attn_output.weight",) + f32([2 * d, T], "matrix", 1.0),
              (n + "post_attention_norm.weight",) + f32([T], "norm"),
              (n + "ffn_norm.weight",) + f32([T], "norm"),
              (n + "ffn_gate.weight",) + f32([T, 64], "matrix", 1.0),
              (n + "ffn_up.weight",) + f32([T, 64], "matrix", 1.0),
              (n + "ffn_down.weight",) + f32([64, T], "matrix", 1.0),
              (n + "post_ffw_norm.weight",) + f32([T], "norm"),
              (n + "inp_gate.weight",) + f32([T, P], "matrix", 0.3),
              (n + "proj.weight",) + f32([P, T], "matrix", 1.0),
              (n + "post_norm.weight",) + f32([T], "norm"),
              (n + "layer_output_scale.weight",) + f32([1], "norm")]
    archgen.write_gguf(path, kv, t, seed)


def mmproj(path, seed, clamps):
    u32, f, s, b = archgen.T_U32, archgen.T_F32, archgen.T_STR, archgen.T_BOOL
    arr = lambda v: (archgen.T_ARR, (f, v))  # noqa: E731
    kv = {"general.architecture": (s, b"clip"),
          "general.name": (s, f"gemma4visgen-gemma4v-s{seed}".encode()),
          "general.file_type": (u32, 1),
          "clip.has_vision_encoder": (b, True),
          "clip.projector_type": (s, b"gemma4v"),
          "clip.vision.image_size": (u32, 224),
          "clip.vision.patch_size": (u32, PATCH),
          "clip.vision.embedding_length": (u32, E),
          "clip.vision.feed_forward_length": (u32, F),
          "clip.vision.block_count": (u32, VL),
          "clip.vision.projection_dim": (u32, T),
          "clip.vision.projector.scale_factor": (u32, MERGE),
          "clip.vision.attention.head_count": (u32, 2),
          "clip.vision.attention.layer_norm_epsilon": (f, 1e-6),
          "clip.vision.image_mean": arr([0.0, 0.0, 0.0]),
          "clip.vision.image_std": arr([1.0, 1.0, 1.0])}
    t = [("v.patch_embd.weight", [PATCH, PATCH, 3, E], "matrix", [1.0], "f16"),
         ("v.position_embd.weight",) + f32([E, POS, 2], "normal", 0.5)]
    for il in range(VL):
        p = f"v.blk.{il}."
        t += [(p + "ln1.weight",) + f32([E], "norm"),
              (p + "attn_q.weight",) + f32([E, E], "matrix", 1.0),
              (p + "attn_k.weight",) + f32([E, E], "matrix", 1.0),
              (p + "attn_v.weight",) + f32([E, E], "matrix", 1.0),
              (p + "attn_q_norm.weight",) + f32([E // 2], "norm"),
              (p + "attn_k_norm.weight",) + f32([E // 2], "norm"),
              (p + "attn_out.weight",) + f32([E, E], "matrix", 1.0),
              (p + "attn_post_norm.weight",) + f32([E], "norm"),
              (p + "ln2.weight",) + f32([E], "norm"),
              (p + "ffn_gate.weight",) + f32([E, F], "matrix", 1.0),
              (p + "ffn_up.weight",) + f32([E, F], "matrix", 1.0),
              (p + "ffn_down.weight",) + f32([F, E], "matrix", 1.0),
              (p + "ffn_post_norm.weight",) + f32([E], "norm"),
              (p + "out_scale.weight",) + f32([1], "norm")]
    t += [("v.std_bias",) + f32([E], "bias", 0.5),
          ("v.std_scale",) + f32([E], "norm"),
          ("mm.input_projection.weight",) + f32([E, T], "matrix", 1.0)]
    if clamps:
        for linear, bounds in CLAMPS.items():
            for name, value in zip(BOUNDS, bounds):
                if value is not None:
                    t.append((f"{linear}.{name}",) + f32([1], "const", value))
    archgen.write_gguf(path, kv, t, seed)


def main():
    ap = argparse.ArgumentParser(description="tiny gemma4 + gemma4v vision fixtures")
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=4400)
    a = ap.parse_args()
    text_model(os.path.join(a.out_dir, "gemma4v-text.gguf"), a.seed)
    mmproj(os.path.join(a.out_dir, "gemma4v-mmproj.gguf"), a.seed + 1, True)
    mmproj(os.path.join(a.out_dir, "gemma4v-noclamp-mmproj.gguf"), a.seed + 1, False)


if __name__ == "__main__":
    main()
