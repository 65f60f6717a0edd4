/* Large value sets packed: every member's UTF-8 once in one blob, and flat tables of 32-bit positions into it.

   A Python set of a million strings costs, over the strings, a hash table of 16-byte entries at most 60 % full,
   a list of references for the indexes to point into, and each index's own table: about 68 bytes a member.
   Here the members are bytes in one blob (no str object each: the str header alone is 49 bytes), and each table
   is an open-addressed array of 4-byte positions with a 1-byte tag beside it, at most 80 % full and sized once
   from the member count, so it never rehashes:

     offsets        4 bytes a member (where each member starts in the blob)
     member table   5 bytes a slot, 1.25 slots a member
     an index       5 bytes a slot, 1.25 slots a member (normalised form -> first member holding it)
     scoped sets:   a value table like an index, a 4-byte link a member chaining each scope's members, and per
                    scope one slot and three 4-byte fields

   Hashing is Python's own keyed SipHash over the UTF-8 bytes (_Py_HashBytes): randomised per process, so a
   caller cannot choose values that all probe one run of slots. A tag is 8 further bits of the hash; only a tag
   match compares bytes, so a miss reads the tag array and almost never the blob. Every hit is confirmed on the
   member's bytes: the table never answers from a digest alone.

   A str that is not valid UTF-8 (a lone surrogate, which a JSON file can hold) is encoded with surrogatepass,
   the same way at build and at look-up, so membership stays exact for it too.

   Built on the event loop a chunk of members at a time (add_all), never mutated once a snapshot holds it. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define NONE UINT32_MAX
#define MAX_BLOB ((size_t)UINT32_MAX)

/* ---- the open-addressed table: positions and tags, linear probing ---- */

typedef struct {
    uint32_t *slots;
    uint8_t *tags; /* 0: empty */
    uint32_t size, used, limit;
} Table;

static int table_init(Table *t, Py_ssize_t capacity) {
    /* 1.25 slots a member, at most 80 % full; a little more for very small tables. */
    uint64_t size = (uint64_t)capacity + (uint64_t)capacity / 4 + 8;
    if (size >= NONE) {
        PyErr_SetString(PyExc_OverflowError, "a packed set holds fewer than 3.4 billion members");
        return -1;
    }
    t->size = (uint32_t)size;
    t->used = 0;
    t->limit = (uint32_t)(size - size / 5);
    t->slots = PyMem_RawMalloc(sizeof(uint32_t) * size);
    t->tags = PyMem_RawCalloc(size, 1);
    if (t->slots == NULL || t->tags == NULL) {
        PyMem_RawFree(t->slots);
        PyMem_RawFree(t->tags);
        t->slots = NULL;
        t->tags = NULL;
        PyErr_NoMemory();
        return -1;
    }
    /* Touched now, every page, rather than by the first inserts: members hash to pages at random, so the
       first chunk of a million-member build faulted in most of the table on the event loop. Without the
       GIL: a set built off the loop (snapshot.py allocates it in a worker thread) costs the loop nothing. */
    Py_BEGIN_ALLOW_THREADS
    memset(t->slots, 0, sizeof(uint32_t) * size);
    memset(t->tags, 0, size);
    Py_END_ALLOW_THREADS
    return 0;
}

static void table_free(Table *t) {
    PyMem_RawFree(t->slots);
    PyMem_RawFree(t->tags);
    t->slots = NULL;
    t->tags = NULL;
}

static size_t table_bytes(const Table *t) { return t->slots == NULL ? 0 : (size_t)t->size * 5; }

static inline uint32_t home_of(const Table *t, uint64_t hash) {
    return (uint32_t)(((hash & 0xffffffffu) * (uint64_t)t->size) >> 32);
}

static inline uint8_t tag_of(uint64_t hash) { return (uint8_t)((hash >> 40) % 255 + 1); }

static inline uint32_t next_slot(const Table *t, uint32_t slot) { return slot + 1 == t->size ? 0 : slot + 1; }

static int table_full(Table *t) {
    if (t->used < t->limit) return 0;
    PyErr_SetString(PyExc_OverflowError, "a packed table is full: it was sized for fewer members");
    return 1;
}

static inline uint64_t hash_bytes(const char *data, Py_ssize_t len) { return (uint64_t)_Py_HashBytes(data, len); }

/* ---- UTF-8 of a str, the same way at build and at look-up ---- */

