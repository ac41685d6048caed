#!/usr/bin/env python3
"""minicpmvgen: the tiny random-weight minicpm-v fixture pair for tests/fixtures/vision, written
with archgen.py's writer (standard library only).

    minicpmvgen.py OUT_DIR [--seed N]

Writes OUT_DIR/minicpmv-text.gguf, a qwen2 text model whose byte-level BPE vocabulary is
qwen25vl-text.gguf's with the four texts mtmd puts around a minicpm-v image and its slices
("<image>", "</image>", "<slice>", "</slice>") appended as control tokens, and
OUT_DIR/minicpmv-mmproj.gguf, a clip file with projector type "resampler" (minicpmv_version
3, MiniCPM-V 2.6's layout): a SigLIP tower and the resampler. The resampler's heads are 128
wide in llama.cpp whatever the file says, so the text model is 128 wide. The tower's
position table has the 70 x 70 rows llama.cpp's bucketed lookup indexes; it is stored as
F16 (it is only looked up) to keep the file small, and so is the patch kernel (see below).
"""
import argparse
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import archgen  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB = os.path.join(HERE, "..", "..", "tests", "fixtures", "vision", "qwen25vl-text.gguf")
MARKS = [b"<image>", b"</image>", b"<slice>", b"</slice>"]
CONTROL = 3

T = 128      # text width (= resampler width)
E = 32       # tower width
F = 64       # tower MLP width
P = 4        # patch side
IMG = 32     # image side the tower takes
QUERIES = 8  # resampler queries


def write(path, kv, tensors, seed):
    header = bytearray(archgen.GGUF_MAGIC + struct.pack("<IQQ", 3, len(tensors), len(kv)))
    for key, (vtype, payload) in kv.items():
        archgen.put_string(header, key)
        header += struct.pack("<I", vtype)
        archgen.put_value(header, vtype, payload)
    offset, blobs = 0, []
    for name, shape, init, args, kind in tensors:
        archgen.put_string(header, name)
        header += struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", d) for d in shape)
        header += struct.pack("<IQ", archgen.GGML_F16 if kind == "f16" else archgen.GGML_F32, offset)
        values = archgen.tensor_values(seed, name, shape, init, args)
        blob = struct.pack(f"<{len(values)}{'e' if kind == 'f16' else 'f'}", *values)
        blob += b"\0" * (-len(blob) % archgen.ALIGNMENT)
        blobs.append(blob)
        offset += len(blob)
    header += b"\0" * (-len(header) % archgen.ALIGNMENT)
    with open(path, "wb") as f:
        f.write(header)
        for blob in blobs:
            f.write(blob)


def text_model(path, seed):
    kv = {"general.architecture": (archgen.T_STR, b"qwen2"),
          "general.name": (archgen.T_STR, f"minicpmvgen-qwen2-s{seed}".encode()),
          "general.file_type": (archgen.T_U32, 0)}
    vocab = {k: v for k, v in archgen.read_kv(VOCAB).items() if k.startswith("tokenizer.")}
    tokens = list(vocab["tokenizer.ggml.tokens"][1][1]) + MARKS
    types = list(vocab["tokenizer.ggml.token_type"][1][1]) + [CONTROL] * len(MARKS)
    vocab["tokenizer.ggml.tokens"] = (archgen.T_ARR, (archgen.T_STR, tokens))
    vocab["tokenizer.ggml.token_type"] = (archgen.T_ARR, (archgen.T_I32, types))
    n_vocab = len(tokens)
    u32, f32 = archgen.T_U32, archgen.T_F32
    kv.update({"qwen2.vocab_size": (u32, n_vocab), "qwen2.context_length": (u32, 256),
               "qwen2.embedding_length": (u32, T), "qwen2.block_count": (u32, 2),
               "qwen2.feed_forward_length": (u32, 64), "qwen2.attention.head_count": (u32, 2),
               "qwen2.attention.head_count_kv": (u32, 1),
               "qwen2.attention.layer_norm_rms_epsilon": (f32, 1e-6),
               "qwen2.rope.freq_base": (f32, 1000000.0)})
    kv.update(vocab)
    # an output matrix of its own: tied to the token table, the tiny model repeats its
    # last token for ever, which would make the greedy check a weak one
    t = [("token_embd.weight", [T, n_vocab], "normal", [0.5], "f32"),
         ("output_norm.weight", [T], "norm", [], "f32"),
         ("output.weight", [T, n_vocab], "matrix", [1.0], "f32")]
    for il in range(2):
        b = f"blk.{il}."
        t += [(b + "attn_norm.weight", [T], "norm", [], "f32"),
              (b + "attn_q.weight", [T, T], "matrix", [1.0], "f32"),
              (b + "attn_q.bias", [T], "bias", [], "f32"),
              (b + "attn_k.weight", [T, 64], "matrix", [1.0], "f32"),
              (b + "attn_k.bias", [64], "bias", [], "f32"),
              (b + "attn_v.weight", [T, 64], "matrix", [1.0], "f32"),
              (b + "attn_v.bias", [64], "bias", [], "f32"),
              (b + "attn_output.weight", [T, T], "matrix", [1.0], "f32"),
              (b + "ffn_norm.weight", [T], "norm", [], "f32"),
              (b + "ffn_gate.weight", [T, 64], "matrix", [1.0], "f32"),
              (b + "ffn_up.weight", [T, 64], "matrix", [1.0], "f32"),
              (b + "ffn_down.weight", [64, T], "matrix", [1.0], "f32")]
    write(path, kv, t, seed)


