/* Keyed BLAKE2b-256 digests of argument values for the decision log, one native call per call's arguments.

   The same digests as record.py's ValueHasher computed with hashlib (the tests compare them over many values):
   "blake2b-256:" + hex(BLAKE2b-256(key, compact sorted-key UTF-8 JSON of the value)). What Python did per
   value (the JSON, a copy of the keyed hash, an update, the hex, the prefix) is here one compression and a
   string; the figures are in docs/performance.md (decision_log.py).

   BLAKE2b is written from RFC 7693 (section 3). Strings, ints, bools and null are encoded here exactly as
   orjson encodes them; any other value (floats, lists, objects) is handed to the `encode` callable given at
   construction (orjson.dumps with sorted keys), whose errors propagate as they would in Python. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../native/bytes.h"
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define PREFIX "blake2b-256:"
#define PREFIX_LEN 12
#define OUT_BYTES 32
#define BLOCK 128

static const uint64_t IV[8] = {
    0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL, 0xa54ff53a5f1d36f1ULL,
    0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL, 0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL,
};

static const uint8_t SIGMA[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4}, {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13}, {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11}, {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5}, {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
};

typedef struct {
    uint64_t h[8];
    uint64_t t[2];
    uint8_t buf[BLOCK];
    size_t filled;
} Blake2b;

static inline uint64_t rotr64(uint64_t x, unsigned n) { return (x >> n) | (x << (64 - n)); }

static inline uint64_t load64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

#define G(a, b, c, d, x, y)              \
    do {                                 \
        v[a] = v[a] + v[b] + (x);        \
        v[d] = rotr64(v[d] ^ v[a], 32);  \
        v[c] = v[c] + v[d];              \
        v[b] = rotr64(v[b] ^ v[c], 24);  \
        v[a] = v[a] + v[b] + (y);        \
        v[d] = rotr64(v[d] ^ v[a], 16);  \
        v[c] = v[c] + v[d];              \
        v[b] = rotr64(v[b] ^ v[c], 63);  \
    } while (0)

/* One compression of `block` into the chain value `h`, `t0`/`t1` bytes counted so far (this block included). */
static void compress_into(uint64_t h[8], const uint8_t block[BLOCK], uint64_t t0, uint64_t t1, int last) {
    uint64_t m[16], v[16];
    for (int i = 0; i < 16; i++) m[i] = load64(block + 8 * i);
    for (int i = 0; i < 8; i++) {
        v[i] = h[i];
        v[i + 8] = IV[i];
    }
    v[12] ^= t0;
    v[13] ^= t1;
    if (last) v[14] = ~v[14];
    /* Unrolled, the message words' indices are constants: no table look-up per word (about half the
       instructions of a digest, measured with callgrind). */
#pragma GCC unroll 12
    for (int r = 0; r < 12; r++) {
        const uint8_t *z = SIGMA[r];
        G(0, 4, 8, 12, m[z[0]], m[z[1]]);
        G(1, 5, 9, 13, m[z[2]], m[z[3]]);
        G(2, 6, 10, 14, m[z[4]], m[z[5]]);
        G(3, 7, 11, 15, m[z[6]], m[z[7]]);
        G(0, 5, 10, 15, m[z[8]], m[z[9]]);
        G(1, 6, 11, 12, m[z[10]], m[z[11]]);
        G(2, 7, 8, 13, m[z[12]], m[z[13]]);
        G(3, 4, 9, 14, m[z[14]], m[z[15]]);
    }
    for (int i = 0; i < 8; i++) h[i] ^= v[i] ^ v[i + 8];
}

static void compress(Blake2b *s, const uint8_t block[BLOCK], int last) { compress_into(s->h, block, s->t[0], s->t[1], last); }

static inline void count(Blake2b *s, uint64_t n) {
    s->t[0] += n;
    if (s->t[0] < n) s->t[1]++;
}

/* Absorbs `len` bytes. A full buffer is compressed only when more input follows: the last block is
   compressed by `finish`, flagged as the last. */
static void absorb(Blake2b *s, const uint8_t *in, size_t len) {
    while (len > 0) {
        if (s->filled == BLOCK) {
            count(s, BLOCK);
            compress(s, s->buf, 0);
            s->filled = 0;
        }
        size_t take = BLOCK - s->filled;
        if (take > len) take = len;
        memcpy(s->buf + s->filled, in, take);
        s->filled += take;
        in += take;
        len -= take;
    }
}

/* The last block compressed: the digest is then the chain value's first OUT_BYTES (write_hex). */
static void finish(Blake2b *s) {
    count(s, s->filled);
    memset(s->buf + s->filled, 0, BLOCK - s->filled);
    compress(s, s->buf, 1);
}

