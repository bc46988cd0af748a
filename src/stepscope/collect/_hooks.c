/* The compiled hook bodies (stepscope.collect._hooks): the watched models' forward pre- and post-hook
 * (modules.py, ModuleWatch._model_hooks), the torch.autograd.backward wrapper (hooks.py,
 * _install_backward_hook), the optimizer's step timer and the DataLoader iterators' __next__ (loader.py),
 * with the same semantics as those Python functions, line for line: the same own-time arithmetic
 * (nesting.own_time written out), the same samples from the first tensor argument, the same validation-step
 * mark, the same errors caught and warned about once (session.warn_once), the same errors let through.
 * Issue 20: a real step pays several times the hooks' warm cost, because each Python frame of ours runs with
 * cold caches; a C body touches far fewer cache lines.
 *
 * A StepState's fields are read and written through its slots directly when the object is exactly the
 * StepState class given to bind() (else through getattr / setattr). Phase times are summed in C while
 * every field is an exact int that fits 64 bits, and with Python's number protocol otherwise, so any value
 * a Python hook accepts gives the same result. The clock is CLOCK_MONOTONIC, time.perf_counter_ns's on Linux.
 */
#include "_hooks.h"

const char *field_names[NF] = {"data_wait", "forward", "backward", "optimizer", "comm",
                               "start", "samples", "fetched", "tokens", "epoch"};
PyObject *s_field[NF];
Py_ssize_t g_offset[NF];
PyTypeObject *g_step_type;
PyObject *s_step, *s_options, *s_samples_per_step, *s_sampled, *s_shape, *s_dim, *s_training,
    *s_step_source, *s_optimizer, *s_active, *s_disabled, *s_activate, *s_warn_once, *s_module_samples,
    *s_module_watch, *s_backward, *g_zero, *s_extras, *s_tokens_per_step, *s_buffers, *s_step_rows,
    *s_step_index, *s_epoch, *s_append, *s_optimizer_key, *g_float_zero, *g_one, *s_source;

/* -- module ----------------------------------------------------------------------------------------------- */
static PyObject *bind(PyObject *Py_UNUSED(module), PyObject *step_type) {
    if (!PyType_Check(step_type)) {
        PyErr_SetString(PyExc_TypeError, "bind(StepState): a class");
        return NULL;
    }
    Py_ssize_t off[NF];
    for (int f = 0; f < NF; f++) { /* each field a slot: a member descriptor of an object pointer */
        PyObject *d = PyDict_GetItemWithError(((PyTypeObject *)step_type)->tp_dict, s_field[f]);
        if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type) ||
            ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "bind(StepState): %U is not an object slot", s_field[f]);
            return NULL;
        }
        off[f] = ((PyMemberDescrObject *)d)->d_member->offset;
    }
    PyObject *slots = PyObject_GetAttrString(step_type, "__slots__");
    Py_ssize_t n = slots ? PyObject_Length(slots) : -1;
    Py_XDECREF(slots);
    if (n < 0) return NULL;
    if (n != NF) { /* new_step_state() sets every slot: a field it does not know would be left unset */
        PyErr_Format(PyExc_TypeError, "bind(StepState): %zd slots, the compiled hooks know %d", n, NF);
        return NULL;
    }
    memcpy(g_offset, off, sizeof off);
    Py_XSETREF(g_step_type, (PyTypeObject *)Py_NewRef(step_type));
    Py_RETURN_NONE;
}

static PyObject *clock_ns(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(ignored)) {
    return PyLong_FromLongLong(now_ns());
}

static PyMethodDef module_methods[] = {
    {"bind", bind, METH_O, "bind(StepState): read and write its fields through its slots."},
    {"new_step_state", (PyCFunction)(void (*)(void))new_step_state_py, METH_FASTCALL,
     "new_step_state(start, epoch): a StepState made as the compiled step timer makes it (StepState(start, epoch))."},
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
    INTERN(s_step, "step");
    INTERN(s_options, "options");
    INTERN(s_samples_per_step, "samples_per_step");
    INTERN(s_sampled, "sampled");
    INTERN(s_shape, "shape");
    INTERN(s_dim, "dim");
    INTERN(s_training, "training");
    INTERN(s_step_source, "step_source");
    INTERN(s_optimizer, "optimizer");
    INTERN(s_active, "active");
    INTERN(s_disabled, "disabled");
    INTERN(s_activate, "activate");
    INTERN(s_warn_once, "warn_once");
    INTERN(s_module_samples, "module-samples");
    INTERN(s_module_watch, "module-watch");
    INTERN(s_backward, "backward");
    if ((g_zero = PyLong_FromLong(0)) == NULL || (g_one = PyLong_FromLong(1)) == NULL) return NULL;
    if ((g_float_zero = PyFloat_FromDouble(0.0)) == NULL) return NULL;
    INTERN(s_extras, "extras");
    INTERN(s_tokens_per_step, "tokens_per_step");
    INTERN(s_buffers, "buffers");
    INTERN(s_step_rows, "step_rows");
    INTERN(s_step_index, "step_index");
    INTERN(s_epoch, "epoch");
    INTERN(s_append, "append");
    INTERN(s_optimizer_key, "optimizer");
    INTERN(s_source, "source");
    if (PyType_Ready(&ForwardType) < 0 || PyType_Ready(&BackwardType) < 0 || PyType_Ready(&TimerType) < 0 ||
        PyType_Ready(&StepType) < 0 || PyType_Ready(&LoaderType) < 0 || loader_names() < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "ForwardHooks", (PyObject *)&ForwardType) < 0 ||
        PyModule_AddObjectRef(m, "Backward", (PyObject *)&BackwardType) < 0 ||
        PyModule_AddObjectRef(m, "OptimizerTimer", (PyObject *)&TimerType) < 0 ||
        PyModule_AddObjectRef(m, "OptimizerStep", (PyObject *)&StepType) < 0 ||
        PyModule_AddObjectRef(m, "LoaderNext", (PyObject *)&LoaderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
