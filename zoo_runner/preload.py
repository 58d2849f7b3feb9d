"""Imported once by the forkserver so each forked model process starts warm.

Imports only: running any torch op here would start thread pools that do not survive fork.
"""

import torch  # noqa: F401

# torch.compile's compiler stack (AOTAutograd, inductor's FX compiler and its caches): about a second
# to import, which every compiled model process paid again. Importing it reads no cache directory
# (``TORCHINDUCTOR_CACHE_DIR`` is read when a compile first asks, in the model process) and starts
# no thread or worker pool.
import torch._inductor.compile_fx  # noqa: F401
import transformers  # noqa: F401
import transformers.modeling_utils  # noqa: F401

import zoo_runner.engine  # noqa: F401
