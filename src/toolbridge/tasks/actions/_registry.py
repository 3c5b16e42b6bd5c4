"""The action registry: names mapped to async functions with pydantic-declared params.

An action is an async function `(params, ctx) -> value`:

- `params` is an instance of a pydantic model that declares the action's parameters. The model
  is given to the decorator (`@action("goto", params=GotoParams)`) or, when omitted, taken from
  the annotation of the function's first parameter. Loading a tool file validates each
  instruction's params against it (unknown keys, missing required keys, wrong types of literal
  values), and each call validates the substituted params again before the action runs.
- `ctx` is the `ActionContext`: the browser page, the configured services, earlier results.
- The return value is any JSON value (the instruction's result, `None` for none) or an
  `ActionResult` when the action also returns content parts (a screenshot) or sets the task's
  result (the `result` action).

Failures are raised as `ToolError` (code `ERR_TOOL_ACTION_FAILED`) with a message a model can act
on; any other exception is reported by type and message, never with a traceback.

`ActionRegistry` holds actions by name. The module-level `action(...)` decorator registers into
the default registry, which also holds the built-in actions and, loaded once on first use, the
actions of installed packages that declare an entry point in the group `toolbridge.actions`.
Such an entry point may name:

- a module: importing it runs its `@action` decorators;
- a callable taking the registry: it is called with it (`register(registry)`);
- an `ActionSpec`: it is registered as is.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import logging
import sys
import threading
import typing
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict

from ...content import Part
from ...errors import ConfigError

if TYPE_CHECKING:
    from ._context import ActionContext

__all__ = [
    "ENTRY_POINT_GROUP",
    "ActionFn",
    "ActionParams",
    "ActionRegistry",
    "ActionResult",
    "ActionSpec",
    "NoParams",
    "action",
    "default_registry",
    "registry_with",
]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "toolbridge.actions"
"""The entry point group third-party packages use to add actions."""

ActionFn = Callable[[Any, "ActionContext"], Awaitable[Any]]
F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


class ActionParams(BaseModel):
    """Base for action parameter models: unknown keys are refused."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class NoParams(ActionParams):
    """The params of an action that takes none."""


@dataclass(frozen=True, slots=True)
class ActionResult:
    """What an action returns when a bare value is not enough.

    Attributes:
        value: the instruction's result (any JSON value).
        parts: content parts to add to the tool result (for example a PNG `ImagePart`).
        sets_task_result: when True, `value` becomes the task's result, and later instructions'
            results no longer replace it.
    """

    value: Any = None
    parts: tuple[Part, ...] = ()
    sets_task_result: bool = False


@dataclass(frozen=True, slots=True)
class ActionSpec:
    """A registered action.

    Attributes:
        name: the name instructions use in `action`.
        fn: the async function `(params, ctx) -> value | ActionResult`.
        params: the pydantic model of its params.
        description: one line for people (defaults to the function's docstring's first line).
    """

    name: str
    fn: ActionFn
    params: type[BaseModel] = NoParams
    description: str = ""


