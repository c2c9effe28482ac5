/* sentence-transformers 6.3 (base/modules/transformer.py, Transformer.__init__
 * and the max_seq_length property) takes the limit from, in this order:
 *   1. sentence_bert_config.json: processor_kwargs.model_max_length, else
 *      max_seq_length (ST <= 5 saved it there). It is handed to the tokenizer
 *      as model_max_length and is NOT capped by max_position_embeddings.
 *   2. tokenizer_config.json model_max_length (where ST 6 saves
 *      max_seq_length), capped at config.json max_position_embeddings
 *      (unless that is -1, XLNet's "no limit").
 *   3. no tokenizer limit (transformers' 1e30 sentinel): max_position_embeddings.
 * On top of that the model itself may accept fewer tokens (RoBERTa's
 * positions start after padding_idx): then that cap is in force, reported as
 * config.json since it derives from max_position_embeddings there.
 * PyLate rewrites max_seq_length on every call (query_length - 1 or
 * document_length - 1) and saves whatever it last was, in either file, so
 * for PyLate checkpoints neither saved value means anything. */
#include "engine/max_length.h"

static iv_max_length cap(iv_max_length l, int model_cap)
{
    if (model_cap > 0 && (l.tokens <= 0 || model_cap < l.tokens)) return (iv_max_length){model_cap, "config.json"};
    return l;
}

iv_max_length iv_max_length_resolve(const iv_st_meta *meta, const iv_tokenizer *tok, int max_position_embeddings,
                                    int model_cap)
{
    const int pylate = meta && meta->pylate.present;
    if (!pylate && meta && meta->max_seq_length > 0)
        return cap((iv_max_length){meta->max_seq_length, "sentence_bert_config.json"}, model_cap);
    iv_max_length l = {max_position_embeddings, "config.json"};
    const int tok_len = tok && !pylate ? iv_tokenizer_model_max_length(tok) : 0;
    if (tok_len > 0 && (max_position_embeddings <= 0 || tok_len <= max_position_embeddings))
        l = (iv_max_length){tok_len, "tokenizer_config.json"};
    return cap(l, model_cap);
}
