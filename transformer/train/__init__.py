"""Training from scratch: the optimizer, the data, the loop, and the trainable models.

Every backward pass sits beside its forward in transformer/core/; this folder puts them together.
"""
