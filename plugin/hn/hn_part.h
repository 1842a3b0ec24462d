/* hn_part.h - a hypernetwork as a part of a training job (train/train_job.h): its file, the binding
 * on the UNet's K/V hook, its parameter group (AdamW with the settings' weight decay), its copies
 * and the .pt/.safetensors twin. A job adds it in phases, as the information arrives; what else the
 * job trains (an embedding too, in joint training) is the composition's business (compose/). */
#ifndef SDT_HN_PART_H
#define SDT_HN_PART_H

#include "sdt_error.h"

#include "train/train_job.h"

typedef struct hn_part hn_part;

/* Phase 1, before the model: the preview chain ("FILE[:STRENGTH]; ...", NULL or "" for none, at
 * preview_strength, 0 = strength), the file, its values (finite), its folder (writable), where the
 * result goes and the part on the job. The job owns the part from here on. */
hn_part *hn_part_open(sdt_train_job *job, const char *path, double strength, const char *preview_hypernetworks,
                      const char *preview_field, double preview_strength, sdt_error *error);
/* The name (A1111's, from the file) and the step the file records. */
const char *hn_part_name(const hn_part *hp);
int64_t hn_part_step(const hn_part *hp);
/* The name as a file name (the copies and the result are named after it). */
bool hn_part_check_name(const hn_part *hp, sdt_error *error);
/* Phase 2, after the model: a module for some attention of this UNet (else NO_GRADIENT), the values
 * on the job's backend, the binding on the hook. */
bool hn_part_bind_model(hn_part *hp, sdt_train_job *job, sdt_error *error);
/* After --resume is resolved and before the data: where the twin goes (see hn_part.c). */
void hn_part_pick_twin(hn_part *hp, sdt_train_job *job);
/* After the data (the run folder exists): the .pt's twin there, locked under its name. */
bool hn_part_place_twin(hn_part *hp, sdt_train_job *job, sdt_error *error);
/* Phase 3, after the data: the hook's workspace, AdamW (weight_decay) over every parameter, the
 * parameter group with these schedules (their field names static, for sentences). */
bool hn_part_add_group(hn_part *hp, sdt_train_job *job, const sdt_schedule_texts *texts, double weight_decay,
                       sdt_error *error);

#endif
