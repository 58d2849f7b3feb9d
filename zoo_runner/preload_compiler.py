"""Imported once by a forkserver whose model processes compile (zoo_runner.launcher.COMPILER_PRELOAD).

torch.compile's compiler stack (AOTAutograd, inductor's FX compiler and its caches): about a second to import,
which every compiled model process paid again. Importing it reads no cache directory (``TORCHINDUCTOR_CACHE_DIR``
is read when a compile first asks, in the model process) and starts no thread or worker pool. An eager model
process never imports it.
"""

import torch._inductor.compile_fx  # noqa: F401
