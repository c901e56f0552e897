#!/usr/bin/env python3
"""PyTorch scaled_dot_product_attention (flash and cuDNN backends) on ladder's shape presets.

Contiguous KV ([1, kv_heads, depth, head_dim], bf16), queries [1, q_heads, rows, head_dim],
GQA through enable_gqa=True (no K/V expansion, so the bytes moved are the same as ladder's
paged kernel). is_causal=False: with 1-4 query rows at the end of a long KV the causal mask
changes at most 3 keys of tens of thousands (and torch's is_causal is top-left aligned, which
would be wrong here). Times are CUDA-event medians. Prints a table; --json writes the rows.

    python3 benchmarks/torch_sdpa.py [--presets gemma4-dense-256,llama-70b] [--depths 32768]
                                     [--rows 1,2] [--repeats 50] [--json out.json]
"""
import argparse
import json
import statistics
import sys

PRESETS = {  # name: (q_heads, kv_heads, head_dim, window) -- mirror of kernels/src/bench.cc
    "gemma4-31b-global": (32, 4, 512, 0),
    "gemma4-31b-sliding": (32, 16, 256, 1024),
    "gemma4-31b-global-tp2": (16, 2, 512, 0),
    "gemma4-31b-sliding-tp2": (16, 8, 256, 1024),
    "llama-70b": (64, 8, 128, 0),
    "gemma4-dense-256": (32, 16, 256, 0),
    "tiny": (8, 2, 64, 0),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--presets", default="gemma4-dense-256,llama-70b,gemma4-31b-global")
    ap.add_argument("--depths", default="32768")
    ap.add_argument("--rows", default="1,2,4")
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    try:
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
        import torch.nn.functional as F
    except Exception as e:  # noqa: BLE001
        print(f"torch not available: {e}")
        return 0
    if not torch.cuda.is_available():
        print("no CUDA device")
        return 0
    dev = torch.device("cuda")
    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)]
    rows_out = []
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
    print(f"{'backend':7} {'preset':24} {'depth':>7} {'rows':>4} {'median_us':>10} {'GB/s':>8}  note")
    for name in args.presets.split(","):
        qh, kvh, d, window = PRESETS[name]
        for depth in [int(x) for x in args.depths.split(",")]:
            keys = min(depth, window) if window else depth
            k = torch.randn(1, kvh, keys, d, device=dev, dtype=torch.bfloat16)
            v = torch.randn(1, kvh, keys, d, device=dev, dtype=torch.bfloat16)
            for rows in [int(x) for x in args.rows.split(",")]:
                q = torch.randn(1, qh, rows, d, device=dev, dtype=torch.bfloat16)
                nbytes = 2 * keys * kvh * d * 2 + 2 * rows * qh * d * 2
                for bname, be in backends:
                    rec = {"backend": bname, "preset": name, "depth": depth, "query_rows": rows,
                           "keys": keys, "bytes_moved": nbytes}
                    try:
                        with sdpa_kernel([be]):
                            for _ in range(args.warmup):
                                F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                            torch.cuda.synchronize()
                            times = []
                            for _ in range(args.repeats):
                                a = torch.cuda.Event(enable_timing=True)
                                b = torch.cuda.Event(enable_timing=True)
                                a.record()
                                F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                                b.record()
                                b.synchronize()
                                times.append(a.elapsed_time(b) * 1000.0)
                        med = statistics.median(times)
                        rec.update(time_us_median=med, time_us_min=min(times), bytes_per_s=nbytes / (med * 1e-6))
                        print(f"{bname:7} {name:24} {depth:7} {rows:4} {med:10.2f} {nbytes / med / 1e3:8.1f}")
                    except Exception as e:  # noqa: BLE001
                        msg = str(e).splitlines()[0][:100] if str(e) else type(e).__name__
                        rec.update(error=msg)
                        print(f"{bname:7} {name:24} {depth:7} {rows:4} {'-':>10} {'-':>8}  {msg}")
                    rows_out.append(rec)
            del k, v
            torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows_out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
