/* sdtrain.h - the stable C ABI of libsdtrain.so. The only header a host needs.
 *
 * sdtrain trains Stable Diffusion textual-inversion embeddings (and, later, hypernetworks)
 * on the GPU or the CPU, with its own mixed-precision loss scaler and a NaN/Inf fallback.
 * The full contract, as numbered testable rules, is docs/abi.md; the essentials:
 *
 *  1. The plugin exports ONE symbol, the const struct `sdtrain_entry` (name: SDTRAIN_ENTRY_SYMBOL).
 *     Everything else is reached through it: entry -> init -> get_factory(id) -> functions.
 *  2. Versions: a host passes the ABI version it was compiled against (SDT_ABI_VERSION) to init.
 *     The same major works (minors only add); another major is refused with
 *     SDT_STATUS_VERSION_MISMATCH and a sentence, never a crash.
 *  3. Every struct that crosses the boundary starts with `uint32_t struct_size` (= sizeof as the
 *     writer was compiled). The plugin reads only the first struct_size bytes of an input struct
 *     and uses defaults for the rest; it writes only the first struct_size bytes of an output struct.
 *     Fields are only ever appended, never reordered or removed.
 *  4. Handles are opaque. Every function returns an sdt_status. Each handle keeps the sentence of
 *     its last error (cause and fix), which the host copies out with get_last_error.
 *  5. Nothing is freed across the boundary: strings and blobs come back copied into buffers the
 *     host owns ("copy-out": buffer, capacity, and an optional out-count of bytes needed,
 *     including the terminating NUL). Strings the host passes in are borrowed for the call only.
 *  6. No global state beyond the init reference count: two handles never share anything.
 *  7. Threads: every function states where it may be called:
 *       [any thread]     callable from any thread, also while run() is in progress on another;
 *       [main thread]    one thread at a time per handle and never while run() is in progress
 *                        on that handle (it need not literally be the process's main thread);
 *       [worker thread]  blocking work; the host calls it from a thread it can afford to block.
 *     Host callbacks are called on the thread that made the call that causes them.
 *  8. The plugin never calls exit(), abort() or assert() on any input.
 *
 * Factories: "sdtrain.trainer/1" (sdt_trainer_factory, 1.7: one trainer for every method; an
 * embedding, a hypernetwork or both are parts of one config; method-specific calls are extensions
 * looked up by id), "sdtrain.scaler/1" (sdt_loss_scaler_factory). Deprecated since 1.7 and kept
 * working for hosts built against 1.0-1.6: "sdtrain.textual_inversion/1" (sdt_ti_factory) and
 * "sdtrain.hypernetwork/1" (sdt_hn_factory, 1.2; its applier 1.4), both thin adapters over the
 * trainer factory. Devices: libsdtrain.so needs no CUDA library; it opens the sibling module
 * libsdtrain_cuda.so at run time for device auto/cuda (docs/abi.md section 10), and NCCL
 * (libnccl.so.2) only for data parallelism (1.8, docs/abi.md 3.16).
 *
 * The header depends on <stdint.h>, <stddef.h> and <stdbool.h> only and compiles as C11 and C++17.
 */
#ifndef SDTRAIN_H
#define SDTRAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Versions ----------------------------------------------------------------------------- */

#define SDT_ABI_VERSION_MAJOR 1
#define SDT_ABI_VERSION_MINOR 11
#define SDT_ABI_VERSION_PATCH 0

typedef struct sdt_version {
    uint32_t major; /* incompatible changes; must match exactly */
    uint32_t minor; /* additions only: new factories, fields appended to structs */
    uint32_t patch; /* no interface change */
} sdt_version;

/* The version this header describes, as a value (C and C++). */
#define SDT_ABI_VERSION_INIT                                                                                           \
    {                                                                                                                  \
        SDT_ABI_VERSION_MAJOR, SDT_ABI_VERSION_MINOR, SDT_ABI_VERSION_PATCH                                            \
    }

/* Marks what a host should move off (the 1.x method factories, 1.7). Silent unless the host
 * defines SDT_WARN_DEPRECATED before including this header: hosts built with -Werror keep building. */
#if defined(SDT_WARN_DEPRECATED) && (defined(__GNUC__) || defined(__clang__))
#define SDT_DEPRECATED(why) __attribute__((deprecated(why)))
#else
#define SDT_DEPRECATED(why)
#endif

/* Export macro, used by the plugin on its one symbol. Hosts never need it. */
#if defined(_WIN32)
#define SDT_EXPORT __declspec(dllexport)
#elif defined(__GNUC__)
#define SDT_EXPORT __attribute__((visibility("default")))
#else
#define SDT_EXPORT
#endif

/* ---- Status codes ------------------------------------------------------------------------- */

/* Zero is success, positive values are successful outcomes worth telling apart, negative values
 * are errors; for each error the handle's last-error sentence says what happened and the fix.
 * New codes may be added in minor versions: treat an unknown negative code as an error. */
typedef enum sdt_status {
    SDT_STATUS_OK = 0,
    SDT_STATUS_INTERRUPTED = 1,         /* run() stopped because interrupt() was called; state saved */
    SDT_STATUS_INVALID_ARGUMENT = -1,   /* a NULL pointer, a bad enum value, a field out of range */
    SDT_STATUS_VERSION_MISMATCH = -2,   /* the host speaks another ABI major version */
    SDT_STATUS_NOT_INITIALIZED = -3,    /* a call before init() or after the last deinit() */
    SDT_STATUS_UNSUPPORTED = -4,        /* this build of the plugin cannot do this (yet) */
    SDT_STATUS_OUT_OF_MEMORY = -5,      /* host or device memory ran out */
    SDT_STATUS_IO = -6,                 /* a file could not be read, written or renamed */
    SDT_STATUS_BAD_FORMAT = -7,         /* a file was read but its contents are not what was expected */
    SDT_STATUS_VALIDATION = -8,         /* prepare() found a problem with the job (the sentence says which) */
    SDT_STATUS_BAD_STATE = -9,          /* the call is not allowed now (run before prepare, run twice...) */
    SDT_STATUS_BUFFER_TOO_SMALL = -10,  /* a copy-out buffer was too small; the output is truncated */
    SDT_STATUS_ALREADY_EXISTS = -11,    /* a file exists and overwrite was not asked for */
    SDT_STATUS_NOT_FOUND = -12,         /* a file, folder or id does not exist */
    SDT_STATUS_NUMERICAL = -13,         /* training diverged (too many non-finite steps); last good state saved */
    SDT_STATUS_SCALER_MISUSE = -14,     /* the loss scaler was called out of order (the sentence says how) */
    SDT_STATUS_NO_GRADIENT = -15,       /* a trainable parameter receives no gradient */
    SDT_STATUS_DEVICE = -16,            /* the GPU backend failed or is unavailable */
    SDT_STATUS_INTERNAL = -17,          /* a bug in the plugin; please report the sentence */
    SDT_STATUS_FORCE_32BIT = 0x7fffffff /* keeps the enum 32 bits wide on every compiler */
} sdt_status;

/* ---- Host callbacks ----------------------------------------------------------------------- */

typedef enum sdt_log_level {
    SDT_LOG_DEBUG = 0,
    SDT_LOG_INFO = 1,
    SDT_LOG_WARNING = 2,
    SDT_LOG_ERROR = 3,
    SDT_LOG_FORCE_32BIT = 0x7fffffff
} sdt_log_level;

typedef enum sdt_precision {
    SDT_PRECISION_FP32 = 0,
    SDT_PRECISION_FP16 = 1, /* with loss scaling */
    SDT_PRECISION_BF16 = 2, /* no scaling needed; needs compute capability >= 8.0 on CUDA */
    SDT_PRECISION_FORCE_32BIT = 0x7fffffff
} sdt_precision;

typedef enum sdt_device_choice {
    SDT_DEVICE_CHOICE_AUTO = 0, /* CUDA when libsdtrain_cuda.so and a GPU are usable, else CPU */
    SDT_DEVICE_CHOICE_CPU = 1,
    SDT_DEVICE_CHOICE_CUDA = 2, /* CUDA or an error; never a silent CPU run */
    SDT_DEVICE_CHOICE_FORCE_32BIT = 0x7fffffff
} sdt_device_choice;

/* Training health after one optimizer step. Output struct: set struct_size before a get call. */
typedef struct sdt_metrics {
    uint32_t struct_size;
    uint32_t precision;       /* sdt_precision in use now (changes to FP32 when the fallback fires) */
    int64_t step;             /* optimizer steps done, counting from the embedding's stored step */
    int64_t max_steps;        /* where the run stops (max steps or the schedule's last step) */
    int64_t epoch;            /* 0-based */
    int64_t epoch_step;       /* optimizer step within the epoch, 0-based */
    int64_t skipped_steps;    /* steps skipped for non-finite gradients or loss, whole run */
    double loss;              /* mean loss of the step (unscaled); NaN when the step was skipped */
    double grad_norm;         /* L2 norm of the unscaled gradients before clipping */
    double learn_rate;        /* learning rate used for the step (after any backoff) */
    double loss_scale;        /* current loss scale; 1 when not scaling */
    double images_per_second; /* recent training throughput */
    double elapsed_seconds;   /* wall time of this run() so far */
    bool fallback_fired;      /* the one-shot NaN/Inf fallback to fp32 has happened */
} sdt_metrics;

