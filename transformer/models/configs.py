"""Model configurations: Hugging Face `config.json` dicts and one normalised `ModelConfig`.

Users have a model's `config.json`; each family spells the same dimensions differently
(`hidden_size` / `n_embd` / `d_model`). `ModelConfig` holds them under the one set of
dimension names used everywhere in this package, so the counting formulas read alike
for every model:

    b batch · n sequence · d model width · h query heads · h_kv key/value heads
    d_h head size · d_ff FFN width · v vocabulary · L layers

Families understood: llama, mistral, qwen2 (biases on q/k/v), phi3 (fused qkv and
gate_up: same sizes as separate matrices), gpt2, bert, and "transformer" (the original
encoder–decoder of "Attention Is All You Need", with our own keys).
"""
from __future__ import annotations

import dataclasses
import json
import numbers
import os
from dataclasses import dataclass

from ..require import require_int

__all__ = ["ModelConfig", "HF_CONFIGS", "BUILTIN_NAMES", "BUILTIN_ALIASES", "builtin_name", "builtin_names",
           "hf_config", "from_hf", "load_config",
           "MAX_JSON_BYTES", "check_capped", "read_capped", "read_json", "need_keys", "key_int", "key_real", "key_flag",
           "with_keys"]


@dataclass(frozen=True)
class ModelConfig:
    """A model's shape, in the package's dimension names (the legend for every formula)."""
    name: str
    family: str        # "decoder" (Llama, GPT-2), "encoder" (BERT) or "encoder-decoder"
    L: int             # layers (the decoder's, for an encoder–decoder)
    d: int             # model width d_model
    h: int             # query heads
    h_kv: int          # key/value heads: h = MHA, a divisor of h = GQA, 1 = MQA
    d_h: int | None    # head size; None: d / h, which must be whole (h·d_h = d except when head_dim is set)
    d_ff: int          # FFN hidden width
    v: int             # vocabulary
    n_ctx: int         # context length (rows of a learned position table)
    tied: bool = True          # the LM head reuses the token embedding (no extra v·d)
    qkv_bias: bool = False     # biases on the q, k, v projections (GPT-2, BERT, Qwen2)
    o_bias: bool = False       # bias on the output projection W_o
    ffn_bias: bool = False     # biases in the FFN
    gated_ffn: bool = True     # SwiGLU: W_gate, W_up, W_down (3 matrices) instead of W_1, W_2
    norm: str = "rms"          # "rms" (γ only, d numbers) or "layer" (γ and β, 2d numbers)
    positions: str = "rope"    # "rope" or "sinusoidal" (no parameters) or "learned" (n_ctx·d)
    type_vocab: int = 0        # BERT's token-type (segment) embeddings
    L_enc: int = 0             # encoder layers of an encoder–decoder
    lm_head: bool = True       # a vocabulary head (an encoder such as BertModel has none)
    pooler: bool = False       # BERT's pooler: a d×d dense layer on the first token
    final_norm: bool = True    # a norm after the last layer (one per stack)
    embed_norm: bool = False   # a LayerNorm right after the embeddings (BERT)

    def __post_init__(self):
        sizes = {f: getattr(self, f) for f in ("L", "d", "h", "h_kv", "d_h", "d_ff", "v", "n_ctx")}
        if self.d_h is None:  # derived below, once h is known to be an integer
            del sizes["d_h"]
        try:
            require_int(**sizes, low=1)
        except (TypeError, ValueError) as e:  # the same error, saying which config it is in
            raise type(e)(f"config {self.name!r}: {e}") from None
        for f, val in sizes.items():
            object.__setattr__(self, f, int(val))  # NumPy integers become plain ints
        # The checks of how h, h_kv and d fit together, for every config; from_hf adds the config.json keys
        if self.h % self.h_kv:
            raise ValueError(f"config {self.name!r}: query heads h={self.h} must be a multiple of key/value heads "
                             f"h_kv={self.h_kv}: each key/value head serves a whole group of h / h_kv query heads")
        if self.d_h is None:
            if self.d % self.h:
                raise ValueError(f"config {self.name!r}: d={self.d} is not a multiple of h={self.h}: the head size "
                                 f"d / h = {self.d / self.h:g} must be a whole number")
            object.__setattr__(self, "d_h", self.d // self.h)
        if self.family not in ("decoder", "encoder", "encoder-decoder"):
            raise ValueError(f"config {self.name!r}: family must be decoder, encoder or encoder-decoder, "
                             f"got {self.family!r}")
        if self.norm not in ("rms", "layer"):
            raise ValueError(f"config {self.name!r}: norm must be 'rms' or 'layer', got {self.norm!r}")
        if self.positions not in ("rope", "learned", "sinusoidal"):
            raise ValueError(f"config {self.name!r}: positions must be rope, learned or sinusoidal, "
                             f"got {self.positions!r}")
        if self.family == "encoder-decoder" and self.L_enc < 1:
            raise ValueError(f"config {self.name!r}: an encoder-decoder needs L_enc ≥ 1, got {self.L_enc}")

    @property
    def n_rep(self) -> int:
        """Query heads served by each key/value head (GQA group size)."""
        return self.h // self.h_kv

    def replace(self, **changes) -> "ModelConfig":
        """A copy with some fields changed, e.g. cfg.replace(h_kv=cfg.h) for the MHA variant."""
        return dataclasses.replace(self, **changes)


# Built-in configs, in the format of each model's own config.json (only the keys that
# decide sizes, plus a few that say which variant it is).
HF_CONFIGS: dict[str, dict] = {
    "smollm2-135m": {  # HuggingFaceTB/SmolLM2-135M(-Instruct): Llama architecture, GQA 9 → 3
        "model_type": "llama", "hidden_size": 576, "intermediate_size": 1536,
        "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
        "vocab_size": 49152, "max_position_embeddings": 8192, "tie_word_embeddings": True,
        "rms_norm_eps": 1e-5, "rope_theta": 100000.0, "hidden_act": "silu",
    },
    "minilm-l6": {  # sentence-transformers/all-MiniLM-L6-v2 (a BertModel)
        "model_type": "bert", "hidden_size": 384, "intermediate_size": 1536,
        "num_hidden_layers": 6, "num_attention_heads": 12, "vocab_size": 30522,
        "max_position_embeddings": 512, "type_vocab_size": 2, "layer_norm_eps": 1e-12,
        "hidden_act": "gelu", "position_embedding_type": "absolute",
    },
    "gpt2": {  # openai-community/gpt2 (small)
        "model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024,
        "vocab_size": 50257, "n_inner": None, "layer_norm_epsilon": 1e-5,
        "activation_function": "gelu_new", "tie_word_embeddings": True,
    },
    "phi-3-mini": {  # microsoft/Phi-3-mini-4k-instruct (module printout in note 002)
        "model_type": "phi3", "hidden_size": 3072, "intermediate_size": 8192,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 32,
        "vocab_size": 32064, "max_position_embeddings": 4096, "tie_word_embeddings": False,
        "rms_norm_eps": 1e-5, "hidden_act": "silu", "pad_token_id": 32000,
    },
    "llama-3-8b": {  # meta-llama/Meta-Llama-3-8B: GQA 32 → 8
        "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
        "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
        "vocab_size": 128256, "max_position_embeddings": 8192, "tie_word_embeddings": False,
        "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "hidden_act": "silu",
    },
    "transformer-base": {  # "Attention Is All You Need", base model (note 003): N = 6, d_model = 512
        "model_type": "transformer", "d_model": 512, "encoder_layers": 6, "decoder_layers": 6,
        "attention_heads": 8, "ffn_dim": 2048, "vocab_size": 37000,  # shared EN-DE BPE vocabulary
        "max_position_embeddings": 512, "tie_word_embeddings": True,
    },
}
BUILTIN_NAMES = tuple(HF_CONFIGS)
BUILTIN_ALIASES = {"smollm2": "smollm2-135m", "minilm": "minilm-l6"}  # the short names `attention --model` takes

_LLAMA_TYPES = ("llama", "mistral", "qwen2", "phi3")


def builtin_name(name) -> str | None:
    """The built-in config a name means, in any case or by its short alias; None for any other name.

    >>> builtin_name("SmolLM2-135M"), builtin_name("minilm"), builtin_name("Llama-3-8B"), builtin_name("gpt-5")
    ('smollm2-135m', 'minilm-l6', 'llama-3-8b', None)
    """
    key = str(name).lower()
    key = BUILTIN_ALIASES.get(key, key)
    return key if key in HF_CONFIGS else None


def builtin_names() -> str:
    """The names a built-in config answers to, for a message: 'smollm2-135m (or smollm2), …, in any case'."""
    short = {full: alias for alias, full in BUILTIN_ALIASES.items()}
    return ", ".join(f"{n} (or {short[n]})" if n in short else n for n in BUILTIN_NAMES) + ", in any case"


def hf_config(name: str) -> dict:
    """A copy of the built-in config.json dict for `name` (any case; smollm2 and minilm as short names)."""
    key = builtin_name(name)
    if key is None:
        raise ValueError(f"unknown model name {name!r}: built-in names are {builtin_names()}")
    return dict(HF_CONFIGS[key])


def need_keys(cfg: dict, keys, model_type: str) -> list[int]:
    """The sizes a family cannot do without, each a checked integer ≥ 1."""
    missing = [k for k in keys if cfg.get(k) is None]
    if missing:
        raise ValueError(f"config of model_type {model_type!r} is missing key(s) {missing}")
    return [key_int(cfg, k) for k in keys]


def key_int(cfg: dict, key: str, default: int | None = None, least: int = 1) -> int:
    """cfg[key] as an integer ≥ least. Only a missing key (or null) takes the default:
    a value that is present but wrong is an error, never silently replaced."""
    val = cfg.get(key)
    if val is None:
        return default
    if isinstance(val, bool) or not isinstance(val, numbers.Integral):
        raise TypeError(f"config key {key!r} must be an integer, got {val!r} ({type(val).__name__})")
    if val < least:
        raise ValueError(f"config key {key!r} must be ≥ {least}, got {val}")
    return int(val)


def key_real(cfg: dict, key: str, default: float) -> float:
    """cfg[key] as a number > 0 (an epsilon); a missing key (or null) takes the default."""
    val = cfg.get(key)
    if val is None:
        return default
    if isinstance(val, bool) or not isinstance(val, numbers.Real):
        raise TypeError(f"config key {key!r} must be a number, got {val!r} ({type(val).__name__})")
    if not 0 < val < float("inf"):
        raise ValueError(f"config key {key!r} must be a finite number > 0, got {val}")
    return float(val)


def key_flag(cfg: dict, key: str, default: bool) -> bool:
    """cfg[key] as a bool (JSON true/false); a missing key takes the default."""
    val = cfg.get(key)
    if val is None:
        return default
    if not isinstance(val, bool):
        raise TypeError(f"config key {key!r} must be true or false, got {val!r} ({type(val).__name__})")
    return val


def with_keys(make, cfg: dict, keys: dict, **fields):
    """make(**fields) (ModelConfig, bert.BertConfig): their checks name fields (d, h, …); an error
    here also names the config.json keys those fields were read from, keys = {field: key} (those
    the file holds: a missing key took its default)."""
    try:
        return make(**fields)
    except ValueError as e:  # each key was read and checked alone: what is left is how they fit together
        said = ", ".join(f"{k!r}={fields[f]} for {f}" for f, k in keys.items() if k in cfg)
        raise ValueError(f"{e} (config keys {said})" if said else str(e)) from None


def from_hf(cfg: dict, name: str | None = None) -> ModelConfig:
    """Normalise a Hugging Face config.json dict into a ModelConfig.

    >>> from_hf(hf_config("llama-3-8b")).h_kv
    8
    """
    if not isinstance(cfg, dict):
        raise TypeError(f"expected a config dict, got {type(cfg).__name__}")
    mt = cfg.get("model_type")
    name = name or cfg.get("_name_or_path") or str(mt)
    if mt in _LLAMA_TYPES:
        d, d_ff, L, h, v = need_keys(cfg, ["hidden_size", "intermediate_size", "num_hidden_layers",
                                       "num_attention_heads", "vocab_size"], mt)
        h_kv = key_int(cfg, "num_key_value_heads", default=h)  # absent means plain multi-head attention
        bias = key_flag(cfg, "attention_bias", False)  # Llama's switch: q, k, v and o
        return with_keys(
            ModelConfig, cfg, {"d": "hidden_size", "h": "num_attention_heads", "h_kv": "num_key_value_heads"},
            name=name, family="decoder", L=L, d=d, h=h, h_kv=h_kv, d_ff=d_ff, v=v,
            d_h=key_int(cfg, "head_dim"),  # None: d / h; head_dim may differ (Mistral-Nemo: 32 heads of 128 in 5120)
            n_ctx=key_int(cfg, "max_position_embeddings", default=2048),
            tied=key_flag(cfg, "tie_word_embeddings", False),
            qkv_bias=bias or mt == "qwen2",  # Qwen2 always has q/k/v biases, never an o bias
            o_bias=bias and mt != "qwen2", ffn_bias=key_flag(cfg, "mlp_bias", False),
            gated_ffn=True, norm="rms", positions="rope")
    if mt == "gpt2":
        d, L, h, v, n_ctx = need_keys(cfg, ["n_embd", "n_layer", "n_head", "vocab_size", "n_positions"], mt)
        return with_keys(
            ModelConfig, cfg, {"d": "n_embd", "h": "n_head"},
            name=name, family="decoder", L=L, d=d, h=h, h_kv=h, d_h=None,
            d_ff=key_int(cfg, "n_inner", default=4 * d), v=v, n_ctx=n_ctx,
            tied=key_flag(cfg, "tie_word_embeddings", True), qkv_bias=True, o_bias=True,
            ffn_bias=True, gated_ffn=False, norm="layer", positions="learned")
    if mt == "bert":
        d, d_ff, L, h, v, n_ctx = need_keys(cfg, ["hidden_size", "intermediate_size", "num_hidden_layers",
                                              "num_attention_heads", "vocab_size",
                                              "max_position_embeddings"], mt)
        return with_keys(
            ModelConfig, cfg, {"d": "hidden_size", "h": "num_attention_heads"},
            name=name, family="encoder", L=L, d=d, h=h, h_kv=h, d_h=None, d_ff=d_ff, v=v,
            n_ctx=n_ctx, tied=True, qkv_bias=True, o_bias=True, ffn_bias=True, gated_ffn=False,
            norm="layer", positions="learned", type_vocab=key_int(cfg, "type_vocab_size", default=2, least=0),
            lm_head=False, pooler=True, final_norm=False, embed_norm=True)
    if mt == "transformer":
        d, L_enc, L, h, d_ff, v = need_keys(cfg, ["d_model", "encoder_layers", "decoder_layers",
                                              "attention_heads", "ffn_dim", "vocab_size"], mt)
        return with_keys(
            ModelConfig, cfg, {"d": "d_model", "h": "attention_heads"},
            name=name, family="encoder-decoder", L=L, L_enc=L_enc, d=d, h=h, h_kv=h, d_h=None, d_ff=d_ff, v=v,
            n_ctx=key_int(cfg, "max_position_embeddings", default=512),
            tied=key_flag(cfg, "tie_word_embeddings", True), qkv_bias=True, o_bias=True,
            ffn_bias=True, gated_ffn=False, norm="layer", positions="sinusoidal",
            final_norm=False)  # post-norm: each sub-layer already ends in a LayerNorm
    supported = ", ".join(_LLAMA_TYPES + ("gpt2", "bert", "transformer"))
    raise ValueError(f"unsupported model_type {mt!r}: supported are {supported}")


MAX_JSON_BYTES = 4 << 20  # a config.json is a few KB; one with a large label map, a few hundred KB


def check_capped(path, limit: int, what: str) -> str:
    """path, if it names a regular file of at most `limit` bytes; else one line naming the file
    and the cap. Checked before anything is read: /dev/zero would never end."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{what} {path} not found")
    if not os.path.isfile(path):
        raise ValueError(f"{path} is not a regular file: give the path of a {what}")
    size = os.path.getsize(path)
    if size > limit:
        raise ValueError(f"{path} is {size} bytes, over the {limit}-byte limit for a {what}")
    return path


def read_capped(path, limit: int, what: str) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, checked before reading: a device
    (/dev/zero), a pipe or an oversized file is refused with one line naming the file and the cap."""
    path = check_capped(path, limit, what)
    with open(path, "rb") as f:
        data = f.read(limit + 1)  # never more than the cap, even if the file grew since it was measured
    if len(data) > limit:
        raise ValueError(f"{path} grew past the {limit}-byte limit for a {what} while being read")
    return data


def read_json(path) -> dict:
    """A JSON file holding one object of config keys (config.json, sentence_bert_config.json),
    of at most MAX_JSON_BYTES; every error names the file."""
    data = read_capped(path, MAX_JSON_BYTES, "JSON config file")
    try:
        cfg = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ValueError(f"cannot read {path}: not UTF-8 text (byte 0x{e.object[e.start]:02x} "
                         f"at offset {e.start})") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"cannot read {path}: not valid JSON ({e})") from None
    except RecursionError:  # "[[[[…": Python's parser recurses once per level
        raise ValueError(f"cannot read {path}: JSON nested too deeply") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"{path} holds a JSON {type(cfg).__name__}, not an object of config keys")
    return cfg


