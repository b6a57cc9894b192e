"""The refusals of `flash/backward.py`, one check per public function and of the same name."""
from __future__ import annotations

from .shared_checks import backward_inputs, io_counter, packed_doc, tile_options


def attention_backward_naive(dout, q, k, v, *, causal, scale):
    backward_inputs(q, k, v, causal, scale, dout=dout)


def flash_attention_backward(dout, q, k, v, out, lse, *, causal, block_q, block_k, scale, io, doc):
    backward_inputs(q, k, v, causal, scale, dout=dout, out=out, lse=lse)
    tile_options(causal, block_q, block_k)
    packed_doc(doc, q.shape[0], q.shape[2], k.shape[2])
    io_counter(io)
