/* Spans as OTLP protobuf bytes in one native call each: a span (otlp_encoding.span, byte for byte), a judged
   call's span from its fields (with traced_gateway.verdict_attributes' attributes), and an export request of
   many; and the caller's traceparent read (trace_context.parse_parent's reading).

   Every traced call's span is encoded; in Python (a few byte strings joined per attribute, a field per span
   in the request) that cost more than the whole per-call budget of tracing (docs/performance.md, tracing.py).
   The Python functions stay the definitions: the tests compare what this writes with them, and parse both
   with opentelemetry-proto's own messages. Attribute values are str, bool, int (int64), float, or a list or
   tuple of those, as OpenTelemetry's AttributeValue allows; anything else raises TypeError. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../native/bytes.h"

/* A protobuf varint into `out` (ten bytes at most); returns its length. A negative int64 is passed as its
   64-bit two's complement (ten bytes). */
static size_t varint_into(uint8_t *out, uint64_t value) {
    size_t n = 0;
    while (value > 0x7F) {
        out[n++] = (uint8_t)((value & 0x7F) | 0x80);
        value >>= 7;
    }
    out[n++] = (uint8_t)value;
    return n;
}

static size_t varint_size(uint64_t value) {
    size_t n = 1;
    while (value > 0x7F) {
        value >>= 7;
        n++;
    }
    return n;
}

static int put_varint(Bytes *b, uint64_t value) {
    uint8_t out[10];
    return put(b, out, varint_into(out, value));
}

/* A length-delimited field: its tag, the length, the payload. */
static int put_field(Bytes *b, unsigned number, const char *payload, size_t len) {
    return put_varint(b, (uint64_t)number << 3 | 2) || put_varint(b, len) || put(b, payload, len);
}

/* The payload written from `mark` on becomes field `number`'s: the tag and length put in front of it. */
static int wrap(Bytes *b, size_t mark, unsigned number) {
    size_t len = b->len - mark;
    uint8_t head[20];
    size_t n = varint_into(head, (uint64_t)number << 3 | 2);
    n += varint_into(head + n, len);
    if (bytes_reserve(b, n) < 0) return -1;
    memmove(b->data + mark + n, b->data + mark, len);
    memcpy(b->data + mark, head, n);
    b->len += n;
    return 0;
}

static int put_text_field(Bytes *b, unsigned number, PyObject *text) {
    Py_ssize_t size;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &size); /* surrogates raise, as str.encode() does */
    if (utf8 == NULL) return -1;
    return put_field(b, number, utf8, (size_t)size);
}

/* An AnyValue's fields (without its own tag). */
static int put_any_value(Bytes *b, PyObject *value, int depth) {
    if (PyUnicode_Check(value)) return put_text_field(b, 1, value);
    if (PyBool_Check(value)) return put(b, value == Py_True ? "\x10\x01" : "\x10\x00", 2);
    if (PyLong_Check(value)) {
        long long number = PyLong_AsLongLong(value);
        if (number == -1 && PyErr_Occurred()) return -1;
        return put(b, "\x18", 1) || put_varint(b, (uint64_t)number);
    }
    if (PyFloat_Check(value)) {
        double number = PyFloat_AS_DOUBLE(value);
        uint64_t bits;
        memcpy(&bits, &number, 8);
        uint8_t out[9] = {0x21};
        for (int i = 0; i < 8; i++) out[1 + i] = (uint8_t)(bits >> (8 * i)); /* fixed64: little-endian */
        return put(b, out, 9);
    }
    if ((PyList_Check(value) || PyTuple_Check(value)) && depth == 0) { /* an ArrayValue of plain values */
        size_t array = b->len;
        Py_ssize_t count = PySequence_Fast_GET_SIZE(value);
        PyObject **items = PySequence_Fast_ITEMS(value);
        for (Py_ssize_t i = 0; i < count; i++) {
            size_t item = b->len;
            if (put_any_value(b, items[i], depth + 1) || wrap(b, item, 1)) return -1;
        }
        return wrap(b, array, 5);
    }
    PyErr_Format(PyExc_TypeError, "an attribute value of type %.100s", Py_TYPE(value)->tp_name);
    return -1;
}

