/* The step in progress and the session's hot attributes as C structs (stepscope.collect._hooks; shared parts in
 * _hooks.h): StepState, whose fields are Nums (a C long long while the value is an exact int that fits, the
 * Python object otherwise), and SessionCore, Session's base class, whose attributes the hooks read are object
 * pointers in its struct. Python reads and writes both through descriptors, as it did the slots and the instance
 * dict before, which apply the hooks' log first (_hooks_log.c); the compiled hooks read them without an attribute
 * lookup or a new int per add (issue 20: each lookup touched cold cache lines, each add made an int). Their references: pystate.py's PyStepState and
 * PySessionCore, used where this extension is not built. Also columns(), the flush's rows -> columns (buffers.py). */
#include "_hooks.h"

PyTypeObject *g_core_subtype = NULL; /* see core_slots */
Hot g_hot; /* see _hooks_log.c */

/* -- StepState -------------------------------------------------------------------------------------------- */
static int State_traverse(State *self, visitproc visit, void *arg) {
    for (int f = 0; f < NF; f++) Py_VISIT(self->f[f].o);
    return 0;
}

static int State_clear(State *self) {
    for (int f = 0; f < NF; f++) num_clear(&self->f[f]);
    return 0;
}

static void State_dealloc(State *self) {
    PyObject_GC_UnTrack(self);
    State_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* StepState(t, epoch) with t a C number (the step mark's new step): the one place the fields' first values are
 * written (the phase times 0, samples and tokens 0.0, fetched False), assigned without converting the constants */
void state_reset(State *st, long long t, PyObject *epoch) {
    Num *F = st->f;
    for (int f = F_DATA_WAIT; f <= F_COMM; f++) {
        num_clear(&F[f]);
        F[f] = (Num){0, NULL};
    }
    num_clear(&F[F_START]);
    F[F_START] = (Num){t, NULL};
    if (F[F_SAMPLES].o != g_float_zero) Py_XSETREF(F[F_SAMPLES].o, Py_NewRef(g_float_zero));
    if (F[F_TOKENS].o != g_float_zero) Py_XSETREF(F[F_TOKENS].o, Py_NewRef(g_float_zero));
    if (F[F_FETCHED].o != Py_False) Py_XSETREF(F[F_FETCHED].o, Py_NewRef(Py_False));
    num_set(&F[F_EPOCH], epoch);
}

/* every field as StepState.__init__ sets it, start any object */
void state_fill(State *st, PyObject *start, PyObject *epoch) {
    state_reset(st, 0, epoch);
    num_set(&st->f[F_START], start);
}

static PyObject *new_step_state(PyObject *start, PyObject *epoch) { /* StepState(start, epoch) */
    State *st = (State *)StateType.tp_alloc(&StateType, 0);
    if (st == NULL) return NULL;
    state_fill(st, start, epoch);
    return (PyObject *)st;
}

PyObject *new_step_state_py(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "new_step_state(start, epoch)");
        return NULL;
    }
    return new_step_state(args[0], args[1]);
}

static int State_init(State *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"start", "epoch", NULL};
    PyObject *start, *epoch;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO:StepState", kwlist, &start, &epoch)) return -1;
    state_fill(self, start, epoch);
    return 0;
}

/* Python reads and writes a step state with the log's events applied first (_hooks_log.c). A phase written from
 * Python (a communication's blocked time, an integration's own timing) is counted in g_hot.cum by how much it
 * changed, as a hook's own time is, so that a compiled span around it leaves it out; any other field written
 * from Python ends log mode, whose events assume the hooks alone write the step. */
static PyObject *State_get(State *self, void *closure) {
    if (UNLIKELY(hot_sync() < 0)) return NULL;
    return num_obj(&self->f[(Py_ssize_t)closure]);
}

static int State_set(State *self, PyObject *v, void *closure) {
    int f = (int)(Py_ssize_t)closure;
    if (v == NULL) {
        PyErr_Format(PyExc_AttributeError, "StepState.%s cannot be deleted", field_names[f]);
        return -1;
    }
    if (hot_sync() < 0) return -1;
    Num *old = &self->f[f];
    if (f <= F_COMM) {
        long long delta;
        if (PyLong_CheckExact(v) && old->o == NULL) {
            int overflow;
            long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
            if (!overflow && !__builtin_sub_overflow(x, old->v, &delta)) g_hot.cum += delta;
        }
    } else if (g_hot.session != NULL) {
        hot_off();
    }
    num_set(old, v);
    return 0;
}

#define FIELD(i, name, doc) {name, (getter)State_get, (setter)State_set, doc, (void *)(Py_ssize_t)(i)}
static PyGetSetDef State_getset[] = {
    FIELD(F_DATA_WAIT, "data_wait", "ns waiting for data (DataLoader fetches)"),
    FIELD(F_FORWARD, "forward", "ns of the watched models' forward, own time"),
    FIELD(F_BACKWARD, "backward", "ns of backward, own time"),
    FIELD(F_OPTIMIZER, "optimizer", "ns of optimizer steps, own time"),
    FIELD(F_COMM, "comm", "ns blocked in communication"),
    FIELD(F_START, "start", "perf ns the step started (None: not yet)"),
    FIELD(F_SAMPLES, "samples", "samples of the step"),
    FIELD(F_FETCHED, "fetched", "a DataLoader batch came this step"),
    FIELD(F_TOKENS, "tokens", "tokens of the step"),
    FIELD(F_EPOCH, "epoch", "the epoch of the step's batches (-1: unknown)"),
    {NULL, NULL, NULL, NULL, NULL},
};
#undef FIELD

