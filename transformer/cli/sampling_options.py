"""The sampling options of `generate` (--temperature, --top-k, --top-p, --seed), checked once for every model
that samples: SmolLM2 (cli/decode.py) and a decoder `train` wrote (cli/train.py)."""
from __future__ import annotations

import math

SAMPLING = ("top_k", "top_p", "seed")
SEED_BITS = 32  # a seed drawn for a run without --seed: short enough to copy from the terminal


def given_sampling(args) -> list[str]:
    """The sampling options given on the command line, as the user typed them."""
    return [f"--{name.replace('_', '-')} {getattr(args, name)}" for name in SAMPLING if getattr(args, name) is not None]


def check_sampling_options(args) -> None:
    """Refuse settings that mean nothing, naming the options as typed: a negative seed, a temperature, top-k or
    top-p out of range, or a sampling option beside the default greedy --temperature 0 (it would be ignored).
    --top-k 0 means off, as the serve API's top_k 0 does: it becomes None here. These are the rules of
    core.sampling.check_sampling, worded as options, with 0 for an option that is off; the model's door
    checks them again."""
    if args.seed is not None and args.seed < 0:  # NumPy's seeds are integers ≥ 0
        raise ValueError(f"--seed must be an integer ≥ 0, got {args.seed}")
    if not (math.isfinite(args.temperature) and args.temperature >= 0):
        raise ValueError(f"--temperature must be a finite number ≥ 0 (0 = greedy), got {args.temperature:g}")
    if args.top_k is not None and args.top_k < 0:
        raise ValueError(f"--top-k must be an integer ≥ 0 (0 = off), got {args.top_k}")
    if args.top_k == 0:
        args.top_k = None
    if args.top_p is not None and not 0 < args.top_p <= 1:  # NaN too
        raise ValueError(f"--top-p must lie in (0, 1] (1 = off), got {args.top_p:g}")
    if args.temperature == 0 and given_sampling(args):  # greedy: a sampling option would be silently ignored
        raise ValueError(f"{', '.join(given_sampling(args))}: sampling options, used only with --temperature > 0 "
                         "(the default 0 is greedy); add e.g. --temperature 0.8")


def sampling_seed(args):
    """The seed of a sampled run: --seed, or one drawn now, which the command prints to stderr ("seed: N")
    once the request is accepted, so that a good sample can be had again with --seed N. None when greedy."""
    import secrets

    if args.temperature == 0 or args.seed is not None:
        return args.seed
    return secrets.randbits(SEED_BITS)
