/* scaler_state_blob.h - the loss scaler's state as a versioned, little-endian byte blob, so a
 * host can keep it in its own checkpoint (ABI sdt_loss_scaler_factory save_state/load_state). */
#ifndef SDT_PLUGIN_SCALER_STATE_BLOB_H
#define SDT_PLUGIN_SCALER_STATE_BLOB_H

#include "sdt_error.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "train/scaler.h"

#define SDT_SCALER_BLOB_SIZE 72u /* version 2: 64 bytes of fields, a CRC-32, padding */

void sdt_scaler_blob_encode(const sdt_scaler_state *state, uint8_t out[SDT_SCALER_BLOB_SIZE]);
/* false with a sentence when the blob is not a scaler state of a version this build reads. */
bool sdt_scaler_blob_decode(const uint8_t *blob, size_t size, sdt_scaler_state *state, sdt_error *error);

#endif
