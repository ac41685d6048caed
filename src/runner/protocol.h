/*
 * The runner's wire protocol: what `corral serve` and `corral runner` say to each other over
 * the runner's Unix socket. One request per connection: the client writes one JSON object
 * on one line; the runner answers with JSON lines, the last of which has "done": true or
 * "error". Closing the connection cancels the request (within one token).
 *
 *   {"op":"health"}
 *     -> {"status":"ok","slots":N,"slots_idle":K,"n_ctx":C,"kv_cells_used":U,"kv_cells":T,
 *         "n_vocab":V}
 *     U: the tokens the slots' KV cache sequences hold; T: N x C, the cells there are
 *   {"op":"tokenize","content":"text"}            (BOS added, special tokens parsed)
 *     -> {"tokens":[...]}
 *   {"op":"count","prompt":"text","context":[ids]?,"images":[{"data","at"}]?}
 *     -> {"n_tokens":N,"image_tokens":I,"largest_image":L}
 *     N: the tokens a completion of the same fields starts from (context, BOS, text and
 *     images); I of them its images'; L the most one image has. Images are counted from
 *     their size, not encoded.
 *   {"op":"completion","prompt":"text","context":[ids]?,"images":[{"data","at"}]?,
 *    "grammar":"GBNF"?,"grammar_after":"text"?,"grammar_open":"text"?,"logprobs":bool?,
 *    "top_logprobs":n?,"options":{...}}
 *     options: num_predict, num_keep, temperature, top_k, top_p, min_p, typical_p,
 *              repeat_last_n, repeat_penalty, presence_penalty, frequency_penalty, seed,
 *              stop: [strings]
 *     "context" tokens (a previous exchange) go first; the prompt then gets no BOS.
 *     "images" (a runner started with --mmproj): each an image file's bytes in base64 and
 *     the byte offset in the prompt where it goes (in order); its tokens are its
 *     embeddings between the projector's begin- and end-of-image texts, and count in
 *     prompt_eval_count. An image of any size is taken whatever num_batch says (one that
 *     attends both ways goes through a batch grown for it, a causal one through several).
 *     A prompt with images must fit the context (no truncation), and
 *     the "tokens" answered leave the images out ("image_tokens" says how many there were;
 *     "images_encoded" how many images were encoded, not found among the last few).
 *     A prompt longer than the context keeps its first num_keep and last tokens, or with
 *     "truncate": false is an error; a full context during generation shifts (drops the
 *     older half after num_keep), or with "shift": false ends the answer (done_reason
 *     "length").
 *     "grammar" constrains the generated text (corral_grammar_create; a bad one is an error);
 *     with "grammar_after" (at most 64 bytes), only the text after its first occurrence;
 *     with "grammar_open" too (at most 64 bytes), the text may instead answer at once in the
 *     grammar, and waits for grammar_after only when it opens with grammar_open.
 *     "logprobs": each generated token's log-probability under the model (raw logits), with
 *     the top_logprobs (at most 20) most likely tokens, sent with the next message as
 *     "logprobs":[{"token","logprob","bytes":[...],"top_logprobs":[{"token","logprob",
 *     "bytes"}]}] (a token's text has U+FFFD for bytes that are not whole UTF-8).
 *     -> {"content":"piece"} ...   (always whole UTF-8 characters; the first also has
 *         "prompt_tokens":n, the prompt's length as the done message counts it, images included)
 *     -> {"done":true,"done_reason":"stop"|"length","prompt_eval_count":n,
 *         "prompt_eval_duration":ns,"eval_count":n,"eval_duration":ns,
 *         "context_shifts":n,"prompt_truncated":n,"tokens":[prompt + generated ids],
 *         "stop_sequence":"the stop string that ended it"?}
 *   {"op":"embed","inputs":["text",...],"truncate":bool?}   (an embedding model's)
 *     -> {"embedding":[float,...]} ...  (one line per input, in order)
 *     -> {"done":true,"prompt_eval_count":n}
 *     The pooled vectors, not normalised. An input longer than the context
 *     is cut to it (its last token kept), or with "truncate": false is an error.
 *   any failure -> {"error":"message"}
 *     one that is the request's, not the runner's (a prompt or input the context cannot hold
 *     with truncation off or images, images the projector cannot take: undecodable, a size or
 *     shape it refuses, bad offsets; context ids not of the model; images without a
 *     projector) also has "status":400, the status the server answers with; any other is a 500.
 */
#ifndef CORRAL_RUNNER_PROTOCOL_H
#define CORRAL_RUNNER_PROTOCOL_H

/* The error of a prompt or input too long for the context (with "status"). */
#define RUNNER_ERROR_INPUT_TOO_LONG "the input length exceeds the context length"

/* The "status" of a failure that is the request's. */
#define RUNNER_STATUS_REFUSED 400

/* Longest request line the runner accepts (a prompt near the context size fits easily). */
#define RUNNER_MAX_REQUEST_BYTES (64u << 20)

#endif
