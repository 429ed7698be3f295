"""Horde from Python: start and steer runs through `horde ui`'s API (:class:`Client`,
:class:`Run`, :class:`Console`), read reports as pandas DataFrames (:class:`Results`), script
emulated networks the way Mininet does (:class:`Topology`, :class:`Emu`) and sweep a scenario
over a parameter grid (:func:`sweep`)."""

from ._http import HordeError
from .client import Client, Console, Event, Refused, Reply, Run, find_horde
from .emu import Emu, Node, Topology
from .results import Results
from .sweep import sweep

__all__ = [
    "Client",
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
    "find_horde",
    "sweep",
]
__version__ = "0.1.0"
