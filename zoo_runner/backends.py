"""Backend specs (``DEVICE[+COMPILER][@DTYPE]``), device plugins and resolution.

Parsing is pure; resolution imports torch and checks what this machine really has.
Device support beyond what torch ships (``neuron`` through ``torch_neuronx``) lives in a small
registry of :class:`DevicePlugin` entries; ``ZOO_PLUGINS`` modules may add to it. Devices and
compile backends Zoo ships a plugin for (``xla``; ``openvino``, ``onnxrt``, ``openxla``:
:mod:`zoo_runner.plugins`) register a :class:`DevicePlugin` or :class:`CompilerPlugin` when a spec
first names them (:data:`BUILTIN_DEVICES`, :data:`BUILTIN_COMPILERS`).
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from .exceptions import BackendUnavailable, UnknownBackend

log = logging.getLogger(__name__)

AUTO_ORDER = ("neuron", "cuda", "xpu", "mps")
DTYPES = ("float32", "float16", "bfloat16", "float64")
_SPEC_RE = re.compile(r"^(?P<device>[a-z][a-z0-9_]*)(\+(?P<compiler>[A-Za-z0-9_.\-]+))?(@(?P<dtype>[a-z0-9]+))?$")


@dataclass(frozen=True)
class BackendSpec:
    """A backend as a user names it: ``DEVICE[+COMPILER][@DTYPE]``.

    ``device`` is a torch device type (``cpu``, ``cuda``) or one a :class:`DevicePlugin` registers
    (``neuron``, ``xla``); ``compiler`` is a ``torch.compile`` backend name (``inductor``,
    ``openvino``; None: eager); ``dtype`` is the dtype the model runs in (``float32`` unless
    ``@float16``, ``@bfloat16`` or ``@float64``). ``str(spec)`` gives the canonical text back
    (``cpu+inductor``; ``@float32`` is left out). Parsing checks the syntax only;
    :func:`check_backend` checks that this machine can run it.
    """

    device: str
    compiler: str | None = None
    dtype: str = "float32"

    @classmethod
    def parse(cls, text: str) -> BackendSpec:
        """The spec ``text`` names; ``auto`` resolves to the best device this machine has
        (:func:`resolve_auto`). Raises :class:`UnknownBackend` for text that does not parse or an
        unknown dtype."""
        text = (text or "").strip()
        if text == "auto":
            return resolve_auto()
        m = _SPEC_RE.match(text)
        if not m:
            raise UnknownBackend(
                f"unknown backend {text!r}: expected DEVICE[+COMPILER][@DTYPE], "
                "e.g. cpu, cpu+inductor, neuron+neuron, cuda@bfloat16"
            )
        dtype = m.group("dtype") or "float32"
        if dtype not in DTYPES:
            raise UnknownBackend(f"unknown backend {text!r}: dtype {dtype!r} is not one of {', '.join(DTYPES)}")
        return cls(m.group("device"), m.group("compiler"), dtype)

    def __str__(self) -> str:
        s = self.device
        if self.compiler:
            s += f"+{self.compiler}"
        if self.dtype != "float32":
            s += f"@{self.dtype}"
        return s


@dataclass
class DevicePlugin:
    """How Zoo talks to one device type beyond plain torch.

    ``package`` is imported before the device is used (it registers the device with torch);
    ``fallback_tracker`` returns an object with ``clear()`` and ``collect() -> list[str]`` that
    reports the ATen ops that ran on CPU instead of the device; ``precision`` declares the
    device's compute precision for a spec on this machine and configuration (see
    :func:`declared_precision`). ``install_hint`` follows "not installed" when ``package`` is
    missing. ``device_module`` is for a package that gives torch no ``torch.<device>`` module:
    called once after ``package`` imports, it returns the module registered as ``torch.<device>``
    (``is_available()``, and ``synchronize()``, which Zoo calls after each run it times).
    ``package_dist`` is the distribution whose version goes on every row (``versions``).
    ``fork_safe`` False: the device's runtime refuses a process forked from one where anything touched
    it (CUDA: "Cannot re-initialize CUDA in forked subprocess"), so its model processes are started
    fresh (spawned), never forked from the warm forkserver.
    ``backend`` and ``extra`` are the plugin's own: Zoo reads neither.

    What the parent sets up for the device's model processes (:mod:`zoo_runner.sandbox`,
    :mod:`zoo_runner.device_claims`; :mod:`zoo_runner.plugins.neuron` uses them all):
    ``env_prefixes``: variables only this device's model processes receive (any other model process gets
    none of them); ``model_env``: variables set for them whatever the parent's environment says;
    ``cache_dirs``: {variable: directory} in the writer's namespace of the compile cache, ``run_dirs``: in
    the run's own scratch, both made writable for the model process (the parent's own values never pass);
    ``device_nodes``: a glob of the device nodes: its model processes get their group as their only
    supplementary group, every other model process sees ``/dev/null`` in their place; ``cores_var`` and
    ``core_sets``: the variable naming the cores a process may use and the host's core sets, one claimed
    host-wide per model process; ``parent_check``: (available, why) asked in the parent instead of
    ``is_available()`` (which would start the device's runtime there); ``custom_code_refusal``: why custom
    code does not run on this device (None: it may); ``setup_details``: what the parent set up, for the
    row's ``details.device_setup``; ``cold_compile_s``: seconds added to a compiled model's timeout while
    its compile cache is cold; ``preconditions``: the machine's checks for a first run, each
    ``{check, ok, detail, fix}`` (``zoo doctor --backend``); ``visible_dirs``: directories its model
    processes see, read-only, where the sandbox hides their parent (the vendor's runtime under /opt).

    Register one with :func:`register_device`, from a module Zoo imports: one named in
    ``ZOO_PLUGINS``, or one listed in :data:`BUILTIN_DEVICES` (:mod:`zoo_runner.plugins.xla`).
    """

    device: str
    package: str | None = None
    package_dist: str | None = None
    fallback_tracker: Callable[[], FallbackTracker] | None = None
    backend: Callable[..., Callable] | None = None
    precision: Callable[[BackendSpec], str | None] | None = None
    extra: dict = field(default_factory=dict)
    install_hint: str | None = None
    device_module: Callable[[], object] | None = None
    fork_safe: bool = True
    env_prefixes: tuple[str, ...] = ()
    model_env: dict[str, str] = field(default_factory=dict)
    cache_dirs: dict[str, str] = field(default_factory=dict)
    run_dirs: dict[str, str] = field(default_factory=dict)
    device_nodes: str | None = None
    cores_var: str | None = None
    core_sets: Callable[[], list[str]] | None = None
    parent_check: Callable[[], tuple[bool, str]] | None = None
    custom_code_refusal: Callable[[], str | None] | None = None
    setup_details: Callable[[BackendSpec], dict] | None = None
    cold_compile_s: Callable[[], float] | None = None
    preconditions: Callable[[], list[dict]] | None = None
    visible_dirs: tuple[str, ...] = ()


@dataclass
class CompilerPlugin:
    """What Zoo knows about a ``torch.compile`` backend beyond its name in dynamo's registry.

    ``package_dist`` is the distribution whose version goes on every row; ``precision`` declares
    the compiler's compute precision for a spec (see :func:`declared_precision`). ``packages`` are
    imported before the backend is used (importing them registers it with dynamo); where one is
    missing the backend is unavailable, with ``pip install -e .[EXTRA]`` as the hint (``extra``).
    ``compile_options`` returns the ``options`` passed to ``torch.compile`` for a spec (None: none),
    and raises :class:`UnknownBackend` for a setting it cannot honour; it configures the backend,
    never what Zoo judges it against (``--precision`` does that). ``fallback_tracker`` is as for a
    :class:`DevicePlugin`: what the compiler handed back to PyTorch instead of compiling.
    ``backend`` is a dynamo backend the plugin ships itself, registered under ``name`` when a spec
    is checked unless dynamo already has one of that name. ``dynamic`` is passed to ``torch.compile``
    (None: torch's default; False for a compiler that rejects dynamic shapes, TorchNeuron's).

    Register one with :func:`register_compiler`, from a module listed in :data:`BUILTIN_COMPILERS`
    (:mod:`zoo_runner.plugins.onnxrt`, :mod:`zoo_runner.plugins.openvino`) or named in
    ``ZOO_PLUGINS``.
    """

    name: str
    package_dist: str | None = None
    precision: Callable[[BackendSpec], str | None] | None = None
    packages: tuple[str, ...] = ()
    extra: str | None = None
    compile_options: Callable[[BackendSpec], dict | None] | None = None
    fallback_tracker: Callable[[], FallbackTracker] | None = None
    backend: Callable[..., Callable] | None = None
    dynamic: bool | None = None


def cache_verdict(hits: int, misses: int) -> str | None:
    """``details.compile_cache`` from a compile cache's counts: ``hit`` when every graph came from
    the cache, ``miss`` when none did, ``partial`` between; None when it counted nothing (off)."""
    if not hits and not misses:
        return None
    return "hit" if not misses else "miss" if not hits else "partial"


class FallbackTracker:
    """What a plugin's ``fallback_tracker`` returns: the ops of one run that did not run on the
    backend. The engine calls ``clear()`` before the backend's forward and ``collect()`` after it;
    the names go on the row (``fallback_ops``) and a non-empty list makes a passing model
    ``pass_with_fallback``."""

    def clear(self) -> None:  # pragma: no cover - interface
        """Forget what earlier runs recorded."""

    def collect(self) -> list[str]:  # pragma: no cover - interface
        """The ops that fell back since :meth:`clear`, as ATen op names, sorted and unique."""
        return []

    def report(self) -> dict:
        """Anything beyond the op names worth keeping on the row (``details.fallback_report``)."""
        return {}

    def backend_share(self) -> float | None:
        """Optional: the fraction of the graphs' ops the backend itself executed since :meth:`clear`
        (``details.backend_share``); 0 makes the row ``compile_error`` / ``backend_fell_back``.
        None where the tracker cannot tell."""
        return None

    def compile_cache(self) -> str | None:
        """Optional: whether the backend's own persistent compile cache served this run's graphs
        (``hit``, ``miss``, ``partial``) for ``details.compile_cache``; None where it does not say."""
        return None


DEVICE_PLUGINS: dict[str, DevicePlugin] = {}
COMPILER_PLUGINS: dict[str, CompilerPlugin] = {}

# Compile backends Zoo ships a plugin for: compiler name -> the module that registers its
# CompilerPlugin. Imported only when a spec names that compiler; a plugin a ZOO_PLUGINS module
# registered under the same name first is kept. BUILTIN_DEVICES: the same for devices.
BUILTIN_COMPILERS = {
    "openvino": "zoo_runner.plugins.openvino",
    "onnxrt": "zoo_runner.plugins.onnxrt",
    "openxla": "zoo_runner.plugins.xla",
    "neuron": "zoo_runner.plugins.neuron",
}
BUILTIN_DEVICES = {"xla": "zoo_runner.plugins.xla", "neuron": "zoo_runner.plugins.neuron"}
# Compile backends that hand what they cannot convert to inductor: OpenVINO's compiles such a graph
# (or partition) with ``compile_fx``. Their model processes compile C++ with inductor too, so they get
# Zoo's shared inductor headers and ISA probes, as ``+inductor`` does (zoo_runner.shared_headers).
INDUCTOR_FALLBACK_COMPILERS = frozenset({"openvino"})


def register_device(plugin: DevicePlugin) -> None:
    """Register (or replace) the :class:`DevicePlugin` of ``plugin.device``; call it at import
    time of the plugin's module. A spec naming that device then resolves to it."""
    DEVICE_PLUGINS[plugin.device] = plugin


def register_compiler(plugin: CompilerPlugin) -> None:
    """Register (or replace) the :class:`CompilerPlugin` of compile backend ``plugin.name``; call it
    at import time of the plugin's module. A spec ``DEVICE+<name>`` then resolves to it."""
    COMPILER_PLUGINS[plugin.name] = plugin


def device_plugin(device: str | None) -> DevicePlugin | None:
    """The :class:`DevicePlugin` registered for ``device``, importing Zoo's own on first use."""
    if not device:
        return None
    if device not in DEVICE_PLUGINS and device in BUILTIN_DEVICES:
        importlib.import_module(BUILTIN_DEVICES[device])
    return DEVICE_PLUGINS.get(device)


def compiler_plugin(name: str | None) -> CompilerPlugin | None:
    """The :class:`CompilerPlugin` registered for compile backend ``name``, importing Zoo's own on first use."""
    if not name:
        return None
    if name not in COMPILER_PLUGINS and name in BUILTIN_COMPILERS:
        importlib.import_module(BUILTIN_COMPILERS[name])
    return COMPILER_PLUGINS.get(name)


def compile_options(spec: BackendSpec) -> dict | None:
    """The ``options`` for ``torch.compile(..., backend=spec.compiler)``: the compiler plugin's, else None."""
    plugin = compiler_plugin(spec.compiler)
    return plugin.compile_options(spec) if plugin and plugin.compile_options else None


def cuda_precision(spec: BackendSpec) -> str:
    """TF32 wherever torch lets CUDA use it: matmuls (``allow_tf32``, or a float32 matmul precision
    other than "highest") or cuDNN convolutions (``cudnn.allow_tf32``, on by default)."""
    import torch

    matmul = torch.backends.cuda.matmul.allow_tf32 or torch.get_float32_matmul_precision() != "highest"
    return "tf32" if matmul or torch.backends.cudnn.allow_tf32 else "fp32"


# Measured on an H200 machine: every model process forked from the forkserver failed "Cannot re-initialize
# CUDA in forked subprocess" (torch marks a process poisoned for fork once anything asks CUDA for devices).
register_device(DevicePlugin("cuda", precision=cuda_precision, fork_safe=False))


def declared_precision(spec: BackendSpec) -> str | None:
    """The compute precision the backend's plugins declare, or None where none declares one.

    The compiler computes what it compiles, so its declaration wins over the device's. A plugin
    declares by setting ``precision`` on its :class:`DevicePlugin` or :class:`CompilerPlugin`: a
    function of the spec that returns ``"fp32"``, ``"tf32"``, ``"bf16"``, ``"fp16"`` or None.
    """
    for plugin in (compiler_plugin(spec.compiler), device_plugin(spec.device)):
        if plugin is not None and plugin.precision is not None:
            declared = plugin.precision(spec)
            if declared is not None:
                return declared
    return None


def fork_safe(backend: str) -> bool:
    """Whether a model process for ``backend`` may be forked from the warm forkserver, and given an
    address-space limit (:class:`DevicePlugin` ``fork_safe``). True for ``cpu`` and for a device whose
    plugin this process knows and says so; False for a device whose runtime refuses a forked child and
    reserves address space far beyond what it uses (cuda), for ``auto`` (not resolved in the parent: that
    would import torch and ask for devices here), for a device only a plugin this process has not loaded
    knows (``ZOO_PLUGINS`` are not imported into the parent for this: a plugin's import may change the
    process) and for a backend that does not resolve. Spawning is the safe default; the model process
    reports any problem as its row."""
    if not backend or backend.strip() == "auto":
        return False
    try:
        device = BackendSpec.parse(backend).device
        plugin = device_plugin(device)
    except Exception:
        return False
    if plugin is not None:
        return plugin.fork_safe
    return device == "cpu"


def device_env_prefixes() -> dict[str, tuple[str, ...]]:
    """{device: the variable prefixes only its model processes receive}. Zoo's neuron plugin is loaded for
    it (importing it changes nothing; the xla plugin's import sets PJRT_DEVICE, so it is not loaded here)."""
    device_plugin("neuron")
    return {d: p.env_prefixes for d, p in DEVICE_PLUGINS.items() if p.env_prefixes}


def load_plugins(names: str | None = None) -> list[str]:
    """Import the modules named in ``ZOO_PLUGINS`` (comma-separated). Returns their names."""
    from .settings import settings  # pydantic: only where plugins are loaded, not on `import zoo_runner`

    names = settings().plugins if names is None else names
    loaded = []
    for name in [n.strip() for n in names.split(",") if n.strip()]:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise BackendUnavailable(f"plugin {name!r} named in ZOO_PLUGINS cannot be imported: {exc}") from exc
        loaded.append(name)
    return loaded


def _import_device_package(device: str) -> None:
    plugin = device_plugin(device)
    if plugin and plugin.package:
        try:
            importlib.import_module(plugin.package)
        except ImportError as exc:
            hint = f": {plugin.install_hint}" if plugin.install_hint else ""
            raise BackendUnavailable(
                f"backend {device} is not available here: package {plugin.package} "
                f"is not installed ({exc.__class__.__name__}){hint}"
            ) from exc
        if plugin.device_module is not None:
            import torch

            if getattr(torch, device, None) is None:
                torch._register_device_module(device, plugin.device_module())


def device_available(device: str) -> tuple[bool, str]:
    """(available, why-not) for a torch device type."""
    import torch

    if device == "cpu":
        return True, ""
    try:
        _import_device_package(device)
    except BackendUnavailable as exc:
        return False, str(exc)
    mod = getattr(torch, device, None)
    if mod is None:
        try:
            torch.device(device)
        except RuntimeError as exc:
            return False, f"backend {device} is not available here: torch knows no device {device!r} ({exc})"
        return False, f"backend {device} is not available here: torch has no {device!r} device module"
    is_available = getattr(mod, "is_available", None)
    if is_available is None and device == "mps":
        is_available = torch.backends.mps.is_available
    try:
        ok = bool(is_available()) if is_available else False
    except Exception as exc:  # a broken driver is "not available", with the reason
        return False, f"backend {device} is not available here: {exc}"
    if not ok:
        return False, f"backend {device} is not available here: torch.{device}.is_available() is False"
    return True, ""


def _import_compiler_packages(spec: BackendSpec, plugin: CompilerPlugin) -> None:
    for package in plugin.packages:
        try:
            importlib.import_module(package)
        except ImportError as exc:
            top = package.split(".")[0]
            missing = isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] == top
            why = (
                f"{top} is not installed"
                if missing
                else f"{package} cannot be imported ({type(exc).__name__}: "
                f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''})"
            )
            hint = (
                f": pip install -e .[{plugin.extra}] (or bash scripts/setup.sh {plugin.extra})" if plugin.extra else ""
            )
            raise BackendUnavailable(f"backend {spec} is not available here: {why}{hint}") from exc


