"""Marian <-> aiayn's encoder-decoder (work in progress)."""
