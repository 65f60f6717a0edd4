/* A histogram's buckets as a C object (telemetry/_buckets.c defines the type; edge/_answers.c observes into it
   directly, with no Python call): the counts and sum of telemetry.tallies.TallyHistogram. Only the event loop's
   thread observes, holding the GIL; a scrape reads them through the type's methods, holding it too. */

#ifndef ARGWATCH_NATIVE_BUCKETS_H
#define ARGWATCH_NATIVE_BUCKETS_H

#include <Python.h>
#include <stdint.h>

typedef struct {
    PyObject_HEAD
    Py_ssize_t bounds_len; /* the bounds, sorted; counts has one more (above every bound) */
    double *bounds;
    uint64_t *counts;
    double sum;
} Buckets;

/* Counts `value` in its bucket, bisect_left's over the bounds as TallyHistogram counted it; its bucket's index. */
static inline Py_ssize_t buckets_observe(Buckets *self, double value) {
    Py_ssize_t low = 0, high = self->bounds_len;
    while (low < high) {
        Py_ssize_t middle = (low + high) / 2;
        if (self->bounds[middle] < value)
            low = middle + 1;
        else
            high = middle;
    }
    self->counts[low]++;
    self->sum += value;
    return low;
}

#endif