/* Each attribute as a KeyValue in field `number`. */
static int put_attributes(Bytes *b, PyObject *found, unsigned number) {
    if (!PyDict_Check(found)) {
        PyErr_SetString(PyExc_TypeError, "attributes must be a dict");
        return -1;
    }
    PyObject *key, *value;
    Py_ssize_t position = 0;
    while (PyDict_Next(found, &position, &key, &value)) {
        if (!PyUnicode_Check(key)) {
            PyErr_SetString(PyExc_TypeError, "an attribute key must be a str");
            return -1;
        }
        size_t pair = b->len;
        if (put_text_field(b, 1, key)) return -1;
        size_t any = b->len;
        if (put_any_value(b, value, 0) || wrap(b, any, 2) || wrap(b, pair, number)) return -1;
    }
    return 0;
}

static int put_bytes_field(Bytes *b, unsigned number, PyObject *data) {
    if (!PyBytes_Check(data)) {
        PyErr_SetString(PyExc_TypeError, "ids and the head must be bytes");
        return -1;
    }
    return put_field(b, number, PyBytes_AS_STRING(data), (size_t)PyBytes_GET_SIZE(data));
}

static int put_fixed64(Bytes *b, uint8_t tag, PyObject *number) {
    unsigned long long value = PyLong_AsUnsignedLongLong(number);
    if (value == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    uint8_t out[9] = {tag};
    for (int i = 0; i < 8; i++) out[1 + i] = (uint8_t)(value >> (8 * i));
    return put(b, out, 9);
}

/* span(head, trace_id, span_id, parent_span_id, trace_state, start_ns, end_ns, own, error) -> bytes:
   otlp_encoding.span without `repeated` (nothing is worth keeping when an attribute costs this little). */
static PyObject *span(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "span takes 9 arguments");
        return NULL;
    }
    PyObject *head = args[0], *trace_state = args[4], *error = args[8];
    if (!PyBytes_Check(head) || !PyUnicode_Check(trace_state) || !PyUnicode_Check(error)) {
        PyErr_SetString(PyExc_TypeError, "span(head: bytes, ..., trace_state: str, ..., error: str)");
        return NULL;
    }
    Bytes b;
    bytes_init(&b);
    PyObject *result = NULL;
    if (put_bytes_field(&b, 1, args[1]) || put_bytes_field(&b, 2, args[2])) goto done;
    if (PyUnicode_GET_LENGTH(trace_state) > 0 && put_text_field(&b, 3, trace_state)) goto done;
    if (!PyBytes_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "ids and the head must be bytes");
        goto done;
    }
    if (PyBytes_GET_SIZE(args[3]) > 0 && put_bytes_field(&b, 4, args[3])) goto done;
    if (put(&b, PyBytes_AS_STRING(head), (size_t)PyBytes_GET_SIZE(head)) || put_fixed64(&b, 0x39, args[5]) ||
        put_fixed64(&b, 0x41, args[6]) || put_attributes(&b, args[7], 9))
        goto done;
    if (PyUnicode_GET_LENGTH(error) > 0) {
        size_t status = b.len;
        if (put_text_field(&b, 2, error) || put(&b, "\x18\x02", 2) || wrap(&b, status, 15)) goto done;
    }
    result = PyBytes_FromStringAndSize(b.data, (Py_ssize_t)b.len);
done:
    bytes_free(&b);
    return result;
}

/* A character's hex digit: 0-15 for 0-9 and a-f, 16-31 (the digit plus 16) for A-F, -1 for anything else.
   Filled at import; read through hex_digit, which takes any character. */
static int8_t HEX_DIGITS[256];

static void fill_hex_digits(void) {
    memset(HEX_DIGITS, -1, sizeof HEX_DIGITS);
    for (int i = 0; i < 10; i++) HEX_DIGITS['0' + i] = (int8_t)i;
    for (int i = 0; i < 6; i++) {
        HEX_DIGITS['a' + i] = (int8_t)(10 + i);
        HEX_DIGITS['A' + i] = (int8_t)(26 + i);
    }
}

static inline int hex_digit(Py_UCS4 c) { return c < 256 ? HEX_DIGITS[c] : -1; }

/* One attribute of a judged call's span, its sizes reckoned before anything is written: the key, and its
   AnyValue as a head (tag, and length or number) and a body (a str's UTF-8, or an ArrayValue written apart). */
typedef struct {
    const char *key;
    size_t key_size;
    uint8_t head[11];
    size_t head_size;
    const char *body;
    size_t body_size;
    PyObject *owned; /* a cut str, released when the span is written */
} Attribute;

