/* Answers, from a ValidateRequest's bytes to its response's bytes, for the calls a tool's quick verdict has
   just answered the same way: the common call judged with no Python frame (docs/performance.md).

   The checks are not defined here. validator/native_answers.py arms a tool with a plan after its quick
   verdict (validator/quick_verdict.py) passed a call, and only for a tool whose whole quick verdict is a
   membership check of top-level strings: no schema, no records or rules, no scoped set, no per-model count.
   The plan holds what that verdict read, as guards this file re-checks on every call before answering:

   - each value set's kept reading still the one handed out, at its generation, before its fresh-until time
     (set_table.SetTable.read's first branch, with the table's own monotonic clock);
   - each other thing the verdict read (the modes in force) still the same object;
   - for a call with a conversation id, no repair open that it might close (repair/tracker.py's may_be_open).

   A plan whose sets or modes have moved on is dropped when a call finds it so; the quick verdict offers each call
   it passes (offer), and a tool with no plan is armed again from it.

   Then it answers only a request in the plain form (request_fields.h) whose strings are valid UTF-8 within
   their limits, with a call id, whose arguments are a JSON object, each bound argument a str and a member of
   its set's members: read from the JSON's bytes by json_bound.h, which declines any document it does not read
   as orjson (the gateway's one JSON reader) does. Anything else, or any guard that no longer holds, is None:
   the Python path judges the call, says what is wrong, and arms the tool again. What is counted is what the
   quick verdict counts (the plan's tallies, and its signature's count when that is kept), and the answer is
   the quick verdict's prototype bytes with the call id after them (edge/wire.py); its latency is observed into
   the histogram's buckets (telemetry/_buckets.c) as the servicers observe a call the Python path judged. The tests hold
   the two paths to the same bytes and the same counts, call by call (tests/unit/test_native_answers.py). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>

#include "../native/buckets.h"
#include "../native/json_bound.h"
#include "../native/request_fields.h"

#define RECENT 64        /* plans found without a dict look-up (a power of two) */
#define RECHECK_EVERY 64 /* offers: one in this many re-checks an armed plan's guards */

/* A plan's fields, by position (native_answers.NativePlan). */
enum {
    PLAN_UNTIL,      /* float: the clock's reading before which every set's reading is fresh */
    PLAN_CLOCK,      /* the set table's monotonic clock, or None when the tool binds no set */
    PLAN_SAME,       /* ((object, attribute, expected), ...): each attribute still `is` expected */
    PLAN_EQUAL,      /* ((object, attribute, expected), ...): each attribute still == expected */
    PLAN_OPEN,       /* dict of open repairs that must be empty for a call with a conversation; None: decline */
    PLAN_BINDINGS,   /* ((argument, members), ...) */
    PLAN_TALLIES,    /* (Tally, ...): each one's value += 1 */
    PLAN_SIGNATURES, /* the live dict of signature counts, or None */
    PLAN_SIGNATURE,  /* the key counted in it */
    PLAN_SIGNATURE_HASH, /* int: hash(the key), checked by arm */
    PLAN_PREFIX,     /* bytes: the answer without its call id */
    PLAN_FIELDS
};

typedef struct {
    PyObject_HEAD
    PyObject *plans; /* dict: a tool's name as UTF-8 bytes -> its plan */
    Py_ssize_t limits[FIELDS];
    PyTypeObject *tally_type; /* telemetry.tallies.Tally, whose one slot holds its value */
    Py_ssize_t tally_offset;  /* that slot's */
    PyObject *latency;        /* the latency histogram's Buckets (telemetry/_buckets.c): each answer observed */
    uint64_t offers;          /* offers made, for RECHECK_EVERY */
    PyObject *one;
    /* The plans last looked up, by a hash of the tool's name (its name's bytes, its plan): found without making
       the name's bytes object and hashing it. Emptied whenever `plans` changes. */
    struct {
        PyObject *name, *plan;
    } recent[RECENT];
} Answers;

static void forget_recent(Answers *self) {
    for (size_t slot = 0; slot < RECENT; slot++) {
        Py_CLEAR(self->recent[slot].name);
        Py_CLEAR(self->recent[slot].plan);
    }
}