/* A preview image, valid only during the preview_ready callback. */
typedef struct sdt_preview {
    uint32_t struct_size;
    uint32_t width;
    uint32_t height;
    uint32_t channels; /* 3: RGB, 8 bits each, rows top to bottom, no padding */
    int64_t step;
    const uint8_t *pixels; /* width*height*channels bytes */
    const char *path;      /* the PNG already written, UTF-8 */
    const char *prompt;    /* the prompt it was sampled from */
} sdt_preview;

typedef enum sdt_file_kind {
    SDT_FILE_EMBEDDING = 0,          /* the final or current embedding (.safetensors) */
    SDT_FILE_EMBEDDING_SNAPSHOT = 1, /* a copy saved every N steps */
    SDT_FILE_EMBEDDING_CARD = 2,     /* an A1111 PNG card (sd-ti-embedding chunk) */
    SDT_FILE_TRAINING_STATE = 3,     /* a full-state checkpoint for resuming */
    SDT_FILE_LOSS_CSV = 4,
    SDT_FILE_SETTINGS = 5, /* the settings JSON of the run */
    SDT_FILE_PREVIEW = 6,
    SDT_FILE_HYPERNETWORK = 7,          /* 1.2: the final or current hypernetwork (.pt and its .safetensors twin) */
    SDT_FILE_HYPERNETWORK_SNAPSHOT = 8, /* 1.2: a hypernetwork copy saved every N steps */
    SDT_FILE_FORCE_32BIT = 0x7fffffff
} sdt_file_kind;

/* A file the plugin has finished writing (atomically), valid only during the callback. */
typedef struct sdt_saved_file {
    uint32_t struct_size;
    uint32_t kind; /* sdt_file_kind */
    int64_t step;
    const char *path; /* UTF-8 */
} sdt_saved_file;

/* The table a host passes when it creates a handle. The plugin copies the table (the first
 * struct_size bytes), so the host's struct need not outlive the call; user_data must outlive
 * the handle. Every callback may be NULL. Callbacks run on the thread of the call that causes
 * them (for training: the worker thread inside run()); pointers they receive are valid only
 * during the callback. A callback may call interrupt(), get_metrics() and get_run_state() on
 * the same handle, nothing else on it. */
typedef struct sdt_host_callbacks {
    uint32_t struct_size;
    void *user_data;
    void (*log)(void *user_data, sdt_log_level level, const char *message);
    void (*metrics)(void *user_data, const sdt_metrics *metrics); /* after every optimizer step */
    void (*preview_ready)(void *user_data, const sdt_preview *preview);
    void (*file_saved)(void *user_data, const sdt_saved_file *file);
} sdt_host_callbacks;

/* ---- The entry point ---------------------------------------------------------------------- */

#define SDTRAIN_ENTRY_SYMBOL "sdtrain_entry"

typedef struct sdt_entry {
    /* The ABI version the plugin implements. First field forever, so any host can read it. */
    sdt_version abi_version;
    /* The plugin's own release, e.g. "0.1.0" (static string, valid while loaded). */
    const char *plugin_version;

    /* [main thread] Reference-counted: every successful init needs one deinit. host_version is
     * SDT_ABI_VERSION as the host was compiled. A different major returns
     * SDT_STATUS_VERSION_MISMATCH and copies a sentence into err (err may be NULL). */
    sdt_status (*init)(sdt_version host_version, char *err, uint32_t err_size);

    /* [main thread] Drops one init reference. Extra calls are harmless. All handles must have
     * been destroyed before the last deinit. */
    void (*deinit)(void);

    /* [any thread] Returns the factory with this id ("sdtrain.textual_inversion/1", ...) cast to
     * const void *, or NULL when the id is unknown or the plugin is not initialised. The table is
     * static in the plugin: valid until the last deinit. */
    const void *(*get_factory)(const char *factory_id);

    /* [any thread] A short constant name for a status, e.g. "SDT_STATUS_IO" (never NULL). */
    const char *(*status_name)(sdt_status status);
} sdt_entry;

/* Signature of the exported object, for hosts that look it up with dlsym/GModule:
 *   const sdt_entry *entry = (const sdt_entry *)dlsym(lib, SDTRAIN_ENTRY_SYMBOL); */
#ifdef SDTRAIN_BUILDING_PLUGIN
SDT_EXPORT extern const sdt_entry sdtrain_entry;
#endif

/* ---- Textual inversion: "sdtrain.textual_inversion/1" (deprecated in 1.7) ------------------- */
/* Kept for hosts built against 1.0-1.6: an adapter over "sdtrain.trainer/1" (below), which new
 * hosts use. Its structs stay: sdt_embedding_spec, sdt_embedding_info and the enums serve the
 * trainer factory's extensions too. */

#define SDT_FACTORY_TEXTUAL_INVERSION "sdtrain.textual_inversion/1"

typedef struct sdt_ti_trainer sdt_ti_trainer; /* opaque */

/* Input to create_embedding. */
typedef struct sdt_embedding_spec {
    uint32_t struct_size;
    uint32_t vectors_per_token; /* 1..75 */
    const char *name;           /* sanitised to [A-Za-z0-9._- ]; the file is <output_dir>/<name>.safetensors */
    const char *init_text;      /* tokenised; vector i = token row floor(i*n/N); NULL or "" = zeros */
    const char *model_path;     /* the SD checkpoint (file or diffusers folder) whose text encoder sets the width */
    const char *output_dir;     /* must exist */
    bool overwrite;             /* false: an existing file is an SDT_STATUS_ALREADY_EXISTS error */
    /* ---- appended in 1.1 ---- */
    const char *tokenizer_path; /* [NULL] as sdt_ti_config.tokenizer_path */
    /* ---- appended in 1.9 ---- SD3.5 and Flux.1: the encoders a checkpoint may lack (as sdt_train_options') */
    const char *clip_l_path; /* [NULL] */
    const char *clip_g_path; /* [NULL] */
    const char *t5xxl_path;  /* [NULL] */
} sdt_embedding_spec;

typedef enum sdt_clip_mode {
    SDT_CLIP_DISABLED = 0,
    SDT_CLIP_VALUE = 1, /* clamp each unscaled gradient element to +-clip_value */
    SDT_CLIP_NORM = 2,  /* rescale the unscaled gradients to a total L2 norm <= clip_value */
    SDT_CLIP_FORCE_32BIT = 0x7fffffff
} sdt_clip_mode;

typedef enum sdt_latent_sampling {
    SDT_LATENT_ONCE = 0,          /* one VAE draw per image, cached for the run */
    SDT_LATENT_DETERMINISTIC = 1, /* the VAE mean, cached */
    SDT_LATENT_RANDOM = 2,        /* a fresh draw every time an image is used */
    SDT_LATENT_FORCE_32BIT = 0x7fffffff
} sdt_latent_sampling;

/* Whether a CUDA training run captures its steady-state UNet backward as a CUDA graph (1.11). */
typedef enum sdt_cuda_graph {
    SDT_CUDA_GRAPH_AUTO = 0, /* the plugin's choice: today uncaptured (the capture awaits its measurement on a GPU:
                              * docs/abi.md 3.19); a later minor version may choose ON */
    SDT_CUDA_GRAPH_ON = 1,   /* captured on the second pass of each shape and replayed (the same bytes) */
    SDT_CUDA_GRAPH_OFF = 2,  /* every step uncaptured */
    SDT_CUDA_GRAPH_FORCE_32BIT = 0x7fffffff
} sdt_cuda_graph;

/* What the model's UNet predicts, which sets the training target (1.3). */
typedef enum sdt_prediction_type {
    SDT_PREDICTION_AUTO = 0,    /* detect: a diffusers folder's scheduler config or A1111's <stem>.yaml beside a
                                 * single file, else for an SD 2.x model the UNet's own answer (A1111's test,
                                 * stated in the log), else epsilon (SD 1.x) */
    SDT_PREDICTION_EPSILON = 1, /* the noise: SD 1.x, SD 2.x 512 and inpainting models */
    SDT_PREDICTION_V = 2,       /* v: SD 2.x 768-v models */
    SDT_PREDICTION_FORCE_32BIT = 0x7fffffff
} sdt_prediction_type;

typedef struct sdt_train_options sdt_train_options; /* 1.2: the options every method shares (below) */

/* 1.5: the per-element training loss (sdt_train_options.loss_type). */
typedef enum sdt_loss_type {
    SDT_LOSS_L2 = 0,    /* (pred - target)^2, A1111's MSE */
    SDT_LOSS_L1 = 1,    /* |pred - target| */
    SDT_LOSS_HUBER = 2, /* PyTorch's huber_loss: 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta) */
    SDT_LOSS_FORCE_32BIT = 0x7fffffff
} sdt_loss_type;

