#!/usr/bin/env python3
"""gemma4audiogen: the tiny random-weight Gemma 4 audio tower of tests/fixtures/audio and its
reference, computed here in plain Python (double precision, standard library only) from the
semantics of transformers' Gemma 4 audio model and feature extractor.

    gemma4audiogen.py OUT_DIR [--seed N]

Writes OUT_DIR/gemma4a-tower.gguf: a "gemma4" file holding only an audio tower as ollama's
converter lays one out (keys gemma4.audio.*, tensors a.* and mm.a.*, per_dim_scale already
through softplus, the depthwise kernels squeezed to [kernel, channels]; a per-dimension key
scale in the second block only, clipped linears' bounds as one-value F32 tensors beside some
products); OUT_DIR/gemma4a-clip.mel.f32, the log-mel frames of the
clip below (frame after frame, 128 float32 values each); OUT_DIR/gemma4a-clip.embd.f32, the
tower's embeddings of those frames (float32, token after token, the text width each).

The clip: 1.2 s at 16 kHz of 16-bit samples from integer arithmetic alone (a 32-bit LCG's
noise plus a triangle wave), so that a test makes the very same samples (clip_sample below).
The attention here runs as transformers does, in blocks of 12 queries against 24 keys with
the blocked relative shift, not as Corral's plain window, so the two are independent.

Also writes OUT_DIR/gemma4a-model.gguf: the same tower beside a two-layer gemma4 text model
as wide as the tower's output (one sliding-window layer, one global layer whose keys are its
values), with gemma3.gguf's vocabulary and the marks a Gemma 4 prompt holds (the audio
marks the runner places around a clip, the turn marks), for the server's full audio path.

    gemma4audiogen.py --fuzz-seeds OUT_DIR [--seed N]

Writes instead fuzz/fuzz_audio_tower.c's seeds besides the fixtures: towers at the edges of
what the loader takes (one block, one head, a one-tap depthwise kernel, one channel per
subsampling convolution; eight heads of width 2), three blocks with F16 matrices and
kernels, and one whose bound tensor holds two values, which the loader must refuse.
"""
import argparse
import math
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import archgen  # noqa: E402

RATE, WINDOW, HOP, NFFT, NMEL = 16000, 320, 160, 512, 128
E, H, FF, K, C0, C1, PROJ, TEXT, LAYERS = 16, 2, 64, 5, 4, 4, 24, 32, 2
EPS = 1e-6
CHUNK, PAST, CAP = 12, 12, 50.0
N_SAMPLES = 19200


def clip_sample(i, state):
    """Sample i (a 16-bit integer) and the LCG's next state."""
    state = (state * 1664525 + 1013904223) % (1 << 32)
    noise = (state >> 16) % 4096 - 2048
    phase = i % 37
    tri = (phase * 800 if phase < 19 else (37 - phase) * 800) - 7200
    return noise + tri, state


def clip():
    out, state = [], 12345
    for i in range(N_SAMPLES):
        v, state = clip_sample(i, state)
        out.append(v / 32768.0)
    return out


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


# ---- log-mel (transformers' Gemma 4 feature extractor for one unpadded clip) ----

def mel_filters():
    hz_to_mel = lambda f: 2595.0 * math.log10(1.0 + f / 700.0)  # noqa: E731
    mel_to_hz = lambda m: 700.0 * (10.0 ** (m / 2595.0) - 1.0)  # noqa: E731
    top = hz_to_mel(RATE / 2)
    edges = [mel_to_hz(top * i / (NMEL + 1)) for i in range(NMEL + 2)]
    bins = NFFT // 2 + 1
    fb = []
    for m in range(NMEL):
        lo, c, hi = edges[m], edges[m + 1], edges[m + 2]
        row = []
        for k in range(bins):
            f = k * RATE / NFFT
            up = (f - lo) / (c - lo)
            down = (hi - f) / (hi - c)
            row.append(max(0.0, min(up, down)))
        fb.append(row)
    return fb