static int answers_init(Answers *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"limits", "tally", "latency", NULL};
    PyTypeObject *tally;
    PyObject *latency;
    Py_ssize_t tool, conversation, call_id, customer, tenant, model, prompt_version;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "(nnnnnnn)O!O", keywords, &tool, &conversation, &call_id,
                                     &customer, &tenant, &model, &prompt_version, &PyType_Type, &tally, &latency))
        return -1;
    /* The buckets' struct is read here as buckets.h lays it out: only an object of _buckets.c's own type. */
    PyObject *buckets_module = PyImport_ImportModule("argwatch.server.telemetry._buckets");
    if (buckets_module == NULL) return -1;
    PyObject *buckets_type = PyObject_GetAttrString(buckets_module, "Buckets");
    Py_DECREF(buckets_module);
    if (buckets_type == NULL) return -1;
    int is_buckets = (PyObject *)Py_TYPE(latency) == buckets_type && ((Buckets *)latency)->counts != NULL;
    Py_DECREF(buckets_type);
    if (!is_buckets) {
        PyErr_SetString(PyExc_TypeError, "latency is a telemetry._buckets.Buckets, made");
        return -1;
    }
    Py_XSETREF(self->latency, Py_NewRef(latency));
    forget_recent(self);
    Py_XSETREF(self->plans, PyDict_New());
    Py_XSETREF(self->one, PyLong_FromLong(1));
    if (self->plans == NULL || self->one == NULL) return -1;
    /* The tally's value slot, as its member descriptor says: a tally is counted by writing it there. */
    PyObject *slot = PyObject_GetAttrString((PyObject *)tally, "value");
    if (slot == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear();
        slot = Py_NewRef(Py_None); /* no value at all: refused below */
    }
    /* Its own slot (a descriptor of the type or a base, so the offset is within every instance), written the
       generic way (no __setattr__ of its own that the write would skip). */
    PyMemberDef *member = Py_IS_TYPE(slot, &PyMemberDescr_Type) ? ((PyMemberDescrObject *)slot)->d_member : NULL;
    int usable = member != NULL && member->type == T_OBJECT_EX && !(member->flags & READONLY) &&
                 PyType_IsSubtype(tally, ((PyDescrObject *)slot)->d_type) &&
                 tally->tp_setattro == PyObject_GenericSetAttr;
    if (usable) self->tally_offset = member->offset;
    Py_DECREF(slot);
    if (!usable) {
        PyErr_SetString(PyExc_TypeError, "a tally's type keeps its value in a slot (__slots__ = (\"value\",))");
        return -1;
    }
    Py_XSETREF(self->tally_type, (PyTypeObject *)Py_NewRef(tally));
    self->limits[TOOL] = tool;
    self->limits[CONVERSATION] = conversation;
    self->limits[CALL_ID] = call_id;
    self->limits[CUSTOMER] = customer;
    self->limits[TENANT] = tenant;
    self->limits[MODEL] = model;
    self->limits[PROMPT_VERSION] = prompt_version;
    self->limits[ARGUMENTS] = PY_SSIZE_T_MAX;
    return 0;
}

static int answers_traverse(Answers *self, visitproc visit, void *arg) {
    Py_VISIT(self->plans);
    Py_VISIT(self->tally_type);
    Py_VISIT(self->latency);
    for (size_t slot = 0; slot < RECENT; slot++) Py_VISIT(self->recent[slot].plan);
    return 0;
}

static int answers_clear(Answers *self) {
    forget_recent(self);
    Py_CLEAR(self->plans);
    Py_CLEAR(self->tally_type);
    Py_CLEAR(self->latency);
    Py_CLEAR(self->one);
    return 0;
}

