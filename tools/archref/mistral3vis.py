#!/usr/bin/env python3
"""mistral3vis: the mistral3 + pixtral vision fixtures of tests/fixtures/vision, made from
archgen.py specs and llama.cpp's multimodal library (peer_mtmd). Standard library only.

    mistral3vis.py OUTDIR --peer /tmp/peer_mtmd [--seed N]

Writes into OUTDIR:
  mistral3-text.spec.json, mistral3-text.gguf   a tiny mistral3 text model whose vocabulary is
      tests/fixtures/arch/mistral3.gguf's plus the control tokens [IMG] 304, [IMG_BREAK] 305,
      [IMG_END] 306 (llama.cpp tokenizes the [IMG_END] it puts after an image as text)
  mistral3-mmproj.spec.json, mistral3-mmproj.gguf   a clip file, projector "pixtral" with
      Mistral Small 3.1's patch merger (spatial merge 2), patch 4, width 32, 2 layers
  mistral3-wide.png (40 x 24: a size the projector takes as it is, so no resize; 5 x 3
      merged tokens, rows and columns distinct), mistral3-odd.png (50 x 30) and
      mistral3-tiny.png (12 x 12), which the preprocessing resizes (their token counts only)
  mistral3.wide.pixels.f32   the normalised pixels, float32 in llama.cpp's arithmetic
  mistral3.wide.ref.txt, .embd.f32, .logits.txt   peer_mtmd's reference for the wide image
  mistral3.resize.txt   the token count llama.cpp gives the odd and tiny images
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import archgen  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
MEAN = [0.48145466, 0.4578275, 0.40821073]
STD = [0.26862954, 0.26130258, 0.27577711]
# small enough that attention stays smooth: with gain 1 the tiny tower's softmax is so
# peaked that a 1e-6 change of a pixel moves the embeddings by 5e-4, and a comparison would
# hinge on the order of every sum
QK_GAIN = 0.5
PROMPT = "[INST]Look: <__media__> What is it?[/INST]"


def text_spec(seed):
    kv = archgen.read_kv(os.path.join(REPO, "tests/fixtures/arch/mistral3.gguf"))
    tokens = [t.decode() for t in kv["tokenizer.ggml.tokens"][1][1]]
    types = list(kv["tokenizer.ggml.token_type"][1][1])
    for t in ("[IMG]", "[IMG_BREAK]", "[IMG_END]"):
        tokens.append(t)
        types.append(3)  # control: matched whole when special tokens are parsed
    E, F, L, V = 64, 128, 2, len(tokens)
    a = "mistral3"
    return {
        "arch": a, "name": "mistral3-vision-text", "n_layers": L, "seed": seed,
        "vocab_from": "tests/fixtures/arch/mistral3.gguf",
        "kv": {
            "tokenizer.ggml.tokens": ["arr", "str", tokens],
            "tokenizer.ggml.token_type": ["arr", "i32", types],
            f"{a}.vocab_size": ["u32", V], f"{a}.context_length": ["u32", 256],
            f"{a}.embedding_length": ["u32", E], f"{a}.block_count": ["u32", L],
            f"{a}.feed_forward_length": ["u32", F], f"{a}.attention.head_count": ["u32", 4],
            f"{a}.attention.head_count_kv": ["u32", 2], f"{a}.attention.key_length": ["u32", 16],
            f"{a}.attention.value_length": ["u32", 16],
            f"{a}.attention.layer_norm_rms_epsilon": ["f32", 1e-5],
            f"{a}.rope.freq_base": ["f32", 10000.0], f"{a}.rope.dimension_count": ["u32", 16],
        },
        "tensors": [
            ["token_embd.weight", [E, V], "normal", 0.5],
            ["output_norm.weight", [E], "norm"],
            ["output.weight", [E, V], "matrix", 2.0],
            ["blk.{L}.attn_norm.weight", [E], "norm"],
            ["blk.{L}.attn_q.weight", [E, 64], "matrix", 1.0],
            ["blk.{L}.attn_k.weight", [E, 32], "matrix", 1.0],
            ["blk.{L}.attn_v.weight", [E, 32], "matrix", 1.0],
            ["blk.{L}.attn_output.weight", [64, E], "matrix", 1.0],
            ["blk.{L}.ffn_norm.weight", [E], "norm"],
            ["blk.{L}.ffn_gate.weight", [E, F], "matrix", 1.0],
            ["blk.{L}.ffn_up.weight", [E, F], "matrix", 1.0],
            ["blk.{L}.ffn_down.weight", [F, E], "matrix", 1.0],
        ],
    }


def mmproj_spec(seed):
    E, F, L, P, T, M = 32, 64, 2, 4, 64, 2
    return {
        "arch": "clip", "name": "mistral3-vision-mmproj", "n_layers": L, "seed": seed + 1,
        "kv": {
            "clip.has_vision_encoder": ["bool", True], "clip.projector_type": ["str", "pixtral"],
            "clip.use_silu": ["bool", True],
            "clip.vision.image_size": ["u32", 64], "clip.vision.patch_size": ["u32", P],
            "clip.vision.embedding_length": ["u32", E],
            "clip.vision.feed_forward_length": ["u32", F],
            "clip.vision.block_count": ["u32", L], "clip.vision.attention.head_count": ["u32", 2],
            "clip.vision.attention.layer_norm_epsilon": ["f32", 1e-5],
            "clip.vision.projection_dim": ["u32", T],
            "clip.vision.spatial_merge_size": ["u32", M],
            "clip.vision.image_mean": ["arr", "f32", MEAN],
            "clip.vision.image_std": ["arr", "f32", STD],
        },
        "tensors": [
            ["v.patch_embd.weight", [P, P, 3, E], "matrix", 1.0],
            ["v.pre_ln.weight", [E], "norm"],
            ["v.blk.{L}.ln1.weight", [E], "norm"],
            ["v.blk.{L}.attn_q.weight", [E, E], "matrix", QK_GAIN],
            ["v.blk.{L}.attn_k.weight", [E, E], "matrix", QK_GAIN],
            ["v.blk.{L}.attn_v.weight", [E, E], "matrix", 1.0],
            ["v.blk.{L}.attn_out.weight", [E, E], "matrix", 1.0],
            ["v.blk.{L}.ln2.weight", [E], "norm"],
            ["v.blk.{L}.ffn_gate.weight", [E, F], "matrix", 1.0],
            ["v.blk.{L}.ffn_up.weight", [E, F], "matrix", 1.0],
            ["v.blk.{L}.ffn_down.weight", [F, E], "matrix", 1.0],
            ["mm.input_norm.weight", [E], "norm"],
            ["mm.patch_merger.weight", [E * M * M, E], "matrix", 1.0],
            ["mm.1.weight", [E, T], "matrix", 1.0],
            ["mm.1.bias", [T], "bias"],
            ["mm.2.weight", [T, T], "matrix", 1.0],
            ["mm.2.bias", [T], "bias"],
            ["v.token_embd.img_break", [T], "normal", 0.5],
        ],
    }


def png(path, w, h, pixel):
    raw = b"".join(b"\0" + bytes(c for x in range(w) for c in pixel(x, y)) for y in range(h))
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))
    open(path, "wb").write(data)
    return [list(pixel(x, y)) for y in range(h) for x in range(w)]


def drawing(w, h):
    """A gradient across, another down, a filled disc and a frame: rows differ from columns."""
    def pixel(x, y):
        if y == 0:
            return (255, 255, 255)
        if x == 0:
            return (0, 0, 255)
        if (x - 2 * w // 3) ** 2 + (y - h // 3) ** 2 < (h // 4) ** 2:
            return (200, 40, 30)
        return (x * 255 // (w - 1), y * 255 // (h - 1), (x * y) % 256)
    return pixel


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def normalise(rgb):
    """(u8 / 255 - mean) / std, each step rounded to float32 as llama.cpp computes it."""
    out = []
    for px in rgb:
        for c in range(3):
            out.append(f32(f32(f32(px[c] / 255.0) - f32(MEAN[c])) / f32(STD[c])))
    return struct.pack(f"<{len(out)}f", *out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--peer", required=True)
    ap.add_argument("--seed", type=int, default=3105)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    o = lambda name: os.path.join(a.out, name)
    for name, spec in (("mistral3-text", text_spec(a.seed)), ("mistral3-mmproj", mmproj_spec(a.seed))):
        json.dump(spec, open(o(name + ".spec.json"), "w"), indent=1)
        subprocess.run([sys.executable, os.path.join(HERE, "archgen.py"), o(name + ".spec.json"),
                        o(name + ".gguf")], check=True, cwd=REPO)
    rgb = png(o("mistral3-wide.png"), 40, 24, drawing(40, 24))
    open(o("mistral3.wide.pixels.f32"), "wb").write(normalise(rgb))
    png(o("mistral3-odd.png"), 50, 30, drawing(50, 30))
    png(o("mistral3-tiny.png"), 12, 12, drawing(12, 12))
    text, mm = o("mistral3-text.gguf"), o("mistral3-mmproj.gguf")
    run = subprocess.run([a.peer, text, mm, o("mistral3-wide.png"), PROMPT,
                          "--dump-embd", o("mistral3.wide.embd.f32"),
                          "--dump-logits", o("mistral3.wide.logits.txt")],
                         check=True, capture_output=True, text=True)
    with open(o("mistral3.wide.ref.txt"), "w") as f:
        f.write(f"# mistral3 + pixtral, tools/archref/mistral3vis.py --seed {a.seed}: "
                "peer_mtmd (llama.cpp d32676d77)\n")
        f.write("pixels 0 nx 40 ny 24 (no resize: the sides are multiples of 8)\n")
        f.write(run.stdout)
    with open(o("mistral3.resize.txt"), "w") as f:
        for image in ("odd", "tiny"):
            r = subprocess.run([a.peer, text, mm, o(f"mistral3-{image}.png"), PROMPT, "-n", "1"],
                               check=True, capture_output=True, text=True)
            line = next(l for l in r.stdout.splitlines() if " image n_tokens " in l)
            f.write(f"{image} {line.split(' image ')[1]}\n")


if __name__ == "__main__":
    main()
