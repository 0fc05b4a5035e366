/* loom-llama.h -- the model runner: vocabulary and tokenizer, sampling, LLaMA models from GGUF. */
#ifndef LOOM_LLAMA_H
#define LOOM_LLAMA_H

#include "loom.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ================================================================ vocabulary and tokenizer */
/* (section owned by the tokenizer work) */


/* ================================================================ sampling */
/* (section owned by the sampler work) */


/* ================================================================ models */
/* (section owned by the runner work) */


#ifdef __cplusplus
}
#endif

#endif /* LOOM_LLAMA_H */
