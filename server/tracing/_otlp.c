/* A span as OTLP protobuf bytes in one native call: what otlp_encoding.span writes, byte for byte; and the
   caller's traceparent read (trace_context.parse_parent's reading).

   The export thread encodes every span of every traced call; in Python (a few byte strings joined per
   attribute) that cost more than the whole per-call budget of tracing (docs/performance.md, tracing.py).
   otlp_encoding.py stays the definition: the tests compare what this writes with it, and parse both with
   opentelemetry-proto's own messages. Attribute values are str, bool, int (int64), float, or a list or tuple
   of those, as OpenTelemetry's AttributeValue allows; anything else raises TypeError. */

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

/* Whether `text[at:at+count]` is lowercase hex digits, and not all zeros when `nonzero` is asked. */
static int lower_hex(PyObject *text, Py_ssize_t at, Py_ssize_t count, int *all_zero) {
    int kind = PyUnicode_KIND(text);
    const void *data = PyUnicode_DATA(text);
    *all_zero = 1;
    for (Py_ssize_t i = at; i < at + count; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return 0;
        if (c != '0') *all_zero = 0;
    }
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
    {"traceparent", (PyCFunction)(void (*)(void))traceparent, METH_FASTCALL,
     "traceparent(traceparent, tracestate, max_tracestate) -> (trace_id, span_id, sampled, trace_state) | None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_otlp",
    .m_doc = "A span as OTLP protobuf bytes, in C (otlp_encoding.span is the definition).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__otlp(void) { return PyModule_Create(&module); }