def _params_model_of(fn: Callable[..., Any], name: str) -> type[BaseModel]:
    """The pydantic model annotated on `fn`'s first parameter."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception as exc:  # unresolvable forward references
        raise ConfigError(
            f"action {name!r}: cannot read the annotations of {fn.__qualname__}: {exc}; "
            "pass params=Model to the decorator",
            code="ERR_TASK_ACTION_DEFINITION",
        ) from None
    params = list(inspect.signature(fn).parameters)
    model = hints.get(params[0]) if params else None
    if isinstance(model, type) and issubclass(model, BaseModel):
        return model
    raise ConfigError(
        f"action {name!r}: the first parameter of {fn.__qualname__} must be annotated with a pydantic "
        "model (or pass params=Model to the decorator)",
        code="ERR_TASK_ACTION_DEFINITION",
    )


@dataclass
class ActionRegistry:
    """A set of actions by name.

    Use `register(...)` or the `action(...)` decorator method. `copy()` gives an independent
    registry (for a server that adds its own actions without touching the default one).
    """

    _specs: dict[str, ActionSpec] = field(default_factory=dict)

    def register(
        self,
        name: str,
        fn: ActionFn,
        params: type[BaseModel] | None = None,
        *,
        description: str | None = None,
        replace: bool = False,
    ) -> ActionSpec:
        """Register `fn` as the action `name`.

        Args:
            name: the action name used in instructions.
            fn: an async function `(params, ctx)`.
            params: the pydantic model of the params; inferred from `fn`'s first parameter's
                annotation when omitted.
            description: one line for people; defaults to the docstring's first line.
            replace: allow replacing an action of the same name.

        Raises:
            ConfigError: `ERR_TASK_ACTION_DEFINITION` when `fn` is not an async function or its
                params model cannot be found; `ERR_TASK_DUPLICATE` when the name is taken and
                `replace` is false.
        """
        if not name or not isinstance(name, str):
            raise ConfigError("an action name must be a non-empty string", code="ERR_TASK_ACTION_DEFINITION")
        if not inspect.iscoroutinefunction(fn):
            raise ConfigError(
                f"action {name!r}: {getattr(fn, '__qualname__', fn)!r} must be an async function",
                code="ERR_TASK_ACTION_DEFINITION",
            )
        model = params if params is not None else _params_model_of(fn, name)
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise ConfigError(
                f"action {name!r}: params must be a pydantic model class", code="ERR_TASK_ACTION_DEFINITION"
            )
        if name in self._specs and not replace:
            raise ConfigError(
                f"action {name!r} is already registered (pass replace=True to override it)",
                code="ERR_TASK_DUPLICATE",
            )
        doc = (inspect.getdoc(fn) or "").strip().splitlines()
        spec = ActionSpec(
            name, fn, model, description if description is not None else (doc[0] if doc else "")
        )
        self._specs[name] = spec
        return spec

    def add(self, spec: ActionSpec, *, replace: bool = False) -> None:
        """Register a ready `ActionSpec`.

        Raises:
            ConfigError: as `register`.
        """
        self.register(spec.name, spec.fn, spec.params, description=spec.description, replace=replace)

    def action(
        self,
        name: str,
        *,
        params: type[BaseModel] | None = None,
        description: str | None = None,
        replace: bool = False,
    ) -> Callable[[F], F]:
        """Decorator form of `register`; returns the function unchanged.

        Raises:
            ConfigError: as `register`, when the decorated function is registered.
        """

        def decorate(fn: F) -> F:
            self.register(name, fn, params, description=description, replace=replace)
            return fn

        return decorate

    def unregister(self, name: str) -> None:
        """Remove an action (no error when it is absent)."""
        self._specs.pop(name, None)

    def get(self, name: str) -> ActionSpec | None:
        """The action named `name`, or None."""
        return self._specs.get(name)

    def names(self) -> list[str]:
        """The registered names, sorted."""
        return sorted(self._specs)

    def specs(self) -> list[ActionSpec]:
        """The registered actions, sorted by name."""
        return [self._specs[n] for n in self.names()]

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def copy(self) -> ActionRegistry:
        """An independent registry with the same actions."""
        return ActionRegistry(dict(self._specs))

    def load_entry_points(self, group: str = ENTRY_POINT_GROUP) -> list[str]:
        """Load the actions that installed packages declare in the entry point `group`.

        Returns:
            The names of the entry points loaded.

        Raises:
            ConfigError: `ERR_TASK_ACTION_PLUGIN` naming the entry point that failed to load or
                that names something other than a module, a callable or an `ActionSpec`.
        """
        loaded: list[str] = []
        for ep in _entry_points(group):
            try:
                obj = ep.load()
            except Exception as exc:
                raise ConfigError(
                    f"entry point {ep.name!r} ({ep.value}) in group {group!r} failed to load: "
                    f"{type(exc).__name__}: {_line(exc)}",
                    code="ERR_TASK_ACTION_PLUGIN",
                ) from None
            self.apply(obj, f"entry point {ep.name!r} ({ep.value})")
            loaded.append(ep.name)
        return loaded

    def apply(self, obj: object, label: str) -> None:
        """Add the actions `obj` provides: an `ActionSpec`, a list of them, an `ActionRegistry`,
        a callable `register(registry)`, or a module (importing it ran its `@action` decorators).

        Raises:
            ConfigError: `ERR_TASK_ACTION_PLUGIN` (naming `label`) when `obj` is none of those or
                its `register` fails.
        """
        if isinstance(obj, ActionSpec):
            self.add(obj, replace=True)
        elif isinstance(obj, ActionRegistry):
            for spec in obj.specs():
                self.add(spec, replace=True)
        elif isinstance(obj, list | tuple) and obj and all(isinstance(o, ActionSpec) for o in obj):
            for spec in obj:
                self.add(spec, replace=True)
        elif isinstance(obj, ModuleType):
            pass  # importing it ran its @action decorators
        elif callable(obj) and not isinstance(obj, type):
            try:
                obj(self)
            except ConfigError:
                raise
            except Exception as exc:
                raise ConfigError(
                    f"{label} failed: {type(exc).__name__}: {_line(exc)}", code="ERR_TASK_ACTION_PLUGIN"
                ) from None
        else:
            raise ConfigError(
                f"{label} must name a module, a callable register(registry), an ActionSpec (or a list "
                "of them) or an ActionRegistry",
                code="ERR_TASK_ACTION_PLUGIN",
            )


def _line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""


def _import_ref(ref: str, base_dir: Path | None) -> object:
    """The object `MODULE[:ATTR]` names; MODULE is a dotted module name or a `.py` file path."""
    target, _, attr = ref.partition(":")
    label = f"actions {ref!r}"
    if not target:
        raise ConfigError(f"{label}: give MODULE or MODULE:ATTR", code="ERR_TASK_ACTION_PLUGIN")
    try:
        if target.endswith(".py") or "/" in target:
            path = Path(target)
            if not path.is_absolute() and base_dir is not None:
                path = base_dir / path
            if not path.is_file():
                raise ConfigError(f"{label}: no file {str(path)!r}", code="ERR_TASK_ACTION_PLUGIN")
            digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
            name = f"toolbridge_actions_{path.stem}_{digest}"
            module = sys.modules.get(name)
            if module is None:
                spec = importlib.util.spec_from_file_location(name, path)
                if spec is None or spec.loader is None:
                    raise ConfigError(f"{label}: cannot load {str(path)!r}", code="ERR_TASK_ACTION_PLUGIN")
                module = importlib.util.module_from_spec(spec)
                sys.modules[name] = module
                try:
                    spec.loader.exec_module(module)
                except BaseException:
                    sys.modules.pop(name, None)
                    raise
        else:
            module = importlib.import_module(target)
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(
            f"{label}: importing {target!r} failed: {type(exc).__name__}: {_line(exc)}",
            code="ERR_TASK_ACTION_PLUGIN",
        ) from None
    if not attr:
        return module
    obj: object = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"{label}: {target!r} has no attribute {attr!r}", code="ERR_TASK_ACTION_PLUGIN")
        obj = getattr(obj, part)
    return obj


def registry_with(refs: Iterable[str], base_dir: Path | None = None) -> ActionRegistry:
    """The default registry plus the actions of `refs` (`serve-tasks --actions`, `actions:`).

    Each ref is `MODULE` or `MODULE:ATTR`: MODULE is a dotted module name (imported; its
    `@action` decorators register into the default registry) or a path to a `.py` file
    (relative to `base_dir`); ATTR names a callable `register(registry)`, an `ActionSpec`, a
    list of them or an `ActionRegistry`. The default registry itself gets only what the
    modules' decorators add; the rest goes into the copy returned.

    Raises:
        ConfigError: `ERR_TASK_ACTION_PLUGIN` naming the ref that cannot be imported or used.
    """
    objects = [(ref, _import_ref(ref, base_dir)) for ref in refs]
    registry = default_registry().copy()
    for ref, obj in objects:
        registry.apply(obj, f"actions {ref!r}")
    return registry


def _entry_points(group: str) -> Iterable[importlib.metadata.EntryPoint]:
    return importlib.metadata.entry_points(group=group)


_DEFAULT = ActionRegistry()
_default_lock = threading.Lock()
_default_ready = False


def action(
    name: str,
    *,
    params: type[BaseModel] | None = None,
    description: str | None = None,
    replace: bool = False,
    registry: ActionRegistry | None = None,
) -> Callable[[F], F]:
    """Register an async function as an action, in the default registry unless `registry` is given.

    ```python
    class ZoomParams(ActionParams):
        factor: float = 1.0

    @action("zoom")
    async def zoom(params: ZoomParams, ctx: ActionContext) -> None:
        page = await ctx.page()
        await page.evaluate("f => document.body.style.zoom = f", params.factor)
    ```

    Raises:
        ConfigError: `ERR_TASK_ACTION_DEFINITION` or `ERR_TASK_DUPLICATE` (see
            `ActionRegistry.register`), when the function is decorated.
    """
    target = registry if registry is not None else _DEFAULT
    return target.action(name, params=params, description=description, replace=replace)


def default_registry() -> ActionRegistry:
    """The default registry: built-in actions, `@action` registrations and entry point actions.

    The built-in modules are imported and the entry points loaded on the first call.

    Raises:
        ConfigError: `ERR_TASK_ACTION_PLUGIN` when an entry point fails to load (the next call
            tries again).
    """
    global _default_ready
    with _default_lock:
        if not _default_ready:
            from . import browser, builtin, tinyagent  # noqa: F401  (registering on import)

            _DEFAULT.load_entry_points()
            _default_ready = True
    return _DEFAULT