static const char *utf8_of(PyObject *text, Py_ssize_t *len, PyObject **holder) {
    *holder = NULL;
    const char *data = PyUnicode_AsUTF8AndSize(text, len);
    if (data != NULL) return data;
    if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return NULL;
    PyErr_Clear();
    *holder = PyUnicode_AsEncodedString(text, "utf-8", "surrogatepass");
    if (*holder == NULL) return NULL;
    *len = PyBytes_GET_SIZE(*holder);
    return PyBytes_AS_STRING(*holder);
}

/* ---- PackedSet ---- */

typedef struct {
    PyObject_HEAD
    char *blob;
    size_t blob_len, blob_cap;
    uint32_t *offsets; /* count + 1 entries */
    uint32_t count, capacity;
    Table members;
    int scoped;
    Py_ssize_t max_scope_chars;
    /* Scoped sets only. */
    Table values;        /* value part -> first position holding it */
    Table scopes;        /* scope part -> scope number; grown as scopes come, unlike the others */
    uint32_t *next;      /* per position: the next position of the same scope, or NONE */
    uint32_t *heads, *tails, *sizes, *scope_hashes; /* per scope number; tails only while building */
    uint32_t scope_count, scope_cap;
} PackedSet;

static PyTypeObject PackedSetType;

static inline const char *member_data(const PackedSet *s, uint32_t position, Py_ssize_t *len) {
    *len = (Py_ssize_t)(s->offsets[position + 1] - s->offsets[position]);
    return s->blob + s->offsets[position];
}

/* A scoped key's scope part: its bytes before the first NUL (the caller checked there is one). */
static inline Py_ssize_t scope_len(const char *data, Py_ssize_t len) {
    const char *nul = memchr(data, 0, (size_t)len);
    return nul == NULL ? len : nul - data;
}

