/* torch_describe.h - a pickle_value tree as the JSON description torch_files.py writes (see its docstring),
 * so trees read or written in C compare with what torch loads. */
#ifndef SDT_TORCH_DESCRIBE_H
#define SDT_TORCH_DESCRIBE_H

#include <cjson/cJSON.h>
#include <string.h>

#include "pickle_value.h"
#include "tensor.h"

static inline double td_element(const uint8_t *p, sdt_st_dtype dtype)
{
    switch (dtype) {
        case SDT_ST_F32: {
            float f;
            memcpy(&f, p, 4);
            return f;
        }
        case SDT_ST_F64: {
            double d;
            memcpy(&d, p, 8);
            return d;
        }
        case SDT_ST_F16: {
            uint16_t h;
            memcpy(&h, p, 2);
            return sdt_f16_to_f32(h);
        }
        case SDT_ST_BF16: {
            uint16_t h;
            memcpy(&h, p, 2);
            return sdt_bf16_to_f32(h);
        }
        case SDT_ST_I64: {
            int64_t i;
            memcpy(&i, p, 8);
            return (double)i;
        }
        case SDT_ST_I32: {
            int32_t i;
            memcpy(&i, p, 4);
            return i;
        }
        case SDT_ST_I16: {
            int16_t i;
            memcpy(&i, p, 2);
            return i;
        }
        case SDT_ST_I8:
            return (int8_t)p[0];
        default:
            return p[0];
    }
}

static inline cJSON *td_describe(const sdt_pv *v)
{
    cJSON *o, *arr;
    switch (v->kind) {
        case SDT_PV_NONE:
            return cJSON_CreateNull();
        case SDT_PV_BOOL:
            return cJSON_CreateBool(v->u.b);
        case SDT_PV_INT:
            o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "int", (double)v->u.i);
            return o;
        case SDT_PV_FLOAT:
            o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "float", v->u.f);
            return o;
        case SDT_PV_STR:
            return cJSON_CreateString(v->u.s.data);
        case SDT_PV_LIST:
        case SDT_PV_TUPLE:
            o = cJSON_CreateObject();
            arr = cJSON_AddArrayToObject(o, v->kind == SDT_PV_LIST ? "list" : "tuple");
            for (size_t i = 0; i < sdt_pv_len(v); i++) cJSON_AddItemToArray(arr, td_describe(sdt_pv_item(v, i)));
            return o;
        case SDT_PV_DICT:
            o = cJSON_CreateObject();
            arr = cJSON_AddArrayToObject(o, "dict");
            for (size_t i = 0; i < sdt_pv_len(v); i++) {
                cJSON *pair = cJSON_CreateArray();
                cJSON_AddItemToArray(pair, td_describe(sdt_pv_dict_key(v, i)));
                cJSON_AddItemToArray(pair, td_describe(sdt_pv_dict_value(v, i)));
                cJSON_AddItemToArray(arr, pair);
            }
            cJSON_AddBoolToObject(o, "ordered", v->u.seq.ordered);
            return o;
        case SDT_PV_TENSOR: {
            const sdt_pv_tensor *t = &v->u.t;
            o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "tensor", sdt_st_dtype_name(t->storage->dtype));
            arr = cJSON_AddArrayToObject(o, "shape");
            for (int d = 0; d < t->ndim; d++) cJSON_AddItemToArray(arr, cJSON_CreateNumber((double)t->shape[d]));
            arr = cJSON_AddArrayToObject(o, "values");
            size_t el = sdt_st_dtype_size(t->storage->dtype);
            const uint8_t *base = sdt_pv_tensor_data(v);
            int64_t idx[SDT_PV_MAX_DIMS] = {0}, numel = sdt_pv_tensor_numel(v);
            for (int64_t i = 0; i < numel; i++) {
                int64_t off = 0;
                for (int d = 0; d < t->ndim; d++) off += idx[d] * t->stride[d];
                cJSON_AddItemToArray(arr, cJSON_CreateNumber(td_element(base + off * (int64_t)el, t->storage->dtype)));
                for (int d = t->ndim; d-- > 0;) {
                    if (++idx[d] < t->shape[d]) break;
                    idx[d] = 0;
                }
            }
            cJSON_AddBoolToObject(o, "param", t->parameter);
            return o;
        }
        default:
            return cJSON_CreateString("?");
    }
}

#endif
