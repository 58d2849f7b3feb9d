"""A compile backend with a random number generator of its own, as a device has (XLA's, Neuron's) and
as Inductor's Philox streams are: every call of the compiled graph draws from a generator seeded
apart from the CPU's, so a forward that samples (dropout kept on at inference, noise) gets other
numbers than the CPU reference got from the same ``torch.manual_seed``. Everything else is computed
exactly as on the CPU. Loaded through ``ZOO_PLUGINS``.

- ``zoo_own_generator``: the FX graph run eagerly after ``torch.manual_seed(OWN_SEED + calls)``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import torch
from torch._dynamo import register_backend

OWN_SEED = 2**31 - 1
_calls = itertools.count()


def own_generator(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    def run(*args):
        torch.manual_seed(OWN_SEED + next(_calls))
        return gm.forward(*args)

    return run


BACKEND = register_backend(own_generator, name="zoo_own_generator")