static int PackedSet_init(PackedSet *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"capacity", "scoped", "max_scope_chars", NULL};
    Py_ssize_t capacity, max_scope_chars = 256;
    int scoped = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "n|pn", kwlist, &capacity, &scoped, &max_scope_chars)) return -1;
    if (self->offsets != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a PackedSet is initialised once");
        return -1;
    }
    if (capacity < 0 || (uint64_t)capacity >= NONE / 2) {
        PyErr_SetString(PyExc_OverflowError, "capacity out of range");
        return -1;
    }
    self->capacity = (uint32_t)capacity;
    self->scoped = scoped;
    self->max_scope_chars = max_scope_chars;
    self->offsets = PyMem_RawMalloc(sizeof(uint32_t) * ((size_t)capacity + 1));
    if (self->offsets == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->offsets[0] = 0;
    self->blob_cap = 4096;
    self->blob = PyMem_RawMalloc(self->blob_cap);
    if (self->blob == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (table_init(&self->members, capacity) < 0) return -1;
    if (scoped) {
        if (table_init(&self->values, capacity) < 0) return -1;
        /* Sized for the scopes as they come (a set of a million members may have ten scopes or a million). */
        if (table_init(&self->scopes, 64) < 0) return -1;
        self->next = PyMem_RawMalloc(sizeof(uint32_t) * ((size_t)capacity + 1));
        self->scope_cap = 64;
        self->heads = PyMem_RawMalloc(sizeof(uint32_t) * self->scope_cap);
        self->tails = PyMem_RawMalloc(sizeof(uint32_t) * self->scope_cap);
        self->sizes = PyMem_RawMalloc(sizeof(uint32_t) * self->scope_cap);
        self->scope_hashes = PyMem_RawMalloc(sizeof(uint32_t) * self->scope_cap);
        if (self->next == NULL || self->heads == NULL || self->tails == NULL || self->sizes == NULL ||
            self->scope_hashes == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    return 0;
}

static void PackedSet_dealloc(PackedSet *self) {
    /* The raw allocator needs no GIL; handing back a million members' pages takes milliseconds, and a set
       let go in a worker thread (set_table.py) then costs the loop nothing. */
    Py_BEGIN_ALLOW_THREADS
    PyMem_RawFree(self->blob);
    PyMem_RawFree(self->offsets);
    table_free(&self->members);
    table_free(&self->values);
    table_free(&self->scopes);
    PyMem_RawFree(self->next);
    PyMem_RawFree(self->heads);
    PyMem_RawFree(self->tails);
    PyMem_RawFree(self->sizes);
    PyMem_RawFree(self->scope_hashes);
    Py_END_ALLOW_THREADS
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int ready(const PackedSet *s) {
    if (s->offsets != NULL) return 1;
    PyErr_SetString(PyExc_RuntimeError, "PackedSet.__init__ was not called");
    return 0;
}

/* Whether the entry a slot holds is the one whose bytes are data[0:len]: a member, a value part, a scope. */
typedef int (*Matches)(const PackedSet *s, uint32_t held, const char *data, Py_ssize_t len);

static int member_is(const PackedSet *s, uint32_t position, const char *data, Py_ssize_t len) {
    Py_ssize_t other_len;
    const char *other = member_data(s, position, &other_len);
    return other_len == len && memcmp(other, data, (size_t)len) == 0;
}

static int value_is(const PackedSet *s, uint32_t position, const char *data, Py_ssize_t len) {
    Py_ssize_t key_len;
    const char *key = member_data(s, position, &key_len);
    Py_ssize_t cut = scope_len(key, key_len) + 1;
    return key_len - cut == len && memcmp(key + cut, data, (size_t)len) == 0;
}

static int scope_is(const PackedSet *s, uint32_t number, const char *data, Py_ssize_t len) {
    Py_ssize_t key_len;
    const char *key = member_data(s, s->heads[number], &key_len);
    return scope_len(key, key_len) == len && memcmp(key, data, (size_t)len) == 0;
}

/* What `t` holds for data[0:len] (a position or a scope number), or NONE; *slot_out: where it would go. Only a
   tag match reads the blob. Inlined with each `matches`, so no call through a pointer is left. */
static inline uint32_t probe(const PackedSet *s, const Table *t, Matches matches, const char *data, Py_ssize_t len,
                             uint64_t hash, uint32_t *slot_out) {
    uint8_t tag = tag_of(hash);
    uint32_t slot = home_of(t, hash);
    uint8_t held;
    while ((held = t->tags[slot]) != 0) {
        if (held == tag && matches(s, t->slots[slot], data, len)) return t->slots[slot];
        slot = next_slot(t, slot);
    }
    if (slot_out != NULL) *slot_out = slot;
    return NONE;
}

static uint32_t find_member(const PackedSet *s, const char *data, Py_ssize_t len, uint64_t hash, uint32_t *slot_out) {
    return probe(s, &s->members, member_is, data, len, hash, slot_out);
}

/* The first position whose key's value part (after the NUL) is data[0:len], or NONE. */
static uint32_t find_value(const PackedSet *s, const char *data, Py_ssize_t len, uint64_t hash, uint32_t *slot_out) {
    return probe(s, &s->values, value_is, data, len, hash, slot_out);
}

/* The number of the scope whose bytes are data[0:len], or NONE. */
static uint32_t find_scope(const PackedSet *s, const char *data, Py_ssize_t len, uint64_t hash, uint32_t *slot_out) {
    return probe(s, &s->scopes, scope_is, data, len, hash, slot_out);
}

static int grow_blob(PackedSet *s, size_t more) {
    if (s->blob_len + more <= s->blob_cap) return 0;
    if (s->blob_len + more > MAX_BLOB) {
        PyErr_SetString(PyExc_OverflowError, "a packed set's members exceed 4 GiB of UTF-8");
        return -1;
    }
    size_t cap = s->blob_cap + s->blob_cap / 2;
    if (cap < s->blob_len + more) cap = s->blob_len + more;
    if (cap > MAX_BLOB) cap = MAX_BLOB;
    char *grown = PyMem_RawRealloc(s->blob, cap);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    s->blob = grown;
    s->blob_cap = cap;
    return 0;
}

static int grow_scopes(PackedSet *s) {
    if (s->scope_count < s->scope_cap) return 0;
    uint32_t cap = s->scope_cap * 2;
    uint32_t **arrays[] = {&s->heads, &s->tails, &s->sizes, &s->scope_hashes};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) {
        uint32_t *grown = PyMem_RawRealloc(*arrays[i], sizeof(uint32_t) * cap);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        *arrays[i] = grown;
    }
    s->scope_cap = cap;
    return 0;
}

/* The scope table at twice its scopes, re-placed from the low 32 bits of each scope's hash kept aside: no scope's
   bytes are read or hashed again. */
static int rehash_scopes(PackedSet *s) {
    Table old = s->scopes, grown;
    if (table_init(&grown, (Py_ssize_t)old.used * 2) < 0) return -1;
    for (uint32_t slot = 0; slot < old.size; slot++) {
        if (old.tags[slot] == 0) continue;
        uint32_t number = old.slots[slot];
        uint32_t at = home_of(&grown, s->scope_hashes[number]);
        while (grown.tags[at] != 0) at = next_slot(&grown, at);
        grown.slots[at] = number;
        grown.tags[at] = old.tags[slot];
        grown.used++;
    }
    table_free(&old);
    s->scopes = grown;
    return 0;
}

/* Links a new scoped member into its scope's chain and the value table. */
static int index_scoped(PackedSet *s, uint32_t position) {
    Py_ssize_t len;
    const char *key = member_data(s, position, &len);
    Py_ssize_t cut = scope_len(key, len);
    uint64_t hash = hash_bytes(key, cut);
    uint32_t slot = 0;
    uint32_t number = find_scope(s, key, cut, hash, &slot);
    if (s->tails == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a shrunk PackedSet takes no more members");
        return -1;
    }
    s->next[position] = NONE;
    if (number == NONE) {
        if (s->scopes.used >= s->scopes.limit) {
            if (rehash_scopes(s) < 0) return -1;
            find_scope(s, key, cut, hash, &slot);
        }
        if (grow_scopes(s) < 0) return -1;
        number = s->scope_count++;
        s->heads[number] = s->tails[number] = position;
        s->sizes[number] = 1;
        s->scope_hashes[number] = (uint32_t)hash;
        s->scopes.slots[slot] = number;
        s->scopes.tags[slot] = tag_of(hash);
        s->scopes.used++;
    } else {
        s->next[s->tails[number]] = position;
        s->tails[number] = position;
        s->sizes[number]++;
    }
    hash = hash_bytes(key + cut + 1, len - cut - 1);
    if (find_value(s, key + cut + 1, len - cut - 1, hash, &slot) == NONE) {
        if (table_full(&s->values)) return -1;
        s->values.slots[slot] = position;
        s->values.tags[slot] = tag_of(hash);
        s->values.used++;
    }
    return 0;
}

/* Whether every key of `values` names a usable scope: non-empty, at most max_scope_chars, before a NUL. */
static int check_scopes(PackedSet *s, PyObject *values) {
    Py_ssize_t n = PyList_GET_SIZE(values);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = PyList_GET_ITEM(values, i);
        if (!PyUnicode_Check(key)) {
            PyErr_SetString(PyExc_TypeError, "members are str");
            return -1;
        }
        Py_ssize_t at = PyUnicode_FindChar(key, 0, 0, PyUnicode_GET_LENGTH(key), 1);
        if (at == -2) return -1;
        if (at < 1 || at > s->max_scope_chars) {
            PyErr_Format(PyExc_ValueError, "a scoped member with no usable scope: %.80R", key);
            return -1;
        }
    }
    return 0;
}

static PyObject *PackedSet_add_all(PackedSet *self, PyObject *values) {
    if (!ready(self)) return NULL;
    if (!PyList_Check(values)) {
        PyErr_SetString(PyExc_TypeError, "add_all takes a list of str");
        return NULL;
    }
    /* A scoped chunk is refused whole, before any of it is added. */
    if (self->scoped && check_scopes(self, values) < 0) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(values), added = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *value = PyList_GET_ITEM(values, i);
        if (!PyUnicode_Check(value)) {
            PyErr_SetString(PyExc_TypeError, "members are str");
            return NULL;
        }
        Py_ssize_t len;
        PyObject *holder;
        const char *data = utf8_of(value, &len, &holder);
        if (data == NULL) return NULL;
        uint64_t hash = hash_bytes(data, len);
        uint32_t slot = 0;
        if (find_member(self, data, len, hash, &slot) != NONE) {
            Py_XDECREF(holder);
            continue;
        }
        if (self->count >= self->capacity) {
            Py_XDECREF(holder);
            PyErr_SetString(PyExc_OverflowError, "a packed set is full: it was sized for fewer members");
            return NULL;
        }
        if (table_full(&self->members) || grow_blob(self, (size_t)len) < 0) {
            Py_XDECREF(holder);
            return NULL;
        }
        memcpy(self->blob + self->blob_len, data, (size_t)len);
        Py_XDECREF(holder);
        self->blob_len += (size_t)len;
        uint32_t position = self->count++;
        self->offsets[self->count] = (uint32_t)self->blob_len;
        self->members.slots[slot] = position;
        self->members.tags[slot] = tag_of(hash);
        self->members.used++;
        if (self->scoped && index_scoped(self, position) < 0) return NULL;
        added++;
    }
    return PyLong_FromSsize_t(added);
}

static PyObject *PackedSet_shrink(PackedSet *self, PyObject *Py_UNUSED(ignored)) {
    /* Gives back the blob's growth room once every member is in (a realloc of an mmap'd block moves no bytes). */
    if (!ready(self)) return NULL;
    size_t cap = self->blob_len > 0 ? self->blob_len : 1;
    char *shrunk = PyMem_RawRealloc(self->blob, cap);
    if (shrunk != NULL) {
        self->blob = shrunk;
        self->blob_cap = cap;
    }
    /* Nothing more is added: no room kept past the members and scopes there are. */
    self->capacity = self->count;
    uint32_t *offsets = PyMem_RawRealloc(self->offsets, sizeof(uint32_t) * ((size_t)self->count + 1));
    if (offsets != NULL) self->offsets = offsets;
    if (self->scoped) {
        uint32_t *next = PyMem_RawRealloc(self->next, sizeof(uint32_t) * ((size_t)self->count + 1));
        if (next != NULL) self->next = next;
        PyMem_RawFree(self->tails);
        self->tails = NULL;
        uint32_t cap = self->scope_count > 0 ? self->scope_count : 1;
        uint32_t **arrays[] = {&self->heads, &self->sizes, &self->scope_hashes};
        for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) {
            uint32_t *exact = PyMem_RawRealloc(*arrays[i], sizeof(uint32_t) * cap);
            if (exact != NULL) *arrays[i] = exact;
        }
        self->scope_cap = cap;
    }
    Py_RETURN_NONE;
}

