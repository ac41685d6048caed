#!/usr/bin/env python3
"""mllamavis: the mllama (Llama 3.2 Vision) image fixture and its reference, without llama.cpp
(which has no mllama). Standard library only.

    mllamavis.py OUT_DIR [--seed N]

writes into OUT_DIR (tests/fixtures/vision):
- mllama.gguf: mllamaref.py's text model (the same tensors, drawn from the same seed) with a
  tiny vision tower and projector in the same file, under the names and keys ollama's
  converter gives llama3.2-vision (v.*, mm.0.*, mllama.vision.*; the tower's gates stored as
  the converter stores them: tanh(gate), and 1 - tanh(gate) for v.position_embd.gate);
- mllama-wide.png: testpng.py's 16 x 8 picture, which ollama's and transformers' tiling take as
  2 x 1 tiles of 8 x 8 without resizing (aspect ratio id 5 of max_num_tiles 4);
- mllama.wide.pixels.f32: its canvas normalised with CLIP's mean and std, float32 HWC 8 x 16;
- mllama.wide.embd.f32: the projected states of the 4 tiles (2 padding ones), 4 x 17 rows of
  the text model's 64 (float32);
- mllama.wide.ref.txt: a prompt with the image token among text ids, the logits of every
  prompt position and 16 greedy steps.

The reference follows transformers' MllamaForConditionalGeneration: the tower over all
max_num_tiles tiles (padding tiles of zeros), each tile's patches padded to a multiple of 8
after the pre-norm, attention masked only between two padding positions (padding patches and
padding tiles) as prepare_aspect_ratio_attention_mask makes it, the intermediate layers' inputs
interleaved per channel after the global layers' output; the text model's cross-attention rows
from the image token on attending to the real tiles' 17 rows each. The rows before the image
token pass the cross-attention layers unchanged, as in Meta's reference implementation, whose
full-row mask zeroes both the attention's output and the MLP's (transformers' port zeroes only
the MLP's, letting those rows attend to every row). Doubles throughout.
"""
import argparse
import math
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import archgen  # noqa: E402
import mllamaref as ref  # noqa: E402
import testpng  # noqa: E402

