"""Horde from Python: start and steer runs through `horde ui`'s API (:class:`Client`,
:class:`Run`, :class:`Console`), read reports as pandas DataFrames (:class:`Results`), script
emulated networks the way Mininet does (:class:`Topology`, :class:`Emu`), sweep a scenario
over a parameter grid (:func:`sweep`) and set reports side by side, each difference judged
against the runs' own noise (:func:`compare`)."""

from ._http import HordeError
from .comparison import Comparison, compare
from .client import Client, Console, Event, Refused, Reply, Run, find_horde
from .emu import Emu, Node, Topology
from .results import Results
from .sweep import sweep

__all__ = [
    "Client",
    "Comparison",
    "Console",
    "Emu",
    "Event",
    "HordeError",
    "Node",
    "Refused",
    "Reply",
    "Results",
    "Run",
    "Topology",
    "compare",
    "find_horde",
    "sweep",
]
__version__ = "0.1.0"
