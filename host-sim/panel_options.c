/* panel_options.c - one table for the Train tab's options (see panel_options.h). */
#include <inttypes.h>
#include <stddef.h>
#include <string.h>

#include "c_number.h"
#include "cli_common.h"
#include "file_read.h"
#include "panel_options.h"

#define PANEL_GROUP "train"

/* OPT_FLAG_CHOICE: a flag that sets a uint32 enum field to the index of the option's own name
 * in choices (--epsilon: prediction_type = 1); false sets index 0. */
typedef enum {
    OPT_STR,
    OPT_U32,
    OPT_I64,
    OPT_U64,
    OPT_F64,
    OPT_FLAG_ON,
    OPT_FLAG_OFF,
    OPT_ENUM,
    OPT_FLAG_CHOICE,
    OPT_BITS /* a uint32 of bits, written as a comma list of choices (bit k: choices[k]); 0 is "all" */
} opt_kind;

/* The structs a run's values live in: the shared options and each part's own settings. */
typedef enum panel_part { PART_NONE, PART_OPTIONS, PART_EMBEDDING, PART_HYPERNETWORK, PART_HOST } panel_part;

/* Their names as the plugin's sentences write a field ("options->clip_value"). */
static const char *const part_names[] = {[PART_OPTIONS] = "options",
                                         [PART_EMBEDDING] = "embedding",
                                         [PART_HYPERNETWORK] = "hypernetwork",
                                         [PART_HOST] = "host"};

/* Where a run keeps an option's value: a struct and the field's offset in it. */
typedef struct panel_place {
    panel_part part;
    size_t offset;
} panel_place;

/* Where an option's value goes for each method (PART_NONE where the method takes no such value;
 * giving it there is refused with a sentence). Both methods fill the same sdt_train_options; an
 * embedding run adds an embedding part, a hypernetwork run a hypernetwork part and, with
 * --embedding, an embedding part too (joint training). */
typedef struct panel_option {
    const char *name; /* --name on the command line, name= in [train] */
    opt_kind kind;
    panel_place place[2];       /* [panel_method] */
    const char *field;          /* its name there, as the plugin's sentences say "<part>-><field>" */
    const char *const *choices; /* OPT_ENUM: names in enum order */
    const char *arg;            /* placeholder in --help */
    const char *help;
    const char *folder;   /* a path option: the panel folder it must lie in (panel_option_info) */
    gboolean folder_list; /* "FILE[:S]; ...": a list of such paths */
} panel_option;

static const char *const clip_modes[] = {"disabled", "value", "norm", NULL};
static const char *const latent_methods[] = {"once", "deterministic", "random", NULL};
static const char *const precisions[] = {"fp32", "fp16", "bf16", NULL};
static const char *const devices[] = {"auto", "cpu", "cuda", NULL};
static const char *const predictions[] = {"auto", "epsilon", "v", NULL};       /* sdt_prediction_type */
static const char *const cuda_graphs[] = {"auto", "on", "off", NULL};          /* sdt_cuda_graph */
static const char *const loss_types[] = {"l2", "l1", "huber", NULL};           /* sdt_loss_type */
static const char *const encoder_bits[] = {"clip_l", "clip_g", "t5xxl", NULL}; /* SDT_ENCODER_* */
static const char *const lr_schedulers[] = {"constant", "linear", "cosine", "cosine_with_restarts",
                                            NULL}; /* sdt_lr_scheduler */

#define AT(part, type, f)                                                                                              \
    {                                                                                                                  \
        part, offsetof(type, f)                                                                                        \
    }
#define NOWHERE                                                                                                        \
    {                                                                                                                  \
        PART_NONE, 0                                                                                                   \
    }
/* A shared option: sdt_train_options for either method. */
#define SHARED(f) {AT(PART_OPTIONS, sdt_train_options, f), AT(PART_OPTIONS, sdt_train_options, f)}, #f
/* The embedding part's, for either method (with --hypernetwork: the jointly trained embedding's). */
#define EMBEDDING_PART(f) {AT(PART_EMBEDDING, sdt_embedding_part, f), AT(PART_EMBEDDING, sdt_embedding_part, f)}, #f
/* The hypernetwork part's: hypernetwork runs only. */
#define HYPERNETWORK_PART(f) {NOWHERE, AT(PART_HYPERNETWORK, sdt_hypernetwork_part, f)}, #f
/* The jointly trained embedding's own setting: hypernetwork runs only. */
#define JOINT_EMBEDDING(f) {NOWHERE, AT(PART_EMBEDDING, sdt_embedding_part, f)}, #f
/* sdt-host's own (panel_host_options), for either method: never sent to the plugin as such. */
#define HOST(f) {AT(PART_HOST, panel_host_options, f), AT(PART_HOST, panel_host_options, f)}, #f
/* What is trained: the embedding's in an embedding run, the hypernetwork's in a hypernetwork run. */
#define TRAINED_PART(f) {AT(PART_EMBEDDING, sdt_embedding_part, f), AT(PART_HYPERNETWORK, sdt_hypernetwork_part, f)}, #f