PyTypeObject StateType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stepscope.collect._hooks.StepState",
    .tp_doc = "StepState(start, epoch): accumulators of the step in progress (perf-counter ns), compiled "
              "(reference: pystate.PyStepState).",
    .tp_basicsize = sizeof(State),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)State_init,
    .tp_dealloc = (destructor)State_dealloc,
    .tp_traverse = (traverseproc)State_traverse,
    .tp_clear = (inquiry)State_clear,
    .tp_getset = State_getset,
};

/* -- SessionCore ----------------------------------------------------------------------------------------- */
static int Core_traverse(Core *self, visitproc visit, void *arg) {
    for (int i = 0; i < NS; i++) Py_VISIT(self->slot[i]);
    return 0;
}

static int Core_clear(Core *self) {
    for (int i = 0; i < NS; i++) Py_CLEAR(self->slot[i]);
    return 0;
}

static void Core_dealloc(Core *self) {
    PyObject_GC_UnTrack(self);
    Core_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Python reads and writes the session's attributes with the log's events applied first; a write to the session in
 * log mode ends it (the next common mark starts it again, its conditions checked anew). */
static int no_attr(Core *self, int i) { /* the AttributeError of an attribute not set (or deleted): -1 */
    PyErr_Format(PyExc_AttributeError, "'%.100s' object has no attribute '%s'", Py_TYPE(self)->tp_name, core_names[i]);
    return -1;
}

static PyObject *Core_get(Core *self, void *closure) {
    int i = (int)(Py_ssize_t)closure;
    if (hot_sync() < 0) return NULL;
    if (self->slot[i] == NULL) {
        no_attr(self, i);
        return NULL;
    }
    return Py_NewRef(self->slot[i]);
}

static int Core_set(Core *self, PyObject *v, void *closure) {
    int i = (int)(Py_ssize_t)closure;
    if (hot_sync() < 0) return -1;
    if (g_hot.session == (PyObject *)self) hot_off();
    if (v == NULL && self->slot[i] == NULL) return no_attr(self, i);
    Py_XSETREF(self->slot[i], Py_XNewRef(v));
    return 0;
}

#define SLOT(i, name, doc) {name, (getter)Core_get, (setter)Core_set, doc, (void *)(Py_ssize_t)(i)}
static PyGetSetDef Core_getset[] = {
    SLOT(S_STEP, "step", "the StepState of the step in progress"),
    SLOT(S_ACTIVE, "active", "the rank stream is open"),
    SLOT(S_DISABLED, "disabled", "recording is off (the store is unwritable)"),
    SLOT(S_API_FETCH, "api_fetch", "stepscope.steps() is fetching: the DataLoader hook leaves that fetch to it"),
    SLOT(S_STEP_SOURCE, "step_source", "what marks the steps (None: not yet known)"),
    SLOT(S_EXTRAS, "extras", "per-step callbacks run at each step boundary"),
    SLOT(S_STEP_INDEX, "step_index", "the index of the training step in progress"),
    SLOT(S_EPOCH, "epoch", "the epoch of the training step in progress (-1: unknown)"),
    SLOT(S_OPTIONS, "options", "the session's Options"),
    SLOT(S_STEP_ROW, "step_row", "appends one step row (the buffers' step_rows.append)"),
    {NULL, NULL, NULL, NULL, NULL},
};
#undef SLOT

PyTypeObject CoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stepscope.collect._hooks.SessionCore",
    .tp_doc = "Session's base class: the attributes the compiled hooks read, kept in a C struct "
              "(reference: pystate.PySessionCore).",
    .tp_basicsize = sizeof(Core),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE,
    .tp_new = PyType_GenericNew,
    .tp_dealloc = (destructor)Core_dealloc,
    .tp_traverse = (traverseproc)Core_traverse,
    .tp_clear = (inquiry)Core_clear,
    .tp_getset = Core_getset,
};

/* columns(rows, width): rows (a list of sequences of width fields: the region rows, and the step rows where no
 * StepLog is used) as width column tuples, the list buffers.py's flush encodes; a row of another width is refused
 * (zip(*rows) would cut every column to the shortest row). */
PyObject *columns_py(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "columns(rows: list, width: int)");
        return NULL;
    }
    PyObject *rows = args[0];
    Py_ssize_t width = PyLong_AsSsize_t(args[1]), n = PyList_GET_SIZE(rows);
    if (width < 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "columns: width must be >= 0");
        return NULL;
    }
    PyObject *out = PyList_New(width);
    if (out == NULL) return NULL;
    for (Py_ssize_t c = 0; c < width; c++) {
        PyObject *col = PyTuple_New(n);
        if (col == NULL) goto fail;
        PyList_SET_ITEM(out, c, col);
    }
    for (Py_ssize_t r = 0; r < n; r++) {
        PyObject *seq = PySequence_Fast(PyList_GET_ITEM(rows, r), "columns: a row is not a sequence");
        if (seq == NULL) goto fail;
        if (PySequence_Fast_GET_SIZE(seq) != width) {
            PyErr_Format(PyExc_ValueError, "columns: row %zd has %zd fields, not %zd", r,
                         PySequence_Fast_GET_SIZE(seq), width);
            Py_DECREF(seq);
            goto fail;
        }
        PyObject **items = PySequence_Fast_ITEMS(seq);
        for (Py_ssize_t c = 0; c < width; c++) PyTuple_SET_ITEM(PyList_GET_ITEM(out, c), r, Py_NewRef(items[c]));
        Py_DECREF(seq);
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}
