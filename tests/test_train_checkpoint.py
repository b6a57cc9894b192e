"""Checkpoints: a round trip keeps every bit, and each broken or hostile file is refused in one
line naming the file and the problem, most of them before any array data is read."""
import io
import json
import zipfile

import numpy as np
import pytest

import transformer as T
from transformer.train import checkpoint as ckpt

CONFIG = {"L": 2, "d": 8, "v": 16, "name": "tiny"}
SHAPES = {"E": (16, 8), "W_q": (8, 8), "ln_g": (8,)}


def params(dtype=np.float32):
    rng = np.random.default_rng(0)
    return {k: rng.standard_normal(s).astype(dtype) for k, s in SHAPES.items()}


def raw_npz(path, arrays):
    """An .npz written directly with np.savez: a file save_checkpoint would never write."""
    with open(path, "wb") as f:
        np.savez(f, **arrays)
    return path


def good_arrays(**over):
    arrays = {f"params/{k}": v for k, v in params().items()}
    arrays.update({"meta/config": np.array(json.dumps(CONFIG)), "meta/extra": np.array("{}"),
                   "meta/format": np.array(1, dtype=np.int64)})
    arrays.update(over)
    return {k: v for k, v in arrays.items() if v is not None}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_round_trip_is_bit_exact(tmp_path, dtype):
    p = params(dtype)
    path = T.save_checkpoint(tmp_path / "run", p, CONFIG, extra={"step": 300, "seed": 7})
    assert path == tmp_path / "run" / "checkpoint.npz"
    for where in (tmp_path / "run", path, str(path)):
        loaded, config = T.load_checkpoint(where, expected_shapes=SHAPES)
        assert config == CONFIG and loaded.keys() == p.keys()
        for k in p:
            assert loaded[k].dtype == dtype and loaded[k].tobytes() == p[k].tobytes()
    assert T.checkpoint_extra(tmp_path / "run") == {"step": 300, "seed": 7}
    assert np.load(path, allow_pickle=False)["meta/format"] == 1  # an ordinary npz, no pickle needed


def test_numpy_numbers_in_the_config_are_saved_as_json_numbers(tmp_path):
    T.save_checkpoint(tmp_path, params(), {"d": np.int64(8), "eps": np.float32(0.5), "dims": np.array([1, 2])},
                      extra={"step": np.int32(4)})
    assert T.load_checkpoint(tmp_path)[1] == {"d": 8, "eps": 0.5, "dims": [1, 2]}
    assert T.checkpoint_extra(tmp_path) == {"step": 4}


def test_a_member_twice_is_refused(tmp_path):
    path = T.save_checkpoint(tmp_path, params(), CONFIG)
    with zipfile.ZipFile(path, "a") as z, pytest.warns(UserWarning, match="Duplicate name"):
        z.writestr("params/E.npy", npy_member((16, 8), b"\0" * 512))
    with pytest.raises(ValueError, match=r"member 'params/E.npy' appears more than once"):
        T.load_checkpoint(path)


def test_expected_shapes_from_the_config(tmp_path):
    T.save_checkpoint(tmp_path, params(), CONFIG)
    shapes_of = lambda c: {"E": (c["v"], c["d"]), "W_q": (c["d"], c["d"]), "ln_g": (c["d"],)}
    T.load_checkpoint(tmp_path, expected_shapes=shapes_of)
    wrong = lambda c: {**shapes_of(c), "W_q": (c["d"], 2 * c["d"])}
    with pytest.raises(ValueError, match=r"checkpoint.npz: parameter 'W_q' has shape \(8, 8\), expected \(8, 16\)"):
        T.load_checkpoint(tmp_path, expected_shapes=wrong)


