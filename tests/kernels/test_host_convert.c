/* test_host_convert - the load-time passes of host_convert.h against the element-by-element
 * functions of tensor.h they replace: every f16 bit pattern, random f32/bf16 bits (NaNs, Infs,
 * denormals included) and tensors large enough to run on several threads convert to the same
 * bits as sdt_load_f32 + sdt_store_f32; the NaN/Inf scan names the same first element as an
 * isfinite() loop over sdt_load_f32's values, in the last element, at a chunk's edge, in every
 * float dtype. */
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "host_convert.h"
#include "kernel_test.h"

enum { CHUNK = 1 << 18, BIG = 3 * CHUNK + 12345 }; /* host_convert.c's chunk; BIG takes 4 of them, the last one short */

static const sdt_dtype float_dtypes[3] = {SDT_F32, SDT_F16, SDT_BF16};

/* Random storage of a dtype: every bit pattern is possible, one element in 64 a special one. */
static void fill_bits(sdt_test_rng *r, void *dst, sdt_dtype dtype, int64_t n, bool finite_only)
{
    for (int64_t i = 0; i < n; i++) {
        uint64_t b = sdt_test_next(r);
        if (dtype == SDT_F32) {
            uint32_t v = (uint32_t)b;
            if ((b >> 58) == 0) v = (v & 0x807fffffu) | ((b >> 40) & 1 ? 0 : 0x7f800000u); /* denormal / Inf-NaN */
            if (finite_only && (v & 0x7f800000u) == 0x7f800000u) v &= 0xbfffffffu;
            ((uint32_t *)dst)[i] = v;
        } else {
            uint16_t v = (uint16_t)b, e = dtype == SDT_F16 ? 0x7c00u : 0x7f80u;
            if ((b >> 58) == 0) v = (uint16_t)((v & ~e) | ((b >> 40) & 1 ? 0 : e));
            if (finite_only && (v & e) == e) v = (uint16_t)(v ^ (e & -e)); /* clear the exponent's low bit */
            ((uint16_t *)dst)[i] = v;
        }
    }
}

/* The old path (for two different dtypes): through f32 with tensor.h's functions, one element at a time. */
static void reference_convert(const void *src, sdt_dtype sd, void *dst, sdt_dtype dd, int64_t n)
{
    size_t si = sdt_dtype_size(sd), di = sdt_dtype_size(dd);
    for (int64_t i = 0; i < n; i++) {
        float f;
        sdt_load_f32((const char *)src + (size_t)i * si, sd, &f, 1);
        sdt_store_f32(&f, (char *)dst + (size_t)i * di, dd, 1);
    }
}

static int64_t reference_first_nonfinite(const void *src, sdt_dtype dtype, int64_t n)
{
    size_t es = sdt_dtype_size(dtype);
    for (int64_t i = 0; i < n; i++) {
        float f;
        sdt_load_f32((const char *)src + (size_t)i * es, dtype, &f, 1);
        if (!isfinite(f)) return i;
    }
    return -1;
}

static void check_all_f16(void)
{
    uint16_t *h = kt_alloc(BIG * 2);
    for (int64_t i = 0; i < BIG; i++) h[i] = (uint16_t)(i * 40503u); /* every pattern, in a scrambled order */
    float *got = kt_alloc(BIG * 4), *want = kt_alloc(BIG * 4);
    sdt_host_convert(h, SDT_F16, got, SDT_F32, 65536); /* one thread */
    reference_convert(h, SDT_F16, want, SDT_F32, 65536);
    CHECK(memcmp(got, want, 65536 * 4) == 0, "f16 -> f32 differs from sdt_f16_to_f32 on some of the 65536 patterns");
    sdt_host_convert(h, SDT_F16, got, SDT_F32, BIG); /* threads, the F16C path where the CPU has it */
    reference_convert(h, SDT_F16, want, SDT_F32, BIG);
    int64_t bad = -1;
    for (int64_t i = 0; i < BIG && bad < 0; i++)
        if (memcmp(got + i, want + i, 4)) bad = i;
    CHECK(bad < 0, "f16 0x%04x -> f32 gave a different bit pattern than sdt_f16_to_f32", bad < 0 ? 0 : h[bad]);
    free(h);
    free(got);
    free(want);
}