/* Rows that name no folder leave folder and folder_list out (NULL, FALSE). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
static const panel_option options[] = {
    {"embedding", OPT_STR, EMBEDDING_PART(embedding_path), NULL, "FILE",
     "Embedding file to train (with --hypernetwork: trained together with it); this, --hypernetwork or both is required",
     "embeddings"},
    {"hypernetwork", OPT_STR, HYPERNETWORK_PART(hypernetwork_path), NULL, "FILE",
     "Hypernetwork file to train (.pt or .safetensors, from create-hypernetwork or A1111); this, --embedding or both is required",
     "hypernetworks"},
    {"model", OPT_STR, SHARED(model_path), NULL, "PATH",
     "Stable Diffusion checkpoint file or diffusers folder (required)", "models"},
    {"dataset", OPT_STR, SHARED(dataset_dir), NULL, "DIR",
     "Dataset directory (images, optional .txt captions; required)", "datasets"},
    {"template", OPT_STR, SHARED(template_file), NULL, "FILE",
     "Prompt template file with [name] and [filewords], or the name of a shipped one (default " PANEL_DEFAULT_TEMPLATE
     ")",
     "templates"},
    {"log-dir", OPT_STR, SHARED(log_dir), NULL, "DIR", "Log directory (outputs go to DIR/<date>/<name>/)", "logs"},
    {"learn-rate", OPT_STR, TRAINED_PART(learn_rate), NULL, "SCHEDULE",
     "Learning rate of what is trained (with --hypernetwork the hypernetwork's), e.g. 0.005 or \"0.005:100, 1e-3:1000, 1e-5\""},
    {"embedding-learn-rate", OPT_STR, JOINT_EMBEDDING(learn_rate), NULL, "SCHEDULE",
     "With --hypernetwork and --embedding: the embedding's learning rate"},
    {"weight-decay", OPT_F64, HYPERNETWORK_PART(weight_decay), NULL, "W",
     "With --hypernetwork: AdamW weight decay, 0 <= W < 1 (as A1111)"},
    {"strength", OPT_F64, HYPERNETWORK_PART(strength), NULL, "S",
     "With --hypernetwork: the modules' strength while training, 0 < S <= 10"},
    {"preview-hypernetworks", OPT_STR, HYPERNETWORK_PART(preview_hypernetworks), NULL, "\"FILE[:S]; ...\"",
     "With --hypernetwork: other hypernetworks chained after it in previews only, each at strength S (default 1)",
     "hypernetworks", TRUE},
    {"preview-strength", OPT_F64, HYPERNETWORK_PART(preview_strength), NULL, "S",
     "With --hypernetwork: its own strength in previews, -10 <= S <= 10; 0 = as --strength"},
    {"batch-size", OPT_U32, SHARED(batch_size), NULL, "N", "Batch size"},
    {"grad-accum", OPT_U32, SHARED(grad_accum_steps), NULL, "N", "Gradient accumulation steps"},
    {"clip-mode", OPT_ENUM, SHARED(clip_mode), clip_modes, "disabled|value|norm", "Gradient clipping"},
    {"clip-value", OPT_STR, SHARED(clip_value), NULL, "SCHEDULE", "Gradient clipping value (schedule grammar)"},
    {"width", OPT_U32, SHARED(width), NULL, "PX", "Width"},
    {"height", OPT_U32, SHARED(height), NULL, "PX", "Height"},
    {"do-not-resize", OPT_FLAG_ON, SHARED(varsize), NULL, NULL, "Do not resize images (bucket by size)"},
    {"max-steps", OPT_I64, SHARED(max_steps), NULL, "N", "Max steps"},
    {"save-every", OPT_I64, SHARED(save_every), NULL, "N",
     "Save a copy of what is trained every N steps, 0 to disable"},
    {"preview-every", OPT_I64, SHARED(preview_every), NULL, "N",
     "Save an image to the log directory every N steps, 0 to disable"},
    {"save-state-every", OPT_I64, SHARED(save_state_every_seconds), NULL, "SECONDS",
     "Also save the training state when this many seconds passed since the last save, 0 = only with each copy"},
    {"csv-every", OPT_I64, SHARED(write_csv_every), NULL, "N", "Write the loss CSV every N steps, 0 to disable"},
    {"no-embedding-cards", OPT_FLAG_OFF, EMBEDDING_PART(save_image_with_embedding), NULL, NULL,
     "Do not save images with the embedding in PNG chunks (with --hypernetwork: the jointly trained embedding's)"},
    {"embedding-clip-mode", OPT_ENUM, JOINT_EMBEDDING(clip_mode), clip_modes, "disabled|value|norm",
     "With --hypernetwork and --embedding: the embedding's own gradient clipping, with --embedding-clip-value (default: as --clip-mode)"},
    {"embedding-clip-value", OPT_STR, JOINT_EMBEDDING(clip_value), NULL, "SCHEDULE",
     "With --hypernetwork and --embedding: the embedding's own clip value (schedule grammar; default: as --clip-value)"},
    {"shuffle-tags", OPT_FLAG_ON, SHARED(shuffle_tags), NULL, NULL, "Shuffle tags by ',' when creating prompts"},
    {"tag-dropout", OPT_F64, SHARED(tag_dropout), NULL, "P", "Drop out tags when creating prompts (0..1)"},
    {"keep-tokens", OPT_U32, SHARED(keep_tokens), NULL, "N",
     "With --shuffle-tags or --tag-dropout: the caption's first N tags stay first, in order, never dropped (kohya's keep_tokens)"},
    {"caption-dropout", OPT_F64, SHARED(caption_dropout), NULL, "P",
     "Train a sample on the empty prompt with probability P (0..1; seeded)"},
    {"flip", OPT_FLAG_ON, SHARED(flip), NULL, NULL,
     "Mirror each training sample left-right with probability 1/2 (seeded; the mirrored latents are cached too)"},
    {"buckets", OPT_FLAG_ON, SHARED(buckets), NULL, NULL,
     "Aspect-ratio buckets (kohya's): each image goes to the bucket nearest its aspect ratio, resized to cover it and cropped; a batch holds one bucket"},
    {"bucket-max-area", OPT_U32, SHARED(bucket_max_area), NULL, "PIXELS",
     "With --buckets: the most pixels a bucket holds, 0 = width x height"},
    {"bucket-min-side", OPT_U32, SHARED(bucket_min_side), NULL, "PX",
     "With --buckets: the shortest bucket side, a multiple of --bucket-step (default 256)"},
    {"bucket-max-side", OPT_U32, SHARED(bucket_max_side), NULL, "PX",
     "With --buckets: the longest bucket side, a multiple of --bucket-step (default 1024)"},
    {"bucket-step", OPT_U32, SHARED(bucket_step), NULL, "PX",
     "With --buckets: bucket sides are multiples of it, a multiple of 8 and of the model's UNet factor (default 64)"},
    {"random-crop", OPT_FLAG_ON, SHARED(random_crop), NULL, NULL,
     "With --buckets: crop each image at a random place (seeded per image, fixed for the run) instead of its centre"},
    {"latent-sampling", OPT_ENUM, SHARED(latent_sampling), latent_methods, "once|deterministic|random",
     "Latent sampling method"},
    {"alpha-loss-weight", OPT_FLAG_ON, SHARED(use_alpha_as_loss_weight), NULL, NULL,
     "Use PNG alpha channel as loss weight"},
    {"filename-word-regex", OPT_STR, SHARED(filename_word_regex), NULL, "REGEX",
     "Caption from filename: words matching REGEX"},
    {"filename-join", OPT_STR, SHARED(filename_join_string), NULL, "TEXT", "Caption from filename: join string"},
    {"precision", OPT_ENUM, SHARED(precision), precisions, "fp32|fp16|bf16", "Compute precision"},
    {"device", OPT_ENUM, SHARED(device), devices, "auto|cpu|cuda|cuda:N",
     "Device (cuda:N: GPU N, which a data-parallel rank otherwise takes from LOCAL_RANK)"},
    {"gpus", OPT_STR, HOST(gpus), NULL, "0,1,...",
     "Data-parallel training on these GPUs, one rank each; --batch-size is per GPU (sdt-host starts one process per GPU; under torchrun leave it out: WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR and MASTER_PORT say it)"},
    {"in-process", OPT_FLAG_ON, HOST(in_process), NULL, NULL,
     "With --gpus: the ranks run as the plugin's threads in this one process (one progress stream) instead of one process per GPU"},
    {"comm-timeout", OPT_U32, HOST(comm_timeout), NULL, "SECONDS",
     "Data-parallel training: a rank silent this long stops every rank, and the ranks wait this long for each other at the start; 0 = 600"},
    {"seed", OPT_U64, SHARED(seed), NULL, "S", "Training seed"},
    {"clip-skip", OPT_U32, SHARED(clip_skip), NULL, "N", "CLIP skip (1 = last layer)"},
    {"lr-backoff", OPT_F64, SHARED(lr_backoff), NULL, "F", "Learning-rate factor when the fp32 fallback fires"},
    {"max-nonfinite", OPT_U32, SHARED(max_consecutive_nonfinite), NULL, "N", "Stop after N non-finite steps in a row"},
    {"loss-scale-init", OPT_F64, SHARED(loss_scale_init), NULL, "S", "fp16: initial loss scale"},
    {"preview-prompt", OPT_STR, SHARED(preview_prompt), NULL, "TEXT",
     "Preview prompt (default: the batch's first caption)"},
    {"preview-negative-prompt", OPT_STR, SHARED(preview_negative_prompt), NULL, "TEXT", "Preview negative prompt"},
    {"preview-steps", OPT_U32, SHARED(preview_steps), NULL, "N", "Preview sampling steps"},
    {"preview-cfg", OPT_F64, SHARED(preview_cfg_scale), NULL, "S", "Preview CFG scale (0 = the family's: 7, Flux.1 1)"},
    {"preview-sampler", OPT_STR, SHARED(preview_sampler), NULL, "ddim|euler_a|dpmpp_2m_karras",
     "Preview sampler: DDIM (eta 0), Euler ancestral, or DPM++ 2M with Karras sigmas"},
    {"preview-prompts", OPT_STR, SHARED(preview_prompts_file), NULL, "FILE",
     "Previews as a labelled grid: one prompt per line of FILE (rows; blank lines and # comments skipped) by --preview-seeds (columns)",
     "datasets"},
    {"preview-seeds", OPT_STR, SHARED(preview_seeds), NULL, "N|\"S1, S2, ...\"",
     "Previews as a labelled grid with N seeds (from --preview-seed on) or the listed seeds as columns (default: one seed, no grid)"},
    {"preview-seed", OPT_I64, SHARED(preview_seed), NULL, "S", "Preview seed, -1 = random"},
    {"preview-width", OPT_U32, SHARED(preview_width), NULL, "PX", "Preview width, 0 = training width"},
    {"preview-height", OPT_U32, SHARED(preview_height), NULL, "PX", "Preview height, 0 = training height"},
    {"resume", OPT_STR, SHARED(resume_state_path), NULL, "FILE|DIR",
     "Resume from a state file (<log>/<date>/<name>/<name>.state.safetensors) or the newest matching one in a log folder",
     "logs"},
    {"threads", OPT_U32, SHARED(cpu_threads), NULL, "N", "CPU threads, 0 = automatic"},
    {"anomaly-mode", OPT_FLAG_ON, SHARED(anomaly_mode), NULL, NULL, "Check every layer for non-finite values (slow)"},
    {"gradient-checkpointing", OPT_FLAG_ON, SHARED(gradient_checkpointing), NULL, NULL,
     "Recompute UNet and SD3.5/Flux transformer blocks in backward: less memory, slower"},
    {"deterministic", OPT_FLAG_ON, SHARED(deterministic), NULL, NULL,
     "GPU: every step bitwise reproducible (slower attention backward); default: cuDNN's faster fused attention backward, whose last bits vary between runs (the CPU is always reproducible)"},
    {"cuda-graph", OPT_ENUM, SHARED(cuda_graph), cuda_graphs, "auto|on|off",
     "GPU: on captures the steady-state UNet backward once as a CUDA graph and replays it while shapes and options stay the same (same bytes, fewer launch gaps); auto (default) is the plugin's choice, today off"},
    {"v-prediction", OPT_FLAG_ON, SHARED(v_prediction), NULL, NULL,
     "The model predicts v (SD 2.x 768-v models); default: detected"},
    {"epsilon", OPT_FLAG_CHOICE, SHARED(prediction_type), predictions, NULL,
     "The model predicts the noise (SD 1.x, SD 2.x 512); default: detected"},
    {"tokenizer", OPT_STR, SHARED(tokenizer_path), NULL, "DIR",
     "Folder with vocab.json and merges.txt (default: the model's tokenizer/)", "models"},
    {"loss-type", OPT_ENUM, SHARED(loss_type), loss_types, "l2|l1|huber",
     "The loss per element: l2 (A1111's MSE), l1 |d|, or huber (PyTorch's huber_loss: 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta))"},
    {"huber-delta", OPT_F64, SHARED(huber_delta), NULL, "D",
     "With --loss-type huber: where the loss turns from quadratic to linear, at least 1e-4"},
    {"min-snr-gamma", OPT_F64, SHARED(min_snr_gamma), NULL, "G",
     "Min-SNR-gamma loss weighting, 0 = off, else at least 1e-4: each sample weighted by min(SNR, G)/SNR, or min(SNR, G)/(SNR + 1) for v-prediction (5 is usual)"},
    {"noise-offset", OPT_F64, SHARED(noise_offset), NULL, "X",
     "Noise offset, 0 = off: each sample's noise gets X * N(0,1) per channel, the same over the image (0.05 to 0.1 is usual)"},
    {"noise-offset-random-strength", OPT_FLAG_ON, SHARED(noise_offset_random_strength), NULL, NULL,
     "With --noise-offset: each sample's strength uniform in [0, X]"},
    {"timestep-min", OPT_U32, SHARED(timestep_min), NULL, "T", "Lowest training timestep (0..999, inclusive)"},
    {"timestep-max", OPT_U32, SHARED(timestep_max), NULL, "T",
     "Highest training timestep (0..999, inclusive, >= --timestep-min)"},
    {"zero-terminal-snr", OPT_FLAG_ON, SHARED(zero_terminal_snr), NULL, NULL,
     "Rescale the noise schedule to zero terminal SNR (Lin et al. 2023); v-prediction models only"},
    {"lr-scheduler", OPT_ENUM, SHARED(lr_scheduler), lr_schedulers, "constant|linear|cosine|cosine_with_restarts",
     "Learning-rate scheduler (diffusers' get_scheduler), a factor on the --learn-rate schedule's rate, decaying to 0 at --max-steps"},
    {"lr-cycles", OPT_U32, SHARED(lr_cycles), NULL, "N",
     "With --lr-scheduler cosine_with_restarts: the number of cosine cycles"},
    {"warmup-steps", OPT_I64, SHARED(warmup_steps), NULL, "N",
     "Learning-rate warmup: linear from 0 over the first N steps, for every scheduler"},
    {"validation-dir", OPT_STR, SHARED(validation_dir), NULL, "DIR",
     "Validation images with captions (read as --dataset is): their loss is measured every --validate-every steps",
     "datasets"},
    {"validation-split", OPT_F64, SHARED(validation_split), NULL, "F",
     "Hold out this fraction (0 < F < 1) of the dataset for validation instead, chosen by the seed and named in the log; 0 = off"},
    {"validate-every", OPT_I64, SHARED(validate_every), NULL, "N",
     "Measure the validation loss every N steps (required with --validation-dir or --validation-split)"},
    {"stop-after-no-improvement", OPT_U32, SHARED(stop_after_no_improvement), NULL, "K",
     "Stop (state saved) after K validations in a row without a new lowest validation loss; 0 = never"},
    {"ema", OPT_F64, SHARED(ema_decay), NULL, "DECAY",
     "Keep an exponential moving average of the trained values (e.g. 0.999), saved beside the result as <stem>-ema<ext>; 0 = off"},
    {"ema-every", OPT_U32, SHARED(ema_every), NULL, "N", "Update the average every N steps"},
    {"ema-result", OPT_FLAG_ON, SHARED(ema_result), NULL, NULL,
     "With --ema: the result file holds the average (the trained values stay in the state)"},
    {"ema-previews", OPT_FLAG_ON, SHARED(ema_previews), NULL, NULL, "With --ema: previews show the average"},
    /* SD3.5 and Flux.1 (ABI 1.9): the encoder files a checkpoint may lack, the rectified-flow objective */
    {"clip-l", OPT_STR, SHARED(clip_l_path), NULL, "FILE",
     "SD3.5/Flux.1: the CLIP-L text encoder when the checkpoint lacks it (ComfyUI's clip_l.safetensors)", "models"},
    {"clip-g", OPT_STR, SHARED(clip_g_path), NULL, "FILE",
     "SD3.5: the CLIP-G (OpenCLIP bigG) text encoder when the checkpoint lacks it (clip_g.safetensors)", "models"},
    {"t5xxl", OPT_STR, SHARED(t5xxl_path), NULL, "FILE",
     "SD3.5/Flux.1: the T5-XXL encoder when the checkpoint lacks it (t5xxl_fp16.safetensors; fp8 read and upcast)",
     "models"},
    {"vae", OPT_STR, SHARED(vae_path), NULL, "FILE",
     "SD3.5/Flux.1: the 16-channel VAE when the checkpoint lacks it (Flux's ae.safetensors)", "models"},
    {"timestep-sampling", OPT_STR, SHARED(timestep_sampling), NULL, "uniform|logit_normal|mode",
     "SD3.5/Flux.1: how the flow time t is drawn (default logit_normal, as SD3 and Flux were trained)"},
    {"flow-weighting", OPT_STR, SHARED(flow_weighting), NULL, "none|sigma_sqrt|cosmap",
     "SD3.5/Flux.1: the loss weight per sample (diffusers' weighting_scheme; default none)"},
    {"logit-mean", OPT_F64, SHARED(logit_mean), NULL, "M", "SD3.5/Flux.1, logit_normal sampling: the mean"},
    {"logit-std", OPT_F64, SHARED(logit_std), NULL, "S",
     "SD3.5/Flux.1, logit_normal sampling: the standard deviation, > 0"},
    {"mode-scale", OPT_F64, SHARED(mode_scale), NULL, "S", "SD3.5/Flux.1, mode sampling: the scale"},
    {"flow-shift", OPT_F64, SHARED(flow_shift), NULL, "S",
     "SD3.5/Flux.1: the timestep shift t' = S t / (1 + (S - 1) t); 0 = the family's (SD3.5 3.0, Flux the resolution shift)"},
    {"guidance", OPT_F64, SHARED(guidance), NULL, "G",
     "Flux.1 dev: the distilled guidance value in training passes and previews; 0 = 3.5"},
    {"t5-max-length", OPT_U32, SHARED(t5_max_length), NULL, "N",
     "SD3.5/Flux.1: T5 tokens a prompt is padded or cut to, 1..512; 0 = the family's (SD3.5 256, Flux dev 512, schnell 256)"},
    {"encoders", OPT_BITS, EMBEDDING_PART(encoders), encoder_bits, "clip_l,clip_g,t5xxl",
     "SD3.5/Flux.1: the embedding's tables that train, e.g. clip_l,t5xxl (default all of the family's; the others keep their values)"},
    {"lr-clip-l", OPT_STR, EMBEDDING_PART(learn_rate_clip_l), NULL, "SCHEDULE",
     "SD3.5/Flux.1: the clip_l table's learning rate (schedule grammar; default: the embedding's)"},
    {"lr-clip-g", OPT_STR, EMBEDDING_PART(learn_rate_clip_g), NULL, "SCHEDULE",
     "SD3.5: the clip_g table's learning rate (schedule grammar; default: the embedding's)"},
    {"lr-t5xxl", OPT_STR, EMBEDDING_PART(learn_rate_t5xxl), NULL, "SCHEDULE",
     "SD3.5/Flux.1: the t5xxl table's learning rate (schedule grammar; default: the embedding's)"},
    {"metrics", OPT_FLAG_ON, SHARED(write_metrics), NULL, NULL,
     "Write metrics.jsonl (one line per step) and loss.png (the loss against the step, redrawn with every save) into the log folder, beside the loss CSV"},
};
#pragma GCC diagnostic pop

