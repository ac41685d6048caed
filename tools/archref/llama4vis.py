#!/usr/bin/env python3
"""llama4vis: the llama4 vision fixtures of tests/fixtures/vision, made from archgen.py specs
and llama.cpp's multimodal library (peer_mtmd). Standard library only.

    llama4vis.py OUTDIR --peer /tmp/peer_mtmd [--seed N]

Writes into OUTDIR:
  llama4-text.spec.json, llama4-text.gguf   tests/fixtures/arch/llama4.spec.json's tiny llama4
      (dense and MoE layers, a NoPE layer) with that vocabulary plus the control tokens
      <|image_start|> 304 and <|image_end|> 305
  llama4-mmproj.spec.json, llama4-mmproj.gguf   a clip file, projector "llama4": 16-pixel
      squares of 4-pixel patches, width 32, 2 layers, a 2 x 2 pixel shuffle, so 4 tokens a
      square; the unfold a 2-D matrix, as llama.cpp's converter writes it
  llama4-square.png (16 x 16: the square alone, no resize), llama4-wide.png (32 x 16: two
      tiles cut without a resize, and the overview resized) and llama4-odd.png (40 x 24:
      letterboxed at the 48 x 32 pinpoint, six tiles and the overview)
  llama4.<image>.ref.txt, .embd.f32, .logits.txt   peer_mtmd's reference for each image
  llama4.<image>.pixels.f32   the column of squares llama.cpp d32676d77 encodes (the tiles in
      row order, then the overview), normalised, float32: computed here by re-doing its
      mtmd-image.cpp steps (pinpoint choice, PAD_CEIL letterbox with its bicubic resize,
      corner-aligned bilinear overview) in float32, since the peer does not dump pixels
"""
import argparse
import json
import math
import os
import struct
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import archgen  # noqa: E402
from mistral3vis import png, drawing  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
# with gain 1 the tiny tower's softmax is so peaked that a comparison hinges on the order of
# every sum (mistral3vis.py measured it)
QK_GAIN = 0.5
PROMPT = "Look: <__media__> What is it?"
IMAGES = (("square", 16, 16), ("wide", 32, 16), ("odd", 40, 24))
SQUARE = 16


def f32(v):
    return struct.unpack("<f", struct.pack("<f", v))[0]


def clamp(v, lo, hi):
    return max(lo, min(v, hi))


def bicubic(img, w, h, tw, th):
    """d32676d77's resize_bicubic: cubic through four samples per axis, float32, rounded."""
    tx, ty = f32(f32(w) / f32(tw)), f32(f32(h) / f32(th))

    def cubic(p, t):
        d0, d2, d3, a0 = f32(p[0] - p[1]), f32(p[2] - p[1]), f32(p[3] - p[1]), f32(p[1])
        a1 = f32(-1.0 / 3 * d0 + d2 - 1.0 / 6 * d3)
        a2 = f32(1.0 / 2 * d0 + 1.0 / 2 * d2)
        a3 = f32(-1.0 / 6 * d0 - 1.0 / 2 * d2 + 1.0 / 6 * d3)
        return f32(f32(f32(a0 + f32(a1 * t)) + f32(f32(a2 * t) * t)) + f32(f32(f32(a3 * t) * t) * t))

    out = [[None] * tw for _ in range(th)]
    for i in range(th):
        for j in range(tw):
            x, y = int(f32(tx * j)), int(f32(ty * i))
            dx, dy = f32(f32(tx * j) - x), f32(f32(ty * i) - y)
            px = []
            for k in range(3):
                col = [cubic([img[clamp(y - 1 + r, 0, h - 1)][clamp(x + c, 0, w - 1)][k]
                              for c in (-1, 0, 1, 2)], dx) for r in range(4)]
                v = cubic(col, dy)
                px.append(int(clamp(math.floor(abs(v) + 0.5) * (1 if v >= 0 else -1), 0, 255)))
            out[i][j] = px
    return out