/* 1.5: the learning-rate scheduler, a factor on the learn_rate schedule string's rate, as
 * diffusers' get_scheduler defines it, at the trained file's step s (as the string counts steps) with
 * T = max_steps: a linear warmup s / warmup_steps while s < warmup_steps, then: */
typedef enum sdt_lr_scheduler {
    SDT_LR_SCHEDULER_CONSTANT = 0,             /* 1 (the string's rates as they are: A1111) */
    SDT_LR_SCHEDULER_LINEAR = 1,               /* linear decay to 0 at max_steps */
    SDT_LR_SCHEDULER_COSINE = 2,               /* half a cosine down to 0 at max_steps */
    SDT_LR_SCHEDULER_COSINE_WITH_RESTARTS = 3, /* lr_cycles cosines, each from 1 to 0 (hard restarts) */
    SDT_LR_SCHEDULER_FORCE_32BIT = 0x7fffffff
} sdt_lr_scheduler;

/* The Train tab. Input struct: fill it with config_defaults(), then change what you need.
 * Strings are UTF-8 paths or text, borrowed for the duration of prepare() (the plugin copies
 * them); NULL means "not set" (the default applies where one exists). Defaults in brackets. */
typedef struct sdt_ti_config {
    uint32_t struct_size;
    uint32_t batch_size;                /* [1] clamped to the number of images */
    uint32_t grad_accum_steps;          /* [1] */
    uint32_t clip_mode;                 /* sdt_clip_mode [DISABLED]; applied to unscaled gradients */
    uint32_t width;                     /* [512] 64..2048, multiple of 8 */
    uint32_t height;                    /* [512] */
    uint32_t latent_sampling;           /* sdt_latent_sampling [ONCE] */
    uint32_t precision;                 /* sdt_precision [FP32] */
    uint32_t device;                    /* sdt_device_choice [AUTO] */
    uint32_t clip_skip;                 /* [1] 1 = last CLIP layer, 2 = the one before, ... */
    uint32_t max_consecutive_nonfinite; /* [10] stop (state saved) after this many bad steps in a row */
    uint32_t preview_steps;             /* [20] sampler steps for a preview */
    uint32_t preview_width;             /* [0] 0 = the training width */
    uint32_t preview_height;            /* [0] 0 = the training height */
    uint32_t cpu_threads;               /* [0] 0 = the plugin's choice */
    uint32_t reserved0;                 /* [0] keeps the 64-bit fields aligned; must be 0 */
    int64_t max_steps;                  /* [100000] total optimizer steps, counted from the stored step */
    int64_t save_every;                 /* [500] save a copy every N steps, 0 = never */
    int64_t preview_every;              /* [500] save a preview image every N steps, 0 = never */
    int64_t write_csv_every;          /* [500] write the loss CSV every N steps and at the run's last step, 0 = never */
    uint64_t seed;                    /* [0] training RNG seed */
    int64_t preview_seed;             /* [-1] -1 = random */
    double tag_dropout;               /* [0] probability of dropping each caption tag, 0..1 */
    double lr_backoff;                /* [0.5] learning-rate factor applied when the fp32 fallback fires */
    double preview_cfg_scale;         /* [0] classifier-free guidance; 0 = 7, Flux.1 1 */
    double loss_scale_init;           /* [65536] fp16 only: the initial loss scale */
    const char *embedding_path;       /* the embedding to train (any format inspect reads) */
    const char *model_path;           /* the SD checkpoint: file or diffusers folder */
    const char *learn_rate;           /* ["0.005"] schedule "RATE[:STEP], ..." (A1111 grammar) */
    const char *clip_value;           /* ["0.1"] same schedule grammar */
    const char *dataset_dir;          /* flat folder of images with optional <stem>.txt captions */
    const char *log_dir;              /* ["textual_inversion"]; outputs go to <log_dir>/<date>/<name>/ */
    const char *template_file;        /* prompt template file with [name] and [filewords] */
    const char *filename_word_regex;  /* [""] caption from filename: words matching this regex */
    const char *filename_join_string; /* [" "] joins those words */
    const char *preview_prompt;       /* [NULL] NULL = the first caption of the batch */
    const char *preview_negative_prompt; /* [""] */
    const char *preview_sampler;         /* ["ddim"] the preview sampler: "ddim" (eta 0), "euler_a" (Euler ancestral)
                                       * or "dpmpp_2m_karras" (DPM++ 2M, Karras sigmas); 1.5 adds the last two */
    const char *resume_state_path;       /* [NULL] a full-state checkpoint to continue from, or a folder:
                                       * the newest state in it that belongs to the embedding */
    bool varsize;                        /* [false] do not resize; images are bucketed by size */
    bool shuffle_tags;                   /* [false] shuffle caption tags split by ',' */
    bool use_alpha_as_loss_weight;       /* [false] PNG alpha weights the loss */
    bool save_image_with_embedding;      /* [true] also write A1111 PNG cards */
    bool anomaly_mode;                   /* [false] check every layer for non-finite values (slow) */
    /* ---- appended in 1.1 (docs/abi.md 3.6: past 1.0's tail padding) ---- */
    uint8_t reserved1[3];        /* [0] must be 0 */
    bool v_prediction;           /* [false] true: the model predicts v, as prediction_type SDT_PREDICTION_V
                                       * (kept for 1.1/1.2 hosts); false: prediction_type decides */
    bool gradient_checkpointing; /* [false] recompute UNet / transformer blocks in backward: less memory, slower */
    const char *tokenizer_path;  /* [NULL] folder with vocab.json + merges.txt; NULL = the model
                                       * folder's tokenizer/, or a tokenizer/ folder next to the model file */
    /* ---- appended in 1.2 ---- */
    int64_t save_state_every_seconds;       /* [0] also write the training state after a step when this many
                                       * seconds passed since it was last written; 0 = only with each
                                       * copy (save_every) and at the end */
    const sdt_train_options *train_options; /* [NULL] non-NULL: the shared options come from here and the
                                       * fields above that sdt_train_options also has are ignored, so one
                                       * struct serves both methods (docs/abi.md 3.7) */
    /* ---- appended in 1.3 ---- */
    uint32_t prediction_type; /* sdt_prediction_type [AUTO]; EPSILON with v_prediction true is a
                                       * VALIDATION error (the two contradict) */
    uint32_t reserved2;       /* [0] must be 0 */
} sdt_ti_config;

/* What prepare() found. Output struct: set struct_size first. */
typedef struct sdt_prepare_info {
    uint32_t struct_size;
    uint32_t precision;        /* sdt_precision that will be used */
    uint32_t device;           /* SDT_DEVICE_CHOICE_CPU or SDT_DEVICE_CHOICE_CUDA, as resolved */
    uint32_t vectors;          /* rows of the embedding */
    uint32_t embedding_dim;    /* width of each row */
    uint32_t batch_size;       /* after clamping */
    uint32_t grad_accum_steps; /* after clamping */
    uint32_t reserved0;
    int64_t dataset_images;
    int64_t steps_per_epoch;
    int64_t start_step;              /* the embedding's stored step, or the resumed step */
    int64_t max_steps;               /* where the run will stop */
    uint64_t memory_estimate_bytes;  /* peak on the chosen device */
    uint64_t memory_available_bytes; /* what the device reported as free; 0 = unknown */
} sdt_prepare_info;

typedef enum sdt_run_state {
    SDT_RUN_IDLE = 0,     /* created, nothing prepared */
    SDT_RUN_PREPARED = 1, /* prepare() succeeded; run() may be called */
    SDT_RUN_RUNNING = 2,
    SDT_RUN_FINISHED = 3,    /* reached max steps; final files saved */
    SDT_RUN_INTERRUPTED = 4, /* stopped by interrupt(); state saved */
    SDT_RUN_FAILED = 5,      /* stopped by an error; last good state saved when possible */
    SDT_RUN_FORCE_32BIT = 0x7fffffff
} sdt_run_state;

typedef enum sdt_embedding_file_format {
    SDT_EMBEDDING_FILE_UNKNOWN = 0,
    SDT_EMBEDDING_FILE_SAFETENSORS = 1,      /* one tensor, e.g. emb_params [N, dim] */
    SDT_EMBEDDING_FILE_SAFETENSORS_SDXL = 2, /* clip_l [N, 768] and clip_g [N, 1280] */
    SDT_EMBEDDING_FILE_A1111_PT = 3,         /* torch zip with string_to_param */
    SDT_EMBEDDING_FILE_PNG_CHUNK = 4,        /* PNG with an sd-ti-embedding text chunk */
    SDT_EMBEDDING_FILE_PNG_PIXELS = 5,       /* PNG with the payload hidden in the pixels */
    SDT_EMBEDDING_FILE_TRAINING_STATE = 6,   /* a full-state checkpoint of this plugin */
    SDT_EMBEDDING_FILE_FORCE_32BIT = 0x7fffffff
} sdt_embedding_file_format;

/* What inspect() read from a file. Output struct: set struct_size first. Text fields are
 * NUL-terminated and truncated to fit. */
