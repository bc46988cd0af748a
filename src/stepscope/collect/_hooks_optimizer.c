/* The optimizer's step timer with the common step mark, compiled (stepscope.collect._hooks; shared parts in
 * _hooks.h). */
#include "_hooks.h"

/* -- the optimizer's step timer (hooks.py, _install_optimizer_hooks: timed) ---------------------------------- */
/* StepState(start, epoch) without running its __init__: the same ten slots, the same values (bind() checks
 * the class has exactly these slots; tests/collect/test_hook_impls.py compares the two). */
static PyObject *new_step_state(PyObject *start, PyObject *epoch) {
    if (g_step_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "stepscope.collect._hooks is not bound to StepState");
        return NULL;
    }
    PyObject *st = PyType_GenericAlloc(g_step_type, 0);
    if (st == NULL) return NULL;
    PyObject *values[NF] = {g_zero, g_zero, g_zero, g_zero, g_zero, start, g_float_zero, Py_False,
                            g_float_zero, epoch};
    for (int f = 0; f < NF; f++) set_field(st, f, values[f]);
    return st;
}

PyObject *new_step_state_py(PyObject *Py_UNUSED(m), PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "new_step_state(start, epoch)");
        return NULL;
    }
    return new_step_state(args[0], args[1]);
}

typedef struct {
    PyObject_HEAD
    PyObject *session, *nan, *rest, *marker;
    Py_ssize_t depth;
    int fault;
} Timer;

typedef struct {
    PyObject_HEAD
    Timer *timer;
    PyObject *orig;
    vectorcallfunc vectorcall;
} Step;

static int Timer_traverse(Timer *self, visitproc visit, void *arg) {
    Py_VISIT(self->session);
    Py_VISIT(self->nan);
    Py_VISIT(self->rest);
    Py_VISIT(self->marker);
    return 0;
}

static int Timer_clear(Timer *self) {
    Py_CLEAR(self->session);
    Py_CLEAR(self->nan);
    Py_CLEAR(self->rest);
    Py_CLEAR(self->marker);
    return 0;
}

static void Timer_dealloc(Timer *self) {
    PyObject_GC_UnTrack(self);
    Timer_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Timer_init(Timer *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"session", "nan", "fault", "rest", NULL};
    PyObject *session, *nan, *rest;
    int fault;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOpO:OptimizerTimer", kwlist, &session, &nan, &fault, &rest))
        return -1;
    Py_XSETREF(self->session, Py_NewRef(session));
    Py_XSETREF(self->nan, Py_NewRef(nan));
    Py_XSETREF(self->rest, Py_NewRef(rest));
    Py_XSETREF(self->marker, Py_NewRef(Py_None));
    self->fault = fault;
    self->depth = 0;
    return 0;
}

/* Session.mark_step's common case as the Python timer writes it out: 1 done, 0 not the common case (a step
 * source not yet the optimizer's, an inactive session, a per-step collector left), -1 error. */
