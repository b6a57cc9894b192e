"""Hostile and broken model files: every reader refuses them with one line naming the bad count,
key, tensor or token, within a fixed memory bound, or loads them.

The references: GGUF bytes written by hand from the format's layout (magic, version, counts, typed
key/values, tensor infos), the `gguf` package's own GGUFWriter for valid files and GGUFReader for
where a valid file's tensor data ends, and NumPy for which numbers are finite."""
import os
import struct
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import transformer as T  # noqa: E402
from transformer.cli.main import main  # noqa: E402
from transformer.models import gguf_header, llama_gguf  # noqa: E402

MEMORY_BOUND = 64 << 20  # bytes: what reading any of these tiny files may take at its peak
SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def gguf_string(s: bytes) -> bytes:
    return struct.pack("<Q", len(s)) + s


def header(n_tensors: int, n_kv: int, version: int = 3) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv)


def write_tiny_llama(path, *, context_length=64, replace=None, tokens=None, d=8, v_extra=2):
    """A 1-layer Llama (d = 8, h = 2, d_h = 4, d_ff = 12) with a byte-level vocabulary, in GGUF."""
    import gguf
    from transformer.tokenizers.bpe import bytes_to_unicode

    rng = np.random.default_rng(0)
    tokens = tokens or [bytes_to_unicode()[b] for b in range(256)] + ["ĠĠ", "<|end|>"][:v_extra]
    v, h, d_ff = len(tokens), 2, 12
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_block_count(1); w.add_context_length(context_length); w.add_embedding_length(d)
    w.add_feed_forward_length(d_ff); w.add_head_count(h); w.add_head_count_kv(1)
    w.add_rope_freq_base(10000.0); w.add_layer_norm_rms_eps(1e-6)
    w.add_tokenizer_model("gpt2"); w.add_tokenizer_pre("gpt2"); w.add_token_list(tokens)
    w.add_token_merges(["Ġ Ġ"]); w.add_token_types([1] * v)
    shapes = {"token_embd.weight": (v, d), "blk.0.attn_norm.weight": (d,), "blk.0.attn_q.weight": (d, d),
              "blk.0.attn_k.weight": (d // h, d), "blk.0.attn_v.weight": (d // h, d),
              "blk.0.attn_output.weight": (d, d), "blk.0.ffn_norm.weight": (d,),
              "blk.0.ffn_gate.weight": (d_ff, d), "blk.0.ffn_up.weight": (d_ff, d),
              "blk.0.ffn_down.weight": (d, d_ff), "output_norm.weight": (d,)}
    for name, shape in shapes.items():
        w.add_tensor(name, (replace or {}).get(name, rng.standard_normal(shape).astype(np.float32) * 0.2))
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    return path


class Blob(bytes):
    """Bytes that print short: hypothesis shows the arguments of a failing example."""

    def __repr__(self):
        return f"<{len(self)} bytes>"


@pytest.fixture(scope="module")
def tiny_bytes(tmp_path_factory):
    return Blob(write_tiny_llama(tmp_path_factory.mktemp("tiny") / "tiny.gguf").read_bytes())


def load_within_bound(path):
    """load_llama(path) under tracemalloc -> (the model or the exception, peak bytes)."""
    tracemalloc.start()
    try:
        got = T.load_llama(path, progress=False)
    except Exception as e:  # noqa: BLE001 — the caller says which kinds are allowed
        got = e
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return got, peak


def assert_refused_or_loaded(path):
    got, peak = load_within_bound(path)
    assert peak < MEMORY_BOUND, f"reading {path} took {peak / 2**20:.0f} MiB at its peak"
    if isinstance(got, Exception):
        assert isinstance(got, ValueError), f"{type(got).__name__}: {got}"
        assert "\n" not in str(got) and str(got), repr(got)
    else:
        assert isinstance(got, T.Llama)
    return got


# --- the issue's files -------------------------------------------------------------------------
def test_a_68_byte_file_declaring_2_40_array_entries_is_refused_at_once(tmp_path, capsys):
    key = b"tokenizer.ggml.pre"
    data = header(0, 1) + gguf_string(key) + struct.pack("<IIQ", 9, 0, 1 << 40)  # ARRAY of UINT8, 2⁴⁰ long
    data += b"\0" * (68 - len(data))
    assert len(data) == 68
    path = tmp_path / "huge.gguf"
    path.write_bytes(data)
    got = assert_refused_or_loaded(path)
    assert "'tokenizer.ggml.pre' declares an array of 1099511627776 UINT8 elements" in str(got)
    assert "only 2 bytes remain" in str(got)  # 68 − 24 (header) − 26 (key) − 4 (type) − 12 (array head)
    assert main(["generate", "hi", "--gguf", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "1099511627776" in err


@pytest.mark.parametrize("n_tensors,n_kv,what", [(0, 1 << 62, "key/value pairs"), (1 << 62, 0, "tensors")])
def test_huge_header_counts_are_named(tmp_path, n_tensors, n_kv, what):
    path = tmp_path / "counts.gguf"
    path.write_bytes(header(n_tensors, n_kv) + b"\0" * 100)
    got = assert_refused_or_loaded(path)
    assert f"declares {1 << 62} {what}" in str(got)


def test_a_huge_string_length_is_named(tmp_path):
    path = tmp_path / "string.gguf"
    path.write_bytes(header(0, 1) + gguf_string(b"general.name") + struct.pack("<IQ", 8, 1 << 60) + b"x" * 20)
    got = assert_refused_or_loaded(path)
    assert "the string value of 'general.name' is 1152921504606846976 bytes long" in str(got)


def test_arrays_of_arrays_and_unknown_types_are_named(tmp_path):
    path = tmp_path / "nested.gguf"
    path.write_bytes(header(0, 1) + gguf_string(b"a.b") + struct.pack("<IIQ", 9, 9, 1) + b"\0" * 40)
    assert "array 'a.b' has element type 9" in str(assert_refused_or_loaded(path))
    path.write_bytes(header(0, 1) + gguf_string(b"a.b") + struct.pack("<I", 13) + b"\0" * 40)
    assert "key 'a.b' has unknown value type 13" in str(assert_refused_or_loaded(path))


def test_tensor_data_past_the_end_is_named(tmp_path, tiny_bytes):
    path = tmp_path / "cut.gguf"
    path.write_bytes(tiny_bytes[:-16])  # the last tensor (output_norm.weight, 8 floats) loses 4 of them
    got = assert_refused_or_loaded(path)
    assert "tensor 'output_norm.weight' needs bytes" in str(got)


def test_context_length_2_32_is_refused_naming_the_key(tmp_path):
    path = write_tiny_llama(tmp_path / "ctx.gguf", context_length=2**32 - 1)
    got = assert_refused_or_loaded(path)
    assert f"llama.context_length = {2**32 - 1} exceeds this loader's limit of {2**20}" in str(got)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_tensor_is_named(tmp_path, capsys, bad):
    w = np.ones((12, 8), np.float32)
    w[3, 5] = bad
    path = write_tiny_llama(tmp_path / "nan.gguf", replace={"blk.0.ffn_up.weight": w})
    got = assert_refused_or_loaded(path)
    assert "tensor 'blk.0.ffn_up.weight' holds 1 non-finite values" in str(got)
    assert "at index (3, 5)" in str(got)  # in the order stored, (d_out, d_in), before the transpose
    # within the file's n_ctx = 64 (the default 64 new tokens are refused from the header, before the weights)
    assert main(["generate", "hi", "--gguf", str(path), "--max-new-tokens", "4"]) == 2
    assert "blk.0.ffn_up.weight" in capsys.readouterr().err


def test_a_token_that_is_not_utf8_is_named_by_its_id(tmp_path, capsys):
    from transformer.tokenizers.bpe import bytes_to_unicode

    tokens = [bytes_to_unicode()[b] for b in range(256)] + ["MARKER"]
    path = write_tiny_llama(tmp_path / "utf8.gguf", tokens=tokens)
    data = path.read_bytes()
    assert data.count(b"MARKER") == 1
    path.write_bytes(data.replace(b"MARKER", b"MA\xffKER"))  # same length: only the text is bad
    got = assert_refused_or_loaded(path)
    assert "token id 256 of 'tokenizer.ggml.tokens' is not valid UTF-8 (byte 0xff at offset 2)" in str(got)
    assert main(["tokenize", "hi", "--gguf", str(path)]) == 2
    assert "token id 256" in capsys.readouterr().err


# --- property tests ----------------------------------------------------------------------------
def tensor_data_end(path) -> int:
    """Where the last tensor's data ends, as gguf's own reader places it (the reference)."""
    import gguf

    r = gguf.GGUFReader(str(path))
    return max(t.data_offset + t.n_bytes for t in r.tensors)


def test_every_truncation_is_refused_and_the_whole_file_loads(tmp_path, tiny_bytes):
    """Each prefix shorter than the end of the last tensor's data is refused, by name; longer ones
    (only padding missing) and the whole file load, and give the same model."""
    import gguf

    full = tmp_path / "full.gguf"
    full.write_bytes(tiny_bytes)
    end = tensor_data_end(full)
    whole = assert_refused_or_loaded(full)
    path = tmp_path / "prefix.gguf"
    start = min(t.data_offset for t in gguf.GGUFReader(str(full)).tensors)  # every cut in the header, every 8th after
    for n in [*range(start), *range(start, len(tiny_bytes), 8)]:
        path.write_bytes(tiny_bytes[:n])
        try:
            gguf_header.check_gguf(path)
            assert n >= end, f"a prefix of {n} bytes, short of the data's end at {end}, was accepted"
        except ValueError as e:
            assert n < end and "\n" not in str(e), (n, end, str(e))
    path.write_bytes(tiny_bytes[:end])
    cut = assert_refused_or_loaded(path)
    np.testing.assert_array_equal(T.to_numpy(cut.weights.W_E), T.to_numpy(whole.weights.W_E))


@SETTINGS
@given(data=st.data())
def test_random_bytes_after_a_valid_prefix(tmp_path, tiny_bytes, data):
    cut = data.draw(st.integers(0, len(tiny_bytes)), label="cut")
    tail = data.draw(st.binary(max_size=256), label="tail")
    path = tmp_path / "random.gguf"
    path.write_bytes(tiny_bytes[:cut] + tail)
    assert_refused_or_loaded(path)


def count_fields(data: bytes) -> list[tuple[int, str]]:
    """(offset, struct format) of every count, length and type code in a valid file's header,
    found by walking the layout: the places a hostile writer would change."""
    pos, fields = 8, [(8, "<Q"), (16, "<Q")]
    n_tensors, n_kv = struct.unpack_from("<QQ", data, 8)
    pos = 24

    def string():
        nonlocal pos
        fields.append((pos, "<Q"))
        pos += 8 + struct.unpack_from("<Q", data, pos)[0]

    for _ in range(n_kv):
        string()
        fields.append((pos, "<I"))
        vtype = struct.unpack_from("<I", data, pos)[0]
        pos += 4
        if vtype == 9:
            fields += [(pos, "<I"), (pos + 4, "<Q")]
            etype, count = struct.unpack_from("<IQ", data, pos)
            pos += 12
            for _ in range(count):
                if etype == 8:
                    string()
                else:
                    pos += gguf_header.VALUE_SIZES[etype]
        elif vtype == 8:
            string()
        else:
            pos += gguf_header.VALUE_SIZES[vtype]
    for _ in range(n_tensors):
        string()
        n_dims = struct.unpack_from("<I", data, pos)[0]
        fields.append((pos, "<I"))
        fields += [(pos + 4 + 8 * j, "<Q") for j in range(n_dims)]
        pos += 4 + 8 * n_dims
        fields += [(pos, "<I"), (pos + 4, "<Q")]
        pos += 12
    return fields


@SETTINGS
@given(data=st.data())
def test_random_counts_lengths_and_type_codes(tmp_path, tiny_bytes, data):
    """One count, length or type code of a valid file replaced by a hostile value."""
    fields = count_fields(tiny_bytes)
    assert len(fields) > 300  # the 258 tokens' lengths, the tensors' dims, the keys' types
    offset, fmt = data.draw(st.sampled_from(fields), label="field")
    top = 2 ** (8 * struct.calcsize(fmt)) - 1
    value = data.draw(st.one_of(st.integers(0, 16), st.sampled_from([top, top // 2, 2**31, 2**40]),
                                st.integers(0, top)), label="value")
    value = min(value, top)
    hostile = bytearray(tiny_bytes)
    struct.pack_into(fmt, hostile, offset, value)
    path = tmp_path / "hostile.gguf"
    path.write_bytes(bytes(hostile))
    assert_refused_or_loaded(path)


def test_the_smollm2_file_passes_the_header_check():
    gguf_header.check_gguf(llama_gguf.smollm2_path())  # 49 152 tokens, 48 900 merges, 272 tensors


def assert_read_as_gguf_reads_it(path):
    """read_gguf (the walk that checks the file) against gguf's own GGUFReader, the reference: every key's types
    and contents, every tensor's type, shape, sizes, offset and data, NumPy type and byte order included."""
    import gguf
    from transformer.models.gguf_file import read_gguf

    ours, ref = read_gguf(path), gguf.GGUFReader(str(path))
    keys = [k for k in ref.fields if not k.startswith("GGUF.")]  # the reader's own entries: version and counts
    assert list(ours.fields) == keys
    for key in keys:
        assert ours.get_field(key).types == list(ref.fields[key].types), key
        got, want = ours.get_field(key).contents(), ref.fields[key].contents()
        assert type(got) is type(want) and got == want, key
    assert len(ours.tensors) == len(ref.tensors)
    for t, r in zip(ours.tensors, ref.tensors):
        assert (t.name, t.tensor_type, t.shape, t.n_elements, t.n_bytes, t.data_offset) == \
            (r.name, r.tensor_type, tuple(int(n) for n in r.shape), r.n_elements, r.n_bytes, r.data_offset), r.name
        assert t.data.dtype == r.data.dtype and t.data.shape == r.data.shape, r.name
        np.testing.assert_array_equal(t.data, r.data, err_msg=r.name)
    return ours


def test_the_smollm2_file_reads_as_ggufs_own_reader_reads_it():
    f = assert_read_as_gguf_reads_it(llama_gguf.smollm2_path())
    assert len(f.get_field("tokenizer.ggml.tokens").contents()) == 49152 and len(f.tensors) == 272


@pytest.mark.parametrize("kind", ["Q8_0", "Q4_0", "Q4_1"])
@pytest.mark.parametrize("shape", [(32,), (5000, 96), (2, 3, 64)])  # one block; past ROWS_AT_ONCE rows; 3-D
def test_block_formats_dequantize_as_ggufs_own_code_does(kind, shape):
    """The loader's own dequantization of SmolLM2's block formats against gguf.quants.dequantize, bit for bit,
    on rows whose scales span 10⁻³ … 10³."""
    import gguf
    from transformer.models.gguf_file import dequantize_blocks

    rng = np.random.default_rng(5)
    x = (rng.standard_normal(shape) * 10.0 ** rng.uniform(-3, 3, (*shape[:-1], 1))).astype(np.float32)
    blocks = gguf.quants.quantize(x, gguf.GGMLQuantizationType[kind])
    got, want = dequantize_blocks(blocks, int(gguf.GGMLQuantizationType[kind])), \
        gguf.quants.dequantize(blocks, gguf.GGMLQuantizationType[kind])
    assert got.dtype == want.dtype == np.float32 and got.shape == want.shape == shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("endian", ["little", "big"])
def test_every_value_and_tensor_type_reads_as_ggufs_own_reader_reads_it(tmp_path, endian):
    import gguf

    Q = gguf.GGMLQuantizationType
    path = tmp_path / f"{endian}.gguf"
    w = gguf.GGUFWriter(str(path), "llama", endianess=gguf.GGUFEndian.BIG if endian == "big" else gguf.GGUFEndian.LITTLE)
    w.add_uint8("t.u8", 250); w.add_int8("t.i8", -3); w.add_uint16("t.u16", 65000); w.add_int16("t.i16", -300)
    w.add_uint32("t.u32", 4_000_000_000); w.add_int32("t.i32", -70000); w.add_float32("t.f32", 0.1)
    w.add_uint64("t.u64", 2**63 + 5); w.add_int64("t.i64", -(2**40)); w.add_float64("t.f64", 0.1)
    w.add_bool("t.bool", True); w.add_string("t.str", "héllo ✓"); w.add_array("t.strs", ["a", "", "ü b"])
    w.add_array("t.ints", [1, -2, 3]); w.add_array("t.floats", [0.5, -1.25]); w.add_array("t.empty", [])
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 64)).astype(np.float32)
    w.add_tensor("f32", x.copy()); w.add_tensor("f16", x.astype(np.float16)); w.add_tensor("f64", x.astype(np.float64))
    w.add_tensor("i32", np.arange(12, dtype=np.int32).reshape(3, 4)); w.add_tensor("i8", np.arange(-4, 4, dtype=np.int8))
    w.add_tensor("vec", x[0]); w.add_tensor("cube", rng.standard_normal((2, 3, 32)).astype(np.float32))
    for kind in (Q.Q8_0, Q.Q4_1, Q.BF16):
        w.add_tensor(kind.name.lower(), gguf.quants.quantize(x, kind), raw_dtype=kind)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
    f = assert_read_as_gguf_reads_it(path)
    assert f.get_field("t.u64").contents() == 2**63 + 5 and f.get_field("t.strs").contents() == ["a", "", "ü b"]
    np.testing.assert_array_equal(f.tensors[0].data, x)  # the writer swapped the bytes of a big-endian file
    np.testing.assert_allclose(gguf.quants.dequantize(f.tensors[7].data, Q.Q8_0), x, atol=np.abs(x).max() / 127)


# --- MiniLM's files and config.json ------------------------------------------------------------
@pytest.fixture
def minilm_copy(tmp_path):
    """A folder of links to the installed MiniLM's files, any of which a test may replace."""
    from transformer.models.bert_files import minilm_dir

    src = minilm_dir()
    for name in ("config.json", "vocab.txt", "model.safetensors", "sentence_bert_config.json"):
        if os.path.exists(os.path.join(src, name)):
            os.symlink(os.path.join(src, name), tmp_path / name)
    return tmp_path


def oversized(path, n_bytes):
    path.unlink(missing_ok=True)
    with open(path, "wb") as f:
        f.truncate(n_bytes)  # a sparse file: its size, without writing the bytes


@pytest.mark.parametrize("name,limit", [("config.json", 4 << 20), ("vocab.txt", 64 << 20)])
def test_minilm_text_files_over_their_cap(minilm_copy, capsys, name, limit):
    oversized(minilm_copy / name, limit + 1)
    assert main(["embed", "x", "--path", str(minilm_copy)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{minilm_copy / name} is {limit + 1} bytes, over the {limit}-byte limit" in err


@pytest.mark.parametrize("name", ["config.json", "vocab.txt", "model.safetensors"])
def test_minilm_files_that_are_devices(minilm_copy, capsys, name):
    (minilm_copy / name).unlink()
    os.symlink("/dev/zero", minilm_copy / name)
    assert main(["embed", "x", "--path", str(minilm_copy)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a regular file" in err and name in err


def test_minilm_vocab_not_utf8_names_the_byte(minilm_copy, capsys):
    (minilm_copy / "vocab.txt").unlink()
    (minilm_copy / "vocab.txt").write_bytes(b"[PAD]\n[UNK]\n\xe9t\xe9\n")
    assert main(["embed", "x", "--path", str(minilm_copy)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "vocab.txt" in err and "token id 2" in err  # the third line


def test_minilm_safetensors_garbage_and_non_finite(minilm_copy, capsys):
    from safetensors.numpy import load_file, save_file

    weights = load_file(str(minilm_copy / "model.safetensors"))
    (minilm_copy / "model.safetensors").unlink()
    (minilm_copy / "model.safetensors").write_bytes(struct.pack("<Q", 1 << 40) + b"{}")  # header past the end
    assert main(["embed", "x", "--path", str(minilm_copy)]) == 2
    assert "not a valid safetensors file" in capsys.readouterr().err
    name = next(k for k in weights if k.endswith("encoder.layer.2.output.dense.weight"))
    weights[name] = weights[name].copy()
    weights[name][7, 1] = np.nan
    (minilm_copy / "model.safetensors").unlink()
    save_file(weights, str(minilm_copy / "model.safetensors"))
    assert main(["embed", "x", "--path", str(minilm_copy)]) == 2
    assert "'encoder.layer.2.output.dense.weight' holds 1 non-finite values" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["embed", "the dog", "a cat"], ["attention", "--model", "minilm", "the dog"]])
def test_minilm_weights_that_overflow_in_a_product_are_one_line(minilm_copy, capsys, tmp_path, argv):
    """Every matrix times 1e19: each weight is a finite float32, their products are not. Without a check the
    similarities came out NaN with exit 0 and NumPy's overflow warnings on stderr."""
    from safetensors.numpy import load_file, save_file

    weights = {k: w * np.float32(1e19) if w.ndim == 2 else w
               for k, w in load_file(str(minilm_copy / "model.safetensors")).items()}
    assert all(np.isfinite(w).all() for w in weights.values())
    (minilm_copy / "model.safetensors").unlink()
    save_file(weights, str(minilm_copy / "model.safetensors"))
    out = ["-o", str(tmp_path / "a.png")] if argv[0] == "attention" else []
    assert main(argv + ["--path", str(minilm_copy)] + out) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith("error: all-MiniLM-L6-v2's numbers overflow float32 while computing the "), captured.err
    assert not (tmp_path / "a.png").exists()