static PyObject *member_str(const PackedSet *s, uint32_t position) {
    Py_ssize_t len;
    const char *data = member_data(s, position, &len);
    return PyUnicode_DecodeUTF8(data, len, "surrogatepass");
}

static PyObject *PackedSet_at(PackedSet *self, PyObject *arg) {
    if (!ready(self)) return NULL;
    Py_ssize_t position = PyLong_AsSsize_t(arg);
    if (position == -1 && PyErr_Occurred()) return NULL;
    if (position < 0 || position >= (Py_ssize_t)self->count) {
        PyErr_SetString(PyExc_IndexError, "position out of range");
        return NULL;
    }
    return member_str(self, (uint32_t)position);
}

static int PackedSet_contains(PackedSet *self, PyObject *value) {
    if (!PyUnicode_Check(value) || self->offsets == NULL) return 0;
    Py_ssize_t len;
    PyObject *holder;
    const char *data = utf8_of(value, &len, &holder);
    if (data == NULL) return -1;
    uint32_t found = find_member(self, data, len, hash_bytes(data, len), NULL);
    Py_XDECREF(holder);
    return found != NONE;
}

static Py_ssize_t PackedSet_len(PackedSet *self) { return (Py_ssize_t)self->count; }

static PyObject *PackedSet_holder(PackedSet *self, PyObject *value) {
    /* A key holding `value` in some scope (the first added), or None. */
    if (!ready(self)) return NULL;
    if (!self->scoped || !PyUnicode_Check(value)) Py_RETURN_NONE;
    Py_ssize_t len;
    PyObject *holder;
    const char *data = utf8_of(value, &len, &holder);
    if (data == NULL) return NULL;
    uint32_t found = find_value(self, data, len, hash_bytes(data, len), NULL);
    Py_XDECREF(holder);
    if (found == NONE) Py_RETURN_NONE;
    return member_str(self, found);
}

