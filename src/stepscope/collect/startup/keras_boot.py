"""Post-import hooks for the non-PyTorch frameworks: Keras, TensorFlow and JAX are observed from the moment the
user's process finishes importing them, never imported by stepscope itself (a script that imports neither
pays nothing: two finders on ``sys.meta_path`` that only compare a module name)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial

from stepscope.collect.core.session import Session, current
from stepscope.collect.startup.postimport import after_import


def watch_frameworks(session: Session) -> None:
    """Install the TensorFlow and Keras hooks now where the package is loaded, else right after its import."""
    for name, install in (("tensorflow", _install_tensorflow), ("keras", _install_keras), ("jax", _install_jax)):
        after_import(name, partial(_guarded, session, name, install))


def _install_tensorflow(session: Session) -> None:
    from stepscope.collect.keras.tensorflow_hooks import install_tensorflow_hooks

    install_tensorflow_hooks(session)
    _describe_at_exit(session)
    _install_profile_window(session)


def _install_profile_window(session: Session) -> None:
    from stepscope.collect.keras.fwprofile import install_framework_window

    install_framework_window(session)


def _install_keras(session: Session) -> None:
    from stepscope.collect.keras.keras_hooks import install_keras_hooks

    install_keras_hooks(session)


def _install_jax(session: Session) -> None:
    """JAX has no step to hook (steps come from the API): its versions and devices are recorded at exit."""
    version = getattr(sys.modules.get("jax"), "__version__", None)
    session.note_hooks("jax", None if version is None else str(version), [], {})
    _describe_at_exit(session)
    _install_profile_window(session)


def _describe_at_exit(session: Session) -> None:
    """At exit, where Keras did not record the ``framework`` record at a step (steps from the API, or a
    TensorFlow loop without a Keras optimizer): record it then, named after the framework the steps ran on
    (Keras on any backend imports JAX where it is installed, and TensorFlow imports Keras)."""
    if getattr(session, "_framework_at_exit", False):
        return
    session._framework_at_exit = True  # type: ignore[attr-defined]

    def record() -> None:
        if session.active and not getattr(session, "_keras_described", False):
            from stepscope.collect.keras.fwprofile import choose_framework
            from stepscope.collect.keras.kerasinfo import framework_info

            info = framework_info()
            info["name"] = choose_framework(session.step_source) or info["name"]
            session.record("framework", **info)

    session.closers.insert(0, record)


def _guarded(session: Session, name: str, install: Callable[[Session], None]) -> None:
    key = f"_{name}_hooks_installed"
    if current() is not session or getattr(session, key, False):
        return
    setattr(session, key, True)
    try:
        install(session)
    except Exception as e:
        session.warn_once(f"install:{name}", f"could not install the {name} hooks ({e})")
        if name not in session.hook_notes:  # the run still says the framework was there, and why it is blind
            version = getattr(sys.modules.get(name), "__version__", None)
            session.note_hooks(name, None if version is None else str(version), [],
                               {name: f"{type(e).__name__}: {e}"})
