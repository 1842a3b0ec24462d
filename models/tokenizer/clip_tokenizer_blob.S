/* clip_tokenizer_blob.S - the gzip-compressed CLIP tokenizer files and their MIT licence as
 * read-only data of the library (see models/tokenizer/clip/README.md). The build passes each
 * file's path as a quoted string; the symbols are hidden, so the plugin still exports one. */
#define BLOB(name, file)      \
    .global name;             \
    .hidden name;             \
    .balign 16;               \
name:                         \
    .incbin file;             \
    .global name##_end;       \
    .hidden name##_end;       \
name##_end:

    .section .rodata
BLOB(sdt_clip_vocab_gz, SDT_CLIP_VOCAB_GZ)
BLOB(sdt_clip_merges_gz, SDT_CLIP_MERGES_GZ)
BLOB(sdt_clip_license, SDT_CLIP_LICENSE)
    .byte 0

    .section .note.GNU-stack, "", %progbits