def test_overwrites_a_checkpoint_but_nothing_else(tmp_path):
    T.save_checkpoint(tmp_path, params(), CONFIG)
    q = {k: v + 1 for k, v in params().items()}
    T.save_checkpoint(tmp_path, q, {**CONFIG, "L": 3})
    loaded, config = T.load_checkpoint(tmp_path)
    assert config["L"] == 3 and (loaded["E"] == q["E"]).all()
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.npz"]  # no temporary file left
    other = tmp_path / "other"
    other.mkdir()
    (other / "checkpoint.npz").write_text("my notes")
    with pytest.raises(ValueError, match=r"checkpoint.npz exists and is not a checkpoint: refusing to overwrite"):
        T.save_checkpoint(other, params(), CONFIG)
    assert (other / "checkpoint.npz").read_text() == "my notes"
    raw_npz(other / "checkpoint.npz", {"x": np.ones(2)})  # a zip, but not ours
    with pytest.raises(ValueError, match=r"not a checkpoint: refusing"):
        T.save_checkpoint(other, params(), CONFIG)
    (other / "checkpoint.npz").unlink()
    (other / "checkpoint.npz").symlink_to(tmp_path / "checkpoint.npz")  # a link to a real checkpoint
    with pytest.raises(ValueError, match=r"not a checkpoint: refusing"):
        T.save_checkpoint(other, params(), CONFIG)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match=r"exists and is not a folder"):
        T.save_checkpoint(tmp_path / "file", params(), CONFIG)


def test_save_refuses_what_could_not_be_loaded(tmp_path):
    bad = {**params(), "W_q": np.full((8, 8), np.nan, np.float32)}
    with pytest.raises(ValueError, match=r"params\['W_q'\] holds NaN or inf: refusing to save"):
        T.save_checkpoint(tmp_path, bad, CONFIG)
    with pytest.raises(ValueError, match=r"config cannot be saved as JSON: object is not JSON serializable"):
        T.save_checkpoint(tmp_path, params(), {"f": object()})
    with pytest.raises(ValueError, match=r"extra cannot be saved as JSON: Out of range float values"):
        T.save_checkpoint(tmp_path, params(), CONFIG, extra={"loss": float("inf")})
    with pytest.raises(TypeError, match=r"config must be a dict"):
        T.save_checkpoint(tmp_path, params(), [1, 2])
    assert not (tmp_path / "checkpoint.npz").exists()


@pytest.mark.parametrize("config, where", [
    ({"sizes": {3: 4}}, r"config\['sizes'\]\[3\]"),
    ({"runs": [{"a": 1}, {(1, 2): 0}]}, r"config\['runs'\]\[1\]\[\(1, 2\)\]"),
    ({1.5: "x"}, r"config\[1.5\]"),
])
def test_save_refuses_keys_that_would_load_back_changed(tmp_path, config, where):
    assert json.loads(json.dumps({3: 4})) == {"3": 4}  # the reference: JSON turns every key into a string
    with pytest.raises(ValueError, match=where + r": JSON keys are strings, so this key would load back as a string"):
        T.save_checkpoint(tmp_path, params(), config)
    with pytest.raises(ValueError, match=where.replace("config", "metrics", 1)):
        T.write_metrics(tmp_path, config)
    assert not (tmp_path / "checkpoint.npz").exists() and not (tmp_path / "metrics.json").exists()


