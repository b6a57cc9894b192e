"""The sampling options of `generate` (--temperature, --top-k, --top-p, --seed), checked once for every model
that samples: SmolLM2 (cli/decode.py) and a decoder `train` wrote (cli/train.py)."""
from __future__ import annotations

SAMPLING = ("top_k", "top_p", "seed")


def given_sampling(args) -> list[str]:
    """The sampling options given on the command line, as the user typed them."""
    return [f"--{name.replace('_', '-')} {getattr(args, name)}" for name in SAMPLING if getattr(args, name) is not None]


def check_sampling_options(args) -> None:
    """Refuse settings that mean nothing, naming the options: a negative seed, a temperature, top-k or top-p
    out of range, or a sampling option beside the default greedy --temperature 0 (it would be ignored)."""
    from ..core.sampling import check_sampling

    if args.seed is not None and args.seed < 0:  # NumPy's seeds are integers ≥ 0
        raise ValueError(f"--seed must be an integer ≥ 0, got {args.seed}")
    check_sampling(args.temperature, args.top_k, args.top_p)
    if args.temperature == 0 and given_sampling(args):  # greedy: a sampling option would be silently ignored
        raise ValueError(f"{', '.join(given_sampling(args))}: sampling options, used only with --temperature > 0 "
                         "(the default 0 is greedy); add e.g. --temperature 0.8")