static PyObject *PackedSet_scope_keys(PackedSet *self, PyObject *scope) {
    /* The keys of `scope`'s members in the order they were added, as a tuple (empty: no such scope). */
    if (!ready(self)) return NULL;
    if (!self->scoped || !PyUnicode_Check(scope)) return PyTuple_New(0);
    Py_ssize_t len;
    PyObject *holder;
    const char *data = utf8_of(scope, &len, &holder);
    if (data == NULL) return NULL;
    /* A scope holding a NUL names none (its bytes would run into a key's value part). */
    uint32_t number = memchr(data, 0, (size_t)len) != NULL ? NONE : find_scope(self, data, len, hash_bytes(data, len), NULL);
    Py_XDECREF(holder);
    if (number == NONE) return PyTuple_New(0);
    PyObject *keys = PyTuple_New(self->sizes[number]);
    if (keys == NULL) return NULL;
    uint32_t position = self->heads[number];
    for (uint32_t i = 0; i < self->sizes[number]; i++, position = self->next[position]) {
        PyObject *key = member_str(self, position);
        if (key == NULL) {
            Py_DECREF(keys);
            return NULL;
        }
        PyTuple_SET_ITEM(keys, i, key);
    }
    return keys;
}

static PyObject *PackedSet_scope_names(PackedSet *self, PyObject *Py_UNUSED(ignored)) {
    /* Every scope, in the order its first member was added. */
    if (!ready(self)) return NULL;
    PyObject *names = PyList_New(self->scoped ? self->scope_count : 0);
    if (names == NULL || !self->scoped) return names;
    for (uint32_t number = 0; number < self->scope_count; number++) {
        Py_ssize_t len;
        const char *key = member_data(self, self->heads[number], &len);
        PyObject *name = PyUnicode_DecodeUTF8(key, scope_len(key, len), "surrogatepass");
        if (name == NULL) {
            Py_DECREF(names);
            return NULL;
        }
        PyList_SET_ITEM(names, number, name);
    }
    return names;
}

