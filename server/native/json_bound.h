/* A JSON object's bound string arguments located in its bytes with no object made, for the documents orjson (the
   gateway's one JSON reader) reads to a dict: server/edge/_answers.c answers a call from them.

   It reads a subset of what orjson accepts and says so by declining: whatever it accepts, orjson accepts too and
   reads each named key to the same string. What it declines (0) is left to orjson on the slower path, which says
   what is wrong, or reads it. Declined though orjson would read it: a number with an exponent or of more than
   MAX_INTEGER_DIGITS digits before its point (orjson refuses a number that is infinite as a double), nesting past
   MAX_DEPTH, a top-level key with an escape in it (it might name a bound argument), and a bound argument that is
   not a string, has an escape in it, appears twice or is missing. Refused as orjson refuses them: anything that is
   not JSON (RFC 8259), a byte order mark, a control character in a string, UTF-8 that Python would not decode
   (overlong, a surrogate, past U+10FFFF), an escaped surrogate not in a pair. tests/unit/test_json_bound.py holds
   it to orjson over generated documents. */

#ifndef ARGWATCH_NATIVE_JSON_BOUND_H
#define ARGWATCH_NATIVE_JSON_BOUND_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_DEPTH 64
#define MAX_INTEGER_DIGITS 300 /* 1e300 is finite as a double; 1e309 is not */
#define MAX_BOUND 16           /* bound arguments a call is read for; a tool with more is not armed */

/* A bound argument: its name's UTF-8, and where its value was found (start NULL: not yet). */
typedef struct {
    const char *name;
    Py_ssize_t name_len;
    const uint8_t *start;
    Py_ssize_t len;
} Bound;

static inline const uint8_t *skip_space(const uint8_t *p, const uint8_t *end) {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
}

static inline int hex_digit(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The four hex digits at *p as a code unit; -1 when they are not four hex digits. */
static int hex4(const uint8_t **p, const uint8_t *end) {
    if (end - *p < 4) return -1;
    int unit = 0;
    for (int at = 0; at < 4; at++) {
        int digit = hex_digit((*p)[at]);
        if (digit < 0) return -1;
        unit = unit << 4 | digit;
    }
    *p += 4;
    return unit;
}

/* The length of the UTF-8 sequence at p that Python's strict decoder takes (Unicode's table 3-7), 0 for none. */
static int utf8_sequence(const uint8_t *p, const uint8_t *end) {
    uint8_t lead = p[0];
    int more;
    uint8_t low = 0x80, high = 0xBF; /* the second byte's range */
    if (lead >= 0xC2 && lead <= 0xDF)
        more = 1;
    else if (lead >= 0xE0 && lead <= 0xEF) {
        more = 2;
        if (lead == 0xE0) low = 0xA0;       /* not overlong */
        else if (lead == 0xED) high = 0x9F; /* not a surrogate */
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        more = 3;
        if (lead == 0xF0) low = 0x90;       /* not overlong */
        else if (lead == 0xF4) high = 0x8F; /* not past U+10FFFF */
    } else
        return 0;
    if (end - p <= more || p[1] < low || p[1] > high) return 0;
    for (int at = 2; at <= more; at++)
        if ((p[at] & 0xC0) != 0x80) return 0;
    return more + 1;
}

/* The bytes of `word` (eight read from memory) that end or escape a string or need more than a glance: a quote, a
   backslash, a control character or a byte past ASCII, each flagged by its high bit. A plain byte after a flagged
   one may be flagged too (a borrow), never one before it: the lowest flagged byte is always one of these. */
static inline uint64_t special_bytes(uint64_t word) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t quote = word ^ (ones * '"'), backslash = word ^ (ones * '\\');
    return (((quote - ones) & ~quote) | ((backslash - ones) & ~backslash) | (word - ones * 0x20) | word) & highs;
}

