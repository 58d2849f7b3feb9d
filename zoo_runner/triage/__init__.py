"""Triage: whose bug a failure is, and the smallest standalone program that shows it.

Runs in the (sandboxed) model process after a failing validation (:mod:`.ladder`): the attribution
ladder peels the stack back (dynamo alone, dynamo + AOTAutograd, the backend), the failing FX
graph is captured and minified with torch's FX minifier, whose predicate runs here; the graph goes
back to the parent as data (:mod:`.graph`), never as code: the parent checks every node and writes
``repro.py`` itself.
"""
