/* bucket_cli - prints data/buckets.c's bucket list and image fits for buckets_vs_kohya.py.
 *
 * usage: bucket_cli AREA MIN MAX STEP [W H]...
 * prints "bucket W H" per bucket, then "fit W H -> BW BH RW RH LEFT TOP" per image (centre crop),
 * or "refused <sentence>" when the rules are refused. */
#include <stdio.h>
#include <stdlib.h>

#include "data/buckets.h"

int main(int argc, char **argv)
{
    if (argc < 5 || (argc - 5) % 2) {
        fprintf(stderr, "usage: bucket_cli AREA MIN MAX STEP [W H]...\n");
        return 2;
    }
    sdt_bucket_rules r = {atoll(argv[1]), atoi(argv[2]), atoi(argv[3]), atoi(argv[4])};
    sdt_error error = {0};
    if (!sdt_bucket_rules_check(&r, "", &error)) {
        printf("refused %s\n", error.message);
        return 0;
    }
    sdt_bucket_list list;
    if (!sdt_buckets_make(&r, &list, &error)) {
        fprintf(stderr, "%s\n", error.message);
        return 1;
    }
    for (int i = 0; i < list.n; i++) printf("bucket %d %d\n", list.items[i].width, list.items[i].height);
    for (int a = 5; a + 1 < argc; a += 2) {
        int w = atoi(argv[a]), h = atoi(argv[a + 1]);
        sdt_bucket_fit f = sdt_bucket_fit_image(&list, w, h, false, 0, "x.png");
        printf("fit %d %d -> %d %d %d %d %d %d\n", w, h, f.width, f.height, f.resized_width, f.resized_height,
               f.crop_left, f.crop_top);
    }
    sdt_buckets_free(&list);
    return 0;
}
