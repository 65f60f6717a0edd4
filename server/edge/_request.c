/* A ValidateRequest's fields read from its bytes in one native call, for the requests every agent sends.

   Reading the fields from a parsed upb message makes a new str per read, about 1,300 instructions each; with
   the parse, a request's nine fields cost more than the verdict's membership check (docs/performance.md,
   server_instructions.py). This reads the bytes once and makes each str once.

   It takes only the plain form: each field at most once, in its declared wire type, the arguments as
   `arguments_json`, a session of customer_id and tenant, no other field, and valid UTF-8. For anything
   else (arguments_struct, a session's attributes, a repeated or unknown field, bytes that are no message)
   it returns None and the caller parses with protobuf, which stays the definition: what this reads is
   what protobuf reads, or nothing (tests/unit/test_request_reader.py compares the two on generated and
   mutated requests). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../native/request_fields.h"

static PyObject *read_validate(PyObject *module, PyObject *body) {
    (void)module;
    if (!PyBytes_Check(body)) {
        PyErr_SetString(PyExc_TypeError, "read_validate takes bytes");
        return NULL;
    }
    const uint8_t *p = (const uint8_t *)PyBytes_AS_STRING(body);
    const uint8_t *end = p + PyBytes_GET_SIZE(body);
    const uint8_t *starts[FIELDS] = {0};
    Py_ssize_t lens[FIELDS] = {0};
    int seen[FIELDS] = {0};
    if (!read_fields(p, end, starts, lens, seen)) Py_RETURN_NONE;
    PyObject *out = PyTuple_New(FIELDS);
    if (out == NULL) return NULL;
    for (int slot = 0; slot < FIELDS; slot++) {
        PyObject *value;
        if (slot == ARGUMENTS) {
            if (seen[slot]) {
                value = PyBytes_FromStringAndSize((const char *)starts[slot], lens[slot]);
            } else {
                value = Py_None;
                Py_INCREF(value);
            }
        } else {
            value = PyUnicode_DecodeUTF8((const char *)starts[slot], lens[slot], NULL);
            if (value == NULL) {
                /* Not UTF-8 (or a surrogate): protobuf says what such a request is. */
                Py_DECREF(out);
                if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) return NULL;
                PyErr_Clear();
                Py_RETURN_NONE;
            }
        }
        if (value == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, slot, value);
    }
    return out;
}

/* What read_call builds with, set once by configure(): the ToolCall type, orjson.loads and its error, and
   each string field's limit in characters. */
static PyTypeObject *call_type = NULL;
static PyObject *json_loads = NULL;
static PyObject *json_error = NULL;
static Py_ssize_t limits[FIELDS];
/* ToolCall's fields, in order: where each comes from (a slot here), or one of these. */
enum { ARGUMENTS_DECODED = -1, ARGUMENTS_ERROR = -2, RAW_ARGUMENTS = -3 };
static const int call_fields[] = {TOOL,           ARGUMENTS_DECODED, CALL_ID, CONVERSATION, CUSTOMER, TENANT,
                                  ARGUMENTS_ERROR, RAW_ARGUMENTS,     MODEL,   PROMPT_VERSION};
#define CALL_FIELDS ((Py_ssize_t)(sizeof call_fields / sizeof call_fields[0]))

static PyObject *configure(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *type, *loads, *error;
    Py_ssize_t tool, conversation, call_id, customer, tenant, model, prompt_version;
    if (!PyArg_ParseTuple(args, "O!OO(nnnnnnn)", &PyType_Type, &type, &loads, &error, &tool, &conversation,
                          &call_id, &customer, &tenant, &model, &prompt_version))
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)type, &PyTuple_Type) || ((PyTypeObject *)type)->tp_itemsize == 0) {
        PyErr_SetString(PyExc_TypeError, "configure takes a tuple type (a NamedTuple) for the call");
        return NULL;
    }
    Py_INCREF(type);
    Py_INCREF(loads);
    Py_INCREF(error);
    Py_XSETREF(call_type, (PyTypeObject *)type);
    Py_XSETREF(json_loads, loads);
    Py_XSETREF(json_error, error);
    limits[TOOL] = tool;
    limits[CONVERSATION] = conversation;
    limits[CALL_ID] = call_id;
    limits[CUSTOMER] = customer;
    limits[TENANT] = tenant;
    limits[MODEL] = model;
    limits[PROMPT_VERSION] = prompt_version;
    limits[ARGUMENTS] = PY_SSIZE_T_MAX;
    Py_RETURN_NONE;
}

