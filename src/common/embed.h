/*
 * embed.h - files built into the binary (the OpenAPI document, the dashboard's assets).
 *
 * AD_EMBED(name, "path") at file scope defines `name` (the file's bytes followed by a NUL) and `name_end`
 * (the address of that NUL), so the length is `name_end - name`. The assembler reads the file at build
 * time with `.incbin`, relative to the directory make runs in (the checkout's root). The compiler does not
 * see the file, so the Makefile lists it as a prerequisite of the object (see EMBEDDED there).
 */
#ifndef AD_EMBED_H
#define AD_EMBED_H

#include <stddef.h>

#define AD_EMBED(name, path)                                                                                           \
    __asm__(".pushsection .rodata\n"                                                                                   \
            ".balign 16\n"                                                                                             \
            ".global " #name "\n" #name ":\n"                                                                          \
            ".incbin \"" path "\"\n"                                                                                   \
            ".global " #name "_end\n" #name "_end:\n"                                                                  \
            ".byte 0\n"                                                                                                \
            ".popsection\n");                                                                                          \
    extern const char name[], name##_end[]

#define AD_EMBED_LEN(name) ((size_t)(name##_end - name))

#endif
