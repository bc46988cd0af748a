/* The floor of a hook at a step's call site (hook_costs.py --alternate --arms probe,...): a wrapper that reads the
 * clock, calls what it wraps, reads the clock again and writes the two readings (and, for the loader, the batch's
 * first dimension by torch's C length) into a static array. It keeps no state, touches no session and marks no
 * step: it is what any hook at the same four sites pays at least, the design of "a clock read appended to a C
 * log" (benchmarks/RESULTS.md, "twelfth change") at its cheapest. With ``reads`` (the ``log`` arm) it also does the reads
 * that design keeps on the training thread: the loader compares the iterator with the last one and reads its
 * pass attribute when it changes, the forward reads the model's ``training`` flag as it is entered (where the
 * hooks read it since the thirteenth pass), the optimizer counts the step.
 * Built by benchmarks/_probe_build.py, not shipped. */
#include "_hooks.h" /* the hooks' clock read (now_ns), so the floor reads the clock as they do */

#define LOG_SIZE 4096 /* a power of two */

typedef struct {
    long long site, t0, t1, rows;
} Entry;

static Entry g_log[LOG_SIZE];
static size_t g_pos;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *fn;
    long long site;
    int rows; /* read the first item's C length from a tuple result (the loader's samples) */
    int reads; /* the log design's reads: 1 the loader's pass, 2 the model's training flag, 3 the step count */
    PyObject *owner; /* the model, for reads == 2 */
    PyObject *last_it; /* the last iterator seen (compared, never dereferenced) */
    long long flag, count;
} Probe;

static PyObject *g_pass_name, *g_training_name;

/* the forward's read, before the call (reads == 2): the model's training flag */
static int read_training(Probe *self) {
    PyObject *t = PyObject_GetAttr(self->owner, g_training_name);
    if (t == NULL) return -1;
    self->flag = t == Py_True;
    Py_DECREF(t);
    return 0;
}

/* the reads after the call (see the top): the loader's pass when the iterator changes, the step count */
static void log_reads(Probe *self, PyObject *const *args, size_t nargsf) {
    if (self->reads == 1 && PyVectorcall_NARGS(nargsf) > 0 && args[0] != self->last_it) {
        PyObject *pass = PyObject_GetAttr(args[0], g_pass_name);
        if (pass == NULL) PyErr_Clear();
        Py_XDECREF(pass);
        self->last_it = args[0];
    } else if (self->reads == 3) {
        self->count += 1;
    }
}

static PyObject *Probe_call(Probe *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    if (self->reads == 2 && self->owner != NULL && read_training(self) < 0) return NULL;
    long long t0 = now_ns();
    PyObject *r = PyObject_Vectorcall(self->fn, args, nargsf, kwnames);
    long long t1 = now_ns();
    if (self->reads && r != NULL) log_reads(self, args, nargsf);
    long long rows = -1;
    if (self->rows && r != NULL && PyTuple_CheckExact(r) && PyTuple_GET_SIZE(r) > 0) {
        PyObject *x = PyTuple_GET_ITEM(r, 0);
        PyMappingMethods *m = Py_TYPE(x)->tp_as_mapping;
        if (m != NULL && m->mp_length != NULL) {
            rows = m->mp_length(x);
            if (rows < 0) {
                Py_DECREF(r);
                return NULL;
            }
        }
    }
    Entry *e = &g_log[g_pos++ & (LOG_SIZE - 1)];
    e->site = self->site;
    e->t0 = t0;
    e->t1 = t1;
    e->rows = rows;
    return r;
}

static int Probe_init(Probe *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"fn", "site", "rows", "reads", "owner", NULL};
    PyObject *fn, *owner = NULL;
    long long site = 0;
    int rows = 0, reads = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O|LpiO:Probe", kwlist, &fn, &site, &rows, &reads, &owner))
        return -1;
    Py_XSETREF(self->fn, Py_NewRef(fn));
    Py_XSETREF(self->owner, Py_XNewRef(owner));
    self->site = site;
    self->rows = rows;
    self->reads = reads;
    self->vectorcall = (vectorcallfunc)Probe_call;
    return 0;
}

static int Probe_traverse(Probe *self, visitproc visit, void *arg) {
    Py_VISIT(self->fn);
    Py_VISIT(self->owner);
    return 0;
}

static int Probe_clear(Probe *self) {
    Py_CLEAR(self->fn);
    Py_CLEAR(self->owner);
    return 0;
}

static void Probe_dealloc(Probe *self) {
    PyObject_GC_UnTrack(self);
    Probe_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* bound as a method where it stands in a class (the iterators' __next__) */
static PyObject *Probe_get(PyObject *self, PyObject *obj, PyObject *Py_UNUSED(type)) {
    if (obj == NULL || obj == Py_None) return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyMemberDef Probe_members[] = {
    {"count", T_LONGLONG, offsetof(Probe, count), READONLY, "steps counted (reads == 3)"},
    {"flag", T_LONGLONG, offsetof(Probe, flag), READONLY, "the last training flag read (reads == 2)"},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Probe, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject ProbeType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "_probe.Probe",
    .tp_doc = "Probe(fn, site=0, rows=False, reads=0, owner=None): fn called between two clock reads written to a "
              "static array; reads: the log design's reads (1 loader pass, 2 owner.training, 3 step count)",
    .tp_basicsize = sizeof(Probe),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Probe_init,
    .tp_traverse = (traverseproc)Probe_traverse,
    .tp_clear = (inquiry)Probe_clear,
    .tp_dealloc = (destructor)Probe_dealloc,
    .tp_vectorcall_offset = offsetof(Probe, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_descr_get = Probe_get,
    .tp_members = Probe_members,
};

static PyObject *written(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a)) {
    return PyLong_FromSize_t(g_pos);
}

static PyObject *last(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(a)) {
    if (g_pos == 0) Py_RETURN_NONE;
    Entry *e = &g_log[(g_pos - 1) & (LOG_SIZE - 1)];
    return Py_BuildValue("(LLLL)", e->site, e->t0, e->t1, e->rows);
}

static PyMethodDef module_methods[] = {
    {"written", written, METH_NOARGS, "entries written so far"},
    {"last", last, METH_NOARGS, "the last entry: (site, t0, t1, rows) or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_probe", "The floor of a hook (hook_costs.py --alternate --probe).", -1,
    module_methods,
};

PyMODINIT_FUNC PyInit__probe(void) {
    g_pass_name = PyUnicode_InternFromString("_stepscope_pass");
    g_training_name = PyUnicode_InternFromString("training");
    if (g_pass_name == NULL || g_training_name == NULL || PyType_Ready(&ProbeType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Probe", (PyObject *)&ProbeType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
