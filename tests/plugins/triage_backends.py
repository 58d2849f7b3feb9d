"""Two small compile backends with one known bug each, for the triage tests (plain torch: a repro
imports this module to register them, nothing of Zoo's):

* ``zoo_test_offop``: AOTAutograd, then every ``aten.gelu`` output scaled by 1.1 (one ATen op of
  BertModel computed about 10 % wrong); ``ZOO_TEST_OFFOP_FIXED=1`` removes the bug.
* ``zoo_test_raiseop``: refuses, while compiling, any graph with an ``aten.gelu`` in it;
  ``ZOO_TEST_RAISEOP_FIXED=1`` removes the bug.
* ``zoo_test_rawlinear``: lowers the graph dynamo hands it itself (no AOTAutograd) and has no
  lowering for ``torch.nn.functional.linear``: the failure is in a torch-level graph and gone once
  that graph is lowered to ATen (``aten.addmm``), as OpenVINO's are; ``ZOO_TEST_RAWLINEAR_FIXED=1``
  removes the bug.
"""

from __future__ import annotations

import os

import torch
from torch._dynamo import register_backend
from torch._dynamo.backends.common import aot_autograd

GELU = torch.ops.aten.gelu.default


def _scale_gelu(gm: torch.fx.GraphModule, example_inputs):
    if os.environ.get("ZOO_TEST_OFFOP_FIXED") != "1":
        for node in list(gm.graph.nodes):
            if node.op == "call_function" and node.target is GELU:
                with gm.graph.inserting_after(node):
                    scaled = gm.graph.call_function(torch.ops.aten.mul.Tensor, (node, 1.1))
                node.replace_all_uses_with(scaled, delete_user_cb=lambda u, s=scaled: u is not s)
        gm.graph.lint()
        gm.recompile()
    return gm


zoo_test_offop = register_backend(name="zoo_test_offop")(aot_autograd(fw_compiler=_scale_gelu))


def _refuse_gelu(gm: torch.fx.GraphModule, example_inputs):
    if os.environ.get("ZOO_TEST_RAISEOP_FIXED") == "1":
        return gm
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is GELU:
            raise NotImplementedError("zoo_test_raiseop has no lowering for aten.gelu.default")
    return gm


zoo_test_raiseop = register_backend(name="zoo_test_raiseop")(aot_autograd(fw_compiler=_refuse_gelu))


def _refuse_linear(gm: torch.fx.GraphModule, example_inputs):
    if os.environ.get("ZOO_TEST_RAWLINEAR_FIXED") == "1":
        return gm
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is torch._C._nn.linear:
            raise NotImplementedError("zoo_test_rawlinear has no lowering for torch.nn.functional.linear")
    return gm


zoo_test_rawlinear = register_backend(name="zoo_test_rawlinear")(_refuse_linear)
