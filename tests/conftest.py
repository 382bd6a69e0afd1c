import pytest
import torch

from aiayn import ModelConfig


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture
def tiny() -> ModelConfig:
    """Tiny encoder-decoder config, dropout off so outputs are deterministic."""
    return ModelConfig.preset("tiny", dropout=0.0, embedding_dropout=0.0)
