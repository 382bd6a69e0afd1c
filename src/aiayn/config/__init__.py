"""Configuration dataclasses and the named presets.

Every config is a frozen dataclass validated in ``__post_init__``; a bad value raises
``ValueError`` naming the field and what is allowed. Configs round-trip through plain dicts
(JSON / TOML), and unknown keys are errors rather than silently ignored.

``model`` holds the model config, ``run`` the run config (data, train) and its TOML reading,
``fields`` the checks they share; every name is importable from here.
"""

from aiayn.config.fields import from_dict
from aiayn.config.model import (
    ACTIVATIONS,
    ARCHITECTURE_KEYS,
    BOS,
    EOS,
    FAMILIES,
    FINE_TUNE_KEYS,
    MASK,
    PAD,
    POOLERS,
    POOLINGS,
    POS_ENCODINGS,
    TIE_MODES,
    UNK,
    ModelConfig,
)
from aiayn.config.run import (
    SCHEDULES,
    TASKS,
    TOKENIZERS,
    DataConfig,
    RunConfig,
    TrainConfig,
    load_run_config,
    parse_override,
)

__all__ = [
    "ACTIVATIONS",
    "ARCHITECTURE_KEYS",
    "BOS",
    "EOS",
    "FAMILIES",
    "FINE_TUNE_KEYS",
    "MASK",
    "PAD",
    "POOLERS",
    "POOLINGS",
    "POS_ENCODINGS",
    "SCHEDULES",
    "TASKS",
    "TIE_MODES",
    "TOKENIZERS",
    "UNK",
    "DataConfig",
    "ModelConfig",
    "RunConfig",
    "TrainConfig",
    "from_dict",
    "load_run_config",
    "parse_override",
]
