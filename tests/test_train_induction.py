"""The induction run (transformer/tasks/induction.py): the trained decoder is judged by torch
(tests/support/torch_tiny.py) running its weights on held-out documents; the padded-slot counts by a
first-fit packing and a padding count written here; the attention maps by torch's own weights;
the head scores by a loop over the definition; packed and padded losses by torch on each
document alone. The default run (600 steps, ~30 s) is trained once per layout (the padded one once for the
whole test run: conftest.py's default_induction_run)."""
import json
import zipfile

import numpy as np
import pytest
import torch

import transformer as T
from torch_tiny import TorchTinyDecoder

V, DOCS_PER_STEP, RANGE, N_CTX = 32, 64, (4, 16), 64  # the run's data recipe, as its docstring states


@pytest.fixture(autouse=True)
def one_torch_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def padded(default_induction_run):  # conftest.py: trained once for this file and test_cli_train.py
    return default_induction_run[1]


@pytest.fixture(scope="module")
def packed():
    return T.train_induction(seed=0, progress=False, packed=True)


def heldout_docs(count=300, seed=123):  # the held-out split, from a seed the run never uses
    return T.induction_documents(np.random.default_rng(seed), count, V, RANGE, split="heldout")


def torch_accuracy(cfg, params, docs):
    """Greedy accuracy on the second halves, computed by torch in float64 from the trained weights."""
    model = TorchTinyDecoder(cfg, {k: np.asarray(w, np.float64) for k, w in params.items()})
    right = total = 0
    with torch.no_grad():
        for d in docs:
            m = len(d) // 2
            pred = model(np.asarray(d)[None]).argmax(-1).numpy()[0]  # [2m]
            right += int((pred[m:-1] == np.asarray(d)[m + 1:]).sum())
            total += m - 1
    return right / total


@pytest.mark.parametrize("layout", ["padded", "packed"])
def test_default_run_reaches_99_percent_on_heldout_documents(layout, request):
    run = request.getfixturevalue(layout)
    assert run["layout"] == layout
    assert torch_accuracy(run["cfg"], run["params"], heldout_docs()) >= 0.99