def bilinear_corners(img, w, h, tw, th):
    """d32676d77's resize_bilinear: corners aligned, float32, truncated."""
    xr = f32(f32(w - 1) / f32(tw - 1)) if tw > 1 else 0.0
    yr = f32(f32(h - 1) / f32(th - 1)) if th > 1 else 0.0
    lerp = lambda s, e, t: f32(s + f32(f32(e - s) * t))
    out = [[None] * tw for _ in range(th)]
    for y in range(th):
        for x in range(tw):
            px, py = f32(x * xr), f32(y * yr)
            x0, y0 = min(int(px), w - 1), min(int(py), h - 1)
            x1, y1 = min(x0 + 1, w - 1), min(y0 + 1, h - 1)
            fx, fy = f32(px - x0), f32(py - y0)
            out[y][x] = [int(lerp(lerp(float(img[y0][x0][c]), float(img[y0][x1][c]), fx),
                                  lerp(float(img[y1][x0][c]), float(img[y1][x1][c]), fx), fy))
                         for c in range(3)]
    return out


def column(img, w, h):
    """The squares llama.cpp d32676d77 makes of a w x h image for llama4: the tiles of the
    pinpoint that keeps the most of it (least waste on a tie), then the overview."""
    S, squares = SQUARE, []
    if w > S or h > S:
        best, kept_best, waste_best = None, -1, None
        for cw, ch in [(x * S, y * S) for x in (1, 2, 3) for y in (1, 2, 3) if (x, y) != (1, 1)]:
            scale = min(f32(f32(cw) / w), f32(f32(ch) / h))
            kept = min(int(f32(w * scale)) * int(f32(h * scale)), w * h)
            if kept > kept_best or (kept == kept_best and cw * ch - kept < waste_best):
                best, kept_best, waste_best = (cw, ch), kept, cw * ch - kept
        gw, gh = best
        refined = img
        if (gw, gh) != (w, h):
            scale = min(f32(f32(gw) / w), f32(f32(gh) / h))
            nw, nh = min(math.ceil(f32(w * scale)), gw), min(math.ceil(f32(h * scale)), gh)
            scaled = bicubic(img, w, h, nw, nh)
            refined = [[[0, 0, 0] for _ in range(gw)] for _ in range(gh)]
            for y in range(nh):
                refined[(gh - nh) // 2 + y][(gw - nw) // 2:(gw - nw) // 2 + nw] = scaled[y]
        for ty in range(gh // S):
            for tx in range(gw // S):
                squares.append([row[tx * S:(tx + 1) * S] for row in refined[ty * S:(ty + 1) * S]])
    squares.append(img if (w, h) == (S, S) else bilinear_corners(img, w, h, S, S))
    return squares


def normalised(squares):
    """(u8 / 255 - 0.5) / 0.5 in float32, the squares one after another."""
    out = [f32(f32(f32(v / 255.0) - 0.5) / 0.5)
           for sq in squares for row in sq for px in row for v in px]
    return struct.pack(f"<{len(out)}f", *out)


def text_spec(seed):
    spec = json.load(open(os.path.join(REPO, "tests/fixtures/arch/llama4.spec.json")))
    kv = archgen.read_kv(os.path.join(REPO, spec["vocab_from"]))
    tokens = [t.decode() for t in kv["tokenizer.ggml.tokens"][1][1]]
    types = list(kv["tokenizer.ggml.token_type"][1][1])
    for t in ("<|image_start|>", "<|image_end|>"):
        tokens.append(t)
        types.append(3)  # control: matched whole when special tokens are parsed
    V = len(tokens)
    spec["name"] = "llama4-vision-text"
    spec["seed"] = seed
    spec["kv"]["tokenizer.ggml.tokens"] = ["arr", "str", tokens]
    spec["kv"]["tokenizer.ggml.token_type"] = ["arr", "i32", types]
    for t in spec["tensors"]:
        if t[0] in ("token_embd.weight", "output.weight"):
            t[1] = [t[1][0], V]
    return spec


def mmproj_spec(seed):
    E, F, L, P, S, M, H, T = 32, 64, 2, 4, 16, 2, 64, 64
    n_pos = (S // P) ** 2 + 1
    return {
        "arch": "clip", "name": "llama4-vision-mmproj", "n_layers": L, "seed": seed + 1,
        "kv": {
            "clip.has_vision_encoder": ["bool", True], "clip.projector_type": ["str", "llama4"],
            "clip.use_gelu": ["bool", True],
            "clip.vision.image_size": ["u32", S], "clip.vision.patch_size": ["u32", P],
            "clip.vision.embedding_length": ["u32", E],
            "clip.vision.feed_forward_length": ["u32", F],
            "clip.vision.block_count": ["u32", L], "clip.vision.attention.head_count": ["u32", 2],
            "clip.vision.attention.layer_norm_epsilon": ["f32", 1e-5],
            "clip.vision.projection_dim": ["u32", T],
            "clip.vision.projector.scale_factor": ["u32", M],
            "clip.vision.image_mean": ["arr", "f32", [0.5, 0.5, 0.5]],
            "clip.vision.image_std": ["arr", "f32", [0.5, 0.5, 0.5]],
        },
        "tensors": [
            ["v.patch_embd.weight", [3 * P * P, E], "matrix", 1.0],
            ["v.class_embd", [E], "normal", 0.5],
            ["v.position_embd.weight", [E, n_pos], "normal", 0.5],
            ["v.pre_ln.weight", [E], "norm"],
            ["v.pre_ln.bias", [E], "bias"],
            ["v.blk.{L}.ln1.weight", [E], "norm"],
            ["v.blk.{L}.ln1.bias", [E], "bias"],
            ["v.blk.{L}.attn_q.weight", [E, E], "matrix", QK_GAIN],
            ["v.blk.{L}.attn_q.bias", [E], "bias"],
            ["v.blk.{L}.attn_k.weight", [E, E], "matrix", QK_GAIN],
            ["v.blk.{L}.attn_k.bias", [E], "bias"],
            ["v.blk.{L}.attn_v.weight", [E, E], "matrix", 1.0],
            ["v.blk.{L}.attn_v.bias", [E], "bias"],
            ["v.blk.{L}.attn_out.weight", [E, E], "matrix", 1.0],
            ["v.blk.{L}.attn_out.bias", [E], "bias"],
            ["v.blk.{L}.ln2.weight", [E], "norm"],
            ["v.blk.{L}.ln2.bias", [E], "bias"],
            ["v.blk.{L}.ffn_up.weight", [E, F], "matrix", 1.0],
            ["v.blk.{L}.ffn_up.bias", [F], "bias"],
            ["v.blk.{L}.ffn_down.weight", [F, E], "matrix", 1.0],
            ["v.blk.{L}.ffn_down.bias", [E], "bias"],
            ["v.post_ln.weight", [E], "norm"],
            ["v.post_ln.bias", [E], "bias"],
            ["mm.model.mlp.1.weight", [E * M * M, H], "matrix", 1.0],
            ["mm.model.mlp.2.weight", [H, H], "matrix", 1.0],
            ["mm.model.fc.weight", [H, T], "matrix", 1.0],
        ],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--peer", required=True)
    ap.add_argument("--seed", type=int, default=4704)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    o = lambda name: os.path.join(a.out, name)
    for name, spec in (("llama4-text", text_spec(a.seed)), ("llama4-mmproj", mmproj_spec(a.seed))):
        json.dump(spec, open(o(name + ".spec.json"), "w"), indent=1)
        subprocess.run([sys.executable, os.path.join(HERE, "archgen.py"), o(name + ".spec.json"),
                        o(name + ".gguf")], check=True, cwd=REPO)
    text, mm = o("llama4-text.gguf"), o("llama4-mmproj.gguf")
    for image, w, h in IMAGES:
        pixel = drawing(w, h)
        png(o(f"llama4-{image}.png"), w, h, pixel)
        if image != "square":
            img = [[list(pixel(x, y)) for x in range(w)] for y in range(h)]
            open(o(f"llama4.{image}.pixels.f32"), "wb").write(normalised(column(img, w, h)))
        run = subprocess.run([a.peer, text, mm, o(f"llama4-{image}.png"), PROMPT,
                              "--dump-embd", o(f"llama4.{image}.embd.f32"),
                              "--dump-logits", o(f"llama4.{image}.logits.txt")],
                             check=True, capture_output=True, text=True)
        with open(o(f"llama4.{image}.ref.txt"), "w") as f:
            f.write(f"# llama4 + llama4 projector, tools/archref/llama4vis.py --seed {a.seed}: "
                    f"peer_mtmd (llama.cpp d32676d77), llama4-{image}.png ({w} x {h})\n")
            f.write(run.stdout)


if __name__ == "__main__":
    main()
