"""Whole-document actions: the layer the CLI calls, and the Python API.

Each action takes a document path, loads what it needs (document, store, base model,
rows), calls the engines (`dlm.train`, `dlm.cache`, `dlm.serve`, `dlm.infer`) and
returns the value the CLI renders; none imports typer or rich. From a notebook:

    from dlm.actions import train, show
    report = train("doc.dlm", max_steps=20)   # a TrainReport
    print(report.train_loss, report.adapter_dir)

`docs/api.md` lists every action with its arguments, results and errors.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# name -> module: imported on first use, so `from dlm.actions import cache_show` does
# not load torch (only training, prompting and serving need it).
_WHERE = {
    "cache_build": "cache",
    "cache_clear": "cache",
    "cache_state_dir": "cache",
    "cache_export": "cache",
    "cache_import": "cache",
    "cache_prune": "cache",
    "cache_show": "cache",
    "cache_push": "cache",
    "cache_pull": "cache",
    "DoctorView": "diagnostics",
    "doctor": "diagnostics",
    "ExportReport": "exporting",
    "export": "exporting",
    "prompt": "prompting",
    "init": "scaffold",
    "ServeOptions": "serving",
    "build_app": "serving",
    "SynthListing": "synthesizing",
    "synth_listing": "synthesizing",
    "TrainOptions": "training",
    "TrainReport": "training",
    "TrainSink": "training",
    "train": "training",
    "metrics": "views",
    "show": "views",
}

if TYPE_CHECKING:
    from dlm.actions.cache import (
        cache_build,
        cache_clear,
        cache_export,
        cache_import,
        cache_prune,
        cache_pull,
        cache_push,
        cache_show,
        cache_state_dir,
    )
    from dlm.actions.diagnostics import DoctorView, doctor
    from dlm.actions.exporting import ExportReport, export
    from dlm.actions.prompting import prompt
    from dlm.actions.scaffold import init
    from dlm.actions.serving import ServeOptions, build_app
    from dlm.actions.synthesizing import SynthListing, synth_listing
    from dlm.actions.training import TrainOptions, TrainReport, TrainSink, train
    from dlm.actions.views import metrics, show


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'dlm.actions' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"dlm.actions.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


__all__ = [
    "DoctorView",
    "ExportReport",
    "ServeOptions",
    "SynthListing",
    "TrainOptions",
    "TrainReport",
    "TrainSink",
    "build_app",
    "cache_build",
    "cache_clear",
    "cache_state_dir",
    "cache_export",
    "cache_import",
    "cache_prune",
    "cache_pull",
    "cache_push",
    "cache_show",
    "doctor",
    "export",
    "init",
    "metrics",
    "prompt",
    "show",
    "synth_listing",
    "train",
]
