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
#include <math.h>
#include <stdint.h>
#include <string.h>

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

static void compress(Blake2b *s, const uint8_t block[BLOCK], int last) {
    uint64_t m[16], v[16];
    for (int i = 0; i < 16; i++) m[i] = load64(block + 8 * i);
    for (int i = 0; i < 8; i++) {
        v[i] = s->h[i];
        v[i + 8] = IV[i];
    }
    v[12] ^= s->t[0];
    v[13] ^= s->t[1];
    if (last) v[14] = ~v[14];
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
    for (int i = 0; i < 8; i++) s->h[i] ^= v[i] ^ v[i + 8];
}

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

static void finish(Blake2b *s, uint8_t out[OUT_BYTES]) {
    count(s, s->filled);
    memset(s->buf + s->filled, 0, BLOCK - s->filled);
    compress(s, s->buf, 1);
    for (int i = 0; i < OUT_BYTES; i++) out[i] = (uint8_t)(s->h[i / 8] >> (8 * (i % 8)));
}

/* A growable byte buffer for a value's JSON, on the stack while it is short. */
typedef struct {
    char *data;
    size_t len, cap;
    char inline_[512];
} Bytes;

static void bytes_init(Bytes *b) {
    b->data = b->inline_;
    b->len = 0;
    b->cap = sizeof b->inline_;
}

static void bytes_free(Bytes *b) {
    if (b->data != b->inline_) PyMem_Free(b->data);
}

