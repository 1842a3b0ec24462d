/* vec_io.cuh - how the memory-bound kernels (norms, elementwise ops, bias passes) read and
 * write a tensor: one template, two forms.
 *
 * - io<T> with T the storage type (__half, __nv_bfloat16, float): the hot path, where every
 *   big tensor of a call shares one dtype. VEC = 16 / sizeof(T) consecutive elements move in
 *   one 16-byte access (8 x 16-bit, 4 x f32); the launcher takes this form only when every
 *   pointer is 16-byte aligned and the contiguous extents the kernel walks are multiples of VEC.
 * - io<void>: a call whose tensors mix dtypes, or an unaligned view: VEC = 1 and the dtype is
 *   read per element (ld/st of cuda_common.cuh).
 *
 * A kernel is written once as a template over T and instantiated for both forms, so every piece
 * of math has one home. Internal to kernels/cuda. */
#ifndef SDT_KERNELS_CUDA_VEC_IO_CUH
#define SDT_KERNELS_CUDA_VEC_IO_CUH

#include "cuda_common.cuh"

template <typename T> struct io {
    static constexpr int VEC = 16 / (int)sizeof(T);
    T *p;
    /* V elements from p + i: V = VEC is one 16-byte access (i a multiple of VEC), V < VEC
     * (a tail) element by element. */
    template <int V> __device__ __forceinline__ void load(int64_t i, float (&f)[V]) const
    {
        if constexpr (V == VEC) {
            uint4 raw = *(const uint4 *)(p + i);
            const T *e = (const T *)&raw;
#pragma unroll
            for (int k = 0; k < V; k++) f[k] = to_f32(e[k]);
        } else {
#pragma unroll
            for (int k = 0; k < V; k++) f[k] = to_f32(p[i + k]);
        }
    }
    template <int V> __device__ __forceinline__ void store(int64_t i, const float (&f)[V]) const
    {
        if constexpr (V == VEC) {
            uint4 raw;
            T *e = (T *)&raw;
#pragma unroll
            for (int k = 0; k < V; k++) e[k] = from_f32<T>(f[k]);
            *(uint4 *)(p + i) = raw;
        } else {
#pragma unroll
            for (int k = 0; k < V; k++) p[i + k] = from_f32<T>(f[k]);
        }
    }
    __device__ __forceinline__ float get(int64_t i) const
    {
        return to_f32(p[i]);
    }
    __device__ __forceinline__ void set(int64_t i, float v) const
    {
        p[i] = from_f32<T>(v);
    }
};

template <> struct io<void> {
    static constexpr int VEC = 1;
    void *p;
    int dtype;
    template <int V> __device__ __forceinline__ void load(int64_t i, float (&f)[V]) const
    {
#pragma unroll
        for (int k = 0; k < V; k++) f[k] = ld(p, dtype, i + k);
    }
    template <int V> __device__ __forceinline__ void store(int64_t i, const float (&f)[V]) const
    {
#pragma unroll
        for (int k = 0; k < V; k++) st(p, dtype, i + k, f[k]);
    }
    __device__ __forceinline__ float get(int64_t i) const
    {
        return ld(p, dtype, i);
    }
    __device__ __forceinline__ void set(int64_t i, float v) const
    {
        st(p, dtype, i, v);
    }
};

/* The io of a pointer and its dtype (the dtype is the caller's promise for T != void). */
template <typename T> static inline io<T> io_of(const void *p, int)
{
    return io<T>{(T *)p};
}
template <> inline io<void> io_of<void>(const void *p, int dtype)
{
    return io<void>{(void *)p, dtype};
}

/* The typed form's vector width for dtype: io<T>::VEC on the host. */
static inline int vec_width(int dtype)
{
    return dtype == SDT_F32 ? 4 : 8;
}
/* Whether a call can take the typed, vectorised form: every pointer (NULL ones are skipped)
 * 16-byte aligned and each contiguous extent the kernel walks a multiple of the vector width
 * of dtype (0 for a flat kernel, which finishes its last elements one by one). */
static inline bool vec_ok(int dtype, int64_t extent, const void *const *ptrs, int n)
{
    if (extent % vec_width(dtype)) return false;
    for (int i = 0; i < n; i++)
        if (ptrs[i] && ((uintptr_t)ptrs[i] & 15)) return false;
    return true;
}

/* A width as a type, for generic lambdas: constexpr int V = decltype(w)::value. */
template <int V> struct vec_n {
    static constexpr int value = V;
};
/* A flat kernel over n elements: vectors [0, n / VEC), then the tail [n / VEC * VEC, n) one by
 * one; both grid-stride loops call body(i, vec_n<V>{}) with i the first of V elements. */
template <typename T, typename Body> __device__ __forceinline__ void flat_vec_loop(int64_t n, Body body)
{
    constexpr int VEC = io<T>::VEC;
    const int64_t nv = n / VEC;
    GRID_STRIDE(u, nv) body(u * VEC, vec_n<VEC>{});
    if (VEC > 1) GRID_STRIDE(t, n - nv * VEC) body(nv * VEC + t, vec_n<1>{});
}

/* Runs body with T the storage type when same (every tensor of the call has dtype) and
 * vectorisable, else with T = void. */
#define SDT_IO_SWITCH(same, dtype, T, ...)                                                                             \
    do {                                                                                                               \
        if (same) {                                                                                                    \
            SDT_DTYPE_SWITCH(dtype, T, __VA_ARGS__);                                                                   \
        } else {                                                                                                       \
            typedef void T;                                                                                            \
            __VA_ARGS__;                                                                                               \
        }                                                                                                              \
    } while (0)

#endif
