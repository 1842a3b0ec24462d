/* fuzz_replay_main.c - runs a libFuzzer target over files (or folders of files)
 * without libFuzzer, so the targets build and their seeds run in every ctest. */
#include <glib.h>
#include <stdint.h>
#include <stdio.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    gchar *buf;
    gsize len;
    if (!g_file_get_contents(path, &buf, &len, NULL)) {
        fprintf(stderr, "cannot read %s\n", path);
        return 1;
    }
    LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
    g_free(buf);
    return 0;
}

/* Without arguments: the target's seed folder (set by CMake). */
int main(int argc, char **argv)
{
    int failures = 0, runs = 0;
#ifdef SDT_FUZZ_SEEDS
    static char *seeds[] = {NULL, (char *)SDT_FUZZ_SEEDS};
    if (argc < 2) {
        argc = 2;
        argv = seeds;
    }
#endif
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        GDir *d = g_dir_open(arg, 0, NULL);
        if (!d) {
            failures += run_file(arg);
            runs++;
            continue;
        }
        const char *name;
        while ((name = g_dir_read_name(d))) {
            char *p = g_build_filename(arg, name, NULL);
            failures += run_file(p);
            runs++;
            g_free(p);
        }
        g_dir_close(d);
    }
    printf("%d inputs replayed\n", runs);
    return failures ? 1 : 0;
}
