"""Training from scratch, the machinery: the optimizer, rows and batches, the loop, checkpoints, and
the trainable models (the tiny decoder, the encoder–decoder and its greedy decoding).

Every backward pass sits beside its forward in transformer/core/ and models/; this folder puts them
together. The tasks that use it (induction, translation) are in transformer/tasks/.
"""