static void answers_dealloc(Answers *self) {
    PyObject_GC_UnTrack(self);
    answers_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Whether `len` bytes at `s` are UTF-8 that Python decodes (strictly: no surrogate, nothing overlong): ASCII
   checked here, anything else by Python's own decoder, the definition the slower path uses. -1: an error. */
static int is_utf8(const uint8_t *s, Py_ssize_t len) {
    Py_ssize_t at = 0;
    for (uint64_t word; at + 8 <= len; at += 8) { /* eight bytes at a glance: any past ASCII? */
        memcpy(&word, s + at, 8);
        if (word & 0x8080808080808080ULL) break;
    }
    while (at < len && s[at] < 0x80) at++;
    if (at == len) return 1;
    PyObject *decoded = PyUnicode_DecodeUTF8((const char *)s, len, NULL);
    if (decoded != NULL) {
        Py_DECREF(decoded);
        return 1;
    }
    if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) return -1;
    PyErr_Clear();
    return 0;
}

enum { GUARDS_HOLD = 1, PLAN_STALE = 0, NOT_THIS_CALL = 2 };

/* GUARDS_HOLD when every guard of `plan` holds now for a call (with a conversation id: `conversation`);
   PLAN_STALE when what the quick verdict read has moved on (a set's reading, its freshness, the modes), so the
   plan answers no call until armed again; NOT_THIS_CALL when only this call is not answered (a repair may be
   open that it would close); -1 on an error. Reads only: nothing is counted here. */
static int guards_hold(PyObject *plan, int conversation) {
    PyObject *clock = PyTuple_GET_ITEM(plan, PLAN_CLOCK);
    if (clock != Py_None) {
        PyObject *now = PyObject_CallNoArgs(clock);
        if (now == NULL) return -1;
        double seconds = PyFloat_AsDouble(now);
        Py_DECREF(now);
        if (seconds == -1.0 && PyErr_Occurred()) return -1;
        if (!(seconds < PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(plan, PLAN_UNTIL)))) return PLAN_STALE;
    }
    for (int kind = PLAN_SAME; kind <= PLAN_EQUAL; kind++) {
        PyObject *guards = PyTuple_GET_ITEM(plan, kind);
        for (Py_ssize_t at = 0; at < PyTuple_GET_SIZE(guards); at++) {
            PyObject *guard = PyTuple_GET_ITEM(guards, at);
            PyObject *now = PyObject_GetAttr(PyTuple_GET_ITEM(guard, 0), PyTuple_GET_ITEM(guard, 1));
            if (now == NULL) return -1;
            PyObject *expected = PyTuple_GET_ITEM(guard, 2);
            int holds = kind == PLAN_SAME ? now == expected : PyObject_RichCompareBool(now, expected, Py_EQ);
            Py_DECREF(now);
            if (holds != 1) return holds < 0 ? -1 : PLAN_STALE;
        }
    }
    if (conversation) {
        PyObject *open = PyTuple_GET_ITEM(plan, PLAN_OPEN);
        if (open == Py_None || PyDict_GET_SIZE(open) != 0) return NOT_THIS_CALL;
    }
    return GUARDS_HOLD;
}

/* Drops `plan`, stale, if it is still the one armed for the tool named by `len` bytes at `name` (a guard's read
   may have run code that armed it again): the next call the Python path judges arms the tool afresh. */
static int drop_plan(Answers *self, PyObject *plan, const uint8_t *name, Py_ssize_t len) {
    PyObject *key = PyBytes_FromStringAndSize((const char *)name, len);
    if (key == NULL) return -1;
    PyObject *armed = PyDict_GetItemWithError(self->plans, key);
    int failed = armed == NULL ? PyErr_Occurred() != NULL : 0;
    if (armed == plan) {
        forget_recent(self);
        failed = PyDict_DelItem(self->plans, key) < 0;
    }
    Py_DECREF(key);
    return failed ? -1 : 0;
}

/* 1 when each bound argument's value (at its Bound, read by scan_bound) is in its set's members, 0 when one is
   not. */
static int members_hold(PyObject *plan, const Bound *bound) {
    PyObject *bindings = PyTuple_GET_ITEM(plan, PLAN_BINDINGS);
    for (Py_ssize_t at = 0; at < PyTuple_GET_SIZE(bindings); at++) {
        PyObject *value = PyUnicode_DecodeUTF8((const char *)bound[at].start, bound[at].len, NULL);
        if (value == NULL) return -1; /* not for want of UTF-8: scan_bound checked it */
        int member = PySequence_Contains(PyTuple_GET_ITEM(PyTuple_GET_ITEM(bindings, at), 1), value);
        Py_DECREF(value);
        if (member != 1) return member;
    }
    return 1;
}