/* `value` as attribute `key`: a str, cut to `cut` characters when cut >= 0 as text[:cut] cuts it; an int; or
   the span's one list (the problem codes), whose ArrayValue is already written in `array`. Returns -1 with an
   exception set. */
static int attribute(Attribute *a, const char *key, PyObject *value, Py_ssize_t cut, const Bytes *array) {
    a->key = key;
    a->key_size = strlen(key);
    a->owned = NULL;
    a->body = ""; /* an int's body: nothing (memcpy's source is never NULL) */
    a->body_size = 0;
    if (PyList_Check(value) || PyTuple_Check(value)) {
        a->head_size = 0;
        a->body = array->data;
        a->body_size = array->len;
        return 0;
    }
    if (PyUnicode_Check(value)) {
        if (cut >= 0 && PyUnicode_GET_LENGTH(value) > cut) {
            a->owned = value = PyUnicode_Substring(value, 0, cut);
            if (value == NULL) return -1;
        }
        Py_ssize_t size;
        a->body = PyUnicode_AsUTF8AndSize(value, &size); /* surrogates raise, as str.encode() does */
        if (a->body == NULL) return -1;
        a->body_size = (size_t)size;
        a->head[0] = 1 << 3 | 2;
        a->head_size = 1 + varint_into(a->head + 1, a->body_size);
        return 0;
    }
    if (!PyLong_Check(value) || PyBool_Check(value)) {
        PyErr_Format(PyExc_TypeError, "%s must be a str or an int", key);
        return -1;
    }
    long long number = PyLong_AsLongLong(value);
    if (number == -1 && PyErr_Occurred()) return -1;
    a->head[0] = 3 << 3;
    a->head_size = 1 + varint_into(a->head + 1, (uint64_t)number);
    return 0;
}

static size_t attribute_size(const Attribute *a) {
    size_t any = a->head_size + a->body_size;
    size_t pair = 1 + varint_size(a->key_size) + a->key_size + 1 + varint_size(any) + any;
    return 1 + varint_size(pair) + pair;
}

static uint8_t *write_bytes(uint8_t *out, const void *data, size_t size) {
    memcpy(out, data, size);
    return out + size;
}

static uint8_t *write_length(uint8_t *out, uint8_t tag, size_t size) {
    *out++ = tag;
    return out + varint_into(out, size);
}

static uint8_t *write_attribute(uint8_t *out, const Attribute *a) {
    size_t any = a->head_size + a->body_size;
    size_t pair = 1 + varint_size(a->key_size) + a->key_size + 1 + varint_size(any) + any;
    out = write_length(out, 9 << 3 | 2, pair);
    out = write_bytes(write_length(out, 1 << 3 | 2, a->key_size), a->key, a->key_size);
    out = write_bytes(write_length(out, 2 << 3 | 2, any), a->head, a->head_size);
    return write_bytes(out, a->body, a->body_size);
}

/* `hex` (2 * count hex digits, either case) into `out`; -1 with ValueError when it is not that. */
static int hex_id(uint8_t *out, PyObject *hex, Py_ssize_t count) {
    if (!PyUnicode_Check(hex) || PyUnicode_GET_LENGTH(hex) != 2 * count ||
        PyUnicode_KIND(hex) != PyUnicode_1BYTE_KIND) {
        PyErr_Format(PyExc_ValueError, "an id must be %zd hex digits", 2 * count);
        return -1;
    }
    const Py_UCS1 *digits = PyUnicode_1BYTE_DATA(hex);
    int bad = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        int high = HEX_DIGITS[digits[2 * i]], low = HEX_DIGITS[digits[2 * i + 1]];
        bad |= high | low; /* negative when either is not a digit */
        out[i] = (uint8_t)((high & 15) << 4 | (low & 15));
    }
    if (bad < 0) {
        PyErr_SetString(PyExc_ValueError, "an id must be hex digits");
        return -1;
    }
    return 0;
}

static int is_empty(PyObject *value) {
    return (PyUnicode_Check(value) && PyUnicode_GET_LENGTH(value) == 0) ||
           ((PyList_Check(value) || PyTuple_Check(value)) && PySequence_Fast_GET_SIZE(value) == 0);
}

