#!/usr/bin/env python3
"""archgen: writes a tiny random-weight GGUF (F32 tensors, F16 where a spec asks) from a JSON
spec, for the architecture fixtures in tests/fixtures/arch. Standard library only.

    archgen.py SPEC.json OUT.gguf [--seed N]

A spec names the architecture, the vocabulary to copy (every tokenizer.* key of another GGUF),
the metadata keys and the tensors. "{L}" in a tensor name repeats it for every layer in
"layers" (or the spec's n_layers); shapes are in GGUF order (ne0 first, ne0 = the input width of
a matrix). Each tensor's values come from its own generator, seeded from the spec's seed and the
tensor's name, so adding a tensor never changes the others.

    {"arch": "gemma", "n_layers": 2, "seed": 2001,
     "vocab_from": "tests/fixtures/arch/gemma2.gguf",
     "kv": {"gemma.block_count": ["u32", 2], "gemma.rope.freq_base": ["f32", 10000.0]},
     "tensors": [["token_embd.weight", [64, 512], "normal", 0.125],
                 ["blk.{L}.attn_q.weight", [64, 128], "matrix", 1.0],
                 ["blk.{L}.attn_norm.weight", [64], "norm"]]}

Inits: "matrix" GAIN: N(0, (GAIN / sqrt(ne0))^2); "normal" STD: N(0, STD^2); "norm"
[SCALE]: SCALE * (1 + N(0, 0.1^2)), SCALE 1 by default; "bias" [STD]: N(0, STD^2), STD 0.1 by default; "const" VALUE; "values"
[V0, V1, ...]: exactly these (as many as the shape holds).

A tensor's last argument may be {"type": "f16"}: its values stored as F16, for a large table
that is only looked up, never multiplied (gemma3n's per_layer_token_embd), whose rows both
engines widen to the same floats. It combines with {"layers": [...]} in one object.
"""
import argparse
import hashlib
import json
import math
import os
import random
import struct
import sys

GGUF_MAGIC = b"GGUF"
ALIGNMENT = 32
GGML_F32, GGML_F16 = 0, 1
T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)
SCALAR = {T_U8: "<B", T_I8: "<b", T_U16: "<H", T_I16: "<h", T_U32: "<I", T_I32: "<i",
          T_F32: "<f", T_BOOL: "<?", T_U64: "<Q", T_I64: "<q", T_F64: "<d"}
SPEC_TYPES = {"u8": T_U8, "i8": T_I8, "u16": T_U16, "i16": T_I16, "u32": T_U32, "i32": T_I32,
              "f32": T_F32, "bool": T_BOOL, "str": T_STR, "u64": T_U64, "i64": T_I64, "f64": T_F64}


# --- reading the vocabulary of another GGUF ------------------------------------------------

class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        value = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return value

    def string(self):
        n = self.take("<Q")
        s = self.data[self.pos:self.pos + n]
        self.pos += n
        return s

    def value(self, vtype):
        """Returns the value as (type, payload) so that it can be written back unchanged."""
        if vtype == T_STR:
            return (T_STR, self.string())
        if vtype == T_ARR:
            etype, n = self.take("<I"), self.take("<Q")
            return (T_ARR, (etype, [self.value(etype)[1] for _ in range(n)]))
        return (vtype, self.take(SCALAR[vtype]))


def read_kv(path):
    r = Reader(open(path, "rb").read())
    if r.data[:4] != GGUF_MAGIC:
        sys.exit(f"archgen: {path} is not a GGUF file")
    r.pos = 4
    r.take("<I")
    r.take("<Q")
    n_kv = r.take("<Q")
    kv = {}
    for _ in range(n_kv):
        key = r.string().decode()
        kv[key] = r.value(r.take("<I"))
    return kv


# --- writing --------------------------------------------------------------------------------

def put_string(out, s):
    b = s if isinstance(s, bytes) else s.encode()
    out += struct.pack("<Q", len(b)) + b


def put_value(out, vtype, payload):
    if vtype == T_STR:
        put_string(out, payload)
    elif vtype == T_ARR:
        etype, items = payload
        out += struct.pack("<IQ", etype, len(items))
        for item in items:
            put_value(out, etype, item)
    else:
        out += struct.pack(SCALAR[vtype], payload)