/* Each bound argument's name, as UTF-8, into `bound` (arm holds a plan to MAX_BOUND of them). */
static int bound_names(PyObject *plan, Bound *bound) {
    PyObject *bindings = PyTuple_GET_ITEM(plan, PLAN_BINDINGS);
    for (Py_ssize_t at = 0; at < PyTuple_GET_SIZE(bindings); at++) {
        bound[at].name = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(PyTuple_GET_ITEM(bindings, at), 0), &bound[at].name_len);
        if (bound[at].name == NULL) return -1;
    }
    return 0;
}

/* The plan's counts, as the quick verdict makes them. Called only once the call is answered. */
/* The signature's count (borrowed; NULL, no error, when the counts do not hold its key) and its write, by the
   hash arm checked: the key, a tuple, is not hashed again each call. (CPython's known-hash calls are not in
   its limited API; from 3.13 on, the plain ones.) */
static PyObject *signature_count_of(PyObject *plan, Py_hash_t hash) {
#if PY_VERSION_HEX < 0x030D0000
    return _PyDict_GetItem_KnownHash(PyTuple_GET_ITEM(plan, PLAN_SIGNATURES), PyTuple_GET_ITEM(plan, PLAN_SIGNATURE),
                                     hash);
#else
    (void)hash;
    return PyDict_GetItemWithError(PyTuple_GET_ITEM(plan, PLAN_SIGNATURES), PyTuple_GET_ITEM(plan, PLAN_SIGNATURE));
#endif
}

static int set_signature_count(PyObject *plan, PyObject *count, Py_hash_t hash) {
#if PY_VERSION_HEX < 0x030D0000
    return _PyDict_SetItem_KnownHash(PyTuple_GET_ITEM(plan, PLAN_SIGNATURES), PyTuple_GET_ITEM(plan, PLAN_SIGNATURE),
                                     count, hash);
#else
    (void)hash;
    return PyDict_SetItem(PyTuple_GET_ITEM(plan, PLAN_SIGNATURES), PyTuple_GET_ITEM(plan, PLAN_SIGNATURE), count);
#endif
}

static int count(Answers *self, PyObject *plan, PyObject *signature_count, Py_hash_t hash) {
    PyObject *tallies = PyTuple_GET_ITEM(plan, PLAN_TALLIES);
    for (Py_ssize_t at = 0; at < PyTuple_GET_SIZE(tallies); at++) {
        /* What its descriptor's write does, without the look-up (arm took only tallies of the tally type). */
        PyObject **slot = (PyObject **)((char *)PyTuple_GET_ITEM(tallies, at) + self->tally_offset);
        if (*slot == NULL) {
            PyErr_SetString(PyExc_AttributeError, "a tally has no value");
            return -1;
        }
        PyObject *more = PyNumber_Add(*slot, self->one);
        if (more == NULL) return -1;
        Py_SETREF(*slot, more);
    }
    if (signature_count != NULL) {
        PyObject *more = PyNumber_Add(signature_count, self->one);
        if (more == NULL) return -1;
        int failed = set_signature_count(plan, more, hash);
        Py_DECREF(more);
        if (failed) return -1;
    }
    return 0;
}

/* The prefix, then the call id as field 1 (protobuf parsers take fields in any order: edge/wire.py). */
static PyObject *answer_bytes(PyObject *prefix, const uint8_t *call_id, Py_ssize_t len) {
    uint8_t head[11];
    Py_ssize_t head_len = 0;
    head[head_len++] = 1 << 3 | 2;
    uint64_t rest = (uint64_t)len;
    while (rest >= 0x80) {
        head[head_len++] = (uint8_t)(rest & 0x7F) | 0x80;
        rest >>= 7;
    }
    head[head_len++] = (uint8_t)rest;
    Py_ssize_t prefix_len = PyBytes_GET_SIZE(prefix);
    PyObject *out = PyBytes_FromStringAndSize(NULL, prefix_len + head_len + len);
    if (out == NULL) return NULL;
    char *at = PyBytes_AS_STRING(out);
    memcpy(at, PyBytes_AS_STRING(prefix), prefix_len);
    memcpy(at + prefix_len, head, head_len);
    memcpy(at + prefix_len + head_len, call_id, len);
    return out;
}

