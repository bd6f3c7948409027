"""RDMA tests need a verbs device: inside scripts/softroce-vm they have one. Elsewhere they
skip -- except with CI=true, where a missing device fails them: CI must really run them."""
import os

import pytest

from papcoll.errors import TransportError
from papcoll.transport.verbs import find_device


@pytest.fixture(autouse=True)
def verbs_device():
    try:
        return find_device()
    except TransportError as err:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{err}; with CI=true the RDMA tests must run (inside scripts/softroce-vm)")
        pytest.skip(f"{err}; run inside scripts/softroce-vm")
