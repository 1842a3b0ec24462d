/* flow_math.h - rectified flow's per-sample math (SD3/SD3.5, Flux.1), written once for the CPU
 * path (plugin/train/flow_match.c) and any CUDA kernel that noises latents or weighs the loss:
 * every function is SDT_HOST_DEVICE (kernels/shared_math.h).
 *
 * t (the "sigma" of diffusers' FlowMatchEulerDiscreteScheduler) runs from 0 (data) to 1 (noise):
 *   x_t = (1 - t) x0 + t noise, the model predicts the velocity noise - x0 and sees 1000 t.
 * The shifts map a t in (0, 1) to a later one (more noise), as the families were trained. */
#ifndef SDT_KERNELS_FLOW_MATH_H
#define SDT_KERNELS_FLOW_MATH_H

#include <math.h>

#include "shared_math.h"

#define SDT_FLOW_TRAIN_TIMESTEPS 1000.0 /* the model input is 1000 t (FlowMatchEulerDiscreteScheduler) */

/* diffusers' SD3 training scripts (scheduler.scale_noise): (1 - sigma) x0 + sigma noise. */
static inline SDT_HOST_DEVICE float sdt_flow_noisy_value(float t, float x0, float noise)
{
    return (1.0f - t) * x0 + t * noise;
}

/* The flow-matching target (diffusers' train_dreambooth_sd3 / flux: target = noise - model_input). */
static inline SDT_HOST_DEVICE float sdt_flow_target_value(float x0, float noise)
{
    return noise - x0;
}

/* SD3's constant shift (FlowMatchEulerDiscreteScheduler with shift, kohya's --discrete_flow_shift):
 * t' = shift t / (1 + (shift - 1) t). */
static inline SDT_HOST_DEVICE double sdt_flow_shift_constant(double t, double shift)
{
    return shift * t / (1.0 + (shift - 1.0) * t);
}

/* Flux's resolution shift with mu (diffusers' FlowMatchEulerDiscreteScheduler.time_shift with
 * sigma 1, kohya's flux_train_utils.time_shift): e^mu / (e^mu + (1/t - 1)). Written as
 * e^mu t / (e^mu t + 1 - t), equal for t in (0, 1] and also defined at t = 0 (0). */
static inline SDT_HOST_DEVICE double sdt_flow_shift_exponential(double t, double mu)
{
    double e = exp(mu);
    return e * t / (e * t + (1.0 - t));
}

/* diffusers' calculate_shift / kohya's get_lin_function: mu linear in the image token count, from
 * (base_seq_len, base_shift) to (max_seq_len, max_shift); Flux: (256, 0.5) to (4096, 1.15). */
static inline SDT_HOST_DEVICE double sdt_flow_mu(double image_seq_len, double base_seq_len, double max_seq_len,
                                                 double base_shift, double max_shift)
{
    double m = (max_shift - base_shift) / (max_seq_len - base_seq_len);
    return image_seq_len * m + (base_shift - m * base_seq_len);
}

/* diffusers' compute_loss_weighting_for_sd3: sigma_sqrt sigma^-2, cosmap 2 / (pi (1 - 2 sigma +
 * 2 sigma^2)), none 1. kind: 0 none, 1 sigma_sqrt, 2 cosmap (sdt_flow_weighting). */
static inline SDT_HOST_DEVICE double sdt_flow_loss_weight_value(int kind, double sigma)
{
    if (kind == 1) return 1.0 / (sigma * sigma);
    if (kind == 2) return 2.0 / (3.14159265358979323846 * (1.0 - 2.0 * sigma + 2.0 * sigma * sigma));
    return 1.0;
}

#endif
