"""The checker's cases for lesson 11: temperature, top-k and top-p (filter_logits), and the slips of each step; and
the draw itself (sample_next), given the uniform numbers it must use."""
from __future__ import annotations

import numpy as np

from ..core.attention import softmax
from ..core.sampling import filter_logits, sample_next
from .cases import Case, Mistake, Spec, fresh

__all__ = ["FILTER_LOGITS", "SAMPLE_NEXT", "GivenUniforms"]


def _rng(seed):
    return np.random.default_rng(seed)


# --- lesson 11: top-k / top-p ------------------------------------------------------------------------
def filter_cases():
    p = np.log(np.array([0.5, 0.3, 0.15, 0.05]))
    r = _rng(111)
    wide = r.standard_normal((2, 50)) * 2
    wide32 = (r.standard_normal((2, 50)) * 2).astype(np.float32)  # float32 logits must come back float32
    return [Case("top_k=2 of 4", (p,), {"top_k": 2}, frozenset({"top_k"})),
            Case("top_p=0.75 of [0.5, 0.3, 0.15, 0.05]: 0.5 + 0.3 crosses 0.75", (p,), {"top_p": 0.75},
                 frozenset({"top_p"})),
            Case("top_p=0.5 exactly the first token's mass", (p,), {"top_p": 0.5}, frozenset({"top_p"})),
            Case("temperature 0.5, two rows of v=50", (wide,), {"temperature": 0.5}, frozenset({"temperature"})),
            Case("temperature 2, top_k=5, top_p=0.9, two rows", (wide,), {"temperature": 2.0, "top_k": 5,
                                                                           "top_p": 0.9},
                 frozenset({"top_k", "top_p", "temperature"})),
            Case("temperature 0: greedy, only the argmax survives", (wide,), {"temperature": 0.0},
                 frozenset({"greedy"})),
            Case("float32 logits, temperature 0.7, top_k=10, top_p=0.8, two rows", (wide32,),
                 {"temperature": 0.7, "top_k": 10, "top_p": 0.8}, frozenset({"float32"})),
            Case("float32 logits, temperature 0", (wide32,), {"temperature": 0.0}, frozenset({"float32", "greedy"})),
            Case("top_k=2 of [0.4, 0.25, 0.25, 0.1]: the 2nd and 3rd tie, both kept",
                 (np.log(np.array([0.4, 0.25, 0.25, 0.1])),), {"top_k": 2}, frozenset({"top_k", "k-ties"})),
            Case("temperature 0 with two equal maxima (ids 1 and 3): only the first", (np.array([1.0, 3.0, 0.5, 3.0]),),
                 {"temperature": 0.0}, frozenset({"greedy", "greedy-ties"})),
            Case("top_p=0.3 over 400 logits with many ties: tied tokens taken in vocabulary order",
                 (np.round(r.standard_normal(400) * 1.5),), {"top_p": 0.3}, frozenset({"top_p", "p-ties"}))]