/* How many plain bytes come before the first special one at `at`, of the eight there (8: none special). */
static inline Py_ssize_t plain_run(const uint8_t *at) {
    uint64_t word;
    memcpy(&word, at, 8);
    uint64_t flagged = special_bytes(word);
    if (flagged == 0) return 8;
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return __builtin_ctzll(flagged) >> 3; /* the byte at the lowest address is the word's lowest */
#else
    Py_ssize_t plain = 0;
    while (!(special_bytes((uint64_t)at[plain]) & 0x80)) plain++;
    return plain;
#endif
}

/* The string whose opening quote is at *p: 1 with *p past its closing quote and *escaped set when it has an
   escape; 0 when it is not one orjson reads. */
static int scan_string(const uint8_t **p, const uint8_t *end, int *escaped) {
    const uint8_t *at = *p + 1;
    *escaped = 0;
    while (at < end) {
        if (end - at >= 8) { /* most of a string: eight bytes at a glance, to the first that needs reading */
            Py_ssize_t plain = plain_run(at);
            at += plain;
            if (plain == 8) continue;
        }
        uint8_t c = *at;
        if (c == '"') {
            *p = at + 1;
            return 1;
        }
        if (c < 0x20) return 0;
        if (c < 0x80 && c != '\\') {
            at++;
            continue;
        }
        if (c >= 0x80) {
            int len = utf8_sequence(at, end);
            if (len == 0) return 0;
            at += len;
            continue;
        }
        *escaped = 1;
        if (++at == end) return 0;
        c = *at++;
        if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' || c == 'r' || c == 't') continue;
        if (c != 'u') return 0;
        int unit = hex4(&at, end);
        if (unit < 0 || (unit >= 0xDC00 && unit <= 0xDFFF)) return 0; /* a low surrogate first */
        if (unit >= 0xD800 && unit <= 0xDBFF) {                        /* a high one: its low one next */
            if (end - at < 2 || at[0] != '\\' || at[1] != 'u') return 0;
            at += 2;
            unit = hex4(&at, end);
            if (unit < 0xDC00 || unit > 0xDFFF) return 0;
        }
    }
    return 0;
}

/* The number at *p, its exponent aside: 1 with *p past it; 0 when it is not JSON's, or its integer part is long. */
static int scan_number(const uint8_t **p, const uint8_t *end) {
    const uint8_t *at = *p;
    if (*at == '-') at++;
    if (at == end) return 0;
    if (*at == '0')
        at++;
    else if (*at >= '1' && *at <= '9') {
        const uint8_t *digits = at;
        while (at < end && *at >= '0' && *at <= '9') at++;
        if (at - digits > MAX_INTEGER_DIGITS) return 0;
    } else
        return 0;
    if (at < end && *at == '.') {
        const uint8_t *digits = ++at;
        while (at < end && *at >= '0' && *at <= '9') at++;
        if (at == digits) return 0;
    }
    *p = at; /* an exponent is not read: what follows the number is not JSON here, and the document declined */
    return 1;
}

static int scan_literal(const uint8_t **p, const uint8_t *end, const char *word, Py_ssize_t len) {
    if (end - *p < len || memcmp(*p, word, (size_t)len) != 0) return 0;
    *p += len;
    return 1;
}

/* One scalar value at *p (not an object or an array); 1 with *p past it. */
static int scan_scalar(const uint8_t **p, const uint8_t *end) {
    int escaped;
    switch (**p) {
    case '"':
        return scan_string(p, end, &escaped);
    case 't':
        return scan_literal(p, end, "true", 4);
    case 'f':
        return scan_literal(p, end, "false", 5);
    case 'n':
        return scan_literal(p, end, "null", 4);
    default:
        return scan_number(p, end);
    }
}

/* The first bound argument named by the `len` bytes at key, or NULL. */
static Bound *bound_named(Bound *bound, int count, const uint8_t *key, Py_ssize_t len) {
    for (int at = 0; at < count; at++)
        if (bound[at].name_len == len && memcmp(bound[at].name, key, (size_t)len) == 0) return &bound[at];
    return NULL;
}

