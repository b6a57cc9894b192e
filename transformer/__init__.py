"""transformer: Transformer attention, formula by formula, in NumPy (and CuPy).

Dimension names used everywhere: b batch, n sequence (n_q, n_k), d model width,
h query heads, h_kv key/value heads, d_h head size, v vocabulary, L layers.
"""
# the attention core
from .backend import get_xp, namespace, to_numpy, import_cupy, reuse_freed_memory
from .core.attention import softmax, scaled_dot_product_attention, repeat_kv, attention_scores
from .core.additive import additive_scores, additive_attention, additive_peak_bytes
from .core.embedding import embed, lm_head
from .core.positions import (sinusoidal_positions, learned_positions, rope_angles, rope_cos_sin,
                             apply_rope_interleaved, apply_rope_half, interleaved_to_half_permutation)
from .core.heads import split_heads, merge_heads, AttentionWeights, multi_head_attention, qkv_heads
from .core.masks import (causal_mask, bidirectional_mask, padding_mask, sliding_window_mask,
                    strided_mask, fixed_mask, global_mask, random_mask, same_document, document_mask,
                    attended_pairs)
from .core.packing import Packed, pack_documents, unpack, row_groups, map_rows, continued_positions, packing_report
from .core.layers import (layer_norm, rms_norm, relu, gelu, erf, silu, sigmoid, ffn, glu_ffn,
                     swiglu_ffn, residual)
from .core.kv_cache import KVCache

# FlashAttention: online softmax, tiling, backward, IO and memory counts; the CUDA kernels
from .core.online_softmax import (online_softmax, online_softmax_stats, online_softmax_history, online_attention_update,
                                  merge_softmax_stats, exp_minus)
from .flash.tiled import flash_attention, standard_attention, FlashTrace, TileStep
from .flash.tiled_fast import (flash_attention_fast, flash_attention_fast_peak_bytes, fast_block_size,
                               cache_bytes, blas_threads)  # the CPU fast path beside the readable loop
from .flash.backward import flash_attention_backward, attention_backward_naive
from .flash.io_count import (IOCounter, measure_peak_bytes, measure_peak_bytes_gpu, standard_attention_io,
                       flash1_io, flash2_io, paper_block_sizes, standard_attention_peak_bytes,
                       flash_attention_peak_bytes, visible_key_tiles)
from .flash.cuda import flash_attention_cuda, flash_attention_backward_cuda
from .flash import cuda_kernels  # the kernels' host side as pure functions: T.cuda_kernels.launch_plan

# a real decoder: SmolLM2-135M (or any Llama GGUF), its BPE tokenizer and sampling
from .tokenizers.bpe import BPETokenizer
from .core.sampling import sample_next, filter_logits, next_token_probs
from .models.llama import LlamaConfig, Llama
from .models.llama_random import random_llama
from .models.generation import GenerationStats, through_cache  # the generation loop, shared by every engine
from .models.llama import decoder_mask, forward as llama_forward
from .models.llama_fast import FastForward, decode_matrices  # the same maths through the cache, in buffers made once
from .models.decode_plan import (DecodeSizes, LaunchSpec, step_kernels, kernels_per_step, counter_uniforms,
                                 device_matrices)  # the GPU decode step: 5 kernels a layer, its plan
from .models.decode_step import DecodeStep, TwinLauncher, RecordingLauncher  # its body, under any launcher
from .models.decode_graph import StepRunner, CupyLauncher  # on a GPU: the kernels, one CUDA graph a token
from .models.llama_gguf import load_smollm2, load_llama, smollm2_path, open_gguf
from .models.llama_gguf import read_tokenizer as read_gguf_tokenizer  # the BPE alone, without the weights

# a real encoder: all-MiniLM-L6-v2 and its WordPiece tokenizer
from .tokenizers.wordpiece import WordPieceTokenizer, basic_tokenize
from .models.bert import (BertConfig, BertWeights, MiniLM, bert_embeddings, bert_encode, mean_pool, l2_normalize,
                          encoder_mask)
from .models.bert_files import load_minilm
from .models.bert import BertLayer  # = Seq2SeqEncoderLayer: a BERT layer's weights are an encoder layer's

