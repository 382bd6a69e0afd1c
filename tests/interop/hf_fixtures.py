"""Tiny Hugging Face models and tokenizers built from configs (no download), saved to disk."""

from __future__ import annotations

import functools
from pathlib import Path

import torch

WORDS = "the a cat dog sat on mat and ran fast big small red blue house tree".split()
LETTERS = list("abcdefghijklmnopqrstuvwxyz")


def wordpiece_vocab() -> list[str]:
    """BERT's layout in small: [PAD] first, the other specials further in, then pieces."""
    pieces = ["[PAD]", "!", ",", ".", "?", "'", "-", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    pieces += WORDS + LETTERS + ["##" + c for c in "sedyn"]
    return pieces


def bert_tokenizer(directory: Path, lowercase: bool = True):
    """A WordPiece tokenizer as transformers saves it (tokenizer.json + config files)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(wordpiece_vocab())}
    tok = Tokenizer(models.WordPiece(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    tok.decoder = decoders.WordPiece()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    )
    fast.save_pretrained(directory)
    return fast


def bert_model(directory: Path, architecture: str = "BertForSequenceClassification", **config):
    """A random BERT of ``architecture`` (weights larger than at init, so outputs vary)."""
    import transformers

    settings = dict(
        vocab_size=len(wordpiece_vocab()) + 3,  # the model may have ids the tokenizer lacks
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=48,
        max_position_embeddings=40,
        type_vocab_size=2,
        initializer_range=0.3,
        num_labels=3,
        id2label={0: "neg", 1: "neutral", 2: "pos"},
        label2id={"neg": 0, "neutral": 1, "pos": 2},
    )
    settings.update(config)
    torch.manual_seed(0)
    model = getattr(transformers, architecture)(transformers.BertConfig(**settings)).eval()
    with torch.no_grad():  # LayerNorms and biases start at 1 / 0: give them values too
        for name, p in model.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
        head = getattr(model, "cls", None)
        if head is not None:  # the head's two names for its bias hold one value
            head.predictions.decoder.bias.copy_(head.predictions.bias)
    model.save_pretrained(directory)
    return model


CORPUS = [
    "The cat sat on the mat. The dog ran fast!",
    "A big red house stood by the small blue tree.",
    "Naïve café owners wrote résumés — in 2024, at 9:30.",
    "    indented  text\twith tabs\nand lines",
] * 5


def byte_bpe_tokenizer(directory: Path, vocab_size: int = 300):
    """A byte-level BPE like GPT-2's, trained on a few lines, <|endoftext|> last."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(CORPUS, trainer)
    tok.add_special_tokens(["<|endoftext|>"])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        unk_token="<|endoftext|>",
    )
    fast.save_pretrained(directory)
    return fast


def gpt2_model(directory: Path, n_vocab: int, eos: int, **config):
    """A random GPT2LMHeadModel (weights larger than at init, so outputs vary)."""
    import transformers

    settings = dict(
        vocab_size=n_vocab,
        n_positions=48,
        n_embd=32,
        n_layer=2,
        n_head=4,
        bos_token_id=eos,
        eos_token_id=eos,
        initializer_range=0.3,
    )
    settings.update(config)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(**settings)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "ln_" in name or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(directory)
    return model


def ding_lines(lang: str, n: int = 300) -> list[str]:
    import gzip

    path = Path(__file__).parents[2] / "data" / "ding-de-en" / f"train.{lang}.gz"
    return gzip.decompress(path.read_bytes()).decode("utf-8").split("\n")[:n]


def sentencepiece_model(lines: list[str], vocab_size: int) -> bytes:
    """A small unigram sentencepiece model, as OPUS-MT ships one per language."""
    return _sentencepiece_model(tuple(lines), vocab_size)


@functools.cache  # trained once per test session
def _sentencepiece_model(lines: tuple[str, ...], vocab_size: int) -> bytes:
    import io

    import sentencepiece as spm

    out = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=out,
        vocab_size=vocab_size,
        character_coverage=0.98,
        minloglevel=2,
        num_threads=1,
    )
    return out.getvalue()


def marian_tokenizer(directory: Path):
    """OPUS-MT's layout in small: source.spm, target.spm and a joint vocab.json with
    </s> = 0, <unk> = 1, then the pieces, <pad> last."""
    import json

    import sentencepiece as spm

    directory.mkdir(parents=True, exist_ok=True)
    source, target = (
        sentencepiece_model(ding_lines("de"), 80),
        sentencepiece_model(ding_lines("en"), 80),
    )
    (directory / "source.spm").write_bytes(source)
    (directory / "target.spm").write_bytes(target)
    pieces = ["</s>", "<unk>"]
    for proto in (source, target):
        sp = spm.SentencePieceProcessor()
        sp.load_from_serialized_proto(proto)
        for i in range(sp.get_piece_size()):
            piece = sp.id_to_piece(i)
            if not (sp.is_control(i) or sp.is_unknown(i)) and piece not in pieces:
                pieces.append(piece)
    pieces.append("<pad>")
    (directory / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(pieces)}))
    (directory / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "MarianTokenizer", "source_lang": "de", "target_lang": "en"})
    )
    return len(pieces)


def marian_model(directory: Path, vocab_size: int, **config):
    """A random MarianMTModel, OPUS-MT style: decoding starts from <pad> (the last id)."""
    import transformers

    settings = dict(
        vocab_size=vocab_size,
        decoder_vocab_size=vocab_size,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=48,
        decoder_ffn_dim=48,
        max_position_embeddings=64,
        activation_function="swish",
        scale_embedding=True,
        pad_token_id=vocab_size - 1,
        decoder_start_token_id=vocab_size - 1,
        eos_token_id=0,
        forced_eos_token_id=None,
        init_std=0.3,
    )
    settings.update(config)
    torch.manual_seed(0)
    model = transformers.MarianMTModel(transformers.MarianConfig(**settings)).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_norm" in name or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))
        model.final_logits_bias.normal_()
        model.model.decoder.embed_tokens.weight[settings["pad_token_id"]] = 0.0  # as OPUS-MT
    model.save_pretrained(directory)
    return model