typedef struct sdt_embedding_info {
    uint32_t struct_size;
    uint32_t format; /* sdt_embedding_file_format */
    uint32_t vectors;
    uint32_t embedding_dim;  /* SDXL: 768 + 1280 */
    int64_t step;            /* -1 when the file does not record it */
    double vector_norm_mean; /* mean L2 norm of the rows */
    bool all_finite;         /* false when any value is NaN or Inf */
    char name[256];
    char init_text[256];
    char checkpoint_name[256];
    char checkpoint_hash[72];
} sdt_embedding_info;

/* The textual-inversion factory. A table of functions: the host calls them through the pointer
 * that get_factory returned. struct_size lets a host check that a function appended in a later
 * minor version is present: offsetof(sdt_ti_factory, fn) < struct_size. */
typedef struct sdt_ti_factory {
    uint32_t struct_size;

    /* [any thread] Fills *config with the defaults listed in sdt_ti_config. Set
     * config->struct_size = sizeof(*config) first; only that many bytes are written. Default
     * strings point to constants inside the plugin, valid while it is loaded. */
    sdt_status (*config_defaults)(sdt_ti_config *config);

    /* [main thread] Creates a trainer. The callbacks table is copied (NULL = no callbacks).
     * On failure *out is NULL and the sentence is copied into err (err may be NULL). */
    sdt_status (*create)(const sdt_host_callbacks *callbacks, sdt_ti_trainer **out, char *err, uint32_t err_size);

    /* [main thread] Destroys a trainer; NULL is a no-op. Not while run() is in progress:
     * interrupt() and wait for run() to return first. */
    void (*destroy)(sdt_ti_trainer *trainer);

    /* [any thread] Copies the sentence of the last failed call on this handle ("" when none)
     * into buf. *needed (may be NULL) receives the size needed including the NUL. */
    sdt_status (*get_last_error)(const sdt_ti_trainer *trainer, char *buf, uint32_t buf_size, uint32_t *needed);

    /* [worker thread] Creates an embedding file from spec and copies its path into path_buf
     * (may be NULL). Loads the model's text encoder: may take seconds. */
    sdt_status (*create_embedding)(sdt_ti_trainer *trainer, const sdt_embedding_spec *spec, char *path_buf,
                                   uint32_t path_buf_size, uint32_t *needed);

    /* [worker thread] Validates the whole job before any training work (every input, the
     * dataset, templates, the token window, the LR schedule, memory) and loads what run() needs.
     * On success the state is SDT_RUN_PREPARED and *info (may be NULL) is filled. Calling it
     * again replaces the previous preparation. */
    sdt_status (*prepare)(sdt_ti_trainer *trainer, const sdt_ti_config *config, sdt_prepare_info *info);

    /* [worker thread] Trains until max steps, an error, or interrupt(). Blocks; calls the host
     * callbacks on this thread. Returns SDT_STATUS_OK (finished, files saved),
     * SDT_STATUS_INTERRUPTED (stopped after a whole step, state saved) or an error. */
    sdt_status (*run)(sdt_ti_trainer *trainer);

    /* [any thread] Asks run() to stop after the current optimizer step and save. Returns at
     * once; safe to call many times, before run() (then run() stops after saving at once)
     * or with no run at all. The request is cleared by the next prepare(). */
    sdt_status (*interrupt)(sdt_ti_trainer *trainer);

    /* [any thread] The current state (sdt_run_state) of the handle. */
    sdt_status (*get_run_state)(const sdt_ti_trainer *trainer, sdt_run_state *state);

    /* [any thread] The metrics of the latest finished step (all zero before the first). */
    sdt_status (*get_metrics)(const sdt_ti_trainer *trainer, sdt_metrics *metrics);

    /* [main thread] Writes a full-state checkpoint (embedding, optimizer moments, scaler, step,
     * schedule position, RNG, data order) atomically to path. Needs a prepared trainer. */
    sdt_status (*save_state)(sdt_ti_trainer *trainer, const char *path);

    /* [main thread] Loads a full-state checkpoint into a prepared trainer; run() continues it
     * bit for bit (on the CPU). The same as setting resume_state_path in the config. */
    sdt_status (*load_state)(sdt_ti_trainer *trainer, const char *path);

    /* [any thread] Reads an embedding file of any supported format. info and json_buf may each
     * be NULL; json_buf receives the same facts (and all metadata) as one JSON object. With
     * info NULL, a model checkpoint is described in json_buf too ("kind": "model checkpoint":
     * family, widths, the config beside it and the prediction type it decides). */
    sdt_status (*inspect)(sdt_ti_trainer *trainer, const char *path, sdt_embedding_info *info, char *json_buf,
                          uint32_t json_buf_size, uint32_t *json_needed);

    /* ---- appended in 1.2 ---- */
    /* [any thread] Fills *options with the shared defaults (as this factory's config_defaults
     * fills the same fields). Set options->struct_size first. */
    sdt_status (*train_options_defaults)(sdt_train_options *options);
} sdt_ti_factory SDT_DEPRECATED("use sdtrain.trainer/1 (sdt_trainer_factory)");

/* ---- The loss scaler: "sdtrain.scaler/1" --------------------------------------------------- */
/* PyTorch GradScaler semantics (init scale 2^16, growth 2, backoff 0.5, interval 2000), one
 * state per optimizer (READY -> UNSCALED -> STEPPED), misuse reported as a status with a sentence.
 * For hosts that run their own training loop over float32 gradient buffers. Per iteration:
 *   scale_loss -> (host backward) -> unscale (per optimizer) -> host clips -> should_step (per
 *   optimizer; the host applies its optimizer only when told to) -> update. */

#define SDT_FACTORY_SCALER "sdtrain.scaler/1"

typedef struct sdt_loss_scaler sdt_loss_scaler; /* opaque */

/* Input struct: fill with config_defaults() first. */
typedef struct sdt_loss_scaler_config {
    uint32_t struct_size;
    uint32_t optimizer_count; /* [1] optimizers sharing this scale, indexed 0..count-1 */
    int64_t growth_interval;  /* [2000] clean steps before the scale grows; > 0 */
    uint32_t hysteresis;      /* [1] overflows tolerated before backing off (1 = PyTorch) */
    uint32_t reserved0;
    double init_scale;     /* [65536] finite, > 0 */
    double growth_factor;  /* [2.0] > 1 */
    double backoff_factor; /* [0.5] in (0, 1) */
    double min_scale;      /* [0] the scale never backs off below this (0 = no floor) */
    bool enabled;          /* [true] false = identity: scale 1, every step taken */
} sdt_loss_scaler_config;

typedef struct sdt_loss_scaler_factory {
    uint32_t struct_size;
    /* [any thread] Defaults as listed in sdt_loss_scaler_config. */
    sdt_status (*config_defaults)(sdt_loss_scaler_config *config);
    /* [main thread] Validates config and creates a scaler; errors go to err. */
    sdt_status (*create)(const sdt_loss_scaler_config *config, sdt_loss_scaler **out, char *err, uint32_t err_size);
    /* [main thread] NULL is a no-op. */
    void (*destroy)(sdt_loss_scaler *scaler);
    /* [any thread] As sdt_ti_factory.get_last_error. */
    sdt_status (*get_last_error)(const sdt_loss_scaler *scaler, char *buf, uint32_t buf_size, uint32_t *needed);
    /* [main thread] *scaled = loss * scale (loss unchanged when disabled). */
    sdt_status (*scale_loss)(sdt_loss_scaler *scaler, float loss, float *scaled);
    /* [main thread] Multiplies every gradient of one optimizer by 1/scale in place and checks
     * them for NaN/Inf in the same pass. grads[i] has counts[i] floats. *found_inf (may be NULL)
     * tells whether this optimizer's step will be skipped. Twice before update() is misuse. */
    sdt_status (*unscale)(sdt_loss_scaler *scaler, uint32_t optimizer, float *const *grads, const uint64_t *counts,
                          uint32_t buffer_count, bool *found_inf);
    /* [main thread] Records the step of one optimizer; *should_step is false when its gradients
     * were not finite. Without unscale() since the last update() it is misuse (the
     * "No inf checks were recorded" case), reported instead of guessed. */
    sdt_status (*should_step)(sdt_loss_scaler *scaler, uint32_t optimizer, bool *should_step);
    /* [main thread] Ends the iteration: backs off on any overflow, else counts toward growth. */
    sdt_status (*update)(sdt_loss_scaler *scaler);
    /* [any thread] The current scale (1 when disabled). */
    sdt_status (*get_scale)(const sdt_loss_scaler *scaler, double *scale);
    /* [main thread] Copies the state (scale, growth tracker, factors) into buf, a versioned
     * little-endian blob. buf NULL or too small: *needed tells the size. Only between iterations. */
    sdt_status (*save_state)(const sdt_loss_scaler *scaler, void *buf, uint32_t buf_size, uint32_t *needed);
    /* [main thread] Restores a blob from save_state; a corrupt or foreign blob is BAD_FORMAT. */
    sdt_status (*load_state)(sdt_loss_scaler *scaler, const void *buf, uint32_t buf_size);
} sdt_loss_scaler_factory;

