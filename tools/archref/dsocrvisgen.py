#!/usr/bin/env python3
"""dsocrvisgen: writes the DeepSeek-OCR set of tests/fixtures/vision: a `clip` file with
projector `deepseekocr` (a SAM encoder of 12 blocks, global attention in blocks 2, 5, 8 and 11
as llama.cpp fixes it, its neck and two stride-2 convolutions, then a CLIP tower and the
projection), tiny and random, with archgen.py's writer, for the text model
tests/fixtures/arch/deepseek2-ocr.gguf; and two test pictures with testpng.py's. llama.cpp's
multimodal library (peer_mtmd, tools/archref/README.md) then makes the references (that
directory's README). The convolutions' inputs are multiples of 8 wide, as the real model's are
(llama.cpp's F16 matrix kernel then takes them).

    dsocrvisgen.py OUT_DIR [--seed N]

The sizes llama.cpp takes for this projector are its own, not the file's: a 1024-pixel global
view and 640-pixel tiles of 16-pixel patches, 64 x 64 SAM patches (so the SAM position table),
a 16 x 16 CLIP grid (so 257 CLIP positions), rel-pos tables of 2 * 64 - 1 rows for the global
blocks and 2 * window - 1 for the windowed ones.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

SAM_E, SAM_HEADS, SAM_FF, WINDOW = 8, 2, 16, 14
NECK, NET2, E, HEADS, FF, LAYERS = 8, 16, 16, 2, 32, 2
TEXT_E = 64
GLOBAL = (2, 5, 8, 11)


def clip_spec(seed):
    d = SAM_E // SAM_HEADS
    kv = {
        "clip.has_vision_encoder": ["bool", True],
        "clip.projector_type": ["str", "deepseekocr"],
        "clip.use_gelu": ["bool", True],
        "clip.vision.image_size": ["u32", 224],
        "clip.vision.patch_size": ["u32", 14],
        "clip.vision.embedding_length": ["u32", E],
        "clip.vision.feed_forward_length": ["u32", FF],
        "clip.vision.projection_dim": ["u32", TEXT_E],
        "clip.vision.block_count": ["u32", LAYERS],
        "clip.vision.attention.head_count": ["u32", HEADS],
        "clip.vision.attention.layer_norm_epsilon": ["f32", 1e-6],
        "clip.vision.image_mean": ["arr", "f32", [0.5, 0.5, 0.5]],
        "clip.vision.image_std": ["arr", "f32", [0.5, 0.5, 0.5]],
        "clip.vision.window_size": ["u32", WINDOW],
        "clip.vision.sam.block_count": ["u32", 12],
        "clip.vision.sam.embedding_length": ["u32", SAM_E],
        "clip.vision.sam.head_count": ["u32", SAM_HEADS],
    }
    local = [il for il in range(12) if il not in GLOBAL]
    t = [
        ["v.sam.patch_embd.weight", [16, 16, 3, SAM_E], "matrix", 1.0],
        ["v.sam.patch_embd.bias", [SAM_E], "bias", 0.1],
        ["v.sam.pos_embd.weight", [SAM_E, 64, 64], "normal", 0.5],
        ["v.sam.blk.{L}.pre_ln.weight", [SAM_E], "norm"],
        ["v.sam.blk.{L}.pre_ln.bias", [SAM_E], "bias", 0.1],
        ["v.sam.blk.{L}.attn.qkv.weight", [SAM_E, 3 * SAM_E], "matrix", 1.0],
        ["v.sam.blk.{L}.attn.qkv.bias", [3 * SAM_E], "bias", 0.3],
        ["v.sam.blk.{L}.attn.out.weight", [SAM_E, SAM_E], "matrix", 1.0],
        ["v.sam.blk.{L}.attn.out.bias", [SAM_E], "bias", 0.1],
        ["v.sam.blk.{L}.attn.pos_h.weight", [d, 2 * WINDOW - 1], "normal", 0.5, {"layers": local}],
        ["v.sam.blk.{L}.attn.pos_w.weight", [d, 2 * WINDOW - 1], "normal", 0.5, {"layers": local}],
        ["v.sam.blk.{L}.attn.pos_h.weight", [d, 127], "normal", 0.5, {"layers": list(GLOBAL)}],
        ["v.sam.blk.{L}.attn.pos_w.weight", [d, 127], "normal", 0.5, {"layers": list(GLOBAL)}],
        ["v.sam.blk.{L}.post_ln.weight", [SAM_E], "norm"],
        ["v.sam.blk.{L}.post_ln.bias", [SAM_E], "bias", 0.1],
        ["v.sam.blk.{L}.mlp.lin1.weight", [SAM_E, SAM_FF], "matrix", 1.0],
        ["v.sam.blk.{L}.mlp.lin1.bias", [SAM_FF], "bias", 0.1],
        ["v.sam.blk.{L}.mlp.lin2.weight", [SAM_FF, SAM_E], "matrix", 1.0],
        ["v.sam.blk.{L}.mlp.lin2.bias", [SAM_E], "bias", 0.1],
        ["v.sam.neck.0.weight", [1, 1, SAM_E, NECK], "matrix", 1.0],
        ["v.sam.neck.1.weight", [NECK], "norm"],
        ["v.sam.neck.1.bias", [NECK], "bias", 0.1],
        ["v.sam.neck.2.weight", [3, 3, NECK, NECK], "matrix", 1.0],
        ["v.sam.neck.3.weight", [NECK], "norm"],
        ["v.sam.neck.3.bias", [NECK], "bias", 0.1],
        ["v.sam.net_2.weight", [3, 3, NECK, NET2], "matrix", 1.0],
        ["v.sam.net_3.weight", [3, 3, NET2, E], "matrix", 1.0],
        ["v.patch_embd.weight", [14, 14, 3, E], "matrix", 1.0],
        ["v.class_embd", [E], "normal", 1.0],
        ["v.position_embd.weight", [E, 257], "normal", 0.5],
        ["v.pre_ln.weight", [E], "norm"],
        ["v.pre_ln.bias", [E], "bias", 0.1],
        ["v.blk.{L}.ln1.weight", [E], "norm"],
        ["v.blk.{L}.ln1.bias", [E], "bias", 0.1],
        ["v.blk.{L}.attn_qkv.weight", [E, 3 * E], "matrix", 1.0],
        ["v.blk.{L}.attn_qkv.bias", [3 * E], "bias", 0.3],
        ["v.blk.{L}.attn_out.weight", [E, E], "matrix", 1.0],
        ["v.blk.{L}.attn_out.bias", [E], "bias", 0.1],
        ["v.blk.{L}.ln2.weight", [E], "norm"],
        ["v.blk.{L}.ln2.bias", [E], "bias", 0.1],
        ["v.blk.{L}.ffn_up.weight", [E, FF], "matrix", 1.0],
        ["v.blk.{L}.ffn_up.bias", [FF], "bias", 0.1],
        ["v.blk.{L}.ffn_down.weight", [FF, E], "matrix", 1.0],
        ["v.blk.{L}.ffn_down.bias", [E], "bias", 0.1],
        ["mm.model.fc.weight", [2 * E, TEXT_E], "matrix", 1.0],
        ["mm.model.fc.bias", [TEXT_E], "bias", 0.1],
        ["v.image_newline", [TEXT_E], "normal", 1.0],
        ["v.view_seperator", [TEXT_E, 1], "normal", 1.0],
    ]
    return {"arch": "clip", "name": "deepseekocr-vision-mmproj", "n_layers": LAYERS, "seed": seed,
            "kv": kv, "tensors": t}


def expand_layers(spec):
    """archgen repeats {L} over n_layers; the SAM blocks are 12, the CLIP blocks LAYERS: give
    every {L} tensor its own layer list."""
    out = []
    for row in spec["tensors"]:
        name = row[0]
        if "{L}" not in name:
            out.append(row)
            continue
        opts = row[-1] if isinstance(row[-1], dict) else None
        default = list(range(12)) if name.startswith("v.sam.") else list(range(LAYERS))
        if opts is None:
            row = row + [{"layers": default}]
        out.append(row)
    spec["tensors"] = out
    return spec


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=6231)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    spec = expand_layers(clip_spec(args.seed))
    spec_path = os.path.join(args.out, "deepseekocr-mmproj.spec.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f, indent=1)
    archgen = os.path.join(HERE, "archgen.py")
    subprocess.run([sys.executable, archgen, spec_path,
                    os.path.join(args.out, "deepseekocr-mmproj.gguf")], check=True, cwd=ROOT)
    testpng = os.path.join(HERE, "testpng.py")
    for name, w, h in (("small", 48, 32), ("wide", 660, 330)):
        subprocess.run([sys.executable, testpng, os.path.join(args.out, "deepseekocr-%s.png" % name),
                        str(w), str(h)], check=True)


if __name__ == "__main__":
    main()
