"""What `train` writes and what `generate --checkpoint` reads, against careless users and hostile
files: every refusal is one line naming the file, within a fixed memory bound, before any work.

The references: zip archives written by hand from the format's layout (APPNOTE: local headers,
data, central directory, end record), so that sizes can lie; NumPy's own .npy header writer;
the operating system for what a symbolic link points at and what the umask gives; the uncached,
readable forward pass for which logits are finite; torch and the readable FlashAttention for
what attention over no query returns; threadpoolctl for BLAS's thread count."""
import io
import json
import os
import signal
import struct
import subprocess
import sys
import threading
import time
import tracemalloc
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, assume, given, settings, strategies as st

import transformer as T
from transformer.cli import memory as cli_memory
from transformer.cli.main import main
from transformer.files import write_atomic
from transformer.flash import tiled_fast
from transformer.train import shared_checks as train_checks
from transformer.tasks.translate import seq2seq_checkpoint_config

ROOT = Path(__file__).resolve().parents[1]
MEMORY_BOUND = 32 << 20  # bytes: reading or refusing any of these small files may take this much at its peak
SETTINGS = settings(max_examples=50, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
TINY = dict(v=12, d=8, h=2, h_kv=1, L=2, d_ff=8, n_max=16)  # a 2-layer decoder: 20 weights, 3 kB


def decoder_config(**over):
    return {"kind": "decoder", "task": "induction", **TINY, "first_token": 1, **over}


def tiny_params():
    return T.init_decoder(T.DecoderConfig(**TINY), 0)


def one_line(e, path):
    """The refusal is one line and names the file (or its folder)."""
    msg = str(e)
    assert "\n" not in msg and str(path) in msg and "Traceback" not in msg, msg


def peak_of(f):  # -> (result or the exception, peak bytes traced, seconds)
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        r = f()
    except (ValueError, FileNotFoundError, TypeError) as e:
        r = e
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return r, peak, time.perf_counter() - t0


# --- zip archives written by hand --------------------------------------------------------------
def npy(shape, descr="<f4", body=None):
    """A .npy member: NumPy's header for (descr, shape), then body (default: the zeros it declares)."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": tuple(shape)})
    if body is None:
        body = bytes(int(np.prod(shape)) * np.dtype(descr).itemsize)
    return buf.getvalue() + body


def deflate(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -15)  # raw deflate, as zip stores it
    return c.compress(data) + c.flush()


def raw_zip(entries) -> bytes:
    """entries: (name, data, deflated, declared size or None): a zip whose central directory says
    what the test wants, true or not (APPNOTE 4.3.7, 4.3.12, 4.3.16)."""
    out, central = bytearray(), bytearray()
    for name, data, deflated, declared in entries:
        n, packed = name.encode(), deflate(data) if deflated else data
        size, crc, method = len(data) if declared is None else declared, zlib.crc32(data), 8 if deflated else 0
        central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, method, 0, 0, crc, len(packed), size,
                               len(n), 0, 0, 0, 0, 0, len(out)) + n
        out += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, method, 0, 0, crc, len(packed), size, len(n), 0) + n
        out += packed
    return bytes(out + central + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries), len(entries),
                                             len(central), len(out), 0))


def meta_members(config, extra="{}"):
    text = config if isinstance(config, str) else json.dumps(config)
    members = []
    for name, a in (("meta/config", np.array(text)), ("meta/extra", np.array(extra)),
                    ("meta/format", np.array(1, np.int64))):
        buf = io.BytesIO()
        np.save(buf, a)
        members.append((name + ".npy", buf.getvalue()))
    return members


def good_members(config=None):
    members = meta_members(decoder_config() if config is None else config)
    members += [(f"params/{k}.npy", npy(w.shape, "<f4", np.ascontiguousarray(w).tobytes()))
                for k, w in tiny_params().items()]
    return members


def write_archive(folder: Path, entries) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "checkpoint.npz").write_bytes(raw_zip(entries))
    return folder


# --- a checkpoint that unpacks to gigabytes -----------------------------------------------------
def test_a_zip_bomb_is_refused_from_its_sizes_in_a_blink(tmp_path, capsys):
    """64 MiB of zeros deflated to 64 kB, declared as W_E: refused from the central directory,
    before one byte is unpacked (it used to be read whole, then found misshapen)."""
    n = 16 << 20  # float32 zeros: 64 MiB
    bomb = tmp_path / "bomb"
    bomb.mkdir()
    with zipfile.ZipFile(bomb / "checkpoint.npz", "w") as z:  # zipfile writes the true CRC and sizes
        for name, d in meta_members(decoder_config()):
            z.writestr(name, d)
        info = zipfile.ZipInfo("params/W_E.npy")
        info.compress_type = zipfile.ZIP_DEFLATED
        with z.open(info, "w", force_zip64=True) as f:
            f.write(npy((n,))[:-4 * n])
            for _ in range(4):
                f.write(bytes(n))
    assert (bomb / "checkpoint.npz").stat().st_size < 1 << 20
    r, peak, seconds = peak_of(lambda: T.load_decoder(bomb))
    assert isinstance(r, ValueError) and "zip bomb" in str(r) and peak < 4 << 20 and seconds < 2, (r, peak, seconds)
    one_line(r, bomb)
    assert main(["generate", "--checkpoint", str(bomb), "3 4"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "zip bomb" in err, err


@SETTINGS
@given(data=st.data())
def test_hostile_archives_are_loaded_right_or_refused_in_one_line(tmp_path_factory, data):
    """Archives of many shapes: headers that lie about shape or dtype, bodies cut or padded, sizes
    the central directory misstates, deflated members of zeros, names twice, members missing or
    unknown. Each loads as the config says or is refused in one line naming the file, within
    MEMORY_BOUND, in well under a second."""
    members = [[name, body, False, None] for name, body in good_members()]
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        i = data.draw(st.integers(0, len(members) - 1), label="member")
        kind = data.draw(st.sampled_from(["shape", "dtype", "body", "declared", "deflate", "twice", "drop",
                                          "unknown", "zeros"]), label="kind")
        name, body = members[i][0], members[i][1]
        if kind == "shape":
            shape = data.draw(st.lists(st.integers(0, 10 ** 12), max_size=3), label="shape")
            members[i][1] = npy(shape, "<f4", b"") + body[128:]
        elif kind == "dtype":
            descr = data.draw(st.sampled_from(["<f8", "<f2", "<i8", "|b1", "<U3", "|O", "<c8", "|V4"]), label="dtype")
            members[i][1] = body[:10] + body[10:128].replace(b"'<f4'", repr(descr).encode().ljust(5)[:5]) + body[128:]
            if descr == "|O":
                members[i][1] = npy((1,), "|O", b"\x80\x04N.")
        elif kind == "body":
            delta = data.draw(st.integers(-len(body), 64), label="delta")
            members[i][1] = body[:len(body) + delta] if delta < 0 else body + bytes(delta)
        elif kind == "declared":
            members[i][3] = data.draw(st.integers(0, 2 ** 32 - 1), label="declared size")
        elif kind == "deflate":
            members[i][2] = True
        elif kind == "twice":
            members.append(list(members[i]))
        elif kind == "drop" and len(members) > 1:
            members.pop(i)
        elif kind == "unknown":
            members.append([data.draw(st.sampled_from(["x.npy", "params/x.npy", "meta/y.npy", "a/../b.npy", "z"])),
                            npy((2,)), False, None])
        elif kind == "zeros":  # a member of zeros, deflated, up to 8 MiB declared
            n = data.draw(st.integers(1, 2 << 20), label="floats")
            members[i] = [name, npy((n,)), True, None]
    folder = write_archive(tmp_path_factory.mktemp("hostile"), [tuple(m) for m in members])
    r, peak, seconds = peak_of(lambda: T.load_decoder(folder))
    assert peak < MEMORY_BOUND and seconds < 5, (peak, seconds)
    if isinstance(r, Exception):
        assert isinstance(r, ValueError), repr(r)
        one_line(r, folder)
    else:  # loaded: exactly the config's weights, each finite
        params, cfg, _ = r
        assert {k: p.shape for k, p in params.items()} == cfg.parameter_shapes()
        assert all(np.isfinite(p).all() for p in params.values())


def test_80000_empty_members_are_refused_at_once(tmp_path):
    """Their names used to be compared pairwise (75 s); now counted, and checked once each."""
    folder = tmp_path / "many"
    folder.mkdir()
    with zipfile.ZipFile(folder / "checkpoint.npz", "w") as z:
        for i in range(80_000):
            z.writestr(f"m{i}.npy", b"")
    r, peak, seconds = peak_of(lambda: T.load_decoder(folder))
    assert isinstance(r, ValueError) and "80000 members, over the cap" in str(r), r
    assert seconds < 1 and peak < 1 << 20, (seconds, peak)  # counted from the end record, before zipfile lists them


@pytest.mark.parametrize("where", [0, 8_000, 15_999])
def test_a_name_twice_among_16000_members_is_found_in_linear_time(tmp_path, where):
    members = [(f"params/w{i}.npy", npy((1,)), False, None) for i in range(16_000)]
    members.insert(where + 1, members[where])
    folder = write_archive(tmp_path / "twice", members)
    r, _, seconds = peak_of(lambda: T.load_checkpoint(folder))
    assert isinstance(r, ValueError) and f"member 'params/w{where}.npy' appears more than once" in str(r)
    assert seconds < 3, seconds


def test_members_sharing_their_packed_bytes_are_refused(tmp_path):
    """Three central-directory entries pointing at one deflated run (the overlapping-files bomb):
    their packed sizes add up to more than the file."""
    body = npy((1 << 18,))  # 1 MiB of zeros, deflated to about 1 kB
    one = raw_zip([("params/W_E.npy", body, True, None)])
    cd_len, cd_at = struct.unpack_from("<II", one, len(one) - 22 + 12)  # the directory's size and offset
    record = one[cd_at:cd_at + cd_len]
    records = b"".join(record.replace(b"W_E", name) for name in (b"W_E", b"W_F", b"W_G"))
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 3, 3, len(records), cd_at, 0)
    folder = tmp_path / "overlap"
    folder.mkdir()
    (folder / "checkpoint.npz").write_bytes(one[:cd_at] + records + end)
    with pytest.raises(ValueError, match=r"overlapping members \(a zip bomb\)"):
        T.load_checkpoint(folder)


def test_contents_and_loaders_read_no_weight_before_its_shape_agrees(tmp_path, monkeypatch):
    from transformer.train import checkpoint as ckpt
    T.save_checkpoint(tmp_path, tiny_params(), decoder_config(L=1))  # 2 layers of weights, a config of 1
    read = []
    real = ckpt.read_member
    monkeypatch.setattr(ckpt, "read_member", lambda z, info: read.append(info.filename) or real(z, info))
    config, shapes = T.checkpoint_contents(tmp_path)
    assert config == decoder_config(L=1) and shapes == T.DecoderConfig(**TINY).parameter_shapes()
    with pytest.raises(ValueError, match=r"unexpected parameter 'layers.1.norm1'"):
        T.load_decoder(tmp_path)
    assert all(name.startswith("meta/") for name in read), read


# --- configs that ask for more than the file holds ---------------------------------------------
SIZE_FIELDS = ["v", "d", "h", "h_kv", "L", "d_ff", "n_max"]
ANY_JSON = st.one_of(st.integers(-2, 10 ** 13), st.sampled_from([2 ** 40, 10 ** 12, 0, True]), st.floats(),
                     st.text(max_size=5), st.none(), st.lists(st.integers(), max_size=2))


@SETTINGS
@given(over=st.dictionaries(st.sampled_from(SIZE_FIELDS), ANY_JSON, min_size=1, max_size=3))
def test_random_config_fields_never_allocate_beyond_the_file(tmp_path_factory, monkeypatch, capsys, over):
    """L = 10¹² beside 2 layers of weights used to list per-layer shapes until memory ran out, and
    n_max = 2⁴⁰ to end `generate` "out of memory". Each config now loads (only when the weights are
    its shapes) or is refused in one line naming the file; generation checks its memory first."""
    folder = write_archive(tmp_path_factory.mktemp("config"),
                           [(n, b, False, None) for n, b in good_members(decoder_config(**over))])
    r, peak, _ = peak_of(lambda: T.load_decoder(folder))
    assert peak < MEMORY_BOUND, peak
    if isinstance(r, Exception):
        one_line(r, folder)
        return
    _, cfg, _ = r  # h and h_kv may differ from TINY where they give the same shapes: the file cannot tell
    assert cfg.parameter_shapes() == T.DecoderConfig(**TINY).parameter_shapes()
    limit = 1 << 16  # "available" memory: a generation of over ~1,000 positions of this model is refused
    monkeypatch.setattr(cli_memory, "available_bytes", lambda: limit)
    rc = main(["generate", "--checkpoint", str(folder), "3 4"])
    out, err = capsys.readouterr()
    if cfg.n_max < 2:  # the prompt does not fit
        assert rc == 2 and "longer than the model's n_max" in err, err
    elif rc == 2:  # refused before any step: the KV cache of that many positions alone is over the limit
        assert "needs about" in err and err.count("\n") == 1, err
        assert 2 * cfg.L * cfg.h_kv * cfg.n_max * cfg.d_h * 4 > limit
    else:
        assert rc == 0 and len(out.split("|")[1].split()) == cfg.n_max - 2, out


S2S_FIELDS = ["v", "d", "h", "d_ff", "L_enc", "L_dec", "n_max"]


@SETTINGS
@given(over=st.dictionaries(st.sampled_from(S2S_FIELDS), ANY_JSON, min_size=1, max_size=3))
def test_random_seq2seq_config_fields_never_allocate_beyond_the_file(tmp_path_factory, monkeypatch, capsys, over):
    """The same for the encoder–decoder: L_enc or L_dec = 10¹², n_max = 2⁴⁰, sizes of any type."""
    vocab = T.translation_vocab()
    cfg = T.Seq2SeqConfig(v=vocab.v, d=8, h=2, d_ff=8, L_enc=1, L_dec=1, n_max=16)
    members = meta_members({**seq2seq_checkpoint_config(cfg, vocab), **over})  # written by hand: save_checkpoint
    members += [(f"params/{k}.npy", npy(w.shape, "<f4", np.ascontiguousarray(w).tobytes()))  # refuses inf in a config
                for k, w in T.init_seq2seq(cfg, 0).items()]
    folder = write_archive(tmp_path_factory.mktemp("s2s"), [(n, b, False, None) for n, b in members])
    r, peak, _ = peak_of(lambda: T.load_seq2seq(folder))
    assert peak < MEMORY_BOUND, peak
    if isinstance(r, Exception):
        one_line(r, folder)
        return
    assert r[1].parameter_shapes() == cfg.parameter_shapes()
    limit = 1 << 16
    monkeypatch.setattr(cli_memory, "available_bytes", lambda: limit)
    rc = main(["generate", "--checkpoint", str(folder), "ka lu"])
    out, err = capsys.readouterr()
    if rc == 2:
        assert err.count("\n") == 1 and ("needs about" in err or "too long for this model" in err), err
    else:
        assert rc == 0 and len(out.split()) <= r[1].n_max, out


def test_n_max_2_40_is_refused_before_generation_in_both_models(tmp_path, capsys):
    folder = write_archive(tmp_path / "dec", [(n, b, False, None) for n, b in good_members(decoder_config(n_max=2 ** 40))])
    assert main(["generate", "--checkpoint", str(folder), "3 4"]) == 2
    err = capsys.readouterr().err
    assert "needs about" in err and "lower --max-new-tokens" in err and err.count("\n") == 1, err
    vocab = T.translation_vocab()
    cfg = T.Seq2SeqConfig(v=vocab.v, d=8, h=2, d_ff=8, L_enc=1, L_dec=1, n_max=16)
    T.save_checkpoint(tmp_path / "s2s", T.init_seq2seq(cfg, 0), {**seq2seq_checkpoint_config(cfg, vocab),
                                                                 "n_max": 2 ** 40})
    assert main(["generate", "--checkpoint", str(tmp_path / "s2s"), "ka lu"]) == 2
    err = capsys.readouterr().err
    assert "needs about" in err and err.count("\n") == 1, err
    T.save_checkpoint(tmp_path / "layers", T.init_seq2seq(cfg, 0), {**seq2seq_checkpoint_config(cfg, vocab),
                                                                    "L_dec": 10 ** 12})
    r, peak, _ = peak_of(lambda: T.load_seq2seq(tmp_path / "layers"))
    assert isinstance(r, ValueError) and "names more layers than the file holds" in str(r) and peak < MEMORY_BOUND


# --- JSON nested deeper than Python recurses -----------------------------------------------------
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(depth=st.one_of(st.integers(1, 3000), st.just(100_000)), kind=st.sampled_from(["list", "object"]))
def test_deeply_nested_json_is_one_line_naming_the_file(tmp_path_factory, depth, kind):
    opening, closing = ("[", "]") if kind == "list" else ('{"a": ', "}")
    nested = opening * depth + "1" + closing * depth
    folder = tmp_path_factory.mktemp("deep")
    write_archive(folder, [(n, b, False, None) for n, b in good_members(
        json.dumps(decoder_config())[:-1] + ', "x": ' + nested + "}")])
    metrics = folder / "metrics.json"
    metrics.write_text('{"loss": ' + nested + "}")
    for read in (lambda: T.load_decoder(folder), lambda: T.read_metrics(folder)):
        r, _, _ = peak_of(read)
        if isinstance(r, Exception):
            assert isinstance(r, ValueError) and "recursion limit" in str(r), repr(r)
            one_line(r, folder)
        else:
            assert depth < 100_000


# --- the output folder ---------------------------------------------------------------------------
LAYOUTS = ["absent", "file", "checkpoint", "link", "dangling link", "folder"]


@SETTINGS
@given(ckpt=st.sampled_from(LAYOUTS), metrics=st.sampled_from(LAYOUTS), umask=st.sampled_from([0o022, 0o077, 0o027]))
def test_output_folder_layouts(tmp_path_factory, ckpt, metrics, umask):
    """Each of checkpoint.npz and metrics.json absent, a file, a checkpoint, a symbolic link to a
    file elsewhere, a dangling link, a folder: the folder is refused before any training exactly
    when a name is a link or a folder or checkpoint.npz a foreign file; otherwise both files are
    written whole, with the umask's mode. The file a link points at never changes."""
    base = tmp_path_factory.mktemp("out")
    out, elsewhere = base / "run", base / "precious.txt"
    out.mkdir()
    elsewhere.write_bytes(b"precious")
    for name, layout in (("checkpoint.npz", ckpt), ("metrics.json", metrics)):
        p = out / name
        if layout == "file":
            p.write_bytes(b"not a checkpoint" if name == "checkpoint.npz" else b"{}")
        elif layout == "checkpoint":
            T.save_checkpoint(base / "old", {"W": np.ones(2, np.float32)}, {})
            os.replace(base / "old" / "checkpoint.npz", p)
        elif layout == "link":
            p.symlink_to(elsewhere)
        elif layout == "dangling link":
            p.symlink_to(base / "nowhere")
        elif layout == "folder":
            p.mkdir()
    refused = {ckpt, metrics} & {"link", "dangling link", "folder"} or ckpt == "file"
    old = os.umask(umask)
    try:
        train_checks.output_folder(out)
        assert not refused, (ckpt, metrics)
        T.save_checkpoint(out, {"W": np.ones(2, np.float32)}, {"kind": "x"})
        T.write_metrics(out, {"loss": [1.0]})
    except (ValueError, PermissionError) as e:
        assert refused, e
        one_line(e, out)
    finally:
        os.umask(old)
    assert elsewhere.read_bytes() == b"precious" and not (base / "nowhere").exists()
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]
    if not refused:
        assert T.read_metrics(out) == {"loss": [1.0]} and T.load_checkpoint(out)[1] == {"kind": "x"}
        for name in ("checkpoint.npz", "metrics.json"):
            assert (out / name).stat().st_mode & 0o777 == 0o666 & ~umask