def _read_config_file(path: str) -> ModelConfig:
    """A config.json -> ModelConfig; every error names the file."""
    cfg = read_json(path)
    try:
        return from_hf(cfg, name=os.path.basename(os.path.dirname(os.path.abspath(path))))
    except (ValueError, TypeError) as e:
        raise type(e)(f"{path}: {e}") from None


def load_config(config) -> ModelConfig:
    """Any config to a ModelConfig: a ModelConfig, a built-in name, a path to a config.json
    (or to the model folder holding it), a config dict, or an object with the legend's attributes (L, d, h, h_kv, d_h, d_ff, v)."""
    if isinstance(config, ModelConfig):
        return config
    if isinstance(config, (str, os.PathLike)):
        s = os.fspath(config)
        name = builtin_name(s)
        if name is not None:
            return from_hf(HF_CONFIGS[name], name=name)
        if os.path.isdir(s):  # a model folder: read the config.json inside it
            s = os.path.join(s, "config.json")
        if s.endswith(".json") or os.path.sep in s:
            if not os.path.exists(s):
                raise FileNotFoundError(f"config file {s!r} not found")
            return _read_config_file(s)
        if os.path.isfile(s):  # README.md: a file, but neither a name nor a config.json
            raise ValueError(f"{s!r} is a file but not a config.json: give the path of a model's config.json (or "
                             f"of its folder), or a built-in name: {builtin_names()}")
        raise ValueError(f"unknown model name {s!r}: built-in names are {builtin_names()}, "
                         "or give a path to a config.json")
    if isinstance(config, dict):
        return from_hf(config)
    legend = ("L", "d", "h", "d_h", "d_ff", "v")
    if all(hasattr(config, a) for a in legend):  # the package's own config dataclasses
        if hasattr(config, "n_types"):  # an encoder config in BERT's layout (bert.BertConfig)
            return from_hf({"model_type": "bert", "hidden_size": config.d, "intermediate_size": config.d_ff,
                            "num_hidden_layers": config.L, "num_attention_heads": config.h,
                            "vocab_size": config.v, "max_position_embeddings": config.n_max,
                            "type_vocab_size": config.n_types}, name=type(config).__name__)
        fields = {f.name for f in dataclasses.fields(ModelConfig)}
        kw = {f: getattr(config, f) for f in fields if hasattr(config, f)}  # a Llama-style decoder
        kw["name"] = kw.get("name") or type(config).__name__
        kw.setdefault("family", "decoder")
        kw.setdefault("h_kv", config.h)
        kw.setdefault("n_ctx", getattr(config, "n_max", None) or 2048)
        return ModelConfig(**kw)
    raise TypeError(f"cannot read a model config from {type(config).__name__}: give a ModelConfig, "
                    "a built-in name, a config.json path or a config dict")