/* ---- Options every training method shares (1.2) ------------------------------------------ */

/* The Train tab's shared part, taken by pointer by every method's config (sdt_ti_config.
 * train_options, sdt_hn_config.train_options). Input struct: fill it with train_options_defaults()
 * of any training factory. Fields mean what the same fields of sdt_ti_config mean. */
struct sdt_train_options {
    uint32_t struct_size;
    uint32_t batch_size;                /* [1] */
    uint32_t grad_accum_steps;          /* [1] */
    uint32_t clip_mode;                 /* sdt_clip_mode [DISABLED] */
    uint32_t width;                     /* [512] */
    uint32_t height;                    /* [512] */
    uint32_t latent_sampling;           /* sdt_latent_sampling [ONCE] */
    uint32_t precision;                 /* sdt_precision [FP32] */
    uint32_t device;                    /* sdt_device_choice [AUTO] */
    uint32_t clip_skip;                 /* [1] */
    uint32_t max_consecutive_nonfinite; /* [10] */
    uint32_t preview_steps;             /* [20] */
    uint32_t preview_width;             /* [0] */
    uint32_t preview_height;            /* [0] */
    uint32_t cpu_threads;               /* [0] */
    uint32_t reserved0;                 /* [0] must be 0 */
    int64_t max_steps;                  /* [100000] */
    int64_t save_every;                 /* [500] */
    int64_t preview_every;              /* [500] */
    int64_t write_csv_every;            /* [500] */
    uint64_t seed;                      /* [0] */
    int64_t preview_seed;               /* [-1] */
    double tag_dropout;                 /* [0] */
    double lr_backoff;                  /* [0.5] */
    double preview_cfg_scale;           /* [0] 0 = 7, Flux.1 1 */
    double loss_scale_init;             /* [65536] */
    const char *model_path;
    const char *clip_value; /* ["0.1"] */
    const char *dataset_dir;
    const char *log_dir; /* ["textual_inversion"]; the hypernetwork factory's default is "hypernetworks",
                                       * the trainer factory's NULL (sdt_trainer_config.options) */
    const char *template_file;
    const char *filename_word_regex;     /* [""] */
    const char *filename_join_string;    /* [" "] */
    const char *preview_prompt;          /* [NULL] */
    const char *preview_negative_prompt; /* [""] */
    const char *preview_sampler;         /* ["ddim"] */
    const char *resume_state_path;       /* [NULL] */
    const char *tokenizer_path;          /* [NULL] */
    bool varsize;                        /* [false] */
    bool shuffle_tags;                   /* [false] */
    bool use_alpha_as_loss_weight;       /* [false] */
    bool anomaly_mode;                   /* [false] */
    bool v_prediction;                   /* [false] as prediction_type SDT_PREDICTION_V (1.2 hosts) */
    bool gradient_checkpointing;         /* [false] */
    /* ---- appended in 1.3 (docs/abi.md 3.6: past 1.2's tail padding) ---- */
    uint8_t reserved1[2];     /* [0] must be 0 */
    uint32_t prediction_type; /* sdt_prediction_type [AUTO]; as sdt_ti_config.prediction_type */
    uint32_t reserved2;       /* [0] must be 0 */
    /* ---- appended in 1.4 ---- */
    int64_t save_state_every_seconds; /* [0] as sdt_ti_config.save_state_every_seconds, for every method; an
                                       * embedding run whose options struct is older (1.2/1.3) takes the TI
                                       * config's own field instead (docs/abi.md 3.9) */
    /* ---- appended in 1.5 ---- (the loss, noise and LR-scheduler options, docs/abi.md 3.11; every
     * default keeps A1111's training exactly) */
    uint32_t loss_type;                /* sdt_loss_type [L2] */
    uint32_t lr_scheduler;             /* sdt_lr_scheduler [CONSTANT] */
    uint32_t lr_cycles;                /* [1] cosine restarts: cosine cycles over the steps after warmup, >= 1 */
    uint32_t timestep_min;             /* [0] training timesteps drawn uniformly from timestep_min..timestep_max */
    uint32_t timestep_max;             /* [999] inclusive, <= 999, >= timestep_min */
    bool zero_terminal_snr;            /* [false] rescale the noise schedule to zero terminal SNR (Lin et al. 2023,
                                       * Algorithm 1); v-prediction models only (an epsilon model is refused) */
    bool noise_offset_random_strength; /* [false] each sample's offset strength uniform in [0, noise_offset] */
    uint8_t reserved_loss[2];          /* [0] must be 0 */
    int64_t warmup_steps;              /* [0] linear warmup from 0 over this many steps, for every scheduler */
    double min_snr_gamma;              /* [0] 0 = off; >= 1e-4: each sample's loss weighted by min(SNR, gamma)/SNR
                                       * (epsilon) or min(SNR, gamma)/(SNR + 1) (v-prediction) at its timestep */
    double noise_offset;               /* [0] 0 = off; noise += noise_offset * N(0,1) per sample and channel */
    double huber_delta;                /* [1.0] loss_type HUBER's delta, >= 1e-4 (smaller
                                       * would make every 16-bit gradient zero) */
    /* 1.5, too: preview grids, flip, caption drop-out, kept tags */
    const char *preview_prompts_file; /* [NULL] a UTF-8 text file, one preview prompt per line (blank lines
                                       * and lines starting with # skipped): each preview is a grid of
                                       * these prompts (rows) by preview_seeds (columns), labelled */
    const char *preview_seeds;        /* [NULL] the grid's columns: "N" = N seeds (preview_seed, +1, ...; or
                                       * drawn per step when preview_seed is -1), "S1, S2, ..." = those seeds;
                                       * NULL/"" = one. A grid is drawn when this or preview_prompts_file is set */
    double caption_dropout;           /* [0] probability that a sample's whole caption is the empty prompt
                                       * (seeded per sample, so a resumed run draws the same) */
    uint32_t keep_tokens;             /* [0] with shuffle_tags: the first N comma-separated tags stay in front,
                                       * in order (kohya's keep_tokens); tag_dropout spares them too */
    bool flip;                        /* [false] mirror each training sample left-right with probability 1/2
                                       * (seeded per sample; the mirrored image's latent is cached beside the
                                       * original's, as kohya's flip_aug) */
    uint8_t reserved3[3];             /* [0] must be 0 */
    /* 1.5, too: validation, EMA and the metrics file (docs/abi.md 3.13) */
    const char *validation_dir;         /* [NULL] a folder of images with captions, read as dataset_dir is, whose
                                       * loss is measured every validate_every steps */
    double validation_split;            /* [0] 0 < F < 1: hold out that fraction of dataset_dir instead (chosen by
                                       * seed, named in the log); 0 = none; not with validation_dir */
    int64_t validate_every;             /* [0] measure the validation loss every N steps; required (> 0) when
                                       * validation_dir or validation_split is set, 0 otherwise */
    double ema_decay;                   /* [0] 0 = off; 0 < D < 1: keep an exponential moving average of the trained
                                       * values, written beside the result as <stem>-ema<ext> */
    uint32_t ema_every;                 /* [1] update the average every N optimizer steps */
    uint32_t stop_after_no_improvement; /* [0] 0 = never; K: stop (state saved) after K validations in a row
                                       * without a new lowest validation loss */
    bool ema_result;                    /* [false] the result file holds the average instead (no <stem>-ema<ext>; the
                                       * trained values stay in the state, which still resumes exactly) */
    bool ema_previews;                  /* [false] previews show the average */
    bool write_metrics;                 /* [false] metrics.jsonl (one object per step) and loss.png in the log folder */
    uint8_t reserved4[5];               /* [0] must be 0 */
    /* 1.5, too: aspect-ratio buckets (docs/abi.md 3.14; kohya's sd-scripts' make_buckets) */
    uint32_t bucket_max_area; /* [0] with buckets: no bucket holds more pixels; 0 = width x height */
    uint32_t bucket_min_side; /* [256] with buckets: no bucket side is shorter; a multiple of bucket_step */
    uint32_t bucket_max_side; /* [1024] with buckets: no bucket side is longer; a multiple of bucket_step */
    uint32_t bucket_step;     /* [64] with buckets: every bucket side is a multiple of it; a multiple of 8
                                       * (the VAE), and of the model's UNet factor (checked when the model is read) */
    bool buckets;             /* [false] each image goes to the bucket nearest its aspect ratio, is resized
                                       * to cover it and cropped to it; a batch holds one bucket; not with varsize */
    bool random_crop;         /* [false] with buckets: the crop is placed at random (seeded per image, fixed
                                       * for the run as the latents are cached once) instead of centred */
    uint8_t reserved5[6];     /* [0] must be 0 */
    /* ---- appended in 1.6 ---- (docs/abi.md 3.15) */
    bool deterministic;   /* [false] true: every GPU step gives the same bits when run again (the CUDA
                                       * backend keeps to kernels that sum in a fixed order; slower attention
                                       * backward); false: cuDNN's fused attention backward where it applies,
                                       * whose dQ sums in a varying order, as PyTorch's default. The CPU always is */
    uint8_t reserved6[7]; /* [0] must be 0 */
    /* ---- appended in 1.8 ---- data parallelism (docs/abi.md 3.16) */
    int32_t world_size;           /* [0] ranks in the whole job; 0 or 1: one device, as before */
    int32_t rank;                 /* [0] the job rank of this trainer's first device */
    const int32_t *devices;       /* [NULL] in-process data parallelism: device_count CUDA ordinals, one rank
                                   * (one thread) each, ranks rank .. rank + device_count - 1; NULL: `device` */
    int32_t device_count;         /* [0] */
    int32_t comm_timeout_seconds; /* [0 = 600] a rank silent this long stops every rank */
    uint8_t comm_id[128];         /* the job's communicator id (an NCCL unique id) that rank 0's process made with
                                   * the distributed extension and handed to every process; all zero with one
                                   * process (the plugin makes its own) */
    /* ---- appended in 1.9 ---- SD3.5 and Flux.1, the rectified-flow transformer families (docs/abi.md 3.17).
     * A checkpoint that lacks a component takes it from its own file, as ComfyUI's and Forge's loaders do;
     * the sentence for a missing one names the field. Every field is refused for the UNet families. */
    const char *clip_l_path;       /* [NULL] CLIP-L text encoder (e.g. ComfyUI's clip_l.safetensors) */
    const char *clip_g_path;       /* [NULL] SD3.5's OpenCLIP bigG text encoder (clip_g.safetensors) */
    const char *t5xxl_path;        /* [NULL] the T5-XXL encoder (t5xxl_fp16.safetensors, fp8 read and upcast) */
    const char *vae_path;          /* [NULL] the 16-channel autoencoder (Flux's ae.safetensors) */
    const char *timestep_sampling; /* [NULL = the family's: logit_normal] "uniform", "logit_normal" or "mode"
                                    * (SD3's mode sampling): the density of the flow time t */
    const char *flow_weighting;    /* [NULL = "none"] the loss weight per sample: "none", "sigma_sqrt" or
                                    * "cosmap" (diffusers' weighting_scheme) */
    double logit_mean;             /* [0] logit_normal's mean */
    double logit_std;              /* [1] logit_normal's standard deviation, > 0 */
    double mode_scale;             /* [1.29] mode's scale */
    double flow_shift;             /* [0 = the family's: SD3.5 3.0, Flux the resolution shift] > 0: t' = s t / (1 + (s -
                                    * 1) t) at every resolution */
    double guidance;               /* [0 = 3.5] Flux.1 dev's distilled guidance value in training passes (and
                                    * previews); schnell has no guidance input */
    uint32_t t5_max_length;        /* [0 = the family's: SD3.5 256, Flux dev 512, schnell 256] T5 tokens a
                                    * prompt is padded or cut to, 1..512 */
    uint32_t reserved7;            /* [0] must be 0 */
    /* ---- appended in 1.11 ---- (docs/abi.md 3.19) */
    uint32_t cuda_graph; /* sdt_cuda_graph [AUTO]: whether a CUDA run captures its steady-state UNet backward
                          * once as a CUDA graph and replays it while shapes and options stay the same */
    uint32_t reserved8;  /* [0] must be 0 */
};

