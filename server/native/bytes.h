/* A growable byte buffer for the C extensions (decisions/_digest.c, tracing/_otlp.c): on the stack while it is
   short, on Python's allocator past that. Each function that can fail sets a Python exception and returns -1. */

#ifndef ARGWATCH_NATIVE_BYTES_H
#define ARGWATCH_NATIVE_BYTES_H

#include <Python.h>
#include <string.h>

typedef struct {
    char *data;
    size_t len, cap;
    char inline_[1024];
} Bytes;

static inline void bytes_init(Bytes *b) {
    b->data = b->inline_;
    b->len = 0;
    b->cap = sizeof b->inline_;
}

static inline void bytes_free(Bytes *b) {
    if (b->data != b->inline_) PyMem_Free(b->data);
}

/* Room for `more` bytes past `len`. */
static inline int bytes_reserve(Bytes *b, size_t more) {
    if (b->len + more <= b->cap) return 0;
    size_t cap = b->cap * 2;
    while (cap < b->len + more) cap *= 2;
    char *grown = PyMem_Malloc(cap);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(grown, b->data, b->len);
    bytes_free(b);
    b->data = grown;
    b->cap = cap;
    return 0;
}

static inline int put(Bytes *b, const void *data, size_t len) {
    if (bytes_reserve(b, len) < 0) return -1;
    memcpy(b->data + b->len, data, len);
    b->len += len;
    return 0;
}

#endif