/* Every bound argument from `first` on named as it is (a policy may bind one argument twice) given its value. */
static void bind_value(Bound *first, const Bound *end, const uint8_t *value, Py_ssize_t len) {
    for (Bound *named = first; named < end; named++) {
        if (named->name_len != first->name_len || memcmp(named->name, first->name, (size_t)first->name_len) != 0)
            continue;
        named->start = value;
        named->len = len;
    }
}

enum { AT_VALUE, AFTER_VALUE, REFUSED };

/* An object's member from its key at p to its value: AT_VALUE with *p at the value, or AFTER_VALUE with *p past
   it when it is a bound argument's (read here, at the top level), or REFUSED. */
static int scan_member(const uint8_t **p, const uint8_t *end, int top, Bound *bound, int count) {
    if (**p != '"') return REFUSED;
    const uint8_t *key = *p + 1;
    int escaped;
    if (!scan_string(p, end, &escaped)) return REFUSED;
    Py_ssize_t key_len = *p - 1 - key;
    *p = skip_space(*p, end);
    if (*p == end || **p != ':') return REFUSED;
    *p = skip_space(*p + 1, end);
    if (*p == end) return REFUSED;
    if (!top) return AT_VALUE;
    if (escaped) return REFUSED; /* orjson reads its escapes: it might name a bound argument */
    Bound *named = bound_named(bound, count, key, key_len);
    if (named == NULL) return AT_VALUE;
    /* A bound argument: a string with no escape, once (orjson keeps a repeated key's last value). */
    if (named->start != NULL || **p != '"') return REFUSED;
    const uint8_t *value = *p + 1;
    if (!scan_string(p, end, &escaped) || escaped) return REFUSED;
    bind_value(named, bound + count, value, *p - 1 - value);
    return AFTER_VALUE;
}

/* Whether the `len` bytes at `json` are a JSON object orjson reads whose top-level keys name each of `count`
   bound arguments once, each to a string with no escape: 1 with each one's start and len set (the bytes between
   its quotes, UTF-8 checked), 0 when not or when declined (above). Linear in len; nothing allocated. */
static int scan_bound(const uint8_t *json, Py_ssize_t len, Bound *bound, int count) {
    const uint8_t *end = json + len, *p = skip_space(json, end);
    uint8_t closing[MAX_DEPTH]; /* each open container's closing bracket */
    int depth = 0, state = AT_VALUE;
    for (int at = 0; at < count; at++) bound[at].start = NULL;
    if (p == end || *p != '{') return 0;
    while (state != REFUSED) {
        if (state == AT_VALUE) {
            if (*p != '{' && *p != '[') {
                if (!scan_scalar(&p, end)) return 0;
                state = AFTER_VALUE;
                continue;
            }
            if (depth == MAX_DEPTH) return 0;
            closing[depth++] = *p == '{' ? '}' : ']';
            p = skip_space(p + 1, end);
            if (p == end) return 0;
            if (*p == closing[depth - 1]) { /* empty */
                p++;
                depth--;
                state = AFTER_VALUE;
            } else if (closing[depth - 1] == '}')
                state = scan_member(&p, end, depth == 1, bound, count);
            continue;
        }
        /* After a value: the end of the document, a closing bracket, or a comma and the next value or member. */
        if (depth == 0) break;
        p = skip_space(p, end);
        if (p == end) return 0;
        if (*p == closing[depth - 1]) {
            p++;
            depth--;
            continue;
        }
        if (*p != ',') return 0;
        p = skip_space(p + 1, end);
        if (p == end) return 0;
        state = closing[depth - 1] == ']' ? AT_VALUE : scan_member(&p, end, depth == 1, bound, count);
    }
    if (state == REFUSED || skip_space(p, end) != end) return 0;
    for (int at = 0; at < count; at++)
        if (bound[at].start == NULL) return 0;
    return 1;
}

#endif
