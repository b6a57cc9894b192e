"""The tiny decoder trained from scratch on the induction task, and what its heads learn.

The task (`induction_data.py`): random tokens t₁ … t_m, then the same tokens again. In the second copy the
next token is always predictable — it is the token that followed the current one the first
time — and nothing else is. A 2-layer decoder solves it with two heads working in series:

    layer 0, a previous-token head:   query i reads key i − 1        (P[i, i−1] ≈ 1)
             it writes "the token before me was t" into position i's residual stream;
    layer 1, an induction head:       query i (token t_k, second copy) reads the key whose
             previous token is t_k: position i − m + 1, which holds t_{k+1}, and copies it.

Training shows a plateau — the loss stays near ln(v − 1), chance over the v − 1 real tokens,
while neither head exists — then a sudden drop when both form together (Olsson et al., 2022,
"In-context learning and induction heads"). `induction_head_scores` finds the two heads by a
number, the mean weight on their diagonal, not by eye.

Documents have varying lengths (m from N_HALF_RANGE). They are laid out either padded (one
document per row, each batch padded to its longest) or packed (back to back in rows of N_CTX,
positions restarted, a document mask): with the mask, each document's loss is the same in both
layouts, so both learn alike, and the packed rows hold far fewer padded slots. Each run counts
both layouts' slots on its own documents.
"""
from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from . import induction_checks as checks
from .induction_data import induction_accuracy, induction_batch, induction_documents
from ..train.checkpoint import checkpoint_contents, load_checkpoint, save_checkpoint, write_metrics
from ..train.data import HELDOUT_SEED_OFFSET, batches, packed_rows, padded_rows
from ..train.decoder import DecoderConfig, decoder_forward, decoder_loss_and_grads, init_decoder
from ..train.loop import sharded_loss, train_loop
from ..backend import to_numpy
from ..files import interrupts_deferred
from ..require import checked_by

__all__ = ["INDUCTION_SIZES", "INDUCTION_STEPS", "INDUCTION_RECIPE", "induction_config", "induction_rows",
           "induction_rows_loss", "induction_heldout_accuracy", "attention_maps", "induction_head_scores",
           "train_induction", "load_decoder", "decoder_config_from"]

# v = 32: ids 1 … 31 are tokens (0 is padding). 2 heads of d_h = 32 in each of 2 layers: with this
# recipe, seeds 0–7 all but one pass 99 % held-out in 600 steps; with 4 heads of d_h = 16, seeds 0, 2
# and 3 did, but seed 1 stayed under 60 %.
INDUCTION_SIZES = dict(v=32, d=64, h=2, h_kv=2, L=2, d_ff=128, n_max=64)
N_HALF_RANGE = (4, 16)  # documents of 8 … 32 tokens: no fixed offset copies the answer, only induction
N_CTX = 64  # a packed row: twice the longest document
DOCS_PER_STEP = 64  # documents a batch, whatever the layout; with 32, seeds 1, 2 were under 65 % at step 1000
INDUCTION_STEPS = 600  # the default run: the drop comes after 150–300 steps (seeds 0, 1)
INDUCTION_RECIPE = dict(  # train_loop's settings, and the data's
    docs_per_step=DOCS_PER_STEP, n_half_range=N_HALF_RANGE, n_ctx=N_CTX,
    lr_max=3e-3,  # seed 0 at step 600: 5e-3 reaches 78 %, 1e-3 43 %
    warmup=100, min_lr=0.0, weight_decay=0.1, betas=(0.9, 0.95), clip=1.0)
HELDOUT_DOCS = 256  # held-out documents: about 2 300 predictions (m − 1 each)
PROBE_N_HALF = 12  # the held-out sequence whose attention maps are kept: 24 tokens


def induction_config() -> DecoderConfig:
    """The induction model: 2 layers, 2 heads of d_h = 32, RoPE, pre-norm (RMSNorm), SwiGLU, tied LM head."""
    return DecoderConfig(**INDUCTION_SIZES)