/* ---- Hypernetworks (1.2; the factory deprecated in 1.7) ------------------------------------ */
/* "sdtrain.hypernetwork/1" is kept for hosts built against 1.2-1.6, as an adapter over
 * "sdtrain.trainer/1"; its spec, info and request structs serve the trainer factory's extensions. */

#define SDT_FACTORY_HYPERNETWORK "sdtrain.hypernetwork/1"

typedef struct sdt_hn_trainer sdt_hn_trainer; /* opaque */
/* 1.4: a chain of loaded hypernetworks that a host applies to the K/V inputs of its own UNet
 * (A1111's apply_hypernetworks: every member's K module to K in chain order, V to V). Opaque. */
typedef struct sdt_hn_applier sdt_hn_applier;

/* 1.4: which attention input an applier call transforms. */
typedef enum sdt_kv_kind {
    SDT_KV_K = 0, /* the keys' input (A1111's context_k) */
    SDT_KV_V = 1  /* the values' input (A1111's context_v) */
} sdt_kv_kind;

/* Input to create_hypernetwork: A1111's "Create hypernetwork" tab, text fields as typed there. */
typedef struct sdt_hypernetwork_spec {
    uint32_t struct_size;
    uint32_t reserved0;            /* [0] must be 0 */
    const char *name;              /* A1111's name characters; the file is <output_dir>/<name>.pt */
    const char *output_dir;        /* must exist */
    const char *widths;            /* ["768, 320, 640, 1280"] module widths (SD 2.x cross-attention: 1024) */
    const char *layer_structure;   /* ["1, 2, 1"] width multipliers, first and last 1 */
    const char *activation;        /* ["linear"] A1111's names (docs/hypernetworks.md) */
    const char *weight_init;       /* ["Normal"] Normal, XavierUniform, XavierNormal, KaimingUniform, KaimingNormal */
    const char *dropout_structure; /* ["0, 0, 0"] one entry per layer_structure entry */
    bool layer_norm;               /* [false] */
    bool use_dropout;              /* [false] */
    bool activate_output;          /* [false] */
    bool overwrite;                /* [false] an existing file is SDT_STATUS_ALREADY_EXISTS */
} sdt_hypernetwork_spec;

/* The Train tab for a hypernetwork, or for a hypernetwork and an embedding together (joint
 * training: two optimizers, two LR schedules, one backward, one shared loss scale; an inf in one
 * optimizer's gradients skips that optimizer only). Input struct: fill it with config_defaults(). */
typedef struct sdt_hn_config {
    uint32_t struct_size;
    uint32_t reserved0;                     /* [0] must be 0 */
    const sdt_train_options *train_options; /* required: the options shared with embeddings */
    const char *hypernetwork_path;          /* the hypernetwork to train (.pt or .safetensors) */
    const char *learn_rate;                 /* ["0.00001"] schedule grammar as sdt_ti_config.learn_rate */
    double weight_decay;                    /* [0.01] AdamW weight decay (A1111's) */
    double strength;                        /* [1.0] the modules' strength while training */
    const char *embedding_path;             /* [NULL] also train this embedding (joint training) */
    const char *embedding_learn_rate;       /* ["0.005"] its schedule (joint training only) */
    /* ---- appended in 1.4: the jointly trained embedding's own settings (docs/abi.md 3.9) ---- */
    bool save_image_with_embedding;   /* [true] also write the embedding's A1111 PNG cards, as
                                       * sdt_ti_config.save_image_with_embedding */
    uint8_t reserved1[3];             /* [0] must be 0 */
    uint32_t embedding_clip_mode;     /* sdt_clip_mode [DISABLED]; the embedding's, with embedding_clip_value */
    const char *embedding_clip_value; /* [NULL] NULL: the embedding clips as train_options does (clip_mode,
                                       * clip_value); set: embedding_clip_mode with this schedule */
    /* ---- appended in 1.4 (after the above): previews with other hypernetworks chained in ---- */
    const char *preview_hypernetworks; /* [NULL] "FILE[:STRENGTH]; FILE[:STRENGTH]..." chained after the
                                        * trained one in previews only (strength 1 when left out; at most 7) */
    double preview_strength;           /* [0 = strength] the trained hypernetwork's strength in previews */
} sdt_hn_config;

/* What inspect() reads from a hypernetwork file. Output struct: set struct_size first. */
typedef struct sdt_hypernetwork_info {
    uint32_t struct_size;
    uint32_t width_count; /* module widths in the file */
    uint32_t widths[8];
    uint32_t layer_count; /* Linear layers per module */
    uint32_t reserved0;
    int64_t step; /* -1 when the file does not record it */
    uint64_t parameter_count;
    bool layer_norm;
    bool use_dropout;
    bool activate_output;
    bool all_finite;
    char name[256];
    char activation[32];
    char weight_init[32];
    char layer_structure[128]; /* as A1111 shows it: "1, 2, 1" */
    char checkpoint_name[256];
    char checkpoint_hash[72];
} sdt_hypernetwork_info;

/* 1.4: one txt2img image through the plugin's own sampler (DDIM, or from 1.5 the request's sampler,
 * with classifier-free guidance, as the training previews), with an applier's hypernetwork chain on the UNet. Input struct: zero it
 * and set struct_size; 0 in a numeric field means the default in brackets. */
