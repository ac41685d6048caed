#!/usr/bin/env python3
"""ugmvocab: writes an archgen spec whose vocabulary is a small SentencePiece Unigram one
(tokenizer.ggml.model "t5"), for the UGM tokenizer test. Standard library only.

    ugmvocab.py BASE_SPEC.json TEXTS.txt OUT_SPEC.json [--no-charsmap] [--keep-spaces]

The model (architecture, metadata, tensors) is BASE_SPEC's, its token_embd resized to the new
vocabulary; every tokenizer.* key is replaced. The pieces are <pad> </s> <unk> (T5's ids 0 1 2),
a user-defined [MASK], the printable ASCII characters and a few dozen others, then "▁"-led
words and word pieces taken from TEXTS (tokenizer-cases.txt escapes undone), each with a
deterministic score. The precompiled charsmap maps a handful of strings (no-break space, tab,
newline, carriage return, full-width and compatibility forms, a decomposed é, "!!", "...") in
llama.cpp's layout: a uint32 byte size, a double array of uint32 nodes (BASE in bits 10-30,
leaf flag bit 8, label bits 0-7, value nodes with bit 31 set and a replacement offset), then the
NUL-terminated replacements; the array is whole blocks of 256 nodes, as darts-clone writes it,
so that a walk never indexes past it. --no-charsmap leaves it out; --keep-spaces sets
remove_extra_whitespaces false (it is true otherwise, as in T5's files).
"""
import argparse
import hashlib
import json
import re
import struct

SPACE = "\u2581"

CHARSMAP = {
    "\u00a0": " ", "\t": " ", "\n": " ", "\r": "",
    "\uff21": "A", "\uff42": "b", "\ufb01": "fi", "\u2460": "1",
    "\u2161": "II", "\u2162": "III", "e\u0301": "\u00e9", "\u3002": ".",
    "!!": "!", "...": "\u2026", "\u00df": "ss",
}

EXTRA_CHARS = "éïöüÅÜçâêñ你好世界日本語が代わりにд и м р в е т αβγλπσ…ß"


def unescape(line):
    out, i = [], 0
    while i < len(line):
        if line[i] == "\\" and i + 1 < len(line):
            c = line[i + 1]
            out.append({"n": "\n", "t": "\t", "r": "\r"}.get(c, c))
            i += 2
        else:
            out.append(line[i])
            i += 1
    return "".join(out)


def score(piece, lo, hi):
    h = int.from_bytes(hashlib.sha256(piece.encode()).digest()[:4], "little") / 2**32
    return round(lo + (hi - lo) * h, 4)


def pieces_from(texts):
    """Words of the texts as ▁word, their 2..4-byte prefixes and suffixes; most frequent first."""
    count = {}
    for text in texts:
        for word in re.findall(r"[A-Za-z]+|[0-9]+", text):
            grams = {SPACE + word, word}
            for n in (2, 3, 4):
                if len(word) > n:
                    grams |= {SPACE + word[:n], word[-n:], word[:n]}
            for g in grams:
                count[g] = count.get(g, 0) + 1
    return sorted(count, key=lambda g: (-count[g], g))


def build_charsmap(mapping):
    """The XCDA blob for mapping (source string -> replacement), in llama.cpp's layout."""
    repl, offsets = bytearray(), {}
    for target in sorted(set(mapping.values())):
        offsets[target] = len(repl)
        repl += target.encode() + b"\0"
    trie = {}
    for source, target in mapping.items():
        node = trie
        for b in source.encode():
            node = node.setdefault(b, {})
        node[None] = offsets[target]

    nodes = {}  # index -> packed uint32
    used = {0}

    def place(labels):
        """The first offset O with every O ^ label free (label 0 is the value node)."""
        o = 1
        while any((o ^ c) in used for c in labels):
            o += 1
        return o

    queue = [(0, trie)]
    while queue:
        index, node = queue.pop(0)
        labels = [0 if k is None else k for k in node]
        o = place(labels)
        base = index ^ o
        assert base < 1 << 21
        nodes[index] = nodes.get(index, 0) | base << 10
        for k, child in node.items():
            slot = o ^ (0 if k is None else k)
            used.add(slot)
            if k is None:
                nodes[slot] = 1 << 31 | child
            else:
                nodes[slot] = k | (1 << 8 if None in child else 0)
                queue.append((slot, child))
    size = (max(nodes) // 256 + 1) * 256  # whole blocks: O ^ any byte stays inside
    array = b"".join(struct.pack("<I", nodes.get(i, 0)) for i in range(size))
    return list(struct.pack("<I", len(array)) + array + repl)


def main():
    ap = argparse.ArgumentParser(description="archgen spec with a small Unigram vocabulary")
    ap.add_argument("base")
    ap.add_argument("texts")
    ap.add_argument("out")
    ap.add_argument("--no-charsmap", action="store_true")
    ap.add_argument("--keep-spaces", action="store_true")
    a = ap.parse_args()
    spec = json.load(open(a.base))
    texts = [unescape(line) for line in open(a.texts, encoding="utf-8").read().split("\n")]

    tokens = [("<pad>", 0.0, 3), ("</s>", 0.0, 3), ("<unk>", 0.0, 2), ("[MASK]", 0.0, 4)]
    seen = {t[0] for t in tokens}

    def add(piece, lo, hi):
        if piece not in seen:
            seen.add(piece)
            tokens.append((piece, score(piece, lo, hi), 1))

    add(SPACE, -3.0, -2.0)
    for c in [chr(i) for i in range(33, 127)] + [c for c in EXTRA_CHARS if c != " "]:
        add(c, -12.0, -9.0)
    for g in pieces_from(texts)[:300]:
        add(g, -11.0, -4.0 if g.startswith(SPACE) else -6.0)

    kv = {k: v for k, v in spec["kv"].items() if not k.startswith("tokenizer.")}
    kv["tokenizer.ggml.model"] = ["str", "t5"]
    kv["tokenizer.ggml.tokens"] = ["arr", "str", [t[0] for t in tokens]]
    kv["tokenizer.ggml.scores"] = ["arr", "f32", [t[1] for t in tokens]]
    kv["tokenizer.ggml.token_type"] = ["arr", "i32", [t[2] for t in tokens]]
    kv["tokenizer.ggml.add_space_prefix"] = ["bool", True]
    kv["tokenizer.ggml.remove_extra_whitespaces"] = ["bool", not a.keep_spaces]
    kv["tokenizer.ggml.eos_token_id"] = ["u32", 1]
    kv["tokenizer.ggml.unknown_token_id"] = ["u32", 2]
    kv["tokenizer.ggml.padding_token_id"] = ["u32", 0]
    if not a.no_charsmap:
        kv["tokenizer.ggml.precompiled_charsmap"] = ["arr", "u8", build_charsmap(CHARSMAP)]
    spec["kv"] = kv
    spec["name"] = "vocab-ugm"
    spec.pop("vocab_from", None)
    for t in spec["tensors"]:
        if t[0] == "token_embd.weight":
            t[1] = [t[1][0], len(tokens)]
    with open(a.out, "w") as f:
        json.dump(spec, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