/* An int in [0, 2**64) as a uint64, as PyLong_AsUnsignedLongLong reads it (OverflowError outside). On 3.11 and
   3.12 without the byte array that function goes through for every int past 2**30; their private functions
   for the sign and the width are not in later versions' headers, which take the public path. */
static int fixed64(PyObject *number, uint64_t *out) {
    if (!PyLong_Check(number)) {
        PyErr_SetString(PyExc_TypeError, "an id or a time must be an int");
        return -1;
    }
#if PY_VERSION_HEX < 0x030D0000
    if (_PyLong_Sign(number) < 0 || _PyLong_NumBits(number) > 64) {
        PyErr_SetString(PyExc_OverflowError, "an id or a time must be in [0, 2**64)");
        return -1;
    }
    *out = PyLong_AsUnsignedLongLongMask(number);
    return 0;
#else
    *out = PyLong_AsUnsignedLongLong(number);
    return *out == (uint64_t)-1 && PyErr_Occurred() ? -1 : 0;
#endif
}

/* verdict_span(head, trace_id, span_id, parent_span_id, trace_state, start_ns, end_ns, call_id, conversation_id,
   tool, model, decision, mode, problem_count, problem_codes, policy_version, max_text) -> bytes: the span of
   one judged call, as otlp_encoding.span writes it with traced_gateway.verdict_attributes' attributes (the
   definitions: a test compares the two), from the call's and the verdict's fields rather than a dict made for
   it. The ids are hex (the trace's 32 digits, the parent's 16 or None), the span's own an int. Every size is
   reckoned first and the bytes written once, into the result. Encoded on the event loop in this one call, a
   span is queued as bytes: a queued object that held the call and the verdict cost more, in its making and
   in the garbage collector's passes over it, than the encoding does. */
static PyObject *verdict_span(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 17 || !PyBytes_Check(args[0]) || !PyUnicode_Check(args[4]) || !PyLong_Check(args[16])) {
        PyErr_SetString(PyExc_TypeError, "verdict_span takes 17 arguments (head: bytes, ..., max_text: int)");
        return NULL;
    }
    Py_ssize_t cut = PyLong_AsSsize_t(args[16]);
    if (cut < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "max_text must not be negative");
        return NULL;
    }
    uint8_t trace_id[16], parent_id[8];
    uint64_t span_id, start, end;
    int parent = args[3] != Py_None;
    if (hex_id(trace_id, args[1], 16) || (parent && hex_id(parent_id, args[3], 8)) || fixed64(args[2], &span_id) ||
        fixed64(args[5], &start) || fixed64(args[6], &end))
        return NULL;
    Py_ssize_t state_size = 0;
    const char *state = PyUnicode_AsUTF8AndSize(args[4], &state_size);
    if (state == NULL) return NULL;

    /* verdict_attributes' attributes, in its order; those it leaves out when empty, left out. */
    Attribute found[9];
    int count = 0, failed = 0;
    Bytes array;
    bytes_init(&array);
    static const struct {
        const char *key;
        int arg, cut, optional;
    } named[9] = {
        {"gen_ai.tool.call.id", 7, 1, 0},    {"gen_ai.conversation.id", 8, 1, 1},
        {"gen_ai.tool.name", 9, 1, 0},       {"gen_ai.request.model", 10, 1, 1},
        {"argwatch.decision", 11, 0, 0},     {"argwatch.mode", 12, 0, 0},
        {"argwatch.problem_count", 13, 0, 0}, {"argwatch.problem_codes", 14, 0, 1},
        {"argwatch.policy_version", 15, 0, 0},
    };
    /* The array is written before any attribute points into it: only the problem codes (the one list) make
       one, and its buffer must not move once an attribute holds its address. */
    if (!is_empty(args[14]) && put_any_value(&array, args[14], 0)) failed = 1;
    for (int i = 0; i < 9 && !failed; i++) {
        PyObject *value = args[named[i].arg];
        if (named[i].optional && is_empty(value)) continue;
        if (attribute(&found[count], named[i].key, value, named[i].cut ? cut : -1, &array)) {
            Py_XDECREF(found[count].owned);
            failed = 1;
            break;
        }
        count++;
    }
    PyObject *result = NULL;
    if (!failed) {
        size_t head = (size_t)PyBytes_GET_SIZE(args[0]);
        size_t size = 18 + 10 + (state_size > 0 ? 1 + varint_size((uint64_t)state_size) + (size_t)state_size : 0) +
                      (parent ? 10 : 0) + head + 9 + 9;
        for (int i = 0; i < count; i++) size += attribute_size(&found[i]);
        result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)size);
        if (result != NULL) {
            uint8_t *out = (uint8_t *)PyBytes_AS_STRING(result);
            out = write_bytes(write_length(out, 1 << 3 | 2, 16), trace_id, 16);
            out = write_length(out, 2 << 3 | 2, 8);
            for (int i = 0; i < 8; i++) *out++ = (uint8_t)(span_id >> (56 - 8 * i)); /* to_bytes(8, "big") */
            if (state_size > 0)
                out = write_bytes(write_length(out, 3 << 3 | 2, (size_t)state_size), state, (size_t)state_size);
            if (parent) out = write_bytes(write_length(out, 4 << 3 | 2, 8), parent_id, 8);
            out = write_bytes(out, PyBytes_AS_STRING(args[0]), head);
            *out++ = 0x39;
            for (int i = 0; i < 8; i++) *out++ = (uint8_t)(start >> (8 * i)); /* fixed64: little-endian */
            *out++ = 0x41;
            for (int i = 0; i < 8; i++) *out++ = (uint8_t)(end >> (8 * i));
            for (int i = 0; i < count; i++) out = write_attribute(out, &found[i]);
        }
    }
    for (int i = 0; i < count; i++) Py_XDECREF(found[i].owned);
    bytes_free(&array);
    return result;
}