S, P, D, HEADS, FF = 8, 2, 32, 2, 64          # tile side, patch side, tower width, heads, FFN
LOCAL, GLOBAL, INTERMEDIATE = 3, 2, [0, 2]     # tower layers, the layers whose input is kept
TILES, EPS = 4, 1e-5                           # max_num_tiles, the tower's LayerNorm epsilon
N_PATCH = (S // P) ** 2 + 1                    # a tile's rows: its patches and the class token
N_PAD = (8 - N_PATCH % 8) % 8
N_ROWS = N_PATCH + N_PAD
FEAT = D * (1 + len(INTERMEDIATE))
WIDTH, HEIGHT = 16, 8
MEAN = [0.48145466, 0.4578275, 0.40821073]
STD = [0.26862954, 0.26130258, 0.27577711]
GATES = {"pre": 0.6, "pos": 0.3, "post": -0.5, "attn": [0.7, -0.3], "ffn": [0.4, 0.9]}
IMAGE_AT = 2                                   # prompt: "The", the image, " dog and the fox"
TEXT_IDS = [51, 257, 300, 285, 262, 298]


def vision_tensors():
    n_ratio = 9  # aspect ratio ids 0..8 for 4 tiles
    v = [["v.patch_embd.weight", [P, P, 3, D], "matrix", 1.0],
         ["v.class_embd", [D], "normal", 1.0],
         ["v.position_embd.weight", [D, N_PATCH], "normal", 1.0],
         ["v.position_embd.gate", [1], "values", [1 - math.tanh(GATES["pos"])]],
         ["v.tile_position_embd.weight", [TILES * N_PATCH * D, n_ratio], "normal", 1.0],
         ["v.tile_position_embd.gate", [1], "values", [math.tanh(GATES["pos"])]],
         ["v.pre_tile_position_embd.weight", [TILES * D, n_ratio], "normal", 1.0],
         ["v.pre_tile_position_embd.gate", [1], "values", [math.tanh(GATES["pre"])]],
         ["v.post_tile_position_embd.weight", [TILES * D, n_ratio], "normal", 1.0],
         ["v.post_tile_position_embd.gate", [1], "values", [math.tanh(GATES["post"])]],
         ["v.pre_ln.weight", [D], "norm"], ["v.pre_ln.bias", [D], "bias"],
         ["v.post_ln.weight", [D], "norm"], ["v.post_ln.bias", [D], "bias"],
         ["mm.0.weight", [FEAT, ref.N_EMBD], "matrix", 1.0],
         ["mm.0.bias", [ref.N_EMBD], "bias"]]
    for prefix, n in (("v.blk", LOCAL), ("v.global.blk", GLOBAL)):
        for il in range(n):
            b = f"{prefix}.{il}."
            v += [[b + "attn_norm.weight", [D], "norm"], [b + "attn_norm.bias", [D], "bias"],
                  [b + "attn_q.weight", [D, D], "matrix", 1.0],
                  [b + "attn_k.weight", [D, D], "matrix", 1.0],
                  [b + "attn_v.weight", [D, D], "matrix", 1.0],
                  [b + "attn_output.weight", [D, D], "matrix", 1.0],
                  [b + "ffn_norm.weight", [D], "norm"], [b + "ffn_norm.bias", [D], "bias"],
                  [b + "ffn_up.weight", [D, FF], "matrix", 1.0],
                  [b + "ffn_up.bias", [FF], "bias"],
                  [b + "ffn_down.weight", [FF, D], "matrix", 1.0],
                  [b + "ffn_down.bias", [D], "bias"]]
            if prefix == "v.global.blk":
                v += [[b + "attn_gate", [1], "values", [math.tanh(GATES["attn"][il])]],
                      [b + "ffn_gate", [1], "values", [math.tanh(GATES["ffn"][il])]]]
    return v


def vision_metadata():
    u32, f32, arr, i32 = archgen.T_U32, archgen.T_F32, archgen.T_ARR, archgen.T_I32
    return {"mllama.vision.block_count": (u32, LOCAL),
            "mllama.vision.global.block_count": (u32, GLOBAL),
            "mllama.vision.intermediate_layers_indices": (arr, (i32, INTERMEDIATE)),
            "mllama.vision.embedding_length": (u32, D),
            "mllama.vision.feed_forward_length": (u32, FF),
            "mllama.vision.attention.head_count": (u32, HEADS),
            "mllama.vision.attention.layer_norm_epsilon": (f32, EPS),
            "mllama.vision.image_size": (u32, S),
            "mllama.vision.patch_size": (u32, P),
            "mllama.vision.max_num_tiles": (u32, TILES),
            "mllama.vision.num_channels": (u32, 3)}


# --- the tower -------------------------------------------------------------------------------

def layernorm(x, w, b):
    mean = sum(x) / len(x)
    var = sum((v - mean) ** 2 for v in x) / len(x)
    r = 1.0 / math.sqrt(var + EPS)
    return [(v - mean) * r * g + c for v, g, c in zip(x, w, b)]


def gelu(v):
    return 0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0)))


def linear(w, n_in, x, bias=None):
    y = ref.matvec(w, n_in, x)
    return [a + b for a, b in zip(y, bias)] if bias else y


