#!/usr/bin/env python3
"""lfm2visgen: the lfm2 + lfm2 projector fixtures of tests/fixtures/vision (LFM2-VL), made
from archgen.py specs and llama.cpp's multimodal library (peer_mtmd). Standard library only.

    lfm2visgen.py OUTDIR --peer /tmp/peer_mtmd [--seed N]

Writes into OUTDIR:
  lfm2v-text.spec.json, lfm2v-text.gguf   tests/fixtures/arch/lfm2.spec.json's tiny lfm2
      (short convolutions and one attention layer, its context 2048) with that vocabulary plus
      LFM2-VL's control tokens: <|image_start|> 304, <|image_end|> 305, <|img_thumbnail|> 306,
      then <|img_row_R_col_C|> for every R x C <= 10 (the tiles' marks)
  lfm2v-mmproj.spec.json, lfm2v-mmproj.gguf   a clip file, projector "lfm2": 8-pixel patches,
      a 64-pixel square's 8 x 8 position table, width 32, 2 layers, a 2 x 2 unshuffle, the
      projector's LayerNorm, mm.1 and mm.2 into the text width 64
  lfm2v-square.png (128 x 128), lfm2v-wide.png (192 x 128), lfm2v-strip.png (352 x 48):
      sizes smart resize keeps (64 to 256 tokens of 16 x 16 pixels), so neither engine resizes
      them; the position table is stretched (square, wide) and squeezed (strip's height);
      lfm2v-small.png (90 x 100), which both smart-resize up to 128 x 144 (corners aligned)
  lfm2v.<image>.ref.txt, .embd.f32, .logits.txt   peer_mtmd's reference for each image
  lfm2v16-mmproj.spec.json, lfm2v16-mmproj.gguf   the same tower with 16-pixel patches (a
      128-pixel square's 8 x 8 table, seed --tiles-seed), so that a 512-pixel tile is 256
      tokens as in the released models
  lfm2v-tiles.png (1536 x 512): over two tiles wide, so llama.cpp cuts it into 3 x 1 tiles
      (no resize: it is that grid already) and adds an 864 x 288 thumbnail after them
  lfm2v-tiles-thumb.png   that thumbnail as llama.cpp d32676d77 resizes it (bilinear, corners
      aligned), which the peer does not dump
  lfm2v16.tiles.ref.txt, .embd.f32, .logits.txt   peer_mtmd's reference for the tiled image
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import archgen  # noqa: E402
from mistral3vis import png  # noqa: E402
from llama4vis import bilinear_corners  # noqa: E402

REPO = os.path.dirname(os.path.dirname(HERE))
# with gain 1 the tiny tower's softmax is so peaked that a comparison hinges on the order of
# every sum (mistral3vis.py measured it)
QK_GAIN = 0.5
PROMPT = "Look: <__media__> What is it?"
IMAGES = (("square", 128, 128), ("wide", 192, 128), ("strip", 352, 48), ("small", 90, 100))
TILED = (1536, 512)
THUMBNAIL = (864, 288)


def drawing(w, h):
    """Ramps across and down, blue in 16-pixel checks, a disc, a white top row and a blue left
    column: rows differ from columns, and a large picture still compresses well."""
    def pixel(x, y):
        if y == 0:
            return (255, 255, 255)
        if x == 0:
            return (0, 0, 255)
        if (x - 2 * w // 3) ** 2 + (y - h // 3) ** 2 < (h // 4) ** 2:
            return (200, 40, 30)
        return (x * 255 // (w - 1), y * 255 // (h - 1), 200 if (x // 16 + y // 16) % 2 else 40)
    return pixel


def text_spec(seed):
    spec = json.load(open(os.path.join(REPO, "tests/fixtures/arch/lfm2.spec.json")))
    kv = archgen.read_kv(os.path.join(REPO, spec["vocab_from"]))
    tokens = [t.decode() for t in kv["tokenizer.ggml.tokens"][1][1]]
    types = list(kv["tokenizer.ggml.token_type"][1][1])
    marks = ["<|image_start|>", "<|image_end|>", "<|img_thumbnail|>"]
    marks += [f"<|img_row_{r}_col_{c}|>" for r in range(1, 11) for c in range(1, 11) if r * c <= 10]
    for t in marks:
        tokens.append(t)
        types.append(3)  # control: matched whole when special tokens are parsed
    V = len(tokens)
    spec["name"] = "lfm2-vision-text"
    spec["seed"] = seed
    spec["kv"]["tokenizer.ggml.tokens"] = ["arr", "str", tokens]
    spec["kv"]["tokenizer.ggml.token_type"] = ["arr", "i32", types]
    # room for the tiled image's 1032 prompt tokens through a server, which caps num_ctx here
    spec["kv"]["lfm2.context_length"] = ["u32", 2048]
    for t in spec["tensors"]:
        if t[0] in ("token_embd.weight", "output.weight"):
            t[1] = [t[1][0], V]
    return spec


def mmproj_spec(seed, P=8):
    E, F, L, S, M, H, T = 32, 64, 2, 8 * P, 2, 64, 64
    n_pos = (S // P) ** 2
    return {
        "arch": "clip", "name": "lfm2-vision-mmproj", "n_layers": L, "seed": seed,
        "kv": {
            "clip.has_vision_encoder": ["bool", True], "clip.projector_type": ["str", "lfm2"],
            "clip.use_gelu": ["bool", True],
            "clip.vision.image_size": ["u32", S], "clip.vision.patch_size": ["u32", P],
            "clip.vision.embedding_length": ["u32", E],
            "clip.vision.feed_forward_length": ["u32", F],
            "clip.vision.block_count": ["u32", L], "clip.vision.attention.head_count": ["u32", 2],
            "clip.vision.attention.layer_norm_epsilon": ["f32", 1e-6],
            "clip.vision.projection_dim": ["u32", T],
            "clip.vision.projector.scale_factor": ["u32", M],
            "clip.vision.image_mean": ["arr", "f32", [0.5, 0.5, 0.5]],
            "clip.vision.image_std": ["arr", "f32", [0.5, 0.5, 0.5]],
        },
        "tensors": [
            ["v.patch_embd.weight", [P, P, 3, E], "matrix", 1.0, {"type": "f16"}],
            ["v.patch_embd.bias", [E], "bias"],
            ["v.position_embd.weight", [E, n_pos], "normal", 0.5],
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
            ["mm.input_norm.weight", [E * M * M], "norm"],
            ["mm.input_norm.bias", [E * M * M], "bias"],
            ["mm.1.weight", [E * M * M, H], "matrix", 1.0],
            ["mm.1.bias", [H], "bias"],
            ["mm.2.weight", [H, T], "matrix", 1.0],
            ["mm.2.bias", [T], "bias"],
        ],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--peer", required=True)
    ap.add_argument("--seed", type=int, default=5127)
    ap.add_argument("--tiles-seed", type=int, default=5201)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    o = lambda name: os.path.join(a.out, name)
    for name, spec in (("lfm2v-text", text_spec(a.seed)), ("lfm2v-mmproj", mmproj_spec(a.seed + 1)),
                       ("lfm2v16-mmproj", mmproj_spec(a.tiles_seed, 16))):
        json.dump(spec, open(o(name + ".spec.json"), "w"), indent=1)
        subprocess.run([sys.executable, os.path.join(HERE, "archgen.py"), o(name + ".spec.json"),
                        o(name + ".gguf")], check=True, cwd=REPO)
    text = o("lfm2v-text.gguf")
    w, h = TILED
    pixel = drawing(w, h)
    png(o("lfm2v-tiles.png"), w, h, pixel)
    img = [[list(pixel(x, y)) for x in range(w)] for y in range(h)]
    thumb = bilinear_corners(img, w, h, *THUMBNAIL)
    png(o("lfm2v-tiles-thumb.png"), *THUMBNAIL, lambda x, y: thumb[y][x])
    cases = [("lfm2v", "lfm2v-mmproj.gguf", image, w, h) for image, w, h in IMAGES]
    cases.append(("lfm2v16", "lfm2v16-mmproj.gguf", "tiles", w, h))
    for prefix, mm, image, w, h in cases:
        if prefix == "lfm2v":
            png(o(f"lfm2v-{image}.png"), w, h, drawing(w, h))
        run = subprocess.run([a.peer, text, o(mm), o(f"lfm2v-{image}.png"), PROMPT,
                              "--dump-embd", o(f"{prefix}.{image}.embd.f32"),
                              "--dump-logits", o(f"{prefix}.{image}.logits.txt")],
                             check=True, capture_output=True, text=True)
        with open(o(f"{prefix}.{image}.ref.txt"), "w") as f:
            f.write(f"# lfm2 + lfm2 projector, tools/archref/lfm2visgen.py --seed {a.seed} "
                    f"--tiles-seed {a.tiles_seed}: peer_mtmd (llama.cpp d32676d77), {mm}, "
                    f"lfm2v-{image}.png ({w} x {h})\n")
            f.write(run.stdout)

if __name__ == "__main__":
    main()