#define N_OPTIONS (sizeof options / sizeof options[0])

/* The flags sdt-host turns on whatever the plugin's default (the loss picture is what people look at),
 * each with the help of its --no-<name> (in a panel file: <name>=false). */
static const struct {
    const char *name;
    const char *off_help;
} on_by_default[] = {
    {"metrics",
     "Do not write metrics.jsonl and loss.png (by default they are written; the loss CSV is written either way; in a panel file: metrics=false)"},
};

/* The help of option o's --no- form, or NULL when sdt-host leaves its default to the plugin. */
static const char *off_help_of(const panel_option *o)
{
    for (size_t k = 0; k < G_N_ELEMENTS(on_by_default); k++)
        if (strcmp(on_by_default[k].name, o->name) == 0) return on_by_default[k].off_help;
    return NULL;
}

struct panel_values {
    char *text[N_OPTIONS]; /* command-line values, NULL = not given */
    gboolean flag[N_OPTIONS];
    gboolean off[N_OPTIONS];   /* --no-<name> given (the options on_by_default names) */
    char *off_name[N_OPTIONS]; /* "no-<name>" */
    char *config_path;
    GKeyFile *key_file;
    GPtrArray *owned;                        /* strings the config points at */
    GOptionEntry entries[2 * N_OPTIONS + 2]; /* --config, each option in table order, then the --no- forms */
};

