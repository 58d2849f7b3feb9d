# 'onnxrt': the dynamo backend Zoo ships in zoo_runner.plugins.onnxrt, without Zoo (written by zoo triage)
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
NAME = 'onnxrt'

def _concrete(x: Any) -> Any:
    """A SymInt's value without adding a guard to dynamo's shape environment."""
    import torch
    if isinstance(x, torch.SymInt):
        try:
            from torch.fx.experimental.symbolic_shapes import optimization_hint
        except ImportError:
            return int(x.node.hint)
        return int(optimization_hint(x))
    return x

def _signature(args: list | tuple) -> tuple:
    import torch
    return tuple(((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else ('value', _concrete(a)) for a in args))

class OnnxGraph:
    """One dynamo graph as an ONNX model for the shapes of ``args``, run by ONNX Runtime.

    Two things torch.onnx's exporter does not carry, done here so the graph means what it does in
    PyTorch:

    - Numbers among the outputs. A dynamo graph can return Python numbers (a size it computed from a
      dynamic shape, which the fixed shapes here make a constant); the exporter fails on an int output
      (``'int' object has no attribute 'name'``; it skips ``None``). Only the tensors go through ONNX;
      the numbers are kept from the export's own trace and put back in their places.
    - In-place writes to inputs. A graph that writes into one of its inputs (``x[..] = ..`` on a
      tensor live across a graph break) is functionalised by the export, and the ONNX model drops
      the write. Such a graph is exported again returning the written inputs too, and each call
      copies them back into the caller's tensors.
    """

    def __init__(self, gm: Any, args: list | tuple) -> None:
        import torch
        self.tensor_at = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        fixed = {i: _concrete(a) for i, a in enumerate(args) if not isinstance(a, torch.Tensor)}
        tensors = tuple((args[i] for i in self.tensor_at))
        self.mutated: list[int] = []
        self.program, traced = _export(gm, self.tensor_at, fixed, len(args), tensors, self.mutated)
        self.mutated = _mutated_inputs(self.program.exported_program)
        if self.mutated:
            self.program, traced = _export(gm, self.tensor_at, fixed, len(args), tensors, self.mutated)
        if len(self.program.model.graph.inputs) != len(self.tensor_at):
            raise RuntimeError(f"the ONNX model takes {len(self.program.model.graph.inputs)} inputs for the graph's {len(self.tensor_at)} tensors")
        self.out_spec, self.constants = (traced['spec'], traced['constants'])
        self.n_outputs = self.out_spec.num_leaves
        self.program.initialize_inference_session(_cpu_session)

    def __call__(self, args: list | tuple) -> Any:
        from torch.utils._pytree import tree_unflatten
        tensors = tuple((args[i] for i in self.tensor_at))
        produced = list(self.program(tensors))
        n_written = len(self.mutated)
        if n_written:
            for j, value in zip(self.mutated, produced[-n_written:]):
                tensors[j].copy_(value)
            produced = produced[:-n_written]
        it = iter(produced)
        flat = [self.constants[i] if i in self.constants else next(it) for i in range(self.n_outputs)]
        return tree_unflatten(flat, self.out_spec)

def _export(gm: Any, tensor_at: list[int], fixed: dict, n: int, tensors: tuple, mutated: list[int]) -> tuple:
    """``gm`` with its non-tensor arguments fixed, exported to ONNX returning its tensor outputs and
    then the inputs at ``mutated``; with what the export's trace saw of the output's structure."""
    import torch
    from torch._guards import tracing
    from torch.utils._pytree import tree_flatten
    traced: dict[str, Any] = {}

    class Graph(torch.nn.Module):

        def forward(self, tensors: tuple) -> tuple:
            full = [fixed.get(i) for i in range(n)]
            for i, t in zip(tensor_at, tensors):
                full[i] = t
            leaves, traced['spec'] = tree_flatten(gm(*full))
            traced['constants'] = {i: _concrete(v) for i, v in enumerate(leaves) if not isinstance(v, torch.Tensor)}
            return tuple((v for v in leaves if isinstance(v, torch.Tensor))) + tuple((tensors[j] for j in mutated))
    logging.getLogger('torch.onnx._internal.exporter._registration').setLevel(logging.ERROR)
    with tracing(None), warnings.catch_warnings():
        warnings.simplefilter('ignore')
        program = torch.onnx.export(Graph(), (tensors,), dynamo=True, verbose=False, report=False)
    return (program, traced)

def _mutated_inputs(ep: Any) -> list[int]:
    """Positions (among the user inputs) of the inputs an exported program writes into."""
    from torch.export.graph_signature import InputKind, OutputKind
    names = [s.arg.name for s in ep.graph_signature.input_specs if s.kind == InputKind.USER_INPUT]
    written = {s.target for s in ep.graph_signature.output_specs if s.kind == OutputKind.USER_INPUT_MUTATION}
    return [j for j, name in enumerate(names) if name in written]

def _cpu_session(model: str | bytes) -> Any:
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(model, sess_options=options, providers=['CPUExecutionProvider'])

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

import torch._dynamo

if 'onnxrt' not in torch._dynamo.list_backends(exclude_tags=()):
    torch._dynamo.register_backend(name='onnxrt')(onnxrt_backend)
