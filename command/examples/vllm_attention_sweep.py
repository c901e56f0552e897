#!/usr/bin/env python3
"""vLLM's own Triton unified_attention, gated and admitted, under ladder's command runner.

The reference study's central experiment (issue 55, "Proven on the GPU", item 1): call vLLM's
`unified_attention` directly with gemma-4-31B's global-layer shapes, one sequence, a paged bf16
KV cache of `--depth` tokens (block 16, pages in a seeded shuffled order), and `--query-rows` new
tokens (decode with speculation: the last query_rows positions of the sequence), with

  vllm-gated     the call vLLM makes today: 3D segment buffers sized per sequence
                 ([seq_threshold_3D, q_heads, segments, head_pad], as vLLM's Triton backend
                 allocates them) and max_seqlen_q = query_rows, so the `max_seqlen_q > 1` clause
                 of the 2D/3D gate sends every speculative step (rows >= 2) to the 2D kernel;
  vllm-admitted  the 3D path admitted at rows >= 2 (vllm#45450's change, study lines 30-40 and
                 60-70): buffers sized per query token and the gate read as
                 `max_seqlen_q > decode_query_len` (see admitted_call below for how);
  sdpa-flash     PyTorch scaled_dot_product_attention, flash backend only, and
  sdpa-cudnn     the cuDNN backend only, on the same inputs made dense ([1, kv_heads, depth,
                 head_dim] K/V, [1, q_heads, rows, head_dim] queries, GQA by enable_gqa=True,
                 causal as decode sees it: bottom-right aligned). A backend that refuses the
                 shape (head 512 on flash) ends the start with status 3 and the reason.

vLLM's file is imported from --vllm-dir (default $LADDER_VLLM_DIR): a directory holding
`vllm/v1/attention/ops/triton_unified_attention.py` at a named commit, a few stub modules for
what it imports, and LADDER_SOURCE.json naming the repository, commit and sha256 (recipe:
command/examples/vllm_attention_sweep.md). Nothing else of vLLM is imported: the driver refuses
to run if any `vllm.*` module came from elsewhere.

Result contract (docs/command-runner.md): one JSON line per round on stdout,
  {"metric": "time_us", "value": <mean of --calls calls, us>, "round": r}
plus {"evidence": {...}} lines: the kernel path vLLM's code took (predicted by evaluating the
gate as unified_attention does, and observed by recording which kernels it launched, with their
grids; both must agree), the shapes, the vLLM source and commit, the float32 reference check,
torch/triton/CUDA versions, the GPU. The study's probe line PROBE_3D_SPEC_ACTIVE goes to stderr
once per start when the 3D path serves a call wider than one query row.

Timing (ladder's convention, kernels/tools/torch_sdpa.py): --warmup calls first, then per round
--calls calls, each behind a device spin of --hold-us (torch.cuda._sleep, calibrated against
events) and bracketed by its own CUDA events; the round's value is the mean. --timing graph
captures --calls calls in one CUDA graph and times a replay per round instead.

Exit status: 0 ok; 1 runtime failure (no GPU, a path that is not the one predicted, ...);
2 bad arguments or a --vllm-dir that does not hold what is needed; 3 the SDPA backend refuses
the shape; 4 the output is wrong against the float32 reference (a wrong kernel is not measured).

  vllm_attention_sweep.py --impl vllm-gated --shape h256 --depth 32768 --query-rows 2 --rounds 5
  vllm_attention_sweep.py --impl vllm-admitted --shape h512 --depth 8192 --query-rows 4 --dry-run
"""
import argparse
import ast
import hashlib
import json
import math
import os
import platform
import statistics
import sys
import time
import types
import warnings

# gemma-4-31B's global (full-attention) layers, unsharded: head_dim, q_heads, kv_heads.
SHAPES = {
    "h512": (512, 32, 4),
    "h256": (256, 32, 16),
}
IMPLS = ("vllm-gated", "vllm-admitted", "sdpa-flash", "sdpa-cudnn")
# Candidate locations of the kernel file inside --vllm-dir (it moved in late 2025).
MODULE_CANDIDATES = (
    "vllm.v1.attention.ops.triton_unified_attention",
    "vllm.attention.ops.triton_unified_attention",
)
# The parameters of unified_attention that the 3D path needs (vLLM's Triton backend passes them).
NEEDED_PARAMS = ("seq_threshold_3D", "num_par_softmax_segments", "softmax_segm_output",
                 "softmax_segm_max", "softmax_segm_expsum")
PROBE = "PROBE_3D_SPEC_ACTIVE"

EXIT_FAIL, EXIT_USAGE, EXIT_REFUSED, EXIT_WRONG = 1, 2, 3, 4


class Fail(Exception):
    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def emit(obj):
    print(json.dumps(obj, sort_keys=False), flush=True)