def _torch_knows_device(device: str) -> bool:
    import torch

    try:
        torch.device(device)
        return True
    except RuntimeError:
        return False


def compiler_available(compiler: str) -> tuple[bool, str]:
    """(available, why-not) for a ``torch.compile`` backend name: whether dynamo's registry has it."""
    import torch._dynamo

    names = set(torch._dynamo.list_backends(exclude_tags=()))
    if compiler in names:
        return True, ""
    shown = {n for n in names if not n.upper().endswith("_TESTING_ONLY")}  # torch's own test doubles: not offered
    return False, (
        f"unknown compile backend {compiler!r}{_did_you_mean(compiler, shown, compiler)}: "
        f"torch.compile knows {', '.join(sorted(shown))}"
    )


# torch's own device types and the torch.compile backends torch ships, by name: what a stored
# spec may name without any plugin (see spec_problem; checked without importing torch)
TORCH_DEVICES = ("cpu", "cuda", "xpu", "mps", "hip", "hpu", "mtia", "maia", "meta", "lazy")
TORCH_COMPILERS = (
    "inductor",
    "eager",
    "aot_eager",
    "aot_eager_decomp_partition",
    "aot_eager_default_partitioner",
    "cudagraphs",
    "tvm",
    "ts",
    "aot_ts",
)


