"""``cpu+onnxrt``: the model's dynamo graphs exported to ONNX and run by ONNX Runtime (extra ``onnxruntime``).

torch shipped an ``onnxrt`` dynamo backend until 2.8; it went with the legacy ONNX exporter
(pytorch#158262: ``torch/_dynamo/backends/onnxrt.py`` is a commented-out placeholder since 2.9).
So this plugin ships one, :func:`onnxrt_backend`, registered under that name when a spec is
checked, built on what torch keeps: each graph dynamo captures is exported with
``torch.onnx.export(..., dynamo=True)`` (onnxscript, onnx) and run by an
``onnxruntime.InferenceSession`` on its CPU execution provider. Where torch still has its own
(torch < 2.9), that one is used.

- All or nothing: a graph ONNX cannot express is a ``compile_error``; nothing falls back to PyTorch.
- Static shapes: a graph is exported for the shapes (and integer arguments) it is called with;
  a dynamo graph with dynamic shapes is exported again for each new shape.
- Precision: fp32. ONNX Runtime's CPU provider computes float graphs in fp32.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from typing import Any

from ..backends import CompilerPlugin, register_compiler

NAME = "onnxrt"


def _concrete(x: Any) -> Any:
    """A SymInt's value without adding a guard to dynamo's shape environment."""
    import torch

    if isinstance(x, torch.SymInt):
        try:
            from torch.fx.experimental.symbolic_shapes import optimization_hint
        except ImportError:  # older torch
            return int(x.node.hint)
        return int(optimization_hint(x))
    return x


def _signature(args: list | tuple) -> tuple:
    import torch

    return tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else ("value", _concrete(a)) for a in args)


class OnnxGraph:
    """One dynamo graph as an ONNX model for the shapes of ``args``, run by ONNX Runtime."""

    def __init__(self, gm: Any, args: list | tuple) -> None:
        import torch
        from torch._guards import tracing
        from torch.export.graph_signature import ConstantArgument, OutputKind

        tensor_at = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        fixed = {i: _concrete(a) for i, a in enumerate(args) if not isinstance(a, torch.Tensor)}
        n = len(args)

        class Graph(torch.nn.Module):  # the graph with its non-tensor arguments fixed
            def forward(self, tensors: tuple) -> Any:
                full = [fixed.get(i) for i in range(n)]
                for i, t in zip(tensor_at, tensors):
                    full[i] = t
                return gm(*full)

        logging.getLogger("torch.onnx._internal.exporter._registration").setLevel(
            logging.ERROR
        )  # "torchvision is not installed"
        with tracing(None), warnings.catch_warnings():  # exported apart from dynamo's own tracing context
            warnings.simplefilter("ignore")
            self.program = torch.onnx.export(
                Graph(), (tuple(args[i] for i in tensor_at),), dynamo=True, verbose=False, report=False
            )
        if len(self.program.model.graph.inputs) != len(tensor_at):
            raise RuntimeError(
                f"the ONNX model takes {len(self.program.model.graph.inputs)} "
                f"inputs for the graph's {len(tensor_at)} tensors"
            )
        ep = self.program.exported_program
        user = [s for s in ep.graph_signature.output_specs if s.kind == OutputKind.USER_OUTPUT]
        self.constants = {i: s.arg.value for i, s in enumerate(user) if isinstance(s.arg, ConstantArgument)}
        self.n_outputs = len(user)
        self.out_spec = ep.call_spec.out_spec
        self.tensor_at = tensor_at
        self.program.initialize_inference_session(_cpu_session)

    def __call__(self, args: list | tuple) -> Any:
        from torch.utils._pytree import tree_unflatten

        produced = iter(self.program(tuple(args[i] for i in self.tensor_at)))
        flat = [self.constants[i] if i in self.constants else next(produced) for i in range(self.n_outputs)]
        return tree_unflatten(flat, self.out_spec)


def _cpu_session(model: str | bytes) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3  # errors only
    return ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])


def onnxrt_backend(gm: Any, example_inputs: list, **options: Any) -> Callable[..., Any]:
    """A dynamo backend: ``gm`` exported to ONNX now (what ONNX cannot express fails compilation),
    again for each new shape it is called with."""
    from torch._dynamo.backends.common import fake_tensor_unsupported

    graphs: dict[tuple, OnnxGraph] = {}

    def graph_for(args: list | tuple) -> OnnxGraph:
        key = _signature(args)
        if key not in graphs:
            graphs[key] = OnnxGraph(gm, args)
        return graphs[key]

    fake_tensor_unsupported(lambda _gm, inputs: graph_for(inputs))(gm, example_inputs)

    def run(*args: Any) -> Any:
        return graph_for(args)(args)

    return run


register_compiler(
    CompilerPlugin(
        NAME,
        package_dist="onnxruntime",
        precision=lambda spec: "fp32",
        packages=("onnxruntime", "onnxscript", "onnx"),
        extra="onnxruntime",
        backend=onnxrt_backend,  # registered with dynamo as "onnxrt" unless torch has its own (< 2.9)
    )
)
