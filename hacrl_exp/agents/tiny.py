"""Tiny local agents: tokenizers built with `tokenizers`, and OPT / GPT-2 / Llama models built from their configs.

Nothing is downloaded. Two tokenizer kinds make agents genuinely heterogeneous (shared/docs/embedded-task-notes.md):
'char' (one token per character) and 'bpe' (merges only inside digit runs). Both decode by plain concatenation, so
decode(encode(text)) == text for any text over the alphabet, and no special token is added on encode: callers append
EOS themselves. Tokenizers pad on the left (for generation) and are loaded with `PreTrainedTokenizerFast`, never
`AutoTokenizer` (shared/docs/dependencies.md).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import transformers
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

PAD, EOS, UNK = "<pad>", "<eos>", "<unk>"
SPECIAL_TOKENS = (PAD, EOS, UNK)
"""Ids 0, 1, 2 in every tokenizer built here. EOS doubles as BOS (as in GPT-2); nothing inserts it automatically."""

TOKENIZER_KINDS = ("char", "bpe")
ARCHS = ("opt", "gpt2", "llama")


def _check_alphabet(alphabet: str) -> list[str]:
    chars = list(dict.fromkeys(alphabet))
    if not chars:
        raise ValueError("alphabet is empty")
    if any(c in "<>" for c in chars):
        raise ValueError(f"alphabet={alphabet!r} contains '<' or '>', which special tokens use")
    return chars


def build_tokenizer(
    kind: str,
    alphabet: str,
    corpus: Iterable[str] | None = None,
    vocab_size: int = 96,
    model_max_length: int = 128,
) -> transformers.PreTrainedTokenizerFast:
    """A fast tokenizer over `alphabet`: 'char' (vocab = 3 specials + alphabet) or 'bpe' (trained on `corpus`).

    'bpe' pre-splits text into digit runs and single other characters, so merges only join digits; its vocabulary
    holds at most `vocab_size` tokens (fewer if the corpus has fewer merges). Characters outside the alphabet map to
    <unk>. padding_side='left' and `model_max_length` are set in the constructor, so save_pretrained keeps them.
    """
    chars = _check_alphabet(alphabet)
    if kind == "char":
        vocab = {tok: i for i, tok in enumerate([*SPECIAL_TOKENS, *chars])}
        tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
        tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    elif kind == "bpe":
        if corpus is None:
            raise ValueError("corpus=None: kind='bpe' needs a corpus to train on, e.g. task.sample_texts(2000)")
        if vocab_size < len(SPECIAL_TOKENS) + len(chars):
            raise ValueError(f"vocab_size={vocab_size} is below the {len(SPECIAL_TOKENS) + len(chars)} base tokens")
        tok = Tokenizer(models.BPE(unk_token=UNK))
        # digit runs stay whole (merge candidates); every other character is its own pre-token
        tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[0-9]+|[^0-9]"), behavior="isolated")
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=list(SPECIAL_TOKENS),
            initial_alphabet=chars,
            limit_alphabet=len(chars),
            min_frequency=2,
            show_progress=False,
        )
        tok.train_from_iterator(corpus, trainer=trainer)
    else:
        raise ValueError(f"kind={kind!r} is not a tokenizer kind. Choose from {list(TOKENIZER_KINDS)}")
    tok.decoder = decoders.Fuse()  # concatenate tokens: no spaces, no byte-level markers
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=PAD,
        eos_token=EOS,
        bos_token=EOS,
        unk_token=UNK,
        padding_side="left",
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,
    )


def _config(arch: str, vocab: int, hidden: int, layers: int, heads: int, inter: int, max_pos: int, ids: dict):
    """The transformers config of one arch, all dropout 0 and embeddings tied."""
    if arch == "opt":
        return transformers.OPTConfig(
            vocab_size=vocab,
            hidden_size=hidden,
            word_embed_proj_dim=hidden,
            num_hidden_layers=layers,
            num_attention_heads=heads,
            ffn_dim=inter,
            max_position_embeddings=max_pos,
            dropout=0.0,
            attention_dropout=0.0,
            activation_dropout=0.0,
            layerdrop=0.0,
            tie_word_embeddings=True,
            **ids,
        )
    if arch == "gpt2":
        return transformers.GPT2Config(
            vocab_size=vocab,
            n_embd=hidden,
            n_layer=layers,
            n_head=heads,
            n_inner=inter,
            n_positions=max_pos,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            summary_first_dropout=0.0,
            tie_word_embeddings=True,
            **ids,
        )
    return transformers.LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=inter,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        head_dim=hidden // heads,
        max_position_embeddings=max_pos,
        attention_dropout=0.0,
        mlp_bias=False,
        attention_bias=False,
        tie_word_embeddings=True,
        **ids,
    )


def build_tiny_model(
    arch: str,
    tokenizer: transformers.PreTrainedTokenizerBase,
    hidden_size: int,
    num_layers: int,
    num_heads: int,
    intermediate_size: int | None = None,
    max_positions: int = 128,
    seed: int = 0,
) -> transformers.PreTrainedModel:
    """A randomly initialised float32 causal LM ('opt', 'gpt2' or 'llama') sized to `tokenizer`, in eval mode.

    vocab = len(tokenizer); pad/eos/bos ids come from the tokenizer; dropout is 0 everywhere, so eval mode is also
    right for training. `intermediate_size` defaults to 4 × hidden_size. Initialisation depends on `seed` only (the
    global torch RNG is left untouched).
    """
    if arch not in ARCHS:
        raise ValueError(f"arch={arch!r} is not supported. Choose from {list(ARCHS)}")
    for name, value in (("hidden_size", hidden_size), ("num_layers", num_layers), ("num_heads", num_heads)):
        if value < 1:
            raise ValueError(f"{name}={value} must be >= 1")
    if hidden_size % num_heads:
        raise ValueError(f"hidden_size={hidden_size} is not divisible by num_heads={num_heads}")
    if tokenizer.pad_token_id is None or tokenizer.eos_token_id is None:
        raise ValueError("tokenizer has no pad or eos token; build it with build_tokenizer")
    bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    ids = {"pad_token_id": tokenizer.pad_token_id, "eos_token_id": tokenizer.eos_token_id, "bos_token_id": bos}
    inter = intermediate_size or 4 * hidden_size
    config = _config(arch, len(tokenizer), hidden_size, num_layers, num_heads, inter, max_positions, ids)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    gen = model.generation_config
    gen.pad_token_id, gen.eos_token_id, gen.bos_token_id = ids["pad_token_id"], ids["eos_token_id"], bos
    model.loss_type = "ForCausalLM"  # the model attribute (not the config's) silences a per-process warning
    return model.eval()