# --- hostile or broken files ----------------------------------------------------------------
def test_directory_without_checkpoint(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no checkpoint: no checkpoint.npz in .*test_directory_without"):
        T.load_checkpoint(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"nothing.npz: no such file"):
        T.load_checkpoint(tmp_path / "nothing.npz")


def test_truncated_file(tmp_path):
    path = T.save_checkpoint(tmp_path, params(), CONFIG)
    data = path.read_bytes()
    for keep in (len(data) // 2, len(data) - 30, 10):
        path.write_bytes(data[:keep])
        with pytest.raises(ValueError, match=r"checkpoint.npz: not a checkpoint: truncated, or not an .npz"):
            T.load_checkpoint(path)


def test_a_zip_that_is_not_an_npz(tmp_path):
    path = tmp_path / "checkpoint.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("readme.txt", "hello")
    with pytest.raises(ValueError, match=r"checkpoint.npz: not a checkpoint: member 'readme.txt' is not a .npy"):
        T.load_checkpoint(path)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("params/E.npy", b"not an npy header at all")
    with pytest.raises(ValueError, match=r"member 'params/E.npy' has no valid .npy header"):
        T.load_checkpoint(path)
    path.write_bytes(b"PK but nothing else" * 10)
    with pytest.raises(ValueError, match=r"not a checkpoint: truncated, or not an .npz \(zip\) archive"):
        T.load_checkpoint(path)


@pytest.mark.parametrize("missing", ["meta/config", "meta/format", "meta/extra"])
def test_missing_meta_key(tmp_path, missing):
    path = raw_npz(tmp_path / "checkpoint.npz", good_arrays(**{missing: None}))
    with pytest.raises(ValueError, match=rf"checkpoint.npz: not a checkpoint of this format: {missing} is missing"):
        T.load_checkpoint(path)


def test_missing_and_unexpected_parameters(tmp_path):
    path = raw_npz(tmp_path / "checkpoint.npz", good_arrays(**{"params/W_q": None}))
    with pytest.raises(ValueError, match=r"checkpoint.npz: parameter 'W_q' is missing"):
        T.load_checkpoint(path, expected_shapes=SHAPES)
    path = raw_npz(tmp_path / "checkpoint.npz", good_arrays(**{"params/W_k": np.ones((8, 8), np.float32)}))
    with pytest.raises(ValueError, match=r"unexpected parameter 'W_k': the config has no such weight"):
        T.load_checkpoint(path, expected_shapes=SHAPES)
    path = raw_npz(tmp_path / "checkpoint.npz", good_arrays(stray=np.ones(2)))
    with pytest.raises(ValueError, match=r"unexpected member 'stray'"):
        T.load_checkpoint(path)


def test_wrong_shape(tmp_path):
    path = raw_npz(tmp_path / "checkpoint.npz", good_arrays(**{"params/ln_g": np.ones(9, np.float32)}))
    with pytest.raises(ValueError, match=r"checkpoint.npz: parameter 'ln_g' has shape \(9,\), expected \(8,\)"):
        T.load_checkpoint(path, expected_shapes=SHAPES)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_weights(tmp_path, bad):
    E = params()["E"]
    E[3, 4] = bad
    path = raw_npz(tmp_path / "checkpoint.npz", good_arrays(**{"params/E": E}))
    with pytest.raises(ValueError, match=r"checkpoint.npz: parameter 'E' holds NaN or inf \(1 values\)"):
        T.load_checkpoint(path)


def test_integer_weights(tmp_path):
    path = raw_npz(tmp_path / "checkpoint.npz", good_arrays(**{"params/E": np.ones((16, 8), np.int32)}))
    with pytest.raises(ValueError, match=r"parameter 'E' must be floating point, got dtype int32"):
        T.load_checkpoint(path)


def test_a_pickle_inside_is_refused_before_it_is_read(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.npz"
    raw_npz(path, good_arrays(**{"params/E": np.array([{"evil": 1}], dtype=object)}))
    monkeypatch.setattr(ckpt.np, "load", lambda *a, **k: pytest.fail("np.load reached before the headers"))
    with pytest.raises(ValueError, match=r"member 'params/E.npy' holds Python objects \(dtype object\): a pickle"):
        T.load_checkpoint(path)


def npy_member(shape, data: bytes, dtype="<f4"):
    """A .npy whose header declares `shape` and whose body is `data`, whatever it holds."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": dtype, "fortran_order": False, "shape": shape})
    return buf.getvalue() + data


def test_a_header_declaring_more_than_the_member_holds(tmp_path, monkeypatch):
    """A header claiming a 10⁶ × 10⁶ array (4 TB) over 16 real bytes: refused from the header,
    nothing allocated, np.load never called."""
    path = T.save_checkpoint(tmp_path, params(), CONFIG)
    with zipfile.ZipFile(path, "a") as z:
        z.writestr("params/huge.npy", npy_member((10 ** 6, 10 ** 6), b"\0" * 16))
    monkeypatch.setattr(ckpt.np, "load", lambda *a, **k: pytest.fail("np.load reached before the headers"))
    with pytest.raises(ValueError, match=r"member 'params/huge.npy' declares shape \(1000000, 1000000\) "
                                         r"\(4000000000000 bytes of float32\) but holds 16 bytes"):
        T.load_checkpoint(path)


def test_a_member_shorter_than_its_header_says(tmp_path):
    path = T.save_checkpoint(tmp_path, params(), CONFIG)
    with zipfile.ZipFile(path, "a") as z:
        z.writestr("params/short.npy", npy_member((4, 4), b"\0" * 60))  # 64 declared
    with pytest.raises(ValueError, match=r"declares shape \(4, 4\) \(64 bytes of float32\) but holds 60 bytes"):
        T.load_checkpoint(path)


def test_size_caps(tmp_path):
    path = T.save_checkpoint(tmp_path, params(), CONFIG)
    with pytest.raises(ValueError, match=rf"checkpoint.npz: {path.stat().st_size} bytes is over the cap max_bytes=100"):
        T.load_checkpoint(path, max_bytes=100)
    bomb = tmp_path / "bomb" / "checkpoint.npz"  # compresses 64 MiB of zeros to a few KiB
    bomb.parent.mkdir()
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("params/E.npy", npy_member((16 << 20,), b"\0" * (64 << 20)))
    assert bomb.stat().st_size < 1 << 20
    with pytest.raises(ValueError, match=r"members unpack to \d+ bytes, over the cap max_bytes=1048576"):
        T.load_checkpoint(bomb, max_bytes=1 << 20)


def test_unknown_format_version_and_bad_config(tmp_path):
    path = raw_npz(tmp_path / "checkpoint.npz", good_arrays(**{"meta/format": np.array(2)}))
    with pytest.raises(ValueError, match=r"unknown checkpoint format .*2.*: this version reads format 1"):
        T.load_checkpoint(path)
    raw_npz(path, good_arrays(**{"meta/config": np.array("{not json")}))
    with pytest.raises(ValueError, match=r"checkpoint.npz: meta/config is not valid JSON"):
        T.load_checkpoint(path)
    raw_npz(path, good_arrays(**{"meta/config": np.array("[1, 2]")}))
    with pytest.raises(ValueError, match=r"meta/config must be a JSON object, got list"):
        T.load_checkpoint(path)


def test_check_params_for_model_code():
    T.check_params(params(), SHAPES)
    with pytest.raises(ValueError, match=r"^weights: parameter 'E' has shape \(16, 8\), expected \(8, 16\)$"):
        T.check_params(params(), {**SHAPES, "E": (8, 16)}, source="weights")


# --- metrics --------------------------------------------------------------------------------
def test_metrics_round_trip(tmp_path):
    metrics = {"loss": [np.float64(2.5), 1.25], "lr": np.array([1e-3, 5e-4]), "tokens_per_s": 1234.5,
               "heldout_accuracy": np.float32(0.75), "seed": np.int64(3), "steps": 2, "config": CONFIG}
    path = T.write_metrics(tmp_path / "run", metrics)
    assert path.name == "metrics.json"
    back = T.read_metrics(tmp_path / "run")
    assert back == {"loss": [2.5, 1.25], "lr": [1e-3, 5e-4], "tokens_per_s": 1234.5, "heldout_accuracy": 0.75,
                    "seed": 3, "steps": 2, "config": CONFIG}
    assert json.loads(path.read_text()) == back  # plain JSON any tool reads


def test_metrics_refusals(tmp_path):
    with pytest.raises(ValueError, match=r"metrics cannot be saved as JSON: Out of range float values"):
        T.write_metrics(tmp_path, {"loss": [1.0, float("nan")]})
    (tmp_path / "metrics.json").write_text("{oops")
    with pytest.raises(ValueError, match=r"metrics.json: not valid JSON"):
        T.read_metrics(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"no metrics: .*elsewhere.json: no such file"):
        T.read_metrics(tmp_path / "elsewhere.json")
    with pytest.raises(FileNotFoundError, match="no metrics: /dev/zero: not a regular file"):
        T.read_metrics("/dev/zero")  # it exists: "no such file" was wrong
    with pytest.raises(FileNotFoundError, match="no checkpoint: /dev/zero: not a regular file"):
        T.load_checkpoint("/dev/zero")
    for constant in ("NaN", "Infinity", "-Infinity"):  # Python's json reads them; strict JSON, and write_metrics, not
        (tmp_path / "metrics.json").write_text(f'{{"loss": [1.0, {constant}]}}')
        with pytest.raises(ValueError, match=f"metrics.json: holds {constant}, which is not a JSON number"):
            T.read_metrics(tmp_path)
