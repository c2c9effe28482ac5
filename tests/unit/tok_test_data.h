/* Small tokenizer.json files shared by the tokenizer unit tests.
 *
 * TOK_MINI_WP: a tiny BERT-style tokenizer.json (BertNormalizer, BertPreTokenizer, WordPiece,
 * [CLS] $A [SEP] template, lstrip [MASK]) shared by the tokenizer unit tests.
 * Expected values in the tests come from tokenizers 0.23.3 on this file. */
#ifndef IV_TESTS_TOK_TEST_DATA_H
#define IV_TESTS_TOK_TEST_DATA_H

static const char TOK_MINI_WP[] =
    "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[{\"id\":0,\"content\":\"[PAD]\",\"single_"
    "word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":true},{\"id\":1,\"content\":\"[UNK"
    "]\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":true},{\"id\":2,\"con"
    "tent\":\"[CLS]\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":true},{"
    "\"id\":3,\"content\":\"[SEP]\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"speci"
    "al\":true},{\"id\":4,\"content\":\"[MASK]\",\"single_word\":false,\"lstrip\":true,\"rstrip\":false,\"normalized\":f"
    "alse,\"special\":true}],\"normalizer\":{\"type\":\"BertNormalizer\",\"clean_text\":true,\"handle_chinese_chars\""
    ":true,\"strip_accents\":null,\"lowercase\":true},\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},\"post_proce"
    "ssor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"[CLS]\",\"type_id\":0}},{\"Sequence\""
    ":{\"id\":\"A\",\"type_id\":0}},{\"SpecialToken\":{\"id\":\"[SEP]\",\"type_id\":0}}],\"pair\":[{\"SpecialToken\":{\"id\":"
    "\"[CLS]\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},{\"SpecialToken\":{\"id\":\"[SEP]\",\"type_id\":0}"
    "},{\"Sequence\":{\"id\":\"B\",\"type_id\":1}},{\"SpecialToken\":{\"id\":\"[SEP]\",\"type_id\":1}}],\"special_tokens\":"
    "{\"[CLS]\":{\"id\":\"[CLS]\",\"ids\":[2],\"tokens\":[\"[CLS]\"]},\"[SEP]\":{\"id\":\"[SEP]\",\"ids\":[3],\"tokens\":[\"[SEP"
    "]\"]}}},\"decoder\":{\"type\":\"WordPiece\",\"prefix\":\"##\",\"cleanup\":true},\"model\":{\"type\":\"WordPiece\",\"unk_"
    "token\":\"[UNK]\",\"continuing_subword_prefix\":\"##\",\"max_input_chars_per_word\":100,\"vocab\":{\"[PAD]\":0,\"["
    "UNK]\":1,\"[CLS]\":2,\"[SEP]\":3,\"[MASK]\":4,\"hello\":5,\"world\":6,\"##s\":7,\"un\":8,\"##aff\":9,\"##able\":10,\",\":"
    "11,\"!\":12,\"cafe\":13,\"\\u4e2d\":14,\"\\u6587\":15,\"the\":16,\"##llo\":17,\"he\":18}}}"
    ;

/* A Llama-like BPE with <s>/</s> added tokens and a "<s> $A" template. */
static const char TOK_MINI_BPE[] =
    "{\"added_tokens\":[{\"id\":0,\"content\":\"<unk>\",\"special\":true,\"normalized\":false},"
    "{\"id\":1,\"content\":\"<s>\",\"special\":true,\"normalized\":false},"
    "{\"id\":2,\"content\":\"</s>\",\"special\":true,\"normalized\":false}],"
    "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\",\"prepend\":\"\\u2581\"},"
    "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\\u2581\"}]},"
    "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},"
    "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},"
    "{\"Sequence\":{\"id\":\"B\",\"type_id\":1}}],\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[1],"
    "\"tokens\":[\"<s>\"]}}},"
    "\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"byte_fallback\":true,\"fuse_unk\":true,"
    "\"vocab\":{\"<unk>\":0,\"<s>\":1,\"</s>\":2,\"\\u2581\":3,\"a\":4,\"b\":5,\"\\u2581a\":6,\"\\u2581ab\":7},"
    "\"merges\":[\"\\u2581 a\",\"\\u2581a b\"]}}";

#endif