/* The decimal digits of `value` written backwards from `end`; returns where they start. */
static char *digits_before(char *end, unsigned long long value, int at_least) {
    int written = 0;
    do {
        *--end = (char)('0' + value % 10);
        value /= 10;
        written++;
    } while (value > 0 || written < at_least);
    return end;
}

/* "000102...ff": a byte's two hex digits at twice its value. */
static char HEX_PAIRS[512];

static void fill_hex_pairs(void) {
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 256; i++) {
        HEX_PAIRS[2 * i] = hex[i >> 4];
        HEX_PAIRS[2 * i + 1] = hex[i & 0xf];
    }
}

/* A signed integer in decimal, as JSON (and orjson) writes one. */
static int put_decimal(Bytes *b, long long value) {
    unsigned long long magnitude = value < 0 ? 0ULL - (unsigned long long)value : (unsigned long long)value;
    char text[24];
    char *end = text + sizeof text;
    char *start = digits_before(end, magnitude, 1);
    if (value < 0) *--start = '-';
    return put(b, start, (size_t)(end - start));
}

/* A JSON string as orjson writes one: UTF-8 as it is; `"` and `\` escaped; \b \t \n \f \r short; the other
   control characters as \u00xx (lowercase hex). */
/* Whether any of the eight bytes of `w` must be escaped in a JSON string: below 0x20, '"' or '\\'. Exact as a
   whole (a byte's own flag can be wrong only above a byte that truly needs it): each test is the classic
   "has a byte less than n" of a word, on w itself and on w with the quote's or the backslash's bits flipped. */
static inline int escapes_in(uint64_t w) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t quote = w ^ (ones * '"'), backslash = w ^ (ones * '\\');
    uint64_t control = (w - ones * 0x20) & ~w;
    quote = (quote - ones) & ~quote;
    backslash = (backslash - ones) & ~backslash;
    return ((control | quote | backslash) & highs) != 0;
}

static int json_string(Bytes *b, const char *utf8, Py_ssize_t size) {
    if (bytes_reserve(b, (size_t)size * 6 + 2) < 0) return -1;
    char *out = b->data + b->len;
    *out++ = '"';
    for (Py_ssize_t i = 0; i < size; i++) {
        /* Eight bytes at once when none needs escaping (ids, names, versions: almost always). */
        uint64_t word;
        if (i + 8 <= size && (memcpy(&word, utf8 + i, 8), !escapes_in(word))) {
            memcpy(out, &word, 8);
            out += 8;
            i += 7;
            continue;
        }
        unsigned char c = (unsigned char)utf8[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *out++ = (char)c;
            continue;
        }
        *out++ = '\\';
        switch (c) {
            case '"': *out++ = '"'; break;
            case '\\': *out++ = '\\'; break;
            case '\b': *out++ = 'b'; break;
            case '\t': *out++ = 't'; break;
            case '\n': *out++ = 'n'; break;
            case '\f': *out++ = 'f'; break;
            case '\r': *out++ = 'r'; break;
            default:
                *out++ = 'u';
                *out++ = '0';
                *out++ = '0';
                *out++ = HEX_PAIRS[2 * c];
                *out++ = HEX_PAIRS[2 * c + 1];
        }
    }
    *out++ = '"';
    b->len = (size_t)(out - b->data);
    return 0;
}

typedef struct {
    PyObject_HEAD
    Blake2b keyed; /* the key's block compressed: copied per non-empty input */
    Blake2b empty; /* the key's block pending: for an empty input it is the last block */
    PyObject *encode; /* orjson.dumps with sorted keys, for what is not encoded here */
} DigesterObject;

/* The hex of a chain value's first OUT_BYTES (little-endian words, as RFC 7693 says), after the prefix. */
static void write_hex(const uint64_t h[8], char *dst) {
    uint8_t digest[OUT_BYTES];
    for (int w = 0; w < OUT_BYTES / 8; w++) {
        uint64_t word = h[w];
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        word = __builtin_bswap64(word);
#endif
        memcpy(digest + 8 * w, &word, 8);
    }
    memcpy(dst, PREFIX, PREFIX_LEN);
    char *out = dst + PREFIX_LEN;
#if defined(__SSE2__)
    /* Sixteen bytes at a time: each byte's two nibbles side by side, then '0'-'9' or 'a'-'f' (x86-64 always has
       SSE2). */
    const __m128i low_nibble = _mm_set1_epi8(0x0f), nine = _mm_set1_epi8(9);
    const __m128i zero_digit = _mm_set1_epi8('0'), to_letter = _mm_set1_epi8('a' - '0' - 10);
    for (int half = 0; half < OUT_BYTES / 16; half++) {
        __m128i bytes = _mm_loadu_si128((const __m128i *)(digest + 16 * half));
        __m128i high = _mm_and_si128(_mm_srli_epi16(bytes, 4), low_nibble);
        __m128i low = _mm_and_si128(bytes, low_nibble);
        __m128i pairs[2] = {_mm_unpacklo_epi8(high, low), _mm_unpackhi_epi8(high, low)};
        for (int k = 0; k < 2; k++) {
            __m128i letters = _mm_and_si128(_mm_cmpgt_epi8(pairs[k], nine), to_letter);
            __m128i text = _mm_add_epi8(_mm_add_epi8(pairs[k], zero_digit), letters);
            _mm_storeu_si128((__m128i *)(out + 32 * half + 16 * k), text);
        }
    }
#else
    for (int i = 0; i < OUT_BYTES; i++) memcpy(out + 2 * i, HEX_PAIRS + 2 * digest[i], 2);
#endif
}

