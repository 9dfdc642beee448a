"""The monitor's screen model: what every panel shows, as frozen data, computed without
Textual (docs/architecture.md, "The monitor: screen model, panels, modes")."""

from specmon.tui.model.figures import Acceptance, Headline, acceptance_of, headline_of
from specmon.tui.model.header import HeaderInfo
from specmon.tui.model.screen import Figures, Plot, ScreenModel, build_model
from specmon.tui.model.state import UiState
from specmon.tui.model.tuning import Segments, Tuning

__all__ = [
    "Acceptance",
    "Figures",
    "HeaderInfo",
    "Headline",
    "Plot",
    "ScreenModel",
    "Segments",
    "Tuning",
    "UiState",
    "acceptance_of",
    "build_model",
    "headline_of",
]
