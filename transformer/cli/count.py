"""`python -m transformer count NAME_OR_CONFIG_JSON [--seq N --batch B --dtype float16]`

Prints a model's parameters by part, matmul FLOPs of prefill and of one decode step,
arithmetic intensity, KV-cache bytes and the bytes of naive attention's score matrix.
"""
from __future__ import annotations

import json
import sys

from ..models import counting as C
from ..require import require_int
from ..models.configs import builtin_names, load_config
from .shown import shown_int

__all__ = ["register", "count_report", "format_report"]


def register(sub):
    p = sub.add_parser(
        "count", help="count parameters, FLOPs and KV-cache bytes of a model",
        description="Parameters by part, FLOPs (prefill and decode), KV-cache and attention bytes "
                    f"of a built-in model ({builtin_names()}) or of any config.json.")
    p.add_argument("model", metavar="NAME_OR_CONFIG_JSON",
                   help="a built-in name or the path of a Hugging Face config.json (or of its folder)")
    p.add_argument("--seq", type=int, default=None,
                   help="sequence length n (default 1024, or the model's context n_ctx if shorter)")
    p.add_argument("--batch", type=int, default=1, help="batch size b (default 1)")
    p.add_argument("--dtype", default="float16", help=f"storage type: {', '.join(C.DTYPE_BYTES)} (default float16)")
    p.add_argument("--json", action="store_true", help="print the numbers as JSON instead of a table")
    p.set_defaults(func=_run)


def count_report(config, n: int = 1024, batch: int = 1, dtype="float16") -> dict:
    """All the counts the `count` command prints, as one dict of plain numbers."""
    require_int(**{"n (--seq)": n, "batch (--batch)": batch}, low=1)  # named by the CLI flag too
    n, batch = int(n), int(batch)  # NumPy integers too; plain ints print as JSON
    c = load_config(config)
    decoder = c.family != "encoder"
    r = {"name": c.name, "family": c.family, "n": n, "batch": batch, "dtype": dtype, "n_ctx": c.n_ctx,
         "parameters": C.parameter_breakdown(c),
         "prefill_flops": C.forward_flops(c, n, batch=batch),
         "attention_score_bytes": C.attention_score_bytes(c, n, batch, dtype),
         "intensity": {k: v["intensity"] for k, v in C.arithmetic_intensity(c, n, batch=batch, dtype=dtype).items()}}
    r["weight_bytes"] = r["parameters"]["total"] * C.dtype_bytes(dtype)
    if decoder:
        r["decode_flops"] = C.forward_flops(c, n, batch=batch, phase="decode")
        r["kv_bytes_per_token"] = C.kv_cache_bytes_per_token(c, dtype)
        r["kv_bytes"] = C.kv_cache_bytes(c, n, batch, dtype)
    return r