def encoder_layer(w, b, xs, padding, gated):
    hd = D // HEADS
    hn = [layernorm(x, w[b + "attn_norm.weight"], w[b + "attn_norm.bias"]) for x in xs]
    q = [linear(w[b + "attn_q.weight"], D, h) for h in hn]
    k = [linear(w[b + "attn_k.weight"], D, h) for h in hn]
    v = [linear(w[b + "attn_v.weight"], D, h) for h in hn]
    out = []
    for i in range(len(xs)):
        row = []
        for h in range(HEADS):
            s = slice(h * hd, (h + 1) * hd)
            # a pair of padding positions is masked (the mask's product), nothing else
            scores = [-math.inf if padding[i] and padding[j] else
                      sum(a * c for a, c in zip(q[i][s], k[j][s])) / math.sqrt(hd)
                      for j in range(len(xs))]
            top = max(scores)
            e = [math.exp(sc - top) if sc != -math.inf else 0.0 for sc in scores]
            total = sum(e)
            row += [sum(e[j] * v[j][h * hd + d] for j in range(len(xs))) / total
                    for d in range(hd)]
        out.append(linear(w[b + "attn_output.weight"], D, row))
    ga = w[b + "attn_gate"][0] if gated else 1.0
    xs = [[a + ga * c for a, c in zip(x, o)] for x, o in zip(xs, out)]
    gf = w[b + "ffn_gate"][0] if gated else 1.0
    res = []
    for x in xs:
        h = layernorm(x, w[b + "ffn_norm.weight"], w[b + "ffn_norm.bias"])
        u = [gelu(a) for a in linear(w[b + "ffn_up.weight"], D, h, w[b + "ffn_up.bias"])]
        d = linear(w[b + "ffn_down.weight"], FF, u, w[b + "ffn_down.bias"])
        res.append([a + gf * c for a, c in zip(x, d)])
    return res