/* The digest of `len` bytes as "blake2b-256:<hex>", written to `dst` (PREFIX_LEN + 64 chars). An input of one
   block or less (almost every argument value) is one compression of a block padded in place, with no copy of
   the whole hash state and no buffering. */
static void digest_into(DigesterObject *self, const char *data, size_t len, char *dst) {
    uint64_t h[8];
    if (len > 0 && len <= BLOCK) {
        uint8_t block[BLOCK];
        memcpy(block, data, len);
        memset(block + len, 0, BLOCK - len);
        memcpy(h, self->keyed.h, sizeof h);
        compress_into(h, block, self->keyed.t[0] + len, self->keyed.t[1], 1);
    } else {
        Blake2b s = len > 0 ? self->keyed : self->empty;
        absorb(&s, (const uint8_t *)data, len);
        finish(&s);
        memcpy(h, s.h, sizeof h);
    }
    write_hex(h, dst);
}

/* ---- Four one-block digests at once: a line's values are hashed together, one per 64-bit lane of AVX2 ----
   Each lane runs the same compression as compress_into on its own block, so the digests are the same bit for
   bit (the tests compare a line's digests with single ones and with hashlib). Used when the CPU has AVX2,
   checked once at import; elsewhere the four are computed one by one. */

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_X4 1

#define ROTR32(x) _mm256_shuffle_epi32((x), _MM_SHUFFLE(2, 3, 0, 1))
#define ROTR24(x) _mm256_shuffle_epi8((x), r24)
#define ROTR16(x) _mm256_shuffle_epi8((x), r16)
#define ROTR63(x) _mm256_or_si256(_mm256_srli_epi64((x), 63), _mm256_add_epi64((x), (x)))
#define G4(a, b, c, d, x, y)                                                 \
    do {                                                                     \
        v[a] = _mm256_add_epi64(_mm256_add_epi64(v[a], v[b]), (x));          \
        v[d] = ROTR32(_mm256_xor_si256(v[d], v[a]));                         \
        v[c] = _mm256_add_epi64(v[c], v[d]);                                 \
        v[b] = ROTR24(_mm256_xor_si256(v[b], v[c]));                         \
        v[a] = _mm256_add_epi64(_mm256_add_epi64(v[a], v[b]), (y));          \
        v[d] = ROTR16(_mm256_xor_si256(v[d], v[a]));                         \
        v[c] = _mm256_add_epi64(v[c], v[d]);                                 \
        v[b] = ROTR63(_mm256_xor_si256(v[b], v[c]));                         \
    } while (0)

/* The last-block compression of four padded blocks from the chain value `h`, with `t0[k]` bytes counted for
   block k (and `t1` for all); each block's resulting chain value into out[k]. */