static void check_conversions(sdt_test_rng *r)
{
    void *src = kt_alloc(BIG * 4), *got = kt_alloc(BIG * 4), *want = kt_alloc(BIG * 4);
    const int64_t sizes[] = {1, 7, 65536 + 3, BIG};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            for (int k = 0; k < 4; k++) {
                sdt_dtype sd = float_dtypes[a], dd = float_dtypes[b];
                int64_t n = sizes[k];
                fill_bits(r, src, sd, n, false);
                memset(got, 0xa5, (size_t)n * 4);
                sdt_host_convert(src, sd, got, dd, n);
                if (sd == dd)
                    memcpy(want, src, (size_t)n * sdt_dtype_size(sd)); /* a copy, NaN payloads and all */
                else
                    reference_convert(src, sd, want, dd, n);
                CHECK(memcmp(got, want, (size_t)n * sdt_dtype_size(dd)) == 0,
                      "%s -> %s of %lld elements differs from the "
                      "element-by-element conversion",
                      sdt_dtype_name(sd), sdt_dtype_name(dd), (long long)n);
            }
    free(src);
    free(got);
    free(want);
}

static void check_scan(sdt_test_rng *r)
{
    void *x = kt_alloc(BIG * 4);
    for (int a = 0; a < 3; a++) {
        sdt_dtype d = float_dtypes[a];
        size_t es = sdt_dtype_size(d);
        const int64_t sizes[] = {1, 1000, BIG};
        for (int k = 0; k < 3; k++) {
            int64_t n = sizes[k];
            fill_bits(r, x, d, n, true);
            CHECK(reference_first_nonfinite(x, d, n) == -1, "the finite fill of %s holds a NaN/Inf (test bug)",
                  sdt_dtype_name(d));
            CHECK(sdt_host_first_nonfinite(x, d, n) == -1, "%s: %lld finite elements reported non-finite",
                  sdt_dtype_name(d), (long long)n);
            /* NaN then Inf, each in the last element, at a chunk's first and last element, and two at once */
            const int64_t places[] = {n - 1, n > CHUNK ? CHUNK : 0, n > CHUNK ? 2 * CHUNK - 1 : n / 2, n / 3};
            for (int p = 0; p < 4; p++)
                for (int kind = 0; kind < 2; kind++) {
                    fill_bits(r, x, d, n, true);
                    float bad = kind ? -INFINITY : NAN;
                    sdt_store_f32(&bad, (char *)x + (size_t)places[p] * es, d, 1);
                    if (p == 3 && n > 2)
                        sdt_store_f32(&bad, (char *)x + (size_t)(n - 1) * es, d, 1); /* and a later one */
                    int64_t want = reference_first_nonfinite(x, d, n), got = sdt_host_first_nonfinite(x, d, n);
                    CHECK(want == places[p] && got == want,
                          "%s: a %s at element %lld of %lld: scan says %lld, reference %lld", sdt_dtype_name(d),
                          kind ? "-Inf" : "NaN", (long long)places[p], (long long)n, (long long)got, (long long)want);
                }
        }
    }
    CHECK(sdt_host_first_nonfinite(x, SDT_I32, 4) == -1, "an integer tensor has no NaN to report");
    free(x);
}

/* Hosts fork after loading a model: a child converting again must not wait for threads that
 * only the parent has (as it did with OpenMP's pool). */
static void check_after_fork(void)
{
    float *src = kt_alloc(BIG * 4);
    uint16_t *dst = kt_alloc(BIG * 2);
    for (int64_t i = 0; i < BIG; i++) src[i] = (float)i;
    sdt_host_convert(src, SDT_F32, dst, SDT_BF16, BIG); /* the parent's threads, started and joined */
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        sdt_host_convert(src, SDT_F32, dst, SDT_BF16, BIG);
        _exit(sdt_host_first_nonfinite(dst, SDT_BF16, BIG) == -1 ? 0 : 1);
    }
    int status = -1;
    bool done = false;
    for (int waited = 0; child > 0 && waited < 600 && !done; waited++) { /* up to a minute */
        done = waitpid(child, &status, WNOHANG) == child;
        if (!done) usleep(100000);
    }
    if (child > 0 && !done) {
        kill(child, SIGKILL);
        waitpid(child, &status, 0);
    }
    CHECK(child > 0 && done && WIFEXITED(status) && WEXITSTATUS(status) == 0, "a forked child's conversion %s",
          done ? "failed" : "hung (threads of the parent awaited in the child)");
    free(src);
    free(dst);
}

int main(void)
{
    sdt_test_rng r = sdt_test_rng_from_env("host_convert");
    check_all_f16();
    check_conversions(&r);
    check_scan(&r);
    check_after_fork();
    return sdt_test_finish("host_convert (load-time NaN/Inf scan and dtype conversion = tensor.h's, bit for bit)");
}
