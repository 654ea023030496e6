"""The scaling study: what a grid of configurations measured, a cost model fitted to it, and advice from both."""
