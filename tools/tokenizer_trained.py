"""Small tokenizers trained with the `tokenizers` library, one per fixture.

The real tokenizer.json files in the fixtures use only part of what the
format allows. Each builder here assembles a pipeline around the components
the real files leave out, trains a small model on the corpus and returns the
Tokenizer; gen_tokenizer_vectors.py saves it as
tests/fixtures/tokenizers/trained-NAME/tokenizer.json and writes expected
outputs for it (tools/tokenizer_coverage.py lists what each one exercises in
COVERAGE.md).

The trainers are not bit-reproducible (ties are broken in hash-map order,
even single-threaded), so once saved a fixture is reused as is unless
--retrain is given: regenerating expected outputs never changes the
tokenizers under test.
"""

import json

from tokenizers import AddedToken, Regex, Tokenizer
from tokenizers import decoders as D
from tokenizers import models as M
from tokenizers import normalizers as N
from tokenizers import pre_tokenizers as P
from tokenizers import processors as R
from tokenizers import trainers as T


def _patch(tok, fn):
    """Round-trips the tokenizer through its JSON so that options the
    trainers do not expose (byte pieces, max_input_chars_per_word) can be set."""
    data = json.loads(tok.to_str())
    fn(data)
    return Tokenizer.from_str(json.dumps(data, ensure_ascii=False))


def build_wordlevel(texts):
    tok = Tokenizer(M.WordLevel(unk_token="[UNK]"))
    tok.normalizer = N.Sequence([N.NFKC(), N.Lowercase(), N.Strip(left=True, right=True)])
    tok.pre_tokenizer = P.Whitespace()
    specials = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
    tok.train_from_iterator(texts, T.WordLevelTrainer(vocab_size=700, min_frequency=1,
                                                      show_progress=False, special_tokens=specials))
    tok.post_processor = R.BertProcessing(("[SEP]", tok.token_to_id("[SEP]")),
                                          ("[CLS]", tok.token_to_id("[CLS]")))
    # No decoder: decode() then joins tokens with single spaces.
    return tok


def build_bpe_suffix(texts):
    tok = Tokenizer(M.BPE(unk_token="<unk>", continuing_subword_prefix="##", end_of_word_suffix="</w>",
                          fuse_unk=True))
    # Non-default BertNormalizer switches: accents stripped without lowercasing,
    # CJK not spaced out.
    tok.normalizer = N.BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=True,
                                      lowercase=False)
    tok.pre_tokenizer = P.Sequence([P.WhitespaceSplit(), P.Punctuation(behavior="isolated"),
                                    P.Digits(individual_digits=True)])
    # limit_alphabet leaves rare characters out, so fuse_unk has runs of <unk> to fuse.
    tok.train_from_iterator(texts, T.BpeTrainer(vocab_size=900, min_frequency=2, show_progress=False,
                                                special_tokens=["<unk>", "<s>", "</s>", "<pad>"],
                                                limit_alphabet=120, continuing_subword_prefix="##",
                                                end_of_word_suffix="</w>"))
    tok.post_processor = R.RobertaProcessing(("</s>", tok.token_to_id("</s>")),
                                             ("<s>", tok.token_to_id("<s>")),
                                             trim_offsets=False, add_prefix_space=False)
    tok.decoder = D.BPEDecoder(suffix="</w>")
    return tok


def build_unigram_metaspace(texts):
    tok = Tokenizer(M.Unigram())
    tok.normalizer = N.Sequence([
        N.Nmt(), N.NFKD(), N.StripAccents(),
        N.Replace(Regex(" {2,}"), " "), N.Replace("``", "\""), N.Lowercase(),
    ])
    tok.pre_tokenizer = P.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    # Unigram keeps every character seen in training, so the vocabulary must
    # exceed the corpus alphabet (about 1,300 characters after NFKD).
    tok.train_from_iterator(texts, T.UnigramTrainer(vocab_size=2500, show_progress=False,
                                                    special_tokens=["<unk>", "<s>", "</s>"],
                                                    unk_token="<unk>", max_piece_length=8))
    tok.post_processor = R.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B:1 </s>:1",
        special_tokens=[("</s>", tok.token_to_id("</s>"))])
    tok.decoder = D.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    return tok


def _byte_pieces():
    return ["<0x%02X>" % b for b in range(256)]


