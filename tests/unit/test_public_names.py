"""``import skueue`` exports the public names, and only those, lazily from where they live."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import skueue
import skueue.client
from skueue.client.errors import SkueueError


def test_every_exported_name_resolves_to_its_home_module() -> None:
    assert sorted(skueue.__all__) == sorted(skueue._WHERE)
    for name in skueue.__all__:
        value = getattr(skueue, name)
        assert value.__module__ == skueue._WHERE[name], name
        assert name in dir(skueue)


def test_every_error_the_client_raises_is_exported() -> None:
    """Wherever in the client package an error class is defined."""
    modules = [importlib.import_module(f"skueue.client.{m.name}")
               for m in pkgutil.iter_modules(skueue.client.__path__)]  # fmt: skip
    errors = {name for module in modules
              for name, value in inspect.getmembers(module, inspect.isclass)
              if issubclass(value, SkueueError) and value.__module__ == module.__name__
              and not name.startswith("_")}  # fmt: skip
    assert {"SkueueError", "RequestTimeout", "BadAddress"} <= errors
    assert errors <= set(skueue.__all__), errors - set(skueue.__all__)


def test_the_in_process_cluster_is_the_public_one() -> None:
    assert skueue.LocalCluster.__module__ == "skueue.cluster.inprocess"
    assert skueue.local_cluster.__module__ == "skueue.cluster.inprocess"


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'LaunchedCluster'"):
        _ = skueue.LaunchedCluster  # the launcher is skueue.cluster.launch's, not public