def log_mel(samples):
    padded = [0.0] * (WINDOW // 2) + samples
    n_frames = (len(padded) - (WINDOW + 1)) // HOP + 1
    window = [0.5 - 0.5 * math.cos(2 * math.pi * i / WINDOW) for i in range(WINDOW)]
    fb = mel_filters()
    bins = NFFT // 2 + 1
    cos_t = [math.cos(2 * math.pi * i / NFFT) for i in range(NFFT)]
    sin_t = [math.sin(2 * math.pi * i / NFFT) for i in range(NFFT)]
    frames = []
    for f in range(n_frames):
        # a frame of WINDOW + 1 samples, its last dropped, windowed, zero-filled to NFFT
        x = [padded[f * HOP + j] * window[j] for j in range(WINDOW)]
        mag = []
        for k in range(bins):
            re = im = 0.0
            for j, v in enumerate(x):
                idx = (k * j) % NFFT
                re += v * cos_t[idx]
                im -= v * sin_t[idx]
            mag.append(math.hypot(re, im))
        frames.append([math.log(sum(w * a for w, a in zip(fb[m], mag)) + 1e-3)
                       for m in range(NMEL)])
    return frames


# ---- the tower ----

def rms(x, w=None):
    s = 1.0 / math.sqrt(sum(v * v for v in x) / len(x) + EPS)
    return [v * s * (w[i] if w else 1.0) for i, v in enumerate(x)]


def linear(w, x, n_in, n_out, bias=None):
    """w: GGUF layout [n_in, n_out] flattened (row o = w[o * n_in:(o + 1) * n_in])."""
    return [sum(w[o * n_in + i] * x[i] for i in range(n_in)) + (bias[o] if bias else 0.0)
            for o in range(n_out)]


# Clipped linears' bounds (input_min, input_max, output_min, output_max) where the file has
# them, tight enough to bite on the fixture's values; the rest are unbounded.
CLAMPS = {"a.blk.0.attn_q": (-1.0, 1.0, None, None),
          "a.blk.0.ffn_down": (-0.3, 0.3, None, None),
          "a.blk.1.conv_pw2": (None, None, -0.5, 0.5),
          "a.blk.1.ffn_up_1": (-1.5, 1.5, -1.0, 1.0),
          "mm.a.input_projection": (-1.2, 1.2, -1.5, 1.5)}
BOUNDS = ("input_min", "input_max", "output_min", "output_max")
BITES = {}


def clip_to(values, lo, hi, key):
    if lo is None:
        return values
    out = [min(max(v, lo), hi) for v in values]
    BITES[key] = BITES.get(key, 0) + sum(1 for a, b in zip(values, out) if a != b)
    return out


def lin(W, stem, x, n_in, n_out, bias=None):
    """The linear stem.weight with its bounds where CLAMPS has them."""
    b = CLAMPS.get(stem, (None,) * 4)
    x = clip_to(x, b[0], b[1], stem + ".input")
    y = clip_to(linear(W[stem + ".weight"], x, n_in, n_out), b[2], b[3], stem + ".output")
    return [v + bias[i] for i, v in enumerate(y)] if bias else y


def silu(v):
    return v / (1.0 + math.exp(-v))


def conv_layer(x, T, F, cin, w, cout, norm):
    """x[t][f][c]; PyTorch Conv2d(3 x 3, stride 2, padding 1, no bias) over (t, f), then
    LayerNorm over channels (weight only) and ReLU."""
    To, Fo = (T - 1) // 2 + 1, (F - 1) // 2 + 1
    out = []
    for t in range(To):
        row = []
        for f in range(Fo):
            y = []
            for co in range(cout):
                s = 0.0
                for ci in range(cin):
                    for kt in range(3):
                        for kf in range(3):
                            ti, fi = 2 * t - 1 + kt, 2 * f - 1 + kf
                            if 0 <= ti < T and 0 <= fi < F:
                                s += w[((co * cin + ci) * 3 + kt) * 3 + kf] * x[ti][fi][ci]
                y.append(s)
            mean = sum(y) / cout
            var = sum((v - mean) ** 2 for v in y) / cout
            y = [max(0.0, (v - mean) / math.sqrt(var + EPS) * norm[c]) for c, v in enumerate(y)]
            row.append(y)
        out.append(row)
    return out, To, Fo


def ffn(h, W, b, suffix):
    """Half a feed-forward step: ffn_norm, ffn_up, ffn_down, ffn_post_norm (+ suffix)."""
    w = lambda part: W[f"{b}ffn_{part}{suffix}.weight"]  # noqa: E731
    out = []
    for x in h:
        y = rms(x, w("norm"))
        y = [silu(v) for v in lin(W, f"{b}ffn_up{suffix}", y, E, FF)]
        y = rms(lin(W, f"{b}ffn_down{suffix}", y, FF, E), w("post_norm"))
        out.append([a + 0.5 * b for a, b in zip(x, y)])
    return out


def attention(h, W, il):
    n, D = len(h), E // H
    b = f"a.blk.{il}."
    q_scale = D ** -0.5 / math.log(2)
    k_scale = math.log(1 + math.e) / math.log(2)
    pds = W[b + "per_dim_scale.weight"]  # softplus already applied, as the file stores it
    pdk = W.get(b + "per_dim_k_scale.weight")
    xs = [rms(x, W[b + "ln1.weight"]) for x in h]
    Q = [lin(W, b + "attn_q", x, E, E) for x in xs]
    Kx = [lin(W, b + "attn_k", x, E, E) for x in xs]
    V = [lin(W, b + "attn_v", x, E, E) for x in xs]
    Q = [[v * q_scale * pds[c % D] for c, v in enumerate(r)] for r in Q]
    Kx = [[v * k_scale * (pdk[c % D] if pdk else 1.0) for c, v in enumerate(r)] for r in Kx]
    # relative positions 12, 11, .., 0 as transformers orders them
    half = E // 2
    inc = math.log(10000.0) / max(half - 1, 1)
    inv = [math.exp(-k * inc) for k in range(half)]
    pos = [[math.sin(p * iv) for iv in inv] + [math.cos(p * iv) for iv in inv]
           for p in range(PAST, -1, -1)]
    R = [lin(W, b + "linear_pos", p, E, E) for p in pos]
    S = CHUNK + PAST  # context size
    nb = (n + CHUNK - 1) // CHUNK
    zero = [0.0] * E
    out = [[0.0] * E for _ in range(n)]
    for hd in range(H):
        sl = slice(hd * D, (hd + 1) * D)
        for blk in range(nb):
            for qi in range(CHUNK):
                i = blk * CHUNK + qi
                if i >= n:
                    continue
                q = Q[i][sl]
                # matrix_bd before the shift: the query against every relative row
                bd = [sum(a * c for a, c in zip(q, R[r][sl])) for r in range(PAST + 1)]
                logits = []
                for c in range(S):
                    j = blk * CHUNK - PAST + c
                    key = Kx[j][sl] if 0 <= j < n else zero[:D]
                    ac = sum(a * kk for a, kk in zip(q, key))
                    # the blocked relative shift: column c takes bd[c - qi] when in range
                    flat = qi * S + c
                    row, col = divmod(flat, S + 1)
                    shifted = 0.0
                    if col < PAST + 1:
                        src = bd if row == qi else None
                        if src is None:  # the previous query's row: bd of that query
                            pq = Q[blk * CHUNK + row][sl]
                            src = [sum(a * cc for a, cc in zip(pq, R[r][sl]))
                                   for r in range(PAST + 1)]
                        shifted = src[col]
                    s = CAP * math.tanh((ac + shifted) / CAP)
                    valid = 0 <= j < n and 0 <= i - j <= PAST
                    logits.append(s if valid else None)
                top = max(v for v in logits if v is not None)
                ex = [math.exp(v - top) if v is not None else 0.0 for v in logits]
                tot = sum(ex)
                for c in range(S):
                    j = blk * CHUNK - PAST + c
                    if ex[c]:
                        for d in range(D):
                            out[i][hd * D + d] += ex[c] / tot * V[j][hd * D + d]
    res = []
    for x, o in zip(h, out):
        y = rms(lin(W, b + "attn_out", o, E, E), W[b + "ln2.weight"])
        res.append([a + c for a, c in zip(x, y)])
    return res


def light_conv(h, W, il):
    b = f"a.blk.{il}."
    n = len(h)
    g = []
    for x in h:
        y = lin(W, b + "conv_pw1", rms(x, W[b + "conv_norm.weight"]), E, 2 * E)
        g.append([y[c] / (1.0 + math.exp(-y[E + c])) for c in range(E)])
    dw = W[b + "conv_dw.weight"]  # [kernel, channels]: channel c's taps at c * K
    out = []
    for t in range(n):
        y = []
        for c in range(E):
            s = 0.0
            for k in range(K):
                ti = t - (K - 1) + k
                if ti >= 0:
                    s += dw[c * K + k] * g[ti][c]
            y.append(s)
        y = [silu(v) for v in rms(y, W[b + "norm_conv.weight"])]
        y = lin(W, b + "conv_pw2", y, E, E)
        out.append([a + c for a, c in zip(h[t], y)])
    return out


def tower(mel, W):
    T = len(mel)
    x = [[[v] for v in row] for row in mel]
    x, T1, F1 = conv_layer(x, T, NMEL, 1, W["a.conv1d.0.weight"], C0, W["a.conv1d.0.norm.weight"])
    x, T2, F2 = conv_layer(x, T1, F1, C0, W["a.conv1d.1.weight"], C1, W["a.conv1d.1.norm.weight"])
    h = [lin(W, "a.pre_encode.out", [v for f in row for v in f], F2 * C1, E) for row in x]
    for il in range(LAYERS):
        b = f"a.blk.{il}."
        h = ffn(h, W, b, "")
        h = attention(h, W, il)
        h = light_conv(h, W, il)
        h = ffn(h, W, b, "_1")
        h = [rms(x, W[b + "layer_pre_norm.weight"]) for x in h]
    h = [lin(W, "mm.a.fc", x, E, PROJ, W["mm.a.fc.bias"]) for x in h]
    return [lin(W, "mm.a.input_projection", rms(x), PROJ, TEXT) for x in h]


def tensors():
    m = lambda n_in, n_out, g=1.0: ([n_in, n_out], "matrix", [g], "f32")  # noqa: E731
    v = lambda n: ([n], "norm", [], "f32")  # noqa: E731
    t = [("a.conv1d.0.weight", [3, 3, 1, C0], "matrix", [1.0], "f32"),
         ("a.conv1d.0.norm.weight",) + v(C0),
         ("a.conv1d.1.weight", [3, 3, C0, C1], "matrix", [1.0], "f32"),
         ("a.conv1d.1.norm.weight",) + v(C1),
         ("a.pre_encode.out.weight",) + m(32 * C1, E)]
    for il in range(LAYERS):
        b = f"a.blk.{il}."
        t += [(b + "ffn_norm.weight",) + v(E), (b + "ffn_up.weight",) + m(E, FF),
              (b + "ffn_down.weight",) + m(FF, E), (b + "ffn_post_norm.weight",) + v(E),
              (b + "ln1.weight",) + v(E), (b + "attn_q.weight",) + m(E, E, 2.0),
              (b + "attn_k.weight",) + m(E, E, 2.0), (b + "attn_v.weight",) + m(E, E),
              (b + "attn_out.weight",) + m(E, E),
              (b + "per_dim_scale.weight", [E // H], "norm", [0.7], "f32"),
              (b + "linear_pos.weight",) + m(E, E, 2.0), (b + "ln2.weight",) + v(E),
              (b + "conv_norm.weight",) + v(E), (b + "conv_pw1.weight",) + m(E, 2 * E),
              (b + "conv_dw.weight", [K, E], "matrix", [1.0], "f32"),
              (b + "norm_conv.weight",) + v(E), (b + "conv_pw2.weight",) + m(E, E),
              (b + "ffn_norm_1.weight",) + v(E), (b + "ffn_up_1.weight",) + m(E, FF),
              (b + "ffn_down_1.weight",) + m(FF, E), (b + "ffn_post_norm_1.weight",) + v(E),
              (b + "layer_pre_norm.weight",) + v(E)]
        if il == 1:
            t.append((b + "per_dim_k_scale.weight", [E // H], "norm", [1.2], "f32"))
    t += [("mm.a.fc.weight",) + m(E, PROJ), ("mm.a.fc.bias", [PROJ], "bias", [0.1], "f32"),
          ("mm.a.input_projection.weight",) + m(PROJ, TEXT)]
    for stem, bounds in CLAMPS.items():
        for name, value in zip(BOUNDS, bounds):
            if value is not None:
                t.append((f"{stem}.{name}", [1], "const", [value], "f32"))
    return t


# The text model of gemma4a-model.gguf: layer 0 slides (head width 16), layer 1 is global
# (head width 32, no value projection), as tests/fixtures/arch/gemma4.spec.json's layers do.
TEXT_FF, TEXT_HEADS, SWA_HEAD, GLOBAL_HEAD = 64, 2, 16, 32
MARKS = [b"<|audio>", b"<audio|>", b"<|turn>", b"<turn|>"]
VOCAB_FROM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                          "fixtures", "arch", "gemma3.gguf")


def text_model():
    """The text model's keys (its vocabulary too) and tensors."""
    u32, f, arr = archgen.T_U32, archgen.T_F32, archgen.T_ARR
    vocab = {k: v for k, v in archgen.read_kv(VOCAB_FROM).items() if k.startswith("tokenizer.")}
    tokens, scores, types = (vocab[f"tokenizer.ggml.{k}"][1][1] for k in ("tokens", "scores",
                                                                            "token_type"))
    tokens += MARKS
    scores += [0.0] * len(MARKS)
    types += [3] * len(MARKS)  # control: written by the template, never by a user
    n_vocab = len(tokens)
    kv = {"gemma4.context_length": (u32, 256), "gemma4.block_count": (u32, 2),
          "gemma4.feed_forward_length": (u32, TEXT_FF),
          "gemma4.attention.head_count": (u32, TEXT_HEADS),
          "gemma4.attention.head_count_kv": (arr, (u32, [1, 1])),
          "gemma4.attention.key_length": (u32, GLOBAL_HEAD),
          "gemma4.attention.value_length": (u32, GLOBAL_HEAD),
          "gemma4.attention.key_length_swa": (u32, SWA_HEAD),
          "gemma4.attention.value_length_swa": (u32, SWA_HEAD),
          "gemma4.rope.dimension_count": (u32, GLOBAL_HEAD),
          "gemma4.rope.dimension_count_swa": (u32, SWA_HEAD),
          "gemma4.rope.freq_base": (f, 1000000.0), "gemma4.rope.freq_base_swa": (f, 10000.0),
          "gemma4.attention.sliding_window": (u32, 4),
          "gemma4.attention.sliding_window_pattern": (arr, (archgen.T_BOOL, [True, False])),
          "gemma4.attention.shared_kv_layers": (u32, 0),
          "gemma4.embedding_length_per_layer_input": (u32, 0),
          "gemma4.attention.layer_norm_rms_epsilon": (f, 1e-6),
          "gemma4.final_logit_softcapping": (f, 30.0)}
    kv.update(vocab)
    m = lambda n_in, n_out: ([n_in, n_out], "matrix", [1.0], "f32")  # noqa: E731
    v = lambda n, scale=1.0: ([n], "norm", [scale], "f32")  # noqa: E731
    rope = [1.0] * (GLOBAL_HEAD // 8) + [1e30] * (GLOBAL_HEAD // 2 - GLOBAL_HEAD // 8)
    t = [("token_embd.weight", [TEXT, n_vocab], "normal", [0.15], "f32"),
         ("output_norm.weight", [TEXT], "const", [2.5], "f32"),
         ("rope_freqs.weight", [GLOBAL_HEAD // 2], "values", [rope], "f32")]
    for il, head in enumerate((SWA_HEAD, GLOBAL_HEAD)):
        b = f"blk.{il}."
        t += [(b + "attn_norm.weight",) + v(TEXT),
              (b + "attn_q.weight",) + m(TEXT, TEXT_HEADS * head),
              (b + "attn_k.weight",) + m(TEXT, head)]
        if head == SWA_HEAD:
            t.append((b + "attn_v.weight",) + m(TEXT, head))
        t += [(b + "attn_q_norm.weight",) + v(head, 0.5),
              (b + "attn_k_norm.weight",) + v(head, 0.5),
              (b + "attn_output.weight",) + m(TEXT_HEADS * head, TEXT),
              (b + "post_attention_norm.weight",) + v(TEXT), (b + "ffn_norm.weight",) + v(TEXT),
              (b + "ffn_gate.weight",) + m(TEXT, TEXT_FF),
              (b + "ffn_up.weight",) + m(TEXT, TEXT_FF),
              (b + "ffn_down.weight",) + m(TEXT_FF, TEXT), (b + "post_ffw_norm.weight",) + v(TEXT),
              (b + "layer_output_scale.weight",) + v(1)]
    return kv, t


def tower_kv(seed):
    u32, f, s = archgen.T_U32, archgen.T_F32, archgen.T_STR
    return {"general.architecture": (s, b"gemma4"),
            "general.name": (s, f"gemma4audiogen-s{seed}".encode()),
            "general.file_type": (u32, 0),
            "gemma4.embedding_length": (u32, TEXT),
            "gemma4.audio.block_count": (u32, LAYERS),
            "gemma4.audio.embedding_length": (u32, E),
            "gemma4.audio.feed_forward_length": (u32, FF),
            "gemma4.audio.attention.head_count": (u32, H),
            "gemma4.audio.attention.layer_norm_epsilon": (f, EPS),
            "gemma4.audio.conv_kernel_size": (u32, K)}


# Each seed: (file name, the shape constants it changes, a tensor whose length it doubles,
# whether its matrices are stored as F16).
FUZZ_SEEDS = [("edge.gguf", {"E": 2, "H": 1, "FF": 1, "K": 1, "C0": 1, "C1": 1, "PROJ": 1,
                             "LAYERS": 1}, None, False),
              ("narrow-heads.gguf", {"H": 8, "K": 3, "LAYERS": 1}, None, False),
              ("f16-three-blocks.gguf", {"H": 4, "FF": 24, "K": 7, "C0": 3, "C1": 2, "PROJ": 8,
                                         "LAYERS": 3}, None, True),
              ("long-bound.gguf", {"LAYERS": 1}, "a.blk.0.attn_q.input_max", False)]


def fuzz_seeds(out_dir, seed):
    saved = dict(globals())
    for name, shape, doubled, f16 in FUZZ_SEEDS:
        globals().update(shape)
        t = [(n, [2] if n == doubled else dims, init, args,
              "f16" if f16 and init == "matrix" else kind)
             for n, dims, init, args, kind in tensors()]
        archgen.write_gguf(os.path.join(out_dir, name), tower_kv(seed), t, seed)
        globals().update({k: saved[k] for k in shape})


def main():
    ap = argparse.ArgumentParser(description="tiny Gemma 4 audio tower and its reference")
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=4700)
    ap.add_argument("--fuzz-seeds", action="store_true")
    a = ap.parse_args()
    if a.fuzz_seeds:
        fuzz_seeds(a.out_dir, a.seed)
        return
    s = archgen.T_STR
    kv = tower_kv(a.seed)
    t = tensors()
    archgen.write_gguf(os.path.join(a.out_dir, "gemma4a-tower.gguf"), kv, t, a.seed)
    text_kv, text_t = text_model()
    model_kv = dict(kv)
    model_kv["general.name"] = (s, f"gemma4audiogen-model-s{a.seed}".encode())
    model_kv.update(text_kv)
    archgen.write_gguf(os.path.join(a.out_dir, "gemma4a-model.gguf"), model_kv, text_t + t, a.seed)
    W = {name: [f32(x) for x in archgen.tensor_values(a.seed, name, shape, init, args)]
         for name, shape, init, args, _ in t}
    mel = [[f32(v) for v in row] for row in log_mel(clip())]
    with open(os.path.join(a.out_dir, "gemma4a-clip.mel.f32"), "wb") as out:
        for row in mel:
            out.write(struct.pack(f"<{len(row)}f", *row))
    embd = tower(mel, W)
    with open(os.path.join(a.out_dir, "gemma4a-clip.embd.f32"), "wb") as out:
        for row in embd:
            out.write(struct.pack(f"<{len(row)}f", *row))
    print(f"{len(mel)} frames, {len(embd)} tokens of {len(embd[0])}; values clipped: {BITES}")


if __name__ == "__main__":
    main()