__attribute__((target("avx2"))) static void compress_x4(const uint64_t h[8], const uint8_t *const blocks[4],
                                                        const uint64_t t0[4], uint64_t t1, uint64_t out[4][8]) {
    const __m256i r24 = _mm256_setr_epi8(3, 4, 5, 6, 7, 0, 1, 2, 11, 12, 13, 14, 15, 8, 9, 10, 3, 4, 5, 6, 7, 0, 1,
                                         2, 11, 12, 13, 14, 15, 8, 9, 10);
    const __m256i r16 = _mm256_setr_epi8(2, 3, 4, 5, 6, 7, 0, 1, 10, 11, 12, 13, 14, 15, 8, 9, 2, 3, 4, 5, 6, 7, 0,
                                         1, 10, 11, 12, 13, 14, 15, 8, 9);
    __m256i m[16], v[16];
    for (int j = 0; j < 16; j++) {
        m[j] = _mm256_set_epi64x((long long)load64(blocks[3] + 8 * j), (long long)load64(blocks[2] + 8 * j),
                                 (long long)load64(blocks[1] + 8 * j), (long long)load64(blocks[0] + 8 * j));
    }
    for (int i = 0; i < 8; i++) {
        v[i] = _mm256_set1_epi64x((long long)h[i]);
        v[i + 8] = _mm256_set1_epi64x((long long)IV[i]);
    }
    v[12] = _mm256_xor_si256(v[12], _mm256_set_epi64x((long long)t0[3], (long long)t0[2], (long long)t0[1],
                                                      (long long)t0[0]));
    v[13] = _mm256_xor_si256(v[13], _mm256_set1_epi64x((long long)t1));
    v[14] = _mm256_xor_si256(v[14], _mm256_set1_epi64x(-1)); /* the last block */
#pragma GCC unroll 12
    for (int r = 0; r < 12; r++) {
        const uint8_t *z = SIGMA[r];
        G4(0, 4, 8, 12, m[z[0]], m[z[1]]);
        G4(1, 5, 9, 13, m[z[2]], m[z[3]]);
        G4(2, 6, 10, 14, m[z[4]], m[z[5]]);
        G4(3, 7, 11, 15, m[z[6]], m[z[7]]);
        G4(0, 5, 10, 15, m[z[8]], m[z[9]]);
        G4(1, 6, 11, 12, m[z[10]], m[z[11]]);
        G4(2, 7, 8, 13, m[z[12]], m[z[13]]);
        G4(3, 4, 9, 14, m[z[14]], m[z[15]]);
    }
    for (int i = 0; i < 8; i++) {
        uint64_t lanes[4];
        __m256i mixed = _mm256_xor_si256(_mm256_xor_si256(_mm256_set1_epi64x((long long)h[i]), v[i]), v[i + 8]);
        _mm256_storeu_si256((__m256i *)lanes, mixed);
        for (int k = 0; k < 4; k++) out[k][i] = lanes[k];
    }
}
#else
#define HAVE_X4 0
#endif

static int use_x4 = 0; /* set at import: the CPU has AVX2 */

/* A digest to make once the line is written: its hex goes at `at` in the line; its value's JSON (one block at
   most, not empty) is at `start` in the pending values. */
typedef struct {
    size_t at, start, len;
} Job;

/* Digests batched per line; past these, each is made as it is met. */
#define MAX_JOBS 64

typedef struct {
    Job jobs[MAX_JOBS];
    int count;
    Bytes values;
} Pending;

/* Every pending digest into the line `b`, four at a time where the CPU can. */
static void run_jobs(DigesterObject *self, Pending *pending, Bytes *b) {
    int k = 0;
#if HAVE_X4
    if (use_x4) {
        for (; k + 1 < pending->count; k += 4) { /* two or more left: a batch (a lone one is cheaper alone) */
            uint8_t blocks[4][BLOCK];
            const uint8_t *from[4];
            uint64_t t0[4], out[4][8];
            int lanes = pending->count - k < 4 ? pending->count - k : 4;
            for (int lane = 0; lane < 4; lane++) {
                const Job *job = &pending->jobs[k + (lane < lanes ? lane : 0)];
                memcpy(blocks[lane], pending->values.data + job->start, job->len);
                memset(blocks[lane] + job->len, 0, BLOCK - job->len);
                from[lane] = blocks[lane];
                t0[lane] = self->keyed.t[0] + job->len;
            }
            compress_x4(self->keyed.h, from, t0, self->keyed.t[1], out);
            for (int lane = 0; lane < lanes; lane++) write_hex(out[lane], b->data + pending->jobs[k + lane].at);
        }
    }
#endif
    for (; k < pending->count; k++) {
        const Job *job = &pending->jobs[k];
        digest_into(self, pending->values.data + job->start, job->len, b->data + job->at);
    }
    pending->count = 0;
}

static PyObject *hex_digest(DigesterObject *self, const char *data, size_t len) {
    PyObject *text = PyUnicode_New(PREFIX_LEN + 2 * OUT_BYTES, 127);
    if (text == NULL) return NULL;
    digest_into(self, data, len, (char *)PyUnicode_1BYTE_DATA(text));
    return text;
}

/* The value's JSON into `b`: 1 when written here, 0 when `encode` must do it, -1 on an error. */
static int encode_here(PyObject *value, Bytes *b) {
    if (PyUnicode_CheckExact(value)) {
        Py_ssize_t size;
        const char *utf8 = PyUnicode_AsUTF8AndSize(value, &size);
        if (utf8 == NULL) { /* surrogates: orjson refuses them, with its own error */
            PyErr_Clear();
            return 0;
        }
        return json_string(b, utf8, size) < 0 ? -1 : 1;
    }
    if (value == Py_True || value == Py_False || value == Py_None) {
        const char *word = value == Py_True ? "true" : value == Py_False ? "false" : "null";
        return put(b, word, strlen(word)) < 0 ? -1 : 1;
    }
    if (PyLong_CheckExact(value)) {
        int overflow = 0;
        long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (overflow != 0 || (number == -1 && PyErr_Occurred())) { /* past int64: orjson takes u64 or refuses */
            PyErr_Clear();
            return 0;
        }
        return put_decimal(b, number) < 0 ? -1 : 1;
    }
    return 0;
}