static int bytes_reserve(Bytes *b, size_t more) {
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

/* A JSON string as orjson writes one: UTF-8 as it is; `"` and `\` escaped; \b \t \n \f \r short; the other
   control characters as \u00xx (lowercase hex). */
static int json_string(Bytes *b, const char *utf8, Py_ssize_t size) {
    static const char hex[] = "0123456789abcdef";
    if (bytes_reserve(b, (size_t)size * 6 + 2) < 0) return -1;
    char *out = b->data + b->len;
    *out++ = '"';
    for (Py_ssize_t i = 0; i < size; i++) {
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
                *out++ = hex[c >> 4];
                *out++ = hex[c & 0xf];
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

/* The digest of `len` bytes as "blake2b-256:<hex>", written to `dst` (PREFIX_LEN + 64 chars). */
static void digest_into(DigesterObject *self, const char *data, size_t len, char *dst) {
    static const char hex[] = "0123456789abcdef";
    Blake2b s = len > 0 ? self->keyed : self->empty;
    uint8_t out[OUT_BYTES];
    absorb(&s, (const uint8_t *)data, len);
    finish(&s, out);
    memcpy(dst, PREFIX, PREFIX_LEN);
    for (int i = 0; i < OUT_BYTES; i++) {
        dst[PREFIX_LEN + 2 * i] = hex[out[i] >> 4];
        dst[PREFIX_LEN + 2 * i + 1] = hex[out[i] & 0xf];
    }
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
        size_t len = strlen(word);
        if (bytes_reserve(b, len) < 0) return -1;
        memcpy(b->data + b->len, word, len);
        b->len += len;
        return 1;
    }
    if (PyLong_CheckExact(value)) {
        int overflow = 0;
        long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (overflow != 0 || (number == -1 && PyErr_Occurred())) { /* past int64: orjson takes u64 or refuses */
            PyErr_Clear();
            return 0;
        }
        if (bytes_reserve(b, 24) < 0) return -1;
        b->len += (size_t)snprintf(b->data + b->len, 24, "%lld", number);
        return 1;
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

static PyObject *Digester_digest(DigesterObject *self, PyObject *value) { return digest_value(self, value); }

static PyObject *Digester_digest_bytes(DigesterObject *self, PyObject *arg) {
    Py_buffer data;
    if (PyObject_GetBuffer(arg, &data, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *result = hex_digest(self, data.buf, (size_t)data.len);
    PyBuffer_Release(&data);
    return result;
}

/* digest_arguments(arguments, limit, max_text) -> {name[:max_text]: digest} for the first `limit` items. */
static PyObject *Digester_digest_arguments(DigesterObject *self, PyObject *const *args, Py_ssize_t nargs) {
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

static int put(Bytes *b, const char *text, size_t len) {
    if (bytes_reserve(b, len) < 0) return -1;
    memcpy(b->data + b->len, text, len);
    b->len += len;
    return 0;
}

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

static int put_float(Bytes *b, double value) {
    if (!isfinite(value)) return PUT(b, "null");
    char *text = PyOS_double_to_string(value, 'r', 0, 0, NULL);
    if (text == NULL) return -1;
    int failed = put(b, text, strlen(text));
    PyMem_Free(text);
    return failed;
}

static int put_int(Bytes *b, PyObject *number) {
    long long value = PyLong_AsLongLong(number);
    if (value == -1 && PyErr_Occurred()) return -1;
    char text[24];
    int len = snprintf(text, sizeof text, "%lld", value);
    return put(b, text, (size_t)len);
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

/* A value's digest as a JSON string, written straight into the line. */
static int put_digest(DigesterObject *self, Bytes *b, PyObject *value) {
    size_t width = PREFIX_LEN + 2 * OUT_BYTES;
    if (bytes_reserve(b, width + 2) < 0) return -1;
    char *at = b->data + b->len;
    at[0] = '"';
    if (digest_value_into(self, value, at + 1) < 0) return -1;
    at[width + 1] = '"';
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

/* compose(at, call, verdict, latency, head, problems, skipped, hash_arguments, hash_session, extra, max_text)
   -> the line's bytes, newline included. `head` is `"mode_source":...,"overrides":[...]`, `problems` and
   `skipped` are JSON arrays and `extra` is `,"key":value...` or empty, all made by Python. With
   `hash_arguments`, each of call.arguments' values (a dict; the caller checked its size) is digested here. */
static PyObject *Digester_compose(DigesterObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 11) {
        PyErr_SetString(PyExc_TypeError, "compose takes 11 arguments");
        return NULL;
    }
    double at = PyFloat_AsDouble(args[0]);
    double latency = PyFloat_AsDouble(args[3]);
    Py_ssize_t max_text = PyLong_AsSsize_t(args[10]);
    if (PyErr_Occurred()) return NULL;
    PyObject *call = args[1], *verdict = args[2];
    int hash_arguments = PyObject_IsTrue(args[7]), hash_session = PyObject_IsTrue(args[8]);
    Bytes b;
    bytes_init(&b);
    PyObject *downgraded = NULL, *arguments = NULL, *customer = NULL, *tenant = NULL, *result = NULL;
    int failed = PUT(&b, "{\"ts\":") || put_float(&b, at) || PUT(&b, ",\"call_id\":") ||
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
             put_float(&b, latency);
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
                put_digest(self, &b, value))
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
            if (has_customer && (PUT(&b, "\"customer_id\":") || put_digest(self, &b, customer))) goto done;
            if (has_tenant && ((has_customer && PUT(&b, ",")) || PUT(&b, "\"tenant\":") ||
                               put_digest(self, &b, tenant)))
                goto done;
            if (PUT(&b, "}")) goto done;
        }
    }
    if (put_bytes_object(&b, args[9]) || PUT(&b, "}\n")) goto done;
    result = PyBytes_FromStringAndSize(b.data, (Py_ssize_t)b.len);
done:
    Py_XDECREF(downgraded);
    Py_XDECREF(arguments);
    Py_XDECREF(customer);
    Py_XDECREF(tenant);
    bytes_free(&b);
    return result;
}

static PyMethodDef Digester_methods[] = {
    {"digest", (PyCFunction)Digester_digest, METH_O, "The digest of a value (its compact, sorted-key JSON)."},
    {"digest_bytes", (PyCFunction)Digester_digest_bytes, METH_O, "The digest of bytes as they are."},
    {"compose", (PyCFunction)(void (*)(void))Digester_compose, METH_FASTCALL,
     "compose(at, call, verdict, latency, head, problems, skipped, hash_arguments, hash_session, extra, max_text)"},
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