static int mark_common(Timer *self, PyObject *st, long long t1) {
    PyObject *session = self->session;
    PyObject *source = PyObject_GetAttr(session, s_step_source);
    if (source == NULL) return -1;
    int c = PyObject_RichCompareBool(source, s_optimizer, Py_EQ);
    Py_DECREF(source);
    if (c <= 0) return c;
    if ((c = attr_true(session, s_active)) <= 0) return c;
    if ((c = attr_true(session, s_extras)) != 0) return c < 0 ? -1 : 0;
    int rc = -1;
    PyObject *o = NULL, *sps = NULL, *tps = NULL, *v[NF] = {NULL}, *t1o = NULL, *index = NULL, *row = NULL;
    PyObject *samples, *tokens, *buffers = NULL, *rows = NULL, *next = NULL, *epoch = NULL, *fresh = NULL;
    if ((o = PyObject_GetAttr(session, s_options)) == NULL) goto done;
    if ((sps = PyObject_GetAttr(o, s_samples_per_step)) == NULL) goto done;
    if ((tps = PyObject_GetAttr(o, s_tokens_per_step)) == NULL) goto done;
    for (int f = 0; f < NF; f++) {
        if ((v[f] = get_field(st, f)) == NULL) goto done;
    }
    int fetched = PyObject_IsTrue(v[F_FETCHED]);
    if (fetched < 0) goto done;
    if (sps != Py_None) {
        samples = sps;
    } else { /* st.samples if st.fetched or st.samples else nan */
        int any = fetched ? 1 : PyObject_IsTrue(v[F_SAMPLES]);
        if (any < 0) goto done;
        samples = any ? v[F_SAMPLES] : self->nan;
    }
    if (tps != Py_None) {
        tokens = tps;
    } else {
        int t = PyObject_IsTrue(v[F_TOKENS]);
        if (t < 0) goto done;
        tokens = t ? v[F_TOKENS] : self->nan;
    }
    PyObject *phase[4];
    for (int i = 0; i < 4; i++) { /* st.forward or nan, ... */
        int t = PyObject_IsTrue(v[F_FORWARD + i]);
        if (t < 0) goto done;
        phase[i] = t ? v[F_FORWARD + i] : self->nan;
    }
    if ((t1o = PyLong_FromLongLong(t1)) == NULL) goto done;
    if ((index = PyObject_GetAttr(session, s_step_index)) == NULL) goto done;
    PyObject *items[12] = {index, v[F_START] == Py_None ? t1o : v[F_START], t1o, samples, tokens,
                           fetched ? v[F_DATA_WAIT] : self->nan, phase[0], phase[1], phase[2], phase[3],
                           v[F_EPOCH], g_zero};
    if ((row = PyTuple_New(12)) == NULL) goto done;
    for (int i = 0; i < 12; i++) PyTuple_SET_ITEM(row, i, Py_NewRef(items[i]));
    if ((buffers = PyObject_GetAttr(session, s_buffers)) == NULL) goto done;
    if ((rows = PyObject_GetAttr(buffers, s_step_rows)) == NULL) goto done;
    if (PyList_CheckExact(rows)) {
        if (PyList_Append(rows, row) < 0) goto done;
    } else {
        PyObject *r = PyObject_CallMethodOneArg(rows, s_append, row);
        if (r == NULL) goto done;
        Py_DECREF(r);
    }
    if ((next = PyNumber_Add(index, g_one)) == NULL || PyObject_SetAttr(session, s_step_index, next) < 0) goto done;
    int known = PyObject_RichCompareBool(v[F_EPOCH], g_zero, Py_GE);
    if (known < 0 || (known && PyObject_SetAttr(session, s_epoch, v[F_EPOCH]) < 0)) goto done;
    if ((epoch = PyObject_GetAttr(session, s_epoch)) == NULL) goto done;
    if ((fresh = new_step_state(t1o, epoch)) == NULL || PyObject_SetAttr(session, s_step, fresh) < 0) goto done;
    rc = 1;
done:
    Py_XDECREF(o);
    Py_XDECREF(sps);
    Py_XDECREF(tps);
    for (int f = 0; f < NF; f++) Py_XDECREF(v[f]);
    Py_XDECREF(t1o);
    Py_XDECREF(index);
    Py_XDECREF(row);
    Py_XDECREF(buffers);
    Py_XDECREF(rows);
    Py_XDECREF(next);
    Py_XDECREF(epoch);
    Py_XDECREF(fresh);
    return rc;
}

