/* The compiled hook bodies (stepscope.collect._hooks): the watched models' forward pre- and post-hook
 * (modules.py, ModuleWatch._model_hooks), the torch.autograd.backward wrapper (hooks.py,
 * _install_backward_hook), the optimizer's step timer and the DataLoader iterators' __next__ (loader.py),
 * with the same semantics as those Python functions, line for line: the same own time (nesting.own_time's, with
 * what other phases took meanwhile read from one process-wide counter, own_ns in _hooks.h), the same samples
 * from the first tensor argument, the same validation-step mark, the same errors caught and warned about once (session.warn_once), the same errors let through.
 * Issue 20: a real step pays several times the hooks' warm cost, because each Python frame of ours runs with
 * cold caches; a C body touches far fewer cache lines, and in the steady state (log mode, _hooks_log.c) the
 * hooks append events and touch neither the session nor its step.
 *
 * A StepState's fields and a Session's hot attributes are read from their C structs (_hooks_state.c) when the
 * objects are those types (else through getattr / setattr). Phase times are summed in C while every field is an
 * exact int that fits 64 bits, and with Python's number protocol otherwise, so any value a Python hook accepts
 * gives the same result. The clock is CLOCK_MONOTONIC, time.perf_counter_ns's on Linux.
 */
#include "_hooks.h"

const char *field_names[NF] = {"data_wait", "forward", "backward", "optimizer", "comm",
                               "start", "samples", "fetched", "tokens", "epoch"};
PyObject *s_field[NF];
const char *core_names[NS] = {"step", "active", "disabled", "api_fetch", "step_source", "extras", "step_index",
                              "epoch", "options", "step_row"};
PyObject *s_core[NS];
PyObject *s_samples_per_step, *s_sampled, *s_shape, *s_training, *s_optimizer, *s_activate, *s_warn_once,
    *s_module_samples, *s_module_watch, *s_backward, *g_zero, *s_tokens_per_step, *s_optimizer_key, *g_float_zero,
    *g_one, *s_source;

/* -- module ----------------------------------------------------------------------------------------------- */
static PyObject *clock_ns(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(ignored)) {
    return PyLong_FromLongLong(now_ns());
}

static PyObject *log_state(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(ignored)) {
    return Py_BuildValue("(Nn)", PyBool_FromLong(g_hot.session != NULL), g_hot.n);
}

static PyMethodDef module_methods[] = {
    {"log_state", log_state, METH_NOARGS,
     "log_state(): (log mode on, events pending) of the hooks' log (_hooks_log.c). Reads nothing else, so applies "
     "nothing."},
    {"new_step_state", (PyCFunction)(void (*)(void))new_step_state_py, METH_FASTCALL,
     "new_step_state(start, epoch): a StepState made as the compiled step timer makes it (StepState(start, epoch))."},
    {"columns", (PyCFunction)(void (*)(void))columns_py, METH_FASTCALL,
     "columns(rows, width): the rows (StepRows or sequences of width fields) as width column tuples."},
    {"clock_ns", clock_ns, METH_NOARGS, "The hooks' clock now (ns): CLOCK_MONOTONIC, as time.perf_counter_ns."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "stepscope.collect._hooks", "The compiled hook bodies (see modules.py, hooks.py).", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL

PyMODINIT_FUNC PyInit__hooks(void) {
    for (int f = 0; f < NF; f++) INTERN(s_field[f], field_names[f]);
    for (int i = 0; i < NS; i++) INTERN(s_core[i], core_names[i]);
    INTERN(s_samples_per_step, "samples_per_step");
    INTERN(s_sampled, "sampled");
    INTERN(s_shape, "shape");
    INTERN(s_training, "training");
    INTERN(s_optimizer, "optimizer");
    INTERN(s_activate, "activate");
    INTERN(s_warn_once, "warn_once");
    INTERN(s_module_samples, "module-samples");
    INTERN(s_module_watch, "module-watch");
    INTERN(s_backward, "backward");
    if ((g_zero = PyLong_FromLong(0)) == NULL || (g_one = PyLong_FromLong(1)) == NULL) return NULL;
    if ((g_float_zero = PyFloat_FromDouble(0.0)) == NULL) return NULL;
    INTERN(s_tokens_per_step, "tokens_per_step");
    INTERN(s_optimizer_key, "optimizer");
    INTERN(s_source, "source");
    if (PyType_Ready(&ForwardType) < 0 || PyType_Ready(&TimedCallType) < 0 || PyType_Ready(&BackwardType) < 0 ||
        PyType_Ready(&TimerType) < 0 || PyType_Ready(&StepType) < 0 || PyType_Ready(&LoaderType) < 0 ||
        loader_names() < 0 || log_names() < 0 || PyType_Ready(&StateType) < 0 || PyType_Ready(&CoreType) < 0 ||
        PyType_Ready(&PassType) < 0 || PyType_Ready(&StepLogType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "ForwardHooks", (PyObject *)&ForwardType) < 0 ||
        PyModule_AddObjectRef(m, "TimedCall", (PyObject *)&TimedCallType) < 0 ||
        PyModule_AddObjectRef(m, "Backward", (PyObject *)&BackwardType) < 0 ||
        PyModule_AddObjectRef(m, "OptimizerTimer", (PyObject *)&TimerType) < 0 ||
        PyModule_AddObjectRef(m, "OptimizerStep", (PyObject *)&StepType) < 0 ||
        PyModule_AddObjectRef(m, "LoaderNext", (PyObject *)&LoaderType) < 0 ||
        PyModule_AddObjectRef(m, "StepState", (PyObject *)&StateType) < 0 ||
        PyModule_AddObjectRef(m, "SessionCore", (PyObject *)&CoreType) < 0 ||
        PyModule_AddObjectRef(m, "PassState", (PyObject *)&PassType) < 0 ||
        PyModule_AddObjectRef(m, "StepLog", (PyObject *)&StepLogType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