def build_bpe_bytefallback(texts):
    tok = Tokenizer(M.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.normalizer = N.Sequence([N.NFC(), N.Prepend("▁"), N.Replace(" ", "▁")])
    # One Split per behaviour (string and regex patterns), one inverted.
    tok.pre_tokenizer = P.Sequence([
        P.Split("▁", behavior="merged_with_next"),
        P.Split(Regex(r"\p{N}+"), behavior="isolated"),
        P.Split("-", behavior="removed"),
        P.Split(",", behavior="merged_with_previous"),
        P.Split(Regex(r"[!?.]"), behavior="contiguous"),
        P.Split(Regex(r"\p{L}+"), behavior="merged_with_previous", invert=True),
    ])
    tok.train_from_iterator(texts, T.BpeTrainer(vocab_size=700, min_frequency=2, show_progress=False,
                                                special_tokens=["<unk>", "<s>", "</s>"],
                                                limit_alphabet=150))

    def add_bytes(data):
        vocab = data["model"]["vocab"]
        next_id = max(vocab.values()) + 1
        for piece in _byte_pieces():
            if piece not in vocab:
                vocab[piece] = next_id
                next_id += 1
        data["model"]["byte_fallback"] = True
        data["model"]["fuse_unk"] = True

    tok = _patch(tok, add_bytes)
    # No post-processor: add_special_tokens changes nothing here.
    tok.decoder = D.Sequence([D.Replace("▁", " "), D.ByteFallback(), D.Fuse(), D.Strip(content=" ", left=1, right=0)])
    return tok


def build_wordpiece_template(texts):
    tok = Tokenizer(M.WordPiece(unk_token="[UNK]"))
    # lowercase without stripping accents; control characters kept.
    tok.normalizer = N.BertNormalizer(clean_text=False, handle_chinese_chars=True, strip_accents=False,
                                      lowercase=True)
    tok.pre_tokenizer = P.Sequence([P.WhitespaceSplit(), P.CharDelimiterSplit("/"), P.UnicodeScripts(),
                                    P.Punctuation(behavior="contiguous")])
    specials = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]", "[Q1]", "[Q2]"]
    tok.train_from_iterator(texts, T.WordPieceTrainer(vocab_size=900, min_frequency=2, show_progress=False,
                                                      special_tokens=specials, limit_alphabet=300))

    def short_words(data):
        # Words over 20 characters become [UNK] (the real files all use 100).
        data["model"]["max_input_chars_per_word"] = 20

    tok = _patch(tok, short_words)
    ids = {t: tok.token_to_id(t) for t in specials}
    tok.post_processor = R.TemplateProcessing(
        single="[CLS]:5 $A:1 [SEP]:5",
        pair="[CLS]:0 $A:0 [SEP]:0 [QSEP]:2 $B:3 [SEP]:3",
        special_tokens=[
            ("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"]),
            {"id": "[QSEP]", "ids": [ids["[Q1]"], ids["[Q2]"]], "tokens": ["[Q1]", "[Q2]"]},
        ])
    tok.add_special_tokens([AddedToken("[SPECIAL_A]", normalized=False),
                            AddedToken("<lstrip>", lstrip=True, normalized=False)])
    tok.add_tokens([
        AddedToken("<rstrip>", rstrip=True, normalized=False),
        AddedToken("<both>", lstrip=True, rstrip=True, normalized=False),
        AddedToken("single", single_word=True, normalized=True),
        AddedToken("New York", normalized=True),
        AddedToken("ＡＢＣ", normalized=False),
        AddedToken("@@", normalized=False),
        AddedToken("ß", single_word=True, normalized=False),
    ])
    tok.decoder = D.WordPiece(prefix="##", cleanup=False)
    return tok


CTC_ALPHABET = list("abcdefghijklmnopqrstuvwxyz0123456789'") + ["é", "ß"]


