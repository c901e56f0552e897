#!/usr/bin/env python3
"""ladder's peers on its shape presets, timed exactly as `ladder-kernels bench` times ladder.

Arms: PyTorch scaled_dot_product_attention with the flash and the cuDNN backend (contiguous KV
[1, kv_heads, keys, head_dim], queries [1, q_heads, rows, head_dim], GQA by enable_gqa=True, so
no K/V expansion and the bytes moved are ladder's; is_causal=False: torch's causal mask is
top-left aligned, wrong for the last rows of a long KV, and with 1-5 rows it changes at most 4
keys of thousands); and, where a transcription of vLLM's Triton unified-attention kernel is
importable (--vllm, default .peers/vllm_unified_attention.py: git-ignored, never committed),
vLLM's kernel on a paged cache laid out like ladder's (block 16, the same shuffled pages) in 2D
(`vllm-2d`) and in 3D with --vllm-segments segments admitted at every row count (`vllm-3d`;
vLLM's own gate takes 3D at 1 row only, so "gated" is vllm-3d at 1 row and vllm-2d above).

Timing (--timing stream,graph), the same as kernels/src/bench.cc:
  warm-up    --warmup plain calls first;
  stream     each sample one call on the default stream, behind a device spin of --hold-us
             (torch.cuda._sleep, cycles calibrated once against events) before the start event,
             so the host's launch work is queued before the GPU reaches the start event;
  graph      --graph-calls calls captured into one CUDA graph on a side stream, one untimed
             replay, then each sample one replay behind the same spin, divided by the calls;
  the reported time is the median of --repeats samples. In stream mode each sample also notes
  how long the host took to enqueue the call (host_enqueue_us): above the spin, the host's launch
  cost leaks into the time, and the row says so.
vllm-* outputs are checked against flash SDPA at 1 row (max |diff| in the JSON).

    python3 kernels/tools/torch_sdpa.py [--presets gemma4-dense-256,llama-70b] [--depths 1024,32768]
        [--rows 1,2,4] [--warmup 100] [--repeats 30] [--timing stream,graph] [--graph-calls 20]
        [--arms flash,cudnn,vllm-2d,vllm-3d] [--json out.json]
"""
import argparse
import importlib.util
import json
import math
import os
import statistics
import sys
import time

PRESETS = {  # name: (q_heads, kv_heads, head_dim, window) -- mirror of kernels/src/bench.cc
    "gemma4-31b-global": (32, 4, 512, 0),
    "gemma4-31b-sliding": (32, 16, 256, 1024),
    "gemma4-31b-global-tp2": (16, 2, 512, 0),
    "gemma4-31b-sliding-tp2": (16, 8, 256, 1024),
    "llama-70b": (64, 8, 128, 0),
    "gemma4-dense-256": (32, 16, 256, 0),
    "tiny": (8, 2, 64, 0),
}
BLOCK = 16


def splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 31)


def shuffled_pages(n, seed=0):  # kernels/src/bench.cc's page order
    bt = list(range(n))
    for i in range(n - 1, 0, -1):
        j = splitmix64(seed ^ i) % (i + 1)
        bt[i], bt[j] = bt[j], bt[i]
    return bt


class Timer:
    def __init__(self, torch, hold_us):
        self.torch = torch
        self.hold_us = hold_us
        self.cycles = 0
        if hold_us > 0:  # cycles per µs of torch.cuda._sleep, from one long spin
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(1000)
            n = 2_000_000
            a.record()
            torch.cuda._sleep(n)
            b.record()
            b.synchronize()
            self.cycles = int(n / (a.elapsed_time(b) * 1000.0) * hold_us)

    def spin(self):
        if self.cycles:
            self.torch.cuda._sleep(self.cycles)

    def run(self, fn, mode, warmup, repeats, graph_calls):
        torch = self.torch
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        times, host = [], []
        if mode == "stream":
            for _ in range(warmup):
                fn()
            torch.cuda.synchronize()
            for _ in range(repeats):
                self.spin()
                t0 = time.perf_counter()
                a.record()
                fn()
                b.record()
                host.append((time.perf_counter() - t0) * 1e6)
                b.synchronize()
                times.append(a.elapsed_time(b) * 1000.0)
            return times, host
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(warmup):
                fn()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=side):
            for _ in range(graph_calls):
                fn()
        with torch.cuda.stream(side):
            g.replay()  # uploads the graph: untimed
            torch.cuda.synchronize()
            for _ in range(repeats):
                self.spin()
                a.record()
                g.replay()
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b) * 1000.0 / graph_calls)
        del g
        return times, host


