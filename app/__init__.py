"""Deskhand.

numpy (embeddings for knowledge and memory search) links OpenBLAS, whose worker threads keep
spinning after a matrix product and take every core from the window for a while; Deskhand's
products are small, so one thread is as fast. Set before numpy can be imported.
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