/* FNV-1a of the `len` bytes at `name`: where a tool's plan is kept in `recent`. */
static size_t recent_slot(const uint8_t *name, Py_ssize_t len) {
    uint64_t hash = 0xcbf29ce484222325ULL;
    for (Py_ssize_t at = 0; at < len; at++) hash = (hash ^ name[at]) * 0x100000001b3ULL;
    return (size_t)(hash ^ hash >> 32) & (RECENT - 1);
}

/* The plan armed for the tool named by `len` bytes at `name`, borrowed; NULL (no error) when none. */
static PyObject *plan_for(Answers *self, const uint8_t *name, Py_ssize_t len) {
    size_t slot = recent_slot(name, len);
    PyObject *known = self->recent[slot].name;
    if (known != NULL && PyBytes_GET_SIZE(known) == len && memcmp(PyBytes_AS_STRING(known), name, (size_t)len) == 0)
        return self->recent[slot].plan;
    PyObject *key = PyBytes_FromStringAndSize((const char *)name, len);
    if (key == NULL) return NULL;
    PyObject *plan = PyDict_GetItemWithError(self->plans, key);
    if (plan == NULL) {
        Py_DECREF(key);
        return NULL;
    }
    /* The slot's former plan is still in `plans` (or the slot would have been emptied): no deallocation here. */
    Py_XSETREF(self->recent[slot].name, key);
    Py_XSETREF(self->recent[slot].plan, Py_NewRef(plan));
    return plan;
}

/* 0 with an error set when __init__ never ran (Answers.__new__ alone). */
static int initialised(Answers *self) {
    if (self->plans != NULL) return 1;
    PyErr_SetString(PyExc_RuntimeError, "Answers.__init__ was not called");
    return 0;
}

/* time.perf_counter() now, read as CPython reads it. */
static double perf_counter_now(void) {
#if PY_VERSION_HEX >= 0x030D0000
    PyTime_t now;
    (void)PyTime_PerfCounterRaw(&now);
    return PyTime_AsSecondsDouble(now);
#else
    return _PyTime_AsSecondsDouble(_PyTime_GetPerfCounter());
#endif
}

