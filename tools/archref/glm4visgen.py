#!/usr/bin/env python3
"""glm4visgen: the tiny random-weight glm4 (M-RoPE) + glm4v fixtures for tests/fixtures/vision,
shaped like GLM-OCR, written with archgen.py's writer (standard library only).

    glm4visgen.py OUT_DIR [--seed N]

Writes OUT_DIR/glm4v-text.gguf, a glm4 text model as llama.cpp's converter writes GLM-OCR's:
sandwich norms, q/k/v biases, gate and up fused in ffn_up, full-width M-RoPE
(rope.dimension_sections), and a trailing multi-token-prediction layer
(nextn_predict_layers 1, its nextn.* tensors) that the forward pass leaves out; its BPE
vocabulary is tests/fixtures/arch/glm4.gguf's with GLM's control tokens appended ([gMASK],
<sop>, <|user|>, <|assistant|>, <|begin_of_image|>, <|end_of_image|>) and pre-tokenizer
chatglm-bpe. And OUT_DIR/glm4v-mmproj.gguf, a clip file with projector type "glm4v" as the
converter writes GLM-OCR's tower: two F16 patch kernels with a bias, RMSNorm blocks with a fused
attn_qkv, per-head q/k norms and a SiLU-gated MLP (clip.use_silu), a final v.post_ln, no
learned position table and no v.norm_embd; the merger's 2 x 2 convolution
(mm.patch_merger), mm.model.fc, the LayerNorm mm.post_norm and the gated mm.gate/up/down.
And OUT_DIR/glm4v-quick-mmproj.gguf, the same tower without clip.use_silu, whose MLPs llama.cpp
then gates with quick GELU; it is only needed to make a reference. And
OUT_DIR/glm4v-p14-mmproj.gguf, the tower with GLM-OCR's 14-pixel patches (588 inputs a patch,
not a multiple of 8, which llama.cpp's F16 kernel leaves to its vector dot).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import archgen  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB = os.path.join(HERE, "..", "..", "tests", "fixtures", "arch", "glm4.gguf")
MARKS = [b"[gMASK]", b"<sop>", b"<|user|>", b"<|assistant|>", b"<|begin_of_image|>",
         b"<|end_of_image|>"]
CONTROL = 3

T = 32       # text width
TL = 3       # text layers, then one prediction layer
TF = 64      # text MLP width
E = 32       # tower width
F = 64       # tower MLP width
PATCH = 4    # patch side
VL = 2       # tower layers
C = 48       # the merger MLP's width


def f32(shape, init, *args):
    return (shape, init, list(args), "f32")


def text_model(path, seed):
    u32, f, s = archgen.T_U32, archgen.T_F32, archgen.T_STR
    kv = {"general.architecture": (s, b"glm4"),
          "general.name": (s, f"glm4visgen-text-s{seed}".encode()),
          "general.file_type": (u32, 0),
          "glm4.context_length": (u32, 256),
          "glm4.embedding_length": (u32, T),
          "glm4.block_count": (u32, TL + 1),
          "glm4.nextn_predict_layers": (u32, 1),
          "glm4.feed_forward_length": (u32, TF),
          "glm4.attention.head_count": (u32, 4),
          "glm4.attention.head_count_kv": (u32, 2),
          "glm4.attention.key_length": (u32, 16),
          "glm4.attention.value_length": (u32, 16),
          "glm4.attention.layer_norm_rms_epsilon": (f, 1e-5),
          "glm4.rope.freq_base": (f, 10000.0),
          "glm4.rope.dimension_count": (u32, 16),
          "glm4.rope.dimension_sections": (archgen.T_ARR, (archgen.T_I32, [2, 3, 3, 0]))}
    vocab = {k: v for k, v in archgen.read_kv(VOCAB).items() if k.startswith("tokenizer.")}
    tokens = list(vocab["tokenizer.ggml.tokens"][1][1]) + MARKS
    types = list(vocab["tokenizer.ggml.token_type"][1][1]) + [CONTROL] * len(MARKS)
    vocab["tokenizer.ggml.tokens"] = (archgen.T_ARR, (archgen.T_STR, tokens))
    vocab["tokenizer.ggml.token_type"] = (archgen.T_ARR, (archgen.T_I32, types))
    vocab["tokenizer.ggml.pre"] = (archgen.T_STR, b"chatglm-bpe")
    kv.update(vocab)
    V = len(tokens)
    t = [("token_embd.weight",) + f32([T, V], "normal", 1.0),
         ("output_norm.weight",) + f32([T], "norm"),
         ("output.weight",) + f32([T, V], "matrix", 3.0)]
    for il in range(TL + 1):
        n = f"blk.{il}."
        t += [(n + "attn_norm.weight",) + f32([T], "norm"),
              (n + "attn_q.weight",) + f32([T, 64], "matrix", 1.0),
              (n + "attn_q.bias",) + f32([64], "bias"),
              (n + "attn_k.weight",) + f32([T, 32], "matrix", 1.0),
              (n + "attn_k.bias",) + f32([32], "bias"),
              (n + "attn_v.weight",) + f32([T, 32], "matrix", 1.0),
              (n + "attn_v.bias",) + f32([32], "bias"),
              (n + "attn_output.weight",) + f32([64, T], "matrix", 1.0),
              (n + "post_attention_norm.weight",) + f32([T], "norm"),
              (n + "ffn_norm.weight",) + f32([T], "norm"),
              (n + "ffn_up.weight",) + f32([T, 2 * TF], "matrix", 1.0),
              (n + "ffn_down.weight",) + f32([TF, T], "matrix", 1.0),
              (n + "post_ffw_norm.weight",) + f32([T], "norm")]
        if il == TL:
            t += [(n + "nextn.eh_proj.weight",) + f32([2 * T, T], "matrix", 1.0),
                  (n + "nextn.enorm.weight",) + f32([T], "norm"),
                  (n + "nextn.hnorm.weight",) + f32([T], "norm")]
    archgen.write_gguf(path, kv, t, seed)


def mmproj(path, seed, silu=True, patch=PATCH):
    u32, f, s, b = archgen.T_U32, archgen.T_F32, archgen.T_STR, archgen.T_BOOL
    arr = lambda v: (archgen.T_ARR, (f, v))  # noqa: E731
    kv = {"general.architecture": (s, b"clip"),
          "general.name": (s, f"glm4visgen-glm4v-s{seed}".encode()),
          "general.file_type": (u32, 1),
          "clip.has_vision_encoder": (b, True),
          "clip.projector_type": (s, b"glm4v"),
          "clip.use_silu": (b, True),
          "clip.vision.image_size": (u32, 336),
          "clip.vision.patch_size": (u32, patch),
          "clip.vision.embedding_length": (u32, E),
          "clip.vision.feed_forward_length": (u32, F),
          "clip.vision.block_count": (u32, VL),
          "clip.vision.projection_dim": (u32, T),
          "clip.vision.spatial_merge_size": (u32, 2),
          "clip.vision.attention.head_count": (u32, 2),
          "clip.vision.attention.layer_norm_epsilon": (f, 1e-5),
          "clip.vision.image_mean": arr([0.48145466, 0.4578275, 0.40821073]),
          "clip.vision.image_std": arr([0.26862954, 0.26130258, 0.27577711])}
    if not silu:
        del kv["clip.use_silu"]
    t = [("v.patch_embd.weight", [patch, patch, 3, E], "matrix", [1.0], "f16"),
         ("v.patch_embd.weight.1", [patch, patch, 3, E], "matrix", [1.0], "f16"),
         ("v.patch_embd.bias",) + f32([E], "bias")]
    for il in range(VL):
        p = f"v.blk.{il}."
        t += [(p + "ln1.weight",) + f32([E], "norm"),
              (p + "attn_qkv.weight",) + f32([E, 3 * E], "matrix", 1.0),
              (p + "attn_qkv.bias",) + f32([3 * E], "bias"),
              (p + "attn_q_norm.weight",) + f32([E // 2], "norm"),
              (p + "attn_k_norm.weight",) + f32([E // 2], "norm"),
              (p + "attn_out.weight",) + f32([E, E], "matrix", 1.0),
              (p + "ln2.weight",) + f32([E], "norm"),
              (p + "ffn_gate.weight",) + f32([E, F], "matrix", 1.0),
              (p + "ffn_up.weight",) + f32([E, F], "matrix", 1.0),
              (p + "ffn_down.weight",) + f32([F, E], "matrix", 1.0)]
    t += [("v.post_ln.weight",) + f32([E], "norm"),
          ("mm.patch_merger.weight",) + f32([2, 2, E, T], "matrix", 0.5),
          ("mm.patch_merger.bias",) + f32([T], "bias"),
          ("mm.model.fc.weight",) + f32([T, T], "matrix", 1.0),
          ("mm.post_norm.weight",) + f32([T], "norm"),
          ("mm.post_norm.bias",) + f32([T], "bias"),
          ("mm.gate.weight",) + f32([T, C], "matrix", 1.0),
          ("mm.up.weight",) + f32([T, C], "matrix", 1.0),
          ("mm.down.weight",) + f32([C, T], "matrix", 1.0)]
    archgen.write_gguf(path, kv, t, seed)


def main():
    ap = argparse.ArgumentParser(description="tiny glm4 + glm4v vision fixtures")
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=4670)
    a = ap.parse_args()
    text_model(os.path.join(a.out_dir, "glm4v-text.gguf"), a.seed)
    mmproj(os.path.join(a.out_dir, "glm4v-mmproj.gguf"), a.seed + 1)
    mmproj(os.path.join(a.out_dir, "glm4v-quick-mmproj.gguf"), a.seed + 1, silu=False)
    # seed + 7: + 2 left a greedy gap of 0.002 on glm4v-p14.png
    mmproj(os.path.join(a.out_dir, "glm4v-p14-mmproj.gguf"), a.seed + 7, patch=14)


if __name__ == "__main__":
    main()
