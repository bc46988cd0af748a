/* The optimizer's step timer with the common step mark, compiled (stepscope.collect._hooks; shared parts in
 * _hooks.h). */
#include "_hooks.h"

/* -- the optimizer's step timer (hooks.py, _install_optimizer_hooks: timed) ---------------------------------- */
typedef struct {
    PyObject_HEAD
    PyObject *session, *nan, *rest, *marker;
    PyObject *opts, *sps, *tps; /* the last Options seen and its samples_per_step, tokens_per_step (NULL: none) */
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
    Py_VISIT(self->opts);
    Py_VISIT(self->sps);
    Py_VISIT(self->tps);
    return 0;
}

static int Timer_clear(Timer *self) {
    Py_CLEAR(self->session);
    Py_CLEAR(self->nan);
    Py_CLEAR(self->rest);
    Py_CLEAR(self->marker);
    Py_CLEAR(self->opts);
    Py_CLEAR(self->sps);
    Py_CLEAR(self->tps);
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

COLD static int options_read(Timer *self, PyObject *o) { /* session.options is another object: read it */
    PyObject *a = PyObject_GetAttr(o, s_samples_per_step), *b = a ? PyObject_GetAttr(o, s_tokens_per_step) : NULL;
    if (b == NULL) {
        Py_XDECREF(a);
        return -1;
    }
    Py_XSETREF(self->opts, Py_NewRef(o));
    Py_XSETREF(self->sps, a);
    Py_XSETREF(self->tps, b);
    return 0;
}

/* options.samples_per_step and options.tokens_per_step (borrowed), read again when session.options is another
 * object (Options is frozen; lightning.py replaces it): 0, or -1 with an exception */
static int per_step_options(Timer *self, PyObject *o, PyObject **sps, PyObject **tps) {
    if (UNLIKELY(o != self->opts) && options_read(self, o) < 0) return -1;
    *sps = self->sps;
    *tps = self->tps;
    return 0;
}

/* The step state *st is held elsewhere too: the session gets a new one, *st (a reference) becomes it (else nobody
 * can tell the reused one from a new one) */
COLD static int fresh_state(PyObject *session, PyObject **st) {
    PyObject *fresh = PyType_GenericAlloc(&StateType, 0);
    if (fresh == NULL || sset(session, S_STEP, fresh) < 0) {
        Py_XDECREF(fresh);
        return -1;
    }
    Py_SETREF(*st, fresh); /* *st owns fresh's reference from here, as it owned the old one's */
    return 0;
}

/* Session.mark_step's common case as the Python timer writes it out: 1 done, 0 not the common case (a step
 * source not yet the optimizer's, an inactive session, a per-step collector left, a session or step of another
 * type than SessionCore and StepState: the Python mark_step does it), -1 error. A logged mark (logged: 1) had no
 * per-step collector when it was logged, and is applied without them whatever the list holds now. */
static int mark_common(Timer *self, long long t1, int logged) {
    PyObject **core = core_slots(self->session);
    if (UNLIKELY(core == NULL)) return 0;
    for (int i = 0; i < NS; i++) {
        if (UNLIKELY(core[i] == NULL)) return 0; /* an attribute deleted: the Python path raises as it would */
    }
    PyObject *st = core[S_STEP];
    Num *F = state_fields(st);
    if (UNLIKELY(F == NULL)) return 0;
    PyObject *source = core[S_STEP_SOURCE];
    int c = source == s_optimizer ? 1 : PyObject_RichCompareBool(source, s_optimizer, Py_EQ);
    if (c <= 0) return c;
    if ((c = strue(self->session, S_ACTIVE)) <= 0) return c;
    PyObject *extras = core[S_EXTRAS];
    c = logged ? 0 : PyList_CheckExact(extras) ? PyList_GET_SIZE(extras) > 0 : PyObject_IsTrue(extras);
    if (c != 0) return c < 0 ? -1 : 0;
    PyObject *log = core[S_STEP_ROW];
    if (!Py_IS_TYPE(log, &StepLogType)) return 0; /* step_row is not the buffers' log (a test's list) */
    PyObject *sps, *tps;
    if (UNLIKELY(per_step_options(self, core[S_OPTIONS], &sps, &tps) < 0)) return -1;
    int fetched = num_true(&F[F_FETCHED]), any_samples = 0, any_tokens = 0, phase[4];
    if (UNLIKELY(fetched < 0)) return -1;
    if (sps == Py_None && (any_samples = fetched ? 1 : num_true(&F[F_SAMPLES])) < 0) return -1;
    if (tps == Py_None && (any_tokens = num_true(&F[F_TOKENS])) < 0) return -1;
    for (int i = 0; i < 4; i++) {
        if ((phase[i] = num_true(&F[F_FORWARD + i])) < 0) return -1;
    }
    StepRowData *row = steplog_next((StepLog *)log); /* the row, written in place */
    if (UNLIKELY(row == NULL)) return -1;
    Num nan = {0, self->nan}, *col = row->c;
    num_from(core[S_STEP_INDEX], &col[0]);
    col[1] = F[F_START].o == Py_None ? (Num){t1, NULL} : num_copy(&F[F_START]);
    col[2] = (Num){t1, NULL};
    /* samples: options.samples_per_step, else st.samples if st.fetched or st.samples else nan; tokens alike */
    if (sps != Py_None) num_from(sps, &col[3]);
    else col[3] = num_copy(any_samples ? &F[F_SAMPLES] : &nan);
    if (tps != Py_None) num_from(tps, &col[4]);
    else col[4] = num_copy(any_tokens ? &F[F_TOKENS] : &nan);
    col[5] = num_copy(fetched ? &F[F_DATA_WAIT] : &nan);
    for (int i = 0; i < 4; i++) col[6 + i] = num_copy(phase[i] ? &F[F_FORWARD + i] : &nan); /* st.forward or nan */
    col[10] = num_copy(&F[F_EPOCH]);
    col[11] = (Num){0, NULL};
    int rc = -1;
    PyObject *epoch = NULL;
    Py_INCREF(st);
    /* session.step_index + 1: from the index the row holds, as a C number while it is one */
    PyObject *next = col[0].o == NULL && col[0].v < LLONG_MAX ? PyLong_FromLongLong(col[0].v + 1)
                                                               : PyNumber_Add(core[S_STEP_INDEX], g_one);
    if (next == NULL || sset(self->session, S_STEP_INDEX, next) < 0) goto done;
    int known = F[F_EPOCH].o == NULL ? F[F_EPOCH].v >= 0 : PyObject_RichCompareBool(F[F_EPOCH].o, g_zero, Py_GE);
    if (known < 0 || (known && ((epoch = num_obj(&F[F_EPOCH])) == NULL || sset(self->session, S_EPOCH, epoch) < 0)))
        goto done;
    if (UNLIKELY(Py_REFCNT(st) != 2) && fresh_state(self->session, &st) < 0) goto done;
    state_reset((State *)st, t1, core[S_EPOCH]); /* StepState(t1, session.epoch) */
    rc = 1;
done:
    Py_XDECREF(next);
    Py_XDECREF(epoch);
    Py_DECREF(st);
    return rc;
}

COLD static int injected_fault(void) {
    PyErr_SetString(PyExc_RuntimeError, "injected fault (STEPSCOPE_DEBUG_FAULT=optimizer)");
    return -1;
}

COLD static int mark_step_py(Timer *self, long long t1) { /* session.mark_step(t1, source="optimizer") */
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

COLD static int rest_call(Timer *self, PyObject *opt, long long t1) { /* rest(opt, t1): another optimizer's step */
    PyObject *t1o = PyLong_FromLongLong(t1);
    PyObject *r = t1o ? PyObject_CallFunctionObjArgs(self->rest, opt, t1o, NULL) : NULL;
    Py_XDECREF(t1o);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* an EV_OPTIMIZER's mark when the log is applied (_hooks_log.c): the common mark, as the timer's own path makes it */
int timer_apply_mark(PyObject *timer, long long t1) {
    Timer *tm = (Timer *)timer;
    int c = mark_common(tm, t1, 1);
    return LIKELY(c != 0) ? (c < 0 ? -1 : 0) : mark_step_py(tm, t1);
}

/* The body of the Python timer's try block, after the step ran, outside log mode. */
COLD static int timer_body(Timer *self, long long d, long long t1, PyObject *const *args, Py_ssize_t nargs) {
    if (UNLIKELY(self->fault)) return injected_fault();
    if (hot_sync() < 0) return -1;
    PyObject *st = sget(self->session, S_STEP);
    if (UNLIKELY(st == NULL)) return -1;
    int e = attribute(st, F_OPTIMIZER, d);
    Py_DECREF(st);
    if (e == 0 && nargs == 0) {
        PyErr_SetString(PyExc_IndexError, "tuple index out of range");
        e = -1;
    }
    if (UNLIKELY(e < 0)) return -1;
    PyObject *opt = args[0];
    if (LIKELY(opt == self->marker)) {
        int c = mark_common(self, t1, 0);
        if (c > 0) hot_on(self->session, (PyObject *)self); /* the steady state: the hooks log from here */
        return LIKELY(c != 0) ? (c < 0 ? -1 : 0) : mark_step_py(self, t1);
    }
    return rest_call(self, opt, t1);
}

/* Log mode's step (_hooks.h): the marking optimizer's, no per-step collector waiting for the boundary, logged as
 * an event (its own time and the mark, applied later): 1, or 0 when timer_body does it, or -1 with an exception. */
static int step_logged(Timer *tm, long long d, long long t1, PyObject *const *args, Py_ssize_t nargs) {
    if (UNLIKELY(!log_on(tm->session) || g_hot.timer != (PyObject *)tm || nargs == 0 || args[0] != tm->marker ||
                 PyList_GET_SIZE(g_hot.extras) != 0 || tm->fault))
        return 0;
    if (UNLIKELY(hot_append(EV_OPTIMIZER, t1, d) == NULL)) return -1;
    if (d > 0) g_hot.cum += d;
    g_hot.fetched = 0;
    return 1;
}

static PyObject *Step_call(Step *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Timer *tm = self->timer;
    PyObject *orig = Py_NewRef(self->orig);
    if (UNLIKELY(tm->depth)) { /* a step inside a step (a subclass's super().step()): timed once */
        tm->depth += 1;
        PyObject *r = PyObject_Vectorcall(orig, args, nargsf, kwnames);
        tm->depth -= 1;
        Py_DECREF(orig);
        return r;
    }
    Py_INCREF(tm); /* the step may drop the wrapper (an undo) */
    PyObject *out = NULL;
    if (UNLIKELY(!log_on(tm->session)) && session_has_step(tm->session) < 0) goto done;
    tm->depth = 1;
    long long cum0 = g_hot.cum, t0 = now_ns();
    out = PyObject_Vectorcall(orig, args, nargsf, kwnames);
    if (UNLIKELY(out == NULL)) { /* a step that raises marks no step */
        tm->depth = 0;
        goto done;
    }
    long long t1 = now_ns(), d = own_ns(cum0, t0, t1);
    tm->depth = 0;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    int logged = step_logged(tm, d, t1, args, nargs);
    if (LIKELY(logged > 0)) goto done;
    if (logged == 0) {
        if (UNLIKELY(hot_sync() < 0)) {
            Py_CLEAR(out);
            goto done;
        }
        int disabled = strue(tm->session, S_DISABLED);
        if (UNLIKELY(disabled != 0)) {
            if (disabled < 0) Py_CLEAR(out);
            goto done;
        }
        logged = timer_body(tm, d, t1, args, nargs);
    }
    if (logged < 0 && warn_caught(tm->session, s_optimizer_key, "step marking failed") < 0) Py_CLEAR(out);
done:
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