def load_vllm(path):
    if not path or not os.path.exists(path):
        return None
    spec = importlib.util.spec_from_file_location("vllm_unified_attention", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--presets", default="gemma4-dense-256,llama-70b,gemma4-31b-global")
    ap.add_argument("--depths", default="32768")
    ap.add_argument("--rows", default="1,2,4")
    ap.add_argument("--repeats", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--timing", default="stream,graph")
    ap.add_argument("--graph-calls", type=int, default=20)
    ap.add_argument("--hold-us", type=float, default=100.0, help="device spin before each start event (ladder: 100)")
    ap.add_argument("--arms", default="flash,cudnn,vllm-2d,vllm-3d")
    # (the repository's git-ignored .peers/, two levels above kernels/tools/)
    ap.add_argument("--vllm", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                                   ".peers", "vllm_unified_attention.py"))
    ap.add_argument("--vllm-segments", type=int, default=64)
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
    arms = args.arms.split(",")
    vllm = load_vllm(args.vllm) if any(a.startswith("vllm") for a in arms) else None
    if vllm is None:
        arms = [a for a in arms if not a.startswith("vllm")]
    timer = Timer(torch, args.hold_us)
    modes = args.timing.split(",")
    method = {
        "stream": f"stream launches: device events around each call, a {args.hold_us:.0f} us device spin before each "
                  f"start event; {args.warmup} warm-up calls; median of {args.repeats} calls",
        "graph": f"graph replay: {args.graph_calls} calls captured in one CUDA graph, device events around each "
                 f"replay, a {args.hold_us:.0f} us device spin before each start event; {args.warmup} warm-up calls "
                 f"and 1 untimed replay; per call = replay / {args.graph_calls}; median of {args.repeats} replays",
    }
    rows_out = []
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}; arms {','.join(arms)}; "
          f"spin {timer.cycles} cycles")
    for m in modes:
        print(f"timing {m}: {method[m]}")
    print(f"{'timing':6} {'arm':8} {'preset':24} {'depth':>7} {'rows':>4} {'median_us':>10} {'min_us':>8} {'GB/s':>8}  note")
    for name in args.presets.split(","):
        qh, kvh, d, window = PRESETS[name]
        for depth in [int(x) for x in args.depths.split(",")]:
            keys = min(depth, window) if window else depth
            g = torch.Generator(device=dev).manual_seed(depth)
            k = torch.randn(1, kvh, keys, d, device=dev, dtype=torch.bfloat16, generator=g)
            v = torch.randn(1, kvh, keys, d, device=dev, dtype=torch.bfloat16, generator=g)
            kc = vc = bt = None
            if vllm is not None:  # the whole depth, paged as ladder pages it
                pages = (depth + BLOCK - 1) // BLOCK
                kc = torch.randn(pages, BLOCK, kvh, d, device=dev, dtype=torch.bfloat16, generator=g)
                vc = torch.randn(pages, BLOCK, kvh, d, device=dev, dtype=torch.bfloat16, generator=g)
                order = shuffled_pages(pages)
                bt = torch.tensor([order], device=dev, dtype=torch.int32)
                # The same last `keys` keys as the SDPA arms' K/V, for the check at 1 row.
                pos = torch.arange(depth - keys, depth, device=dev)
                phys = bt[0, pos // BLOCK].long()
                kc[phys, pos % BLOCK] = k[0].transpose(0, 1)
                vc[phys, pos % BLOCK] = v[0].transpose(0, 1)
            for rows in [int(x) for x in args.rows.split(",")]:
                q = torch.randn(1, qh, rows, d, device=dev, dtype=torch.bfloat16, generator=g)
                ladder_keys = depth - max(0, depth - rows - window + 1) if window else depth
                nbytes = 2 * ladder_keys * kvh * d * 2 + 2 * rows * qh * d * 2  # ladder's EffectiveBytes
                calls = {}
                ref = None
                if "flash" in arms or vllm is not None:
                    def flash_call():
                        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                            return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                    try:
                        ref = flash_call()[0, :, -1].float()
                    except Exception:  # noqa: BLE001
                        ref = None
                    if "flash" in arms:
                        calls["flash"] = flash_call
                if "cudnn" in arms:
                    def cudnn_call():
                        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                            return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                    calls["cudnn"] = cudnn_call
                if vllm is not None:
                    qv = q[0].transpose(0, 1).contiguous()  # [rows, q_heads, d]
                    out = torch.empty_like(qv)
                    cu = torch.tensor([0, rows], device=dev, dtype=torch.int32)
                    sl = torch.tensor([depth], device=dev, dtype=torch.int32)
                    segs = args.vllm_segments
                    so = torch.empty(rows, qh, segs, triton_pow2(d), device=dev, dtype=torch.float32)
                    sm = torch.empty(rows, qh, segs, device=dev, dtype=torch.float32)
                    se = torch.empty(rows, qh, segs, device=dev, dtype=torch.float32)
                    for arm, use_3d in (("vllm-2d", False), ("vllm-3d", True)):
                        if arm not in arms:
                            continue
                        def vcall(use_3d=use_3d):
                            vllm.unified_attention(qv, kc, vc, out, cu, sl, 1.0 / math.sqrt(d), window, bt, 0.0,
                                                   use_3d, segs, so, sm, se)
                            return out
                        calls[arm] = vcall
                for mode in modes:
                    for arm, fn in calls.items():
                        rec = {"arm": arm, "backend": arm, "timing": mode, "timing_method": method[mode],
                               "preset": name, "depth": depth, "query_rows": rows, "keys": keys,
                               "bytes_moved": nbytes, "warmup": args.warmup, "repeats": args.repeats,
                               "graph_calls": args.graph_calls if mode == "graph" else 0,
                               "hold_us": args.hold_us}
                        try:
                            if arm.startswith("vllm") and rows == 1 and ref is not None and mode == modes[0]:
                                got = fn()[-1].float()
                                rec["max_abs_diff_vs_flash"] = float((got - ref).abs().max())
                            times, host = timer.run(fn, mode, args.warmup, args.repeats, args.graph_calls)
                            med = statistics.median(times)
                            rec.update(time_us_median=med, time_us_min=min(times), times_us=times,
                                       bytes_per_s=nbytes / (med * 1e-6))
                            note = ""
                            if host:
                                hmed = statistics.median(host)
                                rec["host_enqueue_us"] = hmed
                                if hmed > args.hold_us:
                                    note = f"host enqueue {hmed:.0f} us > spin: launch cost included"
                            if "max_abs_diff_vs_flash" in rec:
                                note += f" |diff| {rec['max_abs_diff_vs_flash']:.3g}"
                            print(f"{mode:6} {arm:8} {name:24} {depth:7} {rows:4} {med:10.2f} {min(times):8.2f} "
                                  f"{nbytes / med / 1e3:8.1f}  {note}")
                        except Exception as e:  # noqa: BLE001
                            msg = str(e).splitlines()[0][:100] if str(e) else type(e).__name__
                            rec.update(error=msg)
                            print(f"{mode:6} {arm:8} {name:24} {depth:7} {rows:4} {'-':>10} {'-':>8} {'-':>8}  {msg}")
                        rows_out.append(rec)
                        sys.stdout.flush()
            del k, v, kc, vc
            torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows_out, f, indent=1)
    return 0


def triton_pow2(n):
    p = 1
    while p < n:
        p *= 2
    return p


if __name__ == "__main__":
    sys.exit(main())