panel_defaults panel_defaults_of(const sdt_trainer_factory *f)
{
    return (panel_defaults){.train_options = f ? f->train_options_defaults : NULL,
                            .embedding_part = f ? f->embedding_part_defaults : NULL,
                            .hypernetwork_part = f ? f->hypernetwork_part_defaults : NULL};
}

panel_values *panel_values_new(void)
{
    panel_values *v = g_new0(panel_values, 1);
    v->owned = g_ptr_array_new_with_free_func(g_free);
    return v;
}

void panel_values_free(panel_values *v)
{
    if (!v) return;
    for (size_t i = 0; i < N_OPTIONS; i++) g_free(v->text[i]), g_free(v->off_name[i]);
    g_free(v->config_path);
    if (v->key_file) g_key_file_unref(v->key_file);
    g_ptr_array_unref(v->owned);
    g_free(v);
}

const GOptionEntry *panel_option_entries(panel_values *v)
{
    size_t n = 0;
    v->entries[n++] = (GOptionEntry){
        "config",
        0,
        0,
        G_OPTION_ARG_FILENAME,
        &v->config_path,
        "Panel file (GKeyFile, group [train], keys named like these options; default none); options given here override it",
        "FILE"};
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const panel_option *o = &options[i];
        gboolean is_flag = o->kind == OPT_FLAG_ON || o->kind == OPT_FLAG_OFF || o->kind == OPT_FLAG_CHOICE;
        v->entries[n++] = (GOptionEntry){o->name,
                                         0,
                                         0,
                                         is_flag ? G_OPTION_ARG_NONE : G_OPTION_ARG_STRING,
                                         is_flag ? (gpointer)&v->flag[i] : (gpointer)&v->text[i],
                                         o->help,
                                         o->arg};
    }
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const char *off_help = off_help_of(&options[i]);
        if (!off_help) continue;
        if (!v->off_name[i]) v->off_name[i] = g_strdup_printf("no-%s", options[i].name);
        v->entries[n++] = (GOptionEntry){v->off_name[i], 0, 0, G_OPTION_ARG_NONE, &v->off[i], off_help, NULL};
    }
    v->entries[n] = (GOptionEntry){NULL, 0, 0, 0, NULL, NULL, NULL};
    return v->entries;
}