static PyObject *answers_answer(Answers *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!initialised(self)) return NULL;
    if (nargs != 2 || !PyBytes_Check(args[0]) || !PyFloat_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "answer takes the request's bytes and perf_counter() when it came");
        return NULL;
    }
    PyObject *body = args[0];
    const uint8_t *p = (const uint8_t *)PyBytes_AS_STRING(body);
    const uint8_t *starts[FIELDS] = {0};
    Py_ssize_t lens[FIELDS] = {0};
    int seen[FIELDS] = {0};
    if (!read_fields(p, p + PyBytes_GET_SIZE(body), starts, lens, seen)) Py_RETURN_NONE;
    /* Within their limits in bytes, so in characters; a call id present (the gateway mints a missing one). */
    for (int slot = 0; slot < FIELDS; slot++)
        if (lens[slot] > self->limits[slot]) Py_RETURN_NONE;
    if (lens[CALL_ID] == 0) Py_RETURN_NONE;
    PyObject *plan = plan_for(self, starts[TOOL], lens[TOOL]);
    if (plan == NULL) return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    Py_INCREF(plan); /* a guard's attribute read runs Python code, which may arm the tool again */
    PyObject *result = NULL, *signature_count = NULL;
    Py_hash_t hash = 0;
    int holds = guards_hold(plan, lens[CONVERSATION] > 0);
    if (holds == PLAN_STALE) {
        if (drop_plan(self, plan, starts[TOOL], lens[TOOL]) < 0) goto failed;
        goto declined_quietly;
    }
    if (holds != GUARDS_HOLD) goto declined;
    PyObject *signatures = PyTuple_GET_ITEM(plan, PLAN_SIGNATURES);
    if (signatures != Py_None) {
        /* Before the arguments are read: a signature no longer kept (forgotten while idle, or its tool's slots
           full) is counted by the Python path, which would read them again. */
        hash = (Py_hash_t)PyLong_AsSsize_t(PyTuple_GET_ITEM(plan, PLAN_SIGNATURE_HASH)); /* arm checked it */
        signature_count = signature_count_of(plan, hash);
        if (signature_count == NULL) {
            if (PyErr_Occurred()) goto failed;
            goto declined_quietly;
        }
        Py_INCREF(signature_count); /* held across the tallies' attribute writes */
    }
    /* The tool's name matched a key made from a str, so it is UTF-8; the others are checked here. */
    for (int slot = 0; slot < FIELDS; slot++) {
        if (slot == TOOL || slot == ARGUMENTS) continue;
        holds = is_utf8(starts[slot], lens[slot]);
        if (holds != 1) goto declined;
    }
    Bound bound[MAX_BOUND];
    int bound_count = (int)PyTuple_GET_SIZE(PyTuple_GET_ITEM(plan, PLAN_BINDINGS));
    if (bound_names(plan, bound) < 0) goto failed;
    /* Absent arguments are none, as the slower path reads them: a call binding none is answered. */
    if (seen[ARGUMENTS] ? !scan_bound(starts[ARGUMENTS], lens[ARGUMENTS], bound, bound_count) : bound_count > 0)
        goto declined_quietly;
    holds = members_hold(plan, bound);
    if (holds != 1) goto declined;
    result = answer_bytes(PyTuple_GET_ITEM(plan, PLAN_PREFIX), starts[CALL_ID], lens[CALL_ID]);
    if (result == NULL) goto failed;
    if (count(self, plan, signature_count, hash) < 0) Py_CLEAR(result);
    else buckets_observe((Buckets *)self->latency, perf_counter_now() - PyFloat_AS_DOUBLE(args[1]));
    goto done;
declined:
    if (holds < 0) goto failed;
declined_quietly:
    result = Py_NewRef(Py_None);
    goto done;
failed:
    result = NULL;
done:
    Py_XDECREF(signature_count);
    Py_DECREF(plan);
    return result;
}

/* Whether every item of `items` is a tuple of `size` with a str at `named`. */
static int items_are(PyObject *items, Py_ssize_t size, Py_ssize_t named) {
    for (Py_ssize_t at = 0; at < PyTuple_GET_SIZE(items); at++) {
        PyObject *item = PyTuple_GET_ITEM(items, at);
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != size || !PyUnicode_Check(PyTuple_GET_ITEM(item, named)))
            return 0;
    }
    return 1;
}

