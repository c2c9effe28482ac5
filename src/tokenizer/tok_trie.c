/* A byte trie whose edges live in one hash map ((node << 8 | byte) ->
 * child): compact to build for 250k-piece vocabularies, one probe per byte
 * when walking. Used for Unigram's lattice and WordPiece's longest match. */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"

int tok_trie_init(tok_trie *t, int expected_nodes)
{
    memset(t, 0, sizeof *t);
    t->cap = expected_nodes > 16 ? expected_nodes : 16;
    t->term = malloc(sizeof *t->term * (size_t)t->cap);
    if (!t->term || tok_u64map_init(&t->edges, t->cap)) return -1;
    t->term[0] = -1;
    t->n_nodes = 1;
    return 0;
}

int tok_trie_insert(tok_trie *t, const char *key, int32_t len, int32_t value)
{
    int32_t node = 0;
    for (int32_t k = 0; k < len; k++) {
        int32_t child = tok_trie_child(t, node, (unsigned char)key[k]);
        if (child < 0) {
            if (t->n_nodes == t->cap) {
                int32_t nc = t->cap * 2;
                int32_t *nt = realloc(t->term, sizeof *nt * (size_t)nc);
                if (!nt) return -1;
                t->term = nt;
                t->cap = nc;
            }
            child = t->n_nodes++;
            t->term[child] = -1;
            if (tok_u64map_put(&t->edges, (uint64_t)(uint32_t)node << 8 | (unsigned char)key[k], (uint64_t)child))
                return -1;
        }
        node = child;
    }
    t->term[node] = value;
    return 0;
}

void tok_trie_free(tok_trie *t)
{
    tok_u64map_free(&t->edges);
    free(t->term);
    memset(t, 0, sizeof *t);
}
