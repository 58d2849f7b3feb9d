"""Backend specs parse as the SPEC says; unavailable backends fail with one clear line."""

from __future__ import annotations

import pytest

from zoo_runner.backends import BackendSpec, check_backend, load_plugins, resolve_auto
from zoo_runner.exceptions import BackendUnavailable, UnknownBackend


@pytest.mark.parametrize(
    "text, device, compiler, dtype",
    [
        ("neuron", "neuron", None, "float32"),
        ("neuron+neuron", "neuron", "neuron", "float32"),
        ("cuda+inductor", "cuda", "inductor", "float32"),
        ("cpu+inductor", "cpu", "inductor", "float32"),
        ("cpu@bfloat16", "cpu", None, "bfloat16"),
        ("xpu+aot_eager@float16", "xpu", "aot_eager", "float16"),
    ],
)
def test_spec_parses(text, device, compiler, dtype):
    spec = BackendSpec.parse(text)
    assert (spec.device, spec.compiler, spec.dtype) == (device, compiler, dtype)
    assert str(spec) == text.replace("@float32", "")


@pytest.mark.parametrize("bad", ["", "cpu+", "+inductor", "cpu@int7", "CPU!", "cpu+inductor@"])
def test_malformed_spec_is_refused(bad):
    with pytest.raises(UnknownBackend):
        BackendSpec.parse(bad)


def test_auto_falls_back_to_cpu_inductor_without_accelerators():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert str(resolve_auto()) == "cpu+inductor"


def test_cpu_backends_are_available():
    for spec in ("cpu", "cpu+aot_eager", "cpu+inductor"):
        check_backend(BackendSpec.parse(spec))


@pytest.mark.parametrize(
    "spec, words",
    [
        ("neuron", "backend neuron is not available here"),
        ("cuda", "backend cuda is not available here"),
        ("mps", "backend mps is not available here"),
    ],
)
def test_absent_devices_fail_with_one_clear_line(spec, words):
    import torch

    if spec == "cuda" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(BackendUnavailable) as info:
        check_backend(BackendSpec.parse(spec))
    assert words in str(info.value) and "\n" not in str(info.value)


def test_unknown_device_and_compiler():
    with pytest.raises(UnknownBackend, match="unknown device"):
        check_backend(BackendSpec.parse("warpdrive"))
    with pytest.raises(UnknownBackend, match="unknown compile backend 'nope'"):
        check_backend(BackendSpec.parse("cpu+nope"))


def test_plugins_register_compile_backends():
    load_plugins("tests.plugins.faulty_backends")
    check_backend(BackendSpec.parse("cpu+zoo_test_hang"))
    with pytest.raises(BackendUnavailable, match="cannot be imported"):
        load_plugins("no_such_plugin_module")
