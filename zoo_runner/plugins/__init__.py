"""Compile-backend plugins Zoo ships, one small module each, behind :mod:`zoo_runner.backends`.

Each module registers a :class:`zoo_runner.backends.CompilerPlugin` when imported and imports its
backend's package only when used, so it imports anywhere. :data:`zoo_runner.backends.BUILTIN_COMPILERS`
maps a compiler name to its module; it is imported the first time a spec names that compiler.

- :mod:`zoo_runner.plugins.openvino`: ``cpu+openvino`` (extra ``openvino``)
- :mod:`zoo_runner.plugins.onnxrt`: ``cpu+onnxrt`` (extra ``onnxruntime``)
"""