/* The scope chains' links and the per-scope arrays and table. */
static size_t scope_list_bytes(const PackedSet *s) {
    if (!s->scoped) return 0;
    size_t per_scope = s->tails != NULL ? 4 : 3;
    return sizeof(uint32_t) * ((size_t)s->capacity + 1 + per_scope * (size_t)s->scope_cap) + table_bytes(&s->scopes);
}

static PyObject *PackedSet_parts(PackedSet *self, PyObject *Py_UNUSED(ignored)) {
    /* Bytes held, by part: what bench/memory.py reports. */
    if (!ready(self)) return NULL;
    return Py_BuildValue("{s:n,s:n,s:n,s:n,s:n,s:n}", "members' UTF-8", (Py_ssize_t)self->blob_len, "blob room",
                         (Py_ssize_t)(self->blob_cap - self->blob_len), "offsets",
                         (Py_ssize_t)(sizeof(uint32_t) * ((size_t)self->capacity + 1)), "member table",
                         (Py_ssize_t)table_bytes(&self->members), "value table", (Py_ssize_t)table_bytes(&self->values),
                         "scope lists", (Py_ssize_t)scope_list_bytes(self));
}

static size_t packed_set_bytes(const PackedSet *s) {
    return s->blob_cap + sizeof(uint32_t) * ((size_t)s->capacity + 1) + table_bytes(&s->members) +
           table_bytes(&s->values) + scope_list_bytes(s);
}

static PyObject *PackedSet_sizeof(PackedSet *self, PyObject *Py_UNUSED(ignored)) {
    return PyLong_FromSize_t(Py_TYPE(self)->tp_basicsize + packed_set_bytes(self));
}

static PyMethodDef PackedSet_methods[] = {
    {"add_all", (PyCFunction)PackedSet_add_all, METH_O,
     "add_all(values: list[str]) -> int: adds the values not already held, in order; returns how many."},
    {"shrink", (PyCFunction)PackedSet_shrink, METH_NOARGS, "Gives back the blob's growth room."},
    {"at", (PyCFunction)PackedSet_at, METH_O, "at(position) -> str: the member added at `position`."},
    {"holder", (PyCFunction)PackedSet_holder, METH_O, "holder(value) -> str | None: a key holding `value`."},
    {"scope_keys", (PyCFunction)PackedSet_scope_keys, METH_O, "scope_keys(scope) -> tuple[str, ...]"},
    {"scope_names", (PyCFunction)PackedSet_scope_names, METH_NOARGS, "scope_names() -> list[str]"},
    {"parts", (PyCFunction)PackedSet_parts, METH_NOARGS, "parts() -> dict[str, int]: bytes held, by part."},
    {"__sizeof__", (PyCFunction)PackedSet_sizeof, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods PackedSet_as_sequence = {
    .sq_length = (lenfunc)PackedSet_len,
    .sq_contains = (objobjproc)PackedSet_contains,
};

static PyTypeObject PackedSetType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "argwatch.server.sets._packed.PackedSet",
    .tp_basicsize = sizeof(PackedSet),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "PackedSet(capacity, scoped=False, max_scope_chars=256): at most `capacity` distinct str, packed.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)PackedSet_init,
    .tp_dealloc = (destructor)PackedSet_dealloc,
    .tp_methods = PackedSet_methods,
    .tp_as_sequence = &PackedSet_as_sequence,
};

/* ---- PackedIndex: normalised form -> first member holding it, for a Python normaliser ---- */

typedef struct {
    PyObject_HEAD
    PyObject *apply;
    PackedSet *set;
    Table table;
    uint32_t count;
} PackedIndex;

static int PackedIndex_init(PackedIndex *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"apply", "members", "capacity", NULL};
    PyObject *apply, *set;
    Py_ssize_t capacity;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO!n", kwlist, &apply, &PackedSetType, &set, &capacity)) return -1;
    if (self->set != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a PackedIndex is initialised once");
        return -1;
    }
    if (!ready((PackedSet *)set)) return -1;
    if (capacity < 0 || (uint64_t)capacity >= NONE / 2) {
        PyErr_SetString(PyExc_OverflowError, "capacity out of range");
        return -1;
    }
    if (table_init(&self->table, capacity) < 0) return -1;
    Py_INCREF(apply);
    self->apply = apply;
    Py_INCREF(set);
    self->set = (PackedSet *)set;
    return 0;
}

