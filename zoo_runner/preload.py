"""Imported once by the forkserver so each forked model process starts warm.

Imports only: running any torch op here would start thread pools that do not survive fork. The compiler
stack is zoo_runner.preload_compiler, preloaded beside this one for a backend that compiles.
"""

import torch  # noqa: F401
import transformers  # noqa: F401
import transformers.modeling_utils  # noqa: F401

import zoo_runner.engine  # noqa: F401
