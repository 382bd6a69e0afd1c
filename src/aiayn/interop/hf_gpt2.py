"""GPT-2 <-> aiayn's decoder-only model (work in progress)."""
