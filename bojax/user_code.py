"""A researcher's own objective, named on the command line.

``load_objective("my_package.train:objective")`` imports ``my_package.train`` and returns
its ``objective``; ``load_objective("experiments/train.py:objective")`` loads the file
instead (its folder goes on ``sys.path`` first, so its own imports of neighbouring files
work). The part after the colon may be a dotted path (``module:Trainer.evaluate``).
Anything wrong (no colon, a missing file or module, a module that fails to import, a
missing or non-callable attribute) is an :class:`~bojax.errors.ObjectiveReferenceError`
raised before any evaluation runs.

An objective loaded from a file is pickled by value, so Dask workers and fresh processes
that cannot import the file still receive it: the file's module is registered with
``cloudpickle.register_pickle_by_value``, and the objective comes wrapped in
:class:`ByValue`, because Dask tries the standard ``pickle`` first, which would send the
function by reference to a module named ``bojax_user_<stem>`` that no worker has.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path

from bojax.errors import ObjectiveReferenceError

# Files loaded, by resolved path and modification time: a file named twice (a --plugin
# that is also the objective's file) runs once, so its registrations are not made twice.
_LOADED: dict[tuple[Path, int], object] = {}


def _module_from_file(path: Path):
    if not path.is_file():
        raise ObjectiveReferenceError(f"no such file: {path}")
    loaded = (path.resolve(), path.stat().st_mtime_ns)
    if loaded in _LOADED:
        return _LOADED[loaded]
    name = f"bojax_user_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ObjectiveReferenceError(f"cannot load {path} as Python")
    module = importlib.util.module_from_spec(spec)
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as error:
        del sys.modules[name]
        raise ObjectiveReferenceError(_import_failed(path, error)) from error
    import cloudpickle

    cloudpickle.register_pickle_by_value(module)
    _LOADED[loaded] = module
    return module


class ByValue:
    """A callable that pickles by value through ``cloudpickle`` whichever pickler is used;
    it forwards calls and attributes (``batch``, ...) to the object it wraps."""

    def __init__(self, target: Callable):
        self.target = target

    def __call__(self, *args, **kwargs):
        return self.target(*args, **kwargs)

    def __getattr__(self, name: str):
        if name == "target":  # not set yet (a copy being built): no recursion
            raise AttributeError(name)
        return getattr(self.target, name)

    def __reduce__(self):
        import cloudpickle

        return cloudpickle.loads, (cloudpickle.dumps(self.target),)

    def __repr__(self) -> str:
        return f"ByValue({self.target!r})"


def _module_by_name(name: str):
    try:
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as error:
            # The bojax console script, unlike python -m, leaves the working folder off
            # sys.path: a module beside the user is where `python -m bojax` finds it.
            here = os.getcwd()
            if error.name != name.partition(".")[0] or {"", here} & set(sys.path):
                raise
            sys.path.append(here)
            return importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name is not None and name.startswith(error.name):
            raise ObjectiveReferenceError(
                f"no module named {name!r} (is its package installed, or on PYTHONPATH?)"
            ) from error
        raise ObjectiveReferenceError(f"importing {name} failed: {error}") from error
    except (Exception, SystemExit) as error:
        raise ObjectiveReferenceError(_import_failed(name, error)) from error


def _import_failed(what: object, error: BaseException) -> str:
    """Why importing ``what`` failed. A module that calls ``sys.exit()`` as it is
    imported (a script without a ``__main__`` guard) ended the command silently, its
    exit status the only trace (review CI)."""
    if isinstance(error, SystemExit):
        return (
            f"importing {what} failed: the module called sys.exit({error.code!r}) as it was "
            'imported (put a script\'s own run under `if __name__ == "__main__":`)'
        )
    return f"importing {what} failed: {type(error).__name__}: {error}"


def is_reference(text: str) -> bool:
    """Whether ``text`` looks like ``module:function`` rather than a built-in problem name."""
    return ":" in text


def load_module(where: str):
    """Import ``where``, a module name (``my_package.plugins``) or a file
    (``path/to/plugins.py``); what it registers at import (a kernel, an acquisition, a
    surrogate, ...) is then known to bojax. :class:`ObjectiveReferenceError` if it fails."""
    return _module_from_file(Path(where)) if _is_file(where) else _module_by_name(where)


def _is_file(where: str) -> bool:
    return where.endswith(".py") or "/" in where or "\\" in where


def load_objective(reference: str) -> Callable:
    """The callable that ``module:attribute`` or ``path/to/file.py:attribute`` names."""
    where, _, attribute = reference.rpartition(":")
    if not where or not attribute:
        raise ObjectiveReferenceError(
            f"{reference!r}: expected module:function or path/to/file.py:function"
        )
    module = load_module(where)
    target = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            public = sorted(
                n for n, v in vars(module).items() if callable(v) and not n.startswith("_")
            )
            raise ObjectiveReferenceError(
                f"{where} has no {attribute!r}; its callables: {', '.join(public) or 'none'}"
            )
        target = getattr(target, part)
    if not callable(target):
        raise ObjectiveReferenceError(
            f"{reference}: is a {type(target).__name__}, not a function of a point"
        )
    return ByValue(target) if _is_file(where) else target