def mmproj(path, seed):
    u32, f32, b, s = archgen.T_U32, archgen.T_F32, archgen.T_BOOL, archgen.T_STR
    arr = lambda v: (archgen.T_ARR, (f32, v))  # noqa: E731
    kv = {"general.architecture": (s, b"clip"),
          "general.name": (s, f"minicpmvgen-resampler-s{seed}".encode()),
          "general.file_type": (u32, 0),
          "clip.has_vision_encoder": (b, True),
          "clip.projector_type": (s, b"resampler"),
          "clip.minicpmv_version": (archgen.T_I32, 3),
          "clip.minicpmv_query_num": (u32, QUERIES),
          "clip.use_gelu": (b, True),
          "clip.vision.image_size": (u32, IMG),
          "clip.vision.patch_size": (u32, P),
          "clip.vision.embedding_length": (u32, E),
          "clip.vision.feed_forward_length": (u32, F),
          "clip.vision.block_count": (u32, 2),
          "clip.vision.projection_dim": (u32, T),
          "clip.vision.attention.head_count": (u32, 4),
          "clip.vision.attention.layer_norm_epsilon": (f32, 1e-6),
          "clip.vision.image_mean": arr([0.5, 0.5, 0.5]),
          "clip.vision.image_std": arr([0.5, 0.5, 0.5])}
    # the patch kernel as F16, as real projector files store it: llama.cpp's convolution then
    # rounds the pixels to F16 in every version (newer ones do so for an F32 kernel too)
    t = [("v.patch_embd.weight", [P, P, 3, E], "matrix", [1.0], "f16"),
         ("v.patch_embd.bias", [E], "bias", [], "f32"),
         ("v.position_embd.weight", [E, 70 * 70], "normal", [0.5], "f16")]
    for il in range(2):
        p = f"v.blk.{il}."
        for n in ("attn_q", "attn_k", "attn_v", "attn_out"):
            t += [(p + n + ".weight", [E, E], "matrix", [1.0], "f32"),
                  (p + n + ".bias", [E], "bias", [], "f32")]
        t += [(p + "ln1.weight", [E], "norm", [], "f32"), (p + "ln1.bias", [E], "bias", [], "f32"),
              (p + "ln2.weight", [E], "norm", [], "f32"), (p + "ln2.bias", [E], "bias", [], "f32"),
              (p + "ffn_up.weight", [E, F], "matrix", [1.0], "f32"),
              (p + "ffn_up.bias", [F], "bias", [], "f32"),
              (p + "ffn_down.weight", [F, E], "matrix", [1.0], "f32"),
              (p + "ffn_down.bias", [E], "bias", [], "f32")]
    t += [("v.post_ln.weight", [E], "norm", [], "f32"), ("v.post_ln.bias", [E], "bias", [], "f32"),
          ("resampler.query", [T, QUERIES], "normal", [1.0], "f32"),
          ("resampler.kv.weight", [E, T], "matrix", [1.0], "f32"),
          # loaded by llama.cpp but used by no graph: one row is enough
          ("resampler.pos_embed_k", [T, 1], "normal", [0.1], "f32")]
    for n in ("q", "k", "v", "out"):
        t += [(f"resampler.attn.{n}.weight", [T, T], "matrix", [1.0], "f32"),
              (f"resampler.attn.{n}.bias", [T], "bias", [], "f32")]
    for n in ("q", "kv", "post"):
        t += [(f"resampler.ln_{n}.weight", [T], "norm", [], "f32"),
              (f"resampler.ln_{n}.bias", [T], "bias", [], "f32")]
    t += [("resampler.proj.weight", [T, T], "matrix", [1.0], "f32")]
    write(path, kv, t, seed)


def main():
    ap = argparse.ArgumentParser(description="tiny minicpm-v fixture pair")
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=3301)
    a = ap.parse_args()
    text_model(os.path.join(a.out_dir, "minicpmv-text.gguf"), a.seed)
    mmproj(os.path.join(a.out_dir, "minicpmv-mmproj.gguf"), a.seed)


if __name__ == "__main__":
    main()