def spec_problem(text: str) -> str | None:
    """Why ``text`` cannot name stored results, or None: it does not parse, it is ``auto`` (resolved
    only where a model runs), or it names a device or compile backend that neither torch nor Zoo's
    plugin registry knows (a device plugin with a package counts as a compiler: ``neuron+neuron``).

    Names are checked, not availability: nothing is imported, so a host without the backend's
    packages (an API server) still accepts a spec another machine ran.
    """
    text = (text or "").strip()
    if text == "auto":
        return "backend 'auto' is resolved only where a model runs: name a backend, e.g. cpu+inductor"
    devices = {*TORCH_DEVICES, *AUTO_ORDER, *DEVICE_PLUGINS, *BUILTIN_DEVICES}
    device_packages = {d for d, plugin in DEVICE_PLUGINS.items() if plugin.package}  # torch_neuronx registers "neuron"
    compilers = {*TORCH_COMPILERS, *COMPILER_PLUGINS, *BUILTIN_COMPILERS, *device_packages}
    try:
        spec = BackendSpec.parse(text)
    except UnknownBackend as exc:
        hint = " (in a URL, write '+' as %2B: a bare '+' reads as a space)" if " " in text else ""
        if text.lower() != text and spec_problem(text.lower()) is None:  # `CPU+Inductor`: names are lowercase
            hint = f" (did you mean {text.lower()!r}?)"
        elif text.lower() != text and "did you mean" in (spec_problem(text.lower()) or ""):  # `OpenVINO`
            return spec_problem(text.lower())
        return f"{exc}{hint}"
    if spec.device not in devices and not spec.compiler and spec.device.lower() in compilers - devices:
        full = str(BackendSpec("cpu", spec.device.lower(), spec.dtype))  # `openvino`: a compiler, run on the CPU
        return (
            f"unknown device {spec.device!r} in backend {text!r} (did you mean {full!r}?): {spec.device.lower()!r} "
            "is a compile backend; a backend is DEVICE[+COMPILER][@DTYPE]"
        )
    if spec.device not in devices:
        return (
            f"unknown device {spec.device!r} in backend {text!r}{_did_you_mean(spec.device, devices, str(spec))}: "
            f"known devices are {', '.join(sorted(devices))}"
        )
    if spec.compiler and spec.compiler not in compilers:
        return (
            f"unknown compile backend {spec.compiler!r} in backend {text!r}"
            f"{_did_you_mean(spec.compiler, compilers, str(spec))}: "
            f"known compile backends are {', '.join(sorted(compilers))}"
        )
    return None


