/* A ValidateRequest's fields located in its bytes, for the plain form every agent sends (server/edge/_request.c
   reads them into strs; server/edge/_answers.c answers from them). What is plain, and why only that, is said in
   _request.c: anything else is left to protobuf, the definition. */

#ifndef ARGWATCH_NATIVE_REQUEST_FIELDS_H
#define ARGWATCH_NATIVE_REQUEST_FIELDS_H

#include <Python.h>
#include <stdint.h>

/* A varint at *p (before end) into *out, in its shortest encoding; 0 when it runs past end, past ten bytes,
   or is padded (a last byte of 0 after others): protobuf decides what such bytes are. */
static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
    uint64_t value = 0;
    for (int shift = 0; shift < 70 && *p < end; shift += 7) {
        uint8_t byte = *(*p)++;
        value |= (uint64_t)(byte & 0x7F) << shift;
        if (!(byte & 0x80)) {
            if ((shift > 0 && byte == 0) || (shift == 63 && byte > 1)) return 0;
            *out = value;
            return 1;
        }
    }
    return 0;
}

/* A field's tag: every field read here is length-delimited with a number under 16, so its tag is one byte. */
static int read_tag(const uint8_t **p, unsigned *number) {
    uint8_t tag = *(*p)++; /* the callers' loops hold p < end */
    if (tag & 0x80 || (tag & 7) != 2) return 0;
    *number = tag >> 3;
    return 1;
}

/* A length-delimited field's payload: *start and *len; 0 when it runs past end. */
static int read_span(const uint8_t **p, const uint8_t *end, const uint8_t **start, Py_ssize_t *len) {
    uint64_t n;
    /* upb refuses a length of 2 GiB or more (no such request gets past gRPC's 4 MiB limit, but were it raised,
       the two would still agree). */
    if (!read_varint(p, end, &n) || n >= INT32_MAX || n > (uint64_t)(end - *p)) return 0;
    *start = *p;
    *len = (Py_ssize_t)n;
    *p += n;
    return 1;
}

enum { TOOL, ARGUMENTS, CONVERSATION, CALL_ID, CUSTOMER, TENANT, MODEL, PROMPT_VERSION, FIELDS };

/* Session's fields 1 (customer_id) and 2 (tenant) into spans; 0 for anything else. */
static int read_session(const uint8_t *p, const uint8_t *end, const uint8_t **starts, Py_ssize_t *lens, int *seen) {
    while (p < end) {
        unsigned number;
        if (!read_tag(&p, &number)) return 0;
        int slot;
        switch (number) {
            case 1: slot = CUSTOMER; break;
            case 2: slot = TENANT; break;
            default: return 0;
        }
        if (seen[slot]) return 0;
        seen[slot] = 1;
        if (!read_span(&p, end, &starts[slot], &lens[slot])) return 0;
    }
    return 1;
}

/* Each field's span in [p, end), a session's two included: 1 when the bytes are a request in the plain form
   (each field at most once, in its wire type, no other field); 0 for any other. A field absent has seen 0. */
static int read_fields(const uint8_t *p, const uint8_t *end, const uint8_t **starts, Py_ssize_t *lens, int *seen) {
    int session_seen = 0;
    while (p < end) {
        unsigned number;
        if (!read_tag(&p, &number)) return 0;
        int slot;
        switch (number) {
            case 1: slot = TOOL; break;
            case 2: slot = ARGUMENTS; break;
            case 4: slot = CONVERSATION; break;
            case 5: slot = CALL_ID; break;
            case 7: slot = MODEL; break;
            case 8: slot = PROMPT_VERSION; break;
            case 6: {
                const uint8_t *start;
                Py_ssize_t len;
                if (session_seen || !read_span(&p, end, &start, &len)) return 0;
                session_seen = 1;
                if (!read_session(start, start + len, starts, lens, seen)) return 0;
                continue;
            }
            default: return 0; /* arguments_struct, or a field this version does not know */
        }
        if (seen[slot] || !read_span(&p, end, &starts[slot], &lens[slot])) return 0;
        seen[slot] = 1;
    }
    return 1;
}

#endif