static void PackedIndex_dealloc(PackedIndex *self) {
    Py_BEGIN_ALLOW_THREADS /* as PackedSet_dealloc */
    table_free(&self->table);
    Py_END_ALLOW_THREADS
    Py_XDECREF(self->apply);
    Py_XDECREF(self->set);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* apply(member at `position`) */
static PyObject *form_of(PackedIndex *self, uint32_t position) {
    PyObject *member = member_str(self->set, position);
    if (member == NULL) return NULL;
    PyObject *form = PyObject_CallOneArg(self->apply, member);
    Py_DECREF(member);
    if (form != NULL && !PyUnicode_Check(form)) {
        Py_DECREF(form);
        PyErr_SetString(PyExc_TypeError, "a normaliser returns str");
        return NULL;
    }
    return form;
}

/* The position of the first member whose form is `form`, or NONE (-2 on error); *slot_out: where it would go. */
static int64_t find_form(PackedIndex *self, PyObject *form, uint64_t hash, uint32_t *slot_out) {
    Table *t = &self->table;
    uint8_t tag = tag_of(hash);
    uint32_t slot = home_of(t, hash);
    uint8_t held;
    while ((held = t->tags[slot]) != 0) {
        if (held == tag) {
            PyObject *other = form_of(self, t->slots[slot]);
            if (other == NULL) return -2;
            int same = PyUnicode_Compare(other, form) == 0;
            Py_DECREF(other);
            if (same) return t->slots[slot];
            if (PyErr_Occurred()) return -2;
        }
        slot = next_slot(t, slot);
    }
    if (slot_out != NULL) *slot_out = slot;
    return NONE;
}

static int64_t lookup_form(PackedIndex *self, PyObject *form, uint32_t *slot_out, uint64_t *hash_out) {
    Py_ssize_t len;
    PyObject *holder;
    const char *data = utf8_of(form, &len, &holder);
    if (data == NULL) return -2;
    uint64_t hash = hash_bytes(data, len);
    Py_XDECREF(holder);
    if (hash_out != NULL) *hash_out = hash;
    return find_form(self, form, hash, slot_out);
}

static PyObject *PackedIndex_add_range(PackedIndex *self, PyObject *args) {
    /* Indexes the members at positions [start, stop), each unless an earlier member holds its form. */
    Py_ssize_t start, stop;
    if (!PyArg_ParseTuple(args, "nn", &start, &stop)) return NULL;
    if (self->set == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "PackedIndex.__init__ was not called");
        return NULL;
    }
    if (start < 0 || stop > (Py_ssize_t)self->set->count || start > stop) {
        PyErr_SetString(PyExc_IndexError, "positions out of range");
        return NULL;
    }
    for (Py_ssize_t position = start; position < stop; position++) {
        PyObject *form = form_of(self, (uint32_t)position);
        if (form == NULL) return NULL;
        uint32_t slot = 0;
        uint64_t hash;
        int64_t found = lookup_form(self, form, &slot, &hash);
        Py_DECREF(form);
        if (found == -2) return NULL;
        if (found != NONE) continue;
        if (table_full(&self->table)) return NULL;
        self->table.slots[slot] = (uint32_t)position;
        self->table.tags[slot] = tag_of(hash);
        self->table.used++;
        self->count++;
    }
    Py_RETURN_NONE;
}