def _top_p_strict(logits, temperature=1.0, top_k=None, top_p=None):  # drops the token that crosses p
    x = filter_logits(logits, temperature, top_k, None)
    if top_p is None:
        return x
    probs = np.exp(x - x.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    order = np.argsort(-probs, axis=-1, kind="stable")
    cum = np.take_along_axis(probs, order, -1).cumsum(-1)
    keep_sorted = cum <= top_p
    keep_sorted[..., 0] = True
    keep = np.zeros_like(keep_sorted)
    np.put_along_axis(keep, order, keep_sorted, -1)
    return np.where(keep, x, -np.inf)


def _top_p_inclusive(logits, temperature=1.0, top_k=None, top_p=None):  # keeps a token whose cumsum, itself in, < p
    x = filter_logits(logits, temperature, top_k, None)
    if top_p is None or temperature == 0:
        raise ValueError("no top-p step")  # a variant that cannot run on a case says nothing about it
    probs = softmax(x)
    order = np.argsort(-x, axis=-1, kind="stable")
    keep_sorted = np.take_along_axis(probs, order, -1).cumsum(-1) < top_p  # the token's own mass counted in
    keep = np.zeros_like(keep_sorted)
    np.put_along_axis(keep, order, keep_sorted, -1)
    return np.where(keep, x, -np.inf)


def _top_p_one_more(logits, temperature=1.0, top_k=None, top_p=None):  # keeps a token whose mass before is = p
    x = filter_logits(logits, temperature, top_k, None)
    if top_p is None or temperature == 0:
        return x
    probs = softmax(x)
    order = np.argsort(-x, axis=-1, kind="stable")
    sorted_p = np.take_along_axis(probs, order, -1)
    keep_sorted = sorted_p.cumsum(-1) - sorted_p <= top_p * (1 + 1e-9)  # ≤ p, with room for the sum's rounding
    keep = np.zeros_like(keep_sorted)
    np.put_along_axis(keep, order, keep_sorted, -1)
    return np.where(keep, x, -np.inf)


def _nucleus(scores, top_p, scatter=True, sign=-1):  # [..., v] -> [..., v] bool: the tokens top-p keeps
    """The nucleus read from scores; the slips: the mask left in sorted order, the order ascending (sign=+1)."""
    probs = softmax(scores)
    order = np.argsort(sign * scores, axis=-1, kind="stable")
    sorted_p = np.take_along_axis(probs, order, -1)
    keep_sorted = sorted_p.cumsum(-1) - sorted_p < top_p  # the mass before each token, below p
    if not scatter:
        return keep_sorted  # the slip: left in sorted order
    keep = np.zeros_like(keep_sorted)
    np.put_along_axis(keep, order, keep_sorted, -1)
    return keep


def _top_p_variant(read):
    """filter_logits whose top-p step reads the nucleus from read(logits, temperature, top_k) -> (scores, scatter):
    the logits before the temperature, the probabilities before top-k's cut, or a mask left in sorted order."""
    def variant(logits, temperature=1.0, top_k=None, top_p=None):
        if top_p is None or temperature == 0:
            raise ValueError("no top-p step")  # a variant that cannot run on a case says nothing about it
        kept_k = filter_logits(logits, temperature, top_k, None)  # [..., v] scaled, top-k applied
        scores, scatter, *sign = read(np.asarray(logits), temperature, top_k, kept_k)
        return np.where(_nucleus(scores, top_p, scatter, *sign), kept_k, -np.inf)
    return variant


UNSORTED_MASK = _top_p_variant(lambda x, T, k, kept_k: (kept_k, False))
BEFORE_TEMPERATURE = _top_p_variant(lambda x, T, k, kept_k: (filter_logits(x, 1.0, k, None), True))
BEFORE_TOP_K = _top_p_variant(lambda x, T, k, kept_k: (filter_logits(x, T), True))  # the full distribution's nucleus
RAW_LOGITS = _top_p_variant(lambda x, T, k, kept_k: (x, True))  # before the temperature and before top-k
ASCENDING = _top_p_variant(lambda x, T, k, kept_k: (kept_k, True, +1))  # the least likely first


def _top_k_at(index):
    """filter_logits whose k-th largest is read at np.sort(x)[..., index(k)]: one too many, or ascending."""
    def variant(logits, temperature=1.0, top_k=None, top_p=None):
        if not top_k or temperature == 0:
            raise ValueError("no top-k step")
        x = filter_logits(logits, temperature)
        kth = np.sort(x, axis=-1)[..., index(top_k)][..., None]
        return filter_logits(np.where(x >= kth, x, -np.inf) * temperature, temperature, None, top_p)
    return variant


def _temperature_last(logits, temperature=1.0, top_k=None, top_p=None):  # top-k, top-p at T = 1, then / T
    if temperature in (0, 1):
        raise ValueError("no temperature to move")
    x = filter_logits(logits, 1.0, top_k, top_p)
    return (x / x.dtype.type(temperature)).astype(x.dtype)


def _filter_in_float64(logits, temperature=1.0, top_k=None, top_p=None):  # np.asarray(logits, dtype=float)
    return filter_logits(np.asarray(logits, dtype=np.float64), temperature, top_k, top_p)


FILTER_LOGITS = Spec(
    "filter_logits", filter_logits, filter_cases, "transformer/core/sampling.py", dims=("…", "v"),
    mistakes=[Mistake("the cumulative sum counts the token's own mass, so the token that crosses p is dropped, and "
                      "when the most likely token alone holds p nothing is left: a token stays when the mass of the "
                      "tokens MORE likely than it, cumsum − p_token, is below p (the most likely always stays)",
                      variant=_top_p_inclusive),
              Mistake("keep the token that crosses p: a token stays when the mass of the tokens MORE likely than it "
                      "is below p (so the kept mass is ≥ p)", variant=_top_p_strict),
              Mistake("one token too many at the boundary: a token stays when the mass of the tokens more likely "
                      "than it is strictly below p (<, not ≤); once that mass reaches p the nucleus is full",
                      variant=_top_p_one_more),
              Mistake("float32 logits come back as float64: keep the logits' dtype (np.asarray(logits), not "
                      "np.asarray(logits, dtype=float))", variant=_filter_in_float64),
              Mistake("divide the logits by the temperature (T < 1 sharpens, T > 1 flattens)",
                      variant=lambda logits, temperature=1.0, top_k=None, top_p=None:
                      filter_logits(logits * temperature * temperature, temperature, top_k, top_p)),
              Mistake("divide by the temperature first, then top-k and top-p on the scaled logits (HF's order): "
                      "the temperature changes which tokens top-p keeps", variant=_temperature_last),
              Mistake("the keep mask is in sorted order: put it back in vocabulary order (keep[order] = keep_sorted, "
                      "or np.put_along_axis) before applying it", variant=UNSORTED_MASK),
              Mistake("top-p reads the probabilities after the temperature: softmax(x / T), not softmax(x)",
                      variant=BEFORE_TEMPERATURE),
              Mistake("top-k first, then top-p over the tokens top-k kept, their probabilities renormalised (the "
                      "softmax of the top-k-filtered logits, not of all)", variant=BEFORE_TOP_K),
              Mistake("top_k keeps every logit equal to the k-th largest (x >= kth), so a tie at the k-th keeps more "
                      "than k tokens, as HF does", tag="k-ties"),
              Mistake("temperature 0 keeps one token, the first maximum (np.argmax), even when two logits tie",
                      tag="greedy-ties"),
              Mistake("top-p takes tied tokens in vocabulary order: a stable sort, np.argsort(-x, kind='stable') (the "
                      "default quicksort may put a later id first)", tag="p-ties"),
              Mistake("top_k keeps the k largest: the k-th largest is np.sort(x)[..., -k] (np.sort is ascending), so "
                      "k tokens, not k + 1", variant=_top_k_at(lambda k: -k - 1)),
              Mistake("np.sort sorts ascending: the k-th largest is sorted[..., -k], not sorted[..., k − 1]",
                      variant=_top_k_at(lambda k: k - 1)),
              Mistake("top-p reads the tokens from the most likely down: np.argsort(-x, kind='stable'), not ascending",
                      variant=ASCENDING),
              Mistake("top-p reads the probabilities after the temperature: softmax(x / T), not softmax(x)",
                      variant=RAW_LOGITS),
              Mistake("temperature 0 means greedy: keep only the argmax, every other logit −inf", tag="greedy"),
              Mistake("top_k keeps the k largest logits (ties at the k-th all kept); the others become −inf",
                      tag="top_k"),
              Mistake("the removed logits must be −inf (probability exactly 0 after softmax), not 0", tag="top_p")])


# --- lesson 11: the draw -----------------------------------------------------------------------------------------
class GivenUniforms(np.random.Generator):
    """A NumPy Generator whose uniform numbers are the case's, in order: rng.random(…) and rng.uniform(…) hand them
    out (any size, any dtype), and so does rng.choice(v, p=p), which draws through rng.random. The learner's draw and
    the package's then meet the same u, however each asks for it."""

    def __init__(self, us):
        super().__init__(np.random.PCG64(0))
        self.us = list(us)

    def random(self, size=None, dtype=np.float64, out=None):
        n = 1 if size is None else int(np.prod(size))
        if n > len(self.us):
            raise ValueError(f"this case's rng holds one uniform number a row ({len(self.us)} left), and the code "
                             f"asked for {n}: draw u = rng.random() once for each row, not once for each token")
        taken, self.us = self.us[:n], self.us[n:]
        values = np.array(taken, dtype=dtype)
        return values[0] if size is None else values.reshape(size)

    def uniform(self, low=0.0, high=1.0, size=None):
        return low + (high - low) * self.random(size)

    def _other_draw(self, name):
        raise ValueError(f"rng.{name} was called: this case's rng hands out its own uniform numbers, one a row, and "
                         "only through rng.random, rng.uniform or rng.choice(v, p=p). Draw by the inverse CDF: "
                         "u = rng.random(), then the first token whose cumulative probability exceeds u (a Gumbel-max "
                         "or other draw picks from the same distribution, but not the token this u gives)")

    def __deepcopy__(self, memo):  # fresh() copies a case: the copy hands out the same numbers from the start
        return GivenUniforms(self.us)

    def __repr__(self):
        return f"rng handing out u = {', '.join(f'{u:g}' for u in self.us)}"


# every other way to draw: named, instead of being told later that the case's numbers were never used
for _name in ("integers", "standard_normal", "normal", "gumbel", "exponential", "standard_exponential", "logistic",
              "standard_gamma", "gamma", "beta", "binomial", "multinomial", "poisson", "permutation", "permuted",
              "shuffle", "bytes", "dirichlet", "laplace", "standard_cauchy"):
    setattr(GivenUniforms, _name, lambda self, *args, _name=_name, **kwargs: self._other_draw(_name))
del _name


def sample_cases():
    p4 = np.log(np.array([[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1], [0.25, 0.25, 0.25, 0.25]]))
    p5 = np.log(np.array([[0.3, 0.25, 0.2, 0.15, 0.1], [0.1, 0.15, 0.2, 0.25, 0.3]]))
    wide = _rng(112).standard_normal((2, 6)) * 2
    return [Case("temperature 0: logits (3, 5), each row's argmax (row 2 ties ids 1 and 3: the first)",
                 (np.array([[0.1, 2.0, -1.0, 0.5, 1.0], [3.0, 0.0, 0.0, 0.0, 0.0], [0.0, 4.0, 1.0, 4.0, 0.0]]),),
                 {"temperature": 0.0}, frozenset({"greedy"})),
            Case("temperature 1, p = [.1 .2 .3 .4], [.4 .3 .2 .1], [.25 ×4], u = 0.65, 0.65, 0.9", (p4,),
                 {"temperature": 1.0, "rng": GivenUniforms([0.65, 0.65, 0.9])}, frozenset({"draw"})),
            Case("temperature 0.5, top_k=2, p = [.3 .25 .2 .15 .1] and reversed, u = 0.75, 0.43", (p5,),
                 {"temperature": 0.5, "top_k": 2, "rng": GivenUniforms([0.75, 0.43])}, frozenset({"draw", "filter"})),
            Case("temperature 1, top_p=0.55 of [.4 .3 .2 .1], u = 0.7", (p4[1],),
                 {"temperature": 1.0, "top_p": 0.55, "rng": GivenUniforms([0.7])},
                 frozenset({"draw", "filter", "one-row"})),
            Case("temperature 2, logits (2, 6), u = 0.45, 0.05", (wide,),
                 {"temperature": 2.0, "rng": GivenUniforms([0.45, 0.05])}, frozenset({"draw"}))]


def run_sample(fn, case):
    """The ids fn returns, after which the case's rng must be spent: one uniform number for each row, no fewer (a
    draw made with another generator, or one u for the whole batch, is told here by what it left unused)."""
    args, kwargs = fresh(case)
    ids = fn(*args, **kwargs)
    rng = kwargs.get("rng")
    if isinstance(rng, GivenUniforms) and rng.us:
        given = len(case.kwargs["rng"].us)
        if len(rng.us) == given:
            rows = "the row" if given == 1 else f"each of the {given} rows"
            raise ValueError(f"the rng given was never used: at temperature > 0 the token is drawn with it, one "
                             f"u = rng.random() for {rows}")
        raise ValueError(f"the draw used {given - len(rng.us)} of the rng's {given} uniform numbers: draw one u for "
                         "EACH row (rng.random(size=(b, 1))), each row a sequence of its own")
    return ids


def _draw(logits, temperature, top_k, top_p, rng):
    """Inverse CDF on next-token probabilities: one u a row, the first token whose cumulative probability exceeds u."""
    p = softmax(filter_logits(logits, temperature, top_k, top_p))  # [..., v]
    c = np.cumsum(p, axis=-1)
    lead = c.shape[:-1]
    idx = np.minimum(np.sum(c <= rng.random(size=(*lead, 1)), axis=-1), c.shape[-1] - 1)
    return idx if lead else int(idx)


def _sample_slip(temperature_used=True, filters_used=True):
    def sample(logits, temperature=0.0, top_k=None, top_p=None, rng=None):
        if float(temperature) == 0:
            return np.argmax(logits, axis=-1)
        return _draw(logits, temperature if temperature_used else 1.0, top_k if filters_used else None,
                     top_p if filters_used else None, rng)
    return sample


SAMPLE_NEXT = Spec(
    "sample_next", sample_next, sample_cases, "transformer/core/sampling.py", dims=("…",), dtype_rule="",
    call=run_sample,
    mistakes=[Mistake("draw from the filtered distribution: softmax(filter_logits(logits, temperature, top_k, top_p)) "
                      "— the temperature is left out", variant=_sample_slip(temperature_used=False)),
              Mistake("draw from the filtered distribution: softmax(filter_logits(logits, temperature, top_k, top_p)) "
                      "— top_k and top_p are left out", variant=_sample_slip(filters_used=False)),
              Mistake("use the rng passed in (np.random.default_rng(rng) when it is a seed): u = rng.random() for "
                      "each row, then the first token whose cumulative probability exceeds u", raises=r"never used"),
              Mistake("one u for each row: u = rng.random(size=(*logits.shape[:-1], 1)) compares with every row's "
                      "cumulative probabilities at once", raises=r"used \d+ of the rng"),
              Mistake("draw u = rng.random() once for each row and pick the first token whose cumulative probability "
                      "exceeds it (np.cumsum, then a comparison with u); rng.choice(v, p=p) draws the same way",
                      raises=r"one uniform number a row"),
              Mistake("the check hands out the case's own uniform numbers: draw u = rng.random() for each row and "
                      "take the first token whose cumulative probability exceeds it", raises=r"was called: this case"),
              Mistake("temperature 0 is greedy: each row's argmax, with no draw (dividing the logits by T = 0 gives "
                      "inf and NaN)", tag="greedy")])