/* export_request(resource, scope, spans) -> bytes: otlp_encoding.export_request in one pass, its size reckoned
   first (the definition joined a field per span in Python, which cost as much again as encoding the span). */
static PyObject *export_request(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 3 || !PyBytes_Check(args[0]) || !PyBytes_Check(args[1]) || !PyList_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "export_request(resource: bytes, scope: bytes, spans: list[bytes])");
        return NULL;
    }
    PyObject *spans = args[2];
    Py_ssize_t count = PyList_GET_SIZE(spans);
    uint64_t scope_spans = (uint64_t)PyBytes_GET_SIZE(args[1]);
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *one = PyList_GET_ITEM(spans, i);
        if (!PyBytes_Check(one)) {
            PyErr_SetString(PyExc_TypeError, "a span must be bytes");
            return NULL;
        }
        uint64_t size = (uint64_t)PyBytes_GET_SIZE(one);
        scope_spans += 1 + varint_size(size) + size;
    }
    uint64_t resource_spans = (uint64_t)PyBytes_GET_SIZE(args[0]) + 1 + varint_size(scope_spans) + scope_spans;
    uint64_t total = 1 + varint_size(resource_spans) + resource_spans;
    if (total > PY_SSIZE_T_MAX) return PyErr_NoMemory();
    PyObject *request = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    if (request == NULL) return NULL;
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(request);
    out = write_length(out, 1 << 3 | 2, resource_spans); /* ResourceSpans, field 1 */
    out = write_bytes(out, PyBytes_AS_STRING(args[0]), (size_t)PyBytes_GET_SIZE(args[0]));
    out = write_length(out, 2 << 3 | 2, scope_spans); /* ScopeSpans, field 2 */
    out = write_bytes(out, PyBytes_AS_STRING(args[1]), (size_t)PyBytes_GET_SIZE(args[1]));
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *one = PyList_GET_ITEM(spans, i);
        size_t size = (size_t)PyBytes_GET_SIZE(one);
        out = write_bytes(write_length(out, 2 << 3 | 2, size), PyBytes_AS_STRING(one), size); /* a Span, field 2 */
    }
    return request;
}

/* Whether `text[at:at+count]` is lowercase hex digits; `all_zero` set to whether all of them are 0. */
static int lower_hex(PyObject *text, Py_ssize_t at, Py_ssize_t count, int *all_zero) {
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    unsigned seen = 0;
    for (Py_ssize_t i = at; i < at + count; i++) {
        int digit = hex_digit(PyUnicode_READ(kind, data, i));
        if (digit < 0 || digit > 15) return 0;
        seen |= (unsigned)digit;
    }
    *all_zero = seen == 0;
    return 1;
}

