/* StepLog: the step rows of one session's buffers as a C array of 12 Nums each (stepscope.collect._hooks; shared
 * parts in _hooks.h). The compiled step timer writes a row into it in place: no object allocated, no call made
 * (a StepRow object and deque.append cost ~0.8 us of the timer after a `many` step, benchmarks/RESULTS.md
 * "eighth change"). Python appends a row by calling it (mark_step's tuples); the flush takes every row as 12 column tuples.
 * The GIL orders the two threads: take() detaches the array before it makes any object, so a row appended while
 * the columns are made (a collection can switch threads) waits in the new array for the next flush. */
#include "_hooks.h"

#define STEP_WIDTH 12

static int StepLog_traverse(StepLog *self, visitproc visit, void *arg) {
    for (Py_ssize_t r = 0; r < self->n; r++) {
        for (int c = 0; c < STEP_WIDTH; c++) Py_VISIT(self->rows[r].c[c].o);
    }
    return 0;
}

static void rows_free(StepRowData *rows, Py_ssize_t n) {
    for (Py_ssize_t r = 0; r < n; r++) {
        for (int c = 0; c < STEP_WIDTH; c++) num_clear(&rows[r].c[c]);
    }
    PyMem_Free(rows);
}

static int StepLog_clear(StepLog *self) {
    StepRowData *rows = self->rows;
    Py_ssize_t n = self->n;
    self->rows = NULL;
    self->n = self->cap = 0;
    rows_free(rows, n);
    return 0;
}

static void StepLog_dealloc(StepLog *self) {
    PyObject_GC_UnTrack(self);
    StepLog_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

StepRowData *steplog_grow(StepLog *log) {
    Py_ssize_t cap = log->cap ? log->cap * 2 : 64;
    StepRowData *rows = PyMem_Realloc(log->rows, (size_t)cap * sizeof(StepRowData));
    if (rows == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    log->rows = rows;
    log->cap = cap;
    return &log->rows[log->n++];
}

/* log(row): a row of 12 fields (Session.mark_step's tuple) appended */
static PyObject *StepLog_call(StepLog *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    if (PyVectorcall_NARGS(nargsf) != 1 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames))) {
        PyErr_SetString(PyExc_TypeError, "StepLog(row): one row of 12 fields");
        return NULL;
    }
    if (hot_sync() < 0) return NULL; /* the log's rows first, in order */
    PyObject *seq = PySequence_Fast(args[0], "StepLog: a row is not a sequence");
    if (seq == NULL) return NULL;
    if (PySequence_Fast_GET_SIZE(seq) != STEP_WIDTH) {
        PyErr_Format(PyExc_ValueError, "StepLog: a row has %zd fields, not 12", PySequence_Fast_GET_SIZE(seq));
        Py_DECREF(seq);
        return NULL;
    }
    Num got[STEP_WIDTH];
    for (int c = 0; c < STEP_WIDTH; c++) num_from(PySequence_Fast_ITEMS(seq)[c], &got[c]);
    Py_DECREF(seq);
    StepRowData *slot = steplog_next(self);
    if (slot == NULL) {
        for (int c = 0; c < STEP_WIDTH; c++) num_clear(&got[c]);
        return NULL;
    }
    memcpy(slot->c, got, sizeof got);
    Py_RETURN_NONE;
}

/* rows (n of them, detached by take()) put back before the rows appended since; lost only if no memory is left */
static void steplog_restore(StepLog *self, StepRowData *rows, Py_ssize_t n) {
    if (self->n == 0) {
        PyMem_Free(self->rows);
        self->rows = rows;
        self->n = self->cap = n;
        return;
    }
    StepRowData *all = PyMem_Malloc((size_t)(n + self->n) * sizeof(StepRowData));
    if (all == NULL) {
        rows_free(rows, n);
        return;
    }
    memcpy(all, rows, (size_t)n * sizeof(StepRowData));
    memcpy(all + n, self->rows, (size_t)self->n * sizeof(StepRowData));
    PyMem_Free(rows);
    PyMem_Free(self->rows);
    self->rows = all;
    self->n = self->cap = n + self->n;
}

/* take(): every row so far as 12 column tuples (numbers as ints), the log left empty */
static PyObject *StepLog_take(StepLog *self, PyObject *Py_UNUSED(ignored)) {
    if (hot_sync() < 0) return NULL; /* the rows of the hooks' log (_hooks_log.c) written first */
    StepRowData *rows = self->rows;
    Py_ssize_t n = self->n;
    self->rows = NULL; /* detached before any object is made: see the top of this file */
    self->n = self->cap = 0;
    PyObject *out = PyList_New(STEP_WIDTH);
    if (out == NULL) goto fail;
    for (int c = 0; c < STEP_WIDTH; c++) {
        PyObject *col = PyTuple_New(n);
        if (col == NULL) goto fail;
        PyList_SET_ITEM(out, c, col);
        for (Py_ssize_t r = 0; r < n; r++) {
            PyObject *v = num_obj(&rows[r].c[c]);
            if (v == NULL) goto fail;
            PyTuple_SET_ITEM(col, r, v);
        }
    }
    rows_free(rows, n);
    return out;
fail: /* out of memory: the rows go back in front of any appended meanwhile, for the next flush */
    Py_XDECREF(out);
    steplog_restore(self, rows, n);
    return NULL;
}

static Py_ssize_t StepLog_length(StepLog *self) { return hot_sync() < 0 ? -1 : self->n; }

static PySequenceMethods StepLog_sequence = {.sq_length = (lenfunc)StepLog_length};

static PyObject *StepLog_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    if (PyTuple_GET_SIZE(args) || (kwds != NULL && PyDict_GET_SIZE(kwds))) {
        PyErr_SetString(PyExc_TypeError, "StepLog() takes no arguments");
        return NULL;
    }
    StepLog *self = (StepLog *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = (vectorcallfunc)StepLog_call;
    return (PyObject *)self;
}

static PyMethodDef StepLog_methods[] = {
    {"take", (PyCFunction)StepLog_take, METH_NOARGS,
     "take(): every row so far as 12 column tuples (the flush's step columns), the log left empty."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef StepLog_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(StepLog, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject StepLogType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stepscope.collect._hooks.StepLog",
    .tp_doc = "StepLog(): the step rows of a session's buffers; log(row) appends one (12 fields), take() returns "
              "them as columns. The compiled step timer writes its rows in place.",
    .tp_basicsize = sizeof(StepLog),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = StepLog_new,
    .tp_dealloc = (destructor)StepLog_dealloc,
    .tp_traverse = (traverseproc)StepLog_traverse,
    .tp_clear = (inquiry)StepLog_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(StepLog, vectorcall),
    .tp_as_sequence = &StepLog_sequence,
    .tp_methods = StepLog_methods,
    .tp_members = StepLog_members,
};