static char *field_of(const panel_config *c, const panel_option *o);

/* What the plugin does with a text the defaults leave unset, as abi/sdtrain.h documents it
 * (sdt_trainer_config.options: log_dir NULL is A1111's folder for the parts), so --help and the
 * panel show the folder a run will use; NULL for the others. */
static const char *unset_default(const panel_option *o, panel_method method)
{
    static const char *const log_folders[] = {
        [PANEL_EMBEDDING] = "textual_inversion", [PANEL_HYPERNETWORK] = "hypernetworks"};
    return strcmp(o->name, "log-dir") == 0 ? log_folders[method] : NULL;
}

/* The value of option o in c as --help shows it; NULL when c's method has no such field or leaves
 * a text unset (g_free). */
static char *value_text(const panel_config *c, const panel_option *o)
{
    const char *field = field_of(c, o);
    if (!field) return NULL;
    c_number_text number;
    uint32_t u32;
    bool b;
    switch (o->kind) {
        case OPT_STR: {
            const char *text;
            memcpy(&text, field, sizeof text);
            if (!text || !text[0]) text = unset_default(o, c->method);
            if (!text || !text[0]) return NULL;
            return strchr(text, ' ') || strchr(text, ',') ? g_strdup_printf("\"%s\"", text) : g_strdup(text);
        }
        case OPT_U32:
            memcpy(&u32, field, sizeof u32);
            return g_strdup_printf("%" PRIu32, u32);
        case OPT_I64: {
            int64_t x;
            memcpy(&x, field, sizeof x);
            return g_strdup_printf("%" PRId64, x);
        }
        case OPT_U64: {
            uint64_t x;
            memcpy(&x, field, sizeof x);
            return g_strdup_printf("%" PRIu64, x);
        }
        case OPT_F64: {
            double x;
            memcpy(&x, field, sizeof x);
            return g_strdup(c_number(&number, "%g", x));
        }
        case OPT_ENUM:
            memcpy(&u32, field, sizeof u32);
            for (uint32_t k = 0; o->choices[k]; k++)
                if (k == u32) return g_strdup(o->choices[k]);
            return g_strdup_printf("%" PRIu32, u32);
        case OPT_FLAG_ON:
        case OPT_FLAG_OFF:
            memcpy(&b, field, sizeof b);
            return g_strdup((o->kind == OPT_FLAG_ON) == b ? "on" : "off");
        case OPT_FLAG_CHOICE: {
            memcpy(&u32, field, sizeof u32);
            uint32_t k = 0;
            while (o->choices[k] && k < u32) k++;
            return g_strdup(k == u32 && o->choices[k] && strcmp(o->choices[k], o->name) == 0 ? "on" : "off");
        }
        case OPT_BITS: {
            memcpy(&u32, field, sizeof u32);
            if (!u32) return g_strdup("all");
            GString *list = g_string_new(NULL);
            for (uint32_t k = 0; k < 32; k++)
                if (u32 & (1u << k)) {
                    if (list->len) g_string_append_c(list, ',');
                    if (k < g_strv_length((char **)o->choices))
                        g_string_append(list, o->choices[k]);
                    else
                        g_string_append_printf(list, "%" PRIu32, 1u << k);
                }
            return g_string_free(list, FALSE);
        }
    }
    return NULL;
}

static gboolean fill_defaults(const panel_defaults *d, panel_config *c, char **error);

void panel_show_defaults(panel_values *v, const panel_defaults *defaults)
{
    panel_config *ti = g_new0(panel_config, 1), *hn = g_new0(panel_config, 1);
    char *ignored = NULL;
    ti->method = PANEL_EMBEDDING, hn->method = PANEL_HYPERNETWORK;
    gboolean have_ti = defaults && fill_defaults(defaults, ti, &ignored);
    g_clear_pointer(&ignored, g_free);
    gboolean have_hn = defaults && fill_defaults(defaults, hn, &ignored);
    g_clear_pointer(&ignored, g_free);
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const panel_option *o = &options[i];
        char *a = have_ti ? value_text(ti, o) : NULL, *b = have_hn ? value_text(hn, o) : NULL;
        char *shown;
        if (strstr(o->help, "default"))
            shown = g_strdup(o->help); /* its own words say it: "default: detected" */
        else if (a && b && strcmp(a, b) != 0)
            shown = g_strdup_printf("%s (default %s; with --hypernetwork %s)", o->help, a, b);
        else if (a || b)
            shown = g_strdup_printf("%s (default %s)", o->help, a ? a : b);
        else if (!strstr(o->help, "required"))
            shown = g_strdup_printf("%s (default: none)", o->help);
        else
            shown = g_strdup(o->help);
        g_ptr_array_add(v->owned, shown);
        v->entries[i + 1].description = shown; /* entries[0] is --config */
        g_free(a);
        g_free(b);
    }
    g_free(ti);
    g_free(hn);
}

/* Where option o's value lives in c for c's method; NULL when that method has no such field.
 * Writable, as set_field fills it; panel_check_required only reads it. */
static char *field_of(const panel_config *c, const panel_option *o)
{
    const panel_place *at = &o->place[c->method];
    const size_t part_offsets[] = {[PART_OPTIONS] = offsetof(panel_config, options),
                                   [PART_EMBEDDING] = offsetof(panel_config, embedding),
                                   [PART_HYPERNETWORK] = offsetof(panel_config, hypernetwork),
                                   [PART_HOST] = offsetof(panel_config, host)};
    return at->part == PART_NONE ? NULL : (char *)c + part_offsets[at->part] + at->offset;
}