typedef struct sdt_generate_request {
    uint32_t struct_size;
    uint32_t device;            /* sdt_device_choice [AUTO] */
    const char *model_path;     /* the SD checkpoint (as sdt_train_options.model_path) */
    const char *tokenizer_path; /* [NULL] as sdt_train_options.tokenizer_path */
    const char *prompt;
    const char *negative_prompt; /* [""] */
    uint32_t width;              /* [512] a multiple of the model's 8 x 2^(levels-1) */
    uint32_t height;             /* [512] */
    uint32_t steps;              /* [20] DDIM steps, 1..1000 */
    uint32_t clip_skip;          /* [1] */
    double cfg_scale;            /* [7.0] 1 = no guidance */
    uint64_t seed;               /* [0] the noise (the plugin's counter-based RNG, not torch's) */
    uint32_t cpu_threads;        /* [0] OpenMP's default */
    uint32_t reserved0;          /* [0] must be 0 */
    const char *embedding_path;  /* [NULL] an embedding whose name in the prompt stands for its vectors */
    /* ---- appended in 1.5 ---- */
    const char *sampler; /* [NULL = "ddim"] "ddim" (eta 0), "euler_a" or "dpmpp_2m_karras", as
                                       * sdt_train_options.preview_sampler */
    /* ---- appended in 1.9 ---- SD3.5 and Flux.1 (as sdt_train_options'); their sampler is always the
     * flow-matching Euler sampler, and for Flux.1 dev cfg_scale is the distilled guidance value [3.5] */
    const char *clip_l_path; /* [NULL] */
    const char *clip_g_path; /* [NULL] */
    const char *t5xxl_path;  /* [NULL] */
    const char *vae_path;    /* [NULL] */
    /* ---- appended in 1.10 ---- */
    uint32_t t5_max_length; /* [0 = the family's: SD3.5 256, Flux dev 512, schnell 256] T5 tokens a prompt is padded
                             * or cut to, 1..512, as sdt_train_options.t5_max_length (give generate the length the
                             * embedding trained at); not 0 on an SD 1.x/2.x/SDXL model is a VALIDATION error */
    uint32_t reserved1;     /* [0] must be 0 */
} sdt_generate_request;

/* The hypernetwork factory. Its lifecycle members are the textual-inversion factory's, in the
 * same order and with the same threading rules; only the config, the create call and inspect
 * are the method's own. */
typedef struct sdt_hn_factory {
    uint32_t struct_size;
    /* [any thread] Defaults as listed in sdt_hn_config (train_options stays NULL). */
    sdt_status (*config_defaults)(sdt_hn_config *config);
    /* [main thread] as sdt_ti_factory.create */
    sdt_status (*create)(const sdt_host_callbacks *callbacks, sdt_hn_trainer **out, char *err, uint32_t err_size);
    /* [main thread] as sdt_ti_factory.destroy */
    void (*destroy)(sdt_hn_trainer *trainer);
    /* [any thread] as sdt_ti_factory.get_last_error */
    sdt_status (*get_last_error)(const sdt_hn_trainer *trainer, char *buf, uint32_t buf_size, uint32_t *needed);
    /* [worker thread] Writes a new hypernetwork file from spec; its path goes into path_buf. */
    sdt_status (*create_hypernetwork)(sdt_hn_trainer *trainer, const sdt_hypernetwork_spec *spec, char *path_buf,
                                      uint32_t path_buf_size, uint32_t *needed);
    /* [worker thread] as sdt_ti_factory.prepare */
    sdt_status (*prepare)(sdt_hn_trainer *trainer, const sdt_hn_config *config, sdt_prepare_info *info);
    /* [worker thread] as sdt_ti_factory.run */
    sdt_status (*run)(sdt_hn_trainer *trainer);
    /* [any thread] as sdt_ti_factory.interrupt */
    sdt_status (*interrupt)(sdt_hn_trainer *trainer);
    /* [any thread] as sdt_ti_factory.get_run_state */
    sdt_status (*get_run_state)(const sdt_hn_trainer *trainer, sdt_run_state *state);
    /* [any thread] as sdt_ti_factory.get_metrics */
    sdt_status (*get_metrics)(const sdt_hn_trainer *trainer, sdt_metrics *metrics);
    /* [worker thread] as sdt_ti_factory.save_state / load_state */
    sdt_status (*save_state)(sdt_hn_trainer *trainer, const char *path);
    sdt_status (*load_state)(sdt_hn_trainer *trainer, const char *path);
    /* [worker thread] Reads a hypernetwork file (.pt or .safetensors). */
    sdt_status (*inspect)(sdt_hn_trainer *trainer, const char *path, sdt_hypernetwork_info *info, char *json_buf,
                          uint32_t json_buf_size, uint32_t *json_needed);
    /* [any thread] Fills *options with the shared defaults (log_dir "hypernetworks"). Set
     * options->struct_size first. */
    sdt_status (*train_options_defaults)(sdt_train_options *options);

    /* ---- appended in 1.4: applying hypernetworks in the host's own generation ----
     * An applier computes A1111's chain on the CPU, in f32, in eval mode (no dropout):
     * for a K/V input x of width w, each member with a module for w in turn gives
     * x = x + f(x) * strength; members without one pass x through, and so does a width no
     * member has. Its handles follow the trainer's rules: get_last_error from any thread; the
     * other calls one thread at a time per applier; appliers are independent of each other
     * and of trainers. */
    /* [main thread] An empty chain. Failures go into err (a sentence). */
    sdt_status (*applier_create)(sdt_hn_applier **out, char *err, uint32_t err_size);
    /* [main thread] Frees the applier and its hypernetworks; NULL does nothing. */
    void (*applier_destroy)(sdt_hn_applier *applier);
    /* [any thread] The sentence of the applier's last failed call ("" when none). */
    sdt_status (*applier_get_last_error)(const sdt_hn_applier *applier, char *buf, uint32_t buf_size, uint32_t *needed);
    /* [worker thread] Loads a hypernetwork file (.pt or .safetensors) and appends it to the
     * chain at strength (finite; A1111's <hypernet:name:strength>). At most 8 members. */
    sdt_status (*applier_add)(sdt_hn_applier *applier, const char *path, double strength);
    /* [main thread] Changes member index's strength (0 = as if absent). */
    sdt_status (*applier_set_strength)(sdt_hn_applier *applier, uint32_t index, double strength);
    /* [main thread] out[rows, width] = the chain applied to in[rows, width] for kind
     * (sdt_kv_kind), row-major f32 in host memory; out may be in. rows 0 does nothing. */
    sdt_status (*applier_apply_kv)(sdt_hn_applier *applier, uint32_t width, uint32_t kind, const float *in, float *out,
                                   uint64_t rows);
    /* [worker thread] Renders request with the chain (its files loaded again on the request's
     * device, at the current strengths; an empty chain is plain txt2img) into rgb: width x height
     * x 3 bytes, rows top to bottom. rgb_size smaller than that is BUFFER_TOO_SMALL. */
    sdt_status (*applier_generate)(sdt_hn_applier *applier, const sdt_generate_request *request, uint8_t *rgb,
                                   uint64_t rgb_size);
} sdt_hn_factory SDT_DEPRECATED("use sdtrain.trainer/1 (sdt_trainer_factory) and its extensions");

/* ---- One trainer: "sdtrain.trainer/1" (1.7) ------------------------------------------------ */
/* One lifecycle for every training method, in CLAP's shape: prepare() takes the shared options
 * and the parts to train, each in its own struct (an embedding, a hypernetwork, or both: joint
 * training is two parts, nothing special). What is one method's own and not part of training
 * (creating or inspecting its files, applying hypernetworks in the host's generation) comes as
 * extensions a host looks up by id with get_extension(); an id it does not know gives NULL.
 * Ids and versions: "name/N"; a new major of a factory or extension is a new id beside the old.
 *
 * A run with an embedding part only is exactly the textual-inversion factory's run; with a
 * hypernetwork part (alone, or with an embedding part) exactly the hypernetwork factory's: the
 * same files, bytes, states and sentences, except that a sentence names the field as the new
 * structs do ("embedding->learn_rate", "options->clip_value"). */

#define SDT_FACTORY_TRAINER "sdtrain.trainer/1"

typedef struct sdt_trainer sdt_trainer; /* opaque */

/* An embedding to train. Input struct: fill it with embedding_part_defaults(). */
typedef struct sdt_embedding_part {
    uint32_t struct_size;
    uint32_t clip_mode;             /* sdt_clip_mode [DISABLED]; with clip_value (a mode without it is a
                                       * VALIDATION error) */
    const char *embedding_path;     /* the embedding to train (any format inspect reads) */
    const char *learn_rate;         /* ["0.005"] schedule "RATE[:STEP], ..." (A1111 grammar) */
    const char *clip_value;         /* [NULL] NULL: the embedding clips as the options say (clip_mode,
                                       * clip_value); set: clip_mode above with this schedule */
    bool save_image_with_embedding; /* [true] also write A1111 PNG cards */
    uint8_t reserved0[7];           /* [0] must be 0 */
    /* ---- appended in 1.9 ---- the per-encoder tables of SD3.5 (clip_l, clip_g, t5xxl) and Flux.1 (clip_l,
     * t5xxl); SDXL's clip_l/clip_g train together as one table, as before */
    uint32_t encoders;             /* [0 = every encoder of the family] SDT_ENCODER_* bits: the tables that train;
                                    * the others keep their values (a bit the family lacks is a VALIDATION error) */
    uint32_t reserved1;            /* [0] must be 0 */
    const char *learn_rate_clip_l; /* [NULL = learn_rate] that table's schedule, same grammar */
    const char *learn_rate_clip_g; /* [NULL = learn_rate] */
    const char *learn_rate_t5xxl;  /* [NULL = learn_rate] */
} sdt_embedding_part;