# the original Transformer's post-norm encoder and decoder layers (cross-attention); MiniLM runs the
# encoder layer with activation=gelu, eps=1e-12. encoder_layer: the same function by the older name it
# had as MiniLM's own layer, encoder_layer(x, lw, h, *, mask=…, activation=…, eps=…)
from .models.encoder_decoder import (Seq2SeqEncoderLayer, Seq2SeqDecoderLayer, seq2seq_encoder_layer,
                                     seq2seq_decoder_layer)
from .models.encoder_decoder import seq2seq_encoder_layer as encoder_layer
from .models.encoder_decoder_params import seq2seq_encoder_weights, seq2seq_decoder_weights  # views of a params dict

# counting parameters, FLOPs and bytes; the paged KV cache
from .models.configs import ModelConfig, load_config, hf_config, from_hf, HF_CONFIGS, BUILTIN_NAMES
from .models.counting import (count_parameters, parameter_breakdown, forward_flops, prefill_flops, decode_flops,
                       kv_cache_bytes, kv_cache_bytes_per_token, attention_score_bytes,
                       arithmetic_intensity, paged_memory_report, dtype_bytes)
from .core.paged_kv import PagedKVCache, paged_attention

# training: backward passes (each beside its forward), the loss, and a tiny trainable decoder
from .core.layers import (linear, linear_backward, layer_norm_backward, rms_norm_backward, relu_backward,
                          gelu_backward, silu_backward, sigmoid_backward, ffn_backward, swiglu_ffn_backward)
from .core.embedding import embed_backward, lm_head_backward
from .core.positions import learned_positions_backward, apply_rope_half_backward, apply_rope_interleaved_backward
from .core.attention import (softmax_backward, repeat_kv_backward, scaled_dot_product_attention_backward, dropout,
                             dropout_backward)
from .core.heads import split_heads_backward, merge_heads_backward
from .core.loss import cross_entropy, cross_entropy_backward
from .models.llama_backward import forward_backward as llama_forward_backward  # llama_forward's backward, beside it
from .train.decoder import (DecoderConfig, init_decoder, decoder_forward, decoder_backward, decoder_loss_and_grads,
                            activation_bytes)
from .models.llama_params import llama_from_params, greedy_generate  # a trained decoder as a Llama: one loop

# training: the optimizer and its schedule, seeded data, checkpoints and metrics, the loop
from .train.optim import AdamWState, adamw_state, adamw_step, decays_by_default, lr_at, global_norm, clip_by_global_norm
from .train.data import (IGNORE_INDEX, HELDOUT_SEED_OFFSET, is_heldout, TrainRows, padded_rows, packed_rows,
                         next_token_targets, batches, batch_tokens)
from .tasks.induction_data import (InductionBatch, induction_batch, induction_split, induction_accuracy,
                                   induction_documents)
from .tasks.translation_data import (TranslationVocab, translation_vocab, TranslationBatch, translation_batch,
                                     translation_split, reference_translation, translation_alignment, detokenize)
from .train.checkpoint import (save_checkpoint, load_checkpoint, checkpoint_contents, checkpoint_extra, check_params,
                               write_metrics, read_metrics)
from .train.loop import train_loop

# training: the original encoder–decoder on the toy translation task
from .train.seq2seq import (Seq2SeqConfig, init_seq2seq, seq2seq_forward, seq2seq_backward,
                            seq2seq_loss_and_grads)
from .train.seq2seq_decode import translate_greedy, translate_greedy_uncached
from .tasks.translate import (TRANSLATION_SIZES, TRANSLATION_RECIPE, DEFAULT_STEPS, translation_config,
                              train_translation, translation_exact_match, load_seq2seq)

# training: the tiny decoder on the induction task, padded or packed; its heads found by a score
from .tasks.induction import (INDUCTION_SIZES, INDUCTION_STEPS, INDUCTION_RECIPE, induction_config, induction_rows,
                              induction_rows_loss, induction_heldout_accuracy, attention_maps, induction_head_scores,
                              train_induction, load_decoder, decoder_config_from)

from .version import __version__  # noqa: E402