/* traceparent(traceparent, tracestate, max_tracestate) -> (trace_id, span_id, sampled, trace_state) | None:
   trace_context.parse_parent's reading, which stays the definition (a test compares the two): W3C Trace
   Context level 1, surrounding whitespace allowed, a later version's extra fields ignored. The regular
   expression it replaces cost more than the rest of a span's share of the event loop. */
static PyObject *traceparent(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 3 || !PyUnicode_Check(args[0]) || !PyUnicode_Check(args[1]) || !PyLong_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "traceparent(traceparent: str, tracestate: str, max_tracestate: int)");
        return NULL;
    }
    PyObject *text = args[0];
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    Py_ssize_t size = PyUnicode_GET_LENGTH(text), at = 0;
    while (at < size && Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, at))) at++;  /* \s* */
    int zero_version, zero_trace, zero_span, zero_flags;
    if (size - at < 55 || PyUnicode_READ(kind, data, at + 2) != '-' || PyUnicode_READ(kind, data, at + 35) != '-' ||
        PyUnicode_READ(kind, data, at + 52) != '-' || !lower_hex(text, at, 2, &zero_version) ||
        !lower_hex(text, at + 3, 32, &zero_trace) || !lower_hex(text, at + 36, 16, &zero_span) ||
        !lower_hex(text, at + 53, 2, &zero_flags))
        Py_RETURN_NONE;
    /* What follows the flags: whitespace only, or "-" and anything up to a line's end, then whitespace only
       ((-.*)?\s* : the dot takes no newline). */
    Py_ssize_t tail = at + 55;
    int rest = 0;
    if (tail < size && PyUnicode_READ(kind, data, tail) == '-') {
        rest = 1;
        tail++;
        while (tail < size && PyUnicode_READ(kind, data, tail) != '\n') tail++;
    }
    for (; tail < size; tail++)
        if (!Py_UNICODE_ISSPACE(PyUnicode_READ(kind, data, tail))) Py_RETURN_NONE;
    Py_UCS4 v0 = PyUnicode_READ(kind, data, at), v1 = PyUnicode_READ(kind, data, at + 1);
    if ((v0 == 'f' && v1 == 'f') || (zero_version && rest) || zero_trace || zero_span) Py_RETURN_NONE;
    Py_UCS4 f1 = PyUnicode_READ(kind, data, at + 54);
    int sampled = (f1 >= 'a' ? f1 - 'a' + 10 : f1 - '0') & 1;
    Py_ssize_t limit = PyLong_AsSsize_t(args[2]);
    if (limit == -1 && PyErr_Occurred()) return NULL;
    PyObject *state = PyUnicode_GET_LENGTH(args[1]) <= limit ? PyObject_CallMethod(args[1], "strip", NULL)
                                                            : PyUnicode_FromStringAndSize("", 0);
    if (state == NULL) return NULL;
    PyObject *trace_id = PyUnicode_Substring(text, at + 3, at + 35);
    PyObject *span_id = PyUnicode_Substring(text, at + 36, at + 52);
    PyObject *found = NULL;
    if (trace_id != NULL && span_id != NULL)
        found = PyTuple_Pack(4, trace_id, span_id, sampled ? Py_True : Py_False, state);
    Py_XDECREF(trace_id);
    Py_XDECREF(span_id);
    Py_DECREF(state);
    return found;
}

static PyMethodDef methods[] = {
    {"span", (PyCFunction)(void (*)(void))span, METH_FASTCALL,
     "span(head, trace_id, span_id, parent_span_id, trace_state, start_ns, end_ns, own, error) -> bytes"},
    {"verdict_span", (PyCFunction)(void (*)(void))verdict_span, METH_FASTCALL,
     "verdict_span(head, trace_id, span_id, parent_span_id, trace_state, start_ns, end_ns, call_id, "
     "conversation_id, tool, model, decision, mode, problem_count, problem_codes, policy_version, max_text) -> bytes"},
    {"export_request", (PyCFunction)(void (*)(void))export_request, METH_FASTCALL,
     "export_request(resource, scope, spans) -> bytes"},
    {"traceparent", (PyCFunction)(void (*)(void))traceparent, METH_FASTCALL,
     "traceparent(traceparent, tracestate, max_tracestate) -> (trace_id, span_id, sampled, trace_state) | None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_otlp",
    .m_doc = "Spans as OTLP protobuf bytes, in C (otlp_encoding is the definition).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__otlp(void) {
    fill_hex_digits();
    return PyModule_Create(&module);
}