/* sdt_embedding_part.encoders (1.9). */
#define SDT_ENCODER_CLIP_L 0x1u
#define SDT_ENCODER_CLIP_G 0x2u
#define SDT_ENCODER_T5XXL 0x4u

/* A hypernetwork to train. Input struct: fill it with hypernetwork_part_defaults(). */
typedef struct sdt_hypernetwork_part {
    uint32_t struct_size;
    uint32_t reserved0;                /* [0] must be 0 */
    const char *hypernetwork_path;     /* the hypernetwork to train (.pt or .safetensors) */
    const char *learn_rate;            /* ["0.00001"] schedule grammar as the embedding's */
    double weight_decay;               /* [0.01] AdamW weight decay (A1111's) */
    double strength;                   /* [1.0] the modules' strength while training, (0, 10] */
    const char *preview_hypernetworks; /* [NULL] "FILE[:STRENGTH]; ..." chained after the trained one in
                                        * previews only (strength 1 when left out; at most 7) */
    double preview_strength;           /* [0 = strength] the trained hypernetwork's strength in previews */
} sdt_hypernetwork_part;

/* What one prepare() trains. Input struct: zero it and set struct_size. The options are the Train
 * tab's shared part; at least one part pointer is set. Everything is read once, during prepare(),
 * and copied: the host's structs and strings need not outlive the call. */
typedef struct sdt_trainer_config {
    uint32_t struct_size;
    uint32_t reserved0;                        /* [0] must be 0 */
    const sdt_train_options *options;          /* required; from train_options_defaults(). Its log_dir NULL
                                                * means A1111's folder for the parts: "hypernetworks" when a
                                                * hypernetwork trains, else "textual_inversion" */
    const sdt_embedding_part *embedding;       /* [NULL] no embedding trains */
    const sdt_hypernetwork_part *hypernetwork; /* [NULL] no hypernetwork trains */
} sdt_trainer_config;

/* The trainer factory. Lifecycle members keep the threading rules and meanings the
 * textual-inversion factory documents for its members of the same name. struct_size lets a host
 * check that a member appended in a later minor version is present. */
typedef struct sdt_trainer_factory {
    uint32_t struct_size;
    /* [any thread] Fill the input structs with their defaults (set struct_size first; only that
     * many bytes are written). The options' log_dir stays NULL (see sdt_trainer_config.options). */
    sdt_status (*train_options_defaults)(sdt_train_options *options);
    sdt_status (*embedding_part_defaults)(sdt_embedding_part *part);
    sdt_status (*hypernetwork_part_defaults)(sdt_hypernetwork_part *part);
    /* [main thread] Creates a trainer; the callbacks table is copied (NULL = no callbacks). On
     * failure *out is NULL and the sentence is copied into err (err may be NULL). */
    sdt_status (*create)(const sdt_host_callbacks *callbacks, sdt_trainer **out, char *err, uint32_t err_size);
    /* [main thread] NULL is a no-op; not while run() is in progress. */
    void (*destroy)(sdt_trainer *trainer);
    /* [any thread] The sentence of the last failed call on this handle ("" when none). */
    sdt_status (*get_last_error)(const sdt_trainer *trainer, char *buf, uint32_t buf_size, uint32_t *needed);
    /* [worker thread] Validates the whole job (every part's file first, then the shared inputs)
     * and loads what run() needs; *info (may be NULL) is filled, its vectors and embedding_dim
     * when an embedding trains. Calling it again replaces the previous preparation. */
    sdt_status (*prepare)(sdt_trainer *trainer, const sdt_trainer_config *config, sdt_prepare_info *info);
    /* [worker thread] Trains until max steps, an error or interrupt(); OK, INTERRUPTED or an error. */
    sdt_status (*run)(sdt_trainer *trainer);
    /* [any thread] Stop after the current optimizer step and save. */
    sdt_status (*interrupt)(sdt_trainer *trainer);
    /* [any thread] */
    sdt_status (*get_run_state)(const sdt_trainer *trainer, sdt_run_state *state);
    /* [any thread] The metrics of the latest finished step. */
    sdt_status (*get_metrics)(const sdt_trainer *trainer, sdt_metrics *metrics);
    /* [main thread] A full-state checkpoint of a prepared trainer, written atomically / read back. */
    sdt_status (*save_state)(sdt_trainer *trainer, const char *path);
    sdt_status (*load_state)(sdt_trainer *trainer, const char *path);
    /* [any thread] The extension table with this id (SDT_EXT_...) cast to const void *, or NULL
     * when this plugin has none by that id. Static: valid until the last deinit. */
    const void *(*get_extension)(const char *extension_id);
} sdt_trainer_factory;

/* Extension "sdtrain.embedding_files/1": embedding files. A failure leaves its sentence on the
 * trainer passed (get_last_error); file_saved is called through the trainer's callbacks. */
#define SDT_EXT_EMBEDDING_FILES "sdtrain.embedding_files/1"

typedef struct sdt_embedding_files_ext {
    uint32_t struct_size;
    /* [worker thread] Creates an embedding file from spec; its path goes into path_buf (may be
     * NULL). Loads the model's text encoder: may take seconds. Not while run() is in progress. */
    sdt_status (*create_embedding)(sdt_trainer *trainer, const sdt_embedding_spec *spec, char *path_buf,
                                   uint32_t path_buf_size, uint32_t *needed);
    /* [any thread] Reads an embedding file of any supported format (as sdt_ti_factory.inspect:
     * with info NULL a model checkpoint is described in json_buf too). */
    sdt_status (*inspect)(sdt_trainer *trainer, const char *path, sdt_embedding_info *info, char *json_buf,
                          uint32_t json_buf_size, uint32_t *json_needed);
} sdt_embedding_files_ext;

/* Extension "sdtrain.hypernetwork_files/1": hypernetwork files, as the embedding files' extension. */
#define SDT_EXT_HYPERNETWORK_FILES "sdtrain.hypernetwork_files/1"

typedef struct sdt_hypernetwork_files_ext {
    uint32_t struct_size;
    /* [worker thread] Writes a new hypernetwork file from spec; its path goes into path_buf. */
    sdt_status (*create_hypernetwork)(sdt_trainer *trainer, const sdt_hypernetwork_spec *spec, char *path_buf,
                                      uint32_t path_buf_size, uint32_t *needed);
    /* [worker thread] Reads a hypernetwork file (.pt or .safetensors). */
    sdt_status (*inspect)(sdt_trainer *trainer, const char *path, sdt_hypernetwork_info *info, char *json_buf,
                          uint32_t json_buf_size, uint32_t *json_needed);
} sdt_hypernetwork_files_ext;

/* Extension "sdtrain.hypernetwork_applier/1": A1111's hypernetwork chain applied in the host's
 * own generation. Its members mean what sdt_hn_factory's applier_* members (1.4) mean; appliers
 * are handles of their own, independent of trainers. */
#define SDT_EXT_HYPERNETWORK_APPLIER "sdtrain.hypernetwork_applier/1"

typedef struct sdt_hypernetwork_applier_ext {
    uint32_t struct_size;
    sdt_status (*create)(sdt_hn_applier **out, char *err, uint32_t err_size); /* [main thread] */
    void (*destroy)(sdt_hn_applier *applier);                                 /* [main thread] */
    sdt_status (*get_last_error)(const sdt_hn_applier *applier, char *buf, uint32_t buf_size,
                                 uint32_t *needed);                                       /* [any thread] */
    sdt_status (*add)(sdt_hn_applier *applier, const char *path, double strength);        /* [worker thread] */
    sdt_status (*set_strength)(sdt_hn_applier *applier, uint32_t index, double strength); /* [main thread] */
    sdt_status (*apply_kv)(sdt_hn_applier *applier, uint32_t width, uint32_t kind, const float *in, float *out,
                           uint64_t rows); /* [main thread] */
    sdt_status (*generate)(sdt_hn_applier *applier, const sdt_generate_request *request, uint8_t *rgb,
                           uint64_t rgb_size); /* [worker thread] */
} sdt_hypernetwork_applier_ext;

/* Extension "sdtrain.distributed/1" (1.8): what a host launching one process per GPU needs before
 * prepare() (docs/abi.md 3.16). The NCCL library is opened on first use, never linked. */
#define SDT_EXT_DISTRIBUTED "sdtrain.distributed/1"

typedef struct sdt_distributed_ext {
    uint32_t struct_size;
    /* [any thread] SDT_STATUS_OK when the CUDA module and NCCL (libnccl.so.2, loaded on first use) are
     * available; else SDT_STATUS_UNSUPPORTED (or DEVICE) with the reason copied into err (err_size bytes,
     * NUL-terminated; err may be NULL). */
    sdt_status (*available)(char *err, uint32_t err_size);
    /* [any thread] Makes a new communicator id (ncclGetUniqueId) into id[128]; on failure id is zeroed and
     * the reason copied into err, as available's. */
    sdt_status (*new_comm_id)(uint8_t id[128], char *err, uint32_t err_size);
} sdt_distributed_ext;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SDTRAIN_H */