/* The digest of a value's canonical JSON, written to `dst`; -1 (an exception set) when it has none. */
static int digest_value_into(DigesterObject *self, PyObject *value, char *dst) {
    Bytes b;
    bytes_init(&b);
    int here = encode_here(value, &b);
    int failed = here < 0 ? -1 : 0;
    if (here == 1) {
        digest_into(self, b.data, b.len, dst);
    } else if (here == 0) {
        PyObject *encoded = PyObject_CallOneArg(self->encode, value);
        if (encoded == NULL) {
            failed = -1;
        } else if (!PyBytes_Check(encoded)) {
            PyErr_SetString(PyExc_TypeError, "encode must return bytes");
            failed = -1;
        } else {
            digest_into(self, PyBytes_AS_STRING(encoded), (size_t)PyBytes_GET_SIZE(encoded), dst);
        }
        Py_XDECREF(encoded);
    }
    bytes_free(&b);
    return failed;
}

static PyObject *digest_value(DigesterObject *self, PyObject *value) {
    PyObject *text = PyUnicode_New(PREFIX_LEN + 2 * OUT_BYTES, 127);
    if (text == NULL) return NULL;
    if (digest_value_into(self, value, (char *)PyUnicode_1BYTE_DATA(text)) < 0) {
        Py_DECREF(text);
        return NULL;
    }
    return text;
}

static int Digester_init(DigesterObject *self, PyObject *args, PyObject *kwargs) {
    static char *names[] = {"key", "encode", NULL};
    Py_buffer key;
    PyObject *encode;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*O:Digester", names, &key, &encode)) return -1;
    if (key.len < 1 || key.len > 64) {
        PyBuffer_Release(&key);
        PyErr_SetString(PyExc_ValueError, "a BLAKE2b key is 1 to 64 bytes");
        return -1;
    }
    Blake2b *s = &self->keyed;
    memcpy(s->h, IV, sizeof IV);
    s->h[0] ^= 0x01010000ULL ^ ((uint64_t)key.len << 8) ^ OUT_BYTES; /* fanout 1, depth 1, key length, 32 bytes */
    s->t[0] = s->t[1] = 0;
    memset(s->buf, 0, BLOCK);
    memcpy(s->buf, key.buf, (size_t)key.len);
    PyBuffer_Release(&key);
    s->filled = BLOCK;
    self->empty = *s;
    count(s, BLOCK); /* the key block, padded to a whole block, compressed once: not the last before any input */
    compress(s, s->buf, 0);
    s->filled = 0;
    Py_INCREF(encode);
    Py_XSETREF(self->encode, encode);
    return 0;
}

