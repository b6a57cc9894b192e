"""The two tasks trained from scratch, each with its data and its run: the induction task (a tiny
decoder learns to copy, induction heads form) and the toy translation task (the original
encoder–decoder learns a dictionary and an alignment).

The machinery they share is in transformer/train/: the optimizer, the loop, rows and batches,
checkpoints, and the trainable models (the decoder, the encoder–decoder and its greedy decoding).
"""