SI_PREFIXES = ((1e24, "Y"), (1e21, "Z"), (1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def _si(x: float, unit: str) -> str:
    """1234567 -> '1.23 M' + unit (decimal prefixes, as FLOP and byte counts are quoted); from 1000 of the
    largest prefix (Y, 10²⁴) on, a power of ten, never '368640024706.41 P'.

    >>> _si(1234567, "B"), _si(3.6864e26, "FLOP"), _si(3.6864e29, "FLOP"), _si(12, "B")
    ('1.23 MB', '368.64 YFLOP', '3.69e+29 FLOP', '12 B')
    """
    if abs(x) >= 1000 * SI_PREFIXES[0][0]:
        return f"{x:.2e} {unit}"
    for p, s in SI_PREFIXES:
        if abs(x) >= p:
            return f"{x / p:.2f} {s}{unit}"
    return f"{x:.0f} {unit}"


PLAIN_BELOW = 1e6  # a ratio (FLOPs per byte) prints as 1234.5 below this, as a power of ten from it


def _ratio(x: float) -> str:
    """A ratio with one decimal, or as a power of ten (the form `_si` takes past Y) once it has 7 digits.

    >>> _ratio(123.456), _ratio(1.000001e30)
    ('123.5', '1.00e+30')
    """
    return f"{x:.1f}" if abs(x) < PLAIN_BELOW else f"{x:.2e}"


def context_note(r: dict) -> str | None:
    """The note that n is past the model's context, which `count` prints on stderr (with --json too), or None."""
    if r["n"] <= r["n_ctx"]:
        return None
    return f"note: n={r['n']} is longer than the model's context n_ctx={r['n_ctx']}"


def format_report(r: dict) -> str:
    """The report as a two-column text table."""
    p, n, b = r["parameters"], r["n"], r["batch"]
    rows = [("parameters", "")]
    for part in ("embeddings", "attention", "ffn", "norms", "lm_head", "pooler"):
        if not p[part] and (part == "pooler" or r["family"] == "encoder"):
            continue  # parts the model does not have
        note = "(tied to the embedding)" if part == "lm_head" and not p[part] and r["family"] != "encoder" else \
            f"{100 * p[part] / p['total']:5.1f} %"
        rows.append((f"  {part}", f"{p[part]:>15,}  {note}"))
    rows.append(("  total", f"{p['total']:>15,}  ({_si(r['weight_bytes'], 'B')} in {r['dtype']})"))
    pre = r["prefill_flops"]
    rows += [(f"FLOPs, matmuls (n={n}, b={b})", ""),
             ("  prefill total", f"{_si(pre['total'], 'FLOP'):>15}  ({_si(pre['total'] / pre['tokens'], 'FLOP')}/token)"),
             ("  of which attention n²", f"{_si(pre['attention'], 'FLOP'):>15}  "
                                         f"({100 * pre['attention'] / pre['total']:.1f} %)")]
    if "decode_flops" in r:
        dec = r["decode_flops"]
        rows.append((f"  decode step at n={n}", f"{_si(dec['total'] / b, 'FLOP'):>15}  per sequence"))
    rows.append(("  FLOPs per byte, prefill", f"{_ratio(r['intensity']['prefill']):>15}"))
    if "decode" in r["intensity"]:
        rows.append(("  FLOPs per byte, decode", f"{_ratio(r['intensity']['decode']):>15}  (memory-bound when small)"))
    rows.append((f"memory ({r['dtype']})", ""))
    if "kv_bytes" in r:
        rows += [("  KV cache per token", f"{r['kv_bytes_per_token']:>15,} B"),
                 (f"  KV cache (b={b}, n={n})", f"{_si(r['kv_bytes'], 'B'):>15}")]
    else:
        rows.append(("  KV cache", f"{'—':>15}  (an encoder keeps none)"))
    rows.append(("  attention scores, 1 layer", f"{_si(r['attention_score_bytes'], 'B'):>15}  (naive: b·h·n²)"))
    width = max(len(k) for k, _ in rows) + 2
    head = f"{r['name']} ({r['family']})"
    return "\n".join([head] + [f"{k:<{width}}{v}".rstrip() for k, v in rows])


MAX_SIZE = 10 ** 18  # tokens or sequences: far past any model, and every count below stays a finite float


def _run(args) -> int:
    for flag, value in (("--seq", args.seq), ("--batch", args.batch)):
        if value is not None and not 1 <= value <= MAX_SIZE:  # past it the byte counts leave float64's range
            raise ValueError(f"{flag} must be an integer from 1 to 10^18, got {shown_int(value)}")
    config = load_config(args.model)
    n = min(1024, config.n_ctx) if args.seq is None else args.seq  # a default within the model's context
    r = count_report(config, n, args.batch, args.dtype)
    note = context_note(r)
    if note:  # on stderr, as embed's and attention's notes: stdout holds the report alone
        print(note, file=sys.stderr)
    print(json.dumps(r, indent=2) if args.json else format_report(r))
    return 0
