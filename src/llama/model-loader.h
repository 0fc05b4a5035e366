/* model-loader.h -- the loader's internal steps (metadata, tensors, placement). */
#ifndef LOOM_LLAMA_MODEL_LOADER_H
#define LOOM_LLAMA_MODEL_LOADER_H

#include "model-impl.h"

struct loom_gguf;

/* Reads the <arch>.* hyper-parameters (llama, qwen2); LOOM_ERR_UNSUPPORTED for another architecture
 * or RoPE scaling type,
 * LOOM_ERR_FORMAT for a required key missing or any key out of range or of the wrong type
 * (optional keys take their defaults only when absent). */
enum loom_status loom_model_read_hparams(const struct loom_gguf * g, struct loom_hparams * hp);
/* Builds the vocabulary from the tokenizer.ggml.* keys. */
enum loom_status loom_model_read_vocab(const struct loom_gguf * g, struct loom_vocab ** out);
/* Places every weight tensor (already created in model->ctx_host / ctx_devs[] with names matching
 * the file) in buffers and fills it from the file at 'path'. */
enum loom_status loom_model_place_weights(struct loom_model * model, const struct loom_gguf * g, const char * path,
                                          const struct loom_model_params * params);

/* Releases the file mapping (munmap of what is still mapped). */
void loom_model_unmap(struct loom_model * model);

#endif
