"""The fake ``neuron`` device (:mod:`tests.plugins.fake_neuron`) with one device bug: its
``aten::gelu`` kernel raises, in eager mode, unless ``ZOO_TEST_NEURON_FIXED=1``. For the triage of a
device's eager failure: the repro is that one op, run on the device."""

from __future__ import annotations

import os

from tests.plugins import fake_neuron

if os.environ.get("ZOO_TEST_NEURON_FIXED") != "1":
    fake_neuron.BROKEN.add("aten::gelu")