def _closest(word: str, known: set[str]) -> str | None:
    import difflib

    same = [k for k in sorted(known) if k.lower() == word.lower()]  # `OpenVINO`: the name, cased as it is
    if same:
        return same[0]
    close = difflib.get_close_matches(word, sorted(known), n=1, cutoff=0.6)
    return close[0] if close else None


def _did_you_mean(word: str, known: set[str], spec: str) -> str:
    """`` (did you mean 'cpu+inductor'?)`` for the closest known name, the spec rewritten with it
    (the device or the compiler, whichever ``word`` is)."""
    close = _closest(word, known)
    if not close:
        return ""
    try:
        parsed = BackendSpec.parse(spec)
        fixed = str(
            dataclasses.replace(parsed, device=close)
            if parsed.device == word
            else dataclasses.replace(parsed, compiler=close)
        )
    except Exception:
        fixed = close
    return f" (did you mean {fixed!r}?)"


def typo_problem(text: str) -> str | None:
    """:func:`spec_problem`, but only where it is surely a typo: the unknown name is close to a
    known one, and no installed package registers it (a ``torch_dynamo_backends`` entry point, a
    ``torch_<device>`` module). Checked without importing torch, so a typo answers at once; any
    other unknown name is left to torch's own check (:func:`check_backend`)."""
    problem = spec_problem(text)
    if problem is None or "did you mean" not in problem:
        return problem if problem and "unknown backend" in problem else None  # a syntax error: surely wrong
    import importlib.util
    from importlib.metadata import entry_points

    try:
        spec = BackendSpec.parse(text)
    except UnknownBackend:  # `OpenVINO`, `CPU+Inductor`: names are lowercase, surely a typo
        return problem
    if spec.compiler and spec.compiler in {e.name for e in entry_points(group="torch_dynamo_backends")}:
        return None
    try:
        if importlib.util.find_spec(f"torch_{spec.device}") is not None:  # torch_npu registers "npu"
            return None
    except (ImportError, ValueError):
        pass
    return problem


