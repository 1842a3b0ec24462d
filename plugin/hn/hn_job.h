/* hn_job.h - hypernetwork training on the shared job (train/train_job.h): a hypernetwork part
 * (its file, the binding on the UNet's K/V hook, its parameter group: AdamW with the config's
 * weight decay), and in joint training also an embedding part (ti/ti_part.h), each with its own
 * optimizer and LR schedule, one backward and one shared loss scale. */
#ifndef SDT_HN_JOB_H
#define SDT_HN_JOB_H

#include "sdt_error.h"

#include "train/run_control.h"
#include "train/train_job.h"
#include "sdtrain.h"

/* The hypernetwork's own fields of the ABI's Train-tab config (sdt_hn_config there; the name is
 * the module's shape struct here, hn/hn_config.h), read and checked by hn_factory.c. */
typedef struct sdt_hn_job_settings {
    const char *hypernetwork_path;
    const char *learn_rate;
    double weight_decay;
    double strength;
    const char *embedding_path;       /* NULL or "": no joint training */
    const char *embedding_learn_rate;
    bool embedding_cards;             /* the embedding's A1111 PNG cards */
    uint32_t embedding_clip_mode;     /* with embedding_clip_value */
    const char *embedding_clip_value; /* NULL: the embedding clips as the options say */
    const char *preview_hypernetworks; /* NULL or "": none; "FILE[:STRENGTH]; ..." */
    double preview_strength;           /* 0: strength */
} sdt_hn_job_settings;

bool sdt_hn_job_prepare(const sdt_hn_job_settings *config, const sdt_train_options *options,
                        const sdt_host_callbacks *host, const sdt_run_control *control, sdt_train_job **out,
                        sdt_prepare_info *info, sdt_error *error);

#endif