static void Digester_dealloc(DigesterObject *self) {
    Py_XDECREF(self->encode);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Whether __init__ ran (set its key and `encode`): an object made by __new__ alone is refused, not used. */
static int ready(DigesterObject *self) {
    if (self->encode != NULL) return 1;
    PyErr_SetString(PyExc_RuntimeError, "Digester used before __init__");
    return 0;
}

static PyObject *Digester_digest(DigesterObject *self, PyObject *value) {
    return ready(self) ? digest_value(self, value) : NULL;
}

static PyObject *Digester_digest_bytes(DigesterObject *self, PyObject *arg) {
    if (!ready(self)) return NULL;
    Py_buffer data;
    if (PyObject_GetBuffer(arg, &data, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *result = hex_digest(self, data.buf, (size_t)data.len);
    PyBuffer_Release(&data);
    return result;
}

/* digest_arguments(arguments, limit, max_text) -> {name[:max_text]: digest} for the first `limit` items. */
static PyObject *Digester_digest_arguments(DigesterObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!ready(self)) return NULL;
    if (nargs != 3 || !PyDict_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "digest_arguments(arguments: dict, limit: int, max_text: int)");
        return NULL;
    }
    Py_ssize_t limit = PyLong_AsSsize_t(args[1]);
    Py_ssize_t max_text = PyLong_AsSsize_t(args[2]);
    if ((limit == -1 || max_text == -1) && PyErr_Occurred()) return NULL;
    PyObject *found = PyDict_New();
    if (found == NULL) return NULL;
    PyObject *name, *value;
    Py_ssize_t position = 0, seen = 0;
    while (seen < limit && PyDict_Next(args[0], &position, &name, &value)) {
        seen++;
        PyObject *digest = digest_value(self, value);
        if (digest == NULL) goto error;
        PyObject *shown;
        if (PyUnicode_Check(name) && PyUnicode_GET_LENGTH(name) > max_text) {
            shown = PyUnicode_Substring(name, 0, max_text);
        } else {
            shown = Py_NewRef(name);
        }
        if (shown == NULL) {
            Py_DECREF(digest);
            goto error;
        }
        int failed = PyDict_SetItem(found, shown, digest);
        Py_DECREF(shown);
        Py_DECREF(digest);
        if (failed < 0) goto error;
    }
    return found;
error:
    Py_DECREF(found);
    return NULL;
}

/* ---- A whole line, for the common case (record.py's LineBuilder decides when; the rest is Python's) ---- */

static PyObject *S_call_id, *S_conversation_id, *S_tool, *S_model, *S_arguments, *S_customer_id, *S_tenant;
static PyObject *S_decision, *S_mode, *S_value_, *S_downgraded, *S_policy_version, *S_readings_used, *S_snapshot;
static PyObject *S_name, *S_version;

#define PUT(b, literal) put((b), (literal), sizeof(literal) - 1)

/* A str as JSON, cut to `max_text` code points first (as Python's [:max_text] cuts). */
static int put_text(Bytes *b, PyObject *text, Py_ssize_t max_text) {
    if (!PyUnicode_Check(text)) {
        PyErr_SetString(PyExc_TypeError, "a line's text field is not a str");
        return -1;
    }
    PyObject *cut = PyUnicode_GET_LENGTH(text) > max_text ? PyUnicode_Substring(text, 0, max_text) : Py_NewRef(text);
    if (cut == NULL) return -1;
    Py_ssize_t size;
    const char *utf8 = PyUnicode_AsUTF8AndSize(cut, &size);
    int failed = utf8 == NULL ? -1 : json_string(b, utf8, size);
    Py_DECREF(cut);
    return failed;
}

static int put_attr_text(Bytes *b, PyObject *of, PyObject *name, Py_ssize_t max_text) {
    PyObject *text = PyObject_GetAttr(of, name);
    if (text == NULL) return -1;
    int failed = put_text(b, text, max_text);
    Py_DECREF(text);
    return failed;
}

/* `nanoseconds`, cut to whole `per_unit`s (10**-places seconds), as a JSON number of seconds with exactly
   `places` decimals: integers in, digits out (the shortest repr of a double took more instructions than the
   rest of the line's fixed fields together). */
static int put_fixed(Bytes *b, PyObject *nanoseconds, long long per_unit, long long scale, int places) {
    long long units = PyLong_AsLongLong(nanoseconds);
    if (units == -1 && PyErr_Occurred()) return -1;
    units /= per_unit;
    unsigned long long magnitude = units < 0 ? 0ULL - (unsigned long long)units : (unsigned long long)units;
    char text[48];
    char *end = text + sizeof text;
    char *start = digits_before(end, magnitude % (unsigned long long)scale, places);
    *--start = '.';
    start = digits_before(start, magnitude / (unsigned long long)scale, 1);
    if (units < 0) *--start = '-';
    return put(b, start, (size_t)(end - start));
}

static int put_int(Bytes *b, PyObject *number) {
    long long value = PyLong_AsLongLong(number);
    if (value == -1 && PyErr_Occurred()) return -1;
    return put_decimal(b, value);
}

static int put_bytes_object(Bytes *b, PyObject *fragment) {
    if (!PyBytes_Check(fragment)) {
        PyErr_SetString(PyExc_TypeError, "a line's fragment is not bytes");
        return -1;
    }
    return put(b, PyBytes_AS_STRING(fragment), (size_t)PyBytes_GET_SIZE(fragment));
}

/* An enum member's value (a str) as JSON: `_value_`, the member's own attribute. */
static int put_enum(Bytes *b, PyObject *of, PyObject *name) {
    PyObject *member = PyObject_GetAttr(of, name);
    if (member == NULL) return -1;
    PyObject *value = PyObject_GetAttr(member, S_value_);
    Py_DECREF(member);
    if (value == NULL) return -1;
    int failed = put_text(b, value, PY_SSIZE_T_MAX);
    Py_DECREF(value);
    return failed;
}

/* A value's digest as a JSON string in the line: its place kept and the digest made with the line's others
   (run_jobs) when the value's JSON is one block or less, else made now. */
static int put_digest(DigesterObject *self, Bytes *b, PyObject *value, Pending *pending) {
    size_t width = PREFIX_LEN + 2 * OUT_BYTES;
    if (bytes_reserve(b, width + 2) < 0) return -1;
    size_t start = pending->values.len;
    int here = encode_here(value, &pending->values);
    if (here < 0) return -1;
    size_t len = pending->values.len - start;
    if (here == 1 && len > 0 && len <= BLOCK && pending->count < MAX_JOBS) {
        pending->jobs[pending->count++] = (Job){b->len + 1, start, len};
    } else if (here == 1) {
        digest_into(self, pending->values.data + start, len, b->data + b->len + 1);
        pending->values.len = start;
    } else if (digest_value_into(self, value, b->data + b->len + 1) < 0) { /* encoded by `encode` */
        return -1;
    }
    b->data[b->len] = '"';
    b->data[b->len + width + 1] = '"';
    b->len += width + 2;
    return 0;
}

static int put_sets(Bytes *b, PyObject *verdict) {
    PyObject *readings = PyObject_GetAttr(verdict, S_readings_used);
    if (readings == NULL) return -1;
    PyObject *items = PySequence_Fast(readings, "readings_used is not a sequence");
    Py_DECREF(readings);
    if (items == NULL) return -1;
    int failed = PUT(b, "{");
    Py_ssize_t count = PySequence_Fast_GET_SIZE(items);
    for (Py_ssize_t i = 0; i < count && failed == 0; i++) {
        PyObject *snapshot = PyObject_GetAttr(PySequence_Fast_GET_ITEM(items, i), S_snapshot);
        if (snapshot == NULL) {
            failed = -1;
            break;
        }
        PyObject *name = PyObject_GetAttr(snapshot, S_name);
        PyObject *version = name == NULL ? NULL : PyObject_GetAttr(snapshot, S_version);
        if (version == NULL) {
            failed = -1;
        } else {
            failed = (i > 0 ? PUT(b, ",") : 0) || put_text(b, name, PY_SSIZE_T_MAX) || PUT(b, ":") ||
                     put_int(b, version);
        }
        Py_XDECREF(name);
        Py_XDECREF(version);
        Py_DECREF(snapshot);
    }
    Py_DECREF(items);
    return failed || PUT(b, "}");
}

/* compose(at_ns, call, verdict, latency_ns, head, problems, skipped, hash_arguments, hash_session, extra,
   max_text) -> the line's bytes, newline included. `at_ns` is the epoch and `latency_ns` the verdict's time,
   in nanoseconds (ints): written as seconds with 6 and 9 decimals. `head` is `"mode_source":...,"overrides":[...]`, `problems` and
   `skipped` are JSON arrays and `extra` is `,"key":value...` or empty, all made by Python. With
   `hash_arguments`, each of call.arguments' values (a dict; the caller checked its size) is digested here. */
static PyObject *Digester_compose(DigesterObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!ready(self)) return NULL;
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "compose takes 11 arguments");
        return NULL;
    }
    Py_ssize_t max_text = PyLong_AsSsize_t(args[10]);
    if (PyErr_Occurred()) return NULL;
    PyObject *call = args[1], *verdict = args[2];
    int hash_arguments = PyObject_IsTrue(args[7]), hash_session = PyObject_IsTrue(args[8]);
    Bytes b;
    bytes_init(&b);
    Pending pending;
    pending.count = 0;
    bytes_init(&pending.values);
    PyObject *downgraded = NULL, *arguments = NULL, *customer = NULL, *tenant = NULL, *result = NULL;
    int failed = PUT(&b, "{\"ts\":") || put_fixed(&b, args[0], 1000, 1000000, 6) || PUT(&b, ",\"call_id\":") ||
                 put_attr_text(&b, call, S_call_id, max_text) || PUT(&b, ",\"conversation_id\":") ||
                 put_attr_text(&b, call, S_conversation_id, max_text) || PUT(&b, ",\"tool\":") ||
                 put_attr_text(&b, call, S_tool, max_text) || PUT(&b, ",\"model\":") ||
                 put_attr_text(&b, call, S_model, max_text) || PUT(&b, ",\"decision\":") ||
                 put_enum(&b, verdict, S_decision) || PUT(&b, ",\"mode\":") || put_enum(&b, verdict, S_mode) ||
                 PUT(&b, ",") || put_bytes_object(&b, args[4]);
    if (failed) goto done;
    downgraded = PyObject_GetAttr(verdict, S_downgraded);
    if (downgraded == NULL) goto done;
    failed = PUT(&b, ",\"downgraded_by_staleness\":") ||
             (downgraded == Py_True ? PUT(&b, "true") : PUT(&b, "false")) || PUT(&b, ",\"problems\":") ||
             put_bytes_object(&b, args[5]) || PUT(&b, ",\"skipped\":") || put_bytes_object(&b, args[6]) ||
             PUT(&b, ",\"policy_version\":") || put_attr_text(&b, verdict, S_policy_version, PY_SSIZE_T_MAX) ||
             PUT(&b, ",\"sets\":") || put_sets(&b, verdict) || PUT(&b, ",\"latency_seconds\":") ||
             put_fixed(&b, args[3], 1, 1000000000, 9);
    if (failed) goto done;
    if (hash_arguments) {
        arguments = PyObject_GetAttr(call, S_arguments);
        if (arguments == NULL) goto done;
        if (!PyDict_Check(arguments)) {
            PyErr_SetString(PyExc_TypeError, "hash_arguments needs the arguments as a dict");
            goto done;
        }
        if (PUT(&b, ",\"arguments\":{")) goto done;
        PyObject *name, *value;
        Py_ssize_t position = 0, seen = 0;
        while (PyDict_Next(arguments, &position, &name, &value)) {
            if ((seen++ > 0 && PUT(&b, ",")) || put_text(&b, name, max_text) || PUT(&b, ":") ||
                put_digest(self, &b, value, &pending))
                goto done;
        }
        if (PUT(&b, "}")) goto done;
    }
    if (hash_session) {
        customer = PyObject_GetAttr(call, S_customer_id);
        tenant = customer == NULL ? NULL : PyObject_GetAttr(call, S_tenant);
        if (tenant == NULL) goto done;
        int has_customer = PyObject_IsTrue(customer), has_tenant = PyObject_IsTrue(tenant);
        if (has_customer || has_tenant) {
            if (PUT(&b, ",\"session\":{")) goto done;
            if (has_customer && (PUT(&b, "\"customer_id\":") || put_digest(self, &b, customer, &pending))) goto done;
            if (has_tenant && ((has_customer && PUT(&b, ",")) || PUT(&b, "\"tenant\":") ||
                               put_digest(self, &b, tenant, &pending)))
                goto done;
            if (PUT(&b, "}")) goto done;
        }
    }
    if (put_bytes_object(&b, args[9]) || PUT(&b, "}\n")) goto done;
    run_jobs(self, &pending, &b);
    result = PyBytes_FromStringAndSize(b.data, (Py_ssize_t)b.len);
