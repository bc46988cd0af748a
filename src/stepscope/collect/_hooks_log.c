/* The hooks' log (stepscope.collect._hooks; the Hot struct and its rules in _hooks.h): events appended by the four
 * compiled hooks in log mode, applied to the session's StepState and StepLog here, in their order, by the same
 * functions the hooks' other paths call. */
#include "_hooks.h"

#include <pthread.h>

static PyObject *s_log_key;

/* Events waiting at most: past it, the hook applies them itself before it appends (a session whose rows no flush
 * takes, nothing else reading it, does not grow the log without bound; the rows then wait in its StepLog). */
#define LOG_MAX 16384

Event *hot_append_grow(void) {
    if (g_hot.cap >= LOG_MAX && !g_hot.folding) {
        if (hot_fold() < 0) return NULL;
        if (g_hot.session == NULL) { /* the events' mark ended log mode: the caller's event has no log to go to */
            PyErr_SetString(PyExc_RuntimeError, "stepscope: the step log ended while it was applied");
            return NULL;
        }
        if (g_hot.n < g_hot.cap) return &g_hot.ev[g_hot.n++];
    }
    Py_ssize_t cap = g_hot.cap ? g_hot.cap * 2 : 256;
    Event *ev = PyMem_Realloc(g_hot.ev, (size_t)cap * sizeof(Event));
    if (ev == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    g_hot.ev = ev;
    g_hot.cap = cap;
    return &g_hot.ev[g_hot.n++];
}

/* one event applied to st (the session's step when it was appended: any write of the session's step applied the
 * events before it): what the hook's other path does after its clock reads, less g_hot.cum, counted when appended */
static int apply(PyObject *session, PyObject *timer, Event *e) {
    PyObject *st = core_slots(session)[S_STEP];
    if (UNLIKELY(st == NULL || state_fields(st) == NULL)) { /* cannot be: a write of the step ends log mode */
        PyErr_SetString(PyExc_RuntimeError, "the session's step is not a StepState");
        return -1;
    }
    Num d = {e->t1, NULL};
    switch (e->kind) {
    case EV_FETCH: { /* _hooks_loader.c, fetched(): the epoch, then Session.add_fetch */
        if (e->ref != NULL && set_field(st, F_EPOCH, e->ref) < 0) return -1;
        PyObject *rows = PyFloat_FromDouble(e->rows);
        if (rows == NULL) return -1;
        int rc = add_fetch(st, e->t0, e->t1, rows, 1);
        Py_DECREF(rows);
        return rc;
    }
    case EV_FORWARD: /* _hooks_phases.c: the pre-hook's start, the post-hook's own time */
        if (start_if_unset(st, e->t0) < 0) return -1;
        return add_positive(st, F_FORWARD, &d);
    case EV_BACKWARD: /* _hooks_phases.c, backward_done() */
        if (add_positive(st, F_BACKWARD, &d) < 0) return -1;
        return start_if_unset(st, e->t0);
    default: /* EV_OPTIMIZER, _hooks_optimizer.c: the timer's own time, then the mark */
        if (add_positive(st, F_OPTIMIZER, &d) < 0) return -1;
        return timer_apply_mark(timer, e->t0);
    }
}

int hot_fold(void) {
    if (g_hot.folding || g_hot.n == 0) return 0;
    PyObject *session = g_hot.session, *timer = g_hot.timer;
    Py_ssize_t n = g_hot.n;
    if (session == NULL) { /* cannot be: events are appended in log mode only, and leaving it applies them */
        g_hot.n = 0;
        return 0;
    }
    Py_INCREF(session); /* an event's mark may run Python (mark_step) that ends log mode: kept to the end */
    Py_INCREF(timer);
    g_hot.folding = 1;
    int rc = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Event e = g_hot.ev[i]; /* a copy: code an event runs may append events (the array can move) */
        if (rc == 0 && apply(session, timer, &e) < 0) rc = -1;
        if (e.kind == EV_FETCH) Py_XDECREF(e.ref);
    }
    Py_ssize_t later = g_hot.n - n; /* appended meanwhile: kept, in order, for the next fold */
    if (later > 0) memmove(g_hot.ev, g_hot.ev + n, (size_t)later * sizeof(Event));
    g_hot.n = later > 0 ? later : 0;
    g_hot.folding = 0;
    if (rc < 0) { /* as the hook's own path would: reported once, recording goes on */
        hot_off();
        rc = warn_caught(session, s_log_key, "step recording failed");
    }
    Py_DECREF(timer);
    Py_DECREF(session);
    return rc;
}

void hot_off(void) {
    if (g_hot.n && !g_hot.folding && hot_fold() < 0) PyErr_WriteUnraisable(NULL);
    PyObject *s = g_hot.session, *t = g_hot.timer, *x = g_hot.extras;
    g_hot.session = g_hot.timer = g_hot.extras = NULL;
    g_hot.fetched = 0;
    Py_XDECREF(s);
    Py_XDECREF(t);
    Py_XDECREF(x);
}

/* After a common mark (its conditions hold: the session active, not disabled, not fetching for the API, the
 * optimizer's steps, no per-step collector, the buffers' StepLog, a StepState): the hooks log until anything
 * else touches the session. */
void hot_on(PyObject *session, PyObject *timer) {
    if (g_hot.session == session && g_hot.timer == timer) {
        g_hot.fetched = 0; /* a step just began */
        return;
    }
    PyObject **core = core_slots(session);
    if (core == NULL || core[S_DISABLED] != Py_False || core[S_API_FETCH] != Py_False ||
        !PyList_CheckExact(core[S_EXTRAS]))
        return;
    hot_off();
    g_hot.session = Py_NewRef(session);
    g_hot.timer = Py_NewRef(timer);
    g_hot.extras = Py_NewRef(core[S_EXTRAS]);
    g_hot.fetched = 0;
}

/* A forked child does not record its parent's steps: the log is dropped there, its references left as copies. */
static void hot_after_fork_child(void) {
    g_hot.n = 0;
    g_hot.session = g_hot.timer = g_hot.extras = NULL;
    g_hot.fetched = g_hot.folding = 0;
}

int log_names(void) {
    if (pthread_atfork(NULL, NULL, hot_after_fork_child) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "pthread_atfork failed");
        return -1;
    }
    return (s_log_key = PyUnicode_InternFromString("step-log")) == NULL ? -1 : 0;
}
