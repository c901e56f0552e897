#!/usr/bin/env python3
"""Write a random-weight llama-architecture GGUF that shares the vocabulary of
llama.cpp's models/ggml-vocab-llama-spm.gguf (32000-token SentencePiece vocab with
byte-fallback tokens <0x00>..<0xFF> at ids 3..258).

usage: scripts/make-random-gguf.py OUT.gguf PRESET [SEED]
presets: target (~1.1B, TinyLlama shape), draft, tiny, draft-tiny

It needs a llama.cpp source tree for its gguf-py and vocabulary: $LLAMA_CPP_SRC, default
.engines/llama.cpp (git-ignored; docs/engines.md "Measured against a real llama.cpp" says how to
get one). Byte tokens are boosted by $LADDER_BYTE_BOOST (default 1.0: plain random weights,
which already emit byte-fallback tokens now and then).

Matrices are f16 ~ N(0, std^2), norms are f32 ones. Tensors are generated in worker
threads (one numpy Generator per tensor, seeded from (seed, tensor index), so the file
is deterministic for a given seed) and streamed to disk in order.
"""
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LLAMA = os.environ.get("LLAMA_CPP_SRC", os.path.join(ROOT, ".engines", "llama.cpp"))
sys.path.insert(0, os.path.join(LLAMA, "gguf-py"))

import numpy as np  # noqa: E402

try:  # gguf-py's metadata module imports yaml at import time; it is not needed here
    import yaml  # noqa: F401
except ImportError:
    import types
    sys.modules["yaml"] = types.ModuleType("yaml")

import gguf  # noqa: E402

VOCAB = os.path.join(LLAMA, "models", "ggml-vocab-llama-spm.gguf")

# n_layer, n_embd, n_ff, n_head, n_head_kv
PRESETS = {
    "target":     dict(n_layer=22, n_embd=2048, n_ff=5632, n_head=32, n_head_kv=4),
    "draft":      dict(n_layer=2,  n_embd=512,  n_ff=1408, n_head=8,  n_head_kv=4),
    "tiny":       dict(n_layer=2,  n_embd=256,  n_ff=704,  n_head=4,  n_head_kv=2),
    "draft-tiny": dict(n_layer=1,  n_embd=128,  n_ff=352,  n_head=2,  n_head_kv=1),
}
CTX_TRAIN = 65536      # > 33K so 32K-token prompts plus generation fit without overflow warnings
ROPE_BASE = 10000.0
STD = 0.02
# Rows 3..258 of output.weight (the byte-fallback tokens <0x00>..<0xFF>) get this extra
# scale so that greedy generations from random weights pick byte tokens now and then
# (~0.8% of the vocab; on `tiny` 1.0 gives byte tokens in ~1/6 of 16-token greedy runs,
# 1.1 in ~1/2). 1.0 disables.
BYTE_BOOST = float(os.environ.get("LADDER_BYTE_BOOST", "1.0"))
BYTE_IDS = slice(3, 259)


def copy_tokenizer(w: gguf.GGUFWriter) -> int:
    r = gguf.GGUFReader(VOCAB)
    n_vocab = None
    for key, f in r.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vt = f.types[0]
        val = f.contents()
        if vt == gguf.GGUFValueType.ARRAY:
            w.add_key_value(key, val, vt, sub_type=f.types[-1])
            if key == "tokenizer.ggml.tokens":
                n_vocab = len(val)
        else:
            w.add_key_value(key, val, vt)
    assert n_vocab, "no tokenizer.ggml.tokens in vocab file"
    return n_vocab


def main() -> None:
    if len(sys.argv) < 3 or sys.argv[2] not in PRESETS:
        sys.exit(f"usage: {sys.argv[0]} OUT.gguf {{{'|'.join(PRESETS)}}} [SEED]")
    out, preset = sys.argv[1], sys.argv[2]
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    p = PRESETS[preset]
    L, E, F, H, HKV = p["n_layer"], p["n_embd"], p["n_ff"], p["n_head"], p["n_head_kv"]
    hd = E // H
    t0 = time.time()

    arch = "llama"
    w = gguf.GGUFWriter(out, arch)
    w.add_name(f"ladder-random-{preset}-seed{seed}")
    n_vocab = copy_tokenizer(w)
    w.add_context_length(CTX_TRAIN)
    w.add_embedding_length(E)
    w.add_block_count(L)
    w.add_feed_forward_length(F)
    w.add_head_count(H)
    w.add_head_count_kv(HKV)
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(ROPE_BASE)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)

    # (name, numpy shape (rows=out, cols=in), kind)
    tensors = [("token_embd.weight", (n_vocab, E), "mat")]
    for i in range(L):
        b = f"blk.{i}."
        tensors += [
            (b + "attn_norm.weight",   (E,),           "norm"),
            (b + "attn_q.weight",      (E, E),         "mat"),
            (b + "attn_k.weight",      (HKV * hd, E),  "mat"),
            (b + "attn_v.weight",      (HKV * hd, E),  "mat"),
            (b + "attn_output.weight", (E, E),         "mat"),
            (b + "ffn_norm.weight",    (E,),           "norm"),
            (b + "ffn_gate.weight",    (F, E),         "mat"),
            (b + "ffn_up.weight",      (F, E),         "mat"),
            (b + "ffn_down.weight",    (E, F),         "mat"),
        ]
    tensors += [("output_norm.weight", (E,), "norm"), ("output.weight", (n_vocab, E), "mat")]

    n_params = 0
    for name, shape, kind in tensors:
        dt = np.float32 if kind == "norm" else np.float16
        n = int(np.prod(shape))
        n_params += n
        w.add_tensor_info(name, shape, np.dtype(dt), n * np.dtype(dt).itemsize)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()

    def make(idx: int):
        name, shape, kind = tensors[idx]
        if kind == "norm":
            return np.ones(shape, dtype=np.float32)
        rng = np.random.default_rng([seed, idx])
        a = rng.standard_normal(shape, dtype=np.float32)
        a *= STD
        if name == "output.weight" and BYTE_BOOST != 1.0:
            a[BYTE_IDS] *= BYTE_BOOST
        return a.astype(np.float16)

    workers = max(1, min(8, os.cpu_count() or 1))
    window = workers + 2  # bound memory: at most this many tensors in flight
    with ThreadPoolExecutor(workers) as ex:
        futs = {}
        for idx in range(len(tensors)):
            for j in range(idx, min(idx + window, len(tensors))):
                if j not in futs:
                    futs[j] = ex.submit(make, j)
            w.write_tensor_data(futs.pop(idx).result())
    w.close()

    size = os.path.getsize(out)
    print(f"{out}: preset={preset} seed={seed} params={n_params / 1e6:.1f}M "
          f"layers={L} n_embd={E} n_ff={F} heads={H}/{HKV} n_ctx_train={CTX_TRAIN} byte_boost={BYTE_BOOST} "
          f"size={size / 2**20:.1f} MiB in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