done:
    Py_XDECREF(downgraded);
    Py_XDECREF(arguments);
    Py_XDECREF(customer);
    Py_XDECREF(tenant);
    bytes_free(&b);
    bytes_free(&pending.values);
    return result;
}

static PyMethodDef Digester_methods[] = {
    {"digest", (PyCFunction)Digester_digest, METH_O, "The digest of a value (its compact, sorted-key JSON)."},
    {"digest_bytes", (PyCFunction)Digester_digest_bytes, METH_O, "The digest of bytes as they are."},
    {"compose", (PyCFunction)(void (*)(void))Digester_compose, METH_FASTCALL,
     "compose(at_ns, call, verdict, latency_ns, head, problems, skipped, hash_arguments, hash_session, extra, "
     "max_text)"},
    {"digest_arguments", (PyCFunction)(void (*)(void))Digester_digest_arguments, METH_FASTCALL,
     "digest_arguments(arguments, limit, max_text): the first `limit` arguments' names (cut) to their digests."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject DigesterType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "argwatch.server.decisions._digest.Digester",
    .tp_basicsize = sizeof(DigesterObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Digester(key, encode): keyed BLAKE2b-256 digests of values, as 'blake2b-256:<hex>'.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Digester_init,
    .tp_dealloc = (destructor)Digester_dealloc,
    .tp_methods = Digester_methods,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_digest",
    .m_doc = "Keyed BLAKE2b-256 digests of argument values, in C.",
    .m_size = -1,
};

static int intern_names(void) {
#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return -1
    INTERN(S_call_id, "call_id");
    INTERN(S_conversation_id, "conversation_id");
    INTERN(S_tool, "tool");
    INTERN(S_model, "model");
    INTERN(S_arguments, "arguments");
    INTERN(S_customer_id, "customer_id");
    INTERN(S_tenant, "tenant");
    INTERN(S_decision, "decision");
    INTERN(S_mode, "mode");
    INTERN(S_value_, "_value_");
    INTERN(S_downgraded, "downgraded_by_staleness");
    INTERN(S_policy_version, "policy_version");
    INTERN(S_readings_used, "readings_used");
    INTERN(S_snapshot, "snapshot");
    INTERN(S_name, "name");
    INTERN(S_version, "version");
#undef INTERN
    return 0;
}

PyMODINIT_FUNC PyInit__digest(void) {
    fill_hex_pairs();
#if HAVE_X4
    __builtin_cpu_init();
    use_x4 = __builtin_cpu_supports("avx2");
#endif
    if (intern_names() < 0) return NULL;
    if (PyType_Ready(&DigesterType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Digester", (PyObject *)&DigesterType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