static PyObject *answers_arm(Answers *self, PyObject *args) {
    PyObject *name, *plan;
    if (!initialised(self) || !PyArg_ParseTuple(args, "SO!", &name, &PyTuple_Type, &plan)) return NULL;
    if (PyTuple_GET_SIZE(plan) != PLAN_FIELDS || !PyFloat_CheckExact(PyTuple_GET_ITEM(plan, PLAN_UNTIL)) ||
        !PyTuple_Check(PyTuple_GET_ITEM(plan, PLAN_SAME)) || !PyTuple_Check(PyTuple_GET_ITEM(plan, PLAN_EQUAL)) ||
        !PyTuple_Check(PyTuple_GET_ITEM(plan, PLAN_BINDINGS)) || !PyTuple_Check(PyTuple_GET_ITEM(plan, PLAN_TALLIES)) ||
        !PyBytes_CheckExact(PyTuple_GET_ITEM(plan, PLAN_PREFIX)) ||
        (PyTuple_GET_ITEM(plan, PLAN_OPEN) != Py_None && !PyDict_Check(PyTuple_GET_ITEM(plan, PLAN_OPEN))) ||
        (PyTuple_GET_ITEM(plan, PLAN_SIGNATURES) != Py_None && !PyDict_Check(PyTuple_GET_ITEM(plan, PLAN_SIGNATURES)))) {
        PyErr_SetString(PyExc_TypeError, "arm takes a tool's name as bytes and a NativePlan");
        return NULL;
    }
    if (!items_are(PyTuple_GET_ITEM(plan, PLAN_SAME), 3, 1) || !items_are(PyTuple_GET_ITEM(plan, PLAN_EQUAL), 3, 1) ||
        !items_are(PyTuple_GET_ITEM(plan, PLAN_BINDINGS), 2, 0)) {
        PyErr_SetString(PyExc_TypeError,
                        "a plan's guards are (object, attribute, expected), its bindings (argument, members)");
        return NULL;
    }
    if (PyTuple_GET_ITEM(plan, PLAN_SIGNATURES) != Py_None) {
        PyObject *hash = PyTuple_GET_ITEM(plan, PLAN_SIGNATURE_HASH);
        Py_hash_t computed = PyObject_Hash(PyTuple_GET_ITEM(plan, PLAN_SIGNATURE));
        if (computed == -1 && PyErr_Occurred()) return NULL;
        if (!PyLong_Check(hash) || PyLong_AsSsize_t(hash) != computed) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "a plan's signature_hash is hash(its signature)");
            return NULL;
        }
    }
    PyObject *tallies = PyTuple_GET_ITEM(plan, PLAN_TALLIES);
    for (Py_ssize_t at = 0; at < PyTuple_GET_SIZE(tallies); at++) {
        if (!Py_IS_TYPE(PyTuple_GET_ITEM(tallies, at), self->tally_type)) {
            PyErr_Format(PyExc_TypeError, "a plan's tallies are %s objects", self->tally_type->tp_name);
            return NULL;
        }
    }
    if (PyTuple_GET_SIZE(PyTuple_GET_ITEM(plan, PLAN_BINDINGS)) > MAX_BOUND) {
        PyErr_Format(PyExc_ValueError, "a plan binds at most %d arguments (MAX_BOUND)", MAX_BOUND);
        return NULL;
    }
    forget_recent(self);
    if (PyDict_SetItem(self->plans, name, plan) < 0) return NULL;
    Py_RETURN_NONE;
}

/* offer(build, name, *rest): build(name, *rest) when no plan is armed for the tool `name` names (its UTF-8),
   else nothing. The quick verdict offers each call it passes: while a plan is armed (answer drops a stale
   one), that costs a dict look-up, not the plan's making. One offer in RECHECK_EVERY re-checks the armed
   plan's guards and replaces it when stale: a tool whose calls never reach answer (each one traced, say)
   holds no old set reading for long. */
static PyObject *answers_offer(Answers *self, PyObject *const *args, Py_ssize_t nargs) {
    if (!initialised(self)) return NULL;
    if (nargs < 2 || !PyBytes_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "offer takes a plan's builder, a tool's name as bytes, and its arguments");
        return NULL;
    }
    PyObject *plan = PyDict_GetItemWithError(self->plans, args[1]);
    if (plan == NULL && PyErr_Occurred()) return NULL;
    if (plan != NULL) {
        if (++self->offers % RECHECK_EVERY != 0) Py_RETURN_NONE;
        Py_INCREF(plan); /* a guard's read runs Python code */
        int holds = guards_hold(plan, 0);
        const uint8_t *name = (const uint8_t *)PyBytes_AS_STRING(args[1]);
        int failed = holds < 0 || (holds == PLAN_STALE && drop_plan(self, plan, name, PyBytes_GET_SIZE(args[1])) < 0);
        Py_DECREF(plan);
        if (failed) return NULL;
        if (holds != PLAN_STALE) Py_RETURN_NONE;
    }
    return PyObject_Vectorcall(args[0], args + 1, (size_t)(nargs - 1), NULL);
}

static PyObject *answers_forget(Answers *self, PyObject *Py_UNUSED(ignored)) {
    if (!initialised(self)) return NULL;
    forget_recent(self);
    PyDict_Clear(self->plans);
    Py_RETURN_NONE;
}