def build_ctc_chars(texts):
    """A wav2vec2-style character vocabulary: no training, one id per character,
    '|' for the word boundary."""
    del texts
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3, "|": 4}
    for ch in CTC_ALPHABET:
        vocab[ch] = len(vocab)
    tok = Tokenizer(M.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.normalizer = N.Sequence([N.Lowercase(), N.Replace(" ", "|")])
    tok.pre_tokenizer = P.FixedLength(length=1)
    tok.post_processor = R.BertProcessing(("</s>", 2), ("<s>", 1))
    tok.add_special_tokens(["<pad>", "<s>", "</s>", "<unk>"])
    tok.decoder = D.CTC(pad_token="<pad>", word_delimiter_token="|", cleanup=True)
    return tok


def build_bytelevel(texts):
    tok = Tokenizer(M.BPE())
    tok.normalizer = N.Sequence([N.Strip(left=False, right=True), N.NFD()])
    tok.pre_tokenizer = P.Sequence([P.Punctuation(behavior="merged_with_previous"),
                                    P.ByteLevel(add_prefix_space=True, use_regex=True)])
    tok.train_from_iterator(texts, T.BpeTrainer(vocab_size=800, min_frequency=2, show_progress=False,
                                                special_tokens=["<|bos|>", "<|eos|>"],
                                                initial_alphabet=P.ByteLevel.alphabet()))
    tok.post_processor = R.Sequence([
        R.ByteLevel(trim_offsets=True),
        R.TemplateProcessing(single="<|bos|> $A <|eos|>", pair="<|bos|> $A <|eos|> $B:1 <|eos|>:1",
                             special_tokens=[("<|bos|>", tok.token_to_id("<|bos|>")),
                                             ("<|eos|>", tok.token_to_id("<|eos|>"))]),
    ])
    tok.decoder = D.ByteLevel()
    return tok


def build_bytelevel_norm(texts):
    tok = Tokenizer(M.BPE())
    # Bytes are mapped by the normalizer, not the pre-tokenizer.
    tok.normalizer = N.ByteLevel()
    tok.pre_tokenizer = P.Sequence([P.Digits(individual_digits=False), P.Punctuation(behavior="merged_with_next"),
                                    P.FixedLength(length=6)])
    tok.train_from_iterator(texts, T.BpeTrainer(vocab_size=700, min_frequency=2, show_progress=False,
                                                special_tokens=["<|endoftext|>"],
                                                initial_alphabet=P.ByteLevel.alphabet()))
    tok.post_processor = R.ByteLevel(trim_offsets=False, add_prefix_space=False)
    tok.decoder = D.ByteLevel()
    return tok


def build_unigram_bytefallback(texts):
    tok = Tokenizer(M.Unigram())
    tok.normalizer = N.Sequence([N.NFKC(), N.Strip(left=True, right=False)])
    tok.pre_tokenizer = P.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    # Trained on the Latin-script strings only and byte pieces added after
    # training, so every other script falls back to bytes.
    latin = [t for t in texts if all(ord(c) < 0x250 for c in t)]
    tok.train_from_iterator(latin, T.UnigramTrainer(vocab_size=600, show_progress=False,
                                                    special_tokens=["<unk>", "<s>", "</s>", "<pad>"],
                                                    unk_token="<unk>", max_piece_length=6))

    def add_bytes(data):
        model = data["model"]
        pieces = {p for p, _ in model["vocab"]}
        lowest = min(score for _, score in model["vocab"] if score != 0.0)
        for piece in _byte_pieces():
            if piece not in pieces:
                model["vocab"].append([piece, lowest - 1.0])
        model["byte_fallback"] = True

    tok = _patch(tok, add_bytes)
    tok.post_processor = R.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", tok.token_to_id("<s>")), ("</s>", tok.token_to_id("</s>"))])
    # The decoder's "never" differs from the pre-tokenizer's "always" on
    # purpose: it keeps the leading space that "always" would strip.
    tok.decoder = D.Sequence([D.ByteFallback(), D.Metaspace(replacement="▁", prepend_scheme="never", split=True)])
    return tok


# Fixture name -> builder; COVERAGE.md lists what each one exercises.
BUILDERS = {
    "trained-wordlevel": build_wordlevel,
    "trained-bpe-suffix": build_bpe_suffix,
    "trained-unigram-metaspace": build_unigram_metaspace,
    "trained-bpe-bytefallback": build_bpe_bytefallback,
    "trained-wordpiece-template": build_wordpiece_template,
    "trained-ctc-chars": build_ctc_chars,
    "trained-bytelevel": build_bytelevel,
    "trained-bytelevel-norm": build_bytelevel_norm,
    "trained-unigram-bytefallback": build_unigram_bytefallback,
}