/* The sentence for an option the chosen method does not take. */
static char *other_method_sentence(const panel_config *c, const char *origin)
{
    if (c->method == PANEL_EMBEDDING)
        return g_strdup_printf(
            "%s applies to hypernetwork training; add --hypernetwork FILE (with --embedding: both are "
            "trained together), or leave it out to train the embedding alone.",
            origin);
    return g_strdup_printf(
        "%s applies to embedding training only; the hypernetwork trainer (joint training included) has no "
        "such setting, so leave it out with --hypernetwork.",
        origin);
}

/* --device cuda:N: the device choice cuda, and N as sdt-host's own (the GPU a rank trains on). */
static gboolean set_cuda_device(panel_config *c, char *field, const char *text, const char *origin, char **error)
{
    guint64 n = 0;
    if (!g_ascii_string_to_unsigned(text + 5, 10, 0, 1023, &n, NULL)) {
        *error = g_strdup_printf("%s: '%s' is not cuda:N with N a GPU number from 0 to 1023 (nvidia-smi lists them).",
                                 origin, text);
        return FALSE;
    }
    uint32_t choice = SDT_DEVICE_CHOICE_CUDA;
    memcpy(field, &choice, sizeof choice);
    c->host.cuda_device_given = true;
    c->host.cuda_device = (int32_t)n;
    return TRUE;
}

/* Parses text into the field of option o; FALSE with a sentence naming where it came from. */
static gboolean set_field(panel_values *v, panel_config *c, const panel_option *o, const char *text, const char *origin,
                          char **error)
{
    char *field = field_of(c, o);
    if (!field) {
        *error = other_method_sentence(c, origin);
        return FALSE;
    }
    GError *gerr = NULL;
    gboolean ok = TRUE;
    switch (o->kind) {
        case OPT_STR: {
            char *copy = g_strdup(text);
            g_ptr_array_add(v->owned, copy);
            memcpy(field, &copy, sizeof copy);
            return TRUE;
        }
        case OPT_U32: {
            guint64 x = 0;
            ok = g_ascii_string_to_unsigned(text, 10, 0, G_MAXUINT32, &x, &gerr);
            uint32_t u = (uint32_t)x;
            if (ok) memcpy(field, &u, sizeof u);
            break;
        }
        case OPT_U64: {
            guint64 x = 0;
            ok = g_ascii_string_to_unsigned(text, 10, 0, G_MAXUINT64, &x, &gerr);
            uint64_t u = x;
            if (ok) memcpy(field, &u, sizeof u);
            break;
        }
        case OPT_I64: {
            gint64 x = 0;
            ok = g_ascii_string_to_signed(text, 10, G_MININT64, G_MAXINT64, &x, &gerr);
            int64_t s = x;
            if (ok) memcpy(field, &s, sizeof s);
            break;
        }
        case OPT_F64: {
            char *end = NULL;
            double d = g_ascii_strtod(text, &end);
            ok = end && end != text && *end == '\0';
            if (ok) memcpy(field, &d, sizeof d);
            break;
        }
        case OPT_ENUM: {
            if (o->choices == devices) {
                c->host.cuda_device_given = false;
                if (g_ascii_strncasecmp(text, "cuda:", 5) == 0) return set_cuda_device(c, field, text, origin, error);
            }
            ok = FALSE;
            for (uint32_t k = 0; o->choices[k]; k++)
                if (g_ascii_strcasecmp(text, o->choices[k]) == 0) {
                    memcpy(field, &k, sizeof k);
                    ok = TRUE;
                }
            if (!ok) {
                *error = g_strdup_printf("%s: '%s' is not one of %s.", origin, text, o->arg);
                return FALSE;
            }
            return TRUE;
        }
        case OPT_BITS: {
            uint32_t bits = 0;
            char **names = g_strsplit(text, ",", -1);
            for (char **n = names; ok && *n; n++) {
                char *name = g_strstrip(*n);
                if (!name[0] || g_ascii_strcasecmp(name, "all") == 0) continue;
                ok = FALSE;
                for (uint32_t k = 0; o->choices[k]; k++)
                    if (g_ascii_strcasecmp(name, o->choices[k]) == 0) bits |= 1u << k, ok = TRUE;
                if (!ok) *error = g_strdup_printf("%s: '%s' is not one of %s (or all).", origin, name, o->arg);
            }
            g_strfreev(names);
            if (ok) memcpy(field, &bits, sizeof bits);
            return ok;
        }
        case OPT_FLAG_ON:
        case OPT_FLAG_OFF:
        case OPT_FLAG_CHOICE: {
            bool b;
            if (g_ascii_strcasecmp(text, "true") == 0 || strcmp(text, "1") == 0)
                b = true;
            else if (g_ascii_strcasecmp(text, "false") == 0 || strcmp(text, "0") == 0)
                b = false;
            else {
                *error = g_strdup_printf("%s: '%s' is not true or false.", origin, text);
                return FALSE;
            }
            if (o->kind == OPT_FLAG_OFF) b = !b; /* the key names the negative: no-embedding-cards=true */
            if (o->kind == OPT_FLAG_CHOICE) {
                uint32_t k = 0;
                while (b && o->choices[k] && strcmp(o->choices[k], o->name) != 0) k++;
                memcpy(field, &k, sizeof k);
                return TRUE;
            }
            memcpy(field, &b, sizeof b);
            return TRUE;
        }
    }
    if (!ok) {
        const char *what = o->kind == OPT_F64 ? "number" : "whole number in range";
        *error = gerr ? g_strdup_printf("%s: '%s' is not a valid %s (%s).", origin, text, what, gerr->message)
                      : g_strdup_printf("%s: '%s' is not a valid %s.", origin, text, what);
        g_clear_error(&gerr);
    }
    return ok;
}

static const panel_option *find_option(const char *name)
{
    for (size_t i = 0; i < N_OPTIONS; i++)
        if (strcmp(options[i].name, name) == 0) return &options[i];
    return NULL;
}

/* A panel file is text: binary data (NUL bytes, bytes that are not UTF-8) gets a sentence
 * saying so, instead of the key-file parser quoting the garbage. */
static gboolean check_text(const char *path, const char *data, gsize n, char **error)
{
    const char *bad = memchr(data, '\0', n);
    const char *invalid = NULL;
    if (!g_utf8_validate(data, (gssize)n, &invalid) && (!bad || invalid < bad)) bad = invalid;
    if (bad)
        *error =
            g_strdup_printf("The panel file %s is not a text file (binary data at byte %zu); a panel file is a key "
                            "file with the options under a [%s] line, e.g. max-steps=1000.",
                            path, (size_t)(bad - data), PANEL_GROUP);
    return bad == NULL;
}