/* The body of the Python timer's try block, after the step ran. */
static int timer_body(Timer *self, PyObject *st0, Num *a0, long long t0, long long t1, PyObject *const *args,
                      Py_ssize_t nargs) {
    if (self->fault) {
        PyErr_SetString(PyExc_RuntimeError, "injected fault (STEPSCOPE_DEBUG_FAULT=optimizer)");
        return -1;
    }
    PyObject *st = PyObject_GetAttr(self->session, s_step);
    if (st == NULL) return -1;
    Num d = {0, NULL};
    int e = own_time(st0, a0, st, t0, t1, &d);
    if (e == 0) {
        e = add_positive(st, F_OPTIMIZER, &d);
        num_clear(&d);
    }
    if (e == 0 && nargs == 0) {
        PyErr_SetString(PyExc_IndexError, "tuple index out of range");
        e = -1;
    }
    if (e < 0) {
        Py_DECREF(st);
        return -1;
    }
    PyObject *opt = args[0];
    if (opt == self->marker) {
        int c = mark_common(self, st, t1);
        Py_DECREF(st);
        if (c != 0) return c < 0 ? -1 : 0;
        /* session.mark_step(t1, source="optimizer") */
        PyObject *meth = PyObject_GetAttrString(self->session, "mark_step");
        PyObject *t1o = meth ? PyLong_FromLongLong(t1) : NULL, *r = NULL;
        if (t1o != NULL) {
            PyObject *kw[2] = {t1o, s_optimizer}, *names = PyTuple_Pack(1, s_source);
            if (names != NULL) r = PyObject_Vectorcall(meth, kw, 1, names);
            Py_XDECREF(names);
        }
        Py_XDECREF(t1o);
        Py_XDECREF(meth);
        if (r == NULL) return -1;
        Py_DECREF(r);
        return 0;
    }
    Py_DECREF(st);
    PyObject *t1o = PyLong_FromLongLong(t1);
    PyObject *r = t1o ? PyObject_CallFunctionObjArgs(self->rest, opt, t1o, NULL) : NULL;
    Py_XDECREF(t1o);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

static PyObject *Step_call(Step *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Timer *tm = self->timer;
    PyObject *orig = Py_NewRef(self->orig);
    if (tm->depth) { /* a step inside a step (a subclass's super().step()): timed once */
        tm->depth += 1;
        PyObject *r = PyObject_Vectorcall(orig, args, nargsf, kwnames);
        tm->depth -= 1;
        Py_DECREF(orig);
        return r;
    }
    Py_INCREF(tm); /* the step may drop the wrapper (an undo) */
    PyObject *out = NULL, *st0 = PyObject_GetAttr(tm->session, s_step);
    Num a0 = {0, NULL};
    if (st0 == NULL || attributed(st0, &a0) < 0) goto done;
    tm->depth = 1;
    long long t0 = now_ns();
    out = PyObject_Vectorcall(orig, args, nargsf, kwnames);
    if (out == NULL) { /* a step that raises marks no step */
        tm->depth = 0;
        goto done;
    }
    long long t1 = now_ns();
    tm->depth = 0;
    int disabled = attr_true(tm->session, s_disabled);
    if (disabled != 0) {
        if (disabled < 0) Py_CLEAR(out);
        goto done;
    }
    if (timer_body(tm, st0, &a0, t0, t1, args, PyVectorcall_NARGS(nargsf)) < 0 &&
        warn_caught(tm->session, s_optimizer_key, "step marking failed") < 0)
        Py_CLEAR(out);
done:
    num_clear(&a0);
    Py_XDECREF(st0);
    Py_DECREF(tm);
    Py_DECREF(orig);
    return out;
}


static PyObject *Timer_wrap(Timer *self, PyObject *orig) {
    Step *step = (Step *)StepType.tp_alloc(&StepType, 0);
    if (step == NULL) return NULL;
    step->timer = (Timer *)Py_NewRef(self);
    step->orig = Py_NewRef(orig);
    step->vectorcall = (vectorcallfunc)Step_call;
    return (PyObject *)step;
}

static PyMethodDef Timer_methods[] = {
    {"wrap", (PyCFunction)Timer_wrap, METH_O, "wrap(step): the timed step calling step (torch's real one)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Timer_members[] = {
    {"marker", T_OBJECT, offsetof(Timer, marker), 0, "the optimizer whose step marks the steps (None: none yet)"},
    {"depth", T_PYSSIZET, offsetof(Timer, depth), READONLY, "timed steps now running (nested ones included)"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject TimerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stepscope.collect._hooks.OptimizerTimer",
    .tp_doc = "OptimizerTimer(session, nan, fault, rest): the optimizer step timer's state, shared by the timed "
              "steps wrap() makes; rest(opt, t1) handles a step of an optimizer other than the marker (hooks.py).",
    .tp_basicsize = sizeof(Timer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Timer_init,
    .tp_dealloc = (destructor)Timer_dealloc,
    .tp_traverse = (traverseproc)Timer_traverse,
    .tp_clear = (inquiry)Timer_clear,
    .tp_methods = Timer_methods,
    .tp_members = Timer_members,
};

static int Step_traverse(Step *self, visitproc visit, void *arg) {
    Py_VISIT(self->timer);
    Py_VISIT(self->orig);
    return 0;
}

static int Step_clear(Step *self) {
    Py_CLEAR(self->timer);
    Py_CLEAR(self->orig);
    return 0;
}

static void Step_dealloc(Step *self) {
    PyObject_GC_UnTrack(self);
    Step_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Step_get_true(Step *Py_UNUSED(self), void *Py_UNUSED(closure)) { Py_RETURN_TRUE; }

static PyObject *Step_get_wrapped(Step *self, void *Py_UNUSED(closure)) { return Py_NewRef(self->orig); }

static PyObject *Step_get_marker(Step *self, void *Py_UNUSED(closure)) {
    return Py_NewRef(self->timer->marker ? self->timer->marker : Py_None);
}

static PyGetSetDef Step_getset[] = {
    {"_stepscope_step", (getter)Step_get_true, NULL, "True: stepscope's timed step", NULL},
    {"__wrapped__", (getter)Step_get_wrapped, NULL, "the step it times", NULL},
    {"marker", (getter)Step_get_marker, NULL, "the timer's marking optimizer", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef Step_members[] = {
    {"orig", T_OBJECT_EX, offsetof(Step, orig), 0, "the step called (torch's real one)"},
    {"timer", T_OBJECT_EX, offsetof(Step, timer), READONLY, "the shared OptimizerTimer"},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(Step, vectorcall), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject StepType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "stepscope.collect._hooks.OptimizerStep",
    .tp_doc = "A timed optimizer step (OptimizerTimer.wrap), compiled (hooks.py, _install_optimizer_hooks).",
    .tp_basicsize = sizeof(Step),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_dealloc = (destructor)Step_dealloc,
    .tp_traverse = (traverseproc)Step_traverse,
    .tp_clear = (inquiry)Step_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(Step, vectorcall),
    .tp_members = Step_members,
    .tp_getset = Step_getset,
};

