"""The monitor's screen model: what every panel shows, as frozen data, computed without
Textual (docs/architecture.md, "The monitor: screen model, panels, modes")."""

from specmon.tui.model.figures import Acceptance, Headline, acceptance_of, headline_of
from specmon.tui.model.header import HeaderInfo
from specmon.tui.model.screen import (
    Figures,
    FiguresKey,
    Plot,
    RequestRows,
    ScreenModel,
    build_model,
)
from specmon.tui.model.state import Choices, LoadSettings, ModelCache, ScreenInputs
from specmon.tui.model.tuning import Segments, Tuning

__all__ = [
    "Acceptance",
    "Choices",
    "Figures",
    "FiguresKey",
    "HeaderInfo",
    "Headline",
    "LoadSettings",
    "ModelCache",
    "Plot",
    "RequestRows",
    "ScreenInputs",
    "ScreenModel",
    "Segments",
    "Tuning",
    "acceptance_of",
    "build_model",
    "headline_of",
]