gboolean panel_load_file(panel_values *v, char **error)
{
    if (!v->config_path || v->key_file) return TRUE;
    gchar *data = NULL;
    gsize n = 0;
    char *why = NULL;
    /* Read once, through the bounded reader: a FIFO or /dev/zero named as the panel file is refused. */
    if (!host_read_file(v->config_path, HOST_TEXT_FILE_LIMIT, &data, &n, &why)) {
        *error =
            g_strdup_printf("Could not read the panel file %s (%s); it must be a key file with the options under a "
                            "[%s] line, e.g. max-steps=1000.",
                            v->config_path, why, PANEL_GROUP);
        g_free(why);
        return FALSE;
    }
    gboolean ok = panel_load_data(v, v->config_path, data, n, error);
    g_free(data);
    return ok;
}

gboolean panel_load_data(panel_values *v, const char *origin, const char *data, size_t n, char **error)
{
    GError *gerr = NULL;
    if (v->key_file) {
        g_key_file_unref(v->key_file);
        v->key_file = NULL;
    }
    if (origin != v->config_path) {
        g_free(v->config_path);
        v->config_path = g_strdup(origin);
    }
    if (!check_text(v->config_path, data, n, error)) return FALSE;
    v->key_file = g_key_file_new();
    gboolean loaded = g_key_file_load_from_data(v->key_file, data, n, G_KEY_FILE_NONE, &gerr);
    if (!loaded) {
        *error = g_strdup_printf("Could not read the panel file %s (%s); it must be a key file with the options "
                                 "under a [%s] line, e.g. max-steps=1000.",
                                 v->config_path, gerr->message, PANEL_GROUP);
        g_clear_error(&gerr);
        g_key_file_unref(v->key_file);
        v->key_file = NULL;
        return FALSE;
    }
    if (!g_key_file_has_group(v->key_file, PANEL_GROUP)) {
        *error = g_strdup_printf("The panel file %s has no [%s] group; put the options under a [%s] line.",
                                 v->config_path, PANEL_GROUP, PANEL_GROUP);
        g_key_file_unref(v->key_file);
        v->key_file = NULL;
        return FALSE;
    }
    return TRUE;
}

/* Index of the option named name; every caller names a row of the table. */
static size_t option_index(const char *name)
{
    return (size_t)(find_option(name) - options);
}

panel_method panel_method_chosen(const panel_values *v)
{
    size_t i = option_index("hypernetwork");
    gboolean in_file = v->key_file && g_key_file_has_key(v->key_file, PANEL_GROUP, options[i].name, NULL);
    return v->text[i] || in_file ? PANEL_HYPERNETWORK : PANEL_EMBEDDING;
}

static gboolean apply_key_file(panel_values *v, panel_config *c, char **error)
{
    gsize n_keys = 0;
    char **keys = g_key_file_get_keys(v->key_file, PANEL_GROUP, &n_keys, NULL);
    gboolean ok = TRUE;
    for (gsize k = 0; keys && k < n_keys && ok; k++) {
        const panel_option *o = find_option(keys[k]);
        if (!o) {
            *error = g_strdup_printf(
                "The panel file %s has an unknown key '%s' in [%s]; see 'sdt-host train --help' for the names.",
                v->config_path, keys[k], PANEL_GROUP);
            ok = FALSE;
            break;
        }
        char *value = g_key_file_get_string(v->key_file, PANEL_GROUP, keys[k], NULL);
        char *origin = g_strdup_printf("%s, key %s", v->config_path, keys[k]);
        ok = set_field(v, c, o, value ? value : "", origin, error);
        g_free(origin);
        g_free(value);
    }
    g_strfreev(keys);
    return ok;
}

static gboolean apply_command_line(panel_values *v, panel_config *c, char **error)
{
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const panel_option *o = &options[i];
        char *origin = g_strdup_printf("--%s", o->name);
        gboolean ok = TRUE;
        if (v->flag[i] && v->off[i]) {
            *error = g_strdup_printf("--%s and --no-%s contradict each other; give one of them.", o->name, o->name);
            ok = FALSE;
        } else if (v->text[i])
            ok = set_field(v, c, o, v->text[i], origin, error);
        else if (v->flag[i])
            ok = set_field(v, c, o, "true", origin, error);
        else if (v->off[i]) {
            g_free(origin);
            origin = g_strdup_printf("--no-%s", o->name);
            ok = set_field(v, c, o, "false", origin, error);
        }
        g_free(origin);
        if (!ok) return FALSE;
    }
    return TRUE;
}

/* The plugin's defaults: the shared options and both parts' (a run sends the parts it trains). */
static gboolean fill_defaults(const panel_defaults *d, panel_config *c, char **error)
{
    memset(&c->options, 0, sizeof c->options);
    memset(&c->embedding, 0, sizeof c->embedding);
    memset(&c->hypernetwork, 0, sizeof c->hypernetwork);
    memset(&c->trainer, 0, sizeof c->trainer);
    c->options.struct_size = sizeof c->options;
    c->embedding.struct_size = sizeof c->embedding;
    c->hypernetwork.struct_size = sizeof c->hypernetwork;
    gboolean ok = d->train_options && d->train_options(&c->options) == SDT_STATUS_OK && d->embedding_part &&
                  d->embedding_part(&c->embedding) == SDT_STATUS_OK && d->hypernetwork_part &&
                  d->hypernetwork_part(&c->hypernetwork) == SDT_STATUS_OK;
    if (!ok) {
        *error = g_strdup("The plugin could not fill the default training config.");
        return FALSE;
    }
    /* sdt-host's own defaults: what people look at (loss.png) is on unless turned off. */
    for (size_t i = 0; i < N_OPTIONS; i++) {
        char *field = off_help_of(&options[i]) ? field_of(c, &options[i]) : NULL;
        if (!field) continue;
        bool on = true;
        memcpy(field, &on, sizeof on);
    }
    return TRUE;
}

gboolean panel_build_config(panel_values *v, panel_method method, const panel_defaults *defaults, panel_config *config,
                            char **error, gboolean *usage_error)
{
    *usage_error = FALSE;
    memset(config, 0, sizeof *config);
    config->method = method;
    if (!fill_defaults(defaults, config, error) || !panel_load_file(v, error)) return FALSE;
    if (v->key_file && !apply_key_file(v, config, error)) return FALSE;
    if (!apply_command_line(v, config, error)) {
        *usage_error = TRUE;
        return FALSE;
    }
    return TRUE;
}

/* The options a run cannot do without (the Train tab's empty fields), checked before the
 * plugin is asked, so the message names the option rather than the config field. */
static const char *const required[][3] = {
    [PANEL_EMBEDDING] = {"embedding", "dataset", "model"},
    [PANEL_HYPERNETWORK] = {"hypernetwork", "dataset", "model"},
};

const char **panel_template_slot(panel_config *config)
{
    return (const char **)(void *)field_of(config, find_option("template"));
}