def resolve_auto() -> BackendSpec:
    """What ``auto`` means on this machine: the first available device of :data:`AUTO_ORDER`, else
    ``cpu+inductor`` (``ZOO_PLUGINS`` loaded first, so a plugin's device counts)."""
    load_plugins()
    for device in AUTO_ORDER:
        plugin = device_plugin(device)
        # a device whose runtime must not start in the asking process is asked its parent_check (installed)
        ok, _ = plugin.parent_check() if plugin is not None and plugin.parent_check else device_available(device)
        if ok:
            return BackendSpec(device)
    return BackendSpec("cpu", "inductor")


def check_backend(spec: BackendSpec, parent: bool = False) -> None:
    """Raise a one-line error unless ``spec`` can run on this machine. ``parent``: asked by a process
    that only starts model processes, where a device whose plugin has a ``parent_check`` is asked that
    instead (its runtime must not start there: the Neuron runtime would take every NeuronCore); its
    compiler is then the model process's to check."""
    plugin = device_plugin(spec.device)
    if plugin is None and not _torch_knows_device(spec.device):
        raise UnknownBackend(
            f"unknown device {spec.device!r} in backend {spec}: not a torch device type and no plugin registers it"
        )
    if parent and plugin is not None and plugin.parent_check is not None:
        ok, why = plugin.parent_check()
        if not ok:
            raise BackendUnavailable(why)
        return
    ok, why = device_available(spec.device)
    if not ok:
        raise BackendUnavailable(why)
    if spec.compiler:
        plugin = compiler_plugin(spec.compiler)
        if plugin is not None:
            _import_compiler_packages(spec, plugin)
            if plugin.backend is not None:
                from torch._dynamo import list_backends, register_backend

                if plugin.name not in list_backends(exclude_tags=()):
                    register_backend(plugin.backend, name=plugin.name)
        ok, why = compiler_available(spec.compiler)
        if not ok:
            raise UnknownBackend(why)
        compile_options(spec)  # a setting the compiler cannot honour fails here, in one line