/* The ToolCall for a request in the plain form whose strings are within their limits, with a call id, and
   whose arguments are a JSON object (or absent); None for any other, which the caller reads the slower way (and refuses,
   or answers with why the arguments could not be read). Built as a tuple subclass is (tuple_subtype_new):
   the NamedTuple's Python __new__, an intermediate tuple and three Python frames were a third of reading
   a request. */
static PyObject *read_call(PyObject *module, PyObject *body) {
    if (call_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "read_call before configure");
        return NULL;
    }
    PyObject *fields = read_validate(module, body);
    if (fields == NULL || fields == Py_None) return fields;
    for (int slot = 0; slot < FIELDS; slot++) {
        PyObject *value = PyTuple_GET_ITEM(fields, slot);
        Py_ssize_t length = slot == ARGUMENTS ? 0 : PyUnicode_GET_LENGTH(value);
        /* Past its limit: refused, with which (TooLong). An empty call id: the gateway mints one. */
        if (length > limits[slot] || (slot == CALL_ID && length == 0)) {
            Py_DECREF(fields);
            Py_RETURN_NONE;
        }
    }
    PyObject *raw = PyTuple_GET_ITEM(fields, ARGUMENTS);
    PyObject *decoded, *error_text;
    if (raw == Py_None) {
        decoded = PyDict_New();
        raw = PyBytes_FromStringAndSize("", 0);
    } else {
        decoded = PyObject_CallOneArg(json_loads, raw);
        if (decoded == NULL) {
            Py_DECREF(fields);
            if (!PyErr_ExceptionMatches(json_error)) return NULL;
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        if (!PyDict_CheckExact(decoded)) {
            Py_DECREF(decoded);
            Py_DECREF(fields);
            Py_RETURN_NONE;
        }
        Py_INCREF(raw);
    }
    error_text = PyUnicode_FromStringAndSize("", 0);
    PyObject *call = (decoded && raw && error_text) ? call_type->tp_alloc(call_type, CALL_FIELDS) : NULL;
    if (call == NULL) {
        Py_XDECREF(decoded);
        Py_XDECREF(raw);
        Py_XDECREF(error_text);
        Py_DECREF(fields);
        return NULL;
    }
    for (Py_ssize_t at = 0; at < CALL_FIELDS; at++) {
        PyObject *value;
        switch (call_fields[at]) {
            case ARGUMENTS_DECODED: value = decoded; break;
            case ARGUMENTS_ERROR: value = error_text; break;
            case RAW_ARGUMENTS: value = raw; break;
            default: value = Py_NewRef(PyTuple_GET_ITEM(fields, call_fields[at]));
        }
        PyTuple_SET_ITEM(call, at, value);
    }
    Py_DECREF(fields);
    return call;
}

static PyMethodDef methods[] = {
    {"read_validate", read_validate, METH_O,
     "(tool, arguments_json or None, conversation_id, call_id, customer_id, tenant, model, prompt_version) "
     "read from a ValidateRequest's bytes in their plain form; None for any other (parse it with protobuf)."},
    {"configure", configure, METH_VARARGS,
     "configure(call_type, loads, loads_error, (max tool, conversation_id, call_id, customer_id, tenant, model, "
     "prompt_version)): what read_call builds with."},
    {"read_call", read_call, METH_O,
     "The call (call_type) for a ValidateRequest's bytes in their plain form, its strings within their limits "
     "and its arguments a JSON object or absent; None for any other."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_request", NULL, -1, methods};

PyMODINIT_FUNC PyInit__request(void) { return PyModule_Create(&module); }
