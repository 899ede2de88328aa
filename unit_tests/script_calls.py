"""What a run script passes to `config.run_script`, read in-process without parsing flags or training:
the documentation tests use it to know each script's flags and defaults."""

import functools
import runpy
import warnings
from typing import Any, NamedTuple
from unittest import mock

from deep_rl_zoo import config as config_module


class RunScriptCall(NamedTuple):
    config_cls: type
    defaults: dict[str, Any]  # the script's DEFAULTS (overriding the config's field defaults)
    exclude: frozenset[str]  # config fields the script does not offer as flags


@functools.cache
def run_script_call(module: str) -> RunScriptCall:
    """Runs `python -m module` as __main__ with `run_script` replaced by a recorder."""
    calls = []

    def record(config_cls, defaults, main, exclude=frozenset()):
        calls.append(RunScriptCall(config_cls, dict(defaults), frozenset(exclude)))

    with mock.patch.object(config_module, "run_script", record), warnings.catch_warnings():
        # Some scripts are imported by others (agent57 uses ngu's DEFAULTS); running one again is harmless.
        warnings.simplefilter("ignore", RuntimeWarning)
        runpy.run_module(module, run_name="__main__", alter_sys=False)
    assert len(calls) == 1, f"{module} did not call run_script once"
    return calls[0]
