"""Boundaries with other libraries: Hugging Face checkpoints in and out (``hf``)."""