def spec_value(typed):
    """["u32", 4] -> (T_U32, 4); ["arr", "f32", [1, 2]] -> an array of that element type."""
    if typed[0] == "arr":
        etype = SPEC_TYPES[typed[1]]
        return (T_ARR, (etype, [v.encode() if etype == T_STR else v for v in typed[2]]))
    vtype = SPEC_TYPES[typed[0]]
    return (vtype, typed[1].encode() if vtype == T_STR else typed[1])


def tensor_values(seed, name, shape, init, args):
    digest = hashlib.sha256(f"{seed}:{name}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "little"))
    count = math.prod(shape)
    if init == "matrix":
        std = args[0] / math.sqrt(shape[0])
        return [rng.gauss(0.0, std) for _ in range(count)]
    if init == "normal":
        return [rng.gauss(0.0, args[0]) for _ in range(count)]
    if init == "norm":
        scale = args[0] if args else 1.0
        return [scale * (1.0 + rng.gauss(0.0, 0.1)) for _ in range(count)]
    if init == "bias":
        std = args[0] if args else 0.1
        return [rng.gauss(0.0, std) for _ in range(count)]
    if init == "const":
        return [float(args[0])] * count
    if init == "values":
        if len(args[0]) != count:
            sys.exit(f"archgen: {name} needs {count} values, the spec gives {len(args[0])}")
        return [float(v) for v in args[0]]
    sys.exit(f"archgen: unknown init '{init}' for {name}")


def expand_tensors(spec):
    layers = spec.get("layers", list(range(spec.get("n_layers", 0))))
    out = []
    for entry in spec["tensors"]:
        name, shape, init, args = entry[0], entry[1], entry[2], entry[3:]
        opts = args.pop() if args and isinstance(args[-1], dict) else {}
        kind = opts.get("type", "f32")
        if kind not in ("f32", "f16"):
            sys.exit(f"archgen: {name}: type '{kind}' is not supported")
        if "{L}" in name:
            for layer in opts.get("layers", layers):
                out.append((name.replace("{L}", str(layer)), shape, init, args, kind))
        else:
            out.append((name, shape, init, args, kind))
    return out


def main():
    ap = argparse.ArgumentParser(description="tiny random-weight GGUF from a JSON spec")
    ap.add_argument("spec")
    ap.add_argument("out")
    ap.add_argument("--seed", type=int)
    a = ap.parse_args()
    spec = json.load(open(a.spec))
    seed = a.seed if a.seed is not None else spec["seed"]

    kv = {"general.architecture": (T_STR, spec["arch"].encode()),
          "general.name": (T_STR, spec.get("name", spec["arch"]).encode()),
          "general.file_type": (T_U32, 0)}
    for key, typed in spec.get("kv", {}).items():
        kv[key] = spec_value(typed)
    if "vocab_from" in spec:
        for key, value in read_kv(spec["vocab_from"]).items():
            if key.startswith("tokenizer."):
                kv.setdefault(key, value)

    write_gguf(a.out, kv, expand_tensors(spec), seed)


def write_gguf(path, kv, tensors, seed):
    """kv: {key: (type, payload)}; tensors: (name, shape, init, args, "f32" or "f16") as
    expand_tensors gives them. Written to path + ".tmp", then renamed."""
    header = bytearray(GGUF_MAGIC + struct.pack("<IQQ", 3, len(tensors), len(kv)))
    for key, (vtype, payload) in kv.items():
        put_string(header, key)
        header += struct.pack("<I", vtype)
        put_value(header, vtype, payload)
    offset = 0
    blobs = []
    for name, shape, init, args, kind in tensors:
        put_string(header, name)
        header += struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", d) for d in shape)
        header += struct.pack("<IQ", GGML_F16 if kind == "f16" else GGML_F32, offset)
        values = tensor_values(seed, name, shape, init, args)
        blob = struct.pack(f"<{len(values)}{'e' if kind == 'f16' else 'f'}", *values)
        blob += b"\0" * (-len(blob) % ALIGNMENT)
        blobs.append(blob)
        offset += len(blob)
    header += b"\0" * (-len(header) % ALIGNMENT)
    with open(path + ".tmp", "wb") as f:
        f.write(header)
        for blob in blobs:
            f.write(blob)
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    main()