static PyObject *answers_armed(Answers *self, PyObject *Py_UNUSED(ignored)) {
    return initialised(self) ? PyDict_Copy(self->plans) : NULL;
}

static PyMethodDef answers_methods[] = {
    {"answer", (PyCFunction)(void (*)(void))answers_answer, METH_FASTCALL,
     "answer(body, started): the response's bytes for a ValidateRequest's bytes that its tool's armed plan answers, "
     "its latency since `started` (perf_counter) observed; None for any other, nothing observed."},
    {"arm", (PyCFunction)answers_arm, METH_VARARGS, "arm(tool name as UTF-8 bytes, plan): answer its calls by it."},
    {"offer", (PyCFunction)(void (*)(void))answers_offer, METH_FASTCALL,
     "offer(build, tool name as UTF-8 bytes, *rest): build(name, *rest) unless a plan is armed for the tool."},
    {"forget", (PyCFunction)answers_forget, METH_NOARGS, "Drops every plan: each tool is armed again."},
    {"armed", (PyCFunction)answers_armed, METH_NOARGS, "The plans armed, by tool name (a copy)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject AnswersType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "argwatch.server.edge._answers.Answers",
    .tp_basicsize = sizeof(Answers),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Answers(limits, tally, latency): the quick verdict's answers, armed tool by tool.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)answers_init,
    .tp_traverse = (traverseproc)answers_traverse,
    .tp_clear = (inquiry)answers_clear,
    .tp_dealloc = (destructor)answers_dealloc,
    .tp_methods = answers_methods,
};

/* The scanner alone, for tests/unit/test_json_bound.py to hold it to orjson. */
static PyObject *bound_strings(PyObject *Py_UNUSED(module), PyObject *args) {
    Py_buffer json;
    PyObject *names;
    if (!PyArg_ParseTuple(args, "y*O!", &json, &PyTuple_Type, &names)) return NULL;
    Bound bound[MAX_BOUND];
    Py_ssize_t count = PyTuple_GET_SIZE(names);
    PyObject *result = NULL;
    if (count > MAX_BOUND) {
        PyErr_Format(PyExc_ValueError, "at most %d names (MAX_BOUND)", MAX_BOUND);
        goto done;
    }
    for (Py_ssize_t at = 0; at < count; at++) {
        PyObject *name = PyTuple_GET_ITEM(names, at);
        if (!PyUnicode_Check(name)) {
            PyErr_SetString(PyExc_TypeError, "names are strs");
            goto done;
        }
        bound[at].name = PyUnicode_AsUTF8AndSize(name, &bound[at].name_len);
        if (bound[at].name == NULL) goto done;
    }
    if (!scan_bound(json.buf, json.len, bound, (int)count)) {
        result = Py_NewRef(Py_None);
        goto done;
    }
    result = PyTuple_New(count);
    for (Py_ssize_t at = 0; result != NULL && at < count; at++) {
        PyObject *value = PyUnicode_DecodeUTF8((const char *)bound[at].start, bound[at].len, NULL);
        if (value == NULL) Py_CLEAR(result);
        else PyTuple_SET_ITEM(result, at, value);
    }
done:
    PyBuffer_Release(&json);
    return result;
}

static PyMethodDef module_functions[] = {
    {"bound_strings", bound_strings, METH_VARARGS,
     "bound_strings(json, names): each named top-level string as _answers reads it, or None where it declines."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "_answers", .m_size = -1};

PyMODINIT_FUNC PyInit__answers(void) {
    if (PyType_Ready(&AnswersType) < 0) return NULL;
    PyObject *created = PyModule_Create(&module);
    if (created == NULL) return NULL;
    if (PyModule_AddObjectRef(created, "Answers", (PyObject *)&AnswersType) < 0 ||
        PyModule_AddIntConstant(created, "MAX_BOUND", MAX_BOUND) < 0 ||
        PyModule_AddFunctions(created, module_functions) < 0) {
        Py_DECREF(created);
        return NULL;
    }
    return created;
}