static PyObject *PackedIndex_get(PackedIndex *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "get(key, default=None)");
        return NULL;
    }
    PyObject *fallback = nargs == 2 ? args[1] : Py_None;
    if (self->set == NULL || !PyUnicode_Check(args[0])) return Py_NewRef(fallback);
    int64_t found = lookup_form(self, args[0], NULL, NULL);
    if (found == -2) return NULL;
    if (found == NONE) return Py_NewRef(fallback);
    return member_str(self->set, (uint32_t)found);
}

static PyObject *PackedIndex_positions(PackedIndex *self, PyObject *Py_UNUSED(ignored)) {
    /* The indexed positions, in table order: what iterating the index walks. */
    PyObject *positions = PyList_New(0);
    if (positions == NULL || self->set == NULL) return positions;
    for (uint32_t slot = 0; slot < self->table.size; slot++) {
        if (self->table.tags[slot] == 0) continue;
        PyObject *position = PyLong_FromUnsignedLong(self->table.slots[slot]);
        if (position == NULL || PyList_Append(positions, position) < 0) {
            Py_XDECREF(position);
            Py_DECREF(positions);
            return NULL;
        }
        Py_DECREF(position);
    }
    return positions;
}

static Py_ssize_t PackedIndex_len(PackedIndex *self) { return (Py_ssize_t)self->count; }

static PyObject *PackedIndex_table_bytes(PackedIndex *self, PyObject *Py_UNUSED(ignored)) {
    return PyLong_FromSize_t(table_bytes(&self->table));
}

static PyObject *PackedIndex_sizeof(PackedIndex *self, PyObject *Py_UNUSED(ignored)) {
    return PyLong_FromSize_t(Py_TYPE(self)->tp_basicsize + table_bytes(&self->table));
}

static PyObject *PackedIndex_members(PackedIndex *self, void *Py_UNUSED(closure)) {
    return Py_NewRef(self->set != NULL ? (PyObject *)self->set : Py_None);
}

static PyMethodDef PackedIndex_methods[] = {
    {"add_range", (PyCFunction)PackedIndex_add_range, METH_VARARGS, "add_range(start, stop): indexes those positions."},
    {"get", (PyCFunction)(void (*)(void))PackedIndex_get, METH_FASTCALL, "get(key, default=None) -> str | None"},
    {"positions", (PyCFunction)PackedIndex_positions, METH_NOARGS, "positions() -> list[int]"},
    {"table_bytes", (PyCFunction)PackedIndex_table_bytes, METH_NOARGS, "table_bytes() -> int"},
    {"__sizeof__", (PyCFunction)PackedIndex_sizeof, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyObject *PackedIndex_apply(PackedIndex *self, void *Py_UNUSED(closure)) {
    return Py_NewRef(self->apply != NULL ? self->apply : Py_None);
}

static PyGetSetDef PackedIndex_getset[] = {
    {"members", (getter)PackedIndex_members, NULL, "The PackedSet the index points into.", NULL},
    {"apply", (getter)PackedIndex_apply, NULL, "The normaliser the index was built with.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PySequenceMethods PackedIndex_as_sequence = {.sq_length = (lenfunc)PackedIndex_len};

static PyTypeObject PackedIndexType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "argwatch.server.sets._packed.PackedIndex",
    .tp_basicsize = sizeof(PackedIndex),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "PackedIndex(apply, members, capacity): apply(member) -> first member, over a PackedSet.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)PackedIndex_init,
    .tp_dealloc = (destructor)PackedIndex_dealloc,
    .tp_methods = PackedIndex_methods,
    .tp_getset = PackedIndex_getset,
    .tp_as_sequence = &PackedIndex_as_sequence,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "argwatch.server.sets._packed",
    .m_doc = "Large value sets packed: members' UTF-8 in one blob, tables of 32-bit positions (sets/packed.py).",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__packed(void) {
    if (PyType_Ready(&PackedSetType) < 0 || PyType_Ready(&PackedIndexType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "PackedSet", (PyObject *)&PackedSetType) < 0 ||
        PyModule_AddObjectRef(m, "PackedIndex", (PyObject *)&PackedIndexType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