def tower(w, pixels, tiles_x, tiles_y, ratio_id):
    """pixels: the canvas, HWC floats (tiles_x * S wide); the projected states of all TILES
    tiles, N_PATCH rows each."""
    n_real = tiles_x * tiles_y
    per_side = S // P
    rows = []
    for t in range(TILES):
        tile = []
        for py in range(per_side):
            for px in range(per_side):
                patch = [0.0] * (3 * P * P)  # (c, ky, kx), kx fastest
                if t < n_real:
                    ty, tx = divmod(t, tiles_x)
                    for c in range(3):
                        for ky in range(P):
                            for kx in range(P):
                                y, x = ty * S + py * P + ky, tx * S + px * P + kx
                                patch[(c * P + ky) * P + kx] = pixels[(y * tiles_x * S + x) * 3 + c]
                tile.append(ref.matvec(w["v.patch_embd.weight"], 3 * P * P, patch))
        rows.append(tile)
    embd = w["v.pre_tile_position_embd.weight"]
    pre = embd[ratio_id * TILES * D:(ratio_id + 1) * TILES * D]
    g = w["v.pre_tile_position_embd.gate"][0]
    rows = [[[a + g * pre[t * D + i] for i, a in enumerate(x)] for x in tile]
            for t, tile in enumerate(rows)]
    rows = [[list(w["v.class_embd"])] + tile for tile in rows]
    pos, gpos = w["v.position_embd.weight"], w["v.position_embd.gate"][0]
    tembd = w["v.tile_position_embd.weight"]
    tpos = tembd[ratio_id * TILES * N_PATCH * D:(ratio_id + 1) * TILES * N_PATCH * D]
    gtile = w["v.tile_position_embd.gate"][0]
    rows = [[[a + gpos * pos[p * D + i] + gtile * tpos[(t * N_PATCH + p) * D + i]
              for i, a in enumerate(x)] for p, x in enumerate(tile)]
            for t, tile in enumerate(rows)]
    rows = [[layernorm(x, w["v.pre_ln.weight"], w["v.pre_ln.bias"]) for x in tile]
            for tile in rows]
    xs, padding = [], []
    for t, tile in enumerate(rows):
        xs += tile + [[0.0] * D for _ in range(N_PAD)]
        padding += [t >= n_real or p >= N_PATCH for p in range(N_ROWS)]
    kept = []
    for il in range(LOCAL):
        if il in INTERMEDIATE:
            kept.append(xs)
        xs = encoder_layer(w, f"v.blk.{il}.", xs, padding, False)
    xs = [layernorm(x, w["v.post_ln.weight"], w["v.post_ln.bias"]) for x in xs]
    embd = w["v.post_tile_position_embd.weight"]
    post = embd[ratio_id * TILES * D:(ratio_id + 1) * TILES * D]
    g = w["v.post_tile_position_embd.gate"][0]
    xs = [[a + g * post[(r // N_ROWS) * D + i] for i, a in enumerate(x)] for r, x in enumerate(xs)]
    for il in range(GLOBAL):
        xs = encoder_layer(w, f"v.global.blk.{il}.", xs, padding, True)
    states = []
    for r, x in enumerate(xs):
        if r % N_ROWS >= N_PATCH:
            continue
        feat = list(x) + [kept[k][r][d] for d in range(D) for k in range(len(kept))]
        states.append(linear(w["mm.0.weight"], FEAT, feat, w["mm.0.bias"]))
    return states


# --- the text model with cross-attention ------------------------------------------------------

class VisionModel(ref.Model):
    def __init__(self, weights, states, n_real_rows, image_pos):
        super().__init__(weights)
        self.image_pos = image_pos
        self.n_real_rows = n_real_rows
        hd, kv = ref.HEAD_DIM, ref.N_HEAD_KV
        self.cross = {}
        for il in ref.CROSS_LAYERS:
            p = f"blk.{il}."
            keys, values = [], []
            for s in states:
                k = ref.matvec(weights[p + "cross_attn_k_proj.weight"], ref.N_EMBD, s)
                k = sum((rmsnorm_head(k[h * hd:(h + 1) * hd],
                                      weights[p + "cross_attn_k_norm.weight"])
                         for h in range(kv)), [])
                keys.append(k)
                values.append(ref.matvec(weights[p + "cross_attn_v_proj.weight"], ref.N_EMBD, s))
            self.cross[il] = (keys, values)

    def cross_layer(self, il, x, pos):
        if pos < self.image_pos:  # Meta's full-row mask: no attention output, no MLP
            return x
        w, p = self.w, f"blk.{il}."
        hd = ref.HEAD_DIM
        keys, values = self.cross[il]
        n = self.n_real_rows  # the real tiles' rows; the padding tiles' are masked
        h = ref.rmsnorm(x, w[p + "attn_norm.weight"])
        q = ref.matvec(w[p + "cross_attn_q_proj.weight"], ref.N_EMBD, h)
        attn = []
        for hq in range(ref.N_HEAD):
            hk = hq // (ref.N_HEAD // ref.N_HEAD_KV)
            qh = rmsnorm_head(q[hq * hd:(hq + 1) * hd], w[p + "cross_attn_q_norm.weight"])
            scores = [sum(a * b for a, b in zip(qh, keys[j][hk * hd:(hk + 1) * hd]))
                      / math.sqrt(hd) for j in range(n)]
            top = max(scores)
            e = [math.exp(s - top) for s in scores]
            total = sum(e)
            attn += [sum(e[j] * values[j][hk * hd + d] for j in range(n)) / total
                     for d in range(hd)]
        o = ref.matvec(w[p + "cross_attn_o_proj.weight"], ref.N_HEAD * hd, attn)
        ga = math.tanh(w[p + "cross_attn_attn_gate"][0])
        x = [a + ga * b for a, b in zip(x, o)]
        hm = ref.rmsnorm(x, w[p + "ffn_norm.weight"])
        g = ref.matvec(w[p + "ffn_gate.weight"], ref.N_EMBD, hm)
        u = ref.matvec(w[p + "ffn_up.weight"], ref.N_EMBD, hm)
        d = ref.matvec(w[p + "ffn_down.weight"], ref.N_FF, [ref.silu(a) * b for a, b in zip(g, u)])
        gm = math.tanh(w[p + "cross_attn_mlp_gate"][0])
        return [a + gm * b for a, b in zip(x, d)]


def rmsnorm_head(x, w):
    r = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + ref.EPS)
    return [v * r * g for v, g in zip(x, w)]


def fmt(values):
    return " ".join(f"{v:.9g}" for v in values)


def f32(values):
    return [struct.unpack("<f", struct.pack("<f", v))[0] for v in values]


def main():
    ap = argparse.ArgumentParser(description="mllama vision fixture and pure-Python reference")
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=3211)
    a = ap.parse_args()

    kv, n_out = ref.metadata(archgen.read_kv(ref.VOCAB_FROM))
    kv.update(vision_metadata())
    spec = {"n_layers": ref.N_LAYER, "tensors": ref.spec_tensors(n_out) + vision_tensors()}
    tensors = archgen.expand_tensors(spec)
    archgen.write_gguf(os.path.join(a.out_dir, "mllama.gguf"), kv, tensors, a.seed)
    weights = {name: f32(archgen.tensor_values(a.seed, name, shape, init, args))
               for name, shape, init, args, _ in tensors}

    png = testpng.picture(WIDTH, HEIGHT)
    with open(os.path.join(a.out_dir, "mllama-wide.png"), "wb") as f:
        f.write(png)
    rgb = []
    for y in range(HEIGHT):  # testpng's pixels, as its picture() draws them
        for x in range(WIDTH):
            r, g = x * 255 // (WIDTH - 1), y * 255 // (HEIGHT - 1)
            b = 200 if (x // 4 + y // 4) % 2 else 40
            if y == 0:
                r = g = b = 255
            if x == 0:
                r, g, b = 0, 0, 255
            rgb += [r, g, b]
    pixels = f32([(v / 255.0 - MEAN[i % 3]) / STD[i % 3] for i, v in enumerate(rgb)])
    with open(os.path.join(a.out_dir, "mllama.wide.pixels.f32"), "wb") as f:
        f.write(struct.pack(f"<{len(pixels)}f", *pixels))

    tiles_x, tiles_y, ratio_id = 2, 1, 5
    states = [f32(s) for s in tower(weights, pixels, tiles_x, tiles_y, ratio_id)]
    with open(os.path.join(a.out_dir, "mllama.wide.embd.f32"), "wb") as f:
        for s in states:
            f.write(struct.pack(f"<{len(s)}f", *s))

    image_token = n_out  # the image token: the first row past the output's
    ids = TEXT_IDS[:IMAGE_AT] + [image_token] + TEXT_IDS[IMAGE_AT:]
    model = VisionModel(weights, states, tiles_x * tiles_y * N_PATCH, IMAGE_AT)
    all_logits = [model.step(t, pos) for pos, t in enumerate(ids)]
    logits, steps, greedy, gaps = all_logits[-1], [], [], []
    for s in range(ref.N_GREEDY):
        steps.append(logits)
        best = max(range(n_out), key=lambda i: (logits[i], -i))
        greedy.append(best)
        gaps.append(logits[best] - max(v for i, v in enumerate(logits) if i != best))
        if s + 1 < ref.N_GREEDY:
            logits = model.step(best, len(ids) + s)

    with open(os.path.join(a.out_dir, "mllama.wide.ref.txt"), "w") as f:
        f.write("# mllama vision reference: pure Python through tools/archref/mllamavis.py "
                "(transformers' MllamaForConditionalGeneration; rows before the image as Meta's)\n")
        f.write(f"# image: mllama-wide.png, {WIDTH} x {HEIGHT}, tiles {tiles_x} x {tiles_y}, "
                f"aspect ratio id {ratio_id}, {TILES} tiles of {N_PATCH} rows encoded\n")
        f.write(f"image_at 1 {IMAGE_AT}\n")
        f.write(f"input_ids {len(ids)} {' '.join(map(str, ids))}\n")
        f.write(f"# greedy_min_top2_gap {min(gaps):.6f}\n")
        f.write(f"greedy_ids {ref.N_GREEDY} {' '.join(map(str, greedy))}\n")
        f.write(f"all_logits {len(ids)} {n_out}\n")
        for row in all_logits:
            f.write(fmt(row) + "\n")
        f.write(f"greedy_step_logits {ref.N_GREEDY} {n_out}\n")
        for row in steps:
            f.write(fmt(row) + "\n")


if __name__ == "__main__":
    main()
