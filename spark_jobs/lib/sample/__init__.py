"""Synthetic Google-Patents-format corpus with a learnable, cross-lingual X-citation signal."""