@pytest.mark.parametrize("layout", ["link", "foreign npz", "proc"])
def test_a_bad_out_costs_no_training_time(tmp_path, capsys, monkeypatch, layout):
    from transformer.tasks import induction, translate
    for module in (induction, translate):
        monkeypatch.setattr(module, "train_loop", lambda *a, **k: pytest.fail("training started"))
    out = tmp_path / "run"
    out.mkdir()
    if layout == "link":
        (tmp_path / "elsewhere.json").write_text("keep")
        (out / "metrics.json").symlink_to(tmp_path / "elsewhere.json")
    elif layout == "foreign npz":
        np.savez(out / "checkpoint.npz", data=np.arange(3))
    else:
        out = Path("/proc/x")
    for task in ("induction", "translate"):
        assert main(["train", task, "--steps", "5", "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and str(out) in err, err
    if layout == "link":
        assert (tmp_path / "elsewhere.json").read_text() == "keep"


@settings(max_examples=25, deadline=None)
@given(n=st.integers(0, 5000), at=st.integers(0, 5000))
def test_an_interrupted_write_leaves_the_old_file_whole(tmp_path_factory, n, at):
    """Ctrl-C (or any error) after `at` of n bytes: the old file is untouched, no .tmp is left."""
    folder = tmp_path_factory.mktemp("atomic")
    target = folder / "metrics.json"
    target.write_bytes(b"old")

    def write(f):
        f.write(b"x" * min(at, n))
        if at < n:
            raise KeyboardInterrupt

    try:
        write_atomic(target, write)
        assert at >= n and target.read_bytes() == b"x" * n
    except KeyboardInterrupt:
        assert target.read_bytes() == b"old"
    assert sorted(p.name for p in folder.iterdir()) == ["metrics.json"]


DEFERRED = """
import os, signal, time
from transformer.files import interrupts_deferred
done = []
try:
    with interrupts_deferred():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the signal is handled here, between bytecodes: recorded, not raised
        done.append(1)
except KeyboardInterrupt:
    print(done == [1] and signal.getsignal(signal.SIGINT) is signal.default_int_handler)
"""


def with_default_ctrl_c():  # in a child before it runs: Ctrl-C as a fresh shell gives it, whatever the test process has
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def test_a_ctrl_c_inside_a_deferred_block_arrives_after_it():
    """In a process of its own, with Ctrl-C as a shell gives it: the test runner's workers (pytest-xdist)
    have threads of their own and, now and then, a SIGINT that is not Python's (seen twice on a loaded
    machine: the signal never arrived)."""
    res = subprocess.run([sys.executable, "-c", DEFERRED], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         preexec_fn=with_default_ctrl_c)
    assert res.returncode == 0 and res.stdout.strip() == "True", res.stdout + res.stderr


@settings(max_examples=2, deadline=None, phases=[Phase.generate], derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(delay=st.floats(0.0, 1.5))
def test_ctrl_c_during_train_is_one_line_exit_130_and_the_old_run_intact(tmp_path_factory, delay):
    out = tmp_path_factory.mktemp("ctrlc")
    T.save_checkpoint(out, {"W": np.ones(2, np.float32)}, {"kind": "earlier"})
    T.write_metrics(out, {"earlier": True})
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    env = {k: v for k, v in os.environ.items() if k != "TQDM_DISABLE"}
    proc = subprocess.Popen([sys.executable, "-m", "transformer", "train", "induction", "--steps", "100000",
                             "--out", str(out), "--force"],  # --force: the earlier model is of another kind
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=with_default_ctrl_c)
    err = bytearray()

    def read():  # stderr as it comes: the progress bar says when training has started
        for chunk in iter(lambda: proc.stderr.read1(4096), b""):
            err.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 240  # the start (imports, data) takes ~2 s idle, over 60 s on a loaded machine
        while b"induction" not in err and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert b"induction" in err, bytes(err)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(240)
        reader.join(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = [line for line in err.decode().split("\n") if line.strip()]
    assert rc == 130 and "Traceback" not in err.decode(), err.decode()[-2000:]
    assert lines[-1] == "error: interrupted (Ctrl-C)" and all("step" in line for line in lines[:-1]), lines
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # whole, and no .tmp beside them


# --- logits that overflow -------------------------------------------------------------------------
def overflowing(params, scale_norm, scale_embed):
    p = dict(params)
    p["norm"] = p["norm"] * np.float32(scale_norm)
    p["W_E"] = p["W_E"] * np.float32(scale_embed)
    return p


@settings(max_examples=25, deadline=None)
@given(e_norm=st.integers(0, 38), e_embed=st.integers(0, 30))
def test_greedy_generation_refuses_non_finite_logits_where_the_uncached_pass_has_them(e_norm, e_embed):
    """Finite weights scaled until their products overflow float32: the cached generation refuses at
    the step where the readable, uncached forward pass overflows (NumPy's overflow flag) or finds NaN or
    inf in its logits, and not before."""
    cfg = T.DecoderConfig(**TINY)
    params = overflowing(tiny_params(), 10.0 ** e_norm, 10.0 ** e_embed)
    prompt = np.array([[3, 4, 5]])
    try:
        ids = T.greedy_generate(params, cfg, prompt, 6)
        failed = None
    except ValueError as e:
        failed = int(str(e).split("generation step ")[1].split(":")[0])
        one_line(e, "generation step")
        ids = None
    if failed is None:  # each step fed: no overflow, logits allowing a token (or so near float32's end that a
        # sum in another order may stay below it)
        assert all(uncached_pass(params, ids[:, :i], cfg) in ("fine", "near") for i in range(3, ids.shape[1]))
    else:
        # the sequence up to the failing step, as the greedy steps before it chose it
        seq = T.greedy_generate(params, cfg, prompt, failed) if failed else prompt
        assert uncached_pass(params, seq, cfg) in ("overflow", "near")


def uncached_pass(params, seq, cfg) -> str:
    """'overflow' where the readable forward pass over the whole sequence overflows float32 somewhere or its last
    logits allow no token; 'near' where they come so near float32's end that a sum in another order may cross it;
    else 'fine'."""
    try:
        with np.errstate(over="raise", invalid="ignore"):
            logits, _ = T.decoder_forward(params, seq, cfg)  # [1, n, v]
    except FloatingPointError:
        return "overflow"
    return "overflow" if bad(logits[0, -1]) else "near" if near_overflow(logits[0, -1]) else "fine"


def bad(row):  # [v]: no token is possible: a NaN, a +inf, or every logit -inf
    return bool(np.isnan(row).any() or np.isposinf(row).any() or np.isneginf(row).all())


def near_overflow(row):  # [v]: finite logits so close to float32's end that a sum in another order may cross it
    finite = np.abs(row[np.isfinite(row)])
    return bool(finite.size and finite.max() > 1e36)


def test_generate_checkpoint_with_overflowing_weights_is_one_line(tmp_path, capsys):
    cfg = T.induction_config()
    params = overflowing(T.init_decoder(cfg, 0), 1e30, 1e10)
    T.save_checkpoint(tmp_path / "dec", params, {**T.INDUCTION_SIZES, "kind": "decoder", "first_token": 1})
    assert main(["generate", "--checkpoint", str(tmp_path / "dec"), "3 4 5"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "generation step 0" in err and str(tmp_path / "dec") in err, err
    vocab = T.translation_vocab()
    s2s = T.Seq2SeqConfig(v=vocab.v, d=8, h=2, d_ff=8, L_enc=1, L_dec=1, n_max=16)
    p = T.init_seq2seq(s2s, 0)
    p["dec.0.ln3_g"] = p["dec.0.ln3_g"] * np.float32(1e30)  # the last LayerNorm's gain, then the output
    p["W_E"] = p["W_E"] * np.float32(1e10)  # projection by W_E: each product is finite, their sum is not
    T.save_checkpoint(tmp_path / "s2s", p, seq2seq_checkpoint_config(s2s, vocab))
    assert main(["generate", "--checkpoint", str(tmp_path / "s2s"), "ka lu"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "generation step 0" in err, err


def test_weights_whose_norm_overflows_to_finite_logits_are_one_line(tmp_path, capsys):
    """Every matrix times 1e18, the norms as they were: x² of the first RMSNorm overflows, x / √inf is 0, and the
    logits come out finite and equal, so no NaN check sees it. NumPy's overflow flag does: one line, no warning."""
    cfg = T.induction_config()
    params = {k: w * np.float32(1e18) if w.ndim == 2 else w for k, w in T.init_decoder(cfg, 0).items()}
    with np.errstate(over="ignore"):
        logits, _ = T.decoder_forward(params, np.array([[3, 4, 5]]), cfg)
    assert np.isfinite(logits).all() and np.ptp(logits[0, -1]) == 0  # what a NaN check alone would let through
    T.save_checkpoint(tmp_path / "dec", params, {**T.INDUCTION_SIZES, "kind": "decoder", "first_token": 1})
    assert main(["generate", "--checkpoint", str(tmp_path / "dec"), "3 4 5"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "overflow float32 at generation step 0" in err, err


# --- memory of generation on long prompts ---------------------------------------------------------
def test_greedy_generation_keeps_only_the_last_positions_logits():
    """v = 20,000, a 400-token prompt: the prefill's logits of every position would be 32 MB;
    the last one is 80 kB (HF's logits_to_keep = 1). The prefill's attention is 1.3 MB."""
    cfg = T.DecoderConfig(v=20_000, d=8, h=2, h_kv=1, L=1, d_ff=8, n_max=512)
    params = T.init_decoder(cfg, 0)
    prompt = np.random.default_rng(0).integers(0, cfg.v, (1, 400))
    ids, peak, _ = peak_of(lambda: T.greedy_generate(params, cfg, prompt, 2))
    assert peak < 400 * cfg.v * 4 / 4, peak
    logits, _ = T.decoder_forward(params, ids[:, :-1], cfg)  # the readable pass agrees on the tokens
    np.testing.assert_array_equal(ids[0, 400:], logits[0, 399:].argmax(-1))


def test_next_token_probs_keeps_only_the_last_positions_logits(tmp_path):
    from test_hostile_files import write_tiny_llama
    from transformer.tokenizers.bpe import bytes_to_unicode
    from transformer.models.llama_gguf import load_llama

    tokens = [bytes_to_unicode()[b] for b in range(256)] + ["ĠĠ"] + [f"t{i}" for i in range(20_000)]
    model = load_llama(str(write_tiny_llama(tmp_path / "big_v.gguf", context_length=512, tokens=tokens)),
                       progress=False)
    ids = list(np.random.default_rng(1).integers(0, len(tokens), 200))
    top, peak, _ = peak_of(lambda: model.next_token_probs(ids, k=5))
    assert peak < 200 * len(tokens) * 4 / 4, peak  # every position's logits: 16 MB
    p = np.exp(model.logits(ids)[-1] - model.logits(ids)[-1].max())
    p /= p.sum()
    assert [i for i, _, _ in top] == list(np.argsort(-p, kind="stable")[:5])
    np.testing.assert_allclose([q for _, _, q in top], np.sort(p)[::-1][:5], rtol=1e-5)


# --- the fast CPU attention at its edges ------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(b=st.integers(0, 2), h_kv=st.integers(1, 2), g=st.integers(1, 2), n_q=st.integers(0, 5), n_k=st.integers(1, 5),
       d_h=st.integers(1, 4), causal=st.booleans(), threads=st.integers(1, 3))
def test_fast_attention_on_empty_and_tiny_inputs_equals_the_readable_one(b, h_kv, g, n_q, n_k, d_h, causal, threads):
    import torch
    rng = np.random.default_rng(0)
    q = rng.standard_normal((b, h_kv * g, n_q, d_h))
    k, v = rng.standard_normal((2, b, h_kv, n_k, d_h))
    got, lse = T.flash_attention_fast(q, k, v, causal=causal, return_lse=True, block_q=2, block_k=2, threads=threads)
    want, want_lse = T.flash_attention(q, k, v, causal=causal, return_lse=True, block_q=2, block_k=2)
    assert got.shape == want.shape and lse.shape == want_lse.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, atol=1e-12)
    np.testing.assert_allclose(lse, want_lse, atol=1e-12)
    if not causal:  # torch's answer for the same shapes, empty included
        t = torch.nn.functional.scaled_dot_product_attention(
            torch.tensor(q), torch.tensor(k).repeat_interleave(g, 1), torch.tensor(v).repeat_interleave(g, 1))
        np.testing.assert_allclose(got, t.numpy(), atol=1e-12)


def blas_now():
    from threadpoolctl import threadpool_info
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


@settings(max_examples=15, deadline=None)
@given(order=st.permutations(range(4)), fail=st.sets(st.integers(0, 3)))
def test_single_threaded_blas_restores_after_the_last_of_overlapping_users(order, fail):
    """Four users enter in turn and leave in any order, some by an error: BLAS runs one thread while
    any is inside and gets its own count back when the last leaves (not the 1 a later user saw)."""
    from threadpoolctl import threadpool_limits
    with threadpool_limits(limits=2, user_api="blas"):
        before = blas_now()
        assume(before and max(before) > 1)
        limiter = tiled_fast.SingleThreadedBlas()
        for _ in range(4):
            limiter.__enter__()
        for j, i in enumerate(order):
            assert max(blas_now()) == 1
            limiter.__exit__(*(RuntimeError, RuntimeError(), None) if i in fail else (None, None, None))
        assert blas_now() == before


def test_fast_attention_from_threads_at_once_restores_blas_threads():
    from threadpoolctl import threadpool_limits
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((3, 1, 2, 256, 8))
    with threadpool_limits(limits=2, user_api="blas"):
        before = blas_now()
        errors = []

        def call(i):
            try:
                for _ in range(5):
                    T.flash_attention_fast(q, k, v, causal=bool(i % 2), block_q=16, threads=2)
            except Exception as e:  # noqa: BLE001  reported below
                errors.append(e)

        workers = [threading.Thread(target=call, args=(i,)) for i in range(4)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        assert not errors and blas_now() == before
