/* flow_tokenizers.c - see flow_tokenizers.h. */
#include "flow_tokenizers.h"

#include "train/tokenizer_open.h"

bool demo_open_flow_tokenizers(const char *model_path, const char *t5_path, int clip_vocab, int t5_vocab,
                               sdt_tokenizer **tok, sdt_spm **t5, sdt_error *error)
{
    *t5 = NULL;
    if (!(*tok = sdt_open_tokenizer(NULL, model_path, clip_vocab, NULL, error))) return false;
    if ((*t5 = sdt_open_t5_tokenizer(t5_path, model_path, t5_vocab, NULL, error))) return true;
    sdt_tokenizer_free(*tok);
    *tok = NULL;
    return false;
}