def test_heldout_documents_never_appear_in_training():
    rng = np.random.default_rng(0)
    train = {tuple(d) for _ in range(50) for d in T.induction_documents(rng, DOCS_PER_STEP, V, RANGE)}
    held = {tuple(d) for d in heldout_docs(500)}
    assert not train & held and all(T.is_heldout(np.asarray(d[:len(d) // 2])) for d in held)


def first_fit_padding(docs, n_ctx):  # -> (rows, padded slots): first fit in input order, written out
    free = []
    for d in docs:
        for r, room in enumerate(free):
            if len(d) <= room:
                free[r] -= len(d)
                break
        else:
            free.append(n_ctx - len(d))
    return len(free), sum(free)


def test_slot_counts_of_both_layouts_match_a_hand_count(padded, packed):
    """Re-draw the run's documents (default_rng(seed), DOCS_PER_STEP per step) and count by hand:
    padded = each batch padded to its longest; packed = first fit into rows of 64."""
    rng = np.random.default_rng(0)
    want = {"tokens": 0, "padded": {"rows": 0, "slots": 0, "padded_slots": 0},
            "packed": {"rows": 0, "slots": 0, "padded_slots": 0}}
    for _ in range(padded["steps"]):
        docs = T.induction_documents(rng, DOCS_PER_STEP, V, RANGE)
        lengths = [len(d) for d in docs]
        tokens = sum(lengths)
        want["tokens"] += tokens
        want["padded"]["rows"] += len(docs)
        want["padded"]["slots"] += len(docs) * max(lengths)
        want["padded"]["padded_slots"] += len(docs) * max(lengths) - tokens
        rows, pad = first_fit_padding(docs, N_CTX)
        want["packed"]["rows"] += rows
        want["packed"]["slots"] += rows * N_CTX
        want["packed"]["padded_slots"] += pad
    assert padded["slots"] == want and packed["slots"] == want  # the same documents in both runs
    assert want["packed"]["padded_slots"] < 0.25 * want["padded"]["padded_slots"]


def test_same_seed_same_run_other_seed_other_run():
    a, b, c = (T.train_induction(steps=4, seed=s, progress=False, snapshot_every=2) for s in (3, 3, 4))
    assert a["history"]["loss"] == b["history"]["loss"] != c["history"]["loss"]
    assert all(np.array_equal(a["params"][k], b["params"][k]) for k in a["params"])
    assert a["snapshots"]["step"] == [0, 2, 4]
    np.testing.assert_array_equal(a["snapshots"]["maps"], b["snapshots"]["maps"])


def test_packed_loss_is_each_document_alone(padded):
    """With the document mask and restarted positions, the packed rows' loss is torch's loss of each
    document run alone (summed over the documents' targets), and so is the padded rows'."""
    cfg = padded["cfg"]
    params = {k: np.asarray(w, np.float64) for k, w in padded["params"].items()}
    docs = T.induction_documents(np.random.default_rng(9), 20, V, RANGE)
    model = TorchTinyDecoder(cfg, params)
    total, count = 0.0, 0
    with torch.no_grad():
        for d in docs:
            m = len(d) // 2
            logits = model(np.asarray(d)[None])[0]  # [2m, v]
            total += float(torch.nn.functional.cross_entropy(logits[m:-1], torch.as_tensor(d[m + 1:]),
                                                               reduction="sum"))
            count += m - 1
    for is_packed in (False, True):
        loss, _ = T.induction_rows_loss(params, T.induction_rows(docs, packed=is_packed), cfg, packed=is_packed)
        assert abs(loss - total / count) < 1e-10 * max(1.0, total / count)


def torch_attention_maps(cfg, params, ids):  # [n] -> [L, h, n, n], softmax(q kᵀ/√d_h + mask) computed here
    recorded = []
    original = torch.nn.functional.scaled_dot_product_attention

    def record(q, k, v, attn_mask=None, enable_gqa=False):
        s = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5
        w = s.masked_fill(~attn_mask, float("-inf")).softmax(-1)
        recorded.append(w[0].numpy())
        return w @ v

    torch.nn.functional.scaled_dot_product_attention = record
    try:
        with torch.no_grad():
            TorchTinyDecoder(cfg, {k: np.asarray(w, np.float64) for k, w in params.items()})(np.asarray(ids)[None])
    finally:
        torch.nn.functional.scaled_dot_product_attention = original
    return np.stack(recorded)


def test_snapshot_maps_are_torchs_attention_weights(padded):
    cfg, s = padded["cfg"], padded["snapshots"]
    ref = torch_attention_maps(cfg, padded["params"], s["ids"])
    np.testing.assert_allclose(s["maps"][-1], ref, atol=2e-5)  # float32 against float64
    np.testing.assert_allclose(T.attention_maps(padded["params"], cfg, s["ids"]), ref, atol=2e-5)


def head_scores_by_loop(W, m):  # [L, h, n, n] -> two [L, h] arrays, the definitions written as loops
    L, h = W.shape[:2]
    prev, ind = np.zeros((L, h)), np.zeros((L, h))
    for l in range(L):
        for j in range(h):
            prev[l, j] = sum(W[l, j, i, i - 1] for i in range(1, 2 * m)) / (2 * m - 1)
            ind[l, j] = sum(W[l, j, i, i - m + 1] for i in range(m, 2 * m - 1)) / (m - 1)
    return prev, ind


@pytest.mark.parametrize("m", [2, 5, 12])
def test_head_scores_match_their_definition(m):
    rng = np.random.default_rng(m)
    W = rng.random((2, 3, 2 * m + 1, 2 * m + 1))  # a longer n than 2m: the scores read only the first 2m rows
    prev, ind = head_scores_by_loop(W, m)
    got = T.induction_head_scores(W, m)
    np.testing.assert_allclose(got["previous token"], prev, rtol=1e-12)
    np.testing.assert_allclose(got["induction"], ind, rtol=1e-12)
    stacked = T.induction_head_scores(np.stack([W, W]), m)  # leading snapshot axis kept
    assert stacked["induction"].shape == (2, 2, 3)


def test_trained_heads_are_a_previous_token_head_below_an_induction_head(padded):
    """Scored on torch's attention weights: the best previous-token head sits in layer 0 and the best
    induction head in layer 1, each far above a head that spreads its weight evenly."""
    cfg, s = padded["cfg"], padded["snapshots"]
    prev, ind = head_scores_by_loop(torch_attention_maps(cfg, padded["params"], s["ids"]), s["n_half"])
    n = 2 * s["n_half"]
    uniform = sum(1 / (i + 1) for i in range(1, n)) / (n - 1)  # P[i, i−1] of a head spreading evenly
    assert np.unravel_index(prev.argmax(), prev.shape)[0] == 0 and prev.max() > 3 * uniform
    assert np.unravel_index(ind.argmax(), ind.shape)[0] == 1 and ind.max() > 0.8


def test_heldout_accuracy_matches_torch_on_a_small_model():
    cfg = T.DecoderConfig(v=V, d=16, h=2, h_kv=1, L=1, d_ff=8, n_max=64)
    params = {k: w * 20 if "norm" not in k else w for k, w in T.init_decoder(cfg, 5, dtype="float64").items()}
    docs = heldout_docs(40, seed=8)
    acc, predictions = T.induction_heldout_accuracy(params, cfg, docs)
    assert predictions == sum(len(d) // 2 - 1 for d in docs)
    assert acc == pytest.approx(torch_accuracy(cfg, params, docs), abs=1e-12)


def test_checkpoint_and_metrics_of_a_short_run(tmp_path):
    run = T.train_induction(steps=3, seed=1, progress=False, out=tmp_path / "run")
    with zipfile.ZipFile(tmp_path / "run" / "checkpoint.npz") as z:  # read without the package
        names = set(z.namelist())
    meta = {"meta/config.npy", "meta/extra.npy", "meta/format.npy"}
    assert {f"params/{k}.npy" for k in run["params"]} | meta == names
    with np.load(tmp_path / "run" / "checkpoint.npz") as npz:
        config = json.loads(str(npz["meta/config"]))
        for k, w in run["params"].items():
            np.testing.assert_array_equal(npz[f"params/{k}"], w)
    assert config["kind"] == "decoder" and {k: config[k] for k in T.INDUCTION_SIZES} == T.INDUCTION_SIZES
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert len(metrics["loss"]) == 3 and 0 <= metrics["heldout_accuracy"] <= 1 and metrics["seed"] == 1
    params, cfg, cfg_dict = T.load_decoder(tmp_path / "run")
    assert cfg == T.induction_config() and cfg_dict["task"] == "induction"
    assert all(np.array_equal(params[k], run["params"][k]) for k in params)


def test_load_decoder_refuses_what_is_not_a_decoder(tmp_path):
    params = T.init_decoder(T.induction_config(), 0)
    T.save_checkpoint(tmp_path / "s2s", params, {"kind": "seq2seq"})
    with pytest.raises(ValueError, match="not a decoder checkpoint.*'seq2seq'"):
        T.load_decoder(tmp_path / "s2s")
    T.save_checkpoint(tmp_path / "short", params, {"kind": "decoder", "v": 32, "d": 64})
    with pytest.raises(ValueError, match="the config lacks 'h'"):
        T.load_decoder(tmp_path / "short")
    bigger = {**T.INDUCTION_SIZES, "d": 128, "kind": "decoder"}
    T.save_checkpoint(tmp_path / "shapes", params, bigger)
    with pytest.raises(ValueError, match=r"parameter 'W_E' has shape \(32, 64\), expected \(32, 128\)"):
        T.load_decoder(tmp_path / "shapes")
    T.save_checkpoint(tmp_path / "odd", params, {**T.INDUCTION_SIZES, "kind": "decoder", "h": 3, "h_kv": 3})
    with pytest.raises(ValueError, match="bad config: d=64 must be divisible"):
        T.load_decoder(tmp_path / "odd")
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        T.load_decoder(tmp_path / "nowhere")


@pytest.mark.parametrize("kw, match", [
    (dict(steps=0), "steps must be an integer ≥ 1, got steps=0"),
    (dict(steps=2.5), "steps must be an integer"),
    (dict(seed=-1), "seed must be an integer ≥ 0"),
    (dict(snapshot_every=0), "snapshot_every must be an integer ≥ 1"),
    (dict(packed="yes"), "packed must be"),
    (dict(on_step=3), "on_step must be a function"),
    (dict(sizes={"layers": 1}), "sizes: 'layers' is not a DecoderConfig field"),
    (dict(sizes={"dropout": 0.1}), "sizes: 'dropout' is not a DecoderConfig field"),
    (dict(sizes={"v": 40}), "the task needs v = 32"),
    (dict(sizes=[("L", 1)]), "sizes must be a dict"),
    (dict(lr_max=0.0), "lr_max must be a finite positive number"),
    (dict(lr_max=float("nan")), "lr_max must be a finite positive number"),
])
def test_bad_arguments_are_refused_in_one_line(kw, match):
    with pytest.raises((TypeError, ValueError), match=match) as e:
        T.train_induction(progress=False, **kw)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("sizes, weights", [({"L": 10**6}, "41,088,002,112"), ({"d_ff": 10**9}, "384,000,035,136"),
                                            ({"n_max": 10**12}, "84,288")])
def test_sizes_larger_than_the_memory_are_refused_before_any_weight(sizes, weights, monkeypatch):
    # {"L": 10**6} allocated for minutes; {"d_ff": 10**9} failed inside NumPy
    from transformer.core import shared_checks
    monkeypatch.setattr(shared_checks, "available_bytes", lambda: 16 * 10**9)  # as a 16 GB machine
    with pytest.raises(ValueError, match=f"a decoder of {weights} weights .* with its gradients and AdamW state "
                                         r"would take .* GB, more than the 16.0 GB of memory available"):
        T.train_induction(steps=1, sizes=sizes, progress=False)


def test_out_that_is_a_file_is_refused_before_training(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ValueError, match="exists and is not a folder"):
        T.train_induction(out=f, progress=False)
    with pytest.raises(ValueError, match="is a folder: cannot write the metrics.json"):
        (tmp_path / "d" / "metrics.json").mkdir(parents=True)
        T.train_induction(out=tmp_path / "d", progress=False)


def test_induction_rows_refuses_odd_documents():
    with pytest.raises(ValueError, match=r"docs\[1\] has 5 tokens"):
        T.induction_rows([[1, 2, 1, 2], [1, 2, 3, 1, 2]], packed=True)
    with pytest.raises(ValueError, match="non-empty list"):
        T.induction_rows([], packed=False)


def test_a_changed_run_uses_its_sizes_and_learning_rate():
    one = T.train_induction(steps=3, seed=0, sizes={"L": 1, "h": 4, "h_kv": 4}, lr_max=1e-3, progress=False,
                            snapshot_every=3)
    assert (one["cfg"].L, one["cfg"].h, one["cfg"].d_h) == (1, 4, 16)
    assert sorted(one["params"]) == sorted(one["cfg"].parameter_shapes())
    assert one["snapshots"]["maps"].shape[1:3] == (1, 4)  # [k, L, h, n, n]
    assert np.allclose(one["history"]["lr"], [T.lr_at(s, lr_max=1e-3, warmup=3, total=3) for s in range(3)])
