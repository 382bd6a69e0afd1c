import pytest
import torch

from aiayn import ModelConfig, build_model
from aiayn.model.summary import parameter_table


def closed_form_encoder_decoder(v: int, d: int, ff: int, n_enc: int, n_dec: int) -> int:
    """Parameters of the paper's model with a shared vocabulary and three-way tying."""
    attention = 4 * (d * d + d)
    ffn = d * ff + ff + ff * d + d
    norm = 2 * d
    encoder = n_enc * (attention + ffn + 2 * norm)
    decoder = n_dec * (2 * attention + ffn + 3 * norm)
    return v * d + encoder + decoder


@pytest.mark.parametrize("preset, paper, tolerance", [("base", 65e6, 0.03), ("big", 213e6, 0.01)])
def test_paper_parameter_counts(preset, paper, tolerance):
    config = ModelConfig.preset(preset)
    assert config.vocab_size == 37000 and config.tie_embeddings == "all"
    with torch.device("meta"):  # shapes only, no memory or init cost
        n = sum(p.numel() for p in build_model(config).parameters())
    assert n == closed_form_encoder_decoder(37000, config.d_model, config.d_ff, 6, 6)
    assert abs(n - paper) / paper <= tolerance


def test_base_encoder_matrices_match_the_paper_figure():
    rows = {r.component: r for r in parameter_table(build_model(ModelConfig.preset("base")))}
    attn, ffn = rows["encoder self-attention"], rows["encoder feed-forward"]
    assert attn.matrices + ffn.matrices + ffn.vectors == 18_889_728


@pytest.mark.parametrize(
    "field, value, words",
    [
        ("d_model", 31, "divisible by n_heads"),
        ("dropout", 1.0, "dropout must be in [0.0, 1.0)"),
        ("pos_encoding", "rotary", "sinusoidal, learned"),
        ("tie_embeddings", "some", "none, decoder, all"),
        ("activation", "tanh", "relu, gelu, gelu_tanh, swish"),
        ("embed_scale", 1, "embed_scale must be true or false"),
        ("n_token_types", -1, "n_token_types must be >= 0"),
        ("pooler", "relu", "pooler must be one of none, tanh"),
        ("n_heads", 0, "n_heads must be >= 1"),
        ("family", "rnn", "encoder-decoder"),
        ("pooling", "sum", "max, mean, first"),
        ("n_classes", 1, "n_classes"),
        ("vocab_size", "big", "vocab_size must be an integer"),
    ],
)
def test_bad_values_name_the_field_and_allowed_values(field, value, words):
    with pytest.raises(ValueError, match=words.replace("[", r"\[").replace(")", r"\)")):
        ModelConfig.preset("tiny", **{field: value})


def test_unknown_keys_and_presets_are_errors():
    with pytest.raises(ValueError, match="unknown key.*model.d_modle"):
        ModelConfig.from_dict({"d_modle": 8})
    with pytest.raises(ValueError, match="unknown preset 'huge'.*tiny, small, base, big"):
        ModelConfig.preset("huge")


def test_three_way_tying_needs_a_shared_vocabulary():
    with pytest.raises(ValueError, match="shared vocabulary"):
        ModelConfig.preset("tiny", src_vocab_size=10, tgt_vocab_size=12)
    config = ModelConfig.preset(
        "tiny", src_vocab_size=10, tgt_vocab_size=12, tie_embeddings="decoder"
    )
    model = build_model(config)
    assert model.src_embed.token.weight.shape[0] == 10 and model.unembed.weight.shape[0] == 12


def test_round_trip_through_dict():
    config = ModelConfig.preset("small", norm_first=True)
    assert ModelConfig.from_dict(config.to_dict()) == config


def test_a_fine_tune_takes_the_architecture_it_leaves_out_from_init_from(tmp_path):
    """train.init_from: the [model] keys a config leaves out are the model directory's; a key
    the table or its preset gives still decides; dropout and a classifier's head keep their
    defaults unless given; without init_from nothing changes."""
    import json

    from aiayn.config import FINE_TUNE_KEYS, load_run_config

    saved = ModelConfig.preset(
        "tiny", d_ff=48, norm_first=True, pos_encoding="learned", source_eos=False, dropout=0.3
    )
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(json.dumps({"model": saved.to_dict()}))
    init = f'train.init_from="{tmp_path / "m"}"'

    run = load_run_config(None, [init])
    for key, value in saved.to_dict().items():
        expected = getattr(ModelConfig(), key) if key in FINE_TUNE_KEYS else value
        assert getattr(run.model, key) == expected, key
    assert run.model.dropout == ModelConfig().dropout != saved.dropout
    given = load_run_config(None, [init, "model.d_ff=64", "model.dropout=0.2"])
    assert (given.model.d_ff, given.model.dropout, given.model.d_model) == (64, 0.2, 32)
    preset = load_run_config(None, [init, 'model.preset="small"'])
    assert (preset.model.d_model, preset.model.norm_first) == (256, True)  # preset, then saved
    assert load_run_config(None, []).model == ModelConfig()
    missing = load_run_config(None, [f'train.init_from="{tmp_path / "none"}"'])
    assert missing.model == ModelConfig()  # the trainer names the missing directory