gboolean panel_check_required(const panel_config *config, char **error)
{
    for (size_t r = 0; r < G_N_ELEMENTS(required[0]); r++) {
        const panel_option *o = find_option(required[config->method][r]);
        const char *value;
        memcpy(&value, field_of(config, o), sizeof value);
        if ((!value || !value[0]) && r == 0 && config->method == PANEL_EMBEDDING) {
            /* what is trained: an embedding, a hypernetwork, or both; the method follows --hypernetwork */
            *error =
                g_strdup_printf("--embedding FILE or --hypernetwork FILE is required: one of them, or both to train "
                                "them together (or embedding= / hypernetwork= in the [%s] group of the --config file).",
                                PANEL_GROUP);
            return FALSE;
        }
        if (!value || !value[0]) {
            *error = g_strdup_printf("--%s %s is required (or %s= in the [%s] group of the --config file).", o->name,
                                     o->arg, o->name, PANEL_GROUP);
            return FALSE;
        }
    }
    return TRUE;
}

/* The name a sentence gives option o's field in a run of method, in form (g_free); NULL when the
 * form does not name it. The trainer factory names a field by its struct ("options->clip_value",
 * "embedding->learn_rate"); parts of the shared training code still speak as the method factories
 * did, of the shared options and the trained part's own fields ("config.train_options->clip_value",
 * "config.learn_rate"); the joint embedding's fields had other names there and keep only the new. */
typedef enum { FORM_SHARED_LEGACY, FORM_PART, FORM_CONFIG_LEGACY, N_FORMS } name_form;

static char *field_name(const panel_option *o, panel_method method, name_form form)
{
    const panel_place *at = &o->place[method];
    gboolean trained =
        at->part == PART_OPTIONS || at->part == (method == PANEL_EMBEDDING ? PART_EMBEDDING : PART_HYPERNETWORK);
    if (at->part == PART_NONE || at->part == PART_HOST) return NULL; /* sdt-host's own: no plugin field */
    if (form == FORM_PART) return g_strdup_printf("%s->%s", part_names[at->part], o->field);
    if (form == FORM_SHARED_LEGACY)
        return at->part == PART_OPTIONS ? g_strdup_printf("config.train_options->%s", o->field) : NULL;
    return trained ? g_strdup_printf("config.%s", o->field) : NULL;
}

/* Each field the sentence names becomes the option that sets it in a run of method. The same
 * field is another option in another method: "embedding->learn_rate" is --learn-rate in an
 * embedding run and --embedding-learn-rate in a joint one. The forms go longest first, so
 * "config.train_options->width" is never read as "options->width". */
char *panel_explain(panel_method method, const char *sentence)
{
    GPtrArray *strings = g_ptr_array_new_with_free_func(g_free);
    const char *renames[N_FORMS * N_OPTIONS][2];
    size_t n = 0;
    for (name_form form = 0; form < N_FORMS; form++)
        for (size_t i = 0; i < N_OPTIONS; i++) {
            char *field = field_name(&options[i], method, form);
            if (!field) continue;
            char *option = g_strdup_printf("--%s", options[i].name);
            g_ptr_array_add(strings, option);
            g_ptr_array_add(strings, field);
            renames[n][0] = field;
            renames[n++][1] = option;
        }
    char *explained = cli_rename_fields(sentence, (const char *const(*)[2])renames, n);
    g_ptr_array_unref(strings);
    return explained;
}

uint64_t panel_config_fingerprint(const panel_config *c)
{
    uint64_t hash = 14695981039346656037ull; /* FNV-1a */
    GString *all = g_string_new(NULL);
    g_string_append_printf(all, "method=%d\n", (int)c->method);
    for (size_t i = 0; i < N_OPTIONS; i++) {
        const panel_part part = options[i].place[c->method].part;
        if (part == PART_NONE || part == PART_HOST) continue;
        char *text = value_text(c, &options[i]);
        if (options[i].kind == OPT_F64) { /* every bit: --help's %g shows 6 digits */
            uint64_t bits;
            memcpy(&bits, field_of(c, &options[i]), sizeof bits);
            g_free(text);
            text = g_strdup_printf("%016" PRIx64, bits);
        }
        g_string_append_printf(all, "%s=%s\n", options[i].name, text ? text : "");
        g_free(text);
    }
    for (gsize k = 0; k < all->len; k++) hash = (hash ^ (uint8_t)all->str[k]) * 1099511628211ull;
    g_string_free(all, TRUE);
    return hash;
}

size_t panel_option_count(void)
{
    return N_OPTIONS;
}

void panel_option_describe(size_t i, panel_option_info *info)
{
    const panel_option *o = &options[i];
    static const char *const kinds[] = {
        [OPT_STR] = "text",         [OPT_U32] = "whole",    [OPT_I64] = "whole",     [OPT_U64] = "whole",
        [OPT_F64] = "number",       [OPT_FLAG_ON] = "flag", [OPT_FLAG_OFF] = "flag", [OPT_ENUM] = "choice",
        [OPT_FLAG_CHOICE] = "flag", [OPT_BITS] = "text"};
    info->name = o->name;
    info->kind = kinds[o->kind];
    info->arg = o->arg;
    info->help = o->help;
    info->choices = o->kind == OPT_ENUM || o->kind == OPT_BITS ? o->choices : NULL; /* BITS: the list's names */
    info->embedding = o->place[PANEL_EMBEDDING].part != PART_NONE;
    info->hypernetwork = o->place[PANEL_HYPERNETWORK].part != PART_NONE;
    info->folder = o->folder;
    info->folder_list = o->folder_list;
}

char **panel_default_values(const panel_defaults *defaults, panel_method method)
{
    panel_config *c = g_new0(panel_config, 1);
    char *ignored = NULL;
    c->method = method;
    char **values = g_new0(char *, N_OPTIONS + 1);
    if (fill_defaults(defaults, c, &ignored))
        for (size_t i = 0; i < N_OPTIONS; i++) {
            char *text = value_text(c, &options[i]);
            /* the value as a panel file takes it: unquoted; a flag as true/false */
            if (text && text[0] == '"') {
                char *inner = g_strndup(text + 1, strlen(text) - 2);
                g_free(text);
                text = inner;
            }
            if (text && (options[i].kind == OPT_FLAG_ON || options[i].kind == OPT_FLAG_OFF ||
                         options[i].kind == OPT_FLAG_CHOICE)) {
                gboolean on = strcmp(text, "on") == 0;
                g_free(text);
                text = g_strdup(on ? "true" : "false"); /* value_text already speaks in the key's own sense */
            }
            values[i] = text ? text : g_strdup("");
        }
    else
        for (size_t i = 0; i < N_OPTIONS; i++) values[i] = g_strdup("");
    g_free(ignored);
    g_free(c);
    return values;
}

void panel_finish_config(panel_config *c)
{
    /* The parts whose file is named train: an embedding, a hypernetwork, or both. */
    memset(&c->trainer, 0, sizeof c->trainer);
    c->trainer.struct_size = sizeof c->trainer;
    c->trainer.options = &c->options;
    c->trainer.embedding = c->embedding.embedding_path && c->embedding.embedding_path[0] ? &c->embedding : NULL;
    c->trainer.hypernetwork =
        c->hypernetwork.hypernetwork_path && c->hypernetwork.hypernetwork_path[0] ? &c->hypernetwork : NULL;
}