@checked_by(checks.induction_rows)
def induction_rows(docs, *, packed: bool):  # list of [2·m_i] -> TrainRows
    """Documents as training rows: packed back to back into rows of N_CTX (document mask,
    positions restart), or padded, one per row, to the longest of them. Only each document's
    second half is scored (score_from = m_i): its first half is random."""
    score_from = [len(d) // 2 for d in docs]
    if packed:
        return packed_rows(docs, N_CTX, score_from=score_from)
    return padded_rows(docs, max(len(d) for d in docs), score_from=score_from)


def induction_rows_loss(params: dict, rows, cfg: DecoderConfig, *, packed: bool):  # TrainRows -> (loss, grads)
    """The mean next-token loss over the rows' scored targets, and its gradients. A packed row
    needs the document mask and the restarted positions; a padded row only the causal mask,
    its padding sitting after the document, where no query of the document looks."""
    if packed:
        return decoder_loss_and_grads(params, rows.ids, rows.targets, cfg, positions=rows.positions,
                                      doc_ids=rows.doc_ids)
    return decoder_loss_and_grads(params, rows.ids, rows.targets, cfg)


@checked_by(checks.induction_heldout_accuracy)
def induction_heldout_accuracy(params: dict, cfg: DecoderConfig, docs) -> tuple:  # -> (share right, predictions)
    """Greedy accuracy over the second halves of documents: the argmax at position i against the
    token at i + 1, for i = m … 2m − 2 (`induction_accuracy`). Documents of one length run as one
    batch; the share is over all predictions of all documents together."""
    by_length: dict = {}
    for d in docs:
        by_length.setdefault(len(d), []).append(np.asarray(d, dtype=np.int64))
    right = total = 0
    for n, group in sorted(by_length.items()):
        ids = np.stack(group)  # [b, 2m]
        logits, _ = decoder_forward(params, ids, cfg)  # [b, 2m, v]
        pred = to_numpy(logits).argmax(axis=-1)  # [b, 2m]
        k = ids.shape[0] * (n // 2 - 1)  # predictions in this group
        right += round(induction_accuracy(pred, ids) * k)
        total += k
    return right / total, total


@checked_by(checks.attention_maps)
def attention_maps(params: dict, cfg: DecoderConfig, ids) -> np.ndarray:  # [n] or [1, n] -> [L, h, n, n]
    """Every head's attention weights on one sequence (NumPy), read from the forward pass's saved P."""
    ids = np.asarray(ids, dtype=np.int64).reshape(1, -1)  # [1, n]
    _, saved = decoder_forward(params, ids, cfg)
    return np.stack([to_numpy(saved[f"layers.{l}.P"])[0] for l in range(cfg.L)])  # [L, h, n, n]


@checked_by(checks.induction_head_scores)
def induction_head_scores(maps, n_half: int) -> dict:  # [..., L, h, n, n] -> name -> [..., L, h]
    """Two numbers per head, on a sequence t₁ … t_m t₁ … t_m (m = n_half):

        previous token:  mean over i = 1 … 2m − 1 of P[i, i − 1]
        induction:       mean over i = m … 2m − 2 of P[i, i − m + 1]

    (query i in the second copy holds t_{i−m+1}; its earlier occurrence is at i − m, and the
    token after that, at i − m + 1, is the one to copy). 1 is a perfect head; a head spreading
    its weight evenly over the i + 1 keys it may see scores the mean of 1/(i + 1) over the rows read:
    previous token 0.12 and induction 0.06 at m = 12.

    >>> prev = np.eye(6, k=-1); prev[0, 0] = 1  # every row reads the key before it
    >>> ind = np.eye(6)[[0, 0, 0, 1, 2, 0]]  # rows 3 and 4 (t₁, t₂ of the copy) read keys 1 and 2
    >>> s = induction_head_scores(np.stack([prev, ind])[None], 3)  # L = 1 layer, h = 2 heads, m = 3
    >>> s["previous token"].tolist(), s["induction"].tolist()
    ([[1.0, 0.2]], [[0.0, 1.0]])
    """
    W = np.asarray(maps)  # [..., L, h, n, n]
    m = n_half
    i_all = np.arange(1, 2 * m)  # [2m − 1]
    i_2nd = np.arange(m, 2 * m - 1)  # [m − 1]
    return {"previous token": W[..., i_all, i_all - 1].mean(axis=-1),  # [..., L, h]
            "induction": W[..., i_2nd, i_2nd - m + 1].mean(axis=-1)}


@checked_by(checks.train_induction)
def train_induction(*, steps: int = INDUCTION_STEPS, seed: int = 0, out=None, progress: bool = True,
                    packed: bool = False, snapshot_every: int = 10, on_step=None, sizes: dict | None = None,
                    lr_max: float | None = None, workers: int = 1) -> dict:
    """Train the induction decoder from scratch (AdamW, warm-up then cosine, clip 1.0); seeded.

    Each step draws DOCS_PER_STEP = 64 documents (m uniform in N_HALF_RANGE = 4 … 16) from
    default_rng(seed), lays them out packed or padded (`induction_rows`), and takes one AdamW
    step with INDUCTION_RECIPE's settings. Held-out documents (their own split, from seed +
    HELDOUT_SEED_OFFSET) are never trained on. Every snapshot_every steps (and before the first
    and after the last) the attention maps of one held-out sequence of 24 tokens and the held-out
    accuracy are recorded.

    Returns {"params", "cfg", "history" (train_loop's: loss, lr, grad_norm per step, tokens/s),
    "heldout_accuracy", "heldout_predictions", "snapshots": {"step" [k], "maps" [k, L, h, n, n],
    "scores": {"previous token", "induction"} [k, L, h], "accuracy" [k], "ids" [n], "n_half"},
    "layout" ("packed" or "padded"), "slots": {"tokens", "padded": {"rows", "slots",
    "padded_slots"}, "packed": {…}} (both layouts of the same documents, summed over the run),
    "seed", "steps"}. With out: out/checkpoint.npz (config with "kind": "decoder") and
    out/metrics.json. on_step(s, params, loss) is called after each update, as in train_loop.

    To change the run: sizes overrides INDUCTION_SIZES (sizes={"L": 1}: one layer; {"h": 4, "h_kv": 4}:
    four heads of d_h = 16), lr_max INDUCTION_RECIPE's peak learning rate. Everything else stays.
    workers > 1 splits each batch's rows over that many threads (`train.loop.sharded_loss`: data
    parallelism over the CPU's cores); the losses equal workers=1's up to the order of float additions.
    """
    cfg = induction_config() if sizes is None else DecoderConfig(**{**INDUCTION_SIZES, **sizes})
    checks.decoder_fits(cfg)  # the sizes are known only now: init_decoder's own check is inside this door
    lr_peak = INDUCTION_RECIPE["lr_max"] if lr_max is None else float(lr_max)
    params = init_decoder(cfg, seed)
    held_rng = np.random.default_rng(seed + HELDOUT_SEED_OFFSET)
    held_docs = induction_documents(held_rng, HELDOUT_DOCS, cfg.v, N_HALF_RANGE, split="heldout")
    probe = induction_batch(held_rng, 1, PROBE_N_HALF, cfg.v, split="heldout").ids[0]  # [24]

    slots = {"tokens": 0, **{k: {"rows": 0, "slots": 0, "padded_slots": 0} for k in ("padded", "packed")}}

    def make_batch(rng):  # -> the rows of this layout; both layouts' slots counted
        docs = induction_documents(rng, DOCS_PER_STEP, cfg.v, N_HALF_RANGE)
        rows = {"padded": induction_rows(docs, packed=False), "packed": induction_rows(docs, packed=True)}
        for k, r in rows.items():
            slots[k]["rows"] += r.ids.shape[0]
            slots[k]["slots"] += r.ids.size
            slots[k]["padded_slots"] += r.padded_slots
        slots["tokens"] += rows["packed"].tokens
        return rows["packed" if packed else "padded"]

    snaps = {"step": [], "maps": [], "accuracy": []}

    def snapshot(step, p):
        snaps["step"].append(step)
        snaps["maps"].append(attention_maps(p, cfg, probe))  # [L, h, n, n]
        snaps["accuracy"].append(induction_heldout_accuracy(p, cfg, held_docs)[0])

    def hook(s, p, loss):  # after update s, so s + 1 updates are done
        if (s + 1) % snapshot_every == 0 or s + 1 == steps:
            snapshot(s + 1, p)
        if on_step is not None:
            on_step(s, p, loss)

    # One BLAS thread: the matrices are small ((2048, 64) @ (64, 128) at most), and a second thread
    # mostly waits on the first; on a busy 2-core machine it slows a step several times over.
    # workers threads share the batch instead (sharded_loss): each its rows, its own core.
    with threadpool_limits(limits=1, user_api="blas"), ThreadPoolExecutor(workers) as pool:
        snapshot(0, params)
        r = INDUCTION_RECIPE
        loss = lambda p, rows: induction_rows_loss(p, rows, cfg, packed=packed)  # noqa: E731
        history = train_loop(loss if workers == 1 else sharded_loss(loss, pool, workers), params,
                             batches(make_batch, seed, steps), steps=steps, lr_max=lr_peak,
                             warmup=min(r["warmup"], steps), min_lr=r["min_lr"], clip=r["clip"],
                             weight_decay=r["weight_decay"], betas=r["betas"], progress=progress, on_step=hook,
                             desc=f"induction ({'packed' if packed else 'padded'})")
        accuracy, predictions = induction_heldout_accuracy(params, cfg, held_docs)
    maps = np.stack(snaps["maps"])  # [k, L, h, n, n]
    result = {"params": params, "cfg": cfg, "history": history, "heldout_accuracy": accuracy,
              "heldout_predictions": predictions,
              "snapshots": {"step": snaps["step"], "maps": maps, "scores": induction_head_scores(maps, PROBE_N_HALF),
                            "accuracy": snaps["accuracy"], "ids": probe, "n_half": PROBE_N_HALF},
              "layout": "packed" if packed else "padded", "slots": slots, "seed": seed, "steps": steps}
    if out is not None:
        with interrupts_deferred():  # the checkpoint and its metrics: both new or both old
            write_run(Path(out), result)
    return result


def write_run(out: Path, r: dict) -> None:
    """out/checkpoint.npz and out/metrics.json of a finished run."""
    cfg, h = r["cfg"], r["history"]
    config = {"kind": "decoder", "task": "induction", **dataclasses.asdict(cfg), "first_token": 1, "pad_id": 0,
              "n_half_range": list(N_HALF_RANGE)}
    save_checkpoint(out, r["params"], config, extra={"steps": r["steps"], "seed": r["seed"], "layout": r["layout"],
                                                     "heldout_accuracy": r["heldout_accuracy"]})
    s = r["snapshots"]
    write_metrics(out, {
        "task": "induction", "seed": r["seed"], "steps": r["steps"], "layout": r["layout"], "config": config,
        "heldout_accuracy": r["heldout_accuracy"], "heldout_predictions": r["heldout_predictions"],
        "loss": h["loss"], "lr": h["lr"], "grad_norm": h["grad_norm"], "tokens_per_s": h["tokens_per_s"],
        "seconds": h["seconds"], "tokens_seen": h["tokens_seen"], "slots": r["slots"],
        "snapshots": {"step": s["step"], "heldout_accuracy": s["accuracy"],
                      "scores": {k: v.tolist() for k, v in s["scores"].items()}}})


def decoder_config_from(config: dict, source: str = "checkpoint", held: dict | None = None) -> DecoderConfig:
    """A DecoderConfig from a checkpoint's config dict ("kind": "decoder"), one line if it is not one.
    held: the file's parameter shapes (checkpoint_contents): the config's L is bounded by them
    before its per-layer shapes are listed (each layer holds 9 weights)."""
    if config.get("kind") != "decoder":
        raise ValueError(f"{source}: not a decoder checkpoint (its config says kind={config.get('kind')!r})")
    fields = [f.name for f in dataclasses.fields(DecoderConfig)]
    missing = [f for f in fields[:7] if f not in config]  # v … n_max are required, the rest have defaults
    if missing:
        raise ValueError(f"{source}: the config lacks {missing[0]!r}")
    bad = [f for f in fields[:7] if isinstance(config[f], bool) or not isinstance(config[f], int)]
    if bad:
        raise ValueError(f"{source}: config {bad[0]}={config[bad[0]]!r} must be an integer")
    if held is not None and config["L"] > len(held):
        raise ValueError(f"{source}: config L={config['L']} names more layers than the file holds weights "
                         f"({len(held)})")
    try:
        return DecoderConfig(**{f: config[f] for f in fields if f in config})
    except (TypeError, ValueError) as e:
        raise ValueError(f"{source}: bad config: {e}") from None


@checked_by(checks.load_decoder)
def load_decoder(path_or_dir) -> tuple:  # -> (params, cfg, config)
    """A decoder checkpoint (train_induction's): its weights, checked against the shapes its own
    config implies, the DecoderConfig, and the whole config dict (task, first_token, …)."""
    config, held = checkpoint_contents(path_or_dir)  # headers only: the sizes are bounded before any weight is read
    cfg = decoder_config_from(config, str(path_or_dir), held)
    params, config = load_checkpoint(path_or_dir, expected_shapes=cfg.parameter_shapes())
    dtypes = {str(p.dtype) for p in params.values()}
    if len(dtypes) > 1:  # load_checkpoint has checked that each is floating point and finite
        raise ValueError(f"{path_or_dir}: the weights must share one float dtype, got {sorted(dtypes)}")
    return params, cfg, config
