/* Buckets(bounds): a latency histogram's counts and sum (native/buckets.h), observed with no Python frame.

   telemetry.tallies.TallyHistogram keeps its counts here: its `observe` is this type's, a C call where a Python
   method was a frame, and edge/_answers.c observes a call it answers from its bytes straight into the struct. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "../native/buckets.h"

static int buckets_init(Buckets *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"bounds", NULL};
    PyObject *bounds;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!", keywords, &PyTuple_Type, &bounds)) return -1;
    if (self->bounds != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Buckets are made once");
        return -1;
    }
    Py_ssize_t len = PyTuple_GET_SIZE(bounds);
    double *kept = PyMem_Calloc((size_t)len + 1, sizeof(double));
    uint64_t *counts = PyMem_Calloc((size_t)len + 1, sizeof(uint64_t));
    if (kept == NULL || counts == NULL) {
        PyMem_Free(kept);
        PyMem_Free(counts);
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t at = 0; at < len; at++) {
        kept[at] = PyFloat_AsDouble(PyTuple_GET_ITEM(bounds, at));
        int unsorted = at > 0 && !(kept[at - 1] < kept[at]);
        if ((kept[at] == -1.0 && PyErr_Occurred()) || unsorted || kept[at] != kept[at]) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "bounds are numbers in increasing order");
            PyMem_Free(kept);
            PyMem_Free(counts);
            return -1;
        }
    }
    self->bounds_len = len;
    self->bounds = kept;
    self->counts = counts;
    self->sum = 0.0;
    return 0;
}

static void buckets_dealloc(Buckets *self) {
    PyMem_Free(self->bounds);
    PyMem_Free(self->counts);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int made(Buckets *self) {
    if (self->counts != NULL) return 1;
    PyErr_SetString(PyExc_RuntimeError, "Buckets.__init__ was not called");
    return 0;
}

static PyObject *buckets_observe_method(Buckets *self, PyObject *value) {
    double seconds = PyFloat_AsDouble(value);
    if ((seconds == -1.0 && PyErr_Occurred()) || !made(self)) return NULL;
    buckets_observe(self, seconds);
    Py_RETURN_NONE;
}

static PyObject *buckets_observe_index(Buckets *self, PyObject *value) {
    double seconds = PyFloat_AsDouble(value);
    if ((seconds == -1.0 && PyErr_Occurred()) || !made(self)) return NULL;
    return PyLong_FromSsize_t(buckets_observe(self, seconds));
}

static PyObject *buckets_counts(Buckets *self, PyObject *Py_UNUSED(ignored)) {
    if (!made(self)) return NULL;
    PyObject *counts = PyList_New(self->bounds_len + 1);
    for (Py_ssize_t at = 0; counts != NULL && at <= self->bounds_len; at++) {
        PyObject *count = PyLong_FromUnsignedLongLong(self->counts[at]);
        if (count == NULL) Py_CLEAR(counts);
        else PyList_SET_ITEM(counts, at, count);
    }
    return counts;
}

static PyObject *buckets_sum(Buckets *self, void *Py_UNUSED(closure)) { return PyFloat_FromDouble(self->sum); }

static PyMethodDef buckets_methods[] = {
    {"observe", (PyCFunction)buckets_observe_method, METH_O, "Counts a value (float) in its bucket."},
    {"observe_index", (PyCFunction)buckets_observe_index, METH_O, "observe, returning the bucket's index."},
    {"counts", (PyCFunction)buckets_counts, METH_NOARGS,
     "Each bucket's count (not cumulative), the last above every bound."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef buckets_getset[] = {
    {"sum", (getter)buckets_sum, NULL, "The sum of every value observed.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject BucketsType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "argwatch.server.telemetry._buckets.Buckets",
    .tp_basicsize = sizeof(Buckets),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Buckets(bounds): a histogram's counts and sum, observed in C.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)buckets_init,
    .tp_dealloc = (destructor)buckets_dealloc,
    .tp_methods = buckets_methods,
    .tp_getset = buckets_getset,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, .m_name = "_buckets", .m_size = -1};

PyMODINIT_FUNC PyInit__buckets(void) {
    if (PyType_Ready(&BucketsType) < 0) return NULL;
    PyObject *created = PyModule_Create(&module);
    if (created == NULL) return NULL;
    if (PyModule_AddObjectRef(created, "Buckets", (PyObject *)&BucketsType) < 0) {
        Py_DECREF(created);
        return NULL;
    }
    return created;
}