def fallback_tracker(device: str, compiler: str | None = None) -> FallbackTracker | None:
    """The compiler plugin's tracker where it has one (it knows what it did not compile), else the device's."""
    for plugin in (compiler_plugin(compiler), device_plugin(device)):
        if plugin is not None and plugin.fallback_tracker:
            return plugin.fallback_tracker()
    return None


def backend_package_versions(device: str | None, compiler: str | None = None) -> dict[str, str]:
    """{distribution: version} of the backend's packages (the device plugin's and the compiler
    plugin's ``package_dist``), read from installed metadata: the packages are not imported."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str] = {}
    pkg = backend_package_version(device) if device else None
    if pkg:
        out[pkg[0]] = pkg[1]
    plugin = compiler_plugin(compiler)
    if plugin is not None and plugin.package_dist:
        try:
            out[plugin.package_dist] = version(plugin.package_dist)
        except PackageNotFoundError:
            pass
    return out


def backend_package_version(device: str) -> tuple[str, str] | None:
    """(distribution, version) of the device plugin's ``package_dist``, from installed metadata (else
    the imported package's ``__version__``); None without a plugin, a ``package_dist`` or a version."""
    plugin = device_plugin(device)
    if not plugin or not plugin.package_dist:
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        return plugin.package_dist, version(plugin.package_dist)
    except PackageNotFoundError:
        mod = sys.modules.get(plugin.package or "")
        v = getattr(mod, "__version__", None)
        return (plugin.package_dist, str(v)) if v else None