def log(msg):
    print(f"vllm_attention_sweep: {msg}", file=sys.stderr, flush=True)


def next_pow2(n):
    p = 1
    while p < n:
        p *= 2
    return p


# ---- arguments ------------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(
        prog="vllm_attention_sweep.py",
        description="Time vLLM's Triton unified_attention (3D path gated or admitted) or PyTorch "
                    "SDPA on gemma-4-31B global-layer shapes; JSON lines for ladder's command "
                    "runner.",
        epilog="Exit status: 0 ok, 1 failure, 2 bad arguments or --vllm-dir, 3 SDPA backend "
               "refuses the shape, 4 output wrong against the float32 reference.")
    ap.add_argument("--impl", required=True, choices=IMPLS, help="the arm")
    ap.add_argument("--shape", choices=sorted(SHAPES),
                    help="h512: head 512, 32 q / 4 KV heads; h256: head 256, 32 / 16 "
                         "(or give --head-dim, --q-heads, --kv-heads)")
    ap.add_argument("--head-dim", type=int)
    ap.add_argument("--q-heads", type=int)
    ap.add_argument("--kv-heads", type=int)
    ap.add_argument("--depth", type=int, required=True,
                    help="tokens in the KV cache, the new query rows included")
    ap.add_argument("--query-rows", type=int, required=True,
                    help="new tokens this step (1 = plain decode, 2 = one speculative token, ...)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds to report (default 5)")
    ap.add_argument("--seed", type=int, default=0, help="input seed (ladder's {seed})")
    ap.add_argument("--calls", type=int, default=50, help="calls averaged per round (default 50)")
    ap.add_argument("--warmup", type=int, default=20, help="untimed calls first (default 20)")
    ap.add_argument("--timing", choices=("stream", "graph"), default="stream",
                    help="stream: events around each call (default); graph: --calls calls in "
                         "one CUDA graph, one replay per round")
    ap.add_argument("--hold-us", type=float, default=100.0,
                    help="device spin before each start event, so host launch work is queued "
                         "before the GPU reaches it (default 100, as ladder's bench)")
    ap.add_argument("--block-size", type=int, default=16, help="KV cache block (default 16)")
    ap.add_argument("--segments", type=int, default=16,
                    help="3D softmax segments (vLLM's NUM_PAR_SOFTMAX_SEGMENTS, default 16)")
    ap.add_argument("--min-launch-grid", type=int, default=128,
                    help="vLLM's MIN_LAUNCH_GRID_SIZE_2D: seq_threshold_3D = this // kv_heads")
    ap.add_argument("--scale", type=float, help="softmax scale (default 1/sqrt(head_dim))")
    ap.add_argument("--softcap", type=float, default=0.0, help="logit softcap (default 0: off)")
    ap.add_argument("--sdpa-causal", choices=("lower-right", "none"), default="lower-right",
                    help="SDPA arms at rows >= 2: bottom-right causal mask (exact; default) or "
                         "no mask (row i also sees the rows-1-i keys after it; the reference "
                         "check follows)")
    ap.add_argument("--max-abs-err", type=float, default=0.05,
                    help="refuse to time an output whose max |error| vs float32 exceeds this")
    ap.add_argument("--max-rel-err", type=float, default=0.1,
                    help="... or whose max |error| / max |reference| exceeds this")
    ap.add_argument("--vllm-dir", default=os.environ.get("LADDER_VLLM_DIR", ""),
                    help="directory holding vllm/.../triton_unified_attention.py and the stubs "
                         "(default $LADDER_VLLM_DIR)")
    ap.add_argument("--device", type=int, default=0, help="CUDA device index (default 0)")
    ap.add_argument("--no-profile-kernels", action="store_true",
                    help="skip the one profiled call that names the GPU kernels run")
    ap.add_argument("--dry-run", action="store_true",
                    help="no GPU: import vLLM's file from --vllm-dir (with stand-in torch and "
                         "triton modules where those are missing), analyse its gate, print the "
                         "evidence and exit")
    args = ap.parse_args(argv)

    if args.shape:
        d, qh, kvh = SHAPES[args.shape]
        for name, given, want in (("--head-dim", args.head_dim, d), ("--q-heads", args.q_heads, qh),
                                  ("--kv-heads", args.kv_heads, kvh)):
            if given is not None and given != want:
                ap.error(f"{name} {given} contradicts --shape {args.shape} ({name} {want})")
        args.head_dim, args.q_heads, args.kv_heads = d, qh, kvh
    elif None in (args.head_dim, args.q_heads, args.kv_heads):
        ap.error("give --shape, or all of --head-dim, --q-heads and --kv-heads")
    for name in ("head_dim", "q_heads", "kv_heads", "depth", "query_rows", "rounds", "calls",
                 "block_size", "segments", "min_launch_grid"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup < 0:
        ap.error("--warmup must be at least 0")
    if args.q_heads % args.kv_heads:
        ap.error(f"--q-heads {args.q_heads} is not a multiple of --kv-heads {args.kv_heads}")
    if args.query_rows > args.depth:
        ap.error(f"--query-rows {args.query_rows} exceeds --depth {args.depth}")
    if args.segments & (args.segments - 1):
        ap.error("--segments must be a power of 2 (the kernels' tl.arange needs one)")
    if args.impl.startswith("vllm") and not args.vllm_dir:
        ap.error(f"--impl {args.impl} needs --vllm-dir (or LADDER_VLLM_DIR)")
    if args.scale is None:
        args.scale = 1.0 / math.sqrt(args.head_dim)
    args.seed %= 2 ** 63
    return args


# ---- vLLM's file: import, source record, gate analysis --------------------------------------

class _Anything:
    """Stand-in for torch/triton objects in --dry-run: any attribute, call or index works."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Anything(f"{self._name}.{attr}")

    def __call__(self, *a, **k):
        if len(a) == 1 and not k and callable(a[0]) and not isinstance(a[0], _Anything):
            return a[0]  # used as a decorator (triton.jit): keep the function
        return _Anything(f"{self._name}()")

    def __getitem__(self, key):
        return _Anything(f"{self._name}[]")

    def __repr__(self):
        return f"<stand-in {self._name}>"


def _stand_in_module(name):
    mod = types.ModuleType(name)
    mod.__dict__["__getattr__"] = lambda attr: _Anything(f"{name}.{attr}")
    mod.__dict__["__ladder_stand_in__"] = True
    return mod


def install_stand_ins():
    """For --dry-run only: fake torch / triton where they are not installed."""
    faked = []
    for name in ("torch", "triton"):
        try:
            __import__(name)
        except ImportError:
            faked.append(name)
    if "torch" in faked:
        sys.modules["torch"] = _stand_in_module("torch")
    if "triton" in faked:
        triton = _stand_in_module("triton")
        tl = _stand_in_module("triton.language")
        triton.language = tl
        sys.modules["triton"] = triton
        sys.modules["triton.language"] = tl
    return faked


def read_source_record(vllm_dir):
    path = os.path.join(vllm_dir, "LADDER_SOURCE.json")
    if not os.path.exists(path):
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            rec = json.load(f)
    except (OSError, ValueError) as e:
        raise Fail(EXIT_USAGE, f"{path}: not readable JSON: {e}")
    return rec if isinstance(rec, dict) else {}


def import_vllm_kernel(vllm_dir, record):
    vllm_dir = os.path.abspath(vllm_dir)
    if not os.path.isdir(os.path.join(vllm_dir, "vllm")):
        raise Fail(EXIT_USAGE, f"--vllm-dir {vllm_dir} holds no vllm/ package (recipe: "
                               "command/examples/vllm_attention_sweep.md)")
    if any(m == "vllm" or m.startswith("vllm.") for m in sys.modules):
        raise Fail(EXIT_FAIL, "a vllm module was imported before --vllm-dir was put on the path")
    sys.path.insert(0, vllm_dir)
    names = [record["module"]] if record.get("module") else list(MODULE_CANDIDATES)
    import importlib
    errors = []
    module = None
    for name in names:
        rel = os.path.join(vllm_dir, *name.split(".")) + ".py"
        if not os.path.exists(rel):
            errors.append(f"{rel}: absent")
            continue
        try:
            module = importlib.import_module(name)
            break
        except ImportError as e:
            raise Fail(EXIT_USAGE, f"importing {name} from {vllm_dir} failed: {e} (a stub module "
                                   "is missing: see vllm_attention_sweep.md)")
    if module is None:
        raise Fail(EXIT_USAGE, f"no unified-attention file in {vllm_dir}: " + "; ".join(errors))
    # Nothing of vLLM may come from outside --vllm-dir (the stubs and the one file only).
    foreign = sorted(m for m, mod in sys.modules.items()
                     if (m == "vllm" or m.startswith("vllm."))
                     and not os.path.abspath(getattr(mod, "__file__", "") or "").startswith(
                         vllm_dir + os.sep))
    if foreign:
        raise Fail(EXIT_USAGE, f"vLLM modules loaded from outside {vllm_dir}: {', '.join(foreign)}")
    if not hasattr(module, "unified_attention"):
        raise Fail(EXIT_USAGE, f"{module.__file__} defines no unified_attention")
    return module


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def analyse_gate(path):
    """Reads unified_attention's source (AST, no execution) for what the admitted arm relies on.

    Returns the function's parameters, the kernels it launches (`name[grid](...)`), every read of
    max_seqlen_q in its body with its line, and whether the only read is the `max_seqlen_q > 1`
    clause of the 2D/3D decision.
    """
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef)
               and n.name == "unified_attention"), None)
    if fn is None:
        raise Fail(EXIT_USAGE, f"{path}: no top-level def unified_attention")
    params = [a.arg for a in fn.args.args + fn.args.kwonlyargs]
    reads, gate_lines, launched = [], [], []
    for node in ast.walk(fn):
        if isinstance(node, ast.Name) and node.id == "max_seqlen_q" and isinstance(node.ctx, ast.Load):
            reads.append(node.lineno)
        if (isinstance(node, ast.Compare) and isinstance(node.left, ast.Name)
                and node.left.id == "max_seqlen_q" and len(node.ops) == 1
                and isinstance(node.ops[0], ast.Gt) and isinstance(node.comparators[0], ast.Constant)
                and node.comparators[0].value == 1):
            gate_lines.append(node.lineno)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)
                and isinstance(node.func.value, ast.Name)):
            launched.append(node.func.value.id)
    return {
        "function_line": fn.lineno,
        "params": params,
        "missing_3d_params": [p for p in NEEDED_PARAMS if p not in params],
        "gate_clause": "max_seqlen_q > 1" if gate_lines else None,
        "gate_clause_lines": gate_lines,
        "max_seqlen_q_read_lines": reads,
        # Admission by argument is exact only when the gate is the one place that reads it.
        "admission_by_argument_exact": bool(gate_lines) and reads == gate_lines,
        "launched_kernels": sorted(set(launched)),
    }


# ---- the arms -------------------------------------------------------------------------------

class LaunchRecorder:
    """Records `kernel[grid]` launches made through the module's globals, for one call.

    unified_attention launches its Triton kernels by global name (`kernel_unified_attention_2d[
    grid](...)`), so swapping those globals for a recorder that logs the grid and forwards to the
    real kernel shows which path the call took. Only the launched kernels are swapped (never the
    @triton.jit helpers they call, which Triton resolves from the same globals at compile time),
    and they are put back before anything is timed.
    """

    class _Rec:
        def __init__(self, name, kernel, log_):
            self.name, self.kernel, self.log = name, kernel, log_

        def __getitem__(self, grid):
            g = [int(x) for x in grid] if isinstance(grid, (tuple, list)) else str(grid)
            programs = math.prod(g) if isinstance(g, list) else None
            self.log.append({"kernel": self.name, "grid": g, "programs": programs})
            return self.kernel[grid]

    def __init__(self, module, names):
        self.module, self.names, self.launches, self.saved = module, names, [], {}

    def __enter__(self):
        for n in self.names:
            k = getattr(self.module, n, None)
            if k is not None and hasattr(k, "__getitem__"):
                self.saved[n] = k
                setattr(self.module, n, LaunchRecorder._Rec(n, k, self.launches))
        return self

    def __exit__(self, *exc):
        for n, k in self.saved.items():
            setattr(self.module, n, k)
        return False


def predicted_use_3d(module, kw, num_seqs):
    """unified_attention's own gate, evaluated on the arguments the driver passes."""
    return not (
        kw["seq_threshold_3D"] is None
        or kw["num_par_softmax_segments"] is None
        or kw["softmax_segm_output"] is None
        or kw["softmax_segm_max"] is None
        or kw["softmax_segm_expsum"] is None
        or kw["max_seqlen_q"] > 1
        or num_seqs > kw["seq_threshold_3D"]
        or bool(getattr(module, "is_batch_invariant", False))
    )


def build_inputs(torch, args, dev):
    """q [rows, Hq, D], paged K/V [blocks, block, Hkv, D] (bf16), a shuffled block table, and
    dense K/V views [depth, Hkv, D] of the same tokens (for SDPA and the reference)."""
    g = torch.Generator(device=dev)
    g.manual_seed(args.seed)
    gcpu = torch.Generator()
    gcpu.manual_seed(args.seed)
    bs, d = args.block_size, args.head_dim
    blocks = (args.depth + bs - 1) // bs
    bf16 = torch.bfloat16
    q = torch.randn(args.query_rows, args.q_heads, d, device=dev, dtype=bf16, generator=g)
    kc = torch.randn(blocks, bs, args.kv_heads, d, device=dev, dtype=bf16, generator=g)
    vc = torch.randn(blocks, bs, args.kv_heads, d, device=dev, dtype=bf16, generator=g)
    order = torch.randperm(blocks, generator=gcpu).to(torch.int32)
    block_table = order.unsqueeze(0).to(dev)
    pos = torch.arange(args.depth, device=dev)
    phys = block_table[0, pos // bs].long()
    kd = kc[phys, pos % bs]  # [depth, Hkv, D], token order
    vd = vc[phys, pos % bs]
    return q, kc, vc, block_table, kd, vd


def reference(torch, q, kd, vd, args, causal):
    """float32 attention of the query rows at positions depth-rows .. depth-1 over kd/vd."""
    rows, hq, d = q.shape
    s_len, hkv = kd.shape[0], kd.shape[1]
    grp = hq // hkv
    qf = q.float().view(rows, hkv, grp, d).permute(1, 2, 0, 3).reshape(hkv, grp * rows, d)
    s = torch.bmm(qf, kd.float().permute(1, 2, 0)) * args.scale  # [Hkv, grp*rows, S]
    if args.softcap > 0:
        s = args.softcap * torch.tanh(s / args.softcap)
    if causal:
        qpos = torch.arange(s_len - rows, s_len, device=q.device)
        allowed = torch.arange(s_len, device=q.device)[None, :] <= qpos[:, None]  # [rows, S]
        s = s.masked_fill(~allowed.repeat(grp, 1)[None], float("-inf"))
    p = torch.softmax(s, dim=-1)
    o = torch.bmm(p, vd.float().permute(1, 0, 2))  # [Hkv, grp*rows, D]
    return o.view(hkv, grp, rows, d).permute(2, 0, 1, 3).reshape(rows, hq, d)


def vllm_arm(torch, module, gate, args, dev, q, kc, vc, block_table):
    rows = args.query_rows
    hqp = next_pow2(args.head_dim)
    # vLLM's Triton backend (TritonAttentionMetadataBuilder): seq_threshold_3D =
    # MIN_LAUNCH_GRID_SIZE_2D // num_kv_heads, NUM_PAR_SOFTMAX_SEGMENTS segments, and the three
    # float32 segment buffers allocated with seq_threshold_3D rows: one per *sequence*. The 3D
    # kernel indexes them per query *token* (segm_output[token, head, segment, :]).
    threshold = args.min_launch_grid // args.kv_heads
    if args.impl == "vllm-gated":
        # The call as vLLM makes it today: buffers per sequence, max_seqlen_q as it is. At rows
        # >= 2 the gate's `max_seqlen_q > 1` clause sends the call to the 2D kernel.
        buf_rows = threshold
        max_seqlen_q_passed = rows
        admission = "none: the call vLLM makes (max_seqlen_q = query_rows)"
    else:
        # Admitted (vllm#45450): buffers sized per token (sequences x decode_query_len), and the
        # gate read as `max_seqlen_q > decode_query_len` instead of `max_seqlen_q > 1`. At this
        # commit unified_attention reads max_seqlen_q in exactly one place, that clause (checked
        # from its source by analyse_gate: admission_by_argument_exact); the kernels take each
        # sequence's query length from cu_seqlens_q. So passing
        #     max_seqlen_q - (decode_query_len - 1)
        # makes the existing clause evaluate `max_seqlen_q > decode_query_len` and changes
        # nothing else. With decode_query_len = query_rows that is 1: every speculative step of
        # this shape is admitted, a prefill longer than decode_query_len still would not be.
        if not gate["admission_by_argument_exact"]:
            raise Fail(EXIT_USAGE,
                       f"at this vLLM file unified_attention reads max_seqlen_q on lines "
                       f"{gate['max_seqlen_q_read_lines']} (gate clause on "
                       f"{gate['gate_clause_lines']}): admitting by argument would change more "
                       "than the gate, so vllm-admitted is refused here; patch the clause to "
                       "`max_seqlen_q > decode_query_len` in a copy instead")
        decode_query_len = rows
        buf_rows = threshold * decode_query_len
        max_seqlen_q_passed = rows - (decode_query_len - 1)
        admission = ("max_seqlen_q passed as max_seqlen_q - (decode_query_len - 1) = "
                     f"{max_seqlen_q_passed} (the gate reads max_seqlen_q > decode_query_len); "
                     "segment buffers per token")
    f32 = torch.float32
    segm_out = torch.empty(buf_rows, args.q_heads, args.segments, hqp, device=dev, dtype=f32)
    segm_max = torch.empty(buf_rows, args.q_heads, args.segments, device=dev, dtype=f32)
    segm_expsum = torch.empty(buf_rows, args.q_heads, args.segments, device=dev, dtype=f32)
    out = torch.empty_like(q)
    kw = dict(
        q=q, k=kc, v=vc, out=out,
        cu_seqlens_q=torch.tensor([0, rows], device=dev, dtype=torch.int32),
        max_seqlen_q=max_seqlen_q_passed,
        seqused_k=torch.tensor([args.depth], device=dev, dtype=torch.int32),
        max_seqlen_k=args.depth,
        softmax_scale=args.scale,
        causal=True,
        window_size=(-1, -1),  # no sliding window (global layers)
        block_table=block_table,
        softcap=args.softcap,
        q_descale=None,
        k_descale=torch.ones(1, device=dev, dtype=f32),  # read only for fp8 caches
        v_descale=torch.ones(1, device=dev, dtype=f32),
        seq_threshold_3D=threshold,
        num_par_softmax_segments=args.segments,
        softmax_segm_output=segm_out,
        softmax_segm_max=segm_max,
        softmax_segm_expsum=segm_expsum,
    )
    fn_ua = module.unified_attention

    def call():
        fn_ua(**kw)
        return out

    info = {
        "seq_threshold_3D": threshold,
        "segments": args.segments,
        "segm_buffer_shape": list(segm_out.shape),
        "segm_buffer_sized": "per sequence" if args.impl == "vllm-gated" else "per token",
        "max_seqlen_q_passed": max_seqlen_q_passed,
        "admission": admission,
        "predicted_use_3d": predicted_use_3d(module, kw, num_seqs=1),
        "is_batch_invariant": bool(getattr(module, "is_batch_invariant", False)),
    }
    return call, out, info


def sdpa_arm(torch, args, q, kd, vd):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = (SDPBackend.FLASH_ATTENTION if args.impl == "sdpa-flash"
               else SDPBackend.CUDNN_ATTENTION)
    rows = args.query_rows
    qd = q.transpose(0, 1).unsqueeze(0).contiguous()  # [1, Hq, rows, D]
    kdd = kd.permute(1, 0, 2).unsqueeze(0).contiguous()  # [1, Hkv, depth, D]
    vdd = vd.permute(1, 0, 2).unsqueeze(0).contiguous()
    mask, mask_name = None, "none (one query row sees every key)"
    if rows > 1 and args.sdpa_causal == "lower-right":
        from torch.nn.attention.bias import causal_lower_right
        mask = causal_lower_right(rows, args.depth)
        mask_name = "causal_lower_right (bottom-right aligned: row i sees keys <= depth-rows+i)"
    elif rows > 1:
        mask_name = "none (--sdpa-causal none: row i also sees the rows-1-i keys after it)"
    if args.softcap > 0:
        raise Fail(EXIT_REFUSED, f"{args.impl}: PyTorch SDPA has no logit softcap "
                                 f"(--softcap {args.softcap})")

    def call():
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(qd, kdd, vdd, attn_mask=mask, scale=args.scale,
                                                  enable_gqa=True)

    info = {"backend": str(backend), "mask": mask_name,
            "q_shape": list(qd.shape), "kv_shape": list(kdd.shape), "enable_gqa": True}
    causal_ref = rows == 1 or args.sdpa_causal == "lower-right"
    return call, info, causal_ref


# ---- timing ---------------------------------------------------------------------------------

class Timer:
    def __init__(self, torch, hold_us):
        self.torch, self.hold_us, self.cycles, self.note = torch, hold_us, 0, ""
        if hold_us <= 0:
            return
        if not hasattr(torch.cuda, "_sleep"):
            self.note = "torch.cuda._sleep missing: no spin"
            return
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

    def stream_round(self, fn, calls):
        torch = self.torch
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
        host = []
        for i in range(calls):
            self.spin()
            t0 = time.perf_counter()
            starts[i].record()
            fn()
            ends[i].record()
            host.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
        return [s.elapsed_time(e) * 1000.0 for s, e in zip(starts, ends)], host

    def graph(self, fn, calls):
        torch = self.torch
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=side):
            for _ in range(calls):
                fn()
        torch.cuda.synchronize()
        g.replay()  # uploads the graph: untimed
        torch.cuda.synchronize()
        return g

    def graph_round(self, g, calls):
        torch = self.torch
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        self.spin()
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        return a.elapsed_time(b) * 1000.0 / calls


# ---- evidence helpers -----------------------------------------------------------------------

def driver_version():
    try:
        import ctypes
        lib = ctypes.CDLL("libcuda.so.1")
        v = ctypes.c_int()
        if lib.cuDriverGetVersion(ctypes.byref(v)) == 0:
            return f"{v.value // 1000}.{(v.value % 1000) // 10}"
    except Exception:  # noqa: BLE001 - evidence only
        pass
    return None


def versions(torch, triton):
    out = {"python": platform.python_version(),
           "torch": getattr(torch, "__version__", None),
           "triton": getattr(triton, "__version__", None) if triton else None}
    try:
        out["cuda_runtime"] = torch.version.cuda
        out["cudnn"] = torch.backends.cudnn.version()
    except Exception:  # noqa: BLE001
        pass
    out["cuda_driver_api"] = driver_version()
    return out


def device_info(torch, dev):
    p = torch.cuda.get_device_properties(dev)
    return {"name": p.name, "capability": f"{p.major}.{p.minor}",
            "sm_count": p.multi_processor_count,
            "memory_gib": round(p.total_memory / 2 ** 30, 1),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES")}


def profiled_kernels(torch, fn):
    """Names of the GPU kernels one call runs (torch.profiler / CUPTI), or an error note."""
    try:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        names = []
        for e in prof.events():
            if "cuda" in str(getattr(e, "device_type", "")).lower() and e.name not in names:
                names.append(e.name)
        return {"kernels": [n[:160] for n in names][:20]}
    except Exception as e:  # noqa: BLE001 - evidence only
        return {"error": f"{type(e).__name__}: {str(e)[:200]}"}


def vllm_evidence(vllm_dir, record, module, gate):
    path = os.path.abspath(module.__file__)
    sha = file_sha256(path)
    ev = {"dir": os.path.abspath(vllm_dir),
          "file": os.path.relpath(path, os.path.abspath(vllm_dir)),
          "module": module.__name__,
          "repo": record.get("repo"), "commit": record.get("commit"),
          "source_path": record.get("path"), "sha256": sha,
          "sha256_matches_record": (record.get("sha256") == sha) if record.get("sha256") else None,
          "gate": {k: gate[k] for k in ("gate_clause", "gate_clause_lines",
                                        "max_seqlen_q_read_lines", "admission_by_argument_exact",
                                        "launched_kernels", "missing_3d_params")}}
    return ev


# ---- main -----------------------------------------------------------------------------------

def shape_evidence(args):
    return {"impl": args.impl, "shape": args.shape, "head_dim": args.head_dim,
            "q_heads": args.q_heads, "kv_heads": args.kv_heads, "depth": args.depth,
            "query_rows": args.query_rows, "batch": 1, "dtype": "bfloat16",
            "block_size": args.block_size, "scale": args.scale, "softcap": args.softcap,
            "sliding_window": None, "seed": args.seed,
            "query_positions": [args.depth - args.query_rows, args.depth - 1]}


def dry_run(args):
    faked = install_stand_ins()
    ev = {"dry_run": True, "stand_ins": faked, **shape_evidence(args)}
    if args.impl.startswith("vllm"):
        record = read_source_record(args.vllm_dir)
        module = import_vllm_kernel(args.vllm_dir, record)
        gate = analyse_gate(module.__file__)
        ev["vllm"] = vllm_evidence(args.vllm_dir, record, module, gate)
        ev["vllm_modules"] = sorted(m for m in sys.modules if m == "vllm" or m.startswith("vllm."))
        if gate["missing_3d_params"]:
            raise Fail(EXIT_USAGE, f"unified_attention at this file lacks {gate['missing_3d_params']}")
        if args.impl == "vllm-admitted" and not gate["admission_by_argument_exact"]:
            raise Fail(EXIT_USAGE, "vllm-admitted: max_seqlen_q is read outside the gate clause "
                                   f"(lines {gate['max_seqlen_q_read_lines']})")
        threshold = args.min_launch_grid // args.kv_heads
        rows = args.query_rows
        passed = rows if args.impl == "vllm-gated" else 1
        ev["predicted_use_3d"] = not (passed > 1 or 1 > threshold)
        ev["seq_threshold_3D"] = threshold
    emit({"evidence": ev})
    return 0


def run(args):
    try:
        import torch
    except ImportError as e:
        raise Fail(EXIT_FAIL, f"PyTorch is not importable here ({e}); --dry-run checks the rest")
    if not torch.cuda.is_available():
        raise Fail(EXIT_FAIL, "no CUDA device visible (CUDA_VISIBLE_DEVICES="
                              f"{os.environ.get('CUDA_VISIBLE_DEVICES')!r})")
    dev = torch.device("cuda", args.device)
    torch.cuda.set_device(dev)
    triton = None
    try:
        import triton  # noqa: F811
    except ImportError:
        if args.impl.startswith("vllm"):
            raise Fail(EXIT_FAIL, "triton is not importable: vLLM's kernels need it")

    ev = shape_evidence(args)
    ev["versions"] = versions(torch, triton)
    ev["device"] = device_info(torch, dev)

    q, kc, vc, block_table, kd, vd = build_inputs(torch, args, dev)
    recorder_names, module = [], None
    if args.impl.startswith("vllm"):
        record = read_source_record(args.vllm_dir)
        module = import_vllm_kernel(args.vllm_dir, record)
        gate = analyse_gate(module.__file__)
        ev["vllm"] = vllm_evidence(args.vllm_dir, record, module, gate)
        if gate["missing_3d_params"]:
            raise Fail(EXIT_USAGE, f"unified_attention at this file lacks {gate['missing_3d_params']}: "
                                   "not a commit with the 3D path this driver drives")
        fn, out, info = vllm_arm(torch, module, gate, args, dev, q, kc, vc, block_table)
        ev["path"] = info
        recorder_names = gate["launched_kernels"]
        causal_ref = True
    else:
        fn, info, causal_ref = sdpa_arm(torch, args, q, kd, vd)
        ev["sdpa"] = info
        out = None

    # One checked call: the output against float32 PyTorch on the same inputs. vLLM's output
    # buffer is filled with NaN first, so a row the kernels never write cannot pass.
    ref = reference(torch, q, kd, vd, args, causal=causal_ref)
    if out is not None:
        out.fill_(float("nan"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if module is not None:
                with LaunchRecorder(module, recorder_names) as rec:
                    fn()
                launches = rec.launches
            else:
                got_sdpa = fn()
                launches = None
            torch.cuda.synchronize()
        except torch.cuda.OutOfMemoryError:
            raise
        except RuntimeError as e:
            if module is None:
                reasons = "; ".join(str(w.message).strip()[:300] for w in caught)
                raise Fail(EXIT_REFUSED, f"{args.impl} refuses head_dim {args.head_dim}, "
                                         f"{args.q_heads}/{args.kv_heads} heads, {args.query_rows} "
                                         f"rows x {args.depth} keys: {str(e).strip()[:300]}"
                                         + (f" (torch says: {reasons})" if reasons else ""))
            raise
    got = (out if module is not None else got_sdpa[0].transpose(0, 1)).float()
    err = (got - ref).abs()
    finite = bool(torch.isfinite(got).all())
    max_abs = float(err.max()) if finite else float("inf")
    ref_max = float(ref.abs().max())
    rel = max_abs / max(ref_max, 1e-30)
    ev["check"] = {"reference": "float32 PyTorch attention, same inputs, "
                                + ("causal bottom-right" if causal_ref else "no mask"),
                   "finite": finite, "max_abs_err": max_abs, "max_abs_ref": ref_max,
                   "rel_err": rel, "limit_abs": args.max_abs_err, "limit_rel": args.max_rel_err}
    del ref, err

    if module is not None:
        attn = [x for x in launches if "reduce" not in x["kernel"]]
        taken = ("3d" if attn and isinstance(attn[0]["grid"], list) and len(attn[0]["grid"]) == 3
                 else "2d")
        ev["path"]["launches"] = launches
        ev["path"]["taken"] = taken
        ev["path"]["how"] = ("taken: the kernels unified_attention launched in the checked call "
                             "(globals swapped for a recorder; a 3-D grid is the 3D path); "
                             "predicted: its gate evaluated on the arguments passed")
    if not args.no_profile_kernels:
        ev["profiled"] = profiled_kernels(torch, fn)
    emit({"evidence": ev})

    if not finite or max_abs > args.max_abs_err or rel > args.max_rel_err:
        raise Fail(EXIT_WRONG, f"{args.impl}: output differs from the float32 reference (max |err| "
                               f"{max_abs:.4g}, max |ref| {ref_max:.4g}, relative {rel:.4g}, "
                               f"finite {finite}); not timing a wrong kernel")
    if module is not None:
        if (ev["path"]["taken"] == "3d") != ev["path"]["predicted_use_3d"]:
            raise Fail(EXIT_FAIL, f"vLLM took the {ev['path']['taken']} path but its gate, as this "
                                  f"driver reads it, predicts use_3d={ev['path']['predicted_use_3d']}")
        if ev["path"]["taken"] == "3d" and args.query_rows > 1:
            print(PROBE, file=sys.stderr, flush=True)

    timer = Timer(torch, args.hold_us)
    for _ in range(args.warmup):
        fn()
    torch.cuda.synchronize()
    round_stats, host_all = [], []
    graph = timer.graph(fn, args.calls) if args.timing == "graph" else None
    for r in range(args.rounds):
        if graph is not None:
            value = timer.graph_round(graph, args.calls)
            times = [value]
        else:
            times, host = timer.stream_round(fn, args.calls)
            host_all.extend(host)
            value = sum(times) / len(times)
        if not math.isfinite(value) or value <= 0:
            raise Fail(EXIT_FAIL, f"round {r}: timing gave {value}")
        emit({"metric": "time_us", "value": round(value, 4), "round": r})
        round_stats.append({"round": r, "mean_us": round(value, 4),
                            "median_us": round(statistics.median(times), 4),
                            "min_us": round(min(times), 4)})
    timing = {"method": args.timing, "warmup": args.warmup, "calls_per_round": args.calls,
              "rounds": args.rounds, "hold_us": args.hold_us, "spin_cycles": timer.cycles,
              "per_round": round_stats}
    if timer.note:
        timing["note"] = timer.note
    if args.timing == "stream":
        timing["value"] = "mean of per-call CUDA-event times, each call behind the spin"
        hmed = statistics.median(host_all)
        timing["host_enqueue_us_median"] = round(hmed, 2)
        timing["host_enqueue_hidden_by_spin"] = hmed < args.hold_us
    else:
        timing["value"] = "one replay of --calls calls captured in a CUDA graph, divided by calls"
    emit({"evidence": {"timing": timing}})
    return 0


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return dry_run(args) if args.dry_run else run(args)
    except Fail as f:
        log(str(f))
        return f.code
    except Exception as e:  # noqa: BLE001 - anything else is a failed start, with its traceback
        import traceback
        traceback.print_exc(file=sys.stderr)
        log(f"failed: {type(e).__name__}: {e}")
        return EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
